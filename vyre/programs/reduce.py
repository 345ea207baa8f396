"""Reductions: sum, min, max and argmin / argmax over f32, i32 and u32, any length.

Each pass reduces blocks of `workgroup_size * per_thread` elements to one value per block:
invocation t loads elements base + t, base + t + wg, ... all at once (unrolled, so they are
in flight together), folds them pairwise, then a tree in workgroup memory (halving strides,
a barrier per level) combines the invocations. `plan_reduce`
chains passes until one value is left. The order of operations is fixed by the program, so
results are deterministic (same bits run to run) and the reference backend, which runs the
same order, agrees bit-exactly with every backend (no float atomics anywhere).

Semantics: an empty sum is 0; an empty min / max is the identity (+inf / largest int for
min, -inf / least int for max). Float min / max follow the IR (IEEE minNum / maxNum: NaN is
ignored unless everything is NaN). argmin / argmax skip NaNs, break ties by the lowest
index and report index 0xFFFFFFFF (with the identity value) when nothing qualifies.

This module must never use atomics on floats or copy through the host between passes.
"""

from __future__ import annotations

from functools import cache

import numpy as np

from vyre.buffer import DeviceBuffer
from vyre.builder import ProgramBuilder, Value, select, subgroup_reduce
from vyre.config import MAX_GRID_DIM
from vyre.interface import Backend
from vyre.ir.nodes import Program
from vyre.ir.types import ScalarType

from ._common import (
    NUMERIC,
    REDUCE_OPS,
    LibraryArgumentError,
    Plan,
    alloc,
    blocks_grid,
    ceil_div,
    check_pow2,
    check_room,
    check_type,
    combine,
    element_type,
    host_array,
    identity,
    read_elems,
    run_plan,
    subgroups_for,
    u32,
    upload,
)

WORKGROUP = 256
PER_THREAD = 16  # 16 loads in flight per thread: 1.6x the bandwidth of 4 on the H100 (vyre bench)
NO_INDEX = 0xFFFFFFFF


@cache
def reduce_program(
    op: str, ty: ScalarType, workgroup_size: int = WORKGROUP, per_thread: int = PER_THREAD,
    subgroups: bool = False,
) -> Program:
    """One pass: dst[b] = op over src[b*B : min((b+1)*B, n)], B = workgroup_size*per_thread.

    `subgroups`: the last levels of the tree, those with a stride below the subgroup size
    S, are one subgroup reduce of partial[0..S) (the IR's descending butterfly combines
    lane t with lane t + s for s = S/2 .. 1: the same operations as those levels), so the
    result is the same bits for every S; the workgroup size must be a multiple of S."""
    if op not in REDUCE_OPS:
        raise LibraryArgumentError(f"reduction {op!r} is not one of {REDUCE_OPS}; argmin / argmax "
                                   "are arg_reduce_program")
    ty = check_type(ty, NUMERIC, "reduce")
    check_pow2(workgroup_size, "workgroup_size")
    wg, per = workgroup_size, per_thread
    k = ProgramBuilder(f"reduce_{op}_{ty}_{wg}x{per}{'_sg' if subgroups else ''}", wg)
    src = k.buffer("src", ty)
    dst = k.buffer("dst", ty, "write")
    n = k.param("n", u32)
    part = k.shared("partial", ty, wg)
    t = k.let(k.local_index())
    base = k.let(k.workgroup_linear_id() * (wg * per))
    ident = k.lit(identity(op, ty), ty)
    # every load first (unrolled: `per` loads in flight per invocation), then a pairwise fold
    vals: list[Value] = []
    for j in range(per):
        i = k.let(base + j * wg + t)
        vals.append(k.let(select(i < n, src[i], ident)))
    part[t] = _fold_pairwise(k, op, vals)
    k.barrier()
    s = wg // 2
    if subgroups:
        size = k.let(k.subgroup_size())
        while s >= 1:
            with k.if_(size <= s):  # uniform: the levels above the subgroup's lanes
                with k.if_(t < s):
                    part[t] = combine(op, part[t], part[t + s])
                k.barrier()
            s //= 2
        total = k.let(subgroup_reduce(part[t], "add" if op == "sum" else op))
        with k.if_((t == 0) & (base < n)):
            dst[k.workgroup_linear_id()] = total
        return k.build()
    while s >= 1:
        with k.if_(t < s):
            part[t] = combine(op, part[t], part[t + s])
        k.barrier()
        s //= 2
    with k.if_((t == 0) & (base < n)):
        dst[k.workgroup_linear_id()] = part[0]
    return k.build()


