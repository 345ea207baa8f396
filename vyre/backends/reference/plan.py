"""The reference backend's compiled form of a Program and how a bound dispatch runs it.

`Plan` is what `compile` caches: the program plus the facts execution needs (element types,
workgroup array sizes, the chunk size). `Launch` is a bound dispatch prepared for it (the backend's launch record); `execute`
turns one and its buffers into typed views of
the bound host memory and runs the grid in chunks of whole workgroups. This module must
never validate programs or dispatches (vyre.binding and the validator did that) nor
allocate buffers.

`DispatchConfig(options=DispatchOptions(max_loop_iterations=...))` (an int, default none) makes a loop that
iterates more often than that raise DispatchError instead of running forever (for fuzzing).
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from vyre.binding import BoundDispatch
from vyre.config import MAX_GRID_DIM, IndirectGrid
from vyre.errors import DispatchError
from vyre.ir import nodes as N
from vyre.lower.maths import lower_maths

from .interpreter import Chunk, Invocations, Memory

# Lanes (invocations) evaluated together: caps the memory of one chunk's temporaries.
CHUNK_LANES = 1 << 20
# Bytes of workgroup arrays one chunk may hold (all its workgroups together).
CHUNK_WORKGROUP_BYTES = 1 << 28


@dataclass(frozen=True)
class Plan:
    """A Program prepared for the interpreter."""

    program: N.Program  # (with the functions' exact definitions, vyre.lower.maths)
    workgroups_per_chunk: int
    subgroup_size: int = 32

    @classmethod
    def prepare(cls, program: N.Program, chunk_lanes: int | None = None,
                subgroup_size: int = 32) -> Plan:
        # the functions' exact definitions: the same IR every other backend runs
        program = lower_maths(program)
        lanes = CHUNK_LANES if chunk_lanes is None else chunk_lanes
        per_chunk = max(1, lanes // program.invocations_per_workgroup)
        if program.workgroup_bytes:
            per_chunk = max(1, min(per_chunk, CHUNK_WORKGROUP_BYTES // program.workgroup_bytes))
        return cls(program=program, workgroups_per_chunk=per_chunk, subgroup_size=subgroup_size)


@dataclass(frozen=True)
class Launch:
    """A bound dispatch prepared for `execute`: everything but the buffers (the launch cache
    keeps it while holding the buffers only weakly; an indirect grid's buffer is weak too)."""

    plan: Plan
    counts: tuple[int, ...]
    params: dict[str, np.ndarray]
    grid: tuple[int, int, int] | tuple[weakref.ref[HostMemory], int]
    indirect: bool
    max_loop_iterations: int | None
    grid_limit: int = MAX_GRID_DIM  # the backend's max_workgroups_per_dimension

    @classmethod
    def of(cls, plan: Plan, bound: BoundDispatch, grid_limit: int = MAX_GRID_DIM) -> Launch:
        g = bound.grid
        grid: Any = (weakref.ref(g.buffer), g.offset) if isinstance(g, IndirectGrid) else g
        params = {p.name: np.asarray(v, dtype=p.ty.numpy)
                  for p, v in zip(bound.program.params, bound.params)}
        return cls(plan, bound.counts, params, grid, isinstance(g, IndirectGrid),
                   bound.config.options.max_loop_iterations, grid_limit)

    def workgroups(self) -> tuple[int, int, int]:
        """The workgroup counts: from the config, or three u32 read from the indirect buffer.

        Indirect counts are bounded like a direct grid's (binding checks those): the buffer's
        values are only known now, and 0xFFFFFFFF workgroups would run for hours. wgpu runs
        nothing for such a dispatch and vyre raises DispatchError; so does this."""
        if not self.indirect:
            return self.grid  # type: ignore[return-value]
        ref, offset = self.grid  # type: ignore[misc]
        buf = ref()
        assert buf is not None  # the core checked it usable
        x, y, z = (int(v) for v in buf.array[offset : offset + 12].view(np.uint32))
        if max(x, y, z) > self.grid_limit:
            raise DispatchError(
                f"program {self.plan.program.name!r} was dispatched with an indirect grid of "
                f"{(x, y, z)} workgroups: {max(x, y, z)} workgroups in one dimension, over "
                f"the limit of {self.grid_limit} per dimension "
                "(limits['max_workgroups_per_dimension']); nothing ran. Keep every count in "
                f"the grid buffer at most {self.grid_limit}: use more dimensions (y, z) or a "
                "larger workgroup size."
            )
        return (x, y, z)


class HostMemory(Protocol):
    """A buffer in host memory: its bytes as a uint8 array (ReferenceBuffer is one; so is
    any backend's that runs Programs through this interpreter)."""

    array: np.ndarray


def memory_of(launch: Launch, buffers: Sequence[Any]) -> Memory:
    views: dict[str, np.ndarray] = {}
    counts: dict[str, int] = {}
    for decl, buf, n in zip(launch.plan.program.buffers, buffers, launch.counts):
        dt = decl.ty.numpy
        views[decl.name] = buf.array[: n * dt.itemsize].view(dt)
        counts[decl.name] = n
    return Memory(views=views, counts=counts, params=launch.params)


def execute(launch: Launch, buffers: Sequence[HostMemory]) -> None:
    """Run every workgroup of the dispatch, chunk by chunk, in linear workgroup order."""
    plan = launch.plan
    grid = launch.workgroups()
    total = grid[0] * grid[1] * grid[2]
    if total == 0:
        return
    mem = memory_of(launch, buffers)
    limit = launch.max_loop_iterations
    step = plan.workgroups_per_chunk
    for first in range(0, total, step):
        chunk = Chunk(grid=grid, first=first, count=min(step, total - first))
        Invocations(plan.program, mem, chunk, limit, plan.subgroup_size).run()
