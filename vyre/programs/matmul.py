"""Matrix multiply C = A @ B for row-major f32 matrices of any M, N, K (incl. sizes that
are not multiples of the tile), register-blocked through workgroup memory.

A workgroup of (block / per_thread)^2 invocations computes a block x block tile of C
(default 128 x 128 by 256 invocations, each an 8 x 8 sub-tile held in 64 locals; block and
per_thread may also be (rows, columns), and each backend kind has its own default,
`tiles_for`). It walks K in steps of `block_k`: the next A and B slabs are loaded into
locals while the current ones, staged in workgroup memory (zero-padded past the edges),
are multiplied, then staged into the other half of a double buffer, so global latency
overlaps the arithmetic and each K step needs one barrier. A run of staged elements wholly
inside A or B is read without per-element edge tests (`split`): consecutive loads a backend
may merge into one vector. Invocation (tr, tc) owns rows tr + T*i and columns tc + T*j
(T = block / per_thread), which keeps the workgroup-memory reads conflict-free and the
stores of C coalesced.

Each output accumulates acc = fma(a[k], b[k], acc) for k = 0, 1, ..., K-1 (then
fma(0, 0, acc) = acc for the padding): one IR `fma` (a single rounding) per term, in a
fixed order, so every backend, the reference included, produces the same bits, and
`matmul_reference` reproduces them in NumPy. Against a float64 product the error is within
K * 2^-24 * (|A| @ |B|) per element. This module must never accumulate in a different order
per backend or read data back between dispatches.
"""

from __future__ import annotations

from functools import cache
from typing import NamedTuple

import numpy as np

from vyre.buffer import DeviceBuffer
from vyre.builder import ProgramBuilder, Value, fma, select
from vyre.config import MAX_GRID_DIM, DispatchConfig, Timing
from vyre.interface import Backend
from vyre.ir.nodes import Program

from ._common import (
    LibraryArgumentError,
    alloc,
    ceil_div,
    check_pow2,
    check_room,
    f32,
    host_array,
    read_elems,
    u32,
    upload,
)

#: Default tile of C per workgroup (rows = columns), outputs per invocation per side, and
#: the K step staged in workgroup memory: 128 x 128 x 8 with 8 x 8 outputs (256 invocations).
BLOCK = 128
PER_THREAD = 8
BLOCK_K = 8
#: Kept for callers of the old 16 x 16 kernel: the default tile side.
TILE = BLOCK
#: A tile side: square (one int) or (rows, columns).
Side = int | tuple[int, int]


class Tiles(NamedTuple):
    """A kernel's tile shape (see matmul_program); every shape gives the same bits."""

    # (Side written out: a NamedTuple's generated __new__ cannot resolve the alias, and the
    # API reference, pdoc, evaluates its annotations)
    block: int | tuple[int, int] = BLOCK
    per_thread: int | tuple[int, int] = PER_THREAD
    block_k: int = BLOCK_K
    split: bool = True
    unroll: bool = True


#: The shape matmul_device / matmul_host use on a backend of this kind when the caller
#: names none, chosen by that backend's sweep (CUDA: `python -m
#: vyre.tools.bench.cuda_tuning --sections matmul`); other kinds use Tiles().
TUNED: dict[str, Tiles] = {
    # H100, 4096^3: 43.5 TFLOP/s = 0.87x cuBLAS FP32 (50.0); next 128x256 8x16 bk16 43.2,
    # 128x128 bk16 42.7, the unsplit kernel 33.3 (docs/perf-notes.md)
    "cuda": Tiles(128, 8, 8, True),
    # H100 through NVIDIA's Vulkan driver, 4096^3: 33.2 TFLOP/s = 1.64x the raw vec4 WGSL
    # peer, 0.77x vyre CUDA; 128x8x16 30.0, 128x8x8 29.3, 64.128x4.8x8 27.0
    # (scripts/wgpu_matmul_sweep.py, docs/perf-notes.md session 15)
    "wgpu": Tiles((128, 256), (8, 16), 8, True),
}


def tiles_for(backend: Backend) -> Tiles:
    """The tile shape the library matmul uses on `backend` by default."""
    return TUNED.get(backend.kind, Tiles())


