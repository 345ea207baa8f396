"""The backends' own fast float functions (vyre.approx.exp, ...): one per `approx_`
record of vyre.ir.ops.CALL_OPS, each building the IR call of its function
(vyre/builder/functions.py: `_fn`); vyre/approx.py says what they give.

Generated from vyre/ir/ops.py by `python -m vyre.tools.gen_calls --write`: do not edit.
"""

from __future__ import annotations

from typing import Any

from .functions import _fn
from .values import Value


def exp(x: Value) -> Value:
    """e**x, the backend's own (not the same bits on every backend)."""
    return _fn("approx_exp", x)


def exp2(x: Value) -> Value:
    """2**x, the backend's own (not the same bits on every backend)."""
    return _fn("approx_exp2", x)


def log(x: Value) -> Value:
    """Natural logarithm, the backend's own (not the same bits on every backend)."""
    return _fn("approx_log", x)


def log2(x: Value) -> Value:
    """Base-2 logarithm, the backend's own (not the same bits on every backend)."""
    return _fn("approx_log2", x)


def sin(x: Value) -> Value:
    """Sine (radians), the backend's own (not the same bits on every backend)."""
    return _fn("approx_sin", x)


def cos(x: Value) -> Value:
    """Cosine (radians), the backend's own (not the same bits on every backend)."""
    return _fn("approx_cos", x)


def tan(x: Value) -> Value:
    """Tangent (radians), the backend's own (not the same bits on every backend)."""
    return _fn("approx_tan", x)


def atan2(y: Any, x: Any) -> Value:
    """atan2(y, x), the backend's own (not the same bits on every backend)."""
    return _fn("approx_atan2", y, x)


def asin(x: Value) -> Value:
    """Arcsine, the backend's own (not the same bits on every backend)."""
    return _fn("approx_asin", x)


__all__ = [
    "asin",
    "atan2",
    "cos",
    "exp",
    "exp2",
    "log",
    "log2",
    "sin",
    "tan",
]
