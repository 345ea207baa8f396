"""The IR's typing rules as the builder applies them: the result type of an operator or
function from its operands' (docs/IR.md), literals of a type, and the 32-bit promotion of
narrow integers. Each refusal is a BuildError naming the fix.

Functions of IR nodes only: this module must never hold builder state or know a Value.
"""

from __future__ import annotations

from typing import Any, cast

import numpy as np

from ..ir import nodes as N
from ..ir import ops
from ..ir.types import ScalarType, normalise_literal
from .sites import BuildError

U32 = ScalarType.U32
BOOL = ScalarType.BOOL



def _literal_type(x: Any) -> ScalarType:
    if isinstance(x, (bool, np.bool_)):
        return BOOL
    if isinstance(x, np.generic):
        return ScalarType.from_numpy(x.dtype).promoted  # (np.uint8(7): a u32 literal)
    if isinstance(x, int):
        return ScalarType.I32
    if isinstance(x, float):
        return ScalarType.F32
    raise BuildError(f"{x!r} ({type(x).__name__}) cannot be used in a kernel")



def _const(x: Any, ty: ScalarType) -> N.Const:
    try:
        return N.Const(ty=ty, value=normalise_literal(x, ty))
    except ValueError as exc:
        raise BuildError(f"literal {x!r} as {ty}: {exc}") from None



def _binary(op: str, a: N.ExprNode, b: N.ExprNode) -> N.Binary:
    ta, tb = a.ty, b.ty
    if op in N.SHIFT_OPS:
        if not ta.is_int:
            raise BuildError(f"{op} needs an integer left operand, got {ta}")
        return N.Binary(op=cast(N.BinaryOp, op), a=a, b=b, ty=ta)
    if ta != tb:
        raise BuildError(
            f"{op} on {ta} and {tb}: both operands must have one type; "
            f"convert one with .cast({ta}) or .cast({tb})"
        )
    if op in N.LOGICAL_OPS:
        if ta is not BOOL:
            raise BuildError(f"{op} needs bool operands, got {ta}")
        return N.Binary(op=cast(N.BinaryOp, op), a=a, b=b, ty=BOOL)
    if op in N.COMPARISON_OPS:
        if ta is BOOL and op not in ("eq", "ne"):
            raise BuildError(f"{op} is not defined on bool; compare numbers")
        return N.Binary(op=cast(N.BinaryOp, op), a=a, b=b, ty=BOOL)
    if op in N.BITWISE_OPS:
        if not ta.is_int:
            raise BuildError(f"bitwise {op} needs integers, got {ta}; bitcast floats first")
        return N.Binary(op=cast(N.BinaryOp, op), a=a, b=b, ty=ta)
    if not ta.is_numeric:
        raise BuildError(f"{op} needs numbers, got {ta}")
    return N.Binary(op=cast(N.BinaryOp, op), a=a, b=b, ty=ta)


def _unary(op: str, a: N.ExprNode) -> N.Unary:
    t = a.ty
    if op == "neg" and not (t.is_float or t.is_signed):
        raise BuildError(f"negation needs a signed or float value, got {t}; use 0 - x to wrap")
    if op == "bit_not" and not t.is_int:
        raise BuildError(f"~ needs an integer or bool, got {t}")
    if op == "not" and t is not BOOL:
        raise BuildError(f"logical not needs bool, got {t}")
    return N.Unary(op=cast(N.UnaryOp, op), a=a, ty=t)


def _call(fn: str, *args: N.ExprNode) -> N.Call:
    rec = ops.CALLS[fn]
    if rec.signature is not None:  # fixed operand types (the packed dot products)
        want, result = rec.signature
        got = tuple(a.ty for a in args)
        if got != want:
            raise BuildError(
                f"{fn} takes ({', '.join(map(str, want))}), got ({', '.join(map(str, got))}); "
                "pass the packed bytes as u32 (x.bitcast(u32) for an i32) and the "
                f"accumulator as {result} (.cast / .bitcast)")
        return N.Call(fn=cast(N.CallFn, fn), args=tuple(args), ty=result)
    t = args[0].ty
    for x in args[1:]:
        if x.ty != t:
            raise BuildError(f"{fn} arguments must share one type, got {[a.ty for a in args]}")
    if rec.float_only and not t.is_float:
        raise BuildError(f"{fn} needs a float argument, got {t}; cast with .cast(f32)")
    if not t.is_numeric:
        raise BuildError(f"{fn} needs numbers, got {t}")
    if len(args) != rec.arity:
        raise BuildError(f"{fn} takes {rec.arity} arguments, got {len(args)}")
    return N.Call(fn=cast(N.CallFn, fn), args=tuple(args), ty=t)


def _promote(e: N.ExprNode) -> N.ExprNode:
    """An 8/16-bit expression as its 32-bit integer (exact: zero- or sign-extended); any
    other expression as it is. Kernel values are never narrow (docs/IR.md)."""
    t = e.ty
    return N.Cast(a=e, ty=t.promoted) if t.is_narrow else e


def _narrowed(e: N.ExprNode, ty: ScalarType, name: str) -> N.ExprNode:
    """The value stored into an 8/16-bit buffer of type `ty`: a 32-bit integer keeps its
    low bits (an explicit Cast in the IR); a value just promoted from `ty` is unwrapped."""
    if isinstance(e, N.Cast) and e.a.ty is ty:
        return e.a
    if e.ty in (ScalarType.I32, U32):
        return N.Cast(a=e, ty=ty)
    if e.ty is ty:  # a literal
        return e
    raise BuildError(
        f"cannot store a {e.ty} into {name!r} ({ty}); a {ty} element is stored from an i32 "
        f"or u32 (its low {ty.bits} bits): cast the value with .cast({ty.promoted}) (a float: "
        f".cast({ty}) saturates to the {ty} range)"
    )


def _scalar_type(ty: Any, name: object) -> ScalarType:
    try:
        return ScalarType(ty)
    except ValueError:
        raise BuildError(
            f"{name!r}: {ty!r} is not a vyre element type; use one of "
            f"{', '.join('vyre.' + t.value for t in ScalarType)}"
        ) from None
