"""Histograms with atomics: each workgroup counts its block into private bins in workgroup
memory (atomic add), then adds its non-zero bins into the global bins with one atomic add
each.

Each invocation loads all of its elements of a block before it counts any (the loads in
flight together), and a workgroup may count several blocks (`max_groups`) before it adds
its bins to the global ones.

Integer input (u32 / i32): a value v counts in bin v when 0 <= v < nbins, else nowhere.
f32 input: bin floor((x - lo) * scale) when that is in [0, nbins) (params lo, scale; NaN
counts nowhere); the arithmetic is plain f32 (no fma), so every backend bins identically.
Counts are order-independent, so results are bit-exact on every backend. `nbins` is fixed
per program: up to `MAX_BINS` the private bins live in workgroup memory (4 bytes each);
beyond it (up to `MAX_ANY_BINS`) each element adds one directly into the global bins (no
workgroup memory: slower per element, the same exact counts). This module must never use
float atomics or read the counts back to the host between passes.
"""

from __future__ import annotations

from functools import cache
from typing import NamedTuple

import numpy as np

from vyre.buffer import DeviceBuffer
from vyre.builder import ProgramBuilder, Value, min_, select
from vyre.config import MAX_GRID_DIM
from vyre.interface import Backend
from vyre.ir.nodes import Program
from vyre.ir.types import ScalarType

from ._common import (
    NUMERIC,
    LibraryArgumentError,
    Plan,
    alloc,
    blocks_grid,
    ceil_div,
    check_room,
    check_type,
    element_type,
    f32,
    grid,
    host_array,
    read_elems,
    run_plan,
    u32,
    upload,
)
from .elementwise import fill

WORKGROUP = 256
PER_THREAD = 8
MAX_BINS = 2048  # 8 KiB of workgroup memory: the most bins counted privately per workgroup
#: The most bins of any histogram (global-atomic path past MAX_BINS): 16M, 64 MiB of counts,
#: and every bin index of f32 input exact in f32 (floor((x - lo) * scale) < 2^24).
MAX_ANY_BINS = 1 << 24


class HistShape(NamedTuple):
    """A histogram kernel's shape; every shape counts the same (counts are exact)."""

    workgroup_size: int = WORKGROUP
    per_thread: int = PER_THREAD
    # 0: one workgroup per block of workgroup_size * per_thread elements; else at most this
    # many workgroups, each counting every max_groups-th block (fewer global atomics)
    max_groups: int = 0


#: The shape plan_histogram uses when the caller names none, per backend kind (H100, 2^26
#: u32 into 256 bins, scripts/wgpu_scan_sweep.py, docs/perf-notes.md): CUDA 1024 x 8 over at
#: most 528 workgroups 2,868 GB/s (the kernel before: 747); wgpu on NVIDIA's Vulkan driver
#: 256 x 8 over at most 4096 workgroups within 2% of its best row (1024 x 8, G = 528, which
#: needs 1024 invocations per workgroup, above WebGPU's default limit of 256), 2.6x the
#: kernel before (that run's wgpu clocks were down: ratios only).
DEFAULT = HistShape(256, 8, 4096)
TUNED: dict[str, HistShape] = {"cuda": HistShape(1024, 8, 528)}


def shape_for(backend: Backend) -> HistShape:
    """The kernel shape the library histogram uses on `backend` by default."""
    return TUNED.get(backend.kind, DEFAULT)


def check_nbins(nbins: object) -> None:
    """Refuse a bin count the histogram cannot take, naming what it can."""
    if isinstance(nbins, bool) or not isinstance(nbins, int) or not 1 <= nbins <= MAX_ANY_BINS:
        raise LibraryArgumentError(
            f"nbins must be an int in 1..{MAX_ANY_BINS}, got {nbins!r}; for wider ranges bin "
            "coarser (f32 input: a smaller `scale`) or histogram the range in parts")


