"""The WGSL spelling of float fences: what keeps a driver from folding or contracting.

fences.py decides which operands need a fence (an analysis of the Program); this module
spells them (helper functions and in-place forms) and flush mode's result rules. It must
never walk a Program.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from vyre import features as F
from vyre.ir import nodes as N
from vyre.ir.types import ScalarType

from .fences import OPAQUE, inert_constant
from .spelling import U_VAR, T, _helper, wgsl_type
from .uniforms import ZERO_FIELD, ZERO_FIELDS

if TYPE_CHECKING:
    from .state import WgslState as _Ctx


# ------------------------------------------------------------------ float fences
#
# Vulkan lets a driver optimise float code as if no operand were NaN, inf or -0 unless the
# SPIR-V asks for SignedZeroInfNanPreserve, and lets it contract a*b+c into an fma unless
# an operation is NoContraction; naga emits neither. Mesa's NIR (lavapipe) then folds
# x*0 -> 0, x-x -> 0, (a-b)+b -> a, !(a<b) -> a>=b, and NVIDIA's compiler contracts.
# Every such rewrite matches a float operation whose operand is another float operation,
# the same value twice, or a constant. So every float operand goes through a *fence*: its
# bits plus a uniform that is 0 at run time (an integer operation: no float pattern can
# look through it; an add, not an XOR, because two XORs with one value cancel and would
# expose the value again), with a different uniform per operand position (so `x - x`
# becomes two different values), and every float comparison's bool goes through one too.
# f16 arithmetic is done in f32 on fenced operands and rounded once to f16 (exact: f32
# has more than 2*11+2 bits, so the double rounding is innocuous for + - * / sqrt). In
# flush mode (f32 subnormals flushed, docs/IR.md) the fence also turns a subnormal input
# into a zero of its sign and `_rounded` flushes each f32 result, so the outcome is the
# same whether or not the driver itself flushes; except that on a device whose own f32
# add, sub, mul and fma compute flush mode (probed: native_flush.py) those four get plain
# fences and no flush of their result, as outside flush mode.
# Outside flush mode (and for those four on such a device), f32 add, mul, sub and native
# fma fence only what a rewrite could match (fences.py says which operands and why: not an
# opaque value, not a constant no rewrite matches, not a stored value its invocation never
# reads back); the rest fence every operand. Those plain fences are written in place
# (_plain_fenced); the flushing and f64 ones are helper functions.


def _compute_type(ty: ScalarType) -> ScalarType:
    """The type float arithmetic of `ty` is evaluated in (f16 in f32, then rounded once)."""
    return T.F32 if ty is T.F16 else ty


_FENCES: dict[tuple[ScalarType, int, bool, bool], tuple[str, str]] = {}  # (name, code) by kind


def _fence_fn(ctx: _Ctx, ty: ScalarType, k: int, flushing: bool | None = None) -> str:
    """The fence helper with uniform `k`; for f32 `flushing` (default: in flush mode) also
    reads a subnormal as a zero of its sign."""
    key = (ty, k, ctx.flush if flushing is None else flushing, ty is T.F64 and ctx.wide_ok)
    got = _FENCES.get(key)
    if got is None:
        got = _FENCES[key] = _fence_code(*key)
    return _helper(ctx, *got)


def _fence_code(ty: ScalarType, k: int, flushing: bool, wide: bool) -> tuple[str, str]:
    z = f"{U_VAR}.{ZERO_FIELDS[k]}"
    name = f"vy_fence{k}_{wgsl_type(ty)}" + ("_ftz" if ty is T.F32 and flushing else "")
    if ty is T.F32:
        if flushing:
            body = (
                f"    let b = bitcast<u32>(x) + {z};\n"
                "    return bitcast<f32>(select(b, b & 0x80000000u, (b & 0x7f800000u) == 0u));"
                "  // subnormal -> signed 0\n"
            )
        else:
            body = f"    return bitcast<f32>(bitcast<u32>(x) + {z});\n"
    elif wide:  # f64 with i64 on the device: the same integer add of a uniform zero (a
        # select(x, -x, z != 0) lets a compiler split it into two branches, each free to
        # contract a*b + c into an fma)
        body = f"    return bitcast<f64>(bitcast<u64>(x) + u64({z}));\n"
    else:  # f64: -x differs from x in its bits even for constants, so nothing folds
        body = f"    return select(x, -x, {z} != 0u);\n"
    t = wgsl_type(ty)
    return name, f"fn {name}(x: {t}) -> {t} {{\n{body}}}"


def _fence_f16(ctx: _Ctx, k: int) -> str:
    """An f16 value as an opaque f32, through its f16 bits: NVIDIA's compiler drops the
    rounding of f32(f16(x)) (so of every f16 operation done in f32) unless the bits are
    observed. (naga has no bitcast between vec2<f16> and u32; pack2x16float is one.)"""
    z = f"{U_VAR}.{ZERO_FIELDS[k]}"
    name = f"vy_fence{k}_f16"
    return _helper(
        ctx, name,
        f"fn {name}(x: f16) -> f32 {{\n"
        f"    return unpack2x16float(pack2x16float(vec2<f32>(f32(x), 0.0f)) + {z}).x;\n}}",
    )


#: the uniform 0 of fences that make a value opaque where it is bound or stored (fences.py)
_DEF_FENCE = 2


def _bare(ctx: _Ctx, e: N.ExprNode, other: N.ExprNode) -> bool:
    """Whether f32 operand `e` of an add / mul (or sub's left operand), beside `other`,
    may go unfenced (fences.py)."""
    return ctx.minimal and (ctx.flow.kinds(e) == OPAQUE or inert_constant(e, other))


def _plain_fenced(k: int, text: str) -> str:
    """f32 `text` behind the fence with uniform `k` that never flushes (the minimal
    spelling's, fences.py: outside flush mode, or where the device's own arithmetic
    flushes, native_flush.py), spelled in place: NVIDIA's compiler takes longer over a
    call of the helper than over its three operations written out."""
    if text == "0.0f":  # +0's bits are 0: the uniform's own bits are the fenced value
        return f"bitcast<f32>({U_VAR}.{ZERO_FIELDS[k]})"
    return f"bitcast<f32>(bitcast<u32>({text}) + {U_VAR}.{ZERO_FIELDS[k]})"


def _left_to_device(ctx: _Ctx, op: str, ty: ScalarType) -> bool:
    """Whether f32 `op`'s flush-mode result is the device's own (no explicit flush)."""
    return ctx.native_flush and ty is T.F32 and op in ("add", "sub", "mul")


def _fenced(ctx: _Ctx, ty: ScalarType, text: str, k: int) -> str:
    """Float operand `text` of type `ty` as an opaque value of its compute type."""
    if ty is T.F16:
        return f"{_fence_f16(ctx, k)}({text})"
    if ty is T.F32 and not ctx.flush:
        return _plain_fenced(k, text)
    return f"{_fence_fn(ctx, ty, k)}({text})"


def _rounded(ctx: _Ctx, ty: ScalarType, text: str) -> str:
    """A compute-type result `text` as a value of `ty` (f16: rounded once; f32 in flush
    mode: a subnormal result becomes a zero of its sign)."""
    if ty is T.F16:
        return f"f16({text})"
    if ty is T.F32 and ctx.flush:
        return f"{_ftz(ctx)}({text})"
    return text


def _ftz(ctx: _Ctx) -> str:
    """The name of flush mode's result rule (declared once): a subnormal f32 is a signed 0."""
    return _helper(
        ctx, "vy_ftz",
        "fn vy_ftz(x: f32) -> f32 {  // flush mode: a subnormal result is a signed 0\n"
        "    let b = bitcast<u32>(x);\n"
        "    return bitcast<f32>(select(b, b & 0x80000000u, (b & 0x7f800000u) == 0u));\n}",
    )


#: flush mode's tininess rules a narrowing to f32 spells itself, with the f64 magnitude below
#: which the result is tiny: 'after rounding', below the midpoint of FLT_MIN and the largest
#: 24-bit value under it (FLT_MIN - 2^-151; the tie rounds to FLT_MIN, which is even);
#: 'before rounding', below FLT_MIN. (A driver's own f64 -> f32 conversion keeps f64's
#: subnormal handling: NVIDIA's gives FLT_MIN for a band-B value, tests/test_flush_mode.py.)
_TINY_BELOW = {
    F.TININESS_AFTER_ROUNDING: "1.1754943157898259e-38lf",  # 2^-126 - 2^-151, exact
    F.TININESS_BEFORE_ROUNDING: "1.1754943508222875e-38lf",  # 2^-126, exact
}


def _narrowed_f32(ctx: _Ctx, x: str) -> str:
    """The f64 `x` rounded to f32 in flush mode under the instance's tininess rule: a zero
    of x's sign where the rule calls the result tiny, else the rounded value (vy_ftz: a
    subnormal one is tiny under every rule)."""
    below = _TINY_BELOW[ctx.tininess]
    name = _helper(
        ctx, "vy_narrow_ftz",
        "fn vy_narrow_ftz(x: f64) -> f32 {  // flush mode's tininess rule on a narrowing\n"
        f"    let r = {_ftz(ctx)}(f32(x));\n"
        f"    return select(r, bitcast<f32>(bitcast<u32>(r) & 0x80000000u), abs(x) < {below});\n}}",
    )
    return f"{name}({x})"


def _fence_bool(ctx: _Ctx, text: str) -> str:
    """The bool of a float comparison, hidden (NIR rewrites !(a < b) to a >= b, wrong for NaN)."""
    name = _helper(
        ctx, "vy_fence_bool",
        f"fn vy_fence_bool(c: bool) -> bool {{ return (select(0u, 1u, c) ^ {U_VAR}.{ZERO_FIELD}) != 0u; }}",
    )
    return f"{name}({text})"
