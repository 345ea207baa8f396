"""Hostile rows for 8/16-bit buffer elements and for shapes (issue 31 items 3 and 2):
misuse of u8 / i8 / u16 / i16 gets a vyre error naming the fix, never a silent wrap,
truncation or numpy's other reading of a dtype name; a shape that disagrees with the data
(wrong rank, another shape, a length that is not whole rows), an out-of-range launch shape
or index, and a launch tuple that reads differently in NumPy and axis order are refused,
naming what to pass. Loaded by tests/test_hostile.py (rows: id, call(ctx), class, phrases).
"""

from __future__ import annotations

from typing import Any

import numpy as np

import vyre
from vyre import Buffer, DispatchConfig, Output, ProgramBuilder, f32, u32
from vyre.errors import InvalidDispatch, InvalidProgram
from vyre.ir import nodes as N

_GRID = DispatchConfig(grid=(1, 1, 1))
H, W, Q = vyre.Dim("H"), vyre.Dim("W"), vyre.Dim("Q")


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

@vyre.kernel(workgroup_size=(8, 8))
def _tr(src: Buffer[f32, (H, W)], dst: Output[f32, (W, H)], H: u32,
        W: u32) -> None:
    i, j = vyre.global_index(2)
    dst[j, i] = src[i, j]


@vyre.kernel(workgroup_size=(8, 8))
def _rows(src: Buffer[f32, (None, 4)], dst: Output[f32]) -> None:
    i, j = vyre.global_index(2)
    dst[i * 4 + j] = src[i, j]


@vyre.kernel(workgroup_size=(8, 8))
def _xy(dst: Output[f32], W: u32) -> None:
    dst[vyre.global_id(1) * W + vyre.global_id(0)] = 1.0


def _tr_launch(c: Any, shape: Any, src: Any, count: Any = 12) -> Any:
    return _tr.launch(c.b, shape, src, count, H=3, W=4)


def _shaped(f: Any) -> Any:
    def row(c: Any) -> Any:
        k = ProgramBuilder("hostile_shape", 64)
        a = k.buffer("a", f32, "read_write", shape=(3, 4))
        flat = k.buffer("flat", f32, "read_write")
        f(k, a, flat)
        return k.build()
    return row


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
    # shapes (item 2)
    ("shape array of wrong rank",
     lambda c: _tr_launch(c, (3, 4), np.zeros((3, 4, 1), np.float32)),
     InvalidDispatch, ("'src'", "3 axes", "the buffer 2", "reshape(-1)")),
    ("shape array transposed",
     lambda c: _tr_launch(c, (3, 4), np.zeros((4, 3), np.float32)),
     InvalidDispatch, ("'src'", "differs on axis 0", "(4 != 3)", "NumPy order")),
    ("shape flat array of another length",
     lambda c: _tr_launch(c, (3, 4), np.zeros(11, np.float32)),
     InvalidDispatch, ("'src'", "11 elements", "holds 12")),
    ("shape output count disagrees",
     lambda c: _tr_launch(c, (3, 4), np.zeros((3, 4), np.float32), 13),
     InvalidDispatch, ("'dst'", "13 elements", "holds 12")),
    ("shape partial row",
     lambda c: _rows.launch(c.b, (2, 4), np.zeros(10, np.float32), 8),
     InvalidDispatch, ("'src'", "not a whole number of rows of 4", "whole rows")),
    ("shape launch extent 0", lambda c: _tr_launch(c, (0, 4), np.zeros((3, 4), np.float32)),
     InvalidDispatch, ("extent", "int >= 1")),
    ("shape launch of 4 axes",
     lambda c: _tr_launch(c, (1, 1, 3, 4), np.zeros((3, 4), np.float32)),
     InvalidDispatch, ("1 to 3 extents",)),
    ("shape launch float", lambda c: _tr_launch(c, 12.0, np.zeros((3, 4), np.float32)),
     InvalidDispatch, ("NumPy order", "vyre.xyz")),
    ("shape ambiguous tuple for an xy kernel", lambda c: _xy.launch(c.b, (3, 4), 12, W=4),
     InvalidDispatch, ("ambiguous", "vyre.xyz(4, 3)", "vyre.xyz(3, 4)",
                       "vyre.global_index(2)")),
    ("shape one index on 2 axes", _shaped(lambda k, a, flat: a[k.global_id(0)]),
     InvalidProgram, ("a[i, j]", ".flat[k]", "2 axes")),
    ("shape two indices on a flat buffer", _shaped(lambda k, a, flat: flat[0, 1]),
     InvalidProgram, ("declares no shape", "flat[i * cols + j]")),
    ("shape three indices on 2 axes", _shaped(lambda k, a, flat: a[0, 1, 2]),
     InvalidProgram, ("shape (3, 4) (2 axes)", "3 index(es)")),
    ("shape constant index past its axis", _shaped(lambda k, a, flat: a[0, 4]),
     InvalidProgram, ("index 4 is out of range for axis 1", "(size 4)")),
    ("shape negative constant index", _shaped(lambda k, a, flat: a[-1, 0]),
     InvalidProgram, ("negative", "do not count from the end")),
    ("shape None not first",
     lambda c: ProgramBuilder("s", 64).buffer("a", f32, shape=(3, None)),
     InvalidProgram, ("only the first extent may be None",)),
    ("shape extent 0", lambda c: ProgramBuilder("s", 64).buffer("a", f32, shape=(0, 4)),
     InvalidProgram, ("extent 0 = 0", "int >= 1")),
    ("shape count disagrees",
     lambda c: ProgramBuilder("s", 64).buffer("a", f32, count=10, shape=(3, 4)),
     InvalidProgram, ("count=10", "holds 12")),
    ("shape names an unknown constant", lambda c: _unknown_extent().program,
     InvalidProgram, ("names 'Q'", "build-time constant", "u32/i32 param")),
]


def _unknown_extent() -> Any:
    @vyre.kernel
    def k(src: Buffer[f32, (Q, 4)]) -> None:
        src[0, 0]
    return k

