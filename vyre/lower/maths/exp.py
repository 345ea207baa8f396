"""exp and exp2 (f32, f16): correctly rounded, evaluated in f64 (Tang's table method); on a
target with cheap tables (`Traits.indexed_tables`) f32's common path is exp32's, in f32
alone, with this one as its slow path.

2^z with z = x (exp2) or x log2(e) (exp): k = round(16 z), z = k / 16 + r with |r| <= 1/32
(+ 2^-19 for exp), 2^z = 2^(k >> 4) * 2^((k & 15) / 16) * 2^r. The table 2^(i / 16) is an
IR `Table`; 2^r is its Taylor polynomial. The arguments are clamped first (in their own
type: the bounds are exact there) to a range whose results already overflow to inf or
round to 0 (so every intermediate is a normal f64 and 2^(k >> 4) is two exact powers of
two made from f32 bits); NaN returns the argument. An f32 result in the normal range
(-124 <= k >> 4 <= 126) is 2^((k & 15) / 16 + r) rounded, with k >> 4 added to its
exponent bits: exact, and the same rounding test and result as rounding the product
(the powers of two, two conversions, are made only for the rest).

Fast path (f64): r exact for exp2; for exp, x * C_hi is exact (C_hi has 26 bits) and so
is x * C_hi - k / 16 (its bits span at most 50), r1 = x * C_lo adds the rest of log2(e).
Error: Taylor degree 7 on |r| <= 1/32 + 2^-19: < 2^-59; Horner, table and product
roundings: < 12 * 2^-53; hence `_FAST_ERR` = 2^-48 with room. Where that bound straddles
a rounding boundary (rarely) the slow path evaluates the same in double-double: table
entries and Taylor coefficients of degree 12 as double-doubles (truncation < 2^-104), r
as a double-double, relative error below 2^-95; f32 results are then correctly rounded
(rounding.finish). exp2 is exact at integers (r = 0, polynomial 1).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from decimal import Decimal, localcontext
from fractions import Fraction

from vyre.ir.types import ScalarType

from . import dd
from .build import Builder, X
from .exp32 import exp_f32
from .registry import lowering
from .rounding import finish

T = ScalarType
_FAST_ERR = 2.0**-48
_ROUND = float(3 * 2**51)  # (v + _ROUND) - _ROUND: v rounded to an integer, |v| < 2^51


def _ln2() -> Fraction:
    with localcontext() as c:
        c.prec = 80
        return Fraction(Decimal(2).ln())


def _log2e() -> Fraction:
    with localcontext() as c:
        c.prec = 80
        return Fraction(1 / Decimal(2).ln())


def _pow2_frac(i: int) -> Fraction:
    with localcontext() as c:
        c.prec = 80
        return Fraction(Decimal(2) ** (Decimal(i) / 16))


_LN2 = _ln2()
# Taylor coefficients of 2^r = sum (r ln 2)^n / n!
_COEFFS = [_LN2**n / math.factorial(n) for n in range(13)]
_FAST_COEFFS = [float(c) for c in _COEFFS[:8]]
_SLOW_COEFFS = [dd.split_const(c) for c in _COEFFS]
# terms of degree >= 7 in f64: their rounding, times |r|^7 <= 2^-35, is below 2^-103
DD_TERMS = 7
_TABLE = [dd.split_const(_pow2_frac(i)) for i in range(16)]
_L2E = _log2e()
_L2E_HI = float(Fraction(round(_L2E * 2**25), 2**25))  # 26 bits: x * _L2E_HI is exact
_L2E_MID, _L2E_LO = dd.split_const(_L2E - Fraction(_L2E_HI))


def power_of_two(b: Builder, e: X) -> X:
    """2^e as f64 for i32 e in [-126, 127] (from f32 bits: exact)."""
    return ((e + 127).bitcast(T.U32) << 23).bitcast(T.F32).cast(T.F64)


def pow2(b: Builder, k: X, r: X, r_dd: Callable[[], dd.DD], ty: ScalarType,
         rel_err: float = _FAST_ERR, neg: X | None = None, tie_tol: float = 0.0) -> X:
    """+-2^(k / 16 + r) rounded to `ty`: i32 k (k >> 4 in [-152, 130]), f64 r (the fast
    path's, |r| <= 1/32 + 2^-19), `r_dd()` the slow path's r as a double-double, `rel_err`
    the fast path's relative error (at least `_FAST_ERR`), negated where `neg`."""
    i = b.let(k.bitcast(T.U32) & 15)
    e = b.let(k >> 4)  # arithmetic: floor(k / 16)
    p = b.f64(_FAST_COEFFS[-1])
    for c in reversed(_FAST_COEFFS[:-1]):
        p = b.let(p * r + c)
    y0 = b.let(b.table(i, [h for h, _ in _TABLE]) * p)  # 2^(i/16 + r): in [0.97, 2.07]
    scale: list[X] = []

    def powers() -> tuple[X, X]:  # 2^e = s1 * s2, made where first needed
        if not scale:
            e1 = b.let(e >> 1)
            scale.extend((b.let(power_of_two(b, e1)), b.let(power_of_two(b, e - e1))))
        return scale[0], scale[1]

    def scaled() -> X:
        s1, s2 = powers()
        y = b.let((y0 * s1) * s2)  # exact: powers of two, far from the f64 subnormals
        return y if neg is None else b.select(neg, -y, y)

    def slow() -> dd.DD:
        s1, s2 = powers()
        coeffs = [(b.f64(h), b.f64(lo)) for h, lo in _SLOW_COEFFS]
        poly = dd.horner(b, coeffs, r_dd(), DD_TERMS)
        tab = (b.table(i, [h for h, _ in _TABLE]), b.table(i, [lo for _, lo in _TABLE]))
        hi, lo = dd.mul(b, tab, poly)
        hi, lo = b.let((hi * s1) * s2), b.let((lo * s1) * s2)
        if neg is None:
            return hi, lo
        return b.let(b.select(neg, -hi, hi)), b.let(b.select(neg, -lo, lo))

    if ty is not T.F32:
        return finish(b, ty, scaled(), rel_err, slow, tie_tol)
    # f32 with a normal result (-124 <= e <= 126): y0 rounded, then 2^e put into the
    # exponent bits, which is exact there and the same test and result as rounding
    # y0 * 2^e (finish): no conversions for 2^e (they issue at 16/clk/SM on Hopper). The
    # rest (results near overflow or underflow, and the rare hard cases) as before.
    err = b.let(y0 * rel_err)
    lo = b.let((y0 - err).cast(T.F32))
    bits = lo.bitcast(T.U32) + (e << 23).bitcast(T.U32)
    if neg is not None:
        bits = bits | b.select(neg, b.u32(0x80000000), b.u32(0))
    r = b.var(bits.bitcast(T.F32))
    normal = e.ge(-124).land(e.le(126))
    with b.when(normal.not_().lor(lo.ne((y0 + err).cast(T.F32)))):
        b.assign(r, finish(b, ty, scaled(), rel_err, slow, tie_tol))
    return r


@lowering("exp2", T.F32, T.F16)
def exp2(b: Builder, args: tuple[X, ...]) -> X:
    (x,) = args
    if b.f32_path(x):
        return exp_f32(b, x, "exp2", b.slow_path(x, _exp2))
    return _exp2(b, x)


def _exp2(b: Builder, x: X) -> X:
    # clamped in x's type (the bounds are exact there, so this is the f64 clamp of x's
    # value; two f32 min / max instead of f64 compares and selects)
    z = b.let(x.max(-151.0).min(129.0).cast(T.F64))  # (NaN -> -151: selected below)
    kf = b.let(((z * 16.0) + _ROUND) - _ROUND)
    r = b.let(z - kf * 0.0625)  # exact
    out = pow2(b, b.let(b.f2i(kf)), r, lambda: (r, b.f64(0.0)), x.ty)
    return b.select(x.ne(x), x, out)


@lowering("exp", T.F32, T.F16)
def exp(b: Builder, args: tuple[X, ...]) -> X:
    (x,) = args
    if b.f32_path(x):
        return exp_f32(b, x, "exp", b.slow_path(x, _exp))
    return _exp(b, x)


def _exp(b: Builder, x: X) -> X:
    # e^-105 < 2^-151, e^90 > 2^129; clamped in x's type as exp2's (NaN: below)
    z = b.let(x.max(-105.0).min(90.0).cast(T.F64))
    zh = b.let(z * _L2E_HI)  # exact
    kf = b.let(((zh * 16.0) + _ROUND) - _ROUND)
    r0 = b.let(zh - kf * 0.0625)  # exact (module docstring)

    def r_dd() -> dd.DD:
        m = dd.two_prod(b, z, b.f64(_L2E_MID))
        return dd.add_d(b, dd.add_d(b, m, b.let(z * _L2E_LO)), r0)

    r = b.let(r0 + z * (_L2E_MID + _L2E_LO))
    out = pow2(b, b.let(b.f2i(kf)), r, r_dd, x.ty)
    return b.select(x.ne(x), x, out)
