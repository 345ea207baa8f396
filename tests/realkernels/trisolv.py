"""trisolv (PolyBench/C 4.2.1 linear-algebra/solvers/trisolv/trisolv.c): forward
substitution, one pipeline round per row i (one invocation: x[i] = b[i], the original's j
loop, the division by L[i][i]). C: c/trisolv.c."""

from __future__ import annotations

from functools import cache

import numpy as np

from vyre import ProgramBuilder, f32, i32
from vyre.backend import BaseBackend
from vyre.ir.nodes import Program

from .common import F, resident

ARGS = {"n": 120}


@cache
def row_program() -> Program:
    k = ProgramBuilder("polybench_trisolv_row", 1)
    lmat, b = k.buffer("L", f32), k.buffer("b", f32)
    x = k.buffer("x", f32, "read_write")
    n, i = k.param("n", i32), k.param("i", i32)
    xi = k.let(b[i])
    with k.for_range(0, i) as j:
        xi -= lmat[i * n + j] * x[j]
    x[i] = xi / lmat[i * n + i]
    return k.build()


def run(backend: BaseBackend, n: int) -> list[np.ndarray]:
    lmat = np.zeros((n, n), F)
    for i in range(n):
        j = np.arange(i + 1)
        lmat[i, : i + 1] = (i + n - j + 1).astype(F) * F(2) / F(n)  # (DATA_TYPE)(i+n-j+1)*2/n
    with resident(backend) as dev:
        lb = dev.put(lmat, "L")
        b = dev.put(np.arange(n, dtype=F), "b")
        x = dev.put(np.full(n, -999, F), "x")
        dev.repeat([dev.step(row_program(), {"L": lb, "b": b}, {"x": x}, 1, {"n": n},
                             index="i")], n)
        return [dev.get(x, np.float32, n)]
