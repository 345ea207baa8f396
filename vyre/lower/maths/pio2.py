"""Exact reduction of a binary32 argument by multiples of pi/2 (for sin, cos, tan).

Given |x| (its f32 bits), `reduce_pio2` returns the quadrant k = round(|x| * 2/pi) mod 4
and r = |x| - k * pi/2 as a double-double (rh, rl), for every finite f32 however large
(Payne and Hanek's method): with |x| = m * 2^s (m the 24-bit significand), only the bits
of 2/pi from weight 2^(1 - s) on matter modulo 4, so a 128-bit window of 2/pi's bits,
starting at that weight (a shifted read of words of the table below), is multiplied
by m in 16-bit limbs (u32 products of 16 x 16 bits are exact; no 64-bit integers, which
not every device has). The 2 integer bits of the product give k, the rest the fraction,
converted to a double-double and multiplied by pi/2.

Accuracy: the window is truncated after 126 fraction bits, so the fraction is short by
less than m * 2^-126 < 2^-102; the double-double conversion and the product by pi/2 add
a few 2^-104 relative. The smallest |r| of any f32 with |x| >= pi/4 is 2^-29.2, at
16367173 * 2^72 (0x6f79be45; the worst case of binary32 in Muller's "Elementary
Functions"; tests/test_exact_trig.py has it), so r is within 2^-70 of exact,
relatively. Arguments with |x| < pi/4 have k = 0 and r = x exactly (the caller selects).
Reads only u32 and f64 operations (see the package docstring).
"""

from __future__ import annotations

from fractions import Fraction

from vyre.ir.types import ScalarType

from . import dd
from .build import Builder, X

T = ScalarType

_WORDS = 9  # 2/pi's bits after one zero word (a small exponent's window starts before them)


def _atan_inv(n: int, terms: int) -> Fraction:
    return sum((Fraction((-1) ** i, (2 * i + 1) * n ** (2 * i + 1)) for i in range(terms)),
               Fraction(0))


# pi by Machin's formula (16 atan(1/5) - 4 atan(1/239)), each series summed exactly far
# past the 2^-300 the table needs
_PI = 16 * _atan_inv(5, 160) - 4 * _atan_inv(239, 70)
PIO2 = _PI / 2
_G = [(((2 / _PI) * 2 ** (_WORDS * 32 - 32)).__floor__() >> (32 * (_WORDS - 1 - i))) & 0xFFFFFFFF
      for i in range(_WORDS)]


def _table(b: Builder, w0: X, j: int) -> X:
    """_G[w0 + j] for w0 in 0..4."""
    return b.let(b.table(w0 + j, _G, T.U32) if j else b.table(w0, _G, T.U32))


