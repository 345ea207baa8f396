"""Where vyre's wgpu cold compile goes, next to the raw wgpu-py peer of `vyre bench`'s
compile.cold (issue 17):

    python scripts/wgpu_compile_split.py [--stages] [--spellings [--only-generated]]
                                         [--rounds N] [--json out.json]

Every timed compile is of a never-seen shader or Program (a fresh f32-exact constant in
each: drivers cache compiled shaders, NVIDIA's on disk across processes). Each round runs
every measurement of the chosen sections once, in a rotating order; the table gives the
median and min ms over the rounds, raw/x (the raw peer's median over the row's: the bench's
ratio), the driver's time split into create_shader_module / create_compute_pipeline, this
thread's CPU (steadier on a shared host; a driver that compiles on other threads hides work
from it) and the shader's size. Always measured:
- the raw peer's cold compile (the bench's hand-written kernel, its calls, its device);
- vyre's `compile()` of a never-seen Program, end to end (its Python included);
- the driver alone on vyre's device with the raw peer's calls (layout "auto"): the raw
  peer's WGSL (so vyre's device is the difference to the first row), a trivial shader (the
  driver's fixed cost) and vyre's WGSL as generated.
--stages (the default with no section named) splits vyre's compile on another fresh
Program: content hash, feature and limit checks, generate = lower + print WGSL (this
thread's CPU), then the driver's create_shader_module, the bind group and pipeline
layouts (vyre makes them once per binding shape) and create_compute_pipeline.
--spellings prices each feature of vyre's WGSL with the driver alone, on transformed copies
of the generated source: the plain f32 fences as calls of helper functions (vyre's
spelling before they were written in place), one zero uniform for every fence, comments
stripped; NOT exact, measurement only: constants unfenced, every fence dropped, the logical
lengths read with arrayLength, guarded loads unguarded, and those edits together. Also the
peer's saxpy plus a constant (its kernel before the bench compared like with like).
An edit that does not change the generated source on this adapter is left out, with a
note (tests/test_compile_split_script.py requires every one on lavapipe, so a printer
change cannot leave one silently pricing nothing). --only-generated leaves out all edits
(for an older vyre tree on PYTHONPATH, whose spelling they may not match).
Runs on any wgpu adapter (lavapipe here, NVIDIA Vulkan on the H100); 10 rounds of both
sections take a few seconds on lavapipe. (Folds the former wgpu_compile_overhead.py,
whose stage split is --stages, wgpu_compile_spellings.py, now --spellings, and
wgpu_compile_variants.py; the dispatch split is scripts/wgpu_dispatch_split.py.)
"""

from __future__ import annotations

import argparse
import functools
import json
import random
import re
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import vyre
from vyre.binding import check_program_fits
from vyre.ir.nodes import Program
from vyre.tools.bench.peers import WGSL_SAXPY, RawWgpuPeer, wgsl_compile_source
from vyre.tools.bench.vyre_impl import compile_probe_program

_T = time.perf_counter_ns
_CPU = time.thread_time_ns
RAW = "raw peer: cold compile (its device)"
COLUMNS = ("module", "pipeline", "cpu")


@dataclass
class Row:
    """One line of the table: samples in ns per column ("ms": the row's own figure, wall
    time unless its name says CPU)."""

    whole: bool = True  # a whole compile: raw/x applies (else a part of one)
    chars: int | None = None
    ns: dict[str, list[int]] = field(default_factory=dict)

    def add(self, column: str, ns: int) -> None:
        self.ns.setdefault(column, []).append(ns)

    def median_ms(self, column: str = "ms") -> float | None:
        v = self.ns.get(column)
        return statistics.median(v) / 1e6 if v else None


# ------------------------------------------------------------------ spellings of vyre's WGSL

_FENCE = re.compile(r"bitcast<f32>\(bitcast<u32>\(")
_ZERO = re.compile(r"\) \+ vy_u\.(vy_zero\d?)\)")


