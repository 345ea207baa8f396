"""Evidence for the figures where `vyre bench` finds vyre slower than a peer: variants and
breakdowns that say where the time goes (a diagnostic script, not part of the command).

    python -m vyre.tools.bench.evidence [--json out.json]

Sections: CUDA launch cost with and without the host-side Timing; a CUDA pipeline's host
overhead vs its device time; reduction and scan per pass and with more work per thread;
cold compile split into code generation, NVRTC on vyre's source and the rest; a profile of
the wgpu launch path; vyre's saxpy WGSL run through the raw wgpu-py path (shader vs
dispatch path, and the grid vyre picks). Every variant's output is checked like the bench's.
This module must never change how vyre runs; it only measures through the public API and
the bench's own peers.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import pstats
import statistics
import struct
import time
from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np

import vyre
from vyre import DispatchConfig, DispatchOptions, Step
from vyre.ir.types import ScalarType

from . import workloads as W
from .peers import WGSL_SAXPY, RawCudaPeer, RawWgpuPeer
from .vyre_impl import compile_probe_program, inc_program

f32 = ScalarType.F32
OUT: dict[str, Any] = {}
SIZES = W.FULL


def med(fn: Callable[[], float], reps: int, warm: int = 2) -> float:
    for _ in range(warm):
        fn()
    return statistics.median(fn() for _ in range(reps))


def section(name: str, fn: Callable[[], dict[str, Any]]) -> None:
    print(f"\n== {name}", flush=True)
    try:
        res = fn()
    except Exception as exc:
        res = {"error": f"{type(exc).__name__}: {exc}"}
    OUT[name] = res
    for k, v in res.items():
        print(f"  {k}: {v:.4g}" if isinstance(v, float) else f"  {k}: {v}", flush=True)


def cuda_launch(b: Any) -> dict[str, Any]:
    n = 1024
    y = b.allocate_device_buffer(4 * n)
    b.write(y, np.zeros(n, np.uint32))
    prog = inc_program()
    cfg = DispatchConfig.for_elements(n, 256)
    res: dict[str, Any] = {}
    calls = 1000
    for label, c in (("bound, options timing=True", cfg.model_copy(
                         update={"options": DispatchOptions(timing=True)})),
                     ("bound, no host Timing (the default)", cfg)):
        bound = b.bind(prog, [], [y], c)

        def run(bound: Any = bound) -> float:
            t0 = time.perf_counter_ns()
            for _ in range(calls):
                b.dispatch_with_device_buffers(bound)
            b.synchronize()
            return (time.perf_counter_ns() - t0) / calls / 1e3
        res[f"{label} us/launch"] = med(run, 9)
    total = calls * (9 + 2) * 2
    got = b.read(y, dtype=np.uint32)
    res["check"] = "passed" if (got == total).all() else f"FAILED {got[:3]} != {total}"
    t0 = time.perf_counter_ns()
    for _ in range(100000):
        vyre.Timing(wall_ns=5, enqueue_ns=5)
    res["Timing() construction ns"] = (time.perf_counter_ns() - t0) / 1e5
    b.free(y)
    return res


def cuda_inc_kernels(b: Any, raw: RawCudaPeer) -> dict[str, Any]:
    """The bench's dispatch.launch kernel (inc over 1024 u32): vyre's compiled function and
    the raw peer's, each launched by bare cuLaunchKernel on vyre's stream and on the peer's,
    so host path, kernel and stream are told apart; plus each kernel's device time."""
    import ctypes

    from .peers import CUDA_INC, _grid

    drv = raw.drv
    n, calls = 1024, 2000
    y = b.allocate_device_buffer(4 * n)
    b.write(y, np.zeros(n, np.uint32))
    bound = b.bind(inc_program(), [], [y], DispatchConfig.for_elements(n, 256))
    vfn, vgrid, vblock, vparams = b.launch_args(bound)
    rptr = raw._alloc(np.zeros(n, np.uint32))
    rargs = (ctypes.c_uint64(rptr), ctypes.c_uint32(n))
    rparams, _keep = raw._pack(*rargs)
    rfn = raw._function(CUDA_INC, "inc")
    streams = {"vyre's stream": b.stream_handle, "peer's stream": raw.stream}
    kernels = {"vyre kernel": (vfn, tuple(vgrid), tuple(vblock), vparams),
               "peer kernel": (rfn, (_grid(n), 1, 1), (256, 1, 1), rparams)}
    res: dict[str, Any] = {"vyre launch shape": f"grid {tuple(vgrid)} block {tuple(vblock)}"}
    for kname, (fn, g, blk, params) in kernels.items():
        for sname, stream in streams.items():
            def run(fn: Any = fn, g: Any = g, blk: Any = blk, params: Any = params,
                    stream: Any = stream) -> float:
                t0 = time.perf_counter_ns()
                for _ in range(calls):
                    drv.cuLaunchKernel(fn, *g, *blk, 0, stream, params, 0)
                drv.cuStreamSynchronize(stream)
                return (time.perf_counter_ns() - t0) / calls / 1e3
            res[f"{kname}, raw cuLaunchKernel, {sname}: us/launch"] = med(run, 7)
        one = partial(drv.cuLaunchKernel, fn, *g, *blk, 0, raw.stream, params, 0)
        res[f"{kname}: device us per kernel (events)"] = med(raw._events(one), 21) * 1e6
    bnd_off = b.bind(inc_program(), [], [y], DispatchConfig.for_elements(
        n, 256, options={"timing": False}))

    def vyre_run() -> float:
        t0 = time.perf_counter_ns()
        for _ in range(calls):
            b.dispatch_with_device_buffers(bnd_off)
        b.synchronize()
        return (time.perf_counter_ns() - t0) / calls / 1e3
    res["vyre dispatch_with_device_buffers (timing off): us/launch"] = med(vyre_run, 7)
    raw._free(rptr)()
    b.free(y)
    return res


