"""Shared pieces of the standard program library: plans of resident passes, grids, typed
allocation, identities and the in-workgroup scan every block algorithm builds on.

A `Plan` is a list of dispatch steps over device buffers plus the temporaries they use;
`run_plan` issues them in order on one backend (as one recorded pipeline where the backend
has pipelines) and frees the temporaries afterwards. This module must never copy data
between host and device between passes, and never know about a particular backend.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from vyre.buffer import DeviceBuffer
from vyre.builder import (
    ProgramBuilder,
    Value,
    Variable,
    select,
    subgroup_inclusive_scan,
    subgroup_shuffle,
)
from vyre.builder import max_ as _max
from vyre.builder import min_ as _min
from vyre.config import MAX_GRID_DIM, DispatchConfig
from vyre.errors import InvalidDispatch
from vyre.features import PIPELINE, SUBGROUP
from vyre.interface import Backend
from vyre.ir.nodes import Program
from vyre.ir.types import ScalarType
from vyre.pipeline import Step

u32 = ScalarType.U32
i32 = ScalarType.I32
f32 = ScalarType.F32

class LibraryArgumentError(InvalidDispatch, ValueError):
    """A library program or driver was asked for something it cannot build or run (an
    element type, a size, a kernel shape, an option); the message names the values that
    work. A `vyre.BackendError` like every error vyre raises, and still a `ValueError` (what
    these raised before), so existing `except ValueError` code keeps working."""


#: Element types the reductions, scans and sorts are written for.
NUMERIC = (u32, i32, f32)


@dataclass
class Plan:
    """Dispatch steps over resident buffers, plus the temporaries to free after them.

    Every `plan_*` function of the library (`scan.plan_scan`, `scan.plan_compact`,
    `reduce.plan_reduce`, `histogram.plan_histogram`, `radix_sort.plan_radix_sort`, ...)
    returns one without running anything. Run it with `run_plan(backend, plan)` (one recorded
    pipeline where the backend has pipelines; frees the temporaries after), or splice it
    into your own pipeline: `backend.pipeline(my_steps + plan.steps + more_steps)` and free
    `plan.temporaries` (with `backend.free`) once that pipeline will not run again.
    `plan.extend(other)` appends another plan's steps and temporaries."""

    steps: list[Step] = field(default_factory=list)
    temporaries: list[DeviceBuffer] = field(default_factory=list)

    def add(
        self,
        program: Program,
        inputs: Mapping[str, Any],
        outputs: Mapping[str, Any],
        config: DispatchConfig,
    ) -> None:
        """Append one dispatch of `program` over resident `inputs` / `outputs` (by name)."""
        self.steps.append(Step(program, dict(inputs), dict(outputs), config))

    def extend(self, other: Plan) -> None:
        """Append `other`'s steps after these, and take over its temporaries."""
        self.steps.extend(other.steps)
        self.temporaries.extend(other.temporaries)


#: Library programs use subgroup operations where the backend has them and they fit (False:
#: never; for measuring the difference, e.g. scripts/subgroup_bench.py). Results are the same
#: bits either way: the subgroup steps combine in the order the workgroup-memory ones do.
USE_SUBGROUPS = True


def subgroups_for(backend: Backend, workgroup_size: int) -> bool:
    """Whether library programs of `workgroup_size` invocations use subgroups on `backend`."""
    if not USE_SUBGROUPS or not backend.supports(SUBGROUP):
        return False
    size = backend.capabilities().details.get("subgroup_size")
    return isinstance(size, int) and size >= 1 and workgroup_size % size == 0


def run_plan(backend: Backend, plan: Plan, use_pipeline: bool | None = None) -> None:
    """Issue `plan` on `backend` in order, then free its temporaries.

    `use_pipeline=None` records one pipeline where the backend reports "pipeline", else
    issues the steps one by one with dispatch_with_device_buffers. No host copies either way.
    """
    try:
        if plan.steps:
            if use_pipeline is None:
                use_pipeline = backend.supports(PIPELINE)
            if use_pipeline:
                backend.pipeline(plan.steps).run()
            else:
                for s in plan.steps:
                    backend.dispatch_with_device_buffers(s.program, s.inputs, s.outputs, s.config)
    finally:
        if plan.temporaries:
            if not backend.closed:
                backend.synchronize()
            for b in plan.temporaries:
                backend.free(b)
            plan.temporaries.clear()


