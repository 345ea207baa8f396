"""Exact reduction of a binary64 argument by multiples of pi/2 (for f64 sin, cos, tan).

Given |x| >= 1/2 (an f64, finite), `reduce_pio2_f64` returns the quadrant k = round(|x|
2/pi) mod 4 and r = |x| - k pi/2 as a double-double, for every finite f64 however large
(Payne and Hanek's method with 32-bit integers only: no i64, which not every device has,
and no bitcast of an f64, which needs it):

- |x| = M 2^(E - 52) with the integer M in [2^52, 2^53): E by scaling |x| into
  [1/2, 2^64) with four exact power-of-two steps, then the f32 exponent of that (one down
  where the conversion rounded up to the next power of two); M by an exact scaling; M as
  two u32 words (trunc(M 2^-32) and the exact rest), then four 16-bit limbs.
- Only the bits of 2/pi from weight 2^-(E - 53) on matter modulo 4 (earlier ones give
  multiples of 4), so a 256-bit window starting there (a shifted read of nine words of
  the table below) is multiplied by M in 16-bit limbs (products of 16 x 16 bits are
  exact in u32), the product kept modulo 2^256: y = |x| 2/pi mod 4, with 2 integer bits.
- k = y rounded to an integer; the signed fraction f = y - k, |f| <= 1/2, is the exact
  sum of four f64 of 48 bits (TwoSum'd into a double-double), times pi/2 (double-double).

Accuracy: the window drops the bits of 2/pi after it, less than M 2^-254 < 2^-201 of y;
the limbs beyond the four f64 drop less than 2^-190; the TwoSums are exact and the last
double-double sum has no cancellation (the parts' signs and magnitudes, see `_fraction`),
so f is within 2^-104 |f| + 2^-189. The f64 nearest a multiple of pi/2 has |r| = 2^-60.9
(6381956970095103 2^797, the worst case of binary64 in Muller's "Elementary Functions";
tests/test_exact_trig64.py has it), so with the product by pi/2 (within 2^-104, pi/2
within 2^-107) r is within 2^-102.5 of exact, relatively, for every finite f64.
Arguments below 1/2 are the caller's (k = 0, r = x).
"""

from __future__ import annotations

from fractions import Fraction

from vyre.ir.types import ScalarType

from . import dd
from .build import Builder, X
from .exp import power_of_two

T = ScalarType

# 2/pi's bits, 32 to a word: table bit t (0 = the top of word 0) has weight 2^(63 - t),
# so words 0 and 1 are zero (2/pi < 1) and a small exponent's window starts in them
_WORDS = 41  # the last window (E = 1023) reads words 32..40
_PREC = 32 * _WORDS + 64  # fixed-point bits of the series below (each term truncated once)


def _atan_inv_fixed(n: int) -> int:
    """atan(1/n) * 2^_PREC, within a unit per term (Gregory's series)."""
    total, i, power = 0, 0, n
    while True:
        term = (1 << _PREC) // (power * (2 * i + 1))
        if term == 0:
            return total
        total += -term if i % 2 else term
        i += 1
        power *= n * n


# pi by Machin's formula (16 atan(1/5) - 4 atan(1/239)), within a few hundred units of
# 2^-_PREC: 2^-1300 or better, far past the table's last bit (2^-1248)
PI_FIXED = 16 * _atan_inv_fixed(5) - 4 * _atan_inv_fixed(239)
_G_ALL = (2 << (2 * _PREC)) // PI_FIXED  # 2/pi * 2^_PREC
_G_TABLE = _G_ALL >> (_PREC - (32 * _WORDS - 64))  # table bit t of weight 2^(63 - t)
_G = [(_G_TABLE >> (32 * (_WORDS - 1 - i))) & 0xFFFFFFFF for i in range(_WORDS)]
PIO2 = Fraction(PI_FIXED, 2 << _PREC)


def _exponent(b: Builder, ax: X) -> tuple[X, X]:
    """(E, M) for an f64 1/2 <= ax < 2^1024: the exponent E (i32, 2^E <= ax < 2^(E + 1))
    and the integer significand M = ax 2^(52 - E) (an f64), exactly."""
    a, off = ax, b.i32(0)
    for s in (512, 256, 128, 64):  # ax < 2^1024: after the steps a < 2^64, all exact
        big = b.let(a.ge(2.0**s))
        a = b.let(b.select(big, a * 2.0**-s, a))
        off = b.let(off + b.select(big, b.i32(s), b.i32(0)))
    ef = b.let(((a.cast(T.F32).bitcast(T.U32) >> 23).bitcast(T.I32)) - 127)
    # the f32 conversion may round a up to the next power of two: one down there
    ef = b.let(ef - b.select(power_of_two(b, ef).gt(a), b.i32(1), b.i32(0)))
    m = b.let(a * power_of_two(b, 52 - ef))  # exact: in [2^52, 2^53)
    return off + ef, m


