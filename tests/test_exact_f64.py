"""f64 exp, exp2, log, log2, tanh and pow have one exact definition (vyre.lower.maths
exp64, log64, tanh64, pow64): every backend gets the correctly rounded result (pow: docs/IR.md's bound),
bit for bit, checked against an oracle that is not vyre's code
(vyre/tools/function_oracle.py: Python's decimal at 70 digits, exact rationals for the
exact cases, rounded exactly).

Arguments: the special values (+-0, +-inf, NaN, subnormals, the overflow and underflow
thresholds, the subnormal results' ties), cases derived to lie within 2^-100 of a
rounding midpoint (e^x and 2^x just off 1 + 2^-53, log of 1 + k 2^-52), random bit
patterns and random arguments over each function's whole range, and the 64 of 2^18 more
whose value lies nearest a midpoint (within 2^-12 ulp: every one takes the slow path); on the reference, on
every other available backend (lavapipe here; CUDA on a GPU host), on wgpu forced into
flush mode (NVIDIA's Vulkan driver's), and on the reference with every argument forced
onto the slow path. CUDA: the generated C compiles with NVRTC
and spells none of the C library's functions. scripts/exact_functions.py --type f64
checks millions of random arguments on a GPU.
"""

from __future__ import annotations

from fractions import Fraction
from functools import cache

import numpy as np
import pytest

import vyre
from vyre import ScalarType
from vyre.backend import BaseBackend
from vyre.builder import ProgramBuilder, call_fn
from vyre.ir import nodes as N
from vyre.tools.function_oracle import FUNCTIONS as ORACLE_VALUES
from vyre.tools.function_oracle import oracle
from vyre.tools.testing import EXACT, tolerance_for

F64 = ScalarType.F64
ONE_ARG = ("exp", "exp2", "log", "log2", "tanh")
FUNCTIONS = (*ONE_ARG, "pow")
_TINY = 5e-324
_SPECIAL = [0.0, -0.0, 1.0, -1.0, 2.0, 0.5, -2.0, 3.0, 10.0, -10.0, np.inf, -np.inf, np.nan,
            _TINY, -_TINY, 2.2250738585072014e-308, 2.225073858507201e-308, 1e-310,
            1.7976931348623157e308, -1.7976931348623157e308, 1e-17, -1e-17, 2.0**-60,
            2.0**-61, 0.6931471805599453, 1 - 2.0**-53, 1 + 2.0**-52]
# exp: overflow above ln(DBL_MAX); subnormal results below ln(2^-1022); 0 below
# ln(2^-1075) (the tie with the smallest subnormal rounds to 0)
_EXP = [709.782712893384, 709.7827128933841, 709.78, -708.3964185322641, -708.39641853226,
        -708.4, -745.1332191019411, -745.1332191019412, -745.13321910194, -744.44007192138,
        -740.0, 700.0, -700.0, 100.5, 1e-10, -1e-10]
_EXP2 = [1024.0, 1023.9999999999999, 1023.0, -1022.0, -1022.5, -1074.0, -1074.5, -1075.0,
         -1075.0000000000002, -1074.9999999999998, -1073.5, -1023.25, 0.015625, -0.0078125,
         52.5, -1.5]

# tanh: x itself below 2^-27, the series' border 1/8, 1 from 22 (and where it rounds there)
_TANH = [2.0**-27, 2.0**-27 * (1 - 2.0**-53), -(2.0**-27), 2.0**-26, 3 * 2.0**-26, 0.125,
         0.12499999999999999, -0.125, 22.0, 21.999999999999996, 18.7, 19.06, 19.1,
         0.5493061443340549, 1e-300, -1e-300]


