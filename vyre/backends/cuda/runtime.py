"""The CUDA backend: device selection, resident buffers, launches, events, CUDA graphs.

One instance drives one device (`cuda`, `cuda:1`) through its primary context and its own
non-blocking stream; everything it enqueues is ordered on that stream. Kernels come from
render.py (CUDA C) compiled by nvrtc.py to a cubin for the device's exact architecture
(never PTX), cached in memory per (program, specialisation) and on disk.

A kernel fault poisons the CUDA context: the failing call raises DispatchError, the instance
refuses further work with BackendUnavailable, and a new instance (vyre.get_backend('cuda'))
resets the device's primary context and starts clean.

This module must never copy resident data through the host behind the caller's back, and
never loads PTX.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import struct
import threading
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from vyre import features as F
from vyre.backend import BaseBackend, Capabilities, HostBytes, Pending
from vyre.backends.cuda.render import SUBGROUP_SIZE
from vyre.binding import BoundDispatch, next_epoch
from vyre.buffer import BufferBase
from vyre.config import IndirectGrid, Timing
from vyre.debug.instrument import debug_program
from vyre.errors import BackendUnavailable, DispatchError, InvalidDispatch
from vyre.interface import Backend
from vyre.interrupts import deferred_interrupts, interrupt_safe
from vyre.ir.nodes import Program
from vyre.pipeline import Pipeline, PipelineResult, ReadRange

from . import driver as D
from . import interop, managed, page_locked, peer, waits
from .device import GEN_LOCK, GENERATION, STATES, ContextState, cached_capacity
from .device import CudaBuffer as CudaBuffer
from .nvrtc import DiskCache, arch_for, compile_program, nvrtc_version, supported_archs
from .options import DEFAULT_OPTIONS, CudaOptions
from .render import KERNEL_NAME, STRUCT_CODE, Generated, generate

COARSEN_MIN_INVOCATIONS = 1 << 20
DEFAULT_COARSEN = 4  # measured on H100: saxpy 2.50 TB/s vs 2.38 at 1 (8 was slower)
STAGING_LIMIT = 64 << 20  # reads up to this size go through one pinned staging buffer
_NO_STAGING = np.empty(0, np.uint8)
_perf_ns = time.perf_counter_ns
_get_ident = threading.get_ident
_new_timing = tuple.__new__  # as in vyre/backend.py: half the cost of Timing(ns, ns)


@dataclass
class Kernel:
    """A loaded kernel: its source, cubin facts, module and function handles."""

    generated: Generated
    arch: str
    module: Any
    function: Any
    from_disk: bool
    cubin_bytes: int

    @property
    def source(self) -> str:
        return self.generated.source


@dataclass(frozen=True)
class _Launch:
    """A pre-packed launch (the launch record): argument block and pointer array built once
    per binding; it holds device pointers, never the buffers."""

    function: Any
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    params_ptr: int  # address of the void*[] array (0 if no arguments)
    keep: tuple[Any, ...]  # the ctypes objects the addresses point into
    # cuLaunchKernel and its whole argument tuple on the backend's stream, built once
    launch: Callable[..., Any]
    args: tuple[Any, ...]
    before: Callable[[Any], None] | None = None  # enqueued on the stream before the kernel


@dataclass
class _GraphState:
    """A pipeline's CUDA graphs: the body repeated 2**k times, and readback graphs."""

    launches: list[_Launch]
    max_copies: int = 1  # most body copies one graph holds (_max_copies), fixed at record
    execs: dict[int, Any] = field(default_factory=dict)  # copies -> CUgraphExec
    reads: dict[tuple[Any, ...], tuple[Any, list[tuple[int, int]], int]] = field(
        default_factory=dict
    )  # key -> (exec, [(pinned ptr, nbytes)], total)
    destroyed: bool = False


def _parse_ordinal(device: int | str | None) -> int:
    if device is None or device == "":
        return 0
    if isinstance(device, int) and not isinstance(device, bool):
        return device
    s = str(device).strip()
    if s.startswith("cuda:"):
        s = s[5:]
    if s.isdigit():
        return int(s)
    raise InvalidDispatch(f"CUDA device must be an ordinal like 'cuda:0' or 1, got {device!r}")


ENV_COARSEN = "VYRE_CUDA_COARSEN"
MAX_COARSEN = 64


def _coarsen_setting(coarsen: int | None, device: int | str | None) -> int:
    """Invocations per CUDA thread: `coarsen`, else $VYRE_CUDA_COARSEN, else the default;
    an int from 1 to MAX_COARSEN (anything else is refused naming where it came from)."""
    given: Any = coarsen
    where = "coarsen"
    if coarsen is None:
        raw = os.environ.get(ENV_COARSEN)
        if raw is None:
            return DEFAULT_COARSEN
        where = f"${ENV_COARSEN}"
        try:
            given = int(raw.strip())
        except ValueError:
            given = raw
    if isinstance(given, bool) or not isinstance(given, int) or not 1 <= given <= MAX_COARSEN:
        raise BackendUnavailable(
            "cuda" if device is None else f"cuda:{device}",
            f"{where}={given!r} is not a coarsening factor: use an int from 1 (off) to "
            f"{MAX_COARSEN} (default {DEFAULT_COARSEN}), or unset {where}",
        )
    return given


