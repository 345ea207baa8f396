"""`transfer`: the explicit move of a buffer's bytes to another backend, local or remote.

Between two actors the bytes go through Ray's object store (the source actor's read becomes
an object the destination actor reads from, node to node, never through the driver), except
between two CUDA actors of one node: there they go device to device through CUDA IPC (the
source exports its buffer's handle once its earlier work is done, the destination copies
from it on its GPU). Between the driver's local backend and an actor they go through the
driver's memory. This module must never copy implicitly: only when called.
"""

from __future__ import annotations

from typing import Any

from vyre.buffer import BufferBase, check_label
from vyre.errors import BackendUnavailable, BufferOwnershipError
from vyre.interface import Backend
from vyre.transfers import REMOTE_TRANSFER
from vyre.transfers import transfer as local_transfer

from .handle import RemoteBuffer
from .remote import RemoteBackend


def transfer(buffer: Any, backend: Backend,
             label: str | None = None) -> Any:
    """Copy `buffer` (a RemoteBuffer or a local buffer) into a new buffer on `backend`.

    All or nothing: when reading the source or writing the destination fails (a dead source
    actor, a full device), the new buffer is freed before the error is raised."""
    if not isinstance(backend, Backend):
        raise BackendUnavailable(
            repr(backend)[:40], f"transfer needs a destination backend instance, got "
            f"{type(backend).__name__}; create one with vyre.get_backend() or "
            "vyre.distributed.spawn()")
    check_label(label, "transfer")
    if not isinstance(buffer, (RemoteBuffer, BufferBase)):
        raise BufferOwnershipError(
            f"{type(buffer).__name__} {buffer!r:.40} is not a vyre device buffer; transfer "
            "takes a buffer from allocate_device_buffer (of a local backend or a RemoteBackend)")
    name = label or buffer.label
    if isinstance(buffer, RemoteBuffer):
        src = _source(buffer)
        if isinstance(backend, RemoteBackend) and _same_node_cuda(src, backend):
            return _ipc_transfer(buffer, backend, name)
        if isinstance(backend, RemoteBackend):
            # the read is sent first: a dead or closed source, or a freed or forged handle,
            # fails here, before anything is allocated on the destination
            ref = src._ref(buffer)
            data_ref = src._send("read", ref, handles=[buffer]) if buffer.byte_len else None
            out = backend.allocate_device_buffer(buffer.byte_len, label=name)
            try:
                if data_ref is not None:
                    # the read's result stays in the object store; the destination fetches
                    # it (boxed in a list so that Ray hands over the reference, not the bytes)
                    backend._call("write_from", out.ref, [data_ref], buffer.describe(),
                                  src.timeout_s, what=f"transfer of {buffer.describe()}",
                                  handles=[out])
            except BaseException:
                out.free()
                raise
            return out
        data = src.read(buffer)
        return _filled(backend, buffer.byte_len, name, data)
    if isinstance(backend, RemoteBackend):
        owner = buffer.owner
        if not isinstance(owner, Backend):
            raise BufferOwnershipError(f"{buffer!r} has no vyre backend owner to read it from")
        return _filled(backend, buffer.byte_len, name, owner.read(buffer))
    return local_transfer(buffer, backend, label)


def _filled(backend: Backend, byte_len: int, label: str | None,
            data: Any) -> Any:
    """A new buffer on `backend` holding `data`, or nothing left behind on failure."""
    out = backend.allocate_device_buffer(byte_len, label=label)
    try:
        if data.nbytes:
            backend.write(out, data)
    except BaseException:
        out.free()
        raise
    return out


def _same_node_cuda(src: RemoteBackend, dst: RemoteBackend) -> bool:
    """Two CUDA actors of one node, in two processes: their device memory is reachable
    through CUDA IPC, so the bytes need not go through the object store."""
    return (src is not dst and src.kind == "cuda" and dst.kind == "cuda"
            and src.node_id == dst.node_id and src.pid != dst.pid)


def _source(buffer: RemoteBuffer) -> RemoteBackend:
    """The RemoteBackend that owns `buffer` (a handle whose owner is not one was made by
    hand: refused)."""
    owner = buffer.owner
    if not isinstance(owner, RemoteBackend):
        raise BufferOwnershipError(
            f"{buffer.describe()} is not owned by a RemoteBackend (made by hand?); use the "
            "handle allocate_device_buffer of vyre.distributed.spawn(...) returned")
    return owner


def _ipc_transfer(buffer: RemoteBuffer, backend: RemoteBackend, name: str | None) -> RemoteBuffer:
    """The source actor exports the buffer's IPC handle once its earlier work is done; the
    destination opens it, copies device to device and waits before it answers, so the
    source may be reused once this returns. All or nothing, like the object-store path."""
    src = _source(buffer)
    ref = src._ref(buffer)  # a dead, freed or forged source fails before any allocation
    handle = (src._call("ipc_export", ref, what=f"exporting {buffer.describe()}",
                        handles=[buffer]) if buffer.byte_len else b"")
    out = backend.allocate_device_buffer(buffer.byte_len, label=name)
    try:
        if buffer.byte_len:
            backend._call("ipc_copy_from", out.ref, handle, buffer.byte_len,
                          what=f"transfer of {buffer.describe()}", handles=[out])
    except BaseException:
        out.free()
        raise
    return out


if not REMOTE_TRANSFER:  # vyre.transfer routes remote buffers here
    REMOTE_TRANSFER.append(transfer)
