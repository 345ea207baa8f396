"""Single-rounding fma as IR definitions, for targets whose fma rounds twice.

Vulkan lets a driver's fma round twice (the wgpu adapter probe measures f32's; f16's and
f64's are never trusted: lavapipe's f64 fma rounds twice). Where `Traits.fused_fma` (f32)
or `Traits.fused_fma_f16_f64` is False, vyre.lower.passes replaces each such fma by an
`Invoke` of one of these. f64's is computed in integers (`_fma_f64`); for f32 and f16 the product is
exact in the next wider type (f64 for f32: 2 x 24 bits; f32 for f16: 2 x 11), the wide
sum is made round-to-odd (the TwoSum error term decides the last bit) so the final
rounding to the narrow type is correct (53 >= 24 + 2, 24 >= 11 + 2). Each TwoSum step is
an IR operation the printers fence: llvmpipe reassociates f64 arithmetic, folding the
error term of s = p + c to 0 (fma(-2147483904, 3, 1e-30) then rounded to even). The f32
one needs f64 (`Traits.wide`); without it the fma stays for the printer to refuse.
In flush mode the operands read through the casts to the wide type (a subnormal as a zero
of its sign) and the narrowing cast flushes a tiny result by the tininess rule in force,
as the IR's fma does (f64 is never flushed). This module must never print source.
"""

from __future__ import annotations

from vyre.ir import nodes as N
from vyre.ir.types import ScalarType

from .divsqrt import log2_64, log2_128, round_f64, shl128, shr128_sticky, u64
from .maths.build import Builder, X, define

T = ScalarType
# the wide type of each narrow one, its bits' type, and the mask of its exponent field
_WIDE = {T.F32: (T.F64, T.U64, 0x7FF0000000000000), T.F16: (T.F32, T.U32, 0x7F800000)}


def _fma(b: Builder, args: tuple[X, ...]) -> X:
    ty = args[0].ty
    wide, bits_ty, exp_mask = _WIDE[ty]
    a, c, d = (b.let(x.cast(wide)) for x in args)
    p = b.let(a * c)  # exact
    s = b.let(p + d)
    bits = b.let(s.bitcast(bits_ty))
    # TwoSum's error term of s = p + d (its value is meaningless where s is not finite)
    bb = b.let(s - p)
    e = b.let((p - (s - bb)) + (d - bb))
    finite = (bits & exp_mask).ne(exp_mask)
    sticky = finite.land(e.ne(0.0)).land((bits & 1).eq(0))  # inexact with an even last bit
    away = b.select(e.gt(0.0), s.gt(0.0), s.gt(0.0).not_())  # the error has s's sign
    odd = b.select(sticky, b.select(away, bits + 1, bits - 1), bits)
    return odd.bitcast(wide).cast(ty)


