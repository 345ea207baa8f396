"""Recorded multi-dispatch pipelines.

A Pipeline is a list of steps bound (validated) once against one backend; `record` makes
one (`BaseBackend.pipeline`: each step compiled, the recording the queue's). `run` executes
the whole dependent chain, `repeat` times, plus the requested readbacks, behind one host
synchronisation; how is the backend's business (one command buffer, a CUDA graph, ...).
This module must never execute anything itself.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from . import exact_sum_plan
from .binding import (
    BindingBackend,
    BoundDispatch,
    BufferArg,
    bind,
    check_bound_owner,
    owned_buffer,
)
from .buffer import BufferBase, as_index, check_range, check_usable
from .config import DispatchConfig, IndirectGrid, Timing
from .debug.instrument import has_debug
from .errors import InvalidDispatch, InvalidProgram
from .hostarrays import as_dtype
from .ir.nodes import Program
from .ir.validate import validate


class PipelineQueue(Protocol):
    """The queue part of the backend (vyre.parts.Queue): it records and runs a pipeline."""

    def record_pipeline(self, pipeline: Pipeline, artifacts: list[Any]) -> None:
        """Prepare the recording of `pipeline` (vyre.parts.Queue)."""
        ...

    def run_pipeline(self, pipeline: Pipeline, repeat: int,
                     reads: list[ReadRange]) -> PipelineResult:
        """Run the recorded steps `repeat` times, then read `reads` (vyre.parts.Queue)."""
        ...


class PipelineCompiler(Protocol):
    """The compiler part of the backend (vyre.parts.Compiler): a step's compile key."""

    def specialisation(self, bound: BoundDispatch) -> Any:
        """What a step's compiled form depends on beyond its Program (its compile key)."""
        ...


class PipelineBackend(exact_sum_plan.PlanBackend, Protocol):
    """What a Pipeline asks of the backend that recorded it (vyre.backend.BaseBackend): its
    lock, epoch, compiler and queue (typed here so this module never imports vyre.backend)."""

    _lock: Any
    _epoch: int
    _debug_logs: Any  # resident vyre.print / assert_ logs not read yet (vyre.debug)

    @property
    def _queue(self) -> PipelineQueue: ...

    @property
    def _compiler(self) -> PipelineCompiler: ...

    def _compiled_for(self, program: Program, key: Any) -> Any: ...

    @property
    def closed(self) -> bool: ...

    def capabilities(self) -> Any:
        """The backend's capabilities (a debug log's buffer bound, vyre.debug)."""
        ...

    def allocate_device_buffer(self, byte_len: int, label: str | None = None,
                               kind: str = "device") -> Any:
        """A debug log's buffer (vyre.debug)."""
        ...

    def write(self, buffer: Any, data: Any, offset: int = 0) -> None:
        """A debug log's header reset before a run."""
        ...

    def free(self, buffer: Any) -> None:
        """A debug log freed with the pipeline (or after a refused construction)."""
        ...

    def _drain_debug_logs(self) -> None: ...

    def _check_open(self) -> None: ...

    def pipeline(self, steps: Sequence[Step | BoundDispatch]) -> Pipeline:
        """Record a pipeline of `steps` (a Pipeline records its repeated rounds this way)."""
        ...


@dataclass(frozen=True)
class Step:
    """One dispatch of a pipeline (the same arguments as dispatch_with_device_buffers).

    `index_param` names a u32 (or i32) param of the program that is not in
    `config.params`: on `run(repeat=R)` it is 0, 1, ..., R-1 on the successive rounds, so a
    time-stepped kernel (step t of a solver, column k of a factorisation) is one Step.
    """

    program: Program
    inputs: BufferArg
    outputs: BufferArg
    config: DispatchConfig
    index_param: str | None = None

    def __post_init__(self) -> None:
        # checked here, where the mistake is made, not later as an AttributeError inside
        # pipeline(); the buffers are checked by bind against the program's declarations
        if not isinstance(self.program, Program):
            raise InvalidProgram(
                f"Step's program must be a vyre Program, got {type(self.program).__name__} "
                f"{self.program!r:.40}; build one with vyre.ProgramBuilder, @vyre.kernel or "
                "vyre.ir.from_json"
            )
        if not isinstance(self.config, DispatchConfig):
            raise InvalidDispatch(
                f"Step({self.program.name!r}, ...)'s config must be a vyre.DispatchConfig, got "
                f"{type(self.config).__name__}; pass e.g. DispatchConfig.for_elements(n, 64, "
                "params={...})"
            )
        if self.index_param is not None and not isinstance(self.index_param, str):
            raise InvalidDispatch(
                f"Step({self.program.name!r}, ...)'s index_param must be the name (str) of a "
                f"u32 or i32 param, or None; got {type(self.index_param).__name__}"
            )


