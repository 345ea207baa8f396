"""Hostile rows for the exact functions and vyre.approx (issue 32): an integer argument is
refused when the kernel is built, naming the function and the cast, on every backend.
Loaded by tests/test_hostile.py (rows: id, call(ctx), class, phrases)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import vyre
from vyre import Buffer, InOut, i32
from vyre.errors import InvalidProgram


def _int_call(fn: Callable[..., Any], two: bool = False) -> Callable[[Any], Any]:
    def row(c: Any) -> Any:
        @vyre.kernel
        def k(x: Buffer[i32], y: InOut[i32]) -> None:
            y[0] = fn(x[0], x[1]) if two else fn(x[0])
        return c.b.dispatch(k.program, {"x": [1, 2], "y": [0]}, vyre.DispatchConfig(grid=1))
    return row


ROWS: list[Any] = [
    ("exact exp of an int", _int_call(vyre.exp), InvalidProgram,
     ("exp needs a float argument", "cast")),
    ("exact pow of ints", _int_call(vyre.pow_, two=True), InvalidProgram,
     ("pow needs a float argument", "cast")),
    ("vyre.approx.log of an int", _int_call(vyre.approx.log), InvalidProgram,
     ("approx_log needs a float argument", "cast")),
]
