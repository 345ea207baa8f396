# mypy: disable-error-code="valid-type,type-arg,index"
# (decorated kernels annotate with vyre types, which are values, not Python types)
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

from vyre.builder import ProgramBuilder, Value
from vyre.config import MAX_GRID_DIM, Timing
from vyre.interface import Backend
from vyre.ir.nodes import Program
from vyre.ir.types import ScalarType
from vyre.kernel import (  # the kernel language
    Buffer,
    InOut,
    Output,
    TypeParam,
    global_linear_id,
    kernel,
    let,
)

from ._common import element_type, f32, grid, u32

WORKGROUP = 256


def run_elementwise(
    backend: Backend,
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


# The fixed-shape programs are written as decorated kernels (vyre.kernel); `map_program`
# stays on the builder because it generates its body from a Python function. `i =
# let(global_linear_id())` keeps the index a variable, as the Programs were tuned (a plain
# `i: u32 = ...` declares the same one, but this module is type-checked by mypy, which
# reads the annotation as a Python type).
T = TypeParam("T")


def _wg(T: ScalarType, wg: int) -> int:
    return wg


@kernel(workgroup_size=_wg, name="saxpy")
def _saxpy(n: u32, x: Buffer[T], y: InOut[T], a: T, *, T: ScalarType, wg: int) -> None:
    i = let(global_linear_id())
    if i < n:
        y[i] = a * x[i] + y[i]


@kernel(workgroup_size=_wg, name="axpby")
def _axpby(n: u32, x: Buffer[T], y: Buffer[T], out: Output[T], a: T, b: T, *,
           T: ScalarType, wg: int) -> None:
    i = let(global_linear_id())
    if i < n:
        out[i] = a * x[i] + b * y[i]


def saxpy(ty: ScalarType = f32, workgroup_size: int = WORKGROUP) -> Program:
    """y[i] = a * x[i] + y[i] in place (x read, y read_write; param a)."""
    return _saxpy.build(T=element_type(ty, "elementwise"), wg=workgroup_size)


def axpby(ty: ScalarType = f32, workgroup_size: int = WORKGROUP) -> Program:
    """out[i] = a * x[i] + b * y[i] (params a, b), evaluated as (a*x) + (b*y)."""
    return _axpby.build(T=element_type(ty, "elementwise"), wg=workgroup_size)


@cache
def convert(src: ScalarType, dst: ScalarType, workgroup_size: int = WORKGROUP) -> Program:
    """out[i] = cast(x0[i]) with the IR's conversion rules (float -> int truncates toward
    zero and saturates, NaN -> 0; int -> float and f32 -> f16 round to nearest even)."""
    src, dst = element_type(src, "convert"), element_type(dst, "convert")
    return map_program(lambda x: x.cast(dst), [src], dst, f"convert_{src}_{dst}",
                       workgroup_size=workgroup_size)


@kernel(workgroup_size=_wg, name="fill")
def _fill(n: u32, out: Output[T], value: T, *, T: ScalarType, wg: int) -> None:
    i = let(global_linear_id())
    if i < n:
        out[i] = value


@kernel(workgroup_size=_wg, name="iota")
def _iota(n: u32, out: Output[T], start: T, step: T, *, T: ScalarType, wg: int) -> None:
    i = let(global_linear_id())
    if i < n:
        idx = i if T is u32 else i.cast(T)  # a build-time choice
        out[i] = start + idx * step


@kernel(workgroup_size=_wg, name="gather")
def _gather(n: u32, src: Buffer[T], index: Buffer[u32], out: Output[T], *, T: ScalarType,
            wg: int) -> None:
    i = let(global_linear_id())
    if i < n:
        out[i] = src[index[i]]


@kernel(workgroup_size=_wg, name="scatter")
def _scatter(n: u32, src: Buffer[T], index: Buffer[u32], out: InOut[T], *, T: ScalarType,
             wg: int) -> None:
    i = let(global_linear_id())
    if i < n:
        out[index[i]] = src[i]


def fill(ty: ScalarType = f32, workgroup_size: int = WORKGROUP) -> Program:
    """out[i] = value (param) for i < n."""
    return _fill.build(T=element_type(ty, "elementwise"), wg=workgroup_size)


def iota(ty: ScalarType = u32, workgroup_size: int = WORKGROUP) -> Program:
    """out[i] = start + ty(i) * step (params start, step; ints wrap, floats round once per op)."""
    return _iota.build(T=element_type(ty, "elementwise"), wg=workgroup_size)


def gather(ty: ScalarType = f32, workgroup_size: int = WORKGROUP) -> Program:
    """out[i] = src[index[i]] for i < n; an index past src's length reads 0."""
    return _gather.build(T=element_type(ty, "elementwise"), wg=workgroup_size)


def scatter(ty: ScalarType = f32, workgroup_size: int = WORKGROUP) -> Program:
    """out[index[i]] = src[i] for i < n; indices past out's length are dropped. With
    duplicate indices, which value lands is unspecified: use a permutation for exact results."""
    return _scatter.build(T=element_type(ty, "elementwise"), wg=workgroup_size)
