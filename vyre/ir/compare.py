"""The IR's comparison rules (docs/IR.md): when two results of one Program agree.

Integers and bools are bit-exact. Floats are exact, except that any NaN equals any NaN
(docs/IR.md leaves a NaN's bits open), the sign of a zero result is open after float
min / max / clamp, and approximate functions (exp, log, sin, ...) are held to a stated ulp
tolerance. `tolerance_for(program)` says which rule a Program's results are held to and
`mismatches` applies it; the conformance suite, the fuzzer, the demos and the tests all
compare through these, so the rules are written once, beside the IR that defines them. This
module must never run a Program or import a backend.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .analysis import uses_approximate_calls, uses_float_ops
from .nodes import Program


@dataclass(frozen=True)
class Tolerance:
    """Float comparison rule: |a - e| <= atol + rtol*|e|, or within `ulps` units in the last
    place. Any NaN equals any NaN (docs/IR.md leaves a NaN's bits open). `zero_sign`: also
    tell -0 from +0 (docs/IR.md leaves it open only after float min/max/clamp)."""

    ulps: int = 0
    atol: float = 0.0
    rtol: float = 0.0
    zero_sign: bool = True

    @property
    def exact(self) -> bool:
        return self.ulps == 0 and self.atol == 0.0 and self.rtol == 0.0


EXACT = Tolerance()


def tolerance_for(program: Program, backend_kind: str) -> Tolerance:
    """The float tolerance a backend's results for `program` are held to: the same on
    every backend kind (`backend_kind` is accepted for callers that pass it).

    Approximate functions (the backends' own `approx_*`, and f64 exp, log, sin, ...;
    docs/IR.md names them) are allowed 4 ulp plus a small absolute slack near zero (sin(pi)
    is ~1e-8, far in ulps from 0). Everything else is exact: division and sqrt are
    correctly rounded on every backend (on wgpu, vyre's exact versions where the adapter's
    are not, see docs/IR.md), and the functions with one exact definition (f32 and f16
    exp, exp2, log, log2, sin, ...: vyre.lower.maths) are the same IR everywhere.
    """
    del backend_kind
    if uses_approximate_calls(program):
        return Tolerance(ulps=4, atol=1e-6, rtol=1e-6, zero_sign=False)
    if uses_float_ops(program, SIGN_OF_ZERO_OPEN):
        return Tolerance(zero_sign=False)
    return EXACT


#: Float operations after which docs/IR.md leaves the sign of a zero result open.
SIGN_OF_ZERO_OPEN = frozenset({"min", "max", "clamp"})


def ulp_distance(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Units in the last place between same-dtype float arrays (treating -0 as +0)."""
    bits = {2: np.int16, 4: np.int32, 8: np.int64}[a.dtype.itemsize]
    ia = a.view(bits).astype(np.int64)
    ib = b.view(bits).astype(np.int64)
    sign = np.int64(1) << (a.dtype.itemsize * 8 - 1)
    # map to a monotonic integer line: negative floats below positive ones
    ia = np.where(ia < 0, -(ia + sign) if a.dtype.itemsize == 8 else -(ia & (sign - 1)), ia)
    ib = np.where(ib < 0, -(ib + sign) if a.dtype.itemsize == 8 else -(ib & (sign - 1)), ib)
    return np.abs(ia - ib)


def mismatches(
    actual: np.ndarray, expected: np.ndarray, tol: Tolerance = EXACT
) -> np.ndarray:
    """Indices where `actual` disagrees with `expected` under the IR's comparison rules."""
    actual = np.asarray(actual)
    expected = np.asarray(expected)
    if actual.shape != expected.shape or actual.dtype != expected.dtype:
        raise AssertionError(
            f"shape/dtype differ: got {actual.shape} {actual.dtype}, "
            f"expected {expected.shape} {expected.dtype}"
        )
    if actual.dtype.kind != "f":
        return np.flatnonzero(actual != expected)
    a = actual.reshape(-1)
    e = expected.reshape(-1)
    both_nan = np.isnan(a) & np.isnan(e)
    with np.errstate(invalid="ignore", over="ignore"):
        equal = (a == e) | both_nan
        if not tol.exact:
            close = ulp_distance(a, e) <= tol.ulps
            diff = np.abs(a.astype(np.float64) - e.astype(np.float64))
            close |= diff <= tol.atol + tol.rtol * np.abs(e.astype(np.float64))
            close &= ~(np.isnan(a) ^ np.isnan(e))
            equal |= close
        if tol.zero_sign:  # -0 is not +0, under a ulp bound too (sin(-0) = -0 exactly)
            equal &= ~((a == 0) & (e == 0) & (np.signbit(a) != np.signbit(e)))
    return np.flatnonzero(~equal)
