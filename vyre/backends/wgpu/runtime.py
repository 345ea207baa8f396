"""The wgpu backend: resident buffers, compiled pipelines, dispatches and recorded pipelines
on one WebGPU device through wgpu-py.

Resident work never touches the host: dispatches bind the caller's device buffers
directly. Every method that calls into wgpu-native runs with Ctrl-C deferred to its end
(vyre.interrupts): an interrupt between mapping and unmapping a buffer, or half-way through
building a pipeline, would leave wgpu-native in a state that aborts the process. Every wgpu exception is caught at this module's boundary and turned into a vyre
error (CompileError, DispatchError, OutOfDeviceMemory) so the instance keeps working for new
work. Conditions only the device sees (the driver's loop budget ran out, an indirect grid
over the limit) are flagged by the shaders in small status buffers and raised as
DispatchError before any result of that work can be observed (wait, read, synchronize, a
pipeline's reads). This module must never generate shader code (render.py does) and must never fall back
to host copies behind the resident API.
"""

from __future__ import annotations

import contextlib
import os
import struct
import time
import weakref
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from vyre import features as F
from vyre import subgroups
from vyre.backend import BaseBackend, Capabilities, HostBytes, Pending, host_array
from vyre.binding import BoundDispatch
from vyre.buffer import BufferBase
from vyre.config import IndirectGrid, Timing
from vyre.debug.instrument import debug_program
from vyre.errors import (
    BackendError,
    BackendUnavailable,
    CompileError,
    DispatchError,
    InvalidDispatch,
    OutOfDeviceMemory,
    UnsupportedFeature,
)
from vyre.interface import Backend
from vyre.interrupts import deferred_interrupts, interrupt_safe
from vyre.ir.analysis import uses_subgroups
from vyre.ir.nodes import Program
from vyre.ir.types import NARROW_INTS, ScalarType
from vyre.pipeline import Pipeline, PipelineResult, ReadRange

from . import render as wgsl
from . import trusted
from .adapter import (
    FEATURE_TYPES,
    SUBGROUP_PROBE_SHAPES,
    DeviceInfo,
    captured_wgpu_log,
    import_wgpu,
    subgroup_lanes,
)
from .options import DEFAULT_OPTIONS, WgpuOptions
from .queue_wait import SPIN_NS, QueueWait

_GRID_FLAG = 2  # the indirect-grid pre-pass's flag in a _Status buffer
BIND_GROUP_POOL = 256  # shared bind groups kept (least recently used dropped first)


class WgpuBuffer(BufferBase):
    """A wgpu storage buffer (size rounded up to 4 bytes, at least 8: one element of any
    type, so even an empty buffer binds as array<i64>) owned by one backend."""

    FIXED_FIELDS = BufferBase.FIXED_FIELDS | {"gpu", "alloc_size"}

    def __init__(self, owner: WgpuBackend, byte_len: int, label: str | None, gpu: Any) -> None:
        super().__init__(owner, byte_len, label)
        self.gpu = gpu
        self.alloc_size = int(gpu.size)
        # dropped without free(): its device buffer is handed to the owner, which destroys
        # it under its lock (never from a finalizer, which may run on any thread mid-submit)
        self.on_drop = weakref.finalize(self, owner._dropped.append, (self.serial, gpu))


@dataclass
class _Status:
    """A small device buffer a shader flags a condition in (wgsl.LOOP_LIMIT_FLAG, the
    indirect-grid check's flag), checked before any result of its dispatch can be seen."""

    buffer: Any  # 16 bytes: [flags, largest indirect count, 0, 0]
    program: str  # the user's program name, for the error


@dataclass
class Compiled:
    """A compiled program: WGSL, shader module, layouts and compute pipeline."""

    module: wgsl.WgslModule
    shader: Any
    bind_group_layout: Any
    pipeline: Any
    status: _Status | None = None  # the cut-loop flag (adapters with a loop limit: loopcount.py)
    # naga's bounds checks are on in `shader` (off only where the printer proved every
    # access in range and wgpu-native can: trusted.py)
    bounds_checks: bool = True

    @property
    def source(self) -> str:
        return self.module.source


@dataclass
class _Binding:
    """A bind group with its own uniform buffer (and the bytes last written to it)."""

    bind_group: Any
    uniform: Any
    data: bytes


@dataclass
class _Recorded:
    """One dispatch ready to encode: a pipeline step, or a launch record (the launch cache
    keeps these: they hold wgpu objects, never the vyre buffers)."""

    name: str  # the program's, for errors
    pipeline: Any
    bind_group: Any
    binding: _Binding  # whose uniform buffer must hold `data` when this is submitted
    data: bytes  # the packed uniforms (element counts, params)
    direct: tuple[int, int, int] | None  # the workgroup counts when the grid is not indirect
    indirect: tuple[Any, int] | None  # (gpu buffer, offset) of an indirect grid
    grid_copy: Any  # a private 12-byte indirect buffer when the grid buffer is also bound
    grid_check: tuple[Any, Any] | None = None  # indirect grids: (pipeline, bind group) of
    # the pre-pass that flags counts over the per-dimension limit in `status`
    status: tuple[_Status, ...] = ()  # checked before results of this step can be seen


#: runs of consecutive plain dispatches sharing a pipeline and bind group: (pipeline, bind
#: group, the workgroup counts of each dispatch)
_Runs = list[tuple[Any, Any, tuple[tuple[int, int, int], ...]]]


def _plain_runs(steps: list[_Recorded]) -> _Runs | None:
    """A recorded pipeline's steps as runs, made once when it is recorded, so each run()
    encodes with a loop as tight as a hand-written one; None when some step needs more
    than a plain dispatch (an indirect grid, its check)."""
    runs: _Runs = []
    for s in steps:
        if s.direct is None or s.grid_check is not None or s.grid_copy is not None:
            return None
        if runs and runs[-1][0] is s.pipeline and runs[-1][1] is s.bind_group:
            runs[-1] = (s.pipeline, s.bind_group, (*runs[-1][2], s.direct))
        else:
            runs.append((s.pipeline, s.bind_group, (s.direct,)))
    return runs


def _one_dispatch(enc: Any, rec: _Recorded, grid: tuple[int, int, int]) -> None:
    """One compute pass holding `rec`'s plain dispatch of `grid` workgroups."""
    cp = enc.begin_compute_pass()
    cp.set_pipeline(rec.pipeline)
    cp.set_bind_group(0, rec.bind_group)
    cp.dispatch_workgroups(*grid)
    cp.end()


@dataclass
class _PipelineState:
    """What a recorded Pipeline holds on this backend."""

    steps: list[_Recorded]
    runs: _Runs | None  # _plain_runs(steps)
    checked: list[_Recorded]  # the steps with status flags to check after a run


