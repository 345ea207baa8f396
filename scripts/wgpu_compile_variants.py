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
- measurement only, not exact: "x load as clamped select" (the remaining guarded load as
  `select(0, b_x[min(i, n - 1)], i < n)`), "constants unfenced", "both".
Prints one table: median / min ms per variant and the raw peer's median over it.
--roundtrip also splits dispatch.roundtrip (one dispatch of the bench's inc program, then
wait): the raw peer; vyre (`dispatch_with_device_buffers` + `synchronize`); vyre's own
pipeline and bind group driven by the raw peer's calls on vyre's device (so vyre's
Python is the difference to vyre's figure); the raw peer's pipeline on vyre's device (so
vyre's shader and bind group are the difference to the previous line, and the device the
difference to the raw peer). Median / min us over interleaved blocks.
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
from vyre.builder import ProgramBuilder
from vyre.ir.nodes import Program
from vyre.ir.types import ScalarType
from vyre.lower import facts
from vyre.tools.bench.peers import WGSL_SAXPY, RawWgpuPeer
from vyre.tools.bench.vyre_impl import WG

_T = time.perf_counter_ns
ALL = ("facts", "builtins", "hoist")  # this branch's WGSL changes (see `undone`)


def probe(salt: int) -> Program:
    """vyre.tools.bench.vyre_impl.compile_probe_program with a constant unique to `salt`
    (the bench's is salt % 1000: a driver's on-disk cache may have seen it)."""
    k = ProgramBuilder(f"bench_compile_{salt}", workgroup_size=WG)
    x = k.buffer("x", ScalarType.F32)
    y = k.buffer("y", ScalarType.F32, "read_write")
    a = k.param("a", ScalarType.F32)
    i = k.global_linear_id()
    with k.if_(i < y.length()):
        v = k.let(a * x[i] + y[i])
        y[i] = v * 0.5 + float(salt)
    return k.build()


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


def clamped_x_load(src: str) -> str:
    m = re.search(r"var (v_\w+): f32 = ([^;]+);\n\s*if \(\((.+) < (vy_u\.n_\d+)\)\) \{\n"
                  r"\s*\1 = (b_\w+)\[.+\];\n\s*\}", src)
    if m is None:
        return src
    var, zero, i, n, buf = m.groups()
    return src.replace(m.group(0), f"let {var}: f32 = select({zero}, {buf}[min({i}, {n} - 1u)], "
                                   f"({i}) < {n});")


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


def unfenced_constants(src: str) -> str:
    return re.sub(r"vy_fence\d+_f32\(([-0-9.e]+f)\)", r"\1", src)


def roundtrip(b: Any, raw: RawWgpuPeer, blocks: int, per_block: int) -> dict[str, list[float]]:
    import numpy as np

    from vyre.config import DispatchConfig
    from vyre.tools.bench.peers import WGSL_INC, _grid
    from vyre.tools.bench.vyre_impl import inc_program

    n = 1024
    y0 = np.zeros(n, np.uint32)
    y = b.allocate_device_buffer(n * 4)
    b.write(y, y0)
    bound = b.bind(inc_program(), [], [y], DispatchConfig.for_elements(n, WG))
    b.dispatch_with_device_buffers(bound)
    b.synchronize()
    rec = bound.launch.record  # (measurement only: vyre's prepared pipeline and bind group)
    ry = raw._buffer(y0)
    rpipe, rbg = raw._kernel(WGSL_INC, [ry])
    g = (_grid(n), 1, 1)
    dev = b.device
    # the raw peer's pipeline on vyre's device
    vy = dev.create_buffer_with_data(data=y0.tobytes(), usage=0x80 | 0x8 | 0x4)  # STORAGE|COPY_*
    sm = dev.create_shader_module(code=WGSL_INC)
    dpipe = dev.create_compute_pipeline(layout="auto", compute={"module": sm, "entry_point": "main"})
    dbg = dev.create_bind_group(layout=dpipe.get_bind_group_layout(0), entries=[
        {"binding": 0, "resource": {"buffer": vy, "offset": 0, "size": vy.size}}])

    def on(d: Any, pipe: Any, bg: Any, grid: tuple[int, int, int]) -> Callable[[], None]:
        def go() -> None:
            enc = d.create_command_encoder()
            cp = enc.begin_compute_pass()
            cp.set_pipeline(pipe)
            cp.set_bind_group(0, bg)
            cp.dispatch_workgroups(*grid)
            cp.end()
            d.queue.submit([enc.finish()])
            d._poll_wait()
        return go

    def vyre_rt() -> None:
        b.dispatch_with_device_buffers(bound)
        b.synchronize()

    cases = {
        "RT raw peer": on(raw.dev, rpipe, rbg, g),
        "RT vyre dispatch + synchronize": vyre_rt,
        "RT vyre's pipeline + bind group, raw calls": on(dev, rec.pipeline, rec.bind_group,
                                                        rec.direct),
        "RT raw peer's pipeline on vyre's device": on(dev, dpipe, dbg, g),
    }
    out: dict[str, list[float]] = {k: [] for k in cases}
    for f in cases.values():
        for _ in range(per_block):
            f()
    for r in range(blocks):
        names = list(cases)
        names = names[r % len(names):] + names[:r % len(names)]
        for k in names:
            f = cases[k]
            t0 = _T()
            for _ in range(per_block):
                f()
            out[k].append((_T() - t0) / per_block / 1e3)
    b.free(y)
    ry.destroy()
    vy.destroy()
    return out


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
    ap.add_argument("--roundtrip", action="store_true")
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
        return probe(salt[0])

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
        "branch, x load as clamped select (NOT exact)": gen(edit=clamped_x_load),
        "branch, constants unfenced (NOT exact)": gen(edit=unfenced_constants),
        "branch, both edits (NOT exact)": gen(
            edit=lambda s: unfenced_constants(clamped_x_load(s))),
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
    if a.roundtrip:
        rt = roundtrip(b, raw, 15, 100)
        base = statistics.median(rt["RT raw peer"])
        print(f"  {'dispatch.roundtrip (us)':55s} {'median':>8s} {'min':>8s} {'raw/x':>6s}")
        for k, us in rt.items():
            med = statistics.median(us)
            out[k] = {"median_us": med, "min_us": min(us)}
            print(f"  {k:55s} {med:8.1f} {min(us):8.1f} {base / med:6.2f}")
    if a.matmul:
        matmul_check(a.matmul, a.matmul_reps)
    if a.json:
        with open(a.json, "w") as fh:
            json.dump(out, fh, indent=2)
    raw.close()
    b.close()


if __name__ == "__main__":
    main()
