"""Prefix sums (inclusive and exclusive) over u32, i32 and f32 of any length, and stream
compaction built on them.

A scan is reduce-then-scan, multi-level: pass 1 reduces each block of
`workgroup_size * per_thread` elements to its total (the `reduce` sum program); the block
totals are scanned exclusively (recursively, the same way, or in one workgroup when they
fit); pass 3 scans each block again in workgroup memory starting from its block's carry and
writes the result. The data is read twice and written once (12 bytes per f32 element), with
no spin-waits between workgroups. Integer sums wrap. Float results depend only on that fixed
order, so they are the same bits on every run and on every backend (the reference
included); against a float64 cumsum they agree within n * 2^-24 * cumsum(|x|).

Compaction keeps, in order, the elements where a predicate holds and writes their count to
a one-element buffer, all on the device. This module must never copy between host and
device between passes, and never scan in place (source and destination are distinct).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from typing import Any

import numpy as np

from vyre.buffer import DeviceBuffer
from vyre.builder import ProgramBuilder, Value, select
from vyre.config import MAX_GRID_DIM
from vyre.interface import Backend
from vyre.ir.nodes import Program
from vyre.ir.types import ScalarType

from ._common import (
    NUMERIC,
    LibraryArgumentError,
    Plan,
    alloc,
    bank_padded,
    blocks_grid,
    ceil_div,
    check_pow2,
    check_room,
    check_type,
    element_type,
    grid,
    host_array,
    read_elems,
    run_plan,
    subgroup_exclusive_total,
    subgroups_for,
    u32,
    upload,
)
from .reduce import reduce_program

WORKGROUP = 256
PER_THREAD = 16  # elements per invocation: 4096-element blocks, 16 loads in flight each

Predicate = Callable[[Value], Value]


@cache
def scan_block_program(
    ty: ScalarType,
    inclusive: bool,
    workgroup_size: int = WORKGROUP,
    per_thread: int = PER_THREAD,
    carry_in: bool = False,
    subgroups: bool = False,
) -> Program:
    """Scan each block of src[:n] into dst, starting from offsets[b] for block b when
    `carry_in` (the exclusive scan of the block totals), else from 0.

    Invocation t loads elements base + t, base + t + wg, ... (coalesced, all in flight),
    scans its run data[t*per : (t+1)*per] serially, the run totals are scanned Hillis-Steele
    style (ping-pong, one barrier per level), then each invocation rewrites its run.

    `subgroups` (integer types only: their wrapping sums are the same bits in any order,
    while a float scan must keep the order above): the run totals are scanned within each
    subgroup, then the subgroup totals (one barrier), by a second subgroup scan where they
    fit in one subgroup, else Hillis-Steele in workgroup memory.
    """
    ty = check_type(ty, NUMERIC, "scan")
    check_pow2(workgroup_size, "workgroup_size")
    wg, per = workgroup_size, per_thread
    kind = "inclusive" if inclusive else "exclusive"
    carry = "_carry" if carry_in else ""
    subgroups = subgroups and ty.is_int
    sg = "_sg" if subgroups else ""
    k = ProgramBuilder(f"scan_block_{kind}_{ty}_{wg}x{per}{carry}{sg}", wg)
    src = k.buffer("src", ty)
    offsets = k.buffer("offsets", ty) if carry_in else None
    dst = k.buffer("dst", ty, "write")
    n = k.param("n", u32)
    block = wg * per
    data = k.shared("data", ty, bank_padded(block - 1) + 1)
    ping = k.shared("totals", ty, wg)
    pong = None if subgroups else k.shared("totals2", ty, wg)
    t = k.let(k.local_index() & (wg - 1))
    g = k.let(k.workgroup_linear_id())
    base = k.let(g * block)
    zero = k.lit(0, ty)
    loaded = []
    for j in range(per):  # coalesced, every load in flight before the first store
        i = k.let(base + j * wg + t)
        loaded.append(k.let(select(i < n, src[i], zero)))
    for j in range(per):
        data[bank_padded(t + j * wg)] = loaded[j]
    k.barrier()
    start = k.let(t * per)
    run = [k.let(data[bank_padded(start + j)]) for j in range(per)]
    s = k.let(run[0])
    for j in range(1, per):
        s.set(s + run[j])
    # a grid folded into y launches more workgroups than there are blocks: those have no
    # offset (and no element), so they must not read offsets[g] past its end
    start_value = zero if offsets is None else select(g < offsets.length(), offsets[g], zero)
    if subgroups:
        acc = k.let(start_value)
        acc.set(acc + subgroup_exclusive_total(k, s, t, ping, wg))
    else:
        assert pong is not None
        ping[t] = s
        k.barrier()
        cur, other = ping, pong
        off = 1
        while off < wg:  # Hillis-Steele over the run totals, ping-ponging between two arrays
            v = k.let(cur[t])
            with k.if_(t >= off):
                v.set(cur[t - off] + v)
            other[t] = v
            k.barrier()
            cur, other = other, cur
            off *= 2
        acc = k.let(start_value)
        with k.if_(t > 0):
            acc.set(acc + cur[t - 1])
    for j in range(per):
        if inclusive:
            acc.set(acc + run[j])
            data[bank_padded(start + j)] = acc
        else:
            data[bank_padded(start + j)] = acc
            acc.set(acc + run[j])
    k.barrier()
    for j in range(per):
        i = k.let(base + j * wg + t)
        with k.if_(i < n):
            dst[i] = data[bank_padded(t + j * wg)]
    return k.build()


def plan_scan(
    backend: Backend,
    src: DeviceBuffer,
    dst: DeviceBuffer,
    n: int,
    ty: ScalarType,
    inclusive: bool = True,
    workgroup_size: int = WORKGROUP,
    per_thread: int = PER_THREAD,
    max_per_dim: int = MAX_GRID_DIM,
) -> Plan:
    """Passes scanning src[:n] into dst[:n] (distinct buffers). n == 0 gives no steps."""
    ty = element_type(ty, "plan_scan")
    check_room("plan_scan", ("src", src, ty, n), ("dst", dst, ty, n))
    if src is dst:
        raise LibraryArgumentError("scan src and dst must be distinct buffers (the scan is not in "
                                   "place); allocate a second buffer for dst")
    plan = Plan()
    if n == 0:
        return plan
    wg, per = workgroup_size, per_thread
    groups = ceil_div(n, wg * per)
    cfg = blocks_grid(groups, wg, max_per_dim, n=n)
    sg = subgroups_for(backend, wg)
    if groups == 1:
        plan.add(scan_block_program(ty, inclusive, wg, per, subgroups=sg), {"src": src},
                 {"dst": dst}, cfg)
        return plan
    sums = alloc(backend, ty, groups, "scan_block_sums")
    offsets = alloc(backend, ty, groups, "scan_block_offsets")
    plan.temporaries += [sums, offsets]
    plan.add(reduce_program("sum", ty, wg, per, sg), {"src": src}, {"dst": sums}, cfg)
    plan.extend(plan_scan(backend, sums, offsets, groups, ty, False, wg, per, max_per_dim))
    plan.add(scan_block_program(ty, inclusive, wg, per, carry_in=True, subgroups=sg),
             {"src": src, "offsets": offsets}, {"dst": dst}, cfg)
    return plan


def scan_device(
    backend: Backend,
    src: DeviceBuffer,
    dst: DeviceBuffer,
    n: int,
    ty: ScalarType,
    inclusive: bool = True,
    use_pipeline: bool | None = None,
    **kw: int,
) -> None:
    """Scan resident src[:n] into resident dst[:n]; nothing happens for n == 0."""
    run_plan(backend, plan_scan(backend, src, dst, n, ty, inclusive, **kw), use_pipeline)


def scan_host(
    backend: Backend,
    data: np.ndarray,
    inclusive: bool = True,
    use_pipeline: bool | None = None,
    **kw: int,
) -> np.ndarray:
    """Upload, scan on `backend`, read back."""
    data, ty = host_array(data, "scan_host")
    src = upload(backend, data, "scan_src")
    dst = alloc(backend, ty, data.size, "scan_dst")
    try:
        scan_device(backend, src, dst, data.size, ty, inclusive, use_pipeline, **kw)
        return read_elems(backend, dst, ty, data.size)
    finally:
        backend.free(src)
        backend.free(dst)


# ------------------------------------------------------------------ stream compaction


def nonzero(x: Value) -> Value:
    """The default compaction predicate: x != 0."""
    return x != 0


@cache
def compact_flags_program(
    ty: ScalarType, pred: Predicate = nonzero, workgroup_size: int = WORKGROUP
) -> Program:
    """flags[i] = 1 if pred(src[i]) else 0, for i < n."""
    ty = check_type(ty, NUMERIC, "compact")
    k = ProgramBuilder(f"compact_flags_{ty}_{pred.__name__}", workgroup_size)
    src = k.buffer("src", ty)
    flags = k.buffer("flags", u32, "write")
    n = k.param("n", u32)
    i = k.let(k.global_linear_id())
    with k.if_(i < n):
        flags[i] = pred(src[i]).cast(u32)
    return k.build()


@cache
def compact_scatter_program(
    ty: ScalarType, pred: Predicate = nonzero, workgroup_size: int = WORKGROUP,
    with_indices: bool = False,
) -> Program:
    """dst[pos[i]] = src[i] where pred(src[i]); count[0] = number kept (by invocation n-1).
    `with_indices`: also indices[pos[i]] = i (where each kept element came from)."""
    ty = check_type(ty, NUMERIC, "compact")
    suffix = "_indices" if with_indices else ""
    k = ProgramBuilder(f"compact_scatter_{ty}_{pred.__name__}{suffix}", workgroup_size)
    src = k.buffer("src", ty)
    pos = k.buffer("positions", u32)
    dst = k.buffer("dst", ty, "write")
    count = k.buffer("count", u32, "write")
    indices = k.buffer("indices", u32, "write") if with_indices else None
    n = k.param("n", u32)
    i = k.let(k.global_linear_id())
    with k.if_(i < n):
        v = k.let(src[i])
        keep = k.let(pred(v))
        with k.if_(keep):
            dst[pos[i]] = v
            if indices is not None:
                indices[pos[i]] = i
        with k.if_(i == n - 1):
            count[0] = pos[i] + keep.cast(u32)
    return k.build()


def plan_compact(
    backend: Backend,
    src: DeviceBuffer,
    dst: DeviceBuffer,
    count: DeviceBuffer,
    n: int,
    ty: ScalarType,
    pred: Predicate = nonzero,
    workgroup_size: int = WORKGROUP,
    max_per_dim: int = MAX_GRID_DIM,
    indices: DeviceBuffer | None = None,
) -> Plan:
    """Passes writing the kept elements of src[:n] to dst[:count] and the count to count[0];
    with `indices` (a u32 buffer of n elements) also each kept element's position in src to
    indices[:count], in order. n == 0 gives no steps (`compact_device` writes count 0 then).
    dst (and indices) must hold n elements: every one may be kept."""
    ty = element_type(ty, "plan_compact")
    check_room("plan_compact", ("src", src, ty, n), ("dst", dst, ty, n), ("count", count, u32, 1),
               *([("indices", indices, u32, n)] if indices is not None else []))
    plan = Plan()
    if n == 0:
        return plan
    flags = alloc(backend, u32, n, "compact_flags")
    pos = alloc(backend, u32, n, "compact_positions")
    plan.temporaries += [flags, pos]
    cfg = grid(n, workgroup_size, max_per_dim, n=n)
    plan.add(compact_flags_program(ty, pred, workgroup_size), {"src": src}, {"flags": flags}, cfg)
    plan.extend(plan_scan(backend, flags, pos, n, u32, False, max_per_dim=max_per_dim))
    outs = {"dst": dst, "count": count}
    if indices is not None:
        outs["indices"] = indices
    plan.add(
        compact_scatter_program(ty, pred, workgroup_size, indices is not None),
        {"src": src, "positions": pos},
        outs,
        cfg,
    )
    return plan


def compact_device(
    backend: Backend,
    src: DeviceBuffer,
    dst: DeviceBuffer,
    count: DeviceBuffer,
    n: int,
    ty: ScalarType,
    pred: Predicate = nonzero,
    use_pipeline: bool | None = None,
    **kw: Any,
) -> None:
    """Compact resident src[:n] into resident dst, count into count[0]; no readback.
    `indices=buf` (a u32 buffer of n elements) also gets the kept elements' positions."""
    if n == 0:
        backend.write(count, np.zeros(1, dtype=np.uint32))
        return
    run_plan(backend, plan_compact(backend, src, dst, count, n, ty, pred, **kw), use_pipeline)