def _near_midpoints(fn: str) -> list[float]:
    """Arguments whose results lie within about 2^-100 (relative) of a midpoint: e^x and
    2^x for x within a few ulp of the x that gives 1 + 2^-53 (between 1 and 1 + 2^-52)
    and 1 - 2^-54, times powers of two for exp2; log and log2 of 1 + k 2^-52 and
    1 - k 2^-53 (log1p's x - x^2 / 2 lands on the grid's midpoints for some k); tanh
    where 1 - tanh is an odd multiple of 2^-54."""
    out: list[float] = []
    if fn == "tanh":  # 1 - tanh(a) ~ 2 e^-2a = odd * 2^-54, each ulp of a moves it 2^-101
        for odd in (1, 3, 5, 7):
            a = np.log(2.0**55 / odd) / 2
            for _ in range(4):
                out += [a, -a]
                a = np.nextafter(a, np.inf)
        return out
    base = {"exp": 1.0, "exp2": float(1 / np.log(2)), "log": 0.0, "log2": 0.0}[fn]
    if fn in ("exp", "exp2"):
        for x0 in (2.0**-53 * base, -(2.0**-54) * base, 2.0**-52 * base, 3 * 2.0**-53 * base):
            x = x0
            for _ in range(3):
                out += [x, np.nextafter(x, np.inf), np.nextafter(x, -np.inf)]
                x = np.nextafter(x, np.inf)
        if fn == "exp2":
            out += [k + v for k in (-1000.0, -20.0, 7.0, 1000.0) for v in out[:6]]
        return out
    for k in range(1, 40):
        out += [1 + k * 2.0**-52, 1 - k * 2.0**-53, 2.0 ** (k * 20 - 500) * (1 + k * 2.0**-52)]
    return out


