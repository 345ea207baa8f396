"""acos of f32 and f16, correctly rounded: atan2(sqrt(1 - x^2), x) on asin's parts.

The root is asin's (vyre.lower.maths.atan `sqrt_dd`: 1 - x^2 as a double-double, x^2
exact, the difference within 2^-82 relative as 1 - x^2 >= 2^-23 for |x| < 1; its root
within 2^-100), and the arctangent is atan2's `atan2_dd` with x's sign choosing the
quadrant (K = pi for x < 0, so acos(-1 + e) = pi - atan(root / |x|)), rounded once to the
argument's type. acos(1) = +0, acos(-1) = pi rounded, acos(+-0) = pi/2 rounded (C99
F.9.1.1); |x| > 1 and NaN give NaN. This module is the definition only: it must never
spell a backend's function (`vyre.approx` has no acos: no device's own is used).
"""

from __future__ import annotations

from vyre.ir.types import ScalarType

from . import dd
from .atan import atan2_dd, quiet_nan, sqrt_dd
from .build import Builder, X
from .registry import lowering

T = ScalarType


@lowering("acos", T.F32, T.F16)
def acos(b: Builder, args: tuple[X, ...]) -> X:
    x = args[0]
    ty = x.ty
    xd = b.let(x.cast(T.F64))  # (flush mode: a subnormal reads as a zero of its sign)
    ax = b.let(xd.abs())
    neg = b.let((xd.cast(T.F32).bitcast(T.U32) >> 31).eq(1))
    bad = b.let(ax.gt(1.0).lor(xd.ne(xd)))  # |x| > 1 or NaN
    one = b.let(ax.eq(1.0))
    a = b.let(b.select(bad.lor(one), b.f64(0.5), ax))  # stand-in for the special ones
    sq = dd.two_prod(b, a, a)
    w = dd.add(b, (b.f64(1.0), b.f64(0.0)), (-sq[0], -sq[1]))  # 1 - a^2 >= 2^-23
    out = atan2_dd(b, ty, sqrt_dd(b, w), (a, b.f64(0.0)), neg, b.const(T.BOOL, False))
    # f32(pi) (correctly rounded) and, for f16, that rounded again: pi's f16 neighbours
    # are 3.140625 and 3.142578, and f32(pi) lies on the same side of their midpoint
    pi = b.u32(0x40490FDB).bitcast(T.F32).cast(ty)
    at_one = b.select(neg, pi, b.const(ty, 0.0))
    return b.select(bad, quiet_nan(b, ty), b.select(one, at_one, out))
