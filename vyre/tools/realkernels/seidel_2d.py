"""seidel_2d (PolyBench/C 4.2.1 stencils/seidel-2d/seidel-2d.c): the in-place Gauss-Seidel
sweeps as a skewed wavefront. Element (i, j) of sweep t is updated in pipeline round
2i + j + 4t - 3, one invocation per (i, t) of the round: every neighbour it reads then
holds exactly the value the serial loop reads (rows above and the left neighbour already
updated in sweep t, the rest still from sweep t-1), and no two elements of one round are
neighbours. Each update is the original's sum in its order, divided by 9.0.
C: c/seidel_2d.c."""

from __future__ import annotations

from functools import cache

import numpy as np

from vyre import ProgramBuilder, f32, i32
from vyre.interface import Backend
from vyre.ir.nodes import Program

from .common import F, groups, resident

ARGS = {"tsteps": 40, "n": 120}
TILE = 8


@cache
def wave_program() -> Program:
    k = ProgramBuilder("polybench_seidel_2d_wave", (TILE, TILE))
    a = k.buffer("A", f32, "read_write")
    n, tsteps = k.param("n", i32), k.param("tsteps", i32)
    s = k.let(k.param("round", i32) + 3)  # 2i + j + 4t, from 3 (i = j = 1, t = 0)
    i = k.let(1 + k.global_id(0).cast(i32))
    t = k.let(k.global_id(1).cast(i32))
    j = k.let(s - 2 * i - 4 * t)
    with k.if_((i <= n - 2) & (t < tsteps) & (j >= 1) & (j <= n - 2)):
        a[i * n + j] = (a[(i - 1) * n + j - 1] + a[(i - 1) * n + j] + a[(i - 1) * n + j + 1]
                        + a[i * n + j - 1] + a[i * n + j] + a[i * n + j + 1]
                        + a[(i + 1) * n + j - 1] + a[(i + 1) * n + j] + a[(i + 1) * n + j + 1]
                        ) / 9.0
    return k.build()


def run(backend: Backend, tsteps: int, n: int) -> list[np.ndarray]:
    i, j = np.indices((n, n))
    a = (i.astype(F) * (j + 2).astype(F) + F(2)) / F(n)  # ((DATA_TYPE) i*(j+2) + 2) / n
    rounds = 3 * (n - 2) + 4 * (tsteps - 1) - 3 + 1  # s from 3 to 3(n-2) + 4(tsteps-1)
    with resident(backend) as dev:
        buf = dev.put(a, "A")
        dev.repeat([dev.step(wave_program(), {}, {"A": buf},
                             (groups(n - 2, TILE), groups(tsteps, TILE)),
                             {"n": n, "tsteps": tsteps}, index="round")], rounds)
        return [dev.get(buf, np.float32, n * n)]
