"""Hostile-table rows (tests/test_hostile.py) for the launch / free / ownership paths:
a BoundDispatch bound by another instance is refused by every entry point that takes one,
naming both instances and how to bind it here."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from vyre import DispatchConfig
from vyre.errors import BufferOwnershipError

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common_programs import inc_f32


def _inc() -> Any:
    return inc_f32()


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
