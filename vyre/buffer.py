"""Device buffers: the protocol every backend's buffer follows, a base class carrying
ownership, and conversion of host data into bytes.

A buffer is untyped bytes owned by exactly one backend instance; Programs interpret it
through their declarations. This module must never copy device memory or guess a dtype.
"""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import numpy as np

from .errors import BufferStateError, InvalidDispatch
from .ir.types import ScalarType

if TYPE_CHECKING:
    from .backend import BaseBackend

_ids = itertools.count(1)


@runtime_checkable
class DeviceBuffer(Protocol):
    backend_id: str
    byte_len: int
    label: str | None

    @property
    def owner(self) -> object: ...

    @property
    def freed(self) -> bool: ...

    def free(self) -> None: ...


class BufferBase:
    """Common state of a backend's buffer: owner instance, size, label, freed flag."""

    def __init__(self, owner: BaseBackend, byte_len: int, label: str | None) -> None:
        self._owner = owner
        self.backend_id = owner.id
        self.byte_len = byte_len
        self.label = label
        self.serial = next(_ids)
        self._freed = False

    @property
    def owner(self) -> object:
        return self._owner

    @property
    def freed(self) -> bool:
        return self._freed

    def describe(self) -> str:
        name = repr(self.label) if self.label else f"#{self.serial}"
        return f"buffer {name} ({self.byte_len} bytes, owned by {self.backend_id})"

    def free(self) -> None:
        """Release the device memory now. Freeing twice is harmless."""
        if not self._freed:
            self._owner.free(self)

    def __enter__(self) -> BufferBase:
        return self

    def __exit__(self, *exc: object) -> None:
        self.free()

    def __repr__(self) -> str:
        state = " freed" if self._freed else ""
        return f"<{type(self).__name__} {self.describe()}{state}>"


def check_usable(buf: BufferBase) -> None:
    if buf.freed:
        raise BufferStateError(
            f"{buf.describe()} was freed and cannot be used; allocate a new buffer"
        )


def check_range(buf: BufferBase, offset: int, length: int) -> None:
    if offset < 0 or length < 0 or offset + length > buf.byte_len:
        raise BufferStateError(
            f"range [{offset}, {offset + length}) lies outside {buf.describe()}; "
            f"valid offsets are 0..{buf.byte_len}"
        )


def host_bytes(data: Any, what: str, ty: ScalarType | None = None) -> memoryview:
    """A C-contiguous byte view of host data, refusing anything ambiguous.

    With `ty`, numpy arrays must already have that element type (no silent conversion);
    lists and tuples are converted to it; bytes-like objects are taken as raw bytes.
    """
    if isinstance(data, (bytes, bytearray, memoryview)):
        mv = memoryview(data)
        if not mv.c_contiguous:
            raise InvalidDispatch(
                f"{what}: the memoryview is not contiguous; copy it with bytes(view) first"
            )
        return mv.cast("B")
    if isinstance(data, (list, tuple)):
        if ty is None:
            raise InvalidDispatch(
                f"{what}: a list has no element type here; pass a numpy array or bytes"
            )
        data = np.asarray(data, dtype=ty.numpy)
    if isinstance(data, np.generic):
        data = np.asarray(data)
    if not isinstance(data, np.ndarray):
        raise InvalidDispatch(
            f"{what}: expected a numpy array, bytes or memoryview, got {type(data).__name__}"
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
