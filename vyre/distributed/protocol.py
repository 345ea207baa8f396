"""What travels between the driver and a backend actor: buffer references, configs and
the one protocol error (an actor that does not hold a program yet).

A message names buffers by `BufferRef` (actor name, actor instance, key) and programs by
content hash, never by pickled device objects, so an actor can check on its own that what it
is handed is its own and still alive. This module must never import Ray or touch a device.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from vyre.config import DispatchConfig, IndirectGrid
from vyre.errors import InvalidDispatch


class BufferRef(NamedTuple):
    """A buffer on the wire: which actor (name and instance) and which of its buffers."""

    actor: str
    instance: str
    key: int
    label: str | None


class ProgramNotLoaded(InvalidDispatch):
    """The actor has no program with this content hash (it restarted since it got it)."""

    def __init__(self, content_hash: str, actor: str) -> None:
        self.content_hash = content_hash
        super().__init__(
            f"ray actor {actor!r} holds no program with content hash {content_hash[:16]}...; "
            "it restarted since the driver sent it, and its buffers and programs are gone: "
            "spawn a new actor with vyre.distributed.spawn(...)"
        )


def map_refs(arg: Any, fn: Any) -> Any:
    """`arg` (a sequence or mapping of buffers) with every buffer replaced by fn(buffer)."""
    if hasattr(arg, "items"):
        return {k: fn(v) for k, v in arg.items()}
    return [fn(v) for v in arg]


def map_config(config: DispatchConfig | None, fn: Any) -> DispatchConfig | None:
    """`config` with the buffer of an indirect grid replaced by fn(buffer)."""
    if config is None or not isinstance(config.grid, IndirectGrid):
        return config
    grid = IndirectGrid(buffer=fn(config.grid.buffer), offset=config.grid.offset)
    return config.model_copy(update={"grid": grid})
