"""The CUDA compiler part: a Program to a loaded kernel, behind the core's compile cache.

render.py prints CUDA C, nvrtc.py compiles it to a cubin for the device's exact
architecture (never PTX) and keeps it on disk; this part loads the cubin as a module and
looks its kernel up. The compile key is (arch, restrict, coarsen, indirect): aliased
buffer slots must not be declared __restrict__, and only grids large enough to be
bandwidth-bound run a coarsened variant. An evicted kernel's module is unloaded once
nothing refers to it and the stream has drained. This module must never launch anything.
"""

from __future__ import annotations

import contextlib
import weakref
from dataclasses import dataclass
from typing import Any

from vyre.binding import BoundDispatch
from vyre.config import IndirectGrid
from vyre.debug.instrument import debug_program
from vyre.interrupts import interrupt_safe
from vyre.ir.nodes import Program
from vyre.lower.maths.apply import lowered_calls
from vyre.parts import Compiler

from .device import CudaDevice
from .nvrtc import DiskCache, compile_program
from .options import CudaOptions
from .render import KERNEL_NAME, Generated, generate, lockstep_allowed

COARSEN_MIN_INVOCATIONS = 1 << 20


@dataclass
class Kernel:
    """A loaded kernel: its source, cubin facts, module and function handles."""

    generated: Generated
    arch: str
    module: Any
    function: Any
    from_disk: bool
    cubin_bytes: int

    @property
    def source(self) -> str:
        return self.generated.source


class CudaCompiler(Compiler):
    """NVRTC to a cubin (cached on disk), loaded into the instance's context."""

    device: CudaDevice
    options: CudaOptions

    def __init__(self, device: CudaDevice, arch: str, disk: DiskCache, coarsen: int,
                 options: CudaOptions, calls_coarsen: int | None = None) -> None:
        super().__init__(device, options)
        self.arch = arch
        self.disk = disk
        # invocations per CUDA thread for barrier-free programs (see render.coarsening_allowed)
        self.coarsen = coarsen
        # the factor for a kernel that calls an exact function (runtime.DEFAULT_CALLS_COARSEN)
        self.calls_coarsen = coarsen if calls_coarsen is None else calls_coarsen
        self.coarsen_min_invocations = COARSEN_MIN_INVOCATIONS
        # compile(program): the kernel with one element per invocation (see CudaBackend.compile)
        self.plain_key = (arch, True, 1, False)
        self._retired: list[Any] = []  # modules of evicted kernels, unloaded when unused

    def specialisation(self, bound: BoundDispatch) -> Any:
        # aliased buffer slots must not be declared __restrict__; only grids large enough to
        # be bandwidth-bound are coarsened (small ones are latency-bound: coarsening a
        # 1024-element dispatch made it ~0.5 us slower on H100)
        grid = bound.grid
        k = 1
        if self.coarsen > 1 and isinstance(grid, tuple):
            total = grid[0] * grid[1] * grid[2] * bound.program.invocations_per_workgroup
            if total >= self.coarsen_min_invocations:
                k = self.coarsen
                # a straight-line kernel calling an exact function: more invocations per
                # thread (one with a loop, a chain of calls, is latency-bound: fewer threads
                # ran it slower, exp's chain 707 -> 673 Gexp/s at 8)
                if lowered_calls(bound.program) and lockstep_allowed(bound.program):
                    k = self.calls_coarsen
        return (self.arch, not bound.aliased, k, isinstance(grid, IndirectGrid))

    @interrupt_safe
    def compile(self, program: Program, key: Any) -> Kernel:
        self.unload_retired()
        arch, restrict, coarsen, indirect = (
            key if key is not None else (self.arch, True, self.coarsen, False))
        compiled = compile_program(program, arch, self.disk, restrict=restrict,
                                   coarsen=coarsen, codegen_options=self.options,
                                   indirect=indirect)
        if compiled.from_disk:
            self.stats.disk_hits += 1
        dev = self.device
        drv = dev.driver
        module = dev.driver_call(drv.cuModuleLoadData, compiled.cubin, what="cuModuleLoadData")
        fn = dev.driver_call(drv.cuModuleGetFunction, module, KERNEL_NAME.encode(),
                             what="cuModuleGetFunction")
        return Kernel(compiled.generated, arch, module, fn, compiled.from_disk,
                      len(compiled.cubin))

    def source(self, program: Program) -> str:
        """The CUDA C generated for `program`."""
        program = debug_program(program)  # (vyre.print / assert_: what runs)
        return generate(program, coarsen=self.coarsen, options=self.options).source

    def evict(self, artifact: Any) -> None:
        # Launches (cached, recorded in graphs, memoised on a BoundDispatch) keep their
        # Kernel alive through the launch record's `keep`: the module is unloaded only once
        # the last of them is gone, and then only after the stream drains (unload_retired).
        weakref.finalize(artifact, self._retired.append, artifact.module)

    def unload_retired(self) -> None:
        """Unload modules of evicted kernels nothing refers to any more (lock held)."""
        dev = self.device
        if not self._retired or not dev.context_state.usable:
            return
        with contextlib.suppress(Exception):
            dev.context_state.make_current()
            dev.driver.cuStreamSynchronize(dev.cu_stream)  # no launch of them still runs
        while self._retired:
            module = self._retired.pop()
            with contextlib.suppress(Exception):
                dev.driver.cuModuleUnload(module)

    def close(self, artifacts: list[Any]) -> None:
        """Unload every module (the queue has drained the stream: no launch of them runs)."""
        dev = self.device
        if not dev.context_state.usable:
            return
        with contextlib.suppress(Exception):
            dev.context_state.make_current()
            for k in artifacts:
                dev.driver.cuModuleUnload(k.module)
            self.unload_retired()
