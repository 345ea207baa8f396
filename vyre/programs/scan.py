"""Prefix sums (inclusive and exclusive) over u32, i32 and f32 of any length, and stream
compaction built on them.

A scan is reduce-then-scan, multi-level: pass 1 reduces each block of
`workgroup_size * per_thread` elements to its total (the `reduce` sum program); the block
totals are scanned exclusively (recursively, the same way, or in one workgroup when they
fit); pass 3 scans each block again in workgroup memory starting from its block's carry and
writes the result. The data is read twice and written once (12 bytes per f32 element), with
no spin-waits between workgroups. Integer sums wrap.

Float results depend only on a fixed order, so they are the same bits on every run and on
every backend (the reference included); against a float64 cumsum they agree within
n * 2^-24 * cumsum(|x|). The order within a block of W_G = workgroup_size invocations,
each owning a run of `per_thread` consecutive elements, is (`order="segmented"`, the
default):
  1. each invocation sums its run left to right: s_t = ((r_0 + r_1) + r_2) + ...;
  2. the s_t are scanned in segments of W = min(32, W_G) consecutive invocations,
     Hillis-Steele: for d = 1, 2, ..., W/2, every t with t mod W >= d sets
     x_t = x_(t-d) + x_t (all read before any write), giving inc_t;
  3. invocation t in segment k starts from its block's carry c (0 for the first level),
     adds the segment totals before its own one by one, ((c + T_0) + T_1) + ... + T_(k-1)
     with T_j = inc of segment j's last invocation, then inc_(t-1) if t is not first in
     its segment;
  4. it adds its run's elements to that left to right, writing each (inclusive) or the
     value before each (exclusive).
Step 2 is the IR's subgroup inclusive scan over 32 lanes (docs/IR.md), so backends whose
subgroups hold whole segments (CUDA, NVIDIA's Vulkan, the reference: 32 lanes; 64-lane
subgroups by masked shuffles) spell it with shuffles and 3 barriers per block, the others
in workgroup memory (8 barriers), with the same additions either way. The carries c come
from the block totals of pass 1 (the reduce order, vyre.programs.reduce), scanned
exclusively by the same order one level up with blocks of W_G x 64 (UPPER_PER_THREAD:
runs of 64 totals, read directly; 2^26 elements are then 3 passes, not 5). `order="hillis_steele"` is the order of vyre before 17.1 (step 2
a Hillis-Steele scan over all W_G totals in workgroup memory, one barrier per level, and
step 3 c + that scan at t-1): kept to reproduce earlier results bit for bit.

Compaction keeps, in order, the elements where a predicate holds and writes their count to
a one-element buffer, all on the device. This module must never copy between host and
device between passes, and never scan in place (source and destination are distinct).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from typing import Any

import numpy as np

from vyre.backend import BaseBackend
from vyre.buffer import BufferBase
from vyre.builder import (
    ProgramBuilder,
    Value,
    Variable,
    select,
    subgroup_shuffle,
)
from vyre.config import MAX_GRID_DIM
from vyre.ir.nodes import Program
from vyre.ir.types import ScalarType

from ._common import (
    NUMERIC,
    Plan,
    alloc,
    blocks_grid,
    ceil_div,
    check_pow2,
    check_type,
    grid,
    read_elems,
    run_plan,
    subgroups_for,
    u32,
    upload,
)
from .reduce import reduce_program

WORKGROUP = 256
PER_THREAD = 16  # elements per invocation: 4096-element blocks, 16 loads in flight each
SEGMENT = 32  # invocations per segment of the "segmented" order (at most the workgroup)
ORDERS = ("segmented", "hillis_steele")
ORDER = "segmented"
# elements per invocation of the upper levels (the block totals, read directly): one
# 16,384-total block covers 2^26 elements of 4096-element blocks, so 3 passes, not 5
UPPER_PER_THREAD = 64

Predicate = Callable[[Value], Value]


def _pad(i: Any) -> Any:
    """Workgroup-memory slot of block element i: one spare slot per 32, so the runs that
    invocations scan serially (per_thread apart) fall in distinct banks."""
    return i + (i >> 5)


@cache
def scan_block_program(
    ty: ScalarType,
    inclusive: bool,
    workgroup_size: int = WORKGROUP,
    per_thread: int = PER_THREAD,
    carry_in: bool = False,
    subgroups: bool = False,
    order: str = ORDER,
    direct: bool = False,
) -> Program:
    """Scan each block of src[:n] into dst, starting from offsets[b] for block b when
    `carry_in` (the exclusive scan of the block totals), else from 0.

    Invocation t loads elements base + t, base + t + wg, ... (coalesced, all in flight),
    sums its run data[t*per : (t+1)*per] serially (its run total), the run totals are
    scanned across the workgroup (in `order`, see the module docstring), then each
    invocation rewrites its run from its carry and writes the block out.

    `subgroups`: the segments of the "segmented" order are scanned with subgroup shuffles
    where the backend's subgroups hold a whole segment (the same operations as the
    workgroup-memory steps, so the same bits for every subgroup size); "hillis_steele"
    never uses subgroups.

    `direct`: invocation t reads its run straight from src and writes it straight to dst
    (no transposition through workgroup memory, so uncoalesced, but a block may be larger
    than workgroup memory): how the small upper levels run. The same runs and additions,
    so the same bits as the transposed program of the same shape.
    """
    ty = check_type(ty, NUMERIC, "scan")
    check_pow2(workgroup_size, "workgroup_size")
    if order not in ORDERS:
        raise ValueError(f"scan order {order!r} is not one of {ORDERS}")
    wg, per = workgroup_size, per_thread
    kind = "inclusive" if inclusive else "exclusive"
    carry = "_carry" if carry_in else ""
    subgroups = subgroups and order == "segmented"
    tag = ("_seg" + ("_sg" if subgroups else "")) if order == "segmented" else ""
    tag += "_direct" if direct else ""
    k = ProgramBuilder(f"scan_block_{kind}_{ty}_{wg}x{per}{carry}{tag}", wg)
    src = k.buffer("src", ty)
    offsets = k.buffer("offsets", ty) if carry_in else None
    dst = k.buffer("dst", ty, "write")
    n = k.param("n", u32)
    block = wg * per
    data = None if direct else k.shared("data", ty, _pad(block - 1) + 1)
    t = k.let(k.local_index() & (wg - 1))
    g = k.let(k.workgroup_linear_id())
    base = k.let(g * block)
    zero = k.lit(0, ty)
    if data is None:  # each run straight from src, all its loads in flight
        start = k.let(base + t * per)
        places = [k.let(start + j) for j in range(per)]
        run = [k.let(select(i < n, src[i], zero)) for i in places]
    else:
        loaded = []
        for j in range(per):  # coalesced, every load in flight before the first store
            i = k.let(base + j * wg + t)
            loaded.append(k.let(select(i < n, src[i], zero)))
        for j in range(per):
            data[_pad(t + j * wg)] = loaded[j]
        k.barrier()
        start = k.let(t * per)
        run = [k.let(data[_pad(start + j)]) for j in range(per)]
    s = k.let(run[0])
    for j in range(1, per):
        s.set(s + run[j])
    acc = k.let(offsets[g] if offsets is not None else zero)
    if order == "segmented":
        _segmented_carry(k, s, t, acc, wg, subgroups)
    else:
        _hillis_steele_carry(k, s, t, acc, wg)
    if data is None:
        for j in range(per):
            if inclusive:
                acc.set(acc + run[j])
            with k.if_(places[j] < n):
                dst[places[j]] = acc
            if not inclusive:
                acc.set(acc + run[j])
        return k.build()
    for j in range(per):
        if inclusive:
            acc.set(acc + run[j])
            data[_pad(start + j)] = acc
        else:
            data[_pad(start + j)] = acc
            acc.set(acc + run[j])
    k.barrier()
    for j in range(per):
        i = k.let(base + j * wg + t)
        with k.if_(i < n):
            dst[i] = data[_pad(t + j * wg)]
    return k.build()


def _hillis_steele_carry(k: ProgramBuilder, s: Value, t: Value, acc: Variable, wg: int
                         ) -> None:
    """acc += the exclusive scan of the run totals `s` at t: Hillis-Steele over all wg of
    them in workgroup memory, then acc + scan[t-1]."""
    cur = _hillis_steele_in_memory(k, s, t, t, wg, wg, "totals")
    with k.if_(t > 0):
        acc.set(acc + cur[t - 1])


def _hillis_steele_in_memory(k: ProgramBuilder, x: Value, t: Value, pos: Value, width: int,
                             wg: int, name: str) -> Any:
    """Inclusive Hillis-Steele scans of `x` over runs of `width` consecutive invocations
    (`pos`: t's place in its run): for d = 1, 2, .. width/2, x_t = x_(t-d) + x_t where
    pos >= d, ping-ponging between two workgroup arrays, one barrier per level. Returns
    the array holding the scans (read after its last barrier)."""
    ping = k.shared(name, x.ty, wg)
    pong = k.shared(name + "2", x.ty, wg)
    ping[t] = x
    k.barrier()
    cur, other = ping, pong
    d = 1
    while d < width:
        v = k.let(cur[t])
        with k.if_(pos >= d):
            v.set(cur[t - d] + v)
        other[t] = v
        k.barrier()
        cur, other = other, cur
        d *= 2
    return cur


def _segmented_carry(k: ProgramBuilder, s: Value, t: Value, acc: Variable, wg: int,
                     subgroups: bool) -> None:
    """acc += the exclusive scan of the run totals `s` at t, in the segmented order: the
    totals are scanned Hillis-Steele within segments of W = min(SEGMENT, wg) invocations,
    then acc adds the segment totals before t's segment one by one (left to right), then
    the inclusive scan at t-1 when t is not first in its segment."""
    ty = s.ty
    zero = k.lit(0, ty)
    w = min(SEGMENT, wg)
    nseg = wg // w
    lane_w = k.let(t & (w - 1))
    inc = k.let(s)  # the inclusive scan within the segment
    prev = k.let(zero)  # inc at t-1 (used only where lane_w > 0)
    if subgroups:
        size = k.let(k.subgroup_size())
        with k.if_(size >= w):  # uniform: a subgroup holds whole segments
            lane = k.let(k.subgroup_lane())
            d = 1
            while d < w:
                other = k.let(subgroup_shuffle(inc, lane - d))
                inc.set(select(lane_w >= d, other + inc, inc))
                d *= 2
            prev.set(subgroup_shuffle(inc, lane - 1))
        with k.else_():
            _segmented_in_memory(k, t, lane_w, inc, prev, w, wg)
    else:
        _segmented_in_memory(k, t, lane_w, inc, prev, w, wg)
    if nseg > 1:
        seg = k.let(t / w)
        tot = k.shared("segment_totals", ty, nseg)
        with k.if_(lane_w == w - 1):
            tot[seg] = inc
        k.barrier()
        for j in range(nseg - 1):
            acc.set(select(seg > j, acc + tot[j], acc))
    acc.set(select(lane_w > 0, acc + prev, acc))


def _segmented_in_memory(k: ProgramBuilder, t: Value, lane_w: Value, inc: Variable,
                         prev: Variable, w: int, wg: int) -> None:
    """The segment scan of _segmented_carry in workgroup memory: the same additions as the
    subgroup shuffles, for any subgroup size."""
    cur = _hillis_steele_in_memory(k, inc, t, lane_w, w, wg, "seg_scan")
    inc.set(cur[t])
    with k.if_(lane_w > 0):
        prev.set(cur[t - 1])


def plan_scan(
    backend: BaseBackend,
    src: BufferBase,
    dst: BufferBase,
    n: int,
    ty: ScalarType,
    inclusive: bool = True,
    workgroup_size: int = WORKGROUP,
    per_thread: int = PER_THREAD,
    max_per_dim: int = MAX_GRID_DIM,
    order: str = ORDER,
    upper_per_thread: int | None = UPPER_PER_THREAD,
    direct: bool = False,
) -> Plan:
    """Passes scanning src[:n] into dst[:n] (distinct buffers). n == 0 gives no steps.

    `order`: how block results combine (module docstring); "hillis_steele" reproduces
    the bits of vyre before the segmented order. `upper_per_thread` (segmented order):
    the block totals are scanned with blocks of workgroup_size x upper_per_thread,
    `direct` (None: the first level's shape, transposed). `direct`: this level too (the
    upper levels' programs; vyre.distributed scans gathered block totals so)."""
    ty = ScalarType(ty)
    if src is dst:
        raise ValueError("scan src and dst must be distinct buffers")
    plan = Plan()
    if n == 0:
        return plan
    wg, per = workgroup_size, per_thread
    groups = ceil_div(n, wg * per)
    cfg = blocks_grid(groups, wg, max_per_dim, n=n)
    sg = subgroups_for(backend, wg)
    if groups == 1:
        plan.add(scan_block_program(ty, inclusive, wg, per, subgroups=sg, order=order,
                                    direct=direct),
                 {"src": src}, {"dst": dst}, cfg)
        return plan
    sums = alloc(backend, ty, groups, "scan_block_sums")
    offsets = alloc(backend, ty, groups, "scan_block_offsets")
    plan.temporaries += [sums, offsets]
    plan.add(reduce_program("sum", ty, wg, per, sg), {"src": src}, {"dst": sums}, cfg)
    up = upper_per_thread if order == "segmented" and upper_per_thread else None
    plan.extend(plan_scan(backend, sums, offsets, groups, ty, False, wg, up or per,
                          max_per_dim, order, upper_per_thread, direct or up is not None))
    plan.add(scan_block_program(ty, inclusive, wg, per, carry_in=True, subgroups=sg,
                                order=order, direct=direct),
             {"src": src, "offsets": offsets}, {"dst": dst}, cfg)
    return plan


def scan_device(
    backend: BaseBackend,
    src: BufferBase,
    dst: BufferBase,
    n: int,
    ty: ScalarType,
    inclusive: bool = True,
    use_pipeline: bool | None = None,
    **kw: Any,
) -> None:
    """Scan resident src[:n] into resident dst[:n]; nothing happens for n == 0. `kw`:
    plan_scan's workgroup_size, per_thread, max_per_dim, order."""
    run_plan(backend, plan_scan(backend, src, dst, n, ty, inclusive, **kw), use_pipeline)


def scan_host(
    backend: BaseBackend,
    data: np.ndarray,
    inclusive: bool = True,
    use_pipeline: bool | None = None,
    **kw: Any,
) -> np.ndarray:
    """Upload, scan on `backend`, read back."""
    ty = ScalarType.from_numpy(data.dtype)
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
    ty: ScalarType, pred: Predicate = nonzero, workgroup_size: int = WORKGROUP
) -> Program:
    """dst[pos[i]] = src[i] where pred(src[i]); count[0] = number kept (by invocation n-1)."""
    ty = check_type(ty, NUMERIC, "compact")
    k = ProgramBuilder(f"compact_scatter_{ty}_{pred.__name__}", workgroup_size)
    src = k.buffer("src", ty)
    pos = k.buffer("positions", u32)
    dst = k.buffer("dst", ty, "write")
    count = k.buffer("count", u32, "write")
    n = k.param("n", u32)
    i = k.let(k.global_linear_id())
    with k.if_(i < n):
        v = k.let(src[i])
        keep = k.let(pred(v))
        with k.if_(keep):
            dst[pos[i]] = v
        with k.if_(i == n - 1):
            count[0] = pos[i] + keep.cast(u32)
    return k.build()


def plan_compact(
    backend: BaseBackend,
    src: BufferBase,
    dst: BufferBase,
    count: BufferBase,
    n: int,
    ty: ScalarType,
    pred: Predicate = nonzero,
    workgroup_size: int = WORKGROUP,
    max_per_dim: int = MAX_GRID_DIM,
) -> Plan:
    """Passes writing the kept elements of src[:n] to dst[:count] and the count to count[0].
    n == 0 gives no steps (`compact_device` writes count 0 then)."""
    ty = ScalarType(ty)
    plan = Plan()
    if n == 0:
        return plan
    flags = alloc(backend, u32, n, "compact_flags")
    pos = alloc(backend, u32, n, "compact_positions")
    plan.temporaries += [flags, pos]
    cfg = grid(n, workgroup_size, max_per_dim, n=n)
    plan.add(compact_flags_program(ty, pred, workgroup_size), {"src": src}, {"flags": flags}, cfg)
    plan.extend(plan_scan(backend, flags, pos, n, u32, False, max_per_dim=max_per_dim))
    plan.add(
        compact_scatter_program(ty, pred, workgroup_size),
        {"src": src, "positions": pos},
        {"dst": dst, "count": count},
        cfg,
    )
    return plan


def compact_device(
    backend: BaseBackend,
    src: BufferBase,
    dst: BufferBase,
    count: BufferBase,
    n: int,
    ty: ScalarType,
    pred: Predicate = nonzero,
    use_pipeline: bool | None = None,
    **kw: int,
) -> None:
    """Compact resident src[:n] into resident dst, count into count[0]; no readback."""
    if n == 0:
        backend.write(count, np.zeros(1, dtype=np.uint32))
        return
    run_plan(backend, plan_compact(backend, src, dst, count, n, ty, pred, **kw), use_pipeline)


def compact_host(
    backend: BaseBackend,
    data: np.ndarray,
    pred: Predicate = nonzero,
    use_pipeline: bool | None = None,
    **kw: int,
) -> np.ndarray:
    """Upload, compact on `backend`, read back the kept elements."""
    ty = ScalarType.from_numpy(data.dtype)
    src = upload(backend, data, "compact_src")
    dst = alloc(backend, ty, data.size, "compact_dst")
    count = alloc(backend, u32, 1, "compact_count")
    try:
        compact_device(backend, src, dst, count, data.size, ty, pred, use_pipeline, **kw)
        c = int(read_elems(backend, count, u32, 1)[0])
        return read_elems(backend, dst, ty, c)
    finally:
        for b in (src, dst, count):
            backend.free(b)
