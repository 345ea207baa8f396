"""ReferenceBackend: the NumPy oracle as a real vyre backend whose device is the CPU.

Its four parts are small, so they live here: the device (the CPU in a float mode: flush
mode, subgroup size, the checked mode), the allocator (host memory owned by the instance),
the compiler (an interpreter Plan, cached by the core) and the queue (a dispatch runs
synchronously and returns a finished Pending; a pipeline runs its steps `repeat` times then
its reads). This module must never implement IR semantics (see `numeric`, `atomics`,
`interpreter`) nor accept memory of another owner (vyre.binding checks ownership before
anything reaches here).
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from vyre import features as F
from vyre import subgroups
from vyre.backend import BaseBackend, Capabilities, HostBytes, Pending
from vyre.binding import BoundDispatch
from vyre.buffer import BufferBase
from vyre.config import Timing
from vyre.debug.instrument import debug_program
from vyre.errors import BackendUnavailable, OutOfDeviceMemory
from vyre.interface import Backend
from vyre.ir.nodes import Program
from vyre.ir.types import ScalarType
from vyre.parts import Allocator, Compiler, Device, Queue
from vyre.pipeline import Pipeline, PipelineResult, ReadRange

from . import numeric
from .buffers import ReferenceBuffer
from .checked import CheckReport, CheckSetting, execute_checked
from .plan import Launch, Plan, execute
from .render import listing

VERSION = "0.1.0"
ENV_SUBGROUP_SIZE = "VYRE_REFERENCE_SUBGROUP_SIZE"
DEFAULT_SUBGROUP_SIZE = 32  # CUDA's warp; any of vyre.subgroups.SIZES can be asked for

FEATURES = frozenset(
    {
        F.F16, F.F64, F.I64, F.ATOMIC_FLOAT, F.ATOMIC_I64, F.WORKGROUP_MEMORY,
        F.RESIDENT, F.ASYNC, F.PIPELINE, F.INDIRECT_DISPATCH, F.SUBGROUP,
    }
)
LIMITS = {
    "max_workgroup_invocations": 1024,
    "max_workgroup_size_x": 1024,
    "max_workgroup_size_y": 1024,
    "max_workgroup_size_z": 64,
    "max_workgroups_per_dimension": 65535,
    "max_workgroup_bytes": 65536,
    "max_buffer_bytes": 2**34,
    "max_allocation_bytes": 2**34,
    "max_buffers_per_program": 32,
}


class ReferenceDevice(Device):
    """The CPU in the float mode this instance runs in (see ReferenceBackend)."""

    caps: Capabilities

    def __init__(self, instance_id: str, flush_subnormals: frozenset[ScalarType],
                 subgroup_size: int | None, flush_tininess: str, check: CheckSetting) -> None:
        super().__init__(instance_id)
        self.check_setting = check
        self.flush_subnormals = frozenset(flush_subnormals)
        if flush_tininess not in F.TININESS_RULES:
            raise ValueError(f"flush_tininess={flush_tininess!r}: use one of "
                             f"{F.TININESS_RULES}")
        self.flush_tininess = flush_tininess
        if subgroup_size is None:
            raw = os.environ.get(ENV_SUBGROUP_SIZE, "").strip()
            try:
                subgroup_size = int(raw) if raw else DEFAULT_SUBGROUP_SIZE
                subgroups.check_size(subgroup_size)
            except ValueError:
                raise BackendUnavailable(
                    instance_id, f"${ENV_SUBGROUP_SIZE}={raw!r} is not a subgroup size; use "
                    f"one of {subgroups.SIZES}") from None
        self.subgroup_size = subgroups.check_size(subgroup_size)
        self.caps = Capabilities(
            backend=self.id,
            kind=ReferenceBackend.kind,
            device=f"CPU (NumPy {np.__version__})",
            features=FEATURES,
            limits=dict(LIMITS),
            details={
                "lockstep": "whole chunks of workgroups run as vectors with lane masks",
                "fma_f64": "exact: rational arithmetic per element",
                "atomics": "colliding atomics of one statement apply in lane order",
                "workgroup_memory_init": "zero",
                "flushes_subnormals": sorted(t.value for t in self.flush_subnormals),
                "flush_tininess": self.flush_tininess,
                "subgroup_size": self.subgroup_size,
                "check": check.mode,
            },
        )


class ReferenceAllocator(Allocator):
    """Host memory: a zeroed NumPy array per buffer (ReferenceBuffer)."""

    def allocate(self, byte_len: int, label: str | None) -> BufferBase:
        try:
            return ReferenceBuffer(self.backend, byte_len, label)
        except MemoryError:
            raise OutOfDeviceMemory(self.device.id, byte_len,
                                    "host memory is exhausted") from None

    def free(self, buffer: BufferBase) -> None:
        assert isinstance(buffer, ReferenceBuffer)
        buffer.release()

    def write(self, buffer: BufferBase, data: memoryview, offset: int) -> None:
        assert isinstance(buffer, ReferenceBuffer)
        buffer.array[offset : offset + data.nbytes] = np.frombuffer(data, dtype=np.uint8)

    def read(self, buffer: BufferBase, offset: int, length: int) -> HostBytes:
        assert isinstance(buffer, ReferenceBuffer)
        return buffer.array[offset : offset + length].data


class ReferenceCompiler(Compiler):
    """A Program to the interpreter's Plan (the exact functions' definitions inlined)."""

    device: ReferenceDevice

    def compile(self, program: Program, key: Any) -> Plan:
        subgroups.check_fits(program, self.device.subgroup_size, self.device.id)
        return Plan.prepare(program, subgroup_size=self.device.subgroup_size)

    def source(self, program: Program) -> str:
        program = debug_program(program)  # (vyre.print / assert_: what runs)
        return listing(program)


class ReferenceQueue(Queue):
    """Runs every launch at once, on the calling thread, in the device's float mode."""

    device: ReferenceDevice

    def __init__(self, device: ReferenceDevice, memory: ReferenceAllocator) -> None:
        super().__init__(device)
        self.memory = memory
        self.last_check_report: CheckReport | None = None

    def prepare(self, bound: BoundDispatch, artifact: Any) -> Launch:
        return Launch.of(artifact, bound, self.device.caps.limits["max_workgroups_per_dimension"])

    def run(self, launch: Launch, buffers: Sequence[Any]) -> int:
        """Execute one prepared dispatch now; returns the nanoseconds it took."""
        dev = self.device
        check = dev.check_setting
        t0 = time.perf_counter_ns()
        with numeric.flushing(dev.flush_subnormals, dev.flush_tininess):
            if not check.on:
                execute(launch, buffers)
            else:
                self.last_check_report = execute_checked(
                    launch, buffers, bounds=check.bounds != "off")
        if check.on:
            check.surface(self.last_check_report)  # type: ignore[arg-type]
        return time.perf_counter_ns() - t0

    def launch(self, record: Any, buffers: tuple[BufferBase, ...]) -> None:
        self.run(record, buffers)

    def launch_pending(self, bound: BoundDispatch) -> Pending:
        t0 = time.perf_counter_ns()
        ns = self.run(bound.launch.record, bound.buffers)
        wall = time.perf_counter_ns() - t0
        return Pending.done(
            Timing(
                wall_ns=wall,
                enqueue_ns=wall,
                wait_ns=0,
                device_ns=ns if bound.config.profile else None,
            )
        )

    def record_pipeline(self, pipeline: Pipeline, artifacts: list[Any]) -> None:
        pipeline.state = [self.prepare(s, a) for s, a in zip(pipeline.steps, artifacts)]

    def run_pipeline(
        self, pipeline: Pipeline, repeat: int, reads: list[ReadRange]
    ) -> PipelineResult:
        t0 = time.perf_counter_ns()
        device = 0
        for _ in range(repeat):
            for step, launch in zip(pipeline.steps, pipeline.state):
                device += self.run(launch, step.buffers)
        t1 = time.perf_counter_ns()
        out = []
        read = self.memory.read
        for r in reads:
            length = r.buffer.byte_len - r.offset if r.length is None else r.length
            raw = read(r.buffer, r.offset, length) if length else b""
            out.append(np.frombuffer(bytearray(raw), dtype=np.dtype(r.dtype)))
        t2 = time.perf_counter_ns()
        return PipelineResult(
            reads=out,
            timing=Timing(wall_ns=t2 - t0, enqueue_ns=t1 - t0, wait_ns=t2 - t1, device_ns=device),
            extra={"dispatches": repeat * len(pipeline.steps)},
        )


