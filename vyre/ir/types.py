"""Scalar types of the Program IR and their host (NumPy) counterparts.

This module only describes types; it must never hold semantics of operations (those live
in the reference backend and the validator).
"""

from __future__ import annotations

import math
from enum import StrEnum
from functools import cached_property

import numpy as np


class ScalarType(StrEnum):
    """The scalar types of the IR: bool (locals only), i32, u32, f32, f16, f64, i64, u64,
    and the narrow integers u8, i8, u16, i16 (storage types: docs/IR.md "Narrow integers")."""

    BOOL = "bool"
    I32 = "i32"
    U32 = "u32"
    F32 = "f32"
    F16 = "f16"
    F64 = "f64"
    I64 = "i64"
    U64 = "u64"
    U8 = "u8"
    I8 = "i8"
    U16 = "u16"
    I16 = "i16"

    def __str__(self) -> str:
        return self.value

    # The properties of a type are cached on its member (cached_property: after the first
    # read a plain attribute): the code generators ask them of almost every node.

    @cached_property
    def is_float(self) -> bool:
        return self in (ScalarType.F16, ScalarType.F32, ScalarType.F64)

    @cached_property
    def is_int(self) -> bool:
        return self in (ScalarType.I32, ScalarType.U32, ScalarType.I64, ScalarType.U64,
                        ScalarType.U8, ScalarType.I8, ScalarType.U16, ScalarType.I16)

    @cached_property
    def is_signed(self) -> bool:
        return self in (ScalarType.I32, ScalarType.I64, ScalarType.I8, ScalarType.I16)

    @cached_property
    def is_narrow(self) -> bool:
        """An 8- or 16-bit integer: a storage type. Its values only exist between a load
        and a cast, or a cast and a store (docs/IR.md "Narrow integers")."""
        return self in (ScalarType.U8, ScalarType.I8, ScalarType.U16, ScalarType.I16)

    @cached_property
    def promoted(self) -> ScalarType:
        """The 32-bit integer a narrow value is computed in (i32 for i8 / i16, u32 for
        u8 / u16: the same signedness, so the value is kept exactly); the type itself for
        every other type."""
        if not self.is_narrow:
            return self
        return ScalarType.I32 if self.is_signed else ScalarType.U32

    @cached_property
    def is_numeric(self) -> bool:
        return self.is_float or self.is_int

    @cached_property
    def bits(self) -> int:
        return _BITS[self]

    @cached_property
    def byte_size(self) -> int:
        """Size of one element in a buffer (bool is not storable; reported as 4)."""
        return max(_BITS[self] // 8, 1) if self is not ScalarType.BOOL else 4

    @property
    def numpy(self) -> np.dtype:
        return np.dtype(_NUMPY[self])

    @cached_property
    def feature(self) -> str | None:
        """The capability a Program needs to use this type, or None for the core types."""
        return _FEATURE.get(self)

    @cached_property
    def storable(self) -> bool:
        """Whether the type may be the element type of a buffer, workgroup array or param."""
        return self is not ScalarType.BOOL

    @classmethod
    def from_numpy(cls, dtype: object) -> ScalarType:
        """The vyre type of a NumPy dtype (TypeError naming the choices if none)."""
        dt = np.dtype(dtype)  # type: ignore[call-overload]
        for st, name in _NUMPY.items():
            if np.dtype(name) == dt and st is not ScalarType.BOOL:
                return st
        if dt == np.dtype(np.bool_):
            return ScalarType.BOOL
        raise TypeError(
            f"numpy dtype {dt} has no vyre scalar type; use one of "
            "int8, uint8, int16, uint16, int32, uint32, float32, float16, float64, int64, "
            "uint64"
        )


_BITS = {
    ScalarType.BOOL: 1,
    ScalarType.I32: 32,
    ScalarType.U32: 32,
    ScalarType.F32: 32,
    ScalarType.F16: 16,
    ScalarType.F64: 64,
    ScalarType.I64: 64,
    ScalarType.U64: 64,
    ScalarType.U8: 8,
    ScalarType.I8: 8,
    ScalarType.U16: 16,
    ScalarType.I16: 16,
}
_NUMPY = {
    ScalarType.BOOL: "bool",
    ScalarType.I32: "int32",
    ScalarType.U32: "uint32",
    ScalarType.F32: "float32",
    ScalarType.F16: "float16",
    ScalarType.F64: "float64",
    ScalarType.I64: "int64",
    ScalarType.U64: "uint64",
    ScalarType.U8: "uint8",
    ScalarType.I8: "int8",
    ScalarType.U16: "uint16",
    ScalarType.I16: "int16",
}
_FEATURE = {
    ScalarType.F16: "f16",
    ScalarType.F64: "f64",
    ScalarType.I64: "i64",
    ScalarType.U64: "i64",
}

bool_ = ScalarType.BOOL
i32 = ScalarType.I32
u32 = ScalarType.U32
f32 = ScalarType.F32
f16 = ScalarType.F16
f64 = ScalarType.F64
i64 = ScalarType.I64
u64 = ScalarType.U64
u8 = ScalarType.U8
i8 = ScalarType.I8
u16 = ScalarType.U16
i16 = ScalarType.I16
NARROW_INTS = (u8, i8, u16, i16)
"""The 8- and 16-bit integer types (storage types, docs/IR.md "Narrow integers")."""


# per type, for normalise_literal (a Const is built for every literal: np.iinfo / np.finfo
# and a dtype per call cost more than the check)
_INT_RANGE = {t: (int(np.iinfo(n).min), int(np.iinfo(n).max))
              for t, n in _NUMPY.items() if t.is_int}
_FLOAT_TYPE = {t: (np.dtype(n).type, float(np.finfo(n).max))
               for t, n in _NUMPY.items() if t.is_float}


def normalise_literal(value: object, ty: ScalarType) -> bool | int | float:
    """The canonical Python value of a literal of type `ty`, or ValueError saying why not.

    Integers must fit the type's range (a literal never wraps silently); floats are rounded
    to the type (so 0.1 as f32 is stored as the f32 nearest 0.1).
    """
    if isinstance(value, np.generic):
        value = value.item()
    if ty is ScalarType.BOOL:
        if isinstance(value, bool):
            return value
        raise ValueError(f"a bool literal must be True or False, got {value!r}")
    if isinstance(value, bool):
        raise ValueError(f"{value!r} is a bool; a {ty} literal needs a number (use int(flag))")
    if ty.is_int:
        if isinstance(value, float):
            if not value.is_integer():
                raise ValueError(
                    f"{value!r} is not an integer; a {ty} literal needs an int (to "
                    f"compute in floating point, convert the {ty} operand first: "
                    f"`v.cast(vyre.f32) * {value!r}`)"
                )
            value = int(value)
        if not isinstance(value, int):
            raise ValueError(f"{value!r} is not a number")
        lo, hi = _INT_RANGE[ty]
        if not lo <= value <= hi:
            raise ValueError(
                f"{_short(value)} does not fit in {ty} (range {lo}..{hi}); "
                "use a wider type or reduce the value"
            )
        return value
    if not isinstance(value, (int, float)):
        raise ValueError(f"{value!r} is not a number; pass a Python int or float")
    scalar, big = _FLOAT_TYPE[ty]
    try:
        f = float(value)
    except OverflowError:  # an int beyond any float
        f = math.inf if value > 0 else -math.inf
    if -big < f < big:  # cannot round past the largest finite value: no overflow to hide
        r = float(scalar(f))
    else:  # (errstate costs more than the rounding; inf, nan and the ends come here)
        with np.errstate(over="ignore"):
            r = float(scalar(f))
    if math.isinf(r) and not (isinstance(value, float) and math.isinf(value)):
        raise ValueError(
            f"{_short(value)} overflows {ty} (largest finite magnitude {big:g}); use a wider "
            "type, or pass float('inf') explicitly if infinity is meant"
        )
    return r


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 40 else f"{text[:20]}...({len(text)} digits)"
