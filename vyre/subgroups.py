"""What every backend checks before it runs a Program with subgroup operations.

docs/IR.md ("Subgroups") defines lane l of subgroup s as the invocation with local_index
s * S + l, for the subgroup size S the backend reports. That mapping only covers whole
subgroups when the workgroup's invocation count is a multiple of S; a backend refuses
anything else here, with the same message everywhere. A device may also break the mapping
in some workgroup shapes; a backend that measures it per shape reports where it holds
(`SHAPES_DETAIL`, `mapping_promised`). This module must never know how a backend spells
subgroup operations.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from .errors import UnsupportedFeature
from .ir.analysis import uses_subgroups
from .ir.nodes import Program
from .ir.types import ScalarType

SIZES = (1, 2, 4, 8, 16, 32, 64, 128)
"""Subgroup sizes the IR allows a backend to report (powers of two, as Vulkan's)."""


SHAPES_DETAIL = "subgroup_shapes"
"""The `capabilities().details` key of a backend whose device may break docs/IR.md's lane
mapping in some workgroup shapes: the shapes where its probe measured the mapping to hold
(it never refuses a Program of one of them for its shape; any other shape is measured
before it first runs, and refused with UnsupportedFeature "subgroup" naming the shape
where the mapping breaks). A backend without the key keeps the mapping in every shape."""


def mapping_promised(details: Mapping[str, Any], shape: tuple[int, int, int]) -> bool:
    """Whether a backend reporting `details` (its capabilities' details) promises docs/IR.md's
    lane mapping in workgroups of `shape`, so that it must never refuse that shape: every
    shape, unless it reports `SHAPES_DETAIL` (then those shapes only)."""
    kept = details.get(SHAPES_DETAIL)
    return kept is None or tuple(shape) in {tuple(s) for s in kept}


def check_size(size: int) -> int:
    """`size` if it is a valid subgroup size, else ValueError naming the valid ones."""
    if isinstance(size, bool) or size not in SIZES:
        raise ValueError(f"subgroup size {size!r} is not one of {SIZES}")
    return size


def identity(combine: str, ty: ScalarType) -> int | float:
    """The value an exclusive scan gives lane 0 (docs/IR.md): +0 for add / or / xor, all
    ones for and, the largest value for min (+inf), the least for max (-inf)."""
    if combine in ("add", "or", "xor"):
        return 0.0 if ty.is_float else 0
    if combine == "and":
        return -1 if ty.is_signed else (1 << ty.bits) - 1
    if ty.is_float:
        return math.inf if combine == "min" else -math.inf
    lo, hi = (-(1 << (ty.bits - 1)), (1 << (ty.bits - 1)) - 1) if ty.is_signed else (
        0, (1 << ty.bits) - 1)
    return hi if combine == "min" else lo


def check_fits(program: Program, size: int | None, backend: str) -> None:
    """UnsupportedFeature unless `program`'s workgroups split into whole subgroups of `size`
    (None: the backend has no subgroups; the feature check names that case)."""
    if size is None or not uses_subgroups(program):
        return
    n = program.invocations_per_workgroup
    if n % size:
        raise UnsupportedFeature(
            "subgroup", backend,
            f"program {program.name!r} uses subgroup operations with "
            f"{n} invocations per workgroup {tuple(program.workgroup_size)}, which is not a "
            f"multiple of this backend's subgroup size {size}: every subgroup must be full "
            f"(docs/IR.md, 'Subgroups'); use a workgroup of a multiple of {size} invocations",
        )


__all__ = ["SHAPES_DETAIL", "SIZES", "check_fits", "check_size", "identity", "mapping_promised"]
