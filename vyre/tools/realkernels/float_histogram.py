"""float_histogram (written for this suite, c/float_histogram.c): one invocation per sample
computes its weight +-exp(-8 x) with vyre's exact exp and its bin (int)(x * bins), and adds
the weight with `atomic_add`, vyre's order-independent f32 atomic (the old value unused):
each bin becomes its exact sum rounded once, the same bits on every run and backend
whatever order the invocations run in. The C sums exactly in 64-bit integers."""

from __future__ import annotations

from functools import cache

import numpy as np

from vyre import ProgramBuilder, f32, i32
from vyre.builder import exp, select
from vyre.interface import Backend
from vyre.ir.nodes import Program

from .common import F, Lcg, groups, resident

ARGS = {"samples": 16384, "bins": 64, "seed": 32}
LARGE_ARGS = {"samples": 4194304, "bins": 256, "seed": 32}  # issue 32's 4M values, 256 bins
WG = 256


@cache
def program() -> Program:
    k = ProgramBuilder("float_histogram", WG)
    xs, signs = k.buffer("x", f32), k.buffer("sign", i32)
    hist = k.buffer("hist", f32, "read_write")
    n, bins = k.param("samples", i32), k.param("bins", i32)
    i = k.let(k.global_id(0).cast(i32))
    with k.if_(i < n):
        x = k.let(xs[i])
        w = k.let(exp(-8.0 * x))
        hist.atomic_add((x * bins.cast(f32)).cast(i32), select(signs[i] != 0, -w, w))
    return k.build()


def run(backend: Backend, samples: int, bins: int, seed: int) -> list[np.ndarray]:
    rng = Lcg(seed)
    x = rng.unit(samples)
    sign = rng.ints(samples, 2)
    with resident(backend) as dev:
        hist = dev.put(np.zeros(bins, F), "hist")
        dev.run(program(), {"x": dev.put(x, "x"), "sign": dev.put(sign, "sign")},
                {"hist": hist}, groups(samples, WG), {"samples": samples, "bins": bins})
        return [dev.get(hist, np.float32, bins)]
