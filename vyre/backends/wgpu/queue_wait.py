"""How the host waits for a wgpu device: for its queue to finish, and for a staging buffer
to map.

wgpu-native's blocking poll (`wgpuDevicePoll` with wait=true, wgpu-py's `_poll_wait`) sleeps
in the driver until the queue's fence signals; on NVIDIA's Vulkan driver that wake-up costs
tens of microseconds. wgpu-py's `map_async(...).sync_wait()` adds two thread hand-offs on
top (a poll thread is woken to poll, and then wakes the caller). So this module asks the
device itself, without blocking, handing its core back to the scheduler between asks, and
blocks only once the work has outlasted `SPIN_NS`: a long kernel costs at most that much
CPU time in asking. On a CPU adapter (lavapipe) the device's work runs on the host's own
cores, so asking again and again only takes a core from it: there every wait blocks after
its first question.
H100 (NVIDIA Vulkan 580), one small dispatch then a wait: 108 us with the blocking poll,
74-81 us asking; docs/perf-notes.md has the numbers and the commands.

It maps only buffers the backend owns (staging and timestamp read-back buffers), through
wgpu-native directly, and leaves them unmapped again; wgpu-py never sees them mapped.
A wait on the main thread outside a deferred-interrupt section sleeps between asks instead
of blocking in the driver once the spin is over, so Ctrl-C ends it (see drain).
This module must never return before the work asked about has finished (unless
interrupted), never spin without a bound, and never leave a buffer mapped.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from vyre.interrupts import interruptible_here

#: How long a wait asks without blocking before it blocks (ns). Short work (the round trip
#: of a small dispatch, a small read-back) is done well inside it; long work pays at most
#: this much asking, then the blocking wait's wake-up, which it then hardly notices.
SPIN_NS = 200_000
#: Blocking polls after which a map that has still not been answered is an error (each
#: waits for every submission; one is always enough for a buffer the queue is done with).
_BLOCKING_MAP_POLLS = 4

_yield = getattr(os, "sched_yield", None) or (lambda: time.sleep(0))
_MIN_SLEEP_NS = 20_000  # the shortest sleep between asks of an interruptible wait (~its
# granularity: before 4x this has been waited, an interruptible wait asks between yields)
_MAX_SLEEP_NS = 10_000_000  # the longest: Ctrl-C is answered within this


class _MapAnswer:
    """Where the map callback leaves its status and message."""

    __slots__ = ("message", "status")

    def __init__(self) -> None:
        self.status: int | None = None
        self.message = ""


class QueueWait:
    """Waits on one device through wgpu-native's `wgpuDevicePoll` (wgpu-py 0.32's own
    `_poll` / `_poll_wait` make the same call, and ignore its answer).

    Only the low byte of the poll's answer means anything: wgpu.h declares a 32-bit
    `WGPUBool`, but wgpu-native returns a one-byte Rust `bool`, so the upper bytes are
    whatever the register held (0xdfc5be00 is "not empty" on lavapipe). Read whole, "is the
    queue empty" is nearly always true."""

    def __init__(self, device: Any, spins: bool) -> None:
        """`spins`: ask without blocking for up to SPIN_NS before blocking (False on a CPU
        adapter, see the module docstring)."""
        from wgpu.backends.wgpu_native._api import libf
        from wgpu.backends.wgpu_native._ffi import ffi, lib

        self._device = device
        self.spins = spins
        self._ffi = ffi
        self._poll = libf.wgpuDevicePoll
        self._null = ffi.NULL
        self._map_async = libf.wgpuBufferMapAsync
        self._mapped_range = libf.wgpuBufferGetConstMappedRange
        self._unmap = libf.wgpuBufferUnmap
        self._read_mode = lib.WGPUMapMode_Read
        self._success = lib.WGPUMapAsyncStatus_Success

        @ffi.callback("void(WGPUMapAsyncStatus, WGPUStringView, void *, void *)")
        def on_mapped(status: Any, message: Any, answer: Any, _unused: Any) -> None:
            out: _MapAnswer = ffi.from_handle(answer)
            out.status = int(status)
            if message.data != ffi.NULL and status != lib.WGPUMapAsyncStatus_Success:
                n = message.length
                raw = (ffi.string(message.data) if n == ffi.cast("size_t", -1)
                       else ffi.unpack(message.data, n))
                out.message = raw.decode("utf-8", "replace")

        self._on_mapped = on_mapped  # (kept alive as long as the device)
        self._callback_info = ffi.new("WGPUBufferMapCallbackInfo *")
        self._callback_info.mode = lib.WGPUCallbackMode_AllowProcessEvents
        self._callback_info.callback = on_mapped
        self._unanswered: list[Any] = []  # handles of maps that failed before their answer

    def empty(self) -> bool:
        """Whether every submission has finished (one non-blocking poll, which also runs
        the callbacks of the work that did)."""
        internal = self._device._internal
        return not internal or bool(self._poll(internal, False, self._null) & 0xFF)

    def drain(self) -> None:
        """Return once every submission has finished (see the module docstring)."""
        poll, null = self._poll, self._null
        internal = self._device._internal
        if not internal or poll(internal, False, null) & 0xFF:
            return
        start = time.perf_counter_ns()
        deadline = start + (SPIN_NS if self.spins else 0)
        while time.perf_counter_ns() < deadline:
            _yield()
            if poll(internal, False, null) & 0xFF:
                return
        if not interruptible_here():
            poll(internal, True, null)
            return
        # The blocking poll cannot be interrupted: Ctrl-C would wait for the work (a huge
        # grid runs for minutes). On the main thread, where the interrupt would be raised
        # right away, sleep between asks instead: a sleep returns to Python for a signal.
        # Each sleep is a sixteenth of the time waited so far, so a wait ends at most ~6%
        # (plus one sleep's granularity) after its work, and a long wait asks rarely.
        while not poll(internal, False, null) & 0xFF:
            waited = time.perf_counter_ns() - start
            if waited < _MIN_SLEEP_NS * 4:  # a sleep's granularity would dominate so far
                _yield()
                continue
            time.sleep(min(waited >> 4, _MAX_SLEEP_NS) / 1e9)

    def read_mapped(self, buffer: Any, size: int, pieces: list[tuple[int, int]],
                    into: Sequence[np.ndarray | None] | None = None) -> list[np.ndarray]:
        """The (offset, length) `pieces` of `buffer` (MAP_READ, owned by the caller,
        unmapped), each copied once out of the mapping into a new uint8 array (or into the
        uint8 array of `into` beside it, which is returned), once every submission that
        writes the buffer has finished; maps [0, size) and unmaps it again. Raises
        RuntimeError with wgpu-native's message if the map fails."""
        ffi, poll, null = self._ffi, self._poll, self._null
        answer = _MapAnswer()
        handle = ffi.new_handle(answer)
        info = self._callback_info
        info.userdata1 = handle
        mapped = buffer._internal
        internal = self._device._internal
        try:
            self._map_async(mapped, self._read_mode, 0, size, info[0])
            deadline = time.perf_counter_ns() + (SPIN_NS if self.spins else 0)
            blocking = 0
            while answer.status is None:
                if time.perf_counter_ns() < deadline:
                    _yield()
                    poll(internal, False, null)
                elif blocking < _BLOCKING_MAP_POLLS:
                    poll(internal, True, null)
                    blocking += 1
                else:
                    raise RuntimeError("wgpu-native never answered a map of a read-back "
                                       "buffer whose work had finished")
        except BaseException:
            if answer.status is None:  # its callback may still come: keep what it is handed
                self._unanswered.append(handle)
            raise
        if answer.status != self._success:
            raise RuntimeError(f"could not map a read-back buffer (status {answer.status}): "
                               f"{answer.message or 'no message'}")
        try:
            ptr = self._mapped_range(mapped, 0, size)
            if ptr == null:
                raise RuntimeError(f"wgpu-native gave no mapped range for {size} bytes of a "
                                   "mapped read-back buffer")
            base = ffi.cast("char *", ptr)
            out = []
            for i, (off, n) in enumerate(pieces):
                given = None if into is None else into[i]
                piece = np.empty(n, np.uint8) if given is None else given
                ffi.memmove(piece, base + off, n)
                out.append(piece)
            return out
        finally:
            self._unmap(mapped)
