"""The real-kernel suite's table: each kernel's port module, the published suite it comes
from (Rodinia, PolyBench or the CUDA Samples; "vyre" for one written for this suite) and
the file of that suite its C driver follows, and its arguments (passed in this order to
c/<name>.c after the output path, and as keywords to the port's run()). The expected
outputs live in data/<name>.bin; a port may also have LARGE_ARGS, a larger problem for
scripts/realkernels.py --large, whose C output is only recorded by its SHA-256 in
data/manifest.json (make_expected.py --large)."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from vyre.interface import Backend
from vyre.ir.nodes import Program

from .common import DATA_DIR, read_output

RODINIA = "Rodinia"  # Rodinia 3.1 (OpenMP/C versions; gaussian from CUDA)
POLYBENCH = "PolyBench"  # PolyBench/C 4.2.1, DATA_TYPE float
CUDA_SAMPLES = "CUDA Samples"  # NVIDIA/cuda-samples
THIS_SUITE = "vyre"  # written for this suite

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
    # with vyre's exact functions (docs/IR.md), the C's correctly rounded by c/crmath.h
    "backprop": (RODINIA, "openmp/backprop/backprop.c"),
    "lavamd": (RODINIA, "openmp/lavaMD/kernel/kernel_cpu.c"),
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
    "deriche": (POLYBENCH, "medley/deriche/deriche.c"),
    "blackscholes": (CUDA_SAMPLES,
                     "Samples/5_Domain_Specific/BlackScholes/BlackScholes_kernel.cuh"),
    # exact f32 atomic adds (an order-independent float histogram)
    "float_histogram": (THIS_SUITE, "c/float_histogram.c"),
}


@dataclass(frozen=True)
class Kernel:
    name: str
    suite: str  # RODINIA, POLYBENCH, CUDA_SAMPLES or THIS_SUITE
    source: str  # the file of that suite the C driver follows
    args: dict[str, int]
    run: Callable[..., list[np.ndarray]]
    programs: tuple[Callable[[], Program], ...]  # every Program the port dispatches
    large_args: dict[str, int] | None = None  # a larger problem (scripts/realkernels.py --large)

    def arguments(self, large: bool = False) -> dict[str, int]:
        """ARGS, or with `large` LARGE_ARGS (a ValueError naming the kernel if it has none)."""
        if not large:
            return self.args
        if self.large_args is None:
            raise ValueError(f"{self.name} has no larger problem (no LARGE_ARGS in its port)")
        return self.large_args

    def c_args(self, large: bool = False) -> list[str]:
        return [str(v) for v in self.arguments(large).values()]

    def expected(self) -> list[np.ndarray]:
        return read_output(DATA_DIR / f"{self.name}.bin")

    def port(self, backend: Backend, large: bool = False) -> list[np.ndarray]:
        return self.run(backend, **self.arguments(large))


def _load(name: str) -> Kernel:
    mod: Any = importlib.import_module(f"{__package__}.{name}")
    programs = tuple(getattr(mod, f) for f in sorted(vars(mod))
                     if f == "program" or f.endswith("_program"))
    suite, source = SOURCES[name]
    large = getattr(mod, "LARGE_ARGS", None)
    return Kernel(name, suite, source, dict(mod.ARGS), mod.run, programs,
                  dict(large) if large else None)


KERNELS: dict[str, Kernel] = {n: _load(n) for n in SOURCES}
