"""log and log2 (f64): evaluated in double-double (a table method), rounded once.

x = 2^E * m' with m' in [0.7109, 1.4219) exactly, found without integer views of the f64
(i64 is not on every device): four steps multiply x by 2^-+512, 2^-+256, 2^-+128, 2^-+64
where it lies beyond them (exact; a subnormal x too), which leaves it in [2^-114, 2^64);
its f32 rounding gives the exponent (one less where that rounding reached the next power
of two) and the top 7 bits of the significand pick one of 128 bins; bins from 1 + 54/128
(> sqrt 2) on use m / 2 and E + 1. r = m' inv - 1 (inv: 1 / the bin's centre in 20 bits)
is exact as a double-double (an exact product, then Sterbenz), |r| <= 2^-7; log(x) = E
ln2 - log(inv) + log1p(r), log2(x) = E - log2(inv) + log1p(r) log2(e), the tables
double-doubles (IR `Table`s). The two bins beside 1 have inv = 1: near x = 1 the result
is log1p(r) with r = x - 1 exactly, never a difference of near-equal terms; elsewhere the
terms cancel by at most a factor of 2.

Fast path: log1p(r) = r (1 - r / 2 + r^2 / 3 ...) to degree 10 (truncation < 2^-73
relative), its two leading steps in double-double and the rest in f64 (< 2^-68), the sums
in double-double: relative error < 2^-66; `FAST_ERR` = 2^-64 with room
(rounding64.finish_f64). Slow path: degree 16 (truncation < 2^-110), eight steps in
double-double: relative error below 2^-100, so the result is correctly rounded unless
the exact value lies within 2^-100 (relative) of a rounding midpoint (none of the tested
arguments does; the worst cases of log for f64 in Lefèvre and Muller's search lie near
2^-117: a literature value, not re-derived here). Exact: log(1) = +0, log2(2^k) = k. Specials (C99 Annex F): log(+-0) =
-inf, log(x < 0) = NaN, log(+inf) = +inf, NaN -> NaN.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from vyre.ir.types import ScalarType

from . import dd
from .build import Builder, X
from .log import inverses, ln_exact
from .registry import lowering
from .rounding64 import finish_f64

T = ScalarType
FAST_ERR = 2.0**-64
_BINS = 128
_HALVE_FROM = 54  # bins of m >= 1 + 54/128 (> sqrt 2) use m / 2 and E + 1
_FAST_DEGREE, _FAST_DD_TERMS = 10, 2
# terms of degree >= 9 in f64: their rounding, times |r|^8 <= 2^-56, is below 2^-108
_SLOW_DEGREE, _SLOW_DD_TERMS = 16, 8


_LN2 = ln_exact(Fraction(2))
_INV = inverses(_BINS, _HALVE_FROM)
_LOG_INV = [-ln_exact(Fraction(v)) for v in _INV]  # log(1 / inv) = -log(inv)
_LOG = [dd.split_const(v) for v in _LOG_INV]
_LOG2 = [dd.split_const(v / _LN2) for v in _LOG_INV]
_LN2_DD = dd.split_const(_LN2)
_L2E_DD = dd.split_const(1 / _LN2)
# log1p(r) / r = sum (-r)^n / (n + 1)
_SERIES = [dd.split_const(Fraction((-1) ** n, n + 1)) for n in range(_SLOW_DEGREE)]


def _normalise(b: Builder, v: X) -> tuple[X, X, X]:
    """(E as an f64, the bin i as u32, m' as f64) with v = 2^E m' exactly, for a positive
    finite f64 v (module docstring)."""
    y, n = v, b.i32(0)
    for k in (512, 256, 128, 64):
        big = b.let(y.ge(2.0**k))
        small = b.let(y.lt(2.0**-k))
        y = b.let(y * b.select(big, b.f64(2.0**-k), b.select(small, b.f64(2.0**k), b.f64(1.0))))
        n = b.let(n + b.select(big, b.i32(k), b.select(small, b.i32(-k), b.i32(0))))
    bits = b.let(y.cast(T.F32).bitcast(T.U32))  # y in [2^-114, 2^64): a normal f32
    e0 = b.let((bits >> 23).bitcast(T.I32) - 127)
    m = b.let(y * ((127 - e0).bitcast(T.U32) << 23).bitcast(T.F32).cast(T.F64))  # exact
    below = b.let(m.lt(1.0))  # y rounded up to 2^(e0): m in [1 - 2^-25, 1)
    i = b.let(b.select(below, b.u32(_BINS - 1), (bits >> 16) & (_BINS - 1)))
    halve = b.let(i.ge(_HALVE_FROM))
    m = b.select(below, m * 2.0, m)
    m = b.let(b.select(halve, m * 0.5, m))
    shift = b.select(halve, b.i32(1), b.i32(0)) - b.select(below, b.i32(1), b.i32(0))
    return b.let((n + e0 + shift).cast(T.F64)), i, m


def _table(b: Builder, i: X, values: list[tuple[float, float]]) -> dd.DD:
    return b.table(i, [h for h, _ in values]), b.table(i, [lo for _, lo in values])


@dataclass(frozen=True)
class Reduced:
    """x = 2^E m', r = m' inv[i] - 1 exactly (a double-double), E as an f64."""

    ef: X
    i: X
    r: dd.DD


def reduce(b: Builder, v: X) -> Reduced:
    """The reduction of a positive finite f64 `v` (module docstring)."""
    ef, i, m = _normalise(b, v)
    p, pe = dd.two_prod(b, m, b.table(i, _INV))
    return Reduced(ef, i, dd.fast_two_sum(b, b.let(p - 1.0), pe))  # exact


def log_value(b: Builder, red: Reduced, degree: int, dd_terms: int, base2: bool) -> dd.DD:
    """log(x) (or log2) as a double-double: log1p(r) to `degree`, its first `dd_terms`
    steps in double-double (FAST / SLOW: the module docstring's paths)."""
    coeffs = [(b.f64(h), b.f64(lo)) for h, lo in _SERIES[:degree]]
    series = dd.mul(b, dd.horner(b, coeffs, red.r, dd_terms), red.r)  # log1p(r)
    tab = _table(b, red.i, _LOG2 if base2 else _LOG)
    if base2:
        c = (b.f64(_L2E_DD[0]), b.f64(_L2E_DD[1]))
        return dd.add_d(b, dd.add(b, tab, dd.mul(b, series, c)), red.ef)
    c = (b.f64(_LN2_DD[0]), b.f64(_LN2_DD[1]))
    return dd.add(b, dd.add(b, dd.mul_d(b, c, red.ef), tab), series)


FAST = (_FAST_DEGREE, _FAST_DD_TERMS)
SLOW = (_SLOW_DEGREE, _SLOW_DD_TERMS)


def _log(b: Builder, x: X, base2: bool) -> X:
    ordinary = b.let(x.gt(0.0).land(x.lt(float("inf"))))
    red = reduce(b, b.let(b.select(ordinary, x, b.f64(1.0))))
    hi, lo = log_value(b, red, *FAST, base2)
    out = finish_f64(b, hi, lo, FAST_ERR, lambda: log_value(b, red, *SLOW, base2))
    inf = b.f64(float("inf"))
    special = b.select(x.eq(0.0), -inf, b.select(x.gt(0.0), inf, b.f64(float("nan"))))
    special = b.select(x.ne(x), x, special)
    return b.select(ordinary, out, special)


@lowering("log", T.F64)
def log(b: Builder, args: tuple[X, ...]) -> X:
    return _log(b, args[0], base2=False)


@lowering("log2", T.F64)
def log2(b: Builder, args: tuple[X, ...]) -> X:
    return _log(b, args[0], base2=True)
