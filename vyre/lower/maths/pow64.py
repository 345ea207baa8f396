"""pow (f64): e^(y log|x|) in double-double, rounded once.

log|x| comes from log64's reduction as a double-double, w = y log|x| = mul_d (an exact
product and y times the low part), then e^w by exp64's table method with w's low part
in t (exp64.reduce), w clamped to [-746, 710], beyond which the result is 0 or inf.
Fast path: log|x| with four double-double steps of its series (relative error < 2^-80,
so w's absolute error is below 745 * 2^-80 < 2^-70), e^w's fast path (2^-66): relative
error < 2^-65.5, `FAST_ERR` = 2^-63 with room. Slow path: log64's slow log|x| (< 2^-100
relative) times y, exp64's slow path: the result's relative error is below |w| 2^-100 +
2^-102 (kf = 0, |w| < ln2 / 128: 1 + (e^t - 1) is summed exactly, dd.sum3, and the
bound is |w| 2^-100). Exact midpoints exist (pow(2^27 - 1, 2), pow(s^2, 1.5) = s^3 for
an 18-bit s, pow(2^86, -12.5) = 2^-1075 between 0 and the smallest subnormal) and a
double-double cannot show them exactly, so where one can exist (y = n / 2^k, k <= 5,
and y > 1, or x a power of two: an exact result is (x^(1/2^k))^n, and a midpoint needs
54 bits from a root of at most 53 / 2^k) a slow value within twice that bound
(`_TIE_W` |w| + `_TIE_TABLE`) of a midpoint is rounded as the midpoint, to even
(rounding64.round_scaled). So pow is correctly rounded except where its value lies
within the slow path's error of a midpoint (below 745 * 2^-98 + 2^-100 < 2^-88 relative)
without being on it; the error is then below 0.5 ulp + 2^-35 ulp. Pairs that close
exist among the 2^128 (pow(DBL_MAX, 0.5) lies 2^-109 from one; a double-double gets it
right there, but no bound says so); none of the tested random pairs is one (docs/IR.md).
Special values: C99 Annex F, as the f32 pow (pow(x, +-0) = 1 and pow(1, y) = 1 even
for NaN, pow(-1, +-inf) = 1, a negative x with a non-integer y is NaN, the signs of
pow(+-0, y) and pow(-inf, y) from y's parity).
"""

from __future__ import annotations

from vyre.ir.types import ScalarType

from . import dd, exp64, log64
from .build import Builder, X
from .pow import annex_f
from .registry import lowering

T = ScalarType
FAST_ERR = 2.0**-63
_TIE_W, _TIE_TABLE = 2.0**-98, 2.0**-100  # (module docstring)
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

    # the slow value's error bound, doubled: |w| 2^-100 from log|x|, plus the table
    # product's 2^-101 where kf != 0 (kf = 0: 1 + (e^t - 1) summed exactly, dd.sum3)
    tol = zh.abs() * _TIE_W + b.select(kf.eq(0.0), b.f64(0.0), b.f64(_TIE_TABLE))
    # exact midpoints need y = n / 2^k (k <= 5) and y > 1, or x a power of two (r = 0:
    # 2^-1075 = pow(2^86, -12.5)); elsewhere no tie tolerance (module docstring)
    y32 = b.let(y.abs() * 32.0)
    dyadic = y32.ge(2.0**52).lor(((y32 + 2.0**52) - 2.0**52).eq(y32))
    ties = dyadic.land(y.gt(1.0).lor(red.r[0].eq(0.0)))
    tol = b.let(b.select(ties, tol, b.f64(0.0)))
    return exp64.pow_e(b, kf, t, slow_t, FAST_ERR, tol)


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
    return annex_f(b, x, y, x_neg, y_int, flip, b.select(flip, -m, m))
