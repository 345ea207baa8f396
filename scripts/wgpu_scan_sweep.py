#!/usr/bin/env python3
"""Time the library scan, histogram and sum on CUDA and wgpu per variant, in one run.

  python3 scripts/wgpu_scan_sweep.py [--backends wgpu,cuda:0] [--n 67108864] [--reps 10]
                                     [--warmup 0.3] [--budget 80]

The workloads are `vyre bench`'s (2^26 elements): the inclusive f32 scan of uniform [0, 1)
(GB/s counted as 8 bytes per element), the u32 histogram into 256 bins (4 bytes per
element) and the f32 sum (4 bytes per element), each as one recorded pipeline, the median
device time of --reps runs after --warmup seconds of runs (wall time where a backend has no
timers). The warm-up matters on NVIDIA's Vulkan driver: its clocks drop while the host
checks a result, and with 0.05 s every wgpu row after the first ran 2-3x slow (H100).

Backends: each named one, and for wgpu also (last) a second instance `wgpu+sb` that spells
every Barrier with storageBarrier() too (VYRE_WGPU_BARRIERS=storage: how vyre did before
vyre/backends/wgpu/barriers.py; naga gives it Device memory scope).

Variants:
- scan: the library's scan per workgroup size x elements per invocation. The f32 order
  depends on the shape, so every backend must give the same bits for the same shape
  (checked: the first backend's output is the baseline, itself checked against float64
  like the bench); once more with subgroups off (the same bits).
- histogram: `before` (the library's kernel before 17.1: one load then one atomic per loop
  iteration, built here), then the loads-first kernel per shape, and the strided one (at
  most G workgroups, each counting every G-th block). Every result must equal np.bincount.
- copy (the bench's copy kernel: what a plain streaming kernel gets on that backend) and
  sum (the library's default: what the barrier spelling does to reduce).
- passes: each pass of the 256x16 scan timed alone.

Prints one line per measurement as it goes, then one table per workload with wgpu / CUDA
ratios. This script never changes vyre's defaults; it only measures. Budget: ~60 s on the
H100; no variant starts after --budget seconds (those are listed as skipped).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
import sys
import time
from functools import cache
from typing import Any

import numpy as np

import vyre
import vyre.programs._common as common
from vyre import features as F
from vyre.backend import BaseBackend
from vyre.builder import ProgramBuilder
from vyre.config import DispatchConfig
from vyre.ir.nodes import Program
from vyre.pipeline import Step
from vyre.programs import histogram as H
from vyre.programs._common import Plan, blocks_grid, ceil_div, upload
from vyre.programs.elementwise import map_program
from vyre.programs.reduce import plan_reduce
from vyre.programs.scan import plan_scan
from vyre.tools.bench import workloads as W

u32, f32 = vyre.u32, vyre.f32

# (workgroup_size, per_thread): the f32 order depends on the shape, so each shape must give
# the same bits on every backend
SCAN_VARIANTS = [(256, 16), (256, 8), (512, 8), (128, 32)]
SB_SCAN_VARIANTS = [(256, 16)]
# also timed with vyre.programs._common.USE_SUBGROUPS off: must give the same bits
NOSG_SCAN_VARIANTS = [(256, 16)]
# (label, workgroup_size, per_thread, max_groups); "before" is the old kernel
HIST_VARIANTS = [("before", 256, 8, 0), ("new", 256, 8, 0), ("new", 256, 16, 0),
                 ("new", 256, 32, 0), ("new", 512, 16, 0), ("new", 1024, 8, 0),
                 ("strided", 256, 16, 1024), ("strided", 256, 16, 2048),
                 ("strided", 256, 8, 4096), ("strided", 512, 16, 1024),
                 ("strided", 1024, 8, 528)]
SB_HIST_VARIANTS = [("before", 256, 8, 0), ("new", 256, 16, 0), ("strided", 256, 16, 2048)]


@cache
def histogram_before(nbins: int, wg: int = 256, per: int = 8) -> Program:
    """The library's u32 histogram kernel before 17.1 (for timing only): a loop of `per`
    iterations, each one load then one workgroup atomic."""
    k = ProgramBuilder(f"histogram_before_{nbins}_{wg}x{per}", wg)
    src = k.buffer("src", u32)
    bins = k.buffer("bins", u32, "read_write")
    n = k.param("n", u32)
    local = k.shared("local_bins", u32, nbins)
    t = k.let(k.local_index())
    base = k.let(k.workgroup_linear_id() * (wg * per))
    for r in range(ceil_div(nbins, wg)):
        if (r + 1) * wg <= nbins:
            local[t + r * wg] = 0
        else:
            with k.if_(t + r * wg < nbins):
                local[t + r * wg] = 0
    k.barrier()
    with k.for_range(0, per) as j:
        i = k.let(base + j * wg + t)
        with k.if_(i < n):
            x = k.let(src[i])
            with k.if_(x < nbins):
                local.atomic_add(x, 1)
    k.barrier()
    for r in range(ceil_div(nbins, wg)):
        b = k.let(t + r * wg)
        c = k.let(local[b])
        with k.if_((b < nbins) & (c != 0)):
            bins.atomic_add(b, c)
    return k.build()


def _open(spec: str) -> BaseBackend:
    """`spec`, or for "wgpu+sb" a wgpu backend that keeps every storage barrier."""
    if spec != "wgpu+sb":
        return vyre.get_backend(spec)
    old = os.environ.get("VYRE_WGPU_BARRIERS")
    os.environ["VYRE_WGPU_BARRIERS"] = "storage"
    try:
        return vyre.get_backend("wgpu")
    finally:
        if old is None:
            os.environ.pop("VYRE_WGPU_BARRIERS", None)
        else:
            os.environ["VYRE_WGPU_BARRIERS"] = old


def open_or_say(spec: str) -> BaseBackend | None:
    """`_open(spec)`, or None after printing why it is unavailable."""
    try:
        return _open(spec)
    except vyre.BackendError as exc:
        print(f"{spec}: unavailable ({exc})")
        return None


class OverBudget(Exception):
    """The run's --budget is spent: the remaining variants are skipped (and said so)."""


