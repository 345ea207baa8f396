"""The bottom of the CUDA backend: what its parts share, below runtime.py.

`ContextState` is one instance's CUDA context as the finalizers of its objects see it
(driver, context, stream, whether it is still usable); `GENERATION` counts each device's
primary-context resets, which make older contexts' objects stale. `CudaBuffer` is the
backend's buffer. `CudaDevice` is the protocol of the runtime services CudaBackend offers
its helper modules (the stream, the driver and its error mapping, the lock, the context):
interop.py, managed.py and page_locked.py take a CudaDevice, so they depend on this module
and never on runtime.py, which imports them. This module must never import runtime.py or a
helper module, nor make a driver call at import.
"""

from __future__ import annotations

import contextlib
import threading
import weakref
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from vyre.buffer import BufferBase, BufferOwner, check_usable

from . import driver as D

if TYPE_CHECKING:
    from vyre.interface import Capabilities

GENERATION: dict[int, int] = {}  # device ordinal -> primary-context resets so far
GEN_LOCK = threading.Lock()
STATES: weakref.WeakSet[Any] = weakref.WeakSet()  # every instance's ContextState, to mark stale


class ContextState:
    """What buffers' finalizers need: the driver, the context, whether it is still usable."""

    def __init__(self, drv: Any, ordinal: int, ctx: Any, generation: int) -> None:
        self.drv = drv
        self.ordinal = ordinal
        self.ctx = ctx
        self.ctx_id = int(ctx)
        self.generation = generation
        self.dead: str | None = None
        self.closed = False
        self.on_dead: Callable[[], None] = lambda: None  # the owner's: re-check its launches
        self.current_threads: set[int] = set()
        self.page_locked: dict[int, int] = {}  # host ptr -> bytes registered (page_locked.py)
        self.stream: Any = None  # the owner's stream, once made: frees wait for its work
        # freed device memory kept for reuse: rounded size -> pointers (see recycle())
        self.cache: dict[int, list[int]] = {}
        self.cached_bytes = 0
        self.cache_lock = threading.Lock()
        STATES.add(self)

    @property
    def usable(self) -> bool:
        return (
            not self.closed and self.dead is None
            and GENERATION.get(self.ordinal, 0) == self.generation
        )

    def kill(self, reason: str) -> None:
        """The context is unusable from now on (a sticky fault, or reset by another instance)."""
        self.dead = reason
        self.on_dead()

    def make_current(self) -> bool:
        """Make this context current on the calling thread unless the driver says it
        already is; True if it was not. Asked of the driver every time, never remembered
        per thread: another vyre instance (another GPU), torch, CuPy or the user's own
        driver calls may change a thread's current context between any two of ours, and an
        allocation or a module load under the wrong context would silently land on the
        wrong device."""
        err, cur = self.drv.cuCtxGetCurrent()
        if int(err) == 0 and cur is not None and int(cur) == self.ctx_id:
            return False
        D.call(self.drv.cuCtxSetCurrent, self.ctx)
        # the launch hot path (CudaBackend._launch_record) skips every check on these
        # threads and relies on a failed launch to find a context changed behind its back
        self.current_threads.add(threading.get_ident())
        return True

    def free_ptr(self, ptr: int, capacity: int = 0, recyclable: Sequence[bool] = (False,)
                 ) -> None:
        """Give back device memory: kept for reuse (recycle) where it only ever served this
        instance's stream, else freed once the kernels already enqueued on the owner's
        stream (which may use it: a launch enqueued just before a free() or a drop) have
        finished; not left to cuMemFree's implicit synchronisation, which the driver does
        not promise."""
        if ptr and capacity and recyclable[0] and self.recycle(ptr, capacity):
            return
        if ptr and self.usable:
            with contextlib.suppress(Exception):
                self.make_current()
                if self.stream is not None:
                    self.drv.cuStreamSynchronize(self.stream)
                self.drv.cuMemFree(ptr)

    # ------------------------------------------------------------ the memory cache
    # Freed device memory is kept and handed to the next allocation of the same rounded
    # size, as CuPy's and torch's allocators do: cuMemAlloc plus a free's stream wait and
    # cuMemFree cost more than a 2 GiB scan (measured on the H100: a library sort of 2^26
    # keys spent half its time allocating and freeing its temporaries). Reuse is safe
    # without a wait because every use of the memory is ordered on the owner's stream:
    # its kernels, copies and host transfers run there, and a peer copy reading it makes
    # that stream wait for the copy (peer.py). Memory that left that order (lent through
    # DLPack or linked to a framework stream: interop.py; exported by IPC) is never kept.
    def recycle(self, ptr: int, capacity: int) -> bool:
        """Keep `ptr` (a cuMemAlloc of `capacity` bytes) for reuse; False if this instance
        is closing or its context is gone (the caller frees it as before)."""
        if self.stream is None or not self.usable:
            return False
        with self.cache_lock:
            self.cache.setdefault(capacity, []).append(ptr)
            self.cached_bytes += capacity
        return True

    def reuse(self, capacity: int) -> int:
        """A kept pointer of `capacity` bytes, or 0."""
        with self.cache_lock:
            kept = self.cache.get(capacity)
            if not kept:
                return 0
            self.cached_bytes -= capacity
            return kept.pop()

    def drain(self) -> int:
        """Free every kept pointer (after the owner's stream's work); the bytes freed."""
        with self.cache_lock:
            kept, self.cache = self.cache, {}
            freed, self.cached_bytes = self.cached_bytes, 0
        if not kept or not self.usable:
            return freed if kept else 0
        with contextlib.suppress(Exception):
            self.make_current()
            if self.stream is not None:
                self.drv.cuStreamSynchronize(self.stream)
            for ptrs in kept.values():
                for ptr in ptrs:
                    self.drv.cuMemFree(ptr)
        return freed


