"""The last step of a function lowering: an f64 (or double-double) value rounded once to
f32 or f16, correctly, with IR operations every backend computes exactly.

f32: the cast f64 -> f32 rounds to nearest even; f16: the f64 value rounded to 11 bits by
adding and subtracting 1.5 * 2^(e + 42) (exact in f64; e the value's binade, at least -14
for the subnormals), then cast (exactly) to f16. Where the error bound of the fast f64
approximation straddles a rounding boundary (rarely: about rel_err * 2^25 of inputs),
`finish` evaluates the function's slow double-double path under an `if` and rounds
hi + lo with `round_dd`: rounding hi alone is already right unless hi is exactly halfway
between two values of the type (hi is the f64 nearest hi + lo, and every f32 / f16
midpoint is an f64), where lo's sign decides.
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


def _grid(b: Builder, ty: ScalarType, a: X) -> X:
    """f64 `a` >= 0 rounded to nearest even on `ty`'s grid, as an f64 (inf beyond it; in
    flush mode an f32 subnormal reads back as 0: casts flush)."""
    return a.cast(T.F32).cast(T.F64) if ty is T.F32 else round_f16_grid(b, a)


def _rounded(b: Builder, ty: ScalarType, y: X) -> X:
    """f64 `y` rounded once to `ty` (f32 / f16)."""
    return y.cast(T.F32) if ty is T.F32 else round_f64_f16(b, y)


_MAX = {T.F32: (_F32_OVERFLOW_MID, _F32_MAX), T.F16: (65520.0, 65504.0)}


def round_dd(b: Builder, ty: ScalarType, hi: X, lo: X, tie_tol: float = 0.0) -> X:
    """hi + lo (|lo| <= ulp(hi) / 2) rounded once to `ty` (f32 / f16). `tie_tol`: a value
    within tie_tol * |hi| of a midpoint is taken as exactly on it (for functions with exact
    midpoint results whose double-double cannot show them exactly, e.g. pow)."""
    neg = b.let(hi.lt(0.0))
    ah = b.let(hi.abs())
    al = b.let(b.select(neg, -lo, lo))
    t = b.let(_grid(b, ty, ah))
    d = b.let(ah - t)  # exact
    other = b.let(t + d * 2.0)  # the neighbour across hi if hi is a midpoint
    is_mid = d.ne(0.0).land(_grid(b, ty, other).eq(other))
    far = b.let(al.abs().gt(ah * tie_tol) if tie_tol else al.ne(0.0))
    toward = b.select(d.gt(0.0), al.gt(0.0), al.lt(0.0)).land(far)
    m = b.select(is_mid.land(toward), other, t)
    # hi exactly halfway between the largest finite value and the next power of two
    # rounds to inf (the largest is odd); below it when lo < 0
    mid_max, fmax = _MAX[ty]
    m = b.select(ah.eq(mid_max).land(al.lt(0.0)).land(far), b.f64(fmax), m)
    signed = (m.cast(T.F32).bitcast(T.U32) | _sign_of(b, hi)).bitcast(T.F32)
    return signed.cast(ty) if ty is T.F16 else signed


def round_dd_f32(b: Builder, hi: X, lo: X) -> X:
    """hi + lo rounded once to f32."""
    return round_dd(b, T.F32, hi, lo)


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
           slow: Callable[[], DD] | None, tie_tol: float = 0.0) -> X:
    """f64 `y`, within `rel_err` (relative) of the function's value, rounded once to `ty`
    (f32 / f16): correctly rounded where the bound |y| (1 +- rel_err) rounds one way;
    elsewhere the double-double `slow()` (made under an `if`, so evaluated only there)
    decides (`round_dd`, with `tie_tol`). `y` must be finite and not NaN (give special
    inputs an ordinary stand-in and select their results after this)."""
    assert ty in (T.F32, T.F16), ty
    y = b.let(y)
    if slow is None:
        return _rounded(b, ty, y)
    # y - |y| rel_err and y + |y| rel_err rounded: where they agree, so do y and every
    # value between (rounding, flushing included, is monotonic), so the first is the
    # result: two conversions to f32, not three (conversions issue at a quarter of f64
    # arithmetic's rate on Hopper, docs/perf-notes.md). (y - err keeps a zero's sign;
    # the test is the one on |y| +- err, by symmetry.)
    err = b.let(y.abs() * rel_err)
    lo = b.let(_rounded(b, ty, y - err))
    r = b.var(lo)
    with b.when(lo.ne(_rounded(b, ty, y + err))):
        hi_, lo_ = slow()
        b.assign(r, round_dd(b, ty, hi_, lo_, tie_tol))
    return r


__all__ = ["finish", "round_dd", "round_dd_f32", "round_f16_grid", "round_f64_f16"]
