"""Names of the capabilities a backend can report and a Program can need.

A backend reports a feature only where its lowering really emits it; anything not listed
is treated as absent (the conservative answer), so adding a name here never promotes an
existing backend.
"""

from __future__ import annotations

# IR features a Program can need (vyre.ir.analysis.required_features derives them).
F16 = "f16"
F64 = "f64"
I64 = "i64"
ATOMIC_FLOAT = "atomic_float"
ATOMIC_I64 = "atomic_i64"
WORKGROUP_MEMORY = "workgroup_memory"
SUBGROUP = "subgroup"  # subgroup operations and builtins (docs/IR.md, "Subgroups")

# API features of a backend.
RESIDENT = "resident"  # allocate_device_buffer + dispatch_with_device_buffers
ASYNC = "async"  # dispatch_async returns before the device finishes
PIPELINE = "pipeline"  # recorded multi-dispatch pipelines behind one sync
INDIRECT_DISPATCH = "indirect_dispatch"  # grid read from a device buffer
DEVICE_TIMERS = "device_timers"  # per-dispatch device nanoseconds
DISK_CACHE = "disk_cache"  # compiled programs persist across processes
MANAGED_MEMORY = "managed_memory"
PAGE_LOCKED_HOST = "page_locked_host"  # page_locked_array: host memory the DMA moves directly

IR_FEATURES = frozenset({F16, F64, I64, ATOMIC_FLOAT, ATOMIC_I64, WORKGROUP_MEMORY, SUBGROUP})
API_FEATURES = frozenset(
    {RESIDENT, ASYNC, PIPELINE, INDIRECT_DISPATCH, DEVICE_TIMERS, DISK_CACHE, MANAGED_MEMORY,
     PAGE_LOCKED_HOST}
)
ALL_FEATURES = IR_FEATURES | API_FEATURES

# Capabilities.details key: {type name: [function names]} of IR calls a backend that has the
# type still refuses with UnsupportedFeature (wgpu: WGSL has no f64 exp, log, sin, ...).
REFUSED_CALLS = "refused_calls"


def refused_calls(details: dict[str, object]) -> frozenset[tuple[str, str]]:
    """(type name, function) pairs a backend's `capabilities().details` says it refuses."""
    got = details.get(REFUSED_CALLS) or {}
    assert isinstance(got, dict)
    return frozenset((ty, fn) for ty, fns in got.items() for fn in fns)


# Limit keys every backend reports in Capabilities.limits.
LIMIT_KEYS = (
    "max_workgroup_invocations",
    "max_workgroup_size_x",
    "max_workgroup_size_y",
    "max_workgroup_size_z",
    "max_workgroups_per_dimension",
    "max_workgroup_bytes",
    "max_buffer_bytes",
    "max_buffers_per_program",
)

# Flush mode's tininess rules (docs/IR.md, "Subnormals and flush mode"), the value of
# Capabilities.details["flush_tininess"] of a backend whose "flushes_subnormals" is not
# empty: a nonzero result is tiny, and flushes to a zero of its sign, when
TININESS_AFTER_ROUNDING = "after rounding"  # rounded to the type's precision with an
# unbounded exponent it is below the smallest normal (IEEE 754; NVIDIA's Vulkan driver)
TININESS_BEFORE_ROUNDING = "before rounding"  # its exact value is below the smallest normal
TININESS_SUBNORMAL_RESULT = "subnormal result"  # its IEEE result (rounded to the subnormal
# grid) is subnormal (a device that keeps subnormals, flushed by the generated code)
TININESS_RULES = (TININESS_AFTER_ROUNDING, TININESS_BEFORE_ROUNDING, TININESS_SUBNORMAL_RESULT)
