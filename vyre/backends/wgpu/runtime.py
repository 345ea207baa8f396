"""The wgpu backend: one WebGPU device through wgpu-py, as vyre's four parts behind the
BaseBackend facade.

The parts: the device (device.py: the probed facts, capabilities, error mapping, the
status flags shaders raise), the allocator (allocator.py: storage buffers, staging reads),
the compiler (compiler.py: render.py's WGSL to a compute pipeline) and the queue
(queue.py: launch records, submissions, recorded pipelines; encoding.py encodes them),
with the shared bind groups (bindings.py) between them. This module builds them and
publishes wgpu-py's device and queue.

Resident work never touches the host: dispatches bind the caller's device buffers
directly. Every method that calls into wgpu-native runs with Ctrl-C deferred to its end
(vyre.interrupts): an interrupt between mapping and unmapping a buffer, or half-way through
building a pipeline, would leave wgpu-native in a state that aborts the process. Every
wgpu exception is caught at the parts' boundary and turned into a vyre error
(CompileError, DispatchError, OutOfDeviceMemory) so the instance keeps working for new
work. This module must never generate shader code (render.py does) and must never fall back
to host copies behind the resident API.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from vyre.backend import BaseBackend
from vyre.interface import Backend
from vyre.ir.nodes import Program

from . import render as wgsl
from .adapter import DeviceInfo
from .allocator import WgpuAllocator
from .bindings import BindGroups
from .compiler import Compiled, WgpuCompiler
from .device import WgpuBuffer, WgpuDevice
from .options import DEFAULT_OPTIONS, WgpuOptions
from .queue import WgpuQueue


class WgpuBackend(BaseBackend):
    """vyre on one WebGPU device (see the module docstring)."""

    kind = "wgpu"
    _device: WgpuDevice
    _compiler: WgpuCompiler

    def __init__(self, instance_id: str, info: DeviceInfo,
                 options: WgpuOptions = DEFAULT_OPTIONS) -> None:
        device = WgpuDevice(instance_id, info)
        bindings = BindGroups(device)
        memory = WgpuAllocator(device, bindings)
        # debug / measurement switches (options.py), apart from the probed `info`: fixed for
        # this instance, passed to every generate and (BaseBackend.options) in every cache key
        compiler = WgpuCompiler(device, bindings, options)
        super().__init__(device, memory, compiler, WgpuQueue(device, memory, bindings))

    @property
    def device(self) -> Any:
        """wgpu-py's GPUDevice this instance runs on."""
        return self._device.gpu

    @device.setter
    def device(self, gpu: Any) -> None:
        self._device.gpu = gpu

    @property
    def queue(self) -> Any:
        """wgpu-py's GPUQueue of `device`."""
        return self._device.queue

    @queue.setter
    def queue(self, queue: Any) -> None:
        self._device.queue = queue

    def generate(self, program: Program, key: Any = None) -> wgsl.WgslModule:
        """The WGSL module for `program` (`key`: a specialisation of the compile key)."""
        return self._compiler.generate(program, key)


__all__ = ["Compiled", "WgpuBackend", "WgpuBuffer"]


if TYPE_CHECKING:  # mypy holds WgpuBackend to the public protocol (tests check it at run time)
    def _satisfies_backend(b: WgpuBackend) -> Backend:
        return b
