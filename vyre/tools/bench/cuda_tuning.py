"""CUDA tuning experiments that `vyre bench` does not run (it measures the shipped defaults):

    python -m vyre.tools.bench.cuda_tuning [--json out.json] [--quick] [--sections S,...]

(graph) a 100-step pipeline replayed as CUDA graphs at repeat 1 / 10 / 100, against a
torch CUDAGraph of the same 100 increments; (saxpy) saxpy over 2**26 f32 in every code
generation variant (coarsening, vectorised access, merged blocks), against CuPy and torch,
in GB/s from device events; (sass) register use and memory instructions of the saxpy
kernel (cuobjdump); (matmul, only with `--sections matmul`: about a minute) the library
matmul at 4096^3 f32 per tile shape and code generation variant, against torch/cuBLAS
FP32 (TF32 off), in TFLOP/s from device events, each variant's bits checked against
`matmul_reference` on two small awkward sizes and against the first variant at 4096^3
(what chooses vyre.programs.matmul.TUNED["cuda"]). Every output is checked before its
timing counts; a peer that is not installed is reported as such. Launch cost, compile
cost and the other workloads are `vyre bench` (`--workloads dispatch,compile`) and
`python -m vyre.tools.bench.evidence`.
This module must never be imported by the library.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

import numpy as np

import vyre
from vyre import DispatchConfig, ScalarType
from vyre.programs.elementwise import saxpy

from .evidence import OUT, section
from .vyre_impl import inc_program

ST = ScalarType
RESULTS = OUT  # what section() recorded, written by --json


def saxpy_program() -> vyre.Program:
    """The library's saxpy (what `vyre bench` times): params n and a."""
    return saxpy(ST.F32, 256)


def graph(b: Any, reps: int) -> dict[str, Any]:
    """us per dispatch of a recorded 100-step pipeline (CUDA graphs), by repeat count."""
    n = 1024
    y = b.allocate_device_buffer(4 * n)
    b.write(y, np.zeros(n, np.uint32))
    p = b.pipeline([vyre.Step(inc_program(), [], [y], DispatchConfig.for_elements(n, 256))] * 100)
    assert (p.run(repeat=1, read=[(y, 0, None, np.uint32)]).reads[0] == 100).all()
    r: dict[str, Any] = {}
    for repeat in (1, 10, 100):
        times = []
        for _ in range(reps):
            t0 = time.perf_counter_ns()
            p.run(repeat=repeat)
            times.append((time.perf_counter_ns() - t0) / (100 * repeat) / 1e3)
        r[f"vyre pipeline repeat={repeat} (us/dispatch)"] = statistics.median(times)
    assert (b.read(y, dtype=np.uint32) == 100 * (1 + reps * 111)).all(), "pipeline result wrong"
    y.free()
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
        r["torch CUDAGraph, 10 replays (us/dispatch)"] = statistics.median(times)
    except Exception as exc:
        r["torch"] = f"unavailable: {exc}"
    return r


