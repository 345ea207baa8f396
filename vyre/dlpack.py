"""The DLPack ABI in ctypes: the C structs, dtype mapping, and PyCapsule handling.

Both directions of the DLPack exchange go through here: `consume` takes a producer's capsule
(legacy "dltensor" or versioned "dltensor_versioned"), marks it used and returns a
`Consumed` that owns the producer's deleter; `make_capsule` builds a capsule that hands
memory out and calls back when the consumer is done with it. No new dependency: the ABI is
small and stable (dlpack.h v0.8 / v1.x).

This module must never allocate or free device memory, nor decide about streams or devices
(the backends do); it only reads and writes the structs.
"""

from __future__ import annotations

import ctypes
import itertools
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

# DLDeviceType
KDL_CPU = 1
KDL_CUDA = 2
KDL_CUDA_HOST = 3
KDL_ROCM = 10
KDL_CUDA_MANAGED = 13
DEVICE_NAMES = {1: "CPU", 2: "CUDA", 3: "CUDA pinned host", 4: "OpenCL", 7: "Vulkan",
                8: "Metal", 10: "ROCm", 11: "ROCm host", 13: "CUDA managed", 14: "oneAPI"}

# DLDataTypeCode
_INT, _UINT, _FLOAT, _BFLOAT, _BOOL = 0, 1, 2, 4, 6

FLAG_READ_ONLY = 1  # DLPACK_FLAG_BITMASK_READ_ONLY (versioned tensors only)

LEGACY_NAME = b"dltensor"
VERSIONED_NAME = b"dltensor_versioned"
USED_LEGACY_NAME = b"used_dltensor"
USED_VERSIONED_NAME = b"used_dltensor_versioned"


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device", DLDevice),
        ("ndim", ctypes.c_int32),
        ("dtype", DLDataType),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


class DLManagedTensor(ctypes.Structure):
    pass


_Deleter = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
DLManagedTensor._fields_ = [
    ("dl_tensor", DLTensor),
    ("manager_ctx", ctypes.c_void_p),
    ("deleter", _Deleter),
]


class DLPackVersion(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)]


class DLManagedTensorVersioned(ctypes.Structure):
    _fields_ = [
        ("version", DLPackVersion),
        ("manager_ctx", ctypes.c_void_p),
        ("deleter", _Deleter),
        ("flags", ctypes.c_uint64),
        ("dl_tensor", DLTensor),
    ]


# --------------------------------------------------------------------- PyCapsule C API
_api = ctypes.pythonapi
_api.PyCapsule_IsValid.restype = ctypes.c_int
_api.PyCapsule_IsValid.argtypes = [ctypes.py_object, ctypes.c_char_p]
_api.PyCapsule_GetPointer.restype = ctypes.c_void_p
_api.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
_api.PyCapsule_SetName.restype = ctypes.c_int
_api.PyCapsule_SetName.argtypes = [ctypes.py_object, ctypes.c_char_p]
_api.PyCapsule_New.restype = ctypes.py_object
_api.PyCapsule_New.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]

# The capsule destructor runs while the capsule is being deallocated: it must take the raw
# pointer (a py_object argument would resurrect the dying object).
_CapsuleDestructor = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
# separate function objects with raw-pointer signatures (pythonapi caches attributes)
_raw_is_valid = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p)(
    ("PyCapsule_IsValid", ctypes.pythonapi)
)
_raw_get_pointer = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p, ctypes.c_char_p)(
    ("PyCapsule_GetPointer", ctypes.pythonapi)
)


# --------------------------------------------------------------------- dtypes
_NUMPY_OF = {
    (_INT, 8): np.int8, (_INT, 16): np.int16, (_INT, 32): np.int32, (_INT, 64): np.int64,
    (_UINT, 8): np.uint8, (_UINT, 16): np.uint16, (_UINT, 32): np.uint32,
    (_UINT, 64): np.uint64,
    (_FLOAT, 16): np.float16, (_FLOAT, 32): np.float32, (_FLOAT, 64): np.float64,
    (_BOOL, 8): np.bool_,
}


def numpy_dtype(dt: DLDataType) -> np.dtype | None:
    """The numpy dtype of a DLPack element type, or None where numpy has none (bfloat16)."""
    t = _NUMPY_OF.get((int(dt.code), int(dt.bits)))
    return None if t is None or int(dt.lanes) != 1 else np.dtype(t)


def dl_dtype(dtype: np.dtype) -> DLDataType:
    """The DLPack element type of a numpy dtype (ValueError when DLPack has none)."""
    dt = np.dtype(dtype)
    for (code, bits), t in _NUMPY_OF.items():
        if np.dtype(t) == dt:
            return DLDataType(code, bits, 1)
    raise ValueError(f"numpy dtype {dt} has no DLPack element type")


def describe_dtype(dt: DLDataType) -> str:
    names = {_INT: "int", _UINT: "uint", _FLOAT: "float", _BFLOAT: "bfloat", _BOOL: "bool"}
    base = f"{names.get(int(dt.code), f'code{int(dt.code)}')}{int(dt.bits)}"
    return base if int(dt.lanes) == 1 else f"{base}x{int(dt.lanes)}"


def device_name(device_type: int) -> str:
    return DEVICE_NAMES.get(int(device_type), f"DLPack device type {int(device_type)}")


