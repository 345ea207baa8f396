#!/usr/bin/env python3
"""What vyre's exact f32 division and sqrt cost on this wgpu adapter.

Runs three kernels on the wgpu backend twice: with the adapter's own division / sqrt
(VYRE_WGPU_DIV_SQRT=native: what a driver that is not correctly rounded gives, so never
used outside this measurement) and with vyre's exact versions (vyre/lower/divsqrt.py;
VYRE_WGPU_DIV_SQRT=exact: what the probe selects where the driver is not correctly
rounded, e.g. NVIDIA's Vulkan driver, whose fma rounds once, so that division's fast path
is in f32 alone and sqrt's in f64). Kernels: `div_chain` (32 dependent divisions per
element: compute bound), `sqrt_chain` (32 dependent sqrts), `div_stream` (q = a / b: memory
bound). Prints Gop/s or GB/s per mode and the exact / native ratio. Under 30 s.

    python3 scripts/div_bench.py            # the default adapter (on the H100: NVIDIA Vulkan)
    python3 scripts/div_bench.py --n 1048576 --repeat 20
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import vyre
from vyre import DispatchConfig, ProgramBuilder, ReadRange, ScalarType, Step
from vyre.builder import sqrt

F32 = ScalarType.F32
CHAIN = 32  # dependent operations per element in the chain kernels


def kernel(name: str, chain: bool, op: str) -> vyre.Program:
    """o = op applied CHAIN times in a dependent chain (compute bound), or once (streaming):
    div: x -> y / (x + 1) (stays in [0.5, 2] for y in [1, 2]); sqrt: x -> sqrt(x + y)."""
    k = ProgramBuilder(name, workgroup_size=256)
    a, b = k.buffer("a", F32), k.buffer("b", F32)
    o = k.buffer("o", F32, "write")
    i = k.global_linear_id()
    with k.if_(i < a.length()):
        if not chain:
            o[i] = a[i] / b[i] if op == "div" else sqrt(a[i])
        else:
            x, y = k.let(a[i]), k.let(b[i])
            for _ in range(CHAIN):
                k.assign(x, y / (x + 1.0) if op == "div" else sqrt(x + y))
            o[i] = x
    return k.build()


KERNELS = {  # name: (chain, op, unit, amount per element)
    "div_chain": (True, "div", "Gop/s", CHAIN),
    "sqrt_chain": (True, "sqrt", "Gop/s", CHAIN),
    "div_stream": (False, "div", "GB/s", 12),
}


def backend_in_mode(mode: str) -> vyre.backend.BaseBackend:
    from vyre.backends.wgpu import PROVIDER

    os.environ["VYRE_WGPU_DIV_SQRT"] = mode  # read when the device is opened
    try:
        return PROVIDER.create()
    finally:
        del os.environ["VYRE_WGPU_DIV_SQRT"]


def measure(be: vyre.backend.BaseBackend, prog: vyre.Program, n: int, repeat: int,
            deadline: float) -> tuple[float, np.ndarray]:
    """Seconds per dispatch (best of rounds of `repeat` dispatches in one submission)."""
    rng = np.random.default_rng(0)
    a = (1.0 + rng.random(n)).astype(np.float32)
    b = (1.0 + rng.random(n)).astype(np.float32)
    bufs = [be.allocate_device_buffer(4 * n) for _ in range(3)]
    try:
        be.write(bufs[0], a)
        be.write(bufs[1], b)
        step = Step(prog, bufs[:2], bufs[2:], DispatchConfig.for_elements(n, 256))
        pipe = be.pipeline([step])
        out = pipe.run(read=[ReadRange(bufs[2], 0, None, np.float32)]).reads[0]  # warm up
        best = float("inf")
        for _ in range(5):
            t0 = time.perf_counter()
            pipe.run(repeat=repeat)
            best = min(best, (time.perf_counter() - t0) / repeat)
            if time.perf_counter() > deadline:
                break
        return best, out
    finally:
        for buf in bufs:
            buf.free()


def _auto_mode(d: dict) -> str:
    """What the default ("auto") mode picks from the probe (the native backend's details
    say what that backend, forced native, runs)."""
    return ", ".join(f"{op} {'driver' if d[f'{op}_correctly_rounded'] else 'exact (vyre)'}"
                     for op in ("div", "sqrt"))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=0, help="elements (default: by adapter type)")
    ap.add_argument("--repeat", type=int, default=0, help="dispatches per timed round")
    args = ap.parse_args()
    native, exact = backend_in_mode("native"), backend_in_mode("exact")
    try:
        d = native.capabilities().details
        cpu = d.get("adapter_type") == "CPU"
        n = args.n or (1 << 16 if cpu else 1 << 24)
        repeat = args.repeat or (3 if cpu else 20)
        print(f"adapter: {d['adapter']} ({d['backend_type']}, {d['adapter_type']}); "
              f"probe: div_correctly_rounded={d['div_correctly_rounded']}, "
              f"sqrt_correctly_rounded={d['sqrt_correctly_rounded']}; "
              f"auto mode uses: {_auto_mode(d)}; exact mode's division fast path: "
              f"{'f32 with fma' if exact.capabilities().details['fma_rounds_once'] else 'f64'}")
        print(f"n = {n} elements, best of 5 rounds of {repeat} dispatches\n")
        print(f"{'kernel':<12} {'native':>14} {'exact':>14} {'exact/native':>13}  wrong(native)")
        deadline = time.perf_counter() + 24.0
        for name, (chain, op, unit, per) in KERNELS.items():
            prog = kernel(name, chain, op)
            tn, on = measure(native, prog, n, repeat, deadline)
            te, oe = measure(exact, prog, n, repeat, deadline)
            scale = n * per / 1e9
            wrong = int(np.count_nonzero(on.view(np.uint32) != oe.view(np.uint32)))
            print(f"{name:<12} {scale / tn:>9.2f} {unit:<5}{scale / te:>9.2f} {unit:<5}"
                  f"{tn / te:>12.2f}x  {wrong} of {n}")
        print("\n(exact/native < 1: the exact operation is slower by that factor; "
              "wrong(native): outputs where the driver's operation differs from the exact one)")
    finally:
        native.close()
        exact.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