def saxpy_variants(b: Any, reps: int) -> dict[str, Any]:
    """GB/s (12 bytes per element) of saxpy over 2**26 f32 per code generation variant."""
    from vyre.backends.cuda import CudaOptions
    from vyre.backends.cuda.runtime import CudaBackend

    n = 1 << 26
    rng = np.random.default_rng(1)
    x = rng.standard_normal(n, dtype=np.float32)
    y0 = rng.standard_normal(n, dtype=np.float32)
    a = 0.5
    expect = np.float32(a) * x + y0
    gbs: dict[str, Any] = {}
    merge0 = b.options.merge_threads
    # (coarsen, vectorised, threads per merged block); the first is the default
    variants: list[tuple[int, bool, int]] = [(b.coarsen, True, merge0)]
    variants += [(k, True, merge0) for k in (1, 4, 8) if k != b.coarsen]
    variants += [(4, True, 0), (4, False, merge0), (8, True, 0)]
    # each variant is an instance with its own CudaOptions: nothing global to restore
    for coarsen, vec, merge in variants:
        first = (coarsen, vec, merge) == (b.coarsen, True, merge0)
        bb = b if first else CudaBackend(0, coarsen=coarsen, options=CudaOptions(
            vectorise=vec, merge_threads=merge))
        bx, by = bb.allocate_device_buffer(x.nbytes), bb.allocate_device_buffer(y0.nbytes)
        bb.write(bx, x)
        bb.write(by, y0)
        prog = saxpy_program()
        bound = bb.bind(prog, [bx], [by], DispatchConfig.for_elements(
            n, 256, params={"n": n, "a": a}))
        pbound = bb.bind(prog, [bx], [by], DispatchConfig.for_elements(
            n, 256, params={"n": n, "a": a}, profile=True))
        bb.dispatch_with_device_buffers(bound)
        assert np.array_equal(bb.read(by, dtype=np.float32), expect), \
            f"vyre saxpy wrong (coarsen={coarsen})"
        for _ in range(5):
            bb.dispatch_with_device_buffers(bound)
        ns = [_device_ns(bb.dispatch_with_device_buffers(pbound)) for _ in range(reps)]
        label = "vyre (default)" if first else (
            f"vyre coarsen={coarsen}" + ("" if vec or coarsen == 1 else " scalar")
            + ("" if merge or coarsen == 1 else " unmerged"))
        gbs[f"{label} GB/s"] = 12 * n / statistics.median(ns)
        bx.free()
        by.free()
        if not first:
            bb.close()
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
        gbs["cupy ElementwiseKernel GB/s"] = 12 * n / statistics.median(ts)
    except Exception as exc:
        gbs["cupy"] = f"unavailable: {exc}"
    try:
        import torch

        tx, ty = torch.from_numpy(x).cuda(), torch.from_numpy(y0).cuda()
        ty.add_(tx, alpha=a)
        assert np.allclose(ty.cpu().numpy(), expect, rtol=1e-6, atol=1e-6), "torch saxpy wrong"
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        ts = []
        for _ in range(reps):
            s.record()
            ty.add_(tx, alpha=a)
            e.record()
            e.synchronize()
            ts.append(s.elapsed_time(e) * 1e6)
        gbs["torch add_(alpha) GB/s"] = 12 * n / statistics.median(ts)
    except Exception as exc:
        gbs["torch"] = f"unavailable: {exc}"
    return gbs


#: matmul candidates: (block, per_thread, block_k, split edge loads, vector runs); block and
#: per_thread are (rows, columns) of C per workgroup / per invocation. The first is the
#: kernel as it was before the split / vector-run changes (the baseline of the sweep).
MatmulVariant = tuple[tuple[int, int], tuple[int, int], int, bool, bool]
MATMUL_VARIANTS: tuple[MatmulVariant, ...] = (
    ((128, 128), (8, 8), 8, False, False),
    ((128, 128), (8, 8), 8, True, False),
    ((128, 128), (8, 8), 8, True, True),
    ((128, 128), (8, 8), 16, False, False),
    ((128, 128), (8, 8), 16, True, True),
    ((64, 64), (4, 4), 8, True, True),
    ((64, 64), (4, 4), 16, True, True),
    ((64, 128), (4, 8), 16, True, True),
    ((128, 128), (8, 16), 8, True, True),
    ((128, 128), (16, 8), 8, True, True),
    ((128, 128), (8, 16), 16, True, True),
    ((128, 256), (8, 16), 8, True, True),
    ((256, 128), (16, 8), 8, True, True),
    ((128, 256), (8, 16), 16, True, True),
)


def matmul_label(v: MatmulVariant) -> str:
    (bm, bn), (pm, pn), bk, split, vec = v
    return (f"{bm}x{bn} tile, {pm}x{pn} per thread, bk {bk}, "
            f"{'split' if split else 'unsplit'}, {'vec' if vec else 'scalar'}")


#: small sizes whose bits every variant must reproduce: M, N not multiples of any tile
#: (edge tiles), K a multiple of 16 (vector loads) and an odd K (misaligned rows: scalar)
MATMUL_CHECK_SIZES = ((260, 264, 272), (197, 203, 251))
TORCH_MM = "torch.mm (cuBLAS FP32, TF32 off)"


