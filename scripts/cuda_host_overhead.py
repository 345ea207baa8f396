"""vyre's own host cost around the CUDA driver, measured without a GPU:

    python scripts/cuda_host_overhead.py [launch] [compile] [--profile]

A stand-in for `cuda.bindings.driver` (tests/cuda_standin.py) answers every driver call
vyre makes with success at once (cuLaunchKernel is a no-op returning CUDA_SUCCESS), so what is timed is only the Python
around the driver: `launch` times the bench's dispatch.launch loop (a bound 1024-element
dispatch re-launched) through vyre and through the raw peer's launcher (the same stand-in
call, the peer's own closure), and both loops bare; `compile` times the bench's compile.cold
case (a never-seen program through CudaBackend.compile, on an empty disk cache) split into
stages, against the raw peer's NVRTC call on its own source (NVRTC runs for real here: it
needs no GPU). Figures are the calling thread's CPU time, best of rounds (a shared machine
blurs wall time). Nothing here may be used where a real driver is loaded: it patches
vyre.backends.cuda.driver for the life of the process.
"""

from __future__ import annotations

import argparse
import cProfile
import ctypes
import io
import os
import pstats
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from cuda.bindings import driver as real
from cuda_standin import install


def cpu_per_call(fn: Callable[[int], None], n: int, rounds: int) -> float:
    """Best per-iteration thread CPU ns of fn(n) over rounds."""
    best = float("inf")
    for _ in range(rounds):
        t0 = time.thread_time_ns()
        fn(n)
        best = min(best, (time.thread_time_ns() - t0) / n)
    return best


