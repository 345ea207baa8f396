"""Library radix sort designs against each other and CuPy: time and bits, in one run.

    python scripts/sort_bench.py [BACKEND ...]     (default: cuda:0 wgpu; VYRE_SORT_N=keys)

Times, per backend, the sort the bench's `sort` workload measures (copy 2^24 unsorted u32
keys uniform below 2^31 into the sorted buffer, then vyre.programs.radix_sort's plan, as
one recorded pipeline; median device time of 10 runs, wall time where the backend has no
device timers) for each design in VARIANTS: the 4-bit design (the fallback; at commit
e93c7df exactly the sort before issue 17.2, since then with the 8-bit design's count
program) and the 8-bit design over workgroup shapes, with and without subgroups, keys only
and key-value. Every result is checked bit for bit against NumPy's stable sort before it is
timed (a wrong result prints WRONG and no time). CuPy's cp.sort of the same keys (no
copy) is the peer. Prints one table: Mkeys/s per (variant, backend), the ratios wgpu /
cuda and cuda / CuPy. Decides the default (workgroup_size, per_thread) of the 8-bit design
and whether it keeps subgroups on each backend: the fastest correct row wins.
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

N = int(os.environ.get("VYRE_SORT_N", 1 << 24))
RUNS = 10
BUDGET_S = float(os.environ.get("VYRE_SORT_BUDGET_S", 70))  # then skip the rest

# (label, values moved too, plan_radix_sort keywords, subgroups allowed)
VARIANTS: list[tuple[str, bool, dict[str, Any], bool]] = [
    ("4-bit 128x8 (fallback)", False, {"digit_bits": 4}, True),
    ("8-bit 256x16 sg (new default)", False, {"digit_bits": 8}, True),
    ("kv 4-bit 128x8 (fallback)", True, {"digit_bits": 4}, True),
    ("kv 8-bit 256x8 sg (new default)", True, {"digit_bits": 8}, True),
    ("8-bit 256x16 no sg", False, {"digit_bits": 8}, False),
    ("8-bit 128x16 sg", False, {"digit_bits": 8, "workgroup_size": 128, "per_thread": 16}, True),
    ("8-bit 256x8 sg", False, {"digit_bits": 8, "workgroup_size": 256, "per_thread": 8}, True),
    ("8-bit 128x32 sg", False, {"digit_bits": 8, "workgroup_size": 128, "per_thread": 32}, True),
    ("8-bit 512x8 sg", False, {"digit_bits": 8, "workgroup_size": 512, "per_thread": 8}, True),
    ("8-bit 256x12 sg", False, {"digit_bits": 8, "workgroup_size": 256, "per_thread": 12}, True),
    ("kv 8-bit 128x16 sg", True, {"digit_bits": 8, "workgroup_size": 128, "per_thread": 16}, True),
]


def _median_s(pipe: Any) -> float:
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
        if breakdown:  # each step of the first pass alone, on the unsorted keys (idempotent)
            prof = [Step(st.program, st.inputs, st.outputs,
                         st.config.model_copy(update={"profile": True})) for st in steps]
            b.pipeline(prof[:1]).run()  # the unsorted keys back in place
            parts = []
            for st in prof[1 + with_values:]:  # up to the first scatter
                one = b.pipeline([st])
                one.run()
                parts.append(f"{st.program.name} {_median_s(one) * 1e6:.1f}")
                if "scatter" in st.program.name:
                    break
            out += "\n      first pass, us per step: " + "; ".join(parts)
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
    backends = []
    for spec in specs:
        try:
            b = vyre.get_backend(spec)
        except vyre.BackendError as exc:
            print(f"{spec}: unavailable ({exc})")
            continue
        d = b.capabilities().details
        print(f"{b.id} ({b.capabilities().device}): subgroup {b.supports('subgroup')} size "
              f"{d.get('subgroup_size')}, max_workgroup_bytes "
              f"{b.capabilities().limits.get('max_workgroup_bytes')}", flush=True)
        backends.append(b)
    ids = [b.id for b in backends]
    for label, with_values, kw, sg in VARIANTS:  # most important first: stop at BUDGET_S
        for b in backends:
            if time.perf_counter() - t0 > BUDGET_S:
                table[label][b.id] = "skipped (time budget)"
            else:
                try:
                    table[label][b.id] = _vyre(b, keys0, vals0, order, with_values, kw, sg,
                                               breakdown="fallback" in label or "new" in label)
                except vyre.BackendError as exc:
                    table[label][b.id] = f"error: {type(exc).__name__}: {str(exc)[:120]}"
            print(f"  {b.id:8} {label:32} {table[label][b.id]}", flush=True)
    for b in backends:
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
