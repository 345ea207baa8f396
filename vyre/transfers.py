"""Explicit copies between buffers of any two backends: `vyre.copy` (a byte range into an
existing buffer), `vyre.copy_many` (several at once) and `vyre.transfer` (a whole buffer
to another backend).

Device to device where the destination reaches the source's device directly (the
destination's allocator, `vyre.parts.Allocator.copy_from`: two CUDA instances of this
process copy peer to peer on the GPUs, ordered by events, the host never waiting);
otherwise through the host (the source's `read` of the range, then the destination's
`write`).

This module must never move bytes implicitly: every copy is one the caller asked for.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from .backend import BaseBackend
from .binding import owned_buffer
from .buffer import BufferBase, DeviceBuffer, check_label
from .errors import BackendUnavailable, BufferOwnershipError, InvalidDispatch
from .interface import Backend


def _owner(buffer: Any, role: str) -> BaseBackend:
    owner = getattr(buffer, "owner", None)
    if not isinstance(owner, BaseBackend):
        raise BufferOwnershipError(
            f"{role} {type(buffer).__name__} {buffer!r:.40} is not a buffer of a vyre "
            "backend; pass one from allocate_device_buffer (host data goes in with write)")
    if owner.closed:
        owner._check_open()  # raises BackendUnavailable: the instance was closed
    return owner


def _index(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0:
        raise InvalidDispatch(f"copy: {what} must be an int >= 0, got {value!r}")
    return int(value)


@dataclass(frozen=True)
class Copy:
    """One checked copy: `nbytes` bytes of `src` (a live buffer of `src_owner`) at
    `src_offset` into `dst` (of `dst_owner`) at `dst_offset`, nbytes > 0."""

    src_owner: BaseBackend
    src: BufferBase
    src_offset: int
    dst_owner: BaseBackend
    dst: BufferBase
    dst_offset: int
    nbytes: int


def _checked(src: Any, dst: Any, src_offset: Any, dst_offset: Any, nbytes: Any) -> Copy | None:
    """The copy checked (None: nothing to copy), or the error that names the fix."""
    s_owner, d_owner = _owner(src, "source"), _owner(dst, "destination")
    s_buf, d_buf = owned_buffer(s_owner, src), owned_buffer(d_owner, dst)
    s_off, d_off = _index(src_offset, "src_offset"), _index(dst_offset, "dst_offset")
    if s_off > s_buf.byte_len:
        raise InvalidDispatch(f"copy: src_offset {s_off} is past the source's end "
                              f"({s_buf.byte_len} bytes)")
    n = s_buf.byte_len - s_off if nbytes is None else _index(nbytes, "nbytes")
    if s_off + n > s_buf.byte_len:
        raise InvalidDispatch(
            f"copy: bytes [{s_off}, {s_off + n}) are not all in the source "
            f"({s_buf.byte_len} bytes); pass a smaller nbytes or src_offset")
    if d_off + n > d_buf.byte_len:
        raise InvalidDispatch(
            f"copy: {n} bytes at dst_offset {d_off} do not fit the destination "
            f"({d_buf.byte_len} bytes); allocate it with at least {d_off + n} bytes")
    if s_buf is d_buf and s_off < d_off + n and d_off < s_off + n and n:
        raise InvalidDispatch(
            f"copy: the ranges [{s_off}, {s_off + n}) and [{d_off}, {d_off + n}) of one "
            "buffer overlap; copy through a second buffer")
    return Copy(s_owner, s_buf, s_off, d_owner, d_buf, d_off, n) if n else None


def _run(c: Copy) -> None:
    if c.dst_owner._memory.copy_from(c.src, c.src_offset, c.dst, c.dst_offset, c.nbytes):
        return
    data = c.src_owner.read(c.src, c.src_offset, c.nbytes)
    c.dst_owner.write(c.dst, data, c.dst_offset)


def copy(src: DeviceBuffer, dst: DeviceBuffer, *, src_offset: int = 0, dst_offset: int = 0,
         nbytes: int | None = None) -> None:
    """Copy `nbytes` bytes (default: the rest of `src` from `src_offset`) from `src` at
    `src_offset` into `dst` at `dst_offset`; the buffers may belong to any backends (the
    same one included; the ranges of one buffer must not overlap). Ordered after the work
    already enqueued on both backends and before their later work."""
    c = _checked(src, dst, src_offset, dst_offset, nbytes)
    if c is not None:
        _run(c)


def copy_many(copies: Iterable[tuple[Any, ...]]) -> None:
    """Several copies, each `(src, dst)` or `(src, dst, src_offset, dst_offset, nbytes)`
    as `copy` takes them, all checked before any starts. Between devices that reach each
    other they run concurrently (e.g. every shard of an all-gather at once) where one
    `copy` after another would wait for each other's source."""
    checked: list[Copy] = []
    for i, item in enumerate(copies):
        if not isinstance(item, tuple) or len(item) not in (2, 5):
            raise InvalidDispatch(
                f"copy_many: item {i} must be (src, dst) or (src, dst, src_offset, "
                f"dst_offset, nbytes), got {type(item).__name__}")
        src, dst, *rest = item
        so, do, n = rest if rest else (0, 0, None)
        c = _checked(src, dst, so, do, n)
        if c is not None:
            checked.append(c)
    if not checked:
        return
    if checked[0].dst_owner._memory.copy_batch(checked):
        return
    for c in checked:
        _run(c)


