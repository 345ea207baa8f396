"""CUDA IPC between processes of one node: a buffer's memory handle exported by the
process that owns it, opened by another that copies from it device to device
(`vyre.distributed.transfer` between two CUDA actors on one node).

The exporter waits for its stream first, so the handle names memory its earlier work has
finished writing; the importer copies on its own stream and waits for that copy before it
closes the handle, so the exporter may reuse the memory once the import returns. This
module must never keep another process's memory open after a call returns.
"""

from __future__ import annotations

import ctypes
from typing import Any

from vyre.buffer import BufferBase
from vyre.errors import InvalidDispatch

HANDLE_BYTES = 64


def export_handle(backend: Any, buffer: BufferBase) -> bytes:
    """The IPC handle of `buffer` (a live CUDA buffer of `backend`, allocated by it), after
    the work already enqueued on `backend` is done."""
    drv = backend.driver
    with backend.lock:
        backend.check_open()
        if not buffer.byte_len:
            return b""
        if getattr(buffer, "kind", "device") != "device":
            raise InvalidDispatch(
                f"{buffer.describe()} is not memory this backend allocated with cuMemAlloc "
                "(borrowed through DLPack, or managed), so it has no IPC handle; copy it into "
                "a buffer from allocate_device_buffer first")
        backend.driver_call(drv.cuStreamSynchronize, backend.cu_stream,
                            what="cuStreamSynchronize")
        # another process may map it from now on: freed for real, never kept for reuse
        buffer.recyclable[0] = False  # type: ignore[attr-defined]
        handle = backend.driver_call(drv.cuIpcGetMemHandle, backend.device_pointer(buffer),
                                     what="cuIpcGetMemHandle")
        # the struct's bytes through its address: cuda-bindings 13 does not expose the
        # `reserved` field on every version
        return ctypes.string_at(handle.getPtr(), HANDLE_BYTES)


def copy_from_handle(backend: Any, dst: BufferBase, handle: bytes, nbytes: int) -> None:
    """Copy `nbytes` bytes of the memory another process exported as `handle` into `dst`
    (a live buffer of `backend`), and wait for the copy."""
    if len(handle) != HANDLE_BYTES or nbytes < 0 or nbytes > dst.byte_len:
        raise InvalidDispatch(
            f"an IPC copy needs a {HANDLE_BYTES}-byte handle and at most {dst.byte_len} bytes; "
            f"got {len(handle)} bytes of handle and {nbytes} bytes to copy")
    if not nbytes:
        return
    drv = backend.driver
    ipc = drv.CUipcMemHandle()
    ctypes.memmove(ipc.getPtr(), handle, HANDLE_BYTES)
    with backend.lock:
        backend.check_open()
        flags = int(drv.CUipcMem_flags.CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS)
        src = backend.driver_call(drv.cuIpcOpenMemHandle, ipc, flags, what="cuIpcOpenMemHandle")
        try:
            backend.driver_call(drv.cuMemcpyDtoDAsync, backend.device_pointer(dst), src, nbytes,
                                backend.cu_stream, what=f"cuMemcpyDtoDAsync of {nbytes} bytes")
            backend.driver_call(drv.cuStreamSynchronize, backend.cu_stream,
                                what="cuStreamSynchronize")
        finally:
            drv.cuIpcCloseMemHandle(src)
