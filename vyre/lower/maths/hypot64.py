"""hypot of f64, correctly rounded (exact ties included), with no f64 division.

Operands |x|, |y| as big >= small. Scaling (exact): a normal big goes to [1, 2) by
powers of two (eight coarse steps of 2^+-512 .. 2^+-64, then the f32 exponent of the
rest), small with it after a small below big 2^-60 is taken as 0 (hypot is then big (1 +
< 2^-121), whose rounding is big); a subnormal big (and small) is scaled by 2^1074, so the
result's grid, the subnormals and the binade above them, is the integers. Either way the
squares are exact double-doubles (Veltkamp) and their sum S is a double-double within
2^-105; c = sqrt(S_hi) (IR sqrt: any result within an ulp would do) and one Newton
correction (S - c^2) / (2c) with tan.py's reciprocal give sqrt(S) as (rh, rl) within
2^-103. The result is rh (its grid's nearest value to rh + rl) unless rh + rl lies within
2^-97 of a midpoint m = rh +- half a step (on the integer grid: the nearest integer
+- 1/2): there the sign of S - m^2, exactly, says which side (or a tie, rounded to even),
from eight exact f64 terms (the squares' double-doubles, c^2's, c * step, step^2 / 4),
all multiples of 2^-224 after the scaling, summed by Ogita, Rump and Oishi's SumK with K
= 5 (error below 2^-241: the sign and zero are exact). Scaled back exactly (overflow
gives inf where the rounded result does). C99 Annex F: +inf if either is infinite (even
beside a NaN), else NaN for a NaN, hypot(+-0, +-0) = +0.
"""

from __future__ import annotations

from vyre.ir import nodes as N
from vyre.ir.nodes import made
from vyre.ir.types import ScalarType

from . import dd
from .build import Builder, X
from .exp import power_of_two
from .registry import lowering
from .tan import reciprocal

T = ScalarType
_INF = float("inf")
_SUB = 2.0**-1022  # a big below it: the subnormal scaling
_HALF_SUB = 2.0**537  # 2^1074 = _HALF_SUB^2
_COARSE = (512, 256, 128, 64)
_NEAR = 2.0**-97  # rh + rl within this of a midpoint (relative): the exact test
_K = 5  # SumK's passes: error below 2^-241 for eight terms of sum <= 32


def scale_pair(b: Builder, big: X, small: X, sub: X) -> tuple[X, X, X, list[tuple[X, float]]]:
    """(big, small) scaled exactly (big into [1, 2), or both by 2^1074 where `sub`) and
    what undoes it: 2^ef (i32 ef) after the (condition, power of two) factors of the
    subnormal scaling, then the coarse ones, last first."""
    undo: list[tuple[X, float]] = []
    for s in _COARSE:
        down = b.let(big.ge(2.0**s))
        big, small = (b.let(b.select(down, v * 2.0**-s, v)) for v in (big, small))
        undo.append((down, 2.0**s))
    for s in _COARSE:
        up = b.let(big.lt(2.0**-s).land(sub.not_()))
        big, small = (b.let(b.select(up, v * 2.0**s, v)) for v in (big, small))
        undo.append((up, 2.0**-s))
    ef = b.let(((big.cast(T.F32).bitcast(T.U32) >> 23).bitcast(T.I32)) - 127)
    # the f32 conversion may round big up to the next power of two: one down there
    ef = b.let(ef - b.select(power_of_two(b, ef).gt(big), b.i32(1), b.i32(0)))
    ef = b.let(b.select(sub, b.i32(0), ef))  # (subnormals: ef = -127, unused)
    down = b.let(power_of_two(b, -ef))
    big, small = b.let(big * down), b.let(small * down)
    for _ in range(2):
        big, small = (b.let(b.select(sub, v * _HALF_SUB, v)) for v in (big, small))
    return big, small, ef, [(sub, 1 / _HALF_SUB), (sub, 1 / _HALF_SUB), *reversed(undo)]


def _sum_sign(b: Builder, terms: list[X]) -> X:
    """sum(terms) within 2^-241 + 2^-52 of it (SumK, K = _K: passes of error-free TwoSums,
    then the plain sum), for the sign of an exact sum of multiples of 2^-224."""
    p = list(terms)
    for _ in range(_K - 1):
        for i in range(1, len(p)):
            p[i], p[i - 1] = dd.two_sum(b, p[i], p[i - 1])
    acc = p[0]
    for v in p[1:-1]:
        acc = acc + v
    return b.let(p[-1] + acc)


