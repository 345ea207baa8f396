"""Small Programs several test files dispatch, written once: the f32 saxpy (y = a * x + y,
param `a`) and an f32 increment (y += 1), both in workgroups of 64."""

from __future__ import annotations

from vyre import ProgramBuilder, f32
from vyre.ir.nodes import Program


def saxpy(name: str = "saxpy") -> Program:
    k = ProgramBuilder(name, workgroup_size=64)
    x = k.buffer("x", f32)
    y = k.buffer("y", f32, "read_write")
    a = k.param("a", f32)
    i = k.global_linear_id()
    with k.if_(i < y.length()):
        y[i] = a * x[i] + y[i]
    return k.build()


def inc_f32(name: str = "inc") -> Program:
    k = ProgramBuilder(name, workgroup_size=64)
    y = k.buffer("y", f32, "read_write")
    i = k.global_linear_id()
    with k.if_(i < y.length()):
        y[i] = y[i] + 1.0
    return k.build()
