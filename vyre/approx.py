"""The backends' own fast float functions, reached only by these names.

`vyre.approx.exp(x)` is the device's native exp (CUDA's `expf` / `exp`, WGSL's `exp`;
the reference: NumPy's in f64, rounded once). Results are backend-dependent, within
docs/IR.md's bound for approximate functions (4 ulp plus 1e-6 near zero, which
`vyre.tools.testing.tolerance_for` applies to them) for normal arguments, and unbounded
for a subnormal one (drivers may flush it: lavapipe's log of one is about -88);
`vyre.exp` is the exact one, the same bits everywhere. f64 forms: CUDA and the reference
(WGSL has none). One function per `approx_` record of vyre.ir.ops.CALL_OPS, generated
into vyre/builder/calls_approx.py (vyre.tools.gen_calls).
"""

from __future__ import annotations

from .builder import calls_approx as _calls
from .builder.calls_approx import *  # noqa: F403  (one per approx_ record of vyre.ir.ops, generated)

__all__ = list(_calls.__all__)
