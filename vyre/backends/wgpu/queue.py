"""The wgpu queue part: launch records, submissions, pending work and recorded pipelines.

A launch record (encoding.WgpuRecord) holds the compiled pipeline, a shared bind group
(bindings.py) and the packed uniforms; a launch rewrites the uniforms only when another
launch changed them, encodes one compute pass and submits it. A recorded pipeline has
bind groups of its own and is encoded for each run; long runs are submitted in chunks of
MAX_DISPATCHES_PER_SUBMIT dispatches, one chunk in flight. Work whose shaders may flag a
condition notes its status buffers as unchecked (device.py); every wait reads them back
before a result can be seen. Profiled work records two timestamps. Every method that
calls into wgpu-native runs with Ctrl-C deferred where an interrupt would tear its state
(vyre.interrupts). This module must never generate shader code.
"""

from __future__ import annotations

import contextlib
import struct
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from vyre.backend import HostBytes
from vyre.binding import BoundDispatch
from vyre.buffer import BufferBase
from vyre.config import IndirectGrid, Timing
from vyre.errors import BackendError, InvalidDispatch
from vyre.interrupts import deferred_interrupts, interrupt_safe
from vyre.parts import Pending, Queue, host_array
from vyre.pipeline import Pipeline, PipelineResult, ReadRange

from .allocator import NO_BYTES, WgpuAllocator
from .bindings import BindGroups, Binding
from .compiler import Compiled
from .device import GRID_FLAG, Status, WgpuBuffer, WgpuDevice
from .encoding import Runs, WgpuRecord, encode, one_dispatch, plain_runs

#: Most dispatches a pipeline run records into one command buffer before submitting it
#: (see _encode_rounds): ~8 MiB of host recording, far above any pipeline's steps.
MAX_DISPATCHES_PER_SUBMIT = 16384
_TIMESTAMP_POOL = 8  # timestamp sets kept for reuse (more only with dispatches in flight)


@dataclass
class PipelineState:
    """What a recorded Pipeline holds on this backend."""

    steps: list[WgpuRecord]
    runs: Runs | None  # plain_runs(steps)
    checked: list[WgpuRecord]  # the steps with status flags to check after a run


@dataclass
class TimestampSet:
    """The begin/end timestamps of one profiled submission: the query set, the buffer it
    resolves into and a mappable copy of that."""

    queries: Any
    resolve: Any
    staging: Any

    def record_resolve(self, enc: Any, into: Any = None) -> None:
        """Resolve the two timestamps and copy them to the first 16 bytes of `into`
        (default: this set's own mappable buffer)."""
        enc.resolve_query_set(self.queries, 0, 2, self.resolve, 0)
        enc.copy_buffer_to_buffer(self.resolve, 0, self.staging if into is None else into, 0, 16)

    def destroy(self) -> None:
        for obj in (self.queries, self.resolve, self.staging):
            with contextlib.suppress(Exception):
                obj.destroy()


def timestamp_ns(raw: HostBytes) -> int | None:
    if len(raw) < 16:
        return None
    begin, end = struct.unpack_from("<QQ", bytes(raw[:16]))
    return int(end - begin) if end >= begin else None


