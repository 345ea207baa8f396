"""Driver-side handles: a buffer that lives in a backend actor's process.

A `RemoteBuffer` names where its memory is (ray actor name and instance, the backend
instance there, its context generation, node and GPU ids) and follows vyre's DeviceBuffer
protocol, so ownership checks, `free()` and `describe()` read as they do locally. The
location fields are what a future device-to-device path needs (two handles on one node and
one CUDA context can be copied peer to peer without the object store). This module must
never talk to Ray or hold device memory.
"""

from __future__ import annotations

from typing import Any, Protocol

from vyre.buffer import FixedFields

from .protocol import BufferRef


class ActorOwner(Protocol):
    """What a handle asks of the RemoteBackend that made it (remote.py imports this module,
    so the handle names its owner by this protocol instead of importing it)."""

    id: str
    actor_name: str
    instance: str
    backend_id: str
    node_id: str
    gpu_ids: tuple[str, ...]

    def free(self, buffer: Any) -> None: ...


class RemoteBuffer(FixedFields):
    """A device buffer owned by a backend actor (see the module docstring). It pickles
    (Ray hands it to tasks and actors of the same driver), but its fields are fixed: the
    actor trusts none of them without the token it made at allocation."""

    FIXED_FIELDS = frozenset({"_owner", "key", "token", "byte_len", "generation", "backend_id",
                              "actor", "instance", "device", "node_id", "gpu_ids"})

    def __init__(self, owner: ActorOwner, key: int, token: str, byte_len: int,
                 label: str | None, generation: int) -> None:
        self._owner = owner
        self.key = key
        self.token = token  # 128 random bits from the actor: what proves this handle
        self.byte_len = byte_len
        self.label = label
        self.generation = generation  # the actor's backend context generation at allocation
        self.backend_id = owner.id
        self.actor = owner.actor_name
        self.instance = owner.instance
        self.device = owner.backend_id  # the backend instance inside the actor, e.g. cuda:0
        self.node_id = owner.node_id
        self.gpu_ids = owner.gpu_ids
        self._freed = False

    @property
    def owner(self) -> ActorOwner:
        return self._owner

    @property
    def freed(self) -> bool:
        return self._freed

    @property
    def ref(self) -> BufferRef:
        """What a message carries for this buffer."""
        return BufferRef(self.actor, self.instance, self.key, self.token, self.label)

    def describe(self) -> str:
        name = repr(self.label) if self.label else f"#{self.key}"
        return (f"buffer {name} ({self.byte_len} bytes on ray actor {self.actor!r}, "
                f"{self.device}, instance {self.instance})")

    def free(self) -> None:
        """Release the memory in the actor now. Freeing twice is harmless."""
        if not self._freed:
            self._owner.free(self)

    def __enter__(self) -> RemoteBuffer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.free()

    def __repr__(self) -> str:
        return f"<RemoteBuffer {self.describe()}{' freed' if self._freed else ''}>"
