"""gaussian (Rodinia cuda/gaussian/gaussian.cu): for t = 0 .. Size-2 the host driver
dispatches Fan1 (one invocation per multiplier) then Fan2 (one per updated element of a,
and of b where yidx == 0), as ForwardSub does; BackSub runs as one invocation in its
order. C: c/gaussian.c."""

from __future__ import annotations

from functools import cache

import numpy as np

from vyre import ProgramBuilder, f32, i32
from vyre.interface import Backend
from vyre.ir.nodes import Program

from .common import F, Lcg, groups, resident

ARGS = {"size": 32, "seed": 10}
WG1 = 64
WG2 = 8


@cache
def fan1_program() -> Program:
    k = ProgramBuilder("rodinia_gaussian_fan1", WG1)
    a = k.buffer("a", f32)
    m = k.buffer("m", f32, "read_write")
    size, t = k.param("Size", i32), k.param("t", i32)
    x = k.let(k.global_id(0).cast(i32))
    with k.if_(x < size - 1 - t):
        m[size * (x + t + 1) + t] = a[size * (x + t + 1) + t] / a[size * t + t]
    return k.build()


@cache
def fan2_program() -> Program:
    k = ProgramBuilder("rodinia_gaussian_fan2", (WG2, WG2))
    m = k.buffer("m", f32)
    a = k.buffer("a", f32, "read_write")
    b = k.buffer("b", f32, "read_write")
    size, t = k.param("Size", i32), k.param("t", i32)
    xidx = k.let(k.global_id(0).cast(i32))
    yidx = k.let(k.global_id(1).cast(i32))
    with k.if_((xidx < size - 1 - t) & (yidx < size - t)):
        at = k.let(size * (xidx + 1 + t) + (yidx + t))
        a[at] = a[at] - m[size * (xidx + 1 + t) + t] * a[size * t + (yidx + t)]
        with k.if_(yidx == 0):
            b[xidx + 1 + t] = b[xidx + 1 + t] - m[size * (xidx + 1 + t) + (yidx + t)] * b[t]
    return k.build()


@cache
def backsub_program() -> Program:
    k = ProgramBuilder("rodinia_gaussian_backsub", 1)
    a, b = k.buffer("a", f32), k.buffer("b", f32)
    final = k.buffer("finalVec", f32, "read_write")
    size = k.param("Size", i32)
    with k.for_range(0, size, ty=i32) as i:
        row = k.let(size - i - 1)
        final[row] = b[row]
        with k.for_range(0, i, ty=i32) as j:
            final[row] = final[row] - a[size * row + (size - j - 1)] * final[size - j - 1]
        final[row] = final[row] / a[size * row + row]
    return k.build()


def run(backend: Backend, size: int, seed: int) -> list[np.ndarray]:
    lcg = Lcg(seed)
    a = lcg.unit(size * size)
    a[:: size + 1] += F(size)
    b = lcg.unit(size)
    p = {"Size": size}
    with resident(backend) as dev:
        ab, bb = dev.put(a, "a"), dev.put(b, "b")
        m = dev.put(np.zeros(size * size, np.float32), "m")
        final = dev.put(np.zeros(size, np.float32), "finalVec")
        for t in range(size - 1):
            dev.run(fan1_program(), {"a": ab}, {"m": m}, groups(size, WG1), {**p, "t": t})
            dev.run(fan2_program(), {"m": m}, {"a": ab, "b": bb},
                    (groups(size, WG2), groups(size, WG2)), {**p, "t": t})
        dev.run(backsub_program(), {"a": ab, "b": bb}, {"finalVec": final}, 1, p)
        return [dev.get(ab, np.float32, size * size), dev.get(bb, np.float32, size),
                dev.get(m, np.float32, size * size), dev.get(final, np.float32, size)]
