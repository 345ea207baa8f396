"""Matrix multiply C = A @ B for row-major f32 matrices of any M, N, K (incl. sizes that
are not multiples of the tile), tiled through workgroup memory.

A 16 x 16 workgroup computes a 16 x 16 tile of C; it walks K in steps of 16, staging a tile
of A and of B in workgroup memory (zero-padded past the edges) between two barriers. Each
output accumulates acc = acc + a[k] * b[k] for k = 0, 1, ..., K-1 (then + 0*0 for the
padding), a fixed order with no fma contraction, so every backend, the reference included,
produces the same bits. Against a float64 product the error is within
K * 2^-24 * (|A| @ |B|) per element. M and N are limited to 65535 tiles each
(1,048,560 rows / columns). This module must never accumulate in a different order per
backend or read data back between dispatches.
"""

from __future__ import annotations

from functools import cache

import numpy as np

from vyre.backend import BaseBackend
from vyre.buffer import BufferBase
from vyre.builder import ProgramBuilder, select
from vyre.config import MAX_GRID_DIM, DispatchConfig, Timing
from vyre.ir.nodes import Program

from ._common import alloc, ceil_div, f32, read_elems, u32, upload

TILE = 16


@cache
def matmul_program(tile: int = TILE) -> Program:
    """C[M, N] = A[M, K] @ B[K, N] (params M, N, K; grid (ceil(N/tile), ceil(M/tile)))."""
    k = ProgramBuilder(f"matmul_f32_tile{tile}", (tile, tile))
    a = k.buffer("a", f32)
    b = k.buffer("b", f32)
    c = k.buffer("c", f32, "write")
    m = k.param("M", u32)
    n = k.param("N", u32)
    kk = k.param("K", u32)
    ta = k.shared("tile_a", f32, tile * tile)
    tb = k.shared("tile_b", f32, tile * tile)
    tx = k.let(k.local_id(0))
    ty = k.let(k.local_id(1))
    col = k.let(k.workgroup_id(0) * tile + tx)
    row = k.let(k.workgroup_id(1) * tile + ty)
    acc = k.let(0.0)
    ntiles = (kk + (tile - 1)) // tile
    with k.for_range(0, ntiles) as s:
        ka = k.let(s * tile + tx)
        ta[ty * tile + tx] = select((row < m) & (ka < kk), a[row * kk + ka], 0.0)
        kb = k.let(s * tile + ty)
        tb[ty * tile + tx] = select((kb < kk) & (col < n), b[kb * n + col], 0.0)
        k.barrier()
        for j in range(tile):
            acc.set(acc + ta[ty * tile + j] * tb[j * tile + tx])
        k.barrier()
    with k.if_((row < m) & (col < n)):
        c[row * n + col] = acc
    return k.build()


def matmul_config(m: int, n: int, kdim: int, tile: int = TILE) -> DispatchConfig:
    gx, gy = ceil_div(n, tile), ceil_div(m, tile)
    if gx > MAX_GRID_DIM or gy > MAX_GRID_DIM:
        raise ValueError(f"matmul of {m} x {n} needs more than {MAX_GRID_DIM} tiles per side")
    return DispatchConfig(grid=(gx, gy, 1), params={"M": m, "N": n, "K": kdim})


def matmul_device(
    backend: BaseBackend, a: BufferBase, b: BufferBase, c: BufferBase, m: int, n: int,
    kdim: int, tile: int = TILE,
) -> Timing | None:
    """C = A @ B on resident buffers. Skips the dispatch when C is empty (M or N == 0);
    with K == 0 the kernel writes zeros."""
    if m == 0 or n == 0:
        return None
    return backend.dispatch_with_device_buffers(
        matmul_program(tile), {"a": a, "b": b}, {"c": c}, matmul_config(m, n, kdim, tile)
    )


def matmul_host(backend: BaseBackend, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Upload A (M x K) and B (K x N) as f32, multiply on `backend`, read back C (M x N)."""
    if a.dtype != np.float32 or b.dtype != np.float32:
        raise ValueError("matmul takes float32 matrices")
    (m, kdim), (k2, n) = a.shape, b.shape
    if kdim != k2:
        raise ValueError(f"inner dimensions differ: {a.shape} @ {b.shape}")
    ab, bb = upload(backend, a, "matmul_a"), upload(backend, b, "matmul_b")
    cb = alloc(backend, f32, m * n, "matmul_c")
    try:
        matmul_device(backend, ab, bb, cb, m, n, kdim)
        return read_elems(backend, cb, f32, m * n).reshape(m, n)
    finally:
        for buf in (ab, bb, cb):
            backend.free(buf)


def matmul_reference(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The kernel's exact arithmetic in NumPy: f32 acc = acc + a*b over k in order."""
    acc = np.zeros((a.shape[0], b.shape[1]), dtype=np.float32)
    for j in range(a.shape[1]):
        acc = acc + np.outer(a[:, j], b[j, :]).astype(np.float32)
    return acc


def matmul_error_bound(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Per-element bound on |C - A@B (float64)|: K * 2^-24 * (|A| @ |B|), plus 1 ulp slack."""
    kdim = a.shape[1]
    mag = np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64))
    return (kdim + 1) * 2.0**-24 * mag + np.finfo(np.float32).tiny