def grid(
    invocations: int, workgroup_size: int, max_per_dim: int = MAX_GRID_DIM, **params: Any
) -> DispatchConfig:
    """A 1-D grid over `invocations` (folded into y past `max_per_dim` workgroups)."""
    return DispatchConfig.for_elements(
        invocations, workgroup_size, max_per_dim=max_per_dim, params=params
    )


def blocks_grid(
    blocks: int, workgroup_size: int, max_per_dim: int = MAX_GRID_DIM, **params: Any
) -> DispatchConfig:
    """A grid of `blocks` workgroups (kernels index them with workgroup_linear_id)."""
    return grid(blocks * workgroup_size, workgroup_size, max_per_dim, **params)


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def alloc(backend: Backend, ty: ScalarType, n: int, label: str) -> DeviceBuffer:
    """A device buffer of `n` elements of `ty` (at least one element, never zero bytes)."""
    return backend.allocate_device_buffer(max(n, 1) * ty.byte_size, label=label)


def upload(backend: Backend, data: np.ndarray, label: str) -> DeviceBuffer:
    """A new device buffer holding `data` (at least one element long)."""
    data = np.ascontiguousarray(data)
    buf = backend.allocate_device_buffer(max(data.nbytes, data.dtype.itemsize), label=label)
    if data.nbytes:
        backend.write(buf, data)
    return buf


def read_elems(backend: Backend, buf: DeviceBuffer, ty: ScalarType, n: int) -> np.ndarray:
    """The first `n` elements of `buf` as a host array."""
    if n == 0:
        return np.zeros(0, dtype=ty.numpy)
    return backend.read(buf, 0, n * ty.byte_size, ty.numpy)


def element_type(ty: Any, what: str) -> ScalarType:
    """`ty` as a ScalarType (a ScalarType or its name), or LibraryArgumentError naming the
    names."""
    try:
        return ScalarType(ty)
    except ValueError:
        raise LibraryArgumentError(
            f"{what}: {ty!r} is not an element type; use one of "
            f"{[t.value for t in ScalarType]} (e.g. vyre.f32)") from None


def host_array(data: Any, what: str) -> tuple[np.ndarray, ScalarType]:
    """A `*_host` function's input array and its element type, or LibraryArgumentError (a
    list, or an array of a dtype vyre has no type for)."""
    if not isinstance(data, np.ndarray):
        raise LibraryArgumentError(
            f"{what} takes a NumPy array, got {type(data).__name__}; pass "
            "np.asarray(data, dtype=np.uint32) (or the element type you mean)")
    try:
        return data, ScalarType.from_numpy(data.dtype)
    except TypeError as exc:
        raise LibraryArgumentError(f"{what}: {exc}") from None


def check_room(what: str, *buffers: tuple[str, Any, ScalarType, int]) -> None:
    """Each (name, buffer, element type, elements the call reads or writes there) must fit:
    past a buffer's end a load reads 0 and a store does nothing, so a short buffer would
    give a silently wrong result. (Host data instead of a buffer is left to the binding,
    which names it.)"""
    for name, buf, ty, need in buffers:
        have = getattr(buf, "byte_len", None)
        if isinstance(have, int) and have < need * ty.byte_size:
            raise LibraryArgumentError(
                f"{what}: {name} holds {have // ty.byte_size} {ty} elements ({have} bytes) "
                f"but the call uses {need}; allocate at least {need * ty.byte_size} bytes, "
                "or pass a smaller element count")


def check_type(ty: ScalarType, allowed: tuple[ScalarType, ...], what: str) -> ScalarType:
    ty = element_type(ty, what)
    if ty not in allowed:
        raise LibraryArgumentError(
            f"{what} supports element types {[str(t) for t in allowed]}, got {ty}; convert "
            f"the data first (e.g. `array.astype(np.float32)`, or vyre.programs.elementwise."
            f"convert(src_type, dst_type) on device buffers)")
    return ty


def check_pow2(n: int, what: str) -> None:
    if n < 1 or n & (n - 1):
        raise LibraryArgumentError(
            f"{what} must be a power of two (1, 2, 4, ... 1024), got {n}; pick the nearest one "
            "or leave it out for the tuned default")


# ------------------------------------------------------------------ reduction operators

REDUCE_OPS = ("sum", "min", "max")