def matmul_variants(reps: int, size: int = 4096, budget_s: float = 70.0) -> dict[str, Any]:
    """TFLOP/s of the library matmul at size^3 per (tile shape, codegen) variant and of
    torch.mm (cuBLAS, TF32 off), one process, in two interleaved rounds (the better median
    counts, so clock drift favours no one); every variant bit-identical to
    matmul_reference on MATMUL_CHECK_SIZES and to the first variant at size^3. Variants
    not compiled within `budget_s` (NVRTC dominates) are reported as skipped."""
    t_start = time.perf_counter()
    from vyre.backends.cuda import CudaOptions
    from vyre.backends.cuda.runtime import CudaBackend
    from vyre.programs.matmul import (
        matmul_config,
        matmul_host,
        matmul_program,
        matmul_reference,
    )

    rng = np.random.default_rng(7)
    checks = []
    for m, n, kd in MATMUL_CHECK_SIZES:
        a = rng.standard_normal((m, kd), dtype=np.float32)
        b = rng.standard_normal((kd, n), dtype=np.float32)
        checks.append((a, b, matmul_reference(a, b)))
    a = rng.standard_normal((size, size), dtype=np.float32)
    b = rng.standard_normal((size, size), dtype=np.float32)
    flop = 2.0 * size**3
    out: dict[str, Any] = {}
    timers: dict[str, Callable[[], float]] = {}  # label -> one timed run (ns)
    held: list[tuple[str, Any, Any]] = []  # (label, backend, C buffer) to check and close
    for variant in MATMUL_VARIANTS:
        block, per, bk, split, vec = variant
        label = matmul_label(variant)
        if time.perf_counter() - t_start > budget_s:
            out[label] = f"skipped: the sweep's {budget_s:.0f} s were spent"
            continue
        try:
            bb = CudaBackend(0, options=CudaOptions(vector_runs=vec))
            held.append((label, bb, None))
            prog = matmul_program(block, per, bk, split)
            bad = []
            for ca, cb_, want in checks:
                got = matmul_host(bb, ca, cb_, block=block, per_thread=per, block_k=bk,
                                  split=split)
                if not np.array_equal(got.view(np.uint32), want.view(np.uint32)):
                    bad.append(f"{ca.shape[0]}x{cb_.shape[1]}x{ca.shape[1]}: "
                               f"{int((got != want).sum())} differ")
            if bad:
                out[label] = "WRONG vs matmul_reference: " + "; ".join(bad)
                continue
            ab, bbuf = bb.allocate_device_buffer(a.nbytes), bb.allocate_device_buffer(b.nbytes)
            cbuf = bb.allocate_device_buffer(a.nbytes)
            held[-1] = (label, bb, cbuf)
            bb.write(ab, a)
            bb.write(bbuf, b)
            cfg = matmul_config(size, size, size, block, per, bk).model_copy(
                update={"profile": True})
            bound = bb.bind(prog, {"a": ab, "b": bbuf}, {"c": cbuf}, cfg)
            timers[label] = _timed(bb, bound)
        except Exception as exc:  # keep sweeping; report the failure in the table
            out[label] = f"error: {type(exc).__name__}: {exc}"[:300]
    ta = tb = tc = None
    try:
        import torch

        torch.backends.cuda.matmul.allow_tf32 = False
        ta, tb = torch.from_numpy(a).cuda(), torch.from_numpy(b).cuda()
        tc = ta @ tb
        ev0, ev1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)

        def torch_ns() -> float:
            ev0.record()
            torch.mm(ta, tb, out=tc)
            ev1.record()
            ev1.synchronize()
            return float(ev0.elapsed_time(ev1) * 1e6)

        timers[TORCH_MM] = torch_ns
    except Exception as exc:
        out[TORCH_MM] = f"unavailable: {exc}"
    best: dict[str, float] = {}
    for rnd in range(2):
        for label in (list(timers) if rnd == 0 else list(reversed(timers))):
            for _ in range(3):
                timers[label]()
            med = statistics.median(timers[label]() for _ in range(reps))
            best[label] = min(best.get(label, med), med)
    first: np.ndarray | None = None
    for label, bb, cbuf in held:
        if cbuf is not None and label in best:
            got = bb.read(cbuf, dtype=np.float32)
            first = got if first is None else first
            if not np.array_equal(got.view(np.uint32), first.view(np.uint32)):
                out[label] = f"BITS DIFFER at {size}^3 from the first variant"
                best.pop(label)
        bb.close()
    if tc is not None and first is not None:
        ref = first.reshape(size, size)
        rel = float(np.abs(tc.cpu().numpy() - ref).max() / np.abs(ref).max())
        if rel > 1e-4:
            out[TORCH_MM] = f"differs from vyre by {rel:.2g} of max |C| (TF32 on?)"
            best.pop(TORCH_MM)
    for label, ns in best.items():
        out[label] = f"{flop / ns / 1e3:.2f} TFLOP/s"
    ours = {k: flop / v / 1e3 for k, v in best.items() if k != TORCH_MM}
    if TORCH_MM in best and ours:
        top = max(ours, key=lambda k: ours[k])
        out["best vyre / cuBLAS"] = f"{ours[top] / (flop / best[TORCH_MM] / 1e3):.3f}x ({top})"
    return out


