"""The kernel's functions of the op registry (vyre.sqrt, vyre.exp, vyre.hypot, ...): one
per record of vyre.ir.ops.CALL_OPS but the `approx_` ones (calls_approx.py) and those that
vyre/builder/functions.py writes by hand, each building the IR call of its function over
kernel values and literals, typed by the IR's rules (functions.py: `_fn`).

Generated from vyre/ir/ops.py by `python -m vyre.tools.gen_calls --write`: do not edit
(the record's `doc` and `params` say what each function's docstring and parameters are).
"""

from __future__ import annotations

from typing import Any

from .functions import _fn
from .values import Value


def abs_(x: Value) -> Value:
    """Absolute value (ints wrap: abs(INT_MIN) is INT_MIN)."""
    return _fn("abs", x)


def sqrt(x: Value) -> Value:
    """Square root (correctly rounded)."""
    return _fn("sqrt", x)


def exp(x: Value) -> Value:
    """e**x (the same bits on every backend in f32, f16 and f64; correctly rounded, f64 on
    every argument tested: docs/IR.md; vyre.approx.exp is the device's own)."""
    return _fn("exp", x)


def exp2(x: Value) -> Value:
    """2**x (the same bits on every backend in f32, f16 and f64; correctly rounded, f64 on
    every argument tested: docs/IR.md)."""
    return _fn("exp2", x)


def log(x: Value) -> Value:
    """Natural logarithm (the same bits on every backend in f32, f16 and f64; correctly
    rounded, f64 on every argument tested: docs/IR.md)."""
    return _fn("log", x)


def log2(x: Value) -> Value:
    """Base-2 logarithm (the same bits on every backend in f32, f16 and f64; correctly
    rounded, f64 on every argument tested: docs/IR.md)."""
    return _fn("log2", x)


def sin(x: Value) -> Value:
    """Sine (radians; the same bits on every backend in f32, f16 and f64; correctly rounded,
    f64 on every argument tested: docs/IR.md; vyre.approx.sin is the device's own)."""
    return _fn("sin", x)


def cos(x: Value) -> Value:
    """Cosine (radians; the same bits on every backend in f32, f16 and f64; correctly
    rounded, f64 on every argument tested: docs/IR.md; vyre.approx.cos is the device's
    own)."""
    return _fn("cos", x)


def tan(x: Value) -> Value:
    """Tangent (radians; the same bits on every backend in f32, f16 and f64; correctly
    rounded, f64 on every argument tested: docs/IR.md; vyre.approx.tan is the device's
    own)."""
    return _fn("tan", x)


def tanh(x: Value) -> Value:
    """Hyperbolic tangent (the same bits on every backend in f32, f16 and f64; correctly
    rounded, f64 on every argument tested: docs/IR.md)."""
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


def fma(a: Any, b: Any, c: Any) -> Value:
    """a * b + c rounded once."""
    return _fn("fma", a, b, c)


def clamp(x: Any, lo: Any, hi: Any) -> Value:
    """min(max(x, lo), hi)."""
    return _fn("clamp", x, lo, hi)


def pow_(x: Any, y: Any) -> Value:
    """x**y, C99's pow (the same bits on every backend in f32, f16 and f64; correctly
    rounded, f64 on every argument tested: docs/IR.md)."""
    return _fn("pow", x, y)


def atan2(y: Any, x: Any) -> Value:
    """The angle of (x, y), in radians, C99's atan2 (the same bits on every backend in f32,
    f16 and f64; correctly rounded, f64 on every argument tested: docs/IR.md;
    vyre.approx.atan2 is the device's own)."""
    return _fn("atan2", y, x)


def asin(x: Value) -> Value:
    """Arc sine in [-pi/2, pi/2]; NaN outside [-1, 1] (the same bits on every backend in
    f32, f16 and f64; correctly rounded, f64 on every argument tested: docs/IR.md;
    vyre.approx.asin is the device's own)."""
    return _fn("asin", x)


def acos(x: Value) -> Value:
    """Arc cosine in [0, pi]; NaN outside [-1, 1] (the same bits on every backend in f32,
    f16 and f64; correctly rounded, f64 on every argument tested: docs/IR.md)."""
    return _fn("acos", x)


def hypot(x: Any, y: Any) -> Value:
    """sqrt(x^2 + y^2) without intermediate overflow or underflow (the same bits on every
    backend in f32, f16 and f64; correctly rounded, f64 on every argument tested:
    docs/IR.md); +inf if either is infinite, even beside a NaN."""
    return _fn("hypot", x, y)


__all__ = [
    "abs_",
    "acos",
    "asin",
    "atan2",
    "ceil",
    "clamp",
    "cos",
    "exp",
    "exp2",
    "floor",
    "fma",
    "hypot",
    "log",
    "log2",
    "pow_",
    "round_",
    "sin",
    "sqrt",
    "tan",
    "tanh",
    "trunc",
]
