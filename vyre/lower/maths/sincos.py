"""sin and cos of f32 and f16, correctly rounded, from the reductions of pio2.py (on a target
with cheap tables, `Traits.indexed_tables`, f32's common path is sincos32's, in f32 alone,
with this one as its slow path).

|x| = k * pi/2 + r exactly enough (|r| <= pi/4 as a double-double within 2^-70; |x| <
pi/4 is r = x, k = 0; below 2^19 Cody and Waite's reduction, above it, under an `if`,
Payne and Hanek's), then by the quadrant (k for sin, k + 1 for cos, as cos(x) = sin(x + pi/2)):
sin(r), cos(r), -sin(r) or -cos(r), and sin's sign flipped for a negative x (sin is
odd, cos even: sin(-0) = -0, cos(-0) = 1). Infinities and NaN give NaN (C99 F.9.1.6/7).

Fast path (every input): sin(r) = r + r^3 P(r^2), cos(r) = 1 - r^2/2 + r^4 Q(r^2) in f64,
with P and Q fitted for this module (weighted least squares on 300 Chebyshev nodes of
[0, (pi/4)^2] in 200-bit arithmetic, -1/6 and 1/24 kept; approximation error below
2^-62 and 2^-63 of the result, measured on 2,000 points). Rounding
errors: sin within 1.7 * 2^-53, cos within 3.5 * 2^-53 (relative; cos(r) >= 0.7, and
sin(r) >= 0.9 r, so no cancellation), the reduction's within 2^-70; `FAST_ERR` = 2^-50 is
twice the sum. Where the f64 result's error interval holds an f32 rounding boundary
(about 2^-26 of inputs), the slow path evaluates the Taylor series its quadrant needs
(to r^25 / r^26, truncation below 2^-92) in double-double, the terms from r^14 on (below
2^-41 of the result) in f64: within a few 2^-93, so the result is wrong
only if the exact value lay within 2^-68 of the middle of two f32 (scripts/
exact_functions.py checks every f32 against a correctly rounded oracle; tests/
test_exact_trig.py every f16 and an f32 sample, and the slow path alone).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

from vyre.ir.types import ScalarType

from . import dd
from .build import Builder, X
from .pio2 import CODY_WAITE_BITS, reduce_cody_waite, reduce_pio2
from .registry import lowering
from .rounding import finish
from .sincos32 import sincos_f32

T = ScalarType
FAST_ERR = 2.0**-50

# sin(r) = r (1 + z P(z)), cos(r) = 1 - z/2 + z^2 Q(z), z = r^2 (fitted as the docstring
# says; P's first coefficient is RN(-1/6), Q's RN(1/24))
_P = [float.fromhex(h) for h in (
    "-0x1.5555555555555p-3", "0x1.1111111111089p-7", "-0x1.a01a01a0066cbp-13",
    "0x1.71de3a3f7e8b6p-19", "-0x1.ae643c7395a82p-26", "0x1.611420f99490ap-33",
    "-0x1.a51b957b257b8p-41")]
_Q = [float.fromhex(h) for h in (
    "0x1.5555555555555p-5", "-0x1.6c16c16c162b8p-10", "0x1.a01a019e2bef7p-16",
    "-0x1.27e4f8ff3da69p-22", "0x1.1eea83ff836a6p-29", "-0x1.8ff74c7c81445p-37")]
# Taylor coefficients of sin(r) / r and cos(r) in z = r^2, exact rationals
_SIN_TAYLOR = [Fraction((-1) ** n, math.factorial(2 * n + 1)) for n in range(13)]
_COS_TAYLOR = [Fraction((-1) ** n, math.factorial(2 * n)) for n in range(14)]
_PIO4_BITS = 0x3F490FDB  # f32(pi/4), above pi/4: smaller bits are below pi/4


def _horner(z: X, cs: list[float]) -> X:
    """cs[0] + z * (cs[1] + z * (...)) in f64."""
    acc = z * cs[-1] + cs[-2]
    for c in reversed(cs[:-2]):
        acc = z * acc + c
    return acc


@dataclass(frozen=True)
class Reduced:
    """An f32 / f16 argument reduced: |x| = k pi/2 + r (r = hi + lo, |r| <= pi/4)."""

    ty: ScalarType  # the argument's type
    bits: X  # its f32 bits (u32)
    special: X  # inf or NaN (bool)
    k: X  # the quadrant, u32 (only k mod 4 matters)
    hi: X
    lo: X


def reduce(b: Builder, x: X) -> Reduced:
    """`x` (f32 or f16) reduced by pi/2; inf and NaN get a stand-in r (flagged special)."""
    xd = x.cast(T.F64)  # exact; in flush mode a subnormal reads as a zero
    bits = b.let(xd.cast(T.F32).bitcast(T.U32))  # exact: f16 and f32 are both f32s
    ab = b.let(bits & 0x7FFFFFFF)
    special = b.let(ab.ge(0x7F800000))
    ab = b.let(b.select(special, b.u32(0x3F800000), ab))  # stand-in: 1.0
    ax = b.let(ab.bitcast(T.F32).cast(T.F64))
    small = b.let(ab.lt(_PIO4_BITS))
    # below 2^19 Cody and Waite's reduction (the f64 stand-in keeps it in range above);
    # only where some argument is larger the integer one, under an `if`
    k0, rh0, rl0 = reduce_cody_waite(b, b.select(ab.lt(CODY_WAITE_BITS), ax, b.f64(1.0)))
    k = b.var(b.select(small, b.u32(0), k0))
    hi = b.var(b.select(small, ax, rh0))
    lo = b.var(b.select(small, b.f64(0.0), rl0))
    with b.when(ab.ge(CODY_WAITE_BITS)):
        k1, rh1, rl1 = reduce_pio2(b, ab)
        b.assign(k, k1)
        b.assign(hi, rh1)
        b.assign(lo, rl1)
    return Reduced(ty=x.ty, bits=bits, special=special, k=k, hi=hi, lo=lo)


def sin_cos_fast(b: Builder, r: Reduced) -> tuple[X, X]:
    """(sin(r), cos(r)) in f64, within 1.7 and 3.5 * 2^-53 (module docstring)."""
    z = b.let(r.hi * r.hi)
    half = b.let(1.0 - z * 0.5)
    s = r.hi + (r.hi * z * _horner(z, _P) + r.lo * half)
    c = half + (z * z * _horner(z, _Q) - r.lo * r.hi)
    return b.let(s), b.let(c)


# the series' terms from z^7 on are below 2^-41 of the result: f64 is exact enough there
_DD_TERMS = 7


def sin_cos_slow(b: Builder, r: Reduced) -> tuple[dd.DD, dd.DD]:
    """(sin(r), cos(r)) in double-double (Taylor series, within a few 2^-93)."""
    rr = (r.hi, r.lo)
    zz = dd.mul(b, rr, rr)
    sn = dd.mul(b, rr, dd.horner(b, [dd.dd_const(b, v) for v in _SIN_TAYLOR], zz, _DD_TERMS))
    return sn, dd.horner(b, [dd.dd_const(b, v) for v in _COS_TAYLOR], zz, _DD_TERMS)


def sin_or_cos_slow(b: Builder, r: Reduced, odd: X) -> dd.DD:
    """cos(r) where `odd`, else sin(r), in double-double: one series whose coefficients
    are selected (sin(r) = r * S(z), cos(r) = C(z)), half the code of both."""
    rr = (r.hi, r.lo)
    zz = dd.mul(b, rr, rr)
    coeffs = []
    for n, c in enumerate(_COS_TAYLOR):
        ch, cl = dd.split_const(c)
        sh, sl = dd.split_const(_SIN_TAYLOR[n] if n < len(_SIN_TAYLOR) else Fraction(0))
        coeffs.append((b.select(odd, b.f64(ch), b.f64(sh)), b.select(odd, b.f64(cl), b.f64(sl))))
    series = dd.horner(b, coeffs, zz, _DD_TERMS)
    return dd.mul(b, series, (b.select(odd, b.f64(1.0), r.hi), b.select(odd, b.f64(0.0), r.lo)))


def nan_of(b: Builder, ty: ScalarType) -> X:
    return b.u32(0x7FC00000).bitcast(T.F32).cast(ty)


def quadrant(b: Builder, k: X, is_cos: bool, sign: X) -> tuple[X, X]:
    """(odd, neg) for the quadrant k (u32) of an argument of sign bit `sign` (u32 0 / 1):
    sin or cos of x is cos(r) where odd (else sin(r)), negated where neg (cos(x) =
    sin(x + pi/2): quadrant k + 1; sin is odd, cos even)."""
    q = k + 1 if is_cos else k
    flip = (q >> 1) & 1
    if not is_cos:
        flip = flip ^ sign
    return b.let((q & 1).eq(1)), b.let(flip.eq(1))


def _sincos(b: Builder, x: X, is_cos: bool) -> X:
    r = reduce(b, x)
    odd, neg = quadrant(b, r.k, is_cos, r.bits >> 31)
    s, c = sin_cos_fast(b, r)
    y = b.let(b.select(odd, c, s))
    y = b.select(neg, -y, y)

    def slow() -> dd.DD:
        hi, lo = sin_or_cos_slow(b, r, odd)
        return b.select(neg, -hi, hi), b.select(neg, -lo, lo)

    out = finish(b, r.ty, y, FAST_ERR, slow)
    return b.select(r.special, nan_of(b, r.ty), out)  # inf, NaN -> NaN


@lowering("sin", T.F32, T.F16)
def sin(b: Builder, args: tuple[X, ...]) -> X:
    return _dispatch(b, args[0], is_cos=False)


@lowering("cos", T.F32, T.F16)
def cos(b: Builder, args: tuple[X, ...]) -> X:
    return _dispatch(b, args[0], is_cos=True)


def _dispatch(b: Builder, x: X, is_cos: bool) -> X:
    """f32 on a target with cheap tables: sincos32's path in f32 alone, this module's as
    its slow path (the same bits); otherwise this module's."""
    if b.f32_path(x):
        return sincos_f32(b, x, is_cos, b.slow_path(x, lambda c, y: _sincos(c, y, is_cos)))
    return _sincos(b, x, is_cos)
