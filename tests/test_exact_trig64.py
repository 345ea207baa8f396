"""f64 sin, cos, tan, asin, acos, atan2 and hypot are one definition each (vyre.lower.maths
sincos64.py, tan64.py, atan64.py, hypot64.py): every backend runs them (wgpu too, which has no f64
transcendental of its own), the same bits everywhere, and they are the correctly
rounded result on every argument tested.

Checked bit for bit against vyre/tools/function_oracle_trig.py (Python's decimal with
exact rational arguments, not vyre's code): specials, subnormals, the arguments around
2^-27 (where the definition answers x or 1 directly) and 1/2 (where the reduction
starts), the f64 closest to a multiple of pi/2 (Muller's worst case), the f64 next to k
pi/2 for k up to 2^1000, random bit patterns and ranges (asin, acos: [-1, 1], their ends and
tiny arguments; atan2: every pair of specials, operands of every magnitude, ratios
next to the table's i/16); the reference on a larger
sample than the other backends (lavapipe interprets f64 in software). hypot: against
an exact integer-root oracle, on exact ties (Pythagorean triples with a 54-bit odd
hypotenuse, in every binade), subnormal pairs, random and near-equal operands. CUDA: the
generated C spells no libm function and NVRTC compiles it.
scripts/exact_functions.py --type f64 (with the f64 mode) checks millions on a GPU.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import numpy as np
import pytest

import vyre
from vyre import DispatchConfig, ScalarType
from vyre.backend import BaseBackend
from vyre.builder import ProgramBuilder
from vyre.tools.function_oracle_trig import correctly_rounded64, fast_oracle64, hypot64

T = ScalarType
# 6381956970095103 * 2^797: the f64 closest to a multiple of pi/2 (2^-60.9 away; Muller,
# "Elementary Functions", table of worst cases for the reduction)
WORST_REDUCTION = 6381956970095103 * 2.0**797


def _sample(n: int, seed: int) -> np.ndarray:
    f64 = np.float64
    info = np.finfo(f64)
    specials = [0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 0.5, np.pi / 4, np.pi / 2,
                np.pi, 2 * np.pi, info.max, -info.max, info.tiny, -info.tiny,
                info.smallest_subnormal, -info.smallest_subnormal, 1e-310, 2.0**-27,
                2.0**-28, 2.0**1023, 2.0**-1022 * 3, WORST_REDUCTION, -WORST_REDUCTION,
                1e22, 1e300, 2.0**52, 2.0**53, 2.0**64 - 2048, 2.0**64, 1e-8]
    edges = np.array([2.0**-27, 0.5, 2.0**64, 2.0**128, 2.0**256, 2.0**512], f64)
    edges = np.concatenate([edges, np.nextafter(edges, 0), np.nextafter(edges, np.inf)])
    rng = np.random.default_rng(seed)
    # the f64 next to k pi/2 for k up to 2^1000, and their neighbours
    k = np.concatenate([np.arange(1, 100), 2.0 ** rng.uniform(7, 1000, n // 8)])
    near = np.floor(k) * (np.pi / 2)
    near = np.concatenate([near, np.nextafter(near, np.inf), np.nextafter(near, 0)])
    bits = rng.integers(0, 2**64, n, dtype=np.uint64).view(f64)
    ranges = np.concatenate([rng.uniform(-4, 4, n // 2), rng.uniform(-1e6, 1e6, n // 4),
                             2.0 ** rng.uniform(-40, 0, n // 4)])
    return np.concatenate([np.array(specials, f64), edges, near, -near, bits, ranges])


def _unit_sample(n: int, seed: int) -> np.ndarray:
    """asin's arguments: [-1, 1], its ends 1 - 2^-k, tiny ones, and the rest's sample."""
    rng = np.random.default_rng(seed)
    ends = 1 - 2.0 ** -rng.uniform(1, 53, n // 4)
    return np.concatenate([rng.uniform(-1, 1, n), ends, -ends, 2.0 ** rng.uniform(-1074, 0, n // 4),
                           [1.0, -1.0, np.nextafter(1.0, 0), 1 + 2.0**-52], _sample(n // 4, seed)])


FNS = ("sin", "cos", "tan", "asin", "acos")
REFERENCE_SAMPLE = {fn: _unit_sample(6000, 64) if fn in ("asin", "acos") else _sample(8000, 64)
                    for fn in FNS}
DEVICE_SAMPLE = {fn: _unit_sample(600, 65) if fn in ("asin", "acos") else _sample(800, 65)
                 for fn in FNS}


def _program(fn: str) -> vyre.Program:
    k = ProgramBuilder(f"exact_{fn}_f64", workgroup_size=64)
    xs = [k.buffer(f"x{j}", T.F64) for j in range(2 if fn in ("atan2", "hypot") else 1)]
    y = k.buffer("y", T.F64, "write")
    i = k.global_linear_id()
    with k.if_(i < y.length()):
        y[i] = getattr(vyre, fn)(*(x[i] for x in xs))
    return k.build()


def _run(be: BaseBackend, fn: str, *xs: np.ndarray) -> np.ndarray:
    ins = {f"x{j}": x for j, x in enumerate(xs)}
    out = be.dispatch(_program(fn), {**ins, "y": np.zeros_like(xs[0])},
                      DispatchConfig.for_elements(len(xs[0]), 64))
    return np.asarray(out["y"])


def _assert_same(xs: np.ndarray, got: np.ndarray, want: np.ndarray, what: str) -> None:
    nan = np.isnan(got) & np.isnan(want)
    bad = ~(nan | (got.view(np.uint64) == want.view(np.uint64)))
    assert not bad.any(), (
        f"{what}: {int(bad.sum())} of {len(xs)} differ, e.g. x = "
        f"{[x.hex() for x in xs[bad][:4]]}: got {[g.hex() for g in got[bad][:4]]}, "
        f"want {[w.hex() for w in want[bad][:4]]}")


def _f64(be: BaseBackend) -> BaseBackend:
    if not be.supports("f64"):
        pytest.skip(f"{be.id} has no f64 (capabilities().features)")
    return be


@pytest.mark.parametrize("fn", FNS)
def test_reference_against_the_oracle(reference: BaseBackend, fn: str) -> None:
    xs = REFERENCE_SAMPLE[fn]
    _assert_same(xs, _run(reference, fn, xs), fast_oracle64(fn, xs), f"reference f64 {fn}")


@pytest.mark.parametrize("fn", FNS)
def test_every_backend_against_the_oracle(backend: BaseBackend, fn: str) -> None:
    """Each backend (wgpu: lavapipe here, NVIDIA's Vulkan driver on the GPU machine) gets
    the oracle's bits, so the same bits as the reference."""
    xs = DEVICE_SAMPLE[fn]
    _assert_same(xs, _run(_f64(backend), fn, xs), fast_oracle64(fn, xs),
                 f"{backend.kind} f64 {fn}")


def test_the_fast_oracle_is_the_decimal_one() -> None:
    """fast_oracle64 (long double where it decides) agrees with the decimal evaluation."""
    for fn in FNS:
        xs = DEVICE_SAMPLE[fn][:600]
        want = np.array([correctly_rounded64(fn, float(x)) for x in xs])
        _assert_same(xs, fast_oracle64(fn, xs), want, f"fast_oracle64 {fn}")


def test_special_values(reference: BaseBackend) -> None:
    """C99 F.9.1.6/7: sin(+-0) = +-0, tan(+-0) = +-0, cos(+-0) = 1, NaN for infinities
    and NaN; a subnormal argument is its own sine and tangent."""
    xs = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 5e-324, -5e-324])
    c = _run(reference, "cos", xs)
    for fn in ("sin", "tan"):
        s = _run(reference, fn, xs)
        assert list(np.signbit(s[:2])) == [False, True] and s[0] == 0 and s[1] == 0, fn
        assert np.isnan(s[2:5]).all() and list(s[5:]) == [5e-324, -5e-324], fn
    assert np.isnan(c[2:5]).all() and list(c[[0, 1, 5, 6]]) == [1.0] * 4


