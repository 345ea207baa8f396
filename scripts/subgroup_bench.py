"""Library reduce / scan with and without subgroup operations: time and bits.

    python scripts/subgroup_bench.py [BACKEND ...]     (default: cuda:0 wgpu)

For each backend and size, times the f32 sum (vyre.programs.reduce), the f32 inclusive
scan and the u32 inclusive scan (vyre.programs.scan; f32 scans use subgroups only in their
block sums, integer scans also in the block scan) as one recorded pipeline, median device time of 15 runs (wall time
where the backend has no device timers), with `vyre.programs._common.USE_SUBGROUPS` off and
on, and checks that both give the same bits (they must: the subgroup steps combine in the
workgroup tree's order). Prints one line per (backend, workload, n). Decides whether the
library keeps using subgroups on that backend: it should be no slower at any size.
"""

from __future__ import annotations

import statistics
import sys
from typing import Any

import numpy as np

import vyre
import vyre.programs._common as common
from vyre.pipeline import Step
from vyre.programs.reduce import plan_reduce
from vyre.programs.scan import plan_scan

SIZES = (1 << 16, 1 << 20, 1 << 24)
RUNS = 15


def _time(b: Any, plan: Any) -> float:
    pipe = b.pipeline([Step(s.program, s.inputs, s.outputs, s.config.model_copy(
        update={"profile": True})) for s in plan.steps])
    pipe.run()  # compile and warm up
    ts = []
    for _ in range(RUNS):
        t = pipe.run().timing
        ts.append(t.device_ns if t.device_ns else t.wall_ns)
    return float(statistics.median(ts))


def _measure(b: Any, n: int, workload: str, on: bool) -> tuple[float, bytes, str]:
    common.USE_SUBGROUPS = on
    rng = np.random.default_rng(n)
    ty = vyre.u32 if workload == "scan_u32" else vyre.f32
    x = (rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32) if ty is vyre.u32
         else rng.standard_normal(n).astype(np.float32))
    xb = b.allocate_device_buffer(x.nbytes)
    b.write(xb, x)
    out = b.allocate_device_buffer(4 if workload == "sum" else x.nbytes)
    try:
        if workload == "sum":
            plan = plan_reduce(b, xb, n, "sum", ty, out)
        else:
            plan = plan_scan(b, xb, out, n, ty, True)
        ns = _time(b, plan)
        bits = bytes(b.read(out, dtype=np.uint8))
        for t in plan.temporaries:
            b.free(t)
        return ns, bits, plan.steps[-1].program.name
    finally:
        b.free(xb)
        b.free(out)


def main(specs: list[str]) -> None:
    for spec in specs:
        try:
            b = vyre.get_backend(spec)
        except vyre.BackendError as exc:
            print(f"{spec}: unavailable ({exc})")
            continue
        d = b.capabilities().details
        print(f"{b.id} ({b.capabilities().device}): subgroup {b.supports('subgroup')}, "
              f"size {d.get('subgroup_size')} {d.get('subgroups', '')}")
        for workload in ("sum", "scan", "scan_u32"):
            for n in SIZES:
                off_ns, off_bits, _ = _measure(b, n, workload, False)
                on_ns, on_bits, name = _measure(b, n, workload, True)
                gb = (4 if workload == "sum" else 8) * n
                print(f"  {workload:8} n={n:>9}: off {off_ns / 1e3:9.1f} us "
                      f"({gb / off_ns:6.1f} GB/s)  on {on_ns / 1e3:9.1f} us "
                      f"({gb / on_ns:6.1f} GB/s)  speedup {off_ns / on_ns:5.2f}x  "
                      f"same bits: {off_bits == on_bits}  [{name}]")
        b.close()
    common.USE_SUBGROUPS = True


if __name__ == "__main__":
    main(sys.argv[1:] or ["cuda:0", "wgpu"])