def _spread(i: int, side: int, group: int) -> int:
    """Offset of an invocation's i-th row (or column) from its first: runs of `group`
    consecutive ones, `side * group` apart (so a run is one aligned vector in workgroup
    memory and a quarter-warp's runs are contiguous: no bank conflicts)."""
    return (i // group) * side * group + i % group


def _pair(v: Side) -> tuple[int, int]:
    """(rows, columns) of a tile side given as one int (square) or a pair."""
    return (v, v) if isinstance(v, int) else (int(v[0]), int(v[1]))


def _check_shape(block: Side, per_thread: Side, block_k: int) -> int:
    """The invocations per workgroup of a (block, per_thread, block_k) kernel."""
    (bm, bn), (pm, pn) = _pair(block), _pair(per_thread)
    for v, what in ((bm, "block"), (bn, "block"), (pm, "per_thread"), (pn, "per_thread"),
                    (block_k, "block_k")):
        check_pow2(v, what)
    if pm * pn > min(bm, bn):  # an invocation's staged run stays within one row
        raise LibraryArgumentError(f"per_thread {per_thread} has {pm * pn} outputs per invocation, "
                      f"more than the shorter side of block {block} ({min(bm, bn)}); use a "
                      "smaller per_thread or a larger block")
    wg = (bm // pm) * (bn // pn)
    if wg > 1024 or (bm * block_k) % wg or (bn * block_k) % wg:
        raise LibraryArgumentError(
            f"block {block}, per_thread {per_thread}, block_k {block_k}: needs "
            f"{wg} invocations, which must be at most 1024 and divide block*block_k; "
            "change per_thread or block_k, or leave all three out for the tuned tiles"
        )
    return wg


@cache
def matmul_program(
    block: Side = BLOCK, per_thread: Side = PER_THREAD, block_k: int = BLOCK_K,
    split: bool = True, unroll: bool = True,
) -> Program:
    """C[M, N] = A[M, K] @ B[K, N] (params M, N, K; grid (ceil(N/block_n), ceil(M/block_m))).
    `block` / `per_thread`: the tile of C per workgroup / per invocation, square (an int)
    or (rows, columns). `split`: loads of runs wholly inside A / B skip the per-element
    edge tests. `unroll`: the block_k steps of a K slab written out (False: an IR loop over
    them, a shader block_k times shorter). All are tuning knobs: the results are the same
    bits either way."""
    wg = _check_shape(block, per_thread, block_k)
    (bm, bn), (pm, pn) = _pair(block), _pair(per_thread)
    side_m, side_n = bm // pm, bn // pn  # invocations along the tile's rows / columns
    loads_a = bm * block_k // wg  # elements of A each invocation stages per step
    loads_b = bn * block_k // wg  # and of B
    name = f"{bm}x{pm}x{block_k}" if (bm, pm) == (bn, pn) else f"{bm}x{bn}_{pm}x{pn}x{block_k}"
    name += "" if unroll else "_rolled"
    k = ProgramBuilder(f"matmul_f32_{name}", wg)
    a = k.buffer("a", f32)
    b = k.buffer("b", f32)
    c = k.buffer("c", f32, "write")
    m = k.param("M", u32)
    n = k.param("N", u32)
    kk = k.param("K", u32)
    # A slab transposed (k-major) so both slabs are read along the tile's rows / columns
    sa = k.shared("tile_a", f32, 2 * block_k * bm)
    sb = k.shared("tile_b", f32, 2 * block_k * bn)
    # masked so the backends can prove every workgroup-memory index in bounds
    t = k.let(k.local_index() & (wg - 1))
    tr = k.let(t // side_n)
    tc = k.let(t & (side_n - 1))
    gm, gn = min(4, pm), min(4, pn)  # outputs per run of consecutive rows / columns
    ta = k.let(tr * gm)  # first row of the invocation's runs within the tile
    tb = k.let(tc * gn)  # first column
    row0 = k.let(k.workgroup_id(1) * bm)
    col0 = k.let(k.workgroup_id(0) * bn)

    # what invocation t stages: `loads_a` consecutive elements of one row of A (columns
    # a_k .. of slab row a_r) and `loads_b` of one row of B (slab row b_k, columns b_c ..)
    # (t * loads_a = a_r * block_k + a_k, spelled so the ranges show a_k <= block_k -
    # loads_a: every staging store is then proven in bounds, and a run of them aligned)
    a_r = k.let(t // (block_k // loads_a))
    a_k = k.let((t & (block_k // loads_a - 1)) * loads_a)
    b_k = k.let(t // (bn // loads_b))
    b_c = k.let((t & (bn // loads_b - 1)) * loads_b)
    a_ok = k.let(row0 + a_r < m)
    a_base = k.let((row0 + a_r) * kk)
    b_col = k.let(col0 + b_c)
    # the edge padding: a named 0 (not a literal), so every staged value is a load or this
    # variable and the WGSL printer stores it unfenced (wgpu/fences.py: a fence there made
    # NVIDIA's Vulkan compiler wait for the prefetch right away, H100 sweep of session 17.1)
    zero = k.let(0.0)
    pa = [k.let(0.0) for _ in range(loads_a)]
    pb = [k.let(0.0) for _ in range(loads_b)]

    def fetch(k0: Value) -> None:
        ka = k.let(k0 + a_k)
        kb = k.let(k0 + b_k)
        b_base = k.let(kb * n + b_col)
        b_ok = k.let(kb < kk)
        if not split:
            for e in range(loads_a):
                pa[e].set(select(a_ok & (ka + e < kk), a[a_base + ka + e], zero))
            for e in range(loads_b):
                pb[e].set(select(b_ok & (b_col + e < n), b[b_base + e], zero))
            return
        # a run wholly inside the matrix (all but the edge tiles) is read without the
        # per-element tests: the same values, and consecutive unguarded loads a backend
        # can merge into one vector load
        with k.if_(a_ok & (ka + (loads_a - 1) < kk)):
            for e in range(loads_a):
                pa[e].set(a[a_base + ka + e])
        with k.else_():
            for e in range(loads_a):
                pa[e].set(select(a_ok & (ka + e < kk), a[a_base + ka + e], zero))
        with k.if_(b_ok & (b_col + (loads_b - 1) < n)):
            for e in range(loads_b):
                pb[e].set(b[b_base + e])
        with k.else_():
            for e in range(loads_b):
                pb[e].set(select(b_ok & (b_col + e < n), b[b_base + e], zero))

    acc = [[k.let(0.0) for _ in range(pn)] for _ in range(pm)]
    fetch(k.lit(0, u32))
    ntiles = (kk + (block_k - 1)) // block_k
    slab_a, slab_b = block_k * bm, block_k * bn

    def stage(half_a: Value, half_b: Value) -> None:  # the fetched slabs into one half
        for e in range(loads_a):
            sa[half_a + ((a_k + e) * bm + a_r)] = pa[e]
        for e in range(loads_b):
            sb[half_b + (b_k * bn + b_c + e)] = pb[e]

    stage(k.lit(0, u32), k.lit(0, u32))
    k.barrier()
    with k.for_range(0, ntiles) as s:
        # double-buffered: slab s is read from one half while slab s+1 is fetched into
        # locals and then staged into the other half, so one barrier per K step suffices
        cur_a = k.let((s & 1) * slab_a)
        cur_b = k.let((s & 1) * slab_b)
        fetch((s + 1) * block_k)  # the next slab is in flight during the arithmetic

        def k_step(q: Value | int) -> None:  # k = slab start + q, in increasing order
            av = [k.let(sa[cur_a + (ta + (q * bm + _spread(i, side_m, gm)))])
                  for i in range(pm)]
            bv = [k.let(sb[cur_b + (tb + (q * bn + _spread(j, side_n, gn)))])
                  for j in range(pn)]
            for i in range(pm):
                for j in range(pn):
                    acc[i][j].set(fma(av[i], bv[j], acc[i][j]))

        if unroll:
            for step in range(block_k):
                k_step(step)
        else:
            with k.for_range(0, block_k) as q_var:
                k_step(q_var)
        stage(slab_a - cur_a, slab_b - cur_b)
        k.barrier()
    for i in range(pm):
        row = k.let(row0 + ta + _spread(i, side_m, gm))
        with k.if_(row < m):
            for j in range(pn):
                col = k.let(col0 + tb + _spread(j, side_n, gn))
                with k.if_(col < n):
                    c[row * n + col] = acc[i][j]
    return k.build()


def matmul_config(
    m: int, n: int, kdim: int, block: Side = BLOCK, per_thread: Side = PER_THREAD,
    block_k: int = BLOCK_K,
) -> DispatchConfig:
    _check_shape(block, per_thread, block_k)
    bm, bn = _pair(block)
    gx, gy = ceil_div(n, bn), ceil_div(m, bm)
    if gx > MAX_GRID_DIM or gy > MAX_GRID_DIM:
        raise LibraryArgumentError(f"matmul of {m} x {n} needs more than {MAX_GRID_DIM} tiles per "
                                   "side; use a larger block or split the product into parts")
    return DispatchConfig(grid=(gx, gy, 1), params={"M": m, "N": n, "K": kdim})


def matmul_device(
    backend: Backend, a: DeviceBuffer, b: DeviceBuffer, c: DeviceBuffer, m: int, n: int,
    kdim: int, tiles: Tiles | None = None,
) -> Timing | None:
    """C = A @ B on resident buffers with `tiles` (default: tiles_for(backend)). Skips the
    dispatch when C is empty (M or N == 0); with K == 0 the kernel writes zeros."""
    check_room("matmul_device", ("a", a, f32, m * kdim), ("b", b, f32, kdim * n),
               ("c", c, f32, m * n))
    if m == 0 or n == 0:
        return None
    t = tiles_for(backend) if tiles is None else tiles
    return backend.dispatch_with_device_buffers(
        matmul_program(*t), {"a": a, "b": b}, {"c": c},
        matmul_config(m, n, kdim, t.block, t.per_thread, t.block_k),
    )


def matmul_host(
    backend: Backend, a: np.ndarray, b: np.ndarray, *, block: Side | None = None,
    per_thread: Side | None = None, block_k: int | None = None, split: bool | None = None,
) -> np.ndarray:
    """Upload A (M x K) and B (K x N) as f32, multiply on `backend`, read back C (M x N).
    block / per_thread / block_k / split choose the kernel (the result does not depend on
    them): with none of them, tiles_for(backend); otherwise the missing ones from
    Tiles()."""
    a, _ = host_array(a, "matmul_host")
    b, _ = host_array(b, "matmul_host")
    if a.ndim != 2 or b.ndim != 2:
        raise LibraryArgumentError(f"matmul takes two 2-D matrices, got shapes {a.shape} @ "
                                   f"{b.shape}; reshape a vector to (1, k) or (k, 1)")
    if a.dtype != np.float32 or b.dtype != np.float32:
        raise LibraryArgumentError(f"matmul takes float32 matrices, got {a.dtype} @ {b.dtype}; convert "
                                   "with .astype(np.float32)")
    (m, kdim), (k2, n) = a.shape, b.shape
    if kdim != k2:
        raise LibraryArgumentError(f"inner dimensions differ: {a.shape} @ {b.shape}; A's columns must "
                                   "equal B's rows (transpose one of them?)")
    tiles = None
    if (block, per_thread, block_k, split) != (None, None, None, None):
        d = Tiles()
        tiles = Tiles(d.block if block is None else block,
                      d.per_thread if per_thread is None else per_thread,
                      d.block_k if block_k is None else block_k,
                      d.split if split is None else split)
    ab, bb = upload(backend, a, "matmul_a"), upload(backend, b, "matmul_b")
    cb = alloc(backend, f32, m * n, "matmul_c")
    try:
        matmul_device(backend, ab, bb, cb, m, n, kdim, tiles)
        return read_elems(backend, cb, f32, m * n).reshape(m, n)
    finally:
        for buf in (ab, bb, cb):
            backend.free(buf)


def _fma_f32(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """f32 fma(a, b, c) with one rounding: a*b is exact in f64 (2 x 24 bits), the f64 sum is
    rounded to odd (TwoSum error decides), and rounding that to f32 is then correct."""
    p = a.astype(np.float64) * b.astype(np.float64)
    c64 = c.astype(np.float64)
    s = p + c64
    bb = s - p
    err = (p - (s - bb)) + (c64 - bb)
    with np.errstate(invalid="ignore"):
        fix = np.isfinite(s) & np.isfinite(err) & (err != 0) & ((s.view(np.int64) & 1) == 0)
    if fix.any():
        s = np.where(fix, np.nextafter(s, np.where(err > 0, np.inf, -np.inf)), s)
    return s.astype(np.float32)


def matmul_reference(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The kernel's exact arithmetic in NumPy: f32 acc = fma(a[k], b[k], acc) over k in
    order."""
    acc = np.zeros((a.shape[0], b.shape[1]), dtype=np.float32)
    with np.errstate(invalid="ignore", over="ignore"):
        for j in range(a.shape[1]):
            acc = _fma_f32(a[:, j, None], b[None, j, :], acc)
    return acc


def matmul_error_bound(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Per-element bound on |C - A@B (float64)|: K * 2^-24 * (|A| @ |B|), plus 1 ulp slack."""
    kdim = a.shape[1]
    mag = np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64))
    return (kdim + 1) * 2.0**-24 * mag + np.finfo(np.float32).tiny
