"""Hostile rows for plain Python control flow in `@vyre.kernel` (issue 31 item 1): careless
plain kernels get a vyre error at build naming the fix, on every backend, and leave nothing
behind. Loaded by tests/test_hostile.py (rows: id, call(ctx), class, phrases)."""

from __future__ import annotations

from typing import Any

import vyre
from vyre import Buffer, InOut, Output, f32, u32
from vyre.builder import BuildError


@vyre.kernel
def _branch_local(x: Buffer[f32], y: InOut[f32]) -> None:
    i = vyre.global_linear_id()
    if x[i] > 0.0:
        z = x[i]
    y[i] = z


@vyre.kernel
def _int_then_float(x: Buffer[f32], y: Output[f32], n: u32) -> None:
    acc = 0
    for k in range(n):
        acc = acc + x[k]
    y[0] = acc


@vyre.kernel
def _buffer_loop(x: Buffer[f32], y: Output[f32]) -> None:
    for v in x:
        y[0] = v


@vyre.kernel
def _break_unrolled(x: Buffer[f32], y: Output[f32]) -> None:
    for k in range(4):
        if x[k] > 0.0:
            break
        y[k] = 1.0


def _launch(k: Any) -> Any:
    return lambda c: k.launch(c.b, 4, c.live, c.live)


ROWS: list[Any] = [
    ("plain kernel: name first assigned in a branch", _launch(_branch_local), BuildError,
     ("`z` is first assigned inside", "give it a value before the block")),
    ("plain kernel: int local then f32", lambda c: _int_then_float.launch(c.b, 1, c.live,
                                                                         c.live, n=4),
     BuildError, ("acc = 0.0", "keeps one type")),
    ("plain kernel: for over a buffer", _launch(_buffer_loop), BuildError,
     ("for j in range(x.length())",)),
    ("plain kernel: break in per-invocation if of an unrolled loop", _launch(_break_unrolled),
     BuildError, ("unrolled", "vyre.range")),
]
