"""exp, exp2, log, log2, tanh, pow and hypot have one exact definition (vyre.lower.maths):
every backend gets the correctly rounded result, bit for bit, checked against an oracle
that is not vyre's code (vyre/tools/function_oracle.py: Python's decimal, and the C library's
f64 functions where they decide the rounding).

f16: every one of the 65,536 arguments (pow / hypot: every x beside a shuffled y) on
every available backend; f32: special values, subnormals, the overflow and underflow
thresholds, random bit patterns and ranges, and the arguments nearest a rounding
boundary among 2^18 (the slow path's cases); the same in flush mode on wgpu (forced)
against the reference in that mode. CUDA: the generated C compiles with NVRTC and spells
none of the C library's functions. scripts/exact_functions.py checks all 2^32 f32
arguments on a GPU.
"""

from __future__ import annotations

import sys
from contextlib import closing
from functools import cache
from pathlib import Path

import numpy as np
import pytest

import vyre
from vyre import ScalarType, UnsupportedFeature
from vyre.backend import BaseBackend
from vyre.builder import ProgramBuilder, call_fn
from vyre.ir import nodes as N
from vyre.lower import Traits
from vyre.tools.function_oracle import fast_oracle
from vyre.tools.testing import EXACT, flushed_types, reference_for, tolerance_for

sys.path.insert(0, str(Path(__file__).parent))
from lowering_cases import LoweredReference

F32, F16, F64 = ScalarType.F32, ScalarType.F16, ScalarType.F64
ONE_ARG = ("exp", "exp2", "log", "log2", "tanh")
TWO_ARGS = ("pow", "hypot")
FUNCTIONS = ONE_ARG + TWO_ARGS

_SPECIAL = [0.0, -0.0, 1.0, -1.0, 2.0, 0.5, -2.0, -0.5, 3.0, -3.0, 0.25, 1.5, 10.0, -10.0,
            np.inf, -np.inf, np.nan, 1e-45, -1e-45, 1e-40, -1e-40, 2.0**-126, -(2.0**-126),
            3.4028235e38, -3.4028235e38, 128.0, 127.99999, -149.0, -150.0, -149.5, -151.0,
            88.72283, 88.72284, -87.33655, -103.27893, -103.97208, 0.99999994, 1.0000001,
            9.010913, 20.0, 1e-8, -1e-8, 0.6931472, 16777216.0, 16777215.0, 66049.0, 4.0]


def _program(fn: str, ty: ScalarType, workgroup: int = 64) -> N.Program:
    arity = 2 if fn in TWO_ARGS else 1
    k = ProgramBuilder(f"exact_{fn}_{ty}", workgroup_size=workgroup)
    ins = [k.buffer(f"a{j}", ty) for j in range(arity)]
    out = k.buffer("out", ty, "write")
    i = k.let(k.global_linear_id())
    with k.if_(i < out.length()):
        out[i] = call_fn(fn, *(b[i] for b in ins))
    return k.build()


