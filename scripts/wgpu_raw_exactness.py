"""Does the raw wgpu-py peer's compile-workload kernel compute what it says, on this
adapter? The price of vyre's float fences, shown from the other side (issue 17):

    python scripts/wgpu_raw_exactness.py [--n N] [--seed S]

`vyre bench`'s compile.cold compares vyre's compile of `y = (a*x + y)*0.5 + c` with raw
wgpu-py's compile of the same line hand-written in WGSL (peers.wgsl_compile_source). WGSL
says each operation rounds to f32, but a driver's compiler may contract `a*x + y` into one
fma (NVIDIA's does): vyre's WGSL fences the product so that it cannot, and the fences are
part of what vyre's cold compile costs. This script runs both kernels over the same N
inputs chosen so that contraction shows (products whose rounding error survives the add)
and counts the elements that differ from NumPy's f32 arithmetic, one rounding per
operation (docs/IR.md), and from an fma-contracted evaluation. Prints one table.
It measures only; it must never be used to decide a tolerance.
"""

from __future__ import annotations

import argparse
import random
from typing import Any

import numpy as np

import vyre
from vyre.config import DispatchConfig
from vyre.tools.bench.peers import wgsl_compile_source
from vyre.tools.bench.vyre_impl import WG, compile_probe_program
from vyre.tools.bench.workloads import compile_constant


def inputs(n: int, seed: int) -> tuple[np.float32, np.ndarray, np.ndarray]:
    """a, x, y where a*x is inexact in f32 and y cancels part of it, so a fused multiply-add
    (one rounding) and a multiply then an add (two) give different f32 results; a*x near
    2^30, so the product's rounding error (~2^6) survives adding the constant c < 2^24."""
    rng = np.random.default_rng(seed)
    a = np.float32(1.0 + 2.0 ** -12 * 1234.5)
    x = ((1.0 + rng.random(n)) * 2.0 ** 30).astype(np.float32)
    y = (-(np.float64(a) * x.astype(np.float64)) * (1.0 + rng.standard_normal(n) * 2.0 ** -4)
         ).astype(np.float32)
    return a, x, y


def expected(a: np.float32, x: np.ndarray, y: np.ndarray, c: float
             ) -> tuple[np.ndarray, np.ndarray]:
    """(one rounding per operation, the product and add contracted into one fma)."""
    with np.errstate(all="ignore"):
        v = (a * x) + y  # f32 * f32 -> f32, then f32 + f32 -> f32
        per_op = v * np.float32(0.5) + np.float32(c)
        fused_v = (np.float64(a) * x.astype(np.float64) + y.astype(np.float64)).astype(np.float32)
        fused = fused_v * np.float32(0.5) + np.float32(c)
    return per_op.astype(np.float32), fused.astype(np.float32)


def run_raw(d: Any, wgpu: Any, code: str, a: np.float32, x: np.ndarray,
            y: np.ndarray) -> np.ndarray:
    """The raw peer's calls: module, pipeline (layout "auto"), bind group, one pass."""
    U = wgpu.BufferUsage
    mod = d.create_shader_module(code=code)
    pipe = d.create_compute_pipeline(layout="auto",
                                     compute={"module": mod, "entry_point": "main"})
    ub = d.create_buffer_with_data(data=np.array([a, 0, 0, 0], np.float32), usage=U.UNIFORM)
    xb = d.create_buffer_with_data(data=x, usage=U.STORAGE)
    yb = d.create_buffer_with_data(data=y.copy(), usage=U.STORAGE | U.COPY_SRC)
    bg = d.create_bind_group(layout=pipe.get_bind_group_layout(0), entries=[
        {"binding": i, "resource": {"buffer": b, "offset": 0, "size": b.size}}
        for i, b in enumerate((ub, xb, yb))])
    enc = d.create_command_encoder()
    cp = enc.begin_compute_pass()
    cp.set_pipeline(pipe)
    cp.set_bind_group(0, bg)
    cp.dispatch_workgroups(-(-x.size // WG), 1, 1)
    cp.end()
    d.queue.submit([enc.finish()])
    return np.frombuffer(d.queue.read_buffer(yb), np.float32).copy()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=1 << 16)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    import wgpu

    b: Any = vyre.get_backend("wgpu")
    salt = random.randrange(1 << 20, 1 << 23)
    c = float(compile_constant(salt))
    a, x, y = inputs(args.n, args.seed)
    per_op, fused = expected(a, x, y, c)
    got_raw = run_raw(b.device, wgpu, wgsl_compile_source(salt), a, x, y)
    xb, yb = b.allocate_device_buffer(x.nbytes), b.allocate_device_buffer(y.nbytes)
    b.write(xb, x)
    b.write(yb, y)
    b.dispatch_with_device_buffers(compile_probe_program(salt), {"x": xb}, {"y": yb},
                                   DispatchConfig.for_elements(x.size, WG,
                                                               params={"a": float(a)}))
    got_vyre = b.read(yb, dtype=np.float32)
    print(f"adapter: {b.capabilities().device}; {x.size} elements; "
          f"{int(np.sum(per_op.view(np.uint32) != fused.view(np.uint32)))} where one fma "
          "and two roundings differ")
    print(f"{'kernel':<28} {'!= per-op f32':>14} {'== fma-contracted':>18}")
    for name, got in (("raw wgpu-py WGSL", got_raw), ("vyre", got_vyre)):
        bad = got.view(np.uint32) != per_op.view(np.uint32)
        as_fma = bad & (got.view(np.uint32) == fused.view(np.uint32))
        print(f"{name:<28} {int(bad.sum()):>14} {int(as_fma.sum()):>18}")
    b.close()


if __name__ == "__main__":
    main()
