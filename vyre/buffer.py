"""Device buffers: the protocol every backend's buffer follows, a base class carrying
ownership, and conversion of host data into bytes.

A buffer is untyped bytes owned by exactly one backend instance; Programs interpret it
through their declarations. This module must never copy device memory or guess a dtype.
"""

from __future__ import annotations

import itertools
from typing import Any, Protocol, runtime_checkable

import numpy as np

from .errors import BufferOwnershipError, BufferStateError, InvalidDispatch
from .hostarrays import host_bytes

__all__ = ["BufferBase", "DeviceBuffer", "check_range", "check_usable", "host_bytes"]

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


class BufferOwner(Protocol):
    """What a buffer asks of the backend instance that owns it: its id and context
    generation, `free`, and the hooks BaseBackend defines for the buffer's own methods
    (typed here, so this module needs nothing of vyre.backend)."""

    id: str

    @property
    def context_generation(self) -> int: ...

    def free(self, buffer: Any) -> None: ...

    def _stale_reason(self, buffer: BufferBase) -> str | None: ...

    def _export_dlpack(self, buffer: BufferBase, dtype: Any, shape: Any, stream: Any,
                       max_version: Any, dl_device: Any, copy: Any) -> Any: ...

    def _dlpack_device(self, buffer: BufferBase) -> tuple[int, int]: ...

    def _host_view(self, buffer: BufferBase, dtype: Any) -> np.ndarray: ...


class FixedFields:
    """A handle whose FIXED_FIELDS, once set, can be neither changed nor deleted (every
    check vyre makes trusts them: owner, length, device memory, token)."""

    FIXED_FIELDS: frozenset[str] = frozenset()

    def __setattr__(self, name: str, value: Any) -> None:
        if name in self.FIXED_FIELDS and name in self.__dict__:
            raise fixed_field_error(self, name)
        object.__setattr__(self, name, value)

    def __delattr__(self, name: str) -> None:
        if name in self.FIXED_FIELDS:
            raise fixed_field_error(self, name)
        object.__delattr__(self, name)


class BufferBase(FixedFields):
    """Common state of a backend's buffer: owner instance, size, label, freed flag, and the
    owner's context generation at allocation (a buffer from a lost context is stale).

    `dtype`/`shape` are known only for buffers borrowed from an array framework (they are
    what the buffer exports by default); `readonly` marks memory the producer lent read-only.
    """

    dtype: np.dtype | None = None
    shape: tuple[int, ...] | None = None
    readonly: bool = False
    borrowed: bool = False
    #: What every check trusts (which instance owns the memory, how long it is, where it
    #: is): set once at allocation and never again, since a handle edited by hand would
    #: make vyre read or write outside the memory it names. Backends add their own fields.
    #: (`readonly` and `borrowed` are set once, when a borrowed buffer is made.)
    FIXED_FIELDS: frozenset[str] = frozenset(
        {"_owner", "backend_id", "byte_len", "serial", "generation", "readonly", "borrowed"})

    def __init__(self, owner: BufferOwner, byte_len: int, label: str | None) -> None:
        self._owner = owner
        self.backend_id = owner.id
        self.byte_len = byte_len
        self.label = label
        self.serial = next(_ids)
        self._freed = False
        self.generation = owner.context_generation

    def __reduce_ex__(self, protocol: Any) -> Any:
        # (pickle and copy.copy / deepcopy both come here) a copy would be a second handle
        # to the same memory that free() could not mark freed, and in another process it
        # would name memory that is not there
        raise BufferOwnershipError(
            f"{self.describe()} cannot be pickled or copied: it is a handle to memory of "
            f"backend instance {self.backend_id!r} in this process; pickle its data instead "
            "(backend.read(buffer) gives a numpy array), or copy it to another backend with "
            "vyre.transfer(buffer, backend)"
        )

    @property
    def owner(self) -> object:
        return self._owner

    @property
    def freed(self) -> bool:
        return self._freed

    @property
    def stale_reason(self) -> str | None:
        """Why this buffer's memory is gone with a lost device context, or None if it is not."""
        return self._owner._stale_reason(self)

    # ------------------------------------------------------------ interop (owner decides)
    def __dlpack__(self, stream: Any = None, max_version: tuple[int, int] | None = None,
                   dl_device: tuple[int, int] | None = None, copy: bool | None = None) -> Any:
        """DLPack export without copying (torch.from_dlpack(buf), cupy.from_dlpack(buf)).

        Exports `dtype`/`shape` when known (a borrowed buffer), else the raw bytes as uint8;
        `as_dlpack(dtype, shape)` picks another view. Backends that cannot export raise
        UnsupportedFeature.
        """
        return self._owner._export_dlpack(self, None, None, stream, max_version, dl_device,
                                          copy)

    def __dlpack_device__(self) -> tuple[int, int]:
        return self._owner._dlpack_device(self)

    def as_dlpack(self, dtype: Any, shape: tuple[int, ...] | int | None = None) -> Any:
        """An object whose __dlpack__ exports this buffer as `dtype` (and `shape`)."""
        return _TypedExport(self, dtype, shape)

    def host_view(self, dtype: Any = np.uint8) -> np.ndarray:
        """A numpy view of a host-accessible buffer (managed memory); no copy.

        Waits for this backend's enqueued work first. Backends whose buffers the host cannot
        address raise UnsupportedFeature; read() copies instead.
        """
        return self._owner._host_view(self, dtype)

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


