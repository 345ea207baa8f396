"""Hostile-table rows (tests/test_hostile.py) for the launch / free / ownership paths:
a BoundDispatch bound by another instance is refused by every entry point that takes one,
naming both instances and how to bind it here."""

from __future__ import annotations

from typing import Any

from vyre import DispatchConfig, ProgramBuilder, f32
from vyre.errors import BufferOwnershipError


def _inc() -> Any:
    k = ProgramBuilder("inc", workgroup_size=64)
    y = k.buffer("y", f32, "read_write")
    i = k.global_linear_id()
    with k.if_(i < y.length()):
        y[i] = y[i] + 1.0
    return k.build()


def _foreign_bound(c: Any) -> Any:
    """A dispatch bound by the instance that owns c.foreign (another instance)."""
    return c.foreign.owner.bind(_inc(), [], [c.foreign], DispatchConfig.for_elements(4, 64))


_PHRASES = ("bound by", "not by this backend", "bind(program, inputs, outputs, config)")

ROWS: list[Any] = [
    ("bound elsewhere: dispatch",
     lambda c: c.b.dispatch_with_device_buffers(_foreign_bound(c)), BufferOwnershipError,
     _PHRASES),
    ("bound elsewhere: dispatch_async",
     lambda c: c.b.dispatch_async(_foreign_bound(c)), BufferOwnershipError, _PHRASES),
    ("bound elsewhere: pipeline",
     lambda c: c.b.pipeline([_foreign_bound(c)]), BufferOwnershipError,
     ("pipeline step 0", *_PHRASES)),
]
