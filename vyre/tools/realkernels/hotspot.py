"""hotspot (Rodinia openmp/hotspot/hotspot_openmp.cpp): one invocation per grid cell runs
single_iteration's corner / edge / interior formula; the host driver ping-pongs the two
temperature buffers for `iterations` steps, as compute_tran_temp does. C: c/hotspot.c."""

from __future__ import annotations

from collections.abc import Callable
from functools import cache

import numpy as np

from vyre import ProgramBuilder, f32, i32
from vyre.builder import Value
from vyre.interface import Backend
from vyre.ir.nodes import Program

from .common import F, Lcg, groups, resident

ARGS = {"rows": 64, "cols": 64, "iterations": 20, "seed": 1}
TILE = 16


@cache
def program() -> Program:
    k = ProgramBuilder("rodinia_hotspot", (TILE, TILE))
    temp = k.buffer("temp", f32)
    power = k.buffer("power", f32)
    result = k.buffer("result", f32, "write")
    row, col = k.param("row", i32), k.param("col", i32)
    cap_1, rx_1, ry_1, rz_1 = (k.param(n, f32) for n in ("Cap_1", "Rx_1", "Ry_1", "Rz_1"))
    amb_temp = k.param("amb_temp", f32)
    c = k.let(k.global_id(0).cast(i32))
    r = k.let(k.global_id(1).cast(i32))
    with k.if_((r < row) & (c < col)):
        delta = k.let(0.0)
        def t(i: Value | int) -> Value:
            return temp[i]

        rc = r * col + c

        def corner(p: Value | int, x: Value | int, y: Value, me: Value | int) -> Value:
            return cap_1 * (power[p] + (t(x) - t(me)) * rx_1 + (t(y) - t(me)) * ry_1
                            + (amb_temp - t(me)) * rz_1)

        cases: list[tuple[Value, Callable[[], Value]]] = [
            ((r == 0) & (c == 0), lambda: corner(0, 1, col, 0)),
            ((r == 0) & (c == col - 1), lambda: corner(c, c - 1, c + col, c)),
            ((r == row - 1) & (c == col - 1), lambda: corner(rc, rc - 1, (r - 1) * col + c, rc)),
            ((r == row - 1) & (c == 0), lambda: corner(r * col, r * col + 1, (r - 1) * col, r * col)),
            (r == 0, lambda: cap_1 * (power[c] + (t(c + 1) + t(c - 1) - 2.0 * t(c)) * rx_1
                                      + (t(col + c) - t(c)) * ry_1 + (amb_temp - t(c)) * rz_1)),
            (c == col - 1, lambda: cap_1 * (
                power[rc] + (t((r + 1) * col + c) + t((r - 1) * col + c) - 2.0 * t(rc)) * ry_1
                + (t(rc - 1) - t(rc)) * rx_1 + (amb_temp - t(rc)) * rz_1)),
            (r == row - 1, lambda: cap_1 * (
                power[rc] + (t(rc + 1) + t(rc - 1) - 2.0 * t(rc)) * rx_1
                + (t((r - 1) * col + c) - t(rc)) * ry_1 + (amb_temp - t(rc)) * rz_1)),
            (c == 0, lambda: cap_1 * (
                power[r * col] + (t((r + 1) * col) + t((r - 1) * col) - 2.0 * t(r * col)) * ry_1
                + (t(r * col + 1) - t(r * col)) * rx_1 + (amb_temp - t(r * col)) * rz_1)),
        ]

        def interior() -> Value:
            return cap_1 * (power[rc] + (t((r + 1) * col + c) + t((r - 1) * col + c)
                                         - 2.0 * t(rc)) * ry_1
                            + (t(rc + 1) + t(rc - 1) - 2.0 * t(rc)) * rx_1
                            + (amb_temp - t(rc)) * rz_1)

        def chain(i: int) -> None:
            if i == len(cases):
                delta.set(interior())
                return
            with k.if_(cases[i][0]):
                delta.set(cases[i][1]())
            with k.else_():
                chain(i + 1)

        chain(0)
        result[rc] = t(rc) + delta
    return k.build()


def constants(row: int, col: int) -> dict[str, np.float32]:
    """compute_tran_temp's constants, with C's float / double promotions."""
    t_chip, chip_h, chip_w = F(0.0005), F(0.016), F(0.016)
    grid_height = chip_h / F(row)
    grid_width = chip_w / F(col)
    cap = F(0.5 * 1.75e6 * float(t_chip) * float(grid_width) * float(grid_height))
    rx = F(float(grid_width) / (2.0 * 100 * float(t_chip) * float(grid_height)))
    ry = F(float(grid_height) / (2.0 * 100 * float(t_chip) * float(grid_width)))
    rz = t_chip / (F(100) * grid_height * grid_width)  # int * float is float arithmetic in C
    max_slope = F(3.0e6 / (0.5 * float(t_chip) * 1.75e6))
    step = F(0.001 / float(max_slope) / 1000.0)
    return {"Cap_1": step / cap, "Rx_1": F(1) / rx, "Ry_1": F(1) / ry, "Rz_1": F(1) / rz,
            "amb_temp": F(80.0)}


def run(backend: Backend, rows: int, cols: int, iterations: int, seed: int) -> list[np.ndarray]:
    lcg = Lcg(seed)
    temp = F(320.0) + F(20.0) * lcg.unit(rows * cols)
    power = F(0.5) * lcg.unit(rows * cols)
    params = {"row": rows, "col": cols, **constants(rows, cols)}
    with resident(backend) as dev:
        t = dev.put(temp, "temp")
        r = dev.put(np.zeros_like(temp), "result")
        p = dev.put(power, "power")
        for _ in range(iterations):
            dev.run(program(), {"temp": t, "power": p}, {"result": r},
                    (groups(cols, TILE), groups(rows, TILE)), params)
            t, r = r, t
        return [dev.get(t, np.float32, rows * cols)]
