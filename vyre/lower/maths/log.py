"""log and log2 (f32, f16): correctly rounded, evaluated in f64 (a table method); on a
target with cheap tables (`Traits.indexed_tables`) f32's common path is log32's, in f32
alone, with this one as its slow path.

x = 2^e * m' with m' in [0.71875, 1.4375) (a subnormal argument is first scaled by 2^64,
exactly); the top 6 bits of m's mantissa pick c = 1 / inv (inv a 20-bit constant, so
r = m' * inv - 1 is exact and |r| <= 2^-6); log(x) = e ln 2 - log(inv) + log1p(r),
log2(x) = e - log2(inv) + log1p(r) log2(e). The two bins beside 1 have inv = 1, so near
x = 1 the result is log1p(r) with r = x - 1 exactly and never a difference of
near-equal terms; elsewhere the terms cancel by at most a factor of 2. Fast path: the
series to degree 9 (truncation < 2^-57 relative), roundings a few 2^-53: `_FAST_ERR` =
2^-46 with room; the slow path (double-double, series to degree 17, truncation < 2^-100)
decides the rare rest (rounding.finish). Exact: log(1) = +0, log2(2^k) = k. Specials (C99
Annex F): log(+-0) = -inf, log(x < 0) = NaN, log(+inf) = +inf, NaN -> NaN.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal, localcontext
from fractions import Fraction

from vyre.ir.types import ScalarType

from . import dd
from .build import Builder, X
from .log32 import log_f32
from .registry import lowering
from .rounding import finish

T = ScalarType
_FAST_ERR = 2.0**-46
_HALVE_FROM = 27  # bins of m >= 1 + 27/64 (> sqrt 2) use m / 2 and e + 1


def inverses(bins: int, halve_from: int) -> list[float]:
    """inv per bin of m in [1, 2) (`bins` bins; from bin `halve_from` on, m / 2): 1 / the
    bin's centre rounded to 20 significant bits; 1 for the two bins beside 1 (shared with
    log64)."""

    def center(i: int) -> Fraction:
        if i in (0, bins - 1):
            return Fraction(1)
        c = 1 + Fraction(2 * i + 1, 2 * bins)
        return c / 2 if i >= halve_from else c

    def inv(i: int) -> float:
        q = 1 / center(i)
        e = q.numerator.bit_length() - q.denominator.bit_length()
        scale = Fraction(2) ** (19 - e)
        return float(Fraction(round(q * scale)) / scale)

    return [inv(i) for i in range(bins)]


def ln_exact(q: Fraction) -> Fraction:
    """log(q) to 80 digits, as an exact rational (table constants)."""
    with localcontext() as c:
        c.prec = 80
        return Fraction((Decimal(q.numerator) / Decimal(q.denominator)).ln())


with localcontext() as _c:
    _c.prec = 80
    _LN2 = Fraction(Decimal(2).ln())
_INV = inverses(64, _HALVE_FROM)
_LOG_INV = [-ln_exact(Fraction(v)) for v in _INV]  # log(1 / inv) = -log(inv)
_LOG = [dd.split_const(v) for v in _LOG_INV]
_LOG2 = [dd.split_const(v / _LN2) for v in _LOG_INV]
_LN2_DD = dd.split_const(_LN2)
_L2E_DD = dd.split_const(1 / _LN2)
_L2E = float(1 / _LN2)
_FAST = [(-1.0) ** (n + 1) / n for n in range(1, 10)]  # log1p(r) = r (1 - r/2 + r^2/3 ...)
_SLOW = [dd.split_const(Fraction((-1) ** (n + 1), n)) for n in range(1, 18)]


@dataclass(frozen=True)
class Reduced:
    """x = 2^e * m', r = m' * inv[i] - 1 (exact), and p = log1p(r) in f64."""

    ef: X  # e as an f64
    i: X
    r: X
    p: X


def reduce(b: Builder, v: X) -> Reduced:
    """The reduction of a positive finite f64 `v` that is an f32 or f16 value."""
    tiny = b.let(v.lt(2.0**-100))
    u = b.let(b.select(tiny, v * 2.0**64, v).cast(T.F32).bitcast(T.U32))  # exact
    i = b.let((u >> 17) & 63)
    halve = b.let(i.ge(_HALVE_FROM))
    e = ((u >> 23).bitcast(T.I32) - 127) - b.select(tiny, b.i32(64), b.i32(0))
    e = b.let(e + b.select(halve, b.i32(1), b.i32(0)))
    m = (u & 0x7FFFFF) | 0x3F800000
    m = b.let(b.select(halve, m - 0x800000, m).bitcast(T.F32).cast(T.F64))  # m' exactly
    r = b.let(m * b.table(i, _INV) - 1.0)  # exact
    q = b.f64(_FAST[-1])
    for c in reversed(_FAST[:-1]):
        q = b.let(q * r + c)
    return Reduced(b.let(e.cast(T.F64)), i, r, b.let(r * q))


def log_dd(b: Builder, red: Reduced, base2: bool) -> dd.DD:
    """log(x) or log2(x) as a double-double (relative error < 2^-100)."""
    coeffs = [(b.f64(h), b.f64(lo)) for h, lo in _SLOW]
    # terms of degree >= 9 in f64: their rounding, times |r|^8 <= 2^-48, is below 2^-103
    series = dd.mul_d(b, dd.horner_d(b, coeffs, red.r, 8), red.r)
    tab = _LOG2 if base2 else _LOG
    t = (b.table(red.i, [h for h, _ in tab]), b.table(red.i, [lo for _, lo in tab]))
    if base2:
        s = dd.add(b, t, dd.mul(b, series, (b.f64(_L2E_DD[0]), b.f64(_L2E_DD[1]))))
        return dd.add_d(b, s, red.ef)
    s = dd.add(b, t, series)
    return dd.add(b, s, dd.mul_d(b, (b.f64(_LN2_DD[0]), b.f64(_LN2_DD[1])), red.ef))


def log2_fast(b: Builder, red: Reduced) -> dd.DD:
    """log2(x) as an unnormalised pair hi + lo, relative error < 2^-50."""
    hi, err = dd.two_sum(b, red.ef, b.table(red.i, [h for h, _ in _LOG2]))
    lo = err + (b.table(red.i, [lo for _, lo in _LOG2]) + red.p * _L2E)
    return hi, b.let(lo)


def _log(b: Builder, x: X, base2: bool) -> X:
    d = b.let(x.cast(T.F64))
    ordinary = b.let(d.gt(0.0).land(d.lt(float("inf"))))
    red = reduce(b, b.let(b.select(ordinary, d, b.f64(1.0))))
    ef, p = red.ef, red.p
    t_hi = b.table(red.i, [h for h, _ in (_LOG2 if base2 else _LOG)])
    if base2:
        y = ef + (t_hi + p * _L2E)
    else:
        y = ef * _LN2_DD[0] + (t_hi + (ef * _LN2_DD[1] + p))
    out = finish(b, x.ty, y, _FAST_ERR, lambda: log_dd(b, red, base2))
    inf = b.const(x.ty, float("inf"))
    special = b.select(d.eq(0.0), -inf, b.select(d.gt(0.0), inf, b.const(x.ty, float("nan"))))
    special = b.select(d.ne(d), x, special)
    return b.select(ordinary, out, special)


@lowering("log", T.F32, T.F16)
def log(b: Builder, args: tuple[X, ...]) -> X:
    (x,) = args
    if b.f32_path(x):
        return log_f32(b, x, "log", b.slow_path(x, lambda c, y: _log(c, y, base2=False)))
    return _log(b, x, base2=False)


@lowering("log2", T.F32, T.F16)
def log2(b: Builder, args: tuple[X, ...]) -> X:
    (x,) = args
    if b.f32_path(x):
        return log_f32(b, x, "log2", b.slow_path(x, lambda c, y: _log(c, y, base2=True)))
    return _log(b, x, base2=True)
