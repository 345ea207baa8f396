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
    """A buffer on the wire: which actor (name and instance), which of its buffers (`key`,
    a small number for messages) and the buffer's unguessable `token` (128 random bits the
    actor made at allocation and checks on every use: a handle forged from a key is refused)."""

    actor: str
    instance: str
    key: int
    token: str
    label: str | None


def malformed(method: str, what: str, got: Any) -> InvalidDispatch:
    """The actor's answer to a message that RemoteBackend would never send."""
    return InvalidDispatch(
        f"a malformed {method!r} message reached the backend actor: {what}, got "
        f"{type(got).__name__} {got!r:.60}; drive actors through the methods of the "
        "RemoteBackend that vyre.distributed.spawn(...) returns, not actor.<method>.remote()"
    )


def as_ref(method: str, ref: Any) -> BufferRef:
    """`ref` checked to be a BufferRef's fields (a tuple of str, str, int, str, str|None)."""
    if (isinstance(ref, tuple) and len(ref) == 5 and isinstance(ref[0], str)
            and isinstance(ref[1], str) and type(ref[2]) is int and isinstance(ref[3], str)
            and (ref[4] is None or isinstance(ref[4], str))):
        return ref if isinstance(ref, BufferRef) else BufferRef(*ref)
    raise malformed(method, "a buffer is named by a BufferRef (actor, instance, key, token, "
                    "label)", ref)


def as_list(method: str, items: Any, what: str, width: int | None = None) -> list[Any]:
    """`items` a list or tuple (of tuples of `width` items, when given)."""
    if not isinstance(items, (list, tuple)):
        raise malformed(method, f"expected a list of {what}", items)
    if width is not None:
        for it in items:
            if not isinstance(it, tuple) or len(it) != width:
                raise malformed(method, f"expected a list of {what}", it)
    return list(items)


def as_buffers(method: str, arg: Any) -> Any:
    """A dispatch's buffer argument: a list, tuple or dict of BufferRefs (checked later)."""
    if not isinstance(arg, (list, tuple, dict)):
        raise malformed(method, "buffers come as a list or a dict of BufferRefs", arg)
    return arg


def as_config(method: str, config: Any, optional: bool = True) -> DispatchConfig | None:
    if isinstance(config, DispatchConfig) or (optional and config is None):
        return config
    raise malformed(method, "expected a DispatchConfig", config)


def as_str(method: str, value: Any, what: str) -> str:
    if not isinstance(value, str):
        raise malformed(method, f"expected {what} (a str)", value)
    return value


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
