"""Sparse matrix times vector in CSR form (SHOC's scalar SpMV: one invocation per row), then
a few steps of power iteration on a 2-D Laplacian to find its largest eigenvalue.

    python examples/spmv.py [--backend wgpu] [--grid 64 --iters 50]

CSR: `row_ptr[r] .. row_ptr[r + 1]` index the row's entries in `cols` and `vals`. Each row
sums its products in column order with f32 + and *: exact IEEE arithmetic in one fixed
order, so every backend gives the same bits. The vector stays on the device; only its norm
is computed on the host between steps.
"""

from __future__ import annotations

import sys

import _harness as h  # examples/_harness.py: every backend vs the reference, PNG writing
import numpy as np

import vyre
from vyre import Buffer, Output, f32, u32


@vyre.kernel(workgroup_size=128)
def spmv_csr(row_ptr: Buffer[u32], cols: Buffer[u32], vals: Buffer[f32], x: Buffer[f32],
             y: Output[f32], rows: u32):
    r = vyre.global_linear_id()
    if r < rows:
        acc = 0.0
        for e in range(row_ptr[r], row_ptr[r + 1]):     # kernel-value bounds: a device loop
            acc += vals[e] * x[cols[e]]
        y[r] = acc


def laplacian(g: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The 5-point Laplacian of a g x g grid (Dirichlet), in CSR: row_ptr, cols, vals."""
    row_ptr, cols, vals = [0], [], []
    for y in range(g):
        for x in range(g):
            for dy, dx, v in ((-1, 0, -1.0), (0, -1, -1.0), (0, 0, 4.0), (0, 1, -1.0),
                              (1, 0, -1.0)):
                if 0 <= y + dy < g and 0 <= x + dx < g:
                    cols.append((y + dy) * g + x + dx)
                    vals.append(v)
            row_ptr.append(len(cols))
    return np.uint32(row_ptr), np.uint32(cols), np.float32(vals)


def spmv_python(row_ptr: np.ndarray, cols: np.ndarray, vals: np.ndarray,
                x: np.ndarray) -> np.ndarray:
    """The same sums on the host, f32 in column order (for the test)."""
    y = np.zeros(row_ptr.size - 1, np.float32)
    for r in range(y.size):
        acc = np.float32(0)
        for e in range(row_ptr[r], row_ptr[r + 1]):
            acc = np.float32(acc + vals[e] * x[cols[e]])
        y[r] = acc
    return y


def power_iteration(gpu: vyre.BaseBackend, g: int, iters: int) -> h.Outputs:
    """A x for a random x, and the Rayleigh quotients of `iters` power-iteration steps."""
    row_ptr, cols, vals = laplacian(g)
    n = g * g
    x = np.random.default_rng(3).random(n, dtype=np.float32)
    bufs = [gpu.allocate_device_buffer(a.nbytes, label=lbl)
            for a, lbl in ((row_ptr, "row_ptr"), (cols, "cols"), (vals, "vals"), (x, "x"),
                           (x, "y"))]
    rp, cb, vb, xb, yb = bufs
    try:
        gpu.write_many([(rp, row_ptr), (cb, cols), (vb, vals), (xb, x)])
        spmv_csr.launch(gpu, n, rp, cb, vb, xb, yb, rows=n)
        first = gpu.read(yb, dtype=np.float32)
        quotients = []
        for _ in range(iters):
            spmv_csr.launch(gpu, n, rp, cb, vb, xb, yb, rows=n)
            y = gpu.read(yb, dtype=np.float32)
            quotients.append(np.float32(np.dot(x, y) / np.dot(x, x)))
            x = (y / np.float32(np.sqrt(np.dot(y, y)))).astype(np.float32)
            gpu.write(xb, x)
        return {"y": first, "rayleigh": np.array(quotients, np.float32)}
    finally:
        for b in bufs:
            gpu.free(b)


def main(argv: list[str] | None = None) -> int:
    p = h.parser(__doc__.splitlines()[0])
    p.add_argument("--grid", type=int, default=64, help="the Laplacian of a GRID x GRID mesh")
    p.add_argument("--iters", type=int, default=50)
    args = p.parse_args(argv)
    result, ok = h.check_everywhere(lambda gpu: power_iteration(gpu, args.grid, args.iters),
                                    args.backend)
    g = args.grid
    exact = 8 * np.sin(np.pi * g / (2 * (g + 1))) ** 2     # the Laplacian's largest eigenvalue
    nnz = int(laplacian(g)[0][-1])
    last = float(result["rayleigh"][-1]) if args.iters else float("nan")
    print(f"{g * g} rows, {nnz} nonzeros: |A x| = {np.linalg.norm(result['y']):.4f}; after "
          f"{args.iters} power steps lambda_max ~ {last:.5f} (exact {exact:.5f})")
    return h.finish(ok)


if __name__ == "__main__":
    sys.exit(main())
