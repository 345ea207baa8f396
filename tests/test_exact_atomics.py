"""Order-independent f32 atomic add (vyre.lower.exact_sum, vyre.exact_sum_plan): the same
bits on every run, every input order and every backend, equal to the exact sum of the
values and the initial value rounded once (an oracle in Python's `fractions`)."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

import vyre
from vyre import DispatchConfig, InvalidProgram, ProgramBuilder, ScalarType, Step
from vyre.backend import BaseBackend
from vyre.backends.reference import ReferenceBackend
from vyre.lower.exact_sum import FINALIZE, FINALIZE_F64, plan_for

F32, U32, F64 = ScalarType.F32, ScalarType.U32, ScalarType.F64
WG = 64


def _round(x: Fraction, dt: type = np.float32, flush: bool = False) -> np.floating:
    """x rounded once to float type `dt` (np.float32 / np.float64), nearest even (gradual
    underflow; `flush`: a tiny result is a zero of its sign)."""
    info = np.finfo(dt)
    if x == 0:
        return dt(0.0)
    sign = -1 if x < 0 else 1
    a = abs(x)
    e = a.numerator.bit_length() - a.denominator.bit_length()
    while Fraction(2) ** e > a:
        e -= 1
    while Fraction(2) ** (e + 1) <= a:
        e += 1
    # halfway between the largest float and 2^maxexp rounds to inf
    if a >= Fraction(2) ** info.maxexp - Fraction(2) ** (info.maxexp - info.nmant - 2):
        return dt(sign * np.inf)
    q = a / Fraction(2) ** (max(e, info.minexp) - info.nmant)
    whole, rem = divmod(q.numerator, q.denominator)
    if 2 * rem > q.denominator or (2 * rem == q.denominator and whole % 2):
        whole += 1
    out = dt(sign * float(Fraction(whole) * Fraction(2) ** (max(e, info.minexp) - info.nmant)))
    if flush and abs(out) < info.tiny:
        return dt(-0.0 if sign < 0 else 0.0)
    return out


def oracle(init: np.ndarray, keys: np.ndarray, vals: np.ndarray,
           flush: bool = False) -> np.ndarray:
    """docs/IR.md "Atomic": round(init + exact sum); an exact zero sum keeps the bits;
    IEEE specials; in flush mode subnormal operands read as zeros of their sign. Keys past
    the end add nothing; the float type is init's."""
    dt = init.dtype.type
    tiny = np.finfo(dt).tiny

    def sub(v: np.floating) -> bool:
        return bool(v != 0 and abs(v) < tiny)

    out = init.copy()
    for b in np.unique(keys[keys < len(init)]):
        mine = vals[keys == b]
        x = init[b]
        if np.isnan(x):
            continue
        nan = bool(np.isnan(mine).any())
        pinf, ninf = bool((mine == np.inf).any()), bool((mine == -np.inf).any())
        pinf, ninf = pinf or x == np.inf, ninf or x == -np.inf
        if nan or (pinf and ninf):
            out[b] = np.nan
            continue
        if pinf or ninf:
            out[b] = np.inf if pinf else -np.inf
            continue
        s = sum((Fraction(float(v)) for v in mine if not (flush and sub(v))), Fraction(0))
        if s == 0:
            continue
        xi = Fraction(0) if flush and sub(x) else Fraction(float(x))
        out[b] = _round(xi + s, dt, flush)
    return out


def histogram(name: str = "exact_hist", ty: ScalarType = F32) -> vyre.Program:
    k = ProgramBuilder(name, workgroup_size=WG)
    v, key = k.buffer("vals", ty), k.buffer("keys", U32)
    h = k.buffer("hist", ty, "read_write")
    i = k.global_linear_id()
    with k.if_(i < v.length()):
        h.atomic_add(key[i], v[i])
    return k.build()


def run(be: BaseBackend, vals: np.ndarray, keys: np.ndarray, init: np.ndarray,
        program: vyre.Program | None = None) -> np.ndarray:
    cfg = DispatchConfig.for_elements(len(vals), WG)
    if program is None:
        program = histogram("exact_hist_f64", F64) if init.dtype == np.float64 else histogram()
    return be.dispatch(program, {"vals": vals, "keys": keys, "hist": init.copy()},
                       cfg)["hist"]