class Timer:
    deadline = float("inf")  # perf_counter() past which no new variant starts
    warmup_s = 0.3  # seconds of back-to-back runs before each timing (--warmup)

    def __init__(self, b: BaseBackend, reps: int) -> None:
        self.b, self.reps = b, reps
        self.timers = b.supports(F.DEVICE_TIMERS)

    def steps(self, steps: list[Step]) -> float:
        """Median seconds of `steps` as one pipeline (device time where there is some)."""
        if time.perf_counter() > self.deadline:
            raise OverBudget("skipped: --budget spent")
        cfg = (lambda c: c.model_copy(update={"profile": True})) if self.timers else (lambda c: c)
        pipe = self.b.pipeline([Step(s.program, s.inputs, s.outputs, cfg(s.config))
                                for s in steps])
        pipe.run()  # compile, first touch
        ts = []
        # keep the GPU busy before timing: on NVIDIA's Vulkan driver the clocks drop while
        # the host checks results, and a short warm-up timed later rows 2-3x slow (H100)
        t_end = time.perf_counter() + self.warmup_s
        while time.perf_counter() < t_end:
            pipe.run()
        for _ in range(self.reps):
            t = pipe.run().timing
            ts.append(t.device_ns if t.device_ns else t.wall_ns)
        return float(statistics.median(ts)) / 1e9


def _free(b: BaseBackend, plan: Plan) -> None:
    b.synchronize()
    for t in plan.temporaries:
        b.free(t)


def sweep_copy(b: BaseBackend, name: str, tm: Timer, data: W.Data,
               rows: dict[Any, dict[str, float]]) -> None:
    """The bench's copy kernel: the bandwidth a plain streaming kernel gets here."""
    x = data.unit_f32
    n = x.size
    xb = upload(b, x, "sweep_copy_src")
    ob = upload(b, np.full(n, np.nan, np.float32), "sweep_copy_dst")
    try:
        prog = map_program(lambda v: v, [f32], f32, name="bench_copy_f32")
        sec = tm.steps([Step(prog, {"x0": xb}, {"out": ob},
                             DispatchConfig.for_elements(n, 256, params={"n": n}))])
        rows.setdefault(("copy",), {})[name] = 8 * n / sec / 1e9
        print(f"copy {name:8s}: {8 * n / sec / 1e9:8.1f} GB/s", flush=True)
    except Exception as exc:
        print(f"copy {name}: failed: {exc!r}"[:400], flush=True)
    finally:
        b.free(xb)
        b.free(ob)


