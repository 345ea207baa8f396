"""trmm (PolyBench/C 4.2.1 linear-algebra/blas/trmm/trmm.c): one invocation per column j runs
the original's i and k loops over that column in order (B[i][j] reads only rows k > i of
column j, which the loop has not yet changed), then scales by alpha. C: c/trmm.c."""

from __future__ import annotations

from functools import cache

import numpy as np

from vyre import ProgramBuilder, f32, i32
from vyre.interface import Backend
from vyre.ir.nodes import Program

from .common import F, groups, resident

ARGS = {"m": 60, "n": 80}
WG = 32
ALPHA = F(1.5)  # *alpha = 1.5 (a double literal stored in float)


@cache
def program() -> Program:
    k = ProgramBuilder("polybench_trmm", WG)
    a = k.buffer("A", f32)
    b = k.buffer("B", f32, "read_write")
    m, n, alpha = k.param("m", i32), k.param("n", i32), k.param("alpha", f32)
    j = k.let(k.global_id(0).cast(i32))
    with k.if_(j < n), k.for_range(0, m) as i:
        bij = k.let(b[i * n + j])
        with k.for_range(i + 1, m) as kk:
            bij += a[kk * m + i] * b[kk * n + j]
        b[i * n + j] = alpha * bij
    return k.build()


def run(backend: Backend, m: int, n: int) -> list[np.ndarray]:
    ia, ja = np.indices((m, m))
    a0 = np.where(ja < ia, ((ia + ja) % m).astype(F) / F(m), F(0)).astype(F)
    np.fill_diagonal(a0, F(1.0))  # the upper triangle is never read (calloc'd zeros in C)
    i, j = np.indices((m, n))
    b0 = ((n + (i - j)) % n).astype(F) / F(n)  # (DATA_TYPE)((n+(i-j)) % n)/n
    with resident(backend) as dev:
        bb = dev.put(b0, "B")
        dev.run(program(), {"A": dev.put(a0, "A")}, {"B": bb}, groups(n, WG),
                {"m": m, "n": n, "alpha": ALPHA})
        return [dev.get(bb, np.float32, m * n)]
