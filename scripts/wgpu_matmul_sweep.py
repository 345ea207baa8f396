#!/usr/bin/env python3
"""Time vyre's library matmul on wgpu per fence rule and tile shape, against the raw WGSL peer.

  python3 scripts/wgpu_matmul_sweep.py [--n 4096] [--reps 5] [--tiles 128x8x8,64x4x16,...]

Fence rules: "fewest" (what fences.py allows, the default) for every --tiles shape, and
"all" (every f32 operand fenced, VYRE_WGPU_FENCES=all: how vyre spelled it before) for the
--all-tiles shapes, each rule on its own backend instance; --unsplit-tiles also without
matmul's split edge loads (its `split` knob; the default kernel splits). Every variant multiplies the same A and B; since the fma order over k is fixed,
every variant must return the same bits (checked: the first variant's C is the baseline),
and the first is also checked against float64 like the bench does. The raw peer is the
bench's hand-written vec4 WGSL kernel (vyre/tools/bench/peers.py, WGSL_MATMUL).

Prints one line per variant: TFLOP/s (median of --reps after one warm-up), the ratio to
the raw peer, and whether C matched. Times are device timestamps where the adapter has
them, else wall clock with a sync (lavapipe). Budget: about 60 s on the H100 at n=4096.
This script must never change vyre's defaults; it only measures.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
import sys
import time
from collections.abc import Callable

import numpy as np

import vyre
from vyre import features as F
from vyre.backend import BaseBackend
from vyre.programs._common import upload
from vyre.programs.matmul import matmul_config, matmul_program
from vyre.tools.bench import workloads as W
from vyre.tools.bench.peers import RawWgpuPeer

# (block, per_thread, block_k): the library default first, then shapes a Vulkan compiler may
# like better (fewer registers per invocation, a longer K step per barrier)
DEFAULT_TILES = "128x8x8,128x8x16,64x4x8,64x4x16,128x4x8,64x8x8"


def _tiles(spec: str) -> list[tuple[int, int, int]]:
    return [tuple(int(v) for v in t.split("x")) for t in spec.split(",")]  # type: ignore[misc]


def _backend(all_fences: bool) -> BaseBackend:
    old = os.environ.get("VYRE_WGPU_FENCES")
    os.environ["VYRE_WGPU_FENCES"] = "all" if all_fences else ""
    try:
        return vyre.get_backend("wgpu")
    finally:
        if old is None:
            os.environ.pop("VYRE_WGPU_FENCES", None)
        else:
            os.environ["VYRE_WGPU_FENCES"] = old


def _median_time(run: Callable[[], float], reps: int) -> float:
    run()  # warm-up (compile, first touch)
    return statistics.median(run() for _ in range(reps))


def _time_vyre(b: BaseBackend, a: np.ndarray, bm: np.ndarray, tile: tuple[int, int, int],
               reps: int, split: bool) -> tuple[float, np.ndarray]:
    n = a.shape[0]
    block, per_thread, block_k = tile
    ab, bb = upload(b, a, "sweep_a"), upload(b, bm, "sweep_b")
    cb = upload(b, np.full(n * n, np.nan, np.float32), "sweep_c")
    cfg = matmul_config(n, n, n, block, per_thread, block_k)
    if b.supports(F.DEVICE_TIMERS):
        cfg = cfg.model_copy(update={"profile": True})
    prog = matmul_program(block, per_thread, block_k, split)
    bound = b.bind(prog, {"a": ab, "b": bb}, {"c": cb}, cfg)

    def run() -> float:
        t0 = time.perf_counter_ns()
        t = b.dispatch_with_device_buffers(bound)
        if t.device_ns is not None:
            return t.device_ns / 1e9
        b.synchronize()
        return (time.perf_counter_ns() - t0) / 1e9

    try:
        sec = _median_time(run, reps)
        return sec, b.read(cb, dtype=np.float32).reshape(n, n)
    finally:
        for buf in (ab, bb, cb):
            b.free(buf)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=4096, help="M = N = K (default 4096)")
    ap.add_argument("--reps", type=int, default=5, help="timed runs per variant (median)")
    ap.add_argument("--tiles", default=DEFAULT_TILES, help="blockxper_threadxblock_k, ...")
    ap.add_argument("--all-tiles", default="128x8x8,64x4x16",
                    help="tiles also timed with every operand fenced (the old spelling)")
    ap.add_argument("--unsplit-tiles", default="128x8x8",
                    help="tiles also timed without matmul's split edge loads (split=False)")
    args = ap.parse_args()
    n = args.n
    data = W.Data(dataclasses.replace(W.Sizes(), matmul=n))
    a, bm = data.matmul_ab
    flop = 2.0 * n * n * n

    peer = RawWgpuPeer(vyre.get_backend("wgpu").capabilities().device)
    case = peer.case("matmul", data)
    raw_s = _median_time(case.run, args.reps)
    problem = case.check()
    case.close()
    peer.close()
    print(f"raw WGSL peer (vec4, 64x64x16): {flop / raw_s / 1e12:8.3f} TFLOP/s "
          f"({case.timer} time){'  CHECK FAILED: ' + problem if problem else ''}")

    baseline: np.ndarray | None = None
    ok_all = problem is None
    runs = (("fewest", args.tiles, True), ("all", args.all_tiles, True),
            ("fewest", args.unsplit_tiles, False))
    for rule, tiles, split in runs:
        if not tiles:
            continue
        b = _backend(rule == "all")
        label = rule if split else f"{rule} unsplit"
        try:
            for tile in _tiles(tiles):
                name = f"vyre {label:14s} {'x'.join(map(str, tile)):9s}"
                try:
                    sec, c = _time_vyre(b, a, bm, tile, args.reps, split)
                except Exception as exc:  # a shape a device refuses is a result, not a crash
                    print(f"{name}: failed: {exc}")
                    ok_all = False
                    continue
                if baseline is None:
                    baseline = c
                    bad = W.check_matmul(c, data)
                    same = "checked vs f64" if bad is None else f"CHECK FAILED: {bad}"
                else:
                    equal = np.array_equal(c.view(np.uint32), baseline.view(np.uint32))
                    same = "same bits" if equal else "DIFFERENT BITS"
                    bad = None if equal else same
                ok_all &= bad is None
                tf = flop / sec / 1e12
                print(f"{name}: {tf:8.3f} TFLOP/s = {raw_s / sec:5.2f}x raw  {same}", flush=True)
        finally:
            b.close()
    return 0 if ok_all else 1


if __name__ == "__main__":
    sys.exit(main())
