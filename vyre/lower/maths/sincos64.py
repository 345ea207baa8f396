"""sin and cos of f64, in double-double after pio2_64.py's reduction: below 1 ulp, and
correctly rounded unless the exact value lies within 2^-99 (relative) of the middle of
two f64 (the error analysis below; docs/IR.md says so).

|x| < 2^-27 gives x (sin) or 1 (cos) directly: sin x = x (1 - x^2/6 + ...) and cos x =
1 - x^2/2 + ... are then within a quarter ulp of them, so those are the correctly
rounded results, and the rest never meets an f64 subnormal (Vulkan may flush them).
Other finite arguments are reduced, |x| = k pi/2 + r (|x| < 1/2: k = 0, r = x exactly;
else pio2_64.reduce_pio2_f64, r within 2^-102.5 relatively); then by the quadrant (k for
sin, k + 1 for cos, as cos(x) = sin(x + pi/2)) sin(r), cos(r), -sin(r) or -cos(r), and
sin's sign flipped for a negative x (sin is odd, cos even: sin(-0) = -0, cos(-0) = 1).
Infinities and NaN give NaN (C99 F.9.1.6/7).

sin(r) = r S(r^2), cos(r) = C(r^2) with S and C the Taylor series to r^28 / r^29 (|r| <=
pi/4 + 2^-60: truncation below 2^-118 of the result), evaluated by Horner in
double-double (dd.py), the terms from r^16 on (below 2^-53 of the result) in f64.
Error: the reduction's 2^-102.5, then fifteen double-double multiply-adds, each within
about 2^-104 of its partial result (cos(r) >= 0.7 and S >= 0.9: no cancellation), so the
double-double value is within 2^-99 of sin or cos, relatively, and its high part (the
f64 nearest it) within 0.5 + 2^-46 ulp. No slower path decides the rest (the task for a
triple-double one: binary64 sin / cos have arguments within 2^-118 of a midpoint).
Only f64 add and mul, u32 and i32 operations, comparisons, selects and casts: the same
bits on every backend.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

from vyre.ir.types import ScalarType

from . import dd
from .build import Builder, X
from .pio2_64 import reduce_pio2_f64
from .registry import lowering
from .sincos import nan_of, quadrant

T = ScalarType
TINY = 2.0**-27  # below it sin x -> x, tan x -> x, cos x -> 1 (module docstring)
_HALF = 0.5  # below it r = x, k = 0
# Taylor coefficients of sin(r) / r and cos(r) in z = r^2, exact rationals
_SIN_TAYLOR = [Fraction((-1) ** n, math.factorial(2 * n + 1)) for n in range(15)]
_COS_TAYLOR = [Fraction((-1) ** n, math.factorial(2 * n)) for n in range(15)]
# the terms from z^8 on are below 2^-53 of the result: f64 is exact enough there
_DD_TERMS = 8


@dataclass(frozen=True)
class Reduced64:
    """An f64 argument reduced: |x| = k pi/2 + r (r = hi + lo, |r| <= pi/4 + 2^-60)."""

    x: X  # the argument
    special: X  # inf or NaN (bool)
    tiny: X  # |x| < TINY (bool): r is a stand-in there
    k: X  # the quadrant, u32 (only k mod 4 matters)
    hi: X
    lo: X


def reduce64(b: Builder, x: X) -> Reduced64:
    """`x` (f64) reduced by pi/2; inf, NaN and |x| < TINY get a stand-in r (flagged)."""
    ax = b.let(x.abs())
    special = b.let(ax.lt(float("inf")).not_())  # (NaN compares false)
    tiny = b.let(ax.lt(TINY))
    a = b.let(b.select(special.lor(tiny), b.f64(_HALF / 2), ax))  # stand-in: 1/4
    k = b.var(b.u32(0))
    hi = b.var(a)
    lo = b.var(b.f64(0.0))
    with b.when(a.ge(_HALF)):
        k1, rh, rl = reduce_pio2_f64(b, a)
        b.assign(k, k1)
        b.assign(hi, rh)
        b.assign(lo, rl)
    return Reduced64(x=x, special=special, tiny=tiny, k=k, hi=hi, lo=lo)


def _series(b: Builder, zz: dd.DD, coeffs: list[Fraction]) -> dd.DD:
    return dd.horner(b, [dd.dd_const(b, v) for v in coeffs], zz, _DD_TERMS)


def sin_cos64(b: Builder, r: Reduced64) -> tuple[dd.DD, dd.DD]:
    """(sin(r), cos(r)) in double-double (module docstring: within 2^-99)."""
    rr = (r.hi, r.lo)
    zz = dd.mul(b, rr, rr)
    return dd.mul(b, rr, _series(b, zz, _SIN_TAYLOR)), _series(b, zz, _COS_TAYLOR)


def sin_or_cos64(b: Builder, r: Reduced64, odd: X) -> dd.DD:
    """cos(r) where `odd`, else sin(r), in double-double: one series whose coefficients
    are selected (sin(r) = r S(z), cos(r) = C(z)), half the code of both."""
    rr = (r.hi, r.lo)
    zz = dd.mul(b, rr, rr)
    coeffs = []
    for s, c in zip(_SIN_TAYLOR, _COS_TAYLOR, strict=True):
        ch, cl = dd.split_const(c)
        sh, sl = dd.split_const(s)
        coeffs.append((b.select(odd, b.f64(ch), b.f64(sh)), b.select(odd, b.f64(cl), b.f64(sl))))
    series = dd.horner(b, coeffs, zz, _DD_TERMS)
    return dd.mul(b, series, (b.select(odd, b.f64(1.0), r.hi), b.select(odd, b.f64(0.0), r.lo)))


def _sincos(b: Builder, x: X, is_cos: bool) -> X:
    r = reduce64(b, x)
    odd, neg = quadrant(b, r.k, is_cos, b.select(x.lt(0.0), b.u32(1), b.u32(0)))
    hi, _ = sin_or_cos64(b, r, odd)  # hi: the f64 nearest the double-double
    y = b.select(neg, -hi, hi)
    y = b.select(r.tiny, b.f64(1.0) if is_cos else x, y)
    return b.select(r.special, nan_of(b, T.F64), y)  # inf, NaN -> NaN


@lowering("sin", T.F64)
def sin(b: Builder, args: tuple[X, ...]) -> X:
    return _sincos(b, args[0], is_cos=False)


@lowering("cos", T.F64)
def cos(b: Builder, args: tuple[X, ...]) -> X:
    return _sincos(b, args[0], is_cos=True)