def _timed(b: Any, bound: Any) -> Callable[[], float]:
    """One profiled dispatch of `bound` on `b`: its device nanoseconds."""
    return lambda: float(_device_ns(b.dispatch_with_device_buffers(bound)))


def _device_ns(t: vyre.Timing) -> int:
    assert t.device_ns is not None, "a profiled CUDA dispatch reports device_ns"
    return t.device_ns


def sass() -> dict[str, Any]:
    """Registers and global memory instructions of the saxpy kernel, by coarsening."""
    from vyre.backends.cuda import compile_program

    if shutil.which("cuobjdump") is None:
        return {"cuobjdump": "not installed (CUDA toolkit); no SASS facts"}
    out: dict[str, Any] = {}
    for c in (4, 8):
        cubin = compile_program(saxpy_program(), "sm_90", coarsen=c).cubin
        with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
            f.write(cubin)
            f.flush()
            res = subprocess.run(["cuobjdump", "-res-usage", "-sass", f.name],
                                 capture_output=True, text=True, check=False).stdout
        regs = [line.strip() for line in res.splitlines() if "REG" in line][:1]
        mem = [line.split(";")[0].strip() for line in res.splitlines()
               if "LDG" in line or "STG" in line]
        out[f"coarsen={c}"] = f"{regs} {mem}"
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", default=None)
    ap.add_argument("--quick", action="store_true", help="fewer repetitions (a smoke test)")
    ap.add_argument("--sections", default="graph,saxpy,sass",
                    help="comma-separated sections to run: graph, saxpy, sass, and matmul "
                         "(about a minute, so only when named)")
    args = ap.parse_args()
    only = set(args.sections.split(","))
    avail = {a.name: a for a in vyre.available_backends()}
    if "cuda" not in avail or not avail["cuda"].available:
        print(f"CUDA unavailable: {avail['cuda'].reason if 'cuda' in avail else 'not registered'}")
        return 1
    b: Any = vyre.get_backend("cuda")
    caps = b.capabilities()
    print(f"device: {caps.device} {caps.details['arch']}, coarsen={b.coarsen}")
    reps = 5 if args.quick else 15
    if "graph" in only:
        section("graph: 100-step pipeline as CUDA graphs", lambda: graph(b, reps))
    if "saxpy" in only:
        section("saxpy: code generation variants", lambda: saxpy_variants(b, 2 * reps))
    if "matmul" in only:
        section("matmul: tile shapes and code generation variants",
                lambda: matmul_variants(reps, 1024 if args.quick else 4096))
    if "sass" in only:
        section("sass: saxpy kernel", sass)
    b.close()
    if args.json:
        with open(args.json, "w") as f:
            json.dump(RESULTS, f, indent=2, default=str)
    failed = [k for k, v in RESULTS.items() if isinstance(v, dict) and "error" in v]
    return 2 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