def launch_case(rounds: int, profile: bool) -> None:
    import numpy as np

    import vyre
    from vyre.config import DispatchConfig
    from vyre.tools.bench import workloads as W
    from vyre.tools.bench.peers import WG, _grid
    from vyre.tools.bench.vyre_impl import inc_program

    fake = install()
    b = vyre.get_backend("cuda:0")
    n = W.FULL.small
    y = b.allocate_device_buffer(4 * n)
    b.write(y, np.zeros(n, np.uint32))
    bound = b.bind(inc_program(), [], [y], DispatchConfig.for_elements(
        n, WG, options={"timing": True}))
    untimed = b.bind(inc_program(), [], [y], DispatchConfig.for_elements(
        n, WG, options={"timing": False}))
    d = b.dispatch_with_device_buffers
    d(bound)  # prepares the records
    d(untimed)

    def vyre_loop(k: int) -> None:  # the bench's vyre run() without the clock
        for _ in range(k):
            d(bound)

    def vyre_untimed(k: int) -> None:
        for _ in range(k):
            d(untimed)

    prog, ys, cfg = inc_program(), [y], DispatchConfig.for_elements(n, WG)
    d(prog, [], ys, cfg)

    def vyre_unbound(k: int) -> None:  # served by the launch cache
        for _ in range(k):
            d(prog, [], ys, cfg)

    # the raw peer's launcher (RawCudaPeer._launcher) over the same stand-in call
    launch, stream = fake.cuLaunchKernel, real.CUstream(0x2000)
    fn = real.CUfunction(0x4000)
    arg0 = ctypes.c_void_p(0x10000)
    arg1 = ctypes.c_uint(n)
    arr = (ctypes.c_void_p * 2)(ctypes.addressof(arg0), ctypes.addressof(arg1))
    params = ctypes.addressof(arr)
    grid = _grid(n)

    def go() -> None:
        (err,) = launch(fn, grid, 1, 1, WG, 1, 1, 0, stream, params, 0)
        if int(err):
            raise RuntimeError(f"cuLaunchKernel failed: {err}")

    def raw_loop(k: int) -> None:
        for _ in range(k):
            go()

    def stub_loop(k: int) -> None:  # the floor: the stand-in call alone
        for _ in range(k):
            launch(fn, grid, 1, 1, WG, 1, 1, 0, stream, params, 0)

    pipe = b.pipeline([bound] * W.FULL.batch)
    pipe.run()
    graph_launch, stream_sync = fake.cuGraphLaunch, fake.cuStreamSynchronize
    gexec = real.CUgraphExec(0x5000)

    def vyre_pipeline(k: int) -> None:  # per dispatch: one run() replays batch of them
        for _ in range(k // W.FULL.batch):
            pipe.run()

    def raw_graph(k: int) -> None:  # the raw peer's batch100: cuGraphLaunch + a sync
        for _ in range(k // W.FULL.batch):
            (err,) = graph_launch(gexec, stream)
            if int(err):
                raise RuntimeError(f"cuGraphLaunch failed: {err}")
            stream_sync(stream)

    k = 20000
    res: dict[str, float] = {}
    for _ in range(3):  # interleaved
        for label, f in (("stand-in call alone", stub_loop), ("raw peer go()", raw_loop),
                         ("vyre bound, options timing=True", vyre_loop),
                         ("vyre bound, no host Timing (default)", vyre_untimed),
                         ("vyre unbound (program, [], [y], cfg)", vyre_unbound),
                         ("raw graph replay, per dispatch of 100", raw_graph),
                         ("vyre pipeline.run(), per dispatch of 100", vyre_pipeline)):
            v = cpu_per_call(f, k, rounds)
            res[label] = min(res.get(label, v), v)
    floor = res["stand-in call alone"]
    for label, ns in res.items():
        print(f"  {label:44s} {ns / 1e3:6.3f} us/launch  ({(ns - floor) / 1e3:+.3f} over the "
              "call alone)")
    print(f"  vyre - raw: {(res['vyre bound, no host Timing (default)'] - res['raw peer go()']) / 1e3:+.3f} us/launch")
    if profile:
        pr = cProfile.Profile()
        pr.enable()
        vyre_loop(20000)
        pr.disable()
        s = io.StringIO()
        pstats.Stats(pr, stream=s).sort_stats("tottime").print_stats(8)
        print(s.getvalue())
    b.close()


def compile_case(rounds: int, profile: bool) -> None:
    from vyre.backends.cuda import nvrtc
    from vyre.tools.bench.peers import CUDA_SAXPY
    from vyre.tools.bench.vyre_impl import compile_probe_program

    install()
    tmp = tempfile.TemporaryDirectory(prefix="vyre-cold-")
    os.environ["VYRE_CACHE_DIR"] = tmp.name
    from vyre.backends.cuda.runtime import CudaBackend

    b = CudaBackend(0)
    plain = CudaBackend(0, coarsen=1)
    arch = b.arch
    salt = [time.perf_counter_ns()]

    def vyre_cold(backend: Any = b) -> float:
        salt[0] += 1
        prog = compile_probe_program(salt[0])
        t0 = time.thread_time_ns()
        backend.compile(prog)
        return time.thread_time_ns() - t0

    def raw_cold() -> float:
        salt[0] += 1
        s = salt[0]
        src = CUDA_SAXPY.replace("saxpy", f"saxpy_{s}").replace(
            "a * x[i]", f"a * x[i] + {s % 1000}.0f")
        t0 = time.thread_time_ns()
        nvrtc.compile_source(src, arch, ("--std=c++17",), name=f"saxpy_{s}.cu")
        return time.thread_time_ns() - t0

    def vyre_nvrtc_only() -> float:  # NVRTC on vyre's own generated source
        salt[0] += 1
        prog = compile_probe_program(salt[0])
        src = b.source(prog)
        t0 = time.thread_time_ns()
        nvrtc.compile_source(src, arch, name="vyre.cu")
        return time.thread_time_ns() - t0

    res: dict[str, float] = {}
    for _ in range(rounds):
        for label, f in (("raw peer NVRTC (its source, its options)", raw_cold),
                         ("NVRTC alone on vyre's source, vyre's options", vyre_nvrtc_only),
                         ("vyre CudaBackend.compile, cold", vyre_cold),
                         ("vyre compile, cold, coarsen=1 (plain kernel)",
                          lambda: vyre_cold(plain))):
            v = f()
            res[label] = min(res.get(label, v), v)
    for label, ns in res.items():
        print(f"  {label:48s} {ns / 1e6:7.2f} ms")
    # the stages, best of rounds
    from vyre.backends.cuda.render import generate
    from vyre.ir.validate import validate

    stages: dict[str, float] = {}
    for _ in range(rounds):
        salt[0] += 1
        prog = compile_probe_program(salt[0])
        t = time.thread_time_ns
        t0 = t()
        validate(prog)
        t1 = t()
        _ = prog.content_hash
        t2 = t()
        generate(prog, coarsen=b.coarsen)
        t3 = t()
        for name, ns in (("validate", t1 - t0), ("content_hash", t2 - t1),
                         ("generate (lower + print)", t3 - t2)):
            stages[name] = min(stages.get(name, 1e18), ns)
        gen = generate(prog, coarsen=b.coarsen)
        t0 = t()
        key = nvrtc.cache_key(gen.source, arch)
        stages["cache_key"] = min(stages.get("cache_key", 1e18), t() - t0)
        cubin = nvrtc.compile_source(gen.source, arch)
        disk = nvrtc.DiskCache()
        t0 = t()
        disk.get(key)
        stages["disk get (miss)"] = min(stages.get("disk get (miss)", 1e18), t() - t0)
        w0, t0 = time.perf_counter_ns(), t()
        disk.put(key, cubin)
        stages["disk put (cpu)"] = min(stages.get("disk put (cpu)", 1e18), t() - t0)
        stages["disk put (wall)"] = min(stages.get("disk put (wall)", 1e18),
                                        time.perf_counter_ns() - w0)
    for name, ns in stages.items():
        print(f"  stage {name:40s} {ns / 1e6:7.3f} ms")
    if profile:
        pr = cProfile.Profile()
        pr.enable()
        for _ in range(3):
            vyre_cold()
        pr.disable()
        s = io.StringIO()
        pstats.Stats(pr, stream=s).sort_stats("cumtime").print_stats(30)
        print(s.getvalue())
    b.close()
    plain.close()
    tmp.cleanup()


def main(argv: list[str]) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("what", nargs="*", default=["launch", "compile"])
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--profile", action="store_true")
    a = ap.parse_args(argv)
    if "launch" in a.what:
        print("launch (thread CPU per launch, best of rounds):")
        launch_case(a.rounds, a.profile)
    if "compile" in a.what:
        print("compile.cold (thread CPU, best of rounds):")
        compile_case(a.rounds, a.profile)


if __name__ == "__main__":
    main(sys.argv[1:])
