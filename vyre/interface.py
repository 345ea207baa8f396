"""`Backend`: the public surface every vyre backend offers, as one named protocol.

Local backends (`vyre.backend.BaseBackend` subclasses: reference, cuda, wgpu, out-of-tree
plugins) and `vyre.distributed.RemoteBackend` (a backend in a Ray actor) all satisfy it, so
code that runs work on "a backend" (the program library, the tools, `@vyre.kernel`'s
`launch`, `DeviceGroup`) is typed against `Backend` and never against one implementation.
`tests/test_backend_protocol.py` checks every member, signatures included, at run time, and
mypy checks the same through assignments to `Backend`.

Members a backend cannot offer are still present and raise `vyre.UnsupportedFeature`, whose
message says what to use instead. `RemoteBackend` refuses exactly two:
`page_locked_array` (page-locked memory would live in the actor's process, not the
caller's; the actor's capabilities drop 'page_locked_host') and `from_dlpack` (a
framework's device array lives in the caller's process, the actor's backend in another).
Every other member works over Ray (`stream` as the same chunk loop over its resident
methods; the compile-cache controls act on the actor's backend).

This module must never hold behaviour: it is the contract, and each implementation keeps
its own code.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, Self, runtime_checkable

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from .buffer import DeviceBuffer
from .config import DispatchConfig, Timing
from .ir.nodes import Program
from .pipeline import PipelineResult

__all__ = ["Availability", "Backend", "Bound", "Capabilities", "CompileStats", "PendingWork",
           "RecordedPipeline"]


class Capabilities(BaseModel):
    """What a backend instance can do, reported before anything runs."""

    model_config = ConfigDict(frozen=True)

    backend: str  # instance id, e.g. "cuda:0"
    kind: str  # "cuda", "wgpu", "reference"
    device: str  # human-readable device name
    features: frozenset[str] = frozenset()
    limits: dict[str, int] = Field(default_factory=dict)
    details: dict[str, Any] = Field(default_factory=dict)


@dataclass
class CompileStats:
    """A backend instance's compile-cache counters."""

    hits: int = 0  # served from the in-memory cache
    misses: int = 0  # compiled (or loaded from disk)
    disk_hits: int = 0  # of the misses, how many the on-disk cache served
    evictions: int = 0  # compiled programs dropped from the in-memory cache (LRU)

#: What `bind` returns and `dispatch_*` / `pipeline` take back: the backend's own record of
#: a validated dispatch (`BoundDispatch` locally, `RemoteBound` over Ray). Pass it only to
#: the backend that made it (any other refuses it with BufferOwnershipError).
Bound = Any


@runtime_checkable
class PendingWork(Protocol):
    """Enqueued work (`dispatch_async`): `wait()` blocks until done, returns its Timing."""

    def is_ready(self) -> bool: ...

    def wait(self) -> Timing: ...


@runtime_checkable
class RecordedPipeline(Protocol):
    """A recorded pipeline (`pipeline`): `run()` issues every step behind one sync."""

    @property
    def steps(self) -> Sequence[Any]: ...  # one entry per dispatch, in order

    def run(self, repeat: int = 1, read: Sequence[Any] = ()) -> PipelineResult: ...

    def buffers(self) -> Sequence[DeviceBuffer]: ...


@runtime_checkable
class Backend(Protocol):
    """The public surface of a backend instance (see the module docstring; docs/guide.md
    describes each member)."""

    id: str  # instance id, e.g. "cuda:0" or "ray:<actor>/cuda:0"
    kind: str  # "cuda", "wgpu", "reference", ...
    # the instance's debug / measurement switches (a frozen value such as CudaOptions or
    # WgpuOptions, part of every compile-cache key; None for a backend without any)
    options: Any

    # ------------------------------------------------------------ state
    @property
    def closed(self) -> bool: ...

    @property
    def context_generation(self) -> int: ...

    def capabilities(self) -> Capabilities: ...

    def supports(self, feature: str) -> bool: ...

    # ------------------------------------------------------------ memory
    def allocate_device_buffer(self, byte_len: int, label: str | None = None,
                               kind: str = "device") -> DeviceBuffer: ...

    def free(self, buffer: DeviceBuffer) -> None: ...

    def live_buffers(self) -> Sequence[DeviceBuffer]: ...

    def write(self, buffer: DeviceBuffer, data: Any, offset: int = 0) -> None: ...

    def write_many(self, items: Iterable[tuple[DeviceBuffer, Any, int]
                                         | tuple[DeviceBuffer, Any]]) -> None: ...

    def read(self, buffer: DeviceBuffer, offset: int = 0, length: int | None = None,
             dtype: Any = np.uint8) -> np.ndarray: ...

    def read_many(self, ranges: Iterable[Any]) -> list[np.ndarray]: ...

    def read_into(self, buffer: DeviceBuffer, out: np.ndarray, offset: int = 0) -> np.ndarray: ...

    def page_locked_array(self, shape: int | tuple[int, ...],
                          dtype: Any = np.float32) -> np.ndarray: ...

    def from_dlpack(self, tensor: Any, *, stream: Any = "auto",
                    label: str | None = None) -> DeviceBuffer: ...

    # ------------------------------------------------------------ compile
    def compile(self, program: Program) -> Any: ...

    def source(self, program: Program) -> str: ...

    @property
    def compile_stats(self) -> CompileStats: ...

    @property
    def compile_cache_limit(self) -> int: ...

    def set_compile_cache_limit(self, n: int) -> None: ...

    def compile_cache_size(self) -> int: ...

    # ------------------------------------------------------------ dispatch
    def bind(self, program: Program, inputs: Any, outputs: Any,
             config: DispatchConfig) -> Bound: ...

    def dispatch_async(self, program: Program | Bound, inputs: Any = (), outputs: Any = (),
                       config: DispatchConfig | None = None) -> PendingWork: ...

    def dispatch_with_device_buffers(self, program: Program | Bound, inputs: Any = (),
                                     outputs: Any = (),
                                     config: DispatchConfig | None = None) -> Timing: ...

    def dispatch(self, program: Program, inputs: Mapping[str, Any] | Sequence[Any],
                 config: DispatchConfig) -> dict[str, np.ndarray]: ...

    def stream(
        self, program: Program, chunks: Iterable[Mapping[str, Any] | Sequence[Any]],
        config: DispatchConfig | Callable[[int, Mapping[str, np.ndarray]], DispatchConfig],
    ) -> Iterator[dict[str, np.ndarray]]: ...

    def pipeline(self, steps: Sequence[Any]) -> RecordedPipeline: ...

    # ------------------------------------------------------------ lifecycle
    def synchronize(self) -> None: ...

    def release_cached_memory(self) -> int: ...

    def close(self) -> None: ...

    def __enter__(self) -> Self: ...

    def __exit__(self, *exc: object) -> None: ...


@dataclass(frozen=True)
class Availability:
    """Whether a backend can run here; `reason` says why not and how to fix it."""

    name: str
    available: bool
    reason: str = ""
    devices: tuple[str, ...] = ()
    details: dict[str, Any] = field(default_factory=dict)
