"""The CUDA queue part: launch records, launches on the instance's stream, pending work.

A launch record (`LaunchRecord`) is packed once per binding: the argument block, the
pointer array and cuLaunchKernel's whole argument tuple; a launch is then one driver call
(`launch`, the hot path that `vyre bench --workloads dispatch` measures). A Pending's wait
is an event synchronisation Ctrl-C may end (waits.py). Recorded pipelines are CUDA graphs
(graphs.py). This module must never copy data through the host, nor launch a kernel whose
buffers the core has not checked in this epoch.
"""

from __future__ import annotations

import contextlib
import ctypes
import struct
import threading
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from vyre.binding import BoundDispatch
from vyre.buffer import BufferBase
from vyre.config import IndirectGrid, Timing
from vyre.interrupts import interrupt_safe
from vyre.parts import Pending, Queue
from vyre.pipeline import Pipeline, PipelineResult, ReadRange

from . import driver as D
from . import graphs, interop, waits
from .allocator import CudaAllocator
from .compiler import Kernel
from .device import CudaBuffer, CudaDevice
from .render import STRUCT_CODE

_get_ident = threading.get_ident


@dataclass(frozen=True)
class LaunchRecord:
    """A pre-packed launch: argument block and pointer array built once per binding; it
    holds device pointers, never the buffers."""

    function: Any
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    params_ptr: int  # address of the void*[] array (0 if no arguments)
    keep: tuple[Any, ...]  # the ctypes objects the addresses point into
    # cuLaunchKernel and its whole argument tuple on the backend's stream, built once
    launch: Callable[..., Any]
    args: tuple[Any, ...]
    before: Callable[[Any], None] | None = None  # enqueued on the stream before the kernel


