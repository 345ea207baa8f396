"""tanh (f64): evaluated in double-double, rounded once.

tanh is odd: a = |x|, the sign put back after. a < 2^-27: tanh(a) = a (1 - a^2 / 3 + ...)
lies within a^2 / 3 < 2^-55.5 (relative) below a, so it rounds to a (subnormals
included); a >= 22: 1 - tanh(a) < 2 e^-44 < 2^-62, it rounds to 1. Between:
- a < 1/8: the odd series tanh(a) = a + a^3 P(a^2) (P's coefficients exact rationals from
  sinh / cosh; a^2 is an exact product), the terms shrinking by at least 2^-7.3: degree
  9 in a^2 for the fast path (relative error of the a^3 part < 2^-60, of the result
  < 2^-67), 14 for the slow one (< 2^-95 of the a^3 part, < 2^-102 of the result), and
  the last sum a + a^3 P exact in three terms (dd.sum3: nothing of a^3 P is lost to a
  double-double's 106 bits);
- a >= 1/8: tanh(a) = E / (E + 2), E = e^(2a) - 1 from exp64's reduction (2a = k ln2 /
  64 + t): E = (2^(j/64) - 1) + 2^(j/64) (e^t - 1) for k < 64 (the table of 2^(j/64) - 1
  as double-doubles, so nothing cancels by more than a factor of 2) and 2^(k >> 6)
  2^(j/64) e^t - 1 above; the quotient from tan.reciprocal's Newton reciprocal (2^-52)
  and one exact-residual correction in double-double (`dd.div`, < 2^-100). Fast path
  (e^t - 1 to degree 7): relative error < 2^-63, `FAST_ERR` = 2^-61; slow path (degree
  11, seven double-double steps): below 2^-98.
So tanh is correctly rounded unless its value lies within about 2^-98 (relative) of a
midpoint (no bound here says which side is taken there: error below 0.5 ulp + 2^-45 ulp);
none of the tested arguments does. tanh(+-0) = +-0, tanh(+-inf) = +-1, NaN -> NaN.
"""

from __future__ import annotations

from fractions import Fraction

from vyre.ir.types import ScalarType

from . import dd, exp64
from .build import Builder, X
from .exp import power_of_two
from .registry import lowering
from .rounding64 import finish_f64

T = ScalarType
FAST_ERR = 2.0**-61
_SMALL = 0.125


def _series() -> list[Fraction]:
    """tanh's odd coefficients t_1, t_3, ... (tanh cosh = sinh, term by term)."""
    n = 17
    fact = [Fraction(1)]
    for i in range(1, 2 * n + 2):
        fact.append(fact[-1] * i)
    sinh = [1 / fact[2 * k + 1] for k in range(n)]
    cosh = [1 / fact[2 * k] for k in range(n)]
    t: list[Fraction] = []
    for k in range(n):
        t.append(sinh[k] - sum(t[i] * cosh[k - i] for i in range(k)))
    return t


_P = [dd.split_const(c) for c in _series()[1:]]  # tanh(a) = a + a^3 P(a^2)
_FAST_SMALL, _SLOW_SMALL = (9, 2), (14, 6)
_TABLE_M1 = [dd.split_const(exp64.pow2_fraction(j) - 1) for j in range(64)]


def _small(b: Builder, a: X, degree: int, dd_terms: int) -> tuple[X, X, X]:
    """tanh(a) for 2^-27 <= a < 1/8 as three terms (dd.sum3)."""
    u = dd.two_prod(b, a, a)
    coeffs = [(b.f64(h), b.f64(lo)) for h, lo in _P[:degree]]
    c = dd.mul(b, dd.horner(b, coeffs, u, dd_terms), dd.mul_d(b, u, a))
    return dd.sum3(b, a, c)


def _large(b: Builder, a: X, slow: bool) -> dd.DD:
    """tanh(a) for 1/8 <= a <= 22 as a double-double."""
    kf, t = exp64.reduce(b, b.let(a * 2.0))
    k = b.let(b.f2i(kf))
    j = b.let(k.bitcast(T.U32) & 63)
    e = b.let(k >> 6)  # 0 ..  63
    tab = (b.table(j, [h for h, _ in exp64.TABLE]), b.table(j, [lo for _, lo in exp64.TABLE]))
    tab_m1 = (b.table(j, [h for h, _ in _TABLE_M1]), b.table(j, [lo for _, lo in _TABLE_M1]))
    s = exp64.expm1_t(b, t, slow)
    ts = dd.mul(b, tab, s)
    low = dd.add(b, tab_m1, ts)
    p = power_of_two(b, e)  # exact (e <= 64)
    whole = dd.add(b, tab, ts)
    high = dd.add_d(b, (b.let(whole[0] * p), b.let(whole[1] * p)), b.f64(-1.0))
    first = e.eq(0)
    big_e = (b.let(b.select(first, low[0], high[0])), b.let(b.select(first, low[1], high[1])))
    return dd.div(b, big_e, dd.add_d(b, big_e, b.f64(2.0)))


@lowering("tanh", T.F64)
def tanh(b: Builder, args: tuple[X, ...]) -> X:
    (x,) = args
    a = b.let(x.abs())
    small = b.let(a.lt(_SMALL))
    # stand-ins keep each path's arithmetic in its range (the other's result is selected)
    va_small = b.let(b.select(small, a.max(2.0**-27), b.f64(0.1)))
    va_large = b.let(b.select(small, b.f64(1.0), a.min(22.0)))

    def pick(s3: tuple[X, X, X], l2: dd.DD) -> tuple[X, X, X]:
        return (b.let(b.select(small, s3[0], l2[0])), b.let(b.select(small, s3[1], l2[1])),
                b.let(b.select(small, s3[2], b.f64(0.0))))

    fast_s, fast_l = _small(b, va_small, *_FAST_SMALL), _large(b, va_large, False)
    hi, lo, m = pick(fast_s, fast_l)
    hi, lo = dd.fast_two_sum(b, hi, b.let(lo + m))
    r = finish_f64(b, hi, lo, FAST_ERR,
                   lambda: pick(_small(b, va_small, *_SLOW_SMALL), _large(b, va_large, True)))
    r = b.select(a.ge(22.0), b.f64(1.0), r)
    out = b.select(x.lt(0.0), -r, r)
    return b.select(a.lt(2.0**-27).lor(x.ne(x)), x, out)
