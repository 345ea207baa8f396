"""Exact 8-bit integer matrix multiply: C[M, N] (i32) = A[M, K] @ B[K, N] for int8 x int8
or uint8 x uint8 bytes, the same integers on every backend (a sum of byte products wraps
modulo 2^32 like every IR integer add, and integer addition has no order to disagree on).

What a user passes: `matmul_i8_host(backend, a, b)` takes int8 (or uint8) NumPy matrices
and returns int32 (`torch._int_mm`'s contract, plus uint8). On resident buffers the
operands are *packed*: four consecutive bytes along K in one u32 word (byte i of word w is
element 4w + i, little-endian), each row padded with zero bytes to K4 words, a multiple of
4 (`pack_i8`, and `packed_words(k)` for the size). A is packed by rows (M x K4 words) and B
by columns, i.e. `pack_i8(b.T)` (N x K4 words): both operands are then read along K. Zero
padding adds nothing to any sum, so the result does not depend on it.

Two kernels give the same bits:
- `matmul_i8_program`, a Program (every backend): a workgroup of 256 invocations computes a
  64 x 64 tile of C, each invocation 4 x 4 outputs, staging 8 words of K of A and B per
  step in workgroup memory; each output is acc = dot4_i8(a_word, b_word, acc) over the
  words (docs/IR.md: the IR's packed dot product; `__dp4a` on CUDA, `dot4I8Packed` on
  WebGPU).
- on CUDA devices with int8 tensor cores (sm_80 and later), `matmul_i8_cuda`'s `mma.sync`
  kernel (library-only CUDA C: a fragment of 16 x 8 outputs held by a warp has no
  Program form). `matmul_i8_device(..., kernel="auto")` picks it there; `kernel="program"`
  forces the Program, `kernel="mma"` the tensor cores (UnsupportedFeature elsewhere).

`matmul_i8_reference` computes the same integers in NumPy (int64 products, wrapped).
This module must never saturate, and never pick a kernel whose bits could differ.
"""

from __future__ import annotations

from functools import cache
from typing import Literal

import numpy as np

from vyre.binding import validate_buffer_ownership
from vyre.buffer import DeviceBuffer
from vyre.builder import ProgramBuilder, dot4_i8, dot4_u8, select
from vyre.config import MAX_GRID_DIM, DispatchConfig
from vyre.errors import BufferOwnershipError, BufferStateError, UnsupportedFeature
from vyre.interface import Backend
from vyre.ir.nodes import Program

from ._common import LibraryArgumentError, alloc, ceil_div, i32, read_elems, u32, upload

#: C tile per workgroup (square), outputs per invocation per side, K words per step
BLOCK = 64
PER_THREAD = 4
BLOCK_KW = 8
#: a packed row holds a multiple of this many words (the tensor-core kernel's 16-byte loads)
WORD_ALIGN = 4
Kernel = Literal["auto", "program", "mma"]