@cache
def histogram_program(
    nbins: int, ty: ScalarType = u32, workgroup_size: int = WORKGROUP,
    per_thread: int = PER_THREAD, strided: bool = False, device_count: bool = False,
) -> Program:
    """bins[b] += number of src[:n] elements in bin b (bins is read_write: accumulates).

    Each invocation loads its `per_thread` elements of a block first (all in flight), then
    counts them into the workgroup's bins. `strided`: workgroup g counts blocks g,
    g + stride, ... (param `stride`: the number of workgroups launched) before adding its
    bins to the global ones, so a grid of fewer workgroups issues fewer global atomics.

    Past `MAX_BINS` bins (more than workgroup memory holds) every element is added straight
    into the global bins instead: any `nbins` up to `MAX_ANY_BINS`.

    `device_count`: the element count is min(count[0], n), read on the device from a u32
    buffer `count` (e.g. the count a compaction wrote); `n` is then the capacity the grid
    covers."""
    ty = check_type(ty, NUMERIC, "histogram")
    check_nbins(nbins)
    private = nbins <= MAX_BINS    # the bins fit workgroup memory
    wg, per = workgroup_size, per_thread
    block = wg * per
    where = "" if private else "_global"
    counted = "_devcount" if device_count else ""
    k = ProgramBuilder(
        f"histogram_{ty}_{nbins}{where}{counted}_{wg}x{per}{'_strided' if strided else ''}", wg)
    src = k.buffer("src", ty)
    bins = k.buffer("bins", u32, "read_write")
    count_buf = k.buffer("count", u32) if device_count else None
    n = k.param("n", u32)
    if count_buf is not None:
        n = k.let(min_(count_buf[0], n))   # the device's count, never past the capacity
    stride = k.param("stride", u32) if strided else None
    lo = scale = None
    if ty is f32:
        lo = k.param("lo", f32)
        scale = k.param("scale", f32)
    local = k.shared("local_bins", u32, nbins) if private else bins   # where counts go first
    t = k.let(k.local_index())
    g = k.let(k.workgroup_linear_id())
    rounds = ceil_div(nbins, wg) if private else 0
    for r in range(rounds):
        b = t + r * wg
        if (r + 1) * wg <= nbins:
            local[b] = 0
        else:
            with k.if_(b < nbins):
                local[b] = 0
    if private:
        k.barrier()

    def count(blk: Value) -> None:
        base = k.let(blk * block)
        loaded = []
        for j in range(per):  # every load in flight before the first atomic
            i = k.let(base + j * wg + t)
            loaded.append((i, k.let(select(i < n, src[i], k.lit(0, ty)))))
        for i, x in loaded:
            if ty is f32:
                assert lo is not None and scale is not None
                f = k.let((x - lo) * scale)
                with k.if_((i < n) & (f >= 0.0) & (f < float(nbins))):
                    local.atomic_add(f.cast(u32), 1)
            else:
                v = k.let(x if ty is u32 else x.bitcast(u32))  # negatives: huge, no bin
                with k.if_((i < n) & (v < nbins)):
                    local.atomic_add(v, 1)

    if stride is None:
        count(g)
    else:
        nblocks = k.let(n / block + select(n % block != 0, k.lit(1, u32), k.lit(0, u32)))
        # (a folded grid may launch more than `stride` workgroups: the extra ones count none)
        blk = k.let(select(g < stride, g, nblocks))
        with k.while_(blk < nblocks):
            count(blk)
            blk.set(blk + stride)
    if private:
        k.barrier()

    def flush(b: Value) -> None:
        c = k.let(local[b])
        with k.if_(c != 0):
            bins.atomic_add(b, c)

    for r in range(rounds):
        b = k.let(t + r * wg)
        if (r + 1) * wg <= nbins:
            flush(b)
        else:
            with k.if_(b < nbins):  # the last round's bins past nbins do not exist
                flush(b)
    return k.build()


