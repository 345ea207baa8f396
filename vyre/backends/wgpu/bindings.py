"""Bind groups of the wgpu backend: one per (compiled program, buffers), with its own small
uniform buffer, shared by every launch over the same buffers.

A launch with other params rewrites only the uniform buffer (queue-ordered, so work
submitted earlier keeps its values) instead of creating a uniform buffer and a bind group,
which costs about as much as the launch itself on lavapipe. A pool of device objects, not a
launch cache (vyre.launch_cache.LaunchCache is that): a bind group is dropped with its buffers
(the allocator forgets them) and with its program (the compiler evicts it), least recently
used first past BIND_GROUP_POOL. A recorded pipeline makes bind groups of its own
(`new`), which nothing rewrites. This module must never submit work.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from vyre.binding import BoundDispatch

from .device import WgpuBuffer, WgpuDevice

BIND_GROUP_POOL = 256  # shared bind groups kept (least recently used dropped first)


@dataclass
class Binding:
    """A bind group with its own uniform buffer (and the bytes last written to it)."""

    bind_group: Any
    uniform: Any
    data: bytes


class BindGroups:
    """The shared bind groups of one instance (see the module docstring)."""

    def __init__(self, device: WgpuDevice) -> None:
        self.device = device
        # (id(compiled), buffer serials) -> Binding, least recently used first
        self._pool: OrderedDict[tuple[Any, ...], Binding] = OrderedDict()

    def new(self, compiled: Any, bound: BoundDispatch, data: bytes) -> Binding:
        u = self.device.usage
        ubuf = self.device.gpu.create_buffer_with_data(
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
        bg = self.device.gpu.create_bind_group(layout=compiled.bind_group_layout, entries=entries)
        return Binding(bind_group=bg, uniform=ubuf, data=data)

    def shared(self, compiled: Any, bound: BoundDispatch, data: bytes) -> Binding:
        key = (id(compiled), tuple(b.serial for b in bound.buffers))
        hit = self._pool.get(key)
        if hit is not None:
            self._pool.move_to_end(key)
            return hit
        binding = self.new(compiled, bound, data)
        self._pool[key] = binding
        while len(self._pool) > BIND_GROUP_POOL:
            self._pool.popitem(last=False)
        return binding

    def forget(self, serial: int) -> None:
        for key in [k for k in self._pool if serial in k[1]]:
            del self._pool[key]

    def evict(self, compiled: Any) -> None:
        """Drop the bind groups of `compiled` (keyed by its id, which a new program compiled
        at the same address could otherwise pick up)."""
        cid = id(compiled)
        for key in [k for k in self._pool if k[0] == cid]:
            del self._pool[key]

    def clear(self) -> None:
        self._pool.clear()
