"""hotspot3D (Rodinia openmp/hotspot3D/3D.c): one invocation per cell of the nx x ny x nz
grid runs computeTempCPU's seven-point update; the host driver ping-pongs the temperature
buffers for `iterations` steps. C: c/hotspot3d.c."""

from __future__ import annotations

from functools import cache

import numpy as np

from vyre import ProgramBuilder, f32, i32
from vyre.builder import select
from vyre.interface import Backend
from vyre.ir.nodes import Program

from .common import F, Lcg, groups, resident

ARGS = {"n": 32, "layers": 4, "iterations": 10, "seed": 2}
TILE = 16
COEFFS = ("cc", "cn", "cs", "ce", "cw", "ct", "cb", "dt", "Cap", "amb_temp")


@cache
def program() -> Program:
    k = ProgramBuilder("rodinia_hotspot3d", (TILE, TILE, 1))
    p_in = k.buffer("pIn", f32)
    t_in = k.buffer("tIn", f32)
    t_out = k.buffer("tOut", f32, "write")
    nx, ny, nz = (k.param(n, i32) for n in ("nx", "ny", "nz"))
    cc, cn, cs, ce, cw, ct, cb, dt, cap, amb = (k.param(n, f32) for n in COEFFS)
    x = k.let(k.global_id(0).cast(i32))
    y = k.let(k.global_id(1).cast(i32))
    z = k.let(k.global_id(2).cast(i32))
    with k.if_((x < nx) & (y < ny) & (z < nz)):
        c = k.let(x + y * nx + z * nx * ny)
        w = select(x == 0, c, c - 1)
        e = select(x == nx - 1, c, c + 1)
        n = select(y == 0, c, c - nx)
        s = select(y == ny - 1, c, c + nx)
        b = select(z == 0, c, c - nx * ny)
        t = select(z == nz - 1, c, c + nx * ny)
        t_out[c] = (t_in[c] * cc + t_in[n] * cn + t_in[s] * cs + t_in[e] * ce + t_in[w] * cw
                    + t_in[t] * ct + t_in[b] * cb + (dt / cap) * p_in[c] + ct * amb)
    return k.build()


def constants(n: int, layers: int) -> dict[str, np.float32]:
    """main()'s and computeTempCPU's constants, with C's float / double promotions."""
    t_chip = F(0.0005)
    dx = F(0.016) / F(n)
    dy = F(0.016) / F(n)
    dz = t_chip / F(layers)
    cap = F(0.5 * 1.75e6 * float(t_chip) * float(dx) * float(dy))
    rx = F(float(dy) / (2.0 * 100 * float(t_chip) * float(dx)))
    ry = F(float(dx) / (2.0 * 100 * float(t_chip) * float(dy)))
    rz = dz / (F(100) * dx * dy)  # int * float is float arithmetic in C
    max_slope = F(3.0e6 / (0.5 * float(t_chip) * 1.75e6))
    dt = F(0.001 / float(max_slope))
    step_div_cap = dt / cap
    ce, cn, ct = step_div_cap / rx, step_div_cap / ry, step_div_cap / rz
    cc = F(1.0 - (2.0 * float(ce) + 2.0 * float(cn) + 3.0 * float(ct)))
    return {"cc": cc, "cn": cn, "cs": cn, "ce": ce, "cw": ce, "ct": ct, "cb": ct, "dt": dt,
            "Cap": cap, "amb_temp": F(80.0)}


def run(backend: Backend, n: int, layers: int, iterations: int, seed: int) -> list[np.ndarray]:
    lcg = Lcg(seed)
    size = n * n * layers
    power = F(0.01) * lcg.unit(size)
    temp = F(320.0) + F(20.0) * lcg.unit(size)
    params = {"nx": n, "ny": n, "nz": layers, **constants(n, layers)}
    with resident(backend) as dev:
        p = dev.put(power, "pIn")
        t_in = dev.put(temp, "tIn")
        t_out = dev.put(np.zeros_like(temp), "tOut")
        for _ in range(iterations):
            dev.run(program(), {"pIn": p, "tIn": t_in}, {"tOut": t_out},
                    (groups(n, TILE), groups(n, TILE), layers), params)
            t_in, t_out = t_out, t_in
        return [dev.get(t_in, np.float32, size)]
