"""The Ray benchmark: what a remote backend costs per dispatch, and how sharded work scales.

Run with `python -m vyre.tools.bench.distributed [--address ADDR] [--backend KIND]`:
1. per-dispatch overhead: the median wall time of one resident dispatch of a tiny program,
   local vs in a Ray actor (a Program each time, a bound dispatch, and dispatch_async
   issued back to back then waited once), on the same backend kind;
2. sharded throughput: a compute-heavy elementwise program over N elements with `Sharded`
   on 1, 2 and 4 actors (resident shards, no gather in the timing), checked bit-identical
   to the single-backend run.
Without --address it starts a local cluster (logical CPUs = the actor count, so 4 actors
fit on a 2-core machine; the numbers then show the cores, not Ray). This module must never
leave actors running (every one is closed) nor time unchecked results.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np

import vyre
from vyre import DispatchConfig, ProgramBuilder
from vyre.interface import Backend
from vyre.ir.nodes import Program
from vyre.ir.types import ScalarType as ST


def tiny_program() -> Program:
    k = ProgramBuilder("bench_dist_tiny", workgroup_size=64)
    y = k.buffer("y", ST.U32, "read_write")
    i = k.global_linear_id()
    with k.if_(i < y.length()):
        y[i] = y[i] + 1
    return k.build()


def heavy_program(iters: int) -> Program:
    """y[i] = f^iters(x[i]) with f(v) = v * 1.0001 + 0.5: compute-bound, exact IEEE ops."""
    k = ProgramBuilder(f"bench_dist_heavy_{iters}", workgroup_size=256)
    x = k.buffer("x", ST.F32)
    y = k.buffer("y", ST.F32, "write")
    n = k.param("n", ST.U32)
    i = k.let(k.global_linear_id())
    with k.if_(i < n):
        v = k.let(x[i])
        with k.for_range(0, iters, ty=ST.U32):
            v.set(v * 1.0001 + 0.5)
        y[i] = v
    return k.build()


def _median_us(fn: Callable[[], Any], reps: int) -> float:
    fn()  # warm: compile, send the program
    times = []
    for _ in range(reps):
        t0 = time.perf_counter_ns()
        fn()
        times.append(time.perf_counter_ns() - t0)
    return statistics.median(times) / 1e3


def _costs(backend: Backend, prefix: str, reps: int) -> dict[str, float]:
    """Per-dispatch wall time on `backend` (local or remote: the same API)."""
    prog, cfg = tiny_program(), DispatchConfig(grid=1)
    buf = backend.allocate_device_buffer(256)
    backend.write(buf, np.zeros(64, np.uint32))
    bound = backend.bind(prog, [], [buf], cfg)

    def batch() -> None:
        pend = [backend.dispatch_async(bound) for _ in range(100)]
        pend[-1].wait()
    out = {
        f"{prefix}_dispatch_us": _median_us(
            lambda: backend.dispatch_with_device_buffers(prog, [], [buf], cfg), reps),
        f"{prefix}_bound_us": _median_us(lambda: backend.dispatch_with_device_buffers(bound), reps),
        f"{prefix}_async_batched_us": _median_us(batch, max(3, reps // 50)) / 100,
    }
    backend.synchronize()
    return out


class BareActor:
    """The anchor: a Ray actor whose method takes the remote dispatch's own message (the
    same arguments, so the same bytes on the wire) and does nothing with it."""

    def dispatch_resident(self, *message: Any) -> None:
        return None


def _bare_costs(remote: Any, reps: int) -> dict[str, float]:
    """A bare Ray actor call carrying what `remote`'s resident dispatch sends (captured
    from the remote backend itself), timed like `_costs` times the dispatch."""
    from vyre.distributed._ray import require_ray

    ray = require_ray()
    prog, cfg = tiny_program(), DispatchConfig(grid=1)
    buf = remote.allocate_device_buffer(256)
    bound = remote.bind(prog, [], [buf], cfg)
    sent: dict[str, tuple[Any, ...]] = {}
    real_send = remote._send

    def capture(method: str, *args: Any, handles: Any = ()) -> Any:
        sent[method] = args
        return real_send(method, *args, handles=handles)

    remote._send = capture
    try:
        remote.dispatch_with_device_buffers(prog, [], [buf], cfg)
        program_msg = sent["dispatch_resident"]
        remote.dispatch_with_device_buffers(bound)
        bound_msg = sent["dispatch_resident"]
    finally:
        del remote._send
    remote.free(buf)
    bare = ray.remote(BareActor).options(num_cpus=0).remote()
    try:
        def batch() -> None:
            refs = [bare.dispatch_resident.remote(*bound_msg) for _ in range(100)]
            ray.get(refs[-1])
        return {
            "bare_ray_dispatch_us": _median_us(
                lambda: ray.get(bare.dispatch_resident.remote(*program_msg)), reps),
            "bare_ray_bound_us": _median_us(
                lambda: ray.get(bare.dispatch_resident.remote(*bound_msg)), reps),
            "bare_ray_async_batched_us": _median_us(batch, max(3, reps // 50)) / 100,
        }
    finally:
        ray.kill(bare)


def overhead(kind: str, reps: int) -> dict[str, float]:
    """Per-dispatch wall time locally, in an actor, and of a bare Ray call carrying the
    same message (the anchor: `remote_*_us / bare_ray_*_us` is what vyre adds)."""
    from vyre.distributed import spawn

    with vyre.get_backend(kind) as local, spawn(kind) as remote:
        out = {**_costs(local, "local", reps), **_costs(remote, "remote", reps),
               **_bare_costs(remote, reps)}
    for what in ("dispatch", "bound", "async_batched"):
        out[f"ratio_{what}_vs_bare"] = out[f"remote_{what}_us"] / out[f"bare_ray_{what}_us"]
    return out


def sharded(kind: str, n: int, iters: int, actor_counts: list[int], reps: int) -> list[dict[str, Any]]:
    from vyre.distributed import Sharded, spawn

    prog = heavy_program(iters)
    x = np.random.default_rng(0).standard_normal(n).astype(np.float32)
    with vyre.get_backend(kind) as local:
        want = local.dispatch(prog, {"x": x, "y": n},
                              DispatchConfig.for_elements(n, 256, params={"n": n}))["y"]
    rows = []
    for count in actor_counts:
        actors = [spawn(kind) for _ in range(count)]
        try:
            group = Sharded(actors)
            sx = group.scatter(x, align=256)
            sy = group.empty(sx.shards, np.float32)

            def run(g: Any = group, a: Any = sx, b: Any = sy) -> None:
                g.map(prog, {"x": a}, {"y": b},
                      lambda s: DispatchConfig.for_elements(s.count, 256, params={"n": s.count}))
            med = _median_us(run, reps)
            got = sy.gather()
            if not np.array_equal(got.view(np.uint32), want.view(np.uint32)):
                raise AssertionError(f"sharded result over {count} actors differs from one backend")
            rows.append({"actors": count, "median_ms": med / 1e3,
                         "melem_per_s": n / med, "bit_identical": True})
        finally:
            for b in actors:
                b.close()
    base = rows[0]["median_ms"]
    for r in rows:
        r["speedup"] = base / r["median_ms"]
    return rows


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m vyre.tools.bench.distributed",
                                description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--address", help="an existing Ray cluster (ray.init(address=...)); "
                   "default: start a local one")
    p.add_argument("--backend", default="reference", help="backend kind of every actor")
    p.add_argument("--n", type=int, default=1 << 20, help="elements of the sharded workload")
    p.add_argument("--iters", type=int, default=64, help="loop iterations per element")
    p.add_argument("--actors", default="1,2,4", help="actor counts to time")
    p.add_argument("--reps", type=int, default=200, help="repetitions of the overhead timing")
    p.add_argument("--json", help="also write the results to this file")
    args = p.parse_args(argv)
    from vyre.distributed._ray import require_ray

    ray = require_ray()
    counts = [int(c) for c in args.actors.split(",")]
    if args.address:
        ray.init(address=args.address, log_to_driver=False)
    else:
        ray.init(num_cpus=max(counts), include_dashboard=False, log_to_driver=False,
                 object_store_memory=200 * 2**20)
    try:
        res = {
            "backend": args.backend, "host_cores": os.cpu_count(),
            "cluster": {k: v for k, v in ray.cluster_resources().items() if k in ("CPU", "GPU")},
            "overhead": overhead(args.backend, args.reps),
            "sharded": {"n": args.n, "iters": args.iters,
                        "rows": sharded(args.backend, args.n, args.iters, counts, max(3, args.reps // 40))},
        }
    finally:
        ray.shutdown()
    o = res["overhead"]
    print(f"backend {args.backend}, {res['host_cores']} host cores, cluster {res['cluster']}")
    print("per-dispatch wall time (median, us):")
    for k in sorted(o):
        print(f"  {k:26s} {o[k]:10.1f}")
    print(f"sharded elementwise, n={args.n}, {args.iters} iterations per element:")
    print("  actors   median ms   Melem/s   speedup   bit-identical")
    for r in res["sharded"]["rows"]:
        print(f"  {r['actors']:6d} {r['median_ms']:11.1f} {r['melem_per_s']:9.2f} "
              f"{r['speedup']:9.2f}   {r['bit_identical']}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(res, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