def same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    """Bit-identical (f32, or f64 when both are), any NaN equal to any NaN (the IR leaves
    a NaN's payload open)."""
    dt = np.float64 if np.asarray(a).dtype == np.asarray(b).dtype == np.float64 else np.float32
    a, b = np.asarray(a, dt), np.asarray(b, dt)
    nan = np.isnan(a)
    bits = np.uint64 if dt is np.float64 else np.uint32
    return bool(np.array_equal(nan, np.isnan(b))
                and np.array_equal(a[~nan].view(bits), b[~nan].view(bits)))


def _wide_values(rng: np.random.Generator, n: int, dt: type = np.float32) -> np.ndarray:
    """Finite values over the whole exponent range, both signs, subnormals among them."""
    width, mbits = (64, 52) if dt is np.float64 else (32, 23)
    mant = rng.integers(0, 1 << mbits, n, dtype=np.uint64)
    exp = rng.integers(0, (1 << (width - mbits - 1)) - 1, n, dtype=np.uint64)
    sign = rng.integers(0, 2, n, dtype=np.uint64)
    bits = (sign << np.uint64(width - 1)) | (exp << np.uint64(mbits)) | mant
    return bits.astype(np.uint64 if width == 64 else np.uint32).view(dt)


def flushes(backend: BaseBackend, dt: type) -> bool:
    """Whether `backend`'s arithmetic flushes `dt`'s subnormals (NVIDIA's Vulkan driver:
    f32), so that it computes docs/IR.md's flush mode."""
    name = "f64" if dt is np.float64 else "f32"
    return name in backend.capabilities().details.get("flushes_subnormals", ())


def need(backend: BaseBackend, dt: type) -> None:
    """Skip, saying why, where `backend` cannot sum `dt` exactly (f64 needs features f64
    and i64: the value's bits are split with u64 operations)."""
    if dt is np.float64:
        missing = {"f64", "i64"} - set(backend.capabilities().features)
        if missing:
            pytest.skip(f"{backend.id} does not report {sorted(missing)}, which f64 atomic "
                        "adds need")


@pytest.mark.parametrize(("seed", "dt"), [(0, np.float32), (1, np.float32), (2, np.float64)])
def test_histogram_equals_exact_oracle_in_every_order(backend: BaseBackend, seed: int,
                                                     dt: type) -> None:
    """Many values of mixed sign and magnitude into 16 bins: the correctly rounded exact sum,
    bit for bit, whatever order the values come in (relaxed float atomics differ by run)."""
    need(backend, dt)
    rng = np.random.default_rng(seed)
    n, bins = 4096, 16
    vals = (rng.standard_normal(n) * np.exp2(rng.integers(-40, 40, n))).astype(dt)
    vals[::7] = _wide_values(rng, len(vals[::7]), dt)
    keys = rng.integers(0, bins, n).astype(np.uint32)
    init = rng.standard_normal(bins).astype(dt)
    want = oracle(init, keys, vals, flush=flushes(backend, dt))
    for _ in range(3):
        perm = rng.permutation(n)
        got = run(backend, vals[perm], keys[perm], init)
        assert same_bits(got, want), (got, want)


def test_cancellation_is_exact(backend: BaseBackend) -> None:
    """1e30 + 1 - 1e30 is 1 exactly (any sequential f32 order gives 0 or 1e30-ish)."""
    vals = np.array([1e30, 1.0, -1e30, 3.0, 2.0**-149, -(2.0**-149)] * 64, np.float32)
    keys = np.zeros(len(vals), np.uint32)
    got = run(backend, vals, keys, np.zeros(1, np.float32))
    assert got[0] == np.float32(64 * 4.0)


