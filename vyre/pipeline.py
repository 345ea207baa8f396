"""Recorded multi-dispatch pipelines.

A Pipeline is a list of steps bound (validated) once against one backend. `run` executes the
whole dependent chain, `repeat` times, plus the requested readbacks, behind one host
synchronisation; how is the backend's business (one command buffer, a CUDA graph, ...).
This module must never execute anything itself.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from .binding import BoundDispatch, BufferArg, bind, validate_buffer_ownership
from .buffer import BufferBase, check_range, check_usable
from .config import DispatchConfig, Timing
from .errors import InvalidDispatch
from .hostarrays import as_dtype
from .ir.nodes import Program

if TYPE_CHECKING:
    from .backend import BaseBackend


@dataclass(frozen=True)
class Step:
    """One dispatch of a pipeline (the same arguments as dispatch_with_device_buffers)."""

    program: Program
    inputs: BufferArg
    outputs: BufferArg
    config: DispatchConfig


@dataclass(frozen=True)
class ReadRange:
    """A readback: `length` bytes (None: to the end) at `offset` of `buffer`, as `dtype`."""

    buffer: Any
    offset: int = 0
    length: int | None = None
    dtype: Any = np.uint8


@dataclass
class PipelineResult:
    reads: list[np.ndarray]
    timing: Timing
    extra: dict[str, Any] = field(default_factory=dict)


def as_read_range(r: Any) -> ReadRange:
    if isinstance(r, ReadRange):
        return r
    if isinstance(r, tuple):
        return ReadRange(*r)
    return ReadRange(r)


class Pipeline:
    """Steps bound once; `run(repeat, read)` goes through the backend's `_run_pipeline`."""

    def __init__(self, backend: BaseBackend, steps: Sequence[Step | BoundDispatch]) -> None:
        if not steps:
            raise InvalidDispatch("a pipeline needs at least one step")
        self.backend = backend
        bound: list[BoundDispatch] = []
        for i, s in enumerate(steps):
            if isinstance(s, BoundDispatch):
                bound.append(s)
                continue
            if not isinstance(s, Step):
                raise InvalidDispatch(f"pipeline step {i} must be a vyre.Step, got {type(s)}")
            try:
                bound.append(bind(backend, s.program, s.inputs, s.outputs, s.config))
            except InvalidDispatch as exc:
                raise InvalidDispatch(f"pipeline step {i} ({s.program.name}): {exc}") from None
        self.steps: tuple[BoundDispatch, ...] = tuple(bound)
        # each distinct buffer once: run() re-checks them (freed, stale) in O(buffers), not
        # O(steps), so a long recorded chain over a few buffers costs little host work
        self._distinct_buffers: tuple[BufferBase, ...] = tuple(
            {id(b): b for s in self.steps for b in s.buffers}.values()
        )
        self.profiled = any(s.config.profile for s in self.steps)  # device timers asked for
        self.state: Any = None  # backend-private recording (command list, graph, ...)

    def _check_reads(self, read: Sequence[Any]) -> list[ReadRange]:
        out = []
        for r in read:
            rr = as_read_range(r)
            validate_buffer_ownership(self.backend, [rr.buffer])
            length = rr.buffer.byte_len - rr.offset if rr.length is None else rr.length
            check_range(rr.buffer, rr.offset, length)
            dtype = as_dtype(rr.dtype)  # vyre.f16 is float16 here, never np.dtype("f16")
            if length % dtype.itemsize:
                raise InvalidDispatch(
                    f"read of {length} bytes is not a whole number of {dtype}"
                )
            out.append(ReadRange(rr.buffer, rr.offset, length, dtype))
        return out

    def run(self, repeat: int = 1, read: Sequence[Any] = ()) -> PipelineResult:
        """Run every step `repeat` times in order, then the readbacks; one host sync."""
        if isinstance(repeat, bool) or not isinstance(repeat, int) or repeat < 1:
            raise InvalidDispatch(f"repeat must be an int >= 1, got {repeat!r}")
        self.backend._check_open()
        reads = self._check_reads(read)
        # Under the backend's lock like every other device call: device libraries (wgpu-native)
        # abort the process when two threads submit at once.
        with self.backend._lock:
            self.backend._check_open()
            for b in self._distinct_buffers:
                check_usable(b)
            return self.backend._run_pipeline(self, repeat, reads)

    def buffers(self) -> list[BufferBase]:
        return [b for s in self.steps for b in s.buffers]
