"""vyre: one backend-neutral Program, run on CUDA, WebGPU or the NumPy reference, on device
buffers that stay resident across dispatches."""

from __future__ import annotations

from typing import Any

from . import builder, errors, features
from .backend import BaseBackend, Capabilities, CompileStats, Pending
from .binding import BoundDispatch, validate_buffer_ownership
from .buffer import BufferBase, DeviceBuffer, check_label
from .builder import (
    ProgramBuilder,
    abs_,
    atan2,
    ceil,
    clamp,
    cos,
    exp,
    exp2,
    floor,
    fma,
    log,
    log2,
    max_,
    min_,
    pow_,
    round_,
    select,
    sin,
    sqrt,
    subgroup_broadcast,
    subgroup_exclusive_scan,
    subgroup_inclusive_scan,
    subgroup_reduce,
    subgroup_shuffle,
    tan,
    tanh,
    trunc,
)
from .config import DispatchConfig, DispatchOptions, IndirectGrid, Timing
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
from .kernel import (
    Buffer,
    InOut,
    Kernel,
    Output,
    TypeParam,
    barrier,
    break_,
    continue_,
    else_,
    global_id,
    global_linear_id,
    if_,
    kernel,
    let,
    lit,
    local_id,
    local_index,
    num_workgroups,
    range,
    return_,
    shared,
    subgroup_lane,
    subgroup_size,
    while_,
    workgroup_id,
    workgroup_linear_id,
)
from .pipeline import Pipeline, PipelineResult, ReadRange, Step
from .registry import Availability, available_backends, get_backend

__version__ = "0.1.0"


def _remote(obj: object) -> bool:
    """Whether `obj` is a vyre.distributed handle or backend (told by its class's module,
    so that a local transfer never imports vyre.distributed)."""
    return type(obj).__module__.startswith("vyre.distributed.")


def transfer(buffer: DeviceBuffer, backend: BaseBackend, label: str | None = None) -> BufferBase:
    """Copy a buffer explicitly to another backend (through the host): a new buffer there."""
    if _remote(backend) or _remote(buffer):
        from .distributed import transfer as remote_transfer  # (imports no Ray itself)

        return remote_transfer(buffer, backend, label)
    if not isinstance(backend, BaseBackend):
        raise BackendUnavailable(
            repr(backend)[:40], f"transfer needs a destination backend instance, got "
            f"{type(backend).__name__}; create one with vyre.get_backend()",
        )
    owner = getattr(buffer, "owner", None)
    if not isinstance(owner, BaseBackend):
        raise BufferOwnershipError(
            f"{type(buffer).__name__} {buffer!r:.40} has no vyre backend owner to read it "
            "from; transfer takes a buffer from allocate_device_buffer"
        )
    check_label(label, "transfer")
    data = owner.read(buffer)
    out = backend.allocate_device_buffer(buffer.byte_len, label=label or buffer.label)
    try:
        if data.nbytes:
            backend.write(out, data)
    except BaseException:
        out.free()  # all or nothing: never a half-made buffer left on the destination
        raise
    return out


def dispatch(program: Program, inputs: Any, config: DispatchConfig, backend: str | None = None) -> dict[str, Any]:
    """One-shot host dispatch on the default (or named) backend."""
    with get_backend(backend) as b:
        return b.dispatch(program, inputs, config)


__all__ = [
    "Availability",
    "BackendError",
    "BackendUnavailable",
    "BaseBackend",
    "BoundDispatch",
    # the kernel language (vyre.kernel)
    "Buffer",
    "BufferBase",
    "BufferOwnershipError",
    "BufferStateError",
    "Capabilities",
    "CompileError",
    "CompileStats",
    "DeviceBuffer",
    "DispatchConfig",
    "DispatchError",
    "DispatchOptions",
    "InOut",
    "IndirectGrid",
    "InvalidDispatch",
    "InvalidProgram",
    "Kernel",
    "OutOfDeviceMemory",
    "Output",
    "Pending",
    "Pipeline",
    "PipelineResult",
    "Program",
    "ProgramBuilder",
    "ReadRange",
    "ScalarType",
    "Step",
    "Timing",
    "TypeParam",
    "UnsupportedFeature",
    "abs_",
    "atan2",
    "available_backends",
    "barrier",
    "bool_",
    "break_",
    "builder",
    "ceil",
    "clamp",
    "continue_",
    "cos",
    "dispatch",
    "else_",
    "errors",
    "exp",
    "exp2",
    "f16",
    "f32",
    "f64",
    "features",
    "floor",
    "fma",
    "from_json",
    "get_backend",
    "global_id",
    "global_linear_id",
    "i32",
    "i64",
    "if_",
    "kernel",
    "let",
    "lit",
    "local_id",
    "local_index",
    "log",
    "log2",
    "max_",
    "min_",
    "num_workgroups",
    "pow_",
    "range",
    "return_",
    "round_",
    "select",
    "shared",
    "sin",
    "sqrt",
    "subgroup_broadcast",
    "subgroup_exclusive_scan",
    "subgroup_inclusive_scan",
    "subgroup_lane",
    "subgroup_reduce",
    "subgroup_shuffle",
    "subgroup_size",
    "tan",
    "tanh",
    "to_json",
    "transfer",
    "trunc",
    "u32",
    "u64",
    "validate",
    "validate_buffer_ownership",
    "while_",
    "workgroup_id",
    "workgroup_linear_id",
]
