"""The radix sort's designs (8-bit digits in one pass each with decoupled look-back, 8-bit
digits by count + scan + scatter, 4-bit digits) on every backend: bit-identical to NumPy's
stable sort and to the reference for every key type, sizes around the block edges,
duplicates, sorted and reversed input, payload stability, narrow key_bits, both ways of
counting a block's ranks, the look-back's fallback path; the design, subgroup and
workgroup-memory paths chosen from capabilities and sizes."""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
import pytest

import vyre
from vyre.backend import BaseBackend, Capabilities
from vyre.backends.reference import ReferenceBackend
from vyre.backends.reference.checked import CheckSetting
from vyre.programs import _common as common
from vyre.programs import radix_onesweep as OS
from vyre.programs import radix_sort as RS
from vyre.subgroups import SIZES

SMALL: dict[str, Any] = {"workgroup_size": 32, "per_thread": 4}  # 128-key blocks: many blocks at small n
DESIGNS = [pytest.param({"digit_bits": 8, "lookback": True}, id="lookback"),
           pytest.param({"digit_bits": 8, "lookback": False}, id="8bit"),
           pytest.param({"digit_bits": 4}, id="4bit")]


def _stable_bits(keys: np.ndarray) -> np.ndarray:
    """The u32 order the sort promises: IEEE total order for floats, value order for ints."""
    if keys.dtype == np.float32:
        b = keys.view(np.uint32)
        return np.where(b >> 31 == 1, ~b, b | np.uint32(0x80000000)).astype(np.uint32)
    if keys.dtype == np.int32:
        return keys.view(np.uint32) ^ np.uint32(0x80000000)
    return keys


def _check(backend: BaseBackend, reference: BaseBackend, keys: np.ndarray,
           **kw: Any) -> None:
    """Keys and an index payload: the same bits as NumPy's stable sort and the reference."""
    idx = np.arange(keys.size, dtype=np.uint32)
    order = np.argsort(_stable_bits(keys), kind="stable")
    got_k, got_i = RS.radix_sort_host(backend, keys, idx, **kw)
    exp_k, exp_i = RS.radix_sort_host(reference, keys, idx, **kw)
    assert got_k.dtype == keys.dtype
    assert got_k.tobytes() == keys[order].tobytes()
    assert got_i is not None and got_i.tobytes() == order.astype(np.uint32).tobytes()
    assert exp_i is not None and got_i.tobytes() == exp_i.tobytes()
    assert got_k.tobytes() == exp_k.tobytes()
    only, _ = RS.radix_sort_host(backend, keys, **kw)  # keys alone: the other scatter
    assert only.tobytes() == keys[order].tobytes()


def _keys(dtype: type, n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if dtype is np.uint32:
        return rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32)
    if dtype is np.int32:
        return rng.integers(-(2**31), 2**31, n, dtype=np.int64).astype(np.int32)
    x = (rng.standard_normal(n) * 1e3).astype(np.float32)
    special = np.array([np.inf, -np.inf, 0.0, -0.0, 1e-45, -1e-45, np.nan, -np.nan,
                        3.4e38, -3.4e38], np.float32)
    x[: min(n, special.size)] = special[: min(n, special.size)]
    return x


@pytest.mark.parametrize("design", DESIGNS)
@pytest.mark.parametrize("dtype", [np.uint32, np.int32, np.float32])
@pytest.mark.parametrize("n", [0, 1, 2, 127, 128, 129, 1000])
def test_every_key_type_and_size(backend: BaseBackend, reference: BaseBackend,
                                 design: dict[str, Any], dtype: type, n: int) -> None:
    _check(backend, reference, _keys(dtype, n, n), **design, **SMALL)


@pytest.mark.parametrize("design", DESIGNS)
@pytest.mark.parametrize("case", ["equal", "few", "sorted", "reversed", "digits"])
def test_duplicates_and_presorted(backend: BaseBackend, reference: BaseBackend,
                                  design: dict[str, Any], case: str) -> None:
    n = 3001
    rng = np.random.default_rng(11)
    keys = {
        "equal": np.full(n, 0xDEADBEEF, np.uint32),
        "few": rng.choice(np.array([0, 7, 0xFFFFFFFF, 0x80000000], np.uint32), n),
        "sorted": np.sort(rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32)),
        "reversed": np.sort(rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32))[::-1],
        # equal in every digit but one, so each pass moves keys across many blocks
        "digits": (rng.integers(0, 256, n).astype(np.uint32) << np.uint32(8 * (n % 4)))
                  | np.uint32(0x5A5A5A5A),
    }[case].copy()
    _check(backend, reference, keys, **design, **SMALL)


