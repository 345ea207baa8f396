"""Where vyre's CUDA launch and cold-compile time goes on a real GPU, next to the raw
cuda-bindings peer of `vyre bench` (the GPU half of scripts/cuda_host_overhead.py):

    python scripts/cuda_overhead_gpu.py [--json out.json]

launch: the bench's dispatch.launch loop (1000 launches of the 1024-element inc kernel,
then one stream synchronisation), interleaved rounds, median us per launch: the raw peer's
launcher; vyre bound with options timing=True; vyre bound untimed (the default); and
cuLaunchKernel called bare on vyre's own packed record (the floor for vyre's kernel on
vyre's stream); and vyre unbound (program, buffers, config: a launch-cache hit). compile: a never-seen program per round (empty disk cache), median ms:
the raw peer (NVRTC + cuModuleLoadData); vyre compile() on the default (4x coarsened)
variant and on the plain one (coarsen=1), and the stages of the former timed one by one
(generate, NVRTC, disk write, cuModuleLoadData). Every launch loop's output is checked.
host clock: the cost of one perf_counter_ns() read and the clocksource (a timed launch
reads the clock twice). --timing-variants: the pieces of a timed launch, one by one. Takes about 30 s on an H100.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from typing import Any

import numpy as np

import vyre
from vyre import DispatchConfig
from vyre.backends.cuda import nvrtc
from vyre.backends.cuda.render import generate
from vyre.backends.cuda.runtime import CudaBackend
from vyre.tools.bench import workloads as W
from vyre.tools.bench.peers import CUDA_INC, CUDA_SAXPY, WG, RawCudaPeer, _grid
from vyre.tools.bench.vyre_impl import compile_probe_program, inc_program

OUT: dict[str, Any] = {}


def interleaved(cases: dict[str, Callable[[], float]], rounds: int) -> dict[str, float]:
    got: dict[str, list[float]] = {k: [] for k in cases}
    for f in cases.values():
        f()  # warm-up
    for _ in range(rounds):
        for k, f in cases.items():
            got[k].append(f())
    return {k: statistics.median(v) for k, v in got.items()}


def launch(b: Any, raw: RawCudaPeer) -> None:
    import ctypes

    n, k = W.FULL.small, W.FULL.launches
    y = b.allocate_device_buffer(4 * n)
    b.write(y, np.zeros(n, np.uint32))
    timed = b.bind(inc_program(), [], [y], DispatchConfig.for_elements(
        n, WG, options={"timing": True}))
    untimed = b.bind(inc_program(), [], [y], DispatchConfig.for_elements(
        n, WG, options={"timing": False}))
    d = b.dispatch_with_device_buffers
    count = [0]
    rec = b.launch_args(timed)
    fn, grid, block, params = rec
    drv, stream = b.driver, b.cu_stream
    ry = raw._alloc(np.zeros(n, np.uint32))
    rparams, keep = raw._pack(ctypes.c_void_p(ry), ctypes.c_uint(n))
    go = raw._launcher(raw._function(CUDA_INC, "inc"), _grid(n), rparams)
    rcount = [0]

    def wall(loop: Callable[[], None], sync: Callable[[], Any]) -> float:
        t0 = time.perf_counter_ns()
        loop()
        sync()
        return (time.perf_counter_ns() - t0) / k / 1e3

    def raw_loop() -> None:
        _ = keep
        for _ in range(k):
            go()
        rcount[0] += k

    def vyre_loop(bound: Any) -> Callable[[], None]:
        def loop() -> None:
            for _ in range(k):
                d(bound)
            count[0] += k
        return loop

    prog, ys, cfg = inc_program(), [y], DispatchConfig.for_elements(n, WG)

    def unbound_loop() -> None:  # served by the launch cache
        for _ in range(k):
            d(prog, [], ys, cfg)
        count[0] += k

    def bare_loop() -> None:
        launch_kernel = drv.cuLaunchKernel
        for _ in range(k):
            launch_kernel(fn, *grid, *block, 0, stream, params, 0)
        count[0] += k

    res: dict[str, Any] = interleaved({
        "raw peer go() us/launch": lambda: wall(raw_loop, raw._sync),
        "vyre bound, Timing on us/launch": lambda: wall(vyre_loop(timed), b.synchronize),
        "vyre bound, timing=False (default) us/launch": lambda: wall(vyre_loop(untimed), b.synchronize),
        "vyre unbound (launch cache hit) us/launch": lambda: wall(unbound_loop, b.synchronize),
        "bare cuLaunchKernel on vyre's record us/launch": lambda: wall(bare_loop, b.synchronize),
    }, 15)
    got = b.read(y, dtype=np.uint32)
    rgot = raw._read(ry, np.zeros(n, np.uint32))
    ok = (got == count[0]).all() and (rgot == rcount[0]).all()
    res["check"] = "passed" if ok else f"FAILED {got[:3]} vs {count[0]}, {rgot[:3]}"
    r = res["raw peer go() us/launch"]
    for key in list(res):
        if key.startswith("vyre") and isinstance(res[key], float):
            res[key.replace("us/launch", "ratio raw/vyre")] = r / res[key]
    raw._free(ry)()
    b.free(y)
    OUT["launch"] = res


def timing_variants(b: Any) -> None:
    """What in a timed launch costs on this host: vyre's own `_launch_record` on a bound
    dispatch's record, in loops that add one piece each (two clock reads; a Timing built
    from them; a Timing of a constant, no clock), next to the public call untimed (the
    default) and timed (options timing=True). (An interned Timing, looked up by its
    nanoseconds, cost more than a fresh one there: 6.64 vs 6.38 us, round 2.)"""
    n, k = W.FULL.small, W.FULL.launches
    y = b.allocate_device_buffer(4 * n)
    b.write(y, np.zeros(n, np.uint32))
    bound = b.bind(inc_program(), [], [y], DispatchConfig.for_elements(n, WG))
    timed = b.bind(inc_program(), [], [y], DispatchConfig.for_elements(
        n, WG, options={"timing": True}))
    d = b.dispatch_with_device_buffers
    d(bound)
    d(timed)
    rec, bufs, lr = bound.launch.record, bound.buffers, b._launch_record
    p, tn, timing = time.perf_counter_ns, tuple.__new__, vyre.Timing
    sink: list[Any] = [None]

    def none() -> None:
        for _ in range(k):
            lr(rec, bufs)

    def clocks() -> None:
        for _ in range(k):
            t0 = p()
            lr(rec, bufs)
            sink[0] = p() - t0

    def fresh() -> None:
        for _ in range(k):
            t0 = p()
            lr(rec, bufs)
            ns = p() - t0
            sink[0] = tn(timing, (ns, ns, 0, None))

    def constant() -> None:
        for _ in range(k):
            lr(rec, bufs)
            sink[0] = tn(timing, (5000, 5000, 0, None))

    def public(x: Any) -> Callable[[], None]:
        def loop() -> None:
            for _ in range(k):
                d(x)
        return loop

    def wall(loop: Callable[[], None]) -> float:
        t0 = time.perf_counter_ns()
        loop()
        b.synchronize()
        return (time.perf_counter_ns() - t0) / k / 1e3

    res: dict[str, Any] = interleaved({
        "_launch_record alone us/launch": lambda: wall(none),
        "+ two clock reads": lambda: wall(clocks),
        "+ clocks + fresh Timing": lambda: wall(fresh),
        "+ fresh Timing of a constant (no clock)": lambda: wall(constant),
        "public, default (untimed)": lambda: wall(public(bound)),
        "public, options timing=True": lambda: wall(public(timed)),
    }, 15)
    got = b.read(y, dtype=np.uint32)
    res["check"] = "passed" if (got == got[0]).all() and got[0] > 0 else f"FAILED {got[:3]}"
    b.free(y)
    OUT["timing variants"] = res


def compile_cold(spec: str, raw: RawCudaPeer) -> None:
    res: dict[str, list[float]] = {}

    def add(k: str, ns: int) -> None:
        res.setdefault(k, []).append(ns / 1e6)

    with tempfile.TemporaryDirectory(prefix="vyre-cold-") as tmp:
        os.environ["VYRE_CACHE_DIR"] = tmp
        b4 = CudaBackend(spec)
        b1 = CudaBackend(spec, coarsen=1)
        arch = b4.arch
        drv = b4.driver
        disk = nvrtc.DiskCache()
        for i in range(7):
            salt = time.perf_counter_ns()
            src = CUDA_SAXPY.replace("saxpy", f"saxpy_{salt}").replace(
                "a * x[i]", f"a * x[i] + {salt % 1000}.0f")
            t0 = time.perf_counter_ns()
            raw._function(src, f"saxpy_{salt}")
            add("raw peer: NVRTC + cuModuleLoadData ms", time.perf_counter_ns() - t0)
            for label, b in (("vyre compile(), default (coarsened) ms", b4),
                             ("vyre compile(), coarsen=1 ms", b1)):
                prog = compile_probe_program(time.perf_counter_ns() + i)
                t0 = time.perf_counter_ns()
                b.compile(prog)
                add(label, time.perf_counter_ns() - t0)
            prog = compile_probe_program(time.perf_counter_ns() + 100 + i)
            t0 = time.perf_counter_ns()
            _ = prog.content_hash
            t1 = time.perf_counter_ns()
            gen = generate(prog, coarsen=b4.coarsen)
            t2 = time.perf_counter_ns()
            opts = nvrtc.compile_options()
            key = nvrtc.cache_key(gen.source, arch, opts)
            cubin = nvrtc.compile_source(gen.source, arch, opts)
            t3 = time.perf_counter_ns()
            disk.put(key, cubin)
            t4 = time.perf_counter_ns()
            err, mod = drv.cuModuleLoadData(cubin)
            t5 = time.perf_counter_ns()
            assert int(err) == 0, err
            drv.cuModuleUnload(mod)
            for k, ns in (("stage: content hash ms", t1 - t0), ("stage: generate ms", t2 - t1),
                          ("stage: NVRTC (coarsened source) ms", t3 - t2),
                          ("stage: disk write ms", t4 - t3),
                          ("stage: cuModuleLoadData ms", t5 - t4)):
                add(k, ns)
        b4.close()
        b1.close()
    OUT["compile.cold"] = {k: statistics.median(v) for k, v in res.items()}
    OUT["compile.cold"]["nvrtc options"] = " ".join(nvrtc.compile_options())


def host_clock() -> None:
    """What one host clock read costs here (a launch's default Timing takes two), and the
    kernel's clocksource (a VM's without a vDSO-readable one makes each read a syscall)."""
    import timeit

    try:
        with open("/sys/devices/system/clocksource/clocksource0/current_clocksource") as f:
            source = f.read().strip()
    except OSError:
        source = "unknown"
    n = 200_000
    per = min(timeit.repeat("p()", "import time; p = time.perf_counter_ns", number=n,
                            repeat=5)) / n
    empty = min(timeit.repeat("pass", number=n, repeat=5)) / n
    OUT["host clock"] = {"clocksource": source, "perf_counter_ns() us/call": (per - empty) * 1e6}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json")
    ap.add_argument("--timing-variants", action="store_true",
                    help="also time the pieces of a timed launch (see timing_variants)")
    ap.add_argument("--no-compile", action="store_true", help="skip the compile section")
    a = ap.parse_args()
    host_clock()
    raw = RawCudaPeer()
    b = vyre.get_backend("cuda:0")
    launch(b, raw)
    if a.timing_variants:
        timing_variants(b)
    b.close()
    if not a.no_compile:
        compile_cold("cuda:0", raw)
    raw.close()
    for section, vals in OUT.items():
        print(f"== {section}")
        for k, v in vals.items():
            print(f"  {k}: {v:.4g}" if isinstance(v, float) else f"  {k}: {v}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(OUT, f, indent=2)


if __name__ == "__main__":
    main()
