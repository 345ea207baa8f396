"""The builder DSL: write kernels that read like kernels.

    k = ProgramBuilder("saxpy", workgroup_size=256)
    x, y = k.buffer("x", f32), k.buffer("y", f32, "read_write")
    a = k.param("a", f32)
    i = k.global_linear_id()
    with k.if_(i < y.length()):
        y[i] = a * x[i] + y[i]
    program = k.build()

Python numbers and numpy scalars become literals of the other operand's type; every type
rule of the IR is checked as the kernel is written, so misuse fails at build time with a
message naming the fix. Elements of 8/16-bit buffers are read as the 32-bit integer of
their signedness (u8/u16 -> u32, i8/i16 -> i32) and a u32 or i32 stored into one keeps
its low bits (docs/IR.md "Narrow integers"), so a kernel value is never 8 or 16 bits.

This package is the builder's public face: every name of the DSL is importable from here
(`vyre.builder.X`). Its modules, bottom-up: sites (BuildError, the user's line), rules
(typing), values (Value, Variable), buffers (BufferRef), control (blocks not yet entered),
functions (the hand-written ones: vyre.select & co, and `_fn`), calls (vyre.sqrt & co,
generated from the op registry by vyre.tools.gen_calls), then ProgramBuilder in three
layers: declarations, statements and program (control flow, build). It must never
evaluate a kernel or know about backends.
"""

from __future__ import annotations

from . import calls as _calls
from .buffers import BufferRef
from .calls import *  # noqa: F403  (the registry's functions: vyre.sqrt & co, generated)
from .functions import (
    call_fn,
    ceil_div,
    dot4_i8,
    dot4_u8,
    max_,
    min_,
    select,
    subgroup_broadcast,
    subgroup_exclusive_scan,
    subgroup_inclusive_scan,
    subgroup_reduce,
    subgroup_shuffle,
)
from .program import ProgramBuilder
from .rules import BOOL, U32
from .sites import BuildError, user_name, user_site
from .values import Number, Value, Variable

__all__ = [
    "BOOL",
    "U32",
    "BufferRef",
    "BuildError",
    "Number",
    "ProgramBuilder",
    "Value",
    "Variable",
    "call_fn",
    "ceil_div",
    "dot4_i8",
    "dot4_u8",
    "max_",
    "min_",
    "select",
    "subgroup_broadcast",
    "subgroup_exclusive_scan",
    "subgroup_inclusive_scan",
    "subgroup_reduce",
    "subgroup_shuffle",
    "user_name",
    "user_site",
]
__all__ += _calls.__all__  # (so a new registry function needs no edit here)