#: How `transfer` moves a buffer to or from a backend of another process: set by
#: vyre.distributed when it is imported (every remote handle or backend comes from it, so it
#: is set before one can be passed here); this module never imports vyre.distributed.
REMOTE_TRANSFER: list[Callable[[Any, Any, str | None], Any]] = []


def _remote(obj: object) -> bool:
    """Whether `obj` is a vyre.distributed handle or backend (told by its class's module)."""
    return type(obj).__module__.startswith("vyre.distributed.")


def transfer(buffer: DeviceBuffer, backend: Backend, label: str | None = None, *,
             out: DeviceBuffer | None = None) -> DeviceBuffer:
    """Copy a whole buffer explicitly to another backend: a new buffer there, or `out` (a
    buffer of `backend` at least as long, made once and reused: no allocation per copy).
    Device to device where `backend` reaches the source's device (module docstring)."""
    if _remote(backend) or _remote(buffer):
        if out is not None:  # never dropped silently: a new buffer would be made instead
            raise InvalidDispatch(
                "transfer: out= takes a buffer of a backend of this process; a transfer to or "
                "from a Ray actor makes a new buffer (leave out=None)")
        if not REMOTE_TRANSFER:  # (only if vyre.distributed's import failed half-way)
            raise BackendUnavailable(
                "ray", "transfer to or from a Ray actor needs vyre.distributed, which did "
                "not finish importing; import vyre.distributed and look at its error")
        return REMOTE_TRANSFER[0](buffer, backend, label)
    if not isinstance(backend, Backend):
        raise BackendUnavailable(
            repr(backend)[:40], f"transfer needs a destination backend instance, got "
            f"{type(backend).__name__}; create one with vyre.get_backend()",
        )
    check_label(label, "transfer")
    owner = _owner(buffer, "transfer's")
    checked = owned_buffer(owner, buffer)  # raises for a freed, stale or foreign buffer
    if out is None:
        dest = backend.allocate_device_buffer(checked.byte_len, label=label or checked.label)
        try:
            copy(checked, dest)
        except BaseException:
            backend.free(dest)
            raise
        return dest
    dest = owned_buffer(backend, out)
    if dest is checked:
        raise InvalidDispatch("transfer: out is the source buffer itself; pass another "
                              "buffer of the destination backend, or none for a new one")
    if dest.byte_len < checked.byte_len:
        raise InvalidDispatch(
            f"transfer: out holds {dest.byte_len} bytes, the source {checked.byte_len}; "
            f"allocate out with at least {checked.byte_len} bytes")
    copy(checked, dest)
    return dest