@pytest.mark.parametrize("case", [
    # (initial value, values added, expected)
    ("inf", [np.inf, 1.0], [0.0], np.inf),
    ("-inf", [-np.inf, 1.0], [5.0], -np.inf),
    ("inf-inf", [np.inf, -np.inf], [0.0], np.nan),
    ("nan", [np.nan, 1.0], [0.0], np.nan),
    ("init_inf", [1.0, 2.0], [np.inf], np.inf),
    ("init_inf_minus_inf", [-np.inf], [np.inf], np.nan),
    ("overflow", [3.0e38, 3.0e38], [0.0], np.inf),
    ("neg_overflow", [-3.0e38, -3.0e38], [0.0], -np.inf),
    ("overflow_then_back", [3.0e38, 3.0e38, -3.0e38], [0.0], np.float32(3.0e38)),
    ("negzero_plus_negzero", [-0.0, -0.0], [-0.0], np.float32(-0.0)),
    ("zero_plus_negzero", [-0.0], [0.0], np.float32(0.0)),
    ("cancel_to_init_negzero", [1.0, -1.0], [-0.0], np.float32(-0.0)),
    ("x_minus_x", [-5.0], [5.0], np.float32(0.0)),
    ("subnormal_sum", [2.0**-149] * 3, [0.0], np.float32(3 * 2.0**-149)),
    ("subnormal_to_normal", [2.0**-127] * 2, [0.0], np.float32(2.0**-126)),
], ids=lambda c: c[0])
def test_special_values(backend: BaseBackend, case: tuple) -> None:
    """IEEE specials, overflow of the final sum only, the sign of zero (an exact zero sum
    keeps the initial bits; x + -x = +0) and subnormals (exact)."""
    _, vals, init, want = case
    v = np.array(vals * 64, np.float32)  # 64 copies: several workgroups race on one element
    if case[0] in ("overflow_then_back", "subnormal_sum", "subnormal_to_normal", "x_minus_x",
                   "cancel_to_init_negzero"):
        v = np.array(vals, np.float32)  # one copy: the expected value is for one
    got = run(backend, v, np.zeros(len(v), np.uint32), np.array(init, np.float32))
    # a device whose f32 arithmetic flushes (NVIDIA's Vulkan driver) computes flush mode
    # (docs/IR.md): subnormal operands and tiny sums are zeros there
    flush = "f32" in backend.capabilities().details.get("flushes_subnormals", ())
    if not flush:
        assert same_bits(got, np.array([want], np.float32)), (got, want)
    assert same_bits(got, oracle(np.array(init, np.float32), np.zeros(len(v), np.uint32), v,
                                 flush=flush))


def test_untouched_elements_keep_their_bits(backend: BaseBackend) -> None:
    """Elements nothing is added to keep every bit: a NaN payload, -0, a subnormal."""
    init = np.array([0x7FC01234, 0x80000000, 0x00000001, 0x3F800000],
                    np.uint32).view(np.float32)
    vals = np.array([2.0] * WG, np.float32)
    got = run(backend, vals, np.full(WG, 3, np.uint32), init)
    assert np.array_equal(got.view(np.uint32)[:3], init.view(np.uint32)[:3])
    assert got[3] == np.float32(1 + 2.0 * WG)


def test_out_of_range_index_does_nothing(backend: BaseBackend) -> None:
    vals = np.ones(WG, np.float32)
    keys = np.arange(WG, dtype=np.uint32) % 4  # 0..3 but only 2 bins
    got = run(backend, vals, keys, np.zeros(2, np.float32))
    assert got.tolist() == [16.0, 16.0]


@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_flush_mode_reads_subnormals_as_zero(dt: type) -> None:
    """In flush mode (docs/IR.md): subnormal values add nothing, a subnormal initial value
    is read as a zero, and a tiny result becomes a zero of its sign (f64 on a reference
    flushing f64: no device we know does, the rules are the type's own)."""
    ty = F64 if dt is np.float64 else F32
    flushing = ReferenceBackend(f"reference[flush {ty.value}]", flush_subnormals=frozenset({ty}),
                                flush_tininess="after rounding")
    try:
        tiny = float(np.finfo(dt).tiny)  # 2^-126, 2^-1022
        sub = tiny * 2.0**-14
        cases = [
            ([sub, 1.0], [0.0], 1.0),
            ([1.5 * tiny, -tiny], [0.0], 0.0),  # tiny exact sum tiny / 2 -> 0
            ([-1.5 * tiny, tiny], [0.0], -0.0),
            ([1.0], [sub], 1.0),
        ]
        for vals, init, want in cases:
            v = np.array(vals, dt)
            got = run(flushing, v, np.zeros(len(v), np.uint32), np.array(init, dt))
            assert same_bits(got, np.array([want], dt)), (vals, got, want)
            assert same_bits(got, oracle(np.array(init, dt), np.zeros(len(v), np.uint32), v,
                                         flush=True))
    finally:
        flushing.close()


@pytest.mark.wgpu
def test_wgpu_forced_flush_mode_matches_reference(monkeypatch: pytest.MonkeyPatch) -> None:
    """wgpu with vyre's own flush spelling gives the flushing reference's bits."""
    from vyre.backends.wgpu import PROVIDER
    from vyre.tools.testing import reference_for

    if not PROVIDER.probe().available:
        pytest.skip("wgpu backend unavailable")
    monkeypatch.setenv("VYRE_WGPU_FLUSH_SUBNORMALS", "1")
    forced = PROVIDER.create()
    ref = ReferenceBackend("reference[plain]")
    try:
        rng = np.random.default_rng(5)
        vals = _wide_values(rng, 2048)
        vals[~np.isfinite(vals)] = -(2.0**-130)
        vals[::3] = np.float32(2.0**-127) * rng.standard_normal(len(vals[::3])).astype(
            np.float32)
        keys = rng.integers(0, 8, len(vals)).astype(np.uint32)
        init = np.array([2.0**-140, -(2.0**-140), 0, -0.0, 1, -1, 2.0**-126, 3],
                        np.float32)
        got = run(forced, vals, keys, init)
        want = run(reference_for(forced, ref), vals, keys, init)
        assert same_bits(got, want)
        assert same_bits(got, oracle(init, keys, vals, flush=True))
    finally:
        forced.close()
        ref.close()


