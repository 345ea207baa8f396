"""lud (Rodinia openmp/lud/base/lud_base.c): for each i the host driver dispatches the row
pass (one invocation per j >= i) then the column pass (one per j > i), each running
lud_base's inner k loop in its order. C: c/lud.c."""

from __future__ import annotations

from functools import cache

import numpy as np

from vyre import ProgramBuilder, f32, i32
from vyre.interface import Backend
from vyre.ir.nodes import Program

from .common import F, Lcg, groups, resident

ARGS = {"size": 48, "seed": 5}
WG = 64


@cache
def row_program() -> Program:
    k = ProgramBuilder("rodinia_lud_row", WG)
    a = k.buffer("a", f32, "read_write")
    size, i = k.param("size", i32), k.param("i", i32)
    j = k.let(i + k.global_id(0).cast(i32))
    with k.if_(j < size):
        total = k.let(a[i * size + j])
        with k.for_range(0, i) as kk:
            total -= a[i * size + kk] * a[kk * size + j]
        a[i * size + j] = total
    return k.build()


@cache
def col_program() -> Program:
    k = ProgramBuilder("rodinia_lud_col", WG)
    a = k.buffer("a", f32, "read_write")
    size, i = k.param("size", i32), k.param("i", i32)
    j = k.let(i + 1 + k.global_id(0).cast(i32))
    with k.if_(j < size):
        total = k.let(a[j * size + i])
        with k.for_range(0, i) as kk:
            total -= a[j * size + kk] * a[kk * size + i]
        a[j * size + i] = total / a[i * size + i]
    return k.build()


def run(backend: Backend, size: int, seed: int) -> list[np.ndarray]:
    a = Lcg(seed).unit(size * size)
    a[:: size + 1] += F(size)
    with resident(backend) as dev:
        buf = dev.put(a, "a")
        for i in range(size):
            p = {"size": size, "i": i}
            dev.run(row_program(), {}, {"a": buf}, groups(size - i, WG), p)
            dev.run(col_program(), {}, {"a": buf}, groups(size - i - 1, WG), p)
        return [dev.get(buf, np.float32, size * size)]
