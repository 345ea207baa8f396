"""sin and cos of f32 in f32 arithmetic alone: the common path of sincos.py's definitions on a
target whose constant tables are cheap (`Traits.indexed_tables`: CUDA), with no f64
operation and no conversion (exp32.py says why that matters on Hopper).

x = k pi / 128 + r for 2^-60 <= |x| <= 400: k = round(128 x / pi) from the bits of
MAGIC + 128 x / pi (|k| < 2^14), a = x - k P1 exact (P1 = RN(pi / 128): for |k| >= 2, x and
k P1 are multiples of 2^-29 and |a| < 2^-6, 23 bits; for |k| = 1 Sterbenz; k = 0, a = x),
then r = rh + rl = a - k P2 - k P3 (pi / 128 = P1 + P2 + P3, k P2 by an fma residual and
rh by TwoSum, so rh + rl is within ~2^-54 absolute), |r| <= pi / 256. With
S = sin(j pi / 128) and C = cos(j pi / 128) (j = k mod 256; cos reads the table a
quarter turn on, as cos(x) = sin(x + pi / 2)) as f32 pairs (hi, lo) from one row of a
table whose row j holds sin's pairs at j and j + 64 (one 16-byte read on CUDA),

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


def _table_pair(i: int) -> tuple[float, float]:
    """sin(i pi / 128) as an f32 pair; a part below 10^-60 is the series' residue of an
    exact value (0 at the zeros, a lo of 0 at +-1), so 0."""
    hi, lo = (0.0, 0.0) if i % _N == 0 else split32(_sin(i * PI / _N))
    return hi, 0.0 if abs(lo) < 1e-60 else lo


PAIRS = [v for i in range(2 * _N) for v in _table_pair(i)]
# a half turn on is the negation, exactly (tan_f32 reads cos's pairs that way)
assert all(PAIRS[2 * (i + _N) + h] == -PAIRS[2 * i + h] for i in range(_N) for h in (0, 1))
# row j: sin's pair at j and at j + 64 (a quarter turn on: cos's at j)
QUADS = [v for j in range(2 * _N) for k in (j, (j + _N // 2) % (2 * _N))
         for v in PAIRS[2 * k: 2 * k + 2]]
_C = f32_nearest(_N / PI)
_P1 = f32_nearest(PI / _N)
_P2 = f32_nearest(PI / _N - Fraction(_P1))
_P3 = f32_nearest(PI / _N - Fraction(_P1) - Fraction(_P2))
_K6, _K24, _K120 = (f32_nearest(Fraction(1, d)) for d in (6, 24, 120))


def _reduce(b: Builder, x: X) -> tuple[X, X, X]:
    """(rh, rl, bits of MAGIC + k): x = k pi / 128 + rh + rl (module docstring)."""
    # outside the fast range the values are garbage, unused (indices are masked)
    t = b.let(b.fma(x, _C, MAGIC))  # MAGIC + k
    kf = b.let(t - MAGIC)  # exact
    a = b.let(b.fma(kf, -_P1, x))  # exact
    qh = b.let(kf * _P2)
    ql = b.fma(kf, _P2, -qh)  # exact: k P2 - qh
    rh = b.let(a - qh)  # TwoSum: rh + e = a - qh exactly
    bb = b.let(rh - a)
    e = (a - (rh - bb)) + (-qh - bb)
    rl = b.let(b.fma(kf, -_P3, e - ql))
    return rh, rl, b.let(t.bitcast(T.U32))


def _quad(b: Builder, j: X) -> tuple[X, X, X, X]:
    """sin(j pi / 128) and sin((j + 64) pi / 128) = cos(j pi / 128) as their table pairs,
    for u32 j (mod 256): one aligned row of QUADS, which CUDA reads as one 16-byte load."""
    i = b.let((j << 2) & (8 * _N - 4))
    return (b.let(b.table(i, QUADS, T.F32)), b.table(i | 1, QUADS, T.F32),
            b.let(b.table(i | 2, QUADS, T.F32)), b.table(i | 3, QUADS, T.F32))


def _value(b: Builder, sc: tuple[X, X, X, X], r: tuple[X, X, X, X, X]) -> tuple[X, X, X]:
    """(s, tail, m): S cos r + C sin r = s + tail within m, for the table pairs
    sc = (S, Sl, C, Cl) and r = (rh, rl, r^2, sin r - r, h) (module docstring)."""
    s_hi, s_lo, c_hi, c_lo = sc
    rh, rl, r2, s_r, h = r
    ph = b.let(c_hi * rh)
    pl = b.fma(c_hi, rh, -ph)  # exact
    s = b.let(s_hi + ph)
    e1 = (s_hi - s) + ph  # exact (Fast2Sum)
    small = b.fma(c_hi, s_r, pl)
    small = b.fma(c_lo, rh, small)
    small = b.fma(b.fma(-s_hi, rh, c_hi), rl, small)
    small = b.fma(s_lo, r2 * h, s_lo + small)
    tail = b.let(b.fma(s_hi * r2, h, small + e1))
    m = b.let(b.fma(s_hi.abs(), _E_TABLE, b.fma(s.abs(), _E_RESULT, _E_ABS)))
    return s, tail, m


def _series(b: Builder, rh: X, rl: X) -> tuple[X, X, X, X, X]:
    """(rh, rl, r^2, sin r - r, h) with cos r - 1 = r^2 h."""
    r2 = b.let(rh * rh)
    s_r = b.let((rh * r2) * b.fma(r2, _K120, -_K6))
    return rh, rl, r2, s_r, b.let(b.fma(r2, _K24, -0.5))


def _decide(b: Builder, x: X, up: X, down: X, slow: Callable[[], X]) -> X:
    """`up` where the fast range holds `x` and `up` equals `down`, else `slow()`."""
    r = b.var(up)
    lo, hi = FAST_RANGE
    ax = b.let(x.abs())
    with b.when(ax.ge(lo).land(ax.le(hi)).land(up.eq(down)).not_()):
        b.assign(r, slow())
    return r


def sincos_f32(b: Builder, x: X, is_cos: bool, slow: Callable[[], X]) -> X:
    """sin(x) (or cos(x)) of f32 `x`, correctly rounded: the f32 path (module docstring)
    and `slow()` (made under an `if`) wherever it cannot decide."""
    rh, rl, tbits = _reduce(b, x)
    js = b.let(tbits + _N // 2) if is_cos else tbits  # cos(x) = sin(x + pi / 2)
    s, tail, m = _value(b, _quad(b, js), _series(b, rh, rl))
    return _decide(b, x, b.let(s + (tail + m)), s + (tail - m), slow)


def _normalised(b: Builder, s: X, tail: X, m: X) -> tuple[X, X, X]:
    """(s, tail, m) with s + tail unchanged and |tail| <= ulp(s) / 2 (Fast2Sum: the tail
    is below 2^-12 of s), so that s is the value rounded."""
    hi = b.let(s + tail)
    return hi, b.let(tail - (hi - s)), m


def tan_f32(b: Builder, x: X, slow: Callable[[], X]) -> X:
    """tan(x) of f32 `x`, correctly rounded: sin(x) = s1 + t1 and cos(x) = s2 + t2 within
    m1, m2 by the f32 path (one reduction, two table reads: cos's pairs are sin's a
    quarter turn on and its negation), each normalised (|t| <= ulp(s) / 2, so that
    dividing by s2 rather than s2 + t2 errs by 2^-24 of an ulp-sized correction), one
    division i = RN(1 / s2), q = RN(s1 i) (within 1.5 ulp of s1 / s2), the residual
    c = (s1 - q s2 + t1) - q t2 (two fmas: |c| <= 3 ulp(q), its roundings below 2^-45
    |q|), and tan(x) = q + (c +- M) i with M = m1 + |q| m2: the quotient's error is
    below M |i| less the products' 2^-24 |c i| (the margins hold twice the errors); the
    result RN(q + (c + M) i) where it equals RN(q + (c - M) i), else `slow()`. Next to a
    pole s2 is tiny and M |i| large: the slow path."""
    rh, rl, tbits = _reduce(b, x)
    a_hi, a_lo, c_hi, c_lo = _quad(b, tbits)
    r = _series(b, rh, rl)
    s1, t1, m1 = _normalised(b, *_value(b, (a_hi, a_lo, c_hi, c_lo), r))
    s2, t2, m2 = _normalised(b, *_value(b, (c_hi, c_lo, b.let(-a_hi), -a_lo), r))
    inv = b.let(b.f32(1.0) / s2)  # the one division
    q = b.let(s1 * inv)  # within 1.5 ulp of s1 / s2
    c = b.let(b.fma(-q, t2, b.fma(-q, s2, s1) + t1))  # (s1 + t1) - q (s2 + t2), nearly
    big = b.let(b.fma(q.abs(), m2, m1))
    return _decide(b, x, b.let(q + (c + big) * inv), q + (c - big) * inv, slow)


__all__ = ["FAST_RANGE", "PAIRS", "QUADS", "sincos_f32", "tan_f32"]
