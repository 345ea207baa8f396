"""What the wgpu driver's cold compile costs per spelling of the bench's compile program
(issue 17: wgpu compile.cold against raw wgpu-py):

    python scripts/wgpu_compile_spellings.py [--rounds N] [--json out.json]

Every variant is a never-seen shader (a fresh float constant in each: NVIDIA's driver caches
compiled shaders on disk) compiled with the raw peer's calls (create_shader_module, then
create_compute_pipeline with layout "auto") on vyre's device; each round compiles every
variant once, in a rotating order. Reports median / min ms of the module, the pipeline and
both, and the median over the raw peer's. Variants:
- the raw peer's WGSL (vyre's computation, `y = (a*x + y)*0.5 + c`, hand-written), the
  saxpy plus a constant it compiled before, and a trivial shader (the driver's fixed cost);
- vyre's WGSL as generated, and transformed copies that price one feature each: the
  plain f32 fences as calls of helper functions (vyre's spelling before they were written
  in place), one zero uniform for every fence, the comments stripped, the constants
  unfenced, every fence dropped, the logical lengths read with arrayLength (the last
  three are NOT exact: measurement only);
- vyre's own `compile()` of a never-seen program, end to end (its Python included), in
  the same rounds.
--only-generated keeps the raw shaders and vyre's WGSL as generated: for an older vyre
tree on PYTHONPATH, whose spelling the edits may not match.
Runs on any wgpu adapter (lavapipe here, NVIDIA Vulkan on the H100).
"""

from __future__ import annotations

import argparse
import json
import random
import re
import statistics
import time
from collections.abc import Callable
from typing import Any

import vyre
from vyre.tools.bench.peers import WGSL_SAXPY, wgsl_compile_source
from vyre.tools.bench.vyre_impl import compile_probe_program

_T = time.perf_counter_ns


_FENCE = re.compile(r"bitcast<f32>\(bitcast<u32>\(")
_ZERO = re.compile(r"\) \+ vy_u\.(vy_zero\d?)\)")


def _rewrite_fences(src: str, spell: Callable[[str, str], str]) -> str:
    """Every plain f32 fence in the entry point, `bitcast<f32>(bitcast<u32>(e) + zero)`,
    replaced by spell(zero's field, e), the argument rewritten too."""
    head, sep, body = src.partition("@compute")

    def go(text: str) -> str:
        out, pos = [], 0
        for m in _FENCE.finditer(text):
            if m.start() < pos:
                continue
            j, depth = m.end(), 1
            while depth:
                depth += {"(": 1, ")": -1}.get(text[j], 0)
                j += 1
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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--only-generated", action="store_true",
                    help="the raw shaders and vyre's WGSL as generated only (for an older "
                         "tree on PYTHONPATH, whose spelling the edits may not match)")
    ap.add_argument("--json")
    a = ap.parse_args()
    b: Any = vyre.get_backend("wgpu")
    dev = b.device
    salt = [random.randrange(1 << 20, 1 << 23)]  # f32-exact, unlikely seen before

    def fresh() -> int:
        salt[0] += 1
        return salt[0]

    def vy(edit: Callable[[str], str] = lambda s: s) -> Callable[[], str]:
        return lambda: edit(b.generate(compile_probe_program(fresh())).source)

    def raw() -> str:  # the bench's raw peer: vyre's computation, hand-written
        return wgsl_compile_source(fresh())

    def raw_saxpy() -> str:
        return WGSL_SAXPY.replace("p.a * x[i]", f"p.a * x[i] + {fresh()}.0")

    def trivial() -> str:
        return ("@group(0) @binding(0) var<storage, read_write> o: array<u32>;\n"
                f"@compute @workgroup_size(256) fn main() {{ o[0] = {fresh()}u; }}\n")

    variants: dict[str, Callable[[], str]] = {
        "raw peer's WGSL": raw,
        "raw saxpy + constant (the peer before)": raw_saxpy,
        "trivial shader": trivial,
        "vyre as generated": vy(),
    }
    if not a.only_generated:
        variants.update({
            "vyre, fences as helper calls": vy(fence_calls),
            "vyre, one zero uniform": vy(one_zero),
            "vyre, comments stripped": vy(no_comments),
            "vyre, constants unfenced (NOT exact)": vy(unfenced_constants),
            "vyre, no fences (NOT exact)": vy(no_fences),
            "vyre, arrayLength (NOT exact)": vy(array_lengths),
            "vyre, no fences/comments (NOT exact)": vy(lambda s: no_comments(no_fences(s))),
        })
    for f in variants.values():  # each must compile (and warms the process up)
        code = f()
        dev.create_compute_pipeline(layout="auto", compute={
            "module": dev.create_shader_module(code=code), "entry_point": "main"})
    for _ in range(2):  # compile()'s first use of each code path stays out of the figures
        b.compile(compile_probe_program(fresh()))
    end_to_end = "vyre compile() cold, end to end"
    times: dict[str, dict[str, list[float]]] = {k: {"module": [], "pipeline": [], "both": []}
                                                for k in [*variants, end_to_end]}
    names = [*variants, end_to_end]
    for r in range(a.rounds):
        for k in names[r % len(names):] + names[:r % len(names)]:
            if k == end_to_end:
                p = compile_probe_program(fresh())
                t0 = _T()
                b.compile(p)
                times[k]["both"].append((_T() - t0) / 1e6)
                continue
            code = variants[k]()
            t0 = _T()
            mod = dev.create_shader_module(code=code)
            t1 = _T()
            dev.create_compute_pipeline(layout="auto",
                                        compute={"module": mod, "entry_point": "main"})
            t2 = _T()
            times[k]["module"].append((t1 - t0) / 1e6)
            times[k]["pipeline"].append((t2 - t1) / 1e6)
            times[k]["both"].append((t2 - t0) / 1e6)
    raw_med = statistics.median(times["raw peer's WGSL"]["both"])
    print(f"wgpu driver cold compile on {b.capabilities().device} ({a.rounds} rounds, ms; "
          f"module = create_shader_module, pipeline = create_compute_pipeline):")
    print(f"  {'variant':40s} {'module':>7s} {'pipeline':>9s} {'both':>7s} {'min':>7s} "
          f"{'raw/x':>6s} {'chars':>6s}")
    for k in names:
        t = times[k]
        both = statistics.median(t["both"])
        parts = (f"{statistics.median(t['module']):7.3f} {statistics.median(t['pipeline']):9.3f}"
                 if t["module"] else f"{'':7s} {'':9s}")
        chars = f"{len(variants[k]()):6d}" if k in variants else ""
        print(f"  {k:40s} {parts} {both:7.3f} {min(t['both']):7.3f} {raw_med / both:6.2f} "
              f"{chars}")
    if a.json:
        with open(a.json, "w") as fh:
            json.dump(times, fh)
    b.close()


if __name__ == "__main__":
    main()