def plan_histogram(
    backend: Backend,
    src: DeviceBuffer,
    n: int,
    bins: DeviceBuffer,
    nbins: int,
    ty: ScalarType = u32,
    lo: float = 0.0,
    scale: float = 1.0,
    accumulate: bool = False,
    workgroup_size: int | None = None,
    per_thread: int | None = None,
    max_per_dim: int = MAX_GRID_DIM,
    max_groups: int | None = None,
    count: DeviceBuffer | None = None,
) -> Plan:
    """Zero `bins` (unless `accumulate`), then count src[:n] into it. The kernel shape
    (workgroup_size, per_thread, max_groups) defaults to shape_for(backend).

    `count`: a u32 buffer whose first element is the element count, read on the device
    when the plan runs (e.g. `scan.plan_compact`'s count, with no readback between); `n` is
    then the most elements it may say (the grid covers n)."""
    ty = element_type(ty, "plan_histogram")
    check_nbins(nbins)
    check_room("plan_histogram", ("src", src, ty, n), ("bins", bins, u32, nbins),
               *([("count", count, u32, 1)] if count is not None else []))
    tuned = shape_for(backend)
    wg = tuned.workgroup_size if workgroup_size is None else workgroup_size
    per = tuned.per_thread if per_thread is None else per_thread
    cap = tuned.max_groups if max_groups is None else max_groups
    plan = Plan()
    if not accumulate:
        plan.add(fill(u32), {}, {"out": bins}, grid(nbins, 256, max_per_dim, n=nbins, value=0))
    if n == 0:
        return plan
    params: dict[str, float | int] = {"n": n}
    if ty is f32:
        params.update(lo=lo, scale=scale)
    groups = ceil_div(n, wg * per)
    strided = 0 < cap < groups
    if strided:
        groups = cap
        params["stride"] = cap
    inputs = {"src": src} if count is None else {"src": src, "count": count}
    plan.add(
        histogram_program(nbins, ty, wg, per, strided, count is not None),
        inputs,
        {"bins": bins},
        blocks_grid(groups, wg, max_per_dim, **params),
    )
    return plan


def histogram_device(
    backend: Backend,
    src: DeviceBuffer,
    n: int,
    bins: DeviceBuffer,
    nbins: int,
    ty: ScalarType = u32,
    use_pipeline: bool | None = None,
    **kw: float,
) -> None:
    """Histogram of resident src[:n] into resident bins[:nbins]; no readback."""
    run_plan(backend, plan_histogram(backend, src, n, bins, nbins, ty, **kw), use_pipeline)  # type: ignore[arg-type]


def histogram_host(
    backend: Backend,
    data: np.ndarray,
    nbins: int,
    use_pipeline: bool | None = None,
    **kw: float,
) -> np.ndarray:
    """Upload, histogram on `backend`, read back the nbins counts (u32)."""
    check_nbins(nbins)
    data, ty = host_array(data, "histogram_host")
    src = upload(backend, data, "histogram_src")
    bins = alloc(backend, u32, nbins, "histogram_bins")
    try:
        histogram_device(backend, src, data.size, bins, nbins, ty, use_pipeline, **kw)
        return read_elems(backend, bins, u32, nbins)
    finally:
        backend.free(src)
        backend.free(bins)


def histogram_reference(data: np.ndarray, nbins: int, lo: float = 0.0, scale: float = 1.0
                        ) -> np.ndarray:
    """The same binning in NumPy (exact: f32 arithmetic in the kernel's order)."""
    if data.dtype == np.float32:
        with np.errstate(invalid="ignore"):
            f = (data - np.float32(lo)) * np.float32(scale)
            ok = (f >= 0) & (f < np.float32(nbins))
        b = f[ok].astype(np.int64)
    else:
        b = data.astype(np.int64)
        b = b[(b >= 0) & (b < nbins)]
    return np.bincount(b, minlength=nbins).astype(np.uint32)