def cuda_pipeline(b: Any) -> dict[str, Any]:
    n = 1024
    y = b.allocate_device_buffer(4 * n)
    b.write(y, np.zeros(n, np.uint32))
    prog = inc_program()
    cfg = DispatchConfig.for_elements(n, 256)
    p = b.pipeline([Step(prog, [], [y], cfg)] * 100)
    timed = b.pipeline([Step(prog, [], [y], cfg.model_copy(update={"profile": True}))] * 100)
    res: dict[str, Any] = {}
    for rep in (1, 10):
        ts = [p.run(repeat=rep).timing for _ in range(15)]
        res[f"repeat={rep} wall us/dispatch"] = statistics.median(t.wall_ns for t in ts) / (
            100 * rep) / 1e3
        res[f"repeat={rep} device us/dispatch (profiled run)"] = statistics.median(
            timed.run(repeat=rep).timing.device_ns or 0 for _ in range(15)) / (100 * rep) / 1e3
        res[f"repeat={rep} enqueue us (host, per run)"] = statistics.median(
            t.enqueue_ns for t in ts) / 1e3
        res[f"repeat={rep} wait us (per run)"] = statistics.median(t.wait_ns for t in ts) / 1e3
    got = b.read(y, dtype=np.uint32)
    res["check"] = "passed" if (got == 2 * 100 * 15 * 11).all() else f"FAILED {got[:3]}"
    b.free(y)
    return res


def _per_pass(b: Any, steps: list[Any], nbytes_of: Callable[[Any], int]) -> list[str]:
    out = []
    for s in steps:
        bound = b.bind(s.program, s.inputs, s.outputs, s.config.model_copy(
            update={"profile": True}))
        ns = med(partial(_device_ns, b, bound), 9)
        out.append(f"{s.program.name} grid={s.config.grid}: {ns / 1e3:.1f} us "
                   f"({nbytes_of(s) / ns:.0f} GB/s of its own traffic)")
    return out


