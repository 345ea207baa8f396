"""Library radix sort designs against each other and CuPy: time and bits, in one run.

    python scripts/sort_bench.py [BACKEND ...]     (default: cuda:0 wgpu; VYRE_SORT_N=keys)

Times, per backend, the sort the bench's `sort` workload measures (copy 2^24 unsorted u32
keys uniform below 2^31 into the sorted buffer, then vyre.programs.radix_sort's plan, as
one recorded pipeline; median device time of 10 runs after a short warm-up, wall time where
the backend has no device timers) for each design in VARIANTS: the library's default on
that backend (radix_sort.design_for: the single-pass look-back design in its TUNED shape),
count + scan + scatter (lookback=False, the design before), both ways of counting a
block's ranks (local_counts), the 4-bit design, and the look-back design over workgroup
shapes, keys only and key-value. Backend "wgpu+sb" is wgpu with a storage barrier at
every Barrier (VYRE_WGPU_BARRIERS=storage, where the wgpu backend knows it), timed for the
defaults only. Every result is checked bit for bit against NumPy's stable sort before it
is timed (a wrong result prints WRONG and no time). CuPy's cp.sort of the same keys (no
copy) is the peer. Prints one table: Mkeys/s per (variant, backend), the ratios wgpu /
cuda and cuda / CuPy, and for the defaults the time each step adds (timed as growing
prefixes of the pipeline, so a look-back pass always starts from a zeroed state). Decides
the TUNED (workgroup_size, per_thread) per backend kind, the design and local_counts: the
fastest correct row wins. Stops starting variants after VYRE_SORT_BUDGET_S (70) seconds.
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from typing import Any

import numpy as np

import vyre
import vyre.programs._common as common
from vyre.config import MAX_GRID_DIM
from vyre.pipeline import Step
from vyre.programs._common import grid, u32
from vyre.programs.elementwise import convert
from vyre.programs.radix_sort import plan_radix_sort

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
# "wgpu+sb": wgpu with a storage barrier at every Barrier (VYRE_WGPU_BARRIERS=storage)
from wgpu_scan_sweep import open_or_say

N = int(os.environ.get("VYRE_SORT_N", 1 << 24))
RUNS = 10
BUDGET_S = float(os.environ.get("VYRE_SORT_BUDGET_S", 70))  # then skip the rest



def _shape(wg: int, per: int, **kw: Any) -> dict[str, Any]:
    return {"digit_bits": 8, "lookback": True, "workgroup_size": wg, "per_thread": per, **kw}


#: the variants whose steps are timed one by one too
BREAKDOWN = ("default (look-back)", "count+scan default")
COUNTED = {"lookback": False}  # count + scan + scatter (the design before the look-back one)
# (label, values moved too, plan_radix_sort keywords, subgroups allowed); most important
# first. "default": the library's own choice on that backend (radix_sort.design_for).
VARIANTS: list[tuple[str, bool, dict[str, Any], bool]] = [
    ("default (look-back)", False, {}, True),
    ("count+scan default", False, COUNTED, True),
    ("kv default (look-back)", True, {}, True),
    ("kv count+scan default", True, COUNTED, True),
    ("look-back, table counts", False, {"local_counts": "table"}, True),
    ("count+scan, register counts", False, {**COUNTED, "local_counts": "registers"}, True),
    ("look-back 256x16", False, _shape(256, 16), True),
    ("look-back 256x12", False, _shape(256, 12), True),
    ("look-back 512x8", False, _shape(512, 8), True),
    ("look-back 256x8", False, _shape(256, 8), True),
    ("look-back 512x12", False, _shape(512, 12), True),
    ("look-back 128x32", False, _shape(128, 32), True),
    ("look-back 512x8 no sg", False, _shape(512, 8), False),
    ("kv look-back 128x16 table", True, _shape(128, 16, local_counts="table"), True),
    ("kv look-back 256x8", True, _shape(256, 8), True),
    ("4-bit 128x8", False, {"digit_bits": 4}, True),
]


def _median_s(pipe: Any, warmup_s: float = 0.2) -> float:
    end = time.perf_counter() + warmup_s  # warm-up: clocks up before timing
    while time.perf_counter() < end:
        pipe.run()
    ts = []
    for _ in range(RUNS):
        t = pipe.run().timing
        ts.append((t.device_ns if t.device_ns else t.wall_ns) / 1e9)
    return float(statistics.median(ts))


def _vyre(b: Any, keys0: np.ndarray, vals0: np.ndarray, order: np.ndarray, with_values: bool,
          kw: dict[str, Any], sg: bool, breakdown: bool = False) -> str:
    common.USE_SUBGROUPS = sg
    n = keys0.size
    bufs = [b.allocate_device_buffer(keys0.nbytes) for _ in range(4 if with_values else 2)]
    src_k, keys = bufs[0], bufs[1]
    b.write(src_k, keys0)
    copy = convert(u32, u32)
    cfg = grid(n, copy.workgroup_size[0], MAX_GRID_DIM, n=n)
    steps = [Step(copy, {"x0": src_k}, {"out": keys}, cfg)]
    src_v = vals = None
    if with_values:
        src_v, vals = bufs[2], bufs[3]
        b.write(src_v, vals0)
        steps.append(Step(copy, {"x0": src_v}, {"out": vals}, cfg))
    plan = plan_radix_sort(b, keys, n, vals, **kw)
    try:
        steps += plan.steps
        pipe = b.pipeline([Step(s.program, s.inputs, s.outputs,
                                s.config.model_copy(update={"profile": True})) for s in steps])
        pipe.run()  # compile, warm up, then check the bits before timing
        got = b.read(keys, dtype=np.uint32)
        if got.tobytes() != keys0[order].tobytes():
            return "WRONG keys"
        if with_values and b.read(vals, dtype=np.uint32).tobytes() != vals0[order].tobytes():
            return "WRONG values (not stable)"
        s = _median_s(pipe)
        names = sorted({st.program.name for st in plan.steps if "radix" in st.program.name})
        out = f"{n / s / 1e6:9.0f}  [{len(steps)} steps: {', '.join(names)}]"
        if breakdown:  # what each step adds: growing prefixes, each from the unsorted keys
            prof = [Step(st.program, st.inputs, st.outputs,
                         st.config.model_copy(update={"profile": True})) for st in steps]
            parts, before = [], 0.0
            for m in range(1, len(prof) + 1):
                prefix = b.pipeline(prof[:m])
                prefix.run()
                now = _median_s(prefix, 0.02)
                parts.append(f"{prof[m - 1].program.name} {(now - before) * 1e6:.1f}")
                before = now
            out += "\n      us each step adds: " + "; ".join(parts)
        return out
    finally:
        for buf in [*bufs, *plan.temporaries]:
            b.free(buf)
        common.USE_SUBGROUPS = True


def _cupy(keys0: np.ndarray) -> str:
    try:
        import cupy as cp
    except Exception as exc:
        return f"unavailable ({type(exc).__name__})"
    x = cp.asarray(keys0)
    out = cp.sort(x)
    if cp.asnumpy(out).tobytes() != np.sort(keys0).tobytes():
        return "WRONG"
    start, stop = cp.cuda.Event(), cp.cuda.Event()
    ts = []
    for _ in range(RUNS):
        start.record()
        out = cp.sort(x)
        stop.record()
        stop.synchronize()
        ts.append(cp.cuda.get_elapsed_time(start, stop) / 1e3)
    return f"{keys0.size / statistics.median(ts) / 1e6:9.0f}"


def main(specs: list[str]) -> None:
    t0 = time.perf_counter()
    rng = np.random.default_rng(8)
    keys0 = rng.integers(0, 1 << 31, N).astype(np.uint32)  # the bench's sort keys
    vals0 = np.arange(N, dtype=np.uint32)
    order = np.argsort(keys0, kind="stable")
    table: dict[str, dict[str, str]] = {label: {} for label, *_ in VARIANTS}
    backends: list[tuple[str, Any]] = []  # (name, backend)
    for spec in specs:
        b = open_or_say(spec)
        if b is None:
            continue
        d = b.capabilities().details
        print(f"{spec} = {b.id} ({b.capabilities().device}): subgroup {b.supports('subgroup')} "
              f"size {d.get('subgroup_size')}, max_workgroup_bytes "
              f"{b.capabilities().limits.get('max_workgroup_bytes')}", flush=True)
        backends.append((spec, b))
    ids = [name for name, _ in backends]
    for label, with_values, kw, sg in VARIANTS:  # most important first: stop at BUDGET_S
        for name, b in backends:
            if name.endswith("+sb") and "default" not in label:
                continue  # storage barriers: only the library's defaults, for the difference
            if time.perf_counter() - t0 > BUDGET_S:
                table[label][name] = "skipped (time budget)"
            else:
                try:
                    table[label][name] = _vyre(b, keys0, vals0, order, with_values, kw, sg,
                                               breakdown=label in BREAKDOWN)
                except vyre.BackendError as exc:
                    table[label][name] = f"error: {type(exc).__name__}: {str(exc)[:120]}"
            print(f"  {name:8} {label:32} {table[label][name]}", flush=True)
    for _, b in backends:
        b.close()
    cupy = _cupy(keys0)
    print(f"\nMkeys/s, n = {N}, copy-in timed (CuPy: cp.sort, no copy): CuPy {cupy}")

    def num(s: str | None) -> float | None:
        try:
            return float(s.split()[0]) if s else None
        except ValueError:
            return None
    cuda = next((i for i in ids if i.startswith("cuda")), None)
    wg = next((i for i in ids if i.startswith("wgpu")), None)
    print(f"{'variant':34}" + "".join(f"{i:>12}" for i in ids) + "  wgpu/cuda  cuda/CuPy")
    for label, *_ in VARIANTS:
        row = table[label]
        cells = "".join(f"{(row.get(i) or '-').split()[0]:>12}" for i in ids)
        c, w, p = num(row.get(cuda or "")), num(row.get(wg or "")), num(cupy)
        r1 = f"{w / c:9.2f}" if c and w else f"{'-':>9}"
        r2 = f"{c / p:9.2f}" if c and p and not label.startswith("kv") else f"{'-':>9}"
        print(f"{label:34}{cells}  {r1}  {r2}")
    print(f"(total {time.perf_counter() - t0:.0f} s)")


if __name__ == "__main__":
    main(sys.argv[1:] or ["cuda:0", "wgpu"])
