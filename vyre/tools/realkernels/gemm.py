"""gemm (PolyBench/C 4.2.1 linear-algebra/blas/gemm/gemm.c): one invocation per C[i][j]
scales it by beta, then adds alpha * A[i][k] * B[k][j] for k in order. C: c/gemm.c."""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from typing import Any

import numpy as np

from vyre import ProgramBuilder, f32, i32
from vyre.interface import Backend
from vyre.ir.nodes import Program

from .common import F, groups, resident

ARGS = {"ni": 60, "nj": 70, "nk": 80}
TILE = 8
ALPHA, BETA = F(1.5), F(1.2)  # *alpha = 1.5; *beta = 1.2 (double literals stored in float)


@cache
def program() -> Program:
    return build()


def build(alpha_last: bool = False) -> Program:
    """PolyBench's gemm loop nest; `alpha_last` (tests only) sums alpha * (A[i][k] * B[k][j])
    instead of its (alpha * A[i][k]) * B[k][j], a deliberately wrong operand order."""
    k = ProgramBuilder("polybench_gemm" + ("_alpha_last" if alpha_last else ""), (TILE, TILE))
    a, b = k.buffer("A", f32), k.buffer("B", f32)
    c = k.buffer("C", f32, "read_write")
    ni, nj, nk = k.param("ni", i32), k.param("nj", i32), k.param("nk", i32)
    alpha, beta = k.param("alpha", f32), k.param("beta", f32)
    j, i = k.let(k.global_id(0).cast(i32)), k.let(k.global_id(1).cast(i32))
    with k.if_((i < ni) & (j < nj)):
        acc = k.let(c[i * nj + j] * beta)
        with k.for_range(0, nk) as kk:
            if alpha_last:
                acc += alpha * (a[i * nk + kk] * b[kk * nj + j])
            else:
                acc += alpha * a[i * nk + kk] * b[kk * nj + j]
        c[i * nj + j] = acc
    return k.build()


def run(backend: Backend, ni: int, nj: int, nk: int) -> list[np.ndarray]:
    def init(rows: int, cols: int, f: Callable[[Any, Any], Any], div: int) -> np.ndarray:
        i, j = np.indices((rows, cols))
        return np.asarray(f(i, j)).astype(F) / F(div)
    c0 = init(ni, nj, lambda i, j: (i * j + 1) % ni, ni)
    a0 = init(ni, nk, lambda i, j: i * (j + 1) % nk, nk)
    b0 = init(nk, nj, lambda i, j: i * (j + 2) % nj, nj)
    with resident(backend) as dev:
        cb = dev.put(c0, "C")
        dev.run(program(), {"A": dev.put(a0, "A"), "B": dev.put(b0, "B")}, {"C": cb},
                (groups(nj, TILE), groups(ni, TILE)),
                {"ni": ni, "nj": nj, "nk": nk, "alpha": ALPHA, "beta": BETA})
        return [dev.get(cb, np.float32, ni * nj)]
