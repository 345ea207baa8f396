"""srad (Rodinia openmp/srad/srad_v2/srad.cpp): per iteration, one invocation computes the
ROI statistics in the original's order (a sequential float sum), then one invocation per
pixel computes the derivatives and the saturated diffusion coefficient, then one per pixel
applies the divergence update. C: c/srad.c."""

from __future__ import annotations

from functools import cache

import numpy as np

from vyre import ProgramBuilder, f32, i32
from vyre.builder import select
from vyre.interface import Backend
from vyre.ir.nodes import Program

from .common import F, Lcg, groups, resident

ARGS = {"rows": 64, "cols": 64, "r1": 0, "r2": 31, "c1": 0, "c2": 31, "lambda_milli": 500,
        "niter": 4, "seed": 3}
TILE = 16


@cache
def stats_program() -> Program:
    """meanROI, varROI and q0sqr of the region of interest (one invocation)."""
    k = ProgramBuilder("rodinia_srad_stats", 1)
    j_img = k.buffer("J", f32)
    q0 = k.buffer("q0sqr", f32, "write")
    cols, r1, r2, c1, c2 = (k.param(n, i32) for n in ("cols", "r1", "r2", "c1", "c2"))
    total = k.let(0.0)
    total2 = k.let(0.0)
    with k.for_range(r1, r2 + 1) as i, k.for_range(c1, c2 + 1) as j:
        tmp = k.let(j_img[i * cols + j])
        total += tmp
        total2 += tmp * tmp
    size_r = ((r2 - r1 + 1) * (c2 - c1 + 1)).cast(f32)
    mean = k.let(total / size_r)
    var = k.let((total2 / size_r) - mean * mean)
    q0[0] = var / (mean * mean)
    return k.build()


@cache
def coeff_program() -> Program:
    k = ProgramBuilder("rodinia_srad_coeff", (TILE, TILE))
    j_img = k.buffer("J", f32)
    q0 = k.buffer("q0sqr", f32)
    d_n, d_s, d_w, d_e, c_out = (k.buffer(n, f32, "write") for n in ("dN", "dS", "dW", "dE", "c"))
    rows, cols = k.param("rows", i32), k.param("cols", i32)
    j = k.let(k.global_id(0).cast(i32))
    i = k.let(k.global_id(1).cast(i32))
    with k.if_((i < rows) & (j < cols)):
        q0sqr = k.let(q0[0])
        idx = k.let(i * cols + j)
        jc = k.let(j_img[idx])
        i_n = select(i == 0, 0, i - 1)
        i_s = select(i == rows - 1, rows - 1, i + 1)
        j_w = select(j == 0, 0, j - 1)
        j_e = select(j == cols - 1, cols - 1, j + 1)
        dn = k.let(j_img[i_n * cols + j] - jc)
        ds = k.let(j_img[i_s * cols + j] - jc)
        dw = k.let(j_img[i * cols + j_w] - jc)
        de = k.let(j_img[i * cols + j_e] - jc)
        d_n[idx], d_s[idx], d_w[idx], d_e[idx] = dn, ds, dw, de
        g2 = k.let((dn * dn + ds * ds + dw * dw + de * de) / (jc * jc))
        lap = k.let((dn + ds + dw + de) / jc)
        num = k.let((0.5 * g2) - ((1.0 / 16.0) * (lap * lap)))
        den = k.let(1.0 + (0.25 * lap))
        qsqr = k.let(num / (den * den))
        den.set((qsqr - q0sqr) / (q0sqr * (1.0 + q0sqr)))
        c = k.let(1.0 / (1.0 + den))
        c_out[idx] = select(c < 0.0, 0.0, select(c > 1.0, 1.0, c))
    return k.build()


@cache
def update_program() -> Program:
    k = ProgramBuilder("rodinia_srad_update", (TILE, TILE))
    d_n, d_s, d_w, d_e, c_in = (k.buffer(n, f32) for n in ("dN", "dS", "dW", "dE", "c"))
    j_img = k.buffer("J", f32, "read_write")
    rows, cols = k.param("rows", i32), k.param("cols", i32)
    lam = k.param("lambda", f32)
    j = k.let(k.global_id(0).cast(i32))
    i = k.let(k.global_id(1).cast(i32))
    with k.if_((i < rows) & (j < cols)):
        idx = k.let(i * cols + j)
        c_n = c_in[idx]
        c_s = c_in[select(i == rows - 1, rows - 1, i + 1) * cols + j]
        c_w = c_in[idx]
        c_e = c_in[i * cols + select(j == cols - 1, cols - 1, j + 1)]
        d = k.let(c_n * d_n[idx] + c_s * d_s[idx] + c_w * d_w[idx] + c_e * d_e[idx])
        j_img[idx] = j_img[idx] + 0.25 * lam * d
    return k.build()


def run(backend: Backend, rows: int, cols: int, r1: int, r2: int, c1: int, c2: int,
        lambda_milli: int, niter: int, seed: int) -> list[np.ndarray]:
    lam = F(lambda_milli) / F(1000.0)
    image = F(1.0) + F(1.7182817) * Lcg(seed).unit(rows * cols)
    size = rows * cols
    grid = (groups(cols, TILE), groups(rows, TILE))
    with resident(backend) as dev:
        j_img = dev.put(image, "J")
        q0 = dev.put(np.zeros(1, np.float32), "q0sqr")
        tmp = {n: dev.put(np.zeros(size, np.float32), n) for n in ("dN", "dS", "dW", "dE", "c")}
        for _ in range(niter):
            dev.run(stats_program(), {"J": j_img}, {"q0sqr": q0}, 1,
                    {"cols": cols, "r1": r1, "r2": r2, "c1": c1, "c2": c2})
            dev.run(coeff_program(), {"J": j_img, "q0sqr": q0}, tmp, grid,
                    {"rows": rows, "cols": cols})
            dev.run(update_program(), tmp, {"J": j_img}, grid,
                    {"rows": rows, "cols": cols, "lambda": lam})
        return [dev.get(j_img, np.float32, size), dev.get(tmp["c"], np.float32, size)]