def _limbs(b: Builder, m: X) -> list[X]:
    """The integer f64 m < 2^53 as four 16-bit limbs (u32), lowest first."""
    hi = b.let(b.f2i(m * 2.0**-32, T.U32))  # < 2^21, truncated: exact
    lo = b.let(b.f2i(m - hi.cast(T.F64) * 2.0**32, T.U32))  # the exact rest, < 2^32
    return [b.let(lo & 0xFFFF), b.let(lo >> 16), b.let(hi & 0xFFFF), b.let(hi >> 16)]


def _window(b: Builder, e: X) -> list[X]:
    """The 256 bits of 2/pi from weight 2^-(e - 53) on, as 16 limbs of 16 bits (u32),
    lowest first (i32 e in [-1, 1023])."""
    p0 = b.let((e + 10).bitcast(T.U32))  # table bit of weight 2^-(e - 53)
    w0 = b.let(p0 >> 5)
    sh = b.let(p0 & 31)
    back = b.let(b.u32(31) - sh)
    g = [b.let(b.table(w0 + j, _G, T.U32) if j else b.table(w0, _G, T.U32))
         for j in range(9)]
    # the table shifted left by sh bits (a shift by 32 - sh written as >> 1 >> (31 - sh):
    # shift amounts are taken modulo 32)
    words = [b.let((g[j] << sh) | ((g[j + 1] >> 1) >> back)) for j in range(8)]
    limbs: list[X] = []
    for w in reversed(words):  # the last word holds the lowest limbs
        limbs += [b.let(w & 0xFFFF), b.let(w >> 16)]
    return limbs


def _product(b: Builder, m: list[X], w: list[X]) -> list[X]:
    """(m * w) mod 2^256 as 16 limbs of 16 bits, lowest first (m 4 limbs, w 16): column
    sums of the low and high halves of exact 16 x 16-bit products, with carries (a column
    adds at most 9 numbers below 2^16: no overflow)."""
    out: list[X] = []
    carry: X = b.u32(0)
    highs: list[X] = []
    for t in range(16):
        acc = carry
        for h in highs:
            acc = acc + h
        highs = []
        for i in range(4):
            if 0 <= t - i < 16:
                p = b.let(m[i] * w[t - i])
                acc = acc + (p & 0xFFFF)
                highs.append(p >> 16)
        acc = b.let(acc)
        out.append(b.let(acc & 0xFFFF))
        carry = acc >> 16
    return out


def _fraction(b: Builder, y: list[X]) -> tuple[X, dd.DD]:
    """(k, f) from y = |x| 2/pi mod 4 (16 limbs, y[15] of weights 2^1 .. 2^-14): k (u32,
    0..3) = y rounded, f = y - k (|f| <= 1/2) as a double-double. f = A + B + C + D, each
    exact (48 bits): only A is signed, B, C, D >= 0, |B + C + D| < 2^-46 and A a multiple
    of 2^-46, so TwoSum(A, B) and TwoSum(C, D) are exact and adding them cancels nothing
    for |f| >= 2^-62 (every f64 argument's, module docstring)."""
    k = b.let(((y[15] + 0x2000) >> 14) & 3)
    t0 = b.let((y[15] - (k << 14)) & 0xFFFF)
    v0 = t0.cast(T.F64) - b.select(t0.ge(0x8000), b.f64(65536.0), b.f64(0.0))
    f = [v.cast(T.F64) for v in y]

    def three(hi: X, mid: X, lo: X, scale: float) -> X:
        return b.let(((hi * 65536.0 + mid) * 65536.0 + lo) * scale)  # exact (48 bits)

    a = three(v0, f[14], f[13], 2.0**-46)
    bb = three(f[12], f[11], f[10], 2.0**-94)
    c = three(f[9], f[8], f[7], 2.0**-142)
    d = three(f[6], f[5], f[4], 2.0**-190)
    return k, dd.add(b, dd.two_sum(b, a, bb), dd.two_sum(b, c, d))


def reduce_pio2_f64(b: Builder, ax: X) -> tuple[X, X, X]:
    """(k, rh, rl) for an f64 1/2 <= ax < 2^1024: k (u32) in 0..3 and rh + rl = ax - k'
    pi/2 for the integer k' = k mod 4 nearest ax 2/pi (module docstring: within 2^-102.5
    relative)."""
    e, m = _exponent(b, ax)
    y = _product(b, _limbs(b, m), _window(b, b.let(e)))
    k, f = _fraction(b, y)
    r = dd.mul(b, f, dd.dd_const(b, PIO2))
    return k, r[0], r[1]


__all__ = ["PIO2", "reduce_pio2_f64"]