def _close(text: str, j: int) -> int:
    """The index just past the parenthesis closing the one open before `j`."""
    depth = 1
    while depth:
        depth += {"(": 1, ")": -1}.get(text[j], 0)
        j += 1
    return j


def _rewrite_fences(src: str, spell: Callable[[str, str], str]) -> str:
    """Every plain f32 fence in the entry point, `bitcast<f32>(bitcast<u32>(e) + zero)`,
    replaced by spell(zero's field, e), the argument rewritten too."""
    head, sep, body = src.partition("@compute")

    def go(text: str) -> str:
        out, pos = [], 0
        for m in _FENCE.finditer(text):
            if m.start() < pos:
                continue
            j = _close(text, m.end())
            z = _ZERO.match(text, j - 1)
            if z is None:  # not a fence (a bitcast of something else)
                continue
            out += [text[pos:m.start()], spell(z.group(1), go(text[m.end():j - 1]))]
            pos = z.end()
        return "".join(out) + text[pos:]
    return head + sep + go(body)


def fence_calls(src: str) -> str:
    """The fences as calls of one helper function per uniform (vyre's spelling before)."""
    used: set[str] = set()

    def call(z: str, arg: str) -> str:
        used.add(z)
        return f"vy_f_{z}({arg})"
    out = _rewrite_fences(src, call)
    defs = "".join(f"fn vy_f_{z}(x: f32) -> f32 {{\n    return bitcast<f32>(bitcast<u32>(x) + "
                   f"vy_u.{z});\n}}\n" for z in sorted(used))
    return out.replace("@compute", defs + "\n@compute", 1)


def one_zero(src: str) -> str:
    return _rewrite_fences(src, lambda z, arg: f"bitcast<f32>(bitcast<u32>({arg}) + vy_u.vy_zero)")


def no_fences(src: str) -> str:
    return _rewrite_fences(src, lambda z, arg: f"({arg})")


def unfenced_constants(src: str) -> str:
    return _rewrite_fences(src, lambda z, arg: arg if re.fullmatch(r"[-0-9.e]+f", arg) else
                           f"bitcast<f32>(bitcast<u32>({arg}) + vy_u.{z})")


def no_comments(src: str) -> str:
    return re.sub(r"[ \t]*//[^\n]*", "", src)


def array_lengths(src: str) -> str:
    bufs = re.findall(r"var<storage, [\w_]+> (b_\w+): array", src)
    for j, b in enumerate(bufs):
        src = src.replace(f"vy_u.n_{j}", f"arrayLength(&{b})")
    return src


def unguarded_loads(src: str) -> str:
    """Every guarded load, `select(zero, b_x[i], (i < vy_u.n_k))`, as the bare `b_x[i]`."""
    out, pos = [], 0
    while (j := src.find("select(", pos)) >= 0:
        end = _close(src, j + len("select("))
        args, depth, start = [], 0, j + len("select(")
        for k in range(start, end - 1):
            depth += {"(": 1, ")": -1, "[": 1, "]": -1}.get(src[k], 0)
            if src[k] == "," and depth == 0:
                args.append(src[start:k].strip())
                start = k + 1
        args.append(src[start:end - 1].strip())
        load = args[1] if len(args) == 3 else ""
        if re.fullmatch(r"b_\w+\[.*\]", load) and "vy_u.n_" in args[2]:
            out += [src[pos:j], load]
        else:
            out.append(src[pos:end])
        pos = end
    return "".join(out) + src[pos:]


EDITS: dict[str, Callable[[str], str]] = {
    "vyre, fences as helper calls": fence_calls,
    "vyre, one zero uniform": one_zero,
    "vyre, comments stripped": no_comments,
    "vyre, constants unfenced (NOT exact)": unfenced_constants,
    "vyre, no fences (NOT exact)": no_fences,
    "vyre, arrayLength (NOT exact)": array_lengths,
    "vyre, loads unguarded (NOT exact)": unguarded_loads,
    "vyre, no fences/comments (NOT exact)": lambda s: no_comments(no_fences(s)),
    "vyre, the NOT-exact edits together": lambda s: no_comments(no_fences(
        unguarded_loads(array_lengths(s)))),
}


