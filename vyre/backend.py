"""The facade every local backend is (it satisfies `vyre.interface.Backend`).

`BaseBackend` is the public surface over the instance's parts, each with one job: the four
a backend supplies (vyre.parts: device, allocator, compiler, queue) and those the same on
every device: the buffer registry (vyre.buffer_registry), the compile cache
(vyre.compile_cache), the launch path and launch cache (vyre.launch_path), host I/O checks
(vyre.host_io), pipelines (vyre.pipeline) and the host path (vyre.host_path). Its methods
check what is cheap to check and delegate; it keeps the bound re-launch inline (the hot
path, where a call would cost), the epoch every prepared launch is checked against, and the
lifecycle. What a backend does not supply raises UnsupportedFeature: the facade must never
route resident work through host copies, and never talks to a device but through its parts.
"""

from __future__ import annotations

import time
import weakref
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, TypeVar

import numpy as np

from . import debug
from .binding import (
    BoundDispatch,
    BufferArg,
    bind,
    next_epoch,
    validate_buffer_ownership,
)
from .buffer import BufferBase, DeviceBuffer
from .buffer_registry import BufferRegistry
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
from .config import DispatchConfig, Timing
from .debug.instrument import has_debug
from .errors import BackendError, InvalidDispatch
from .exact_sum_plan import PlanRecord, ScratchPool
from .host_io import (
    checked_reads,
    checked_write,
    checked_writes,
    page_locked_shape,
    read_checked,
    read_into,
    write_checked,
)
from .host_path import dispatch_host
from .host_path import stream_chunks as stream_chunks
from .hostarrays import as_dtype

# (the protocol's values, and the parts' shared types, imported here where they always were)
from .interface import Backend as Backend
from .interface import Capabilities as Capabilities
from .interface import CompileStats as CompileStats
from .ir.nodes import Program
from .ir.validate import validate
from .launch_path import DEFAULT_CONFIG, LaunchPath
from .parts import Allocator, Compiler, Device, Queue
from .parts import HostBytes as HostBytes
from .parts import Pending as Pending
from .parts import host_array as host_array
from .pipeline import Pipeline, Step, checked_span, element_dtype, record

T = TypeVar("T")
_perf_ns = time.perf_counter_ns
NO_TIMING = Timing()  # what an untimed dispatch_with_device_buffers returns (the default)
# Timing(ns, ns) through its generated __new__ costs ~0.2 us, tuple.__new__ directly ~0.1
_new_timing = tuple.__new__