def sweep_scan(b: BaseBackend, name: str, tm: Timer, data: W.Data, variants: list[Any],
               base: dict[Any, bytes], rows: dict[Any, dict[str, float]],
               passes: dict[str, list[tuple[str, float]]], nosg: bool = False) -> None:
    x = data.unit_f32
    n = x.size
    xb = upload(b, x, "sweep_scan_src")
    db = upload(b, np.full(n, np.nan, np.float32), "sweep_scan_dst")
    try:
        for wg, per in variants:
            key = (wg, per)
            label = f"scan {name:8s} {wg:4d}x{per:<3d}" + (" no subgroups" if nosg else "")
            try:
                common.USE_SUBGROUPS = not nosg
                plan = plan_scan(b, xb, db, n, f32, True, wg, per)
                common.USE_SUBGROUPS = True
                sec = tm.steps(plan.steps)
                got = b.read(db, dtype=np.float32)
                if key not in base:
                    bad = W.check_scan(got, data)
                    base[key] = got.tobytes()
                    same = "checked vs f64" if bad is None else f"CHECK FAILED: {bad}"
                else:
                    same = "same bits" if got.tobytes() == base[key] else "DIFFERENT BITS"
                if wg == 256 and per == 16 and not nosg:  # each pass alone
                    passes[name] = [
                        (s.program.name, tm.steps([s])) for s in plan.steps]
                _free(b, plan)
                rows.setdefault((*key, "nosg") if nosg else key, {})[name] = 8 * n / sec / 1e9
                print(f"{label}: {8 * n / sec / 1e9:8.1f} GB/s ({sec * 1e3:.3f} ms, "
                      f"{len(plan.steps)} passes)  {same}", flush=True)
            except OverBudget as exc:
                print(f"{label}: {exc}", flush=True)
            except Exception as exc:  # a variant a device refuses is a result, not a crash
                print(f"{label}: failed: {exc!r}"[:400], flush=True)
    finally:
        b.free(xb)
        b.free(db)


def sweep_hist(b: BaseBackend, name: str, tm: Timer, data: W.Data, variants: list[Any],
               rows: dict[Any, dict[str, float]]) -> None:
    x = data.hist_u32
    n = x.size
    xb = upload(b, x, "sweep_hist_src")
    bins = upload(b, np.zeros(W.HIST_BINS, np.uint32), "sweep_hist_bins")
    try:
        for kind, wg, per, cap in variants:
            key = (kind, wg, per, cap)
            label = f"hist {name:8s} {kind:8s} {wg:4d}x{per:<3d} G={cap or '-':<5}"
            try:
                if kind == "before":
                    plan = H.plan_histogram(b, xb, n, bins, W.HIST_BINS, u32,
                                            workgroup_size=wg, per_thread=per, max_groups=0)
                    s = plan.steps[1]
                    cfg = blocks_grid(ceil_div(n, wg * per), wg, n=n)
                    plan.steps[1] = Step(histogram_before(W.HIST_BINS, wg, per), s.inputs,
                                         s.outputs, cfg)
                else:
                    plan = H.plan_histogram(b, xb, n, bins, W.HIST_BINS, u32,
                                            workgroup_size=wg, per_thread=per, max_groups=cap)
                sec = tm.steps(plan.steps)
                bad = W.check_histogram(b.read(bins, dtype=np.uint32), data)
                _free(b, plan)
                rows.setdefault(key, {})[name] = 4 * n / sec / 1e9
                print(f"{label}: {4 * n / sec / 1e9:8.1f} GB/s ({sec * 1e3:.3f} ms)  "
                      f"{'exact' if bad is None else 'CHECK FAILED: ' + bad}", flush=True)
            except OverBudget as exc:
                print(f"{label}: {exc}", flush=True)
            except Exception as exc:
                print(f"{label}: failed: {exc!r}"[:400], flush=True)
    finally:
        b.free(xb)
        b.free(bins)


def sweep_sum(b: BaseBackend, name: str, tm: Timer, data: W.Data,
              rows: dict[Any, dict[str, float]]) -> None:
    x = data.unit_f32
    xb = upload(b, x, "sweep_sum_src")
    ob = upload(b, np.full(1, np.nan, np.float32), "sweep_sum_out")
    try:
        plan = plan_reduce(b, xb, x.size, "sum", f32, ob)
        sec = tm.steps(plan.steps)
        bad = W.check_sum(float(b.read(ob, dtype=np.float32)[0]), data)
        _free(b, plan)
        rows.setdefault(("sum",), {})[name] = 4 * x.size / sec / 1e9
        print(f"sum  {name:8s}: {4 * x.size / sec / 1e9:8.1f} GB/s  "
              f"{'ok' if bad is None else 'CHECK FAILED: ' + bad}", flush=True)
    except Exception as exc:
        print(f"sum  {name}: failed: {exc!r}"[:400], flush=True)
    finally:
        b.free(xb)
        b.free(ob)


