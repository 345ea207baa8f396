"""Single-rounding f32 and f16 fma as IR definitions, for targets whose fma rounds twice.

Vulkan lets a driver's fma round twice (the wgpu adapter probe measures f32's; f16's is
never trusted). Where `Traits.fused_fma` (f32) or `Traits.fused_fma_f16` is False,
vyre.lower.passes replaces each such fma by an `Invoke` of one of these: the product is
exact in the next wider type (f64 for f32: 2 x 24 bits; f32 for f16: 2 x 11), the wide
sum is made round-to-odd (the TwoSum error term decides the last bit) so the final
rounding to the narrow type is correct (53 >= 24 + 2, 24 >= 11 + 2). Each TwoSum step is
an IR operation the printers fence: llvmpipe reassociates f64 arithmetic, folding the
error term of s = p + c to 0 (fma(-2147483904, 3, 1e-30) then rounded to even). The f32
one needs f64 (`Traits.wide`); without it the fma stays for the printer to refuse.
In flush mode the operands read through the casts to the wide type (a subnormal as a zero
of its sign) and the narrowing cast flushes a tiny result by the tininess rule in force,
as the IR's fma does. This module must never print source.
"""

from __future__ import annotations

from vyre.ir import nodes as N
from vyre.ir.types import ScalarType

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


_DEFINED: dict[ScalarType, N.Function] = {}


def definition(ty: ScalarType) -> N.Function:
    """The core Function of the exact fma of `ty` (f32 or f16), made once per process."""
    got = _DEFINED.get(ty)
    if got is None:
        got = _DEFINED[ty] = define(f"exact_fma_{ty}", ty, (ty, ty, ty), _fma)
    return got


__all__ = ["definition"]
