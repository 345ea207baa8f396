"""The wgpu compiler part: a Program to a compute pipeline, behind the core's compile cache.

render.py prints the WGSL (from the probed device facts and the instance's options);
naga compiles it (with its bounds checks off only where trusted.py allows), and the
pipeline is made with a layout shared by every program of the same binding shape. The
compile key is the set of read slots aliased with a writable one (declared read_write).
A program using subgroups runs only in workgroup shapes where the lane mapping was
measured to hold. This module must never submit a dispatch.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from vyre import subgroups
from vyre.binding import BoundDispatch
from vyre.debug.instrument import debug_program
from vyre.errors import BackendUnavailable, CompileError, UnsupportedFeature
from vyre.interrupts import interrupt_safe
from vyre.ir.analysis import uses_subgroups
from vyre.ir.nodes import Program
from vyre.parts import Compiler

from . import render as wgsl
from . import trusted
from .adapter import SUBGROUP_PROBE_SHAPES, captured_wgpu_log, subgroup_lanes
from .bindings import BindGroups
from .device import Status, WgpuDevice
from .options import WgpuOptions

_LAYOUT_CACHE_MAX = 256  # distinct binding shapes remembered (a handful in practice)


@dataclass
class Compiled:
    """A compiled program: WGSL, shader module, layouts and compute pipeline."""

    module: wgsl.WgslModule
    shader: Any
    bind_group_layout: Any
    pipeline: Any
    status: Status | None = None  # the cut-loop flag (adapters with a loop limit: loopcount.py)
    # naga's bounds checks are on in `shader` (off only where the printer proved every
    # access in range and wgpu-native can: trusted.py)
    bounds_checks: bool = True

    @property
    def source(self) -> str:
        return self.module.source


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


class WgpuCompiler(Compiler):
    """WGSL to compute pipelines on one WebGPU device (see the module docstring)."""

    device: WgpuDevice
    options: WgpuOptions

    def __init__(self, device: WgpuDevice, bindings: BindGroups, options: WgpuOptions) -> None:
        super().__init__(device, options)
        self.bindings = bindings  # an evicted program's shared bind groups go with it
        # (storage access per binding, status binding) -> (bind group layout, pipeline layout)
        self._layout_cache: dict[tuple[Any, ...], tuple[Any, Any]] = {}
        # workgroup shapes where docs/IR.md's subgroup lane mapping was measured to hold
        self._subgroup_shapes: dict[tuple[int, int, int], bool] = dict.fromkeys(
            SUBGROUP_PROBE_SHAPES, True)

    def specialisation(self, bound: BoundDispatch) -> Any:
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
        """The WGSL module for `program` (`key`: a specialisation from `specialisation`)."""
        info = self.device.info
        subgroups.check_fits(program, info.subgroup_size, self.device.id)
        self._check_subgroup_shape(program)
        return wgsl.generate(
            program, key or frozenset(), self.device.allowed_types, info.fma_fused,
            info.flush_subnormals, native_flush=info.native_flush,
            exact_div=info.exact_div, exact_sqrt=info.exact_sqrt,
            loop_limited=info.loop_limit is not None, options=self.options,
            flush_tininess=info.flush_tininess,
        )

    def _check_subgroup_shape(self, program: Program) -> None:
        """UnsupportedFeature unless docs/IR.md's subgroup lane mapping holds in
        `program`'s workgroup shape on this adapter: measured once per shape, by running
        the probe's shuffles in a workgroup of that shape (adapter.subgroup_lanes)."""
        size = self.device.info.subgroup_size
        if size is None or not uses_subgroups(program):
            return
        shape = program.workgroup_size
        ok = self._subgroup_shapes.get(shape)
        if ok is None:
            with self.device.lock:  # (the probe submits work: one thread at a time)
                try:
                    ok = subgroup_lanes(self.device.gpu, shape) == size
                except Exception as exc:
                    raise self.device.error("measuring the subgroup lanes", exc) from None
                self._subgroup_shapes[shape] = ok
        if not ok:
            raise UnsupportedFeature(
                "subgroup", self.device.id,
                f"program {program.name!r} uses subgroup operations in workgroups of "
                f"{shape}, where this adapter's subgroups are not runs of {size} consecutive "
                f"local_index values (docs/IR.md's lane mapping, measured in that shape on "
                f"{self.device.info.name}); use a shape whose x size is a multiple of {size}, e.g. "
                f"({max(size, 64)}, 1, 1) (llvmpipe's subgroups run along x and it pads "
                f"every shorter row)")

    def source(self, program: Program) -> str:
        program = debug_program(program)  # (vyre.print / assert_: what runs)
        return self.generate(program).source

    @interrupt_safe
    def compile(self, program: Program, key: Any) -> Compiled:
        mod = self.generate(program, key)
        dump = os.environ.get("VYRE_WGPU_DUMP")  # debugging: the source being compiled
        if dump:
            _dump_source(dump, program, mod.source)
        # what naga / wgpu-native log while compiling goes into the CompileError, never to
        # the user's terminal
        with captured_wgpu_log() as log:
            try:
                shader, checked = trusted.create_module(
                    self.device.gpu, program.name, mod.source,
                    self.device.checks_reason is None and mod.unproven_access is None)
            except Exception as exc:
                raise CompileError(
                    self.device.id, f"naga rejected the WGSL for program {program.name!r}",
                    mod.source, "\n".join([str(exc), *log]),
                ) from None
            try:
                status = None
                if mod.status_binding is not None:
                    status = Status(self.device.status_buffer(), program.name)
                bgl, layout = self._layouts(mod.storage_access, mod.status_binding)
                pipeline = self.device.gpu.create_compute_pipeline(
                    label=program.name,
                    layout=layout,
                    compute={"module": shader, "entry_point": mod.entry_point},
                )
            except Exception as exc:
                raise CompileError(
                    self.device.id, f"creating the compute pipeline for {program.name!r} failed",
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
        u = self.device.wgpu.ShaderStage.COMPUTE
        entries = [{"binding": 0, "visibility": u, "buffer": {"type": "uniform"}}]
        for i, acc in enumerate(access):
            kind = "storage" if acc == "read_write" else "read-only-storage"
            entries.append({"binding": i + 1, "visibility": u, "buffer": {"type": kind}})
        if status_binding is not None:
            entries.append({"binding": status_binding, "visibility": u,
                            "buffer": {"type": "storage"}})
        bgl = self.device.gpu.create_bind_group_layout(entries=entries)
        made = (bgl, self.device.gpu.create_pipeline_layout(bind_group_layouts=[bgl]))
        if len(self._layout_cache) >= _LAYOUT_CACHE_MAX:  # compiled programs keep theirs
            self._layout_cache.clear()
        self._layout_cache[key] = made
        return made

    def evict(self, artifact: Any) -> None:
        # bind groups are keyed by id(compiled): drop them so a new program compiled at the
        # same address can never pick one up. Recorded steps and pipelines hold the wgpu
        # objects themselves, so they stay valid; the rest is released by wgpu-py with them.
        self.bindings.evict(artifact)
