"""The buffer registry of a backend instance: the buffers it allocated and has not freed.

`BufferRegistry` checks an allocation's arguments against the device (kind, size, the
largest allocation), has the allocator part make the buffer and counts it live; it releases
a buffer through the allocator when it is freed and every live buffer when the instance
closes. Buffers are held weakly: one whose last handle is dropped without free() is
released like any Python object (an allocator whose memory needs an explicit release
attaches a finalizer to the buffer, as cuda and wgpu do). This module must never keep a
buffer alive, nor talk to a device but through the allocator part.
"""

from __future__ import annotations

import contextlib
import weakref
from collections.abc import Iterable, MutableMapping
from typing import Any, Protocol

import numpy as np

from .buffer import BufferBase, check_label
from .errors import BackendError, InvalidDispatch, OutOfDeviceMemory, UnsupportedFeature
from .features import MANAGED_MEMORY
from .interface import Capabilities
from .launch_cache import LaunchCache
from .parts import Allocator, Device


class RegistryBackend(Protocol):
    """What the registry asks of the instance it serves (vyre.backend.BaseBackend, typed
    here by what is used so that this module never imports the base class)."""

    id: str
    _lock: Any

    def _check_open(self) -> None: ...

    def capabilities(self) -> Capabilities: ...


class BufferRegistry:
    """A backend instance's live buffers over its allocator (see the module docstring)."""

    def __init__(self, backend: RegistryBackend, device: Device, memory: Allocator,
                 launches: LaunchCache) -> None:
        self.backend = backend
        self.device = device
        self.memory = memory
        self.launches = launches  # (its entries die with their buffers)
        self.live: MutableMapping[int, BufferBase] = weakref.WeakValueDictionary()

    def allocate(self, byte_len: int, label: str | None, kind: str) -> BufferBase:
        """`BaseBackend.allocate_device_buffer`: a checked allocation, counted live."""
        backend = self.backend
        backend._check_open()
        check_label(label, "allocate_device_buffer")
        if kind not in ("device", "managed"):
            raise InvalidDispatch(f"kind must be 'device' or 'managed', got {kind!r}")
        if kind == "managed" and MANAGED_MEMORY not in backend.capabilities().features:
            self.memory.allocate_managed(0, label)  # raises the backend's UnsupportedFeature
            raise UnsupportedFeature(MANAGED_MEMORY, backend.id)
        if isinstance(byte_len, bool) or not isinstance(byte_len, (int, np.integer)):
            raise InvalidDispatch(f"byte_len must be an int, got {type(byte_len).__name__}")
        byte_len = int(byte_len)
        if byte_len < 0:
            raise InvalidDispatch(f"byte_len must be >= 0, got {byte_len}")
        limit = backend.capabilities().limits.get("max_allocation_bytes")
        if limit is not None and byte_len > limit:
            raise OutOfDeviceMemory(
                backend.id, byte_len, f"the largest allocation this device allows is {limit} bytes"
            )
        with backend._lock:
            backend._check_open()  # again under the lock: close() may have run meanwhile
            buf = (self.memory.allocate_managed(byte_len, label) if kind == "managed"
                   else self.memory.allocate(byte_len, label))
            self.live[id(buf)] = buf
            return buf

    def adopt(self, buffer: BufferBase) -> None:
        """Count a buffer an allocator made outside allocate_device_buffer (borrowed through
        DLPack, managed) as live."""
        with self.backend._lock:
            self.live[id(buffer)] = buffer

    def release(self, buffer: BufferBase) -> None:
        """Free a live buffer's memory (unless the device is gone) and forget it, and the
        launches remembered over it (lock held)."""
        self.launches.evict(id(buffer))
        if not self.device.closed:
            self.memory.free(buffer)
        buffer._freed = True
        self.live.pop(id(buffer), None)

    def release_all(self, also: Iterable[BufferBase]) -> None:
        """The instance closes: free `also` (its own scratch) and every live buffer, each
        whatever the others' frees raise, and forget them (lock held)."""
        for b in [*also, *self.live.values()]:
            with contextlib.suppress(BackendError):
                self.memory.free(b)
            b._freed = True
        self.live.clear()

    def buffers(self) -> list[BufferBase]:
        """The live buffers."""
        return list(self.live.values())
