"""ludcmp (PolyBench/C 4.2.1 linear-algebra/solvers/ludcmp/ludcmp.c): the decomposition in
Doolittle order, one pipeline round per step i: one invocation per j >= i runs the
original's k loop for U's A[i][j], then one per row r > i runs its k loop for L's A[r][i]
and divides by A[i][i]. Each element is the original's computation with the same operands
in the same order (the C fills row by row; every operand is final by the round that reads
it). Then one invocation each for the forward substitution and the back substitution (i
from n-1 down). C: c/ludcmp.c."""

from __future__ import annotations

from functools import cache

import numpy as np

from vyre import ProgramBuilder, f32, i32
from vyre.interface import Backend
from vyre.ir.nodes import Program

from .cholesky import spd_matrix
from .common import F, groups, resident

ARGS = {"n": 120}
WG = 64


@cache
def lower_program() -> Program:
    k = ProgramBuilder("polybench_ludcmp_lower", WG)
    a = k.buffer("A", f32, "read_write")
    n, j = k.param("n", i32), k.param("j", i32)
    i = k.let(j + 1 + k.global_id(0).cast(i32))
    with k.if_(i < n):
        w = k.let(a[i * n + j])
        with k.for_range(0, j) as kk:
            w -= a[i * n + kk] * a[kk * n + j]
        a[i * n + j] = w / a[j * n + j]
    return k.build()


@cache
def upper_program() -> Program:
    k = ProgramBuilder("polybench_ludcmp_upper", WG)
    a = k.buffer("A", f32, "read_write")
    n, i = k.param("n", i32), k.param("i", i32)
    j = k.let(i + k.global_id(0).cast(i32))
    with k.if_(j < n):
        w = k.let(a[i * n + j])
        with k.for_range(0, i) as kk:
            w -= a[i * n + kk] * a[kk * n + j]
        a[i * n + j] = w
    return k.build()


@cache
def forward_program() -> Program:
    k = ProgramBuilder("polybench_ludcmp_forward", 1)
    a, b = k.buffer("A", f32), k.buffer("b", f32)
    y = k.buffer("y", f32, "read_write")
    n = k.param("n", i32)
    with k.for_range(0, n) as i:
        w = k.let(b[i])
        with k.for_range(0, i) as j:
            w -= a[i * n + j] * y[j]
        y[i] = w
    return k.build()


@cache
def backward_program() -> Program:
    k = ProgramBuilder("polybench_ludcmp_backward", 1)
    a, y = k.buffer("A", f32), k.buffer("y", f32)
    x = k.buffer("x", f32, "read_write")
    n = k.param("n", i32)
    with k.for_range(0, n) as t:  # i = n-1 down to 0
        i = k.let(n - 1 - t)
        w = k.let(y[i])
        with k.for_range(i + 1, n) as j:
            w -= a[i * n + j] * x[j]
        x[i] = w / a[i * n + i]
    return k.build()


def run(backend: Backend, n: int) -> list[np.ndarray]:
    fn = F(n)
    # b[i] = (i+1)/fn/2.0 + 4: a float quotient, then double arithmetic, stored as float
    b = ((np.arange(1, n + 1, dtype=F) / fn).astype(np.float64) / 2.0 + 4).astype(F)
    with resident(backend) as dev:
        ab = dev.put(spd_matrix(n), "A")
        bb = dev.put(b, "b")
        xb, yb = dev.put(np.zeros(n, F), "x"), dev.put(np.zeros(n, F), "y")
        p = {"n": n}
        dev.repeat([dev.step(upper_program(), {}, {"A": ab}, groups(n, WG), p, index="i"),
                    dev.step(lower_program(), {}, {"A": ab}, groups(n, WG), p, index="j")], n)
        dev.run(forward_program(), {"A": ab, "b": bb}, {"y": yb}, 1, p)
        dev.run(backward_program(), {"A": ab, "y": yb}, {"x": xb}, 1, p)
        return [dev.get(ab, np.float32, n * n), dev.get(yb, np.float32, n),
                dev.get(xb, np.float32, n)]