def cached_capacity(byte_len: int) -> int:
    """The size an allocation of `byte_len` bytes is made (and kept) at: powers of two
    from 512 bytes to 1 MiB, then multiples of 2 MiB (at most 1/512 of a large buffer is
    unused), so buffers of nearby sizes share the kept memory."""
    if byte_len <= 1 << 20:
        return max(512, 1 << (byte_len - 1).bit_length())
    return -(-byte_len // (2 << 20)) * (2 << 20)


class CudaDevice(BufferOwner, Protocol):
    """The runtime services of a CudaBackend its helper modules use (runtime.py documents
    each): the instance's stream, driver, context, lock and error mapping (and, as every
    buffer owner, what its buffers ask of it)."""

    interop_events: dict[int, Any]  # framework stream -> ordering event (interop.py)
    interop_active: bool  # some buffer is shared with a framework stream

    @property
    def stream_handle(self) -> int: ...

    @property
    def cu_stream(self) -> Any: ...

    @property
    def ordinal(self) -> int: ...

    @property
    def driver(self) -> Any: ...

    @property
    def context_state(self) -> ContextState: ...

    @property
    def lock(self) -> Any: ...

    def capabilities(self) -> Capabilities: ...

    def check_open(self) -> None: ...

    def synchronize(self) -> None: ...

    def driver_call(self, fn: Any, *args: Any, what: str | None = None) -> Any: ...

    def driver_fail(self, what: str, err: Any, requested: int | None = None) -> None: ...

    def adopt(self, buffer: BufferBase) -> None: ...


class CudaBuffer(BufferBase):
    """Device memory from cuMemAlloc (or cuMemAllocManaged, or borrowed through DLPack);
    freed (or handed back) on free(), close(), or when dropped. Its framework-facing
    attributes (interop.py) and the CUDA array interface are here too."""

    # (kind: a borrowed buffer is handed back, never cuMemFree'd; source: kept alive)
    FIXED_FIELDS = BufferBase.FIXED_FIELDS | {"ptr", "kind", "source"}
    ext_streams: tuple[int, ...] = ()
    kind: str = "device"  # "device", "managed" or "borrowed"
    source: Any = None  # a borrowed buffer's producer (kept alive while the buffer lives)
    _pins = 0
    _release_pending = False

    def __init__(self, owner: CudaDevice, byte_len: int, label: str | None, ptr: int,
                 capacity: int = 0) -> None:
        super().__init__(owner, byte_len, label)
        self.ptr = ptr
        # whether the memory may be kept for reuse when freed (cleared when it is lent
        # outside vyre's stream order: interop.pin / link_stream, ipc.export_handle)
        self.recyclable = [capacity > 0]
        self._release = weakref.finalize(self, owner.context_state.free_ptr, ptr, capacity,
                                         self.recyclable)

    @property
    def __cuda_array_interface__(self) -> dict[str, Any]:
        """CUDA Array Interface v3 (Numba, CuPy): the buffer as 1-D `dtype` (uint8 if unknown).

        `stream` is vyre's stream: the consumer orders its work after it.
        """
        check_usable(self)
        dt = self.dtype if self.dtype is not None else np.dtype(np.uint8)
        shape = self.shape if self.shape is not None else (self.byte_len // dt.itemsize,)
        owner: Any = self.owner
        return {
            "shape": tuple(shape),
            "typestr": dt.str,
            "descr": [("", dt.str)],
            "data": (int(getattr(self, "ptr", 0)), bool(self.readonly)),
            "strides": None,
            "version": 3,
            "stream": int(owner.cu_stream) or None,
        }

    def unlink_streams(self) -> None:
        """Stop ordering vyre's work on this buffer with the framework streams it was shared on."""
        self.ext_streams = ()
