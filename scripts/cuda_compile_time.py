"""Cold CUDA compile time without a GPU: vyre's codegen + NVRTC vs raw NVRTC of a minimal
saxpy (the `vyre bench` compile peer's kernel and its options).

NVRTC compiles in this process on one thread, so its CPU time (time.process_time) is
reported next to wall time: on a shared machine wall time swings with the load, CPU time
much less. Every variant is timed in interleaved rounds in one process; best of --repeat.

    python3 scripts/cuda_compile_time.py [--repeat 7] [--arch sm_90]
        [--compare before_saxpy.cu before_matmul.cu]   # also time saved (older) sources
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from pathlib import Path

from vyre.backends.cuda.nvrtc import compile_source
from vyre.backends.cuda.render import generate
from vyre.programs.matmul import matmul_program
from vyre.tools.bench.peers import CUDA_SAXPY
from vyre.tools.bench.vyre_impl import compile_probe_program


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--arch", default="sm_90")
    ap.add_argument("--compare", nargs=2, metavar=("SAXPY_CU", "MATMUL_CU"))
    a = ap.parse_args()
    salt0 = time.perf_counter_ns()

    def raw(i: int) -> None:
        name = f"saxpy_{salt0 + i}"
        src = CUDA_SAXPY.replace("saxpy", name).replace("a * x[i]", f"a * x[i] + {i}.0f")
        compile_source(src, a.arch, options=("--std=c++17",), name=f"{name}.cu")

    def vy_saxpy(i: int) -> None:  # codegen included, as in vyre's cold compile
        compile_source(generate(compile_probe_program(salt0 + i)).source, a.arch)

    def vy_matmul(i: int) -> None:
        compile_source(generate(matmul_program()).source + f"// {salt0 + i}\n", a.arch)

    variants: dict[str, Callable[[int], None]] = {
        "raw NVRTC saxpy": raw, "vyre saxpy-like probe": vy_saxpy, "vyre matmul": vy_matmul}
    if a.compare:
        texts = [Path(p).read_text() for p in a.compare]
        variants["given saxpy source"] = lambda i: compile_source(texts[0], a.arch)
        variants["given matmul source"] = lambda i: compile_source(texts[1], a.arch)
    best = {k: (float("inf"), float("inf")) for k in variants}
    for i in range(a.repeat):
        for k, fn in variants.items():
            c0, w0 = time.process_time(), time.perf_counter()
            fn(i)
            c, w = time.process_time() - c0, time.perf_counter() - w0
            best[k] = (min(best[k][0], c * 1e3), min(best[k][1], w * 1e3))
    rc, rw = best["raw NVRTC saxpy"]
    print(f"{'':24s} {'cpu ms':>8s} {'x raw':>6s} {'wall ms':>8s} {'x raw':>6s}")
    for k, (c, w) in best.items():
        print(f"{k:24s} {c:8.1f} {c / rc:6.2f} {w:8.1f} {w / rw:6.2f}")


if __name__ == "__main__":
    main()
