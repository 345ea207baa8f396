"""Cold CUDA compile time without a GPU: vyre's codegen + NVRTC vs raw NVRTC of a minimal
saxpy (the `vyre bench` compile peer's kernel and options). Every compile is of a source
never compiled before in this process (a salt in the program), best of `--repeat`.

    python3 scripts/cuda_compile_time.py [--repeat 7] [--arch sm_90]
"""

from __future__ import annotations

import argparse
import time

from vyre.backends.cuda.codegen import generate
from vyre.backends.cuda.nvrtc import compile_source
from vyre.programs.matmul import matmul_program
from vyre.tools.bench.peers import CUDA_SAXPY
from vyre.tools.bench.vyre_impl import compile_probe_program


def _best(fn, repeat: int) -> float:  # type: ignore[no-untyped-def]
    times = []
    for i in range(repeat):
        t0 = time.perf_counter()
        fn(i)
        times.append(time.perf_counter() - t0)
    return min(times) * 1e3


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--arch", default="sm_90")
    a = ap.parse_args()
    salt0 = time.perf_counter_ns()

    def raw(i: int) -> None:
        name = f"saxpy_{salt0 + i}"
        src = CUDA_SAXPY.replace("saxpy", name).replace("a * x[i]", f"a * x[i] + {i}.0f")
        compile_source(src, a.arch, options=("--std=c++17",), name=f"{name}.cu")

    def vy_saxpy(i: int) -> None:
        compile_source(generate(compile_probe_program(salt0 + i)).source, a.arch)

    def vy_matmul(i: int) -> None:
        p = matmul_program()
        p = p.model_copy(update={"name": f"{p.name}_{salt0 + i}"})
        src = generate(p).source + f"\n// salt {salt0 + i}\n"
        compile_source(src, a.arch)

    r = _best(raw, a.repeat)
    s = _best(vy_saxpy, a.repeat)
    m = _best(vy_matmul, a.repeat)
    print(f"raw NVRTC saxpy        {r:8.1f} ms")
    print(f"vyre saxpy-like probe  {s:8.1f} ms  ({s / r:.2f}x raw)")
    print(f"vyre matmul            {m:8.1f} ms  ({m / r:.2f}x raw saxpy)")


if __name__ == "__main__":
    main()
