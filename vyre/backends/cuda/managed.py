"""Managed (unified) memory on the CUDA backend: the capability probe, the allocation, and
numpy views of it on the host.

Opt-in per buffer (`allocate_device_buffer(n, kind="managed")`): kernels see it as device
memory, the host reads it through `buffer.host_view()` after the backend's work is done.
An allocation is refused when it exceeds the device's free memory (managed memory can
oversubscribe, which then thrashes; vyre does not do that silently).

This module must never let the host touch managed memory while vyre's work on it may still
be running (host_view synchronises first), nor free memory a host view still shows.
"""

from __future__ import annotations

import ctypes
import weakref
from typing import Any

import numpy as np

from vyre import features as F
from vyre.backend import Capabilities
from vyre.buffer import BufferBase, check_usable
from vyre.errors import InvalidDispatch, OutOfDeviceMemory, UnsupportedFeature
from vyre.hostarrays import as_dtype

from . import driver as D
from . import interop
from .device import CudaBuffer, CudaInstance


def extend_caps(caps: Capabilities, drv: Any, dev: Any) -> Capabilities:
    """Add 'managed_memory' (and the facts behind it) when the device supports it."""
    try:
        managed = D.attribute(drv, dev, "CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY")
        concurrent = D.attribute(drv, dev, "CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS")
    except Exception:
        managed = concurrent = 0
    details = {**caps.details, "managed_memory": bool(managed),
               "concurrent_managed_access": bool(concurrent)}
    feats = caps.features | ({F.MANAGED_MEMORY} if managed else set())
    return caps.model_copy(update={"features": frozenset(feats), "details": details})


def allocate(backend: CudaInstance, byte_len: int, label: str | None) -> CudaBuffer:
    if F.MANAGED_MEMORY not in backend.capabilities().features:
        raise UnsupportedFeature(
            F.MANAGED_MEMORY, backend.id,
            "this device does not support managed memory; allocate with kind='device'",
        )
    ptr = 0
    if byte_len:
        free, total = backend.driver_call(backend.driver.cuMemGetInfo)
        if byte_len > int(free):
            raise OutOfDeviceMemory(
                backend.id, byte_len,
                f"managed memory is limited to what the device has free: {int(free)} of "
                f"{int(total)} bytes",
            )
        flag = int(backend.driver.CUmemAttach_flags.CU_MEM_ATTACH_GLOBAL)
        err, p = backend.driver.cuMemAllocManaged(byte_len, flag)
        if int(err) != 0:
            backend.driver_fail(f"cuMemAllocManaged({byte_len})", err, requested=byte_len)
        ptr = int(p)
    buf = CudaBuffer(backend, byte_len, label, ptr)
    buf.kind = "managed"
    return buf


def host_view(backend: CudaInstance, buffer: BufferBase, dtype: Any) -> np.ndarray:
    """A numpy view of a managed buffer, after vyre's enqueued work is done."""
    check_usable(buffer)
    if getattr(buffer, "kind", "device") != "managed":
        raise UnsupportedFeature(
            "host_view", backend.id,
            f"{buffer.describe()} is device memory, which the host cannot address; allocate "
            "it with kind='managed', or copy it with backend.read(buffer)",
        )
    dt = as_dtype(dtype)
    if buffer.byte_len % dt.itemsize:
        raise InvalidDispatch(f"{buffer.describe()} is not a whole number of {dt} elements")
    backend.synchronize()  # the host must not touch it while a kernel may write it
    n = buffer.byte_len
    ptr = int(getattr(buffer, "ptr", 0))
    if not n or not ptr:
        return np.zeros(0, dtype=dt)
    raw = (ctypes.c_uint8 * n).from_address(ptr)
    # the view keeps the buffer (and so its memory) alive; free() is deferred until it dies
    raw._vyre_buffer = buffer  # type: ignore[attr-defined]
    interop.pin(buffer)
    weakref.finalize(raw, interop.unpin, buffer)
    return np.frombuffer(raw, dtype=dt)  # type: ignore[call-overload]
