"""The radix sort's two designs (8-bit digits with in-workgroup ranking, 4-bit digits) on
every backend: bit-identical to NumPy's stable sort and to the reference for every key type,
sizes around the block edges, duplicates, sorted and reversed input, payload stability,
narrow key_bits; the subgroup and workgroup-memory paths chosen from capabilities."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from vyre.backend import BaseBackend, Capabilities
from vyre.backends.reference import ReferenceBackend
from vyre.programs import _common as common
from vyre.programs import radix_sort as RS
from vyre.subgroups import SIZES

SMALL: dict[str, Any] = {"workgroup_size": 32, "per_thread": 4}  # 128-key blocks: many blocks at small n
DESIGNS = [pytest.param(8, id="8bit"), pytest.param(4, id="4bit")]


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


@pytest.mark.parametrize("digit_bits", DESIGNS)
@pytest.mark.parametrize("dtype", [np.uint32, np.int32, np.float32])
@pytest.mark.parametrize("n", [0, 1, 2, 127, 128, 129, 1000])
def test_every_key_type_and_size(backend: BaseBackend, reference: BaseBackend,
                                 digit_bits: int, dtype: type, n: int) -> None:
    _check(backend, reference, _keys(dtype, n, n), digit_bits=digit_bits, **SMALL)


@pytest.mark.parametrize("digit_bits", DESIGNS)
@pytest.mark.parametrize("case", ["equal", "few", "sorted", "reversed", "digits"])
def test_duplicates_and_presorted(backend: BaseBackend, reference: BaseBackend,
                                  digit_bits: int, case: str) -> None:
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
    _check(backend, reference, keys, digit_bits=digit_bits, **SMALL)


def test_default_shape_many_blocks_with_payload(backend: BaseBackend,
                                                reference: BaseBackend) -> None:
    """The library's own (tuned) block shapes over a partial block."""
    keys = _keys(np.uint32, 3 * 4096 + 17, 5) % np.uint32(5000)  # many duplicates
    _check(backend, reference, keys)


@pytest.mark.parametrize("digit_bits", DESIGNS)
@pytest.mark.parametrize("key_bits", [1, 4, 7, 8, 9, 12, 20, 31])
def test_low_key_bits(backend: BaseBackend, digit_bits: int, key_bits: int) -> None:
    """Only the low key_bits bits order the keys (a narrower last digit), stably."""
    keys = _keys(np.uint32, 2500, key_bits)
    idx = np.arange(keys.size, dtype=np.uint32)
    got_k, got_i = RS.radix_sort_host(backend, keys, idx, key_bits=key_bits,
                                      digit_bits=digit_bits, **SMALL)
    order = np.argsort(keys & np.uint32((1 << key_bits) - 1), kind="stable")
    assert got_k.tobytes() == keys[order].tobytes()
    assert got_i is not None and got_i.tobytes() == order.astype(np.uint32).tobytes()


@pytest.mark.parametrize("size", SIZES)
def test_every_reference_subgroup_size(size: int) -> None:
    """The subgroup path (where the workgroup is a multiple of the size) and the
    workgroup-memory path (where it is not) give the same bits for every subgroup size."""
    ref = ReferenceBackend(subgroup_size=size)
    keys = _keys(np.uint32, 2000, size)
    order = np.argsort(keys, kind="stable")
    for wg in (32, 128):
        kb = common.upload(ref, keys, "k")
        plan = RS.plan_radix_sort(ref, kb, keys.size, workgroup_size=wg, per_thread=4)
        names = {s.program.name for s in plan.steps}
        assert any(nm.startswith("radix8_scatter") for nm in names)
        assert any(nm.endswith("_sg") for nm in names if "radix8" in nm) == (wg % size == 0)
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


def test_small_workgroup_memory_picks_the_4bit_design() -> None:
    small = _SmallMemoryReference()
    keys = _keys(np.uint32, 3000, 9)
    kb = common.upload(small, keys, "k")
    plan = RS.plan_radix_sort(small, kb, keys.size)
    names = {s.program.name for s in plan.steps}
    assert "radix_scatter_k_128x8" in names and not any("radix8" in nm for nm in names)
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
    """32-bit keys: 4 count + 4 scatter dispatches (the 4-bit design: 8 + 8), no final copy;
    12-bit keys: 2 passes, the second over a 4-bit digit."""
    kb = common.upload(reference, np.arange(5000, dtype=np.uint32), "k")
    try:
        for bits, digit_bits, passes in ((32, 8, 4), (32, 4, 8), (12, 8, 2)):
            plan = RS.plan_radix_sort(reference, kb, 5000, key_bits=bits, digit_bits=digit_bits)
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
