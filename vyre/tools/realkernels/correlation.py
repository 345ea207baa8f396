"""correlation (PolyBench/C 4.2.1 datamining/correlation/correlation.c): one invocation per
column computes its mean and standard deviation in row order (sqrt, then the original's
`stddev <= eps ? 1.0 : stddev`), one per element centres and reduces the data (dividing by
sqrt(float_n) * stddev[j]), and one per (i, j) of the upper triangle sums the products over
the observations in order, writing corr[i][j] and corr[j][i] (the diagonal is 1.0).
C: c/correlation.c."""

from __future__ import annotations

from functools import cache

import numpy as np

from vyre import ProgramBuilder, f32, i32
from vyre.builder import select, sqrt
from vyre.interface import Backend
from vyre.ir.nodes import Program

from .common import F, groups, resident

ARGS = {"m": 80, "n": 100}
WG = 64
TILE = 8
EPS = 0.1  # DATA_TYPE eps = SCALAR_VAL(0.1): the f32 nearest 0.1, as every f32 literal here


@cache
def stats_program() -> Program:
    k = ProgramBuilder("polybench_correlation_stats", WG)
    data = k.buffer("data", f32)
    mean, stddev = k.buffer("mean", f32, "write"), k.buffer("stddev", f32, "write")
    m, n, float_n = k.param("m", i32), k.param("n", i32), k.param("float_n", f32)
    j = k.let(k.global_id(0).cast(i32))
    with k.if_(j < m):
        mu = k.let(0.0)
        with k.for_range(0, n) as i:
            mu += data[i * m + j]
        mu /= float_n
        sd = k.let(0.0)
        with k.for_range(0, n) as i2:
            sd += (data[i2 * m + j] - mu) * (data[i2 * m + j] - mu)
        sd /= float_n
        sd.set(sqrt(sd))
        sd.set(select(sd <= EPS, 1.0, sd))
        mean[j] = mu
        stddev[j] = sd
    return k.build()


@cache
def center_program() -> Program:
    k = ProgramBuilder("polybench_correlation_center", (TILE, TILE))
    mean, stddev = k.buffer("mean", f32), k.buffer("stddev", f32)
    data = k.buffer("data", f32, "read_write")
    m, n, float_n = k.param("m", i32), k.param("n", i32), k.param("float_n", f32)
    j, i = k.let(k.global_id(0).cast(i32)), k.let(k.global_id(1).cast(i32))
    with k.if_((i < n) & (j < m)):
        v = k.let(data[i * m + j] - mean[j])
        data[i * m + j] = v / (sqrt(float_n) * stddev[j])
    return k.build()


@cache
def corr_program() -> Program:
    k = ProgramBuilder("polybench_correlation_corr", (TILE, TILE))
    data = k.buffer("data", f32)
    corr = k.buffer("corr", f32, "write")
    m, n = k.param("m", i32), k.param("n", i32)
    j, i = k.let(k.global_id(0).cast(i32)), k.let(k.global_id(1).cast(i32))
    with k.if_((i < m) & (j < m)):
        with k.if_(i == j):
            corr[i * m + i] = 1.0
        with k.if_(i < j):
            c = k.let(0.0)
            with k.for_range(0, n) as kk:
                c += data[kk * m + i] * data[kk * m + j]
            corr[i * m + j] = c
            corr[j * m + i] = c
    return k.build()


def run(backend: Backend, m: int, n: int) -> list[np.ndarray]:
    i, j = np.indices((n, m))
    data = (i * j).astype(F) / F(m) + i.astype(F)  # (DATA_TYPE)(i*j)/M + i
    p = {"m": m, "n": n, "float_n": F(n)}
    with resident(backend) as dev:
        db = dev.put(data, "data")
        mean, stddev = dev.put(np.zeros(m, F), "mean"), dev.put(np.zeros(m, F), "stddev")
        corr = dev.put(np.zeros(m * m, F), "corr")
        dev.run(stats_program(), {"data": db}, {"mean": mean, "stddev": stddev},
                groups(m, WG), p)
        dev.run(center_program(), {"mean": mean, "stddev": stddev}, {"data": db},
                (groups(m, TILE), groups(n, TILE)), p)
        dev.run(corr_program(), {"data": db}, {"corr": corr}, (groups(m, TILE), groups(m, TILE)),
                {"m": m, "n": n})
        return [dev.get(corr, np.float32, m * m), dev.get(mean, np.float32, m),
                dev.get(stddev, np.float32, m), dev.get(db, np.float32, n * m)]