def identity(op: str, ty: ScalarType) -> int | float:
    """The neutral element of `op` over `ty` (sum 0, min the largest value, max the least)."""
    if op == "sum":
        return 0
    if ty.is_float:
        return math.inf if op == "min" else -math.inf
    info = np.iinfo(ty.numpy)
    return int(info.max) if op == "min" else int(info.min)


def combine(op: str, a: Value, b: Any) -> Value:
    """`a op b` in a fixed operand order (so results are reproducible bit for bit)."""
    if op == "sum":
        return a + b
    if op == "min":
        return _min(a, b)
    if op == "max":
        return _max(a, b)
    raise LibraryArgumentError(f"unknown reduction {op!r}; use one of {REDUCE_OPS}")


# ------------------------------------------------------------------ in-workgroup scan


def emit_block_scan(
    k: ProgramBuilder,
    data: Any,
    totals: Any,
    workgroup_size: int,
    per_thread: int,
    ty: ScalarType,
    t: Value,
    inclusive: bool,
) -> Variable:
    """Emit an in-place prefix sum of the workgroup array `data` (workgroup_size * per_thread
    elements); returns a local holding the block total.

    Invocation t sums its own run data[t*per : (t+1)*per] serially, the run totals are
    scanned Hillis-Steele style in `totals` (workgroup_size elements), then each invocation
    rewrites its run. The order of additions is fixed, so floats are reproducible. The caller
    must put a barrier between writing `data` and calling this; it ends with a barrier.
    """
    check_pow2(workgroup_size, "workgroup_size")
    zero = k.lit(0, ty)
    start = k.let(t * per_thread)
    s = k.let(zero)
    with k.for_range(0, per_thread) as j:
        s.set(s + data[start + j])
    totals[t] = s
    k.barrier()
    off = 1
    while off < workgroup_size:
        v = k.let(totals[t])
        with k.if_(t >= off):
            v.set(totals[t - off] + v)
        k.barrier()
        totals[t] = v
        k.barrier()
        off *= 2
    total = k.let(totals[workgroup_size - 1])
    run = k.let(zero)
    with k.if_(t > 0):
        run.set(totals[t - 1])
    with k.for_range(0, per_thread) as j:
        x = k.let(data[start + j])
        if inclusive:
            run.set(run + x)
            data[start + j] = run
        else:
            data[start + j] = run
            run.set(run + x)
    k.barrier()
    return total


def bank_padded(i: Any) -> Any:
    """Workgroup-memory slot of block element i: one spare slot per 32, so the runs that
    invocations scan serially (per_thread apart) fall in distinct banks."""
    return i + (i >> 5)


def subgroup_exclusive_total(k: ProgramBuilder, s: Value, t: Value, tot: Any, wg: int) -> Value:
    """The sum of the run totals `s` of invocations 0 .. t-1 (integers), with subgroups:
    within the subgroup by an exclusive subgroup scan, plus the totals of the subgroups
    before this one (one barrier to share them through `tot`)."""
    ty = s.ty
    zero = k.lit(0, ty)
    size = k.let(k.subgroup_size())
    lane = k.let(k.subgroup_lane())
    sub = k.let(t / size)  # this invocation's subgroup
    groups = k.let(k.lit(wg, u32) / size)
    inc = k.let(subgroup_inclusive_scan(s))
    with k.if_(lane == size - 1):
        tot[sub] = inc
    k.barrier()
    before = k.let(zero)  # the totals of subgroups 0 .. sub-1
    with k.if_(groups <= size):  # uniform: the subgroup totals fit in one subgroup
        mine = k.let(subgroup_inclusive_scan(select(lane < groups, tot[lane], zero)))
        # (every subgroup scanned the same totals: read subgroup sub-1's from its lane)
        prev = k.let(subgroup_shuffle(mine, sub - 1))
        with k.if_(sub > 0):
            before.set(prev)
    with k.else_():  # Hillis-Steele in place over the totals (read, barrier, write, barrier)
        off = 1
        while off < wg:
            with k.if_(k.lit(off, u32) < groups):  # uniform
                v = k.let(tot[t])
                with k.if_((t >= off) & (t < groups)):
                    v.set(tot[t - off] + v)
                k.barrier()
                with k.if_(t < groups):
                    tot[t] = v
                k.barrier()
            off *= 2
        with k.if_(sub > 0):
            before.set(tot[sub - 1])
    return before + (inc - s)