def _device_ns(b: Any, bound: Any) -> float:
    return float(b.dispatch_with_device_buffers(bound).device_ns)


def _pipe_ns(pipe: Any) -> float:
    return float(pipe.run().timing.device_ns)


def _reduce_bytes(step: Any) -> int:
    return 4 * int(step.config.params["n"])


def _scan_bytes(step: Any) -> int:
    return 8 * int(step.config.params["n"])


def reduce_scan(b: Any) -> dict[str, Any]:
    from vyre.programs.reduce import plan_reduce
    from vyre.programs.scan import plan_scan

    data = W.Data(SIZES.capped(b.capabilities().limits.get("max_storage_binding_bytes")))
    x = data.unit_f32
    n = x.size
    xb = b.allocate_device_buffer(x.nbytes)
    b.write(xb, x)
    ob = b.allocate_device_buffer(4)
    res: dict[str, Any] = {}
    for per in (4, 16, 64):
        plan = plan_reduce(b, xb, n, "sum", f32, ob, per_thread=per)
        pipe = b.pipeline([Step(s.program, s.inputs, s.outputs, s.config.model_copy(
            update={"profile": True})) for s in plan.steps])
        ns = med(partial(_pipe_ns, pipe), 15)
        got = float(b.read(ob, dtype=np.float32)[0])
        ok = W.check_sum(got, data)
        res[f"sum per_thread={per}: GB/s"] = 4 * n / ns
        res[f"sum per_thread={per}: passes / check"] = f"{len(plan.steps)} / {ok or 'passed'}"
        if per == 4:
            res["sum per_thread=4 per pass"] = _per_pass(
                b, plan.steps, _reduce_bytes)
        for t in plan.temporaries:
            b.free(t)
    db = b.allocate_device_buffer(x.nbytes)
    plan = plan_scan(b, xb, db, n, f32, True)
    res["scan passes"] = [f"{s.program.name} grid={s.config.grid}" for s in plan.steps]
    res["scan per pass"] = _per_pass(b, plan.steps, _scan_bytes)
    pipe = b.pipeline([Step(s.program, s.inputs, s.outputs, s.config.model_copy(
        update={"profile": True})) for s in plan.steps])
    ns = med(lambda: float(pipe.run().timing.device_ns), 15)
    res["scan GB/s (8 bytes/elem counted)"] = 8 * n / ns
    res["scan check"] = W.check_scan(b.read(db, dtype=np.float32), data) or "passed"
    for t in [xb, ob, db, *plan.temporaries]:
        b.free(t)
    return res


def cuda_compile(b: Any, raw: RawCudaPeer) -> dict[str, Any]:
    res: dict[str, Any] = {}
    gen, nvrtc_vyre, total = [], [], []
    for _ in range(5):
        prog = compile_probe_program(time.perf_counter_ns())
        t0 = time.perf_counter_ns()
        src = b.source(prog)
        gen.append((time.perf_counter_ns() - t0) / 1e6)
        t0 = time.perf_counter_ns()
        raw._function(src, "vyre_main")
        nvrtc_vyre.append((time.perf_counter_ns() - t0) / 1e6)
        prog2 = compile_probe_program(time.perf_counter_ns())
        t0 = time.perf_counter_ns()
        b.compile(prog2)
        total.append((time.perf_counter_ns() - t0) / 1e6)
    res["vyre compile() total ms"] = statistics.median(total)
    res["of which codegen (backend.source) ms"] = statistics.median(gen)
    res["raw NVRTC + load of vyre's generated source ms"] = statistics.median(nvrtc_vyre)
    res["generated source lines / bytes"] = f"{src.count(chr(10))} / {len(src)}"
    return res


