"""Hostile rows for order-independent float atomic adds (issue 32 item 6): a program that
also loads, stores or relaxed-adds a buffer its exact adds target would see a half-done
sum; it is refused naming both ways out. An f64 add whose old value is read (f64 has no
order-dependent atomic) is refused saying what to do. Loaded by tests/test_hostile.py
(rows: id, call(ctx), class, phrases)."""

from __future__ import annotations

from typing import Any

import numpy as np

import vyre
from vyre import Buffer, InOut, Output, ProgramBuilder, ScalarType, f32, f64
from vyre.errors import InvalidProgram


def _load_after_add(c: Any) -> Any:
    @vyre.kernel
    def k(x: Buffer[f32], y: InOut[f32]) -> None:
        i = vyre.global_linear_id()
        y.atomic_add(0, x[i])
        with vyre.if_(y[1] > 0.0):
            y.atomic_add(2, x[i])
    return k.program


def _store_and_add(c: Any) -> Any:
    @vyre.kernel
    def k(x: Buffer[f32], y: InOut[f32]) -> None:
        i = vyre.global_linear_id()
        y[i] = 0.0
        y.atomic_add(0, x[i])
    return k.program


def _relaxed_and_exact(c: Any) -> Any:
    k = ProgramBuilder("mixed_orders", workgroup_size=64)
    x, y = k.buffer("x", ScalarType.F32), k.buffer("y", ScalarType.F32, "read_write")
    i = k.global_id()
    y.atomic_add(0, x[i])
    y.atomic_add_relaxed(1, x[i])
    return c.b.dispatch(k.build(), {"x": np.ones(64, np.float32), "y": np.zeros(2, np.float32)},
                        vyre.DispatchConfig(grid=(1, 1, 1)))


def _f64_old_value_read(c: Any) -> Any:
    @vyre.kernel
    def k(x: Buffer[f64], y: InOut[f64], o: Output[f64]) -> None:
        i = vyre.global_linear_id()
        o[i] = y.atomic_add(0, x[i])
    return k.program


ROWS: list[Any] = [
    ("exact f32 add and a load of its buffer", _load_after_add, InvalidProgram,
     ("a load", "order-independent", "separate dispatch", "atomic_add_relaxed")),
    ("exact f32 add and a store to its buffer", _store_and_add, InvalidProgram,
     ("a store", "separate dispatch", "atomic_add_relaxed")),
    ("exact and relaxed f32 adds on one buffer", _relaxed_and_exact, InvalidProgram,
     ("relaxed atomic add", "'y'", "atomic_add_relaxed")),
    ("f64 atomic add whose old value is read", _f64_old_value_read, InvalidProgram,
     ("f64 atomic add", "old value is read", "only order-independent", "f32 buffer")),
]