def test_default_shape_many_blocks_with_payload(backend: BaseBackend,
                                                reference: BaseBackend) -> None:
    """The library's own (tuned) block shapes over a partial block."""
    keys = _keys(np.uint32, 3 * 4096 + 17, 5) % np.uint32(5000)  # many duplicates
    _check(backend, reference, keys)


@pytest.mark.parametrize("design", DESIGNS)
@pytest.mark.parametrize("key_bits", [1, 4, 7, 8, 9, 12, 20, 31])
def test_low_key_bits(backend: BaseBackend, design: dict[str, Any], key_bits: int) -> None:
    """Only the low key_bits bits order the keys (a narrower last digit), stably."""
    keys = _keys(np.uint32, 2500, key_bits)
    idx = np.arange(keys.size, dtype=np.uint32)
    got_k, got_i = RS.radix_sort_host(backend, keys, idx, key_bits=key_bits, **design,
                                      **SMALL)
    order = np.argsort(keys & np.uint32((1 << key_bits) - 1), kind="stable")
    assert got_k.tobytes() == keys[order].tobytes()
    assert got_i is not None and got_i.tobytes() == order.astype(np.uint32).tobytes()


@pytest.mark.parametrize("size", SIZES)
def test_every_reference_subgroup_size(size: int) -> None:
    """The subgroup path (where the workgroup is a multiple of the size) and the
    workgroup-memory path (where it is not) give the same bits for every subgroup size.
    (The subgroup scans are in the tile sort both 8-bit designs share, radix_rank: the
    look-back design runs every size here, count + scan the sizes of the other tests.)"""
    ref = ReferenceBackend(subgroup_size=size)
    keys = _keys(np.uint32, 2000, size)
    order = np.argsort(keys, kind="stable")
    prefix = "radix_onesweep"
    for wg in (32, 128):
        kb = common.upload(ref, keys, "k")
        plan = RS.plan_radix_sort(ref, kb, keys.size, workgroup_size=wg, per_thread=4)
        names = {s.program.name for s in plan.steps}
        ours = [nm for nm in names if nm.startswith(prefix)]
        assert ours and all(("_sg" in nm) == (wg % size == 0) for nm in ours)
        common.run_plan(ref, plan)
        assert common.read_elems(ref, kb, common.u32, keys.size).tobytes() == \
            keys[order].tobytes()
        ref.free(kb)
    ref.close()


