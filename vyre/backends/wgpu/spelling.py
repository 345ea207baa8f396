"""The WGSL printer's spellings of types and literals, and its registry of helper functions.

Pure functions of a value, a type or the printer's helper table; this module must never walk
a Program.
"""

from __future__ import annotations

import math
import struct
from typing import TYPE_CHECKING

from vyre.ir import nodes as N
from vyre.ir import ops
from vyre.ir.types import ScalarType

if TYPE_CHECKING:
    from .state import WgslState as _Ctx

T = ScalarType
U_VAR = "vy_u"
_WGSL_TYPE = {
    T.BOOL: "bool", T.I32: "i32", T.U32: "u32", T.F32: "f32",
    T.F16: "f16", T.F64: "f64", T.I64: "i64", T.U64: "u64",
    # a narrow value lives in the 32-bit integer of its signedness (packed.py)
    T.U8: "u32", T.U16: "u32", T.I8: "i32", T.I16: "i32",
}
_SUFFIX = {T.I32: "i", T.U32: "u", T.F32: "f", T.F16: "h", T.F64: "lf", T.I64: "li", T.U64: "lu",
           T.U8: "u", T.U16: "u", T.I8: "i", T.I16: "i"}
_BUILTIN_VAR = {
    "global_id": "vy_gid", "local_id": "vy_lid", "workgroup_id": "vy_wid",
    "num_workgroups": "vy_nwg",
}
_AXES = "xyz"
_SIMPLE_BIN = {
    **ops.binary_symbols("arith", "bitwise", "comparison"),
    "logical_and": "&", "logical_or": "|",  # bool operands: WGSL's non-short-circuit forms
}
# functions WGSL spells with a builtin of its own (vyre.ir.ops); the rest have hooks (_call)
_DIRECT_FNS = {op.name: op.wgsl for op in ops.CALL_OPS if op.wgsl}


def wgsl_type(t: ScalarType) -> str:
    return _WGSL_TYPE[t]


# float from bits, opaque to the driver (some assume no NaN/inf and fold such constants)
_BITS_F32 = "fn vy_bits_f32(b: u32) -> f32 { return bitcast<f32>(b + vy_u.vy_zero2); }"


# ------------------------------------------------------------------ literals


def _float_bits_literal(ctx: _Ctx, v: float, ty: ScalarType) -> str | None:
    """A runtime-only expression for floats WGSL cannot write (inf, NaN, -0, subnormal)."""
    if ty is T.F32 and 1.1754943508222875e-38 <= abs(v) < math.inf:
        return None  # (a normal f32, most literals: decided at once; NaN fails the test)
    special = math.isinf(v) or math.isnan(v) or (v == 0.0 and math.copysign(1.0, v) < 0)
    f32_sub = v != 0.0 and abs(v) < 1.1754943508222875e-38 and not math.isnan(v)
    if ty is T.F32 and (special or f32_sub):
        bits = struct.unpack("<I", struct.pack("<f", v))[0]
        _helper(ctx, "vy_bits_f32", _BITS_F32)
        return f"vy_bits_f32(0x{bits:08x}u)"
    if ty in (T.F16, T.F64) and special:
        bits = struct.unpack("<I", struct.pack("<f", v))[0]
        _helper(ctx, "vy_bits_f32", _BITS_F32)
        return f"{wgsl_type(ty)}(vy_bits_f32(0x{bits:08x}u))"
    if ty is T.F16 and v != 0.0 and abs(v) < 6.103515625e-05:
        return f"f16({_float_text(v)}f)"
    return None


def _float_text(v: float) -> str:
    s = repr(float(v))
    if "e" not in s and "." not in s:
        s += ".0"
    return s


def literal(ctx: _Ctx, c: N.Const, opaque: bool = False) -> str:
    """WGSL text for a literal; `opaque` hides it from WGSL's constant evaluation."""
    ty, v = c.ty, c.value
    if ty is T.BOOL:
        text = "true" if v else "false"
    elif ty.is_float:
        special = _float_bits_literal(ctx, float(v), ty)
        if special is not None:
            return special  # already a runtime function call
        text = _float_text(float(v)) + _SUFFIX[ty]
    else:
        iv = int(v)
        sfx = _SUFFIX[ty]
        if ty.is_signed and iv == -(1 << (ty.bits - 1)):
            text = f"({iv + 1}{sfx} - 1{sfx})"
        elif iv < 0:
            text = f"({iv}{sfx})"
        else:
            text = f"{iv}{sfx}"
    if opaque:
        return f"{_identity_fn(ctx, ty)}({text})"
    return text


def _identity_fn(ctx: _Ctx, ty: ScalarType) -> str:
    """The identity function on `ty`: its result is a runtime value to WGSL."""
    name = f"vy_id_{wgsl_type(ty)}"
    return _helper(ctx, name, f"fn {name}(x: {wgsl_type(ty)}) -> {wgsl_type(ty)} {{ return x; }}")


def _zero(ty: ScalarType) -> str:
    return "false" if ty is T.BOOL else f"{wgsl_type(ty)}(0)"


def _helper(ctx: _Ctx, name: str, code: str) -> str:
    if name not in ctx.helpers:
        ctx.helpers[name] = code
    return name


def _flt(ty: ScalarType, v: float) -> str:
    """A plain literal of float type `ty` (for finite, WGSL-writable values only)."""
    return _float_text(v) + _SUFFIX[ty]
