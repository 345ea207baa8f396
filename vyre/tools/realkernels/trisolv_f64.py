"""trisolv in PolyBench/C's default double configuration (DATA_TYPE double): the port of
trisolv.py with f64 buffers, so every product, difference and division is an f64 one.
C: c/trisolv_f64.c."""

from __future__ import annotations

from functools import cache

import numpy as np

from vyre import f64
from vyre.interface import Backend
from vyre.ir.nodes import Program

from . import trisolv

ARGS = {"n": 120}


@cache
def row_program() -> Program:
    return trisolv.build(f64)


def run(backend: Backend, n: int) -> list[np.ndarray]:
    return trisolv.solve(backend, n, row_program(), np.float64)