def _table(title: str, rows: dict[Any, dict[str, float]], names: list[str]) -> None:
    cuda = next((x for x in names if x.startswith("cuda")), None)
    print(f"\n== {title} (GB/s; ratio = that column / {cuda or 'no cuda'}) ==")
    print(f"{'variant':34s}" + "".join(f"{x:>12s}" for x in names)
          + "".join(f"{x + '/cu':>12s}" for x in names if x != cuda and cuda))
    for key, vals in rows.items():
        line = f"{' '.join(str(v) for v in key):34s}"
        line += "".join(f"{vals[x]:12.1f}" if x in vals else f"{'-':>12s}" for x in names)
        if cuda:
            for x in names:
                if x != cuda:
                    ok = x in vals and cuda in vals
                    line += f"{vals[x] / vals[cuda]:12.2f}" if ok else f"{'-':>12s}"
        print(line)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backends", default="wgpu,cuda:0",
                    help="comma-separated; wgpu also runs as wgpu+sb (storage barriers)")
    ap.add_argument("--n", type=int, default=1 << 26, help="elements (default 2^26)")
    ap.add_argument("--reps", type=int, default=10, help="timed runs per variant (median)")
    ap.add_argument("--warmup", type=float, default=0.3,
                    help="seconds of runs before each timing (default 0.3)")
    ap.add_argument("--budget", type=float, default=80.0,
                    help="seconds after which no new variant starts (default 80)")
    args = ap.parse_args()
    data = W.Data(dataclasses.replace(W.Sizes(), stream=args.n))
    specs = args.backends.split(",")
    if "wgpu" in specs:  # last: the old barrier spelling matters least if time runs out
        specs.append("wgpu+sb")
    t0 = time.perf_counter()
    Timer.deadline = t0 + args.budget
    Timer.warmup_s = args.warmup
    scan_rows: dict[Any, dict[str, float]] = {}
    hist_rows: dict[Any, dict[str, float]] = {}
    sum_rows: dict[Any, dict[str, float]] = {}
    passes: dict[str, list[tuple[str, float]]] = {}
    base: dict[Any, bytes] = {}
    names: list[str] = []
    for spec in specs:
        b = open_or_say(spec)
        if b is None:
            continue
        name = spec.split(":")[0]
        names.append(name)
        d = b.capabilities().details
        print(f"{spec}: {b.capabilities().device}; subgroup size {d.get('subgroup_size')}; "
              f"device timers {b.supports(F.DEVICE_TIMERS)}", flush=True)
        tm = Timer(b, args.reps)
        sb = spec == "wgpu+sb"
        try:
            sweep_copy(b, name, tm, data, sum_rows)
            sweep_scan(b, name, tm, data, SB_SCAN_VARIANTS if sb else SCAN_VARIANTS, base,
                       scan_rows, passes)
            if not sb:
                sweep_scan(b, name, tm, data, NOSG_SCAN_VARIANTS, base, scan_rows, passes,
                           nosg=True)
            sweep_hist(b, name, tm, data, SB_HIST_VARIANTS if sb else HIST_VARIANTS,
                       hist_rows)
            sweep_sum(b, name, tm, data, sum_rows)
        finally:
            b.close()
        print(f"  ({time.perf_counter() - t0:.0f} s so far)", flush=True)
    _table(f"scan f32 inclusive, n={args.n}, 8 B/element", scan_rows, names)
    _table(f"histogram u32 {W.HIST_BINS} bins, n={args.n}, 4 B/element", hist_rows, names)
    _table(f"copy and sum f32, n={args.n} (copy: 8 B/element)", sum_rows, names)
    print("\n== scan passes alone (256x16), us ==")
    for label, ps in passes.items():
        print(f"{label:34s} " + "  ".join(f"{p}={sec * 1e6:.1f}" for p, sec in ps))
    print(f"\ntotal {time.perf_counter() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