def _fold_pairwise(k: ProgramBuilder, op: str, vals: list[Value]) -> Value:
    """op over `vals` as a balanced tree in a fixed order: ((v0 v1) (v2 v3)) ..."""
    while len(vals) > 1:
        nxt: list[Value] = [
            k.let(combine(op, vals[i], vals[i + 1])) for i in range(0, len(vals) - 1, 2)
        ]
        if len(vals) % 2:
            nxt.append(vals[-1])
        vals = nxt
    return vals[0]


def _better(op: str, bv: Value, bi: Value, av: Value, ai: Value) -> Value:
    """Whether (bv, bi) beats (av, ai): a strict total order, so any combine order agrees."""
    strictly = bv < av if op == "argmin" else bv > av
    return strictly | ((bv == av) & (bi < ai))


@cache
def arg_reduce_program(
    op: str,
    ty: ScalarType,
    first: bool,
    workgroup_size: int = WORKGROUP,
    per_thread: int = PER_THREAD,
) -> Program:
    """One argmin / argmax pass to (dst, dst_index) per block.

    The first pass (`first=True`) reads values only (the index is the position); later
    passes read (src, src_index) pairs made by an earlier pass.
    """
    if op not in ("argmin", "argmax"):
        raise LibraryArgumentError(f"{op!r} is not argmin or argmax; sum / min / max are "
                                   "reduce_program")
    ty = check_type(ty, NUMERIC, op)
    check_pow2(workgroup_size, "workgroup_size")
    wg, per = workgroup_size, per_thread
    k = ProgramBuilder(f"{op}_{ty}_{'first' if first else 'next'}_{wg}x{per}", wg)
    src = k.buffer("src", ty)
    src_index = None if first else k.buffer("src_index", u32)
    dst = k.buffer("dst", ty, "write")
    dst_index = k.buffer("dst_index", u32, "write")
    n = k.param("n", u32)
    sv = k.shared("best_value", ty, wg)
    si = k.shared("best_index", u32, wg)
    t = k.let(k.local_index())
    base = k.let(k.workgroup_linear_id() * (wg * per))
    ident = identity("min" if op == "argmin" else "max", ty)
    bv = k.let(k.lit(ident, ty))
    bi = k.let(k.lit(NO_INDEX, u32))
    # every load first (unrolled, all in flight together), then the comparisons in order
    loaded = []
    for j in range(per):
        i = k.let(base + j * wg + t)
        # (masked loads: elements past n are never compared, and past the end of src they
        # would be out-of-bounds reads)
        v = k.let(select(i < n, src[i], k.lit(ident, ty)))
        idx = k.let(i if src_index is None else select(i < n, src_index[i], k.lit(NO_INDEX, u32)))
        loaded.append((i, v, idx))
    for i, v, idx in loaded:
        ok = i < n
        if ty.is_float:
            ok = ok & (v == v)  # NaN never qualifies
        with k.if_(ok & _better(op, v, idx, bv, bi)):
            bv.set(v)
            bi.set(idx)
    sv[t] = bv
    si[t] = bi
    k.barrier()
    s = wg // 2
    while s >= 1:
        with k.if_(t < s):
            ov = k.let(sv[t + s])
            oi = k.let(si[t + s])
            with k.if_(_better(op, ov, oi, sv[t], si[t])):
                sv[t] = ov
                si[t] = oi
        k.barrier()
        s //= 2
    with k.if_((t == 0) & (base < n)):
        g = k.let(k.workgroup_linear_id())
        dst[g] = sv[0]
        dst_index[g] = si[0]
    return k.build()


