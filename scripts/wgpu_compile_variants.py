"""The wgpu driver's cold compile of the bench's compile-workload program, per WGSL variant,
next to the raw wgpu-py peer (helper wgcompile, issue 17):

    python scripts/wgpu_compile_variants.py [--rounds N] [--json out.json]

Each round compiles, once each and in a rotating order, a never-seen shader of every
variant (a fresh float constant in each: drivers cache compiled shaders, NVIDIA's on disk)
with create_shader_module + create_compute_pipeline (layout "auto", the raw peer's calls)
on vyre's device; plus the raw peer's own cold compile and vyre's `compile()` end to end
(bench compile.cold). Variants of vyre's WGSL:
- "main": what vyre generated before this branch (the three changes below switched off in
  this process only: index facts, unused builtins, the global id bound once); on lavapipe
  byte for byte the source main generates (checked when this script was written);
- "branch": as generated now; "branch -facts" / "-builtins" / "-hoist": one change
  undone; "branch +let": every local never assigned and bound to a runtime value spelled
  `let` (tried and dropped: H100 compile time unchanged, matmul 33.8 -> 33.5 TFLOP/s with
  it among the changes);
(Its NOT-exact variants, the guarded load as a select and the constants unfenced, are
priced on today's spelling by scripts/wgpu_compile_spellings.py.)
Prints one table: median / min ms per variant and the raw peer's median over it.
(The dispatch.roundtrip split it also had is scripts/wgpu_dispatch_split.py now.)
--matmul N also times the library matmul (wgpu's default tile, N^3, device timers) with
this branch's changes on and off, twice interleaved, each on a fresh backend (the compile
cache keys on the Program, which is the same), and checks C is bit-identical: the changes
must not cost a throughput kernel anything on the driver's compiler.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import random
import re
import statistics
import time
from collections.abc import Callable, Iterator
from typing import Any

import vyre
from vyre.backends.wgpu import render
from vyre.ir.nodes import Program
from vyre.lower import facts
from vyre.tools.bench.peers import WGSL_SAXPY, RawWgpuPeer
from vyre.tools.bench.vyre_impl import compile_probe_program

_T = time.perf_counter_ns
ALL = ("facts", "builtins", "hoist")  # this branch's WGSL changes (see `undone`)


class _AllBuiltins:
    @staticmethod
    def findall(code: str) -> list[str]:
        return [n for n, _, _ in render._MAIN_PARAMS + render._SUBGROUP_PARAMS]


@contextlib.contextmanager
def undone(*changes: str) -> Iterator[None]:
    """This branch's WGSL changes switched off (measurement only, this process only)."""
    saved = (facts.Facts.proves, render._BUILTIN_NAME, render._invariant)
    if "facts" in changes:
        facts.Facts.proves = lambda self, buffer, index: False  # type: ignore[method-assign]
    if "builtins" in changes:
        render._BUILTIN_NAME = _AllBuiltins  # type: ignore[assignment]
    if "hoist" in changes:
        render._invariant = lambda e, kids: 0
    try:
        yield
    finally:
        (facts.Facts.proves, render._BUILTIN_NAME,  # type: ignore[method-assign]
         render._invariant) = saved


def single_lets(src: str) -> str:
    """`var x: T = v;` -> `let` where x is never assigned again and v reads a runtime value
    (a local, a uniform, a builtin, memory; naga would fold a `let` of constants)."""
    out = []
    for line in src.splitlines(keepends=True):
        m = re.match(r"(\s*)var (v_\w+): (\w+) = (.*);\n?$", line)
        if m and not re.search(rf"\b{m.group(2)} = ", src.replace(line, "")) and re.search(
                r"\b(v_\w+|vy_u\.\w+|vy_(gid|lid|wid|nwg|lidx|x\d+)|[bw]_\w+\[)", m.group(4)):
            line = line.replace("var ", "let ", 1)
        out.append(line)
    return "".join(out)


