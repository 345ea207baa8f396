"""Hostile rows for `@vyre.kernel` (issue 28): careless kernel code and launch arguments get
a vyre error naming the fix, never Python's bare TypeError / RecursionError, a hang, or a
silently empty kernel. Loaded by tests/test_hostile.py (rows: id, call(ctx), class, phrases).
"""

from __future__ import annotations

import contextlib
import functools
import math
from collections.abc import Callable
from typing import Any

import numpy as np

import vyre
from vyre import Buffer, InOut, f32, u32
from vyre.errors import InvalidDispatch, InvalidProgram


def _body(body: Callable[[Any, Any], Any]) -> Callable[[Any], Any]:
    """A row that traces a fresh kernel whose body is `body(x, y)` (x read, y read_write)."""
    def row(c: Any) -> Any:
        @vyre.kernel
        def k(x: Buffer[f32], y: InOut[f32]) -> None:
            body(x, y)
        return k.program
    return row


def _nested(x: Any, y: Any) -> None:
    with contextlib.ExitStack() as stack:
        for _ in range(3000):
            stack.enter_context(vyre.if_(x[0] > 0.0))
        y[0] = 1.0


@vyre.kernel
def _u32_param(y: InOut[u32], k: u32) -> None:
    i = vyre.global_linear_id()
    with vyre.if_(i < y.length()):
        y[i] = k


@vyre.kernel
def _builds_itself(y: InOut[f32]) -> None:
    y[0] = 1.0
    _builds_itself.build()


def _positional_only(y: InOut[f32], /) -> None:
    y[0] = 1.0


def _generator(y: InOut[f32]) -> Any:
    y[0] = 1.0
    yield


async def _coroutine(y: InOut[f32]) -> None:
    y[0] = 1.0


class _CallableObject:
    def __call__(self, y: InOut[f32]) -> None:
        y[0] = 1.0


def _ones(c: Any) -> Any:
    return np.ones(4, np.uint32)


ROWS: list[Any] = [
    # launch arguments
    ("kernel launch float shape", lambda c: _u32_param.launch(c.b, 5.0, _ones(c), 1),
     InvalidDispatch, ("element count", "5.0")),
    ("kernel launch np.True_ u32 param", lambda c: _u32_param.launch(c.b, 4, _ones(c), np.True_),
     InvalidDispatch, ("bool", "int(flag)")),
    ("config np.True_ u32 param", lambda c: c.b.dispatch(
        _u32_param.program, {"y": _ones(c)},
        vyre.DispatchConfig.for_elements(4, 64, params={"k": np.True_})),
     InvalidDispatch, ("bool", "int(flag)")),
    ("kernel step index_param given", lambda c: _u32_param.step(4, c.live, k=7, index_param="k"),
     InvalidDispatch, ("k=7", "leave k out")),
    # control blocks that were never entered: silent no-ops before
    ("kernel if_ without with", _body(lambda x, y: (vyre.if_(x[0] > 0.0), y.__setitem__(0, 1.0))),
     InvalidProgram, ("never entered", "with vyre.if_(cond):", "hostile_rows_kernel.py:")),
    ("kernel while_ without with", _body(lambda x, y: vyre.while_(x[0] > 0.0)),
     InvalidProgram, ("never entered", "with vyre.while_(cond):")),
    ("kernel else_ without with", _body(lambda x, y: vyre.else_()),
     InvalidProgram, ("never entered", "with vyre.else_():")),
    ("kernel range not looped", _body(lambda x, y: vyre.range(4)),
     InvalidProgram, ("never entered", "for i in vyre.range(n):")),
    ("kernel generator function", lambda c: vyre.kernel(_generator),
     InvalidProgram, ("generator", "plain `def`")),
    ("kernel async def", lambda c: vyre.kernel(_coroutine),
     InvalidProgram, ("async def", "plain `def`")),
    # iterating a buffer hung, eating memory (Python's __getitem__ iteration protocol)
    ("kernel for over buffer", _body(lambda x, y: [v for v in x]),
     InvalidProgram, ("for i in vyre.range(x.length()):",)),
    ("kernel sum of buffer", _body(lambda x, y: sum(x)),
     InvalidProgram, ("sum()", "for i in vyre.range(x.length()):")),
    ("kernel in buffer", _body(lambda x, y: 1.0 in x),
     InvalidProgram, ("for i in vyre.range(x.length()):",)),
    # raw exceptions before
    ("kernel lit bogus type", _body(lambda x, y: vyre.lit(1, "bogus")),  # type: ignore[arg-type]
     InvalidProgram, ("'bogus' is not a vyre element type", "vyre.f32")),
    ("kernel cast bogus type", _body(lambda x, y: x[0].cast("bogus")),  # type: ignore[arg-type]
     InvalidProgram, ("'bogus' is not a vyre element type",)),
    ("kernel 3000 nested if_", _body(_nested),
     InvalidProgram, ("nested more than 64 deep", "&")),
    ("kernel builds itself", lambda c: _builds_itself.program,
     InvalidProgram, ("builds itself", "cannot call itself")),
    ("kernel v ** 2", _body(lambda x, y: x[0] ** 2), InvalidProgram, ("v * v", "vyre.pow_")),
    ("kernel round(v)", _body(lambda x, y: round(x[0])), InvalidProgram, ("vyre.round_",)),
    ("kernel divmod(v, 2)", _body(lambda x, y: divmod(x[0], 2)), InvalidProgram, ("a // b",)),
    ("kernel np.sqrt(v)", _body(lambda x, y: np.sqrt(x[0])), InvalidProgram, ("vyre.sqrt",)),
    ("kernel np.power(v, 2)", _body(lambda x, y: np.power(x[0], 2)), InvalidProgram, ("v * v",)),
    ("kernel math.sqrt(v)", _body(lambda x, y: math.sqrt(x[0])), InvalidProgram, ("vyre.sqrt",)),
    ("kernel float(v)", _body(lambda x, y: float(x[0])), InvalidProgram, ("v.cast(f32)",)),
    ("kernel math.floor(v)", _body(lambda x, y: math.floor(x[0])), InvalidProgram, ("vyre.floor",)),
    ("kernel v @ w", _body(lambda x, y: x[0] @ y[0]), InvalidProgram, ("a * b",)),
    ("kernel positional-only", lambda c: vyre.kernel(_positional_only),
     InvalidProgram, ("positional-only", "remove the `/`")),
    ("kernel of builtin", lambda c: vyre.kernel(len), InvalidProgram, ("plain `def`", "len")),
    ("kernel of class", lambda c: vyre.kernel(int), InvalidProgram, ("plain `def`", "int")),
    ("kernel of partial", lambda c: vyre.kernel(functools.partial(_positional_only)),
     InvalidProgram, ("plain `def`", "partial")),
    ("kernel of callable object", lambda c: vyre.kernel(_CallableObject()),
     InvalidProgram, ("plain `def`", "_CallableObject")),
]