def _pow_args(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Every pair of special values, random bit patterns, random bases with exponents
    that keep the result finite, and exact results and midpoints: s^2 ^ 1.5 = s^3 (18-bit
    s), 27-bit q squared, 2^-1075 (a tie with 0), 2^-537 squared, 9^0.5."""
    sp = np.array([*_SPECIAL[:22], 1e-300, 1e300, 0.25, -0.5, 1.5])
    xs = [np.repeat(sp, sp.size), rng.uniform(0, 100, 500),
          rng.integers(0, 1 << 64, 500, dtype=np.uint64).view(np.float64),
          np.exp(rng.uniform(-700, 700, 500))]
    ys = [np.tile(sp, sp.size), rng.uniform(-200, 200, 500),
          rng.integers(0, 1 << 64, 500, dtype=np.uint64).view(np.float64),
          rng.uniform(-3, 3, 500)]
    s = rng.integers(1, 1 << 18, 100).astype(np.float64)
    q = rng.integers(1 << 26, 1 << 27, 100).astype(np.float64)
    xs += [s * s, q, np.array([2.0**-537, 0.5, 2.0, 9.0, 134217727.0, -2.0, -3.0, 2.0**-430])]
    ys += [np.full(100, 1.5), np.full(100, 2.0),
           np.array([2.0, 1075.0, -1075.0, 0.5, 2.0, 1023.0, 646.0, 2.5])]
    return np.concatenate(xs), np.concatenate(ys)


@cache
def _pairs() -> tuple[np.ndarray, np.ndarray]:
    return _pow_args(np.random.default_rng(2064))


def _hard(fn: str, ranged: np.ndarray, count: int = 64) -> np.ndarray:
    """The `count` arguments of `ranged` whose value (NumPy's long double) lies nearest an
    f64 rounding midpoint, in ulps: where the fast path hands over to the slow one."""
    f = {"exp": np.exp, "exp2": np.exp2, "log": np.log, "log2": np.log2, "tanh": np.tanh}[fn]
    with np.errstate(all="ignore"):
        w = f(ranged.astype(np.longdouble))
        r = w.astype(np.float64)
        ulp = np.abs(np.spacing(r)).astype(np.longdouble)
        dist = np.abs(np.abs((w - r.astype(np.longdouble)) / ulp) - 0.5)
    dist[~np.isfinite(dist)] = np.inf
    return ranged[np.argsort(dist)[:count]]


@cache
def _args(fn: str) -> np.ndarray:
    rng = np.random.default_rng([64, FUNCTIONS.index(fn)])
    bits = rng.integers(0, 1 << 64, 1200, dtype=np.uint64).view(np.float64)
    sub = rng.integers(1, 1 << 52, 100, dtype=np.uint64).view(np.float64)
    if fn == "exp":
        ranged = rng.uniform(-750, 712, 1200)
    elif fn == "exp2":
        ranged = rng.uniform(-1080, 1030, 1200)
    elif fn == "tanh":  # both paths (|x| < 1/8: the series), their border, the tails
        ranged = np.concatenate([rng.uniform(-23, 23, 600), rng.uniform(-0.2, 0.2, 300),
                                 np.exp(rng.uniform(-19, -2, 300))])
    else:
        ranged = np.concatenate([np.exp(rng.uniform(-744, 709, 800)),
                                 1 + rng.uniform(-2e-3, 2e-3, 400)])
    extra = {"exp": _EXP, "exp2": _EXP2, "tanh": _TANH}.get(fn, [])
    wide = np.concatenate([ranged, rng.permutation(np.resize(ranged, 1 << 18)) *
                           (1 + rng.uniform(-1e-3, 1e-3, 1 << 18))])
    return np.concatenate([np.array(_SPECIAL + extra + _near_midpoints(fn)), sub, -sub,
                           bits, ranged, _hard(fn, wide)])


def _arguments(fn: str) -> list[np.ndarray]:
    return list(_pairs()) if fn == "pow" else [_args(fn)]


@cache
def _expected(fn: str) -> np.ndarray:
    return oracle(fn, np.float64, *_arguments(fn))


def _program(fn: str, tag: str = "") -> N.Program:
    k = ProgramBuilder(f"exact64_{fn}{tag}", workgroup_size=64)
    ins = [k.buffer(f"a{j}", F64) for j in range(2 if fn == "pow" else 1)]
    out = k.buffer("out", F64, "write")
    i = k.let(k.global_linear_id())
    with k.if_(i < out.length()):
        out[i] = call_fn(fn, *(a[i] for a in ins))
    return k.build()


def _run(backend: BaseBackend, prog: N.Program, args: list[np.ndarray]) -> np.ndarray:
    n = args[0].size
    data = {f"a{j}": a for j, a in enumerate(args)} | {"out": n}
    got = backend.dispatch(prog, data, vyre.DispatchConfig(grid=-(-n // 64)))
    return np.asarray(got["out"])


_POW_TIE = Fraction(1, 2**88)  # docs/IR.md: pow may misround a value this near a midpoint


def _near_a_midpoint(x: float, y: float, got: float) -> bool:
    """Whether pow(x, y)'s exact value lies within 2^-88 (relative) of the midpoint next
    to `got`, and `got` within 0.5 ulp + 2^-35 ulp of it: docs/IR.md's bound for pow."""
    exact = ORACLE_VALUES["pow"](x, y)
    if not isinstance(exact, Fraction) or not np.isfinite(got) or got == 0:
        return False
    a, g = abs(exact), Fraction(abs(got))
    ulp = Fraction(float(np.spacing(abs(got))))
    mid = g + ulp / 2 if a > g else g - Fraction(float(np.spacing(np.nextafter(abs(got), 0)))) / 2
    bound = (Fraction(1, 2) + Fraction(1, 2**35)) * ulp
    return abs(a - mid) <= a * _POW_TIE and abs(a - g) <= bound


def _assert_bits(xs: np.ndarray, got: np.ndarray, want: np.ndarray, what: str,
                 ys: np.ndarray | None = None) -> None:
    """Bit for bit (any NaN equals any NaN: docs/IR.md leaves a NaN's bits open); pow
    (`ys` given) within its documented bound where its value is that near a midpoint."""
    same = (got.view(np.uint64) == want.view(np.uint64)) | (np.isnan(got) & np.isnan(want))
    if ys is not None:
        for j in np.flatnonzero(~same):
            same[j] = _near_a_midpoint(float(xs[j]), float(ys[j]), float(got[j]))
    bad = np.flatnonzero(~same)
    if bad.size:
        shown = "; ".join(f"{xs[j]!r} ({xs.view(np.uint64)[j]:#018x}) -> {got[j]!r}, "
                          f"correctly rounded {want[j]!r}" for j in bad[:6])
        raise AssertionError(f"{what}: {bad.size} of {got.size} differ: {shown}")


def _needs_f64(backend: BaseBackend) -> None:
    if "f64" not in backend.capabilities().features:
        pytest.skip(f"{backend.id} has no f64")


@pytest.mark.parametrize("fn", FUNCTIONS)
def test_f64_is_correctly_rounded(backend: BaseBackend, fn: str) -> None:
    _needs_f64(backend)
    args = _arguments(fn)
    _assert_bits(args[0], _run(backend, _program(fn), args), _expected(fn),
                 f"f64 {fn} on {backend.id}", args[1] if fn == "pow" else None)


@pytest.mark.parametrize("fn", FUNCTIONS)
def test_f64_slow_path_alone(reference: BaseBackend, fn: str,
                             monkeypatch: pytest.MonkeyPatch) -> None:
    """The fast paths' error bound set to 2^-8: nearly every argument takes the slow
    (double-double) path, which must be correctly rounded by itself."""
    from vyre.lower.maths import exp64, log64, pow64, tanh64

    for module in (exp64, log64, pow64, tanh64):
        monkeypatch.setattr(module, "FAST_ERR", 2.0**-8)
    args = _arguments(fn)
    _assert_bits(args[0], _run(reference, _program(fn, "_slow"), args), _expected(fn),
                 f"f64 {fn}, slow path", args[1] if fn == "pow" else None)


def test_f64_pow_near_midpoints_a_double_double_cannot_resolve(reference: BaseBackend) -> None:
    """pow(x, 1/2) of x = 4^k (1 - j 2^-52) lies about 2^-107 from a midpoint (sqrt(DBL_MAX)
    is one), closer than the slow path's bound; no exact midpoint exists there (y < 1, x
    no power of two), so no tie tolerance applies and the double-double's side of the
    midpoint decides: right on all of these (docs/IR.md: no bound promises it)."""
    j = np.arange(1, 40, 2, dtype=np.float64)
    xs = np.concatenate([np.ldexp(1 - j * 2.0**-52, 2 * np.arange(-200, 200, 20)),
                         [1.7976931348623157e308, 1 - 2.0**-53]])
    ys = np.full(xs.size, 0.5)
    got = _run(reference, _program("pow", "_hard"), [xs, ys])
    _assert_bits(xs, got, oracle("pow", np.float64, xs, ys), "pow near midpoints")


def test_f64_in_flush_mode_is_the_oracle_s(wgpu_in_flush_mode: BaseBackend) -> None:
    """A device whose f32 arithmetic flushes subnormals (NVIDIA's Vulkan driver) runs the
    same bits: the definitions' f32 operations are casts of normal values only (wgpu
    forced into flush mode; f64 itself is not flushed, docs/IR.md)."""
    _needs_f64(wgpu_in_flush_mode)
    for fn in FUNCTIONS:  # (one forced device for all: opening one costs seconds)
        args = [a[:700] for a in _arguments(fn)]
        _assert_bits(args[0], _run(wgpu_in_flush_mode, _program(fn, "_flush"), args),
                     _expected(fn)[:700], f"f64 {fn} on wgpu in flush mode",
                     args[1] if fn == "pow" else None)


def test_f64_calls_are_exact_and_refused_nowhere() -> None:
    """tolerance_for compares them bit for bit, and wgpu no longer refuses them."""
    from vyre.backends.wgpu import render as wgsl

    for fn in FUNCTIONS:
        assert tolerance_for(_program(fn), "wgpu") == EXACT, fn
        assert fn not in wgsl.NO_F64, fn
        source = wgsl.generate(_program(fn)).source
        assert "f64" in source, fn


@pytest.mark.parametrize("fn", FUNCTIONS)
def test_cuda_f64_source_compiles_and_spells_no_library_function(fn: str) -> None:
    from vyre.backends.cuda import compile_source
    from vyre.backends.cuda import render as cuda

    src = cuda.generate(_program(fn)).source
    for spelled in (f" {fn}(", f"({fn}("):
        assert spelled not in src, (fn, spelled)
    try:
        compile_source(src, "sm_90")
    except vyre.BackendUnavailable as e:  # (no NVRTC library on this host)
        pytest.skip(f"NVRTC is not available: {e}")
