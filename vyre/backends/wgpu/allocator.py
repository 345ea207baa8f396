"""The wgpu allocator: storage buffers, writes through the queue, reads through one
mappable staging buffer.

A buffer's size is rounded up to 4 bytes (at least 8); unaligned writes patch the edge
words. Reads copy every range into the staging buffer in one submission and map it once;
the status words of submitted work that nobody has checked yet come back in the same map,
and a condition a shader flagged raises before any data is returned. A buffer dropped
without free() is destroyed by the next allocate, free or synchronize, under the lock
(never from its finalizer, which may run on any thread mid-submit). This module must never
submit a dispatch.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import Any

import numpy as np

from vyre.backend import HostBytes
from vyre.buffer import BufferBase
from vyre.errors import BackendError
from vyre.interrupts import interrupt_safe
from vyre.parts import Allocator

from .bindings import BindGroups
from .device import Status, WgpuBuffer, WgpuDevice, align_down, align_up

NO_BYTES = np.empty(0, np.uint8)


class WgpuAllocator(Allocator):
    """Storage buffers of one WebGPU device (see the module docstring)."""

    device: WgpuDevice

    def __init__(self, device: WgpuDevice, bindings: BindGroups) -> None:
        super().__init__(device)
        self.bindings = bindings  # a freed buffer's shared bind groups go with it
        # (serial, device buffer) of buffers dropped without free(), appended by their
        # finalizers and destroyed under the lock by the next allocate, free or synchronize
        self.dropped: list[tuple[int, Any]] = []
        self._staging: Any = None

    @interrupt_safe
    def allocate(self, byte_len: int, label: str | None) -> WgpuBuffer:
        if self.dropped:
            self.destroy_dropped()
        size = max(8, align_up(byte_len))
        u = self.device.usage
        try:
            gpu = self.device.gpu.create_buffer(
                label=label or "",
                size=size,
                usage=u.STORAGE | u.COPY_SRC | u.COPY_DST | u.INDIRECT,
            )
        except Exception as exc:
            raise self.device.error(f"allocating {size} bytes", exc, size) from None
        return WgpuBuffer(self.backend, byte_len, label, gpu, self.dropped)

    @interrupt_safe
    def free(self, buffer: BufferBase) -> None:
        assert isinstance(buffer, WgpuBuffer)
        buffer.on_drop.detach()
        self.bindings.forget(buffer.serial)
        if self.dropped:
            self.destroy_dropped()
        if self.device.lost is not None:
            return  # the memory went with the device; destroying it again can only fail
        try:
            buffer.gpu.destroy()
        except Exception as exc:
            raise self.device.error("freeing a buffer", exc) from None

    def destroy_dropped(self) -> None:
        """Destroy the device buffers of buffers dropped without free() (caller holds the
        lock). Nothing can submit them again: the buffer objects are gone, their launch
        cache entries went with them, and their shared bind groups go here; work already
        submitted keeps them until it finishes (wgpu defers the release)."""
        while self.dropped:
            serial, gpu = self.dropped.pop()
            self.bindings.forget(serial)
            if self.device.lost is None:
                with contextlib.suppress(Exception):  # (a finalizer's leftovers: best effort)
                    gpu.destroy()

    @interrupt_safe
    def write(self, buffer: BufferBase, data: memoryview, offset: int) -> None:
        assert isinstance(buffer, WgpuBuffer)
        n = data.nbytes
        end = offset + n
        a0, a1 = align_down(offset), align_up(end)
        try:
            if a0 == offset and a1 == end:
                self.device.queue.write_buffer(buffer.gpu, offset, data)
                return
            # queue.write_buffer needs 4-byte aligned offset and size: read the edge words
            # (ordered after earlier work), patch them, write the whole aligned span.
            span = bytearray(a1 - a0)
            edges = [a0] if offset != a0 else []
            if end != a1 and (a1 - 4) not in edges:
                edges.append(a1 - 4)
            words = self.read_raw([(buffer, e, 4) for e in edges])
            for e, w in zip(edges, words):
                span[e - a0 : e - a0 + 4] = w.tobytes()
            span[offset - a0 : offset - a0 + n] = data
            self.device.queue.write_buffer(buffer.gpu, a0, span)
        except BackendError:
            raise
        except Exception as exc:
            raise self.device.error(f"writing {n} bytes to {buffer.describe()}", exc, n) from None

    def read(self, buffer: BufferBase, offset: int, length: int) -> HostBytes:
        return self.read_batch([(buffer, offset, length)])[0]

    @interrupt_safe
    def read_batch(self, ranges: list[tuple[BufferBase, int, int]],
                    into: list[np.ndarray] | None = None) -> list[HostBytes]:
        """The bytes of `ranges` (see _read_raw), after the status of any unchecked
        dispatch: a loop cut short or a fault it flagged raises here."""
        try:
            if self.device.unchecked:  # the status words come back with the data: one map
                status = self.device.take_unchecked()
                raw = self.read_raw(ranges, status, into)
                self.device.raise_flagged(status, raw[: len(status)])
                return list(raw[len(status) :])
            return list(self.read_raw(ranges, None, into))
        except BackendError:
            raise
        except Exception as exc:
            raise self.device.error("reading buffers back", exc) from None

    def read_batch_into(self, ranges: list[tuple[BufferBase, int, int]],
                         outs: list[np.ndarray]) -> None:
        self.read_batch(ranges, outs)

    def staging_buffer(self, size: int) -> Any:
        size = max(size, 256)
        if self._staging is None or self._staging.size < size:
            if self._staging is not None:
                self._staging.destroy()
            cap = 1 << (size - 1).bit_length()
            u = self.device.usage
            self._staging = self.device.gpu.create_buffer(
                label="vyre-staging", size=cap, usage=u.MAP_READ | u.COPY_DST
            )
        return self._staging

    def plan_reads(
        self, ranges: list[tuple[BufferBase, int, int]], start: int = 0
    ) -> tuple[list[tuple[Any, int, int, int]], list[tuple[int, int]], int]:
        """The copies into the staging buffer from byte `start` on: (gpu buffer, aligned
        src offset, aligned size, staging offset) per range; where each range's own bytes
        then lie in the staging buffer, (offset, length); the total size."""
        plan, pieces = [], []
        off = start
        for buf, o, n in ranges:
            assert isinstance(buf, WgpuBuffer)
            a0, a1 = align_down(o), align_up(o + n)
            plan.append((buf.gpu, a0, a1 - a0, off))
            pieces.append((off + (o - a0), n))
            off += a1 - a0
        return plan, pieces, off

    def read_raw(
        self, ranges: list[tuple[BufferBase, int, int]], status: list[Status] | None = None,
        into: list[np.ndarray] | None = None,
    ) -> list[np.ndarray]:
        """The bytes of `ranges`, in one submission and one map, each copied once out of
        the mapping into a new uint8 array (or into the uint8 array of `into` beside it);
        with `status`, the 16 bytes of each of those status buffers come first."""
        status = status or []
        outs: list[np.ndarray | None] = [None] * len(ranges) if into is None else list(into)
        ranges_nz = [(b, o, n) for b, o, n in ranges if n]
        if not ranges_nz and not status:
            return [NO_BYTES.copy() if d is None else d for d in outs]
        plan, pieces, total = self.plan_reads(ranges_nz, 16 * len(status))
        staging = self.staging_buffer(total)
        enc = self.device.gpu.create_command_encoder()
        for i, st in enumerate(status):
            enc.copy_buffer_to_buffer(st.buffer, 0, staging, 16 * i, 16)
        for gpu, a0, size, soff in plan:
            enc.copy_buffer_to_buffer(gpu, a0, staging, soff, size)
        self.device.queue.submit([enc.finish()])
        dests = [None] * len(status) + [d for d, (_b, _o, n) in zip(outs, ranges) if n]
        got = iter(self.map_staging(
            staging, total, [(16 * i, 16) for i in range(len(status))] + pieces, dests))
        out = [next(got) for _ in status]
        out += [next(got) if n else (NO_BYTES.copy() if d is None else d)
                for d, (_b, _o, n) in zip(outs, ranges)]
        return out

    def map_staging(self, staging: Any, total: int, pieces: list[tuple[int, int]],
                     into: Sequence[np.ndarray | None] | None = None) -> list[np.ndarray]:
        return self.device.waiter.read_mapped(staging, max(4, align_up(total)), pieces, into)

    def check_status(self) -> None:
        """Before any result of submitted work can be seen (wait, read, synchronize, a
        pipeline's reads): raise DispatchError if a shader flagged a condition that makes
        its results invalid (the driver's loop budget ran out; an indirect grid over the
        limit). Flags are cleared, so the backend stays usable."""
        if self.device.unchecked:
            status = self.device.take_unchecked()
            self.device.raise_flagged(status, self.read_raw([], status))

    @interrupt_safe
    def close(self) -> None:
        """The buffers dropped without free(), then the staging buffer."""
        self.destroy_dropped()
        if self._staging is not None:
            with contextlib.suppress(Exception):
                self._staging.destroy()
            self._staging = None
