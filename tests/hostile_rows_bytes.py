"""Hostile rows for 8/16-bit buffer elements (issue 31 item 3): misuse of u8 / i8 / u16 /
i16 gets a vyre error naming the fix, never a silent wrap, truncation or numpy's other
reading of a dtype name. Loaded by tests/test_hostile.py (rows: id, call(ctx), class,
phrases).
"""

from __future__ import annotations

from typing import Any

import numpy as np

import vyre
from vyre import DispatchConfig, ProgramBuilder
from vyre.errors import InvalidDispatch, InvalidProgram
from vyre.ir import nodes as N

_GRID = DispatchConfig(grid=(1, 1, 1))


def _copy(ty: vyre.ScalarType) -> vyre.Program:
    k = ProgramBuilder(f"copy_{ty}", 64)
    a, o = k.buffer("a", ty), k.buffer("o", ty, "write")
    i = k.global_linear_id()
    o[i] = a[i]
    return k.build()


def _partial_element(c: Any) -> Any:
    """A 5-byte device buffer bound as u16 (2.5 elements)."""
    buf = c.b.allocate_device_buffer(5, label="five_bytes")
    out = c.b.allocate_device_buffer(4, label="two_u16")
    try:
        return c.b.dispatch_with_device_buffers(_copy(vyre.u16), [buf], [out], _GRID)
    finally:
        c.b.free(buf)
        c.b.free(out)


def _builder(f: Any) -> Any:
    def row(c: Any) -> Any:
        k = ProgramBuilder("hostile_bytes", 64)
        a = k.buffer("a", vyre.u8, "read_write")
        f(k, a)
        return k.build()
    return row


def _store_f32(k: ProgramBuilder, a: Any) -> None:
    f = k.buffer("f", vyre.f32)
    a[0] = f[0]


_U8_LOAD = N.Load(buffer="a", index=N.Const(ty=vyre.u32, value=0), ty=vyre.u8)
_ADD_BYTES = N.Program(
    name="add_bytes", buffers=(N.BufferDecl(name="a", ty=vyre.u8, access="read_write"),),
    body=(N.Store(buffer="a", index=N.Const(ty=vyre.u32, value=0),
                  value=N.Binary(op="add", a=_U8_LOAD, b=_U8_LOAD, ty=vyre.u8)),),
)

ROWS: list[Any] = [
    ("bytes u16 buffer of 5 bytes", _partial_element,
     InvalidDispatch, ("not a whole number of elements", "multiple of 2 bytes")),
    ("bytes read dtype 'u8'", lambda c: c.b.read(c.live, 0, 16, "u8"),
     InvalidDispatch, ("ambiguous", "vyre.u8", "np.uint8", "np.uint64")),
    ("bytes read dtype 'i8'", lambda c: c.b.read(c.live, 0, 16, "i8"),
     InvalidDispatch, ("ambiguous", "vyre.i8", "np.int64")),
    ("bytes list value 256 into u8",
     lambda c: c.b.dispatch(_copy(vyre.u8), {"a": [1, 256], "o": 2}, _GRID),
     InvalidDispatch, ("256 does not fit in u8", "never wrap")),
    ("bytes int32 array into u8",
     lambda c: c.b.dispatch(_copy(vyre.u8), {"a": np.arange(3, dtype=np.int32), "o": 3}, _GRID),
     InvalidDispatch, ("dtype int32", "declares u8", "astype(np.uint8)")),
    ("bytes i16 array into u16",
     lambda c: c.b.dispatch(_copy(vyre.u16), {"a": np.arange(3, dtype=np.int16), "o": 3}, _GRID),
     InvalidDispatch, ("dtype int16", "declares u16")),
    ("bytes u8 + u8 in the IR", lambda c: c.b.dispatch(_ADD_BYTES, {"a": np.zeros(4, np.uint8)},
                                                       _GRID),
     InvalidProgram, ("binary add on a u8 value", "cast the value to u32")),
    ("bytes store f32 into u8", _builder(_store_f32),
     InvalidProgram, ("cannot store a f32 into 'a' (u8)", ".cast(u8)")),
    ("bytes atomic on u8", _builder(lambda k, a: a.atomic_add(0, 1)),
     InvalidProgram, ("no atomics", "u32 or i32 buffer")),
    ("bytes literal 300 into u8", _builder(lambda k, a: a.__setitem__(0, 300)),
     InvalidProgram, ("300 does not fit in u8",)),
    ("bytes u8 param", _builder(lambda k, a: k.param("p", vyre.u8)),
     InvalidProgram, ("param 'p'", "declare it u32")),
    ("bytes u8 local", _builder(lambda k, a: k.let(1, ty=vyre.u8)),
     InvalidProgram, ("declare it ty=u32",)),
    ("bytes bitcast u32 to u8", _builder(lambda k, a: a.__setitem__(0, a[0].bitcast(vyre.u8))),
     InvalidProgram, ("one width", ".cast(u8)")),
]
