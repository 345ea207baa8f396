"""atan2, asin and acos of f64, in double-double on one arctangent of a quotient: below 1 ulp,
and correctly rounded unless the exact value lies within 2^-98 (relative) of the middle
of two f64 (docs/IR.md says so).

Both are K + s atan(a / b) for 0 <= a <= b (double-doubles), K in {0, pi/2, pi}, s =
+-1, and the argument's or y's sign, as atan.py's f32 form (C99 F.9.1.4's quadrants,
signed zeros and infinities by stand-in operands): atan2 takes a, b = min, max of |y|,
|x|, both scaled exactly so that b is in [1, 2) (hypot64.scale_pair; b subnormal: both
by 2^1074); asin(x) = atan2(|x|, sqrt(1 - x^2)), 1 - x^2 an exact double-double (x^2
by Veltkamp; 1 - x^2 >= 2^-53), its root atan.sqrt_dd's (within 2^-100).
atan(a/b): i = round(16 a/b), c = i/16, atan(a/b) = atan(c) + atan(u), u = (a - c b) /
(b + c a) (numerator and denominator double-doubles, c b and c a exact products, their
quotient by tan64.quotient, within a few 2^-104), |u| <= 1/32 + 2^-50, atan(c) atan.py's
table of double-doubles, atan(u) = u (1 - u^2/3 + ...) to u^23 (truncation below 2^-120)
in double-double, the terms from u^12 on in f64. Error: the quotient's 2^-102, the
series' and the sums' few 2^-104 (K + s atan(a/b) cancels at most one bit: pi/2 -
atan(<= 1) >= pi/4): within 2^-98, of which the result is the nearest f64.
A ratio a/b below 2^-60 has atan(a/b) = a/b (1 - < 2^-120): the series is skipped; where
K = 0 and a/b < 2^-1000 (results near and below the f64 subnormals) the result is IR
division's correctly rounded a / b, one subnormal lower where a / b is exactly the
middle of two subnormals (atan(a/b) is a little below a/b; `_tiny_quotient` tests the
tie exactly).
|x| < 2^-27 gives asin(x) = x (x^2/6 below a quarter ulp); asin(+-1) = +-pi/2 rounded,
|x| > 1 and NaN give NaN.
"""

from __future__ import annotations

from fractions import Fraction

from vyre.ir import nodes as N
from vyre.ir.nodes import made
from vyre.ir.types import ScalarType

from . import dd
from .atan import atan_table, sqrt_dd
from .build import Builder, X
from .exp import power_of_two
from .hypot64 import scale_pair
from .pio2_64 import PIO2
from .registry import lowering
from .sincos import nan_of
from .tan import reciprocal
from .tan64 import quotient

T = ScalarType
_TERMS = [Fraction((-1) ** n, 2 * n + 1) for n in range(12)]  # atan(u) / u in u^2
_DD_TERMS = 6  # the terms from u^12 on are below 2^-60 of atan(u): f64 is enough there
_TINY_RATIO = 2.0**-60
_SUB_RATIO = 2.0**-1000


def _atan_quotient(b: Builder, a: dd.DD, bb: dd.DD, k: dd.DD, flip: X, tiny: X) -> dd.DD:
    """K + s atan(a / bb) in double-double for 0 <= a <= bb, 1/2 <= bb < 2^53 (s = -1
    where `flip`; `tiny`: a / bb < 2^-60, the series skipped)."""
    t = a[0] * reciprocal(b, bb[0], steps=3)
    i = b.let((t * 16.0 + 0.5).cast(T.U32).min(16))
    c = b.let(i.cast(T.F64) * 0.0625)
    num = dd.add(b, a, dd.mul_d(b, bb, -c))
    den = dd.add(b, bb, dd.mul_d(b, a, c))
    u = quotient(b, num, den)
    zero = b.f64(0.0)
    zz = dd.mul(b, u, u)
    zz = (b.let(b.select(tiny, zero, zz[0])), b.let(b.select(tiny, zero, zz[1])))
    series = dd.horner(b, [dd.dd_const(b, v) for v in _TERMS], zz, _DD_TERMS)
    th = dd.add(b, atan_table(b, i), dd.mul(b, u, series))
    sgn = b.let(b.select(flip, b.f64(-1.0), b.f64(1.0)))
    return dd.add(b, k, (b.let(th[0] * sgn), b.let(th[1] * sgn)))


