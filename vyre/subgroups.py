"""What every backend checks before it runs a Program with subgroup operations.

docs/IR.md ("Subgroups") defines lane l of subgroup s as the invocation with local_index
s * S + l, for the subgroup size S the backend reports. That mapping only covers whole
subgroups when the workgroup's invocation count is a multiple of S; a backend refuses
anything else here, with the same message everywhere. This module must never know how a
backend spells subgroup operations.
"""

from __future__ import annotations

from .errors import UnsupportedFeature
from .ir.analysis import uses_subgroups
from .ir.nodes import Program

SIZES = (1, 2, 4, 8, 16, 32, 64, 128)
"""Subgroup sizes the IR allows a backend to report (powers of two, as Vulkan's)."""


def check_size(size: int) -> int:
    """`size` if it is a valid subgroup size, else ValueError naming the valid ones."""
    if isinstance(size, bool) or size not in SIZES:
        raise ValueError(f"subgroup size {size!r} is not one of {SIZES}")
    return size


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


__all__ = ["SIZES", "check_fits", "check_size"]
