"""The bottom of the CUDA backend: its device part, and what every other part shares.

`CudaDevice` is the device part (vyre.parts.Device): the device's primary context (reset
first when an earlier fault poisoned it), this instance's non-blocking stream, the error
mapping (driver errors to vyre errors; a sticky one marks the context lost), the ordering
with framework streams (interop.py's events) and the indirect-grid status words kernels
flag. `ContextState` is one instance's CUDA context as the finalizers of its objects see it
(driver, context, stream, whether it is still usable); `GENERATION` counts each device's
primary-context resets, which make older contexts' objects stale. `CudaBuffer` is the
backend's buffer. `CudaInstance` is the protocol of the services a CudaBackend offers its
helper modules (the device part's, and buffer ownership): interop.py, managed.py and
page_locked.py take a CudaDevice or a CudaInstance, so they depend on this module and never
on runtime.py, which imports them. This module must never import runtime.py or a helper
module, nor make a driver call at import.
"""

from __future__ import annotations

import contextlib
import ctypes
import threading
import weakref
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from vyre.buffer import BufferBase, BufferOwner, check_usable
from vyre.errors import BackendUnavailable, DispatchError
from vyre.parts import Device

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


class CudaDevice(Device):
    """One CUDA device through its primary context and this instance's own stream (see the
    module docstring). Its attributes keep the names CudaBackend publishes them under."""

    caps: Capabilities  # (probed by CudaBackend once the context is up)

    def __init__(self, ordinal: int) -> None:
        super().__init__(f"cuda:{ordinal}")
        drv = D.load()
        count = int(D.call(drv.cuDeviceGetCount))
        if count == 0:
            raise BackendUnavailable(self.id, "the driver reports no CUDA device")
        if not 0 <= ordinal < count:
            raise BackendUnavailable(
                self.id, f"there are {count} CUDA device(s): use cuda:0 .. cuda:{count - 1}"
            )
        self.driver = drv
        self.ordinal = ordinal
        self.dev = D.call(drv.cuDeviceGet, ordinal)
        self.private_ctx = False
        ctx, gen = self._retain_healthy_context()
        self.context_state = state = ContextState(drv, ordinal, ctx, gen)
        wself = weakref.ref(self)
        state.on_dead = lambda: _lost(wself)
        state.current_threads.add(threading.get_ident())
        self.cu_stream = D.call(drv.cuStreamCreate,
                                int(drv.CUstream_flags.CU_STREAM_NON_BLOCKING))
        state.stream = self.cu_stream
        # threads on which a launch needs no check: the context is current there and no
        # buffer is shared with a framework stream (then it is empty: see interop_active)
        self.launch_threads: set[int] | frozenset[int] = state.current_threads
        self._interop_active = False
        self.interop_events: dict[int, Any] = {}  # framework stream -> ordering event
        self._indirect_status: tuple[int, np.ndarray] | None = None  # see indirect_status_ptr

    # ------------------------------------------------------------ the context
    def _retain_healthy_context(self) -> tuple[Any, int]:
        """The device's primary context, reset first if an earlier fault poisoned it."""
        drv, dev = self.driver, self.dev
        with GEN_LOCK:
            err, ctx = drv.cuDevicePrimaryCtxRetain(dev)
            if int(err) != 0:
                if int(err) not in D.STICKY:
                    raise D.fail("cuDevicePrimaryCtxRetain", err)
                ctx = self._reset_primary_context()
            else:
                D.call(drv.cuCtxSetCurrent, ctx)
                (err,) = drv.cuCtxSynchronize()
                if int(err) in D.STICKY:
                    drv.cuDevicePrimaryCtxRelease(dev)
                    ctx = self._reset_primary_context()
                elif int(err) != 0:
                    raise D.fail("cuCtxSynchronize", err)
            return ctx, GENERATION.get(self.ordinal, 0)

    def _reset_primary_context(self) -> Any:
        drv, dev = self.driver, self.dev
        (err,) = drv.cuDevicePrimaryCtxReset(dev)
        GENERATION[self.ordinal] = GENERATION.get(self.ordinal, 0) + 1
        for st in list(STATES):  # older instances' contexts and buffers are gone now
            if st.ordinal == self.ordinal and st.dead is None and not st.closed:
                st.kill(f"device {self.ordinal}'s context was reset after a fault")
        if int(err) == 0:
            err, ctx = drv.cuDevicePrimaryCtxRetain(dev)
            if int(err) == 0:
                (err,) = drv.cuCtxSetCurrent(ctx)
                if int(err) == 0:
                    (err,) = drv.cuCtxSynchronize()
                    if int(err) == 0:
                        return ctx
        return self._create_private_context(D.error_name(drv, err))

    def _create_private_context(self, why: str) -> Any:
        """A context of this instance's own, for when the primary context cannot be reset."""
        drv, dev = self.driver, self.dev
        try:
            try:
                err, ctx = drv.cuCtxCreate(None, 0, dev)  # cuda-bindings 13
            except TypeError:
                err, ctx = drv.cuCtxCreate(0, dev)  # cuda-bindings 12
            if int(err) == 0:
                (err,) = drv.cuCtxSetCurrent(ctx)
                if int(err) == 0:
                    (err,) = drv.cuCtxSynchronize()
                    if int(err) == 0:
                        self.private_ctx = True
                        return ctx
            why = f"{why}; a new context failed too ({D.error_name(drv, err)})"
        except Exception as exc:
            why = f"{why}; a new context failed too ({exc})"
        raise BackendUnavailable(
            self.id,
            f"an earlier kernel fault left device {self.ordinal} unusable in this process "
            f"(resetting its primary context failed: {why}); restart the process",
        )

    def check(self) -> None:
        state = self.context_state
        if state.dead is not None:
            raise BackendUnavailable(
                self.id,
                f"the CUDA context was lost after a device fault ({state.dead}); close "
                "this instance and create a new one with vyre.get_backend('cuda')",
            )
        state.make_current()

    @property
    def context_generation(self) -> int:
        return GENERATION.get(self.ordinal, 0)

    def stale_reason(self, buffer: BufferBase) -> str | None:
        if self.context_state.dead is not None:
            return f"the CUDA context it lived in was lost ({self.context_state.dead})"
        gen = GENERATION.get(self.ordinal, 0)
        if buffer.generation != gen:
            return (f"CUDA device {self.ordinal}'s context was reset after a fault "
                    f"(generation {buffer.generation} -> {gen})")
        return None

    # ------------------------------------------------------------ error mapping
    def driver_call(self, fn: Any, *args: Any, what: str | None = None) -> Any:
        """`fn(*args)` of the driver API, its result unwrapped; an error raises the matching
        vyre error (and a sticky one marks the context lost)."""
        try:
            return D.call(fn, *args, what=what)
        except D.CudaError as exc:
            if exc.sticky:
                self.context_state.kill(str(exc))
            raise

    def driver_fail(self, what: str, err: Any, requested: int | None = None) -> None:
        """Raise the vyre error for driver status `err` of `what` (OutOfDeviceMemory when
        `requested` bytes could not be had; a closed instance's when close() is racing)."""
        if self.closing:  # a driver call raced close(): what it used is gone
            raise self.closed_error() from None
        exc = D.fail(what, err, requested)
        if isinstance(exc, D.CudaError) and exc.sticky:
            self.context_state.kill(str(exc))
        raise exc

    def event(self, timing: bool) -> Any:
        """A new CUDA event (with timing, or without: cheaper to record)."""
        flags = self.driver.CUevent_flags
        f = flags.CU_EVENT_DEFAULT if timing else flags.CU_EVENT_DISABLE_TIMING
        return self.driver_call(self.driver.cuEventCreate, int(f), what="cuEventCreate")

    @property
    def interop_active(self) -> bool:
        """Whether some buffer of this instance is shared with a framework stream (set by
        interop.py; from then on every launch looks at its buffers' streams)."""
        return self._interop_active

    @interop_active.setter
    def interop_active(self, value: bool) -> None:
        self._interop_active = bool(value)
        self.launch_threads = frozenset() if value else self.context_state.current_threads

    # ------------------------------------------------------------ flagged conditions
    def indirect_status_ptr(self) -> int:
        """Page-locked host words [flag, largest count] that indirect kernels set when a
        grid is over the limit (cuMemAllocHost memory: with unified addressing the device
        writes it through the host address); made on first use."""
        if self._indirect_status is None:
            err, p = self.driver.cuMemAllocHost(8)
            if int(err) != 0:
                self.driver_fail("cuMemAllocHost", err, requested=8)
            words = np.ctypeslib.as_array((ctypes.c_uint32 * 2).from_address(int(p)))
            words[:] = 0
            self._indirect_status = (int(p), words)
        return self._indirect_status[0]

    def check_indirect_status(self) -> None:
        """Raise DispatchError (once) if an indirect grid over the limit was dispatched
        since the last check: called after every wait for the device (wait, synchronize,
        reads, pipeline runs), before any result is returned."""
        st = self._indirect_status
        if st is None or not st[1][0]:
            return
        count = int(st[1][1])
        st[1][:] = 0
        limit = self.capabilities().limits["max_workgroups_per_dimension"]
        raise DispatchError(
            f"{self.id}: a program was dispatched with an indirect grid of {count} "
            f"workgroups in one dimension, over the limit of {limit} per dimension "
            "(limits['max_workgroups_per_dimension']); nothing ran. Keep every count in the "
            f"grid buffer at most {limit}: use more dimensions (y, z) or a larger workgroup "
            "size.")

    def memory_info(self) -> tuple[int, int]:
        """(free, total) device bytes, from cuMemGetInfo."""
        self.check_open()
        free, total = self.driver_call(self.driver.cuMemGetInfo)
        return int(free), int(total)

    def close(self) -> None:
        """The status words, the ordering events, the stream, then the context (the other
        parts closed before: nothing is in flight)."""
        st = self.context_state
        drv = self.driver
        usable = st.usable
        st.stream = None  # a late finalizer's free must not wait on the destroyed stream
        if usable:
            with contextlib.suppress(Exception):
                if self._indirect_status is not None:
                    drv.cuMemFreeHost(self._indirect_status[0])
                events, self.interop_events = self.interop_events, {}
                for e in events.values():
                    with contextlib.suppress(Exception):
                        drv.cuEventDestroy(e)
                drv.cuStreamDestroy(self.cu_stream)
        self._indirect_status = None  # (its words' view is never read after close)
        st.closed = True
        if self.private_ctx:
            with contextlib.suppress(Exception):
                drv.cuCtxDestroy(st.ctx)
        elif usable:  # a dead context is left for the next instance to reset
            with contextlib.suppress(Exception):
                drv.cuDevicePrimaryCtxRelease(self.dev)


def _lost(wself: weakref.ref[CudaDevice]) -> None:
    """A context's sticky fault or reset: the instance's launches re-check (and refuse)."""
    me = wself()
    if me is not None:
        me.on_lost()


class CudaInstance(BufferOwner, Protocol):
    """The services of a CudaBackend its helper modules use (runtime.py documents each):
    the device part's stream, driver, context, lock and error mapping, and, as every
    buffer owner, what its buffers ask of it and `adopt`."""

    interop_active: bool  # some buffer is shared with a framework stream

    @property
    def interop_events(self) -> dict[int, Any]: ...  # framework stream -> ordering event

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

    def __init__(self, owner: CudaInstance, byte_len: int, label: str | None, ptr: int,
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
