"""Matrix multiply C = A @ B for row-major f32 matrices of any M, N, K (incl. sizes that
are not multiples of the tile), register-blocked through workgroup memory.

A workgroup of (block / per_thread)^2 invocations computes a block x block tile of C
(default 128 x 128 by 256 invocations, each an 8 x 8 sub-tile held in 64 locals). It walks
K in steps of `block_k`: the next A and B slabs are loaded into locals while the current
ones, staged in workgroup memory (zero-padded past the edges), are multiplied, then staged
into the other half of a double buffer, so global latency overlaps the arithmetic and each
K step needs one barrier. Invocation (tr, tc) owns rows tr + T*i and columns
tc + T*j (T = block / per_thread), which keeps the workgroup-memory reads conflict-free and
the stores of C coalesced.

Each output accumulates acc = fma(a[k], b[k], acc) for k = 0, 1, ..., K-1 (then
fma(0, 0, acc) = acc for the padding): one IR `fma` (a single rounding) per term, in a
fixed order, so every backend, the reference included, produces the same bits, and
`matmul_reference` reproduces them in NumPy. Against a float64 product the error is within
K * 2^-24 * (|A| @ |B|) per element. This module must never accumulate in a different order
per backend or read data back between dispatches.
"""

from __future__ import annotations

from functools import cache

import numpy as np

from vyre.backend import BaseBackend
from vyre.buffer import BufferBase
from vyre.builder import ProgramBuilder, Value, fma, select
from vyre.config import MAX_GRID_DIM, DispatchConfig, Timing
from vyre.ir.nodes import Program

from ._common import alloc, ceil_div, check_pow2, f32, read_elems, u32, upload

#: Default tile of C per workgroup (rows = columns), outputs per invocation per side, and
#: the K step staged in workgroup memory: 128 x 128 x 8 with 8 x 8 outputs (256 invocations).
BLOCK = 128
PER_THREAD = 8
BLOCK_K = 8
#: Kept for callers of the old 16 x 16 kernel: the default tile side.
TILE = BLOCK


