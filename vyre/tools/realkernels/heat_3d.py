"""heat_3d (PolyBench/C 4.2.1 stencils/heat-3d/heat-3d.c): per time step, one dispatch A -> B
then one B -> A (the same program with its buffers swapped), one invocation per interior
point, each the original's three 0.125 * (...) terms and the centre in its order.
C: c/heat_3d.c."""

from __future__ import annotations

from functools import cache

import numpy as np

from vyre import ProgramBuilder, f32, i32
from vyre.interface import Backend
from vyre.ir.nodes import Program

from .common import F, groups, resident

ARGS = {"tsteps": 40, "n": 20}
TILE = (8, 8, 1)


@cache
def step_program() -> Program:
    k = ProgramBuilder("polybench_heat_3d_step", TILE)
    a = k.buffer("src", f32)
    b = k.buffer("dst", f32, "read_write")
    n = k.param("n", i32)
    kk = k.let(1 + k.global_id(0).cast(i32))
    j = k.let(1 + k.global_id(1).cast(i32))
    i = k.let(1 + k.global_id(2).cast(i32))
    with k.if_((i < n - 1) & (j < n - 1) & (kk < n - 1)):
        c = k.let((i * n + j) * n + kk)
        di, dj = n * n, n
        b[c] = (0.125 * (a[c + di] - 2.0 * a[c] + a[c - di])
                + 0.125 * (a[c + dj] - 2.0 * a[c] + a[c - dj])
                + 0.125 * (a[c + 1] - 2.0 * a[c] + a[c - 1])
                + a[c])
    return k.build()


def run(backend: Backend, tsteps: int, n: int) -> list[np.ndarray]:
    i, j, k = np.indices((n, n, n))
    init = (i + j + (n - k)).astype(F) * F(10) / F(n)  # (DATA_TYPE)(i + j + (n-k))* 10 / (n)
    with resident(backend) as dev:
        a, b = dev.put(init, "A"), dev.put(init, "B")
        g = (groups(n - 2, TILE[0]), groups(n - 2, TILE[1]), n - 2)
        dev.repeat([dev.step(step_program(), {"src": a}, {"dst": b}, g, {"n": n}),
                    dev.step(step_program(), {"src": b}, {"dst": a}, g, {"n": n})], tsteps)
        return [dev.get(a, np.float32, n ** 3), dev.get(b, np.float32, n ** 3)]