def test_relaxed_add_and_used_old_value_keep_the_hardware_atomic() -> None:
    """atomic_add_relaxed, and an add whose old value is read, are not rewritten."""
    k = ProgramBuilder("relaxed", workgroup_size=WG)
    v, h = k.buffer("vals", F32), k.buffer("hist", F32, "read_write")
    h.atomic_add_relaxed(0, v[k.global_id()])
    assert plan_for(k.build()) is None
    k = ProgramBuilder("olds", workgroup_size=WG)
    v, h = k.buffer("vals", F32), k.buffer("hist", F32, "read_write")
    o = k.buffer("olds", F32, "write")
    i = k.global_id()
    o[i] = h.atomic_add(0, v[i])
    assert plan_for(k.build()) is None
    assert plan_for(histogram()) is not None


def test_relaxed_add_sums_exact_values(backend: BaseBackend) -> None:
    """The relaxed path still works (values whose sums are exact in any order)."""
    k = ProgramBuilder("relaxed_sum", workgroup_size=WG)
    v, h = k.buffer("vals", F32), k.buffer("hist", F32, "read_write")
    i = k.global_id()
    h.atomic_add_relaxed(i % 3, v[i])
    vals = (np.arange(256) % 5 * 0.25).astype(np.float32)
    got = backend.dispatch(k.build(), {"vals": vals, "hist": np.zeros(3, np.float32)},
                           DispatchConfig(grid=(4, 1, 1)))["hist"]
    want = [vals[np.arange(256) % 3 == b].sum() for b in range(3)]
    assert got.tolist() == want


def test_other_access_to_an_exact_target_is_refused() -> None:
    """A load of a buffer that exact adds target would see a half-done sum: refused, with
    the two ways out named."""
    k = ProgramBuilder("mixed", workgroup_size=WG)
    v, h = k.buffer("vals", F32), k.buffer("hist", F32, "read_write")
    o = k.buffer("o", F32, "write")
    i = k.global_id()
    h.atomic_add(0, v[i])
    o[i] = h[1]
    with pytest.raises(InvalidProgram, match="atomic_add_relaxed") as info:
        k.build()
    assert "separate dispatch" in str(info.value)