def _quadrant(b: Builder, swap: X, xneg: X) -> tuple[dd.DD, X]:
    """(K, flip): (0, +), (pi/2, -) for |y| > |x|; with x < 0: (pi, -), (pi/2, +)."""
    pio2 = dd.dd_const(b, PIO2)
    pi = dd.dd_const(b, 2 * PIO2)
    k_hi = b.select(swap, pio2[0], b.select(xneg, pi[0], b.f64(0.0)))
    k_lo = b.select(swap, pio2[1], b.select(xneg, pi[1], b.f64(0.0)))
    flip = b.let(swap.land(xneg.not_()).lor(swap.not_().land(xneg)))
    return (b.let(k_hi), b.let(k_lo)), flip


def _sign(b: Builder, v: X) -> X:
    """Whether f64 `v`'s sign bit is set (zeros included: the f32 cast keeps it)."""
    return (v.cast(T.F32).bitcast(T.U32) >> 31).eq(1)


def _binade(b: Builder, v: X) -> tuple[X, X]:
    """(E, v 2^-E) for a finite f64 v > 0: 2^E <= v < 2^(E + 1) (i32 E), v scaled into
    [1, 2) exactly (steps of 2^+-512 .. 2^+-64 into [2^-64, 2^64), then the f32
    exponent of that, one down where the conversion rounded up)."""
    w, off = v, b.i32(0)
    for s in (512, 256, 128, 64):
        down = b.let(w.ge(2.0**s))
        w = b.let(b.select(down, w * 2.0**-s, w))
        off = b.let(off + b.select(down, b.i32(s), b.i32(0)))
    for s in (512, 512, 256, 128, 64):  # (twice 512: from 2^-1074)
        up = b.let(w.lt(2.0**-s))
        w = b.let(b.select(up, w * 2.0**s, w))
        off = b.let(off - b.select(up, b.i32(s), b.i32(0)))
    ef = b.let(((w.cast(T.F32).bitcast(T.U32) >> 23).bitcast(T.I32)) - 127)
    ef = b.let(ef - b.select(power_of_two(b, ef).gt(w), b.i32(1), b.i32(0)))
    return b.let(off + ef), b.let(w * power_of_two(b, -ef))