# ------------------------------------------------------------------ measuring


class Split:
    """The measurements, on one vyre wgpu backend and the raw peer's own device."""

    def __init__(self) -> None:
        b: Any = vyre.get_backend("wgpu")  # (its device and generate: wgpu's own)
        self.b = b
        self.raw = RawWgpuPeer(b.capabilities().device)
        self.dev = b.device
        self.salt = random.randrange(1 << 20, 1 << 23)  # f32-exact, unlikely seen before
        self.rows: dict[str, Row] = {}

    def close(self) -> None:
        self.raw.close()
        self.b.close()

    def fresh(self) -> int:
        self.salt += 1
        return self.salt

    def program(self) -> Program:
        return compile_probe_program(self.fresh())

    def row(self, name: str, whole: bool = True) -> Row:
        return self.rows.setdefault(name, Row(whole=whole))

    # sources, each never seen before
    def raw_source(self) -> str:  # the bench's raw peer: vyre's computation, hand-written
        return wgsl_compile_source(self.fresh())

    def raw_saxpy(self) -> str:
        return WGSL_SAXPY.replace("p.a * x[i]", f"p.a * x[i] + {self.fresh()}.0")

    def trivial(self) -> str:
        return ("@group(0) @binding(0) var<storage, read_write> o: array<u32>;\n"
                f"@compute @workgroup_size(256) fn main() {{ o[0] = {self.fresh()}u; }}\n")

    def vyre_source(self, edit: Callable[[str], str] = lambda s: s) -> Callable[[], str]:
        return lambda: edit(self.b.generate(self.program()).source)

    # timed cases: each adds one sample to its row(s)
    def driver(self, name: str, source: Callable[[], str], dev: Any = None) -> None:
        """The raw peer's calls: create_shader_module, create_compute_pipeline ("auto")."""
        dev = dev or self.dev
        code = source()
        r = self.row(name)
        r.chars = len(code)
        c0, t0 = _CPU(), _T()
        mod = dev.create_shader_module(code=code)
        t1 = _T()
        dev.create_compute_pipeline(layout="auto", compute={"module": mod, "entry_point": "main"})
        t2, c2 = _T(), _CPU()
        r.add("ms", t2 - t0)
        r.add("module", t1 - t0)
        r.add("pipeline", t2 - t1)
        r.add("cpu", c2 - c0)

    def vyre_cold(self) -> None:
        prog = self.program()
        c0, t0 = _CPU(), _T()
        self.b.compile(prog)
        t1, c1 = _T(), _CPU()
        r = self.row("vyre compile(), cold, end to end")
        r.add("ms", t1 - t0)
        r.add("cpu", c1 - c0)

    def stages(self) -> None:
        """vyre's compile in its stages, each timed alone, on one fresh Program."""
        b, dev, prog = self.b, self.dev, self.program()
        t0 = _CPU()
        _ = prog.content_hash
        t1 = _CPU()
        check_program_fits(b, prog)
        t2 = _CPU()
        mod = b.generate(prog)
        t3 = _CPU()
        self.row("stage: content hash (CPU)", False).add("ms", t1 - t0)
        self.row("stage: feature/limit checks (CPU)", False).add("ms", t2 - t1)
        self.row("stage: generate = lower + WGSL (CPU)", False).add("ms", t3 - t2)
        t3 = _T()
        sm = dev.create_shader_module(label=prog.name, code=mod.source)
        t4 = _T()
        u = b._device.wgpu.ShaderStage.COMPUTE
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
        self.row("stage: create_shader_module", False).add("ms", t4 - t3)
        self.row("stage: bind group + pipeline layouts (once per shape)", False).add(
            "ms", t5 - t4)
        self.row("stage: create_compute_pipeline", False).add("ms", t6 - t5)

    def cases(self, stages: bool, spellings: bool,
              only_generated: bool) -> list[Callable[[], None]]:
        drivers: dict[str, Callable[[], str]] = {
            "driver: raw peer's WGSL, vyre's device": self.raw_source,
            "driver: trivial shader (fixed cost)": self.trivial,
            "driver: vyre's WGSL as generated": self.vyre_source(),
        }
        if spellings:
            drivers["driver: raw saxpy + constant (the peer before)"] = self.raw_saxpy
            if not only_generated:
                sample = self.vyre_source()()
                for name, edit in EDITS.items():
                    if edit(sample) == sample:  # (tests/test_compile_split_script.py)
                        print(f"left out {name!r}: it does not change vyre's WGSL on this "
                              "adapter (nothing of what it edits, or a spelling it does not "
                              "know)", file=sys.stderr)
                        continue
                    drivers[f"driver: {name}"] = self.vyre_source(edit)
        cases: list[Callable[[], None]] = [
            lambda: self.driver(RAW, self.raw_source, self.raw.dev), self.vyre_cold]
        cases += [functools.partial(self.driver, n, f) for n, f in drivers.items()]
        if stages:
            cases.append(self.stages)
        return cases