def compact_host(
    backend: Backend,
    data: np.ndarray,
    pred: Predicate = nonzero,
    use_pipeline: bool | None = None,
    **kw: int,
) -> np.ndarray:
    """Upload, compact on `backend`, read back the kept elements."""
    return _compact_host(backend, data, pred, use_pipeline, False, **kw)[0]


def compact_indices_host(
    backend: Backend,
    data: np.ndarray,
    pred: Predicate = nonzero,
    use_pipeline: bool | None = None,
    **kw: int,
) -> tuple[np.ndarray, np.ndarray]:
    """Upload, compact on `backend`, read back (the kept elements, their positions in
    `data` as u32), like `(data[idx], idx)` with `idx = np.flatnonzero(pred(data))`."""
    values, idx = _compact_host(backend, data, pred, use_pipeline, True, **kw)
    assert idx is not None
    return values, idx


def _compact_host(
    backend: Backend, data: np.ndarray, pred: Predicate, use_pipeline: bool | None,
    with_indices: bool, **kw: int,
) -> tuple[np.ndarray, np.ndarray | None]:
    data, ty = host_array(data, "compact_host")
    src = upload(backend, data, "compact_src")
    dst = alloc(backend, ty, data.size, "compact_dst")
    count = alloc(backend, u32, 1, "compact_count")
    idx = alloc(backend, u32, data.size, "compact_indices") if with_indices else None
    try:
        extra: dict[str, Any] = {"indices": idx} if idx is not None else {}
        compact_device(backend, src, dst, count, data.size, ty, pred, use_pipeline, **kw,
                       **extra)
        c = int(read_elems(backend, count, u32, 1)[0])
        values = read_elems(backend, dst, ty, c)
        return values, (read_elems(backend, idx, u32, c) if idx is not None else None)
    finally:
        for b in (src, dst, count, idx):
            if b is not None:
                backend.free(b)
