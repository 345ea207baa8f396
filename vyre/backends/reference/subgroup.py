"""Subgroup operations over the lanes of a chunk, exactly as docs/IR.md ("Subgroups") orders
them, for any subgroup size.

The interpreter's lanes are workgroup-major then local_index, and every workgroup size is a
multiple of the subgroup size S (vyre.subgroups.check_fits), so reshaping a lane vector to
(-1, S) gives one row per subgroup, lane l in column l. The reductions and scans combine
with `numeric.binary`, the IR's own operators, in the orders the IR fixes (the same
shuffle steps every GPU backend spells), so float results are the same bits everywhere.
This module must never depend on the lane mask: the validator only allows subgroup
operations where whole workgroups are active.
"""

from __future__ import annotations

import numpy as np

from vyre import subgroups
from vyre.ir.types import ScalarType

from . import numeric

Array = np.ndarray


def identity(combine: str, ty: ScalarType) -> Array:
    """The value an exclusive scan gives lane 0 (docs/IR.md)."""
    return np.asarray(subgroups.identity(combine, ty), dtype=ty.numpy)


def _op(combine: str, a: Array, b: Array, ty: ScalarType) -> Array:
    return numeric.binary(combine, a, b, ty, ty)


def shuffle(x: Array, lane: Array, size: int) -> Array:
    """Each lane gets `x` of lane `lane mod size` of its subgroup."""
    rows = x.reshape(-1, size)
    src = (np.asarray(lane).astype(np.int64) % size).reshape(-1, size) if np.ndim(lane) else (
        np.full(rows.shape, int(lane) % size, dtype=np.int64))
    return np.take_along_axis(rows, src, axis=1).reshape(-1)


def reduce(combine: str, x: Array, size: int, ty: ScalarType) -> Array:
    """Descending butterfly: for d = S/2, S/4, ..., 1, lane l combines its value with lane
    l xor d's (x[l] op x[l ^ d]; op is commutative bit for bit, so every lane holds the
    same bits). Lane 0's order is the halving-stride tree: the lower half combined with
    the upper half, element by element, then again on the result."""
    rows = x.reshape(-1, size)
    d = size // 2
    while d >= 1:
        lanes = np.arange(size) ^ d
        rows = _op(combine, rows, rows[:, lanes], ty)
        d //= 2
    return rows.reshape(-1)


def inclusive_scan(combine: str, x: Array, size: int, ty: ScalarType) -> Array:
    """Hillis-Steele: for d = 1, 2, ..., S/2, lane l >= d becomes x[l - d] op x[l]."""
    rows = x.reshape(-1, size)
    d = 1
    while d < size:
        new = rows.copy()
        new[:, d:] = _op(combine, rows[:, :-d], rows[:, d:], ty)
        rows = new
        d *= 2
    return rows.reshape(-1)


def exclusive_scan(combine: str, x: Array, size: int, ty: ScalarType) -> Array:
    """Lane l gets the inclusive scan of lane l - 1; lane 0 the identity of `combine`."""
    inc = inclusive_scan(combine, x, size, ty).reshape(-1, size)
    out = np.empty_like(inc)
    out[:, 0] = identity(combine, ty)
    out[:, 1:] = inc[:, :-1]
    return out.reshape(-1)


__all__ = ["exclusive_scan", "identity", "inclusive_scan", "reduce", "shuffle"]