def test_cuda_source_spells_no_libm_and_compiles() -> None:
    """CUDA prints the definitions, not the C library's functions, and NVRTC compiles
    them."""
    cuda: Any = pytest.importorskip("vyre.backends.cuda")
    for fn in (*FNS, "atan2", "hypot"):
        src = cuda.generate(_program(fn)).source
        assert f" {fn}(" not in src and f"({fn}(" not in src, fn
    try:
        for fn in (*FNS, "atan2", "hypot"):
            cuda.compile_program(_program(fn), "sm_90")
    except vyre.BackendError as e:  # no NVRTC here
        pytest.skip(f"NVRTC is not usable here: {e}")


def _hypot_pairs(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Every pair of specials, random bit patterns, operands of every magnitude within a
    factor 2^-70 of each other, subnormal pairs, and exact ties: Pythagorean triples
    (a^2 - b^2, 2ab, a^2 + b^2) whose hypotenuse is an odd 54-bit integer (the middle of
    two f64), scaled into every binade, the subnormals included."""
    info = np.finfo(np.float64)
    sp = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -3.0, 4.0, 0.1, info.max,
                   info.tiny, info.smallest_subnormal, 1e-310, 1e300, 1e-300, 2.0**-537])
    rng = np.random.default_rng(seed)
    bits = rng.integers(0, 2**64, (2, n), dtype=np.uint64).view(np.float64)
    near = 2.0 ** rng.uniform(-1074, 1024, n)
    sub = 2.0 ** rng.uniform(-1074, -1000, n // 4)
    ties: list[tuple[float, float]] = []
    while len(ties) < n // 8:
        a = int(rng.integers(2**26, 2**27))
        c = int(rng.integers(2**25, a))
        if 2**53 <= a * a + c * c < 2**54 and (a + c) % 2 and a * a - c * c < 2**53:
            scale = 2.0 ** int(rng.integers(-1126, 970))
            ties.append((float(a * a - c * c) * scale, float(2 * a * c) * scale))
    tie_x, tie_y = np.array(ties).T
    return (np.concatenate([np.repeat(sp, sp.size), bits[0], near, sub, tie_x]),
            np.concatenate([np.tile(sp, sp.size), bits[1],
                            -near * 2.0 ** rng.uniform(-70, 0, n),
                            sub * rng.uniform(0, 1, n // 4), -tie_y]))


def _check_hypot(be: BaseBackend, n: int) -> None:
    xs, ys = _hypot_pairs(n, 32)
    want = np.array([hypot64(float(x), float(y)) for x, y in zip(xs, ys, strict=True)])
    _assert_same(xs, _run(_f64(be), "hypot", xs, ys), want, f"{be.kind} f64 hypot")


def test_hypot_reference_against_the_exact_oracle(reference: BaseBackend) -> None:
    """hypot is correctly rounded, exact ties (to even) and subnormal results included,
    C99's specials: the exact integer-root oracle (function_oracle_trig.hypot64)."""
    _check_hypot(reference, 4000)


def test_hypot_every_backend_against_the_exact_oracle(backend: BaseBackend) -> None:
    _check_hypot(backend, 400)


def _atan2_pairs(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(y, x): every pair of specials (C99 F.9.1.4), random bit patterns, operands of
    every magnitude and sign (ratios down to the subnormal results), ratios next to the
    table's points i/16, y next to x, and subnormal results whose y / x is a tie."""
    info = np.finfo(np.float64)
    sp = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 3.0, -0.25, info.max,
                   -info.max, info.tiny, info.smallest_subnormal, -info.smallest_subnormal])
    rng = np.random.default_rng(seed)
    bits = rng.integers(0, 2**64, (2, n), dtype=np.uint64).view(np.float64)
    mags = 2.0 ** rng.uniform(-1074, 1024, (2, n)) * np.where(rng.random((2, n)) < 0.5, -1, 1)
    x = rng.uniform(-4, 4, n)
    ratio = rng.integers(0, 33, n) / 16 * (1 + rng.uniform(-2**-20, 2**-20, n))
    # y / x exactly halfway between two subnormals (atan2 is then the one below): y = m
    # 2^(s - 1075) for an odd m < 2^53, x = 2^s
    s = rng.integers(1, 1000, n // 8)
    m = rng.integers(0, 2**52, n // 8) * 2 + 1
    tie_y = np.array([float(Fraction(int(a)) * Fraction(2) ** int(e - 1075))
                      for a, e in zip(m, s, strict=True)])
    return (np.concatenate([np.repeat(sp, sp.size), bits[0], mags[0], x * ratio,
                            np.nextafter(x, np.inf), tie_y, -tie_y]),
            np.concatenate([np.tile(sp, sp.size), bits[1], mags[1], x, x, 2.0**s, 2.0**s]))


def _check_atan2(be: BaseBackend, n: int) -> None:
    ys, xs = _atan2_pairs(n, 16)
    _assert_same(ys, _run(be, "atan2", ys, xs), fast_oracle64("atan2", ys, xs),
                 f"{be.kind} f64 atan2")


def test_atan2_reference_against_the_oracle(reference: BaseBackend) -> None:
    _check_atan2(reference, 6000)


def test_atan2_every_backend_against_the_oracle(backend: BaseBackend) -> None:
    _check_atan2(_f64(backend), 500)
