"""exp and exp2 (f64): evaluated in double-double (Tang's table method), rounded once.

2^z with z = x log2(e) (exp) or x (exp2): k = round(64 z), e^x = 2^(k >> 6) *
2^((k & 63) / 64) * e^t, t = x - k ln2 / 64 (exp: Cody and Waite's three-part ln2 / 64,
the first part of 35 bits so k times it is exact for |k| < 2^18, and x minus it exact by
Sterbenz's lemma; the rest by an exact product, t a double-double) or t = (x - k / 64) ln2
(exp2: x - k / 64 exact, times ln2 as a double-double); |t| <= ln2 / 128 + 2^-60. The
table 2^(j / 64) holds double-doubles (an IR `Table`), e^t is its Taylor polynomial.

Fast path: degree 7 (truncation < 2^-75), its two leading steps in double-double and the
rest in f64 (rounding < 2^-69 relative), the table product in double-double: relative
error < 2^-66, `FAST_ERR` = 2^-64 with room; rounding64.finish_f64 returns it where that
bound decides the f64 rounding (all but about 2^-11 of arguments) and the result is
normal. Slow path: degree 11 (truncation < 2^-119), seven steps in double-double:
relative error below 2^-100 (a dozen double-double operations of a few 2^-106 each), so
the result (subnormal ones rounded on their own grid, rounding64.round_scaled) is
correctly rounded unless the exact value lies within 2^-100 (relative) of a rounding
midpoint; no f64 argument is known to (the worst cases of Lefèvre and Muller's search for
f64 exp lie near 2^-112: a literature value, not re-derived here), and none of the tested
ones did. exp2 is exact at
integers (t = 0). Arguments are clamped to [-746, 710] (exp) / [-1080, 1030] (exp2),
beyond which results are 0 or inf; |x| < 2^-60 gives 1 exactly (so no subnormal enters
the arithmetic); NaN returns the argument.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from decimal import Decimal, localcontext
from fractions import Fraction

from vyre.ir.types import ScalarType

from . import dd
from .build import Builder, X
from .registry import lowering
from .rounding64 import finish_f64

T = ScalarType
FAST_ERR = 2.0**-64
_ROUND = float(3 * 2**51)  # (v + _ROUND) - _ROUND: v rounded to an integer, |v| < 2^51
_TINY = 2.0**-60  # e^x and 2^x round to 1 below this


def _exact(f: str, v: Fraction = Fraction(0)) -> Fraction:
    with localcontext() as c:
        c.prec = 80
        two = Decimal(2)
        if f == "ln2":
            return Fraction(two.ln())
        return Fraction(two ** (Decimal(v.numerator) / Decimal(v.denominator)))


_LN2 = _exact("ln2")
_LN2_DD = dd.split_const(_LN2)
_COEFFS = [dd.split_const(Fraction(1, math.factorial(n))) for n in range(12)]
_FAST_DEGREE, _FAST_DD_TERMS = 7, 2
_SLOW_DEGREE, _SLOW_DD_TERMS = 11, 7  # terms of degree >= 7: their f64 rounding, times |t|^7 < 2^-52, < 2^-105
def pow2_fraction(j: int) -> Fraction:
    """2^(j / 64) to 80 digits, as an exact rational (table constants)."""
    return _exact("pow2", Fraction(j, 64))


TABLE = [dd.split_const(pow2_fraction(j)) for j in range(64)]
_STEP = _LN2 / 64
_STEP1 = float(Fraction(round(_STEP * 2**40), 2**40))  # 35 significant bits
_STEP2, _STEP3 = dd.split_const(_STEP - Fraction(_STEP1))
_INV_STEP = float(1 / _STEP)


def _evaluate(b: Builder, tab: dd.DD, t: dd.DD, degree: int, dd_terms: int) -> dd.DD:
    """2^(j / 64) e^t as a double-double: the Taylor polynomial of `degree`, its first
    `dd_terms` steps in double-double."""
    coeffs = [(b.f64(h), b.f64(lo)) for h, lo in _COEFFS[: degree + 1]]
    return dd.mul(b, tab, dd.horner(b, coeffs, t, dd_terms))


def _slow(b: Builder, tab: dd.DD, t: dd.DD) -> tuple[X, X, X]:
    """2^(j / 64) e^t as tab_hi + (tab_lo + tab (e^t - 1)), the last sum exact in three
    terms (dd.sum3): for j = 0 (tab = 1, exactly) the value 1 + (e^t - 1) within 2^-104
    of e^t - 1, where a double-double sum would lose e^2^-53 = 1 + 2^-53 + 2^-107's last
    bit; e^t - 1 = t (1 + t / 2 + ...) to degree 11, seven steps in double-double."""
    s = expm1_t(b, t, slow=True)
    return dd.sum3(b, tab[0], dd.add_d(b, dd.mul(b, tab, s), tab[1]))


def expm1_t(b: Builder, t: dd.DD, slow: bool) -> dd.DD:
    """e^t - 1 = t (1 + t / 2 + ...) as a double-double, relative error within the fast
    (degree 7) or slow (degree 11) path's bound, for |t| <= ln2 / 128 + 2^-50."""
    degree, dd_terms = (_SLOW_DEGREE, _SLOW_DD_TERMS) if slow else (_FAST_DEGREE, _FAST_DD_TERMS)
    coeffs = [(b.f64(h), b.f64(lo)) for h, lo in _COEFFS[1: degree + 1]]
    return dd.mul(b, dd.horner(b, coeffs, t, max(dd_terms - 1, 1)), t)