def plan_reduce(
    backend: Backend,
    src: DeviceBuffer,
    n: int,
    op: str,
    ty: ScalarType,
    out: DeviceBuffer,
    out_index: DeviceBuffer | None = None,
    workgroup_size: int = WORKGROUP,
    per_thread: int = PER_THREAD,
    max_per_dim: int = MAX_GRID_DIM,
) -> Plan:
    """Passes reducing the first `n` elements of `src` into out[0] (and out_index[0] for
    argmin / argmax). n == 0 gives no steps: use `reduce_device`, which writes the identity."""
    ty = element_type(ty, "plan_reduce")
    check_room("plan_reduce", ("src", src, ty, n), ("out", out, ty, 1),
               *([("out_index", out_index, u32, 1)] if out_index is not None else []))
    arg = op in ("argmin", "argmax")
    if arg and out_index is None:
        raise LibraryArgumentError(f"{op} needs out_index, a u32 buffer for the position: pass "
                                   "out_index=backend.allocate_device_buffer(4)")
    plan = Plan()
    block = workgroup_size * per_thread
    cur, cur_index, count, first = src, None, n, True
    while count > 0:
        groups = ceil_div(count, block)
        if groups == 1:
            dst, dst_index = out, out_index
        else:
            dst = alloc(backend, ty, groups, f"{op}_partial")
            plan.temporaries.append(dst)
            dst_index = None
            if arg:
                dst_index = alloc(backend, u32, groups, f"{op}_partial_index")
                plan.temporaries.append(dst_index)
        cfg = blocks_grid(groups, workgroup_size, max_per_dim, n=count)
        if arg:
            prog = arg_reduce_program(op, ty, first, workgroup_size, per_thread)
            ins = {"src": cur} if first else {"src": cur, "src_index": cur_index}
            plan.add(prog, ins, {"dst": dst, "dst_index": dst_index}, cfg)
        else:
            prog = reduce_program(op, ty, workgroup_size, per_thread,
                                  subgroups_for(backend, workgroup_size))
            plan.add(prog, {"src": cur}, {"dst": dst}, cfg)
        if groups == 1:
            break
        cur, cur_index, count, first = dst, dst_index, groups, False
    return plan


def reduce_device(
    backend: Backend,
    src: DeviceBuffer,
    n: int,
    op: str,
    ty: ScalarType,
    out: DeviceBuffer,
    out_index: DeviceBuffer | None = None,
    use_pipeline: bool | None = None,
    **kw: int,
) -> None:
    """Reduce resident `src[:n]` into resident out[0] (and out_index[0]); no readback."""
    ty = element_type(ty, "reduce_device")
    if n == 0:
        ident = identity("min" if op == "argmin" else "max" if op == "argmax" else op, ty)
        backend.write(out, np.array([ident], dtype=ty.numpy))
        if out_index is not None:
            backend.write(out_index, np.array([NO_INDEX], dtype=np.uint32))
        return
    run_plan(backend, plan_reduce(backend, src, n, op, ty, out, out_index, **kw), use_pipeline)


def reduce_host(
    backend: Backend, data: np.ndarray, op: str, use_pipeline: bool | None = None, **kw: int
) -> tuple[np.generic, int | None]:
    """Upload `data`, reduce it on `backend`, read back (value, index-or-None)."""
    data, ty = host_array(data, "reduce_host")
    arg = op in ("argmin", "argmax")
    src = upload(backend, data, "reduce_src")
    out = alloc(backend, ty, 1, "reduce_out")
    out_index = alloc(backend, u32, 1, "reduce_out_index") if arg else None
    try:
        reduce_device(backend, src, data.size, op, ty, out, out_index, use_pipeline, **kw)
        value = read_elems(backend, out, ty, 1)[0]
        index = int(read_elems(backend, out_index, u32, 1)[0]) if out_index is not None else None
        return value, index
    finally:
        for b in (src, out, out_index):
            if b is not None:
                backend.free(b)
