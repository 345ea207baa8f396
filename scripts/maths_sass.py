"""What each exact function (vyre.lower.maths) costs on Hopper, measured without a GPU: the
SASS that NVRTC makes of a map kernel `out[i] = f(a[i])` for sm_90, counted by issue class,
and the throughput those counts allow per SM per clock; plus the generated source sizes
(CUDA, WGSL) and NVRTC's compile time of programs with 1 and 3 calls.

    python scripts/maths_sass.py                      # every function, f32
    python scripts/maths_sass.py --functions exp,log --show exp   # also print exp's SASS
    NVDISASM=/path/to/nvdisasm python scripts/maths_sass.py

nvdisasm is not a vyre dependency: it comes with the CUDA toolkit, or from PyPI
(`pip install --target /tmp/nvtools nvidia-cuda-nvdisasm`, then
NVDISASM=/tmp/nvtools/nvidia/cu13/bin/nvdisasm).

Two kernels per function: "all", the definition as lowered, and "common", the same with the
body of every `if` the definition makes (`Builder.when`: the slow correction path, sin's
large-argument reduction, exp's overflow / underflow scaling) replaced by an assignment of
a constant to the locals it sets, so its condition is still computed: the instructions an
argument that takes no rare path runs. The estimate is per invocation of the common kernel
(the load, the store and the index arithmetic included, a few instructions), from
the issue rates of compute capability 9.0 per SM per clock (CUDA C++ Programming Guide,
"Arithmetic Instructions"): FP32 add / mul / fma 128, FP64 add / mul / fma (and their
compares, DSETP) 64, conversions to, from and between 64-bit types (F2F, F2I, I2F, of any
width) 16, integer and logic (IMAD, IADD3, LOP3, SHF, ISETP, SEL, LEA, FSEL, FMNMX) 64,
and at most 128 instructions of any kind (4 schedulers, one warp instruction a clock):
clocks per call = the largest of class count / rate, calls per SM per clock its inverse.
This is an upper bound for the throughput of a long chain (latency hidden by enough warps;
branches not counted as divergent): it says which class bounds a definition, and what a
change saves.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager

from vyre import ScalarType
from vyre.backends.cuda.nvrtc import compile_source
from vyre.backends.cuda.render import generate as cuda_generate
from vyre.backends.wgpu.render import generate as wgsl_generate
from vyre.builder import ProgramBuilder, call_fn
from vyre.ir import nodes as N
from vyre.ir.nodes import Program, made
from vyre.lower.maths import build

ONE_ARG = ["exp", "exp2", "log", "log2", "tanh", "sin", "cos", "tan", "asin"]
TWO_ARGS = ["pow", "hypot", "atan2"]

# issue class -> (per SM per clock, SASS opcodes (the mnemonic before the first '.'))
CLASSES: dict[str, tuple[int, frozenset[str]]] = {
    "fp64": (64, frozenset({"DADD", "DMUL", "DFMA", "DSETP", "DMNMX"})),
    "conv": (16, frozenset({"F2F", "F2I", "I2F", "F2FP", "FRND", "I2I"})),
    "fp32": (128, frozenset({"FADD", "FMUL", "FFMA", "FSETP", "FADD32I", "FMUL32I",
                             "FFMA32I"})),
    "int": (64, frozenset({"IMAD", "IADD3", "LOP3", "SHF", "ISETP", "SEL", "LEA", "FSEL",
                           "FMNMX", "IABS", "IMNMX", "VIADD", "PRMT", "FLO", "POPC", "VIMNMX",
                           "IMUL", "BMSK", "LEA.HI", "SGXT", "BREV", "PLOP3", "P2R", "R2P"})),
}
ISSUE = 128
_LINE = re.compile(r"/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P[0-9T]\s+)?([A-Z][A-Z0-9_]*)")


def program(fn: str, arity: int, calls: int = 1, ty: ScalarType = ScalarType.F32) -> Program:
    """out[i] = f(a[i]) (chained `calls` times, as f(f(...)))."""
    k = ProgramBuilder(f"sass_{fn}", workgroup_size=256)
    ins = [k.buffer(f"a{j}", ty) for j in range(arity)]
    out = k.buffer("out", ty, "write")
    i = k.let(k.global_linear_id())
    with k.if_(i < out.length()):
        v = call_fn(fn, *(b[i] for b in ins))
        for _ in range(calls - 1):
            v = call_fn(fn, v, *(b[i] for b in ins[1:]))
        out[i] = v
    return k.build()


@contextmanager
def common_path_only() -> Iterator[None]:
    """Builder.when keeps its condition but its body only sets constants (module docstring)."""
    original = build.Builder.when

    @contextmanager
    def when(self: build.Builder, cond: build.X) -> Iterator[None]:
        outer, self.stmts = self.stmts, []
        try:
            yield
        finally:
            body, self.stmts = self.stmts, outer
        inner = {s.name for s in _walk(body) if isinstance(s, N.Let)}
        sets = {s.name: s.value.ty for s in _walk(body)
                if isinstance(s, N.Assign) and s.name not in inner}
        then = tuple(made(N.Assign, name=n, value=N.Const(ty=t, value=_zero(t)))
                     for n, t in sets.items())
        self.stmts.append(made(N.If, cond=cond.e, then=then, orelse=()))

    build.Builder.when = when  # type: ignore[method-assign]
    try:
        yield
    finally:
        build.Builder.when = original  # type: ignore[method-assign]


def _zero(t: ScalarType) -> float | int | bool:
    return False if t is ScalarType.BOOL else (0.0 if t.is_float else 0)


def _walk(stmts: list[N.StmtNode]) -> Iterator[N.StmtNode]:
    for s in stmts:
        yield s
        if isinstance(s, N.If):
            yield from _walk(list(s.then) + list(s.orelse))


def nvdisasm() -> str:
    path = os.environ.get("NVDISASM") or shutil.which("nvdisasm")
    if not path:
        sys.exit("nvdisasm not found: set NVDISASM (see the module docstring)")
    return path


def sass(source: str, arch: str) -> str:
    cubin = compile_source(source, arch)
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(cubin)
        f.flush()
        return subprocess.run([nvdisasm(), "-c", f.name], check=True, capture_output=True,
                              text=True).stdout


def mix(text: str) -> Counter[str]:
    return Counter(m.group(1) for m in map(_LINE.search, text.splitlines()) if m)


def estimate(ops: Counter[str]) -> tuple[dict[str, int], float, str]:
    """(count per class, calls per SM per clock, the bounding class)."""
    counts = {c: sum(n for op, n in ops.items() if op in names)
              for c, (_, names) in CLASSES.items()}
    total = sum(n for op, n in ops.items() if op not in ("NOP", "BSSY", "BSYNC", "EXIT"))
    clocks = {c: counts[c] / CLASSES[c][0] for c in counts}
    clocks["issue"] = total / ISSUE
    bound = max(clocks, key=lambda c: clocks[c])
    counts["total"] = total
    return counts, 1.0 / clocks[bound], bound


def compile_ms(source: str, arch: str, repeat: int) -> float:
    best = float("inf")
    for r in range(repeat):
        t0 = time.process_time()
        compile_source(source + f"// {time.perf_counter_ns()} {r}\n", arch)
        best = min(best, time.process_time() - t0)
    return best * 1e3


def wgpu_compile_ms(fns: list[str], repeat: int) -> dict[str, tuple[float, float]]:
    """vyre's wgpu compile (lowering, WGSL, the driver's shader module and pipeline) of a
    never-seen program with 1 and 3 calls, wall ms, best of `repeat`."""
    import vyre

    out: dict[str, tuple[float, float]] = {}
    with vyre.get_backend("wgpu") as backend:
        for fn in fns:
            arity = 2 if fn in TWO_ARGS else 1
            best = [float("inf"), float("inf")]
            for r in range(repeat):
                for j, calls in enumerate((1, 3)):
                    prog = program(fn, arity, calls)  # a fresh name: never cached
                    prog = prog.model_copy(update={"name": f"sass_{fn}_{calls}_{r}_"
                                                           f"{time.perf_counter_ns()}"})
                    t0 = time.perf_counter()
                    backend.compile(prog)
                    best[j] = min(best[j], time.perf_counter() - t0)
            out[fn] = (best[0] * 1e3, best[1] * 1e3)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--functions", default=",".join(ONE_ARG + TWO_ARGS))
    ap.add_argument("--arch", default="sm_90")
    ap.add_argument("--repeat", type=int, default=3, help="NVRTC timings: best of")
    ap.add_argument("--show", default="", help="print this function's common-path SASS")
    ap.add_argument("--no-compile-time", action="store_true")
    ap.add_argument("--wgpu", action="store_true",
                    help="also time vyre's wgpu compile (lavapipe here) of 1 and 3 calls")
    a = ap.parse_args()
    fns = a.functions.split(",")
    head = (f"{'fn':6s} {'path':6s} {'total':>5s} {'fp64':>4s} {'conv':>4s} {'int':>4s} "
            f"{'fp32':>4s} {'/SM/clk':>7s} {'bound':>5s}")
    print(head)
    sizes = []
    for fn in fns:
        arity = 2 if fn in TWO_ARGS else 1
        prog = program(fn, arity)
        full = cuda_generate(prog).source
        with common_path_only():
            common = cuda_generate(program(fn, arity)).source
        for path, src in (("all", full), ("common", common)):
            text = sass(src, a.arch)
            if path == "common" and fn == a.show:
                print(text)
            counts, rate, bound = estimate(mix(text))
            print(f"{fn:6s} {path:6s} {counts['total']:5d} {counts['fp64']:4d} "
                  f"{counts['conv']:4d} {counts['int']:4d} {counts['fp32']:4d} {rate:7.2f} "
                  f"{bound:>5s}")
        three = program(fn, arity, calls=3)
        sizes.append((fn, len(full), len(cuda_generate(three).source),
                      len(wgsl_generate(prog).source), len(wgsl_generate(three).source),
                      None if a.no_compile_time else compile_ms(full, a.arch, a.repeat),
                      None if a.no_compile_time else compile_ms(cuda_generate(three).source,
                                                                a.arch, a.repeat)))
    print(f"\n{'fn':6s} {'CUDA 1':>8s} {'CUDA 3':>8s} {'WGSL 1':>8s} {'WGSL 3':>8s} "
          f"{'NVRTC 1':>8s} {'NVRTC 3':>8s}  (bytes; CPU ms)")
    for fn, c1, c3, w1, w3, t1, t3 in sizes:
        ts = "" if t1 is None or t3 is None else f"{t1:8.0f} {t3:8.0f}"
        print(f"{fn:6s} {c1:8d} {c3:8d} {w1:8d} {w3:8d} {ts}")
    if a.wgpu:
        print(f"\n{'fn':6s} {'wgpu 1':>8s} {'wgpu 3':>8s}  (vyre's wgpu compile, wall ms)")
        for fn, (w1, w3) in wgpu_compile_ms(fns, a.repeat).items():
            print(f"{fn:6s} {w1:8.0f} {w3:8.0f}")


if __name__ == "__main__":
    main()
