"""nw (Rodinia openmp/nw/needle.cpp): Needleman-Wunsch over 16 x 16 blocks. Each dispatch is
one anti-diagonal of blocks (nw_optimized's blk loops, run by the host driver); one
invocation per block fills its cells row by row with maximum(). C: c/nw.c."""

from __future__ import annotations

from functools import cache

import numpy as np

from vyre import ProgramBuilder, i32
from vyre.builder import Value, select
from vyre.interface import Backend
from vyre.ir.nodes import Program

from .common import Lcg, groups, resident

ARGS = {"n": 64, "penalty": 10, "seed": 6}
BLOCK_SIZE = 16
WG = 8

BLOSUM62 = np.array([
    [4, -1, -2, -2, 0, -1, -1, 0, -2, -1, -1, -1, -1, -2, -1, 1, 0, -3, -2, 0, -2, -1, 0, -4],
    [-1, 5, 0, -2, -3, 1, 0, -2, 0, -3, -2, 2, -1, -3, -2, -1, -1, -3, -2, -3, -1, 0, -1, -4],
    [-2, 0, 6, 1, -3, 0, 0, 0, 1, -3, -3, 0, -2, -3, -2, 1, 0, -4, -2, -3, 3, 0, -1, -4],
    [-2, -2, 1, 6, -3, 0, 2, -1, -1, -3, -4, -1, -3, -3, -1, 0, -1, -4, -3, -3, 4, 1, -1, -4],
    [0, -3, -3, -3, 9, -3, -4, -3, -3, -1, -1, -3, -1, -2, -3, -1, -1, -2, -2, -1, -3, -3, -2, -4],
    [-1, 1, 0, 0, -3, 5, 2, -2, 0, -3, -2, 1, 0, -3, -1, 0, -1, -2, -1, -2, 0, 3, -1, -4],
    [-1, 0, 0, 2, -4, 2, 5, -2, 0, -3, -3, 1, -2, -3, -1, 0, -1, -3, -2, -2, 1, 4, -1, -4],
    [0, -2, 0, -1, -3, -2, -2, 6, -2, -4, -4, -2, -3, -3, -2, 0, -2, -2, -3, -3, -1, -2, -1, -4],
    [-2, 0, 1, -1, -3, 0, 0, -2, 8, -3, -3, -1, -2, -1, -2, -1, -2, -2, 2, -3, 0, 0, -1, -4],
    [-1, -3, -3, -3, -1, -3, -3, -4, -3, 4, 2, -3, 1, 0, -3, -2, -1, -3, -1, 3, -3, -3, -1, -4],
    [-1, -2, -3, -4, -1, -2, -3, -4, -3, 2, 4, -2, 2, 0, -3, -2, -1, -2, -1, 1, -4, -3, -1, -4],
    [-1, 2, 0, -1, -3, 1, 1, -2, -1, -3, -2, 5, -1, -3, -1, 0, -1, -3, -2, -2, 0, 1, -1, -4],
    [-1, -1, -2, -3, -1, 0, -2, -3, -2, 1, 2, -1, 5, 0, -2, -1, -1, -1, -1, 1, -3, -1, -1, -4],
    [-2, -3, -3, -3, -2, -3, -3, -3, -1, 0, 0, -3, 0, 6, -4, -2, -2, 1, 3, -1, -3, -3, -1, -4],
    [-1, -2, -2, -1, -3, -1, -1, -2, -2, -3, -3, -1, -2, -4, 7, -1, -1, -4, -3, -2, -2, -1, -2, -4],
    [1, -1, 1, 0, -1, 0, 0, 0, -1, -2, -2, 0, -1, -2, -1, 4, 1, -3, -2, -2, 0, 0, 0, -4],
    [0, -1, 0, -1, -1, -1, -1, -2, -2, -1, -1, -1, -1, -2, -1, 1, 5, -2, -2, 0, -1, -1, 0, -4],
    [-3, -3, -4, -4, -2, -2, -3, -2, -2, -3, -2, -3, -1, 1, -4, -3, -2, 11, 2, -3, -4, -3, -2, -4],
    [-2, -2, -2, -3, -2, -1, -2, -3, 2, -1, -1, -2, -1, 3, -3, -2, -2, 2, 7, -1, -3, -2, -1, -4],
    [0, -3, -3, -3, -1, -2, -2, -3, -3, 3, 1, -2, 1, -1, -2, -2, 0, -3, -1, 4, -3, -2, -1, -4],
    [-2, -1, 3, 4, -3, 0, 1, -1, 0, -3, -4, 0, -3, -3, -2, 0, -1, -4, -3, -3, 4, 1, -1, -4],
    [-1, 0, 0, 1, -3, 3, 4, -2, 0, -3, -3, 1, -1, -3, -1, 0, -1, -3, -2, -2, 1, 4, -1, -4],
    [0, -1, -1, -1, -2, -1, -1, -1, -1, -1, -1, -1, -1, -1, -2, 0, 0, -2, -1, -1, -1, -1, -1, -4],
    [-4, -4, -4, -4, -4, -4, -4, -4, -4, -4, -4, -4, -4, -4, -4, -4, -4, -4, -4, -4, -4, -4, -4, 1],
], np.int32)