def packed_words(k: int) -> int:
    """Words per packed row of K bytes: ceil(K / 4), rounded up to a multiple of 4."""
    return -(-k // (4 * WORD_ALIGN)) * WORD_ALIGN


def pack_i8(x: np.ndarray) -> np.ndarray:
    """A (rows, K) int8 or uint8 matrix as (rows, packed_words(K)) uint32 words, four bytes
    along K per word, zero-padded. Pack B as `pack_i8(b.T)`."""
    _check_bytes(x, "pack_i8")
    rows, k = x.shape
    out = np.zeros((rows, packed_words(k) * 4), np.uint8)
    out[:, :k] = x.view(np.uint8)
    return out.view("<u4").reshape(rows, -1)


def _check_bytes(x: np.ndarray, what: str) -> None:
    if not isinstance(x, np.ndarray) or x.dtype not in (np.int8, np.uint8) or x.ndim != 2:
        got = f"{x.dtype} array of shape {x.shape}" if isinstance(x, np.ndarray) else type(x).__name__
        raise LibraryArgumentError(f"{what} takes a 2-D int8 or uint8 matrix, got {got}; convert "
                                   "with .astype(np.int8) (values must fit in 8 bits)")


@cache
def matmul_i8_program(signed: bool = True, block: int = BLOCK, per_thread: int = PER_THREAD,
                      block_kw: int = BLOCK_KW) -> Program:
    """C[M, N] (i32) = A @ B on packed operands a (M x K4 words), bt (N x K4 words); params
    M, N, K4; grid (ceil(N / block), ceil(M / block)). `signed`: i8 bytes (else u8).
    `block` / `per_thread` / `block_kw`: tuning knobs (the bits never depend on them)."""
    side = block // per_thread
    wg = side * side
    if block % per_thread or wg > 1024 or (block * block_kw) % wg or block_kw < 1:
        raise LibraryArgumentError(
            f"block {block}, per_thread {per_thread}, block_kw {block_kw}: needs "
            f"{wg} invocations (at most 1024) dividing block * block_kw; leave them out "
            f"for the defaults ({BLOCK}, {PER_THREAD}, {BLOCK_KW})")
    loads = block * block_kw // wg  # words of A (and of B) each invocation stages per step
    ty = "i8" if signed else "u8"
    k = ProgramBuilder(f"matmul_{ty}_{block}x{per_thread}x{block_kw}", wg)
    a = k.buffer("a", u32)
    bt = k.buffer("bt", u32)
    c = k.buffer("c", i32, "write")
    m = k.param("M", u32)
    n = k.param("N", u32)
    k4 = k.param("K4", u32)
    sa = k.shared("tile_a", u32, block_kw * block)  # word-major: [q * block + row]
    sb = k.shared("tile_b", u32, block_kw * block)
    t = k.let(k.local_index() & (wg - 1))
    tr = k.let(t // side)
    tc = k.let(t & (side - 1))
    row0 = k.let(k.workgroup_id(1) * block)
    col0 = k.let(k.workgroup_id(0) * block)
    zero = k.let(k.lit(0, u32))
    acc = [[k.let(k.lit(0, i32) if signed else k.lit(0, u32)) for _ in range(per_thread)]
           for _ in range(per_thread)]
    dot = dot4_i8 if signed else dot4_u8
    with k.for_range(0, (k4 + (block_kw - 1)) // block_kw) as step:
        kw0 = k.let(step * block_kw)
        for e in range(loads):  # flat f = t * loads + e: row f // block_kw, word f % block_kw
            f = t * loads + e
            r = k.let(f // block_kw)
            q = k.let(f & (block_kw - 1)) if block_kw & (block_kw - 1) == 0 else k.let(f % block_kw)
            kw = k.let(kw0 + q)
            ra, cb = k.let(row0 + r), k.let(col0 + r)
            sa[q * block + r] = select((ra < m) & (kw < k4), a[ra * k4 + kw], zero)
            sb[q * block + r] = select((cb < n) & (kw < k4), bt[cb * k4 + kw], zero)
        k.barrier()
        with k.for_range(0, block_kw) as q:
            av = [k.let(sa[q * block + (tr + side * i)]) for i in range(per_thread)]
            bv = [k.let(sb[q * block + (tc + side * j)]) for j in range(per_thread)]
            for i in range(per_thread):
                for j in range(per_thread):
                    acc[i][j].set(dot(av[i], bv[j], acc[i][j]))
        k.barrier()
    for i in range(per_thread):
        row = k.let(row0 + tr + side * i)
        with k.if_(row < m):
            for j in range(per_thread):
                col = k.let(col0 + tc + side * j)
                with k.if_(col < n):
                    c[row * n + col] = acc[i][j] if signed else acc[i][j].bitcast(i32)
    return k.build()


def matmul_i8_config(m: int, n: int, k4: int, block: int = BLOCK) -> DispatchConfig:
    gx, gy = ceil_div(n, block), ceil_div(m, block)
    if gx > MAX_GRID_DIM or gy > MAX_GRID_DIM:
        raise LibraryArgumentError(f"matmul_i8 of {m} x {n} needs more than {MAX_GRID_DIM} "
                                   "tiles per side; split the product into parts")
    return DispatchConfig(grid=(gx, gy, 1), params={"M": m, "N": n, "K4": k4})


def tensor_cores(backend: Backend) -> bool:
    """Whether `backend` runs the tensor-core kernel: CUDA on sm_80 or later."""
    if backend.kind != "cuda":
        return False
    cc = backend.capabilities().details.get("compute_capability", (0, 0))
    return tuple(cc) >= (8, 0)


def _check_buffers(backend: Backend, bufs: list[DeviceBuffer]) -> None:
    """Live buffers of `backend`: a local backend's by the binding's own check; a remote
    backend's handles (vyre.distributed) by their owner and state, as its dispatch would
    (an empty product dispatches nothing, so it would never look)."""
    if not any(type(b).__module__.startswith("vyre.distributed.") for b in bufs):
        validate_buffer_ownership(backend, bufs)
        return
    for i, b in enumerate(bufs):
        if not type(b).__module__.startswith("vyre.distributed."):
            validate_buffer_ownership(backend, [b])  # (host data, a local buffer: its words)
        if getattr(b, "owner", None) is not backend:
            raise BufferOwnershipError(
                f"buffer {i} ({getattr(b, 'label', None) or type(b).__name__}) does not belong "
                f"to {backend.id!r}; move it explicitly with vyre.transfer(buffer, backend) or "
                "allocate it with this backend's allocate_device_buffer")
        if getattr(b, "freed", False):
            raise BufferStateError(
                f"buffer {i} ({getattr(b, 'label', None)!r}) was freed and cannot be used; "
                "allocate a new buffer")


def matmul_i8_device(backend: Backend, a: DeviceBuffer, bt: DeviceBuffer, c: DeviceBuffer,
                     m: int, n: int, k: int, *, signed: bool = True,
                     kernel: Kernel = "auto") -> None:
    """C = A @ B on resident buffers: `a` holds pack_i8(A) (M x packed_words(K) words),
    `bt` pack_i8(B.T) (N x packed_words(K)), `c` M * N i32. Enqueues the work and returns
    (read `c` to wait). `kernel`: "auto" (tensor cores where `tensor_cores(backend)`, else
    the Program), "program" or "mma"."""
    if kernel not in ("auto", "program", "mma"):
        raise LibraryArgumentError(f"kernel {kernel!r} is not one of 'auto', 'program', 'mma'")
    _check_buffers(backend, [a, bt, c])  # before their sizes are read
    k4 = packed_words(k)
    for buf, rows, what in ((a, m, "a"), (bt, n, "bt")):
        if buf.byte_len < rows * k4 * 4:
            raise LibraryArgumentError(
                f"matmul_i8: {what} holds {buf.byte_len} bytes, fewer than {rows} rows of "
                f"{k4} packed words ({rows * k4 * 4} bytes) for K = {k}; pack it with pack_i8")
    if c.byte_len < m * n * 4:
        raise LibraryArgumentError(f"matmul_i8: c holds {c.byte_len} bytes, fewer than "
                                   f"{m} x {n} i32 ({m * n * 4} bytes)")
    if m == 0 or n == 0:
        return
    mma = tensor_cores(backend)
    if kernel == "mma" and not mma:
        raise UnsupportedFeature(
            "int8 tensor cores", backend.id,
            "the mma kernel needs CUDA on sm_80 or later; pass kernel='program' (the same "
            "bits on every backend) or 'auto'")
    if kernel != "program" and mma:
        from vyre.backends.cuda import native

        from .matmul_i8_cuda import mma_grid, mma_kernel

        native.launch(backend, mma_kernel(signed), mma_grid(m, n), [a, bt, c],
                      [("I", m), ("I", n), ("I", k4)])
        return
    backend.dispatch_with_device_buffers(
        matmul_i8_program(signed), {"a": a, "bt": bt}, {"c": c}, matmul_i8_config(m, n, k4))


def matmul_i8_host(backend: Backend, a: np.ndarray, b: np.ndarray, *,
                   kernel: Kernel = "auto") -> np.ndarray:
    """int32 C = A @ B for int8 (or uint8) A (M x K) and B (K x N), both of one type:
    packed, uploaded, multiplied on `backend`, read back (sums wrap modulo 2^32)."""
    _check_bytes(a, "matmul_i8 A")
    _check_bytes(b, "matmul_i8 B")
    if a.dtype != b.dtype:
        raise LibraryArgumentError(f"matmul_i8 multiplies int8 @ int8 or uint8 @ uint8, got "
                                   f"{a.dtype} @ {b.dtype}; convert one of them")
    (m, k), (k2, n) = a.shape, b.shape
    if k != k2:
        raise LibraryArgumentError(f"inner dimensions differ: {a.shape} @ {b.shape}; A's "
                                   "columns must equal B's rows (transpose one of them?)")
    ab = upload(backend, pack_i8(a), "matmul_i8_a")
    bb = upload(backend, pack_i8(np.ascontiguousarray(b.T)), "matmul_i8_bt")
    cb = alloc(backend, i32, m * n, "matmul_i8_c")
    try:
        matmul_i8_device(backend, ab, bb, cb, m, n, k, signed=a.dtype == np.int8,
                         kernel=kernel)
        return read_elems(backend, cb, i32, m * n).reshape(m, n)
    finally:
        for buf in (ab, bb, cb):
            backend.free(buf)


def matmul_i8_reference(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The exact result in NumPy: int64 products summed, wrapped to int32 (blocks of K
    keep every int64 partial sum far from overflow)."""
    acc = np.zeros((a.shape[0], b.shape[1]), np.int64)
    a64, b64 = a.astype(np.int64), b.astype(np.int64)
    for k0 in range(0, a.shape[1], 1 << 16):
        acc = (acc + a64[:, k0:k0 + (1 << 16)] @ b64[k0:k0 + (1 << 16)]) & 0xFFFFFFFF
    return acc.astype(np.uint32).view(np.int32)


__all__ = [
    "BLOCK", "BLOCK_KW", "PER_THREAD", "WORD_ALIGN", "matmul_i8_config", "matmul_i8_device",
    "matmul_i8_host", "matmul_i8_program", "matmul_i8_reference", "pack_i8", "packed_words",
    "tensor_cores",
]
