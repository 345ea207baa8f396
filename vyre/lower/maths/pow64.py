"""pow (f64): e^(y log|x|) in double-double, rounded once.

log|x| comes from log64's reduction as a double-double, w = y log|x| = mul_d (an exact
product and y times the low part), then e^w by exp64's table method with w's low part
in t (exp64.reduce), w clamped to [-746, 710], beyond which the result is 0 or inf.
Fast path: log|x| with four double-double steps of its series (relative error < 2^-80,
so w's absolute error is below 745 * 2^-80 < 2^-70), e^w's fast path (2^-66): relative
error < 2^-65.5, `FAST_ERR` = 2^-63 with room. Slow path: log64's slow log|x| (< 2^-100
relative) times y, exp64's slow path: w's absolute error below 745 * 2^-99, the result's
relative error below 2^-89. Exact results (pow(9, 0.5) = 3, pow(2^-537, 2) = 2^-1074)
and exact midpoints (pow(2^27 - 1, 2), pow(s^2, 1.5) = s^3 for an 18-bit s) come out
within that bound of a value of the grid or of a midpoint, so a slow value within
`_TIE` = 2^-86 (relative) of a midpoint is rounded as that midpoint (to even;
rounding64.round_scaled): pow's error is below 0.5 ulp + 2^-33 ulp, and it is correctly
rounded except where the exact value lies within 2^-86 of a midpoint without being on it
(such argument pairs exist among the 2^128 but none of the tested ones is one; docs/IR.md).
Special values: C99 Annex F, as the f32 pow (pow(x, +-0) = 1 and pow(1, y) = 1 even
for NaN, pow(-1, +-inf) = 1, a negative x with a non-integer y is NaN, the signs of
pow(+-0, y) and pow(-inf, y) from y's parity).
"""

from __future__ import annotations

from vyre.ir.types import ScalarType

from . import dd, exp64, log64
from .build import Builder, X
from .registry import lowering

T = ScalarType
FAST_ERR = 2.0**-63
_TIE = 2.0**-86
_INF = float("inf")
_FAST_LOG = (log64.FAST[0], 4)  # four double-double steps: w's error below 2^-70


def _magnitude(b: Builder, ax: X, y: X) -> X:
    """|x|^y for finite nonzero f64 ax > 0 and y."""
    red = log64.reduce(b, ax)

    def w(log: dd.DD) -> dd.DD:
        return dd.mul_d(b, log, y)

    wh, wl = w(log64.log_value(b, red, *_FAST_LOG, base2=False))
    clamped = b.let(wh.gt(710.0).lor(wh.lt(-746.0)))
    zh = b.let(wh.max(-746.0).min(710.0))
    kf, t = exp64.reduce(b, zh, b.let(b.select(clamped, b.f64(0.0), wl)))

    def slow_t() -> dd.DD:
        sh, sl = w(log64.log_value(b, red, *log64.SLOW, base2=False))
        # the same kf: the slow w differs from the fast one by far less than ln2 / 128
        sh = b.let(b.select(clamped, zh, sh))
        sl = b.let(b.select(clamped, b.f64(0.0), sl))
        return exp64.reduce(b, sh, sl, kf)[1]

    return exp64.pow_e(b, kf, t, slow_t, FAST_ERR, _TIE)


@lowering("pow", T.F64)
def pow_(b: Builder, args: tuple[X, ...]) -> X:
    x, y = args
    ax, ay = b.let(x.abs()), b.let(y.abs())
    x_neg = b.let((x.cast(T.F32).bitcast(T.U32) >> 31).eq(1))  # (-0 included)
    # integers: |y| >= 2^52, or |y| + 2^52 - 2^52 = |y|; odd: |y| / 2 (exact) is not
    y_int = b.let(ay.ge(2.0**52).lor(((ay + 2.0**52) - 2.0**52).eq(ay)))
    half = b.let(ay.min(2.0**53) * 0.5)
    y_odd = b.let(y_int.land(ay.lt(2.0**53)).land(((half + 2.0**52) - 2.0**52).ne(half)))
    ordinary = b.let(ax.lt(_INF).land(ax.gt(0.0)).land(ay.lt(_INF)).land(ay.gt(0.0)))
    vx = b.let(b.select(ordinary, ax, b.f64(2.0)))
    # |y| >= 2^64 makes |w| >= 2^11 unless |x| = 1: clamped (and the split of y exact)
    vy = b.let(b.select(ordinary, y.max(-(2.0**64)).min(2.0**64), b.f64(1.0)))
    flip = b.let(x_neg.land(y_odd))
    m = b.select(ax.eq(1.0), b.f64(1.0), _magnitude(b, vx, vy))  # (-1)^integer: +-1
    out = b.select(flip, -m, m)
    nan, inf, zero = b.f64(float("nan")), b.f64(_INF), b.f64(0.0)
    out = b.select(x_neg.land(y_int.not_()), nan, out)  # negative x, non-integer y

    def signed(v: X) -> X:  # v with x's sign where y is an odd integer
        return b.select(flip, -v, v)

    y_neg = b.let(y.lt(0.0))
    # x = +-0: +-inf / +-0 by y's sign; x = +-inf: the other way round
    out = b.select(ax.eq(0.0), signed(b.select(y_neg, inf, zero)), out)
    out = b.select(ax.eq(_INF), signed(b.select(y_neg, zero, inf)), out)
    # y = +-inf: 1 for |x| = 1, else +inf where |x| > 1 and y > 0 or |x| < 1 and y < 0
    big = b.select(ax.eq(1.0), b.f64(1.0), b.select(ax.gt(1.0).ne(y_neg), inf, zero))
    out = b.select(ay.eq(_INF), big, out)
    out = b.select(x.ne(x).lor(y.ne(y)), nan, out)
    return b.select(x.eq(1.0).lor(y.eq(0.0)), b.f64(1.0), out)
