"""adi (PolyBench/C 4.2.1 stencils/adi/adi.c): per time step, the column sweep then the row
sweep, each one invocation per i = 1..n-2 running the original's forward j loop (p, q with
their divisions) and its backward j loop (n-2 down to 1). The coefficients DX .. f are
computed once in f32 on the host in the original's order and passed as params.
C: c/adi.c."""

from __future__ import annotations

from functools import cache
from typing import Any

import numpy as np

from vyre import ProgramBuilder, f32, i32
from vyre.interface import Backend
from vyre.ir.nodes import Program

from .common import F, groups, resident

ARGS = {"tsteps": 40, "n": 60}
WG = 32
COEFFS = ("a", "b", "c", "d", "e", "f")


def coefficients(tsteps: int, n: int) -> dict[str, np.float32]:
    dx = F(1.0) / F(n)
    dy = F(1.0) / F(n)
    dt = F(1.0) / F(tsteps)
    b1, b2 = F(2.0), F(1.0)
    mul1 = b1 * dt / (dx * dx)
    mul2 = b2 * dt / (dy * dy)
    a = -mul1 / F(2.0)
    d = -mul2 / F(2.0)
    return {"a": a, "b": F(1.0) + mul1, "c": a, "d": d, "e": F(1.0) + mul2, "f": d}


def _sweep(name: str, column: bool) -> Program:
    """column: u -> v along columns (coefficients a..c, d..f as written); else v -> u."""
    k = ProgramBuilder(name, WG)
    src = k.buffer("src", f32)
    dst, p, q = (k.buffer(x, f32, "read_write") for x in ("dst", "p", "q"))
    n = k.param("n", i32)
    a, b, c, d, e, f = (k.param(x, f32) for x in COEFFS)
    i = k.let(1 + k.global_id(0).cast(i32))
    # the column sweep writes v[j][i] and reads u[j][i +- 1]; the row sweep writes u[i][j] and
    # reads v[i +- 1][j]: the same loops with the two indices of dst and src swapped
    def at(row: Any, col: Any) -> Any:
        return (col * n + row) if column else (row * n + col)
    lo, mid, hi = (a, b, c) if column else (d, e, f)  # p's recurrence coefficients
    s1, s2, s3 = (d, d, f) if column else (a, a, c)   # the source's stencil coefficients
    with k.if_(i < n - 1):
        dst[at(i, 0)] = 1.0
        p[i * n] = 0.0
        q[i * n] = dst[at(i, 0)]
        with k.for_range(1, n - 1) as j:
            p[i * n + j] = -hi / (lo * p[i * n + j - 1] + mid)
            q[i * n + j] = (-s1 * src[at(i - 1, j)] + (1.0 + 2.0 * s2) * src[at(i, j)]
                            - s3 * src[at(i + 1, j)] - lo * q[i * n + j - 1]) / (
                                lo * p[i * n + j - 1] + mid)
        dst[at(i, n - 1)] = 1.0
        with k.for_range(0, n - 2) as t:  # j = n-2 down to 1
            jj = k.let(n - 2 - t)
            dst[at(i, jj)] = p[i * n + jj] * dst[at(i, jj + 1)] + q[i * n + jj]
    return k.build()


@cache
def column_program() -> Program:
    return _sweep("polybench_adi_column", column=True)


@cache
def row_program() -> Program:
    return _sweep("polybench_adi_row", column=False)


def run(backend: Backend, tsteps: int, n: int) -> list[np.ndarray]:
    i, j = np.indices((n, n))
    u0 = (i + n - j).astype(F) / F(n)  # (DATA_TYPE)(i + n-j) / n
    params = {"n": n, **coefficients(tsteps, n)}
    with resident(backend) as dev:
        u, v = dev.put(u0, "u"), dev.put(np.zeros((n, n), F), "v")
        p, q = dev.put(np.zeros((n, n), F), "p"), dev.put(np.zeros((n, n), F), "q")
        g = groups(n - 2, WG)
        dev.repeat([dev.step(column_program(), {"src": u}, {"dst": v, "p": p, "q": q}, g, params),
                    dev.step(row_program(), {"src": v}, {"dst": u, "p": p, "q": q}, g, params)],
                   tsteps)
        return [dev.get(b, np.float32, n * n) for b in (u, v, p, q)]
