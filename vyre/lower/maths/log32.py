"""log and log2 of f32 in f32 arithmetic alone: the common path of log.py's definitions on a
target whose constant tables are cheap (`Traits.indexed_tables`: CUDA), with no f64
operation and no conversion (log.py's f64 path: 6 conversions and ~30 f64 operations).

x = 2^k z from the bits (musl's reduction): t = bits(x) - OFF, k = t >> 23 (arithmetic),
bits(z) = bits(x) - (t & 0xFF800000), so z in [0.69921875, 1.3984375); bits 16..22 of t
pick one of 128 bins of 2^16 consecutive z (width 2^-8 below 1, 2^-7 above). Per bin one
table entry (c, Th, Tl, 0), read through one index: c = 1 / the bin's centre rounded to 8
significant bits, so r = fma(z, c, -1) is exact (9 bits would not be: checked over every
z by scripts/logf_error.py), |r| <= 2^-7; the two bins beside 1 have c = 1, so near x = 1
r = z - 1 and the result is log1p(r) alone, never a difference of near-equal terms
(elsewhere |log(x)| >= 2^-8, and Th + log1p(r) cancels by less than a factor 2).
Th + Tl = -log(c) (log) or -log2(c) (log2) as an f32 pair. log1p(r) = p0 + pl: p0 = RN(r - r^2 / 2) (an fma), its residual to 2^-24 of itself
(r - p0 is exact), and r^3 P(r), P a degree-2 minimax fit (relative error of log1p
< 2^-40.4). Then
    log:  y = k L2H + (Th + p0) + (k L2L + Tl + pl),  L2H = ln 2 to 17 bits: k L2H exact
    log2: y = k + (Th + p0 L2EH) + (p0 L2EL + pl L2EH + Tl + residual of p0 L2EH)
the two sums of the head each a Fast2Sum (|Th| >= |p0 L2EH| or Th = 0, |k L2H| >= 0.69 >
|Th + p0| or k = 0; checked over every argument), their residuals into small: y = s +
small. Relative error: dominated beside 1 by the roundings of r^3 P(r) (about 3 2^-24
r^3 / 3, relative 2^-24 r^2 <= 2^-38; log2 also the rounding of pl L2EH): measured over
every positive normal f32 by an emulation of these very operations (scripts/logf_error.py,
the fma exact): log 2^-38.26, log2 2^-37.77 (both at x ~ 1.0075, r ~ 2^-7). `_MARGIN` =
2^-36 of |s| leaves a factor 3.4 above that (the rounding of small +- margin costs
2^-48 of s); y's rounding is RN(s + (small + m)) where that equals RN(s + (small - m))
(rounding is monotonic; log(x) is never a midpoint: log2's exact results, x = 2^k, have
r = 0, Th = Tl = 0, s = k, small = 0, and log(1) = +0 the same way). 2^-11.5 of the
positive normal arguments (log2: 2^-11.4), every other one (zero, subnormal, negative,
inf, NaN) and those whose two ends differ take the caller's slow path (the f64
definition, correctly rounded too), so this path changes no bit, only the cost. The fmas
round once on every backend (the target's own or vyre.lower.fma's); every intermediate of
a normal x is zero or above 2^-90 in magnitude, so flush modes give the same bits (a
subnormal x takes the slow path, which reads it as zero there).
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from decimal import Decimal, localcontext
from fractions import Fraction

from vyre.ir.types import ScalarType

from .build import Builder, X
from .exp32 import MAGIC, f32_nearest, round_bits, split32

T = ScalarType
OFF = 0x3F330000  # z = x / 2^k in [bits(OFF), 2 bits(OFF)) = [0.69921875, 1.3984375)
BINS = 128  # by bits 16..22 of bits(x) - OFF: 2^16 consecutive f32 each
C_BITS = 8  # significant bits of each bin's c (so r = z c - 1 is exact: 9 would not be)
_MARGIN = 2.0**-36


def _ln(q: Fraction) -> Fraction:
    with localcontext() as ctx:
        ctx.prec = 60
        return Fraction((Decimal(q.numerator) / Decimal(q.denominator)).ln())


def _f32_of_bits(bits: int) -> Fraction:
    return Fraction(struct.unpack("<f", struct.pack("<I", bits))[0])


def bin_bounds(i: int) -> tuple[Fraction, Fraction]:
    """The z of bin i: [lo, hi) (hi = the next bin's lo)."""
    return _f32_of_bits(OFF + (i << 16)), _f32_of_bits(OFF + ((i + 1) << 16))


def _c(i: int) -> Fraction:
    lo, hi = bin_bounds(i)
    if lo == 1 or hi == 1:  # the bins beside 1: r = z - 1, exact, and log(x) = log1p(r)
        return Fraction(1)
    return round_bits(2 / (lo + hi), C_BITS)


_LN2 = _ln(Fraction(2))
CS = [_c(i) for i in range(BINS)]
_NEG_LOG = [-_ln(c) for c in CS]


def _table(vals: list[Fraction]) -> list[float]:
    """(c, Th, Tl, 0) per bin, interleaved: one index for the three reads."""
    out: list[float] = []
    for c, v in zip(CS, vals):
        out += [float(c), *split32(v), 0.0]
    return out


TABLE = {"log": _table(_NEG_LOG), "log2": _table([v / _LN2 for v in _NEG_LOG])}
L2H = float(round_bits(_LN2, 17))  # k L2H is exact for |k| <= 128
L2L = f32_nearest(_LN2 - Fraction(L2H))
L2EH, L2EL = split32(1 / _LN2)
#: P(r) ~ 1/3 - r/4 + r^2/5 (log1p(r) = r - r^2/2 + r^3 P(r)): a minimax fit of r^2 P(r)
#: to (log1p(r) - r + r^2/2) / r on r in [-2^-7.47, 2^-7] (relative error of log1p below
#: 2^-40.4 with these f32 coefficients, the rounding of 1/3 most of it)
POLY = [0.3333333432674408, -0.25000524520874023, 0.1991216391324997]


def log_f32(b: Builder, x: X, fn: str, slow: Callable[[], X]) -> X:
    """log(x) (fn "log") or log2(x) ("log2") of f32 `x`, correctly rounded: the f32 path
    (module docstring), and `slow()` (made under an `if`) wherever it cannot decide."""
    # off the fast range (x not a positive normal f32) the values below are garbage,
    # unused: the table index is masked into range, and the test sends x to `slow`
    u = b.let(x.bitcast(T.U32))
    tmp = b.let(u - OFF)
    k = (tmp.bitcast(T.I32) >> 23) + 0x4B400000  # the bits of MAGIC + k (|k| <= 128)
    kf = b.let(k.bitcast(T.F32) - MAGIC)  # k, exact
    z = b.let((u - (tmp & 0xFF800000)).bitcast(T.F32))  # x / 2^k, exact
    tab = TABLE[fn]
    j = b.let((tmp >> 14) & 0x1FC)  # 4 (bits(x) - OFF) >> 16, mod 128
    c = b.table(j, tab, T.F32)
    th = b.let(b.table(j | 1, tab, T.F32))
    tl = b.table(j | 2, tab, T.F32)
    r = b.let(b.fma(z, c, -1.0))  # exact
    h = b.let(r * -0.5)
    p0 = b.let(b.fma(h, r, r))  # RN(r - r^2 / 2)
    e0 = b.fma(h, r, r - p0)  # r - r^2 / 2 - p0, to 2^-24 of it (r - p0 is exact)
    c3, c4, c5 = POLY
    pl = b.let(b.fma((r * r) * r, b.fma(r, b.fma(r, c5, c4), c3), e0))  # log1p(r) - p0
    if fn == "log":
        head = b.let(kf * L2H)  # exact
        ph = p0
        tail = b.fma(kf, L2L, tl) + pl
    else:
        head = kf
        ph = b.let(p0 * L2EH)
        phl = b.fma(p0, L2EH, -ph)  # exact
        tail = b.fma(p0, L2EL, b.fma(pl, L2EH, tl)) + phl
    v = b.let(th + ph)
    ev = ph - (v - th)  # exact (Fast2Sum: |th| >= |ph| or th = 0)
    s = b.let(head + v)
    es = v - (s - head)  # exact (Fast2Sum: |head| >= 1 > |v| or head = 0)
    small = b.let((tail + ev) + es)
    mv = b.let(s * _MARGIN)
    up = b.let(s + (small + mv))
    down = s + (small - mv)
    out = b.var(up)
    normal = (u - 0x00800000).lt(0x7F000000)  # x a positive normal f32
    with b.when(normal.land(up.eq(down)).not_()):
        b.assign(out, slow())
    return out


__all__ = ["log_f32"]
