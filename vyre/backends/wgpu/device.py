"""The wgpu device part: one WebGPU device (vyre.parts.Device), its probed facts, its
capabilities, the mapping of wgpu's exceptions to vyre errors, and the status flags shaders
raise.

`gpu` and `queue` are wgpu-py's GPUDevice and GPUQueue (WgpuBackend publishes them as
`device` and `queue`); `info` is what the adapter probe measured (adapter.py); `waiter`
is how the host waits for the queue (queue_wait.py). Conditions only the device sees (the
driver's loop budget ran out, an indirect grid over the limit) are flagged by the shaders in
small status buffers (`Status`): a submission notes its steps' statuses as unchecked, and
they are read and raised as DispatchError before any result of that work can be observed.
Every wgpu exception that reaches a part becomes a vyre error through `error`; the first
that says the device is lost marks it lost, and the instance refuses work from then on.
This module must never generate shader code nor hold buffers of the user.
"""

from __future__ import annotations

import struct
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from vyre import features as F
from vyre import subgroups
from vyre.buffer import BufferBase, BufferOwner
from vyre.errors import (
    BackendError,
    BackendUnavailable,
    DispatchError,
    OutOfDeviceMemory,
)
from vyre.interface import Capabilities
from vyre.ir.types import NARROW_INTS, ScalarType
from vyre.parts import Device

from . import render as wgsl
from . import trusted
from .adapter import FEATURE_TYPES, SUBGROUP_PROBE_SHAPES, DeviceInfo, import_wgpu
from .queue_wait import SPIN_NS, QueueWait

GRID_FLAG = 2  # the indirect-grid pre-pass's flag in a Status buffer


def align_down(x: int) -> int:
    return x & ~3


def align_up(x: int) -> int:
    return (x + 3) & ~3


@dataclass
class Status:
    """A small device buffer a shader flags a condition in (wgsl.LOOP_LIMIT_FLAG, the
    indirect-grid check's flag), checked before any result of its dispatch can be seen."""

    buffer: Any  # 16 bytes: [flags, largest indirect count, 0, 0]
    program: str  # the user's program name, for the error


class WgpuBuffer(BufferBase):
    """A wgpu storage buffer (size rounded up to 4 bytes, at least 8: one element of any
    type, so even an empty buffer binds as array<i64>) owned by one backend."""

    FIXED_FIELDS = BufferBase.FIXED_FIELDS | {"gpu", "alloc_size"}

    def __init__(self, owner: BufferOwner, byte_len: int, label: str | None, gpu: Any,
                 dropped: list[tuple[int, Any]]) -> None:
        super().__init__(owner, byte_len, label)
        self.gpu = gpu
        self.alloc_size = int(gpu.size)
        # dropped without free(): its device buffer is handed to the allocator (`dropped`),
        # which destroys it under the lock (never from a finalizer, which may run on any
        # thread mid-submit)
        self.on_drop = weakref.finalize(self, dropped.append, (self.serial, gpu))