class CudaBackend(BaseBackend):
    """vyre on one NVIDIA GPU; see the module docstring."""

    kind = "cuda"

    def __init__(self, device: int | str | None = None, cache_dir: str | None = None,
                 coarsen: int | None = None, options: CudaOptions | None = None) -> None:
        ordinal = _parse_ordinal(device)
        if options is not None and not isinstance(options, CudaOptions):
            raise InvalidDispatch(
                f"options must be a vyre.backends.cuda.CudaOptions, got "
                f"{type(options).__name__}; e.g. CudaBackend(0, options=CudaOptions(...))")
        # the printer's debug / measurement switches (options.py): fixed for this instance,
        # passed to every generate (and, as BaseBackend.options, in every compile-cache key)
        self.options: CudaOptions = options or DEFAULT_OPTIONS
        self._private_ctx = False
        # invocations per CUDA thread for barrier-free programs (see codegen.coarsening_allowed)
        self.coarsen = _coarsen_setting(coarsen, device)
        self.coarsen_min_invocations = COARSEN_MIN_INVOCATIONS
        super().__init__(f"cuda:{ordinal}")
        drv = D.load()
        count = int(D.call(drv.cuDeviceGetCount))
        if count == 0:
            raise BackendUnavailable(self.id, "the driver reports no CUDA device")
        if not 0 <= ordinal < count:
            raise BackendUnavailable(
                self.id, f"there are {count} CUDA device(s): use cuda:0 .. cuda:{count - 1}"
            )
        self._drv = drv
        self._ordinal = ordinal
        self._dev = D.call(drv.cuDeviceGet, ordinal)
        ctx, gen = self._retain_healthy_context()
        self._state = ContextState(drv, ordinal, ctx, gen)
        wself = weakref.ref(self)
        self._state.on_dead = lambda: _bump_epoch(wself)
        self._state.current_threads.add(threading.get_ident())
        self._stream = D.call(drv.cuStreamCreate,
                              int(drv.CUstream_flags.CU_STREAM_NON_BLOCKING))
        self._state.stream = self._stream
        self._caps = managed.extend_caps(self._probe_caps(), drv, self._dev)
        # threads on which a launch needs no check: the context is current there and no
        # buffer is shared with a framework stream (then it is empty: see interop_active)
        self._launch_threads: set[int] | frozenset[int] = self._state.current_threads
        self.interop_active = False  # some buffer is shared with a framework stream
        self.interop_events: dict[int, Any] = {}  # framework stream -> ordering event
        self._arch = self._caps.details["arch"]
        self._disk = DiskCache(cache_dir)
        self._staging: tuple[int, int] = (0, 0)  # (pinned ptr, size)
        self._staging_bytes = _NO_STAGING  # the pinned buffer as uint8, while it lives
        self._memory_type = drv.CUpointer_attribute.CU_POINTER_ATTRIBUTE_MEMORY_TYPE
        self._graphs: list[_GraphState] = []
        self._retired: list[Any] = []  # modules of evicted kernels, unloaded when unused
        self._capture_stream: Any = None  # private stream for CUDA graph capture
        self._timing_events: tuple[Any, Any] | None = None
        self._indirect_status: tuple[int, np.ndarray] | None = None  # see _indirect_status_ptr

    # ------------------------------------------------------------ context and device
    def _retain_healthy_context(self) -> tuple[Any, int]:
        """The device's primary context, reset first if an earlier fault poisoned it."""
        drv, dev = self._drv, self._dev
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
            return ctx, GENERATION.get(self._ordinal, 0)

    def _reset_primary_context(self) -> Any:
        drv, dev = self._drv, self._dev
        (err,) = drv.cuDevicePrimaryCtxReset(dev)
        GENERATION[self._ordinal] = GENERATION.get(self._ordinal, 0) + 1
        for st in list(STATES):  # older instances' contexts and buffers are gone now
            if st.ordinal == self._ordinal and st.dead is None and not st.closed:
                st.kill(f"device {self._ordinal}'s context was reset after a fault")
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
        drv, dev = self._drv, self._dev
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
                        self._private_ctx = True
                        return ctx
            why = f"{why}; a new context failed too ({D.error_name(drv, err)})"
        except Exception as exc:
            why = f"{why}; a new context failed too ({exc})"
        raise BackendUnavailable(
            self.id,
            f"an earlier kernel fault left device {self._ordinal} unusable in this process "
            f"(resetting its primary context failed: {why}); restart the process",
        )

    def _probe_caps(self) -> Capabilities:
        drv, dev = self._drv, self._dev
        raw = D.call(drv.cuDeviceGetName, 256, dev)
        name = raw.split(b"\0", 1)[0].decode(errors="replace")

        def a(n: str) -> int:
            return D.attribute(drv, dev, n)

        major = a("CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR")
        minor = a("CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR")
        total = int(D.call(drv.cuDeviceTotalMem, dev))
        arch = arch_for(major, minor)
        archs = supported_archs()
        if archs and major * 10 + minor not in archs:
            raise BackendUnavailable(
                self.id,
                f"{name} is {arch}, which this NVRTC {nvrtc_version()} cannot target "
                f"(it supports {sorted(archs)}); install a matching nvidia-cuda-nvrtc",
            )
        max_threads = a("CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK")
        shared = a("CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK")
        grid_y = a("CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y")
        grid_z = a("CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z")
        feats = {F.F16, F.F64, F.I64, F.ATOMIC_FLOAT, F.ATOMIC_I64, F.WORKGROUP_MEMORY,
                 F.RESIDENT, F.ASYNC, F.PIPELINE, F.DEVICE_TIMERS, F.DISK_CACHE, F.SUBGROUP,
                 F.PAGE_LOCKED_HOST, F.INDIRECT_DISPATCH}
        limits = {
            "max_workgroup_invocations": max_threads,
            "max_workgroup_size_x": a("CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X"),
            "max_workgroup_size_y": a("CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y"),
            "max_workgroup_size_z": a("CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z"),
            "max_workgroups_per_dimension": min(grid_y, grid_z),
            "max_workgroup_bytes": shared,
            "max_buffer_bytes": total,
            "max_allocation_bytes": total,
            "max_buffers_per_program": 256,
        }
        details = {
            "name": name,
            "ordinal": self._ordinal,
            "compute_capability": (major, minor),
            "arch": arch,
            "sm_count": a("CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT"),
            "total_memory": total,
            "max_threads_per_block": max_threads,
            "shared_memory_per_block": shared,
            "warp_size": a("CU_DEVICE_ATTRIBUTE_WARP_SIZE"),
            "subgroup_size": SUBGROUP_SIZE,  # a warp (docs/IR.md, "Subgroups")
            "max_grid_dim_x": a("CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X"),
            "max_threads_per_sm": a("CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR"),
            "driver_version": int(D.call(drv.cuDriverGetVersion)),
            "nvrtc_version": nvrtc_version(),
        }
        return Capabilities(backend=self.id, kind="cuda", device=name,
                            features=frozenset(feats), limits=limits, details=details)

    def capabilities(self) -> Capabilities:
        return self._caps

    def _check_open(self) -> None:
        super()._check_open()
        if self._state.dead is not None:
            raise BackendUnavailable(
                self.id,
                f"the CUDA context was lost after a device fault ({self._state.dead}); close "
                "this instance and create a new one with vyre.get_backend('cuda')",
            )
        self._state.make_current()

    def _call(self, fn: Any, *args: Any, what: str | None = None) -> Any:
        try:
            return D.call(fn, *args, what=what)
        except D.CudaError as exc:
            if exc.sticky:
                self._state.kill(str(exc))
            raise

    def _raise(self, what: str, err: Any, requested: int | None = None) -> None:
        if self._closing:  # a driver call raced close(): what it used is gone
            raise self._closed_error() from None
        exc = D.fail(what, err, requested)
        if isinstance(exc, D.CudaError) and exc.sticky:
            self._state.kill(str(exc))
        raise exc

    # ------------------------------------------------------------ memory
    @interrupt_safe
    def _allocate(self, byte_len: int, label: str | None) -> BufferBase:
        if not byte_len:
            return CudaBuffer(self, 0, label, 0)
        capacity = cached_capacity(byte_len)
        ptr = self._state.reuse(capacity)
        if not ptr:
            err, dptr = self._drv.cuMemAlloc(capacity)
            if int(err) == int(self._drv.CUresult.CUDA_ERROR_OUT_OF_MEMORY) and \
                    self._state.cached_bytes:
                self._state.drain()  # the kept memory first, then the device's last word
                err, dptr = self._drv.cuMemAlloc(capacity)
            if int(err) != 0:
                self._raise(f"cuMemAlloc({byte_len})", err, requested=byte_len)
            ptr = int(dptr)
        return CudaBuffer(self, byte_len, label, ptr, capacity)

    def release_cached_memory(self) -> int:
        """Free the device memory this instance keeps from freed buffers for reuse (as
        torch.cuda.empty_cache does); the bytes given back to the driver."""
        with self._lock:
            self._check_open()
            return self._state.drain()

    @interrupt_safe
    def _free(self, buffer: BufferBase) -> None:
        assert isinstance(buffer, CudaBuffer)
        interop.release(buffer)  # deferred while a framework or a host view still uses it

    @interrupt_safe
    def _write(self, buffer: BufferBase, data: memoryview, offset: int) -> None:
        assert isinstance(buffer, CudaBuffer)
        streams = buffer.ext_streams
        if streams:
            interop.wait_for(self, streams)
        drv = self._drv
        host = np.frombuffer(data, np.uint8).ctypes.data
        self._call(drv.cuMemcpyHtoDAsync, buffer.ptr + offset, host, data.nbytes,
                   self._stream, what="cuMemcpyHtoDAsync")
        # From ordinary (pageable) memory the driver has copied the bytes out before the call
        # returns. From memory CUDA knows (page-locked by cuMemHostAlloc or
        # cuMemHostRegister, e.g. torch's pin_memory; managed) the DMA runs on after it, so
        # a caller reusing the array at once would change what arrives: write() promises
        # the bytes as they were at the call, so wait for the copy there.
        err, _ = drv.cuPointerGetAttribute(self._memory_type, host)
        if int(err) == 0:
            self._call(drv.cuStreamSynchronize, self._stream, what="cuStreamSynchronize")
        if streams:
            interop.signal(self, streams)

    @interrupt_safe
    def _read(self, buffer: BufferBase, offset: int, length: int) -> HostBytes:
        return self._read_batch([(buffer, offset, length)])[0]

    def _staging_ptr(self, size: int) -> int:
        ptr, have = self._staging
        if have >= size:
            return ptr
        if ptr:
            self._staging_bytes = _NO_STAGING  # never a view of freed memory
            self._drv.cuMemFreeHost(ptr)
            self._staging = (0, 0)
        new = max(size, 1 << 20)
        err, p = self._drv.cuMemAllocHost(new)
        if int(err) != 0:
            self._raise("cuMemAllocHost", err, requested=new)
        self._staging = (int(p), new)
        # slicing and copying this view is one copy in ~0.6 us, where np.empty plus
        # ctypes.memmove through `.ctypes.data` costs ~3 us of Python per small read
        self._staging_bytes = np.ctypeslib.as_array((ctypes.c_uint8 * new).from_address(int(p)))
        return int(p)

    @interrupt_safe
    def _read_batch(self, ranges: list[tuple[BufferBase, int, int]]) -> list[HostBytes]:
        """All copies on the stream (after earlier work), then one synchronisation."""
        total = sum(n for _, _, n in ranges)
        if not 0 < total <= STAGING_LIMIT:  # each straight into its own new array
            return self._copy_out(ranges, [np.empty(n, np.uint8) for _, _, n in ranges])
        self._order_reads(ranges)
        drv = self._drv
        base = self._staging_ptr(total)
        pos = 0
        spans = []
        for b, o, n in ranges:
            assert isinstance(b, CudaBuffer)
            if n:
                self._call(drv.cuMemcpyDtoHAsync, base + pos, b.ptr + o, n, self._stream,
                           what="cuMemcpyDtoHAsync")
            spans.append((pos, n))
            pos += n
        self._call(drv.cuStreamSynchronize, self._stream, what="cuStreamSynchronize")
        self._check_indirect_status()
        staged = self._staging_bytes
        # one copy each, into the array read_many hands out
        return [staged[pos:pos + n].copy() for pos, n in spans]

    @interrupt_safe
    def _read_batch_into(self, ranges: list[tuple[BufferBase, int, int]],
                         outs: list[np.ndarray]) -> None:
        self._copy_out(ranges, outs)

    def _copy_out(self, ranges: list[tuple[BufferBase, int, int]],
                  outs: list[np.ndarray]) -> list[HostBytes]:
        """Each range copied straight into the host array beside it (a pageable one: the
        driver stages it, and the call returns once the copy is done; a page-locked one:
        DMA), then one synchronisation; returns `outs`."""
        self._order_reads(ranges)
        drv = self._drv
        for (b, o, n), dst in zip(ranges, outs, strict=True):
            assert isinstance(b, CudaBuffer)
            if n:  # (cuda-bindings takes the array's own buffer: no ctypes pointer needed)
                self._call(drv.cuMemcpyDtoHAsync, dst, b.ptr + o, n, self._stream,
                           what="cuMemcpyDtoHAsync")
        self._call(drv.cuStreamSynchronize, self._stream, what="cuStreamSynchronize")
        self._check_indirect_status()
        return list(outs)

    def _order_reads(self, ranges: list[tuple[BufferBase, int, int]]) -> None:
        """Reads come after the work of framework streams sharing their buffers."""
        if self.interop_active:
            interop.wait_for(self, interop.streams_of(b for b, _, _ in ranges))

    # ------------------------------------------------------------ interop (interop.py)
    def from_dlpack(self, tensor: Any, *, stream: Any = interop.STREAM_AUTO,
                    label: str | None = None) -> BufferBase:
        """Borrow a PyTorch / CuPy / JAX (any DLPack or CUDA Array Interface) device array
        as a buffer of this backend, without copying.

        The buffer keeps `tensor` alive and never frees its memory. The producer's pending
        work is ordered before vyre's at import (DLPack stream protocol); with `stream` (the
        framework's stream: an int handle or a stream object; "auto" = torch's / cupy's
        current stream, None = none) every later vyre use of the buffer is ordered after
        that stream's work and that stream after vyre's, with events on the GPU.
        """
        return interop.import_dlpack(self, tensor, stream, label)

    def _export_dlpack(self, buffer: BufferBase, dtype: Any, shape: Any, stream: Any,
                       max_version: Any, dl_device: Any, copy: Any) -> Any:
        return interop.export_dlpack(self, buffer, dtype, shape, stream, max_version,
                                     dl_device, copy)

    def _dlpack_device(self, buffer: BufferBase) -> tuple[int, int]:
        return interop.dlpack_device(self, buffer)

    def _page_locked_array(self, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
        return page_locked.allocate(self, shape, dtype)

    def _allocate_managed(self, byte_len: int, label: str | None) -> BufferBase:
        return managed.allocate(self, byte_len, label)

    def _reaches(self, other: object) -> bool:
        """Whether `other` is a CUDA instance of this process's driver (so a copy between
        the two can run on the devices, peer.py)."""
        return isinstance(other, CudaBackend) and other._drv is self._drv

    def _copy_from(self, src: BufferBase, src_offset: int, dst: BufferBase, dst_offset: int,
                   nbytes: int) -> bool:
        owner = src.owner
        if not self._reaches(owner):
            return False
        peer.copy_batch([(owner, src, src_offset, self, dst, dst_offset, nbytes)])
        return True

    @staticmethod
    def _copy_batch(copies: list[Any]) -> bool:
        owners = list({id(b): b for c in copies for b in (c.src_owner, c.dst_owner)}.values())
        first = owners[0]
        if not isinstance(first, CudaBackend) or not all(first._reaches(b) for b in owners):
            return False  # through the host, one by one
        peer.copy_batch([(c.src_owner, c.src, c.src_offset, c.dst_owner, c.dst,
                          c.dst_offset, c.nbytes) for c in copies])
        return True

    def _host_view(self, buffer: BufferBase, dtype: Any) -> np.ndarray:
        return managed.host_view(self, buffer, dtype)

    @property
    def context_generation(self) -> int:
        return GENERATION.get(self._ordinal, 0)

    def _stale_reason(self, buffer: BufferBase) -> str | None:
        if self._state.dead is not None:
            return f"the CUDA context it lived in was lost ({self._state.dead})"
        gen = GENERATION.get(self._ordinal, 0)
        if buffer.generation != gen:
            return (f"CUDA device {self._ordinal}'s context was reset after a fault "
                    f"(generation {buffer.generation} -> {gen})")
        return None

    def memory_info(self) -> tuple[int, int]:
        """(free, total) device bytes, from cuMemGetInfo."""
        self._check_open()
        free, total = self._call(self._drv.cuMemGetInfo)
        return int(free), int(total)

    # ------------------------------------------------------------ compile
    @property
    def arch(self) -> str:
        return str(self._arch)

    def compile(self, program: Program) -> Kernel:
        """Compile and load `program` for this device (cached in memory and on disk): the
        kernel with one element per invocation, which every dispatch below
        `coarsen_min_invocations` runs. A larger grid runs a coarsened variant (`coarsen`
        elements per invocation), compiled at its first such dispatch and cached the same
        way; compile() does not build it, because most programs never see such a grid and
        it costs NVRTC about 1.5x the plain kernel."""
        kernel: Kernel = self._compiled_for(program, (self._arch, True, 1, False))
        return kernel

    def _specialisation(self, bound: BoundDispatch) -> Any:
        # aliased buffer slots must not be declared __restrict__; only grids large enough to
        # be bandwidth-bound are coarsened (small ones are latency-bound: coarsening a
        # 1024-element dispatch made it ~0.5 us slower on H100)
        grid = bound.grid
        k = 1
        if self.coarsen > 1 and isinstance(grid, tuple):
            total = grid[0] * grid[1] * grid[2] * bound.program.invocations_per_workgroup
            if total >= self.coarsen_min_invocations:
                k = self.coarsen
        return (self._arch, not bound.aliased, k, isinstance(grid, IndirectGrid))

    def _evict_compiled(self, compiled: Any) -> None:
        # Launches (cached, recorded in graphs, memoised on a BoundDispatch) keep their
        # Kernel alive through _Launch.keep: the module is unloaded only once the last of
        # them is gone, and then only after the stream drains (_unload_retired).
        weakref.finalize(compiled, self._retired.append, compiled.module)

    def _unload_retired(self) -> None:
        """Unload modules of evicted kernels nothing refers to any more (lock held)."""
        if not self._retired or not self._state.usable:
            return
        with contextlib.suppress(Exception):
            self._state.make_current()
            self._drv.cuStreamSynchronize(self._stream)  # no launch of them still runs
        while self._retired:
            module = self._retired.pop()
            with contextlib.suppress(Exception):
                self._drv.cuModuleUnload(module)

    @interrupt_safe
    def _compile(self, program: Program, key: Any) -> Kernel:
        self._unload_retired()
        arch, restrict, coarsen, indirect = (
            key if key is not None else (self._arch, True, self.coarsen, False))
        compiled = compile_program(program, arch, self._disk, restrict=restrict,
                                   coarsen=coarsen, codegen_options=self.options,
                                   indirect=indirect)
        if compiled.from_disk:
            self.compile_stats.disk_hits += 1
        module = self._call(self._drv.cuModuleLoadData, compiled.cubin, what="cuModuleLoadData")
        fn = self._call(self._drv.cuModuleGetFunction, module, KERNEL_NAME.encode(),
                        what="cuModuleGetFunction")
        return Kernel(compiled.generated, arch, module, fn, compiled.from_disk,
                      len(compiled.cubin))

    def source(self, program: Program) -> str:
        """The CUDA C generated for `program`."""
        program = debug_program(program)  # (vyre.print / assert_: what runs)
        return generate(program, coarsen=self.coarsen, options=self.options).source

    # ------------------------------------------------------------ launch
    def _prepare_launch(self, bound: BoundDispatch) -> _Launch:
        kernel: Kernel = self._compiled_for(bound.program, self._specialisation(bound))
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
        args = (kernel.function, *grid, *bdim, 0, self._stream, params_ptr, 0)
        launch: Callable[..., Any] = self._drv.cuLaunchKernel
        if before is not None:  # the grid's private copy, then the kernel
            cu_launch, copy = launch, before

            def launch(*a: Any) -> Any:
                copy(self._stream)
                return cu_launch(*a)
        return _Launch(kernel.function, grid, bdim, params_ptr, (block, ptrs, kernel, *keep),
                       launch, args, before)

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
        grid_ptr = g.buffer.ptr + g.offset
        keep: tuple[Any, ...] = ()
        before = None
        if any(b is g.buffer for b in bound.buffers):
            private = self._allocate(16, "vyre-indirect-grid")
            assert isinstance(private, CudaBuffer)
            src, dst, drv = grid_ptr, private.ptr, self._drv

            def before(stream: Any) -> None:
                self._call(drv.cuMemcpyDtoDAsync, dst, src, 12, stream, what="cuMemcpyDtoDAsync")

            keep, grid_ptr = (private,), private.ptr
        struct.pack_into("<Q", block, offsets[0], grid_ptr)
        struct.pack_into("<Q", block, offsets[1], self._indirect_status_ptr())
        struct.pack_into("<I", block, offsets[2], self._caps.limits["max_workgroups_per_dimension"])
        # enough blocks to fill every SM; each runs every gridDim.x-th workgroup of the grid
        d = self._caps.details
        per_sm = max(1, (d.get("max_threads_per_sm") or 2048) // (bdim[0] * bdim[1] * bdim[2]))
        return (max(1, d["sm_count"]) * per_sm, 1, 1), keep, before

    def _indirect_status_ptr(self) -> int:
        """Page-locked host words [flag, largest count] that indirect kernels set when a
        grid is over the limit (cuMemAllocHost memory: with unified addressing the device
        writes it through the host address); made on first use."""
        if self._indirect_status is None:
            err, p = self._drv.cuMemAllocHost(8)
            if int(err) != 0:
                self._raise("cuMemAllocHost", err, requested=8)
            words = np.ctypeslib.as_array((ctypes.c_uint32 * 2).from_address(int(p)))
            words[:] = 0
            self._indirect_status = (int(p), words)
        return self._indirect_status[0]

    def _check_indirect_status(self) -> None:
        """Raise DispatchError (once) if an indirect grid over the limit was dispatched
        since the last check: called after every wait for the device (wait, synchronize,
        reads, pipeline runs), before any result is returned."""
        st = self._indirect_status
        if st is None or not st[1][0]:
            return
        count = int(st[1][1])
        st[1][:] = 0
        limit = self._caps.limits["max_workgroups_per_dimension"]
        raise DispatchError(
            f"{self.id}: a program was dispatched with an indirect grid of {count} "
            f"workgroups in one dimension, over the limit of {limit} per dimension "
            "(limits['max_workgroups_per_dimension']); nothing ran. Keep every count in the "
            f"grid buffer at most {limit}: use more dimensions (y, z) or a larger workgroup "
            "size.")

    @property
    def interop_active(self) -> bool:
        """Whether some buffer of this instance is shared with a framework stream (set by
        interop.py; from then on every launch looks at its buffers' streams)."""
        return self._interop_active

    @interop_active.setter
    def interop_active(self, value: bool) -> None:
        self._interop_active = bool(value)
        self._launch_threads = frozenset() if value else self._state.current_threads

    def _launch_record(self, record: Any, buffers: tuple[BufferBase, ...]) -> None:
        """One cuLaunchKernel of the packed record, under the instance lock the core holds
        (so no free() comes between the core's check of the buffers and this enqueue; a
        free after it is ordered after the kernel, see CudaBuffer). Kept to one set
        lookup and one call: this is the launch overhead `vyre bench --workloads dispatch`
        measures. A launch touching a buffer shared with a framework stream is ordered
        with that stream by events (interop.py), under the lock."""
        if _get_ident() in self._launch_threads:  # no framework streams; vyre's context
            (err,) = record.launch(*record.args)  # was current here (it may not be now)
            if err:
                self._relaunch(record, err)
            return
        if self._interop_active:
            streams = interop.streams_of(buffers)
            if streams:
                self._check_open()
                interop.wait_for(self, streams)
                self._enqueue(record)
                interop.signal(self, streams)
                return
        self._state.make_current()
        (err,) = record.launch(*record.args)
        if err:
            self._raise("cuLaunchKernel", err)

    def _relaunch(self, record: Any, err: Any) -> None:
        """A launch on the hot path failed: if another context had been made current on
        this thread since vyre's last call (another vyre instance on another GPU, torch,
        CuPy, a raw cuCtxSetCurrent), the launch never ran (the driver refuses a function
        of another context): make vyre's current and launch again. Otherwise the error is
        the launch's own. Costs nothing while the context stays current."""
        if self._state.make_current():
            (err,) = record.launch(*record.args)
            if not err:
                return
        self._raise("cuLaunchKernel", err)

    def _enqueue(self, rec: _Launch, stream: Any = None) -> None:
        gx, gy, gz = rec.grid
        bx, by, bz = rec.block
        stream = self._stream if stream is None else stream
        if rec.before is not None:
            rec.before(stream)
        (err,) = self._drv.cuLaunchKernel(rec.function, gx, gy, gz, bx, by, bz, 0,
                                          stream, rec.params_ptr, 0)
        if int(err) != 0:
            self._raise("cuLaunchKernel", err)

    def _event(self, timing: bool) -> Any:
        flags = self._drv.CUevent_flags
        f = flags.CU_EVENT_DEFAULT if timing else flags.CU_EVENT_DISABLE_TIMING
        return self._call(self._drv.cuEventCreate, int(f), what="cuEventCreate")

    def _launch(self, bound: BoundDispatch) -> Pending:
        rec: _Launch = bound.launch.record
        drv = self._drv
        t0 = time.perf_counter_ns()
        profile = bound.config.profile
        start = self._event(True) if profile else None
        if start is not None:
            self._call(drv.cuEventRecord, start, self._stream)
        streams = interop.streams_of(bound.buffers) if self.interop_active else ()
        if streams:  # framework ordering around the launch (see interop.py)
            interop.wait_for(self, streams)
        self._enqueue(rec)
        if streams:
            interop.signal(self, streams)
        end = self._event(profile)
        self._call(drv.cuEventRecord, end, self._stream)
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
                self._raise("cuEventQuery", err)
            return True

        def wait() -> Timing:
            w0 = time.perf_counter_ns()
            try:
                ev = state.get("end")
                device_ns = None
                if ev is not None:
                    with self._lock:
                        self._state.make_current()
                        err = waits.wait(drv.cuEventSynchronize, drv.cuEventQuery, ev)
                        if int(err) != 0:
                            self._raise(f"kernel {bound.program.name!r} (cuEventSynchronize)",
                                        err)
                        if state.get("start") is not None:
                            ms = self._call(drv.cuEventElapsedTime, state["start"], ev)
                            device_ns = int(float(ms) * 1e6)
                        self._check_indirect_status()
            finally:
                release()
            w1 = time.perf_counter_ns()
            return Timing(wall_ns=w1 - t0, enqueue_ns=t1 - t0, wait_ns=w1 - w0,
                          device_ns=device_ns)

        pending = Pending(is_ready, wait)
        pending._bound = bound  # type: ignore[attr-defined]  # keeps buffers alive
        weakref.finalize(pending, release)
        return pending

    def _synchronize(self) -> None:
        # direct: the roundtrip's path; Ctrl-C may end the wait on the main thread (waits.py)
        drv = self._drv
        err = waits.wait(drv.cuStreamSynchronize, drv.cuStreamQuery, self._stream)
        if err:
            self._raise("cuStreamSynchronize", err)
        self._check_indirect_status()

    # ------------------------------------------------------------ pipelines (CUDA graphs)
    def _capture(self, body: Callable[[Any], None]) -> Any:
        """Capture what `body(stream)` enqueues on `stream` as an instantiated CUDA graph.

        Capture runs on a private stream in thread-local mode (caller holds the lock):
        launches that other threads make meanwhile on the backend's stream stay out of the
        graph, and nothing this thread does is blocked.
        """
        drv = self._drv
        if self._capture_stream is None:
            self._capture_stream = self._call(
                drv.cuStreamCreate, int(drv.CUstream_flags.CU_STREAM_NON_BLOCKING),
                what="cuStreamCreate")
        stream = self._capture_stream
        mode = drv.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_THREAD_LOCAL
        self._call(drv.cuStreamBeginCapture, stream, mode, what="cuStreamBeginCapture")
        try:
            body(stream)
        finally:
            graph = self._call(drv.cuStreamEndCapture, stream, what="cuStreamEndCapture")
        try:
            return self._call(drv.cuGraphInstantiate, graph, 0, what="cuGraphInstantiate")
        finally:
            drv.cuGraphDestroy(graph)

    def _body_exec(self, st: _GraphState, copies: int) -> Any:
        ex = st.execs.get(copies)
        if ex is None:
            def body(stream: Any) -> None:
                for _ in range(copies):
                    for rec in st.launches:
                        self._enqueue(rec, stream)

            ex = self._capture(body)
            st.execs[copies] = ex
        return ex

    @interrupt_safe
    def _record_pipeline(self, pipeline: Pipeline) -> None:
        self._check_open()
        with self._lock:
            st = _GraphState([self._ready(s) for s in pipeline.steps])
            st.max_copies = self._max_copies(st)
            self._body_exec(st, 1)
            self._graphs.append(st)
            pipeline.state = st
            weakref.finalize(pipeline, self._destroy_graphs, st)

    def _max_copies(self, st: _GraphState) -> int:
        cap = max(1, 4096 // max(1, len(st.launches)))
        p = 1
        while p * 2 <= min(cap, 256):
            p *= 2
        return p

    def _destroy_graphs(self, st: _GraphState) -> None:
        if st.destroyed:
            return
        st.destroyed = True
        if not self._state.usable:
            return
        drv = self._drv
        with contextlib.suppress(Exception):
            self._state.make_current()
            for ex in st.execs.values():
                drv.cuGraphExecDestroy(ex)
            for ex, pinned, _ in st.reads.values():
                drv.cuGraphExecDestroy(ex)
                for ptr, _n in pinned:
                    drv.cuMemFreeHost(ptr)
        st.execs.clear()
        st.reads.clear()

    def _read_exec(self, st: _GraphState, reads: list[ReadRange]) -> tuple[Any, list[tuple[int, int]]]:
        key = tuple((id(r.buffer), r.buffer.serial, r.offset, r.length) for r in reads)
        hit = st.reads.get(key)
        if hit is not None:
            return hit[0], hit[1]
        drv = self._drv
        pinned: list[tuple[int, int]] = []
        for r in reads:
            n = int(r.length or 0)
            ptr = 0
            if n:
                err, p = drv.cuMemAllocHost(n)
                if int(err) != 0:
                    self._raise("cuMemAllocHost", err, requested=n)
                ptr = int(p)
            pinned.append((ptr, n))

        def body(stream: Any) -> None:
            for r, (ptr, n) in zip(reads, pinned):
                if n:
                    b = r.buffer
                    assert isinstance(b, CudaBuffer)
                    self._call(drv.cuMemcpyDtoHAsync, ptr, b.ptr + r.offset, n, stream,
                               what="cuMemcpyDtoHAsync")

        ex = self._capture(body)
        if len(st.reads) >= 16:
            for old_ex, old_pinned, _ in st.reads.values():
                drv.cuGraphExecDestroy(old_ex)
                for ptr, _n in old_pinned:
                    if ptr:
                        drv.cuMemFreeHost(ptr)
            st.reads.clear()
        st.reads[key] = (ex, pinned, sum(n for _, n in pinned))
        return ex, pinned

    def _run_pipeline(self, pipeline: Pipeline, repeat: int, reads: list[ReadRange]) -> PipelineResult:
        # Pipeline.run checked the instance and the buffers under the lock it still holds.
        # Driver calls are made directly (not through _call) on this per-run path.
        st = pipeline.state
        if not isinstance(st, _GraphState) or st.destroyed:
            raise DispatchError(f"{self.id}: this pipeline's recording is gone; record it again")
        drv = self._drv
        stream = self._stream
        # device timing only when a step asked for it (Timing.device_ns is None otherwise,
        # as on wgpu): two event records and an elapsed-time query are three driver calls
        # a run, which the raw peer's cuGraphLaunch + cuStreamSynchronize does not make
        profiled = pipeline.profiled
        t0 = _perf_ns()
        with self._lock:
            # the launches (and their framework ordering) as one deferred section; Ctrl-C
            # may end the wait for them below (the work goes on; waits.py)
            with deferred_interrupts():
                if profiled:
                    if self._timing_events is None:
                        self._timing_events = (self._event(True), self._event(True))
                    ev0, ev1 = self._timing_events
                    (err,) = drv.cuEventRecord(ev0, stream)
                    if err:
                        self._raise("cuEventRecord", err)
                # framework ordering goes around the graph launches, never into a capture
                streams = interop.streams_of(pipeline.buffers()) if self._interop_active else ()
                if streams:
                    interop.wait_for(self, streams)
                remaining = repeat
                p = st.max_copies
                launches = 0
                while remaining:
                    while p > remaining:
                        p //= 2
                    ex = self._body_exec(st, p)
                    (err,) = drv.cuGraphLaunch(ex, stream)
                    if err:
                        self._raise("cuGraphLaunch", err)
                    launches += 1
                    remaining -= p
                pinned: list[tuple[int, int]] = []
                if reads:
                    rex, pinned = self._read_exec(st, reads)
                    self._call(drv.cuGraphLaunch, rex, stream, what="cuGraphLaunch")
                if streams:
                    interop.signal(self, streams)
            device_ns = None
            if profiled:
                (err,) = drv.cuEventRecord(ev1, stream)
                if err:
                    self._raise("cuEventRecord", err)
                t1 = _perf_ns()
                # the one host synchronisation
                err = waits.wait(drv.cuEventSynchronize, drv.cuEventQuery, ev1)
                if err:
                    self._raise("pipeline (cuEventSynchronize)", err)
                t2 = _perf_ns()
                err, ms = drv.cuEventElapsedTime(ev0, ev1)
                if err:
                    self._raise("cuEventElapsedTime", err)
                device_ns = int(float(ms) * 1e6)
            else:
                t1 = _perf_ns()
                # the one host synchronisation
                err = waits.wait(drv.cuStreamSynchronize, drv.cuStreamQuery, stream)
                if err:
                    self._raise("pipeline (cuStreamSynchronize)", err)
                t2 = _perf_ns()
            self._check_indirect_status()
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

    # ------------------------------------------------------------ lifecycle
    @interrupt_safe
    def _close(self) -> None:
        st = self._state
        drv = self._drv
        usable = st.usable
        if usable:
            with contextlib.suppress(Exception):
                st.make_current()
                drv.cuStreamSynchronize(self._stream)
        for g in self._graphs:
            self._destroy_graphs(g)
        self._graphs.clear()
        self._staging_bytes = _NO_STAGING  # never a view of freed memory
        page_locked.unregister_all(st)  # (the arrays outlive this instance: NumPy owns them)
        st.drain()  # the kept memory (the stream is still there to wait for)
        st.stream = None  # a late finalizer's free must not wait on the destroyed stream
        if usable:
            with contextlib.suppress(Exception):
                if self._staging[0]:
                    drv.cuMemFreeHost(self._staging[0])
                if self._indirect_status is not None:
                    drv.cuMemFreeHost(self._indirect_status[0])
                if self._timing_events:
                    for ev in self._timing_events:
                        drv.cuEventDestroy(ev)
                interop.destroy_events(self)
                drv.cuStreamDestroy(self._stream)
                if self._capture_stream is not None:
                    drv.cuStreamDestroy(self._capture_stream)
        self._staging = (0, 0)
        self._indirect_status = None  # (its words' view is never read after close)
        self._timing_events = None
        self._capture_stream = None
        st.closed = True
        if self._private_ctx:
            with contextlib.suppress(Exception):
                drv.cuCtxDestroy(st.ctx)
        elif usable:  # a dead context is left for the next instance to reset
            with contextlib.suppress(Exception):
                drv.cuDevicePrimaryCtxRelease(self._dev)

    def close(self) -> None:
        # modules are unloaded with the kernels; do it before the base clears the cache,
        # under the lock that launches hold from their check to their enqueue (so none
        # launches an unloaded kernel)
        with self._lock:
            if not self._closed and self._state.usable:
                self._closing = True
                with contextlib.suppress(Exception):
                    self._state.make_current()
                    self._drv.cuStreamSynchronize(self._stream)
                    for k in list(self._compiled.values()):
                        self._drv.cuModuleUnload(k.module)
                    self._unload_retired()
            super().close()

    # ------------------------------------------------------------ runtime services
    # What interop.py, managed.py, benchmarks and tests use of this instance: public, so
    # no module reaches into its private state.
    @property
    def stream_handle(self) -> int:
        """This instance's CUDA stream as an int handle."""
        return int(self._stream)

    @property
    def cu_stream(self) -> Any:
        """This instance's CUDA stream (a CUstream): all its work is ordered on it. (Not
        `stream`: that is BaseBackend.stream, the chunked host-data method.)"""
        return self._stream

    @property
    def ordinal(self) -> int:
        """The CUDA device ordinal this instance drives."""
        return self._ordinal

    @property
    def driver(self) -> Any:
        """The CUDA driver API module (cuda.bindings.driver)."""
        return self._drv

    @property
    def disk_cache(self) -> DiskCache:
        """This instance's on-disk cubin cache (native.py compiles library kernels into it)."""
        return self._disk

    @property
    def context_state(self) -> ContextState:
        """What finalizers of this instance's objects need (driver, context, usable)."""
        return self._state

    @property
    def lock(self) -> Any:
        """The instance's lock: hold it around work that must not interleave with launches
        recorded or ordered by another thread."""
        return self._lock

    def check_open(self) -> None:
        """Raise BackendUnavailable unless this instance is open and its context usable;
        makes the context current on this thread."""
        self._check_open()

    def driver_call(self, fn: Any, *args: Any, what: str | None = None) -> Any:
        """`fn(*args)` of the driver API, its result unwrapped; an error raises the matching
        vyre error (and a sticky one marks the context lost)."""
        return self._call(fn, *args, what=what)

    def driver_fail(self, what: str, err: Any, requested: int | None = None) -> None:
        """Raise the vyre error for driver status `err` of `what` (OutOfDeviceMemory when
        `requested` bytes could not be had)."""
        self._raise(what, err, requested)

    def adopt(self, buffer: BufferBase) -> None:
        """Count a buffer made outside allocate_device_buffer (borrowed, managed) as live."""
        with self._lock:
            self._live[id(buffer)] = buffer

    def device_pointer(self, buffer: BufferBase) -> int:
        assert isinstance(buffer, CudaBuffer)
        return buffer.ptr

    def launch_args(self, bound: BoundDispatch) -> tuple[Any, tuple[int, int, int],
                                                         tuple[int, int, int], int]:
        """(CUfunction, grid, block, kernel-params address) of a bound dispatch's packed
        launch: for benchmarks that call cuLaunchKernel on it themselves."""
        rec: _Launch = self._ready(bound)
        return (rec.function, rec.grid, rec.block, rec.params_ptr)




def _bump_epoch(wself: weakref.ref[CudaBackend]) -> None:
    me = wself()
    if me is not None:
        me._epoch = next_epoch()  # its prepared launches re-check the instance (and refuse)


if TYPE_CHECKING:  # mypy holds CudaBackend to the public protocol (tests check it at run time)
    def _satisfies_backend(b: CudaBackend) -> Backend:
        return b
