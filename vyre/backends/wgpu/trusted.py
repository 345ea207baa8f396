"""Shader modules without naga's bounds checks, for WGSL whose every array access the printer
proved in range.

naga (wgpu's shader translator) clamps every dynamic array index by default. vyre never
needs those clamps for its values: vyre.lower puts every IR access behind the IR's own
index test (docs/IR.md, "Declarations and binding": backends never rely on driver
robustness), and render.py's own accesses are in range by construction, except the eager
`select` of a guarded load, which reads out of range on purpose (render.WgslModule's
`unproven_access` says so). The clamps do cost: ~7% of the 4096^3 matmul on the H100, where
they guard the workgroup-array tile reads (docs/perf-notes.md). wgpu-native's
`wgpuDeviceCreateShaderModuleTrusted` compiles a module with only the runtime checks asked
for; this module asks for naga's forced loop bounding alone (it costs nothing measurable,
and a driver may assume a loop without it terminates).

This module must never decide which sources are safe (the printer does, per module, from
what it printed), never turn loop bounding off, and never make a module trusted where the
symbol or wgpu-native's device class is missing: then it creates the ordinary checked
module, which is a performance detail, never a change of results.
"""

from __future__ import annotations

import os
from typing import Any

#: "1": every module keeps naga's bounds checks (to rule the trusted modules out while
#: chasing a suspected lowering bug); unset or anything else: trusted where proven
ENV_BOUNDS_CHECKS = "VYRE_WGPU_BOUNDS_CHECKS"
_SYMBOL = "wgpuDeviceCreateShaderModuleTrusted"
_LOOP_BOUNDING = "WGPUShaderRuntimeChecks_ForceLoopBounding"


def _native() -> tuple[Any, Any] | None:
    """wgpu-py's wgpu-native `_api` module and cffi `lib`, or None where either lacks what
    a trusted module needs (another wgpu-py or wgpu-native)."""
    try:
        from wgpu.backends.wgpu_native import _api
        from wgpu.backends.wgpu_native._ffi import lib
    except ImportError:
        return None
    # (hasattr on a cffi lib is False when the library lacks the symbol, not only the header)
    needed = (hasattr(lib, _SYMBOL), hasattr(lib, _LOOP_BOUNDING),
              hasattr(_api, "GPUDevice"), hasattr(_api, "GPUShaderModule"),
              hasattr(_api, "new_struct_p"), hasattr(_api, "to_c_string_view"))
    return (_api, lib) if all(needed) else None


def unavailable_reason(device: Any) -> str | None:
    """Why modules for `device` keep naga's bounds checks whatever the printer proves (the
    switch, or wgpu-native without the call), or None: trusted where proven."""
    if os.environ.get(ENV_BOUNDS_CHECKS, "") == "1":
        return f"{ENV_BOUNDS_CHECKS}=1"
    native = _native()
    if native is None:
        return f"this wgpu-native has no {_SYMBOL}"
    if not isinstance(device, native[0].GPUDevice):
        return "the device is not a wgpu-native one"
    return None


def detail(reason: str | None) -> str:
    """capabilities().details["shader_bounds_checks"] for unavailable_reason's answer."""
    if reason is None:
        return "off where the printer proves every array access in range, else on"
    return f"on ({reason})"


def create_module(device: Any, label: str, code: str, trusted: bool) -> tuple[Any, bool]:
    """(shader module, whether naga's bounds checks are on in it) for WGSL `code`: without
    the checks (loop bounding kept) when `trusted` and this wgpu-native can, else the
    ordinary module. Errors are wgpu-py's, as from device.create_shader_module."""
    native = _native() if trusted else None
    if native is None or not isinstance(device, native[0].GPUDevice):
        # (also a stand-in device of a test or measurement script: its own call answers)
        return device.create_shader_module(label=label, code=code), True
    api, lib = native
    ffi = api.ffi
    # the WGSL chain exactly as wgpu-py's GPUDevice.create_shader_module builds it (the
    # structs keep what they point to alive: wgpu-py's new_struct_p)
    source = api.new_struct_p("WGPUShaderSourceWGSL *", code=api.to_c_string_view(code))
    source[0].chain.next = ffi.NULL
    source[0].chain.sType = lib.WGPUSType_ShaderSourceWGSL
    desc = api.new_struct_p(
        "WGPUShaderModuleDescriptor *",
        nextInChain=ffi.cast("WGPUChainedStruct *", source),
        label=api.to_c_string_view(label),
    )
    checks = getattr(lib, _LOOP_BOUNDING)
    # through wgpu-py's error-capturing wrapper: a naga error raises as it would there
    handle = getattr(api.libf, _SYMBOL)(device._internal, desc, checks)
    if handle == ffi.NULL:
        raise RuntimeError("Shader module creation failed")
    return api.GPUShaderModule(label, handle, device), False
