"""Host I/O of a backend instance: copies between host memory and its resident buffers,
checked, then issued through the allocator part.

`BaseBackend.write`, `write_many`, `read`, `read_many`, `read_into` and
`page_locked_array` are these functions over the instance: each upload or read is checked
whole (a live buffer of this instance, a writable one for a write, a range inside it, host
bytes or a dtype that fit) before any is issued, then re-checked and issued under the
instance's lock (a free from another thread comes wholly before or after). Reads are the
sync points where waiting vyre.print / vyre.assert_ logs come back (vyre.debug). Not the
host path (vyre.host_path: dispatches on host data, over the public surface). This module
must never talk to a device but through the allocator part, nor issue a copy it has not
checked.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Protocol

import numpy as np

from . import debug
from .binding import owned_buffer
from .buffer import BufferBase, as_index, check_range, check_usable, host_bytes
from .errors import BufferStateError, InvalidDispatch
from .host_path import iterable_of
from .hostarrays import host_destination
from .parts import Allocator, host_array
from .pipeline import checked_read, checked_span

#: (buffer, offset, bytes): a checked read's range
Span = tuple[BufferBase, int, int]


class HostIOBackend(debug.DebugBackend, Protocol):
    """What host I/O asks of the instance it serves (vyre.backend.BaseBackend, typed here
    by what is used so that this module never imports the base class): its lock, open
    check, allocator and the debug logs that reads bring back."""

    id: str
    _debug_logs: list[debug.PendingLog]

    @property
    def _memory(self) -> Allocator: ...

    def _check_open(self) -> None: ...

    def _drain_debug_logs(self) -> None: ...


class _WriteTo:
    """"write to <buffer>" for host_bytes' errors, made only if one is raised (describe()
    costs more than the rest of a small write's checks)."""

    __slots__ = ("buffer",)

    def __init__(self, buffer: BufferBase) -> None:
        self.buffer = buffer

    def __str__(self) -> str:
        return f"write to {self.buffer.describe()}"


def checked_write(backend: HostIOBackend, buffer: Any, data: Any, offset: Any
                  ) -> tuple[BufferBase, memoryview, int]:
    """One upload checked: a live, writable buffer of `backend`, host bytes that fit at
    `offset`."""
    buffer = owned_buffer(backend, buffer)
    off = offset if type(offset) is int else as_index(offset, "write offset")
    if buffer.readonly:
        raise BufferStateError(
            f"{buffer.describe()} was lent read-only by its producer; write into a "
            "writable array (e.g. a copy made by the framework) instead"
        )
    mv = host_bytes(data, _WriteTo(buffer))
    check_range(buffer, off, mv.nbytes)
    return buffer, mv, off


def checked_writes(backend: HostIOBackend, items: Any
                   ) -> list[tuple[BufferBase, memoryview, int]]:
    """`write_many`'s uploads, each checked (checked_write) before any is issued."""
    checked: list[tuple[BufferBase, memoryview, int]] = []
    for item in iterable_of(items, "write_many", "(buffer, data[, offset]) tuples"):
        if not isinstance(item, (tuple, list)) or len(item) not in (2, 3):
            raise InvalidDispatch(
                f"write_many takes (buffer, data) or (buffer, data, offset) tuples, got "
                f"{type(item).__name__} {item!r:.60}"
            )
        checked.append(checked_write(backend, item[0], item[1], item[2] if len(item) > 2 else 0))
    return checked


def write_checked(backend: HostIOBackend,
                  checked: list[tuple[BufferBase, memoryview, int]]) -> None:
    """Checked uploads (checked_write), issued in order under the lock."""
    with backend._lock:
        backend._check_open()
        for buffer, _, _ in checked:
            check_usable(buffer)  # not freed by another thread since validation
        write = backend._memory.write
        for buffer, mv, offset in checked:
            if mv.nbytes:
                write(buffer, mv, offset)


def checked_reads(backend: HostIOBackend, ranges: Iterable[Any]
                  ) -> tuple[list[Span], list[np.dtype]]:
    """`read_many`'s requests, each checked (checked_read): their spans and dtypes."""
    todo = [checked_read(backend, r) for r in iterable_of(
        ranges, "read_many", "buffers, ReadRanges or (buffer, offset, length, dtype) "
        "tuples")]
    return ([(rr.buffer, rr.offset, int(rr.length or 0)) for rr in todo],
            [rr.dtype for rr in todo])


def read_checked(backend: HostIOBackend, spans: list[Span],
                 dtypes: list[np.dtype]) -> list[np.ndarray]:
    """Checked reads (checked_span, element_dtype) in one batch under the lock; the debug
    logs waiting come back in the same batch."""
    with backend._lock:
        backend._check_open()
        for span in spans:
            check_usable(span[0])
        logs = backend._debug_logs
        if logs:  # debug dispatches' logs come back with this read (vyre.debug)
            backend._debug_logs = []
            spans = [*spans, *((p.log, 0, p.log.byte_len) for p in logs)]
        raw = backend._memory.read_batch(spans)
    if logs:
        n = len(raw) - len(logs)
        debug.finish(backend, logs, [host_array(r, np.dtype(np.uint32)) for r in raw[n:]])
        raw = raw[:n]
    return [host_array(data, dt) for data, dt in zip(raw, dtypes)]


def read_into(backend: HostIOBackend, buffer: Any, out: np.ndarray, offset: Any) -> np.ndarray:
    """`BaseBackend.read_into`: `out.nbytes` bytes at `offset` of `buffer` copied into the
    caller's array `out` (checked writable and contiguous), which is returned."""
    backend._check_open()
    dst = host_destination(out, "read_into")
    span = checked_span(backend, buffer, offset, dst.nbytes)
    with backend._lock:
        backend._check_open()
        check_usable(span[0])
        if span[2]:
            backend._memory.read_batch_into([span], [dst])
    if backend._debug_logs:
        backend._drain_debug_logs()
    return out


def page_locked_shape(shape: Any) -> tuple[int, ...]:
    """`page_locked_array`'s shape checked: an int or a tuple (or list) of ints >= 0."""
    dims = (shape,) if isinstance(shape, (int, np.integer)) else shape
    if isinstance(dims, list):
        dims = tuple(dims)
    if not isinstance(dims, tuple) or any(
            isinstance(d, bool) or not isinstance(d, (int, np.integer)) or d < 0
            for d in dims):
        raise InvalidDispatch(
            f"page_locked_array: shape must be an int or a tuple of ints >= 0, got {shape!r}")
    return tuple(int(d) for d in dims)