_LAYOUT_CACHE_MAX = 256  # distinct binding shapes remembered (a handful in practice)


def _align_down(x: int) -> int:
    return x & ~3


def _align_up(x: int) -> int:
    return (x + 3) & ~3


def _dump_source(dump: str, program: Program, source: str) -> None:
    """Write `source` where $VYRE_WGPU_DUMP says: into that file, or, when it names a
    directory, into <program name>-<content hash>.wgsl there (one file per program)."""
    path = dump
    try:
        if os.path.isdir(dump):
            safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in program.name)
            path = os.path.join(dump, f"{safe[:64]}-{program.content_hash[:12]}.wgsl")
        with open(path, "w") as f:
            f.write(source)
    except OSError as exc:
        raise BackendUnavailable(
            "wgpu", f"$VYRE_WGPU_DUMP={dump!r}: cannot write the WGSL of program "
            f"{program.name!r} to {path!r} ({exc.strerror or exc}); set it to a writable file "
            "or directory, or unset it") from None


class WgpuBackend(BaseBackend):
    """vyre on one WebGPU device (see the module docstring)."""

    kind = "wgpu"

    def __init__(self, instance_id: str, info: DeviceInfo,
                 options: WgpuOptions = DEFAULT_OPTIONS) -> None:
        super().__init__(instance_id)
        self._wgpu = import_wgpu()
        self._info = info
        # debug / measurement switches (options.py), apart from the probed `info`: fixed for
        # this instance, passed to every generate and (BaseBackend.options) in every cache key
        self.options: WgpuOptions = options
        self.device = info.device
        self.queue = info.device.queue
        # a CPU adapter runs its work on the host's cores: asking again only slows it
        self._queue = QueueWait(info.device, info.details.get("adapter_type") != "CPU")
        self._usage = self._wgpu.BufferUsage
        lim = info.limits
        self._max_binding = int(lim.get("max-storage-buffer-binding-size", 1 << 27))
        self._max_buffer = _align_down(int(lim.get("max-buffer-size", 1 << 28)))
        self._timestamps = "timestamp-query" in info.wgpu_features
        # Bind groups shared by launches over the same buffers: a launch with other params
        # rewrites only the small uniform buffer (queue-ordered, so work submitted earlier
        # keeps its values) instead of creating a uniform buffer and a bind group, which
        # costs about as much as the launch itself on lavapipe. A pool of device objects,
        # not a launch cache (vyre.binding.LaunchCache is that): dropped with its buffers.
        self._bind_groups: OrderedDict[tuple[Any, ...], _Binding] = OrderedDict()
        # (serial, device buffer) of buffers dropped without free(), appended by their
        # finalizers and destroyed under the lock by the next allocate, free or synchronize
        self._dropped: list[tuple[int, Any]] = []
        self._staging: Any = None
        # timestamp query sets with their resolve and map buffers, reused: creating them per
        # profiled dispatch cost ~34 ms of host time each on the H100 once a 64 MB buffer
        # had been read back, and the GPU's clocks dropped while it idled between runs
        self._timestamp_pool: list[_TimestampSet] = []
        # status buffers of submitted work not yet checked (see _check_status)
        self._unchecked: dict[int, _Status] = {}
        self._grid_checks: dict[int, Any] = {}  # word offset -> pre-pass pipeline
        # (storage access per binding, status binding) -> (bind group layout, pipeline layout)
        self._layout_cache: dict[tuple[Any, ...], tuple[Any, Any]] = {}
        # workgroup shapes where docs/IR.md's subgroup lane mapping was measured to hold
        self._subgroup_shapes: dict[tuple[int, int, int], bool] = dict.fromkeys(
            SUBGROUP_PROBE_SHAPES, True)
        self._device_lost: str | None = None  # wgpu's message once an operation saw the loss
        # why every module keeps naga's bounds checks, or None: off where proven (trusted.py)
        self._checks_reason = trusted.unavailable_reason(self.device)
        self._caps = self._make_capabilities()
        self._allowed_types = frozenset(
            {ScalarType.BOOL, ScalarType.I32, ScalarType.U32, ScalarType.F32}
            | set(NARROW_INTS)  # (packed into u32 words: packed.py)
            | {t for f, t in FEATURE_TYPES.items() if f in self._info.vyre_features}
            | ({ScalarType.U64} if F.I64 in self._caps.features else set())
        )

    # ------------------------------------------------------------ capabilities
    def _make_capabilities(self) -> Capabilities:
        lim = self._info.limits
        # 'f64' where the adapter has shader-f64: the arithmetic is exact (fenced like f32;
        # division and sqrt exact where the driver's are not); WGSL has no f64
        # exp/log/sin/..., so a Program calling one raises UnsupportedFeature naming it
        # (render._call) until vyre.lower writes that function in exact operations.
        feats = set(self._info.vyre_features)
        feats |= {F.RESIDENT, F.ASYNC, F.PIPELINE, F.INDIRECT_DISPATCH}
        if self._timestamps:
            feats.add(F.DEVICE_TIMERS)
        limits = {
            "max_workgroup_invocations": lim["max-compute-invocations-per-workgroup"],
            "max_workgroup_size_x": lim["max-compute-workgroup-size-x"],
            "max_workgroup_size_y": lim["max-compute-workgroup-size-y"],
            "max_workgroup_size_z": lim["max-compute-workgroup-size-z"],
            "max_workgroups_per_dimension": lim["max-compute-workgroups-per-dimension"],
            "max_workgroup_bytes": lim["max-compute-workgroup-storage-size"],
            "max_buffer_bytes": self._max_buffer,
            # (one binding less where the loop-limit status buffer may be bound)
            "max_buffers_per_program": min(
                lim.get("max-storage-buffers-per-shader-stage", 8),
                lim.get("max-bindings-per-bind-group", 1000) - 1,
            ) - (self._info.loop_limit is not None),
            "max_allocation_bytes": self._max_buffer,
            "max_storage_binding_bytes": self._max_binding,
        }
        d = self._info.details
        return Capabilities(
            backend=self.id,
            kind=self.kind,
            device=self._info.name,
            features=frozenset(feats),
            limits=limits,
            details={
                "adapter": self._info.name,
                "backend_type": d.get("backend_type", ""),
                "adapter_type": d.get("adapter_type", ""),
                "vendor": d.get("vendor", ""),
                "description": d.get("description", ""),
                "wgpu_features": sorted(self._info.wgpu_features),
                # how the host waits for the device (queue_wait.py)
                "host_wait": (f"asks without blocking for up to {SPIN_NS // 1000} us, then "
                              "blocks" if self._queue.spins else
                              "blocks (a CPU adapter: asking again would take its cores)"),
                "fma_rounds_once": self._info.fma_fused,
                # the driver's f32 / and sqrt are correctly rounded (probed); where not,
                # vyre emits its exact integer division / sqrt (docs/IR.md)
                "div_correctly_rounded": self._info.div_correct,
                "sqrt_correctly_rounded": self._info.sqrt_correct,
                "f32_div_sqrt": (
                    f"div {'exact (vyre)' if self._info.exact_div else 'driver'}, "
                    f"sqrt {'exact (vyre)' if self._info.exact_sqrt else 'driver'}"
                ),
                # loops silently end after this many iterations per invocation (probed);
                # vyre detects it and raises DispatchError
                "loop_iteration_limit": self._info.loop_limit,
                # naga's clamps on array indexes (trusted.py); loop bounding always on
                "shader_bounds_checks": trusted.detail(self._checks_reason),
                # subgroup operations (docs/IR.md, "Subgroups"): the probed size, or None
                "subgroup_size": self._info.subgroup_size,
                "subgroups": self._info.subgroup_note,
                # the workgroup shapes the probe measured the lane mapping in: never refused
                # for their shape (any other is measured before it first runs)
                subgroups.SHAPES_DETAIL: (
                    SUBGROUP_PROBE_SHAPES if self._info.subgroup_size is not None else ()),
                # docs/IR.md flush mode: f32 arithmetic flushes subnormals to signed zero
                "flushes_subnormals": ["f32"] if self._info.flush_subnormals else [],
                "flush_tininess": self._info.flush_tininess,
                # flush mode's f32 operations left to the device's own flushing arithmetic
                # (probed to give the mode's bits: native_flush.py); the rest spelled by vyre
                "native_flush_ops": ["add", "sub", "mul", "fma"] if self._info.native_flush else [],
                # calls a Program may not make although their type is supported
                F.REFUSED_CALLS: ({"f64": sorted(wgsl.NO_F64)}
                                  if F.F64 in self._info.vyre_features else {}),
                # f64 Programs run where the adapter has shader-f64; its transcendental
                # functions are refused by name (WGSL has none for f64)
                "f64_arithmetic": (
                    "yes: exact + - * / sqrt fma, casts and comparisons; f64 "
                    f"{', '.join(sorted(wgsl.NO_F64))} raise UnsupportedFeature (WGSL has no f64 "
                    "transcendental functions)"
                    if F.F64 in self._info.vyre_features
                    else "no: the adapter has no shader-f64"
                ),
            },
        )

    def capabilities(self) -> Capabilities:
        return self._caps

    # ------------------------------------------------------------ errors
    def _check_open(self) -> None:
        super()._check_open()
        if self._device_lost is not None:
            raise BackendUnavailable(
                self.id,
                f"its WebGPU device was lost ({self._device_lost}); every buffer of this "
                "instance is gone with it. close() this instance and create a new one with "
                "vyre.get_backend('wgpu'), then upload the data again",
            )

    def _gpu_error(self, what: str, exc: Exception, nbytes: int = 0) -> BackendError:
        if isinstance(exc, BackendError):
            return exc
        msg = str(exc).strip()
        if isinstance(exc, (self._wgpu.GPUOutOfMemoryError, MemoryError)) or any(
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
            if self._device_lost is None:
                self._device_lost = msg.splitlines()[-1].strip()
                self._context_lost(self._device_lost)
            return DispatchError(
                f"{self.id}: {what} failed: the WebGPU device was lost ({self._device_lost}).\n"
                "(close this backend and create a new one with vyre.get_backend('wgpu'); "
                "its buffers are gone with the device)"
            )
        return DispatchError(
            f"{self.id}: {what} failed: {msg}\n(the backend is still usable for new work)")

    # ------------------------------------------------------------ memory
    @interrupt_safe
    def _allocate(self, byte_len: int, label: str | None) -> WgpuBuffer:
        if self._dropped:
            self._destroy_dropped()
        size = max(8, _align_up(byte_len))
        u = self._usage
        try:
            gpu = self.device.create_buffer(
                label=label or "",
                size=size,
                usage=u.STORAGE | u.COPY_SRC | u.COPY_DST | u.INDIRECT,
            )
        except Exception as exc:
            raise self._gpu_error(f"allocating {size} bytes", exc, size) from None
        return WgpuBuffer(self, byte_len, label, gpu)

    @interrupt_safe
    def _free(self, buffer: BufferBase) -> None:
        assert isinstance(buffer, WgpuBuffer)
        buffer.on_drop.detach()
        self._forget_bindings(buffer.serial)
        if self._dropped:
            self._destroy_dropped()
        if self._device_lost is not None:
            return  # the memory went with the device; destroying it again can only fail
        try:
            buffer.gpu.destroy()
        except Exception as exc:
            raise self._gpu_error("freeing a buffer", exc) from None

    def _forget_bindings(self, serial: int) -> None:
        for key in [k for k in self._bind_groups if serial in k[1]]:
            del self._bind_groups[key]

    def _destroy_dropped(self) -> None:
        """Destroy the device buffers of buffers dropped without free() (caller holds the
        lock). Nothing can submit them again: the buffer objects are gone, their launch
        cache entries went with them, and their shared bind groups go here; work already
        submitted keeps them until it finishes (wgpu defers the release)."""
        while self._dropped:
            serial, gpu = self._dropped.pop()
            self._forget_bindings(serial)
            if self._device_lost is None:
                with contextlib.suppress(Exception):  # (a finalizer's leftovers: best effort)
                    gpu.destroy()

    @interrupt_safe
    def _write(self, buffer: BufferBase, data: memoryview, offset: int) -> None:
        assert isinstance(buffer, WgpuBuffer)
        n = data.nbytes
        end = offset + n
        a0, a1 = _align_down(offset), _align_up(end)
        try:
            if a0 == offset and a1 == end:
                self.queue.write_buffer(buffer.gpu, offset, data)
                return
            # queue.write_buffer needs 4-byte aligned offset and size: read the edge words
            # (ordered after earlier work), patch them, write the whole aligned span.
            span = bytearray(a1 - a0)
            edges = [a0] if offset != a0 else []
            if end != a1 and (a1 - 4) not in edges:
                edges.append(a1 - 4)
            words = self._read_raw([(buffer, e, 4) for e in edges])
            for e, w in zip(edges, words):
                span[e - a0 : e - a0 + 4] = w.tobytes()
            span[offset - a0 : offset - a0 + n] = data
            self.queue.write_buffer(buffer.gpu, a0, span)
        except BackendError:
            raise
        except Exception as exc:
            raise self._gpu_error(f"writing {n} bytes to {buffer.describe()}", exc, n) from None

    def _read(self, buffer: BufferBase, offset: int, length: int) -> HostBytes:
        return self._read_batch([(buffer, offset, length)])[0]

    @interrupt_safe
    def _read_batch(self, ranges: list[tuple[BufferBase, int, int]],
                    into: list[np.ndarray] | None = None) -> list[HostBytes]:
        """The bytes of `ranges` (see _read_raw), after the status of any unchecked
        dispatch: a loop cut short or a fault it flagged raises here."""
        try:
            if self._unchecked:  # the status words come back with the data: one map
                status = self._take_unchecked()
                raw = self._read_raw(ranges, status, into)
                self._raise_flagged(status, raw[: len(status)])
                return list(raw[len(status) :])
            return list(self._read_raw(ranges, None, into))
        except BackendError:
            raise
        except Exception as exc:
            raise self._gpu_error("reading buffers back", exc) from None

    def _read_batch_into(self, ranges: list[tuple[BufferBase, int, int]],
                         outs: list[np.ndarray]) -> None:
        self._read_batch(ranges, outs)

    def _staging_buffer(self, size: int) -> Any:
        size = max(size, 256)
        if self._staging is None or self._staging.size < size:
            if self._staging is not None:
                self._staging.destroy()
            cap = 1 << (size - 1).bit_length()
            u = self._usage
            self._staging = self.device.create_buffer(
                label="vyre-staging", size=cap, usage=u.MAP_READ | u.COPY_DST
            )
        return self._staging

    def _plan_reads(
        self, ranges: list[tuple[BufferBase, int, int]], start: int = 0
    ) -> tuple[list[tuple[Any, int, int, int]], list[tuple[int, int]], int]:
        """The copies into the staging buffer from byte `start` on: (gpu buffer, aligned
        src offset, aligned size, staging offset) per range; where each range's own bytes
        then lie in the staging buffer, (offset, length); the total size."""
        plan, pieces = [], []
        off = start
        for buf, o, n in ranges:
            assert isinstance(buf, WgpuBuffer)
            a0, a1 = _align_down(o), _align_up(o + n)
            plan.append((buf.gpu, a0, a1 - a0, off))
            pieces.append((off + (o - a0), n))
            off += a1 - a0
        return plan, pieces, off

    def _read_raw(
        self, ranges: list[tuple[BufferBase, int, int]], status: list[_Status] | None = None,
        into: list[np.ndarray] | None = None,
    ) -> list[np.ndarray]:
        """The bytes of `ranges`, in one submission and one map, each copied once out of
        the mapping into a new uint8 array (or into the uint8 array of `into` beside it);
        with `status`, the 16 bytes of each of those status buffers come first."""
        status = status or []
        outs: list[np.ndarray | None] = [None] * len(ranges) if into is None else list(into)
        ranges_nz = [(b, o, n) for b, o, n in ranges if n]
        if not ranges_nz and not status:
            return [_NO_BYTES.copy() if d is None else d for d in outs]
        plan, pieces, total = self._plan_reads(ranges_nz, 16 * len(status))
        staging = self._staging_buffer(total)
        enc = self.device.create_command_encoder()
        for i, st in enumerate(status):
            enc.copy_buffer_to_buffer(st.buffer, 0, staging, 16 * i, 16)
        for gpu, a0, size, soff in plan:
            enc.copy_buffer_to_buffer(gpu, a0, staging, soff, size)
        self.queue.submit([enc.finish()])
        dests = [None] * len(status) + [d for d, (_b, _o, n) in zip(outs, ranges) if n]
        got = iter(self._map_staging(
            staging, total, [(16 * i, 16) for i in range(len(status))] + pieces, dests))
        out = [next(got) for _ in status]
        out += [next(got) if n else (_NO_BYTES.copy() if d is None else d)
                for d, (_b, _o, n) in zip(outs, ranges)]
        return out

    def _map_staging(self, staging: Any, total: int, pieces: list[tuple[int, int]],
                     into: Sequence[np.ndarray | None] | None = None) -> list[np.ndarray]:
        return self._queue.read_mapped(staging, max(4, _align_up(total)), pieces, into)

    # ------------------------------------------------------------ compile
    def _specialisation(self, bound: BoundDispatch) -> Any:
        """Read slots aliased with a writable slot must be declared read_write (wgpu rejects
        one buffer bound as both read-only and writable storage in a dispatch)."""
        if not bound.aliased:
            return None
        decls = bound.program.buffers
        groups: dict[int, list[int]] = {}
        for i in bound.aliased:
            groups.setdefault(id(bound.buffers[i]), []).append(i)
        rw: set[int] = set()
        for slots in groups.values():
            if any(decls[i].writable for i in slots):
                rw.update(i for i in slots if not decls[i].writable)
        return frozenset(rw) or None

    def generate(self, program: Program, key: Any = None) -> wgsl.WgslModule:
        """The WGSL module for `program` (`key`: a specialisation from _specialisation)."""
        info = self._info
        subgroups.check_fits(program, info.subgroup_size, self.id)
        self._check_subgroup_shape(program)
        return wgsl.generate(
            program, key or frozenset(), self._allowed_types, info.fma_fused,
            info.flush_subnormals, native_flush=info.native_flush,
            exact_div=info.exact_div, exact_sqrt=info.exact_sqrt,
            loop_limited=info.loop_limit is not None, options=self.options,
        )

    def _check_subgroup_shape(self, program: Program) -> None:
        """UnsupportedFeature unless docs/IR.md's subgroup lane mapping holds in
        `program`'s workgroup shape on this adapter: measured once per shape, by running
        the probe's shuffles in a workgroup of that shape (adapter.subgroup_lanes)."""
        size = self._info.subgroup_size
        if size is None or not uses_subgroups(program):
            return
        shape = program.workgroup_size
        ok = self._subgroup_shapes.get(shape)
        if ok is None:
            with self._lock:  # (the probe submits work: one thread at a time)
                try:
                    ok = subgroup_lanes(self.device, shape) == size
                except Exception as exc:
                    raise self._gpu_error("measuring the subgroup lanes", exc) from None
                self._subgroup_shapes[shape] = ok
        if not ok:
            raise UnsupportedFeature(
                "subgroup", self.id,
                f"program {program.name!r} uses subgroup operations in workgroups of "
                f"{shape}, where this adapter's subgroups are not runs of {size} consecutive "
                f"local_index values (docs/IR.md's lane mapping, measured in that shape on "
                f"{self._info.name}); use a shape whose x size is a multiple of {size}, e.g. "
                f"({max(size, 64)}, 1, 1) (llvmpipe's subgroups run along x and it pads "
                f"every shorter row)")

    def source(self, program: Program) -> str:
        program = debug_program(program)  # (vyre.print / assert_: what runs)
        return self.generate(program).source

    @interrupt_safe
    def _compile(self, program: Program, key: Any) -> Compiled:
        mod = self.generate(program, key)
        dump = os.environ.get("VYRE_WGPU_DUMP")  # debugging: the source being compiled
        if dump:
            _dump_source(dump, program, mod.source)
        # what naga / wgpu-native log while compiling goes into the CompileError, never to
        # the user's terminal
        with captured_wgpu_log() as log:
            try:
                shader, checked = trusted.create_module(
                    self.device, program.name, mod.source,
                    self._checks_reason is None and mod.unproven_access is None)
            except Exception as exc:
                raise CompileError(
                    self.id, f"naga rejected the WGSL for program {program.name!r}",
                    mod.source, "\n".join([str(exc), *log]),
                ) from None
            try:
                status = None
                if mod.status_binding is not None:
                    status = _Status(self._status_buffer(), program.name)
                bgl, layout = self._layouts(mod.storage_access, mod.status_binding)
                pipeline = self.device.create_compute_pipeline(
                    label=program.name,
                    layout=layout,
                    compute={"module": shader, "entry_point": mod.entry_point},
                )
            except Exception as exc:
                raise CompileError(
                    self.id, f"creating the compute pipeline for {program.name!r} failed",
                    mod.source, "\n".join([str(exc), *log]),
                ) from None
        return Compiled(
            module=mod, shader=shader, bind_group_layout=bgl, pipeline=pipeline, status=status,
            bounds_checks=checked,
        )

    def _layouts(self, access: tuple[str, ...], status_binding: int | None) -> tuple[Any, Any]:
        """The bind group layout and pipeline layout of a shader whose storage bindings have
        `access`: made once per shape and shared by every program of that shape (a layout
        depends on nothing else), so a cold compile creates only the module and pipeline,
        as the raw peer does."""
        key = (access, status_binding)
        hit = self._layout_cache.get(key)
        if hit is not None:
            return hit
        u = self._wgpu.ShaderStage.COMPUTE
        entries = [{"binding": 0, "visibility": u, "buffer": {"type": "uniform"}}]
        for i, acc in enumerate(access):
            kind = "storage" if acc == "read_write" else "read-only-storage"
            entries.append({"binding": i + 1, "visibility": u, "buffer": {"type": kind}})
        if status_binding is not None:
            entries.append({"binding": status_binding, "visibility": u,
                            "buffer": {"type": "storage"}})
        bgl = self.device.create_bind_group_layout(entries=entries)
        made = (bgl, self.device.create_pipeline_layout(bind_group_layouts=[bgl]))
        if len(self._layout_cache) >= _LAYOUT_CACHE_MAX:  # compiled programs keep theirs
            self._layout_cache.clear()
        self._layout_cache[key] = made
        return made

    def _evict_compiled(self, compiled: Any) -> None:
        # bind groups are keyed by id(compiled): drop them so a new program compiled at the
        # same address can never pick one up. Recorded steps and pipelines hold the wgpu
        # objects themselves, so they stay valid; the rest is released by wgpu-py with them.
        cid = id(compiled)
        for key in [k for k in self._bind_groups if k[0] == cid]:
            del self._bind_groups[key]

    # ------------------------------------------------------------ binding
    def _check_binding_sizes(self, bound: BoundDispatch) -> None:
        for d, b in zip(bound.program.buffers, bound.buffers):
            assert isinstance(b, WgpuBuffer)
            if b.alloc_size > self._max_binding:
                raise InvalidDispatch(
                    f"program {bound.program.name!r} buffer {d.name!r}: {b.describe()} is "
                    f"larger than this adapter's max storage binding size "
                    f"({self._max_binding} bytes, limits['max_storage_binding_bytes']); "
                    "split the data into buffers of at most that size"
                )

    def _new_binding(self, compiled: Compiled, bound: BoundDispatch, data: bytes) -> _Binding:
        u = self._usage
        ubuf = self.device.create_buffer_with_data(
            label="vyre-uniforms", data=data, usage=u.UNIFORM | u.COPY_DST
        )
        entries: list[dict[str, Any]] = [
            {"binding": 0, "resource": {"buffer": ubuf, "offset": 0, "size": len(data)}}
        ]
        for i, b in enumerate(bound.buffers):
            assert isinstance(b, WgpuBuffer)
            entries.append(
                {"binding": i + 1, "resource": {"buffer": b.gpu, "offset": 0, "size": b.alloc_size}}
            )
        if compiled.status is not None:
            entries.append({
                "binding": compiled.module.status_binding,
                "resource": {"buffer": compiled.status.buffer, "offset": 0, "size": 16},
            })
        bg = self.device.create_bind_group(layout=compiled.bind_group_layout, entries=entries)
        return _Binding(bind_group=bg, uniform=ubuf, data=data)

    def _shared_binding(self, compiled: Compiled, bound: BoundDispatch, data: bytes) -> _Binding:
        key = (id(compiled), tuple(b.serial for b in bound.buffers))
        hit = self._bind_groups.get(key)
        if hit is not None:
            self._bind_groups.move_to_end(key)
            return hit
        binding = self._new_binding(compiled, bound, data)
        self._bind_groups[key] = binding
        while len(self._bind_groups) > BIND_GROUP_POOL:
            self._bind_groups.popitem(last=False)
        return binding

    def _grid_copy_needed(self, bound: BoundDispatch) -> bool:
        g = bound.grid
        return isinstance(g, IndirectGrid) and any(b is g.buffer for b in bound.buffers)

    def _indirect_scratch(self) -> Any:
        u = self._usage
        return self.device.create_buffer(
            label="vyre-indirect", size=12, usage=u.INDIRECT | u.COPY_DST
        )

    # ------------------------------------------------------------ status checks
    def _status_buffer(self) -> Any:
        u = self._usage
        return self.device.create_buffer_with_data(
            label="vyre-status", data=bytes(16), usage=u.STORAGE | u.COPY_SRC | u.COPY_DST
        )

    def _grid_check(self, grid: IndirectGrid, status: _Status) -> tuple[Any, Any]:
        """The pre-pass of an indirect dispatch: wgpu silently skips a dispatch whose
        device-side counts exceed max_workgroups_per_dimension; this flags them."""
        word = grid.offset // 4
        pipe = self._grid_checks.get(word)
        if pipe is None:
            limit = self._caps.limits["max_workgroups_per_dimension"]
            code = (
                "@group(0) @binding(0) var<storage, read> g: array<u32>;\n"
                "@group(0) @binding(1) var<storage, read_write> st: array<atomic<u32>>;\n"
                "@compute @workgroup_size(1) fn main() {\n"
                f"    let m = max(g[{word}u], max(g[{word + 1}u], g[{word + 2}u]));\n"
                f"    if (m > {limit}u) {{ atomicOr(&st[0], {_GRID_FLAG}u); atomicMax(&st[1], m); }}\n}}"
            )
            mod = self.device.create_shader_module(label="vyre-grid-check", code=code)
            pipe = self.device.create_compute_pipeline(
                layout="auto", compute={"module": mod, "entry_point": "main"}
            )
            self._grid_checks[word] = pipe
        buf = grid.buffer
        assert isinstance(buf, WgpuBuffer)
        bg = self.device.create_bind_group(layout=pipe.get_bind_group_layout(0), entries=[
            {"binding": 0, "resource": {"buffer": buf.gpu, "offset": 0, "size": buf.alloc_size}},
            {"binding": 1, "resource": {"buffer": status.buffer, "offset": 0, "size": 16}},
        ])
        return pipe, bg

    def _submitted(self, steps: list[_Recorded]) -> None:
        for step in steps:
            for st in step.status:
                self._unchecked[id(st)] = st

    def _take_unchecked(self) -> list[_Status]:
        pending = list(self._unchecked.values())
        self._unchecked.clear()
        return pending

    def _check_status(self) -> None:
        """Before any result of submitted work can be seen (wait, read, synchronize, a
        pipeline's reads): raise DispatchError if a shader flagged a condition that makes
        its results invalid (the driver's loop budget ran out; an indirect grid over the
        limit). Flags are cleared, so the backend stays usable."""
        if self._unchecked:
            status = self._take_unchecked()
            self._raise_flagged(status, self._read_raw([], status))

    def _raise_flagged(self, status: list[_Status], words: Sequence[np.ndarray]) -> None:
        errors = []
        for st, raw in zip(status, words):
            flags, count = struct.unpack_from("<II", raw.tobytes())
            if flags:
                self.queue.write_buffer(st.buffer, 0, bytes(16))
                errors.append(self._status_message(st, flags, count))
        if errors:
            raise DispatchError("\n".join(errors))

    def _status_message(self, st: _Status, flags: int, count: int) -> str:
        msgs = []
        if flags & wgsl.LOOP_LIMIT_FLAG:
            limit = self._info.loop_limit
            msgs.append(
                f"{self.id}: program {st.program!r} ran out of this adapter's loop budget: "
                f"{self._info.name} silently ends every loop once {limit} loop iterations "
                "have run in one SIMD group of invocations (neighbours along x; counted over "
                "all loops of the program and every invocation of the group), and it ended "
                "a loop an invocation was still in, so the results are truncated and were "
                "not used. Split the work so that each invocation runs fewer than "
                f"{limit} iterations in all: more invocations (a larger grid), or several "
                "dispatches (pipeline steps) each doing a part of the loop; or use an "
                "adapter without the limit "
                "(capabilities().details['loop_iteration_limit'] is None)."
            )
        if flags & _GRID_FLAG:
            limit = self._caps.limits["max_workgroups_per_dimension"]
            msgs.append(
                f"{self.id}: program {st.program!r} was dispatched with an indirect grid of "
                f"{count} workgroups in one dimension, over this adapter's limit of {limit} "
                "(limits['max_workgroups_per_dimension']); WebGPU runs nothing for such a "
                "dispatch, so its results were not used. Keep every count in the grid buffer "
                f"at most {limit}: use more dimensions (y, z) or a larger workgroup size."
            )
        return "\n".join(msgs)

    # ------------------------------------------------------------ encoding
    def _timestamp_set(self) -> _TimestampSet:
        """A free timestamp set (give it back with _release_timestamps once read)."""
        if self._timestamp_pool:
            return self._timestamp_pool.pop()
        u = self._usage
        return _TimestampSet(
            self.device.create_query_set(type="timestamp", count=2),
            self.device.create_buffer(size=16, usage=u.QUERY_RESOLVE | u.COPY_SRC),
            self.device.create_buffer(size=16, usage=u.MAP_READ | u.COPY_DST),
        )

    def _release_timestamps(self, ts: _TimestampSet) -> None:
        if len(self._timestamp_pool) < _TIMESTAMP_POOL:
            self._timestamp_pool.append(ts)
        else:
            ts.destroy()

    def _encode(
        self,
        enc: Any,
        steps: list[_Recorded],
        repeat: int,
        timestamps: Any | None,
        runs: _Runs | None = None,
        first: bool = True,
        last: bool = True,
    ) -> None:
        """All steps, `repeat` times, in as few compute passes as possible (a pass ends
        only where an indirect grid must first be copied out of a buffer the step binds).
        wgpu orders dispatches inside a pass by their storage-buffer usage. `runs`: the
        steps' _plain_runs, when the caller has them. `first` / `last`: whether this
        encoding begins / ends the timed span (a long run is encoded in several)."""
        direct = steps[0].direct if len(steps) == 1 and repeat == 1 else None
        if runs is not None and direct is None:  # a recorded pipeline of plain dispatches
            tw: dict[str, Any] | None = None
            if timestamps is not None and (first or last):
                tw = {"query_set": timestamps}
                if first:
                    tw["beginning_of_pass_write_index"] = 0
                if last:
                    tw["end_of_pass_write_index"] = 1
            cp = enc.begin_compute_pass(timestamp_writes=tw) if tw else enc.begin_compute_pass()
            dispatch = cp.dispatch_workgroups
            for _ in range(repeat):
                for pipe, bg, grids in runs:
                    cp.set_pipeline(pipe)
                    cp.set_bind_group(0, bg)
                    for g in grids:
                        dispatch(*g)
            cp.end()
            return
        if direct is not None and timestamps is None:
            _one_dispatch(enc, steps[0], direct)  # the common launch: no pass planning
            return
        passes: list[list[_Recorded]]
        if all(s.grid_copy is None for s in steps):
            passes = [steps * repeat]  # the common case: one pass
        else:
            passes = []
            cur: list[_Recorded] = []
            for _ in range(repeat):
                for s in steps:
                    if s.grid_copy is not None and cur:
                        passes.append(cur)
                        cur = []
                    cur.append(s)
            passes.append(cur)
        final = len(passes) - 1
        for pi, group in enumerate(passes):
            if group and group[0].grid_copy is not None:
                gpu, offset = group[0].indirect  # type: ignore[misc]
                enc.copy_buffer_to_buffer(gpu, offset, group[0].grid_copy, 0, 12)
            tw = None
            if timestamps is not None and ((first and pi == 0) or (last and pi == final)):
                tw = {"query_set": timestamps}
                if first and pi == 0:
                    tw["beginning_of_pass_write_index"] = 0
                if last and pi == final:
                    tw["end_of_pass_write_index"] = 1
            cp = enc.begin_compute_pass(timestamp_writes=tw) if tw else enc.begin_compute_pass()
            dispatch = cp.dispatch_workgroups
            prev_pipe = prev_bg = None
            for s in group:
                if s.pipeline is not prev_pipe:
                    cp.set_pipeline(s.pipeline)
                    prev_pipe = s.pipeline
                if s.bind_group is not prev_bg:
                    cp.set_bind_group(0, s.bind_group)
                    prev_bg = s.bind_group
                if s.grid_check is not None:  # flags counts over the limit first
                    cp.set_pipeline(s.grid_check[0])
                    cp.set_bind_group(0, s.grid_check[1])
                    cp.dispatch_workgroups(1)
                    cp.set_pipeline(s.pipeline)
                    cp.set_bind_group(0, s.bind_group)
                    prev_pipe, prev_bg = s.pipeline, s.bind_group
                if s.direct is not None:
                    dispatch(*s.direct)
                elif s.grid_copy is not None:
                    cp.dispatch_workgroups_indirect(s.grid_copy, 0)
                else:
                    cp.dispatch_workgroups_indirect(*s.indirect)  # type: ignore[misc]
            cp.end()

    def _record_step(self, bound: BoundDispatch,
                     own: dict[tuple[Any, ...], _Binding] | None) -> _Recorded:
        """`own`: a pipeline's private bindings (steps with equal program, buffers and
        params share one; shared bind groups have their uniforms rewritten between
        submissions, so a recording never uses them); None: a launch record."""
        self._check_binding_sizes(bound)
        compiled = self._compiled_for(bound.program, self._specialisation(bound))
        data = compiled.module.layout.pack(bound.counts, bound.params)
        if own is None:
            binding = self._shared_binding(compiled, bound, data)
        else:
            key = (id(compiled), tuple(b.serial for b in bound.buffers), data)
            if key not in own:
                own[key] = self._new_binding(compiled, bound, data)
            binding = own[key]
        copy = self._indirect_scratch() if self._grid_copy_needed(bound) else None
        g = bound.grid
        indirect = (g.buffer.gpu, g.offset) if isinstance(g, IndirectGrid) else None
        status = [compiled.status] if compiled.status is not None else []
        check = None
        if isinstance(g, IndirectGrid):
            st = _Status(self._status_buffer(), bound.program.name)
            check = self._grid_check(g, st)
            status.append(st)
        return _Recorded(bound.program.name, compiled.pipeline, binding.bind_group, binding,
                         data, None if indirect else g, indirect,  # type: ignore[arg-type]
                         copy, check, tuple(status))

    def _wait(self) -> None:
        self._queue.drain()

    def _queue_empty(self) -> bool:
        try:
            return self._queue.empty()
        except Exception:
            return False

    # ------------------------------------------------------------ dispatch
    @interrupt_safe
    def _prepare_launch(self, bound: BoundDispatch) -> _Recorded:
        try:
            return self._record_step(bound, None)
        except BackendError:
            raise
        except Exception as exc:
            raise self._gpu_error(f"preparing {bound.program.name!r}", exc) from None

    @staticmethod
    def _uniforms_stale(rec: _Recorded) -> bool:
        """Whether `rec`'s shared bind group's uniform buffer holds another launch's params
        (it holds those of whichever launch wrote it last)."""
        binding = rec.binding
        return binding.data is not rec.data and binding.data != rec.data

    def _refresh_uniforms(self, rec: _Recorded) -> None:
        """Write `rec`'s params into its uniform buffer if they are not there, before it is
        submitted (queue-ordered, so work submitted earlier keeps its values)."""
        if self._uniforms_stale(rec):
            self.queue.write_buffer(rec.binding.uniform, 0, rec.data)
            rec.binding.data = rec.data

    def _launch_record(self, record: Any, buffers: tuple[BufferBase, ...]) -> None:
        # called under the lock (wgpu-native aborts the process when two threads submit at
        # once, or when a buffer a free() destroyed is submitted)
        if self._closed or self._device_lost is not None:
            self._check_open()
        if record.status or self._uniforms_stale(record):
            # an interrupt between the uniform write and noting it, or between the
            # submit and noting its status flags, would leave either stale: deferred
            with deferred_interrupts():
                self._submit_record(record)
        else:  # (an interrupt here drops at most an encoder that was never submitted)
            self._submit_record(record)

    def _submit_record(self, record: _Recorded) -> None:
        try:
            self._refresh_uniforms(record)
            enc = self.device.create_command_encoder()
            direct = record.direct
            if direct is not None:
                _one_dispatch(enc, record, direct)
            else:
                self._encode(enc, [record], 1, None)
            self.queue.submit([enc.finish()])
            if record.status:  # loop-limit / indirect-grid flags: checked before reads
                self._submitted([record])
        except Exception as exc:
            raise self._gpu_error(f"dispatching {record.name!r}", exc) from None

    @interrupt_safe
    def _launch(self, bound: BoundDispatch) -> Pending:
        t0 = time.perf_counter_ns()
        try:
            step: _Recorded = bound.launch.record
            self._refresh_uniforms(step)
            profile = bound.config.profile and self._timestamps
            ts = self._timestamp_set() if profile else None
            enc = self.device.create_command_encoder()
            self._encode(enc, [step], 1, ts.queries if ts else None)
            if ts is not None:
                ts.record_resolve(enc)
            self.queue.submit([enc.finish()])
            self._submitted([step])
        except BackendError:
            raise
        except Exception as exc:
            raise self._gpu_error(f"dispatching {bound.program.name!r}", exc) from None
        t1 = time.perf_counter_ns()
        done = [False]

        def is_ready() -> bool:
            if not done[0] and self._queue_empty():
                done[0] = True
            return done[0]

        def wait() -> Timing:
            # the wait itself only asks (polls): Ctrl-C may end it (the work goes on and a
            # later wait finds it); mapping the times and reading the status flags back
            # are what an interrupt must not tear, so only they are deferred
            w0 = time.perf_counter_ns()
            device_ns = None
            try:
                with self._lock:
                    if self._closed:  # its device is destroyed: say so, not "device lost"
                        raise self._closed_error()
                    self._wait()
                    with deferred_interrupts():
                        if ts is not None:
                            device_ns = _timestamp_ns(
                                self._map_staging(ts.staging, 16, [(0, 16)])[0])
                            self._release_timestamps(ts)
                        self._check_status()
            except BackendError:
                raise
            except Exception as exc:
                raise self._gpu_error(f"waiting for {bound.program.name!r}", exc) from None
            done[0] = True
            w1 = time.perf_counter_ns()
            return Timing(wall_ns=w1 - t0, enqueue_ns=t1 - t0, wait_ns=w1 - w0,
                          device_ns=device_ns)

        return Pending(is_ready, wait)

    # ------------------------------------------------------------ pipelines
    @interrupt_safe
    def _record_pipeline(self, pipeline: Pipeline) -> None:
        try:
            own: dict[tuple[Any, ...], _Binding] = {}
            steps = [self._record_step(s, own) for s in pipeline.steps]
            pipeline.state = _PipelineState(steps, _plain_runs(steps),
                                            [s for s in steps if s.status])
        except BackendError:
            raise
        except Exception as exc:
            raise self._gpu_error("recording a pipeline", exc) from None

    def _run_pipeline(
        self, pipeline: Pipeline, repeat: int, reads: list[ReadRange]
    ) -> PipelineResult:
        # Ctrl-C may end the waits (for earlier chunks, and for the run's own work): they
        # only ask, and the work goes on for a later wait to find. A submit and the noting
        # of its status flags, and the mapping of the read-back, are deferred sections.
        t0 = time.perf_counter_ns()
        state: _PipelineState = pipeline.state
        steps = state.steps
        profile = self._timestamps and pipeline.profiled
        ranges = [(r.buffer, r.offset, int(r.length or 0)) for r in reads]
        try:
            with deferred_interrupts():
                ts = self._timestamp_set() if profile else None
            enc = self._encode_rounds(state, repeat, ts.queries if ts else None)
            nz = [(b, o, n) for b, o, n in ranges if n]
            plan, pieces, total = self._plan_reads(nz, 16 if ts else 0)
            staging = None
            with deferred_interrupts():
                if plan or ts:
                    staging = self._staging_buffer(total)
                    if ts:  # the times first in the shared staging buffer, then the reads
                        ts.record_resolve(enc, staging)
                    for gpu, a0, size, soff in plan:
                        enc.copy_buffer_to_buffer(gpu, a0, staging, soff, size)
                self.queue.submit([enc.finish()])
                self._submitted(state.checked)
            t1 = time.perf_counter_ns()
            self._wait()
            with deferred_interrupts():
                got = ([] if staging is None else
                       self._map_staging(staging, total, ([(0, 16)] if ts else []) + pieces))
                self._check_status()
        except BackendError:
            raise
        except Exception as exc:
            raise self._gpu_error("running a pipeline", exc) from None
        t2 = time.perf_counter_ns()
        device_ns = None
        it = iter(got)
        if ts is not None:
            device_ns = _timestamp_ns(next(it))
            self._release_timestamps(ts)
        out = [host_array(next(it) if n else _NO_BYTES.copy(), np.dtype(r.dtype))
               for (_b, _o, n), r in zip(ranges, reads)]
        timing = Timing(wall_ns=t2 - t0, enqueue_ns=t1 - t0, wait_ns=t2 - t1, device_ns=device_ns)
        return PipelineResult(reads=out, timing=timing, extra={"dispatches": len(steps) * repeat})

    def _encode_rounds(self, state: _PipelineState, repeat: int, timestamps: Any | None) -> Any:
        """A command encoder holding the last rounds of a `repeat`-round run; the earlier
        rounds are encoded and submitted in chunks of at most MAX_DISPATCHES_PER_SUBMIT
        dispatches, each chunk submitted once the one before it has finished, so the host
        and device memory of the recording do not grow with `repeat` (one encoder for all
        rounds took ~530 B of host memory per dispatch, and 4e6 rounds exhausted the
        device's memory and lost the device). The device never waits for the host: the
        next chunk is encoded while the previous one runs."""
        steps = state.steps
        per_chunk = max(1, MAX_DISPATCHES_PER_SUBMIT // len(steps))
        done = 0
        first = True
        while repeat - done > per_chunk:
            enc = self.device.create_command_encoder()
            self._encode(enc, steps, per_chunk, timestamps, state.runs, first, False)
            done += per_chunk
            self._wait()  # the chunk before this one: at most one chunk in flight
            with deferred_interrupts():  # a submit and the noting of its status flags
                self.queue.submit([enc.finish()])
                self._submitted(state.checked)
            first = False
        enc = self.device.create_command_encoder()
        self._encode(enc, steps, repeat - done, timestamps, state.runs, first, True)
        if done:
            self._wait()
        return enc

    def _synchronize(self) -> None:
        if self._dropped:
            self._destroy_dropped()
        try:
            # the wait only asks (polls), which leaves nothing half-done for an interrupt to
            # tear; only reading the status flags back (a submit and a map) is guarded, so
            # dispatch.roundtrip's usual wait pays for no guard
            self._wait()
            if self._unchecked:
                with deferred_interrupts():
                    self._check_status()
        except BackendError:
            raise
        except Exception as exc:
            raise self._gpu_error("synchronize", exc) from None

    @interrupt_safe
    def _close(self) -> None:
        self._destroy_dropped()
        self._bind_groups.clear()
        for ts in self._timestamp_pool:
            ts.destroy()
        self._timestamp_pool.clear()
        if self._staging is not None:
            with contextlib.suppress(Exception):
                self._staging.destroy()
            self._staging = None
        with contextlib.suppress(Exception):
            self.device.destroy()


_NO_BYTES = np.empty(0, np.uint8)
#: Most dispatches a pipeline run records into one command buffer before submitting it
#: (see _encode_rounds): ~8 MiB of host recording, far above any pipeline's steps.
MAX_DISPATCHES_PER_SUBMIT = 16384
_TIMESTAMP_POOL = 8  # timestamp sets kept for reuse (more only with dispatches in flight)


@dataclass
class _TimestampSet:
    """The begin/end timestamps of one profiled submission: the query set, the buffer it
    resolves into and a mappable copy of that."""

    queries: Any
    resolve: Any
    staging: Any

    def record_resolve(self, enc: Any, into: Any = None) -> None:
        """Resolve the two timestamps and copy them to the first 16 bytes of `into`
        (default: this set's own mappable buffer)."""
        enc.resolve_query_set(self.queries, 0, 2, self.resolve, 0)
        enc.copy_buffer_to_buffer(self.resolve, 0, self.staging if into is None else into, 0, 16)

    def destroy(self) -> None:
        for obj in (self.queries, self.resolve, self.staging):
            with contextlib.suppress(Exception):
                obj.destroy()


def _timestamp_ns(raw: HostBytes) -> int | None:
    if len(raw) < 16:
        return None
    begin, end = struct.unpack_from("<QQ", bytes(raw[:16]))
    return int(end - begin) if end >= begin else None


__all__ = ["Compiled", "WgpuBackend", "WgpuBuffer"]


if TYPE_CHECKING:  # mypy holds WgpuBackend to the public protocol (tests check it at run time)
    def _satisfies_backend(b: WgpuBackend) -> Backend:
        return b