class _TypedExport:
    """`buffer.as_dlpack(dtype, shape)`: the buffer exported through DLPack as a typed array."""

    def __init__(self, buffer: BufferBase, dtype: Any, shape: tuple[int, ...] | int | None):
        self.buffer = buffer
        self.dtype = dtype
        self.shape = (shape,) if isinstance(shape, int) else shape

    def __dlpack__(self, stream: Any = None, max_version: tuple[int, int] | None = None,
                   dl_device: tuple[int, int] | None = None, copy: bool | None = None) -> Any:
        b = self.buffer
        return b._owner._export_dlpack(b, self.dtype, self.shape, stream, max_version,
                                       dl_device, copy)

    def __dlpack_device__(self) -> tuple[int, int]:
        return self.buffer.__dlpack_device__()


def fixed_field_error(buf: Any, name: str) -> BufferStateError:
    """The error for changing a field of a buffer handle that is fixed at allocation."""
    field = name.lstrip("_")
    return BufferStateError(
        f"{buf.describe()}: its {field} is fixed at allocation (every check of a read, write "
        "or dispatch trusts it), and cannot be changed; allocate a new buffer with "
        "backend.allocate_device_buffer(byte_len) for another size, or move the data to "
        "another backend with vyre.transfer(buffer, backend)"
    )


def check_label(label: object, what: str) -> None:
    """A buffer label is a str or None (it names the buffer in every message)."""
    if label is not None and not isinstance(label, str):
        raise InvalidDispatch(
            f"{what}: label must be a str (or None), got {type(label).__name__} {label!r:.40}"
        )


def check_usable(buf: BufferBase) -> None:
    """Refuse a freed buffer, a buffer of a closed backend, or a stale one (lost context)."""
    if buf.freed:
        owner = buf._owner
        if getattr(owner, "closed", False):
            raise BufferStateError(
                f"{buf.describe()} belonged to backend {owner.id!r}, which was closed; its "
                "memory is gone: allocate a new buffer on a live backend"
            )
        raise BufferStateError(
            f"{buf.describe()} was freed and cannot be used; allocate a new buffer"
        )
    why = buf.stale_reason
    if why is not None:
        raise BufferStateError(
            f"{buf.describe()} is stale: {why}; its memory is gone and vyre will not touch "
            "it: allocate a new buffer (or borrow the array again) on a new backend"
        )


def as_index(value: object, what: str) -> int:
    """`value` as a byte offset or length (an int, not a bool), else InvalidDispatch."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise InvalidDispatch(
            f"{what} must be an int number of bytes, got {type(value).__name__} {value!r:.40}"
        )
    return int(value)


def check_range(buf: BufferBase, offset: int, length: int) -> None:
    if offset < 0 or length < 0 or offset + length > buf.byte_len:
        raise BufferStateError(
            f"range [{offset}, {offset + length}) lies outside {buf.describe()}; "
            f"valid offsets are 0..{buf.byte_len}"
        )