def as_steps(steps: Any) -> tuple[Any, ...]:
    """`steps` (a list or tuple, or any other iterable, read once here) as a tuple, else
    InvalidDispatch: a generator read twice would record an empty pipeline."""
    if type(steps) is list or type(steps) is tuple:
        return tuple(steps)
    if isinstance(steps, (str, bytes, Mapping)) or not isinstance(steps, Iterable):
        raise InvalidDispatch(
            f"pipeline takes a list of vyre.Step (or bound dispatches), got "
            f"{type(steps).__name__} {steps!r:.40}; e.g. backend.pipeline([Step(program, "
            "inputs, outputs, config)])"
        )
    return tuple(steps)


@dataclass(frozen=True)
class ReadRange:
    """A readback: `length` bytes (None: to the end) at `offset` of `buffer`, as `dtype`.

    `dtype=None`: in a pipeline, the element type the steps declare for the buffer (when
    they agree and the range is whole elements), else bytes (uint8).
    """

    buffer: Any
    offset: int = 0
    length: int | None = None
    dtype: Any = None


@dataclass
class PipelineResult:
    """What `Pipeline.run` returns: the readbacks (in the order asked), the timing, and
    backend-specific extras."""

    reads: list[np.ndarray]
    timing: Timing
    extra: dict[str, Any] = field(default_factory=dict)


def _indexed(config: DispatchConfig, name: str, index: int) -> DispatchConfig:
    """`config` with the step-index param `name` set to `index`."""
    if name in config.params:
        raise InvalidDispatch(
            f"index_param {name!r} is set by the pipeline on each round; leave it out of "
            "DispatchConfig(params=...)"
        )
    return config.model_copy(update={"params": {**config.params, name: index}})


def as_read_range(r: Any) -> ReadRange:
    """A ReadRange from a ReadRange, a (buffer, offset, length, dtype) tuple or a buffer."""
    if isinstance(r, ReadRange):
        return r
    if isinstance(r, tuple):
        if not 1 <= len(r) <= 4:
            raise InvalidDispatch(
                f"a read is a buffer or a (buffer, offset, length, dtype) tuple, got a tuple "
                f"of {len(r)}"
            )
        return ReadRange(*r)
    return ReadRange(r)


def checked_span(backend: BindingBackend, buffer: Any, offset: Any,
                 length: Any) -> tuple[BufferBase, int, int]:
    """`buffer` a live buffer of `backend` and [offset, offset+length) inside it, as
    (buffer, offset, length) with the length filled in (None: to the end)."""
    buffer = owned_buffer(backend, buffer)
    off = offset if type(offset) is int else as_index(offset, "read offset")
    if length is None:
        n = buffer.byte_len - off
    else:
        n = length if type(length) is int else as_index(length, "read length")
    check_range(buffer, off, n)
    return buffer, off, n


def element_dtype(dtype: Any, length: int) -> np.dtype:
    """`dtype` as the numpy dtype of a read of `length` bytes: numeric, dividing the length."""
    dt = as_dtype(dtype)  # vyre.f16 is float16 here, never np.dtype("f16")
    if length % dt.itemsize:
        raise InvalidDispatch(f"read of {length} bytes is not a whole number of {dt}")
    return dt


def checked_read(backend: BindingBackend, r: Any,
                 default_dtype: Callable[[ReadRange, int], Any] | None = None) -> ReadRange:
    """A read request checked against `backend` (checked_span, element_dtype): the length
    filled in and the dtype a numpy dtype. `default_dtype(request, length)` gives the dtype
    of a request without one (else uint8)."""
    rr = as_read_range(r)
    buffer, offset, length = checked_span(backend, rr.buffer, rr.offset, rr.length)
    if rr.dtype is not None:
        dt = rr.dtype
    else:
        dt = np.uint8 if default_dtype is None else default_dtype(rr, length)
    return ReadRange(buffer, offset, length, element_dtype(dt, length))


