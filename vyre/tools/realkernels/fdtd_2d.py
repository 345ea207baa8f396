"""fdtd_2d (PolyBench/C 4.2.1 stencils/fdtd-2d/fdtd-2d.c): one pipeline round per time step,
one dispatch per field update of the original (ey with row 0 set to _fict_[t], then ex,
then hz), one invocation per element. C: c/fdtd_2d.c."""

from __future__ import annotations

from functools import cache

import numpy as np

from vyre import ProgramBuilder, f32, i32
from vyre.interface import Backend
from vyre.ir.nodes import Program

from .common import F, groups, resident

ARGS = {"tmax": 40, "nx": 60, "ny": 80}
TILE = 8


def _grid(k: ProgramBuilder) -> tuple:
    j, i = k.let(k.global_id(0).cast(i32)), k.let(k.global_id(1).cast(i32))
    return i, j, k.param("nx", i32), k.param("ny", i32)


@cache
def ey_program() -> Program:
    k = ProgramBuilder("polybench_fdtd_2d_ey", (TILE, TILE))
    hz, fict = k.buffer("hz", f32), k.buffer("fict", f32)
    ey = k.buffer("ey", f32, "read_write")
    i, j, nx, ny = _grid(k)
    t = k.param("t", i32)
    with k.if_((i < nx) & (j < ny)):
        with k.if_(i == 0):
            ey[j] = fict[t]
        with k.else_():
            ey[i * ny + j] = ey[i * ny + j] - 0.5 * (hz[i * ny + j] - hz[(i - 1) * ny + j])
    return k.build()


@cache
def ex_program() -> Program:
    k = ProgramBuilder("polybench_fdtd_2d_ex", (TILE, TILE))
    hz = k.buffer("hz", f32)
    ex = k.buffer("ex", f32, "read_write")
    i, j, nx, ny = _grid(k)
    with k.if_((i < nx) & (j >= 1) & (j < ny)):
        ex[i * ny + j] = ex[i * ny + j] - 0.5 * (hz[i * ny + j] - hz[i * ny + j - 1])
    return k.build()


@cache
def hz_program() -> Program:
    k = ProgramBuilder("polybench_fdtd_2d_hz", (TILE, TILE))
    ex, ey = k.buffer("ex", f32), k.buffer("ey", f32)
    hz = k.buffer("hz", f32, "read_write")
    i, j, nx, ny = _grid(k)
    with k.if_((i < nx - 1) & (j < ny - 1)):
        hz[i * ny + j] = hz[i * ny + j] - 0.7 * (ex[i * ny + j + 1] - ex[i * ny + j]
                                                 + ey[(i + 1) * ny + j] - ey[i * ny + j])
    return k.build()


def run(backend: Backend, tmax: int, nx: int, ny: int) -> list[np.ndarray]:
    i, j = np.indices((nx, ny))
    fi = i.astype(F)
    ex0 = (fi * (j + 1).astype(F)) / F(nx)  # ((DATA_TYPE) i*(j+1)) / nx
    ey0 = (fi * (j + 2).astype(F)) / F(ny)
    hz0 = (fi * (j + 3).astype(F)) / F(nx)
    with resident(backend) as dev:
        ex, ey, hz = dev.put(ex0, "ex"), dev.put(ey0, "ey"), dev.put(hz0, "hz")
        fict = dev.put(np.arange(tmax, dtype=F), "fict")
        g = (groups(ny, TILE), groups(nx, TILE))
        p = {"nx": nx, "ny": ny}
        dev.repeat([dev.step(ey_program(), {"hz": hz, "fict": fict}, {"ey": ey}, g, p, index="t"),
                    dev.step(ex_program(), {"hz": hz}, {"ex": ex}, g, p),
                    dev.step(hz_program(), {"ex": ex, "ey": ey}, {"hz": hz}, g, p)], tmax)
        return [dev.get(ex, np.float32, nx * ny), dev.get(ey, np.float32, nx * ny),
                dev.get(hz, np.float32, nx * ny)]