def _tiny_quotient(b: Builder, a: X, bb: X) -> X:
    """atan(a / bb) for 0 <= a < bb 2^-1000 (atan(a/b) = a/b (1 - < 2^-2000)): IR
    division's q = a / bb (correctly rounded on every backend), which is the correctly
    rounded atan too (a / bb lies at least 2^-106, relatively, from a midpoint of the
    normal f64) unless a / bb is exactly the middle of two subnormals (or of the largest
    subnormal and 2^-1022) and q the upper one: then the one below (atan is a little
    smaller). Such a tie is a 2^1075 = m bb for the odd m = 2 q 2^1074 - 1 < 2^53; with
    bb = B 2^E (B in [1, 2)), a 2^(1075 - E) = m B: both sides exact (a scaled up by the
    bits of 1075 - E, a rising product; m B by Veltkamp)."""
    q = b.let(b.wrap(made(N.Binary, op="div", a=a.e, b=bb.e, ty=T.F64)))
    out = b.var(q)
    with b.when(q.le(2.0**-1022).land(a.gt(0.0))):
        e, big = _binade(b, bb)
        k = b.let(b.i32(1075) - e)  # in [52, 2149]
        scaled = a
        for bit in (1024, 512, 256, 128, 64, 32, 16, 8, 4, 2, 1):
            on = b.let((k & bit).ne(0))
            factor = 2.0 ** min(bit, 512)
            for _ in range(bit // 512 if bit > 512 else 1):
                scaled = b.let(b.select(on, scaled * factor, scaled))
        m = b.let((q * 2.0**538) * 2.0**537 - 1.0)  # 2 q 2^1074 - 1, exact
        p = dd.two_prod(b, m, big)
        tie = (scaled - p[0]).eq(p[1])  # (exact where they are close, module docstring)
        b.assign(out, b.select(tie, q - 2.0**-1074, q))
    return out


def _unit_root(b: Builder, a: X) -> dd.DD:
    """sqrt(1 - a^2) for 0 <= a < 1, a double-double: 1 - a^2 exact (a^2 by Veltkamp;
    it is >= 2^-53), its root atan.sqrt_dd's (within 2^-100). asin's and acos's."""
    sq = dd.two_prod(b, a, a)
    return sqrt_dd(b, dd.add(b, (b.f64(1.0), b.f64(0.0)), (-sq[0], -sq[1])))


@lowering("atan2", T.F64)
def atan2(b: Builder, args: tuple[X, ...]) -> X:
    y, x = args
    ay, ax = b.let(y.abs()), b.let(x.abs())
    yneg, xneg = b.let(_sign(b, y)), b.let(_sign(b, x))
    isnan = b.let(ax.ne(ax).lor(ay.ne(ay)))
    inf = float("inf")
    # stand-ins with the same atan2: inf and inf -> 1 and 1 (pi/4 per quadrant), one inf
    # -> it 1 and the other 0, both zero -> |x| = 1
    yinf, xinf = b.let(ay.eq(inf)), b.let(ax.eq(inf))
    any_inf = b.let(yinf.lor(xinf))
    ay = b.let(b.select(any_inf, b.select(yinf, b.f64(1.0), b.f64(0.0)), ay))
    ax = b.let(b.select(any_inf, b.select(xinf, b.f64(1.0), b.f64(0.0)),
                        b.select(ax.eq(0.0).land(ay.eq(0.0)), b.f64(1.0), ax)))
    ay = b.let(b.select(isnan, b.f64(1.0), ay))
    ax = b.let(b.select(isnan, b.f64(1.0), ax))
    swap = b.let(ay.gt(ax))
    lo = b.let(b.select(swap, ax, ay))
    hi = b.let(b.select(swap, ay, ax))
    k, flip = _quadrant(b, swap, xneg)
    tiny = b.let(lo.lt(hi * _TINY_RATIO))
    hs, ls, _, _ = scale_pair(b, hi, lo, b.let(hi.lt(2.0**-1022)))
    r = _atan_quotient(b, (ls, b.f64(0.0)), (hs, b.f64(0.0)), k, flip, tiny)[0]
    # K = 0 and a result near the subnormals: the quotient itself (docstring)
    sub = b.let(lo.lt(hi * _SUB_RATIO).land(k[0].eq(0.0)))
    out = b.var(r)
    with b.when(sub):
        b.assign(out, _tiny_quotient(b, lo, hi))
    out2 = b.select(yneg, -out, out)
    return b.select(isnan, nan_of(b, T.F64), out2)


@lowering("asin", T.F64)
def asin(b: Builder, args: tuple[X, ...]) -> X:
    (x,) = args
    ax = b.let(x.abs())
    bad = b.let(ax.gt(1.0).lor(x.ne(x)))  # |x| > 1 or NaN
    one = b.let(ax.eq(1.0))
    small = b.let(ax.lt(2.0**-27))
    a = b.let(b.select(bad.lor(one).lor(small), b.f64(0.5), ax))  # stand-in
    root = _unit_root(b, a)
    swap = b.let(a.gt(root[0]))
    lo = (b.let(b.select(swap, root[0], a)), b.let(b.select(swap, root[1], b.f64(0.0))))
    hi = (b.let(b.select(swap, a, root[0])), b.let(b.select(swap, b.f64(0.0), root[1])))
    k, flip = _quadrant(b, swap, b.const(T.BOOL, False))
    # (lo >= 2^-27 hi and hi in [0.7, 1]: no scaling, no tiny ratio)
    r = _atan_quotient(b, lo, hi, k, flip, b.const(T.BOOL, False))[0]
    r = b.select(one, b.f64(float(PIO2)), b.select(small, ax, r))
    r = b.select(_sign(b, x), -r, r)
    return b.select(bad, nan_of(b, T.F64), r)


@lowering("acos", T.F64)
def acos(b: Builder, args: tuple[X, ...]) -> X:
    """acos(x) = atan2(sqrt(1 - x^2), x): atan2's quadrants on (root, |x|) with x's sign
    (K = pi/2 where root > |x|, else 0 or pi), the root as asin's. max(root, |x|) is in
    [0.7, 1] (no scaling); their ratio is at least 2^-27 but where x is near 0, where the
    series is skipped below 2^-60 as in atan2; K = 0 only for x > 0.7, whose acos is far
    above the subnormals. acos(1) = +0, acos(-1) = pi rounded, |x| > 1 and NaN give NaN."""
    (x,) = args
    ax = b.let(x.abs())
    bad = b.let(ax.gt(1.0).lor(x.ne(x)))  # |x| > 1 or NaN
    one = b.let(ax.eq(1.0))
    a = b.let(b.select(bad.lor(one), b.f64(0.5), ax))  # stand-in
    xneg = b.let(_sign(b, x))
    root = _unit_root(b, a)
    swap = b.let(root[0].gt(a))
    lo = (b.let(b.select(swap, a, root[0])), b.let(b.select(swap, b.f64(0.0), root[1])))
    hi = (b.let(b.select(swap, root[0], a)), b.let(b.select(swap, root[1], b.f64(0.0))))
    k, flip = _quadrant(b, swap, xneg)
    tiny = b.let(lo[0].lt(hi[0] * _TINY_RATIO))
    r = _atan_quotient(b, lo, hi, k, flip, tiny)[0]
    r = b.select(one, b.select(xneg, b.f64(float(2 * PIO2)), b.f64(0.0)), r)
    return b.select(bad, nan_of(b, T.F64), r)
