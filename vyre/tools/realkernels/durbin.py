"""durbin (PolyBench/C 4.2.1 linear-algebra/solvers/durbin/durbin.c): one pipeline round per
k = 1..n-1: one invocation updates beta, runs the original's sum loop (r read backwards) and
computes alpha (kept in a two-element state buffer), then one invocation per i < k computes
z[i] = y[i] + alpha * y[k-i-1], then one per i <= k copies z back and sets y[k] = alpha.
C: c/durbin.c."""

from __future__ import annotations

from functools import cache

import numpy as np

from vyre import ProgramBuilder, f32, i32
from vyre.interface import Backend
from vyre.ir.nodes import Program

from .common import F, groups, resident

ARGS = {"n": 120}
WG = 64


@cache
def alpha_program() -> Program:
    k = ProgramBuilder("polybench_durbin_alpha", 1)
    r, y = k.buffer("r", f32), k.buffer("y", f32)
    state = k.buffer("state", f32, "read_write")  # [alpha, beta]
    kk = k.let(k.param("round", i32) + 1)
    alpha = k.let(state[0])
    beta = k.let((1.0 - alpha * alpha) * state[1])
    total = k.let(0.0)
    with k.for_range(0, kk) as i:
        total += r[kk - i - 1] * y[i]
    state[0] = -(r[kk] + total) / beta
    state[1] = beta
    return k.build()


@cache
def z_program() -> Program:
    k = ProgramBuilder("polybench_durbin_z", WG)
    y, state = k.buffer("y", f32), k.buffer("state", f32)
    z = k.buffer("z", f32, "write")
    kk = k.let(k.param("round", i32) + 1)
    i = k.let(k.global_id(0).cast(i32))
    with k.if_(i < kk):
        z[i] = y[i] + state[0] * y[kk - i - 1]
    return k.build()


@cache
def copy_program() -> Program:
    k = ProgramBuilder("polybench_durbin_copy", WG)
    z, state = k.buffer("z", f32), k.buffer("state", f32)
    y = k.buffer("y", f32, "read_write")
    kk = k.let(k.param("round", i32) + 1)
    i = k.let(k.global_id(0).cast(i32))
    with k.if_(i < kk):
        y[i] = z[i]
    with k.if_(i == kk):
        y[kk] = state[0]
    return k.build()


def run(backend: Backend, n: int) -> list[np.ndarray]:
    r = (n + 1 - np.arange(n)).astype(F)  # r[i] = (n+1-i)
    y = np.zeros(n, F)
    y[0] = -r[0]
    with resident(backend) as dev:
        rb, yb = dev.put(r, "r"), dev.put(y, "y")
        zb = dev.put(np.zeros(n, F), "z")
        state = dev.put(np.array([-r[0], 1.0], F), "state")  # alpha = -r[0], beta = 1.0
        g = groups(n, WG)
        dev.repeat([dev.step(alpha_program(), {"r": rb, "y": yb}, {"state": state}, 1,
                             index="round"),
                    dev.step(z_program(), {"y": yb, "state": state}, {"z": zb}, g, index="round"),
                    dev.step(copy_program(), {"z": zb, "state": state}, {"y": yb}, g,
                             index="round")], n - 1)
        return [dev.get(yb, np.float32, n)]
