"""Recorded pipelines on CUDA: CUDA graphs of the steps' launch records.

A pipeline's body is captured once as a graph, and again as a graph of 2**k copies of it
(at most `max_copies`), so `run(repeat=R)` is about log2(R) graph launches; the reads
are a graph of device-to-host copies into pinned memory (a few kept per pipeline). Capture
runs on a private stream in thread-local mode. Device timing (two events) only when a
step asked for it. This module must never capture a wait on an outside event (framework
ordering goes around the graph launches), nor run a graph of a destroyed recording.
"""

from __future__ import annotations

import contextlib
import ctypes
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from vyre.config import Timing
from vyre.errors import DispatchError
from vyre.interrupts import deferred_interrupts
from vyre.pipeline import Pipeline, PipelineResult, ReadRange

from . import interop, waits
from .device import CudaBuffer, CudaDevice

_perf_ns = time.perf_counter_ns
_new_timing = tuple.__new__  # as in vyre/backend.py: half the cost of Timing(ns, ns)
READ_GRAPHS = 16  # readback graphs one recording keeps (all dropped when one more is made)


@dataclass
class GraphState:
    """A pipeline's CUDA graphs: the body repeated 2**k times, and readback graphs."""

    launches: list[Any]  # the steps' launch records (queue.LaunchRecord)
    max_copies: int = 1  # most body copies one graph holds, fixed at record
    execs: dict[int, Any] = field(default_factory=dict)  # copies -> CUgraphExec
    reads: dict[tuple[Any, ...], tuple[Any, list[tuple[int, int]], int]] = field(
        default_factory=dict
    )  # key -> (exec, [(pinned ptr, nbytes)], total)
    destroyed: bool = False


