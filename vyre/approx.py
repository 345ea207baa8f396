"""The backends' own fast float functions, reached only by these names.

`vyre.approx.exp(x)` is the device's native exp (CUDA's `expf` / `exp`, WGSL's `exp`;
the reference: NumPy's in f64, rounded once). Results are backend-dependent, within
docs/IR.md's bound for approximate functions (4 ulp plus 1e-6 near zero, which
`vyre.tools.testing.tolerance_for` applies to them) for normal arguments, and unbounded
for a subnormal one (drivers may flush it: lavapipe's log of one is about -88);
`vyre.exp` is the exact one, the same bits everywhere. f64 forms: CUDA and the reference
(WGSL has none).
"""

from __future__ import annotations

from .builder import Value
from .builder.functions import _fn


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


def atan2(y: Value, x: Value) -> Value:
    """atan2(y, x), the backend's own (not the same bits on every backend)."""
    return _fn("approx_atan2", y, x)


def asin(x: Value) -> Value:
    """Arcsine, the backend's own (not the same bits on every backend)."""
    return _fn("approx_asin", x)


__all__ = ["asin", "atan2", "cos", "exp", "exp2", "log", "log2", "sin", "tan"]