class CudaQueue(Queue):
    """Launches on one CUDA instance's stream (see the module docstring)."""

    device: CudaDevice

    def __init__(self, device: CudaDevice, memory: CudaAllocator) -> None:
        super().__init__(device)
        self.memory = memory
        self.graphs = graphs.Graphs(device, self.enqueue)

    # ------------------------------------------------------------ launch records
    def prepare(self, bound: BoundDispatch, artifact: Any) -> LaunchRecord:
        kernel: Kernel = artifact
        sig = kernel.generated.signature
        offsets, size = sig.layout()
        block = (ctypes.c_char * size)()
        base = ctypes.addressof(block)
        nb = len(bound.buffers)
        for i, b in enumerate(bound.buffers):
            assert isinstance(b, CudaBuffer)
            struct.pack_into("<Q", block, offsets[i], b.ptr)
            struct.pack_into("<I", block, offsets[nb + i], bound.counts[i])
        for j, (ty, v) in enumerate(zip(sig.params, bound.params)):
            struct.pack_into(STRUCT_CODE[ty], block, offsets[2 * nb + j], v)
        bdim = kernel.generated.block
        keep: tuple[Any, ...] = ()
        before = None
        if isinstance(bound.grid, IndirectGrid):  # see render.py's indirect_kernel
            grid, keep, before = self._indirect_args(bound, block, offsets[-3:], bdim)
        else:
            grid = bound.grid
        merge = kernel.generated.merge
        if sig.grid_x:  # merged workgroups: the kernel is told the real grid.x
            struct.pack_into("<I", block, offsets[-1], grid[0])
        if merge > 1:
            grid = (-(-grid[0] // merge), grid[1], grid[2])
        n = len(offsets)
        ptrs = (ctypes.c_void_p * max(n, 1))(*[base + o for o in offsets])
        params_ptr = ctypes.addressof(ptrs) if n else 0
        stream = self.device.cu_stream
        args = (kernel.function, *grid, *bdim, 0, stream, params_ptr, 0)
        launch: Callable[..., Any] = self.device.driver.cuLaunchKernel
        if before is not None:  # the grid's private copy, then the kernel
            cu_launch, copy = launch, before

            def launch(*a: Any) -> Any:
                copy(stream)
                return cu_launch(*a)
        return LaunchRecord(kernel.function, grid, bdim, params_ptr,
                            (block, ptrs, kernel, *keep), launch, args, before)

    def _indirect_args(self, bound: BoundDispatch, block: Any, offsets: list[int],
                       bdim: tuple[int, int, int]) -> tuple[tuple[int, int, int], tuple[Any, ...],
                                                            Callable[[Any], None] | None]:
        """(blocks to launch, objects to keep, a copy to enqueue before the kernel) of an
        indirect grid; fills the kernel's grid pointer, status pointer and limit. The
        counts are read on the device only. Where the program also binds the grid's
        buffer, it may change them while blocks start, so the kernel reads a private copy
        made on the stream just before it (WebGPU reads the arguments once, before the
        dispatch)."""
        g = bound.grid
        assert isinstance(g, IndirectGrid) and isinstance(g.buffer, CudaBuffer)
        dev = self.device
        grid_ptr = g.buffer.ptr + g.offset
        keep: tuple[Any, ...] = ()
        before = None
        if any(b is g.buffer for b in bound.buffers):
            private = self.memory.allocate(16, "vyre-indirect-grid")
            assert isinstance(private, CudaBuffer)
            src, dst, drv = grid_ptr, private.ptr, dev.driver

            def before(stream: Any) -> None:
                dev.driver_call(drv.cuMemcpyDtoDAsync, dst, src, 12, stream,
                                what="cuMemcpyDtoDAsync")

            keep, grid_ptr = (private,), private.ptr
        caps = dev.capabilities()
        struct.pack_into("<Q", block, offsets[0], grid_ptr)
        struct.pack_into("<Q", block, offsets[1], dev.indirect_status_ptr())
        struct.pack_into("<I", block, offsets[2], caps.limits["max_workgroups_per_dimension"])
        # enough blocks to fill every SM; each runs every gridDim.x-th workgroup of the grid
        d = caps.details
        per_sm = max(1, (d.get("max_threads_per_sm") or 2048) // (bdim[0] * bdim[1] * bdim[2]))
        return (max(1, d["sm_count"]) * per_sm, 1, 1), keep, before

    # ------------------------------------------------------------ launches
    def launch(self, record: Any, buffers: tuple[BufferBase, ...]) -> None:
        """One cuLaunchKernel of the packed record, under the instance lock the core holds
        (so no free() comes between the core's check of the buffers and this enqueue; a
        free after it is ordered after the kernel, see CudaBuffer). Kept to one set
        lookup and one call: this is the launch overhead `vyre bench --workloads dispatch`
        measures. A launch touching a buffer shared with a framework stream is ordered
        with that stream by events (interop.py), under the lock."""
        dev = self.device
        if _get_ident() in dev.launch_threads:  # no framework streams; vyre's context
            (err,) = record.launch(*record.args)  # was current here (it may not be now)
            if err:
                self._relaunch(record, err)
            return
        if dev.interop_active:
            streams = interop.streams_of(buffers)
            if streams:
                dev.check_open()
                interop.wait_for(dev, streams)
                self.enqueue(record)
                interop.signal(dev, streams)
                return
        dev.context_state.make_current()
        (err,) = record.launch(*record.args)
        if err:
            dev.driver_fail("cuLaunchKernel", err)

    def _relaunch(self, record: Any, err: Any) -> None:
        """A launch on the hot path failed: if another context had been made current on
        this thread since vyre's last call (another vyre instance on another GPU, torch,
        CuPy, a raw cuCtxSetCurrent), the launch never ran (the driver refuses a function
        of another context): make vyre's current and launch again. Otherwise the error is
        the launch's own. Costs nothing while the context stays current."""
        if self.device.context_state.make_current():
            (err,) = record.launch(*record.args)
            if not err:
                return
        self.device.driver_fail("cuLaunchKernel", err)

    def enqueue(self, rec: LaunchRecord, stream: Any = None) -> None:
        """One launch of `rec` on `stream` (default: the instance's), its copy first."""
        gx, gy, gz = rec.grid
        bx, by, bz = rec.block
        dev = self.device
        stream = dev.cu_stream if stream is None else stream
        if rec.before is not None:
            rec.before(stream)
        (err,) = dev.driver.cuLaunchKernel(rec.function, gx, gy, gz, bx, by, bz, 0,
                                           stream, rec.params_ptr, 0)
        if int(err) != 0:
            dev.driver_fail("cuLaunchKernel", err)

    def launch_pending(self, bound: BoundDispatch) -> Pending:
        rec: LaunchRecord = bound.launch.record
        dev = self.device
        drv, stream = dev.driver, dev.cu_stream
        t0 = time.perf_counter_ns()
        profile = bound.config.profile
        start = dev.event(True) if profile else None
        if start is not None:
            dev.driver_call(drv.cuEventRecord, start, stream)
        streams = interop.streams_of(bound.buffers) if dev.interop_active else ()
        if streams:  # framework ordering around the launch (see interop.py)
            interop.wait_for(dev, streams)
        self.enqueue(rec)
        if streams:
            interop.signal(dev, streams)
        end = dev.event(profile)
        dev.driver_call(drv.cuEventRecord, end, stream)
        t1 = time.perf_counter_ns()
        state = {"end": end, "start": start}

        def release() -> None:
            for k in ("start", "end"):
                ev = state.pop(k, None)
                if ev is not None:
                    with contextlib.suppress(Exception):
                        drv.cuEventDestroy(ev)

        def is_ready() -> bool:
            ev = state.get("end")
            if ev is None:
                return True
            (err,) = drv.cuEventQuery(ev)
            if int(err) == D.NOT_READY:
                return False
            if int(err) != 0:
                dev.driver_fail("cuEventQuery", err)
            return True

        def wait() -> Timing:
            w0 = time.perf_counter_ns()
            try:
                ev = state.get("end")
                device_ns = None
                if ev is not None:
                    with dev.lock:
                        dev.context_state.make_current()
                        err = waits.wait(drv.cuEventSynchronize, drv.cuEventQuery, ev)
                        if int(err) != 0:
                            dev.driver_fail(
                                f"kernel {bound.program.name!r} (cuEventSynchronize)", err)
                        if state.get("start") is not None:
                            ms = dev.driver_call(drv.cuEventElapsedTime, state["start"], ev)
                            device_ns = int(float(ms) * 1e6)
                        dev.check_indirect_status()
            finally:
                release()
            w1 = time.perf_counter_ns()
            return Timing(wall_ns=w1 - t0, enqueue_ns=t1 - t0, wait_ns=w1 - w0,
                          device_ns=device_ns)

        pending = Pending(is_ready, wait)
        pending._bound = bound  # type: ignore[attr-defined]  # keeps buffers alive
        weakref.finalize(pending, release)
        return pending

    def synchronize(self) -> None:
        # direct: the roundtrip's path; Ctrl-C may end the wait on the main thread (waits.py)
        dev = self.device
        drv = dev.driver
        err = waits.wait(drv.cuStreamSynchronize, drv.cuStreamQuery, dev.cu_stream)
        if err:
            dev.driver_fail("cuStreamSynchronize", err)
        dev.check_indirect_status()

    # ------------------------------------------------------------ pipelines
    @interrupt_safe
    def record_pipeline(self, pipeline: Pipeline, artifacts: list[Any]) -> None:
        self.device.check_open()
        with self.device.lock:
            records = [self.prepare(s, a) for s, a in zip(pipeline.steps, artifacts)]
            self.graphs.record(pipeline, records)

    def run_pipeline(self, pipeline: Pipeline, repeat: int,
                     reads: list[ReadRange]) -> PipelineResult:
        return self.graphs.run(pipeline, repeat, reads)

    @interrupt_safe
    def close(self) -> None:
        """Wait for the stream's work, then destroy the graphs and their streams and events."""
        dev = self.device
        if dev.context_state.usable:
            with contextlib.suppress(Exception):
                dev.context_state.make_current()
                dev.driver.cuStreamSynchronize(dev.cu_stream)
        self.graphs.close()
