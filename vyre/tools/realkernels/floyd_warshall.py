"""floyd_warshall (PolyBench/C 4.2.1 medley/floyd-warshall/floyd-warshall.c, DATA_TYPE int):
one pipeline round per k, one invocation per (i, j) running the original's conditional.
Within round k, row k and column k do not change (every weight is at least 1, so
path[i][k] + path[k][k] > path[i][k]), so all (i, j) of the round read what the serial
loop reads. C: c/floyd_warshall.c."""

from __future__ import annotations

from functools import cache

import numpy as np

from vyre import ProgramBuilder, i32
from vyre.builder import select
from vyre.interface import Backend
from vyre.ir.nodes import Program

from .common import groups, resident

ARGS = {"n": 60}
TILE = 16


@cache
def relax_program() -> Program:
    k = ProgramBuilder("polybench_floyd_warshall_relax", (TILE, TILE))
    path = k.buffer("path", i32, "read_write")
    n, kk = k.param("n", i32), k.param("k", i32)
    j, i = k.let(k.global_id(0).cast(i32)), k.let(k.global_id(1).cast(i32))
    with k.if_((i < n) & (j < n)):
        via = k.let(path[i * n + kk] + path[kk * n + j])
        path[i * n + j] = select(path[i * n + j] < via, path[i * n + j], via)
    return k.build()


def run(backend: Backend, n: int) -> list[np.ndarray]:
    i, j = np.indices((n, n))
    path = (i * j % 7 + 1).astype(np.int32)
    path[((i + j) % 13 == 0) | ((i + j) % 7 == 0) | ((i + j) % 11 == 0)] = 999
    with resident(backend) as dev:
        buf = dev.put(path, "path")
        dev.repeat([dev.step(relax_program(), {}, {"path": buf},
                             (groups(n, TILE), groups(n, TILE)), {"n": n}, index="k")], n)
        return [dev.get(buf, np.int32, n * n)]
