"""lavamd (Rodinia openmp/lavaMD/kernel/kernel_cpu.c): one invocation per particle i of home
box l runs the original's k loop (the home box, then its neighbours in main.c's order) and
j loop (every particle of that box) with vyre's exact exp, summing into its own four
force components in that order, so each component sees the serial loop's additions in the
serial loop's order (only fv[i] of box l is written by the (l, i) iterations). The box and
neighbour lists are built on the host, as main.c does. C: c/lavamd.c (float, expf
correctly rounded by c/crmath.h)."""

from __future__ import annotations

from functools import cache

import numpy as np

from vyre import ProgramBuilder, f32, i32
from vyre.builder import exp
from vyre.interface import Backend
from vyre.ir.nodes import Program

from .common import F, Lcg, groups, resident

ARGS = {"boxes1d": 2, "par_per_box": 16, "seed": 7}
LARGE_ARGS = {"boxes1d": 10, "par_per_box": 100, "seed": 7}  # Rodinia's run script
ROW = 28  # per box: the number of boxes to visit (1 + nn), then the home box and its neighbours
WG = 64
ALPHA = F(0.5)


@cache
def program() -> Program:
    k = ProgramBuilder("rodinia_lavamd", WG)
    rv, qv, boxes = k.buffer("rv", f32), k.buffer("qv", f32), k.buffer("boxes", i32)
    fv = k.buffer("fv", f32, "write")
    n, a2 = k.param("space_elem", i32), k.param("a2", f32)
    per_box = k.param("par_per_box", i32)  # NUMBER_PAR_PER_BOX
    p = k.let(k.global_id(0).cast(i32))
    with k.if_(p < n):
        home = k.let(p / per_box)
        av, ax, ay, az = (k.let(rv[4 * p + c]) for c in range(4))
        fa_v, fa_x, fa_y, fa_z = k.let(0.0), k.let(0.0), k.let(0.0), k.let(0.0)
        with k.for_range(0, boxes[home * ROW], ty=i32) as kk:
            first_j = k.let(boxes[home * ROW + 1 + kk] * per_box)
            with k.for_range(0, per_box, ty=i32) as j:
                b = k.let(first_j + j)
                bv, bx, by, bz = (k.let(rv[4 * b + c]) for c in range(4))
                r2 = k.let(av + bv - (ax * bx + ay * by + az * bz))  # DOT(rA[i], rB[j])
                u2 = k.let(a2 * r2)
                vij = k.let(exp(-u2))
                fs = k.let(2.0 * vij)
                q = k.let(qv[b])
                fa_v += q * vij
                fa_x += q * (fs * (ax - bx))
                fa_y += q * (fs * (ay - by))
                fa_z += q * (fs * (az - bz))
        fv[4 * p] = fa_v
        fv[4 * p + 1] = fa_x
        fv[4 * p + 2] = fa_y
        fv[4 * p + 3] = fa_z
    return k.build()


def box_table(boxes1d: int) -> np.ndarray:
    """main.c's boxes (z, y, x order) and their neighbours (dz, dy, dx from -1 to 1), one
    row of ROW per box: 1 + nn, the box itself, its neighbours."""
    rows = []
    for i in range(boxes1d):
        for j in range(boxes1d):
            for k in range(boxes1d):
                nei = [(i + dz) * boxes1d * boxes1d + (j + dy) * boxes1d + (k + dx)
                       for dz in (-1, 0, 1) for dy in (-1, 0, 1) for dx in (-1, 0, 1)
                       if (dz, dy, dx) != (0, 0, 0)
                       and 0 <= i + dz < boxes1d and 0 <= j + dy < boxes1d
                       and 0 <= k + dx < boxes1d]
                home = (i * boxes1d + j) * boxes1d + k
                row = [1 + len(nei), home, *nei]
                rows.append(row + [0] * (ROW - len(row)))
    return np.array(rows, np.int32).ravel()


def run(backend: Backend, boxes1d: int, par_per_box: int, seed: int
        ) -> list[np.ndarray]:
    n = boxes1d**3 * par_per_box
    rng = Lcg(seed)
    rv = (rng.ints(4 * n, 10) + 1).astype(F) / F(10.0)  # (rand()%10 + 1) / 10.0, as float
    qv = (rng.ints(n, 10) + 1).astype(F) / F(10.0)
    with resident(backend) as dev:
        r, q = dev.put(rv, "rv"), dev.put(qv, "qv")
        boxes = dev.put(box_table(boxes1d), "boxes")
        fv = dev.put(np.zeros(4 * n, F), "fv")
        dev.run(program(), {"rv": r, "qv": q, "boxes": boxes}, {"fv": fv}, groups(n, WG),
                {"space_elem": n, "par_per_box": par_per_box, "a2": F(2.0) * ALPHA * ALPHA})
        return [dev.get(fv, np.float32, 4 * n)]
