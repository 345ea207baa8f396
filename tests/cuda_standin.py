"""A stand-in for the CUDA driver API (`cuda.bindings.driver`) for hosts without a GPU.

Every call the CUDA backend and the bench's raw peer make answers success at once, with
the real enum and handle types; nothing runs and device memory is never touched (reads
come back as zeros). Used by tests of the backend's host-side logic (tests/
test_cuda_host_path.py) and by scripts/cuda_host_overhead.py, which times vyre's own
Python around the driver. `calls` records (name, thread id, args) of the calls named in
`record` (none by default: the launch path is timed with it).

This module must never be imported where a real driver is in use: `install` replaces the
driver vyre loads for the rest of the process (or until `uninstall`).
"""

from __future__ import annotations

import contextlib
import ctypes
import threading
from collections.abc import Iterator
from typing import Any

from cuda.bindings import driver as real

OK = real.CUresult.CUDA_SUCCESS
OK1 = (OK,)


def _launch(*args: Any) -> tuple[Any]:
    return OK1


class StandInDriver:
    """Success for every call; enums and handle types are the real ones."""

    def __init__(self, record: frozenset[str] = frozenset(), devices: int = 1,
                 strict_contexts: bool = False) -> None:
        self.record = record
        self.devices = devices
        self.calls: list[tuple[str, int, tuple[Any, ...]]] = []
        self._next_ptr = 0x10000
        self._host: dict[int, Any] = {}
        self.registered: dict[int, int] = {}  # cuMemHostRegister'd host ptr -> bytes
        self._current = threading.local()  # the calling thread's current context, as int
        # strict_contexts: like the real driver, objects belong to the context current when
        # they were made, and a launch of another context's function is refused
        self.strict = strict_contexts
        self.context_of: dict[int, int] = {}  # module, function, stream, device ptr -> ctx
        # a plain function, not a method: the call costs the same wherever it is made from
        launch = self._strict_launch if strict_contexts else _launch
        self.cuLaunchKernel = self._recorded("cuLaunchKernel", launch)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("CU"):
            return getattr(real, name)
        fn = getattr(type(self), "_" + name, None)
        if fn is None:
            raise AttributeError(f"the stand-in driver has no {name}")
        bound = self._recorded(name, fn.__get__(self))
        setattr(self, name, bound)  # looked up like a module attribute from now on
        return bound

    def _recorded(self, name: str, fn: Any) -> Any:
        if name not in self.record:
            return fn
        calls = self.calls

        def call(*args: Any) -> Any:
            calls.append((name, threading.get_ident(), args))
            return fn(*args)
        return call

    def calls_of(self, name: str) -> list[tuple[int, tuple[Any, ...]]]:
        return [(tid, args) for n, tid, args in self.calls if n == name]

    def _ptr(self, n: int) -> int:
        p = self._next_ptr
        self._next_ptr += (n + 255) // 256 * 256 + 256
        return p

    # every call below answers (CUDA_SUCCESS, result...)
    def _cuInit(self, flags: int) -> tuple[Any]:
        return OK1

    def _cuDeviceGetCount(self) -> tuple[Any, int]:
        return OK, self.devices

    def _cuDeviceGet(self, i: int) -> tuple[Any, Any]:
        return OK, real.CUdevice(i)

    def _cuDevicePrimaryCtxRetain(self, dev: Any) -> tuple[Any, Any]:
        return OK, real.CUcontext(0x1000 + 0x100 * int(dev))

    def _cuCtxSetCurrent(self, ctx: Any) -> tuple[Any]:
        self._current.ctx = int(ctx) if ctx is not None else 0
        return OK1

    def _cuCtxGetCurrent(self) -> tuple[Any, Any]:
        return OK, real.CUcontext(getattr(self._current, "ctx", 0))

    def current_context(self) -> int:
        """The calling thread's current context (0: none)."""
        return int(getattr(self._current, "ctx", 0))

    def _made(self, handle: Any) -> Any:
        """`handle` belongs to the current context (strict mode's bookkeeping)."""
        if self.strict:
            self.context_of[int(handle)] = self.current_context()
        return handle

    def _strict_launch(self, f: Any, *args: Any) -> tuple[Any]:
        cur = self.current_context()
        if not cur:
            return (real.CUresult.CUDA_ERROR_INVALID_CONTEXT,)
        stream = args[7]
        if self.context_of.get(int(f)) != cur or (
                int(stream) and self.context_of.get(int(stream), cur) != cur):
            return (real.CUresult.CUDA_ERROR_INVALID_HANDLE,)
        return OK1

    def _cuDeviceGetName(self, n: int, dev: Any) -> tuple[Any, bytes]:
        return OK, b"NVIDIA H100 80GB HBM3 (stand-in)\0"

    def _cuDeviceGetAttribute(self, attr: Any, dev: Any) -> tuple[Any, int]:
        table = {"COMPUTE_CAPABILITY_MAJOR": 9, "COMPUTE_CAPABILITY_MINOR": 0,
                 "MAX_THREADS_PER_BLOCK": 1024, "MAX_SHARED_MEMORY_PER_BLOCK": 49152,
                 "MAX_GRID_DIM_X": 2**31 - 1, "MAX_GRID_DIM_Y": 65535,
                 "MAX_GRID_DIM_Z": 65535, "MAX_BLOCK_DIM_X": 1024, "MAX_BLOCK_DIM_Y": 1024,
                 "MAX_BLOCK_DIM_Z": 64, "MULTIPROCESSOR_COUNT": 132, "WARP_SIZE": 32,
                 "ATTRIBUTE_MANAGED_MEMORY": 1}
        return OK, next((v for k, v in table.items() if attr.name.endswith(k)), 0)

    def _cuDeviceTotalMem(self, dev: Any) -> tuple[Any, int]:
        return OK, 80 << 30

    def _cuDriverGetVersion(self) -> tuple[Any, int]:
        return OK, 13000

    def _cuMemGetInfo(self) -> tuple[Any, int, int]:
        return OK, 79 << 30, 80 << 30

    def _cuStreamCreate(self, flags: int) -> tuple[Any, Any]:
        return OK, self._made(real.CUstream(self._ptr(1)))

    def _cuEventCreate(self, flags: int) -> tuple[Any, Any]:
        return OK, real.CUevent(self._ptr(1))

    def _cuEventElapsedTime(self, start: Any, end: Any) -> tuple[Any, float]:
        return OK, 0.001

    def _cuEventQuery(self, ev: Any) -> tuple[Any]:
        return OK1

    def _cuMemAlloc(self, n: int) -> tuple[Any, Any]:
        return OK, self._made(real.CUdeviceptr(self._ptr(n)))

    def _cuMemAllocManaged(self, n: int, flags: int) -> tuple[Any, Any]:
        return OK, real.CUdeviceptr(self._ptr(n))

    def _cuMemAllocHost(self, n: int) -> tuple[Any, int]:
        buf = (ctypes.c_char * n)()  # real host memory: the backend reads it
        addr = ctypes.addressof(buf)
        self._host[addr] = buf
        return OK, addr

    def _cuPointerGetAttribute(self, attr: Any, p: Any) -> tuple[Any, Any]:
        """Page-locked memory (from _cuMemAllocHost or registered) is known (host memory
        type); any other host pointer is not, as pageable memory is not to the real driver."""
        addr = int(p)
        spans = [(base, ctypes.sizeof(buf)) for base, buf in self._host.items()]
        for base, n in [*spans, *self.registered.items()]:
            if base <= addr < base + n:
                return OK, real.CUmemorytype.CU_MEMORYTYPE_HOST
        return real.CUresult.CUDA_ERROR_INVALID_VALUE, 0

    def _cuMemHostRegister(self, p: int, n: int, flags: int) -> tuple[Any]:
        if int(p) in self.registered:
            return (real.CUresult.CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED,)
        self.registered[int(p)] = n
        return OK1

    def _cuMemHostUnregister(self, p: int) -> tuple[Any]:
        if self.registered.pop(int(p), None) is None:
            return (real.CUresult.CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED,)
        return OK1

    def _cuMemFreeHost(self, p: Any) -> tuple[Any]:
        self._host.pop(int(p), None)
        return OK1

    def _cuModuleLoadData(self, image: bytes) -> tuple[Any, Any]:
        return OK, self._made(real.CUmodule(self._ptr(1)))

    def _cuModuleGetFunction(self, m: Any, name: bytes) -> tuple[Any, Any]:
        f = real.CUfunction(self._ptr(1))
        if self.strict:
            self.context_of[int(f)] = self.context_of.get(int(m), 0)
        return OK, f

    def _cuStreamEndCapture(self, stream: Any) -> tuple[Any, Any]:
        return OK, real.CUgraph(self._ptr(1))

    def _cuGraphInstantiate(self, graph: Any, flags: int) -> tuple[Any, Any]:
        return OK, real.CUgraphExec(self._ptr(1))

    def _cuIpcGetMemHandle(self, ptr: Any) -> tuple[Any, Any]:
        """The handle's 64 bytes name the pointer (the real driver's are opaque)."""
        handle = real.CUipcMemHandle()
        ctypes.memmove(handle.getPtr(), int(ptr).to_bytes(8, "little") + b"ipc" * 18 + b"!",
                       64)
        return OK, handle

    def _cuIpcOpenMemHandle(self, handle: Any, flags: int) -> tuple[Any, Any]:
        raw = ctypes.string_at(handle.getPtr(), 64)
        return OK, real.CUdeviceptr(int.from_bytes(raw[:8], "little") + 0x1000000)

    def _cuDeviceCanAccessPeer(self, dev: Any, peer: Any) -> tuple[Any, int]:
        return OK, 1

    def _ok(self, *args: Any) -> tuple[Any]:
        return OK1

    _cuCtxSynchronize = _cuDevicePrimaryCtxRelease = _ok
    _cuStreamDestroy = _cuStreamSynchronize = _cuStreamWaitEvent = _ok
    _cuEventRecord = _cuEventSynchronize = _cuEventDestroy = _ok
    _cuMemFree = _cuMemcpyHtoD = _cuMemcpyHtoDAsync = _cuMemcpyDtoH = _ok
    _cuMemcpyDtoHAsync = _cuModuleUnload = _cuMemcpyPeerAsync = _cuCtxEnablePeerAccess = _ok
    _cuIpcCloseMemHandle = _cuMemcpyDtoDAsync = _cuStreamQuery = _ok
    _cuStreamBeginCapture = _cuGraphLaunch = _cuGraphDestroy = _cuGraphExecDestroy = _ok


def install(record: frozenset[str] = frozenset(), devices: int = 1,
            strict_contexts: bool = False) -> StandInDriver:
    """Make vyre's CUDA backend use a new stand-in driver; returns it."""
    from vyre.backends.cuda import driver as D

    fake = StandInDriver(record, devices, strict_contexts)
    D._driver = fake
    return fake


@contextlib.contextmanager
def installed(record: frozenset[str] = frozenset(), devices: int = 1,
              strict_contexts: bool = False) -> Iterator[StandInDriver]:
    """`install` for a `with` block (a test fixture's body): the driver vyre loaded before
    comes back at the end."""
    from vyre.backends.cuda import driver as D

    before = D._driver
    try:
        yield install(record, devices, strict_contexts)
    finally:
        D._driver = before


@contextlib.contextmanager
def backend(cache_dir: str) -> Iterator[Any]:
    """A CudaBackend on the installed stand-in driver (compiled kernels cached in
    `cache_dir`), closed at the end of the block."""
    from vyre.backends.cuda.runtime import CudaBackend

    b = CudaBackend(0, cache_dir=cache_dir)
    try:
        yield b
    finally:
        b.close()


def uninstall() -> None:
    from vyre.backends.cuda import driver as D

    D._driver = None
