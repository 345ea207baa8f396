"""covariance (PolyBench/C 4.2.1 datamining/covariance/covariance.c): one invocation per
column sums its mean in row order, one per element subtracts it, and one per (i, j >= i)
sums the products over the observations in order and divides by float_n - 1, writing
cov[i][j] and cov[j][i]. C: c/covariance.c."""

from __future__ import annotations

from functools import cache

import numpy as np

from vyre import ProgramBuilder, f32, i32
from vyre.interface import Backend
from vyre.ir.nodes import Program

from .common import F, groups, resident

ARGS = {"m": 80, "n": 100}
WG = 64
TILE = 8


@cache
def mean_program() -> Program:
    k = ProgramBuilder("polybench_covariance_mean", WG)
    data = k.buffer("data", f32)
    mean = k.buffer("mean", f32, "write")
    m, n, float_n = k.param("m", i32), k.param("n", i32), k.param("float_n", f32)
    j = k.let(k.global_id(0).cast(i32))
    with k.if_(j < m):
        mu = k.let(0.0)
        with k.for_range(0, n) as i:
            mu += data[i * m + j]
        mean[j] = mu / float_n
    return k.build()


@cache
def center_program() -> Program:
    k = ProgramBuilder("polybench_covariance_center", (TILE, TILE))
    mean = k.buffer("mean", f32)
    data = k.buffer("data", f32, "read_write")
    m, n = k.param("m", i32), k.param("n", i32)
    j, i = k.let(k.global_id(0).cast(i32)), k.let(k.global_id(1).cast(i32))
    with k.if_((i < n) & (j < m)):
        data[i * m + j] = data[i * m + j] - mean[j]
    return k.build()


@cache
def cov_program() -> Program:
    k = ProgramBuilder("polybench_covariance_cov", (TILE, TILE))
    data = k.buffer("data", f32)
    cov = k.buffer("cov", f32, "write")
    m, n, float_n = k.param("m", i32), k.param("n", i32), k.param("float_n", f32)
    j, i = k.let(k.global_id(0).cast(i32)), k.let(k.global_id(1).cast(i32))
    with k.if_((i < m) & (j < m) & (i <= j)):
        c = k.let(0.0)
        with k.for_range(0, n) as kk:
            c += data[kk * m + i] * data[kk * m + j]
        c /= float_n - 1.0
        cov[i * m + j] = c
        cov[j * m + i] = c
    return k.build()


def run(backend: Backend, m: int, n: int) -> list[np.ndarray]:
    i, j = np.indices((n, m))
    data = (i.astype(F) * j.astype(F)) / F(m)  # ((DATA_TYPE) i*j) / M
    p = {"m": m, "n": n, "float_n": F(n)}
    with resident(backend) as dev:
        db = dev.put(data, "data")
        mean, cov = dev.put(np.zeros(m, F), "mean"), dev.put(np.zeros(m * m, F), "cov")
        dev.run(mean_program(), {"data": db}, {"mean": mean}, groups(m, WG), p)
        dev.run(center_program(), {"mean": mean}, {"data": db},
                (groups(m, TILE), groups(n, TILE)), {"m": m, "n": n})
        dev.run(cov_program(), {"data": db}, {"cov": cov}, (groups(m, TILE), groups(m, TILE)), p)
        return [dev.get(cov, np.float32, m * m), dev.get(mean, np.float32, m)]
