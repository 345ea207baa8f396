"""The CUDA allocator: device memory, host copies on the instance's stream, and the other
ways memory comes and goes (managed, page-locked, borrowed through DLPack, peer copies).

Freed memory is kept for reuse (ContextState's cache, device.py) and handed to the next
allocation of the same rounded size. Reads go through one pinned staging buffer up to
STAGING_LIMIT (one copy each into the array handed out), larger ones straight into their
own array. Work on a buffer shared with a framework stream is ordered with that stream by
events (interop.py). This module must never copy resident data through the host behind
the caller's back, nor free memory a framework or a host view still uses.
"""

from __future__ import annotations

import contextlib
import ctypes
from typing import Any

import numpy as np

from vyre.backend import BaseBackend, HostBytes
from vyre.buffer import BufferBase
from vyre.interrupts import interrupt_safe
from vyre.parts import Allocator

from . import interop, managed, page_locked, peer
from .device import CudaBuffer, CudaDevice, cached_capacity

STAGING_LIMIT = 64 << 20  # reads up to this size go through one pinned staging buffer
_NO_STAGING = np.empty(0, np.uint8)


class CudaAllocator(Allocator):
    """Device memory of one CUDA instance (see the module docstring)."""

    device: CudaDevice

    def __init__(self, device: CudaDevice) -> None:
        super().__init__(device)
        self._staging: tuple[int, int] = (0, 0)  # (pinned ptr, size)
        self._staging_bytes = _NO_STAGING  # the pinned buffer as uint8, while it lives
        self._memory_type = device.driver.CUpointer_attribute.CU_POINTER_ATTRIBUTE_MEMORY_TYPE

    @interrupt_safe
    def allocate(self, byte_len: int, label: str | None) -> BufferBase:
        if not byte_len:
            return CudaBuffer(self.backend, 0, label, 0)
        dev = self.device
        state, drv = dev.context_state, dev.driver
        capacity = cached_capacity(byte_len)
        ptr = state.reuse(capacity)
        if not ptr:
            err, dptr = drv.cuMemAlloc(capacity)
            if int(err) == int(drv.CUresult.CUDA_ERROR_OUT_OF_MEMORY) and state.cached_bytes:
                state.drain()  # the kept memory first, then the device's last word
                err, dptr = drv.cuMemAlloc(capacity)
            if int(err) != 0:
                dev.driver_fail(f"cuMemAlloc({byte_len})", err, requested=byte_len)
            ptr = int(dptr)
        return CudaBuffer(self.backend, byte_len, label, ptr, capacity)

    def release_cached(self) -> int:
        """Free the device memory kept from freed buffers for reuse (as
        torch.cuda.empty_cache does); the bytes given back to the driver."""
        return self.device.context_state.drain()

    @interrupt_safe
    def free(self, buffer: BufferBase) -> None:
        assert isinstance(buffer, CudaBuffer)
        interop.release(buffer)  # deferred while a framework or a host view still uses it

    @interrupt_safe
    def write(self, buffer: BufferBase, data: memoryview, offset: int) -> None:
        assert isinstance(buffer, CudaBuffer)
        dev = self.device
        streams = buffer.ext_streams
        if streams:
            interop.wait_for(dev, streams)
        drv = dev.driver
        host = np.frombuffer(data, np.uint8).ctypes.data
        dev.driver_call(drv.cuMemcpyHtoDAsync, buffer.ptr + offset, host, data.nbytes,
                        dev.cu_stream, what="cuMemcpyHtoDAsync")
        # From ordinary (pageable) memory the driver has copied the bytes out before the call
        # returns. From memory CUDA knows (page-locked by cuMemHostAlloc or
        # cuMemHostRegister, e.g. torch's pin_memory; managed) the DMA runs on after it, so
        # a caller reusing the array at once would change what arrives: write() promises
        # the bytes as they were at the call, so wait for the copy there.
        err, _ = drv.cuPointerGetAttribute(self._memory_type, host)
        if int(err) == 0:
            dev.driver_call(drv.cuStreamSynchronize, dev.cu_stream, what="cuStreamSynchronize")
        if streams:
            interop.signal(dev, streams)

    @interrupt_safe
    def read(self, buffer: BufferBase, offset: int, length: int) -> HostBytes:
        return self.read_batch([(buffer, offset, length)])[0]

    def _staging_ptr(self, size: int) -> int:
        ptr, have = self._staging
        if have >= size:
            return ptr
        drv = self.device.driver
        if ptr:
            self._staging_bytes = _NO_STAGING  # never a view of freed memory
            drv.cuMemFreeHost(ptr)
            self._staging = (0, 0)
        new = max(size, 1 << 20)
        err, p = drv.cuMemAllocHost(new)
        if int(err) != 0:
            self.device.driver_fail("cuMemAllocHost", err, requested=new)
        self._staging = (int(p), new)
        # slicing and copying this view is one copy in ~0.6 us, where np.empty plus
        # ctypes.memmove through `.ctypes.data` costs ~3 us of Python per small read
        self._staging_bytes = np.ctypeslib.as_array((ctypes.c_uint8 * new).from_address(int(p)))
        return int(p)

    @interrupt_safe
    def read_batch(self, ranges: list[tuple[BufferBase, int, int]]) -> list[HostBytes]:
        """All copies on the stream (after earlier work), then one synchronisation."""
        total = sum(n for _, _, n in ranges)
        if not 0 < total <= STAGING_LIMIT:  # each straight into its own new array
            return self._copy_out(ranges, [np.empty(n, np.uint8) for _, _, n in ranges])
        self._order_reads(ranges)
        dev = self.device
        drv, stream, call = dev.driver, dev.cu_stream, dev.driver_call
        base = self._staging_ptr(total)
        pos = 0
        spans = []
        for b, o, n in ranges:
            assert isinstance(b, CudaBuffer)
            if n:
                call(drv.cuMemcpyDtoHAsync, base + pos, b.ptr + o, n, stream,
                     what="cuMemcpyDtoHAsync")
            spans.append((pos, n))
            pos += n
        call(drv.cuStreamSynchronize, stream, what="cuStreamSynchronize")
        dev.check_indirect_status()
        staged = self._staging_bytes
        # one copy each, into the array read_many hands out
        return [staged[pos:pos + n].copy() for pos, n in spans]

    @interrupt_safe
    def read_batch_into(self, ranges: list[tuple[BufferBase, int, int]],
                        outs: list[np.ndarray]) -> None:
        self._copy_out(ranges, outs)

    def _copy_out(self, ranges: list[tuple[BufferBase, int, int]],
                  outs: list[np.ndarray]) -> list[HostBytes]:
        """Each range copied straight into the host array beside it (a pageable one: the
        driver stages it, and the call returns once the copy is done; a page-locked one:
        DMA), then one synchronisation; returns `outs`."""
        self._order_reads(ranges)
        dev = self.device
        drv, stream, call = dev.driver, dev.cu_stream, dev.driver_call
        for (b, o, n), dst in zip(ranges, outs, strict=True):
            assert isinstance(b, CudaBuffer)
            if n:  # (cuda-bindings takes the array's own buffer: no ctypes pointer needed)
                call(drv.cuMemcpyDtoHAsync, dst, b.ptr + o, n, stream, what="cuMemcpyDtoHAsync")
        call(drv.cuStreamSynchronize, stream, what="cuStreamSynchronize")
        dev.check_indirect_status()
        return list(outs)

    def _order_reads(self, ranges: list[tuple[BufferBase, int, int]]) -> None:
        """Reads come after the work of framework streams sharing their buffers."""
        if self.device.interop_active:
            interop.wait_for(self.device, interop.streams_of(b for b, _, _ in ranges))

    # ------------------------------------------------------------ other memory
    def import_dlpack(self, tensor: Any, stream: Any, label: str | None) -> BufferBase:
        return interop.import_dlpack(self.backend, tensor, stream, label)

    def export_dlpack(self, buffer: BufferBase, dtype: Any, shape: Any, stream: Any,
                      max_version: Any, dl_device: Any, copy: Any) -> Any:
        return interop.export_dlpack(self.backend, buffer, dtype, shape, stream, max_version,
                                     dl_device, copy)

    def dlpack_device(self, buffer: BufferBase) -> tuple[int, int]:
        return interop.dlpack_device(self.backend, buffer)

    def page_locked_array(self, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
        return page_locked.allocate(self.device, shape, dtype)

    def allocate_managed(self, byte_len: int, label: str | None) -> BufferBase:
        return managed.allocate(self.backend, byte_len, label)

    def host_view(self, buffer: BufferBase, dtype: Any) -> np.ndarray:
        return managed.host_view(self.backend, buffer, dtype)

    def _reaches(self, other: object) -> bool:
        """Whether `other` is a CUDA instance of this process's driver (so a copy between
        the two can run on the devices, peer.py)."""
        return (isinstance(other, BaseBackend) and isinstance(other._memory, CudaAllocator)
                and other._memory.device.driver is self.device.driver)

    def copy_from(self, src: BufferBase, src_offset: int, dst: BufferBase, dst_offset: int,
                  nbytes: int) -> bool:
        owner = src.owner
        if not self._reaches(owner):
            return False
        peer.copy_batch([(owner, src, src_offset, self.backend, dst, dst_offset, nbytes)])
        return True

    def copy_batch(self, copies: list[Any]) -> bool:
        owners = list({id(b): b for c in copies for b in (c.src_owner, c.dst_owner)}.values())
        if not all(self._reaches(b) for b in owners):
            return False  # through the host, one by one
        peer.copy_batch([(c.src_owner, c.src, c.src_offset, c.dst_owner, c.dst,
                          c.dst_offset, c.nbytes) for c in copies])
        return True

    def close(self) -> None:
        """Page-locked arrays back to ordinary memory, the kept memory freed (the stream is
        still there to wait for), the staging buffer freed."""
        st = self.device.context_state
        self._staging_bytes = _NO_STAGING  # never a view of freed memory
        page_locked.unregister_all(st)  # (the arrays outlive this instance: NumPy owns them)
        st.drain()
        if st.usable and self._staging[0]:
            with contextlib.suppress(Exception):
                self.device.driver.cuMemFreeHost(self._staging[0])
        self._staging = (0, 0)