#: Rounds of an index_param pipeline recorded at once (see Pipeline._run_indexed).
MAX_UNROLLED_ROUNDS = 1024


def _index_type(step: Any) -> str:
    """The type name of `step`'s index_param (u32 / i32, checked by _index_params)."""
    return next(p.ty.value for p in step.program.params if p.name == step.index_param)


class Pipeline:
    """Steps bound once; `run(repeat, read)` goes through the backend's queue (run_pipeline)."""

    def __init__(self, backend: PipelineBackend, steps: Sequence[Step | BoundDispatch]) -> None:
        steps = as_steps(steps)
        if not steps:
            raise InvalidDispatch("a pipeline needs at least one step")
        self.backend = backend
        self._indexed = self._index_params(steps)
        # the most rounds an indexed run may have: its index counts 0 .. rounds-1
        self._index_rounds = min(
            (2**31 if _index_type(s) == "i32" else 2**32
             for s in steps if getattr(s, "index_param", None) is not None), default=2**32)
        # vyre.print / vyre.assert_ steps: (step index, instrumented, log buffer), see run()
        self._logs: list[tuple[int, Any, BufferBase]] = []
        try:
            bound = self._bind_steps(steps)
            # a step with exact f32 atomic sums records the device dispatches it runs
            # (vyre.exact_sum_plan); an indexed one's index goes to its first (the kernel)
            expanded: list[BoundDispatch] = []
            indexed: dict[int, str] = {}
            for i, b in enumerate(bound):
                if i in self._indexed:
                    indexed[len(expanded)] = self._indexed[i]
                expanded.extend(exact_sum_plan.expand(backend, b))
        except BaseException:
            for _, _, log in self._logs:  # (made here: never left behind by a refusal)
                if not backend.closed:
                    backend.free(log)
            raise
        self._indexed = indexed
        self.steps: tuple[BoundDispatch, ...] = tuple(expanded)
        # each distinct buffer once: run() re-checks them (freed, stale) in O(buffers), not
        # O(steps), so a long recorded chain over a few buffers costs little host work
        self._distinct_buffers: tuple[BufferBase, ...] = tuple(
            {id(b): b for s in self.steps for b in s.buffers}.values()
        )
        self.profiled = any(s.config.profile for s in self.steps)  # device timers asked for
        self._checked_epoch = -1  # the backend's epoch when run() last checked the buffers
        self.state: Any = None  # backend-private recording (command list, graph, ...)
        self._unrolled: tuple[int, Pipeline] | None = None  # (repeat, its recorded pipeline)
        self._types = self._buffer_types()

    def _bind_steps(self, steps: Sequence[Step | BoundDispatch]) -> tuple[BoundDispatch, ...]:
        backend = self.backend
        bound: list[BoundDispatch] = []
        for i, s in enumerate(steps):
            if isinstance(s, BoundDispatch):
                check_bound_owner(backend, s, f"pipeline step {i}")
                bound.append(s)
                continue
            if not isinstance(s, Step):
                raise InvalidDispatch(f"pipeline step {i} must be a vyre.Step, got {type(s)}")
            if has_debug(s.program):
                s = self._with_log(i, s)
            cfg = s.config if s.index_param is None else _indexed(s.config, s.index_param, 0)
            try:
                bound.append(bind(backend, s.program, s.inputs, s.outputs, cfg))
            except InvalidDispatch as exc:
                raise InvalidDispatch(f"pipeline step {i} ({s.program.name}): {exc}") from None
        return tuple(bound)

    def _with_log(self, i: int, s: Step) -> Step:
        """Step `s` (its program has vyre.print / vyre.assert_) running its instrumented
        twin with a debug log of its own (vyre.debug), held by this pipeline."""
        from . import debug

        inst = debug.instrumented(s.program)
        log = debug.new_log(self.backend, inst)
        self._logs.append((i, inst, log))
        return Step(inst.program, s.inputs, debug.with_log(s.outputs, inst.log, log), s.config,
                    s.index_param)

    def _index_params(self, steps: Sequence[Step | BoundDispatch]) -> dict[int, str]:
        out = {}
        for i, s in enumerate(steps):
            name = getattr(s, "index_param", None)
            if name is None:
                continue
            decl = next((p for p in s.program.params if p.name == name), None)
            if decl is None or decl.ty.value not in ("u32", "i32"):
                raise InvalidDispatch(
                    f"pipeline step {i} ({s.program.name}): index_param {name!r} must be a u32 "
                    f"or i32 param of the program; its params are "
                    f"{[p.name for p in s.program.params]}"
                )
            out[i] = name
        return out

    def _buffer_types(self) -> dict[int, Any]:
        """id(buffer) -> the numpy dtype every step declares for it (None when they differ)."""
        types: dict[int, Any] = {}
        for s in self.steps:
            for decl, buf in zip(s.program.buffers, s.buffers):
                dt = decl.ty.numpy
                types[id(buf)] = dt if types.get(id(buf), dt) == dt else None
        return types

    def _unroll(self, repeat: int) -> Pipeline:
        """The `repeat` rounds as one recorded pipeline, each indexed step bound with its
        round's index (bound once per repeat count, then replayed)."""
        if self._unrolled is None or self._unrolled[0] != repeat:
            self._unrolled = (repeat, self._rounds(0, repeat))
        return self._unrolled[1]

    def _rounds(self, start: int, count: int) -> Pipeline:
        """Rounds start .. start+count-1 as one recorded pipeline (see _unroll)."""
        bound: list[BoundDispatch] = []
        for r in range(start, start + count):
            for i, s in enumerate(self.steps):
                name = self._indexed.get(i)
                if name is None:
                    bound.append(s)
                    continue
                decls = s.program.buffers
                ins = [b for d, b in zip(decls, s.buffers) if not d.writable]
                outs = [b for d, b in zip(decls, s.buffers) if d.writable]
                cfg = s.config.model_copy(update={"params": {**s.config.params, name: r}})
                bound.append(bind(self.backend, s.program, ins, outs, cfg))
        return self.backend.pipeline(bound)

    def _run_indexed(self, repeat: int, read: Sequence[Any]) -> PipelineResult:
        """A run of a pipeline with index_param steps: every round is bound with its own
        index, so the rounds are recorded unrolled; past MAX_UNROLLED_ROUNDS they are
        recorded and run a block at a time, so memory does not grow with `repeat` (every
        round recorded at once took ~7 KiB a round on wgpu, 431 MiB in 25 s on the
        reference)."""
        if repeat > self._index_rounds:  # refused before any round runs, not midway
            raise InvalidDispatch(
                f"repeat={repeat}: an index_param step's index would pass the largest value "
                f"of its type after {self._index_rounds} rounds; run at most "
                f"{self._index_rounds} rounds per run()"
            )
        reads = [self._typed(r) for r in read]  # checked before anything runs
        if repeat <= MAX_UNROLLED_ROUNDS:
            return self._unroll(repeat).run(1, reads)
        wall = enqueue = wait = device = dispatches = 0
        timed = True
        res: PipelineResult | None = None
        for start in range(0, repeat, MAX_UNROLLED_ROUNDS):
            count = min(MAX_UNROLLED_ROUNDS, repeat - start)
            res = self._rounds(start, count).run(1, reads if start + count == repeat else [])
            t = res.timing
            wall, enqueue, wait = wall + t.wall_ns, enqueue + t.enqueue_ns, wait + t.wait_ns
            timed = timed and t.device_ns is not None
            device += t.device_ns or 0
            dispatches += int(res.extra.get("dispatches", 0))
        assert res is not None
        timing = Timing(wall_ns=wall, enqueue_ns=enqueue, wait_ns=wait,
                        device_ns=device if timed else None)
        return PipelineResult(res.reads, timing, {**res.extra, "dispatches": dispatches})

    def _check_reads(self, read: Sequence[Any]) -> list[ReadRange]:
        return [checked_read(self.backend, r, self._default_dtype) for r in read]

    def _default_dtype(self, rr: ReadRange, length: int) -> Any:
        if rr.dtype is not None:
            return rr.dtype
        dt = self._types.get(id(rr.buffer))
        if dt is not None and rr.offset % dt.itemsize == 0 and length % dt.itemsize == 0:
            return dt
        return np.uint8

    def run(self, repeat: int = 1, read: Sequence[Any] = ()) -> PipelineResult:
        """Run every step `repeat` times in order, then the readbacks; one host sync.

        Reads come back typed as the steps declare each buffer unless a ReadRange says
        otherwise (see ReadRange)."""
        if isinstance(repeat, bool) or not isinstance(repeat, int) or repeat < 1:
            raise InvalidDispatch(f"repeat must be an int >= 1, got {repeat!r}")
        res = self._run_logged(repeat, read) if self._logs else self._run(repeat, read)
        if self.backend._debug_logs:  # resident debug dispatches before the run (vyre.debug)
            self.backend._drain_debug_logs()
        return res

    def _run_logged(self, repeat: int, read: Sequence[Any]) -> PipelineResult:
        """A run with vyre.print / vyre.assert_ steps: their logs are reset before the run
        and read back with the run's own reads (one host sync); then each step's records
        are printed (step order) and the first failed assert raises DispatchError naming
        its step, after the whole run (every step and round ran; writes are kept)."""
        from .debug import log as debug_log
        from .debug import reset_log

        for _, _, buf in self._logs:
            reset_log(self.backend, buf)
        extra = [ReadRange(buf, 0, None, np.uint32) for _, _, buf in self._logs]
        res = self._run(repeat, [*read, *extra])
        logs = res.reads[len(read):]
        del res.reads[len(read):]
        failure: BaseException | None = None
        for (i, inst, buf), words in zip(self._logs, logs):
            where = f" (pipeline step {i})"
            try:
                debug_log.report(debug_log.decode(inst, words), self.steps[i].program.name,
                                 buf.byte_len, where)
            except BaseException as exc:  # (printed every step's records first)
                failure = failure or exc
        if failure is not None:
            raise failure
        return res

    def _run(self, repeat: int, read: Sequence[Any]) -> PipelineResult:
        if self._indexed:
            return self._run_indexed(repeat, read)
        reads: list[ReadRange] = []
        if read:  # checked before the reads' buffers are (a closed backend says so first)
            self.backend._check_open()
            reads = self._check_reads(read)
        # Under the backend's lock like every other device call: device libraries (wgpu-native)
        # abort the process when two threads submit at once.
        backend = self.backend
        with backend._lock:
            backend._check_open()
            # the buffers are re-checked only when the backend's epoch moved (a free, a
            # close, a lost context), as a bound dispatch's are
            if self._checked_epoch != backend._epoch:
                for b in self._distinct_buffers:
                    check_usable(b)
                self._checked_epoch = backend._epoch
            return backend._queue.run_pipeline(self, repeat, reads)

    def _typed(self, r: Any) -> ReadRange:
        return checked_read(self.backend, r, self._default_dtype)

    def buffers(self) -> list[BufferBase]:
        """Every buffer slot of every step, in order (a buffer may appear several times)."""
        return [b for s in self.steps for b in s.buffers]


def record(backend: PipelineBackend, steps: Sequence[Step | BoundDispatch]) -> Pipeline:
    """`BaseBackend.pipeline`: every step's Program validated, the steps bound once
    (Pipeline), each compiled through the compile cache, and the recording made by the
    queue under the lock."""
    backend._check_open()
    steps = as_steps(steps)  # read once: an iterator must not be half-consumed here
    for i, s in enumerate(steps):
        if isinstance(s, Step):
            try:
                validate(s.program)
            except InvalidProgram as exc:
                raise InvalidProgram(f"pipeline step {i} ({s.program.name}): {exc}") from None
    p = Pipeline(backend, steps)
    spec = backend._compiler.specialisation
    artifacts = [backend._compiled_for(s.program, spec(s)) for s in p.steps]
    with backend._lock:
        backend._check_open()
        for b in p.buffers():  # bound outside the lock: another thread may have freed
            check_usable(b)  # one since, and the recording must never see it
        for st in p.steps:
            if isinstance(st.grid, IndirectGrid):
                check_usable(st.grid.buffer)
        backend._queue.record_pipeline(p, artifacts)
    return p
