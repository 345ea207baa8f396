"""The builder versions of the library programs that vyre/programs now writes with
`@vyre.kernel` (as they were before the rewrite), kept so tests/test_programs_decorated.py
can check the rewrite is bit-identical on every backend."""

from __future__ import annotations

from vyre.builder import ProgramBuilder, Value, select
from vyre.ir.nodes import Program
from vyre.ir.types import ScalarType, f32, u32


def _start(name: str, workgroup_size: int) -> tuple[ProgramBuilder, Value, Value]:
    k = ProgramBuilder(name, workgroup_size)
    n = k.param("n", u32)
    i = k.let(k.global_linear_id())
    return k, n, i


def saxpy(ty: ScalarType, wg: int) -> Program:
    k, n, i = _start(f"saxpy_{ty}", wg)
    x = k.buffer("x", ty)
    y = k.buffer("y", ty, "read_write")
    a = k.param("a", ty)
    with k.if_(i < n):
        y[i] = a * x[i] + y[i]
    return k.build()


def axpby(ty: ScalarType, wg: int) -> Program:
    k, n, i = _start(f"axpby_{ty}", wg)
    x = k.buffer("x", ty)
    y = k.buffer("y", ty)
    out = k.buffer("out", ty, "write")
    a = k.param("a", ty)
    b = k.param("b", ty)
    with k.if_(i < n):
        out[i] = a * x[i] + b * y[i]
    return k.build()


def fill(ty: ScalarType, wg: int) -> Program:
    k, n, i = _start(f"fill_{ty}", wg)
    out = k.buffer("out", ty, "write")
    v = k.param("value", ty)
    with k.if_(i < n):
        out[i] = v
    return k.build()


def iota(ty: ScalarType, wg: int) -> Program:
    k, n, i = _start(f"iota_{ty}", wg)
    out = k.buffer("out", ty, "write")
    start = k.param("start", ty)
    step = k.param("step", ty)
    with k.if_(i < n):
        idx = i if ty is u32 else i.cast(ty)
        out[i] = start + idx * step
    return k.build()


def gather(ty: ScalarType, wg: int) -> Program:
    k, n, i = _start(f"gather_{ty}", wg)
    src = k.buffer("src", ty)
    index = k.buffer("index", u32)
    out = k.buffer("out", ty, "write")
    with k.if_(i < n):
        out[i] = src[index[i]]
    return k.build()


def scatter(ty: ScalarType, wg: int) -> Program:
    k, n, i = _start(f"scatter_{ty}", wg)
    src = k.buffer("src", ty)
    index = k.buffer("index", u32)
    out = k.buffer("out", ty, "read_write")
    with k.if_(i < n):
        out[index[i]] = src[i]
    return k.build()


def stencil(boundary: str, tile: int) -> Program:
    k = ProgramBuilder(f"stencil5_{boundary}", (tile, tile))
    u = k.buffer("u", f32)
    out = k.buffer("out", f32, "write")
    h = k.param("H", u32)
    w = k.param("W", u32)
    wts = [k.param(nm, f32) for nm in ("wc", "wn", "ws", "ww", "we")]
    x = k.let(k.global_id(0))
    y = k.let(k.global_id(1))
    with k.if_((x < w) & (y < h)):
        def cell(yy: Value, xx: Value) -> Value:
            return u[yy * w + xx]

        def nb(ok: Value, yy: Value, xx: Value, edge_y: Value, edge_x: Value) -> Value:
            if boundary == "clamp":
                return cell(select(ok, yy, edge_y), select(ok, xx, edge_x))
            return select(ok, cell(select(ok, yy, edge_y), select(ok, xx, edge_x)), 0.0)

        c = k.let(cell(y, x))
        north = nb(y > 0, y - 1, x, y, x)
        south = nb(y + 1 < h, y + 1, x, y, x)
        west = nb(x > 0, y, x - 1, y, x)
        east = nb(x + 1 < w, y, x + 1, y, x)
        r = wts[0] * c + wts[1] * north
        r = r + wts[2] * south
        r = r + wts[3] * west
        out[y * w + x] = r + wts[4] * east
    return k.build()
