"""vyre: one backend-neutral Program, run on CUDA, WebGPU or the NumPy reference, on device
buffers that stay resident across dispatches."""

from __future__ import annotations

from typing import Any

from . import builder, errors, features
from .backend import Backend, BaseBackend, Capabilities, CompileStats, Pending
from .binding import BoundDispatch, validate_buffer_ownership
from .buffer import BufferBase, DeviceBuffer
from .builder import ProgramBuilder
from .config import DispatchConfig, IndirectGrid, Timing
from .errors import (
    BackendError,
    BackendUnavailable,
    BufferOwnershipError,
    BufferStateError,
    CompileError,
    DispatchError,
    InvalidDispatch,
    InvalidProgram,
    OutOfDeviceMemory,
    UnsupportedFeature,
)
from .ir.nodes import Program
from .ir.serialize import from_json, to_json
from .ir.types import ScalarType, bool_, f16, f32, f64, i32, i64, u32, u64
from .ir.validate import validate
from .pipeline import Pipeline, PipelineResult, ReadRange, Step
from .registry import Availability, available_backends, get_backend

__version__ = "0.1.0"


def transfer(buffer: DeviceBuffer, backend: BaseBackend, label: str | None = None) -> BufferBase:
    """Copy a buffer explicitly to another backend (through the host): a new buffer there."""
    owner = buffer.owner
    if not isinstance(owner, BaseBackend):
        raise BufferOwnershipError(f"{buffer!r} has no vyre backend owner to read it from")
    data = owner.read(buffer)
    out = backend.allocate_device_buffer(buffer.byte_len, label=label or buffer.label)
    if data.nbytes:
        backend.write(out, data)
    return out


def dispatch(program: Program, inputs: Any, config: DispatchConfig, backend: str | None = None) -> dict[str, Any]:
    """One-shot host dispatch on the default (or named) backend."""
    with get_backend(backend) as b:
        return b.dispatch(program, inputs, config)


__all__ = [
    "Availability", "Backend", "BackendError", "BackendUnavailable", "BaseBackend",
    "BoundDispatch", "BufferBase", "BufferOwnershipError", "BufferStateError", "Capabilities",
    "CompileError", "CompileStats", "DeviceBuffer", "DispatchConfig", "DispatchError",
    "IndirectGrid", "InvalidDispatch", "InvalidProgram", "OutOfDeviceMemory", "Pending",
    "Pipeline", "PipelineResult", "Program", "ProgramBuilder", "ReadRange", "ScalarType",
    "Step", "Timing", "UnsupportedFeature", "available_backends", "bool_", "builder",
    "dispatch", "errors", "f16", "f32", "f64", "features", "from_json", "get_backend", "i32",
    "i64", "to_json", "transfer", "u32", "u64", "validate", "validate_buffer_ownership",
]
