"""pathfinder (Rodinia openmp/pathfinder/pathfinder.cpp): one dispatch per row, one
invocation per column takes the cheapest of the three cells above; the host driver swaps
the two row buffers as run() does. C: c/pathfinder.c."""

from __future__ import annotations

from functools import cache

import numpy as np

from vyre import ProgramBuilder, i32
from vyre.builder import Value, select
from vyre.interface import Backend
from vyre.ir.nodes import Program

from .common import Lcg, groups, resident

ARGS = {"cols": 512, "rows": 64, "seed": 4}
WG = 64


@cache
def program() -> Program:
    k = ProgramBuilder("rodinia_pathfinder", WG)
    wall = k.buffer("wall", i32)
    src = k.buffer("src", i32)
    dst = k.buffer("dst", i32, "write")
    cols, t = k.param("cols", i32), k.param("t", i32)
    n = k.let(k.global_id(0).cast(i32))

    def minimum(a: Value, b: Value) -> Value:  # MIN(a, b) ((a)<=(b) ? (a) : (b))
        return select(a <= b, a, b)

    with k.if_(n < cols):
        m = k.let(src[n])
        with k.if_(n > 0):
            m.set(minimum(m, src[n - 1]))
        with k.if_(n < cols - 1):
            m.set(minimum(m, src[n + 1]))
        dst[n] = wall[(t + 1) * cols + n] + m
    return k.build()


def run(backend: Backend, cols: int, rows: int, seed: int) -> list[np.ndarray]:
    wall = Lcg(seed).ints(rows * cols, 10)
    with resident(backend) as dev:
        w = dev.put(wall, "wall")
        dst = dev.put(wall[:cols].copy(), "result")
        src = dev.put(np.zeros(cols, np.int32), "src")
        for t in range(rows - 1):
            src, dst = dst, src
            dev.run(program(), {"wall": w, "src": src}, {"dst": dst}, groups(cols, WG),
                    {"cols": cols, "t": t})
        return [dev.get(dst, np.int32, cols)]