# --------------------------------------------------------------------- consuming
@dataclass
class Consumed:
    """A producer's tensor taken out of its capsule: facts, and the duty to call its deleter."""

    data: int  # data pointer + byte_offset
    device_type: int
    device_id: int
    shape: tuple[int, ...]
    strides: tuple[int, ...] | None  # in elements; None = compact row-major
    dtype: DLDataType
    itemsize_bits: int
    read_only: bool
    _managed: int  # address of the (versioned) managed tensor
    _deleter: Any

    @property
    def nbytes(self) -> int:
        n = 1
        for s in self.shape:
            n *= s
        return n * self.itemsize_bits // 8

    def is_c_contiguous(self) -> bool:
        if self.strides is None:
            return True
        expect = 1
        for size, stride in zip(reversed(self.shape), reversed(self.strides)):
            if size != 1 and stride != expect:
                return False
            expect *= size
        return True

    def release(self) -> None:
        """Tell the producer we are done (calls its deleter once)."""
        fn, self._deleter = self._deleter, None
        if fn:
            fn(self._managed)


def consume(capsule: Any) -> Consumed:
    """Take a DLPack capsule (marking it used, as the protocol requires)."""
    if _api.PyCapsule_IsValid(capsule, VERSIONED_NAME):
        addr = int(_api.PyCapsule_GetPointer(capsule, VERSIONED_NAME))
        mv = DLManagedTensorVersioned.from_address(addr)
        if int(mv.version.major) > 1:
            raise BufferError(
                f"DLPack version {int(mv.version.major)}.{int(mv.version.minor)} is newer than "
                "vyre understands (1.x)"
            )
        t, deleter, flags, used = mv.dl_tensor, mv.deleter, int(mv.flags), USED_VERSIONED_NAME
    elif _api.PyCapsule_IsValid(capsule, LEGACY_NAME):
        addr = int(_api.PyCapsule_GetPointer(capsule, LEGACY_NAME))
        ml = DLManagedTensor.from_address(addr)
        t, deleter, flags, used = ml.dl_tensor, ml.deleter, 0, USED_LEGACY_NAME
    else:
        raise BufferError(
            "__dlpack__() did not return an unused DLPack capsule ('dltensor'); "
            "was this tensor's capsule consumed already?"
        )
    ndim = int(t.ndim)
    shape = tuple(int(t.shape[i]) for i in range(ndim))
    strides = tuple(int(t.strides[i]) for i in range(ndim)) if t.strides else None
    bits = int(t.dtype.bits) * int(t.dtype.lanes)
    out = Consumed(
        data=int(t.data or 0) + int(t.byte_offset),
        device_type=int(t.device.device_type),
        device_id=int(t.device.device_id),
        shape=shape,
        strides=strides,
        dtype=DLDataType(t.dtype.code, t.dtype.bits, t.dtype.lanes),
        itemsize_bits=bits,
        read_only=bool(flags & FLAG_READ_ONLY),
        _managed=addr,
        _deleter=deleter if deleter else None,
    )
    _api.PyCapsule_SetName(capsule, used)
    return out


# --------------------------------------------------------------------- producing
@dataclass
class _Export:
    managed: DLManagedTensor
    shape: Any
    strides: Any
    keep: Any  # what must stay alive until the consumer's deleter runs
    on_release: Callable[[], None] | None


_exports: dict[int, _Export] = {}  # manager_ctx -> export
_export_ids = itertools.count(1)
_export_lock = threading.Lock()


def _release_export(ctx: int) -> None:
    with _export_lock:
        ex = _exports.pop(ctx, None)
    if ex is not None and ex.on_release is not None:
        ex.on_release()


@_Deleter
def _managed_deleter(addr: int | None) -> None:
    if addr:
        _release_export(int(DLManagedTensor.from_address(addr).manager_ctx or 0))


@_CapsuleDestructor
def _capsule_destructor(cap: int | None) -> None:
    # a capsule nobody consumed (still named "dltensor"): release what it hands out
    if cap and _raw_is_valid(cap, LEGACY_NAME):
        addr = _raw_get_pointer(cap, LEGACY_NAME)
        if addr:
            _managed_deleter(addr)


def make_capsule(
    data: int,
    device_type: int,
    device_id: int,
    shape: tuple[int, ...],
    dtype: np.dtype,
    keep: Any,
    on_release: Callable[[], None] | None = None,
    strides: tuple[int, ...] | None = None,
) -> Any:
    """A legacy "dltensor" capsule describing memory at `data` (C-contiguous unless
    `strides`, in elements, are given).

    `keep` stays referenced until the consumer calls the deleter (or the unconsumed capsule
    dies); `on_release` runs then.
    """
    ctx = next(_export_ids)
    shp = (ctypes.c_int64 * max(len(shape), 1))(*shape)
    std = None if strides is None else (ctypes.c_int64 * max(len(strides), 1))(*strides)
    m = DLManagedTensor()
    m.dl_tensor.data = data or None
    m.dl_tensor.device = DLDevice(device_type, device_id)
    m.dl_tensor.ndim = len(shape)
    m.dl_tensor.dtype = dl_dtype(dtype)
    m.dl_tensor.shape = ctypes.cast(shp, ctypes.POINTER(ctypes.c_int64))
    m.dl_tensor.strides = (None if std is None  # None: compact row-major
                           else ctypes.cast(std, ctypes.POINTER(ctypes.c_int64)))
    m.dl_tensor.byte_offset = 0
    m.manager_ctx = ctx
    m.deleter = _managed_deleter
    with _export_lock:
        _exports[ctx] = _Export(m, shp, std, keep, on_release)
    return _api.PyCapsule_New(ctypes.addressof(m), LEGACY_NAME,
                              ctypes.cast(_capsule_destructor, ctypes.c_void_p))


def live_exports() -> int:
    """How many exported capsules' consumers have not released them yet (for tests)."""
    with _export_lock:
        return len(_exports)
