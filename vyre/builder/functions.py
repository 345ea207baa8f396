"""The kernel's functions (vyre.sqrt, vyre.exp, vyre.select, the subgroup operations,
...): each builds the IR call of one operation over kernel values and literals, typed by
the IR's rules.

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
    over functions (the conformance suite); programs use the named helpers below."""
    if fn not in ops.CALLS:
        raise BuildError(f"unknown function {fn!r}; the functions are {sorted(ops.CALLS)}")
    return _fn(fn, *xs)


def sqrt(x: Value) -> Value:
    """Square root (correctly rounded)."""
    return _fn("sqrt", x)

def exp(x: Value) -> Value:
    """e**x (f32 / f16: correctly rounded, the same bits on every backend; vyre.approx.exp
    is the device's own)."""
    return _fn("exp", x)

def exp2(x: Value) -> Value:
    """2**x (f32 / f16: correctly rounded, the same bits on every backend)."""
    return _fn("exp2", x)

def log(x: Value) -> Value:
    """Natural logarithm (f32 / f16: correctly rounded, the same bits on every backend)."""
    return _fn("log", x)

def log2(x: Value) -> Value:
    """Base-2 logarithm (f32 / f16: correctly rounded, the same bits on every backend)."""
    return _fn("log2", x)

def sin(x: Value) -> Value:
    """Sine (radians; f32 / f16: correctly rounded for every argument, the same bits
    on every backend; vyre.approx.sin is the device's own)."""
    return _fn("sin", x)

def cos(x: Value) -> Value:
    """Cosine (radians; f32 / f16: correctly rounded for every argument, the same bits
    on every backend; vyre.approx.cos is the device's own)."""
    return _fn("cos", x)

def tan(x: Value) -> Value:
    """Tangent (radians; f32 / f16: correctly rounded for every argument, the same bits
    on every backend; vyre.approx.tan is the device's own)."""
    return _fn("tan", x)

def tanh(x: Value) -> Value:
    """Hyperbolic tangent."""
    return _fn("tanh", x)

def floor(x: Value) -> Value:
    """Round toward -inf."""
    return _fn("floor", x)

def ceil(x: Value) -> Value:
    """Round toward +inf."""
    return _fn("ceil", x)

def trunc(x: Value) -> Value:
    """Round toward zero."""
    return _fn("trunc", x)

def round_(x: Value) -> Value:
    """Round to nearest, ties to even."""
    return _fn("round", x)

def abs_(x: Value) -> Value:
    """Absolute value (ints wrap: abs(INT_MIN) is INT_MIN)."""
    return _fn("abs", x)

def pow_(x: Any, y: Any) -> Value:
    """x**y (floats)."""
    return _fn("pow", x, y)

def atan2(y: Any, x: Any) -> Value:
    """The angle of (x, y), in radians, C99's atan2 (f32 / f16: correctly rounded, the
    same bits on every backend; vyre.approx.atan2 is the device's own)."""
    return _fn("atan2", y, x)

def asin(x: Value) -> Value:
    """Arc sine in [-pi/2, pi/2]; NaN outside [-1, 1] (f32 / f16: correctly rounded, the
    same bits on every backend; vyre.approx.asin is the device's own)."""
    return _fn("asin", x)


def acos(x: Value) -> Value:
    """Arc cosine in [0, pi]; NaN outside [-1, 1] (f32 / f16: correctly rounded, the
    same bits on every backend)."""
    return _fn("acos", x)


def hypot(x: Any, y: Any) -> Value:
    """sqrt(x^2 + y^2) without intermediate overflow or underflow (approximate); +inf if
    either is infinite, even beside a NaN."""
    return _fn("hypot", x, y)


def fma(a: Any, b: Any, c: Any) -> Value:
    """a * b + c rounded once."""
    return _fn("fma", a, b, c)

def clamp(x: Any, lo: Any, hi: Any) -> Value:
    """min(max(x, lo), hi)."""
    return _fn("clamp", x, lo, hi)


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
