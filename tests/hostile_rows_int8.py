"""Hostile-input rows for the packed 8-bit dot products and vyre.programs.matmul_i8 (loaded
by tests/test_hostile.py into its table: each row runs on every backend, must raise the vyre
error with the phrases, leave no buffer behind and the backend working)."""

from __future__ import annotations

from typing import Any

import numpy as np

import vyre
from vyre.builder import BuildError, ProgramBuilder
from vyre.errors import BufferOwnershipError, BufferStateError
from vyre.programs import LibraryArgumentError
from vyre.programs import matmul_i8 as MI

L = LibraryArgumentError
i8 = np.zeros((2, 3), np.int8)


def _dot4_on_floats() -> Any:
    k = ProgramBuilder("dot4_floats", workgroup_size=64)
    x = k.buffer("x", vyre.f32)
    return vyre.dot4_i8(x[0], x[1])


ROWS: list[Any] = [
    ("dot4 on f32 operands", lambda c: _dot4_on_floats(), BuildError,
     ("dot4_i8 takes (u32, u32, i32)", "bitcast(u32)")),
    ("matmul_i8 float A", lambda c: MI.matmul_i8_host(c.b, i8.astype(np.float32), i8.T), L,
     ("int8 or uint8 matrix", ".astype(np.int8)")),
    ("matmul_i8 1-D A", lambda c: MI.matmul_i8_host(c.b, np.zeros(4, np.int8), i8), L,
     ("2-D int8 or uint8",)),
    ("matmul_i8 mixed signedness", lambda c: MI.matmul_i8_host(c.b, i8, i8.T.view(np.uint8)),
     L, ("int8 @ int8 or uint8 @ uint8", "convert one")),
    ("matmul_i8 shapes", lambda c: MI.matmul_i8_host(c.b, i8, i8), L,
     ("inner dimensions differ", "transpose")),
    ("matmul_i8 kernel name", lambda c: MI.matmul_i8_host(c.b, i8, i8.T, kernel="fast"), L,
     ("'auto', 'program', 'mma'",)),
    ("matmul_i8 bad tiles", lambda c: MI.matmul_i8_program(True, block=48), L,
     ("leave them out for the defaults",)),
    ("matmul_i8 small C", lambda c: MI.matmul_i8_device(c.b, c.live, c.live, c.live, 4, 4, 0),
     L, ("c holds 16 bytes", "4 x 4 i32")),
    ("matmul_i8 small A", lambda c: MI.matmul_i8_device(c.b, c.live, c.live, c.live, 1, 1, 17),
     L, ("a holds 16 bytes", "1 rows of 8 packed words", "pack_i8")),
    ("matmul_i8 freed buffer", lambda c: MI.matmul_i8_device(c.b, c.freed, c.live, c.live,
                                                             0, 0, 0),
     BufferStateError, ("freed",)),
    ("matmul_i8 foreign buffer", lambda c: MI.matmul_i8_device(c.b, c.live, c.foreign, c.live,
                                                               1, 1, 1),
     BufferOwnershipError, ("vyre.transfer",)),
    ("matmul_i8 host array as buffer", lambda c: MI.matmul_i8_device(
        c.b, i8, c.live, c.live, 1, 1, 1), BufferOwnershipError, ("host data", "upload")),
]
