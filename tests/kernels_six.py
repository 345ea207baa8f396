"""Six kernels of different shapes, each written twice: with `@vyre.kernel` and with the
builder. tests/test_kernel_six.py checks both give bit-identical results on every backend;
scripts/kernel_lines.py counts their lines (for the comparison with Warp / Triton).

Each pair is one function `<name>_decorated` (a vyre.Kernel) and one `<name>_builder()`
(returning a Program); the kernel bodies are written the same way so the line counts
compare the notations, not the algorithms.
"""

from __future__ import annotations

import vyre
from vyre import Buffer, InOut, Output, ProgramBuilder, f32, select, u32
from vyre.ir.nodes import Program

T = 16  # matmul tile side
WG = 256

# ----------------------------------------------------------------- 1. stencil (2-D)


@vyre.kernel(workgroup_size=(16, 16))
def stencil_decorated(u: Buffer[f32], out: Output[f32], H: u32, W: u32) -> None:
    x, y = vyre.global_id(0), vyre.global_id(1)
    if x < W and y < H:
        north = u[(y - 1 if y > 0 else y) * W + x]
        south = u[(y + 1 if y + 1 < H else y) * W + x]
        west = u[y * W + (x - 1 if x > 0 else x)]
        east = u[y * W + (x + 1 if x + 1 < W else x)]
        out[y * W + x] = (((-4.0 * u[y * W + x] + north) + south) + west) + east


def stencil_builder() -> Program:
    k = ProgramBuilder("stencil", (16, 16))
    u = k.buffer("u", f32)
    out = k.buffer("out", f32, "write")
    h, w = k.param("H", u32), k.param("W", u32)
    x, y = k.global_id(0), k.global_id(1)
    with k.if_((x < w) & (y < h)):
        north = u[select(y > 0, y - 1, y) * w + x]
        south = u[select(y + 1 < h, y + 1, y) * w + x]
        west = u[y * w + select(x > 0, x - 1, x)]
        east = u[y * w + select(x + 1 < w, x + 1, x)]
        out[y * w + x] = (((-4.0 * u[y * w + x] + north) + south) + west) + east
    return k.build()


# ----------------------------------------------------------------- 2. reduction (workgroup memory)


@vyre.kernel(workgroup_size=WG)
def block_sum_decorated(x: Buffer[f32], partial: Output[f32]) -> None:
    tmp = vyre.shared(f32, WG)
    t = vyre.local_index()
    tmp[t] = x[vyre.global_linear_id()]  # a load past the end reads 0
    vyre.barrier()
    s = WG // 2
    while s > 0:  # a Python loop on a Python int: unrolled at build time
        if t < s:  # on a kernel value: per invocation
            tmp[t] = tmp[t] + tmp[t + s]
        vyre.barrier()
        s //= 2
    if t == 0:
        partial[vyre.workgroup_linear_id()] = tmp[0]


def block_sum_builder() -> Program:
    k = ProgramBuilder("block_sum", WG)
    x = k.buffer("x", f32)
    partial = k.buffer("partial", f32, "write")
    tmp = k.shared("tmp", f32, WG)
    t = k.local_index()
    tmp[t] = x[k.global_linear_id()]
    k.barrier()
    s = WG // 2
    while s > 0:
        with k.if_(t < s):
            tmp[t] = tmp[t] + tmp[t + s]
        k.barrier()
        s //= 2
    with k.if_(t == 0):
        partial[k.workgroup_linear_id()] = tmp[0]
    return k.build()


# ----------------------------------------------------------------- 3. scan (per block)


@vyre.kernel(workgroup_size=WG)
def block_scan_decorated(x: Buffer[u32], y: Output[u32]) -> None:
    buf = vyre.shared(u32, 2 * WG)  # two halves: read one, write the other
    t, i = vyre.local_index(), vyre.global_linear_id()
    buf[t] = x[i]
    vyre.barrier()
    src, off = 0, 1
    while off < WG:  # Hillis-Steele, unrolled at build time
        v = buf[src + t]
        if t >= off:
            v += buf[src + t - off]
        buf[WG - src + t] = v
        vyre.barrier()
        src, off = WG - src, off * 2
    if i < x.length():
        y[i] = buf[src + t]


def block_scan_builder() -> Program:
    k = ProgramBuilder("block_scan", WG)
    x = k.buffer("x", u32)
    y = k.buffer("y", u32, "write")
    buf = k.shared("buf", u32, 2 * WG)
    t, i = k.local_index(), k.global_linear_id()
    buf[t] = x[i]
    k.barrier()
    src, off = 0, 1
    while off < WG:
        v = k.let(buf[src + t])
        with k.if_(t >= off):
            v += buf[src + t - off]
        buf[WG - src + t] = v
        k.barrier()
        src, off = WG - src, off * 2
    with k.if_(i < x.length()):
        y[i] = buf[src + t]
    return k.build()


# ----------------------------------------------------------------- 4. time-stepped solver (LU)
# Doolittle LU without pivoting, in place: step k updates the trailing block from column k
# (which it only reads), then scales column k. Two Steps with index_param="k", repeat n-1.


@vyre.kernel(workgroup_size=(16, 16))
def lu_update_decorated(a: InOut[f32], n: u32, k: u32) -> None:
    j, i = vyre.global_id(0) + k + 1, vyre.global_id(1) + k + 1
    if i < n and j < n:
        a[i * n + j] = a[i * n + j] - (a[i * n + k] / a[k * n + k]) * a[k * n + j]


