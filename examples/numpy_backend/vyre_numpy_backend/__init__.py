"""vyre_numpy_backend: a minimal vyre backend living outside the vyre repository.

A backend is four parts behind the vyre.BaseBackend facade (vyre.parts): a device, an
allocator, a compiler and a queue. Here the device is the CPU (vyre's plain Device, given
the capabilities), the allocator hands out host memory, the compiler is the reference
interpreter's plan (vyre.backends.reference.plan: a CPU JIT or a C printer would put its
own compiler in `compile`) and the queue runs each launch at once. Everything else
(argument checking, binding, the compile and launch caches, the host-path `dispatch`,
`stream`, ownership, close) is the facade's. It registers itself through the
`vyre.backends` entry point in pyproject.toml, and proves itself with vyre's conformance
suite: `pytest tests/test_conformance.py --backend numpy`.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import numpy as np

from vyre import features as F
from vyre.backend import BaseBackend, Capabilities, Pending
from vyre.backends.reference.plan import Launch, Plan, execute
from vyre.binding import BoundDispatch
from vyre.buffer import BufferBase
from vyre.config import Timing
from vyre.interface import Backend
from vyre.ir.nodes import Program
from vyre.parts import Allocator, Compiler, Device, Queue
from vyre.registry import Availability
from vyre.subgroups import check_fits

SUBGROUP_SIZE = 32
LIMITS = {
    "max_workgroup_invocations": 1024, "max_workgroup_size_x": 1024,
    "max_workgroup_size_y": 1024, "max_workgroup_size_z": 64,
    "max_workgroups_per_dimension": 65535, "max_workgroup_bytes": 65536,
    "max_buffer_bytes": 2**32, "max_allocation_bytes": 2**32, "max_buffers_per_program": 32,
}


class NumpyBuffer(BufferBase):
    """`byte_len` bytes of host memory (`array`, uint8), owned by one NumpyBackend."""

    def __init__(self, owner: BaseBackend, byte_len: int, label: str | None) -> None:
        super().__init__(owner, byte_len, label)
        self.array = np.zeros(byte_len, dtype=np.uint8)


class NumpyAllocator(Allocator):
    """Memory: the facade has checked ownership, ranges and freed state before these run."""

    def allocate(self, byte_len: int, label: str | None) -> BufferBase:
        return NumpyBuffer(self.backend, byte_len, label)

    def free(self, buffer: BufferBase) -> None:
        assert isinstance(buffer, NumpyBuffer)
        buffer.array = np.zeros(0, dtype=np.uint8)

    def write(self, buffer: BufferBase, data: memoryview, offset: int) -> None:
        assert isinstance(buffer, NumpyBuffer)
        buffer.array[offset : offset + data.nbytes] = np.frombuffer(data, dtype=np.uint8)

    def read(self, buffer: BufferBase, offset: int, length: int) -> bytes:
        assert isinstance(buffer, NumpyBuffer)
        return buffer.array[offset : offset + length].tobytes()


class NumpyCompiler(Compiler):
    """A validated Program -> what launches run (cached by the facade's compile cache)."""

    def compile(self, program: Program, key: Any) -> Plan:
        check_fits(program, SUBGROUP_SIZE, self.device.id)  # whole subgroups only (docs/IR.md)
        return Plan.prepare(program, subgroup_size=SUBGROUP_SIZE)


class NumpyQueue(Queue):
    """A launch record per binding (made once), then launches of it, run at once."""

    def prepare(self, bound: BoundDispatch, artifact: Any) -> Launch:
        return Launch.of(artifact, bound)

    def launch(self, record: Any, buffers: tuple[BufferBase, ...]) -> None:
        execute(record, buffers)  # type: ignore[arg-type]  # NumpyBuffers have .array

    def launch_pending(self, bound: BoundDispatch) -> Pending:
        t0 = time.perf_counter_ns()
        self.launch(bound.launch.record, bound.buffers)
        ns = time.perf_counter_ns() - t0
        return Pending.done(Timing(ns, ns, 0, ns if bound.config.profile else None))


class NumpyBackend(BaseBackend):
    kind = "numpy"

    def __init__(self, instance_id: str = "numpy") -> None:
        device = Device(instance_id, Capabilities(
            backend=instance_id, kind=self.kind, device="CPU (NumPy)", limits=dict(LIMITS),
            features=frozenset({F.F16, F.F64, F.I64, F.ATOMIC_FLOAT, F.ATOMIC_I64,
                                F.WORKGROUP_MEMORY, F.RESIDENT, F.SUBGROUP}),
            details={"subgroup_size": SUBGROUP_SIZE}))
        super().__init__(device, NumpyAllocator(device), NumpyCompiler(device),
                         NumpyQueue(device))


class _Provider:
    """What the `vyre.backends` entry point names: `probe()` and `create(device)`."""

    name = "numpy"

    def probe(self) -> Availability:
        return Availability(self.name, True, "NumPy on the CPU", ("cpu",))

    def create(self, device: int | str | None = None) -> NumpyBackend:
        return NumpyBackend()


PROVIDER = _Provider()

__all__ = ["PROVIDER", "NumpyBackend", "NumpyBuffer"]


if TYPE_CHECKING:  # mypy holds NumpyBackend to the public protocol (tests check it at run time)
    def _satisfies_backend(b: NumpyBackend) -> Backend:
        return b
