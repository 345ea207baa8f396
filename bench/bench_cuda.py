"""Benchmark: vyre's CUDA backend against raw cuda-bindings, CuPy and PyTorch, one process.

    python bench/bench_cuda.py [--json out.json] [--quick]

(a) empty-kernel dispatch over resident buffers (host cost per launch),
(b) 100 small dispatches replayed as a CUDA graph (cost per dispatch),
(c) saxpy over 2**26 f32 (GB/s at 12 bytes/element, device events),
(d) compile: cold NVRTC vs warm in-memory vs warm on-disk.
Medians after warm-up; every output is checked before its timing counts. A peer that is not
installed is reported as such. This is a script, not a test.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from typing import Any

import numpy as np

import vyre
from vyre import DispatchConfig, ScalarType
from vyre.builder import ProgramBuilder

ST = ScalarType
RESULTS: dict[str, Any] = {}


def median_per_call(fn: Callable[[], None], sync: Callable[[], None], calls: int,
                    rounds: int = 7, warm: int = 2000) -> float:
    """Median over rounds of (time for `calls` calls + one sync) / calls, in microseconds."""
    for _ in range(warm):
        fn()
    sync()
    out = []
    for _ in range(rounds):
        t0 = time.perf_counter_ns()
        for _ in range(calls):
            fn()
        sync()
        out.append((time.perf_counter_ns() - t0) / calls / 1e3)
    return statistics.median(out)


def section(name: str) -> Callable[[Callable[..., None]], Callable[..., None]]:
    def deco(f: Callable[..., None]) -> Callable[..., None]:
        def run(*a: Any) -> None:
            print(f"\n== {name}", flush=True)
            try:
                f(*a)
            except Exception:
                traceback.print_exc()
                RESULTS.setdefault("errors", []).append(f"{name}: {traceback.format_exc()[-400:]}")
        return run
    return deco


def empty_program() -> vyre.Program:
    k = ProgramBuilder("empty", workgroup_size=32)
    k.buffer("y", ST.U32, "read_write")
    return k.build()


def inc_program() -> vyre.Program:
    k = ProgramBuilder("inc", workgroup_size=256)
    y = k.buffer("y", ST.U32, "read_write")
    i = k.global_linear_id()
    with k.if_(i < y.length()):
        y[i] = y[i] + 1
    return k.build()


def saxpy_program() -> vyre.Program:
    k = ProgramBuilder("saxpy", workgroup_size=256)
    x, y = k.buffer("x", ST.F32), k.buffer("y", ST.F32, "read_write")
    a = k.param("a", ST.F32)
    i = k.global_linear_id()
    with k.if_(i < y.length()):
        y[i] = a * x[i] + y[i]
    return k.build()


@section("(a) empty-kernel dispatch over resident buffers")
def bench_dispatch(b: Any, calls: int) -> None:
    from cuda.bindings import driver as drv

    from vyre.backends.cuda.backend import fast_launch_args

    y = b.allocate_device_buffer(4 * 32)
    b.write(y, np.zeros(32, np.uint32))
    prog = empty_program()
    cfg = DispatchConfig(grid=1)
    bound = b.bind(prog, [], [y], cfg)
    r: dict[str, float] = {}
    r["vyre bound"] = median_per_call(lambda: b.dispatch_with_device_buffers(bound),
                                      b.synchronize, calls)
    ubound = b.bind(prog, [], [y], DispatchConfig(grid=1, options={"timing": False}))
    r["vyre bound, timing off"] = median_per_call(lambda: b.dispatch_with_device_buffers(ubound),
                                                  b.synchronize, calls)
    r["vyre unbound (cached binding)"] = median_per_call(
        lambda: b.dispatch_with_device_buffers(prog, [], [y], cfg), b.synchronize, calls)
    fn, _grid, _block, params = fast_launch_args(b, bound)
    stream = b._stream

    def raw() -> None:
        (err,) = drv.cuLaunchKernel(fn, 1, 1, 1, 32, 1, 1, 0, stream, params, 0)
        if err:
            raise RuntimeError(err)

    r["raw cuLaunchKernel"] = median_per_call(raw, b.synchronize, calls)
    try:
        import cupy as cp

        ker = cp.RawKernel(r'extern "C" __global__ void k(unsigned* y) {}', "k")
        arr = cp.zeros(32, dtype=cp.uint32)
        r["cupy RawKernel"] = median_per_call(lambda: ker((1,), (32,), (arr,)),
                                              cp.cuda.Device().synchronize, calls)
    except Exception as exc:
        print("cupy unavailable:", exc)
    try:
        import torch

        t = torch.zeros(1, dtype=torch.int32, device="cuda")
        r["torch add_ (1 element, not empty)"] = median_per_call(
            lambda: t.add_(1), torch.cuda.synchronize, calls)
    except Exception as exc:
        print("torch unavailable:", exc)
    y.free()
    raw_us = r["raw cuLaunchKernel"]
    import threading
    import timeit

    from vyre.config import Timing

    micro = {
        "Timing()": timeit.timeit(lambda: Timing(wall_ns=5, enqueue_ns=5), number=100000) * 10000,
        "perf_counter_ns": timeit.timeit(time.perf_counter_ns, number=200000) * 5000,
        "threading.get_ident": timeit.timeit(threading.get_ident, number=200000) * 5000,
        "empty lambda": timeit.timeit(lambda: None, number=200000) * 5000,
    }
    print("  host micro-costs (ns): " + ", ".join(f"{k} {v:.0f}" for k, v in micro.items()))
    RESULTS["host_micro_ns"] = micro
    for k, v in r.items():
        print(f"  {k:38s} {v:7.2f} us/launch   {v / raw_us:5.2f}x raw")
    RESULTS["dispatch_us"] = r


@section("(b) 100 small dispatches replayed as a CUDA graph")
def bench_graph(b: Any, reps: int) -> None:
    n = 1024
    y = b.allocate_device_buffer(4 * n)
    b.write(y, np.zeros(n, np.uint32))
    cfg = DispatchConfig.for_elements(n, 256)
    steps = [vyre.Step(inc_program(), [], [y], cfg)] * 100
    p = b.pipeline(steps)
    res = p.run(repeat=1, read=[(y, 0, None, np.uint32)])
    assert (res.reads[0] == 100).all(), "pipeline result wrong"
    r: dict[str, float] = {}
    for repeat in (1, 10, 100):
        times = []
        for _ in range(reps):
            t0 = time.perf_counter_ns()
            p.run(repeat=repeat)
            times.append((time.perf_counter_ns() - t0) / (100 * repeat) / 1e3)
        r[f"vyre pipeline repeat={repeat}"] = statistics.median(times)
    total = 100 * (1 + reps * 3)
    got = b.read(y, dtype=np.uint32)
    assert (got == 100 * (1 + reps * (1 + 10 + 100))).all(), (got[:4], total)
    try:
        import torch

        t = torch.zeros(n, dtype=torch.int32, device="cuda")
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):
                t.add_(1)
        torch.cuda.current_stream().wait_stream(s)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            for _ in range(100):
                t.add_(1)
        times = []
        for _ in range(reps):
            t0 = time.perf_counter_ns()
            for _ in range(10):
                g.replay()
            torch.cuda.synchronize()
            times.append((time.perf_counter_ns() - t0) / 1000 / 1e3)
        r["torch CUDAGraph (10 replays)"] = statistics.median(times)
    except Exception as exc:
        print("torch graph unavailable:", exc)
    y.free()
    for k, v in r.items():
        print(f"  {k:38s} {v:7.2f} us/dispatch")
    RESULTS["graph_us_per_dispatch"] = r


@section("(c) saxpy over 2**26 f32")
def bench_saxpy(b: Any, reps: int) -> None:
    n = 1 << 26
    rng = np.random.default_rng(1)
    x = rng.standard_normal(n, dtype=np.float32)
    y0 = rng.standard_normal(n, dtype=np.float32)
    a = 0.5
    gbs: dict[str, float] = {}
    expect = np.float32(a) * x + y0
    from vyre.backends.cuda import codegen
    from vyre.backends.cuda.backend import CudaBackend

    # (coarsen, vectorised, threads per merged block); the first is the default
    merge0 = codegen.MERGE_THREADS
    variants: list[tuple[int, bool, int]] = [(b.coarsen, True, merge0)]
    variants += [(k, True, merge0) for k in (1, 4, 8) if k != b.coarsen]
    variants += [(4, True, 0), (4, False, merge0), (8, True, 0)]
    for coarsen, vec, merge in variants:
        codegen.VECTORISE = vec
        codegen.MERGE_THREADS = merge
        first = (coarsen, vec, merge) == (b.coarsen, True, merge0)
        bb = b if first else CudaBackend(0, coarsen=coarsen)
        bx = bb.allocate_device_buffer(x.nbytes)
        by = bb.allocate_device_buffer(y0.nbytes)
        bb.write(bx, x)
        bb.write(by, y0)
        prog = saxpy_program()
        cfg = DispatchConfig.for_elements(n, 256, params={"a": a})
        bound = bb.bind(prog, [bx], [by], cfg)
        pbound = bb.bind(prog, [bx], [by],
                         DispatchConfig.for_elements(n, 256, params={"a": a}, profile=True))
        bb.dispatch_with_device_buffers(bound)
        got = bb.read(by, dtype=np.float32)
        assert np.array_equal(got, expect), f"vyre saxpy wrong (coarsen={coarsen})"
        for _ in range(5):
            bb.dispatch_with_device_buffers(bound)
        ns = [_device_ns(bb.dispatch_with_device_buffers(pbound)) for _ in range(reps)]
        label = "vyre" if bb is b else (
            f"vyre coarsen={coarsen}" + ("" if vec or coarsen == 1 else " scalar")
            + ("" if merge or coarsen == 1 else " unmerged"))
        gbs[label] = 12 * n / statistics.median(ns)
        bx.free()
        by.free()
        if bb is not b:
            bb.close()
    codegen.VECTORISE = True
    codegen.MERGE_THREADS = merge0
    try:
        import cupy as cp

        cx, cy = cp.asarray(x), cp.asarray(y0)
        k = cp.ElementwiseKernel("float32 x, float32 a", "float32 y", "y = a * x + y", "saxpy")
        k(cx, np.float32(a), cy)
        assert np.array_equal(cp.asnumpy(cy), expect), "cupy saxpy wrong"
        s, e = cp.cuda.Event(), cp.cuda.Event()
        ts = []
        for _ in range(reps):
            s.record()
            k(cx, np.float32(a), cy)
            e.record()
            e.synchronize()
            ts.append(cp.cuda.get_elapsed_time(s, e) * 1e6)
        gbs["cupy ElementwiseKernel"] = 12 * n / statistics.median(ts)
        del cx, cy
    except Exception as exc:
        print("cupy unavailable:", exc)
    try:
        import torch

        tx = torch.from_numpy(x).cuda()
        ty = torch.from_numpy(y0).cuda()
        ty.add_(tx, alpha=a)
        tr = ty.cpu().numpy()
        assert np.allclose(tr, expect, rtol=1e-6, atol=1e-6), "torch saxpy wrong"
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        ts = []
        for _ in range(reps):
            s.record()
            ty.add_(tx, alpha=a)
            e.record()
            e.synchronize()
            ts.append(s.elapsed_time(e) * 1e6)
        gbs["torch add_(alpha)"] = 12 * n / statistics.median(ts)
        del tx, ty
    except Exception as exc:
        print("torch unavailable:", exc)
    ref = gbs.get("torch add_(alpha)")
    for k, v in gbs.items():
        ratio = f"{gbs['vyre'] / v:5.2f}x (vyre/this)" if k != "vyre" else ""
        print(f"  {k:38s} {v:8.1f} GB/s  {ratio}")
    if ref:
        print(f"  vyre / torch = {gbs['vyre'] / ref:.3f} (target >= 0.95)")
    RESULTS["saxpy_GBps"] = gbs


@section("(d) compile: cold NVRTC vs warm in-memory vs warm on-disk")
def bench_compile(_b: Any, reps: int) -> None:
    from vyre.backends.cuda.backend import CudaBackend

    r: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as d:
        cold, mem, disk = [], [], []
        for i in range(reps):
            k = ProgramBuilder(f"compile_probe_{i}_{os.getpid()}", workgroup_size=128)
            y = k.buffer("y", ST.F32, "read_write")
            j = k.global_id(0)
            with k.if_(j < y.length()):
                y[j] = y[j] * 1.5 + float(i)
            prog = k.build()
            b1 = CudaBackend(0, cache_dir=d)
            t0 = time.perf_counter_ns()
            b1.compile(prog)
            cold.append(time.perf_counter_ns() - t0)
            t0 = time.perf_counter_ns()
            b1.compile(prog)
            mem.append(time.perf_counter_ns() - t0)
            b1.close()
            b2 = CudaBackend(0, cache_dir=d)
            t0 = time.perf_counter_ns()
            b2.compile(prog)
            disk.append(time.perf_counter_ns() - t0)
            assert b2.compile_stats.disk_hits == 1
            b2.close()
        r["cold NVRTC + load (ms)"] = statistics.median(cold) / 1e6
        r["warm in-memory (ms)"] = statistics.median(mem) / 1e6
        r["warm on-disk + load (ms)"] = statistics.median(disk) / 1e6
    for label, v in r.items():
        print(f"  {label:38s} {v:9.4f}")
    RESULTS["compile_ms"] = r


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", default=None)
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    a = {x.name: x for x in vyre.available_backends()}.get("cuda")
    if a is None or not a.available:
        print(f"CUDA unavailable: {a.reason if a else 'not registered'}")
        return 1
    from vyre.backends.cuda.backend import CudaBackend

    b = vyre.get_backend("cuda")
    assert isinstance(b, CudaBackend)
    caps = b.capabilities()
    print(f"coarsen={b.coarsen}; device: {caps.device} {caps.details['arch']} driver {caps.details['driver_version']}"
          f" nvrtc {caps.details['nvrtc_version']}")
    RESULTS["device"] = {k: str(v) for k, v in caps.details.items()}
    quick = args.quick
    bench_dispatch(b, 2000 if quick else 10000)
    bench_graph(b, 5 if quick else 15)
    bench_saxpy(b, 10 if quick else 30)
    bench_compile(b, 3 if quick else 5)
    b.close()
    print("\n== summary")
    d = RESULTS.get("dispatch_us", {})
    if d:
        print(f"  (a) vyre bound launch {d['vyre bound']:.2f} us = "
              f"{d['vyre bound'] / d['raw cuLaunchKernel']:.2f}x raw (target <= 1.3x)"
              + (f", {d['vyre bound'] / d['cupy RawKernel']:.2f}x CuPy" if "cupy RawKernel" in d else ""))
    g = RESULTS.get("graph_us_per_dispatch", {})
    if g:
        best = min(v for k, v in g.items() if k.startswith("vyre"))
        print(f"  (b) graph replay {best:.2f} us/dispatch (target < 2)")
    s = RESULTS.get("saxpy_GBps", {})
    if s and "torch add_(alpha)" in s:
        print(f"  (c) saxpy {s['vyre']:.0f} GB/s = {s['vyre'] / s['torch add_(alpha)']:.3f}x torch"
              " (target >= 0.95)")
    c = RESULTS.get("compile_ms", {})
    if c:
        print("  (d) compile ms: " + ", ".join(f"{k} {v:.3f}" for k, v in c.items()))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(RESULTS, f, indent=2)
    return 0 if "errors" not in RESULTS else 2


if __name__ == "__main__":
    sys.exit(main())


def _device_ns(t: vyre.Timing) -> int:
    """The device time of a profiled dispatch (CUDA always fills it)."""
    assert t.device_ns is not None, "a profiled CUDA dispatch reports device_ns"
    return t.device_ns
