"""The last step of an f64 function lowering: a double-double value times 2^e rounded once
to f64, correctly, with IR operations every backend computes exactly.

`finish_f64(b, hi, lo, e, rel_err, slow)`: (hi, lo) is the fast path's approximation of
the function's value divided by 2^e (hi = RN(hi + lo), |hi| in [0.5, 4), relative error
<= rel_err), e an i32 in [-1086, 1087]. Where the whole interval (hi + lo)(1 +- rel_err)
rounds to one f64 (the test RN(hi + (lo + err)) == RN(hi + (lo - err)), err =
|hi| rel_err; rounding is monotonic, and lo +- err is rounded far below ulp(hi) / 2) and
the result is normal, that f64 times 2^e (exact; overflow to inf where it rounds there)
is the result. Elsewhere (about rel_err * 2^53 of arguments, and every result below
2^-1021) `slow()` (a double-double of relative error ~2^-100, made under an `if`) is
rounded by `round_scaled`: a normal result is hi * 2^e (hi = RN(hi + lo): correct unless
the exact value is within the slow path's error of a midpoint), a subnormal one is
rounded on its grid of 2^-1074 from hi and lo together (no double rounding), then scaled
exactly. Every intermediate stays a normal f64 (2^e is two exact factors: a power of two
from f32 bits and an IR `Table` of 2^(64 q)); only the final product may be subnormal.
"""

from __future__ import annotations

from collections.abc import Callable

from vyre.ir.types import ScalarType

from .build import Builder, X
from .dd import DD, round3

T = ScalarType
_Q_MIN, _Q_MAX = -15, 15  # 2^e = 2^s * 2^(64 q): s in [-126, 127] for e in [-1086, 1087]
_POW64 = [2.0 ** (64 * q) for q in range(_Q_MIN, _Q_MAX + 1)]
_TWO52 = 2.0**52


def _pow2_f32(b: Builder, s: X) -> X:
    """2^s as f64 for i32 s in [-126, 127] (from f32 bits: exact)."""
    return ((s + 127).bitcast(T.U32) << 23).bitcast(T.F32).cast(T.F64)


def scale(b: Builder, v: X, e: X) -> X:
    """v * 2^e for i32 e in [-1086, 1087], rounded once (exact where the product is a
    normal f64): (v * 2^s) * 2^(64 q), the first product exact for |v| < 2^800 (other e
    give some value, for results a caller selects away)."""
    q = b.let((e >> 6).max(_Q_MIN).min(_Q_MAX))
    s = (e - (q << 6)).max(-126).min(127)
    return (v * _pow2_f32(b, s)) * b.table((q - _Q_MIN).bitcast(T.U32), _POW64)


def _near_tie(b: Builder, h: X, lo: X, third: X | None, tie_tol: float | X) -> X:
    """RN(h + lo + third), h > 0 = RN(h + lo), with a value within tie_tol * h of a
    midpoint rounded as that midpoint: h's neighbour on lo's side is RN(h +- h (2^-53 +
    2^-105)) (the step lies strictly between half an ulp and an ulp, on both sides of a
    power of two), half the gap is exact, and h + half rounds a true midpoint to even."""
    c = b.let(h * (2.0**-53 + 2.0**-105))
    half = b.let((b.select(lo.gt(0.0), h + c, h - c) - h) * 0.5)
    off = lo - half if third is None else (lo - half) + third
    near = off.abs().le(h * tie_tol)
    return b.select(near, h + half, h if third is None else round3(b, h, lo, third))


def round_scaled(b: Builder, hi: X, lo: X, e: X, third: X | None = None,
                 tie_tol: float | X = 0.0) -> X:
    """(hi + lo) * 2^e rounded to nearest even f64, for hi = RN(hi + lo) >= 0 in [0.5, 4)
    (or hi + lo = 0) and i32 e in [-1086, 1087]: hi * 2^e where that is normal (or
    overflows), else the subnormal grid: u = (hi + lo) 2^(e + 1074) rounded to an integer
    t (u + 2^52 - 2^52 rounds hi, the remainder (u - t) + lo 2^(e + 1074) moves it by one
    where it passes a half), times 2^-1074 (exact). `third`: a third term beyond lo
    (dd.sum3), which decides a normal result where hi + lo is exactly a midpoint.
    `tie_tol` > 0 (or an f64 expression): a value within tie_tol (relative) of a
    midpoint is rounded as that midpoint, to even (for pow, whose exact midpoint results
    a double-double cannot hold exactly)."""
    s = b.let((e + 1074).min(60))
    p = b.let(_pow2_f32(b, s.max(-120)))
    u = b.let(hi * p)  # exact and normal (s >= -12 for e >= -1086)
    sub = b.let(u.lt(_TWO52).land(e.lt(-1020)))
    t = b.let((u + _TWO52) - _TWO52)
    rest = b.let((u - t) + lo * p)
    t1 = t + b.select(rest.gt(0.5), b.f64(1.0), b.select(rest.lt(-0.5), b.f64(-1.0), b.f64(0.0)))
    ties = isinstance(tie_tol, X) or tie_tol > 0
    if ties:  # a tie at t +- 1/2 (exact in f64) rounded to an even integer
        tie = b.let(b.select(rest.gt(0.0), t + 0.5, t - 0.5))
        near = (rest.abs() - 0.5).abs().le(u * tie_tol)
        t1 = b.select(near, (tie + _TWO52) - _TWO52, t1)
    tiny = (t1 * 2.0**-537) * 2.0**-537  # exact: an integer <= 2^52 times 2^-1074
    if ties:
        top = _near_tie(b, hi, lo, third, tie_tol)
    else:
        top = hi if third is None else round3(b, hi, lo, third)
    return b.select(sub, tiny, scale(b, top, e))


def finish_f64(b: Builder, hi: X, lo: X, rel_err: float,
               slow: Callable[[], DD | tuple[X, X, X]], e: X | None = None,
               tie_tol: float | X = 0.0) -> X:
    """(hi + lo) * 2^e (the fast path's value, relative error <= rel_err; hi = RN(hi +
    lo)) rounded once to f64, with `slow()` (relative error ~2^-100) deciding where the
    fast one cannot (module docstring); a slow value of three terms (dd.sum3) is rounded
    with its third. Without `e`: hi + lo itself, a normal f64 far from overflow (hi of
    any sign)."""
    err = b.let(hi.abs() * rel_err)
    up = b.let(hi + (lo + err))
    decided = up.eq(hi + (lo - err))
    if e is None:
        r = b.var(up)
        with b.when(decided.not_()):
            got = slow()
            # h2 + l2 = h2: the slow path's pair is normalised
            b.assign(r, got[0] + got[1] if len(got) == 2 else round3(b, *got))
        return r
    r = b.var(scale(b, up, e))
    with b.when(decided.land(e.ge(-1020)).not_()):
        got = slow()
        b.assign(r, round_scaled(b, got[0], got[1], e, got[2] if len(got) == 3 else None,
                                 tie_tol))
    return r


__all__ = ["finish_f64", "round_scaled", "scale"]
