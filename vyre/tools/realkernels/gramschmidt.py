"""gramschmidt (PolyBench/C 4.2.1 linear-algebra/solvers/gramschmidt/gramschmidt.c): one
pipeline round per column k: one invocation sums the column's squares in row order and
takes sqrt into R[k][k], one invocation per row divides A[i][k] by it into Q, then one
invocation per later column j runs the original's two i loops (R[k][j] as a sum in row
order, then A[i][j] -= Q[i][k] * R[k][j]). C: c/gramschmidt.c."""

from __future__ import annotations

from functools import cache

import numpy as np

from vyre import ProgramBuilder, f32, i32
from vyre.builder import sqrt
from vyre.interface import Backend
from vyre.ir.nodes import Program

from .common import F, groups, resident

ARGS = {"m": 60, "n": 80}
WG = 64


@cache
def norm_program() -> Program:
    k = ProgramBuilder("polybench_gramschmidt_norm", 1)
    a = k.buffer("A", f32)
    r = k.buffer("R", f32, "read_write")
    m, n, kk = k.param("m", i32), k.param("n", i32), k.param("k", i32)
    nrm = k.let(0.0)
    with k.for_range(0, m) as i:
        nrm += a[i * n + kk] * a[i * n + kk]
    r[kk * n + kk] = sqrt(nrm)
    return k.build()


@cache
def q_program() -> Program:
    k = ProgramBuilder("polybench_gramschmidt_q", WG)
    a, r = k.buffer("A", f32), k.buffer("R", f32)
    q = k.buffer("Q", f32, "read_write")
    m, n, kk = k.param("m", i32), k.param("n", i32), k.param("k", i32)
    i = k.let(k.global_id(0).cast(i32))
    with k.if_(i < m):
        q[i * n + kk] = a[i * n + kk] / r[kk * n + kk]
    return k.build()


@cache
def project_program() -> Program:
    k = ProgramBuilder("polybench_gramschmidt_project", WG)
    q = k.buffer("Q", f32)
    a, r = k.buffer("A", f32, "read_write"), k.buffer("R", f32, "read_write")
    m, n, kk = k.param("m", i32), k.param("n", i32), k.param("k", i32)
    j = k.let(kk + 1 + k.global_id(0).cast(i32))
    with k.if_(j < n):
        rkj = k.let(0.0)
        with k.for_range(0, m) as i:
            rkj += q[i * n + kk] * a[i * n + j]
        r[kk * n + j] = rkj
        with k.for_range(0, m) as i2:
            a[i2 * n + j] = a[i2 * n + j] - q[i2 * n + kk] * rkj
    return k.build()


def run(backend: Backend, m: int, n: int) -> list[np.ndarray]:
    i, j = np.indices((m, n))
    a = ((((i * j) % m).astype(F) / F(m)) * F(100)) + F(10)
    with resident(backend) as dev:
        ab = dev.put(a, "A")
        rb, qb = dev.put(np.zeros((n, n), F), "R"), dev.put(np.zeros((m, n), F), "Q")
        p = {"m": m, "n": n}
        dev.repeat([dev.step(norm_program(), {"A": ab}, {"R": rb}, 1, p, index="k"),
                    dev.step(q_program(), {"A": ab, "R": rb}, {"Q": qb}, groups(m, WG), p,
                             index="k"),
                    dev.step(project_program(), {"Q": qb}, {"A": ab, "R": rb}, groups(n, WG), p,
                             index="k")], n)
        return [dev.get(ab, np.float32, m * n), dev.get(rb, np.float32, n * n),
                dev.get(qb, np.float32, m * n)]
