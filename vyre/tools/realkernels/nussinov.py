"""nussinov (PolyBench/C 4.2.1 medley/nussinov/nussinov.c, DATA_TYPE int, base char): the
table is filled one anti-diagonal d = j - i per pipeline round, one invocation per cell
running the original's body (its guards, match and max_score, then the k loop) in order.
Every cell it reads lies on an earlier diagonal, as in the original's i-descending,
j-ascending order. C: c/nussinov.c."""

from __future__ import annotations

from functools import cache
from typing import Any

import numpy as np

from vyre import ProgramBuilder, i32
from vyre.builder import Value, select
from vyre.interface import Backend
from vyre.ir.nodes import Program

from .common import groups, resident

ARGS = {"n": 180}
WG = 64


def match(b1: Value, b2: Value) -> Value:
    """#define match(b1, b2) (((b1)+(b2)) == 3 ? 1 : 0)"""
    return select((b1 + b2) == 3, 1, 0)


def max_score(s1: Any, s2: Any) -> Value:
    """#define max_score(s1, s2) ((s1 >= s2) ? s1 : s2)"""
    return select(s1 >= s2, s1, s2)


@cache
def diagonal_program() -> Program:
    k = ProgramBuilder("polybench_nussinov_diagonal", WG)
    seq = k.buffer("seq", i32)
    table = k.buffer("table", i32, "read_write")
    n = k.param("n", i32)
    d = k.let(k.param("round", i32) + 1)
    i = k.let(k.global_id(0).cast(i32))
    j = k.let(i + d)
    with k.if_(j < n):
        t = k.let(table[i * n + j])
        with k.if_(j - 1 >= 0):
            t.set(max_score(t, table[i * n + j - 1]))
        with k.if_(i + 1 < n):
            t.set(max_score(t, table[(i + 1) * n + j]))
        with k.if_((j - 1 >= 0) & (i + 1 < n)):
            # don't allow adjacent elements to bond
            with k.if_(i < j - 1):
                t.set(max_score(t, table[(i + 1) * n + j - 1] + match(seq[i], seq[j])))
            with k.else_():
                t.set(max_score(t, table[(i + 1) * n + j - 1]))
        with k.for_range(i + 1, j) as kk:
            t.set(max_score(t, table[i * n + kk] + table[(kk + 1) * n + j]))
        table[i * n + j] = t
    return k.build()


def run(backend: Backend, n: int) -> list[np.ndarray]:
    seq = ((np.arange(n) + 1) % 4).astype(np.int32)  # (base)((i+1)%4), promoted to int
    with resident(backend) as dev:
        sb = dev.put(seq, "seq")
        table = dev.put(np.zeros(n * n, np.int32), "table")
        dev.repeat([dev.step(diagonal_program(), {"seq": sb}, {"table": table}, groups(n, WG),
                             {"n": n}, index="round")], n - 1)
        return [dev.get(table, np.int32, n * n)]
