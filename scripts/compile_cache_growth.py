#!/usr/bin/env python3
"""Compile many distinct programs on one long-lived backend instance and print how its
resident memory (RSS) and in-memory compile cache grow: the compile cache must stay at its
bound (VYRE_COMPILE_CACHE_SIZE / --cache-size) and RSS must level off.

    python scripts/compile_cache_growth.py --backend wgpu --programs 10000
    python scripts/compile_cache_growth.py --backend cuda --programs 10000 --prewarm-jobs 16

Each program is dispatched once (so launch-side caches are exercised too) and checked against
the expected values. For CUDA, --prewarm-jobs N first compiles every cubin into a private
disk cache with N processes (NVRTC is the slow part, and not what is measured here), so the
measured loop loads modules as a warm long-lived process would. --minutes bounds the run;
the last line is a one-line summary (`[cache-growth] ...`). Exit status 1 if the cache ever
exceeded its bound or a result was wrong. It must never change the device's settings.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor

import numpy as np

import vyre
from vyre import DispatchConfig, ProgramBuilder, f32

N_ELEMS = 64


def program(i: int) -> vyre.Program:
    """Distinct per i: y = y * a + b with constants derived from i."""
    k = ProgramBuilder(f"growth{i}", workgroup_size=64)
    y = k.buffer("y", f32, "read_write")
    g = k.global_linear_id()
    with k.if_(g < y.length()):
        y[g] = y[g] * float(i % 97 + 2) + float(i)
    return k.build()


def expected(i: int) -> np.ndarray:
    y = np.arange(N_ELEMS, dtype=np.float32)
    return y * np.float32(i % 97 + 2) + np.float32(i)


def rss_mib() -> float:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _prewarm(args: tuple[int, int, str, str, int]) -> int:
    start, stop, arch, directory, coarsen = args
    from vyre.backends.cuda.nvrtc import DiskCache, compile_program

    cache = DiskCache(directory)
    for i in range(start, stop):  # the backend's own key: same arch, restrict, coarsening
        compile_program(program(i), arch, cache, restrict=True, coarsen=coarsen)
    return stop - start


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--backend", default="wgpu")
    ap.add_argument("--programs", type=int, default=10_000)
    ap.add_argument("--cache-size", type=int, default=None,
                    help="compile cache bound (default: $VYRE_COMPILE_CACHE_SIZE or 512)")
    ap.add_argument("--minutes", type=float, default=2.5, help="time budget (0: none)")
    ap.add_argument("--every", type=int, default=1000, help="report every N programs")
    ap.add_argument("--prewarm-jobs", type=int, default=0,
                    help="CUDA: compile cubins into a private disk cache first, N processes")
    args = ap.parse_args(argv)

    if args.backend.startswith("cuda") and args.prewarm_jobs > 0:
        directory = tempfile.mkdtemp(prefix="vyre-growth-")
        os.environ["VYRE_CACHE_DIR"] = directory
        from vyre.backends.cuda.nvrtc import DiskCache

        b0 = vyre.get_backend(args.backend)
        arch = b0.capabilities().details["arch"]
        coarsen = int(getattr(b0, "coarsen", 1))
        b0.close()
        t0 = time.perf_counter()
        step = -(-args.programs // (args.prewarm_jobs * 4))
        chunks = [(s, min(s + step, args.programs), arch, str(DiskCache().directory), coarsen)
                  for s in range(0, args.programs, step)]
        # spawn, not fork: this process has initialised the CUDA driver
        ctx = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(args.prewarm_jobs, mp_context=ctx) as ex:
            done = sum(ex.map(_prewarm, chunks))
        print(f"prewarmed {done} cubins in {time.perf_counter() - t0:.1f}s", flush=True)

    b = vyre.get_backend(args.backend, compile_cache_size=args.cache_size)
    limit = b.compile_cache_limit
    disk0 = getattr(b.compile_stats, "disk_hits", 0)
    rss0 = rss_mib()
    print(f"backend {b.id}; compile cache bound {limit}; RSS at start {rss0:.0f} MiB",
          flush=True)
    print(f"{'programs':>9} {'cache':>6} {'evicted':>8} {'RSS MiB':>8} {'s':>7}", flush=True)
    t0 = time.perf_counter()
    deadline = t0 + args.minutes * 60 if args.minutes > 0 else float("inf")
    y0 = np.arange(N_ELEMS, dtype=np.float32)
    cfg = DispatchConfig.for_elements(N_ELEMS, 64)
    worst_cache = 0
    wrong = 0
    rss_at: dict[int, float] = {}
    n = 0
    try:
        for n in range(1, args.programs + 1):
            i = n - 1
            out = b.dispatch(program(i), {"y": y0}, cfg)["y"]
            if not np.array_equal(out, expected(i)):
                wrong += 1
            worst_cache = max(worst_cache, b.compile_cache_size())
            if n % args.every == 0 or n == args.programs:
                rss_at[n] = rss_mib()
                print(f"{n:>9} {b.compile_cache_size():>6} {b.compile_stats.evictions:>8} "
                      f"{rss_at[n]:>8.0f} {time.perf_counter() - t0:>7.1f}", flush=True)
            if time.perf_counter() > deadline:
                print(f"time budget ({args.minutes} min) spent after {n} programs", flush=True)
                break
        # evicted programs recompile correctly
        for i in range(0, min(n, 50)):
            if not np.array_equal(b.dispatch(program(i), {"y": y0}, cfg)["y"], expected(i)):
                wrong += 1
    finally:
        rss1 = rss_mib()
        b.close()
    marks = sorted(rss_at)
    mid = rss_at[marks[len(marks) // 2]] if marks else rss1
    ok = worst_cache <= limit and wrong == 0
    print(f"[cache-growth] {'ok' if ok else 'FAILED'}: {args.backend} {n} programs, cache "
          f"max {worst_cache}/{limit}, RSS {rss0:.0f} -> {rss1:.0f} MiB (at half-way "
          f"{mid:.0f}), {wrong} wrong, {b.compile_stats.disk_hits - disk0} from the disk "
          f"cache, {time.perf_counter() - t0:.0f}s", flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
