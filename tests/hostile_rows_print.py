"""Hostile rows for `vyre.print` / `vyre.assert_` (issue 30): misuse gets a vyre error naming
the fix, and no debug log buffer is left behind by a refused dispatch or pipeline.
Loaded by tests/test_hostile.py (rows: id, call(ctx), class, phrases)."""

from __future__ import annotations

from typing import Any

import numpy as np

import vyre
from vyre import Buffer, InOut, Step, f32
from vyre.errors import BufferStateError, DispatchError, InvalidDispatch, InvalidProgram


@vyre.kernel(workgroup_size=4)
def _dbg(x: Buffer[f32], y: InOut[f32]) -> None:
    i = vyre.global_linear_id()
    with vyre.if_(i < y.length()):
        vyre.print("y[{}] = {}", i, y[i])
        vyre.assert_(x[i] >= 0.0, "x[{}] is negative", i)
        y[i] = x[i]


def _trace(body: Any) -> Any:
    @vyre.kernel
    def k(x: Buffer[f32], y: InOut[f32]) -> None:
        body(x, y)
    return k.program


def _python_assert(x: Any, y: Any) -> None:
    assert x[0] > 0.0  # (the mistake under test)


def _negative(c: Any) -> Any:
    return _dbg.launch(c.b, 4, np.array([1, -2, 3, 4], np.float32), np.zeros(4, np.float32))


ROWS: list[Any] = [
    ("print bind refused", lambda c: c.b.bind(_dbg.program, [c.live], [c.live],
                                              _dbg.config(4)),
     InvalidDispatch, ("vyre.print / vyre.assert_", "dispatch_with_device_buffers", "pipeline")),
    ("print freed buffer leaves no log", lambda c: c.b.dispatch_with_device_buffers(
        _dbg.program, [c.freed], [c.live], _dbg.config(4)),
     BufferStateError, ("freed",)),
    ("print async foreign buffer leaves no log", lambda c: c.b.dispatch_async(
        _dbg.program, [c.live], [c.foreign], _dbg.config(4)),
     vyre.BufferOwnershipError, ()),
    ("print pipeline freed buffer leaves no log", lambda c: c.b.pipeline(
        [Step(_dbg.program, [c.live], [c.freed], _dbg.config(4))]),
     BufferStateError, ("freed",)),
    ("print failed assert", _negative,
     DispatchError, ("vyre.assert_ failed in kernel '_dbg'", "hostile_rows_print.py:",
                     "global id (1, 0, 0)", "x[1] is negative")),
    ("print python print of a value", lambda c: _trace(lambda x, y: print(x[0])),
     InvalidProgram, ("vyre.print(",)),
    ("print python assert on a value", lambda c: _trace(_python_assert),
     InvalidProgram, ("vyre.assert_(",)),
    ("print format field count", lambda c: _trace(lambda x, y: vyre.print("{} {}", x[0])),
     InvalidProgram, ("2 field", "one {} per value")),
    ("print log size too small", lambda c: vyre.set_debug_log_bytes(16),
     InvalidDispatch, ("at least 64",)),
]
