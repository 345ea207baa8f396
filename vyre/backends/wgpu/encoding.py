"""How recorded dispatches of the wgpu backend go into command encoders.

`WgpuRecord` is one dispatch ready to encode (a launch record, or a recorded pipeline's
step): it holds wgpu objects, never the vyre buffers. `encode` puts steps into as few
compute passes as it can (a pass ends only where an indirect grid must first be copied
out of a buffer the step binds); a pipeline of plain dispatches is encoded from its
`plain_runs`, with a loop as tight as a hand-written one. This module must never submit.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .bindings import Binding
from .device import Status

#: runs of consecutive plain dispatches sharing a pipeline and bind group: (pipeline, bind
#: group, the workgroup counts of each dispatch)
Runs = list[tuple[Any, Any, tuple[tuple[int, int, int], ...]]]


@dataclass
class WgpuRecord:
    """One dispatch ready to encode: a pipeline step, or a launch record (the launch cache
    keeps these: they hold wgpu objects, never the vyre buffers)."""

    name: str  # the program's, for errors
    pipeline: Any
    bind_group: Any
    binding: Binding  # whose uniform buffer must hold `data` when this is submitted
    data: bytes  # the packed uniforms (element counts, params)
    direct: tuple[int, int, int] | None  # the workgroup counts when the grid is not indirect
    indirect: tuple[Any, int] | None  # (gpu buffer, offset) of an indirect grid
    grid_copy: Any  # a private 12-byte indirect buffer when the grid buffer is also bound
    grid_check: tuple[Any, Any] | None = None  # indirect grids: (pipeline, bind group) of
    # the pre-pass that flags counts over the per-dimension limit in `status`
    status: tuple[Status, ...] = ()  # checked before results of this step can be seen


def plain_runs(steps: list[WgpuRecord]) -> Runs | None:
    """A recorded pipeline's steps as runs, made once when it is recorded, so each run()
    encodes with a loop as tight as a hand-written one; None when some step needs more
    than a plain dispatch (an indirect grid, its check)."""
    runs: Runs = []
    for s in steps:
        if s.direct is None or s.grid_check is not None or s.grid_copy is not None:
            return None
        if runs and runs[-1][0] is s.pipeline and runs[-1][1] is s.bind_group:
            runs[-1] = (s.pipeline, s.bind_group, (*runs[-1][2], s.direct))
        else:
            runs.append((s.pipeline, s.bind_group, (s.direct,)))
    return runs


def one_dispatch(enc: Any, rec: WgpuRecord, grid: tuple[int, int, int]) -> None:
    """One compute pass holding `rec`'s plain dispatch of `grid` workgroups."""
    cp = enc.begin_compute_pass()
    cp.set_pipeline(rec.pipeline)
    cp.set_bind_group(0, rec.bind_group)
    cp.dispatch_workgroups(*grid)
    cp.end()


def encode(
enc: Any,
    steps: list[WgpuRecord],
    repeat: int,
    timestamps: Any | None,
    runs: Runs | None = None,
    first: bool = True,
    last: bool = True,
) -> None:
    """All steps, `repeat` times, in as few compute passes as possible (a pass ends
    only where an indirect grid must first be copied out of a buffer the step binds).
    wgpu orders dispatches inside a pass by their storage-buffer usage. `runs`: the
    steps' plain_runs, when the caller has them. `first` / `last`: whether this
    encoding begins / ends the timed span (a long run is encoded in several)."""
    direct = steps[0].direct if len(steps) == 1 and repeat == 1 else None
    if runs is not None and direct is None:  # a recorded pipeline of plain dispatches
        tw: dict[str, Any] | None = None
        if timestamps is not None and (first or last):
            tw = {"query_set": timestamps}
            if first:
                tw["beginning_of_pass_write_index"] = 0
            if last:
                tw["end_of_pass_write_index"] = 1
        cp = enc.begin_compute_pass(timestamp_writes=tw) if tw else enc.begin_compute_pass()
        dispatch = cp.dispatch_workgroups
        for _ in range(repeat):
            for pipe, bg, grids in runs:
                cp.set_pipeline(pipe)
                cp.set_bind_group(0, bg)
                for g in grids:
                    dispatch(*g)
        cp.end()
        return
    if direct is not None and timestamps is None:
        one_dispatch(enc, steps[0], direct)  # the common launch: no pass planning
        return
    passes: list[list[WgpuRecord]]
    if all(s.grid_copy is None for s in steps):
        passes = [steps * repeat]  # the common case: one pass
    else:
        passes = []
        cur: list[WgpuRecord] = []
        for _ in range(repeat):
            for s in steps:
                if s.grid_copy is not None and cur:
                    passes.append(cur)
                    cur = []
                cur.append(s)
        passes.append(cur)
    final = len(passes) - 1
    for pi, group in enumerate(passes):
        if group and group[0].grid_copy is not None:
            gpu, offset = group[0].indirect  # type: ignore[misc]
            enc.copy_buffer_to_buffer(gpu, offset, group[0].grid_copy, 0, 12)
        tw = None
        if timestamps is not None and ((first and pi == 0) or (last and pi == final)):
            tw = {"query_set": timestamps}
            if first and pi == 0:
                tw["beginning_of_pass_write_index"] = 0
            if last and pi == final:
                tw["end_of_pass_write_index"] = 1
        cp = enc.begin_compute_pass(timestamp_writes=tw) if tw else enc.begin_compute_pass()
        dispatch = cp.dispatch_workgroups
        prev_pipe = prev_bg = None
        for s in group:
            if s.pipeline is not prev_pipe:
                cp.set_pipeline(s.pipeline)
                prev_pipe = s.pipeline
            if s.bind_group is not prev_bg:
                cp.set_bind_group(0, s.bind_group)
                prev_bg = s.bind_group
            if s.grid_check is not None:  # flags counts over the limit first
                cp.set_pipeline(s.grid_check[0])
                cp.set_bind_group(0, s.grid_check[1])
                cp.dispatch_workgroups(1)
                cp.set_pipeline(s.pipeline)
                cp.set_bind_group(0, s.bind_group)
                prev_pipe, prev_bg = s.pipeline, s.bind_group
            if s.direct is not None:
                dispatch(*s.direct)
            elif s.grid_copy is not None:
                cp.dispatch_workgroups_indirect(s.grid_copy, 0)
            else:
                cp.dispatch_workgroups_indirect(*s.indirect)  # type: ignore[misc]
        cp.end()