class Graphs:
    """The CUDA graphs of one instance's recorded pipelines. `enqueue(record, stream)` is
    the queue's: how one launch record goes onto a stream (here: the capture stream)."""

    def __init__(self, device: CudaDevice, enqueue: Callable[[Any, Any], None]) -> None:
        self.device = device
        self.enqueue = enqueue
        self._states: list[GraphState] = []
        self._capture_stream: Any = None  # private stream for CUDA graph capture
        self._timing_events: tuple[Any, Any] | None = None

    def record(self, pipeline: Pipeline, records: list[Any]) -> None:
        """`pipeline.state`: the graphs of `records` (lock held), the body captured now."""
        st = GraphState(records)
        st.max_copies = _max_copies(len(records))
        self._body_exec(st, 1)
        self._states.append(st)
        pipeline.state = st
        weakref.finalize(pipeline, self._destroy, st)

    def _capture(self, body: Callable[[Any], None]) -> Any:
        """Capture what `body(stream)` enqueues on `stream` as an instantiated CUDA graph.

        Capture runs on a private stream in thread-local mode (caller holds the lock):
        launches that other threads make meanwhile on the backend's stream stay out of the
        graph, and nothing this thread does is blocked.
        """
        dev = self.device
        drv, call = dev.driver, dev.driver_call
        if self._capture_stream is None:
            self._capture_stream = call(
                drv.cuStreamCreate, int(drv.CUstream_flags.CU_STREAM_NON_BLOCKING),
                what="cuStreamCreate")
        stream = self._capture_stream
        mode = drv.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_THREAD_LOCAL
        call(drv.cuStreamBeginCapture, stream, mode, what="cuStreamBeginCapture")
        try:
            body(stream)
        finally:
            graph = call(drv.cuStreamEndCapture, stream, what="cuStreamEndCapture")
        try:
            return call(drv.cuGraphInstantiate, graph, 0, what="cuGraphInstantiate")
        finally:
            drv.cuGraphDestroy(graph)

    def _body_exec(self, st: GraphState, copies: int) -> Any:
        ex = st.execs.get(copies)
        if ex is None:
            enqueue = self.enqueue

            def body(stream: Any) -> None:
                for _ in range(copies):
                    for rec in st.launches:
                        enqueue(rec, stream)

            ex = self._capture(body)
            st.execs[copies] = ex
        return ex

    def _destroy(self, st: GraphState) -> None:
        if st.destroyed:
            return
        st.destroyed = True
        dev = self.device
        if not dev.context_state.usable:
            return
        drv = dev.driver
        with contextlib.suppress(Exception):
            dev.context_state.make_current()
            for ex in st.execs.values():
                drv.cuGraphExecDestroy(ex)
            for ex, pinned, _ in st.reads.values():
                drv.cuGraphExecDestroy(ex)
                for ptr, _n in pinned:
                    drv.cuMemFreeHost(ptr)
        st.execs.clear()
        st.reads.clear()

    def _read_exec(self, st: GraphState, reads: list[ReadRange]
                   ) -> tuple[Any, list[tuple[int, int]]]:
        key = tuple((id(r.buffer), r.buffer.serial, r.offset, r.length) for r in reads)
        hit = st.reads.get(key)
        if hit is not None:
            return hit[0], hit[1]
        dev = self.device
        drv, call = dev.driver, dev.driver_call
        pinned: list[tuple[int, int]] = []
        for r in reads:
            n = int(r.length or 0)
            ptr = 0
            if n:
                err, p = drv.cuMemAllocHost(n)
                if int(err) != 0:
                    dev.driver_fail("cuMemAllocHost", err, requested=n)
                ptr = int(p)
            pinned.append((ptr, n))

        def body(stream: Any) -> None:
            for r, (ptr, n) in zip(reads, pinned):
                if n:
                    b = r.buffer
                    assert isinstance(b, CudaBuffer)
                    call(drv.cuMemcpyDtoHAsync, ptr, b.ptr + r.offset, n, stream,
                         what="cuMemcpyDtoHAsync")

        ex = self._capture(body)
        if len(st.reads) >= READ_GRAPHS:
            for old_ex, old_pinned, _ in st.reads.values():
                drv.cuGraphExecDestroy(old_ex)
                for ptr, _n in old_pinned:
                    if ptr:
                        drv.cuMemFreeHost(ptr)
            st.reads.clear()
        st.reads[key] = (ex, pinned, sum(n for _, n in pinned))
        return ex, pinned

    def run(self, pipeline: Pipeline, repeat: int, reads: list[ReadRange]) -> PipelineResult:
        # Pipeline.run checked the instance and the buffers under the lock it still holds.
        # Driver calls are made directly (not through driver_call) on this per-run path.
        st = pipeline.state
        dev = self.device
        if not isinstance(st, GraphState) or st.destroyed:
            raise DispatchError(f"{dev.id}: this pipeline's recording is gone; record it again")
        drv = dev.driver
        stream = dev.cu_stream
        fail = dev.driver_fail
        # device timing only when a step asked for it (Timing.device_ns is None otherwise,
        # as on wgpu): two event records and an elapsed-time query are three driver calls
        # a run, which the raw peer's cuGraphLaunch + cuStreamSynchronize does not make
        profiled = pipeline.profiled
        t0 = _perf_ns()
        with dev.lock:
            # the launches (and their framework ordering) as one deferred section; Ctrl-C
            # may end the wait for them below (the work goes on; waits.py)
            with deferred_interrupts():
                if profiled:
                    if self._timing_events is None:
                        self._timing_events = (dev.event(True), dev.event(True))
                    ev0, ev1 = self._timing_events
                    (err,) = drv.cuEventRecord(ev0, stream)
                    if err:
                        fail("cuEventRecord", err)
                # framework ordering goes around the graph launches, never into a capture
                streams = interop.streams_of(pipeline.buffers()) if dev.interop_active else ()
                if streams:
                    interop.wait_for(dev, streams)
                remaining = repeat
                p = st.max_copies
                launches = 0
                while remaining:
                    while p > remaining:
                        p //= 2
                    ex = self._body_exec(st, p)
                    (err,) = drv.cuGraphLaunch(ex, stream)
                    if err:
                        fail("cuGraphLaunch", err)
                    launches += 1
                    remaining -= p
                pinned: list[tuple[int, int]] = []
                if reads:
                    rex, pinned = self._read_exec(st, reads)
                    dev.driver_call(drv.cuGraphLaunch, rex, stream, what="cuGraphLaunch")
                if streams:
                    interop.signal(dev, streams)
            device_ns = None
            if profiled:
                (err,) = drv.cuEventRecord(ev1, stream)
                if err:
                    fail("cuEventRecord", err)
                t1 = _perf_ns()
                # the one host synchronisation
                err = waits.wait(drv.cuEventSynchronize, drv.cuEventQuery, ev1)
                if err:
                    fail("pipeline (cuEventSynchronize)", err)
                t2 = _perf_ns()
                err, ms = drv.cuEventElapsedTime(ev0, ev1)
                if err:
                    fail("cuEventElapsedTime", err)
                device_ns = int(float(ms) * 1e6)
            else:
                t1 = _perf_ns()
                # the one host synchronisation
                err = waits.wait(drv.cuStreamSynchronize, drv.cuStreamQuery, stream)
                if err:
                    fail("pipeline (cuStreamSynchronize)", err)
                t2 = _perf_ns()
            dev.check_indirect_status()
            arrays = [
                np.frombuffer(bytearray(ctypes.string_at(ptr, n)) if n else bytearray(),
                              dtype=np.dtype(r.dtype))
                for r, (ptr, n) in zip(reads, pinned)
            ] if reads else []
        t3 = _perf_ns()
        timing = _new_timing(Timing, (t3 - t0, t1 - t0, t2 - t1, device_ns))
        # "dispatches" as every backend reports it (Pipeline._run_indexed adds them up)
        return PipelineResult(arrays, timing, {"graph_launches": launches + bool(reads),
                                               "dispatches": len(pipeline.steps) * repeat})

    def close(self) -> None:
        """Destroy every recording's graphs, the timing events and the capture stream (the
        stream's work has finished)."""
        for st in self._states:
            self._destroy(st)
        self._states.clear()
        dev = self.device
        if dev.context_state.usable:
            with contextlib.suppress(Exception):
                drv = dev.driver
                if self._timing_events:
                    for ev in self._timing_events:
                        drv.cuEventDestroy(ev)
                if self._capture_stream is not None:
                    drv.cuStreamDestroy(self._capture_stream)
        self._timing_events = None
        self._capture_stream = None


def _max_copies(steps: int) -> int:
    """The most copies of a body of `steps` launches one graph holds: a power of two, at
    most 256, and at most 4096 launches in all."""
    cap = max(1, 4096 // max(1, steps))
    p = 1
    while p * 2 <= min(cap, 256):
        p *= 2
    return p
