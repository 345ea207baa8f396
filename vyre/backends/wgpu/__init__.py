"""The wgpu backend: Program IR -> WGSL, run through wgpu-py on any Vulkan / Metal / D3D12
adapter (Mesa's lavapipe on a CPU-only machine).

Modules, one job each: `adapter` (choose an adapter, open a device, probe features),
`render` (Program -> WGSL: the module around the body `printer` prints, `state` what
it tracks, `expressions`, `memory`, `atomics`, `loops`, `spelling`, `float_fences` and
`maths` its spellings; `fences`, `vectors`, `barriers`, `loopcount`, `divsqrt`, `native_flush`,
`packed`, `uniforms` serve it), the four parts of an instance (`device`,
`allocator`, `compiler`, `queue`; `bindings` the bind groups they share, `encoding` how
recorded dispatches are encoded, `trusted` naga's bounds checks, `queue_wait` how the
host waits), `runtime` (the BaseBackend facade over the parts) and `options` (the
instance's switches). This module only exposes the provider; it must never import wgpu at
import time (probe reports a missing package instead).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from vyre.errors import BackendUnavailable
from vyre.interface import Availability

if TYPE_CHECKING:
    from .runtime import WgpuBackend


class _Provider:
    """Entry point `vyre.backends:wgpu`; device spec: None, an adapter index or a name."""

    name = "wgpu"

    def probe(self) -> Availability:
        try:
            from .adapter import adapter_name, import_wgpu, list_adapters, select_adapter

            import_wgpu()
            chosen = select_adapter(None)
            names = tuple(adapter_name(a) for a in list_adapters())
        except BackendUnavailable as exc:
            return Availability(self.name, False, exc.reason)
        except Exception as exc:  # pragma: no cover - a broken driver stack
            return Availability(self.name, False, f"probing adapters failed: {exc!r}")
        info = chosen.info
        return Availability(
            self.name,
            True,
            f"adapter {adapter_name(chosen)} ({info.get('backend_type', '')}, "
            f"{info.get('adapter_type', '')})",
            devices=names,
            details={"adapter": adapter_name(chosen)},
        )

    def create(self, device: int | str | None = None) -> WgpuBackend:
        from vyre.interrupts import deferred_interrupts

        from .adapter import open_device, select_adapter
        from .options import WgpuOptions
        from .runtime import WgpuBackend

        spec = None if device in (None, "") else str(device)
        options = WgpuOptions.from_env()
        with deferred_interrupts():  # the probes map buffers and build pipelines
            adapter = select_adapter(spec)
            info = open_device(adapter, options)
            return WgpuBackend("wgpu" if spec is None else f"wgpu:{spec}", info, options)


PROVIDER = _Provider()

__all__ = ["PROVIDER"]
