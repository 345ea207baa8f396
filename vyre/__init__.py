"""vyre: one backend-neutral Program, run on CUDA, WebGPU or the NumPy reference, on device
buffers that stay resident across dispatches."""

from __future__ import annotations

from typing import Any

from . import approx, builder, errors, features
from .backend import BaseBackend, Capabilities, CompileStats, Pending
from .backends.reference.checked import CheckReport, CheckSetting, CheckWarning
from .binding import BoundDispatch, validate_buffer_ownership
from .buffer import BufferBase, DeviceBuffer
from .builder import (
    ProgramBuilder,
    dot4_i8,
    dot4_u8,
    max_,
    min_,
    select,
    subgroup_broadcast,
    subgroup_exclusive_scan,
    subgroup_inclusive_scan,
    subgroup_reduce,
    subgroup_shuffle,
)
from .builder import calls as _calls
from .builder.calls import *  # noqa: F403  (vyre.sqrt & co: the op registry's functions)
from .config import DispatchConfig, DispatchOptions, IndirectGrid, Timing
from .debug import set_debug_log_bytes
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
from .interface import Backend
from .ir.nodes import Program
from .ir.serialize import from_json, to_json
from .ir.types import ScalarType, bool_, f16, f32, f64, i8, i16, i32, i64, u8, u16, u32, u64
from .ir.validate import validate
from .kernel import (
    Buffer,
    Dim,
    InOut,
    Kernel,
    Output,
    TypeParam,
    assert_,
    barrier,
    break_,
    continue_,
    else_,
    global_id,
    global_index,
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
    static,
    subgroup_lane,
    subgroup_size,
    while_,
    workgroup_id,
    workgroup_linear_id,
)
from .kernel import (
    print as print,  # (vyre.print; not in __all__, see there)
)
from .pipeline import Pipeline, PipelineResult, ReadRange, Step
from .registry import Availability, available_backends, get_backend
from .replay_file import VERSION
from .shapes import XYZ, xyz
from .transfers import copy, copy_many, transfer

__version__ = VERSION


def dispatch(program: Program, inputs: Any, config: DispatchConfig, backend: str | None = None) -> dict[str, Any]:
    """One-shot host dispatch on the default (or named) backend."""
    with get_backend(backend) as b:
        return b.dispatch(program, inputs, config)


__all__ = [
    "XYZ",
    "Availability",
    "Backend",
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
    "CheckReport",
    "CheckSetting",
    "CheckWarning",
    "CompileError",
    "CompileStats",
    "DeviceBuffer",
    "DeviceGroup",
    "Dim",
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
    "approx",
    "assert_",
    "available_backends",
    "barrier",
    "bool_",
    "break_",
    "builder",
    "continue_",
    "copy",
    "copy_many",
    "dispatch",
    "dot4_i8",
    "dot4_u8",
    "else_",
    "errors",
    "f16",
    "f32",
    "f64",
    "features",
    "from_json",
    "get_backend",
    "global_id",
    "global_index",
    "global_linear_id",
    "i8",
    "i16",
    "i32",
    "i64",
    "if_",
    "kernel",
    "let",
    "lit",
    "local_id",
    "local_index",
    "max_",
    "min_",
    "num_workgroups",
    # (not "print": `from vyre import *` would replace Python's print everywhere in the
    # importing module; vyre.print is written with its module name, as vyre.range often is)
    "programs",  # noqa: F405  (the subpackage: bound by the import of .group below)
    "range",
    "return_",
    "select",
    "set_debug_log_bytes",
    "shared",
    "static",
    "subgroup_broadcast",
    "subgroup_exclusive_scan",
    "subgroup_inclusive_scan",
    "subgroup_lane",
    "subgroup_reduce",
    "subgroup_shuffle",
    "subgroup_size",
    "to_json",
    "transfer",
    "u8",
    "u16",
    "u32",
    "u64",
    "validate",
    "validate_buffer_ownership",
    "while_",
    "workgroup_id",
    "workgroup_linear_id",
    "xyz",
]
__all__ += _calls.__all__  # (so a new registry function needs no edit here)

# last: DeviceGroup sits above the program library (it combines shards in the library's
# order), which imports this package; every name above exists by then
from .group import DeviceGroup  # noqa: E402