def reduce_pio2(b: Builder, ab: X) -> tuple[X, X, X]:
    """(k, rh, rl) for the f32 bits `ab` of |x| (sign clear) with |x| >= 0.5: k (u32) in
    0..3 and rh + rl = |x| - k' * pi/2 for the integer k' = k mod 4 nearest |x| * 2/pi.
    Garbage (but finite) for inf and NaN bits: the caller selects those."""
    e = (ab >> 23).max(126)
    m = b.let((ab & 0x7FFFFF) | 0x800000)
    p0 = b.let(e - 120)  # the window's first bit: weight 2^1 of 2^s * (2/pi), s = e - 150
    w0 = b.let(p0 >> 5)
    sh = b.let(p0 & 31)
    back = b.let(b.u32(31) - sh)
    g = [_table(b, w0, j) for j in range(5)]
    # four words of the window: the table shifted left by sh bits (a shift by 32 - sh
    # written as >> 1 >> (31 - sh): shift amounts are taken modulo 32)
    f = [b.let((g[j] << sh) | ((g[j + 1] >> 1) >> back)) for j in range(4)]
    h = [x for w in f for x in (b.let(w >> 16), b.let(w & 0xFFFF))]  # 8 limbs, first = top
    m1, m0 = b.let(m >> 16), b.let(m & 0xFFFF)
    y: list[X] = [b.u32(0)] * 8
    carry: X = b.u32(0)
    for i in range(7, -1, -1):
        lo = b.let(m0 * h[i])
        acc = lo & 0xFFFF
        up = lo >> 16
        if i < 7:
            hi = b.let(m1 * h[i + 1])
            acc = acc + (hi & 0xFFFF)
            up = up + (hi >> 16)
        acc = b.let(acc + carry)
        y[i] = b.let(acc & 0xFFFF)
        if i:
            carry = b.let(up + (acc >> 16))
    # y[0]'s top 2 bits are the integer part mod 4; bit 13 is the half
    k = b.let(((y[0] + 0x2000) >> 14) & 3)
    t0 = b.let((y[0] - (k << 14)) & 0xFFFF)
    v0 = t0.cast(T.F64) - b.select(t0.ge(0x8000), b.f64(65536.0), b.f64(0.0))
    f64 = [v.cast(T.F64) for v in y]
    a = ((v0 * 65536.0 + f64[1]) * 65536.0 + f64[2]) * 2.0**-46  # exact (48 bits)
    bb = ((f64[3] * 65536.0 + f64[4]) * 65536.0 + f64[5]) * 2.0**-94  # exact
    c = (f64[6] * 65536.0 + f64[7]) * 2.0**-126  # exact
    # |a| >= 2^-46 > bb + c unless a = 0: fast_two_sum's condition
    rh, rl = dd.fast_two_sum(b, b.let(a), b.let(bb + c))
    r = dd.mul(b, (rh, rl), dd.dd_const(b, PIO2))
    return k, r[0], r[1]


def _pio2_parts() -> tuple[float, float, float, float]:
    """pi/2 = P1 + P2 + P3 + P4 (+ < 2^-165): P1 and P2 of 30 significant bits each (so
    k * P1 and k * P2 are exact for k < 2^23), P3 + P4 a double-double of the rest."""
    p1 = Fraction(int(PIO2 * 2**29), 2**29)
    p2 = Fraction(int((PIO2 - p1) * 2**59), 2**59)
    p3, p4 = dd.split_const(PIO2 - p1 - p2)
    return float(p1), float(p2), p3, p4


_P1, _P2, _P3, _P4 = _pio2_parts()
_TWO_OVER_PI = float(2 / _PI)
_ROUND = 1.5 * 2.0**52  # adding and subtracting it rounds an f64 below 2^51 to an integer
CODY_WAITE_BITS = 0x49000000  # f32 bits of 2^19: below it reduce_cody_waite applies


def reduce_cody_waite(b: Builder, ax: X) -> tuple[X, X, X]:
    """(k, rh, rl) as reduce_pio2's, for an f64 pi/4 <= ax < 2^19 holding an f32 (so
    k < 2^19): Cody and Waite's reduction in three parts of pi/2. ax - k P1 is exact (both
    are multiples of 2^-29 and the difference is below 1), k P2 is exact, and k (P3 + P4)
    is a double-double within 2^-125; the smallest |r| of such an f32 is 2^-27.8 (at
    16573937 * 2^-16), so r is within 2^-75 of exact, relatively."""
    kf = b.let((ax * _TWO_OVER_PI + _ROUND) - _ROUND)
    s1 = b.let(ax - kf * _P1)
    h = dd.two_sum(b, s1, b.let(-(kf * _P2)))
    p3 = dd.two_prod(b, kf, b.f64(_P3))
    r = dd.add(b, h, (-p3[0], b.let(-(p3[1] + kf * _P4))))
    return b.let(b.f2i(kf, T.U32) & 3), r[0], r[1]  # (0 <= kf < 2^19)


__all__ = ["CODY_WAITE_BITS", "PIO2", "reduce_cody_waite", "reduce_pio2"]