def test_without_subgroups_same_bits(backend: BaseBackend,
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    keys = _keys(np.uint32, 5000, 3)
    idx = np.arange(keys.size, dtype=np.uint32)
    with_sg = RS.radix_sort_host(backend, keys, idx)
    monkeypatch.setattr(common, "USE_SUBGROUPS", False)
    without = RS.radix_sort_host(backend, keys, idx)
    assert with_sg[0].tobytes() == without[0].tobytes()
    assert with_sg[1] is not None and without[1] is not None
    assert with_sg[1].tobytes() == without[1].tobytes()


class _SmallMemoryReference(ReferenceBackend):
    """A reference backend that reports 20000 bytes of workgroup memory: enough for the scan,
    not for the 8-bit scatter."""

    def capabilities(self) -> Capabilities:
        caps = super().capabilities()
        return caps.model_copy(update={"limits": {**caps.limits, "max_workgroup_bytes": 20000}})


class _LookbackTooBigReference(ReferenceBackend):
    """A reference backend whose workgroup memory holds the count + scan scatter's 256 x 16
    block (27,136 bytes) but not the look-back pass's (28,164)."""

    def capabilities(self) -> Capabilities:
        caps = super().capabilities()
        return caps.model_copy(update={"limits": {**caps.limits, "max_workgroup_bytes": 27500}})


def test_workgroup_memory_decides_between_the_8bit_designs() -> None:
    be = _LookbackTooBigReference()
    try:
        d = RS.design_for(be, 3000)
        assert not d.lookback and d.digit_bits == 8 and "28164 bytes" in d.why
        with pytest.raises(RS.LibraryArgumentError, match="look-back blocks need 28164"):
            RS.design_for(be, 3000, lookback=True)
        keys = _keys(np.uint32, 3000, 10)
        got, _ = RS.radix_sort_host(be, keys)
        assert got.tobytes() == np.sort(keys).tobytes()
    finally:
        be.close()


def test_small_workgroup_memory_picks_the_4bit_design() -> None:
    small = _SmallMemoryReference()
    keys = _keys(np.uint32, 3000, 9)
    kb = common.upload(small, keys, "k")
    plan = RS.plan_radix_sort(small, kb, keys.size)
    names = {s.program.name for s in plan.steps}
    assert "radix_scatter_k_128x8" in names
    assert not any("radix8" in nm or "onesweep" in nm for nm in names)
    common.run_plan(small, plan)
    assert common.read_elems(small, kb, common.u32, keys.size).tobytes() == \
        np.sort(keys).tobytes()
    small.free(kb)
    small.close()


def test_bad_shapes_are_refused(reference: BaseBackend) -> None:
    keys = np.arange(10, dtype=np.uint32)
    with pytest.raises(ValueError, match="digit_bits must be 4 or 8"):
        RS.radix_sort_host(reference, keys, digit_bits=6)
    with pytest.raises(ValueError, match="at most 65536 keys"):
        RS.radix8_scatter_program(False, 1024, 128)
    with pytest.raises(ValueError, match="power of two"):
        RS.radix_count_program(96, 4)


def test_library_sort_programs_compile_for_cuda() -> None:
    """NVRTC (no GPU needed) compiles every 8-bit program of the library's shapes and the
    ones scripts/sort_bench.py sweeps, within the 48 KiB of static shared memory."""
    nvrtc = pytest.importorskip("vyre.backends.cuda")
    shapes = [(256, 16), (128, 16), (256, 8), (256, 12), (512, 8), (128, 32)]
    for wg, per in shapes:
        nvrtc.compile_program(RS.radix_count_program(wg, per), "sm_90")
        for kv in (False, True):
            for sg in (False, True):
                prog = RS.radix8_scatter_program(kv, wg, per, sg)
                if prog.workgroup_bytes > 48 * 1024:
                    continue  # too big for CUDA: the sweep never asks for it there
                c = nvrtc.compile_program(prog, "sm_90")
                assert c.cubin.startswith(b"\x7fELF")


def test_eight_bit_plan_has_four_passes(reference: BaseBackend) -> None:
    """Count + scan + scatter, 32-bit keys: 4 count + 4 scatter dispatches (the 4-bit
    design: 8 + 8), no final copy; 12-bit keys: 2 passes, the second over a 4-bit digit."""
    kb = common.upload(reference, np.arange(5000, dtype=np.uint32), "k")
    try:
        for bits, digit_bits, passes in ((32, 8, 4), (32, 4, 8), (12, 8, 2)):
            plan = RS.plan_radix_sort(reference, kb, 5000, key_bits=bits, digit_bits=digit_bits,
                                      lookback=False if digit_bits == 8 else None)
            scatters = [s for s in plan.steps if "scatter" in s.program.name]
            counts = [s for s in plan.steps if s.program.name.startswith("radix_count")]
            assert len(scatters) == len(counts) == passes
            assert [s.config.params["mask"] for s in scatters][-1] == \
                (1 << (bits - (passes - 1) * digit_bits)) - 1
            assert not any(s.program.name.startswith("convert") for s in plan.steps)
            for t in plan.temporaries:
                reference.free(t)
    finally:
        reference.free(kb)


def test_lookback_plan_is_one_dispatch_per_pass(reference: BaseBackend) -> None:
    """The look-back design: zero the state, count every pass's digits in one read, their
    starts, then one dispatch per pass, the status region alternating and the last pass
    clearing none; the last digit narrower where key_bits says; an odd number of passes
    copies the result home."""
    kb = common.upload(reference, np.arange(5000, dtype=np.uint32), "k")
    try:
        for bits, passes in ((32, 4), (20, 3), (12, 2), (8, 1)):
            plan = RS.plan_radix_sort(reference, kb, 5000, key_bits=bits)
            names = [s.program.name for s in plan.steps]
            assert names[1:3] == [f"radix_digit_counts{passes}_256x16", "radix_digit_starts"]
            sweeps = [s.config.params for s in plan.steps if "onesweep" in s.program.name]
            assert [p["pass_index"] for p in sweeps] == list(range(passes))
            assert [p["clear"] for p in sweeps] == [1] * (passes - 1) + [0]
            assert len({p["status_at"] for p in sweeps}) == min(passes, 2)
            assert all(p["clear_at"] != p["status_at"] for p in sweeps)
            assert sweeps[-1]["mask"] == (1 << (bits - 8 * (passes - 1))) - 1
            assert len(plan.steps) == 3 + passes + passes % 2
            for t in plan.temporaries:
                reference.free(t)
    finally:
        reference.free(kb)


@pytest.mark.parametrize("spin_limit", [0, 2])
def test_lookback_fallback_path(backend: BaseBackend, reference: BaseBackend,
                                spin_limit: int) -> None:
    """aggregates=False publishes inclusive prefixes only, so a tile whose predecessor is
    still working counts that predecessor's keys itself (on the reference, whose workgroups
    run in lockstep, every tile past the second does); the same bits as NumPy's stable
    sort and as the full design."""
    n, wg, per = 1000, 256, 1  # 4 tiles
    keys = _keys(np.uint32, n, 21) % np.uint32(3000)  # duplicates: stability shows
    idx = np.arange(n, dtype=np.uint32)
    order = np.argsort(keys, kind="stable")
    kb, vb = common.upload(backend, keys, "k"), common.upload(backend, idx, "v")
    try:
        plan = OS.plan_onesweep(backend, kb, n, vb, 32, wg, per,
                                common.subgroups_for(backend, wg), "registers",
                                spin_limit=spin_limit, aggregates=False)
        assert any(s.program.name.endswith("_noagg") for s in plan.steps)
        common.run_plan(backend, plan)
        assert common.read_elems(backend, kb, common.u32, n).tobytes() == keys[order].tobytes()
        assert common.read_elems(backend, vb, common.u32, n).tobytes() == \
            order.astype(np.uint32).tobytes()
    finally:
        backend.free(kb)
        backend.free(vb)


@pytest.mark.parametrize(("lookback", "local_counts", "per"), [
    (True, "registers", 16), (True, "table", 4), (False, "registers", 4)])
def test_both_ways_of_counting_ranks(backend: BaseBackend, reference: BaseBackend,
                                     lookback: bool, local_counts: str, per: int) -> None:
    """Ranks counted in workgroup memory or in packed fields of locals (4-bit fields for
    runs of up to 15 keys, 8-bit beyond), in the design that does not default to it: the
    same bits (the defaults, look-back with registers and count + scan with the table, run
    in every other test)."""
    keys = _keys(np.uint32, 1500, 4) % np.uint32(700)
    _check(backend, reference, keys, workgroup_size=32, per_thread=per,
           local_counts=local_counts, lookback=lookback)


def test_lookback_under_checked_mode() -> None:
    """The look-back design (and its fallback path) runs clean under the reference's
    checked mode, every finding an error, over a grid folded into y (spare workgroups take
    tickets past the last tile)."""
    be = vyre.get_backend("reference", check=CheckSetting(mode="error", bounds="error"))
    try:
        keys = _keys(np.uint32, 700, 8)
        idx = np.arange(keys.size, dtype=np.uint32)
        order = np.argsort(keys, kind="stable")
        got_k, got_i = RS.radix_sort_host(be, keys, idx, workgroup_size=32, per_thread=4,
                                          max_per_dim=2)
        assert got_k.tobytes() == keys[order].tobytes()
        assert got_i is not None and got_i.tobytes() == order.astype(np.uint32).tobytes()
        report = be.last_check_report  # type: ignore[attr-defined]
        assert report is not None and report.ok, str(report)
        kb = common.upload(be, keys, "k")
        common.run_plan(be, OS.plan_onesweep(be, kb, keys.size, None, 32, 256, 1, False,
                                             aggregates=False, spin_limit=1, max_per_dim=3))
        assert common.read_elems(be, kb, common.u32, keys.size).tobytes() == \
            keys[order].tobytes()
        report = be.last_check_report  # type: ignore[attr-defined]
        assert report is not None and report.ok, str(report)
        be.free(kb)
    finally:
        be.close()


def test_design_choice(reference: BaseBackend) -> None:
    """design_for: the look-back design where n fits its status words (< 2^31 keys) and
    its state u32 indexing, else count + scan + scatter, said in `why`; asking for what
    cannot run is an error naming why and the fix."""
    d = RS.design_for(reference, 5000)
    assert d.lookback and d.digit_bits == 8 and d.local_counts == "registers"
    big = RS.design_for(reference, OS.MAX_KEYS + 1)
    assert not big.lookback and big.local_counts == "table" and "31 bits" in big.why
    tiny = RS.design_for(reference, 1 << 30, workgroup_size=16, per_thread=1)
    assert not tiny.lookback and "u32 indexing" in tiny.why
    assert RS.design_for(reference, OS.MAX_KEYS).lookback
    assert not RS.design_for(reference, 5000, lookback=False).lookback
    assert RS.design_for(reference, 5000, digit_bits=4).digit_bits == 4
    with pytest.raises(RS.LibraryArgumentError, match=r"cannot sort this.*31 bits"):
        RS.design_for(reference, OS.MAX_KEYS + 1, lookback=True)
    with pytest.raises(RS.LibraryArgumentError, match="8-bit digits"):
        RS.design_for(reference, 5000, digit_bits=4, lookback=True)
    with pytest.raises(RS.LibraryArgumentError, match="lookback must be"):
        RS.design_for(reference, 5000, lookback="yes")  # type: ignore[arg-type]
    with pytest.raises(RS.LibraryArgumentError, match="local_counts must be one of"):
        RS.radix_sort_host(reference, np.arange(10, dtype=np.uint32), local_counts="bogus")
    with pytest.raises(RS.LibraryArgumentError, match="at most 255 keys per invocation"):
        RS.design_for(reference, 5000, workgroup_size=16, per_thread=300,
                      local_counts="registers")


def test_lookback_programs_compile_for_cuda() -> None:
    """NVRTC (no GPU needed) compiles the look-back design's programs in the shapes the
    library uses on CUDA, within the 48 KiB of static shared memory."""
    nvrtc = pytest.importorskip("vyre.backends.cuda")
    for kv in (False, True):
        wg, per = RS.TUNED[("cuda", kv)]
        prog = OS.onesweep_program(kv, wg, per, True, "registers")
        assert prog.workgroup_bytes <= 48 * 1024
        assert nvrtc.compile_program(prog, "sm_90").cubin.startswith(b"\x7fELF")
    nvrtc.compile_program(OS.digit_counts_program(4), "sm_90")
    nvrtc.compile_program(OS.digit_starts_program(), "sm_90")


@pytest.mark.gpu
@pytest.mark.parametrize("name", ["cuda", "wgpu"])
@pytest.mark.parametrize("lookback", [True, False])
def test_gpu_sort_past_2_26_keys(name: str, lookback: bool) -> None:
    """2^26 + 4097 keys (past the bench's sizes, a partial last block) on a GPU: u32 keys
    with their positions (stability) and f32 keys with -0 / +0 / NaN, the same bits as
    NumPy's stable sort."""
    a = {x.name: x for x in vyre.available_backends()}.get(name)
    if a is None or not a.available:
        pytest.skip(f"no {name} here: {a.reason if a else 'backend not registered'}")
    with vyre.get_backend(name) as gpu:
        if str(gpu.capabilities().details.get("adapter_type")).lower() == "cpu":
            pytest.skip(f"{gpu.id} is a CPU adapter (lavapipe binds at most 128 MiB)")
        _sort_past_2_26(gpu, lookback)


@functools.cache
def _past_2_26() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(u32 keys, their stable order, f32 keys with -0 / +0 / NaN / inf, their order)."""
    n = (1 << 26) + 4097
    rng = np.random.default_rng(26)
    keys = rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32)
    floats = (rng.standard_normal(n) * 1e3).astype(np.float32)
    floats[:6] = [np.nan, -np.nan, 0.0, -0.0, np.inf, -np.inf]
    return (keys, np.argsort(keys, kind="stable").astype(np.uint32), floats,
            np.argsort(_stable_bits(floats), kind="stable"))


def _sort_past_2_26(gpu: BaseBackend, lookback: bool) -> None:
    keys, order, floats, forder = _past_2_26()
    idx = np.arange(keys.size, dtype=np.uint32)
    got_k, got_i = RS.radix_sort_host(gpu, keys, idx, lookback=lookback)
    assert got_k.tobytes() == keys[order].tobytes()
    assert got_i is not None and got_i.tobytes() == order.tobytes()
    got_f, _ = RS.radix_sort_host(gpu, floats, lookback=lookback)
    assert got_f.tobytes() == floats[forder].tobytes()
