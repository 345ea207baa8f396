"""cholesky (PolyBench/C 4.2.1 linear-algebra/solvers/cholesky/cholesky.c): column j of the
factor is computed after columns 0..j-1, as one pipeline round: one invocation finishes the
diagonal element (its k loop, then sqrt), then one invocation per row i > j runs the
original's k loop for A[i][j] and divides by A[j][j]. Every element sees the same operands
in the same order as the row-by-row C loop (row i's A[i][k], k < j, and row j are final by
then). C: c/cholesky.c."""

from __future__ import annotations

from functools import cache

import numpy as np

from vyre import ProgramBuilder, f32, i32
from vyre.builder import sqrt
from vyre.interface import Backend
from vyre.ir.nodes import Program

from .common import F, groups, resident

ARGS = {"n": 120}
WG = 64


def spd_matrix(n: int) -> np.ndarray:
    """init_array of cholesky.c and ludcmp.c: a lower triangle of (-j % n) / n + 1 with a unit
    diagonal, then B = A A^T summed over t outermost, in f32 as the C does."""
    a = np.zeros((n, n), F)
    for i in range(n):
        # C's -j % n is -j for 0 <= j < n (Python's % would give n - j)
        a[i, : i + 1] = -np.arange(i + 1, dtype=F) / F(n) + F(1)
        a[i, i] = F(1)
    b = np.zeros((n, n), F)
    for t in range(n):
        b += np.outer(a[:, t], a[:, t])  # B[r][s] += A[r][t] * A[s][t]
    return b


@cache
def diagonal_program() -> Program:
    k = ProgramBuilder("polybench_cholesky_diagonal", 1)
    a = k.buffer("A", f32, "read_write")
    n, j = k.param("n", i32), k.param("j", i32)
    d = k.let(a[j * n + j])
    with k.for_range(0, j) as kk:
        d -= a[j * n + kk] * a[j * n + kk]
    a[j * n + j] = sqrt(d)
    return k.build()


@cache
def column_program() -> Program:
    k = ProgramBuilder("polybench_cholesky_column", WG)
    a = k.buffer("A", f32, "read_write")
    n, j = k.param("n", i32), k.param("j", i32)
    i = k.let(j + 1 + k.global_id(0).cast(i32))
    with k.if_(i < n):
        v = k.let(a[i * n + j])
        with k.for_range(0, j) as kk:
            v -= a[i * n + kk] * a[j * n + kk]
        a[i * n + j] = v / a[j * n + j]
    return k.build()


def run(backend: Backend, n: int) -> list[np.ndarray]:
    with resident(backend) as dev:
        buf = dev.put(spd_matrix(n), "A")
        p = {"n": n}
        dev.repeat([dev.step(diagonal_program(), {}, {"A": buf}, 1, p, index="j"),
                    dev.step(column_program(), {}, {"A": buf}, groups(n, WG), p, index="j")], n)
        return [dev.get(buf, np.float32, n * n)]