class ReferenceBackend(BaseBackend):
    """The NumPy interpreter of the Program IR (docs/IR.md), on host memory."""

    kind = "reference"
    version = VERSION
    _queue: ReferenceQueue
    # the parts this class builds: a subclass swaps one to run the reference with another
    # compiler (a lowering, as tests/test_lowering.py does) or queue (a deliberately wrong
    # device, as tests/test_shadow.py does)
    compiler_part: type[ReferenceCompiler] = ReferenceCompiler
    queue_part: type[ReferenceQueue] = ReferenceQueue

    def __init__(
        self, instance_id: str = "reference", flush_subnormals: frozenset[ScalarType] = frozenset(),
        subgroup_size: int | None = None, flush_tininess: str = F.TININESS_AFTER_ROUNDING,
        check: bool | str | CheckSetting | None = None,
    ) -> None:
        """`flush_subnormals`: float types evaluated in docs/IR.md's flush mode (to compare
        exactly with a backend whose device flushes them; vyre.tools.testing picks it), with
        tiny results decided by `flush_tininess` (one of `F.TININESS_RULES`).
        `subgroup_size`: the subgroup size this instance reports and runs with (a power of
        two up to 128; default $VYRE_REFERENCE_SUBGROUP_SIZE, else 32); vyre.tools.testing
        picks the compared backend's.
        `check`: the checked mode (vyre.backends.reference.checked): True or "error" raises
        DispatchError on a race, uninitialised read, out-of-bounds access or divergent
        barrier, "warn" warns; default $VYRE_CHECK, else off. Results never change."""
        setting = CheckSetting.parse(check)
        dev = ReferenceDevice(instance_id, flush_subnormals, subgroup_size, flush_tininess,
                              setting)
        memory = ReferenceAllocator(dev)
        super().__init__(dev, memory, self.compiler_part(dev), self.queue_part(dev, memory))
        self.check = setting
        self.flush_subnormals = dev.flush_subnormals
        self.flush_tininess = dev.flush_tininess
        self.subgroup_size = dev.subgroup_size

    @property
    def last_check_report(self) -> CheckReport | None:
        """What the checked mode found in the last dispatch (None while it is off)."""
        return self._queue.last_check_report


if TYPE_CHECKING:  # mypy holds ReferenceBackend to the public protocol (tests check it at run time)
    def _satisfies_backend(b: ReferenceBackend) -> Backend:
        return b
