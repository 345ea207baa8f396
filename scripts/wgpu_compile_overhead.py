"""Where vyre's wgpu cold compile goes, next to the raw wgpu-py peer of `vyre bench`:

    python scripts/wgpu_compile_overhead.py [--rounds N] [--variants] [--json out.json]

Per round, a never-seen program (bench's compile.cold probe, new salt) and a never-seen raw
shader (the peer's saxpy with a new constant): the raw peer (create_shader_module +
create_compute_pipeline, layout "auto"); vyre's WgpuBackend.compile; and vyre's compile
split into its stages, each timed alone on another fresh program (content hash, feature
and limit checks, generate = lower + print WGSL, create_shader_module, bind group and
pipeline layouts, create_compute_pipeline). Also the driver's time for vyre's WGSL with
layout "auto" (the peer's way), and for the raw WGSL with an explicit layout, to tell the
shader's cost from the layout's, and the raw shader on vyre's device (vyre asks for more
features and limits than the peer), to tell the device's cost from the shader's. Figures: median and min ms over rounds, interleaved: wall time, and for the
Python stages and the totals also this thread's CPU time (steadier on a shared host; a
driver that compiles on other threads would hide work from it).
--variants also times the driver alone on vyre's WGSL as generated and on transformed
copies (comments stripped, unused builtins dropped, constants unfenced: measurement only,
not exact), to tell which part of the shader costs the driver's compiler.
Runs on any wgpu adapter (lavapipe here, NVIDIA Vulkan on the H100); ~20 rounds take a
few seconds on lavapipe.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import time
from collections.abc import Callable
from typing import Any

import vyre
from vyre.binding import check_program_fits
from vyre.tools.bench.peers import WGSL_SAXPY, RawWgpuPeer
from vyre.tools.bench.vyre_impl import compile_probe_program

_T = time.perf_counter_ns
_CPU = time.thread_time_ns


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--variants", action="store_true",
                    help="also time the driver on transformed copies of vyre's WGSL")
    ap.add_argument("--json")
    a = ap.parse_args()
    b = vyre.get_backend("wgpu")
    raw = RawWgpuPeer(b.capabilities().device)
    rdev, dev = raw.dev, b.device
    salt = [_T()]

    def fresh() -> Any:
        salt[0] += 1
        return compile_probe_program(salt[0])

    def raw_source() -> str:
        salt[0] += 1
        return WGSL_SAXPY.replace("p.a * x[i]", f"p.a * x[i] + {salt[0] % 100000}.0")

    got: dict[str, list[int]] = {}

    def add(k: str, ns: int) -> None:
        got.setdefault(k, []).append(ns)

    def raw_cold() -> None:
        code = raw_source()
        c0, t0 = _CPU(), _T()
        mod = rdev.create_shader_module(code=code)
        rdev.create_compute_pipeline(layout="auto",
                                     compute={"module": mod, "entry_point": "main"})
        add("raw peer: shader module + pipeline (auto layout)", _T() - t0)
        add("raw peer (this thread's CPU)", _CPU() - c0)

    def vyre_cold() -> None:
        prog = fresh()
        c0, t0 = _CPU(), _T()
        b.compile(prog)
        add("vyre WgpuBackend.compile, cold", _T() - t0)
        add("vyre WgpuBackend.compile, cold (this thread's CPU)", _CPU() - c0)

    def stages() -> None:
        prog = fresh()
        t0 = _CPU()
        _ = prog.content_hash
        t1 = _CPU()
        check_program_fits(b, prog)
        t2 = _CPU()
        mod = b.generate(prog)
        t3 = _CPU()
        for k, ns in (("stage: content hash (CPU)", t1 - t0),
                      ("stage: feature/limit checks (CPU)", t2 - t1),
                      ("stage: generate = lower + WGSL (CPU)", t3 - t2)):
            add(k, ns)
        t3 = _T()
        sm = dev.create_shader_module(label=prog.name, code=mod.source)
        t4 = _T()
        u = b._wgpu.ShaderStage.COMPUTE
        entries = [{"binding": 0, "visibility": u, "buffer": {"type": "uniform"}}]
        for j, acc in enumerate(mod.storage_access):
            kind = "storage" if acc == "read_write" else "read-only-storage"
            entries.append({"binding": j + 1, "visibility": u, "buffer": {"type": kind}})
        bgl = dev.create_bind_group_layout(entries=entries)
        layout = dev.create_pipeline_layout(bind_group_layouts=[bgl])
        t5 = _T()
        dev.create_compute_pipeline(label=prog.name, layout=layout,
                                    compute={"module": sm, "entry_point": mod.entry_point})
        t6 = _T()
        for k, ns in (("stage: create_shader_module (vyre WGSL)", t4 - t3),
                      ("stage: bind group + pipeline layouts (vyre: once per shape)", t5 - t4),
                      ("stage: create_compute_pipeline (vyre WGSL)", t6 - t5)):
            add(k, ns)
        # the same driver work the raw peer's way (layout "auto"), on another fresh program
        src = b.generate(fresh()).source
        t0 = _T()
        sm = dev.create_shader_module(code=src)
        dev.create_compute_pipeline(layout="auto", compute={"module": sm, "entry_point": "main"})
        add("vyre WGSL, raw peer's calls (auto layout)", _T() - t0)
        # the raw peer's shader on vyre's device (its features and limits): the device's cost
        code = raw_source()
        t0 = _T()
        sm = dev.create_shader_module(code=code)
        dev.create_compute_pipeline(layout="auto", compute={"module": sm, "entry_point": "main"})
        add("raw WGSL on vyre's device (auto layout)", _T() - t0)

    def strip_comments(src: str) -> str:
        return re.sub(r"[ \t]*//[^\n]*", "", src)

    def used_builtins_only(src: str) -> str:
        body = src[src.index(") {", src.index("fn main(")):]
        return "".join(line for line in src.splitlines(keepends=True)
                       if "@builtin(" not in line
                       or re.search(r"\b" + line.split(")")[1].split(":")[0].strip() + r"\b",
                                    body))

    def unfenced_constants(src: str) -> str:
        return re.sub(r"vy_fence\d+_f32\(([-0-9.e]+f)\)", r"\1", src)

    def inlined_fences(src: str) -> str:
        """Each call of a one-line fence helper replaced by the helper's expression."""
        helpers = dict(re.findall(
            r"fn (vy_fence\w*)\(x: f32\) -> f32 \{\s*return ([^;\n]*);\s*\}", src))
        for name, body in helpers.items():
            out, i = [], 0
            while (j := src.find(name + "(", i)) >= 0:
                if src[max(0, j - 3):j] == "fn ":  # the definition itself
                    out.append(src[i:j + len(name)])
                    i = j + len(name)
                    continue
                k, depth = j + len(name) + 1, 1
                while depth:
                    depth += {"(": 1, ")": -1}.get(src[k], 0)
                    k += 1
                arg = src[j + len(name) + 1:k - 1]
                out.append(src[i:j] + "(" + re.sub(r"\bx\b", f"({arg})", body) + ")")
                i = k
            src = "".join(out) + src[i:]
        return src

    def unchecked_loads(src: str) -> str:
        return re.sub(r"if \(([^\n]*)\) \{\n(\s*v_\w+ = b_\w+\[[^\n]*\];)\n\s*\}", r"\2",
                      src)

    variants: dict[str, Callable[[str], str]] = {
        "as generated": lambda src: src,
        "comments stripped": strip_comments,
        "unused builtins dropped": used_builtins_only,
        "fence helpers inlined (same code)": inlined_fences,
        "constants unfenced (not exact: measurement only)": unfenced_constants,
        "load bounds checks dropped (not exact: measurement only)": unchecked_loads,
        "all": lambda src: unchecked_loads(unfenced_constants(inlined_fences(
            used_builtins_only(strip_comments(src))))),
    }

    def trivial() -> None:
        """The driver's fixed cost: a never-seen shader that stores one constant."""
        salt[0] += 1
        code = ("@group(0) @binding(0) var<storage, read_write> o: array<u32>;\n"
                "@compute @workgroup_size(256) fn main() { o[0] = "
                f"{salt[0] % 1000000}u; }}\n")
        t0 = _T()
        sm = dev.create_shader_module(code=code)
        dev.create_compute_pipeline(layout="auto", compute={"module": sm, "entry_point": "main"})
        add("driver on a trivial shader (fixed cost)", _T() - t0)

    def driver_variants() -> None:
        """The driver's time (shader module + pipeline, auto layout) on vyre's WGSL as
        generated and transformed, to see what in it costs the driver's compiler."""
        for name, f in variants.items():
            src = f(b.generate(fresh()).source)
            t0 = _T()
            sm = dev.create_shader_module(code=src)
            dev.create_compute_pipeline(layout="auto",
                                        compute={"module": sm, "entry_point": "main"})
            add(f"driver on vyre WGSL, {name}", _T() - t0)

    cases: list[Callable[[], None]] = [raw_cold, vyre_cold, stages]
    if a.variants:
        cases += [driver_variants, trivial]
    for f in cases:  # warm-up
        f()
    got.clear()
    for _ in range(a.rounds):
        for f in cases:
            f()
    out = {k: {"median_ms": statistics.median(v) / 1e6, "min_ms": min(v) / 1e6}
           for k, v in got.items()}
    print(f"wgpu cold compile on {b.capabilities().device} ({a.rounds} rounds, ms):")
    for k, v in out.items():
        print(f"  {k:50s} median {v['median_ms']:7.3f}  min {v['min_ms']:7.3f}")
    sample = b.generate(fresh()).source
    print(f"  vyre WGSL {len(sample)} chars, raw {len(raw_source())} chars")
    if a.variants:
        for name, f in variants.items():
            print(f"  variant {name!r}: {len(f(sample))} chars")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=2)
    raw.close()
    b.close()


if __name__ == "__main__":
    main()
