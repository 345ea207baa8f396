"""The reference backend's compiled form of a Program and how a bound dispatch runs it.

`Plan` is what `compile` caches: the program plus the facts execution needs (element types,
workgroup array sizes, the chunk size). `execute` turns a BoundDispatch into typed views of
the bound host memory and runs the grid in chunks of whole workgroups. This module must
never validate programs or dispatches (vyre.binding and the validator did that) nor
allocate buffers.

`DispatchConfig.options["max_loop_iterations"]` (an int, default none) makes a loop that
iterates more often than that raise DispatchError instead of running forever (for fuzzing).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from vyre.binding import BoundDispatch
from vyre.config import IndirectGrid
from vyre.ir import nodes as N

from .buffers import ReferenceBuffer
from .interpreter import Chunk, Invocations, Memory

# Lanes (invocations) evaluated together: caps the memory of one chunk's temporaries.
CHUNK_LANES = 1 << 20
# Bytes of workgroup arrays one chunk may hold (all its workgroups together).
CHUNK_WORKGROUP_BYTES = 1 << 28


@dataclass(frozen=True)
class Plan:
    """A Program prepared for the interpreter."""

    program: N.Program
    workgroups_per_chunk: int

    @classmethod
    def prepare(cls, program: N.Program, chunk_lanes: int | None = None) -> Plan:
        lanes = CHUNK_LANES if chunk_lanes is None else chunk_lanes
        per_chunk = max(1, lanes // program.invocations_per_workgroup)
        if program.workgroup_bytes:
            per_chunk = max(1, min(per_chunk, CHUNK_WORKGROUP_BYTES // program.workgroup_bytes))
        return cls(program=program, workgroups_per_chunk=per_chunk)


def grid_of(bound: BoundDispatch) -> tuple[int, int, int]:
    """The workgroup counts: from the config, or three u32 read from the indirect buffer."""
    g = bound.grid
    if isinstance(g, IndirectGrid):
        buf = g.buffer
        assert isinstance(buf, ReferenceBuffer)
        x, y, z = (int(v) for v in buf.array[g.offset : g.offset + 12].view(np.uint32))
        return (x, y, z)
    return g


def memory_of(bound: BoundDispatch) -> Memory:
    views: dict[str, np.ndarray] = {}
    counts: dict[str, int] = {}
    for decl, buf, n in zip(bound.program.buffers, bound.buffers, bound.counts):
        assert isinstance(buf, ReferenceBuffer)
        dt = decl.ty.numpy
        views[decl.name] = buf.array[: n * dt.itemsize].view(dt)
        counts[decl.name] = n
    params = {
        p.name: np.asarray(v, dtype=p.ty.numpy) for p, v in zip(bound.program.params, bound.params)
    }
    return Memory(views=views, counts=counts, params=params)


def execute(plan: Plan, bound: BoundDispatch) -> None:
    """Run every workgroup of the dispatch, chunk by chunk, in linear workgroup order."""
    grid = grid_of(bound)
    total = grid[0] * grid[1] * grid[2]
    if total == 0:
        return
    mem = memory_of(bound)
    limit = bound.config.options.get("max_loop_iterations")
    step = plan.workgroups_per_chunk
    for first in range(0, total, step):
        chunk = Chunk(grid=grid, first=first, count=min(step, total - first))
        Invocations(plan.program, mem, chunk, None if limit is None else int(limit)).run()
