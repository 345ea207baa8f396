"""The one launch path of a backend instance, past its bound hot path: the launch cache,
launch records prepared once per binding, and their enqueue.

`BaseBackend.dispatch_with_device_buffers` keeps the bound re-launch inline (a call there
would cost), with its argument checks; what it and `dispatch_async` launch comes here: a
(program, inputs, outputs, config) call looked up in the launch cache
(vyre.launch_cache.LaunchCache), bound and prepared on a miss; a binding re-checked when the instance's epoch moved (a free,
a close, a lost context); a prepared record enqueued on the queue part, or each device
dispatch of an exact-sum plan in turn (vyre.exact_sum_plan).

The epoch check and the enqueue happen under the instance's lock as one step, on the hot
path and here: a free() from another thread (which moves the epoch under that lock) comes
wholly before them (the launch is re-checked and refused) or wholly after (the device work
is already enqueued, and each backend's free is ordered after it). This module must never
talk to a device but through the queue part, nor hold a buffer strongly (the launch cache
holds them weakly).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Protocol

from . import debug, exact_sum_plan
from .binding import BoundDispatch, BufferArg, Launch, check_bound_owner
from .buffer import BufferBase, check_usable
from .compile_cache import CompileCache
from .config import DispatchConfig, IndirectGrid
from .exact_sum_plan import PlanRecord
from .ir.nodes import Program
from .launch_cache import LaunchCache, rebind
from .parts import Compiler, Pending, Queue

DEFAULT_CONFIG = DispatchConfig()  # a dispatch given no config


class LaunchBackend(debug.DebugBackend, exact_sum_plan.PlanBackend, Protocol):
    """What the launch path asks of the instance it serves (vyre.backend.BaseBackend,
    typed here by what is used so that this module never imports the base class): its
    epoch (moved on every free, close and context loss), its debug logs, its open check."""

    id: str
    _epoch: int
    _debug_logs: list[debug.PendingLog]

    def _check_open(self) -> None: ...

    def _drain_debug_logs(self) -> None: ...


class LaunchPath:
    """A backend instance's launch cache and launch steps (see the module docstring)."""

    def __init__(self, backend: LaunchBackend, compiler: Compiler, queue: Queue,
                 cache: CompileCache) -> None:
        self.backend = backend
        self.lock = backend._lock
        self.compiler = compiler
        self.queue = queue
        self.cache = cache
        self.launch_record = queue.launch  # (bound once: the enqueue's one call)
        # dispatches re-issued over the same buffers are bound and prepared once (see
        # dispatch); evicted with their buffers
        self.launches = LaunchCache(self.lock)

    def bind_new(self, program: Program, ins: BufferArg, outs: BufferArg,
                 config: DispatchConfig, given: tuple[Any, ...],
                 key: tuple[Any, ...] | None) -> BoundDispatch:
        """A launch-cache miss: validate and bind, and remember the binding under `key`."""
        bound: BoundDispatch = self.backend.bind(program, ins, outs, config)
        if key is not None:
            grid = config.grid
            with self.lock:
                self.launches.put(key, bound, given,
                                  grid.buffer if isinstance(grid, IndirectGrid) else None)
        return bound

    def prepare(self, bound: BoundDispatch) -> Any:
        """`bound`'s launch record from the queue, over its artifact from the compile cache
        (lock held; a plan's sub-dispatches come here one by one)."""
        return self.queue.prepare(
            bound, self.cache.get(bound.program, self.compiler.specialisation(bound)))

    def ready(self, bound: BoundDispatch) -> Any:
        """Check that `bound` may run now and return its prepared record (made on first use)."""
        backend = self.backend
        with self.lock:
            backend._check_open()
            check_bound_owner(backend, bound, "dispatch")
            for b in bound.buffers:
                check_usable(b)
            grid = bound.grid
            if isinstance(grid, IndirectGrid):
                check_usable(grid.buffer)
            launch = bound.launch
            if launch.record is None:  # (a PlanRecord when it has exact f32 sums)
                launch.record = exact_sum_plan.prepare(backend, bound)
            if not launch.profile:  # a profiled launch always takes the checked, waited path
                launch.epoch = backend._epoch
            return launch.record

    def launch_cached(self, program: Program, inputs: BufferArg, outputs: BufferArg,
                      cfg: DispatchConfig) -> Launch:
        """Launch a (program, inputs, outputs, config) call: from the launch cache, or
        bound, prepared and remembered the first time; returns its Launch. The check (when
        the epoch moved) and the enqueue are one step under the lock, so a buffer freed by
        another thread is refused, never launched. Kept out of dispatch_with_device_buffers
        so that the bound hot path's frame stays small."""
        entry, given, key, inputs, outputs = self.launches.lookup(program, inputs, outputs, cfg)
        if entry is None:  # first time: validate, bind, prepare, remember
            if isinstance(program, Program) and program.debug_statements:
                # vyre.print / vyre.assert_: never remembered (each dispatch has its own
                # log), the log read with the next completion (vyre.debug)
                return self.launch_logged(program, inputs, outputs, cfg)
            bound = self.bind_new(program, inputs, outputs, cfg, given, key)
            with self.lock:
                self.ready(bound)
                self.enqueue(bound.launch.record, bound.buffers)
            return bound.launch
        launch = entry.launch
        with self.lock:
            if launch.epoch != self.backend._epoch:  # something was freed or lost
                # meanwhile, or another thread remembered the entry and has not prepared it
                self.ready(rebind(entry, program, given, cfg))
            self.enqueue(launch.record,
                         given if entry.in_order else tuple(given[j] for j in entry.order))
        return launch

    def launch_logged(self, program: Program, inputs: BufferArg, outputs: BufferArg,
                      cfg: DispatchConfig) -> Launch:
        """Enqueue a dispatch of a vyre.print / vyre.assert_ program; its log waits for the
        next sync point (see vyre.debug), or is read now past debug.MAX_PENDING_LOGS."""
        backend = self.backend
        pending, launch = debug.enqueue(backend, program, inputs, outputs, cfg)
        with self.lock:
            backend._debug_logs.append(pending)
            full = len(backend._debug_logs) > debug.MAX_PENDING_LOGS
        if full:
            backend._drain_debug_logs()
        return launch

    def launch_async(self, program: Program | BoundDispatch, inputs: BufferArg,
                     outputs: BufferArg, config: DispatchConfig | None) -> Pending:
        """`dispatch_async`: enqueue a dispatch (bound, or bound through the launch cache)
        and return its Pending."""
        if isinstance(program, BoundDispatch):
            bound = program
        else:
            cfg = config or DEFAULT_CONFIG
            if isinstance(program, Program) and program.debug_statements:  # vyre.print
                return debug.launch(self.backend, program, inputs, outputs, cfg, Pending)
            entry, given, key, ins, outs = self.launches.lookup(program, inputs, outputs, cfg)
            bound = (rebind(entry, program, given, cfg) if entry is not None else
                     self.bind_new(program, ins, outs, cfg, given, key))
        with self.lock:
            record = self.ready(bound)
            if type(record) is PlanRecord:
                return self.launch_plan_async(record, bound.buffers)
            return self.queue.launch_pending(bound)

    def enqueue(self, record: Any, buffers: tuple[BufferBase, ...]) -> None:
        """Enqueue a prepared launch record (caller holds the lock): the queue's own, or
        each device dispatch of an exact-sum plan in turn (vyre.exact_sum_plan)."""
        if type(record) is PlanRecord:
            for step in record.steps:
                self.launch_record(step.record, exact_sum_plan.step_buffers(step, buffers))
        else:
            self.launch_record(record, buffers)

    def launch_plan_async(self, record: PlanRecord, buffers: tuple[BufferBase, ...]
                          ) -> Pending:
        """An exact-sum plan's dispatches; the Pending of the last (the queue is in order)."""
        *first, last = record.steps
        for step in first:
            self.launch_record(step.record, exact_sum_plan.step_buffers(step, buffers))
        return self.queue.launch_pending(dataclasses.replace(
            last.template, buffers=exact_sum_plan.step_buffers(last, buffers)))
