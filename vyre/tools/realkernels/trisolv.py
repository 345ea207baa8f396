"""trisolv (PolyBench/C 4.2.1 linear-algebra/solvers/trisolv/trisolv.c): forward
substitution, one pipeline round per row i (one invocation: x[i] = b[i], the original's j
loop, the division by L[i][i]). C: c/trisolv.c."""

from __future__ import annotations

from functools import cache

import numpy as np

from vyre import ProgramBuilder, ScalarType, f32, i32
from vyre.interface import Backend
from vyre.ir.nodes import Program

from .common import F, resident

ARGS = {"n": 120}


@cache
def row_program() -> Program:
    return build(f32)


def build(ty: ScalarType) -> Program:
    """One row of the substitution with DATA_TYPE `ty` (f32 here; f64: trisolv_f64.py)."""
    k = ProgramBuilder(f"polybench_trisolv_row_{ty}", 1)
    lmat, b = k.buffer("L", ty), k.buffer("b", ty)
    x = k.buffer("x", ty, "read_write")
    n, i = k.param("n", i32), k.param("i", i32)
    xi = k.let(b[i])
    with k.for_range(0, i) as j:
        xi -= lmat[i * n + j] * x[j]
    x[i] = xi / lmat[i * n + i]
    return k.build()


def run(backend: Backend, n: int) -> list[np.ndarray]:
    return solve(backend, n, row_program(), F)


def solve(backend: Backend, n: int, program: Program, dt: type) -> list[np.ndarray]:
    lmat: np.ndarray = np.zeros((n, n), dt)
    for i in range(n):
        j = np.arange(i + 1)
        lmat[i, : i + 1] = (i + n - j + 1).astype(dt) * dt(2) / dt(n)  # (DATA_TYPE)(i+n-j+1)*2/n
    with resident(backend) as dev:
        lb = dev.put(lmat, "L")
        b = dev.put(np.arange(n, dtype=dt), "b")
        x = dev.put(np.full(n, -999, dt), "x")
        dev.repeat([dev.step(program, {"L": lb, "b": b}, {"x": x}, 1, {"n": n},
                             index="i")], n)
        return [dev.get(x, dt, n)]