@vyre.kernel(workgroup_size=64)
def lu_scale_decorated(a: InOut[f32], n: u32, k: u32) -> None:
    i = vyre.global_id(0) + k + 1
    if i < n:
        a[i * n + k] = a[i * n + k] / a[k * n + k]


def lu_update_builder() -> Program:
    b = ProgramBuilder("lu_update", (16, 16))
    a = b.buffer("a", f32, "read_write")
    n, k = b.param("n", u32), b.param("k", u32)
    j, i = b.global_id(0) + k + 1, b.global_id(1) + k + 1
    with b.if_((i < n) & (j < n)):
        a[i * n + j] = a[i * n + j] - (a[i * n + k] / a[k * n + k]) * a[k * n + j]
    return b.build()


def lu_scale_builder() -> Program:
    b = ProgramBuilder("lu_scale", 64)
    a = b.buffer("a", f32, "read_write")
    n, k = b.param("n", u32), b.param("k", u32)
    i = b.global_id(0) + k + 1
    with b.if_(i < n):
        a[i * n + k] = a[i * n + k] / a[k * n + k]
    return b.build()


# ----------------------------------------------------------------- 5. histogram (atomics)


@vyre.kernel(workgroup_size=WG)
def histogram_decorated(src: Buffer[u32], bins: InOut[u32], n: u32, *,
                        nbins: int = 64) -> None:
    local = vyre.shared(u32, nbins)  # sized by the build-time constant
    t, i = vyre.local_index(), vyre.global_linear_id()
    for r in range(0, nbins, WG):  # build time: ceil(nbins / WG) rounds
        if t + r < nbins:
            local[t + r] = 0
    vyre.barrier()
    if i < n and src[i] < nbins:
        local.atomic_add(src[i], 1)
    vyre.barrier()
    for r in range(0, nbins, WG):
        if t + r < nbins and local[t + r] != 0:
            bins.atomic_add(t + r, local[t + r])


def histogram_builder(nbins: int = 64) -> Program:
    k = ProgramBuilder(f"histogram_nbins{nbins}", WG)
    src = k.buffer("src", u32)
    bins = k.buffer("bins", u32, "read_write")
    n = k.param("n", u32)
    local = k.shared("local", u32, nbins)
    t, i = k.local_index(), k.global_linear_id()
    for r in range(0, nbins, WG):
        with k.if_(t + r < nbins):
            local[t + r] = 0
    k.barrier()
    with k.if_(i < n):
        v = src[i]
        with k.if_(v < nbins):
            local.atomic_add(v, 1)
    k.barrier()
    for r in range(0, nbins, WG):
        c = local[t + r]
        with k.if_((t + r < nbins) & (c != 0)):
            bins.atomic_add(t + r, c)
    return k.build()


# ----------------------------------------------------------------- 6. matrix product (tiled)


@vyre.kernel(workgroup_size=(T, T))
def matmul_decorated(a: Buffer[f32], b: Buffer[f32], c: Output[f32], n: u32) -> None:
    ta, tb = vyre.shared(f32, T * T), vyre.shared(f32, T * T)
    tx, ty = vyre.local_id(0), vyre.local_id(1)
    col, row = vyre.workgroup_id(0) * T + tx, vyre.workgroup_id(1) * T + ty
    acc = 0.0
    for k0 in range(0, n, T):  # n is a kernel value: a loop on the device
        ta[ty * T + tx] = a[row * n + k0 + tx] if row < n and k0 + tx < n else 0.0
        tb[ty * T + tx] = b[(k0 + ty) * n + col] if k0 + ty < n and col < n else 0.0
        vyre.barrier()
        for kk in range(T):  # T is a Python int: unrolled at build time
            acc += ta[ty * T + kk] * tb[kk * T + tx]
        vyre.barrier()
    if row < n and col < n:
        c[row * n + col] = acc


def matmul_builder() -> Program:
    k = ProgramBuilder("matmul", (T, T))
    a, b = k.buffer("a", f32), k.buffer("b", f32)
    c = k.buffer("c", f32, "write")
    n = k.param("n", u32)
    ta, tb = k.shared("ta", f32, T * T), k.shared("tb", f32, T * T)
    tx, ty = k.local_id(0), k.local_id(1)
    col, row = k.workgroup_id(0) * T + tx, k.workgroup_id(1) * T + ty
    acc = k.let(0.0)
    with k.for_range(0, n, T) as k0:
        ta[ty * T + tx] = select((row < n) & (k0 + tx < n), a[row * n + k0 + tx], 0.0)
        tb[ty * T + tx] = select((k0 + ty < n) & (col < n), b[(k0 + ty) * n + col], 0.0)
        k.barrier()
        for kk in range(T):
            acc += ta[ty * T + kk] * tb[kk * T + tx]
        k.barrier()
    with k.if_((row < n) & (col < n)):
        c[row * n + col] = acc
    return k.build()


PAIRS = {
    "stencil": (stencil_decorated, stencil_builder),
    "reduction": (block_sum_decorated, block_sum_builder),
    "scan": (block_scan_decorated, block_scan_builder),
    "lu_solver": ((lu_update_decorated, lu_scale_decorated), (lu_update_builder, lu_scale_builder)),
    "histogram": (histogram_decorated, histogram_builder),
    "matmul": (matmul_decorated, matmul_builder),
}