def wgpu_launch(b: Any) -> dict[str, Any]:
    n = 1024
    y = b.allocate_device_buffer(4 * n)
    b.write(y, np.zeros(n, np.uint32))
    bound = b.bind(inc_program(), [], [y], DispatchConfig.for_elements(n, 256))
    for _ in range(50):
        b.dispatch_with_device_buffers(bound)
    b.synchronize()
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(500):
        b.dispatch_with_device_buffers(bound)
    b.synchronize()
    prof.disable()
    s = io.StringIO()
    pstats.Stats(prof, stream=s).sort_stats("tottime").print_stats(14)
    got = b.read(y, dtype=np.uint32)
    b.free(y)
    lines = [ln for ln in s.getvalue().splitlines() if ln.strip()][:24]
    return {"check": "passed" if (got == 550).all() else "FAILED",
            "profile (500 launches, tottime)": "\n    " + "\n    ".join(lines)}


def wgpu_saxpy_shader(b: Any, raw: RawWgpuPeer) -> dict[str, Any]:
    from vyre.programs.elementwise import saxpy

    data = W.Data(SIZES.capped(b.capabilities().limits.get("max_storage_binding_bytes")))
    x, y0 = data.saxpy_x, data.saxpy_y0
    n = x.size
    src = b.source(saxpy(f32))
    res: dict[str, Any] = {}
    cfg = DispatchConfig.for_elements(n, 256, params={"n": n, "a": W.SAXPY_A})
    groups = -(-n // 256)
    grids = {"vyre's grid": cfg.grid, "tight grid": (-(-groups // 5), 5, 1)}
    for gname, grid in grids.items():
        for sname, code, uni in (
            ("vyre WGSL", src, struct.pack("<IIIfIII4x", n, n, n, W.SAXPY_A, 0, 0, 0)),
            ("raw WGSL", WGSL_SAXPY,
             np.array([W.SAXPY_A, 0, 0, 0], np.float32).tobytes()),
        ):
            xb, yb = raw._buffer(x), raw._buffer(y0)
            pipe, bg = raw._kernel(code, [xb, yb], uni)
            q = raw._query()
            count = 0

            def run(pipe: Any = pipe, bg: Any = bg, grid: Any = grid, q: Any = q) -> float:
                nonlocal count
                count += 1
                t = raw._pass(pipe, bg, grid, 1, q)
                assert t is not None
                return t
            t = med(run, 15)
            ok = W.check_saxpy(raw._read(yb, np.float32), x, y0, count)
            res[f"{sname}, {gname} {grid}: GB/s"] = f"{12 * n / t / 1e9:.0f} ({ok or 'passed'})"
            xb.destroy()
            yb.destroy()
    return res


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--json")
    ap.add_argument("--quick", action="store_true", help="small sizes (a smoke test)")
    args = ap.parse_args()
    global SIZES
    if args.quick:
        SIZES = W.QUICK
    avail = {a.name for a in vyre.available_backends() if a.available}
    if "cuda" in avail:
        b = vyre.get_backend("cuda")
        raw = RawCudaPeer()
        section("cuda: launch cost", lambda: cuda_launch(b))
        section("cuda: inc kernel, vyre's vs the peer's", lambda: cuda_inc_kernels(b, raw))
        section("cuda: 100-dispatch pipeline", lambda: cuda_pipeline(b))
        section("cuda: reduction and scan", lambda: reduce_scan(b))
        section("cuda: cold compile breakdown", lambda: cuda_compile(b, raw))
        b.close()
    if "wgpu" in avail:
        w = vyre.get_backend("wgpu")
        rw = RawWgpuPeer(w.capabilities().device)
        section("wgpu: launch path profile", lambda: wgpu_launch(w))
        section("wgpu: saxpy shader vs dispatch path", lambda: wgpu_saxpy_shader(w, rw))
        section("wgpu: reduction and scan", lambda: reduce_scan(w))
        w.close()
    if args.json:
        with open(args.json, "w") as f:
            json.dump(OUT, f, indent=2, default=str)


if __name__ == "__main__":
    main()
