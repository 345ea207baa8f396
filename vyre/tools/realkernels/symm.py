"""symm (PolyBench/C 4.2.1 linear-algebra/blas/symm/symm.c): one invocation per column j runs
the original's i and k loops over that column in order (column j of C only ever depends on
column j of B and C, so the columns are independent; within one, the C's order of the
updates C[k][j] += ... and of temp2 is kept). C: c/symm.c."""

from __future__ import annotations

from functools import cache

import numpy as np

from vyre import ProgramBuilder, f32, i32
from vyre.interface import Backend
from vyre.ir.nodes import Program

from .common import F, groups, resident

ARGS = {"m": 60, "n": 80}
WG = 32
ALPHA, BETA = F(1.5), F(1.2)  # *alpha = 1.5; *beta = 1.2 (double literals stored in float)


@cache
def program() -> Program:
    k = ProgramBuilder("polybench_symm", WG)
    a, b = k.buffer("A", f32), k.buffer("B", f32)
    c = k.buffer("C", f32, "read_write")
    m, n = k.param("m", i32), k.param("n", i32)
    alpha, beta = k.param("alpha", f32), k.param("beta", f32)
    j = k.let(k.global_id(0).cast(i32))
    with k.if_(j < n), k.for_range(0, m) as i:
        temp2 = k.let(0.0)
        with k.for_range(0, i) as kk:
            c[kk * n + j] = c[kk * n + j] + alpha * b[i * n + j] * a[i * m + kk]
            temp2 += b[kk * n + j] * a[i * m + kk]
        c[i * n + j] = beta * c[i * n + j] + alpha * b[i * n + j] * a[i * m + i] + alpha * temp2
    return k.build()


def run(backend: Backend, m: int, n: int) -> list[np.ndarray]:
    i, j = np.indices((m, n))
    c0 = ((i + j) % 100).astype(F) / F(m)  # (DATA_TYPE) ((i+j) % 100) / m
    b0 = ((n + i - j) % 100).astype(F) / F(m)
    ia, ja = np.indices((m, m))
    a0 = np.where(ja <= ia, ((ia + ja) % 100).astype(F) / F(m), F(-999)).astype(F)
    with resident(backend) as dev:
        cb = dev.put(c0, "C")
        dev.run(program(), {"A": dev.put(a0, "A"), "B": dev.put(b0, "B")}, {"C": cb},
                groups(n, WG), {"m": m, "n": n, "alpha": ALPHA, "beta": BETA})
        return [dev.get(cb, np.float32, m * n)]