def pow_e(b: Builder, kf: X, t: dd.DD, slow_t: Callable[[], dd.DD] | None = None,
          rel_err: float = FAST_ERR, tie_tol: float | X = 0.0) -> X:
    """2^(kf / 64) e^t rounded once to f64 (kf an integer-valued f64 in [-69000, 66000],
    |t| <= ln2 / 128 + 2^-50): the fast path on `t` (relative error <= rel_err, at least
    FAST_ERR), the slow one on `slow_t()` (default: t itself), a slow value within
    tie_tol (relative) of a midpoint rounded as that midpoint (rounding64.round_scaled)."""
    k = b.let(b.f2i(kf))
    j = b.let(k.bitcast(T.U32) & 63)
    tab = (b.table(j, [h for h, _ in TABLE]), b.table(j, [lo for _, lo in TABLE]))
    hi, lo = _evaluate(b, tab, t, _FAST_DEGREE, _FAST_DD_TERMS)
    return finish_f64(b, hi, lo, rel_err,
                      lambda: _slow(b, tab, t if slow_t is None else slow_t()),
                      b.let(k >> 6), tie_tol)  # (arithmetic shift: floor(k / 64))


def reduce(b: Builder, z: X, z_lo: X | None = None, kf: X | None = None) -> tuple[X, dd.DD]:
    """(kf, t) with z + z_lo = kf ln2 / 64 + t, kf an integer-valued f64 (by default z's
    nearest multiple of ln2 / 64; a given one must be within ln2 / 128 + 2^-50 of it),
    for z in [-746, 710] (|z_lo| <= 2^-40): t a double-double (module docstring)."""
    if kf is None:
        kf = b.let(((z * _INV_STEP) + _ROUND) - _ROUND)
    r0 = b.let(z - kf * _STEP1)  # exact (module docstring)
    p, pe = dd.two_prod(b, kf, b.f64(_STEP2))
    t = dd.add(b, (r0, b.f64(0.0) if z_lo is None else z_lo), (b.let(-p), b.let(-pe)))
    return kf, dd.add_d(b, t, b.let(-(kf * _STEP3)))


def _argument(b: Builder, x: X, lo: float, hi: float) -> X:
    """x clamped to [lo, hi], with NaN and |x| < 2^-60 read as 0 (their results: 1, or
    the argument selected after)."""
    z = x.max(lo).min(hi)
    return b.let(b.select(x.ne(x).lor(x.abs().lt(_TINY)), b.f64(0.0), z))


@lowering("exp", T.F64)
def exp(b: Builder, args: tuple[X, ...]) -> X:
    (x,) = args
    # e^-746 < 2^-1076: rounds to 0; e^710 > 2^1024: overflows
    kf, t = reduce(b, _argument(b, x, -746.0, 710.0))
    return b.select(x.ne(x), x, pow_e(b, kf, t))


@lowering("exp2", T.F64)
def exp2(b: Builder, args: tuple[X, ...]) -> X:
    (x,) = args
    # 2^-1080 rounds to 0, 2^1030 overflows
    z = _argument(b, x, -1080.0, 1030.0)
    kf = b.let(((z * 64.0) + _ROUND) - _ROUND)
    r = b.let(z - kf * 0.015625)  # exact: a multiple of ulp(z), |r| <= 1/128
    t = dd.mul_d(b, (b.f64(_LN2_DD[0]), b.f64(_LN2_DD[1])), r)
    return b.select(x.ne(x), x, pow_e(b, kf, t))
