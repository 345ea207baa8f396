"""The C spellings of the CUDA printer: its types, literals, user names and operator symbols.

Tables and pure functions of a value or a type only; this module must never walk a Program.
"""

from __future__ import annotations

import math
import struct

import numpy as np

from vyre.ir import ops
from vyre.ir.types import ScalarType
from vyre.lower import names as lower_names

ST = ScalarType
SUBGROUP_SIZE = 32  # a warp

CTYPE: dict[ScalarType, str] = {
    ST.BOOL: "bool",
    ST.I32: "int",
    ST.U32: "unsigned",
    ST.F32: "float",
    ST.F16: "vy_f16",
    ST.F64: "double",
    ST.I64: "long long",
    ST.U64: "unsigned long long",
    # the 8/16-bit storage types: C's own, so a store writes its byte(s) only (no race
    # with the neighbours another thread writes); conversions between C integer types
    # wrap modulo 2^n (two's complement for the signed ones, as NVRTC defines it)
    ST.U8: "unsigned char",
    ST.I8: "signed char",
    ST.U16: "unsigned short",
    ST.I16: "short",
}
# element types a vectorised access may have (bool storage is excluded)
VEC_TYPES = frozenset({ST.I32, ST.U32, ST.F32, ST.F16, ST.F64, ST.I64, ST.U64})
INT32 = frozenset({ST.I32, ST.U32})
UTYPE: dict[ScalarType, str] = {
    ST.I32: "unsigned",
    ST.U32: "unsigned",
    ST.I64: "unsigned long long",
    ST.U64: "unsigned long long",
}

# Kernel-argument sizes (bytes) of each param type; bool params never exist.
ARG_SIZE: dict[ScalarType, int] = {
    ST.I32: 4, ST.U32: 4, ST.F32: 4, ST.F16: 2, ST.F64: 8, ST.I64: 8, ST.U64: 8,
}
STRUCT_CODE: dict[ScalarType, str] = {
    ST.I32: "<i", ST.U32: "<I", ST.F32: "<f", ST.F16: "<e", ST.F64: "<d", ST.I64: "<q",
    ST.U64: "<Q",
}

# C spellings from the op registry (vyre.ir.ops); clamp and the f16 forms are spelled below
F32_FN = {op.name: op.c_f32 for op in ops.CALL_OPS if op.c_f32}
F64_FN = {op.name: op.c_f64 for op in ops.CALL_OPS if op.c_f64}
CMP = ops.binary_symbols("comparison")
ARITH = ops.binary_symbols("arith")
BITS = ops.binary_symbols("bitwise")


def mangle(prefix: str, name: str) -> str:
    """A C identifier for a user name: `prefix` + vyre.lower's injective mangling."""
    return f"{prefix}_{lower_names.mangle(name)}"


def _float_literal(value: float, ty: ScalarType) -> str:
    if ty is ST.F16:
        bits = int(np.array(value, dtype=np.float16).view(np.uint16))
        return f"((vy_f16)0x{bits:04x}u)"
    if ty is ST.F32:
        if math.isfinite(value):
            r = repr(float(value))
            if float(np.float32(float(r))) == value:
                return f"{r}f" if ("e" in r or "." in r) else f"{r}.0f"
        bits = 0x7FC00000 if math.isnan(value) else struct.unpack("<I", struct.pack("<f", value))[0]
        return f"__uint_as_float(0x{bits:08x}u)"
    if math.isfinite(value):
        r = repr(float(value))
        return r if ("e" in r or "." in r) else f"{r}.0"
    bits = (
        0x7FF8000000000000 if math.isnan(value) else struct.unpack("<Q", struct.pack("<d", value))[0]
    )
    return f"__longlong_as_double(0x{bits:016x}ll)"


def _int_literal(value: int, ty: ScalarType) -> str:
    if ty.is_narrow:
        return f"(({CTYPE[ty]}){value})"
    if ty is ST.I32:
        return "(-2147483647 - 1)" if value == -(2**31) else (f"({value})" if value < 0 else str(value))
    if ty is ST.U32:
        return f"{value}u"
    if ty is ST.I64:
        if value == -(2**63):
            return "(-9223372036854775807ll - 1)"
        return f"({value}ll)" if value < 0 else f"{value}ll"
    return f"{value}ull"


def literal(value: bool | int | float, ty: ScalarType) -> str:
    if ty is ST.BOOL:
        return "true" if value else "false"
    if ty.is_int:
        return _int_literal(int(value), ty)
    text = _float_literal(float(value), ty)
    # Parenthesised so a negative literal never fuses with a preceding '-' into '--'.
    return f"({text})" if text.startswith("-") else text

