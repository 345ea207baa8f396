"""atan2 and asin of f32 and f16, correctly rounded, on one arctangent of a quotient.

Both are K + s * atan(a / b) for positive a <= b (double-doubles), K in {0, pi/2, pi},
s = +-1, and the argument's or y's sign: atan2(y, x) takes a, b = min, max of |y|, |x|
(K = pi/2 where |y| > |x|, then pi minus that for a negative x: C99 F.9.1.4's
quadrants, signed zeros and infinities by stand-in operands), asin(x) =
atan2(|x|, sqrt(1 - x^2)) with 1 - x^2 a double-double (x^2 exact, the difference
within 2^-82 relative: 1 - x^2 >= 2^-23) and its square root from an f32 estimate of
1/sqrt (bit trick), five f64 Newton steps and one double-double correction (within
2^-100 of the root of that double-double); asin(+-1) = +-pi/2, |x| > 1 and NaN give NaN.

atan(a/b) without division: i = round(16 a/b) (from a three-step Newton reciprocal, so
within 2^-20), atan(a/b) = atan(i/16) + atan(u), u = (a - c b) / (b + c a), c = i/16,
|u| <= 1/32 + 2^-20 (numerator and denominator as double-doubles, their quotient by a
five-step Newton reciprocal of the denominator), atan(i/16) a table of double-doubles
(IR `Table`s), atan(u) its Taylor series: in f64 to u^13 (truncation below 2^-70)
for the fast path, in double-double to u^23 (the terms from u^9 on in f64) for the slow
path. Fast path error: u within 2^-51, the sums within 2^-52 (a cancellation of one bit
where i = 1): below 2^-50, so `FAST_ERR` = 2^-48. b is first scaled by a power of two (a with it) into [2^-64, 2^64]
so the reciprocal's f32 estimate neither overflows nor meets subnormals.
"""

from __future__ import annotations

from decimal import Decimal, localcontext
from fractions import Fraction

from vyre.ir.types import ScalarType

from . import dd
from .build import Builder, X
from .dd import reciprocal
from .pio2 import PIO2
from .registry import lowering
from .rounding import finish

T = ScalarType
FAST_ERR = 2.0**-48
_FAST_TERMS = [(-1) ** n / (2 * n + 1) for n in range(1, 7)]  # atan(u) = u + u z P(z)
_SLOW_TERMS = [Fraction((-1) ** n, 2 * n + 1) for n in range(12)]


def _atan_table() -> list[tuple[float, float]]:
    """atan(i/16), i = 0..16, as double-doubles (decimal at 60 digits: atan's argument
    halved four times, t / (1 + sqrt(1 + t^2)), then its Taylor series)."""
    out = []
    with localcontext() as c:
        c.prec = 60
        for i in range(17):
            t = Decimal(i) / 16
            for _ in range(4):
                t = t / (1 + (1 + t * t).sqrt())
            s, term, k = Decimal(0), t, 1
            while term and abs(term) > Decimal(10) ** -62:
                s += term / k
                term = -term * t * t
                k += 2
            out.append(dd.split_const(Fraction(s * 16)))
    return out


_ATAN = _atan_table()


def atan_table(b: Builder, i: X) -> dd.DD:
    """atan(i / 16) for u32 i in 0..16, a double-double."""
    return b.let(b.table(i, [h for h, _ in _ATAN])), b.let(b.table(i, [lo for _, lo in _ATAN]))


def _horner(z: X, cs: list[float]) -> X:
    acc = z * cs[-1] + cs[-2]
    for c in reversed(cs[:-2]):
        acc = z * acc + c
    return acc


def _dd_scale(b: Builder, v: dd.DD, s: X) -> dd.DD:
    return b.let(v[0] * s), b.let(v[1] * s)


def atan_ratio(b: Builder, ty: ScalarType, a: dd.DD, bb: dd.DD, k: dd.DD, flip: X,
               neg: X) -> X:
    """K + s atan(a / bb) rounded once to `ty`, for 0 <= a <= bb, 0 < bb finite (s = -1
    where `flip`), negated where `neg`."""
    # a power of two (exact) bringing bb into [2^-64, 2^64]; a / bb unchanged
    scale = b.let(b.select(bb[0].gt(2.0**64), b.f64(2.0**-64),
                           b.select(bb[0].lt(2.0**-64), b.f64(2.0**64), b.f64(1.0))))
    a = _dd_scale(b, a, scale)
    bb = _dd_scale(b, bb, scale)
    t = a[0] * reciprocal(b, bb[0], steps=3)
    i = b.let((t * 16.0 + 0.5).cast(T.U32).min(16))
    c = b.let(i.cast(T.F64) * 0.0625)
    num = dd.add(b, a, dd.mul_d(b, bb, -c))
    den = dd.add(b, bb, dd.mul_d(b, a, c))
    inv = reciprocal(b, den[0])
    u = b.let((num[0] + num[1]) * inv)
    z = b.let(u * u)
    p = u + u * z * _horner(z, _FAST_TERMS)
    at = atan_table(b, i)
    sgn = b.let(b.select(flip, b.f64(-1.0), b.f64(1.0)))
    y = (k[0] + sgn * at[0]) + (k[1] + sgn * (at[1] + p))
    y = b.let(y)
    y = b.select(neg, -y, y)

    def slow() -> dd.DD:
        u1 = b.let(num[0] * inv)
        e = dd.add(b, num, dd.mul_d(b, den, -u1))  # num - den u1, nearly exact
        uu = dd.fast_two_sum(b, u1, b.let(e[0] * inv))
        zz = dd.mul(b, uu, uu)
        # (the terms from u^9 on, below 2^-43 of atan(u), in f64)
        series = dd.horner(b, [dd.dd_const(b, v) for v in _SLOW_TERMS], zz, 4)
        th = dd.add(b, at, dd.mul(b, uu, series))
        r = dd.add(b, k, (b.let(th[0] * sgn), b.let(th[1] * sgn)))
        return b.select(neg, -r[0], r[0]), b.select(neg, -r[1], r[1])

    return finish(b, ty, y, FAST_ERR, slow)