def _run(backend: BaseBackend, fn: str, ty: ScalarType, args: list[np.ndarray]) -> np.ndarray:
    prog = _program(fn, ty)
    n = len(args[0])
    inputs = {f"a{j}": a for j, a in enumerate(args)} | {"out": n}
    groups = -(-n // 64)
    cfg = vyre.DispatchConfig(grid=(min(groups, 65535), -(-groups // 65535), 1))
    return np.asarray(backend.dispatch(prog, inputs, cfg)["out"])


def _assert_bits(got: np.ndarray, want: np.ndarray, args: list[np.ndarray], what: str) -> None:
    """Bit for bit (any NaN equals any NaN: docs/IR.md leaves a NaN's bits open)."""
    u = np.uint16 if got.dtype == np.float16 else np.uint32
    same = (got.view(u) == want.view(u)) | (np.isnan(got) & np.isnan(want))
    bad = np.flatnonzero(~same)
    if bad.size:
        shown = "; ".join(
            f"{tuple(a[j] for a in args)} -> {got[j]!r} (bits {got.view(u)[j]:#x}), "
            f"correctly rounded {want[j]!r} (bits {want.view(u)[j]:#x})" for j in bad[:6])
        raise AssertionError(f"{what}: {bad.size} of {got.size} differ: {shown}")


# ------------------------------------------------------------------ arguments


@cache
def _f16_args(fn: str) -> tuple[np.ndarray, ...]:
    every = np.arange(1 << 16, dtype=np.uint16).view(np.float16)
    if fn in ONE_ARG:
        return (every,)
    rng = np.random.default_rng(16)
    ys = rng.permutation(every)
    if fn == "pow":  # small integer and half-integer exponents: exact and midpoint results
        ys[::4] = rng.choice(np.array([2, 3, -1, -2, 0.5, 1.5, 2.5, -0.5], np.float16),
                             ys[::4].size)
    return every, ys


def _hard_f32(fn: str, n: int, count: int) -> np.ndarray:
    """The `count` arguments among n random ones whose f64 result is nearest an f32
    midpoint (in f32 ulps): where the fast path hands over to the slow one."""
    rng = np.random.default_rng(sum(map(ord, fn)))
    lo, hi = {"exp": (-103.9, 88.7), "exp2": (-149.9, 127.9), "tanh": (-9.0, 9.0),
              "sin": (-400.0, 400.0), "cos": (-400.0, 400.0), "tan": (-400.0, 400.0)}.get(
        fn, (1e-30, 1e30))
    xs = (rng.uniform(lo, hi, n) if fn not in ("log", "log2") else
          rng.integers(1, 0x7F800000, n, dtype=np.uint32).view(np.float32)).astype(np.float32)
    with np.errstate(all="ignore"):
        w = {"exp": np.exp, "exp2": np.exp2, "log": np.log, "log2": np.log2,
             "tanh": np.tanh, "sin": np.sin, "cos": np.cos, "tan": np.tan}[fn](
            xs.astype(np.float64))
    r = w.astype(np.float32).astype(np.float64)
    ulp = np.abs(np.spacing(w.astype(np.float32)).astype(np.float64))
    dist = np.abs(np.abs(w - r) / ulp - 0.5)  # 0: on a midpoint
    return xs[np.argsort(dist)[:count]]


@cache
def _f32_args(fn: str) -> tuple[np.ndarray, ...]:
    with np.errstate(all="ignore"):  # (casts of the special values)
        return _make_f32_args(fn)


def _make_f32_args(fn: str) -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(32)
    special = np.array(_SPECIAL, np.float32)
    bits = rng.integers(0, 1 << 32, 1500, dtype=np.uint64).astype(np.uint32).view(np.float32)
    subnormal = rng.integers(1, 0x800000, 200, dtype=np.uint32).view(np.float32)
    ranged = rng.uniform(-160, 160, 800).astype(np.float32)
    near1 = (1 + rng.uniform(-1e-3, 1e-3, 200)).astype(np.float32)
    if fn in ONE_ARG:
        return (np.concatenate([special, bits, subnormal, -subnormal, ranged, near1,
                                _hard_f32(fn, 1 << 18, 64)]),)
    xs = np.concatenate([np.repeat(special, special.size), bits, subnormal, ranged, near1])
    ys = np.concatenate([np.tile(special, special.size), rng.permutation(bits),
                         rng.permutation(subnormal), rng.uniform(-30, 30, 800), near1 * 3])
    if fn == "pow":
        squares = (rng.integers(1, 4096, 300) ** 2).astype(np.float32)
        xs = np.concatenate([xs, squares, np.float32(2.0) ** rng.integers(-149, 128, 100)])
        ys = np.concatenate([ys, rng.choice(np.array([0.5, 1.5, 2.0, -0.5, 2.5], np.float32),
                                            300), rng.integers(-3, 4, 100)])
    if fn == "hypot":  # Pythagorean triples, scaled, and the subnormal grid's ties
        m, k = rng.integers(2, 2000, 300), rng.integers(1, 1000, 300)
        m = np.maximum(m, k + 1)
        scale = np.float32(2.0) ** rng.integers(-140, 100, 300)
        xs = np.concatenate([xs, ((m * m - k * k) * scale).astype(np.float32)])
        ys = np.concatenate([ys, ((2 * m * k) * scale).astype(np.float32)])
    return xs.astype(np.float32), ys.astype(np.float32)


@cache
def _expected(fn: str, ty: ScalarType) -> np.ndarray:
    args = _f16_args(fn) if ty is F16 else _f32_args(fn)
    return fast_oracle(fn, ty.numpy.type, *args)


# ------------------------------------------------------------------ the checks


@pytest.mark.parametrize("fn", FUNCTIONS)
def test_f16_every_argument_is_correctly_rounded(backend: BaseBackend, fn: str) -> None:
    if "f16" not in backend.capabilities().features:
        pytest.skip(f"{backend.id} has no f16")
    args = list(_f16_args(fn))
    _assert_bits(_run(backend, fn, F16, args), _expected(fn, F16), args, f"{fn} f16 on {backend.id}")


@pytest.mark.parametrize("fn", FUNCTIONS)
def test_f32_sample_is_correctly_rounded(backend: BaseBackend, reference: BaseBackend,
                                         fn: str) -> None:
    """The oracle's bits on a device in IEEE mode; on one whose f32 arithmetic flushes
    (NVIDIA's Vulkan driver) the reference's bits in that flush mode (docs/IR.md: a
    subnormal argument reads as a zero, a tiny result flushes), which
    test_flush_mode_gives_the_reference_s_bits and the IEEE rows tie to the same IR."""
    args = list(_f32_args(fn))
    if F32 in flushed_types(backend):
        want = _run(reference_for(backend, reference), fn, F32, args)
    else:
        want = _expected(fn, F32)
    _assert_bits(_run(backend, fn, F32, args), want, args, f"{fn} f32 on {backend.id}")


@pytest.mark.parametrize("fn", FUNCTIONS)
def test_flush_mode_gives_the_reference_s_bits(reference: BaseBackend, fn: str,
                                               wgpu_in_flush_mode: BaseBackend) -> None:
    """In flush mode (docs/IR.md) the definition is the same IR: wgpu forced into flush
    mode equals the reference evaluated in that mode, and a subnormal argument reads as 0."""
    forced = wgpu_in_flush_mode
    args = [a[:900] for a in _f32_args(fn)]
    got = _run(forced, fn, F32, args)
    want = _run(reference_for(forced, reference), fn, F32, args)
    _assert_bits(got, want, args, f"{fn} f32 in flush mode, wgpu vs reference")
    # a subnormal argument is a zero of its sign there: exp(1e-45) = 1, log(1e-45) = -inf
    flushed = np.array([1e-45, -1e-40], np.float32)
    args2 = [flushed] * (2 if fn in TWO_ARGS else 1)
    zeros = [np.copysign(np.zeros_like(flushed), flushed)] * len(args2)  # (-1e-40 -> -0)
    ref = reference_for(forced, reference)
    _assert_bits(_run(ref, fn, F32, args2), fast_oracle(fn, np.float32, *zeros), args2,
                 f"{fn} of flushed subnormals")


def _fast_range_edges(fn: str) -> np.ndarray:
    """sin, cos: every f32 within 2^12 ulps of sincos32's fast range's ends, within 8 of
    every f32 nearest k pi / 2 and within 2 of every seventh table-bin edge, both signs,
    with uniform ones, specials and the hard cases. exp, exp2: every f32 within 2^12 ulps
    of the ends of exp32's fast range, and of 0. log, log2: every f32 within 2^12 ulps of the smallest normal and the largest finite
    f32, within 64 ulps of every power of two, and within 8 of each of log32's bin ends
    (bits(x) = OFF + (i << 16) + (k << 23): k in -1, 0, 1 and at the exponent range's
    ends); 2^16 consecutive f32 up from 1.0 (those down from it are every test's)."""
    if fn in ("sin", "cos", "tan"):
        from vyre.lower.maths.sincos32 import FAST_RANGE

        rng = np.random.default_rng(128)
        ends = np.array(FAST_RANGE, np.float32).view(np.int32).astype(np.int64)
        k = np.arange(-16300, 16300)
        zeros = (k[::64] * (np.pi / 128)).astype(np.float32).view(np.int32)  # k pi / 2
        bins = ((k + 0.5) * (np.pi / 128)).astype(np.float32).view(np.int32)  # where k flips
        pos = [(ends[:, None] + np.arange(-(1 << 12), 1 << 12)).ravel(),
               (np.abs(zeros).astype(np.int64)[:, None] + np.arange(-8, 8)).ravel(),
               (np.abs(bins).astype(np.int64)[::7, None] + np.arange(-2, 2)).ravel()]
        bits = np.concatenate(pos)
        xs = bits[(bits > 0) & (bits < 0x7F800000)].astype(np.uint32).view(np.float32)
        xs = np.concatenate([xs, -xs, rng.uniform(-400, 400, 20000).astype(np.float32),
                             np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, 1e-40,
                                       2.0**-126], np.float32), _hard_f32(fn, 1 << 18, 64)])
        return np.unique(xs)
    if fn in ("log", "log2"):
        from vyre.lower.maths.log32 import BINS, OFF

        ends = np.arange(BINS + 1, dtype=np.int64) << 16
        scales = np.array([-1, 0, 1, -126, -125, 127, 128], np.int64) << 23
        edges = np.concatenate([[0x00800000, 0x7F7FFFFF], np.arange(1, 255) << 23,
                                (OFF + ends[None, :] + scales[:, None]).ravel()])
        steps = [np.arange(-(1 << 12), 1 << 12)] * 2 + [np.arange(-64, 64)] * 254
        near = [e + st for e, st in zip(edges[:256], steps)]
        near.append((edges[256:, None] + np.arange(-8, 8)[None, :]).ravel())
        near.append(0x3F800000 + np.arange(1 << 16))
        bits = np.concatenate(near)
        bits = bits[(bits >= 0) & (bits < 0x7F800000)]
        return np.unique(bits.astype(np.uint32).view(np.float32))
    from vyre.lower.maths.exp32 import FAST_RANGE

    edges = np.array([*FAST_RANGE[fn], 0.0], np.float32).view(np.int32).astype(np.int64)
    steps = np.arange(-(1 << 12), 1 << 12)
    bits = (edges[:, None] + steps[None, :]).ravel()
    return np.unique(bits[(bits >= 0) & (bits < 1 << 32)].astype(np.uint32).view(np.float32))


# the targets of exp's and log's f32 definitions: exp32's / log32's path in f32 alone with
# the target's fma, with vyre.lower.fma's exact one (an fma that rounds twice), and the f64
# path (wgpu's)
_EXP_TARGETS = {"indexed_tables": Traits(indexed_tables=True, fused_fma=True, wide=True),
                "indexed_tables_no_fma": Traits(indexed_tables=True, wide=True),
                "select_tables": Traits(fused_fma=True, wide=True)}


@pytest.mark.parametrize("target", list(_EXP_TARGETS))
@pytest.mark.parametrize("fn", ["exp", "exp2", "log", "log2", "sin", "cos", "tan"])
def test_each_definition_is_correctly_rounded(fn: str, target: str) -> None:
    """exp's, log's, sin's and cos's f32 definitions have two common paths each, chosen by
    the target's `Traits.indexed_tables` (CUDA: exp32's / log32's / sincos32's, in f32
    alone; wgpu: the f64 one): each, lowered for such a target and run on the reference,
    gives the oracle's bits on the sample, on every argument near the f32 path's range
    ends and hard spots (`_fast_range_edges`; sin, cos: zeros, table bins) and on 2^16
    consecutive arguments from 1.0 down (exp, sin, cos: and their negatives)."""
    ones = (np.float32(1.0).view(np.uint32) - np.arange(1 << 16, dtype=np.uint32)).view(
        np.float32)
    signed = [ones] if fn in ("log", "log2") else [ones, -ones]
    sample = [] if fn in ("sin", "cos", "tan") else [_f32_args(fn)[0]]
    xs = np.concatenate([*sample, _fast_range_edges(fn), *signed])
    n = xs.size
    cfg = vyre.DispatchConfig(grid=-(-n // 64))
    with closing(LoweredReference(_EXP_TARGETS[target])) as low:
        got = np.asarray(low.dispatch(_program(fn, F32), {"a0": xs, "out": n}, cfg)["out"])
    _assert_bits(got, fast_oracle(fn, np.float32, xs), [xs], f"{fn} f32 ({target})")


# the functions with an exact f64 definition too (tests/test_exact_f64.py and
# tests/test_exact_trig64.py check them)
EXACT_F64 = frozenset({"exp", "exp2", "log", "log2", "tanh", "pow", "sin", "cos", "tan",
                       "asin", "acos", "atan2", "hypot"})


def test_the_functions_are_exact_for_f32_and_f16_and_f64_where_defined() -> None:
    for fn in FUNCTIONS:
        assert tolerance_for(_program(fn, F32), "wgpu") == EXACT, fn
        assert tolerance_for(_program(fn, F16), "cuda") == EXACT, fn
        assert tolerance_for(_program(fn, F64), "cuda").exact == (fn in EXACT_F64), fn


@pytest.mark.parametrize("fn", ["exp", "exp2", "log", "log2"])
def test_the_native_function_is_reached_by_name_only(backend: BaseBackend, fn: str) -> None:
    """vyre.approx.<fn> is the backend's own: within the approximate tolerance of the
    correctly rounded result, and tolerance_for says so."""
    k = ProgramBuilder(f"approx_{fn}", workgroup_size=64)
    a = k.buffer("a", F32)
    out = k.buffer("out", F32, "write")
    i = k.let(k.global_linear_id())
    with k.if_(i < out.length()):
        out[i] = getattr(vyre.approx, fn)(a[i])
    prog = k.build()
    tol = tolerance_for(prog, backend.kind)
    assert not tol.exact
    xs = np.linspace(0.1, 20, 256).astype(np.float32)
    got = backend.dispatch(prog, {"a": xs, "out": 256}, vyre.DispatchConfig(grid=4))["out"]
    from vyre.tools.testing import assert_agree

    assert_agree(got, fast_oracle(fn, np.float32, xs), tol, f"approx_{fn} on {backend.id}")


@pytest.mark.parametrize("fn", FUNCTIONS)
def test_cuda_source_compiles_and_spells_no_library_function(fn: str) -> None:
    """Plain and coarsened (a kernel that calls a definition is coarsened like any other:
    4 invocations per thread, each calling the one __device__ definition)."""
    from vyre.backends.cuda import compile_source
    from vyre.backends.cuda import render as cuda

    for ty, coarsen in ((F32, 1), (F16, 1), (F32, 4)):
        src = cuda.generate(_program(fn, ty, 64 * coarsen), coarsen=coarsen).source
        for spelled in (f"{fn}f(", f" {fn}(", f"({fn}("):
            assert spelled not in src, (fn, ty, spelled)
        if coarsen > 1:
            assert f"{coarsen} invocations per thread" in src, fn
            # one definition, called by each of the thread's invocations
            assert src.count(f"float vy_fn_{fn}_1f32(") == 1, fn
            assert src.count(f"vy_fn_{fn}_1f32(") >= 1 + coarsen, fn
        try:
            compile_source(src, "sm_90")
        except vyre.BackendUnavailable as e:  # (no NVRTC library on this host)
            pytest.skip(f"NVRTC is not available: {e}")


def test_wgpu_without_shader_f64_names_the_function_and_vyre_approx() -> None:
    from vyre.backends.wgpu import render as wgsl

    core = frozenset({ScalarType.BOOL, ScalarType.I32, ScalarType.U32, F32})
    with pytest.raises(UnsupportedFeature, match=r"exact exp.*shader-f64.*vyre\.approx\.exp"):
        wgsl.generate(_program("exp", F32), allowed_types=core)
    approx = ProgramBuilder("a", workgroup_size=64)
    a = approx.buffer("a", F32)
    approx.buffer("out", F32, "write")[0] = vyre.approx.exp(a[0])
    assert "exp(" in wgsl.generate(approx.build(), allowed_types=core).source



def test_the_fuzzer_compares_the_exact_functions_bit_for_bit() -> None:
    """fuzz.approximate_buffers (the buffers compared within a ulp bound) holds no result
    of an exact function's f32 / f16 (and, where defined, f64) form, but does hold
    vyre.approx's and the other f64 ones'."""
    from vyre.tools import fuzz

    for fn in FUNCTIONS:
        assert fuzz.approximate_buffers(_program(fn, F32)) == frozenset(), fn
        assert fuzz.approximate_buffers(_program(fn, F16)) == frozenset(), fn
        want = frozenset() if fn in EXACT_F64 else {"out"}
        assert fuzz.approximate_buffers(_program(fn, F64)) == want, fn
    assert fuzz.approximate_buffers(_program("approx_exp", F32)) == {"out"}
    # and it draws their arguments over the whole range: subnormal, huge, the thresholds
    drawn = set(fuzz._APPROX_SPECIAL_ARGS)
    assert {1e-45, 3e38, 88.72283, -150.0, 0.99999994} <= drawn
