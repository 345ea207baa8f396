"""exp and exp2 of f32 in f32 arithmetic alone: the common path of exp.py's definitions on a
target whose constant tables are cheap (`Traits.indexed_tables`: CUDA), with no f64
operation and no conversion (on Hopper f64 issues at half and conversions at an eighth of
the f32 rate: the f64 path's 4 conversions alone cost more than CUDA's whole expf).

x = (k / 64) c + r, c = ln 2 (exp) or 1 (exp2), k = round(64 x / c) from the bits of
MAGIC + 64 x / c (MAGIC = 1.5 * 2^23, whose low mantissa bits then hold k), |r| <= c / 128
(+ 2^-11 of it). exp: r = rh + rl with rh = fma(-k, L1, x) exact (L1 = RN(ln2 / 64): x and
k L1 are multiples of 2^-31 where k != 0 and |x - k L1| < 2^-7, 24 bits) and rl = -k L2
(L2 = RN(ln2 / 64 - L1)); exp2: x - k / 64 is exact and times ln 2 is a pair (an fma's
residual). Then c r = rh + rl, |rh| <= 2^-7.5, |rl| <= 2^-18, and

    e^(rh + rl) = 1 + rh + t,  t = rh^2 (1/2 + rh/6 + rh^2/24) + rl (1 + rh + rh^2 / 2)

(neglected: rh^5 / 120 < 2^-44, rl^2 / 2 <= 2^-37), times the table's 2^(i / 64) = Th + Tl
(i = k mod 64, |Tl| <= 2^-24 Th): y = s + small, s + e1 = Th + Th rh exactly (an fma
residual and Fast2Sum), small = e1 + (Th rh - RN(Th rh)) + Th t + Tl (1 + rh) in f32.
Absolute error of y in [0.99, 2): below 2^-35.2 by the roundings' bounds (measured
2^-37.3 over every argument of exp's fast range, scripts/expf_error.py), so `_MARGIN` =
2^-35. y's rounding is RN(s + (small + m)) where that equals RN(s + (small - m))
(rounding is monotonic, so every value between rounds the same; neither end is a
midpoint that matters: exp is never one but at 0, and exp2's exact results have t = 0);
k's high bits are added to its exponent, exact for the fast range's results (normal:
x in [-86, 88] for exp, [-125, 126] for exp2). About 2^-11 of the arguments of that
range, all others (overflow, underflow, subnormal results, NaN) and those whose two
ends differ take the caller's slow path (the f64 definition, correctly rounded too), so
this path changes no bit, only the cost. The fmas round once on every backend (the
target's own or vyre.lower.fma's); every intermediate is normal or negligible (a flushed
subnormal moves y by <= 2^-126), so flush modes give the same bits.
"""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal, localcontext
from fractions import Fraction

from vyre.ir.types import ScalarType

from .build import Builder, X

T = ScalarType
MAGIC = 12582912.0  # 1.5 * 2^23: v + MAGIC rounds |v| < 2^22 to an integer, held in its low bits
_MARGIN = 2.0**-35
#: where the fast path's result is normal and k / 64 in [-125, 126] (module docstring)
FAST_RANGE = {"exp": (-86.0, 88.0), "exp2": (-125.0, 126.0)}


def round_bits(v: Fraction, bits: int) -> Fraction:
    """`v` rounded to `bits` significant bits (ties to even; no exponent range)."""
    if v == 0:
        return Fraction(0)
    a = abs(v)
    e = a.numerator.bit_length() - a.denominator.bit_length()
    if Fraction(2) ** e > a:
        e -= 1
    scale = Fraction(2) ** (bits - 1 - e)
    return Fraction(round(a * scale)) / scale * (1 if v > 0 else -1)


def f32_nearest(v: Fraction) -> float:
    """The f32 nearest the exact value `v` (ties to even; a normal f32's range)."""
    return float(round_bits(v, 24))