class WgpuDevice(Device):
    """One WebGPU device (see the module docstring)."""

    caps: Capabilities  # (probed in __init__)

    def __init__(self, instance_id: str, info: DeviceInfo) -> None:
        super().__init__(instance_id)
        self.wgpu = import_wgpu()
        self.info = info
        self.gpu = info.device
        self.queue = info.device.queue
        # a CPU adapter runs its work on the host's cores: asking again only slows it
        self.waiter = QueueWait(info.device, info.details.get("adapter_type") != "CPU")
        self.usage = self.wgpu.BufferUsage
        lim = info.limits
        self.max_binding = int(lim.get("max-storage-buffer-binding-size", 1 << 27))
        self.max_buffer = align_down(int(lim.get("max-buffer-size", 1 << 28)))
        self.timestamps = "timestamp-query" in info.wgpu_features
        # status buffers of submitted work not yet checked (see WgpuAllocator.check_status)
        self.unchecked: dict[int, Status] = {}
        self.lost: str | None = None  # wgpu's message once an operation saw the loss
        # why every module keeps naga's bounds checks, or None: off where proven (trusted.py)
        self.checks_reason = trusted.unavailable_reason(self.gpu)
        self.caps = self._capabilities()
        self.allowed_types = frozenset(
            {ScalarType.BOOL, ScalarType.I32, ScalarType.U32, ScalarType.F32}
            | set(NARROW_INTS)  # (packed into u32 words: packed.py)
            | {t for f, t in FEATURE_TYPES.items() if f in self.info.vyre_features}
            | ({ScalarType.U64} if F.I64 in self.caps.features else set())
        )


    def check(self) -> None:
        if self.lost is not None:
            raise BackendUnavailable(
                self.id,
                f"its WebGPU device was lost ({self.lost}); every buffer of this "
                "instance is gone with it. close() this instance and create a new one with "
                "vyre.get_backend('wgpu'), then upload the data again",
            )

    def _capabilities(self) -> Capabilities:
        lim = self.info.limits
        # 'f64' where the adapter has shader-f64: the arithmetic is exact (fenced like f32;
        # division and sqrt exact where the driver's are not); WGSL has no f64
        # exp/log/sin/..., so a Program calling one raises UnsupportedFeature naming it
        # (render._call) until vyre.lower writes that function in exact operations.
        feats = set(self.info.vyre_features)
        feats |= {F.RESIDENT, F.ASYNC, F.PIPELINE, F.INDIRECT_DISPATCH}
        if self.timestamps:
            feats.add(F.DEVICE_TIMERS)
        limits = {
            "max_workgroup_invocations": lim["max-compute-invocations-per-workgroup"],
            "max_workgroup_size_x": lim["max-compute-workgroup-size-x"],
            "max_workgroup_size_y": lim["max-compute-workgroup-size-y"],
            "max_workgroup_size_z": lim["max-compute-workgroup-size-z"],
            "max_workgroups_per_dimension": lim["max-compute-workgroups-per-dimension"],
            "max_workgroup_bytes": lim["max-compute-workgroup-storage-size"],
            "max_buffer_bytes": self.max_buffer,
            # (one binding less where the loop-limit status buffer may be bound)
            "max_buffers_per_program": min(
                lim.get("max-storage-buffers-per-shader-stage", 8),
                lim.get("max-bindings-per-bind-group", 1000) - 1,
            ) - (self.info.loop_limit is not None),
            "max_allocation_bytes": self.max_buffer,
            "max_storage_binding_bytes": self.max_binding,
        }
        d = self.info.details
        return Capabilities(
            backend=self.id,
            kind="wgpu",
            device=self.info.name,
            features=frozenset(feats),
            limits=limits,
            details={
                "adapter": self.info.name,
                "backend_type": d.get("backend_type", ""),
                "adapter_type": d.get("adapter_type", ""),
                "vendor": d.get("vendor", ""),
                "description": d.get("description", ""),
                "wgpu_features": sorted(self.info.wgpu_features),
                # how the host waits for the device (queue_wait.py)
                "host_wait": (f"asks without blocking for up to {SPIN_NS // 1000} us, then "
                              "blocks" if self.waiter.spins else
                              "blocks (a CPU adapter: asking again would take its cores)"),
                "fma_rounds_once": self.info.fma_fused,
                # the driver's f32 / and sqrt are correctly rounded (probed); where not,
                # vyre emits its exact integer division / sqrt (docs/IR.md)
                "div_correctly_rounded": self.info.div_correct,
                "sqrt_correctly_rounded": self.info.sqrt_correct,
                "f32_div_sqrt": (
                    f"div {'exact (vyre)' if self.info.exact_div else 'driver'}, "
                    f"sqrt {'exact (vyre)' if self.info.exact_sqrt else 'driver'}"
                ),
                # loops silently end after this many iterations per invocation (probed);
                # vyre detects it and raises DispatchError
                "loop_iteration_limit": self.info.loop_limit,
                # naga's clamps on array indexes (trusted.py); loop bounding always on
                "shader_bounds_checks": trusted.detail(self.checks_reason),
                # subgroup operations (docs/IR.md, "Subgroups"): the probed size, or None
                "subgroup_size": self.info.subgroup_size,
                "subgroups": self.info.subgroup_note,
                # the workgroup shapes the probe measured the lane mapping in: never refused
                # for their shape (any other is measured before it first runs)
                subgroups.SHAPES_DETAIL: (
                    SUBGROUP_PROBE_SHAPES if self.info.subgroup_size is not None else ()),
                # docs/IR.md flush mode: f32 arithmetic flushes subnormals to signed zero
                "flushes_subnormals": ["f32"] if self.info.flush_subnormals else [],
                "flush_tininess": self.info.flush_tininess,
                # flush mode's f32 operations left to the device's own flushing arithmetic
                # (probed to give the mode's bits: native_flush.py); the rest spelled by vyre
                "native_flush_ops": ["add", "sub", "mul", "fma"] if self.info.native_flush else [],
                # calls a Program may not make although their type is supported
                F.REFUSED_CALLS: ({"f64": sorted(wgsl.NO_F64)}
                                  if F.F64 in self.info.vyre_features else {}),
                # f64 Programs run where the adapter has shader-f64; its transcendental
                # functions are refused by name (WGSL has none for f64)
                "f64_arithmetic": (
                    "yes: exact + - * / sqrt fma, casts and comparisons; "
                    f"{', '.join(wgsl.F64_DEFINED)} by their exact definitions; f64 "
                    f"{', '.join(sorted(wgsl.NO_F64))} raise UnsupportedFeature (WGSL has no f64 "
                    "transcendental functions)"
                    if F.F64 in self.info.vyre_features
                    else "no: the adapter has no shader-f64"
                ),
            },
        )

    def error(self, what: str, exc: Exception, nbytes: int = 0) -> BackendError:
        if isinstance(exc, BackendError):
            return exc
        msg = str(exc).strip()
        if isinstance(exc, (self.wgpu.GPUOutOfMemoryError, MemoryError)) or any(
            s in msg.lower()
            for s in ("out of memory", "outofmemory", "out_of_memory", "not enough memory")
        ):
            said = msg.splitlines()[-1] if msg else repr(exc)
            # with no size of its own, the allocation that failed was the driver's (command
            # buffers, bind groups, staging memory): say so, never "allocating 0 bytes"
            detail = (f"{what}: {said}" if nbytes else
                      f"{what}: the driver could not allocate its own memory for it: {said}")
            return OutOfDeviceMemory(self.id, nbytes, detail)
        if "device is lost" in msg.lower() or "device lost" in msg.lower():
            # wgpu-py only logs the loss itself; the first operation that meets it is where
            # vyre learns of it. From then on the instance refuses work instead of letting
            # each call fail deep inside wgpu-native with a validation error.
            if self.lost is None:
                self.lost = msg.splitlines()[-1].strip()
                self.lose(self.lost)
            return DispatchError(
                f"{self.id}: {what} failed: the WebGPU device was lost ({self.lost}).\n"
                "(close this backend and create a new one with vyre.get_backend('wgpu'); "
                "its buffers are gone with the device)"
            )
        return DispatchError(
            f"{self.id}: {what} failed: {msg}\n(the backend is still usable for new work)")

    def queue_empty(self) -> bool:
        try:
            return self.waiter.empty()
        except Exception:
            return False

    def status_buffer(self) -> Any:
        u = self.usage
        return self.gpu.create_buffer_with_data(
            label="vyre-status", data=bytes(16), usage=u.STORAGE | u.COPY_SRC | u.COPY_DST
        )

    def submitted(self, steps: list[Any]) -> None:
        for step in steps:
            for st in step.status:
                self.unchecked[id(st)] = st

    def take_unchecked(self) -> list[Status]:
        pending = list(self.unchecked.values())
        self.unchecked.clear()
        return pending

    def raise_flagged(self, status: list[Status], words: Sequence[np.ndarray]) -> None:
        errors = []
        for st, raw in zip(status, words):
            flags, count = struct.unpack_from("<II", raw.tobytes())
            if flags:
                self.queue.write_buffer(st.buffer, 0, bytes(16))
                errors.append(self._status_message(st, flags, count))
        if errors:
            raise DispatchError("\n".join(errors))

    def _status_message(self, st: Status, flags: int, count: int) -> str:
        msgs = []
        if flags & wgsl.LOOP_LIMIT_FLAG:
            limit = self.info.loop_limit
            msgs.append(
                f"{self.id}: program {st.program!r} ran out of this adapter's loop budget: "
                f"{self.info.name} silently ends every loop once {limit} loop iterations "
                "have run in one SIMD group of invocations (neighbours along x; counted over "
                "all loops of the program and every invocation of the group), and it ended "
                "a loop an invocation was still in, so the results are truncated and were "
                "not used. Split the work so that each invocation runs fewer than "
                f"{limit} iterations in all: more invocations (a larger grid), or several "
                "dispatches (pipeline steps) each doing a part of the loop; or use an "
                "adapter without the limit "
                "(capabilities().details['loop_iteration_limit'] is None)."
            )
        if flags & GRID_FLAG:
            limit = self.caps.limits["max_workgroups_per_dimension"]
            msgs.append(
                f"{self.id}: program {st.program!r} was dispatched with an indirect grid of "
                f"{count} workgroups in one dimension, over this adapter's limit of {limit} "
                "(limits['max_workgroups_per_dimension']); WebGPU runs nothing for such a "
                "dispatch, so its results were not used. Keep every count in the grid buffer "
                f"at most {limit}: use more dimensions (y, z) or a larger workgroup size."
            )
        return "\n".join(msgs)

    def wait(self) -> None:
        """Block until the queue's submitted work has finished (Ctrl-C may end the wait)."""
        self.waiter.drain()

    def close(self) -> None:
        self.gpu.destroy()
