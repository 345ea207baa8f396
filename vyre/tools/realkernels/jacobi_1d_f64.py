"""jacobi-1d (PolyBench/C 4.2.1 stencils/jacobi-1d/jacobi-1d.c) in its default double
configuration: per time step B from A, then A from B, each point (A[i-1] + A[i]) + A[i+1]
times the double literal 0.33333, one invocation per point (a sweep reads only the other
array, so its points are independent). C: c/jacobi_1d_f64.c."""

from __future__ import annotations

from functools import cache

import numpy as np

from vyre import ProgramBuilder, f64
from vyre.interface import Backend
from vyre.ir.nodes import Program

from .common import groups, resident

ARGS = {"tsteps": 40, "n": 120}
WG = 64


@cache
def sweep_program() -> Program:
    k = ProgramBuilder("polybench_jacobi_1d_f64", WG)
    src, dst = k.buffer("src", f64), k.buffer("dst", f64, "read_write")
    i = k.global_id() + 1
    with k.if_(i < src.length() - 1):
        dst[i] = 0.33333 * (src[i - 1] + src[i] + src[i + 1])
    return k.build()


def run(backend: Backend, tsteps: int, n: int) -> list[np.ndarray]:
    a0 = (np.arange(n, dtype=np.float64) + 2) / n  # ((DATA_TYPE) i + 2) / n
    b0 = (np.arange(n, dtype=np.float64) + 3) / n
    with resident(backend) as dev:
        a, b = dev.put(a0, "A"), dev.put(b0, "B")
        g = groups(n - 2, WG)
        dev.repeat([dev.step(sweep_program(), {"src": a}, {"dst": b}, g),
                    dev.step(sweep_program(), {"src": b}, {"dst": a}, g)], tsteps)
        return [dev.get(a, np.float64, n), dev.get(b, np.float64, n)]
