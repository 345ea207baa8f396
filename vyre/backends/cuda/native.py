"""Hand-written CUDA C kernels of the program library, launched on a CudaBackend's stream.

Some library programs have a CUDA form no Program can express (the int8 tensor-core matrix
multiply's `mma.sync`, vyre.programs.matmul_i8): the library writes its CUDA C, and this
module compiles it with NVRTC for the instance's exact architecture (through the instance's
disk cache, like generated kernels), loads it once per instance and launches it on the
instance's stream, ordered with every other dispatch, with framework streams of shared
buffers (interop.py) and with free() (a free waits for the stream). The caller states what
the kernel reads and writes; the buffers are checked like a dispatch's (owned by this
instance, not freed), and the kernel must produce the same bits as the library's Program.

This module must never launch a kernel on buffers it has not checked, and never load PTX.
"""

from __future__ import annotations

import ctypes
import struct
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from vyre.binding import validate_buffer_ownership

from . import interop
from .nvrtc import cache_key, compile_options, compile_source

# one module per (instance, source); unloaded with the instance's context
_LOADED: weakref.WeakKeyDictionary[Any, dict[str, Any]] = weakref.WeakKeyDictionary()


@dataclass(frozen=True)
class NativeKernel:
    """CUDA C `source` defining `extern "C" __global__ void {name}(...)`; launched with
    `block` threads per block (and its static shared memory only)."""

    name: str
    source: str
    block: tuple[int, int, int]


def _function(backend: Any, kernel: NativeKernel) -> Any:
    """The loaded CUfunction of `kernel` on `backend` (lock held): compiled through the
    instance's disk cache on first use."""
    arch = backend.arch
    key = cache_key(kernel.source, arch)
    loaded = _LOADED.setdefault(backend, {})
    fn = loaded.get(key)
    if fn is not None:
        return fn
    disk = backend.disk_cache
    cubin = disk.get(key)
    if cubin is None:
        cubin = compile_source(kernel.source, arch, compile_options(), f"{kernel.name}.cu")
        disk.put(key, cubin)
    drv = backend.driver
    module = backend.driver_call(drv.cuModuleLoadData, cubin, what="cuModuleLoadData")
    fn = backend.driver_call(drv.cuModuleGetFunction, module, kernel.name.encode(),
                             what="cuModuleGetFunction")
    loaded[key] = fn
    return fn


def launch(backend: Any, kernel: NativeKernel, grid: tuple[int, int, int],
           buffers: Sequence[Any], scalars: Sequence[tuple[str, int]]) -> None:
    """Enqueue `kernel` over `grid` blocks with arguments: one device pointer per buffer
    (in order), then `scalars` as (struct code, value), e.g. ("I", n) for an unsigned.
    Returns at once; the work is ordered on the instance's stream."""
    with backend.lock:
        backend.check_open()
        validate_buffer_ownership(backend, list(buffers))
        fn = _function(backend, kernel)
        values = [("Q", backend.device_pointer(b)) for b in buffers] + list(scalars)
        blocks = [ctypes.create_string_buffer(struct.pack("<" + code, v)) for code, v in values]
        ptrs = (ctypes.c_void_p * max(len(blocks), 1))(
            *[ctypes.addressof(b) for b in blocks])
        streams = interop.streams_of(buffers) if backend.interop_active else ()
        if streams:  # framework ordering around the launch (see interop.py)
            interop.wait_for(backend, streams)
        drv = backend.driver
        backend.driver_call(drv.cuLaunchKernel, fn, *grid, *kernel.block, 0,
                            backend.cu_stream, ctypes.addressof(ptrs), 0,
                            what=f"cuLaunchKernel ({kernel.name})")
        if streams:
            interop.signal(backend, streams)


__all__ = ["NativeKernel", "launch"]
