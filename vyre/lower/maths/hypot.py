"""hypot (f32, f16): correctly rounded, with no f64 sqrt or division.

x^2 + y^2 is exact as a double-double s (each square of a 24-bit value is exact in f64,
TwoSum the sum; f32 operands are first scaled by one power of two so the larger is in
[1, 2), or by 2^149 when both are subnormal, which makes the subnormal results' grid the
integers). A candidate c = f32 sqrt(f32(s_hi)) (IR f32 sqrt is correctly rounded on every
backend) is within one step of the result's grid (f32: 24 bits; scaled subnormals: the
integers; f16: 11 bits); the midpoints m between c and its neighbours are exact in f64
and so are their squares (<= 50 bits), and sign((s_hi - m^2) + s_lo) (the difference is
exact) says exactly on which side of m the true sqrt(s) lies; at an exact tie the midpoint
rounded to nearest even. C99 Annex F: +inf if either is infinite (even beside a NaN),
else NaN for a NaN, hypot(+-0, +-0) = +0; in flush mode a subnormal operand reads as 0.
"""

from __future__ import annotations

from collections.abc import Callable

from vyre.ir import nodes as N
from vyre.ir.nodes import made
from vyre.ir.types import ScalarType

from . import dd
from .build import Builder, X
from .exp import power_of_two
from .registry import lowering
from .rounding import round_f16_grid

T = ScalarType
_ROUND = float(3 * 2**51)
_INF = float("inf")


def _sqrt_f32(b: Builder, v: X) -> X:
    """f64(sqrt(f32(v))): the IR's f32 sqrt, correctly rounded on every backend."""
    return b.wrap(made(N.Call, fn="sqrt", args=(v.cast(T.F32).e,), ty=T.F32)).cast(T.F64)


def _pick(b: Builder, s: dd.DD, c: X, up: X, down: X, grid: Callable[[X], X]) -> X:
    """The grid value nearest sqrt(s), given c within one grid step of it and its
    neighbours up and down; at a tie the midpoint rounded by `grid` (to even)."""
    mu = b.let((c + up) * 0.5)
    md = b.let((c + down) * 0.5)
    above = b.let((s[0] - mu * mu) + s[1])  # (s_hi - m^2 is exact: Sterbenz)
    below = b.let((s[0] - md * md) + s[1])
    r = b.select(below.lt(0.0), down, b.select(below.eq(0.0), grid(md), c))
    return b.select(above.gt(0.0), up, b.select(above.eq(0.0), grid(mu), r))


def _squares(b: Builder, ax: X, ay: X) -> dd.DD:
    return dd.two_sum(b, b.let(ax * ax), b.let(ay * ay))


def _hypot_f32(b: Builder, ax: X, ay: X) -> X:
    """hypot of finite f64 ax, ay >= 0 (f32 values, not both 0) as an f64 f32 value."""
    mx = b.let(ax.max(ay))
    e = b.let(((mx.cast(T.F32).bitcast(T.U32) >> 23) & 0xFF).bitcast(T.I32) - 127)
    sub = b.let(e.eq(-127))  # both subnormal: scale by 2^149, integer grid
    neg_e = b.let(b.select(sub, b.i32(149), -e))
    half = b.let(neg_e >> 1)
    s1 = b.let(power_of_two(b, half))
    s2 = b.let(power_of_two(b, neg_e - half))
    sx, sy = b.let((ax * s1) * s2), b.let((ay * s1) * s2)  # exact
    s = _squares(b, sx, sy)
    c0 = b.let(_sqrt_f32(b, s[0]))
    # f32 grid: neighbours by the bits; subnormal (scaled): the integers
    cb = b.let(c0.cast(T.F32).bitcast(T.U32))
    ci = b.let((c0 + _ROUND) - _ROUND)
    c = b.select(sub, ci, c0)
    up = b.select(sub, ci + 1.0, (cb + 1).bitcast(T.F32).cast(T.F64))
    down = b.select(sub, ci - 1.0, (cb - 1).bitcast(T.F32).cast(T.F64))

    def grid(m: X) -> X:
        return b.select(sub, (m + _ROUND) - _ROUND, m.cast(T.F32).cast(T.F64))

    r = _pick(b, s, b.let(c), b.let(up), b.let(down), grid)
    # back: r * 2^e (exact; beyond FLT_MAX the cast gives inf, below FLT_MIN a subnormal)
    return (r * power_of_two(b, b.let(-half))) * power_of_two(b, b.let(half - neg_e))


def _hypot_f16(b: Builder, ax: X, ay: X) -> X:
    """hypot of finite f64 ax, ay >= 0 (f16 values) as an f64 f16 value (or inf)."""
    s = _squares(b, ax, ay)  # in [2^-48, 2^33]: no scaling
    c = b.let(round_f16_grid(b, _sqrt_f32(b, s[0])))
    cb = b.let(c.cast(T.F32).bitcast(T.U32))
    small_up, small_down = c.lt(2.0**-14), c.le(2.0**-14)  # f16 subnormals: grid 2^-24
    up = b.select(small_up, c + 2.0**-24, (cb + 0x2000).bitcast(T.F32).cast(T.F64))
    down = b.select(small_down, c - 2.0**-24, (cb - 0x2000).bitcast(T.F32).cast(T.F64))
    return _pick(b, s, c, b.let(up), b.let(down), lambda m: round_f16_grid(b, m))


@lowering("hypot", T.F32, T.F16)
def hypot(b: Builder, args: tuple[X, ...]) -> X:
    x, y = args
    ax, ay = b.let(x.cast(T.F64).abs()), b.let(y.cast(T.F64).abs())
    inf = b.let(ax.eq(_INF).lor(ay.eq(_INF)))
    nan = b.let(ax.ne(ax).lor(ay.ne(ay)))
    zero = b.let(ax.eq(0.0).land(ay.eq(0.0)))
    plain = b.let(inf.lor(nan).lor(zero).not_())
    fx, fy = b.let(b.select(plain, ax, b.f64(1.0))), b.let(b.select(plain, ay, b.f64(1.0)))
    r = _hypot_f16(b, fx, fy) if x.ty is T.F16 else _hypot_f32(b, fx, fy)
    out = b.select(zero, b.f64(0.0), b.select(nan, b.f64(float("nan")), r))
    return b.select(inf, b.f64(_INF), out).cast(x.ty)
