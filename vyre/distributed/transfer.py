"""`transfer`: the explicit move of a buffer's bytes to another backend, local or remote.

Between two actors the bytes go through Ray's object store (the source actor's read becomes
an object the destination actor reads from, node to node, never through the driver);
between the driver's local backend and an actor they go through the driver's memory. A
device-to-device copy (same node, one CUDA context) would replace the object store hop when
both handles report the same `node_id` and a peer-capable device; that path is not built
yet. This module must never copy implicitly: only when called.
"""

from __future__ import annotations

from typing import Any

import vyre
from vyre.backend import BaseBackend
from vyre.buffer import BufferBase
from vyre.errors import BufferOwnershipError

from .handle import RemoteBuffer
from .remote import RemoteBackend


def transfer(buffer: Any, backend: RemoteBackend | BaseBackend,
             label: str | None = None) -> Any:
    """Copy `buffer` (a RemoteBuffer or a local buffer) into a new buffer on `backend`."""
    name = label or buffer.label
    if isinstance(buffer, RemoteBuffer):
        src = buffer.owner
        if isinstance(backend, RemoteBackend):
            out = backend.allocate_device_buffer(buffer.byte_len, label=name)
            if buffer.byte_len:
                # the read's result stays in the object store; the destination fetches it
                # (boxed in a list so that Ray hands over the reference, not the bytes)
                data_ref = src._send("read", src._ref(buffer), handles=[buffer])
                backend._call("write_from", out.ref, [data_ref], buffer.describe(),
                              src.timeout_s, what=f"transfer of {buffer.describe()}",
                              handles=[out])
            return out
        data = src.read(buffer)
        local = backend.allocate_device_buffer(buffer.byte_len, label=name)
        if data.nbytes:
            backend.write(local, data)
        return local
    if isinstance(backend, RemoteBackend):
        owner = getattr(buffer, "owner", None)
        if not isinstance(buffer, BufferBase) or not isinstance(owner, BaseBackend):
            raise BufferOwnershipError(f"{buffer!r} has no vyre backend owner to read it from")
        data = owner.read(buffer)
        out = backend.allocate_device_buffer(buffer.byte_len, label=name)
        if data.nbytes:
            backend.write(out, data)
        return out
    return vyre.transfer(buffer, backend, label)