class WgpuQueue(Queue):
    """Submissions to one WebGPU device's queue (see the module docstring)."""

    device: WgpuDevice

    def __init__(self, device: WgpuDevice, memory: WgpuAllocator, bindings: BindGroups) -> None:
        super().__init__(device)
        self.memory = memory  # the staging buffer and status reads of a pipeline's run
        self.bindings = bindings
        self._grid_checks: dict[int, Any] = {}  # word offset -> pre-pass pipeline
        # timestamp query sets with their resolve and map buffers, reused: creating them per
        # profiled dispatch cost ~34 ms of host time each on the H100 once a 64 MB buffer
        # had been read back, and the GPU's clocks dropped while it idled between runs
        self._timestamp_pool: list[TimestampSet] = []

    def _check_binding_sizes(self, bound: BoundDispatch) -> None:
        for d, b in zip(bound.program.buffers, bound.buffers):
            assert isinstance(b, WgpuBuffer)
            if b.alloc_size > self.device.max_binding:
                raise InvalidDispatch(
                    f"program {bound.program.name!r} buffer {d.name!r}: {b.describe()} is "
                    f"larger than this adapter's max storage binding size "
                    f"({self.device.max_binding} bytes, limits['max_storage_binding_bytes']); "
                    "split the data into buffers of at most that size"
                )

    def record_step(self, bound: BoundDispatch, compiled: Compiled,
                    own: dict[tuple[Any, ...], Binding] | None) -> WgpuRecord:
        """`bound` ready to encode, over its compiled program. `own`: a pipeline's private
        bindings (steps with equal program, buffers and params share one; shared bind
        groups have their uniforms rewritten between submissions, so a recording never
        uses them); None: a launch record."""
        self._check_binding_sizes(bound)
        data = compiled.module.layout.pack(bound.counts, bound.params)
        if own is None:
            binding = self.bindings.shared(compiled, bound, data)
        else:
            key = (id(compiled), tuple(b.serial for b in bound.buffers), data)
            if key not in own:
                own[key] = self.bindings.new(compiled, bound, data)
            binding = own[key]
        copy = self._indirect_scratch() if self._grid_copy_needed(bound) else None
        g = bound.grid
        indirect = (g.buffer.gpu, g.offset) if isinstance(g, IndirectGrid) else None
        status = [compiled.status] if compiled.status is not None else []
        check = None
        if isinstance(g, IndirectGrid):
            st = Status(self.device.status_buffer(), bound.program.name)
            check = self._grid_check(g, st)
            status.append(st)
        return WgpuRecord(bound.program.name, compiled.pipeline, binding.bind_group, binding,
                          data, None if indirect else g, indirect,  # type: ignore[arg-type]
                          copy, check, tuple(status))

    def _grid_copy_needed(self, bound: BoundDispatch) -> bool:
        g = bound.grid
        return isinstance(g, IndirectGrid) and any(b is g.buffer for b in bound.buffers)

    def _indirect_scratch(self) -> Any:
        u = self.device.usage
        return self.device.gpu.create_buffer(
            label="vyre-indirect", size=12, usage=u.INDIRECT | u.COPY_DST
        )

    def _grid_check(self, grid: IndirectGrid, status: Status) -> tuple[Any, Any]:
        """The pre-pass of an indirect dispatch: wgpu silently skips a dispatch whose
        device-side counts exceed max_workgroups_per_dimension; this flags them."""
        word = grid.offset // 4
        pipe = self._grid_checks.get(word)
        if pipe is None:
            limit = self.device.caps.limits["max_workgroups_per_dimension"]
            code = (
                "@group(0) @binding(0) var<storage, read> g: array<u32>;\n"
                "@group(0) @binding(1) var<storage, read_write> st: array<atomic<u32>>;\n"
                "@compute @workgroup_size(1) fn main() {\n"
                f"    let m = max(g[{word}u], max(g[{word + 1}u], g[{word + 2}u]));\n"
                f"    if (m > {limit}u) {{ atomicOr(&st[0], {GRID_FLAG}u); atomicMax(&st[1], m); }}\n}}"
            )
            mod = self.device.gpu.create_shader_module(label="vyre-grid-check", code=code)
            pipe = self.device.gpu.create_compute_pipeline(
                layout="auto", compute={"module": mod, "entry_point": "main"}
            )
            self._grid_checks[word] = pipe
        buf = grid.buffer
        assert isinstance(buf, WgpuBuffer)
        bg = self.device.gpu.create_bind_group(layout=pipe.get_bind_group_layout(0), entries=[
            {"binding": 0, "resource": {"buffer": buf.gpu, "offset": 0, "size": buf.alloc_size}},
            {"binding": 1, "resource": {"buffer": status.buffer, "offset": 0, "size": 16}},
        ])
        return pipe, bg

    @interrupt_safe
    def prepare(self, bound: BoundDispatch, artifact: Any) -> WgpuRecord:
        try:
            return self.record_step(bound, artifact, None)
        except BackendError:
            raise
        except Exception as exc:
            raise self.device.error(f"preparing {bound.program.name!r}", exc) from None

    @staticmethod
    def _uniforms_stale(rec: WgpuRecord) -> bool:
        """Whether `rec`'s shared bind group's uniform buffer holds another launch's params
        (it holds those of whichever launch wrote it last)."""
        binding = rec.binding
        return binding.data is not rec.data and binding.data != rec.data

    def _refresh_uniforms(self, rec: WgpuRecord) -> None:
        """Write `rec`'s params into its uniform buffer if they are not there, before it is
        submitted (queue-ordered, so work submitted earlier keeps its values)."""
        if self._uniforms_stale(rec):
            self.device.queue.write_buffer(rec.binding.uniform, 0, rec.data)
            rec.binding.data = rec.data

    def launch(self, record: Any, buffers: tuple[BufferBase, ...]) -> None:
        # called under the lock (wgpu-native aborts the process when two threads submit at
        # once, or when a buffer a free() destroyed is submitted)
        if self.device.closed or self.device.lost is not None:
            self.device.check_open()
        if record.status or self._uniforms_stale(record):
            # an interrupt between the uniform write and noting it, or between the
            # submit and noting its status flags, would leave either stale: deferred
            with deferred_interrupts():
                self._submit_record(record)
        else:  # (an interrupt here drops at most an encoder that was never submitted)
            self._submit_record(record)

    def _submit_record(self, record: WgpuRecord) -> None:
        try:
            self._refresh_uniforms(record)
            enc = self.device.gpu.create_command_encoder()
            direct = record.direct
            if direct is not None:
                one_dispatch(enc, record, direct)
            else:
                encode(enc, [record], 1, None)
            self.device.queue.submit([enc.finish()])
            if record.status:  # loop-limit / indirect-grid flags: checked before reads
                self.device.submitted([record])
        except Exception as exc:
            raise self.device.error(f"dispatching {record.name!r}", exc) from None

    @interrupt_safe
    def launch_pending(self, bound: BoundDispatch) -> Pending:
        t0 = time.perf_counter_ns()
        try:
            step: WgpuRecord = bound.launch.record
            self._refresh_uniforms(step)
            profile = bound.config.profile and self.device.timestamps
            ts = self._timestamp_set() if profile else None
            enc = self.device.gpu.create_command_encoder()
            encode(enc, [step], 1, ts.queries if ts else None)
            if ts is not None:
                ts.record_resolve(enc)
            self.device.queue.submit([enc.finish()])
            self.device.submitted([step])
        except BackendError:
            raise
        except Exception as exc:
            raise self.device.error(f"dispatching {bound.program.name!r}", exc) from None
        t1 = time.perf_counter_ns()
        done = [False]

        def is_ready() -> bool:
            if not done[0] and self.device.queue_empty():
                done[0] = True
            return done[0]

        def wait() -> Timing:
            # the wait itself only asks (polls): Ctrl-C may end it (the work goes on and a
            # later wait finds it); mapping the times and reading the status flags back
            # are what an interrupt must not tear, so only they are deferred
            w0 = time.perf_counter_ns()
            device_ns = None
            try:
                with self.device.lock:
                    if self.device.closed:  # its device is destroyed: say so, not "device lost"
                        raise self.device.closed_error()
                    self.device.wait()
                    with deferred_interrupts():
                        if ts is not None:
                            device_ns = timestamp_ns(
                                self.memory.map_staging(ts.staging, 16, [(0, 16)])[0])
                            self._release_timestamps(ts)
                        self.memory.check_status()
            except BackendError:
                raise
            except Exception as exc:
                raise self.device.error(f"waiting for {bound.program.name!r}", exc) from None
            done[0] = True
            w1 = time.perf_counter_ns()
            return Timing(wall_ns=w1 - t0, enqueue_ns=t1 - t0, wait_ns=w1 - w0,
                          device_ns=device_ns)

        return Pending(is_ready, wait)

    @interrupt_safe
    def record_pipeline(self, pipeline: Pipeline, artifacts: list[Any]) -> None:
        try:
            own: dict[tuple[Any, ...], Binding] = {}
            steps = [self.record_step(s, a, own) for s, a in zip(pipeline.steps, artifacts)]
            pipeline.state = PipelineState(steps, plain_runs(steps),
                                            [s for s in steps if s.status])
        except BackendError:
            raise
        except Exception as exc:
            raise self.device.error("recording a pipeline", exc) from None

    def run_pipeline(
        self, pipeline: Pipeline, repeat: int, reads: list[ReadRange]
    ) -> PipelineResult:
        # Ctrl-C may end the waits (for earlier chunks, and for the run's own work): they
        # only ask, and the work goes on for a later wait to find. A submit and the noting
        # of its status flags, and the mapping of the read-back, are deferred sections.
        t0 = time.perf_counter_ns()
        state: PipelineState = pipeline.state
        steps = state.steps
        profile = self.device.timestamps and pipeline.profiled
        ranges = [(r.buffer, r.offset, int(r.length or 0)) for r in reads]
        try:
            with deferred_interrupts():
                ts = self._timestamp_set() if profile else None
            enc = self._encode_rounds(state, repeat, ts.queries if ts else None)
            nz = [(b, o, n) for b, o, n in ranges if n]
            plan, pieces, total = self.memory.plan_reads(nz, 16 if ts else 0)
            staging = None
            with deferred_interrupts():
                if plan or ts:
                    staging = self.memory.staging_buffer(total)
                    if ts:  # the times first in the shared staging buffer, then the reads
                        ts.record_resolve(enc, staging)
                    for gpu, a0, size, soff in plan:
                        enc.copy_buffer_to_buffer(gpu, a0, staging, soff, size)
                self.device.queue.submit([enc.finish()])
                self.device.submitted(state.checked)
            t1 = time.perf_counter_ns()
            self.device.wait()
            with deferred_interrupts():
                got = ([] if staging is None else
                       self.memory.map_staging(staging, total, ([(0, 16)] if ts else []) + pieces))
                self.memory.check_status()
        except BackendError:
            raise
        except Exception as exc:
            raise self.device.error("running a pipeline", exc) from None
        t2 = time.perf_counter_ns()
        device_ns = None
        it = iter(got)
        if ts is not None:
            device_ns = timestamp_ns(next(it))
            self._release_timestamps(ts)
        out = [host_array(next(it) if n else NO_BYTES.copy(), np.dtype(r.dtype))
               for (_b, _o, n), r in zip(ranges, reads)]
        timing = Timing(wall_ns=t2 - t0, enqueue_ns=t1 - t0, wait_ns=t2 - t1, device_ns=device_ns)
        return PipelineResult(reads=out, timing=timing, extra={"dispatches": len(steps) * repeat})

    def _encode_rounds(self, state: PipelineState, repeat: int, timestamps: Any | None) -> Any:
        """A command encoder holding the last rounds of a `repeat`-round run; the earlier
        rounds are encoded and submitted in chunks of at most MAX_DISPATCHES_PER_SUBMIT
        dispatches, each chunk submitted once the one before it has finished, so the host
        and device memory of the recording do not grow with `repeat` (one encoder for all
        rounds took ~530 B of host memory per dispatch, and 4e6 rounds exhausted the
        device's memory and lost the device). The device never waits for the host: the
        next chunk is encoded while the previous one runs."""
        steps = state.steps
        per_chunk = max(1, MAX_DISPATCHES_PER_SUBMIT // len(steps))
        done = 0
        first = True
        while repeat - done > per_chunk:
            enc = self.device.gpu.create_command_encoder()
            encode(enc, steps, per_chunk, timestamps, state.runs, first, False)
            done += per_chunk
            self.device.wait()  # the chunk before this one: at most one chunk in flight
            with deferred_interrupts():  # a submit and the noting of its status flags
                self.device.queue.submit([enc.finish()])
                self.device.submitted(state.checked)
            first = False
        enc = self.device.gpu.create_command_encoder()
        encode(enc, steps, repeat - done, timestamps, state.runs, first, True)
        if done:
            self.device.wait()
        return enc

    def synchronize(self) -> None:
        if self.memory.dropped:
            self.memory.destroy_dropped()
        try:
            # the wait only asks (polls), which leaves nothing half-done for an interrupt to
            # tear; only reading the status flags back (a submit and a map) is guarded, so
            # dispatch.roundtrip's usual wait pays for no guard
            self.device.wait()
            if self.device.unchecked:
                with deferred_interrupts():
                    self.memory.check_status()
        except BackendError:
            raise
        except Exception as exc:
            raise self.device.error("synchronize", exc) from None

    def _timestamp_set(self) -> TimestampSet:
        """A free timestamp set (give it back with _release_timestamps once read)."""
        if self._timestamp_pool:
            return self._timestamp_pool.pop()
        u = self.device.usage
        return TimestampSet(
            self.device.gpu.create_query_set(type="timestamp", count=2),
            self.device.gpu.create_buffer(size=16, usage=u.QUERY_RESOLVE | u.COPY_SRC),
            self.device.gpu.create_buffer(size=16, usage=u.MAP_READ | u.COPY_DST),
        )

    def _release_timestamps(self, ts: TimestampSet) -> None:
        if len(self._timestamp_pool) < _TIMESTAMP_POOL:
            self._timestamp_pool.append(ts)
        else:
            ts.destroy()

    @interrupt_safe
    def close(self) -> None:
        """The shared bind groups and the timestamp sets (the device goes after)."""
        self.bindings.clear()
        for ts in self._timestamp_pool:
            ts.destroy()
        self._timestamp_pool.clear()