def _root(b: Builder, bs: X, ss: X, sub: X) -> X:
    """sqrt(bs^2 + ss^2) rounded to its grid (scaled: 53 bits, or the integers where
    `sub`), for bs in [1, 2) (or [1, 2^52] where `sub`) and 2^-60 bs <= ss <= bs or 0."""
    p = dd.two_prod(b, bs, bs)
    q = dd.two_prod(b, ss, ss)
    s = dd.add(b, p, q)
    c = b.let(b.wrap(made(N.Call, fn="sqrt", args=(s[0].e,), ty=T.F64)))
    c2 = dd.two_prod(b, c, c)
    e = b.let(((s[0] - c2[0]) - c2[1]) + s[1])  # S - c^2 (s_hi - c2_hi exact: Sterbenz)
    rh, rl = dd.fast_two_sum(b, c, b.let(e * (reciprocal(b, c) * 0.5)))
    # the candidate on the grid and the offset of rh + rl from it
    int_c = b.let(b.select(rh.ge(2.0**52), rh, (rh + 2.0**52) - 2.0**52))
    c0 = b.let(b.select(sub, int_c, rh))
    f = b.let(b.select(sub, (rh - int_c) + rl, rl))
    up = b.let(f.gt(0.0))
    # the step toward f: 1 on the integers; else ulp(c0) up, or down (half at 1 and 2)
    u_up = b.select(c0.ge(2.0), b.f64(2.0**-51), b.f64(2.0**-52))
    u_dn = b.select(c0.gt(2.0), b.f64(2.0**-51),
                    b.select(c0.gt(1.0), b.f64(2.0**-52), b.f64(2.0**-53)))
    u = b.let(b.select(sub, b.f64(1.0), b.select(up, u_up, u_dn)))
    su = b.let(b.select(up, u, -u))  # the signed step
    r = b.var(c0)
    near = f.abs().ge(u * 0.5 - rh * _NEAR)
    with b.when(near):
        # S - m^2 for m = c0 + su / 2: m^2 = c0^2 + c0 su + u^2 / 4, all exact
        m2 = dd.two_prod(b, c0, c0)
        d = _sum_sign(b, [p[0], p[1], q[0], q[1], -m2[0], -m2[1], -(c0 * su), -(u * u * 0.25)])
        thr = b.select(sub, b.f64(0.125), b.f64(2.0**-226))  # below the terms' grid
        beyond = b.select(up, d.gt(thr), d.lt(-thr))
        tie = d.abs().le(thr)
        mq = b.let(c0 + su * 0.5)  # a tie rounded to even (53 bits: the add does it)
        even = b.select(sub.land(mq.lt(2.0**52)), (mq + 2.0**52) - 2.0**52, mq)
        b.assign(r, b.select(beyond, c0 + su, b.select(tie, even, c0)))
    return r


@lowering("hypot", T.F64)
def hypot(b: Builder, args: tuple[X, ...]) -> X:
    x, y = args
    ax, ay = b.let(x.abs()), b.let(y.abs())
    inf = b.let(ax.eq(_INF).lor(ay.eq(_INF)))
    nan = b.let(ax.ne(ax).lor(ay.ne(ay)))
    zero = b.let(ax.eq(0.0).land(ay.eq(0.0)))
    plain = b.let(inf.lor(nan).lor(zero).not_())
    fx, fy = b.let(b.select(plain, ax, b.f64(1.0))), b.let(b.select(plain, ay, b.f64(1.0)))
    xbig = b.let(fx.ge(fy))
    big = b.let(b.select(xbig, fx, fy))
    small = b.let(b.select(xbig, fy, fx))
    sub = b.let(big.lt(_SUB))
    # a small below big 2^-60 changes nothing (module docstring); 0 keeps the scaling exact
    small = b.let(b.select(sub.not_().land(small.lt(big * 2.0**-60)), b.f64(0.0), small))
    bs, ss, ef, undo = scale_pair(b, big, small, sub)
    r = _root(b, bs, ss, sub)
    for cond, factor in undo[:2]:  # the subnormal scaling: exact (the grid's integers)
        r = b.let(b.select(cond, r * factor, r))
    r = b.let(r * power_of_two(b, ef))
    for cond, factor in undo[2:]:  # exact, in reverse order (only the last may overflow)
        r = b.let(b.select(cond, r * factor, r))
    out = b.select(zero, b.f64(0.0), b.select(nan, b.f64(float("nan")), r))
    return b.select(inf, b.f64(_INF), out)
