"""The CUDA backend: one NVIDIA GPU as vyre's four parts behind the BaseBackend facade.

One instance drives one device (`cuda`, `cuda:1`) through its primary context and its own
non-blocking stream; everything it enqueues is ordered on that stream. The parts: the
device (device.py: context, stream, error mapping), the allocator (allocator.py), the
compiler (compiler.py: render.py's CUDA C compiled by nvrtc.py to a cubin for the device's
exact architecture, never PTX, cached in memory per (program, specialisation) and on
disk) and the queue (queue.py: launch records, pending work; graphs.py: pipelines as CUDA
graphs). This module builds them, probes the device's capabilities and publishes the
runtime services the helper modules, benchmarks and tests use.

A kernel fault poisons the CUDA context: the failing call raises DispatchError, the instance
refuses further work with BackendUnavailable, and a new instance (vyre.get_backend('cuda'))
resets the device's primary context and starts clean.

This module must never copy resident data through the host behind the caller's back, and
never loads PTX.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from vyre import features as F
from vyre.backend import BaseBackend, Capabilities
from vyre.binding import BoundDispatch
from vyre.buffer import BufferBase
from vyre.errors import BackendUnavailable, InvalidDispatch
from vyre.interface import Backend
from vyre.ir.nodes import Program

from . import driver as D
from . import managed
from .allocator import CudaAllocator
from .compiler import CudaCompiler, Kernel
from .device import ContextState, CudaDevice
from .device import CudaBuffer as CudaBuffer
from .nvrtc import DiskCache, arch_for, nvrtc_version, supported_archs
from .options import DEFAULT_OPTIONS, CudaOptions
from .queue import CudaQueue, LaunchRecord
from .render import SUBGROUP_SIZE

DEFAULT_COARSEN = 4  # measured on H100: saxpy 2.50 TB/s vs 2.38 at 1 (8 was slower)
# the default for a straight-line kernel that calls an exact function (more work per
# invocation; CudaCompiler.specialisation): maps
# of sin / log / tan on the H200 2,657 / 2,951 / 1,714 GB/s at 4, 2,869 / 3,203 / 1,774
# at 8, 1,926 / 1,726 / 1,262 at 16 (docs/perf-notes.md, session 27)
DEFAULT_CALLS_COARSEN = 8
ENV_COARSEN = "VYRE_CUDA_COARSEN"
MAX_COARSEN = 64


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


def _coarsen_setting(coarsen: int | None, device: int | str | None) -> int | None:
    """Invocations per CUDA thread the user chose: `coarsen`, else $VYRE_CUDA_COARSEN,
    else None (the defaults); an int from 1 to MAX_COARSEN (anything else is refused
    naming where it came from)."""
    given: Any = coarsen
    where = "coarsen"
    if coarsen is None:
        raw = os.environ.get(ENV_COARSEN)
        if raw is None:
            return None
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


def probe_capabilities(device: CudaDevice) -> Capabilities:
    """What `device` can do under this NVRTC (which must target its architecture)."""
    drv, dev = device.driver, device.dev
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
            device.id,
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
        "ordinal": device.ordinal,
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
    caps = Capabilities(backend=device.id, kind="cuda", device=name,
                        features=frozenset(feats), limits=limits, details=details)
    return managed.extend_caps(caps, drv, dev)


class CudaBackend(BaseBackend):
    """vyre on one NVIDIA GPU; see the module docstring."""

    kind = "cuda"
    _device: CudaDevice
    _memory: CudaAllocator
    _compiler: CudaCompiler
    _queue: CudaQueue

    def __init__(self, device: int | str | None = None, cache_dir: str | None = None,
                 coarsen: int | None = None, options: CudaOptions | None = None) -> None:
        ordinal = _parse_ordinal(device)
        if options is not None and not isinstance(options, CudaOptions):
            raise InvalidDispatch(
                f"options must be a vyre.backends.cuda.CudaOptions, got "
                f"{type(options).__name__}; e.g. CudaBackend(0, options=CudaOptions(...))")
        # a factor the user chose holds for every kernel; the default is per kind of kernel
        chosen = _coarsen_setting(coarsen, device)
        dev = CudaDevice(ordinal)
        dev.caps = probe_capabilities(dev)
        memory = CudaAllocator(dev)
        # the printer's debug / measurement switches (options.py): fixed for this instance,
        # passed to every generate (and, as BaseBackend.options, in every compile-cache key)
        compiler = CudaCompiler(dev, dev.caps.details["arch"], DiskCache(cache_dir),
                                chosen or DEFAULT_COARSEN, options or DEFAULT_OPTIONS,
                                chosen or DEFAULT_CALLS_COARSEN)
        super().__init__(dev, memory, compiler, CudaQueue(dev, memory))

    # ------------------------------------------------------------ compile
    @property
    def arch(self) -> str:
        return str(self._compiler.arch)

    @property
    def coarsen(self) -> int:
        """Invocations per CUDA thread for barrier-free programs with large grids."""
        return self._compiler.coarsen

    @property
    def coarsen_min_invocations(self) -> int:
        """The smallest grid (in invocations) that runs the coarsened kernel."""
        return self._compiler.coarsen_min_invocations

    @coarsen_min_invocations.setter
    def coarsen_min_invocations(self, n: int) -> None:
        self._compiler.coarsen_min_invocations = n

    def compile(self, program: Program) -> Kernel:
        """Compile and load `program` for this device (cached in memory and on disk): the
        kernel with one element per invocation, which every dispatch below
        `coarsen_min_invocations` runs. A larger grid runs a coarsened variant (`coarsen`
        elements per invocation), compiled at its first such dispatch and cached the same
        way; compile() does not build it, because most programs never see such a grid and
        it costs NVRTC about 1.5x the plain kernel."""
        kernel: Kernel = super().compile(program)
        return kernel

    def from_dlpack(self, tensor: Any, *, stream: Any = "auto",
                    label: str | None = None) -> BufferBase:
        """Borrow a PyTorch / CuPy / JAX (any DLPack or CUDA Array Interface) device array
        as a buffer of this backend, without copying.

        The buffer keeps `tensor` alive and never frees its memory. The producer's pending
        work is ordered before vyre's at import (DLPack stream protocol); with `stream` (the
        framework's stream: an int handle or a stream object; "auto" = torch's / cupy's
        current stream, None = none) every later vyre use of the buffer is ordered after
        that stream's work and that stream after vyre's, with events on the GPU.
        """
        return super().from_dlpack(tensor, stream=stream, label=label)

    # ------------------------------------------------------------ runtime services
    # What interop.py, managed.py, benchmarks and tests use of this instance: public, so
    # no module reaches into its private state (most are the device part's).
    @property
    def stream_handle(self) -> int:
        """This instance's CUDA stream as an int handle."""
        return int(self._device.cu_stream)

    @property
    def cu_stream(self) -> Any:
        """This instance's CUDA stream (a CUstream): all its work is ordered on it. (Not
        `stream`: that is BaseBackend.stream, the chunked host-data method.)"""
        return self._device.cu_stream

    @property
    def ordinal(self) -> int:
        """The CUDA device ordinal this instance drives."""
        return self._device.ordinal

    @property
    def driver(self) -> Any:
        """The CUDA driver API module (cuda.bindings.driver)."""
        return self._device.driver

    @property
    def disk_cache(self) -> DiskCache:
        """This instance's on-disk cubin cache (native.py compiles library kernels into it)."""
        return self._compiler.disk

    @property
    def context_state(self) -> ContextState:
        """What finalizers of this instance's objects need (driver, context, usable)."""
        return self._device.context_state

    @property
    def lock(self) -> Any:
        """The instance's lock: hold it around work that must not interleave with launches
        recorded or ordered by another thread."""
        return self._lock

    @property
    def interop_events(self) -> dict[int, Any]:
        """Framework stream -> the event that orders vyre's stream with it (interop.py)."""
        return self._device.interop_events

    @property
    def interop_active(self) -> bool:
        """Whether some buffer of this instance is shared with a framework stream (set by
        interop.py; from then on every launch looks at its buffers' streams)."""
        return self._device.interop_active

    @interop_active.setter
    def interop_active(self, value: bool) -> None:
        self._device.interop_active = value

    def check_open(self) -> None:
        """Raise BackendUnavailable unless this instance is open and its context usable;
        makes the context current on this thread."""
        self._check_open()

    def driver_call(self, fn: Any, *args: Any, what: str | None = None) -> Any:
        """`fn(*args)` of the driver API, its result unwrapped; an error raises the matching
        vyre error (and a sticky one marks the context lost)."""
        return self._device.driver_call(fn, *args, what=what)

    def driver_fail(self, what: str, err: Any, requested: int | None = None) -> None:
        """Raise the vyre error for driver status `err` of `what` (OutOfDeviceMemory when
        `requested` bytes could not be had)."""
        self._device.driver_fail(what, err, requested)

    def adopt(self, buffer: BufferBase) -> None:
        """Count a buffer made outside allocate_device_buffer (borrowed, managed) as live."""
        self._adopt(buffer)

    def device_pointer(self, buffer: BufferBase) -> int:
        assert isinstance(buffer, CudaBuffer)
        return buffer.ptr

    def memory_info(self) -> tuple[int, int]:
        """(free, total) device bytes, from cuMemGetInfo."""
        return self._device.memory_info()

    def launch_args(self, bound: BoundDispatch) -> tuple[Any, tuple[int, int, int],
                                                         tuple[int, int, int], int]:
        """(CUfunction, grid, block, kernel-params address) of a bound dispatch's packed
        launch: for benchmarks that call cuLaunchKernel on it themselves."""
        rec: LaunchRecord = self._ready(bound)
        return (rec.function, rec.grid, rec.block, rec.params_ptr)


if TYPE_CHECKING:  # mypy holds CudaBackend to the public protocol (tests check it at run time)
    def _satisfies_backend(b: CudaBackend) -> Backend:
        return b
