#!/usr/bin/env python3
"""What vyre's f64 trunc and round cost on this wgpu adapter, against the driver's own.

vyre spells f64 trunc / round itself on every device with i64 (wgpu/maths.py, `_integral_f64`:
lavapipe's own are wrong on a host without AVX-512). This runs, per operation, a kernel of
8 roundings per element (of x + 0, x + 0.25, ..., x + 1.75, summed) with vyre's spelling
and with the driver's WGSL builtin (the printer's helper swapped for one that calls it:
wrong on such a lavapipe, so for this measurement only), plus the same kernel without
roundings (its adds, loads and stores) and with the driver's floor. Prints, per kernel,
the best of --repeat interleaved dispatches in wall time (a GPU) and in process CPU time
(lavapipe, whose threads are the process's: steadier on a loaded host), and the rounding
part over the kernel without roundings. About 15 s of CPU time on lavapipe.

    python3 scripts/f64_rounding_bench.py            # the default adapter
    python3 scripts/f64_rounding_bench.py --n 4194304 --repeat 40
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import vyre
from vyre import DispatchConfig, ProgramBuilder, ScalarType
from vyre.backends.wgpu import expressions, spelling
from vyre.builder import floor, round_, trunc

F64 = ScalarType.F64
OFFSETS = (0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 1.75)
DRIVER = {"trunc": "fn vy_trunc_f64(x: f64) -> f64 { return trunc(x); }",
          "round": "fn vy_round_even_f64(x: f64) -> f64 { return round(x); }"}


def kernel(name: str, fn: Callable[[Any], Any]) -> vyre.Program:
    k = ProgramBuilder(f"f64_rounding_{name}", workgroup_size=256)
    x, o = k.buffer("x", F64), k.buffer("o", F64, "write")
    i = k.global_id()
    v = k.let(x[i])
    acc = fn(v)
    for c in OFFSETS:
        acc = acc + fn(v + c)
    o[i] = acc
    return k.build()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1 << 20, help="elements (a multiple of 256)")
    ap.add_argument("--repeat", type=int, default=40)
    args = ap.parse_args()
    be = vyre.get_backend("wgpu")
    if not be.supports("f64") or not be.supports("i64"):
        sys.exit(f"{be.id}: no f64 / i64 here (vyre keeps the driver's trunc / round then)")
    rng = np.random.default_rng(0)
    x = rng.standard_normal(args.n) * np.exp2(rng.integers(-30, 60, args.n))
    bx, bo = be.allocate_device_buffer(8 * args.n), be.allocate_device_buffer(8 * args.n)
    be.write(bx, x)
    cfg = DispatchConfig(grid=(args.n // 256, 1, 1))

    def run(p: vyre.Program) -> None:
        be.dispatch_with_device_buffers(p, [bx], [bo], cfg)
        be.synchronize()

    progs = {"no rounding": kernel("none", lambda v: v), "floor (driver)": kernel("floor", floor),
             "trunc (vyre)": kernel("trunc", trunc), "round (vyre)": kernel("round", round_)}
    for p in progs.values():
        run(p)  # compiled with vyre's spelling
    mine = expressions._integral_f64  # (the name _call reads)
    try:  # the driver's builtins, compiled now (a pipeline is made at its first dispatch)
        expressions._integral_f64 = lambda ctx, fn: spelling._helper(
            ctx, DRIVER[fn].split()[1].split("(")[0], DRIVER[fn])
        for name, fn in (("trunc", trunc), ("round", round_)):
            progs[f"{name} (driver)"] = p = kernel(f"{name}_driver", fn)
            run(p)
            assert f"return {name}(x)" in be.source(p)
    finally:
        expressions._integral_f64 = mine
    wall = dict.fromkeys(progs, float("inf"))
    cpu = dict.fromkeys(progs, float("inf"))
    for _ in range(args.repeat):
        for name, p in progs.items():
            t, c = time.perf_counter(), time.process_time()
            run(p)
            wall[name] = min(wall[name], time.perf_counter() - t)
            cpu[name] = min(cpu[name], time.process_time() - c)
    print(f"{be.id} ({be.capabilities().details.get('adapter', '')}): {args.n} elements x 8 "
          f"roundings, best of {args.repeat}")
    print(f"{'kernel':16s} {'wall ms':>9s} {'(+rounding)':>12s} {'cpu ms':>9s} {'(+rounding)':>12s}")
    for name in progs:
        w, c = wall[name] * 1e3, cpu[name] * 1e3
        dw, dc = w - wall["no rounding"] * 1e3, c - cpu["no rounding"] * 1e3
        print(f"{name:16s} {w:9.2f} {dw:+12.2f} {c:9.2f} {dc:+12.2f}")
    bx.free()
    bo.free()
    be.close()


if __name__ == "__main__":
    main()
