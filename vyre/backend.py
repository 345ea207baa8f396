"""The base class every local backend builds on (it satisfies `vyre.interface.Backend`).

The base class owns everything that is the same on every device: argument checking,
ownership, the compile cache and its counters, the host-path convenience `dispatch`
(built from the backend's own upload / dispatch / readback), `stream`, locking and the
closed state. A subclass supplies the device parts (`_allocate`, `_write`, `_read`,
`_launch`, ...). What a subclass does not supply raises UnsupportedFeature: the base class
must never route resident work through host copies.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import threading
import time
import weakref
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Mapping, MutableMapping, Sequence
from typing import Any, TypeVar

import numpy as np

from . import debug, exact_sum_plan
from .binding import (
    BoundDispatch,
    BufferArg,
    Launch,
    LaunchCache,
    bind,
    check_bound_owner,
    check_program_fits,
    next_epoch,
    owned_buffer,
    readable_twice,
    rebind,
    validate_buffer_ownership,
)
from .buffer import (
    BufferBase,
    DeviceBuffer,
    as_index,
    check_label,
    check_range,
    check_usable,
    host_bytes,
)
from .config import DispatchConfig, IndirectGrid, Timing
from .debug.instrument import has_debug
from .errors import (
    BackendError,
    BackendUnavailable,
    BufferStateError,
    InvalidDispatch,
    InvalidProgram,
    OutOfDeviceMemory,
    UnsupportedFeature,
)
from .exact_sum_plan import PlanRecord, ScratchPool
from .features import MANAGED_MEMORY, PAGE_LOCKED_HOST
from .host_path import dispatch_host, iterable_of
from .host_path import stream_chunks as stream_chunks
from .hostarrays import as_dtype, host_destination

# (Capabilities and CompileStats live with the protocol; imported here where they always were)
from .interface import Backend as Backend
from .interface import Capabilities as Capabilities
from .interface import CompileStats as CompileStats
from .ir.nodes import Program
from .ir.validate import validate
from .pipeline import (
    Pipeline,
    PipelineResult,
    ReadRange,
    Step,
    as_steps,
    checked_read,
    checked_span,
    element_dtype,
)

T = TypeVar("T")
#: What a backend hands back for bytes read from the device: a fresh uint8 array (the one copy,
#: which read_many views as the asked dtype) or bytes / a memoryview (copied once more there).
#: Fresh arrays come from np.empty: NumPy asks Linux for huge pages for large ones, which the
#: first write faults in ~4x faster than a bytearray's pages (256 MiB: 45 against 175 ms here).
HostBytes = bytes | bytearray | memoryview | np.ndarray
_perf_ns = time.perf_counter_ns
NO_TIMING = Timing()  # what an untimed dispatch_with_device_buffers returns (the default)
# Timing(ns, ns) through its generated __new__ costs ~0.2 us, tuple.__new__ directly ~0.1
_new_timing = tuple.__new__
_DEFAULT_CONFIG = DispatchConfig()


ENV_COMPILE_CACHE = "VYRE_COMPILE_CACHE_SIZE"
DEFAULT_COMPILE_CACHE_SIZE = 512
"""Compiled programs an instance keeps (least recently used dropped first); an evicted
program is compiled again (or loaded from the disk cache) when next used."""


def compile_cache_size_from_env() -> int:
    """$VYRE_COMPILE_CACHE_SIZE (an int >= 1), else DEFAULT_COMPILE_CACHE_SIZE."""
    raw = os.environ.get(ENV_COMPILE_CACHE, "").strip()
    if not raw:
        return DEFAULT_COMPILE_CACHE_SIZE
    try:
        n = int(raw)
    except ValueError:
        n = 0
    if n < 1:
        raise InvalidDispatch(
            f"${ENV_COMPILE_CACHE}={raw!r}: the compile cache size must be an int >= 1 "
            f"(compiled programs kept per instance; default {DEFAULT_COMPILE_CACHE_SIZE})"
        )
    return n


class Pending:
    """Work enqueued on a backend; `wait()` blocks until it is done and returns its Timing."""

    def __init__(
        self,
        is_ready: Callable[[], bool],
        wait: Callable[[], Timing],
    ) -> None:
        self._is_ready = is_ready
        self._wait = wait
        self._timing: Timing | None = None

    def is_ready(self) -> bool:
        return self._timing is not None or self._is_ready()

    def wait(self) -> Timing:
        if self._timing is None:
            self._timing = self._wait()
        return self._timing

    @classmethod
    def done(cls, timing: Timing) -> Pending:
        p = cls(lambda: True, lambda: timing)
        p._timing = timing
        return p


class BaseBackend:
    """Shared behaviour of all backends; see the module docstring."""

    kind: str = "abstract"
    id: str  # the instance id, e.g. "cuda:0" (set in __init__)
    compile_stats: CompileStats  # the compile cache's counters (set in __init__)
    # a backend's debug and measurement switches: one frozen, hashable value per instance
    # (e.g. CudaOptions), passed to its printer explicitly and part of every compile-cache key
    options: Any = None

    def __init__(self, instance_id: str) -> None:
        self.id = instance_id
        self._closed = False
        # set when close() begins: a driver call racing it that the driver then refuses
        # is reported as the closed instance it is (BackendUnavailable)
        self._closing = False
        self._lock = threading.RLock()
        # LRU: least recently used first; bounded by compile_cache_limit (see _evict_compiled)
        self._compiled: OrderedDict[tuple[str, Any, Any], Any] = OrderedDict()
        self._compile_cache_limit = compile_cache_size_from_env()
        self.compile_stats = CompileStats()
        # held weakly: a buffer whose last handle is dropped without free() is released
        # like any Python object (a backend whose memory needs an explicit release attaches
        # a finalizer to the buffer, as cuda and wgpu do); free() and close() release now
        self._live: MutableMapping[int, BufferBase] = weakref.WeakValueDictionary()
        # dispatches re-issued over the same buffers are bound and prepared once (see
        # dispatch_with_device_buffers); evicted with their buffers
        self._launches = LaunchCache(self._lock)
        # moved on every free, close and context loss: a prepared launch is re-checked
        # (instance open, buffers usable) only when this moved since it last was. Values
        # come from one process-wide counter, so no two instances ever share one (a launch
        # stamped by another instance is never current here)
        self._epoch = next_epoch()
        self._generation = 0  # bumped when the device context is lost (see _context_lost)
        # logs of vyre.print / vyre.assert_ dispatches not read back yet (vyre.debug): read
        # with the next read, synchronize(), pipeline run or close()
        self._debug_logs: list[debug.PendingLog] = []
        self._lost_reason: str | None = None
        # scratch words of order-independent f32 atomic adds (vyre.exact_sum_plan)
        self._exact_scratch = ScratchPool()

    # ------------------------------------------------------------ to override
    def capabilities(self) -> Capabilities:
        raise NotImplementedError

    def _allocate(self, byte_len: int, label: str | None) -> BufferBase:
        raise UnsupportedFeature("allocate_device_buffer", self.id)

    def _free(self, buffer: BufferBase) -> None:
        raise UnsupportedFeature("free", self.id)

    def _write(self, buffer: BufferBase, data: memoryview, offset: int) -> None:
        raise UnsupportedFeature("write", self.id)

    def _read(self, buffer: BufferBase, offset: int, length: int) -> HostBytes:
        raise UnsupportedFeature("read", self.id)

    def _compile(self, program: Program, key: Any) -> Any:
        raise UnsupportedFeature("compile", self.id)

    def _prepare_launch(self, bound: BoundDispatch) -> Any:
        """Everything a launch of `bound` needs that does not change between launches
        (compiled kernel, packed arguments, bind groups): the backend's opaque record,
        made once per binding (caller holds the lock). It must not hold `bound` or its
        buffers strongly: the launch cache keeps records of buffers it holds only weakly."""
        raise UnsupportedFeature(
            "dispatch_with_device_buffers",
            self.id,
            "this backend cannot dispatch on resident device buffers, and vyre never "
            "substitutes host copies; use a backend that reports 'resident'",
        )

    def _launch_record(self, record: Any, buffers: tuple[BufferBase, ...]) -> None:
        """Enqueue one launch of a prepared record; `buffers` are its buffers in declaration
        order. The hot path: called with the lock held, right after the core checked (at
        most once per epoch) that the instance is open and the buffers usable, so no free
        can come between that check and this enqueue."""
        raise UnsupportedFeature("dispatch_with_device_buffers", self.id)

    def _launch(self, bound: BoundDispatch) -> Pending:
        """Enqueue `bound` (its record prepared) and return a Pending for it (caller holds
        the lock); profiled dispatches and dispatch_async come here."""
        raise UnsupportedFeature("dispatch_async", self.id)

    def _run_pipeline(
        self, pipeline: Pipeline, repeat: int, reads: list[ReadRange]
    ) -> PipelineResult:
        raise UnsupportedFeature("pipeline", self.id)

    def _synchronize(self) -> None:
        pass

    def _close(self) -> None:
        pass

    def source(self, program: Program) -> str:
        """The generated device source for `program` (for inspection)."""
        raise UnsupportedFeature("source", self.id)

    def _copy_from(self, src: BufferBase, src_offset: int, dst: BufferBase, dst_offset: int,
                   nbytes: int) -> bool:
        """Hook (optional): copy `nbytes` bytes of `src` (a checked live buffer of any
        backend) at `src_offset` into `dst` (this instance's, checked, long enough) at
        `dst_offset` on the devices, where this backend reaches `src`'s device directly,
        ordered after both sides' earlier work and before their later work; False where it
        cannot, and `vyre.copy` goes through the host."""
        return False

    @staticmethod
    def _copy_batch(copies: list[Any]) -> bool:
        """Hook (optional), asked of the first copy's destination backend type: run every
        `vyre.transfers.Copy` of `copies` (checked) on the devices, concurrently, and
        return True; False where this backend cannot take all of them (then each runs
        through `_copy_from` or the host)."""
        return False

    def _allocate_managed(self, byte_len: int, label: str | None) -> BufferBase:
        raise UnsupportedFeature(
            "managed_memory", self.id,
            "this backend has no host-addressable (managed) memory; allocate with "
            "kind='device' and copy with write()/read()",
        )

    def _page_locked_array(self, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
        raise UnsupportedFeature(
            PAGE_LOCKED_HOST, self.id,
            "this backend moves host data through its own staging memory, so no host array "
            "is faster than another; use np.empty(shape, dtype) with read_into",
        )

    def _export_dlpack(self, buffer: BufferBase, dtype: Any, shape: Any, stream: Any,
                       max_version: Any, dl_device: Any, copy: Any) -> Any:
        raise UnsupportedFeature(
            "dlpack", self.id,
            "this backend's buffers cannot be handed to array frameworks without a copy; "
            "read them into numpy with backend.read(buffer, dtype=...)",
        )

    def _dlpack_device(self, buffer: BufferBase) -> tuple[int, int]:
        raise UnsupportedFeature(
            "dlpack", self.id,
            "this backend's buffers cannot be handed to array frameworks without a copy; "
            "read them into numpy with backend.read(buffer, dtype=...)",
        )

    def _host_view(self, buffer: BufferBase, dtype: Any) -> np.ndarray:
        raise UnsupportedFeature(
            "host_view", self.id,
            "only managed buffers (allocate_device_buffer(n, kind='managed') on a backend "
            "reporting 'managed_memory') are host-addressable; use backend.read(buffer) to copy",
        )

    def from_dlpack(self, tensor: Any, *, stream: Any = "auto",
                    label: str | None = None) -> BufferBase:
        """Borrow a framework's device array (torch, cupy, jax) as a buffer, without copying."""
        raise UnsupportedFeature(
            "from_dlpack", self.id,
            "this backend cannot borrow another library's memory; copy host data in with "
            "backend.write(buffer, np.asarray(x)) or pass it to dispatch()",
        )

    # ------------------------------------------------------------ context generation
    @property
    def context_generation(self) -> int:
        """Which device context buffers allocated now belong to; bumped when one is lost."""
        return self._generation

    def _context_lost(self, reason: str) -> None:
        """The device context is gone: every buffer allocated so far becomes stale."""
        with self._lock:
            self._generation += 1
            self._epoch = next_epoch()
            self._lost_reason = reason

    def _stale_reason(self, buffer: BufferBase) -> str | None:
        if buffer.generation == self.context_generation:
            return None
        return (f"it was allocated in context generation {buffer.generation} of "
                f"{self.id!r}, which was lost ({self._lost_reason or 'device reset'}); "
                f"the backend is now in generation {self.context_generation}")

    # ------------------------------------------------------------ state
    def _check_open(self) -> None:
        if self._closed:
            raise self._closed_error()

    def _closed_error(self) -> BackendUnavailable:
        return BackendUnavailable(
            self.id, "this instance was closed; create a new one with vyre.get_backend()"
        )

    @property
    def closed(self) -> bool:
        return self._closed

    def supports(self, feature: str) -> bool:
        """True only if the backend reports `feature` (unknown names are False)."""
        return feature in self.capabilities().features

    # ------------------------------------------------------------ memory
    def page_locked_array(self, shape: int | tuple[int, ...], dtype: Any = np.float32
                          ) -> np.ndarray:
        """A new NumPy array (uninitialised) in page-locked host memory, which this
        backend's copies (`read_into`, `write`) move by DMA directly: on CUDA about four
        times a pageable array's speed for large transfers. Make it once and reuse it.

        The memory is NumPy's own, page-locked while this backend is open: the array stays
        valid ordinary memory after close(). Backends without the 'page_locked_host'
        feature raise UnsupportedFeature."""
        self._check_open()
        dims = (shape,) if isinstance(shape, (int, np.integer)) else shape
        if isinstance(dims, list):
            dims = tuple(dims)
        if not isinstance(dims, tuple) or any(
                isinstance(d, bool) or not isinstance(d, (int, np.integer)) or d < 0
                for d in dims):
            raise InvalidDispatch(
                f"page_locked_array: shape must be an int or a tuple of ints >= 0, got {shape!r}")
        return self._page_locked_array(tuple(int(d) for d in dims), as_dtype(dtype))

    def allocate_device_buffer(
        self, byte_len: int, label: str | None = None, kind: str = "device"
    ) -> BufferBase:
        """Allocate `byte_len` bytes of device memory owned by this instance.

        kind="managed" allocates unified memory the host can address too (buffer.host_view
        after synchronize()), on backends that report the 'managed_memory' feature.
        """
        self._check_open()
        check_label(label, "allocate_device_buffer")
        if kind not in ("device", "managed"):
            raise InvalidDispatch(f"kind must be 'device' or 'managed', got {kind!r}")
        if kind == "managed" and MANAGED_MEMORY not in self.capabilities().features:
            self._allocate_managed(0, label)  # raises the backend's UnsupportedFeature
            raise UnsupportedFeature(MANAGED_MEMORY, self.id)
        if isinstance(byte_len, bool) or not isinstance(byte_len, (int, np.integer)):
            raise InvalidDispatch(f"byte_len must be an int, got {type(byte_len).__name__}")
        byte_len = int(byte_len)
        if byte_len < 0:
            raise InvalidDispatch(f"byte_len must be >= 0, got {byte_len}")
        limit = self.capabilities().limits.get("max_allocation_bytes")
        if limit is not None and byte_len > limit:
            raise OutOfDeviceMemory(
                self.id, byte_len, f"the largest allocation this device allows is {limit} bytes"
            )
        with self._lock:
            self._check_open()  # again under the lock: close() may have run meanwhile
            buf = (self._allocate_managed(byte_len, label) if kind == "managed"
                   else self._allocate(byte_len, label))
            self._live[id(buf)] = buf
            return buf

    def free(self, buffer: DeviceBuffer) -> None:
        """Release a buffer's device memory; freeing twice is harmless."""
        validate_buffer_ownership_allow_freed(self, buffer)
        assert isinstance(buffer, BufferBase)
        with self._lock:
            if buffer.freed:
                return
            self._epoch = next_epoch()
            self._launches.evict(id(buffer))
            if not self._closed:
                self._free(buffer)
            buffer._freed = True
            self._live.pop(id(buffer), None)

    def live_buffers(self) -> list[BufferBase]:
        """Buffers allocated here and not yet freed."""
        return list(self._live.values())

    def write(self, buffer: DeviceBuffer, data: Any, offset: int = 0) -> None:
        """Copy host bytes (numpy array, bytes, memoryview) into `buffer` at `offset`."""
        self._check_open()
        self._write_checked([self._checked_write(buffer, data, offset)])

    def write_many(self, items: Iterable[tuple[DeviceBuffer, Any, int] | tuple[DeviceBuffer, Any]]) -> None:
        """Several uploads, validated all before any is issued."""
        self._check_open()
        checked: list[tuple[BufferBase, memoryview, int]] = []
        for item in iterable_of(items, "write_many", "(buffer, data[, offset]) tuples"):
            if not isinstance(item, (tuple, list)) or len(item) not in (2, 3):
                raise InvalidDispatch(
                    f"write_many takes (buffer, data) or (buffer, data, offset) tuples, got "
                    f"{type(item).__name__} {item!r:.60}"
                )
            checked.append(self._checked_write(item[0], item[1], item[2] if len(item) > 2 else 0))
        self._write_checked(checked)

    def _checked_write(self, buffer: Any, data: Any, offset: Any
                       ) -> tuple[BufferBase, memoryview, int]:
        """One upload checked: a live, writable buffer of this backend, host bytes that fit
        at `offset`."""
        buffer = owned_buffer(self, buffer)
        off = offset if type(offset) is int else as_index(offset, "write offset")
        if buffer.readonly:
            raise BufferStateError(
                f"{buffer.describe()} was lent read-only by its producer; write into a "
                "writable array (e.g. a copy made by the framework) instead"
            )
        mv = host_bytes(data, _WriteTo(buffer))
        check_range(buffer, off, mv.nbytes)
        return buffer, mv, off

    def _write_checked(self, checked: list[tuple[BufferBase, memoryview, int]]) -> None:
        """Checked uploads (_checked_write), issued in order under the lock."""
        with self._lock:
            self._check_open()
            for buffer, _, _ in checked:
                check_usable(buffer)  # not freed by another thread since validation
            for buffer, mv, offset in checked:
                if mv.nbytes:
                    self._write(buffer, mv, offset)

    def read(
        self,
        buffer: DeviceBuffer,
        offset: int = 0,
        length: int | None = None,
        dtype: Any = np.uint8,
    ) -> np.ndarray:
        """Bytes [offset, offset+length) of `buffer` as a new numpy array of `dtype`.

        Waits for work already enqueued on this backend that may write the buffer.
        """
        self._check_open()
        span = checked_span(self, buffer, offset, length)
        dt = element_dtype(np.uint8 if dtype is None else dtype, span[2])
        return self._read_checked([span], [dt])[0]

    def read_many(self, ranges: Iterable[Any]) -> list[np.ndarray]:
        self._check_open()
        todo = [checked_read(self, r) for r in iterable_of(
            ranges, "read_many", "buffers, ReadRanges or (buffer, offset, length, dtype) "
            "tuples")]
        return self._read_checked([(rr.buffer, rr.offset, int(rr.length or 0)) for rr in todo],
                                  [rr.dtype for rr in todo])

    def _read_checked(self, spans: list[tuple[BufferBase, int, int]],
                      dtypes: list[np.dtype]) -> list[np.ndarray]:
        """Checked reads (checked_span, element_dtype) in one batch under the lock."""
        with self._lock:
            self._check_open()
            for span in spans:
                check_usable(span[0])
            logs = self._debug_logs
            if logs:  # debug dispatches' logs come back with this read (vyre.debug)
                self._debug_logs = []
                spans = [*spans, *((p.log, 0, p.log.byte_len) for p in logs)]
            raw = self._read_batch(spans)
        if logs:
            n = len(raw) - len(logs)
            debug.finish(self, logs, [host_array(r, np.dtype(np.uint32)) for r in raw[n:]])
            raw = raw[:n]
        return [host_array(data, dt) for data, dt in zip(raw, dtypes)]

    def read_into(self, buffer: DeviceBuffer, out: np.ndarray, offset: int = 0) -> np.ndarray:
        """Copy `out.nbytes` bytes at `offset` of `buffer` into `out` and return `out`.

        `out` is a writable C-contiguous numpy array of any numeric dtype, typically made
        once and passed to every read: a large read then skips a new array's first-touch
        page faults, which cost more than the copy. On CUDA a page-locked `out` (e.g.
        `torch.empty(n, pin_memory=True).numpy()`) is written by the GPU's DMA directly.
        Waits for work already enqueued on this backend that may write the buffer.
        """
        self._check_open()
        dst = host_destination(out, "read_into")
        span = checked_span(self, buffer, offset, dst.nbytes)
        with self._lock:
            self._check_open()
            check_usable(span[0])
            if span[2]:
                self._read_batch_into([span], [dst])
        if self._debug_logs:
            self._drain_debug_logs()
        return out

    def _read_batch(self, ranges: list[tuple[BufferBase, int, int]]) -> list[HostBytes]:
        """Backends with a cheaper batched readback override this."""
        return [self._read(b, o, n) if n else b"" for b, o, n in ranges]

    def _read_batch_into(self, ranges: list[tuple[BufferBase, int, int]],
                         outs: list[np.ndarray]) -> None:
        """`_read_batch`, each range's bytes copied into the uint8 array of `outs` beside
        it; backends that can copy straight into the caller's memory override this."""
        for data, dst in zip(self._read_batch(ranges), outs):
            dst[...] = np.frombuffer(data, np.uint8)

    # ------------------------------------------------------------ compile
    def compile(self, program: Program) -> Any:
        """Validate and compile `program` (cached); returns the backend's compiled handle."""
        return self._compiled_for(program, None)

    def _compiled_for(self, program: Program, key: Any) -> Any:
        self._check_open()
        if not isinstance(program, Program):
            raise InvalidDispatch(f"expected a vyre Program, got {type(program).__name__}")
        validate(program)  # first: it bounds the program before anything walks all of it
        cache_key = (program.content_hash, key, self.options)
        with self._lock:
            self._check_open()
            hit = self._compiled.get(cache_key)
            if hit is not None:
                self.compile_stats.hits += 1
                self._compiled.move_to_end(cache_key)
                return hit
            check_program_fits(self, program)
            compiled = self._compile(program, key)
            self.compile_stats.misses += 1
            self._compiled[cache_key] = compiled
            self._trim_compiled()
            return compiled

    @property
    def compile_cache_limit(self) -> int:
        """Most compiled programs this instance keeps (LRU); see set_compile_cache_limit."""
        return self._compile_cache_limit

    def set_compile_cache_limit(self, n: int) -> None:
        """Keep at most `n` compiled programs (least recently used are dropped first and
        compiled again when next used). Also $VYRE_COMPILE_CACHE_SIZE, or
        vyre.get_backend(spec, compile_cache_size=n)."""
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
            raise InvalidDispatch(
                f"the compile cache size must be an int >= 1, got {n!r:.40}"
            )
        with self._lock:
            self._compile_cache_limit = int(n)
            self._trim_compiled()

    def compile_cache_size(self) -> int:
        """Compiled programs held now."""
        return len(self._compiled)

    def _trim_compiled(self) -> None:
        while len(self._compiled) > self._compile_cache_limit:
            _, old = self._compiled.popitem(last=False)
            self.compile_stats.evictions += 1
            self._evict_compiled(old)

    def _evict_compiled(self, compiled: Any) -> None:
        """A compiled program left the cache (caller holds the lock). Backends drop what
        they keyed on it; device objects still used by recorded work must stay valid until
        that work is gone (hold them from the recording, not from the cache)."""

    # ------------------------------------------------------------ dispatch
    def bind(
        self, program: Program, inputs: BufferArg, outputs: BufferArg, config: DispatchConfig
    ) -> BoundDispatch:
        """Validate a dispatch once (for callers that re-issue it many times)."""
        self._check_bindable(program, config)
        if has_debug(program):
            raise debug.not_bindable(program)
        return bind(self, program, inputs, outputs, config)

    def _check_bindable(self, program: Program, config: object) -> None:
        self._check_open()
        if not isinstance(config, DispatchConfig):
            raise InvalidDispatch(f"config must be a DispatchConfig, got {type(config).__name__}")
        validate(program)

    def _bound(self, program: Program, inputs: BufferArg, outputs: BufferArg,
               config: DispatchConfig) -> tuple[BoundDispatch, tuple[Any, ...] | None]:
        """A bound dispatch for a (program, inputs, outputs, config) call, from the launch
        cache when it was bound before, and the call's cache key (None: not cacheable)."""
        ins, outs = readable_twice(inputs), readable_twice(outputs)  # iterators read once
        given = (*_values(ins), *_values(outs))
        key = self._launches.key(program, ins, outs, config, given)
        entry = self._launches.get(key) if key is not None else None
        if entry is not None:
            return rebind(entry, program, given, config), key
        return self._bind_new(program, ins, outs, config, given, key), key

    def _bind_new(self, program: Program, ins: BufferArg, outs: BufferArg,
                  config: DispatchConfig, given: tuple[Any, ...],
                  key: tuple[Any, ...] | None) -> BoundDispatch:
        """A cache miss: validate and bind, and remember the binding under `key`."""
        bound = self.bind(program, ins, outs, config)
        if key is not None:
            grid = config.grid
            with self._lock:
                self._launches.put(key, bound, given,
                                   grid.buffer if isinstance(grid, IndirectGrid) else None)
        return bound

    def _ready(self, bound: BoundDispatch) -> Any:
        """Check that `bound` may run now and return its prepared record (made on first use)."""
        with self._lock:
            self._check_open()
            check_bound_owner(self, bound, "dispatch")
            for b in bound.buffers:
                check_usable(b)
            grid = bound.grid
            if isinstance(grid, IndirectGrid):
                check_usable(grid.buffer)
            launch = bound.launch
            if launch.record is None:  # (a PlanRecord when it has exact f32 sums)
                launch.record = exact_sum_plan.prepare(self, bound)
            if not launch.profile:  # a profiled launch always takes the checked, waited path
                launch.epoch = self._epoch
            return launch.record

    def dispatch_async(
        self,
        program: Program | BoundDispatch,
        inputs: BufferArg = (),
        outputs: BufferArg = (),
        config: DispatchConfig | None = None,
    ) -> Pending:
        """Enqueue a dispatch over resident buffers; returns at once with a Pending."""
        if isinstance(program, BoundDispatch):
            bound = program
        else:
            if isinstance(program, Program) and program.debug_statements:  # vyre.print
                return debug.launch(self, program, inputs, outputs, config or _DEFAULT_CONFIG,
                                    Pending)
            bound, _ = self._bound(program, inputs, outputs, config or _DEFAULT_CONFIG)
        with self._lock:
            record = self._ready(bound)
            if type(record) is PlanRecord:
                return self._launch_plan_async(record, bound.buffers)
            return self._launch(bound)

    def _launch_cached(self, program: Program, inputs: BufferArg, outputs: BufferArg,
                       cfg: DispatchConfig) -> Launch:
        """Launch a (program, inputs, outputs, config) call: from the launch cache, or
        bound, prepared and remembered the first time; returns its Launch. The check (when
        the epoch moved) and the enqueue are one step under the lock, so a buffer freed by
        another thread is refused, never launched. Kept out of dispatch_with_device_buffers
        so that the bound hot path's frame stays small."""
        ti, to = type(inputs), type(outputs)
        if (ti is list or ti is tuple) and (to is list or to is tuple):
            given = (*inputs, *outputs)  # the common case, without helper calls
        else:
            if ti not in (tuple, list, dict) or to not in (tuple, list, dict):
                inputs, outputs = readable_twice(inputs), readable_twice(outputs)  # once
            given = (*_values(inputs), *_values(outputs))
        key = self._launches.key(program, inputs, outputs, cfg, given)
        entry = self._launches.get(key) if key is not None else None
        if entry is None:  # first time: validate, bind, prepare, remember
            if isinstance(program, Program) and program.debug_statements:
                # vyre.print / vyre.assert_: never remembered (each dispatch has its own
                # log), the log read with the next completion (vyre.debug)
                return self._launch_logged(program, inputs, outputs, cfg)
            bound = self._bind_new(program, inputs, outputs, cfg, given, key)
            with self._lock:
                self._ready(bound)
                self._enqueue_record(bound.launch.record, bound.buffers)
            return bound.launch
        launch = entry.launch
        with self._lock:
            if launch.epoch != self._epoch:  # something was freed or lost meanwhile, or
                # another thread remembered the entry and has not prepared it yet
                self._ready(rebind(entry, program, given, cfg))
            self._enqueue_record(launch.record,
                          given if entry.in_order else tuple(given[j] for j in entry.order))
        return launch

    def _launch_logged(self, program: Program, inputs: BufferArg, outputs: BufferArg,
                       cfg: DispatchConfig) -> Launch:
        """Enqueue a dispatch of a vyre.print / vyre.assert_ program; its log waits for the
        next sync point (see vyre.debug), or is read now past debug.MAX_PENDING_LOGS."""
        pending, launch = debug.enqueue(self, program, inputs, outputs, cfg)
        with self._lock:
            self._debug_logs.append(pending)
            full = len(self._debug_logs) > debug.MAX_PENDING_LOGS
        if full:
            self._drain_debug_logs()
        return launch

    def _drain_debug_logs(self) -> None:
        """Read the waiting debug logs (a sync point), print them, raise a failed assert."""
        self._read_checked([], [])  # (reads the waiting logs with the empty batch)

    def _enqueue_record(self, record: Any, buffers: tuple[BufferBase, ...]) -> None:
        """Enqueue a prepared launch record (caller holds the lock): the backend's own, or
        each device dispatch of an exact-sum plan in turn (vyre.exact_sum_plan)."""
        if type(record) is PlanRecord:
            for step in record.steps:
                self._launch_record(step.record, exact_sum_plan.step_buffers(step, buffers))
        else:
            self._launch_record(record, buffers)

    def _launch_plan_async(self, record: PlanRecord, buffers: tuple[BufferBase, ...]
                           ) -> Pending:
        """An exact-sum plan's dispatches; the Pending of the last (the queue is in order)."""
        *first, last = record.steps
        for step in first:
            self._launch_record(step.record, exact_sum_plan.step_buffers(step, buffers))
        return self._launch(dataclasses.replace(
            last.template, buffers=exact_sum_plan.step_buffers(last, buffers)))

    def dispatch_with_device_buffers(
        self,
        program: Program | BoundDispatch,
        inputs: BufferArg = (),
        outputs: BufferArg = (),
        config: DispatchConfig | None = None,
    ) -> Timing:
        """Dispatch over resident buffers, with no host copy.

        The work is ordered after earlier work on this backend; the call returns once it is
        enqueued (wait_ns is 0) unless `config.profile`, which waits and fills device_ns.

        This is the one launch path of every backend. A BoundDispatch (from `bind`) keeps
        its prepared launch record, so a re-launch is the backend's `_launch_record` plus
        an epoch comparison: its buffers are re-checked only after some buffer of this
        backend was freed (or the instance closed, or its context was lost). A (program,
        inputs, outputs, config) call is bound and prepared the first time and remembered
        (LaunchCache) until one of its buffers is freed or dropped. The Timing is all
        zeros unless `DispatchOptions(timing=True)` (then it holds the host enqueue time)
        or `profile=True` (then it waits and holds the device time too).
        The epoch check and the enqueue happen under the instance's lock as one step: a
        free() from another thread (which bumps the epoch under that lock) comes wholly
        before them (the launch is re-checked and refused) or wholly after (the device
        work is already enqueued, and each backend's free is ordered after it).
        """
        # the hot path (a bound, untimed dispatch re-launched, checked in this epoch): a few
        # attribute reads, one uncontended lock and one call, no clock. The epoch is unique
        # to this instance, so a binding of another instance never matches it.
        if type(program) is BoundDispatch:
            launch = program.launch
            if launch.untimed:  # (never a profiled one)
                with self._lock:  # (`with`, not acquire() then try: an interrupt
                    # landing between those two would leave the lock held for ever)
                    if launch.epoch == self._epoch:
                        record = launch.record
                        if type(record) is PlanRecord:  # (inline: the hot path's one call)
                            self._enqueue_record(record, program.buffers)
                        else:
                            self._launch_record(record, program.buffers)
                        return NO_TIMING
        t0 = _perf_ns()
        if type(program) is BoundDispatch or isinstance(program, BoundDispatch):
            launch = program.launch
            if launch.profile:  # waits for the device and times it (never stamped current)
                return self.dispatch_async(program).wait()
            with self._lock:
                if launch.epoch != self._epoch:
                    self._ready(program)
                self._enqueue_record(launch.record, program.buffers)
        else:
            cfg = config or _DEFAULT_CONFIG
            if type(cfg) is not DispatchConfig:
                self._check_bindable(program, cfg)  # raises, naming what was passed
            if cfg.profile:
                return self.dispatch_async(program, inputs, outputs, cfg).wait()
            launch = self._launch_cached(program, inputs, outputs, cfg)
        if launch.untimed:
            return NO_TIMING
        ns = _perf_ns() - t0
        return _new_timing(Timing, (ns, ns, 0, None))

    def dispatch(
        self,
        program: Program,
        inputs: Mapping[str, Any] | Sequence[Any],
        config: DispatchConfig,
    ) -> dict[str, np.ndarray]:
        """Host path: upload, dispatch, read back every writable buffer as a numpy array.

        `inputs` maps buffer names to host data, or is a sequence in declaration order.
        Read and read_write buffers need data; a write-only buffer takes an int (its element
        count, zero-filled) or an array (its initial contents), unless it declares a count.
        """
        self._check_open()
        validate(program)
        return dispatch_host(self, program, inputs, config)

    def stream(
        self,
        program: Program,
        chunks: Iterable[Mapping[str, Any] | Sequence[Any]],
        config: DispatchConfig | Callable[[int, Mapping[str, np.ndarray]], DispatchConfig],
    ) -> Iterator[dict[str, np.ndarray]]:
        """Run `program` over successive input chunks, yielding each chunk's outputs in order.

        Chunk i+1 is uploaded and enqueued before chunk i is read back, so uploads, compute
        and readbacks overlap on backends whose queues run asynchronously. `config` may be a
        function of (chunk index, host inputs) for chunks of varying size.
        """
        self._check_open()
        validate(program)
        yield from stream_chunks(self, program, chunks, config)

    def pipeline(self, steps: Sequence[Step | BoundDispatch]) -> Pipeline:
        """Record and validate a sequence of dispatches once; run it with `.run()`."""
        self._check_open()
        steps = as_steps(steps)  # read once: an iterator must not be half-consumed here
        for i, s in enumerate(steps):
            if isinstance(s, Step):
                try:
                    validate(s.program)
                except InvalidProgram as exc:
                    raise InvalidProgram(f"pipeline step {i} ({s.program.name}): {exc}") from None
        p = Pipeline(self, steps)
        for s in p.steps:
            self._compiled_for(s.program, self._specialisation(s))
        with self._lock:
            self._check_open()
            for b in p.buffers():  # bound outside the lock: another thread may have freed
                check_usable(b)  # one since, and the recording must never see it
            for st in p.steps:
                if isinstance(st.grid, IndirectGrid):
                    check_usable(st.grid.buffer)
            self._record_pipeline(p)
        return p

    def _specialisation(self, bound: BoundDispatch) -> Any:
        """Part of the compile-cache key that depends on the binding (e.g. aliasing)."""
        return None

    def _record_pipeline(self, pipeline: Pipeline) -> None:
        """Backends prepare their recording here (encoders, graphs); default: nothing."""

    # ------------------------------------------------------------ lifecycle
    def synchronize(self) -> None:
        """Block until all work enqueued on this backend has finished."""
        with self._lock:  # (one check, under the lock: dispatch.roundtrip pays for each)
            self._check_open()
            self._synchronize()
        if self._debug_logs:
            self._drain_debug_logs()

    def release_cached_memory(self) -> int:
        """Give the driver back the device memory kept from freed buffers for reuse (the
        CUDA backend keeps it, as torch's and CuPy's allocators do; the others keep none);
        the bytes given back. Buffers still allocated are untouched."""
        self._check_open()
        return 0

    def close(self) -> None:
        """Free every buffer and release the device. Closing twice is harmless. Debug
        dispatches' logs still waiting are printed first (a failed assert raises after
        the close)."""
        failure: BaseException | None = None
        if self._debug_logs and not self._closed:
            try:
                self._drain_debug_logs()
            except BackendError as exc:
                failure = exc
        self._close_instance()
        if failure is not None:
            raise failure

    def _close_instance(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closing = True
            try:
                for b in self._exact_scratch.release(self):
                    with contextlib.suppress(BackendError):
                        self._free(b)
                    b._freed = True
                for b in list(self._live.values()):
                    with contextlib.suppress(BackendError):
                        self._free(b)
                    b._freed = True
                self._live.clear()
                self._launches.clear()
                self._epoch = next_epoch()
                self._compiled.clear()
                self._close()
            finally:
                self._closed = True

    def __enter__(self: T) -> T:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.id}{' closed' if self._closed else ''}>"


def _values(arg: BufferArg) -> Iterable[Any]:
    """The buffers of an inputs / outputs argument, in the order given."""
    t = type(arg)
    if t is list or t is tuple:  # the common cases, without an ABC check
        return arg
    if t is dict:
        return arg.values()  # type: ignore[union-attr]
    if isinstance(arg, Mapping):
        return arg.values()
    if not isinstance(arg, Iterable) or isinstance(arg, (str, bytes)):
        return ()  # not buffers at all: bind() says what is wrong
    return arg


def validate_buffer_ownership_allow_freed(backend: BaseBackend, buffer: object) -> None:
    if isinstance(buffer, BufferBase) and buffer.owner is backend:
        return
    validate_buffer_ownership(backend, [buffer])


class _WriteTo:
    """"write to <buffer>" for host_bytes' errors, made only if one is raised (describe()
    costs more than the rest of a small write's checks)."""

    __slots__ = ("buffer",)

    def __init__(self, buffer: BufferBase) -> None:
        self.buffer = buffer

    def __str__(self) -> str:
        return f"write to {self.buffer.describe()}"


def host_array(data: HostBytes, dtype: Any) -> np.ndarray:
    """Bytes read from a device as a new writable array of `dtype`: a fresh uint8 array from
    the backend (the one copy already made) is viewed, anything else copied once."""
    if type(data) is np.ndarray:
        return data.view(dtype)
    return np.frombuffer(bytearray(data), dtype=dtype)
