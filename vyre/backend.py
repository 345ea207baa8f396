"""The facade every local backend is (it satisfies `vyre.interface.Backend`).

`BaseBackend` checks every argument, owns what is the same on every device (the buffer
registry, the launch cache and the one launch path, the compile cache, debug logs, the
lifecycle) and calls the instance's four parts (vyre.parts: device, allocator, compiler,
queue), which a backend supplies. What a backend does not supply raises
UnsupportedFeature: the facade must never route resident work through host copies, and
never talks to a device but through its parts.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
import weakref
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
    next_epoch,
    owned_buffer,
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
from .compile_cache import (
    DEFAULT_COMPILE_CACHE_SIZE as DEFAULT_COMPILE_CACHE_SIZE,
)
from .compile_cache import (
    ENV_COMPILE_CACHE as ENV_COMPILE_CACHE,
)
from .compile_cache import (
    CompileCache,
)
from .compile_cache import (
    compile_cache_size_from_env as compile_cache_size_from_env,
)
from .config import DispatchConfig, IndirectGrid, Timing
from .debug.instrument import has_debug
from .errors import (
    BackendError,
    BufferStateError,
    InvalidDispatch,
    InvalidProgram,
    OutOfDeviceMemory,
    UnsupportedFeature,
)
from .exact_sum_plan import PlanRecord, ScratchPool
from .features import MANAGED_MEMORY
from .host_path import dispatch_host, iterable_of
from .host_path import stream_chunks as stream_chunks
from .hostarrays import as_dtype, host_destination

# (the protocol's values, and the parts' shared types, imported here where they always were)
from .interface import Backend as Backend
from .interface import Capabilities as Capabilities
from .interface import CompileStats as CompileStats
from .ir.nodes import Program
from .ir.validate import validate
from .parts import Allocator, Compiler, Device, Queue, host_array
from .parts import HostBytes as HostBytes
from .parts import Pending as Pending
from .pipeline import (
    Pipeline,
    Step,
    as_steps,
    checked_read,
    checked_span,
    element_dtype,
)

T = TypeVar("T")
_perf_ns = time.perf_counter_ns
NO_TIMING = Timing()  # what an untimed dispatch_with_device_buffers returns (the default)
# Timing(ns, ns) through its generated __new__ costs ~0.2 us, tuple.__new__ directly ~0.1
_new_timing = tuple.__new__
_DEFAULT_CONFIG = DispatchConfig()


#: the hooks a backend overrode before it was made of parts, and where each went: a subclass
#: that still defines one is refused (BaseBackend.__init_subclass__) rather than ignored
REMOVED_HOOKS = {
    "_allocate": "Allocator.allocate", "_free": "Allocator.free", "_write": "Allocator.write",
    "_read": "Allocator.read", "_allocate_managed": "Allocator.allocate_managed",
    "_page_locked_array": "Allocator.page_locked_array", "_copy_from": "Allocator.copy_from",
    "_copy_batch": "Allocator.copy_batch", "_compile": "Compiler.compile",
    "_specialisation": "Compiler.specialisation", "_launch": "Queue.launch_pending",
    "_record_pipeline": "Queue.record_pipeline", "_run_pipeline": "Queue.run_pipeline",
    "_synchronize": "Queue.synchronize", "_close": "Device.close",
    "_run": "the queue (ReferenceQueue.run)",
}


class BaseBackend:
    """A backend instance: the facade over its parts (see the module docstring).

    A backend builds its parts and hands them over:
    `super().__init__(device, allocator, compiler, queue)`. Given only an instance id, the
    instance has a plain Device and parts that support nothing (a test double that
    overrides a public method or two)."""

    kind: str = "abstract"
    id: str  # the instance id, e.g. "cuda:0" (the device's)
    compile_stats: CompileStats  # the compile cache's counters
    # the parts' methods the facade calls most, bound once (see __init__)
    _check_open: Callable[[], None]
    _launch_record: Callable[[Any, tuple[BufferBase, ...]], None]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """Refuses a subclass that overrides a hook BaseBackend no longer calls: before the
        parts (vyre.parts) a backend overrode `_compile`, `_allocate`, ...; such an override
        would now be silently ignored and the subclass would run the base behaviour."""
        super().__init_subclass__(**kwargs)
        stale = {name: part for name, part in REMOVED_HOOKS.items() if name in vars(cls)}
        if stale:
            moved = ", ".join(f"{name} -> {part}" for name, part in sorted(stale.items()))
            raise TypeError(
                f"{cls.__qualname__} overrides hooks BaseBackend no longer calls ({moved}): "
                "a backend is parts now; subclass the part and hand it to "
                "BaseBackend.__init__ (see vyre.parts)")

    def __init__(self, device: Device | str, allocator: Allocator | None = None,
                 compiler: Compiler | None = None, queue: Queue | None = None) -> None:
        if isinstance(device, str):
            device = Device(device)
        self._device = device
        self._memory = allocator or Allocator(device)
        self._compiler = compiler or Compiler(device)
        self._queue = queue or Queue(device)
        for part in (device, self._memory, self._compiler, self._queue):
            part.backend = self
        self.id = device.id
        self._lock = device.lock
        # (instance attributes: one lookup each, where a method would add a call)
        self._check_open = device.check_open  # every public call asks it
        self._launch_record = self._queue.launch  # the hot path's one call
        self._cache = CompileCache(self, self._compiler)
        self.compile_stats = self._cache.stats
        # held weakly: a buffer whose last handle is dropped without free() is released
        # like any Python object (an allocator whose memory needs an explicit release
        # attaches a finalizer to the buffer, as cuda and wgpu do); free() and close()
        # release now
        self._live: MutableMapping[int, BufferBase] = weakref.WeakValueDictionary()
        # dispatches re-issued over the same buffers are bound and prepared once (see
        # dispatch_with_device_buffers); evicted with their buffers
        self._launches = LaunchCache(self._lock)
        # moved on every free, close and context loss: a prepared launch is re-checked
        # (instance open, buffers usable) only when this moved since it last was. Values
        # come from one process-wide counter, so no two instances ever share one (a launch
        # stamped by another instance is never current here)
        self._epoch = next_epoch()
        wself = weakref.ref(self)
        device.on_lost = lambda: bump_epoch(wself)
        # logs of vyre.print / vyre.assert_ dispatches not read back yet (vyre.debug): read
        # with the next read, synchronize(), pipeline run or close()
        self._debug_logs: list[debug.PendingLog] = []
        # scratch words of order-independent f32 atomic adds (vyre.exact_sum_plan)
        self._exact_scratch = ScratchPool()

    # ------------------------------------------------------------ state
    @property
    def options(self) -> Any:
        """The instance's debug and measurement switches (the compiler's: a frozen value
        such as CudaOptions, part of every compile-cache key; None for a backend without)."""
        return self._compiler.options

    @options.setter
    def options(self, value: Any) -> None:
        self._compiler.options = value

    @property
    def closed(self) -> bool:
        return self._device.closed

    @property
    def context_generation(self) -> int:
        """Which device context buffers allocated now belong to; bumped when one is lost."""
        return self._device.context_generation

    def capabilities(self) -> Capabilities:
        return self._device.capabilities()

    def supports(self, feature: str) -> bool:
        """True only if the backend reports `feature` (unknown names are False)."""
        return feature in self.capabilities().features

    def _context_lost(self, reason: str) -> None:
        """The device context is gone: every buffer allocated so far becomes stale."""
        self._device.lose(reason)

    # (what a buffer asks of its owner: vyre.buffer.BufferOwner)
    def _stale_reason(self, buffer: BufferBase) -> str | None:
        return self._device.stale_reason(buffer)

    def _export_dlpack(self, buffer: BufferBase, dtype: Any, shape: Any, stream: Any,
                       max_version: Any, dl_device: Any, copy: Any) -> Any:
        return self._memory.export_dlpack(buffer, dtype, shape, stream, max_version,
                                          dl_device, copy)

    def _dlpack_device(self, buffer: BufferBase) -> tuple[int, int]:
        return self._memory.dlpack_device(buffer)

    def _host_view(self, buffer: BufferBase, dtype: Any) -> np.ndarray:
        return self._memory.host_view(buffer, dtype)

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
        return self._memory.page_locked_array(tuple(int(d) for d in dims), as_dtype(dtype))

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
            self._memory.allocate_managed(0, label)  # raises the backend's UnsupportedFeature
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
            buf = (self._memory.allocate_managed(byte_len, label) if kind == "managed"
                   else self._memory.allocate(byte_len, label))
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
            if not self._device.closed:
                self._memory.free(buffer)
            buffer._freed = True
            self._live.pop(id(buffer), None)

    def live_buffers(self) -> list[BufferBase]:
        """Buffers allocated here and not yet freed."""
        return list(self._live.values())

    def _adopt(self, buffer: BufferBase) -> None:
        """Count a buffer an allocator made outside allocate_device_buffer (borrowed through
        DLPack, managed) as live."""
        with self._lock:
            self._live[id(buffer)] = buffer

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
            write = self._memory.write
            for buffer, mv, offset in checked:
                if mv.nbytes:
                    write(buffer, mv, offset)

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
            raw = self._memory.read_batch(spans)
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
                self._memory.read_batch_into([span], [dst])
        if self._debug_logs:
            self._drain_debug_logs()
        return out

    def from_dlpack(self, tensor: Any, *, stream: Any = "auto",
                    label: str | None = None) -> BufferBase:
        """Borrow a framework's device array (torch, cupy, jax) as a buffer, without copying."""
        return self._memory.import_dlpack(tensor, stream, label)

    def release_cached_memory(self) -> int:
        """Give the driver back the device memory kept from freed buffers for reuse (the
        CUDA backend keeps it, as torch's and CuPy's allocators do; the others keep none);
        the bytes given back. Buffers still allocated are untouched."""
        with self._lock:
            self._check_open()
            return self._memory.release_cached()

    # ------------------------------------------------------------ compile
    def compile(self, program: Program) -> Any:
        """Validate and compile `program` (cached); returns the backend's compiled handle."""
        return self._cache.get(program, self._compiler.plain_key)

    def source(self, program: Program) -> str:
        """The generated device source for `program` (for inspection)."""
        return self._compiler.source(program)

    def _compiled_for(self, program: Program, key: Any) -> Any:
        """The artifact of `program` for compile key `key` (from the compile cache)."""
        return self._cache.get(program, key)

    @property
    def compile_cache_limit(self) -> int:
        """Most compiled programs this instance keeps (LRU); see set_compile_cache_limit."""
        return self._cache.limit

    def set_compile_cache_limit(self, n: int) -> None:
        """Keep at most `n` compiled programs (least recently used are dropped first and
        compiled again when next used). Also $VYRE_COMPILE_CACHE_SIZE, or
        vyre.get_backend(spec, compile_cache_size=n)."""
        self._cache.set_limit(n)

    def compile_cache_size(self) -> int:
        """Compiled programs held now."""
        return len(self._cache)

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
            cfg = config or _DEFAULT_CONFIG
            if isinstance(program, Program) and program.debug_statements:  # vyre.print
                return debug.launch(self, program, inputs, outputs, cfg, Pending)
            entry, given, key, ins, outs = self._launches.lookup(program, inputs, outputs, cfg)
            bound = (rebind(entry, program, given, cfg) if entry is not None else
                     self._bind_new(program, ins, outs, cfg, given, key))
        with self._lock:
            record = self._ready(bound)
            if type(record) is PlanRecord:
                return self._launch_plan_async(record, bound.buffers)
            return self._queue.launch_pending(bound)

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
        its prepared launch record, so a re-launch is the queue's `launch` plus an epoch
        comparison: its buffers are re-checked only after some buffer of this backend was
        freed (or the instance closed, or its context was lost). A (program, inputs,
        outputs, config) call is bound and prepared the first time and remembered
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
                lock = self._lock
                # The lock held from the epoch check to the enqueue, as `with lock:` would,
                # for half its cost (a `with` statement costs ~0.3 us more than the two
                # calls). acquire() is inside the try: Ctrl-C is raised only at a call's
                # end (the interpreter's eval breaker), so an interrupt landing once
                # acquire() returns is in the try and the finally releases; an interrupt
                # while acquire() waits leaves the lock not taken, and release() then
                # refuses (RuntimeError), which the finally swallows. release() is the
                # finally's first call, so no interrupt can come between the check and it.
                try:
                    lock.acquire()
                    if launch.epoch == self._epoch:
                        record = launch.record
                        if type(record) is PlanRecord:  # (inline: the hot path's one call)
                            self._enqueue_record(record, program.buffers)
                        else:
                            self._launch_record(record, program.buffers)
                        return NO_TIMING
                finally:
                    try:  # noqa: SIM105  (contextlib.suppress is a `with`: the cost saved)
                        lock.release()
                    except RuntimeError:  # (interrupted while waiting: never acquired)
                        pass
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
        spec = self._compiler.specialisation
        artifacts = [self._cache.get(s.program, spec(s)) for s in p.steps]
        with self._lock:
            self._check_open()
            for b in p.buffers():  # bound outside the lock: another thread may have freed
                check_usable(b)  # one since, and the recording must never see it
            for st in p.steps:
                if isinstance(st.grid, IndirectGrid):
                    check_usable(st.grid.buffer)
            self._queue.record_pipeline(p, artifacts)
        return p

    # ------------------------------------------------------------ the launch path
    def _bind_new(self, program: Program, ins: BufferArg, outs: BufferArg,
                  config: DispatchConfig, given: tuple[Any, ...],
                  key: tuple[Any, ...] | None) -> BoundDispatch:
        """A launch-cache miss: validate and bind, and remember the binding under `key`."""
        bound = self.bind(program, ins, outs, config)
        if key is not None:
            grid = config.grid
            with self._lock:
                self._launches.put(key, bound, given,
                                   grid.buffer if isinstance(grid, IndirectGrid) else None)
        return bound

    def _prepare_launch(self, bound: BoundDispatch) -> Any:
        """`bound`'s launch record from the queue, over its artifact from the compile cache
        (lock held; a plan's sub-dispatches come here one by one)."""
        return self._queue.prepare(
            bound, self._cache.get(bound.program, self._compiler.specialisation(bound)))

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

    def _launch_cached(self, program: Program, inputs: BufferArg, outputs: BufferArg,
                       cfg: DispatchConfig) -> Launch:
        """Launch a (program, inputs, outputs, config) call: from the launch cache, or
        bound, prepared and remembered the first time; returns its Launch. The check (when
        the epoch moved) and the enqueue are one step under the lock, so a buffer freed by
        another thread is refused, never launched. Kept out of dispatch_with_device_buffers
        so that the bound hot path's frame stays small."""
        entry, given, key, inputs, outputs = self._launches.lookup(program, inputs, outputs, cfg)
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
        """Enqueue a prepared launch record (caller holds the lock): the queue's own, or
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
        return self._queue.launch_pending(dataclasses.replace(
            last.template, buffers=exact_sum_plan.step_buffers(last, buffers)))

    # ------------------------------------------------------------ lifecycle
    def synchronize(self) -> None:
        """Block until all work enqueued on this backend has finished."""
        with self._lock:  # (one check, under the lock: dispatch.roundtrip pays for each)
            self._check_open()
            self._queue.synchronize()
        if self._debug_logs:
            self._drain_debug_logs()

    def close(self) -> None:
        """Free every buffer and release the device. Closing twice is harmless. Debug
        dispatches' logs still waiting are printed first (a failed assert raises after
        the close)."""
        failure: BaseException | None = None
        if self._debug_logs and not self._device.closed:
            try:
                self._drain_debug_logs()
            except BackendError as exc:
                failure = exc
        self._close_instance()
        if failure is not None:
            raise failure

    def _close_instance(self) -> None:
        """Free every buffer, then close the parts from the top down: the queue (work in
        flight, recordings), the compiler (every cached artifact), the allocator (kept
        and staging memory), the device; all under the lock launches hold."""
        device = self._device
        with self._lock:
            if device.closed:
                return
            device.closing = True
            try:
                for b in [*self._exact_scratch.release(self), *self._live.values()]:
                    with contextlib.suppress(BackendError):
                        self._memory.free(b)
                    b._freed = True
                self._live.clear()
                self._launches.clear()
                self._epoch = next_epoch()
                self._queue.close()
                self._cache.close()
                self._memory.close()
                device.close()
            finally:
                device.closed = True

    def __enter__(self: T) -> T:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.id}{' closed' if self.closed else ''}>"


def bump_epoch(wself: weakref.ref[BaseBackend]) -> None:
    """Move an instance's epoch (its device was lost): every prepared launch re-checks the
    instance before it runs again (and is refused). Held weakly by the device's callbacks,
    which must never keep the instance alive."""
    me = wself()
    if me is not None:
        me._epoch = next_epoch()


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


__all__ = ["BaseBackend", "Capabilities", "CompileStats", "HostBytes", "Pending",
           "host_array", "stream_chunks"]
