"""Elementwise programs: saxpy / axpby, fused maps from a Python expression, type
conversion, fill / iota, gather / scatter by index.

Every program here has a u32 param `n` (the element count it works on) and indexes with
`global_linear_id()`, so `run_elementwise` can fold grids past 65535 workgroups. Results are
bit-exact on every backend (plain IEEE arithmetic in a fixed order, no fma contraction).
This module must never move data through the host between dispatches.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from functools import cache
from typing import Any

from vyre.backend import BaseBackend
from vyre.builder import ProgramBuilder, Value
from vyre.config import MAX_GRID_DIM, Timing
from vyre.ir.nodes import Program
from vyre.ir.types import ScalarType

from ._common import f32, grid, u32

WORKGROUP = 256


def run_elementwise(
    backend: BaseBackend,
    program: Program,
    inputs: Mapping[str, Any],
    outputs: Mapping[str, Any],
    n: int,
    max_per_dim: int = MAX_GRID_DIM,
    **params: Any,
) -> Timing | None:
    """Dispatch an elementwise `program` over `n` elements of resident buffers.

    Skips the dispatch when n == 0 (and returns None).
    """
    if n == 0:
        return None
    cfg = grid(n, program.workgroup_size[0], max_per_dim, n=n, **params)
    return backend.dispatch_with_device_buffers(program, inputs, outputs, cfg)


def _start(name: str, workgroup_size: int) -> tuple[ProgramBuilder, Value, Value]:
    k = ProgramBuilder(name, workgroup_size)
    n = k.param("n", u32)
    i = k.let(k.global_linear_id())
    return k, n, i


def map_program(
    fn: Callable[..., Value],
    in_types: Sequence[ScalarType],
    out_type: ScalarType,
    name: str = "map",
    params: Sequence[tuple[str, ScalarType]] = (),
    workgroup_size: int = WORKGROUP,
) -> Program:
    """out[i] = fn(x0[i], x1[i], ..., p0, p1, ...) for i < n: a fused elementwise map.

    `fn` gets one builder Value per input buffer (named x0, x1, ...) and then one per
    declared param, and returns the output Value (cast to `out_type` if it differs).
    """
    k, n, i = _start(name, workgroup_size)
    bufs = [k.buffer(f"x{j}", ScalarType(t)) for j, t in enumerate(in_types)]
    out = k.buffer("out", ScalarType(out_type), "write")
    ps = [k.param(pn, ScalarType(pt)) for pn, pt in params]
    with k.if_(i < n):
        r = fn(*[b[i] for b in bufs], *ps)
        if not isinstance(r, Value):
            r = k.lit(r, ScalarType(out_type))
        if r.ty != out.ty:
            r = r.cast(out.ty)
        out[i] = r
    return k.build()


@cache
def saxpy(ty: ScalarType = f32, workgroup_size: int = WORKGROUP) -> Program:
    """y[i] = a * x[i] + y[i] in place (x read, y read_write; param a)."""
    ty = ScalarType(ty)
    k, n, i = _start(f"saxpy_{ty}", workgroup_size)
    x = k.buffer("x", ty)
    y = k.buffer("y", ty, "read_write")
    a = k.param("a", ty)
    with k.if_(i < n):
        y[i] = a * x[i] + y[i]
    return k.build()


@cache
def axpby(ty: ScalarType = f32, workgroup_size: int = WORKGROUP) -> Program:
    """out[i] = a * x[i] + b * y[i] (params a, b), evaluated as (a*x) + (b*y)."""
    ty = ScalarType(ty)
    k, n, i = _start(f"axpby_{ty}", workgroup_size)
    x = k.buffer("x", ty)
    y = k.buffer("y", ty)
    out = k.buffer("out", ty, "write")
    a = k.param("a", ty)
    b = k.param("b", ty)
    with k.if_(i < n):
        out[i] = a * x[i] + b * y[i]
    return k.build()


@cache
def convert(src: ScalarType, dst: ScalarType, workgroup_size: int = WORKGROUP) -> Program:
    """out[i] = cast(x0[i]) with the IR's conversion rules (float -> int truncates toward
    zero and saturates, NaN -> 0; int -> float and f32 -> f16 round to nearest even)."""
    src, dst = ScalarType(src), ScalarType(dst)
    return map_program(lambda x: x.cast(dst), [src], dst, f"convert_{src}_{dst}",
                       workgroup_size=workgroup_size)


@cache
def fill(ty: ScalarType = f32, workgroup_size: int = WORKGROUP) -> Program:
    """out[i] = value (param) for i < n."""
    ty = ScalarType(ty)
    k, n, i = _start(f"fill_{ty}", workgroup_size)
    out = k.buffer("out", ty, "write")
    v = k.param("value", ty)
    with k.if_(i < n):
        out[i] = v
    return k.build()


@cache
def iota(ty: ScalarType = u32, workgroup_size: int = WORKGROUP) -> Program:
    """out[i] = start + ty(i) * step (params start, step; ints wrap, floats round once per op)."""
    ty = ScalarType(ty)
    k, n, i = _start(f"iota_{ty}", workgroup_size)
    out = k.buffer("out", ty, "write")
    start = k.param("start", ty)
    step = k.param("step", ty)
    with k.if_(i < n):
        idx = i if ty is u32 else i.cast(ty)
        out[i] = start + idx * step
    return k.build()


@cache
def gather(ty: ScalarType = f32, workgroup_size: int = WORKGROUP) -> Program:
    """out[i] = src[index[i]] for i < n; an index past src's length reads 0."""
    ty = ScalarType(ty)
    k, n, i = _start(f"gather_{ty}", workgroup_size)
    src = k.buffer("src", ty)
    index = k.buffer("index", u32)
    out = k.buffer("out", ty, "write")
    with k.if_(i < n):
        out[i] = src[index[i]]
    return k.build()


@cache
def scatter(ty: ScalarType = f32, workgroup_size: int = WORKGROUP) -> Program:
    """out[index[i]] = src[i] for i < n; indices past out's length are dropped. With
    duplicate indices, which value lands is unspecified: use a permutation for exact results."""
    ty = ScalarType(ty)
    k, n, i = _start(f"scatter_{ty}", workgroup_size)
    src = k.buffer("src", ty)
    index = k.buffer("index", u32)
    out = k.buffer("out", ty, "read_write")
    with k.if_(i < n):
        out[index[i]] = src[i]
    return k.build()