#: the hooks a backend overrode before it was made of parts, and where each went: a subclass
#: that still defines one is refused (refuse_removed_hooks) rather than ignored
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
    overrides a public method or two). The hooks are the parts' (vyre.parts), never this
    class's methods."""

    kind: str = "abstract"
    id: str  # the instance id, e.g. "cuda:0" (the device's)
    compile_stats: CompileStats  # the compile cache's counters
    # the parts' methods the facade calls most, bound once (see __init__)
    _check_open: Callable[[], None]
    _launch_record: Callable[[Any, tuple[BufferBase, ...]], None]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        refuse_removed_hooks(cls)

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
        self._cache = CompileCache(self, self._compiler)
        self.compile_stats = self._cache.stats
        self._launch_path = LaunchPath(self, self._compiler, self._queue, self._cache)
        self._launches = self._launch_path.launches  # (the launch cache)
        self._buffers = BufferRegistry(self, device, self._memory, self._launches)
        # (instance attributes: one lookup each, where a method would add a call)
        self._check_open = device.check_open  # every public call asks it
        self._launch_record = self._queue.launch  # the hot path's one call
        self._enqueue_record = self._launch_path.enqueue  # (a record or an exact-sum plan)
        self._launch_cached = self._launch_path.launch_cached  # (the unbound re-launch)
        self._adopt = self._buffers.adopt  # (a buffer made outside allocate_device_buffer)
        self._context_lost = device.lose  # (every buffer allocated so far becomes stale)
        # what a buffer asks of its owner (vyre.buffer.BufferOwner): the parts' hooks
        self._stale_reason = device.stale_reason
        self._host_view = self._memory.host_view
        self._export_dlpack = self._memory.export_dlpack
        self._dlpack_device = self._memory.dlpack_device
        # moved on every free, close and context loss: a prepared launch is re-checked only
        # when this moved since it last was. From one process-wide counter: no two
        # instances ever share one (a launch stamped by another is never current here)
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
        return self._memory.page_locked_array(page_locked_shape(shape), as_dtype(dtype))

    def allocate_device_buffer(
        self, byte_len: int, label: str | None = None, kind: str = "device"
    ) -> BufferBase:
        """Allocate `byte_len` bytes of device memory owned by this instance.

        kind="managed" allocates unified memory the host can address too (buffer.host_view
        after synchronize()), on backends that report the 'managed_memory' feature.
        """
        return self._buffers.allocate(byte_len, label, kind)

    def free(self, buffer: DeviceBuffer) -> None:
        """Release a buffer's device memory; freeing twice is harmless."""
        validate_buffer_ownership_allow_freed(self, buffer)
        assert isinstance(buffer, BufferBase)
        with self._lock:
            if buffer.freed:
                return
            self._epoch = next_epoch()  # (every prepared launch re-checks its buffers)
            self._buffers.release(buffer)

    def live_buffers(self) -> list[BufferBase]:
        """Buffers allocated here and not yet freed."""
        return self._buffers.buffers()

    def write(self, buffer: DeviceBuffer, data: Any, offset: int = 0) -> None:
        """Copy host bytes (numpy array, bytes, memoryview) into `buffer` at `offset`."""
        self._check_open()
        write_checked(self, [checked_write(self, buffer, data, offset)])

    def write_many(self, items: Iterable[tuple[DeviceBuffer, Any, int]
                                         | tuple[DeviceBuffer, Any]]) -> None:
        """Several uploads, validated all before any is issued."""
        self._check_open()
        write_checked(self, checked_writes(self, items))

    def read(self, buffer: DeviceBuffer, offset: int = 0, length: int | None = None,
             dtype: Any = np.uint8) -> np.ndarray:
        """Bytes [offset, offset+length) of `buffer` as a new numpy array of `dtype`.

        Waits for work already enqueued on this backend that may write the buffer.
        """
        self._check_open()
        span = checked_span(self, buffer, offset, length)
        dt = element_dtype(np.uint8 if dtype is None else dtype, span[2])
        return read_checked(self, [span], [dt])[0]

    def read_many(self, ranges: Iterable[Any]) -> list[np.ndarray]:
        self._check_open()
        spans, dtypes = checked_reads(self, ranges)
        return read_checked(self, spans, dtypes)

    def read_into(self, buffer: DeviceBuffer, out: np.ndarray, offset: int = 0) -> np.ndarray:
        """Copy `out.nbytes` bytes at `offset` of `buffer` into `out` and return `out`.

        `out` is a writable C-contiguous numpy array of any numeric dtype, typically made
        once and passed to every read: a large read then skips a new array's first-touch
        page faults, which cost more than the copy. On CUDA a page-locked `out` (e.g.
        `torch.empty(n, pin_memory=True).numpy()`) is written by the GPU's DMA directly.
        Waits for work already enqueued on this backend that may write the buffer.
        """
        return read_into(self, buffer, out, offset)

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

    def _prepare_launch(self, bound: BoundDispatch) -> Any:
        """`bound`'s launch record (vyre.launch_path; lock held)."""
        return self._launch_path.prepare(bound)

    def _ready(self, bound: BoundDispatch) -> Any:
        """Check that `bound` may run now and return its prepared record (vyre.launch_path)."""
        return self._launch_path.ready(bound)

    def dispatch_async(self, program: Program | BoundDispatch, inputs: BufferArg = (),
                       outputs: BufferArg = (), config: DispatchConfig | None = None
                       ) -> Pending:
        """Enqueue a dispatch over resident buffers; returns at once with a Pending."""
        return self._launch_path.launch_async(program, inputs, outputs, config)

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
        or `profile=True` (then it waits and holds the device time too). A free() from
        another thread comes wholly before a launch or wholly after it (vyre.launch_path).
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
            cfg = config or DEFAULT_CONFIG
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
        return record(self, steps)

    # ------------------------------------------------------------ lifecycle
    def synchronize(self) -> None:
        """Block until all work enqueued on this backend has finished."""
        with self._lock:  # (one check, under the lock: dispatch.roundtrip pays for each)
            self._check_open()
            self._queue.synchronize()
        if self._debug_logs:
            self._drain_debug_logs()

    def _drain_debug_logs(self) -> None:
        """Read the waiting debug logs (a sync point), print them, raise a failed assert."""
        read_checked(self, [], [])  # (reads the waiting logs with the empty batch)

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
                self._buffers.release_all(self._exact_scratch.release(self))
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


def refuse_removed_hooks(cls: type) -> None:
    """Refuses a subclass of BaseBackend that overrides a hook BaseBackend no longer calls:
    before the parts (vyre.parts) a backend overrode `_compile`, `_allocate`, ...; such an
    override would now be silently ignored and the subclass would run the base behaviour."""
    stale = {name: part for name, part in REMOVED_HOOKS.items() if name in vars(cls)}
    if stale:
        moved = ", ".join(f"{name} -> {part}" for name, part in sorted(stale.items()))
        raise TypeError(
            f"{cls.__qualname__} overrides hooks BaseBackend no longer calls ({moved}): "
            "a backend is parts now; subclass the part and hand it to "
            "BaseBackend.__init__ (see vyre.parts)")


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


__all__ = ["BaseBackend", "Capabilities", "CompileStats", "HostBytes", "Pending",
           "host_array", "stream_chunks"]
