"""vyre's CUDA backend: IR -> CUDA C -> NVRTC cubin -> driver API (cuda-python).

Importing this package never loads the driver or NVRTC: `PROVIDER.probe()` reports whether
CUDA can run here (and why not), `PROVIDER.create("1")` makes a backend for device 1.
`compile_program(program, "sm_90")` compiles to a cubin without any GPU (used in CI).
This package must never make an unavailable CUDA break `import vyre` or other backends.
"""

from __future__ import annotations

from typing import Any

from vyre.errors import BackendError, BackendUnavailable
from vyre.interface import Availability

from .nvrtc import CompiledCubin, DiskCache, compile_program, compile_source, nvrtc_version
from .options import CudaOptions
from .render import generate

NAME = "cuda"


class CudaProvider:
    """Entry point `cuda = "vyre.backends.cuda:PROVIDER"`."""

    name = NAME

    def probe(self) -> Availability:
        try:
            from . import driver as D

            drv = D.load()
            count = D.device_count()
            if count == 0:
                return Availability(NAME, False, "the CUDA driver reports no device")
            names = []
            for i in range(count):
                dev = D.call(drv.cuDeviceGet, i)
                raw = D.call(drv.cuDeviceGetName, 256, dev)
                label = raw.split(b"\0", 1)[0].decode(errors="replace")
                names.append(f"cuda:{i} {label}")
            nv = nvrtc_version()
            return Availability(
                NAME, True, "", tuple(names),
                {"driver_version": D.driver_version(), "nvrtc_version": nv},
            )
        except BackendUnavailable as exc:
            return Availability(NAME, False, exc.reason)
        except BackendError as exc:
            return Availability(NAME, False, str(exc))

    def create(self, device: int | str | None = None) -> Any:
        from .runtime import CudaBackend

        return CudaBackend(device)


PROVIDER = CudaProvider()


def __getattr__(name: str) -> Any:
    if name == "CudaBackend":
        from .runtime import CudaBackend

        return CudaBackend
    raise AttributeError(name)


__all__ = [
    "PROVIDER",
    "CompiledCubin",
    "CudaOptions",
    "CudaProvider",
    "DiskCache",
    "compile_program",
    "compile_source",
    "generate",
    "nvrtc_version",
]