def _spread(i: int, side: int, group: int) -> int:
    """Offset of an invocation's i-th row (or column) from its first: runs of `group`
    consecutive ones, `side * group` apart (so a run is one aligned vector in workgroup
    memory and a quarter-warp's runs are contiguous: no bank conflicts)."""
    return (i // group) * side * group + i % group


def _check_shape(block: int, per_thread: int, block_k: int) -> int:
    """The invocations per workgroup of a (block, per_thread, block_k) kernel."""
    for v, what in ((block, "block"), (per_thread, "per_thread"), (block_k, "block_k")):
        check_pow2(v, what)
    if per_thread * per_thread > block:
        raise ValueError(f"per_thread ({per_thread}) squared cannot exceed block ({block})")
    wg = (block // per_thread) ** 2
    if wg > 1024 or (block * block_k) % wg:
        raise ValueError(
            f"block {block}, per_thread {per_thread}, block_k {block_k}: needs "
            f"{wg} invocations, which must be at most 1024 and divide block*block_k"
        )
    return wg


@cache
def matmul_program(
    block: int = BLOCK, per_thread: int = PER_THREAD, block_k: int = BLOCK_K,
    split: bool = True,
) -> Program:
    """C[M, N] = A[M, K] @ B[K, N] (params M, N, K; grid (ceil(N/block), ceil(M/block))).
    `split`: loads of runs wholly inside A / B skip the per-element edge tests (a tuning
    knob: the results are the same bits either way)."""
    wg = _check_shape(block, per_thread, block_k)
    side = block // per_thread  # invocations along each side of the tile
    loads = block * block_k // wg  # elements of A (and of B) each invocation stages per step
    k = ProgramBuilder(f"matmul_f32_{block}x{per_thread}x{block_k}", wg)
    a = k.buffer("a", f32)
    b = k.buffer("b", f32)
    c = k.buffer("c", f32, "write")
    m = k.param("M", u32)
    n = k.param("N", u32)
    kk = k.param("K", u32)
    # A slab transposed (k-major) so both slabs are read along the tile's rows / columns
    sa = k.shared("tile_a", f32, 2 * block_k * block)
    sb = k.shared("tile_b", f32, 2 * block_k * block)
    # masked so the backends can prove every workgroup-memory index in bounds
    t = k.let(k.local_index() & (wg - 1))
    tr = k.let(t // side)
    tc = k.let(t & (side - 1))
    group = min(4, per_thread)  # outputs per run of consecutive rows / columns
    ta = k.let(tr * group)  # first row of the invocation's runs within the tile
    tb = k.let(tc * group)  # first column
    row0 = k.let(k.workgroup_id(1) * block)
    col0 = k.let(k.workgroup_id(0) * block)

    # what invocation t stages: `loads` consecutive elements of one row of A (columns
    # a_k .. of slab row a_r) and of one row of B (slab row b_k, columns b_c ..)
    first = k.let(t * loads)
    a_r = k.let(first // block_k)
    a_k = k.let(first & (block_k - 1))
    b_k = k.let(first // block)
    b_c = k.let(first & (block - 1))
    a_ok = k.let(row0 + a_r < m)
    a_base = k.let((row0 + a_r) * kk)
    b_col = k.let(col0 + b_c)
    pa = [k.let(0.0) for _ in range(loads)]
    pb = [k.let(0.0) for _ in range(loads)]

    def fetch(k0: Value) -> None:
        ka = k.let(k0 + a_k)
        kb = k.let(k0 + b_k)
        b_base = k.let(kb * n + b_col)
        b_ok = k.let(kb < kk)
        if not split:
            for e in range(loads):
                pa[e].set(select(a_ok & (ka + e < kk), a[a_base + ka + e], 0.0))
                pb[e].set(select(b_ok & (b_col + e < n), b[b_base + e], 0.0))
            return
        # a run wholly inside the matrix (all but the edge tiles) is read without the
        # per-element tests: the same values, and consecutive unguarded loads a backend
        # can merge into one vector load
        with k.if_(a_ok & (ka + (loads - 1) < kk)):
            for e in range(loads):
                pa[e].set(a[a_base + ka + e])
        with k.else_():
            for e in range(loads):
                pa[e].set(select(a_ok & (ka + e < kk), a[a_base + ka + e], 0.0))
        with k.if_(b_ok & (b_col + (loads - 1) < n)):
            for e in range(loads):
                pb[e].set(b[b_base + e])
        with k.else_():
            for e in range(loads):
                pb[e].set(select(b_ok & (b_col + e < n), b[b_base + e], 0.0))

    acc = [[k.let(0.0) for _ in range(per_thread)] for _ in range(per_thread)]
    fetch(k.lit(0, u32))
    ntiles = (kk + (block_k - 1)) // block_k
    slab = block_k * block

    def stage(half: Value) -> None:  # the fetched slab into one half of workgroup memory
        for e in range(loads):
            sa[half + ((a_k + e) * block + a_r)] = pa[e]
            sb[half + (b_k * block + b_c + e)] = pb[e]

    stage(k.lit(0, u32))
    k.barrier()
    with k.for_range(0, ntiles) as s:
        # double-buffered: slab s is read from one half while slab s+1 is fetched into
        # locals and then staged into the other half, so one barrier per K step suffices
        cur = k.let((s & 1) * slab)
        fetch((s + 1) * block_k)  # the next slab is in flight during the arithmetic
        for q in range(block_k):
            av = [k.let(sa[cur + (ta + (q * block + _spread(i, side, group)))])
                  for i in range(per_thread)]
            bv = [k.let(sb[cur + (tb + (q * block + _spread(j, side, group)))])
                  for j in range(per_thread)]
            for i in range(per_thread):
                for j in range(per_thread):
                    acc[i][j].set(fma(av[i], bv[j], acc[i][j]))
        stage(slab - cur)
        k.barrier()
    for i in range(per_thread):
        row = k.let(row0 + ta + _spread(i, side, group))
        with k.if_(row < m):
            for j in range(per_thread):
                col = k.let(col0 + tb + _spread(j, side, group))
                with k.if_(col < n):
                    c[row * n + col] = acc[i][j]
    return k.build()


def matmul_config(
    m: int, n: int, kdim: int, block: int = BLOCK, per_thread: int = PER_THREAD,
    block_k: int = BLOCK_K,
) -> DispatchConfig:
    _check_shape(block, per_thread, block_k)
    gx, gy = ceil_div(n, block), ceil_div(m, block)
    if gx > MAX_GRID_DIM or gy > MAX_GRID_DIM:
        raise ValueError(f"matmul of {m} x {n} needs more than {MAX_GRID_DIM} tiles per side")
    return DispatchConfig(grid=(gx, gy, 1), params={"M": m, "N": n, "K": kdim})


def matmul_device(
    backend: BaseBackend, a: BufferBase, b: BufferBase, c: BufferBase, m: int, n: int,
    kdim: int, block: int = BLOCK, per_thread: int = PER_THREAD, block_k: int = BLOCK_K,
    split: bool = True,
) -> Timing | None:
    """C = A @ B on resident buffers. Skips the dispatch when C is empty (M or N == 0);
    with K == 0 the kernel writes zeros."""
    if m == 0 or n == 0:
        return None
    return backend.dispatch_with_device_buffers(
        matmul_program(block, per_thread, block_k, split), {"a": a, "b": b}, {"c": c},
        matmul_config(m, n, kdim, block, per_thread, block_k),
    )


def matmul_host(backend: BaseBackend, a: np.ndarray, b: np.ndarray, **kw: int) -> np.ndarray:
    """Upload A (M x K) and B (K x N) as f32, multiply on `backend`, read back C (M x N).
    `kw`: block / per_thread / block_k / split of the kernel (the result does not depend
    on them)."""
    if a.dtype != np.float32 or b.dtype != np.float32:
        raise ValueError("matmul takes float32 matrices")
    (m, kdim), (k2, n) = a.shape, b.shape
    if kdim != k2:
        raise ValueError(f"inner dimensions differ: {a.shape} @ {b.shape}")
    ab, bb = upload(backend, a, "matmul_a"), upload(backend, b, "matmul_b")
    cb = alloc(backend, f32, m * n, "matmul_c")
    try:
        matmul_device(backend, ab, bb, cb, m, n, kdim, **kw)
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
