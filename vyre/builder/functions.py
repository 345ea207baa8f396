"""The kernel's functions written by hand (vyre.select, vyre.min_, the subgroup operations,
the packed dot products, ...) and `_fn`, the call of a registry function that the
generated ones (calls.py: vyre.sqrt, vyre.exp, ...; vyre.tools.gen_calls) are made of:
each builds the IR call of one operation over kernel values and literals, typed by the
IR's rules. A registry function written here keeps this helper: the generator leaves it
out of calls.py (only one with a special signature belongs here).

This module must never emit a statement or evaluate a function on the host.
"""

from __future__ import annotations

import math
from typing import Any, cast

from ..ir import nodes as N
from ..ir import ops
from .rules import BOOL, _binary, _call
from .sites import BuildError
from .values import Value


def _args(*xs: Any) -> tuple[N.ExprNode, ...]:
    b = next((x._b for x in xs if isinstance(x, Value)), None)
    if b is None:
        raise BuildError("at least one argument must be a kernel value")
    ty = next(x.ty for x in xs if isinstance(x, Value))
    return tuple(b._coerce(x, ty, "argument") for x in xs)


def _fn(fn: str, *xs: Any) -> Value:
    sig = ops.CALLS[fn].signature
    if sig is not None:  # each operand a literal of its own fixed type
        b = next((x._b for x in xs if isinstance(x, Value)), None)
        if b is None:
            raise BuildError(f"{fn}: at least one argument must be a kernel value")
        if len(xs) != len(sig[0]):
            raise BuildError(f"{fn} takes {len(sig[0])} arguments, got {len(xs)}")
        typed = tuple(b._coerce(x, t, f"{fn} argument") for x, t in zip(xs, sig[0]))
        return Value(b, _call(fn, *typed))
    args = _args(*xs)
    b = next(x._b for x in xs if isinstance(x, Value))
    return Value(b, _call(fn, *args))


def call_fn(fn: str, *xs: Any) -> Value:
    """The registry function `fn` (vyre.ir.ops.CALLS) of `xs`, by name: for code generic
    over functions (the conformance suite); programs use the named ones (vyre.sqrt, ...)."""
    if fn not in ops.CALLS:
        raise BuildError(f"unknown function {fn!r}; the functions are {sorted(ops.CALLS)}")
    return _fn(fn, *xs)


def dot4_i8(a: Any, b: Any, acc: Any = 0) -> Value:
    """acc + the dot product of the four signed bytes packed in u32 `a` and `b` (byte i is
    bits 8i..8i+7), as i32; the final addition wraps (CUDA `__dp4a`, WGSL `dot4I8Packed`).
    `acc` is an i32; pack with `vyre.programs.matmul_i8.pack_i8` on the host."""
    return _fn("dot4_i8", a, b, acc)


def dot4_u8(a: Any, b: Any, acc: Any = 0) -> Value:
    """acc + the dot product of the four unsigned bytes packed in u32 `a` and `b`, as u32;
    the final addition wraps (CUDA `__dp4a` on unsigned, WGSL `dot4U8Packed`)."""
    return _fn("dot4_u8", a, b, acc)


def min_(a: Any, b: Any) -> Value:
    """The smaller of a and b (Python's min() cannot be traced)."""
    x, y = _args(a, b)
    return Value(next(v._b for v in (a, b) if isinstance(v, Value)), _binary("min", x, y))


def max_(a: Any, b: Any) -> Value:
    """The larger of a and b (Python's max() cannot be traced)."""
    x, y = _args(a, b)
    return Value(next(v._b for v in (a, b) if isinstance(v, Value)), _binary("max", x, y))


_SUBGROUP_COMBINES = ("add", "min", "max", "and", "or", "xor")


def _subgroup(op: str, x: Any, lane: Any = None, combine: str | None = None) -> Value:
    if not isinstance(x, Value):
        raise BuildError(f"subgroup {op} needs a kernel value, got {type(x).__name__}")
    if combine is not None and combine not in _SUBGROUP_COMBINES:
        raise BuildError(f"subgroup {op}: combine {combine!r} is not one of "
                         f"{_SUBGROUP_COMBINES}")
    lane_e = None if lane is None else x._b._index(lane)
    return Value(x._b, N.Subgroup(op=cast(N.SubgroupOp, op), value=x.expr, lane=lane_e,
                                  combine=cast(N.SubgroupCombine | None, combine), ty=x.ty))


def subgroup_shuffle(x: Value, lane: Any) -> Value:
    """`x` of lane `lane mod subgroup_size` of this subgroup (i32/u32/f32). Like every
    subgroup operation: only in uniform control flow (docs/IR.md, "Subgroups")."""
    return _subgroup("shuffle", x, lane)


def subgroup_broadcast(x: Value, lane: Any) -> Value:
    """`x` of lane `lane mod subgroup_size`, where `lane` is uniform (the same everywhere)."""
    return _subgroup("broadcast", x, lane)


def subgroup_reduce(x: Value, op: str = "add") -> Value:
    """`op` (add, min, max, and, or, xor) over the subgroup's lanes, in every lane; floats
    in the IR's fixed order (a halving-stride tree over the lanes)."""
    return _subgroup("reduce", x, combine=op)


def subgroup_inclusive_scan(x: Value, op: str = "add") -> Value:
    """`op` over lanes 0..this lane (Hillis-Steele order for floats)."""
    return _subgroup("inclusive_scan", x, combine=op)


def subgroup_exclusive_scan(x: Value, op: str = "add") -> Value:
    """`op` over lanes 0..this lane - 1; lane 0 gets the identity of `op`."""
    return _subgroup("exclusive_scan", x, combine=op)


def select(cond: Value, a: Any, b: Any) -> Value:
    """`a` where `cond` else `b` (both sides are evaluated)."""
    if not isinstance(cond, Value) or cond.ty is not BOOL:
        raise BuildError("select needs a bool kernel value as its condition")
    bld = cond._b
    ty = next((x.ty for x in (a, b) if isinstance(x, Value)), None)
    x = bld._coerce(a, ty, "select true value")
    y = bld._coerce(b, x.ty, "select false value")
    if x.ty != y.ty:
        raise BuildError(f"select branches must share a type, got {x.ty} and {y.ty}")
    return Value(bld, N.Select(cond=cond.expr, a=x, b=y, ty=x.ty))


def ceil_div(n: int, d: int) -> int:
    """ceil(n / d) for Python ints (build-time sizes)."""
    return -(-n // d) if n >= 0 else math.ceil(n / d)
