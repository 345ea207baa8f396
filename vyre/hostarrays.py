"""Host-side array interop: which host objects vyre accepts, and the errors for the rest.

NumPy arrays, memoryviews and bytes-like objects go in; NumPy arrays come out with the
element type the caller names (a numpy dtype or a vyre ScalarType). Anything ambiguous is
refused with an error that names the fix. This module must never touch device memory nor
convert data silently (no implicit astype, no implicit copies of non-contiguous arrays).

Device memory is little-endian on every backend: a big-endian (byte-swapped) array is
refused wherever host arrays enter or leave (uploads, dispatch inputs, read dtypes,
read_into destinations), never copied as raw bytes that would read back swapped.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .errors import InvalidDispatch
from .ir.types import ScalarType

_RAW_FORMATS = frozenset({"B", "b", "c"})


def _swapped(dt: np.dtype, what: object,
             fix: str = "convert the array with arr.astype({le})") -> InvalidDispatch:
    """The error for a dtype whose bytes are not in the device's (little-endian) order;
    `fix` names the remedy, {le} standing for the little-endian dtype."""
    return InvalidDispatch(
        f"{what}: dtype {dt.str!r} is big-endian (byte-swapped) but device memory is "
        "little-endian, and vyre never swaps bytes silently; "
        + fix.format(le=repr(dt.newbyteorder("<").str))
    )


def _sequence_array(data: list[Any] | tuple[Any, ...], ty: ScalarType, what: str) -> np.ndarray:
    """A list or tuple of numbers as an array of `ty`, refusing what `ty` cannot represent
    (strings, None, ragged nesting, out-of-range or non-integral integers, finite floats
    that overflow to inf); inf and nan given as floats stay as they are."""
    try:
        arr = np.asarray(data)
    except (ValueError, TypeError) as exc:
        raise InvalidDispatch(
            f"{what}: the list is ragged or mixed ({str(exc).splitlines()[0][:120]}); pass a "
            f"flat list of numbers or a numpy array of {ty.numpy}"
        ) from None
    if arr.dtype.kind not in "biuf":
        flat = arr.reshape(-1)
        bad = next((x for x in flat.tolist() if not isinstance(x, (int, float))), None)
        if bad is None and flat.size and ty.is_int:
            return _check_int_range(flat, ty, what, data)
        shown = repr(bad) if bad is not None else repr(flat[0]) if flat.size else "?"
        raise InvalidDispatch(
            f"{what}: the list holds {shown[:40]} ({type(bad).__name__ if bad is not None else arr.dtype}), "
            f"not a {ty} number; pass numbers only (None and text are never converted), e.g. "
            f"np.asarray(values, dtype=np.{ty.numpy.name}) after cleaning them"
        )
    if arr.dtype.kind == "b":
        raise InvalidDispatch(
            f"{what}: the list holds bools, not {ty} numbers; convert them with "
            f"np.asarray(flags, dtype=np.{ty.numpy.name})"
        )
    if ty.is_int:
        if arr.dtype.kind == "f":
            ok = np.isfinite(arr) & (arr == np.trunc(arr))
            if not ok.all():
                raise InvalidDispatch(
                    f"{what}: {arr.reshape(-1)[~ok.reshape(-1)][0].item()!r} is not an integer, so it "
                    f"is not a {ty}; round it explicitly (np.rint) or use a float buffer"
                )
        return _check_int_range(arr.reshape(-1), ty, what, data).reshape(arr.shape)
    with np.errstate(over="ignore", invalid="ignore"):
        out = arr.astype(ty.numpy)
    over = np.isinf(out) & ~np.isinf(arr)
    if over.any():
        raise InvalidDispatch(
            f"{what}: {arr.reshape(-1)[over.reshape(-1)][0].item()!r} overflows {ty} (largest finite "
            f"magnitude {float(np.finfo(ty.numpy).max):g}); scale the data or use a wider "
            "type (inf must be given explicitly as float('inf'))"
        )
    return out


def _check_int_range(flat: np.ndarray, ty: ScalarType, what: str, data: Any) -> np.ndarray:
    info = np.iinfo(ty.numpy)
    lo, hi = int(info.min), int(info.max)
    for x in flat.tolist() if flat.dtype.kind == "O" else (flat.min(), flat.max()):
        if not lo <= int(x) <= hi:
            v = int(x)
            text = str(v) if len(str(v)) <= 30 else f"{str(v)[:20]}...({len(str(v))} digits)"
            raise InvalidDispatch(
                f"{what}: {text} does not fit in {ty} (range {lo}..{hi}); values never wrap "
                "silently: use a wider type or reduce the values"
            )
    return np.asarray([int(x) for x in flat.tolist()] if flat.dtype.kind == "O" else flat,
                      dtype=ty.numpy)


#: as_dtype's answers, keyed by (type, value): ScalarType is a str enum, so vyre.f16 equals
#: and hashes as "f16", which np.dtype reads as float128; the type in the key keeps them apart
_DTYPES: dict[tuple[type, Any], np.dtype] = {}
_DTYPES_MAX = 256  # distinct dtype spellings a process uses are few; never grow without bound


_VYRE_TYPE_NAMES = frozenset(t.value for t in ScalarType)
_NUMPY_BYTE_COUNTS = {"u8": "uint64", "i8": "int64"}


def _vyre_type_name(name: str) -> np.dtype:
    """A vyre type spelled as text ("u32") as its numpy dtype. "f16", "u8" and "i8" are
    refused: numpy reads them as float128, uint64 and int64, vyre as float16, uint8 and
    int8, and either guess reads garbage when it is wrong."""
    if name == "f16":
        raise InvalidDispatch(
            "dtype 'f16' is ambiguous: numpy reads it as float128, vyre as its half float; "
            "pass vyre.f16 or np.float16 for half floats (np.longdouble for numpy's float128)"
        )
    if name in _NUMPY_BYTE_COUNTS:  # numpy's "u8" / "i8" are 8-byte integers
        wide = _NUMPY_BYTE_COUNTS[name]
        raise InvalidDispatch(
            f"dtype {name!r} is ambiguous: numpy reads it as {wide} (8 bytes), vyre as its "
            f"8-bit integer; pass vyre.{name} or np.{ScalarType(name).numpy.name} for bytes "
            f"(np.{wide} for numpy's meaning)"
        )
    return ScalarType(name).numpy


def as_dtype(dtype: Any) -> np.dtype:
    """A numpy dtype from a numpy dtype-like or a vyre ScalarType.

    ScalarType needs care: it is a str enum, and np.dtype("f16") is float128, not float16.
    """
    key = (type(dtype), dtype)
    try:
        return _DTYPES[key]
    except KeyError:
        cacheable = True
    except TypeError:  # an unhashable dtype-like: checked below every time
        cacheable = False
    if isinstance(dtype, ScalarType):
        dt = dtype.numpy
    elif type(dtype) is str and dtype in _VYRE_TYPE_NAMES:
        dt = _vyre_type_name(dtype)
    else:
        dt = _numeric_dtype(dtype)
    if cacheable and len(_DTYPES) < _DTYPES_MAX:
        _DTYPES[key] = dt
    return dt


def _numeric_dtype(dtype: Any) -> np.dtype:
    try:
        dt = np.dtype(dtype)
    except (TypeError, ValueError):
        dt = None
    if dt is None or dt.hasobject or dt.kind not in "biufc" or dt.itemsize == 0 or dt.shape:
        raise InvalidDispatch(
            f"{dtype!r} is not an element type for device bytes; pass a numeric numpy dtype "
            "(np.float32) or a vyre type (vyre.f32)"
        )
    if not dt.isnative:
        raise _swapped(dt, "read dtype", "read with dtype={le}")
    return dt


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


def host_destination(out: Any, what: str) -> np.ndarray:
    """`out`, a writable C-contiguous numpy array that device bytes may be copied into, as a
    flat uint8 view of its memory (the caller returns `out` itself)."""
    if not isinstance(out, np.ndarray) or isinstance(out, np.ma.MaskedArray):
        hint = device_array_hint(out)
        raise InvalidDispatch(
            f"{what}: expected a numpy array to copy into, got "
            f"{type(out).__module__}.{type(out).__name__}"
            + (f" ({hint})" if hint else "; make one once with np.empty(count, dtype) and "
               "pass it to every read")
        )
    if out.dtype.hasobject:
        raise InvalidDispatch(f"{what}: an array of Python objects ({out.dtype}) cannot hold "
                              "device bytes; use a numeric dtype")
    if not out.dtype.isnative:
        raise _swapped(out.dtype, what, "read into a little-endian array, e.g. np.empty(n, {le})")
    if not out.flags.c_contiguous:
        raise InvalidDispatch(f"{what}: the array is not C-contiguous; read into a contiguous "
                              "array (np.empty(shape, dtype)) and copy it where needed")
    if not out.flags.writeable:
        raise InvalidDispatch(f"{what}: the array is read-only; pass a writable array")
    return out.reshape(-1).view(np.uint8)


def host_bytes(data: Any, what: object, ty: ScalarType | None = None) -> memoryview:
    """A C-contiguous byte view of host data, refusing anything ambiguous; `what` names the
    data in errors (formatted with str() only when one is raised).

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
        if mv.format[:1] in (">", "!") and mv.itemsize > 1:
            raise InvalidDispatch(
                f"{what}: memoryview format {mv.format!r} is big-endian but device memory is "
                "little-endian, and vyre never swaps bytes silently; pass a little-endian "
                "numpy array (np.asarray(view).astype(np.asarray(view).dtype.newbyteorder('<')))"
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
        data = _sequence_array(data, ty, str(what))
    if isinstance(data, np.ma.MaskedArray):
        raise InvalidDispatch(
            f"{what}: a masked array's mask has no meaning on the device; pass arr.filled(v) "
            "with the value masked elements should take, or arr.data to ignore the mask"
        )
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
    if not data.dtype.isnative:
        raise _swapped(data.dtype, what)
    if not data.flags.c_contiguous:
        raise InvalidDispatch(
            f"{what}: array is not C-contiguous (strides {data.strides}); "
            "pass np.ascontiguousarray(arr)"
        )
    return memoryview(data.reshape(-1).view(np.uint8))  # type: ignore[arg-type]