def run_rounds(cases: list[Callable[[], None]], rounds: int) -> None:
    """Every case once per round, in a rotating order (so no case always follows another)."""
    for r in range(rounds):
        first = r % len(cases)
        for f in cases[first:] + cases[:first]:
            f()


def table(rows: dict[str, Row]) -> dict[str, dict[str, Any]]:
    """Print the table; returns its figures (for --json)."""
    raw = rows[RAW].median_ms() or 0.0
    print(f"  {'':54s} {'median':>7s} {'min':>7s} {'raw/x':>6s} {'module':>7s} "
          f"{'pipeline':>8s} {'CPU':>7s} {'chars':>6s}")
    out: dict[str, dict[str, Any]] = {}
    for name, r in rows.items():
        med = r.median_ms() or 0.0
        fig: dict[str, Any] = {"median_ms": med, "min_ms": min(r.ns["ms"]) / 1e6,
                               "chars": r.chars}
        fig |= {f"{c}_median_ms": r.median_ms(c) for c in COLUMNS if c in r.ns}
        out[name] = fig
        ratio = f"{raw / med:6.2f}" if r.whole and med else ""
        cols = [f"{x:7.3f}" if (x := r.median_ms(c)) is not None else "" for c in COLUMNS]
        print(f"  {name:54s} {med:7.3f} {fig['min_ms']:7.3f} {ratio:>6s} {cols[0]:>7s} "
              f"{cols[1]:>8s} {cols[2]:>7s} {r.chars or '':>6}")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--stages", action="store_true", help="vyre's compile split in stages")
    ap.add_argument("--spellings", action="store_true",
                    help="the driver on transformed copies of vyre's WGSL")
    ap.add_argument("--only-generated", action="store_true",
                    help="with --spellings: no edits (an older tree on PYTHONPATH)")
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--json")
    a = ap.parse_args()
    stages = a.stages or not a.spellings
    s = Split()
    try:
        cases = s.cases(stages, a.spellings, a.only_generated)
        for f in cases:  # warm-up: each code path's first use stays out of the figures
            f()
        s.vyre_cold()
        s.rows.clear()
        run_rounds(cases, a.rounds)
        print(f"wgpu cold compile on {s.b.capabilities().device}, {a.rounds} rounds (ms; "
              "raw/x: the raw peer's median over the row's; module / pipeline: "
              "create_shader_module / create_compute_pipeline; CPU: this thread's)")
        out = table(s.rows)
    finally:
        s.close()
    if a.json:
        with open(a.json, "w") as fh:
            json.dump(out, fh, indent=2)


if __name__ == "__main__":
    main()