def test_resident_repeat_pipeline_async_and_indirect(backend: BaseBackend) -> None:
    """Re-dispatches over resident buffers, a recorded pipeline with repeat, dispatch_async
    and an indirect grid all run the whole plan (the scratch is left zero each time)."""
    rng = np.random.default_rng(3)
    n, bins = 1024, 8
    vals = (rng.standard_normal(n) * 1e6).astype(np.float32)
    keys = rng.integers(0, bins, n).astype(np.uint32)
    init = np.zeros(bins, np.float32)
    p = histogram()
    one = oracle(init, keys, vals)
    vb, kb = backend.allocate_device_buffer(vals.nbytes), backend.allocate_device_buffer(
        keys.nbytes)
    hb = backend.allocate_device_buffer(init.nbytes)
    grid = backend.allocate_device_buffer(12)
    try:
        backend.write_many([(vb, vals), (kb, keys), (hb, init)])
        cfg = DispatchConfig.for_elements(n, WG)
        backend.dispatch_with_device_buffers(p, [vb, kb], [hb], cfg)
        assert same_bits(backend.read(hb, dtype=np.float32), one)
        want = one.copy()
        for _ in range(2):  # a resident re-dispatch adds onto the result
            want = oracle(want, keys, vals)
        backend.dispatch_with_device_buffers(p, [vb, kb], [hb], cfg)
        backend.dispatch_async(p, [vb, kb], [hb], cfg).wait()
        assert same_bits(backend.read(hb, dtype=np.float32), want)
        backend.write(hb, init)
        pipe = backend.pipeline([Step(p, [vb, kb], [hb], cfg)])
        res = pipe.run(repeat=3, read=[hb])
        want = init
        for _ in range(3):
            want = oracle(want, keys, vals)
        assert same_bits(res.reads[0], want)
        if "indirect_dispatch" in backend.capabilities().features:
            backend.write(hb, init)
            backend.write(grid, np.array([n // WG, 1, 1], np.uint32))
            backend.dispatch_with_device_buffers(
                p, [vb, kb], [hb], DispatchConfig(grid=vyre.IndirectGrid(buffer=grid)))
            assert same_bits(backend.read(hb, dtype=np.float32), one)
    finally:
        for b in (vb, kb, hb, grid):
            backend.free(b)
    assert not [b for b in backend.live_buffers() if b in (vb, kb, hb, grid)]


def test_backends_agree_bit_for_bit(backends: dict[str, BaseBackend]) -> None:
    """One histogram of values over the whole f32 range (specials excluded): every
    available backend gives the same bits as the reference."""
    rng = np.random.default_rng(11)
    vals = _wide_values(rng, 8192)
    vals[~np.isfinite(vals)] = np.float32(-7.25)
    keys = rng.integers(0, 32, len(vals)).astype(np.uint32)
    init = rng.standard_normal(32).astype(np.float32)
    for name, be in backends.items():
        want = oracle(init, keys, vals, flush=flushes(be, np.float32))
        assert same_bits(run(be, vals, keys, init), want), name


def test_plan_programs_compile_for_cuda() -> None:
    """The rewritten kernel and the finalisation compile with NVRTC (no GPU needed)."""
    cuda = pytest.importorskip("vyre.backends.cuda")
    try:
        for prog in (plan_for(histogram()).main, FINALIZE,  # type: ignore[union-attr]
                     plan_for(shared_histogram()).main,  # type: ignore[union-attr]
                     plan_for(histogram("exact_hist_f64", F64)).main,  # type: ignore[union-attr]
                     FINALIZE_F64):
            cuda.compile_program(prog, "sm_90")
    except vyre.BackendUnavailable as exc:  # pragma: no cover - no NVRTC here
        pytest.skip(str(exc))


def shared_histogram(ty: ScalarType = F32, add_out: bool = True) -> vyre.Program:
    """Per workgroup: values into 8 workgroup-array bins (exact adds), then a barrier, then
    the bins added to the output (exact adds too; `add_out` False: stored)."""
    k = ProgramBuilder(f"exact_shared_hist_{ty.value}", workgroup_size=WG)
    v, key = k.buffer("vals", ty), k.buffer("keys", U32)
    h = k.buffer("hist", ty, "read_write")
    local = k.shared("local", ty, 8)
    lid = k.local_index()
    with k.if_(lid < 8):
        local[lid] = 0.0
    k.barrier()
    i = k.global_linear_id()
    with k.if_(i < v.length()):
        local.atomic_add(key[i] % 8, v[i])
    k.barrier()
    with k.if_(lid < 8):
        if add_out:
            h.atomic_add(lid + 8 * k.workgroup_id(0), local[lid])
        else:
            h[lid + 8 * k.workgroup_id(0)] = local[lid]
    return k.build()


@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_workgroup_array_adds_are_exact(backend: BaseBackend, dt: type) -> None:
    """f32 / f64 adds into a workgroup array land exactly (rounded once) at the next
    barrier (f64's finalisation there loops over its digits)."""
    need(backend, dt)
    rng = np.random.default_rng(21)
    groups = 16 if dt is np.float32 else 4
    n = WG * groups
    vals = (rng.standard_normal(n) * np.exp2(rng.integers(-40, 40, n))).astype(dt)
    vals[::5] = _wide_values(rng, len(vals[::5]), dt) * dt(2.0**-100)
    keys = rng.integers(0, 1 << 16, n).astype(np.uint32)
    flush = flushes(backend, dt)
    want = np.zeros(8 * groups, dt)
    for g in range(groups):
        part = slice(g * WG, (g + 1) * WG)
        local = oracle(np.zeros(8, dt), keys[part] % 8, vals[part], flush=flush)
        want[8 * g: 8 * g + 8] = local
    for _ in range(2):
        perm = np.concatenate([g * WG + rng.permutation(WG) for g in range(groups)])
        # (f64: the bins are stored, which spares lavapipe compiling a second f64 add)
        got = backend.dispatch(shared_histogram(F64, add_out=False) if dt is np.float64
                               else shared_histogram(),
                               {"vals": vals[perm], "keys": keys[perm],
                                "hist": np.zeros(8 * groups, dt)},
                               DispatchConfig(grid=(groups, 1, 1)))["hist"]
        assert same_bits(got, want)
