"""Host-side array interop: which host objects vyre accepts, and the errors for the rest.

NumPy arrays, memoryviews and bytes-like objects go in; NumPy arrays come out with the
element type the caller names (a numpy dtype or a vyre ScalarType). Anything ambiguous is
refused with an error that names the fix. This module must never touch device memory nor
convert data silently (no implicit astype, no implicit copies of non-contiguous arrays).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .errors import InvalidDispatch
from .ir.types import ScalarType

_RAW_FORMATS = frozenset({"B", "b", "c"})


def as_dtype(dtype: Any) -> np.dtype:
    """A numpy dtype from a numpy dtype-like or a vyre ScalarType.

    ScalarType needs care: it is a str enum, and np.dtype("f16") is float128, not float16.
    """
    if isinstance(dtype, ScalarType):
        return dtype.numpy
    try:
        return np.dtype(dtype)
    except TypeError:
        raise InvalidDispatch(
            f"{dtype!r} is not an element type; pass a numpy dtype (np.float32) or a vyre "
            "type (vyre.f32)"
        ) from None


def device_array_hint(data: Any) -> str | None:
    """Why `data` (a framework's device array) cannot be host data, and what to do instead."""
    if hasattr(data, "__cuda_array_interface__"):
        return ("it is a CUDA device array; borrow it without copying with "
                "backend.from_dlpack(array) on a CUDA backend, or copy it to the host first")
    dev = getattr(data, "__dlpack_device__", None)
    if callable(dev):
        try:
            kind = int(dev()[0])
        except Exception:
            kind = -1
        if kind == 1:  # CPU: a torch/jax/cupy host tensor; numpy reads it without copying
            return "convert it with np.from_dlpack(x) (no copy) or np.asarray(x)"
        return ("it lives on a device; borrow it with backend.from_dlpack(x) on a matching "
                "backend, or copy it to the host first")
    return None


def host_bytes(data: Any, what: str, ty: ScalarType | None = None) -> memoryview:
    """A C-contiguous byte view of host data, refusing anything ambiguous.

    With `ty`, numpy arrays (and typed memoryviews) must already have that element type (no
    silent conversion); lists and tuples are converted to it; bytes and bytearrays are raw
    bytes.
    """
    if isinstance(data, (bytes, bytearray, memoryview)):
        mv = memoryview(data)
        if not mv.c_contiguous:
            raise InvalidDispatch(
                f"{what}: the memoryview is not contiguous; copy it with bytes(view) or pass "
                "np.ascontiguousarray(view)"
            )
        if ty is None or mv.format in _RAW_FORMATS:
            return mv.cast("B")
        try:
            data = np.asarray(mv)  # a typed memoryview: check its element type below
        except (TypeError, ValueError):
            raise InvalidDispatch(
                f"{what}: memoryview format {mv.format!r} has no numpy equivalent; pass raw "
                "bytes or a numpy array"
            ) from None
    if isinstance(data, (list, tuple)):
        if ty is None:
            raise InvalidDispatch(
                f"{what}: a list has no element type here; pass a numpy array or bytes"
            )
        data = np.asarray(data, dtype=ty.numpy)
    if isinstance(data, np.generic):
        data = np.asarray(data)
    if not isinstance(data, np.ndarray):
        hint = device_array_hint(data)
        raise InvalidDispatch(
            f"{what}: expected a numpy array, bytes or memoryview, got "
            f"{type(data).__module__}.{type(data).__name__}"
            + (f"; {hint}" if hint else "")
        )
    if data.dtype.hasobject:
        raise InvalidDispatch(
            f"{what}: array has dtype {data.dtype} (Python objects), which has no bytes to "
            "copy; convert it with arr.astype(np.float32) or another numeric type"
        )
    if ty is not None and data.dtype != ty.numpy:
        raise InvalidDispatch(
            f"{what}: array has dtype {data.dtype} but the program declares {ty}; "
            f"convert it with arr.astype(np.{ty.numpy.name})"
        )
    if not data.flags.c_contiguous:
        raise InvalidDispatch(
            f"{what}: array is not C-contiguous (strides {data.strides}); "
            "pass np.ascontiguousarray(arr)"
        )
    return memoryview(data.reshape(-1).view(np.uint8))  # type: ignore[arg-type]
