"""The real-kernel suite's table: each kernel's port module, the published suite it comes
from (Rodinia or PolyBench) and the file of that suite its C driver follows, and its
arguments (passed in this order to c/<name>.c after the output path, and as keywords to the
port's run()). The expected outputs live in data/<name>.bin."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from vyre.backend import BaseBackend
from vyre.ir.nodes import Program

from .common import DATA_DIR, read_output

RODINIA = "Rodinia"  # Rodinia 3.1 (OpenMP/C versions; gaussian from CUDA)
POLYBENCH = "PolyBench"  # PolyBench/C 4.2.1, DATA_TYPE float

#: kernel name -> (suite, the file of that suite its C driver follows)
SOURCES: dict[str, tuple[str, str]] = {
    "hotspot": (RODINIA, "openmp/hotspot/hotspot_openmp.cpp"),
    "hotspot3d": (RODINIA, "openmp/hotspot3D/3D.c"),
    "srad": (RODINIA, "openmp/srad/srad_v2/srad.cpp"),
    "pathfinder": (RODINIA, "openmp/pathfinder/pathfinder.cpp"),
    "lud": (RODINIA, "openmp/lud/base/lud_base.c"),
    "nw": (RODINIA, "openmp/nw/needle.cpp"),
    "kmeans": (RODINIA, "openmp/kmeans/kmeans_serial/kmeans_clustering.c"),
    "nn": (RODINIA, "openmp/nn/nn_openmp.c"),
    "bfs": (RODINIA, "openmp/bfs/bfs.cpp"),
    "gaussian": (RODINIA, "cuda/gaussian/gaussian.cu"),
    "cfd": (RODINIA, "openmp/cfd/euler3d_cpu.cpp"),
    "cholesky": (POLYBENCH, "linear-algebra/solvers/cholesky/cholesky.c"),
    "trisolv": (POLYBENCH, "linear-algebra/solvers/trisolv/trisolv.c"),
    "durbin": (POLYBENCH, "linear-algebra/solvers/durbin/durbin.c"),
    "gramschmidt": (POLYBENCH, "linear-algebra/solvers/gramschmidt/gramschmidt.c"),
    "ludcmp": (POLYBENCH, "linear-algebra/solvers/ludcmp/ludcmp.c"),
    "correlation": (POLYBENCH, "datamining/correlation/correlation.c"),
    "covariance": (POLYBENCH, "datamining/covariance/covariance.c"),
    "seidel_2d": (POLYBENCH, "stencils/seidel-2d/seidel-2d.c"),
    "fdtd_2d": (POLYBENCH, "stencils/fdtd-2d/fdtd-2d.c"),
    "adi": (POLYBENCH, "stencils/adi/adi.c"),
    "heat_3d": (POLYBENCH, "stencils/heat-3d/heat-3d.c"),
    "floyd_warshall": (POLYBENCH, "medley/floyd-warshall/floyd-warshall.c"),
    "nussinov": (POLYBENCH, "medley/nussinov/nussinov.c"),
    "gemm": (POLYBENCH, "linear-algebra/blas/gemm/gemm.c"),
    "gemver": (POLYBENCH, "linear-algebra/blas/gemver/gemver.c"),
    "symm": (POLYBENCH, "linear-algebra/blas/symm/symm.c"),
    "trmm": (POLYBENCH, "linear-algebra/blas/trmm/trmm.c"),
    # PolyBench's default double configuration (f64 on every backend that has it)
    "trisolv_f64": (POLYBENCH, "linear-algebra/solvers/trisolv/trisolv.c"),
    "jacobi_1d_f64": (POLYBENCH, "stencils/jacobi-1d/jacobi-1d.c"),
}


@dataclass(frozen=True)
class Kernel:
    name: str
    suite: str  # RODINIA or POLYBENCH
    source: str  # the file of that suite the C driver follows
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
    suite, source = SOURCES[name]
    return Kernel(name, suite, source, dict(mod.ARGS), mod.run, programs)


KERNELS: dict[str, Kernel] = {n: _load(n) for n in SOURCES}
