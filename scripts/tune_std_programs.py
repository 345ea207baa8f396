"""Sweep the tile / block shapes of the standard library's hot programs (matmul, sum, scan)
on one backend and print a table: device time (median of repeated profiled runs after
warm-up), the rate, and a correctness check of every timed output against float64.

    python3 scripts/tune_std_programs.py [--backend cuda] [--quick]

For choosing the defaults in vyre.programs.{matmul,reduce,scan}; never asserts speed.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

import numpy as np

from vyre import registry
from vyre.ir.types import ScalarType
from vyre.pipeline import Step
from vyre.programs import matmul as MM
from vyre.programs import reduce as R
from vyre.programs import scan as S

f32 = ScalarType.F32


def med_ns(fn, warm: int = 3, rep: int = 10) -> float:  # type: ignore[no-untyped-def]
    for _ in range(warm):
        fn()
    return statistics.median(fn() for _ in range(rep))


def pipe_ns(b, steps):  # type: ignore[no-untyped-def]
    prof = [Step(s.program, s.inputs, s.outputs, s.config.model_copy(update={"profile": True}))
            for s in steps]
    pipe = b.pipeline(prof)
    return lambda: float(pipe.run().timing.device_ns)


def rel_l2(got: np.ndarray, ref: np.ndarray) -> float:
    return float(np.linalg.norm(got.astype(np.float64) - ref) / (np.linalg.norm(ref) or 1.0))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--backend", default="cuda")
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    rows: list[str] = []
    rng = np.random.default_rng(3)
    with registry.get_backend(args.backend) as b:
        m = 256 if args.quick else 4096
        a = rng.uniform(-1, 1, (m, m)).astype(np.float32)
        bm = rng.uniform(-1, 1, (m, m)).astype(np.float32)
        sel = rng.choice(m, min(m, 64), replace=False)
        ref = a[sel].astype(np.float64) @ bm.astype(np.float64)
        ab, bb = b.allocate_device_buffer(a.nbytes), b.allocate_device_buffer(bm.nbytes)
        cb = b.allocate_device_buffer(a.nbytes)
        b.write(ab, a)
        b.write(bb, bm)
        for shape in [(128, 8, 8), (128, 8, 16), (64, 4, 8), (128, 4, 8), (128, 4, 16)]:
            try:
                t0 = time.perf_counter()
                prog = MM.matmul_program(*shape)
                cfg = MM.matmul_config(m, m, m, *shape).model_copy(update={"profile": True})
                bound = b.bind(prog, {"a": ab, "b": bb}, {"c": cb}, cfg)
                b.write(cb, np.full(m * m, np.nan, np.float32))
                ns = med_ns(lambda bd=bound: float(b.dispatch_with_device_buffers(bd).device_ns))
                got = b.read(cb, dtype=np.float32).reshape(m, m)[sel]
                err = rel_l2(got, ref)
                rows.append(f"matmul {m}^3 block/per/bk={shape}: {2 * m**3 / ns:9.1f} GFLOP/s "
                            f"({ns / 1e6:.3f} ms) relL2={err:.1e} (setup "
                            f"{time.perf_counter() - t0:.1f}s)")
            except Exception as exc:  # keep sweeping; report the failure in the table
                rows.append(f"matmul {shape}: FAILED {exc!r}"[:300])
            print(rows[-1], flush=True)
        for buf in (ab, bb, cb):
            b.free(buf)

        n = 1 << 16 if args.quick else 1 << 26
        x = rng.random(n, dtype=np.float32)
        xb = b.allocate_device_buffer(x.nbytes)
        b.write(xb, x)
        ob = b.allocate_device_buffer(4)
        s64 = float(x.astype(np.float64).sum())
        for wg, per in [(256, 8), (256, 16), (256, 32), (512, 16), (128, 32), (1024, 8)]:
            try:
                plan = R.plan_reduce(b, xb, n, "sum", f32, ob, workgroup_size=wg,
                                     per_thread=per)
                ns = med_ns(pipe_ns(b, plan.steps))
                got = float(b.read(ob, dtype=np.float32)[0])
                rows.append(f"sum 2^{n.bit_length() - 1} wg={wg} per={per}: "
                            f"{4 * n / ns:7.1f} GB/s passes={len(plan.steps)} "
                            f"rel={abs(got - s64) / s64:.1e}")
                for t in plan.temporaries:
                    b.free(t)
            except Exception as exc:
                rows.append(f"sum wg={wg} per={per}: FAILED {exc!r}"[:300])
            print(rows[-1], flush=True)
        db = b.allocate_device_buffer(x.nbytes)
        c64 = np.cumsum(x.astype(np.float64))
        for wg, per in [(256, 8), (256, 16), (256, 32), (512, 8), (512, 16), (128, 32)]:
            try:
                plan = S.plan_scan(b, xb, db, n, f32, True, workgroup_size=wg, per_thread=per)
                ns = med_ns(pipe_ns(b, plan.steps))
                got = b.read(db, dtype=np.float32)
                rows.append(f"scan 2^{n.bit_length() - 1} wg={wg} per={per}: "
                            f"{8 * n / ns:7.1f} GB/s (8 B/elem counted) "
                            f"passes={len(plan.steps)} relL2={rel_l2(got, c64):.1e}")
                for t in plan.temporaries:
                    b.free(t)
            except Exception as exc:
                rows.append(f"scan wg={wg} per={per}: FAILED {exc!r}"[:300])
            print(rows[-1], flush=True)
    print("\n=== tune_std_programs summary ===")
    print("\n".join(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
