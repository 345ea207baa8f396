"""The last step of a function lowering: an f64 (or double-double) value rounded once to
f32 or f16, correctly, with IR operations every backend computes exactly.

f32: the cast f64 -> f32 rounds to nearest even; where the error bound of the fast f64
approximation straddles a rounding boundary (rarely: about rel_err * 2^25 of inputs),
`finish` evaluates the function's slow double-double path under an `if` and rounds
hi + lo with `round_dd_f32`: f32(hi) is already right unless hi is exactly halfway
between two f32 (hi is the f64 nearest hi + lo, and every f32 midpoint is an f64), where
lo's sign decides. f16: the f64 value rounded to 11 bits by adding and subtracting
1.5 * 2^(e + 42) (exact in f64; e the value's binade, at least -14 for the subnormals),
then cast (exactly) to f16; f16 results have no slow path: every one of the 65,536
inputs is checked against a correctly rounded oracle (tests/test_exact_functions.py).
"""

from __future__ import annotations

from collections.abc import Callable

from vyre.ir.types import ScalarType

from .build import Builder, X
from .dd import DD

T = ScalarType
_F32_OVERFLOW_MID = 2.0**128 - 2.0**103  # halfway between FLT_MAX and 2^128
_F32_MAX = 3.4028234663852886e38


def _sign_of(b: Builder, v: X) -> X:
    """The sign bit (as u32) of f64 `v`, zeros included (the cast keeps a zero's sign)."""
    return v.cast(T.F32).bitcast(T.U32) & 0x80000000


def round_dd_f32(b: Builder, hi: X, lo: X) -> X:
    """hi + lo (|lo| <= ulp(hi) / 2) rounded once to f32."""
    neg = b.let(hi.lt(0.0))
    ah = b.let(hi.abs())
    al = b.let(b.select(neg, -lo, lo))
    t = b.let(ah.cast(T.F32))
    tb = b.let(t.bitcast(T.U32))
    back = b.let(t.cast(T.F64))
    up = b.let((ah - back).gt(0.0))
    nb = b.let(b.select(up, tb + 1, tb - 1).bitcast(T.F32))
    mid = (back + nb.cast(T.F64)) * 0.5
    toward = b.select(up, al.gt(0.0), al.lt(0.0))
    m = b.select(ah.eq(mid).land(toward), nb, t)
    # hi exactly halfway between FLT_MAX and 2^128 rounds to inf (FLT_MAX is odd); below
    # it when lo < 0
    m = b.select(ah.eq(_F32_OVERFLOW_MID).land(al.lt(0.0)), b.f32(_F32_MAX), m)
    signed = (m.bitcast(T.U32) | _sign_of(b, hi)).bitcast(T.F32)
    # through f64 and back: in flush mode a subnormal neighbour reads as a zero of its
    # sign (casts flush, bitcasts do not); elsewhere the identity
    return signed.cast(T.F64).cast(T.F32)


def round_f16_grid(b: Builder, a: X) -> X:
    """f64 `a` >= 0 rounded to nearest even on the f16 grid, as an f64 (>= 65520: inf)."""
    e = ((a.cast(T.F32).bitcast(T.U32) >> 23) & 0xFF).bitcast(T.I32) - 127
    e = e.max(-14).min(16)  # subnormal f16 have the grid of 2^-14's binade
    c = b.let((((e + (42 + 127)).bitcast(T.U32) << 23) | 0x400000).bitcast(T.F32).cast(T.F64))
    r = b.let((a + c) - c)  # a rounded to a multiple of 2^(e - 10), exactly
    return b.select(a.ge(65520.0), b.f64(float("inf")), r)  # 65520: halfway to 2^16


def round_f64_f16(b: Builder, y: X) -> X:
    """f64 `y` rounded once to f16 (nearest even; overflow to inf; NaN stays NaN)."""
    r = round_f16_grid(b, b.let(y.abs()))
    signed = (r.cast(T.F32).bitcast(T.U32) | _sign_of(b, y)).bitcast(T.F32)
    return signed.cast(T.F16)


def finish(b: Builder, ty: ScalarType, y: X, rel_err: float,
           slow: Callable[[], DD] | None) -> X:
    """f64 `y`, within `rel_err` (relative) of the function's value, rounded once to `ty`.

    f32: correctly rounded where the bound y (1 +- rel_err) rounds one way; elsewhere the
    double-double `slow()` (made under an `if`, so evaluated only there) decides. `y` must
    be finite and not NaN (give special inputs an ordinary stand-in and select their
    results after this)."""
    if ty is T.F16:
        return round_f64_f16(b, y)
    assert ty is T.F32, ty
    y = b.let(y)
    err = b.let(y * rel_err)
    r = b.var(y.cast(T.F32))
    if slow is None:
        return r
    lo, hi = (y - err).cast(T.F32), (y + err).cast(T.F32)
    with b.when(lo.ne(hi)):
        hi_, lo_ = slow()
        b.assign(r, round_dd_f32(b, hi_, lo_))
    return r


__all__ = ["finish", "round_dd_f32", "round_f16_grid", "round_f64_f16"]