def split32(v: Fraction) -> tuple[float, float]:
    """The f32 pair (hi, lo) nearest `v`: hi = RN(v), lo = RN(v - hi)."""
    hi = f32_nearest(v)
    return hi, f32_nearest(v - Fraction(hi))


def _constants() -> tuple[Fraction, list[Fraction]]:
    with localcontext() as c:
        c.prec = 60
        return (Fraction(Decimal(2).ln()),
                [Fraction(Decimal(2) ** (Decimal(i) / 64)) for i in range(64)])


_LN2, _POW2 = _constants()
_PAIRS = [v for p in _POW2 for v in split32(p)]  # 2^(i / 64) as f32 pairs (hi, lo)
_L1, _L2 = split32(_LN2 / 64)
_C = f32_nearest(64 / _LN2)
_LN2_HI, _LN2_LO = split32(_LN2)
_C3, _C4 = f32_nearest(Fraction(1, 6)), f32_nearest(Fraction(1, 24))


def exp_f32(b: Builder, x: X, fn: str, slow: Callable[[], X]) -> X:
    """exp(x) (fn "exp") or 2^x ("exp2") of f32 `x`, correctly rounded: the f32 path
    (module docstring), and `slow()` (made under an `if`) wherever it cannot decide."""
    # outside the fast range (NaN too) the values below are garbage, unused: the table
    # index is masked into range, and the test sends those arguments to `slow`
    if fn == "exp":
        t = b.let(b.fma(x, _C, MAGIC))  # MAGIC + k
        kf = b.let(t - MAGIC)  # exact
        rh = b.let(b.fma(kf, -_L1, x))  # exact
        rl = b.let(kf * -_L2)
    else:
        t = b.let(x * 64.0 + MAGIC)  # (x * 64 is exact)
        kf = b.let(t - MAGIC)
        r0 = b.let(b.fma(kf, -1.0 / 64, x))  # exact
        rh = b.let(r0 * _LN2_HI)
        rl = b.let(b.fma(r0, _LN2_LO, b.fma(r0, _LN2_HI, -rh)))
    tbits = b.let(t.bitcast(T.U32))
    # Th, Tl side by side in one array: one address for both reads
    j = b.let((tbits << 1) & 126)
    th = b.let(b.table(j, _PAIRS, T.F32))
    tl = b.let(b.table(j | 1, _PAIRS, T.F32))
    rh2 = b.let(rh * rh)
    poly = b.fma(rh, b.fma(rh, _C4, _C3), 0.5)  # 1/2 + rh/6 + rh^2/24
    rlw = b.fma(rl, b.fma(rh2, 0.5, rh), rl)  # rl (1 + rh + rh^2 / 2)
    tail = b.let(b.fma(rh2, poly, rlw))
    ph = b.let(th * rh)
    pl = b.fma(th, rh, -ph)  # exact: Th rh - ph
    s = b.let(th + ph)
    e1 = (th - s) + ph  # exact (Fast2Sum: |Th| >= 0.99 > |ph|)
    small = b.let((b.fma(th, tail, b.fma(tl, rh, tl)) + pl) + e1)
    up = b.let(s + (small + _MARGIN))
    down = s + (small - _MARGIN)
    # 2^(k >> 6) into the exponent: (bits(t) & ~63) << 17 is (k >> 6) << 23 (MAGIC's
    # bits shift out; wrapping, so negative k too)
    scaled = (up.bitcast(T.U32) + ((tbits & 0xFFFFFFC0) << 17)).bitcast(T.F32)
    r = b.var(scaled)
    lo, hi = FAST_RANGE[fn]
    with b.when(x.ge(lo).land(x.le(hi)).land(up.eq(down)).not_()):
        b.assign(r, slow())
    return r


__all__ = ["FAST_RANGE", "MAGIC", "exp_f32", "f32_nearest", "round_bits", "split32"]
