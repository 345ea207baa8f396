"""Where vyre's wgpu dispatch overhead goes, next to raw wgpu-py, for the three dispatch
workloads of `vyre bench` (issue 17):

    python scripts/wgpu_dispatch_split.py [--blocks N] [--json out.json]

For each of launch (1000 dispatches, one encoder + pass + submit each, then one wait),
roundtrip (one dispatch, then wait) and batch100 (100 dispatches in one pass, one submit,
then wait; vyre: a 100-step Pipeline's run()), four ways of doing the same work on the
bench's `y[i] += 1` over 1024 u32:
- raw: the raw peer's shader, pipeline and device (vyre.tools.bench.peers.RawWgpuPeer);
- vyre: vyre's public calls (dispatch_with_device_buffers + synchronize, Pipeline.run);
- vyre's pipeline + bind group driven by the raw peer's calls on vyre's device (so vyre's
  Python is the difference to "vyre");
- the raw peer's pipeline on vyre's device (so vyre's shader and bind group are the
  difference to the previous line, and the device the difference to "raw").
Blocks of each are interleaved in a rotating order; prints median / min us per dispatch
and raw / x (the bench's ratio: above 1 is faster than raw). --pair --per-block 1 times the
raw peer and vyre alone, one repetition each in turn, as `vyre bench` does.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable
from typing import Any

import numpy as np

import vyre
from vyre.config import DispatchConfig
from vyre.tools.bench.peers import WGSL_INC, RawWgpuPeer, _grid
from vyre.tools.bench.vyre_impl import WG, inc_program

_T = time.perf_counter_ns
COUNTS = {"launch": 1000, "roundtrip": 1, "batch100": 100}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--blocks", type=int, default=15)
    ap.add_argument("--per-block", type=int, default=0,
                    help="repetitions per block (default: ~2000 dispatches per block)")
    ap.add_argument("--pair", action="store_true",
                    help="only the raw peer and vyre, alternating (the bench's order)")
    ap.add_argument("--json")
    a = ap.parse_args()
    b: Any = vyre.get_backend("wgpu")
    raw = RawWgpuPeer(b.capabilities().device)
    n = 1024
    y0 = np.zeros(n, np.uint32)
    y = b.allocate_device_buffer(n * 4)
    b.write(y, y0)
    bound = b.bind(inc_program(), [], [y], DispatchConfig.for_elements(n, WG))
    b.dispatch_with_device_buffers(bound)
    b.synchronize()
    rec = bound.launch.record  # (measurement only: vyre's prepared pipeline and bind group)
    pipe100 = b.pipeline([bound] * COUNTS["batch100"])
    ry = raw._buffer(y0)
    rpipe, rbg = raw._kernel(WGSL_INC, [ry])
    g = (_grid(n), 1, 1)
    dev = b.device
    vy = dev.create_buffer_with_data(data=y0.tobytes(), usage=0x80 | 0x8 | 0x4)  # STORAGE|COPY_*
    sm = dev.create_shader_module(code=WGSL_INC)
    dpipe = dev.create_compute_pipeline(layout="auto", compute={"module": sm, "entry_point": "main"})
    dbg = dev.create_bind_group(layout=dpipe.get_bind_group_layout(0), entries=[
        {"binding": 0, "resource": {"buffer": vy, "offset": 0, "size": vy.size}}])

    def raw_calls(d: Any, pipe: Any, bg: Any, grid: tuple[int, int, int], mode: str,
                  ) -> Callable[[], None]:
        k = COUNTS[mode]

        def one_pass(count: int) -> None:
            enc = d.create_command_encoder()
            cp = enc.begin_compute_pass()
            cp.set_pipeline(pipe)
            cp.set_bind_group(0, bg)
            for _ in range(count):
                cp.dispatch_workgroups(*grid)
            cp.end()
            d.queue.submit([enc.finish()])

        def go() -> None:
            if mode == "batch100":
                one_pass(k)
            else:
                for _ in range(k):
                    one_pass(1)
            d._poll_wait()
        return go

    def vyre_calls(mode: str) -> Callable[[], None]:
        k = COUNTS[mode]
        if mode == "batch100":
            return lambda: pipe100.run()

        def go() -> None:
            for _ in range(k):
                b.dispatch_with_device_buffers(bound)
            b.synchronize()
        return go

    out: dict[str, dict[str, list[float]]] = {}
    for mode in COUNTS:
        cases = {
            "raw peer": raw_calls(raw.dev, rpipe, rbg, g, mode),
            "vyre": vyre_calls(mode),
            "vyre's pipeline + bind group, raw calls": raw_calls(
                dev, rec.pipeline, rec.bind_group, rec.direct, mode),
            "raw peer's pipeline on vyre's device": raw_calls(dev, dpipe, dbg, g, mode),
        }
        if a.pair:
            cases = {k: cases[k] for k in ("raw peer", "vyre")}
        per_block = a.per_block or max(1, 2000 // (COUNTS[mode] * 10))
        got: dict[str, list[float]] = {k: [] for k in cases}
        for f in cases.values():  # warm-up
            t0 = time.perf_counter()
            while time.perf_counter() - t0 < 0.2:
                f()
        names = list(cases)
        for r in range(a.blocks):
            for k in names[r % len(names):] + names[:r % len(names)]:
                t0 = _T()
                for _ in range(per_block):
                    cases[k]()
                got[k].append((_T() - t0) / per_block / COUNTS[mode] / 1e3)
        out[mode] = got
    print(f"wgpu dispatch overhead on {b.capabilities().device} ({a.blocks} interleaved blocks; "
          "us per dispatch, median / min; raw/x: the raw peer's median over this one)")
    for mode, got in out.items():
        base = statistics.median(got["raw peer"])
        for k, us in got.items():
            med = statistics.median(us)
            print(f"  {mode:9s} {k:42s} {med:9.2f} {min(us):9.2f} {base / med:6.2f}")
    if a.json:
        with open(a.json, "w") as fh:
            json.dump(out, fh, indent=2)
    b.free(y)
    ry.destroy()
    vy.destroy()
    raw.close()
    b.close()


if __name__ == "__main__":
    main()
