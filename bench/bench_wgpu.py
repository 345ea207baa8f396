"""vyre's wgpu backend vs raw wgpu-py doing the same work, in one process.

    python bench/bench_wgpu.py [--n-log2 26] [--reps 30]

(a) one small dispatch + submit + wait; (b) 100 small dispatches in one batch + wait;
(c) saxpy over 2^n f32 (12 bytes per element) as one dispatch and as 50 in one batch, GB/s.
Outputs are checked against NumPy before any timing counts; numbers are medians over
repeated runs after warm-up. Both sides wait the same way (wgpuDevicePoll with wait=true,
wgpu-py's `device._poll_wait()`); the raw side reuses its bind groups and pipelines, as a
careful hand-written program would. This script must never be imported by the library.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import wgpu

import vyre
from vyre import DispatchConfig, ProgramBuilder, ReadRange, Step, f32, u32

WG = 256


def median_ns(fns: dict[str, Callable[[], object]], reps: int, warmup: int = 3) -> dict[str, float]:
    """Median wall time of each callable, measured interleaved (one call of each per round,
    the order alternating between rounds) so that clock and power-state drift over the run
    falls on every side alike instead of on whichever ran last."""
    names = list(fns)
    for _ in range(warmup):
        for name in names:
            fns[name]()
    ts: dict[str, list[int]] = {name: [] for name in names}
    for r in range(reps):
        for name in names if r % 2 == 0 else reversed(names):
            t0 = time.perf_counter_ns()
            fns[name]()
            ts[name].append(time.perf_counter_ns() - t0)
    return {name: float(statistics.median(v)) for name, v in ts.items()}


# ------------------------------------------------------------------ kernels


def vyre_inc() -> vyre.Program:
    k = ProgramBuilder("inc", workgroup_size=WG)
    a = k.buffer("a", u32, "read_write")
    i = k.global_linear_id()
    with k.if_(i < a.length()):
        a[i] = a[i] + 1
    return k.build()


def vyre_saxpy() -> vyre.Program:
    k = ProgramBuilder("saxpy", workgroup_size=WG)
    x, y = k.buffer("x", f32), k.buffer("y", f32, "read_write")
    a = k.param("a", f32)
    i = k.global_linear_id()
    with k.if_(i < y.length()):
        y[i] = a * x[i] + y[i]
    return k.build()


RAW_INC = f"""
@group(0) @binding(0) var<storage, read_write> a: array<u32>;
@compute @workgroup_size({WG})
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {{
    let i = gid.x + gid.y * nwg.x * {WG}u;
    if (i < arrayLength(&a)) {{ a[i] = a[i] + 1u; }}
}}
"""

RAW_SAXPY = f"""
struct P {{ a: f32 }}
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;
@compute @workgroup_size({WG})
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {{
    let i = gid.x + gid.y * nwg.x * {WG}u;
    if (i < arrayLength(&y)) {{ y[i] = p.a * x[i] + y[i]; }}
}}
"""


class Raw:
    """Hand-written wgpu-py: one pipeline + bind group per kernel, reused."""

    def __init__(self, adapter: Any) -> None:
        lim = dict(adapter.limits)
        self.dev = adapter.request_device_sync(required_limits={
            "max-storage-buffer-binding-size": lim["max-storage-buffer-binding-size"],
            "max-buffer-size": lim["max-buffer-size"],
        })
        self.U = wgpu.BufferUsage

    def buffer(self, data: np.ndarray) -> Any:
        return self.dev.create_buffer_with_data(
            data=data, usage=self.U.STORAGE | self.U.COPY_SRC | self.U.COPY_DST)

    def kernel(self, code: str, buffers: list[Any], uniform: bytes | None = None) -> tuple[Any, Any]:
        mod = self.dev.create_shader_module(code=code)
        pipe = self.dev.create_compute_pipeline(layout="auto",
                                                compute={"module": mod, "entry_point": "main"})
        entries = []
        first = 0
        if uniform is not None:
            ub = self.dev.create_buffer_with_data(data=uniform, usage=self.U.UNIFORM)
            entries.append({"binding": 0, "resource": {"buffer": ub, "offset": 0, "size": ub.size}})
            first = 1
        for j, b in enumerate(buffers):
            entries.append({"binding": first + j,
                            "resource": {"buffer": b, "offset": 0, "size": b.size}})
        bg = self.dev.create_bind_group(layout=pipe.get_bind_group_layout(0), entries=entries)
        return pipe, bg

    def run(self, pipe: Any, bg: Any, grid: tuple[int, int, int], count: int) -> None:
        enc = self.dev.create_command_encoder()
        cp = enc.begin_compute_pass()
        cp.set_pipeline(pipe)
        cp.set_bind_group(0, bg)
        for _ in range(count):
            cp.dispatch_workgroups(*grid)
        cp.end()
        self.dev.queue.submit([enc.finish()])
        self.dev._poll_wait()

    def read(self, buf: Any) -> np.ndarray:
        return np.frombuffer(self.dev.queue.read_buffer(buf), dtype=np.uint8)


def grid_for(n: int) -> tuple[int, int, int]:
    groups = -(-n // WG)
    if groups <= 65535:
        return (groups, 1, 1)
    y = 1
    while groups % y or groups // y > 65535:
        y += 1
    return (groups // y, y, 1)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n-log2", type=int, default=26)
    ap.add_argument("--reps", type=int, default=60)
    args = ap.parse_args()

    be = vyre.get_backend("wgpu")
    caps = be.capabilities()
    adapter = be._info.adapter  # type: ignore[attr-defined]
    raw = Raw(adapter)
    print(f"device: {caps.device} ({caps.details['backend_type']}, "
          f"{caps.details['adapter_type']}); wgpu {wgpu.__version__}")
    rows: list[tuple[str, str, float, float, str]] = []

    # ---------------- (a) + (b): small dispatches
    small_n = 4096
    g_small = grid_for(small_n)
    inc = vyre_inc()
    vbuf = be.allocate_device_buffer(small_n * 4)
    be.write(vbuf, np.zeros(small_n, np.uint32))
    bound = be.bind(inc, [], [vbuf], DispatchConfig(grid=g_small))
    rbuf = raw.buffer(np.zeros(small_n, np.uint32))
    rpipe, rbg = raw.kernel(RAW_INC, [rbuf])

    # correctness: 3 increments each
    for _ in range(3):
        be.dispatch_with_device_buffers(bound)
        raw.run(rpipe, rbg, g_small, 1)
    assert np.all(be.read(vbuf, dtype=np.uint32) == 3), "vyre inc wrong"
    assert np.all(raw.read(rbuf).view(np.uint32) == 3), "raw inc wrong"

    def v_one() -> None:
        be.dispatch_with_device_buffers(bound)
        be.synchronize()

    small_cfg = DispatchConfig(grid=g_small)

    def v_one_prog() -> None:
        be.dispatch_with_device_buffers(inc, [], [vbuf], small_cfg)
        be.synchronize()

    reps_small = max(args.reps * 10, 200)
    ta = median_ns({"raw": lambda: raw.run(rpipe, rbg, g_small, 1), "bound": v_one,
                    "prog": v_one_prog}, reps_small, 20)
    ta_raw, ta_v, ta_vp = ta["raw"], ta["bound"], ta["prog"]
    rows.append(("(a) 1 dispatch+submit+wait (bound)", "us", ta_v / 1e3, ta_raw / 1e3, "<=1.2x"))
    rows.append(("(a) same, Program (validate+bind) per call", "us", ta_vp / 1e3, ta_raw / 1e3, "<=1.2x"))

    pipe100 = be.pipeline([Step(inc, [], [vbuf], DispatchConfig(grid=g_small))] * 100)
    pipe_rep = be.pipeline([Step(inc, [], [vbuf], DispatchConfig(grid=g_small))])
    be.write(vbuf, np.zeros(small_n, np.uint32))
    r = pipe100.run(read=[ReadRange(vbuf, 0, None, np.uint32)])
    assert np.all(r.reads[0] == 100), "vyre 100-step pipeline wrong"
    r = pipe_rep.run(repeat=100, read=[ReadRange(vbuf, 0, None, np.uint32)])
    assert np.all(r.reads[0] == 200), "vyre repeat=100 wrong"
    tb = median_ns({"raw": lambda: raw.run(rpipe, rbg, g_small, 100),
                    "steps": lambda: pipe100.run(),
                    "repeat": lambda: pipe_rep.run(repeat=100)}, args.reps * 3)
    tb_raw, tb_v, tb_vr = tb["raw"], tb["steps"], tb["repeat"]
    rows.append(("(b) 100 dispatches, 1 batch (100 steps)", "us", tb_v / 1e3, tb_raw / 1e3,
                 "<=1.2x"))
    rows.append(("(b) 100 dispatches, 1 batch (repeat=100)", "us", tb_vr / 1e3, tb_raw / 1e3,
                 "<=1.2x"))
    be.free(vbuf)

    # ---------------- (c) saxpy
    lim = caps.limits["max_storage_binding_bytes"]
    n_log2 = args.n_log2
    while (4 << n_log2) > lim:
        n_log2 -= 1
    if n_log2 != args.n_log2:
        print(f"note: 2^{args.n_log2} f32 exceeds the binding limit; using 2^{n_log2}")
    n = 1 << n_log2
    rng = np.random.default_rng(0)
    x = rng.integers(0, 100, n).astype(np.float32)
    y0 = rng.integers(0, 100, n).astype(np.float32)
    a = 0.5
    g = grid_for(n)
    sax = vyre_saxpy()
    vx, vy = be.allocate_device_buffer(x.nbytes), be.allocate_device_buffer(y0.nbytes)
    be.write_many([(vx, x), (vy, y0)])
    cfg = DispatchConfig(grid=g, params={"a": a})
    sbound = be.bind(sax, [vx], [vy], cfg)
    rx, ry = raw.buffer(x), raw.buffer(y0)
    spipe, sbg = raw.kernel(RAW_SAXPY, [rx, ry], np.array([a, 0, 0, 0], np.float32).tobytes())

    be.dispatch_with_device_buffers(sbound)
    raw.run(spipe, sbg, g, 1)
    exp1 = y0 + np.float32(a) * x
    assert np.array_equal(be.read(vy, dtype=np.float32), exp1), "vyre saxpy wrong"
    assert np.array_equal(raw.read(ry).view(np.float32), exp1), "raw saxpy wrong"
    p50 = be.pipeline([Step(sax, [vx], [vy], cfg)])
    p50.run(repeat=50)
    raw.run(spipe, sbg, g, 50)
    exp51 = y0 + np.float32(51 * a) * x
    assert np.array_equal(be.read(vy, dtype=np.float32), exp51), "vyre saxpy x50 wrong"
    assert np.array_equal(raw.read(ry).view(np.float32), exp51), "raw saxpy x50 wrong"

    def v_sax1() -> None:
        be.dispatch_with_device_buffers(sbound)
        be.synchronize()

    nbytes = 12 * n
    tc = median_ns({"raw": lambda: raw.run(spipe, sbg, g, 1), "vyre": v_sax1}, args.reps)
    tc_raw, tc_v = tc["raw"], tc["vyre"]
    rows.append((f"(c) saxpy 2^{n_log2}, 1 dispatch/submit", "GB/s", nbytes / tc_v,
                 nbytes / tc_raw, ">=0.95x"))
    tc50 = median_ns({"raw": lambda: raw.run(spipe, sbg, g, 50),
                      "vyre": lambda: p50.run(repeat=50)}, max(args.reps // 3, 5), 2)
    tc50_raw, tc50_v = tc50["raw"], tc50["vyre"]
    rows.append((f"(c) saxpy 2^{n_log2}, 50 in one batch", "GB/s", 50 * nbytes / tc50_v,
                 50 * nbytes / tc50_raw, ">=0.95x"))

    if caps.features >= {"device_timers"}:
        pprof = be.pipeline([Step(sax, [vx], [vy], cfg.model_copy(update={"profile": True}))])
        dns = [pprof.run(repeat=50).timing.device_ns or 0 for _ in range(5)]
        dn = statistics.median(dns)
        if dn:
            rows.append(("(c) 50 in one batch, by device timestamps", "GB/s", 50 * nbytes / dn,
                         50 * nbytes / tc50_raw, "(info)"))

    print()
    print(f"{'case':44s} {'unit':>5s} {'vyre':>10s} {'raw':>10s} {'vyre/raw':>9s} target")
    for name, unit, v, rw, target in rows:
        print(f"{name:44s} {unit:>5s} {v:10.1f} {rw:10.1f} {v / rw:9.3f} {target}")
    be.close()


if __name__ == "__main__":
    main()