def _fma_f64(b: Builder, args: tuple[X, ...]) -> X:
    """Single-rounding f64 fma in integers (128-bit words of u64; there is no wider float
    to make it exact in): the product's 106 bits and c's 53 aligned with a sticky bit,
    added, rounded once (divsqrt.round_f64: to the subnormal grid below 2^-1022; past
    the largest double, inf). Specials and zero operands take a*b + c, exact there
    (c = 0: a*b alone, which keeps the sign of a product that rounds to zero)."""
    a, c, d = args
    ua, uc, ud = (b.let(x.bitcast(T.U64)) for x in args)
    ea, ec, ed = (b.let(((u >> 52) & 0x7FF).cast(T.I32)) for u in (ua, uc, ud))
    frac = (1 << 52) - 1
    ma, mc, md = (b.let((u & frac) | b.select(e.ne(0), u64(b, 1 << 52), 0))
                  for u, e in ((ua, ea), (uc, ec), (ud, ed)))
    special = b.let(ea.eq(0x7FF).lor(ec.eq(0x7FF)).lor(ed.eq(0x7FF)))
    zero_factor = b.let(ma.eq(0).lor(mc.eq(0)))
    zero_addend = b.let(md.eq(0))
    stand_in = b.let(special.lor(zero_factor).lor(zero_addend))
    ma, mc, md = (b.let(b.select(stand_in, u64(b, 1 << 52), m)) for m in (ma, mc, md))
    # the product ma * mc in 128 bits, from 32-bit halves
    al, ah = b.let(ma & 0xFFFFFFFF), b.let(ma >> 32)
    cl, ch = b.let(mc & 0xFFFFFFFF), b.let(mc >> 32)
    ll = b.let(al * cl)
    mid = b.let(al * ch + ah * cl)
    plo = b.let(ll + (mid << 32))
    p = (b.let(ah * ch + (mid >> 32) + b.select(plo.lt(ll), u64(b, 1), 0)), plo)
    # values p * 2^ep, md * 2^edx; both shifted up so that the top bit is bit 125
    sp = b.let(b.i32(125) - log2_128(b, p))
    sd = b.let(b.i32(125) - log2_64(b, md))
    pn = shl128(b, p, sp.bitcast(T.U32))
    dn = shl128(b, (u64(b, 0), md), sd.bitcast(T.U32))
    ep = b.let(ea.max(1) + ec.max(1) - 2150 - sp)
    edx = b.let(ed.max(1) - 1075 - sd)
    sgp, sgd = b.let((ua ^ uc) >> 63), b.let(ud >> 63)
    swap = b.let(edx.gt(ep))
    x = tuple(b.let(b.select(swap, q, r)) for q, r in zip(dn, pn, strict=True))
    y = tuple(b.select(swap, r, q) for q, r in zip(dn, pn, strict=True))
    ex = b.let(b.select(swap, edx, ep))
    sx, sy = b.let(b.select(swap, sgd, sgp)), b.let(b.select(swap, sgp, sgd))
    y = shr128_sticky(b, (b.let(y[0]), b.let(y[1])), (ex - b.select(swap, ep, edx)).bitcast(T.U32))
    same = b.let(sx.eq(sy))
    ge = b.let(x[0].gt(y[0]).lor(x[0].eq(y[0]).land(x[1].ge(y[1]))))
    big = tuple(b.let(b.select(ge, q, r)) for q, r in zip(x, y, strict=True))
    small = tuple(b.let(b.select(ge, r, q)) for q, r in zip(x, y, strict=True))
    total_lo = b.let(x[1] + y[1])
    total = (x[0] + y[0] + b.select(total_lo.lt(x[1]), u64(b, 1), 0), total_lo)
    diff = (big[0] - small[0] - b.select(big[1].lt(small[1]), u64(b, 1), 0), big[1] - small[1])
    r = (b.let(b.select(same, total[0], diff[0])), b.let(b.select(same, total[1], diff[1])))
    sr = b.select(same.lor(ge), sx, sy)
    cancelled = (r[0] | r[1]).eq(0)  # exact cancellation: +0
    safe = (r[0], b.select(cancelled, u64(b, 1), r[1]))
    rounded = round_f64(b, safe, ex, sr).bitcast(T.F64)
    out = b.select(cancelled, b.f64(0.0), rounded)
    product = b.let(a * c)  # exact where an operand is special or zero, as is a*c + d
    addend_only = ed.eq(0x7FF).land(ea.ne(0x7FF)).land(ec.ne(0x7FF))  # a*c may overflow
    plain = b.select(special.land(addend_only), d, product + d)
    return b.select(special.lor(zero_factor), plain, b.select(zero_addend, product, out))


_DEFINED: dict[ScalarType, N.Function] = {}


def definition(ty: ScalarType) -> N.Function:
    """The core Function of the exact fma of `ty` (f32, f16 or f64), made once per process."""
    got = _DEFINED.get(ty)
    if got is None:
        body = _fma_f64 if ty is T.F64 else _fma
        got = _DEFINED[ty] = define(f"exact_fma_{ty}", ty, (ty, ty, ty), body)
    return got


__all__ = ["definition"]