def matmul_check(n: int, reps: int) -> None:
    import hashlib
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from wgpu_matmul_sweep import matmul_data, multiply

    from vyre.programs.matmul import TUNED

    _, a, bm, flops = matmul_data(n)
    t = TUNED["wgpu"]
    tile = (t.block, t.per_thread, t.block_k)
    got: dict[str, list[float]] = {}
    bits: dict[str, set[str]] = {}
    for label, changes in (("branch", ()), ("main", ALL)) * 2:
        b = vyre.get_backend("wgpu")
        try:
            with undone(*changes):
                sec, c = multiply(b, a, bm, tile, reps, t.split, t.unroll)
        finally:
            b.close()
        got.setdefault(label, []).append(flops / sec / 1e12)
        bits.setdefault("all", set()).add(hashlib.sha256(c.tobytes()).hexdigest())
    same = "C bit-identical in all runs" if len(bits["all"]) == 1 else "C DIFFERS between runs"
    print(f"  library matmul {n}^3, tile {tile}: " + "; ".join(
        f"{k} {' / '.join(f'{x:.3g}' for x in v)} TFLOP/s" for k, v in got.items()) + f"; {same}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=12)
    ap.add_argument("--matmul", type=int, default=0, metavar="N")
    ap.add_argument("--matmul-reps", type=int, default=7)
    ap.add_argument("--json")
    a = ap.parse_args()
    b: Any = vyre.get_backend("wgpu")  # (its device and generate: wgpu's own)
    raw = RawWgpuPeer(b.capabilities().device)
    dev = b.device
    salt = [random.randrange(1 << 20, 1 << 23)]  # f32-exact, unlikely seen before

    def fresh() -> Program:
        salt[0] += 1
        return compile_probe_program(salt[0])

    def gen(*changes: str, edit: Callable[[str], str] = lambda s: s) -> Callable[[], str]:
        def make() -> str:
            with undone(*changes):
                return edit(b.generate(fresh()).source)
        return make

    def raw_source() -> str:
        salt[0] += 1
        return WGSL_SAXPY.replace("p.a * x[i]", f"p.a * x[i] + {salt[0]}.0")

    def trivial() -> str:
        salt[0] += 1
        return ("@group(0) @binding(0) var<storage, read_write> o: array<u32>;\n"
                f"@compute @workgroup_size(256) fn main() {{ o[0] = {salt[0]}u; }}\n")

    variants: dict[str, Callable[[], str]] = {
        "raw peer's WGSL": raw_source,
        "trivial shader (fixed cost)": trivial,
        "main": gen(*ALL),
        "branch": gen(),
        "branch -facts": gen("facts"),
        "branch +let": gen(edit=single_lets),
        "branch -builtins": gen("builtins"),
        "branch -hoist": gen("hoist"),
    }
    got: dict[str, list[int]] = {}
    chars: dict[str, int] = {}

    def driver(name: str, make: Callable[[], str]) -> None:
        src = make()
        chars[name] = len(src)
        t0 = _T()
        sm = dev.create_shader_module(code=src)
        dev.create_compute_pipeline(layout="auto", compute={"module": sm, "entry_point": "main"})
        got.setdefault(name, []).append(_T() - t0)

    def raw_cold() -> None:
        code = raw_source()
        t0 = _T()
        sm = raw.dev.create_shader_module(code=code)
        raw.dev.create_compute_pipeline(layout="auto", compute={"module": sm, "entry_point": "main"})
        got.setdefault("RAW PEER cold compile (bench)", []).append(_T() - t0)

    def vyre_cold(*changes: str) -> Callable[[], None]:
        def run() -> None:
            prog = fresh()
            with undone(*changes):
                t0 = _T()
                b.compile(prog)
                got.setdefault(f"VYRE compile() cold, {'main' if changes else 'branch'}",
                               []).append(_T() - t0)
        return run

    cases: list[Callable[[], None]] = [raw_cold, vyre_cold(), vyre_cold(*ALL)]
    cases += [(lambda n=n, f=f: driver(n, f)) for n, f in variants.items()]  # type: ignore[misc]
    for f in cases:  # warm-up
        f()
    got.clear()
    for r in range(a.rounds):
        first = r % len(cases)
        for f in cases[first:] + cases[:first]:
            f()
    raw_med = statistics.median(got["RAW PEER cold compile (bench)"])
    print(f"wgpu cold compile on {b.capabilities().device}, {a.rounds} rounds (ms; raw/x: the "
          "raw peer's median over this one, the bench's ratio)")
    print(f"  {'variant':48s} {'chars':>6s} {'median':>8s} {'min':>8s} {'raw/x':>6s}")
    out: dict[str, dict[str, Any]] = {}
    for k, v in got.items():
        med, mn = statistics.median(v) / 1e6, min(v) / 1e6
        out[k] = {"median_ms": med, "min_ms": mn, "chars": chars.get(k)}
        c = str(chars[k]) if k in chars else ""
        print(f"  {k:48s} {c:>6s} {med:8.2f} {mn:8.2f} {raw_med / 1e6 / med:6.2f}")
    if a.matmul:
        matmul_check(a.matmul, a.matmul_reps)
    if a.json:
        with open(a.json, "w") as fh:
            json.dump(out, fh, indent=2)
    raw.close()
    b.close()


if __name__ == "__main__":
    main()
