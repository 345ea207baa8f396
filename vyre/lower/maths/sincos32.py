"""sin and cos of f32 in f32 arithmetic alone: the common path of sincos.py's definitions on a
target whose constant tables are cheap (`Traits.indexed_tables`: CUDA), with no f64
operation and no conversion (exp32.py says why that matters on Hopper).

x = k pi / 128 + r for 2^-60 <= |x| <= 400: k = round(128 x / pi) from the bits of
MAGIC + 128 x / pi (|k| < 2^14), a = x - k P1 exact (P1 = RN(pi / 128): for |k| >= 2, x and
k P1 are multiples of 2^-29 and |a| < 2^-6, 23 bits; for |k| = 1 Sterbenz; k = 0, a = x),
then r = rh + rl = a - k P2 - k P3 (pi / 128 = P1 + P2 + P3, k P2 by an fma residual and
rh by TwoSum, so rh + rl is within ~2^-54 absolute), |r| <= pi / 256. With
S = sin(j pi / 128) and C = cos(j pi / 128) (j = k mod 256; cos reads the table a
quarter turn on, as cos(x) = sin(x + pi / 2)) from one table of f32 pairs (hi, lo),

    sin(x) = S cos r + C sin r = S + C rh + [S cR + C sR + C rl - S rh rl + Sl (1 + cR)
             + Cl rh],  cR = -r^2 / 2 + r^4 / 24,  sR = -r^3 / 6 + r^5 / 120

(neglected terms below 2^-47 of |S| or of the result), s + e1 = S + RN(C rh) exactly
(Fast2Sum: |S| >= sin(pi / 128) > |C rh|, or S = 0) with C rh's fma residual in the tail,
the small terms summed first and S cR last (one rounding of that 2^-13.7 |S| term).
Error of s + tail: within 2^-36.1 |S| where S != 0, 2^-37 of the result where S = 0
(scripts/sinf_error.py, an emulation over every argument of the range: sin's largest
error is 0.506 of the margin, cos's 0.559), so the margin is
m = 2^-35 |S| + 2^-36 |s| + 2^-52 (the last for the reduction's absolute error, which
matters only next to a zero of the function, where the result is tiny); the result is
RN(s + (tail + m)) where that equals RN(s + (tail - m)), else (about 0.1% of arguments
in [-100, 100], 4% of 32-lane groups; and every |x| below about 2^-26, whose ulp the
margin's absolute part exceeds: rare in use, though half the f32 of the range by count)
and outside the range (NaN, infinities, |x| > 400, |x| < 2^-60)
the caller's slow path, the f64 definition: every result correctly rounded either way.
sin and cos of a nonzero f32 are never an f32 midpoint (Niven). Every intermediate is
normal or negligible (a flushed subnormal moves the tail by <= 2^-126 against a margin
of >= 2^-52), so flush modes give the same bits.
"""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal, localcontext
from fractions import Fraction

from vyre.ir.types import ScalarType

from .build import Builder, X
from .exp32 import MAGIC, f32_nearest, split32
from .pio2 import _PI as PI

T = ScalarType
_N = 128  # table steps per half turn
FAST_RANGE = (2.0**-60, 400.0)  # |x|
_E_TABLE, _E_RESULT, _E_ABS = 2.0**-35, 2.0**-36, 2.0**-52


def _sin(v: Fraction) -> Fraction:
    """sin(v) within 10^-65 (Taylor series in 70-digit decimal; |v| <= 2 pi)."""
    with localcontext() as c:
        c.prec = 70
        y = Decimal(v.numerator) / Decimal(v.denominator)
        term, total, n = y, Decimal(0), 1
        while abs(term) > Decimal(10) ** -66:
            total += term
            term = -term * y * y / ((n + 1) * (n + 2))
            n += 2
        return Fraction(total)


def _pair(i: int) -> tuple[float, float]:
    """sin(i pi / 128) as an f32 pair; a part below 10^-60 is the series' residue of an
    exact value (0 at the zeros, a lo of 0 at +-1), so 0."""
    hi, lo = (0.0, 0.0) if i % _N == 0 else split32(_sin(i * PI / _N))
    return hi, 0.0 if abs(lo) < 1e-60 else lo


PAIRS = [v for i in range(2 * _N) for v in _pair(i)]
_C = f32_nearest(_N / PI)
_P1 = f32_nearest(PI / _N)
_P2 = f32_nearest(PI / _N - Fraction(_P1))
_P3 = f32_nearest(PI / _N - Fraction(_P1) - Fraction(_P2))
_K6, _K24, _K120 = (f32_nearest(Fraction(1, d)) for d in (6, 24, 120))


def sincos_f32(b: Builder, x: X, is_cos: bool, slow: Callable[[], X]) -> X:
    """sin(x) (or cos(x)) of f32 `x`, correctly rounded: the f32 path (module docstring)
    and `slow()` (made under an `if`) wherever it cannot decide."""
    # outside the fast range the values below are garbage, unused (indices are masked)
    t = b.let(b.fma(x, _C, MAGIC))  # MAGIC + k
    kf = b.let(t - MAGIC)  # exact
    a = b.let(b.fma(kf, -_P1, x))  # exact
    qh = b.let(kf * _P2)
    ql = b.fma(kf, _P2, -qh)  # exact: k P2 - qh
    rh = b.let(a - qh)  # TwoSum: rh + e = a - qh exactly
    bb = b.let(rh - a)
    e = (a - (rh - bb)) + (-qh - bb)
    rl = b.let(b.fma(kf, -_P3, e - ql))
    tbits = b.let(t.bitcast(T.U32))
    quarter = _N // 2
    js = (tbits + quarter) if is_cos else tbits
    ic = b.let(((js + quarter) << 1) & (4 * _N - 2))
    i_s = b.let((js << 1) & (4 * _N - 2))
    s_hi = b.let(b.table(i_s, PAIRS, T.F32))
    s_lo = b.table(i_s | 1, PAIRS, T.F32)
    c_hi = b.let(b.table(ic, PAIRS, T.F32))
    c_lo = b.table(ic | 1, PAIRS, T.F32)
    r2 = b.let(rh * rh)
    s_r = (rh * r2) * b.fma(r2, _K120, -_K6)  # sin r - r
    ph = b.let(c_hi * rh)
    pl = b.fma(c_hi, rh, -ph)  # exact
    s = b.let(s_hi + ph)
    e1 = (s_hi - s) + ph  # exact (Fast2Sum)
    h = b.let(b.fma(r2, _K24, -0.5))  # cR = r^2 h
    small = b.fma(c_hi, s_r, pl)
    small = b.fma(c_lo, rh, small)
    small = b.fma(b.fma(-s_hi, rh, c_hi), rl, small)
    small = b.fma(s_lo, r2 * h, s_lo + small)
    tail = b.let(b.fma(s_hi * r2, h, small + e1))
    m = b.let(b.fma(s_hi.abs(), _E_TABLE, b.fma(s.abs(), _E_RESULT, _E_ABS)))
    up = b.let(s + (tail + m))
    down = s + (tail - m)
    r = b.var(up)
    lo, hi = FAST_RANGE
    ax = b.let(x.abs())
    with b.when(ax.ge(lo).land(ax.le(hi)).land(up.eq(down)).not_()):
        b.assign(r, slow())
    return r


__all__ = ["FAST_RANGE", "PAIRS", "sincos_f32"]
