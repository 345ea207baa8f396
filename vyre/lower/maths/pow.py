"""pow (f32, f16): evaluated in f64 as 2^(y log2 x), rounded once.

log2|x| comes from log's reduction (vyre.lower.maths.log) as a pair hi + lo (relative
error < 2^-50), z = y log2|x| as two_prod(y, hi) + y lo, and 2^z from exp's table method
(vyre.lower.maths.exp) with z's low part in r; z is clamped to [-152, 130], beyond which
the result already rounds to 0 or overflows. Fast path error: |z| <= 152 makes the
absolute error of z below 2^-42.8, the result's relative error below 2^-43; where that
bound straddles a rounding boundary the slow path computes log2|x| as a double-double
(< 2^-100), z = y log2|x| in double-double and 2^z in double-double (relative error of
the result < 2^-92). Exact results (pow(4, 0.5) = 2, pow(2^-75, 2) = 2^-150, a midpoint)
come out within that bound of a value of the grid or of a midpoint, so a result within
`_TIE` = 2^-88 (relative) of a midpoint is rounded as that midpoint (to even): pow is
correctly rounded unless an argument pair exists whose result lies within 2^-88 of a
midpoint without being on it (none is known; docs/IR.md). Special values: C99 Annex F
(pow(x, +-0) = 1 and pow(1, y) = 1 even for NaN, pow(-1, +-inf) = 1, a negative x with a
non-integer y is NaN, the signs of pow(+-0, y) and pow(-inf, y) from y's parity).
"""

from __future__ import annotations

from vyre.ir.types import ScalarType

from . import dd
from .build import Builder, X
from .exp import pow2
from .log import log2_fast, log_dd, reduce
from .registry import lowering

T = ScalarType
_FAST_ERR = 2.0**-41
_TIE = 2.0**-88
_ROUND = float(3 * 2**51)
_INF = float("inf")


def _magnitude(b: Builder, ax: X, dy: X, neg: X, ty: ScalarType) -> X:
    """+-|x|^y for finite nonzero f64 ax > 0 and dy, negated where `neg`."""
    red = reduce(b, ax)
    lh, ll = log2_fast(b, red)
    zp, ze = dd.two_prod(b, dy, lh)
    zh0, zl0 = dd.fast_two_sum(b, zp, b.let(ze + dy * ll))
    clamped = b.let(zh0.gt(130.0).lor(zh0.lt(-152.0)))
    zh = b.let(zh0.max(-152.0).min(130.0))
    zl = b.let(b.select(clamped, b.f64(0.0), zl0))
    kf = b.let(((zh * 16.0) + _ROUND) - _ROUND)
    r0 = b.let(zh - kf * 0.0625)  # exact
    r = b.let(r0 + zl)

    def r_dd() -> dd.DD:
        zs = dd.mul_d(b, log_dd(b, red, base2=True), dy)
        zs_hi = b.select(clamped, zh, zs[0])
        zs_lo = b.select(clamped, b.f64(0.0), zs[1])
        return dd.add_d(b, (b.let(zs_lo), b.f64(0.0)), b.let(zs_hi - kf * 0.0625))

    return pow2(b, b.let(b.f2i(kf)), r, r_dd, ty, _FAST_ERR, neg, _TIE)


@lowering("pow", T.F32, T.F16)
def pow_(b: Builder, args: tuple[X, ...]) -> X:
    x, y = args
    dx, dy = b.let(x.cast(T.F64)), b.let(y.cast(T.F64))
    ax, ay = b.let(dx.abs()), b.let(dy.abs())
    x_neg = b.let((dx.cast(T.F32).bitcast(T.U32) >> 31).eq(1))  # (-0 included)
    y_int = b.let(ay.ge(2.0**24).lor(((dy + _ROUND) - _ROUND).eq(dy)))
    y_odd = b.let(y_int.land(ay.lt(2.0**24)).land(
        (dy.min(2.0**24).cast(T.I32) & 1).eq(1)))
    finite_x = b.let(ax.lt(_INF))
    ordinary = b.let(finite_x.land(ax.gt(0.0)).land(ay.lt(_INF)).land(ay.gt(0.0)))
    vx = b.let(b.select(ordinary, ax, b.f64(2.0)))
    vy = b.let(b.select(ordinary, dy, b.f64(1.0)))
    flip = b.let(x_neg.land(y_odd))
    out = _magnitude(b, vx, vy, flip, x.ty).cast(T.F64)
    return annex_f(b, dx, dy, x_neg, y_int, flip, out).cast(x.ty)


def annex_f(b: Builder, dx: X, dy: X, x_neg: X, y_int: X, flip: X, out: X) -> X:
    """pow's special values (C99 Annex F) over `out` (the ordinary arguments' f64 result)
    for f64 dx, dy: x_neg x's sign bit, y_int / flip whether y is an integer / an odd one
    beside a negative x (shared with pow64)."""
    ax, ay = dx.abs(), dy.abs()
    nan, inf, zero = b.f64(float("nan")), b.f64(_INF), b.f64(0.0)
    out = b.select(x_neg.land(y_int.not_()), nan, out)  # negative x, non-integer y

    def signed(v: X) -> X:  # v with x's sign where y is an odd integer
        return b.select(flip, -v, v)

    y_neg = b.let(dy.lt(0.0))
    # x = +-0: +-inf / +-0 by y's sign; x = +-inf: the other way round
    out = b.select(ax.eq(0.0), signed(b.select(y_neg, inf, zero)), out)
    out = b.select(ax.eq(_INF), signed(b.select(y_neg, zero, inf)), out)
    # y = +-inf: 1 for |x| = 1, else +inf where |x| > 1 and y > 0 or |x| < 1 and y < 0
    big = b.select(ax.eq(1.0), b.f64(1.0), b.select(ax.gt(1.0).ne(y_neg), inf, zero))
    out = b.select(ay.eq(_INF), big, out)
    out = b.select(dx.ne(dx).lor(dy.ne(dy)), nan, out)
    return b.select(dx.eq(1.0).lor(dy.eq(0.0)), b.f64(1.0), out)
