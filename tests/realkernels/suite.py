"""The real-kernel suite's table: each kernel's port module, the Rodinia source its C driver
follows, and its arguments (passed in this order to c/<name>.c after the output path, and
as keywords to the port's run()). The expected outputs live in data/<name>.bin."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from vyre.backend import BaseBackend
from vyre.ir.nodes import Program

from .common import DATA_DIR, read_output

#: kernel name -> the Rodinia 3.1 file its C driver follows
SOURCES = {
    "hotspot": "openmp/hotspot/hotspot_openmp.cpp",
    "hotspot3d": "openmp/hotspot3D/3D.c",
    "srad": "openmp/srad/srad_v2/srad.cpp",
    "pathfinder": "openmp/pathfinder/pathfinder.cpp",
    "lud": "openmp/lud/base/lud_base.c",
    "nw": "openmp/nw/needle.cpp",
    "kmeans": "openmp/kmeans/kmeans_serial/kmeans_clustering.c",
    "nn": "openmp/nn/nn_openmp.c",
    "bfs": "openmp/bfs/bfs.cpp",
    "gaussian": "cuda/gaussian/gaussian.cu",
    "cfd": "openmp/cfd/euler3d_cpu.cpp",
}


@dataclass(frozen=True)
class Kernel:
    name: str
    source: str
    args: dict[str, int]
    run: Callable[..., list[np.ndarray]]
    programs: tuple[Callable[[], Program], ...]  # every Program the port dispatches

    def c_args(self) -> list[str]:
        return [str(v) for v in self.args.values()]

    def expected(self) -> list[np.ndarray]:
        return read_output(DATA_DIR / f"{self.name}.bin")

    def port(self, backend: BaseBackend) -> list[np.ndarray]:
        return self.run(backend, **self.args)


def _load(name: str) -> Kernel:
    mod: Any = importlib.import_module(f"{__package__}.{name}")
    programs = tuple(getattr(mod, f) for f in sorted(vars(mod))
                     if f == "program" or f.endswith("_program"))
    return Kernel(name, SOURCES[name], dict(mod.ARGS), mod.run, programs)


KERNELS: dict[str, Kernel] = {n: _load(n) for n in SOURCES}