def quiet_nan(b: Builder, ty: ScalarType) -> X:
    return b.u32(0x7FC00000).bitcast(T.F32).cast(ty)


def atan2_dd(b: Builder, ty: ScalarType, ay: dd.DD, ax: dd.DD, xneg: X, yneg: X) -> X:
    """atan2 of |y| = ay, |x| = ax (finite double-doubles, not both zero) with the signs
    xneg, yneg, rounded once to `ty` (C99 F.9.1.4 quadrants)."""
    swap = b.let(ay[0].gt(ax[0]))
    lo = (b.let(b.select(swap, ax[0], ay[0])), b.let(b.select(swap, ax[1], ay[1])))
    hi = (b.let(b.select(swap, ay[0], ax[0])), b.let(b.select(swap, ay[1], ax[1])))
    # K + s atan(lo / hi): (0, +), (pi/2, -) for |y| > |x|; with x < 0: (pi, -), (pi/2, +)
    pio2 = dd.dd_const(b, PIO2)
    pi = dd.dd_const(b, 2 * PIO2)
    k_hi = b.select(swap, pio2[0], b.select(xneg, pi[0], b.f64(0.0)))
    k_lo = b.select(swap, pio2[1], b.select(xneg, pi[1], b.f64(0.0)))
    flip = b.let(swap.land(xneg.not_()).lor(swap.not_().land(xneg)))
    return atan_ratio(b, ty, lo, hi, (b.let(k_hi), b.let(k_lo)), flip, yneg)


@lowering("atan2", T.F32, T.F16)
def atan2(b: Builder, args: tuple[X, ...]) -> X:
    y, x = args
    ty = y.ty
    yd, xd = b.let(y.cast(T.F64)), b.let(x.cast(T.F64))  # (flush mode: subnormals read 0)
    ay, ax = b.let(yd.abs()), b.let(xd.abs())
    yneg = b.let((yd.cast(T.F32).bitcast(T.U32) >> 31).eq(1))
    xneg = b.let((xd.cast(T.F32).bitcast(T.U32) >> 31).eq(1))
    # stand-ins with the same atan2: inf and inf -> 1 and 1 (pi/4 per quadrant), one inf
    # -> it 1 and the other 0, both zero -> |x| = 1
    yinf, xinf = b.let(ay.gt(3.5e38)), b.let(ax.gt(3.5e38))
    any_inf = b.let(yinf.lor(xinf))
    ay = b.select(any_inf, b.select(yinf, b.f64(1.0), b.f64(0.0)), ay)
    ax = b.select(any_inf, b.select(xinf, b.f64(1.0), b.f64(0.0)),
                  b.select(ax.eq(0.0).land(ay.eq(0.0)), b.f64(1.0), ax))
    out = atan2_dd(b, ty, (b.let(ay), b.f64(0.0)), (b.let(ax), b.f64(0.0)), xneg, yneg)
    isnan = b.let(xd.ne(xd).lor(yd.ne(yd)))
    return b.select(isnan, quiet_nan(b, ty), out)


def sqrt_dd(b: Builder, w: dd.DD) -> dd.DD:
    """sqrt(w) for a double-double 2^-60 < w <= 1: an f32 1/sqrt estimate (within 3.5%),
    five Newton steps y (3 - w y^2) / 2, s = w y and s + (w - s^2) y / 2."""
    wh = w[0]
    y = b.let((b.u32(0x5F3759DF) - (wh.cast(T.F32).bitcast(T.U32) >> 1)).bitcast(T.F32)
              .cast(T.F64))
    for _ in range(5):
        y = b.let(y * (1.5 - (wh * 0.5) * (y * y)))
    s = b.let(wh * y)
    sq = dd.two_prod(b, s, s)
    resid = (wh - sq[0]) - sq[1] + w[1]  # w - s^2: wh - sq[0] is exact (Sterbenz)
    return dd.fast_two_sum(b, s, b.let(resid * y * 0.5))


@lowering("asin", T.F32, T.F16)
def asin(b: Builder, args: tuple[X, ...]) -> X:
    x = args[0]
    ty = x.ty
    xd = b.let(x.cast(T.F64))
    ax = b.let(xd.abs())
    neg = b.let((xd.cast(T.F32).bitcast(T.U32) >> 31).eq(1))
    bad = b.let(ax.gt(1.0).lor(xd.ne(xd)))  # |x| > 1 or NaN
    one = b.let(ax.eq(1.0))
    a = b.let(b.select(bad.lor(one), b.f64(0.5), ax))  # stand-in for the special ones
    sq = dd.two_prod(b, a, a)
    w = dd.add(b, (b.f64(1.0), b.f64(0.0)), (-sq[0], -sq[1]))  # 1 - a^2 >= 2^-23
    out = atan2_dd(b, ty, (a, b.f64(0.0)), sqrt_dd(b, w), b.const(T.BOOL, False), neg)
    pio2 = b.u32(0x3FC90FDB).bitcast(T.F32)  # f32(pi/2), correctly rounded
    half_pi = b.select(neg, -pio2, pio2).cast(ty)
    return b.select(bad, quiet_nan(b, ty), b.select(one, half_pi, out))