@cache
def program() -> Program:
    """Blocks b_index_x = x0 + g (g < count), b_index_y = ysum - b_index_x."""
    k = ProgramBuilder("rodinia_nw_blocks", WG)
    items = k.buffer("input_itemsets", i32, "read_write")
    ref = k.buffer("referrence", i32)
    max_cols, penalty = k.param("max_cols", i32), k.param("penalty", i32)
    x0, count, ysum = k.param("x0", i32), k.param("count", i32), k.param("ysum", i32)
    g = k.let(k.global_id(0).cast(i32))

    def maximum(a: Value, b: Value, c: Value) -> Value:
        m = select(a <= b, b, a)
        return select(m <= c, c, m)

    with k.if_(g < count):
        bx = k.let(x0 + g)
        by = k.let(ysum - bx)
        with k.for_range(1, BLOCK_SIZE + 1, ty=i32) as i, \
                k.for_range(1, BLOCK_SIZE + 1, ty=i32) as j:
            row = k.let(by * BLOCK_SIZE + i)
            col = k.let(bx * BLOCK_SIZE + j)
            items[max_cols * row + col] = maximum(
                items[max_cols * (row - 1) + col - 1] + ref[max_cols * row + col],
                items[max_cols * row + col - 1] - penalty,
                items[max_cols * (row - 1) + col] - penalty)
    return k.build()


def run(backend: Backend, n: int, penalty: int, seed: int) -> list[np.ndarray]:
    mc = n + 1
    lcg = Lcg(seed)
    side = lcg.ints(n, 10) + 1  # input_itemsets[i * max_cols], i = 1 .. n
    top = lcg.ints(n, 10) + 1  # input_itemsets[j], j = 1 .. n
    ref = np.zeros((mc, mc), np.int32)
    ref[1:, 1:] = BLOSUM62[side[:, None], top[None, :]]
    items = np.zeros((mc, mc), np.int32)
    items[1:, 0] = -np.arange(1, mc, dtype=np.int32) * penalty
    items[0, 1:] = -np.arange(1, mc, dtype=np.int32) * penalty
    nb = n // BLOCK_SIZE
    # (x0, count, ysum) per anti-diagonal, in nw_optimized's order
    diagonals = [(0, blk, blk - 1) for blk in range(1, nb + 1)]
    diagonals += [(blk - 1, nb - blk + 1, nb + blk - 2) for blk in range(2, nb + 1)]
    with resident(backend) as dev:
        it = dev.put(items.ravel(), "input_itemsets")
        rf = dev.put(ref.ravel(), "referrence")
        for x0, count, ysum in diagonals:
            dev.run(program(), {"referrence": rf}, {"input_itemsets": it}, groups(count, WG),
                    {"max_cols": mc, "penalty": penalty, "x0": x0, "count": count,
                     "ysum": ysum})
        return [dev.get(it, np.int32, mc * mc)]
