"""Conformance cases for subgroup operations (docs/IR.md, "Subgroups"), part of the one
table in vyre.tools.conformance.

Every operation, combine and type the IR defines, compared bit for bit with the reference
run at the backend's own subgroup size (vyre.tools.testing.reference_for); plus the
control flow the validator allows them in (uniform ifs and loops, after a uniform return,
beside workgroup memory and barriers) and a multi-dimensional workgroup. A backend without
the `subgroup` feature skips them through `unsupported_reason`. This module must never
assume a subgroup size: the programs read it (`subgroup_size`) where it matters.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from vyre import DispatchConfig, ScalarType
from vyre.builder import (
    ProgramBuilder,
    Value,
    subgroup_broadcast,
    subgroup_exclusive_scan,
    subgroup_inclusive_scan,
    subgroup_reduce,
    subgroup_shuffle,
)
from vyre.tools.testing import random_array

from .conformance_case import Case

ST = ScalarType
WG = 128
GROUPS = 3


def _combines(ty: ScalarType) -> tuple[str, ...]:
    return ("add", "min", "max") if ty.is_float else ("add", "min", "max", "and", "or", "xor")


def _ops_case(ty: ScalarType) -> Case:
    """Every operation on `ty` over random values with the type's extremes and specials."""
    k = ProgramBuilder(f"subgroup_ops_{ty}", workgroup_size=WG)
    a = k.buffer("a", ty)
    out = k.buffer("out", ty, "write")
    lanes = k.buffer("lanes", ST.U32, "write")
    i = k.let(k.global_id(0))
    x = k.let(a[i])
    lane = k.let(k.subgroup_lane())
    vals: list[Value] = []
    for c in _combines(ty):
        vals += [subgroup_reduce(x, c), subgroup_inclusive_scan(x, c),
                 subgroup_exclusive_scan(x, c)]
    vals += [
        subgroup_shuffle(x, lane * 5 + 3),  # a permutation for odd multipliers
        subgroup_shuffle(x, lane + 1000003),  # past the size: taken mod subgroup_size
        subgroup_shuffle(x, a[i + 1].bitcast(ST.U32) if ty.bits == 32 else lane),  # any lane
        subgroup_broadcast(x, k.workgroup_id(0) * 7 + 2),  # uniform, per workgroup
        subgroup_broadcast(x, 0),
    ]
    for j, v in enumerate(vals):
        out[i * len(vals) + j] = v
    lanes[i * 3] = lane
    lanes[i * 3 + 1] = k.subgroup_size()
    lanes[i * 3 + 2] = subgroup_reduce(k.lit(1, ST.U32) + lane * 0, "add")  # == size
    prog = k.build()
    n = WG * GROUPS
    width = 3 * len(_combines(ty)) + 5

    def inputs(rng: np.random.Generator) -> dict[str, Any]:
        return {"a": random_array(rng, ty, n + 1), "out": n * width, "lanes": n * 3}

    return Case(prog.name, prog, inputs, DispatchConfig(grid=GROUPS))


def _control_case() -> Case:
    """Subgroup operations where the validator allows them: a uniform if (on a param and on
    the workgroup id), a loop with uniform bounds, after a return every invocation of a
    workgroup takes, next to workgroup memory and barriers, in a 3-D workgroup."""
    k = ProgramBuilder("subgroup_control", workgroup_size=(16, 4, 2))
    a = k.buffer("a", ST.F32)
    out = k.buffer("out", ST.F32, "write")
    m = k.param("m", ST.U32)
    tile = k.shared("tile", ST.F32, 128)
    li = k.let(k.local_index())
    wg = k.let(k.workgroup_id(0) + k.workgroup_id(1) * k.num_workgroups(0))
    g = k.let(wg * 128 + li)
    x = k.let(a[g])
    tile[li] = x
    k.barrier()
    y = k.let(tile[127 - li])  # another subgroup's value, through workgroup memory
    acc = k.let(subgroup_inclusive_scan(y))
    with k.if_(m > 2):
        acc += subgroup_reduce(x * 2.0, "max")
    with k.for_range(0, m) as r:
        acc.set(subgroup_shuffle(acc, k.subgroup_lane() + r.cast(ST.U32) + 1) + acc)
    with k.if_((wg & 1) == 1):
        out[g * 3] = subgroup_exclusive_scan(acc, "min")
        k.return_()
    out[g * 3 + 1] = subgroup_reduce(acc, "add")
    out[g * 3 + 2] = acc
    prog = k.build()
    n = 128 * 4
    return Case(prog.name, prog, lambda rng: {
        "a": (rng.standard_normal(n) * 1000).astype(np.float32), "out": n * 3,
    }, DispatchConfig(grid=(2, 2, 1), params={"m": 3}))


def cases() -> list[Case]:
    """The subgroup cases of the conformance table."""
    return [*(_ops_case(t) for t in (ST.I32, ST.U32, ST.F32)), _control_case()]


__all__ = ["cases"]
