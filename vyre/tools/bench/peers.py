"""The libraries a user would pick instead of vyre, doing the `vyre bench` workloads:
raw cuda-bindings (NVRTC + driver API), CuPy and PyTorch on CUDA; raw wgpu-py on WebGPU;
NumPy on the CPU.

Each peer is imported only when it is created; one that is not installed (or has no
device) raises PeerUnavailable with the reason, which the report shows. Each peer times
itself the way its users would: CUDA events on CUDA, timestamp queries on WebGPU where the
adapter has them, the host clock on the CPU. A workload a peer has no natural way to do
raises NotApplicable with the reason. This module must never import vyre's backends and
never report a figure itself (the runner checks outputs first).
"""

from __future__ import annotations

import copy
import ctypes
import struct
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from . import workloads as W
from .functions import FUNCTIONS, Fn, check_chain, check_map
from .runner import NotApplicable, TimedCase, wall, wall_rounds

WG = 256


class PeerUnavailable(Exception):
    """A peer library is not installed here or cannot reach a device."""


def _grid(n: int) -> int:
    return -(-n // WG)


CUDA_INC = r"""extern "C" __global__ void inc(unsigned* y, unsigned n) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] += 1u;
}"""
CUDA_SAXPY = r"""extern "C" __global__ void saxpy(const float* x, float* y, float a, unsigned n) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}"""


def _c_float(v: float) -> str:
    return f"{v!r}f" if v >= 0 else f"({v!r}f)"


def cuda_function_source(fn: Fn) -> str:
    """`fn`'s map and chain kernels with CUDA's accurate function (no --use_fast_math:
    within its documented bound), as a user would write them (functions.py: the step)."""
    xs = [f"x{j}" for j in range(fn.arity)]
    params = "".join(f"const float* {x}, " for x in xs)
    call = ", ".join(f"{x}[i]" for x in xs)
    step = ", ".join(fn.chain_args("v", _c_float))
    return (
        f'extern "C" __global__ void {fn.name}_map({params}float* y, unsigned n) {{\n'
        "    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;\n"
        f"    if (i < n) y[i] = {fn.cuda}({call});\n}}\n"
        f'extern "C" __global__ void {fn.name}_chain(const float* x0, float* x, unsigned n) {{\n'
        "    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;\n"
        "    if (i < n) {\n        float v = x0[i];\n"
        f"        for (int k = 0; k < {W.CHAIN_STEPS}; ++k) v = {fn.cuda}({step});\n"
        "        x[i] = v;\n    }\n}\n")


def cuda_compile_source(name: str, salt: int) -> str:
    """The compile workload's kernel (vyre_impl.compile_probe_program's computation) as a
    hand-written CUDA kernel called `name`."""
    return CUDA_SAXPY.replace("saxpy", name).replace(
        "y[i] = a * x[i] + y[i];", f"y[i] = (a * x[i] + y[i]) * 0.5f + {W.compile_constant(salt)}.0f;")


def wgsl_compile_source(salt: int) -> str:
    """The compile workload's kernel as hand-written WGSL."""
    return WGSL_SAXPY.replace("y[i] = p.a * x[i] + y[i];",
                              f"y[i] = (p.a * x[i] + y[i]) * 0.5 + {W.compile_constant(salt)}.0;")


class Peer:
    """Base: a name, the device group it belongs to, and one method per metric."""

    name = "peer"
    is_vyre = False

    def case(self, metric: str, data: W.Data) -> TimedCase:
        if metric.startswith("transcendental."):  # transcendental.<fn>.map / .chain
            _, fn, kind = metric.split(".")
            method = getattr(self, f"_transcendental_{kind}", None)
            if method is None:
                raise NotApplicable(self.not_applicable(metric))
            got: TimedCase = method(FUNCTIONS[fn], data)
            return got
        method = getattr(self, "_" + metric.replace(".", "_"), None)
        if method is None:
            raise NotApplicable(self.not_applicable(metric))
        out: TimedCase = method(data)
        return out

    def not_applicable(self, metric: str) -> str:
        return f"{self.name} has no counterpart for {metric}"

    def close(self) -> None:
        pass


# ----------------------------------------------------------------------------- NumPy


class NumpyPeer(Peer):
    """NumPy on the host CPU: the peer of the reference backend."""

    name = "numpy"

    def not_applicable(self, metric: str) -> str:
        if metric.startswith("compile"):
            return "NumPy compiles nothing"
        if metric.startswith("cpp"):
            return "the front end's NumPy-free oracle is plain Python, used for the check only"
        if metric == "dispatch.batch100":
            return "NumPy has no recorded batches"
        return super().not_applicable(metric)

    def _inc(self, data: W.Data, k: int) -> TimedCase:
        y = data.small_y0.copy()
        count = [0]

        def work() -> None:
            for _ in range(k):
                np.add(y, 1, out=y)
            count[0] += k

        return TimedCase(lambda: wall(work), lambda: W.check_inc(y, data.small_y0, count[0]), "wall",
                         extra={"how": "np.add(y, 1, out=y) per dispatch"})

    def _dispatch_launch(self, data: W.Data) -> TimedCase:
        return self._inc(data, data.sizes.launches)

    def _dispatch_roundtrip(self, data: W.Data) -> TimedCase:
        return self._inc(data, 1)

    def _dispatch_readback(self, data: W.Data) -> TimedCase:
        y = data.small_y0.copy()
        count = [0]

        def work() -> None:
            np.add(y, 1, out=y)
            y.copy()
            count[0] += 1

        return TimedCase(lambda: wall_rounds(work, None, W.dispatch_rounds("readback",
                                                                           data.sizes)),
                         lambda: W.check_inc(y, data.small_y0, count[0]), "wall",
                         extra={"how": "np.add(y, 1, out=y), then y.copy()"})

    def _copy(self, data: W.Data) -> TimedCase:
        x = data.unit_f32
        o = np.full_like(x, np.nan)

        def work() -> None:
            np.copyto(o, x)

        return TimedCase(lambda: wall(work), lambda: W.check_copy(o, x), "wall")

    def _to_host(self, data: W.Data) -> TimedCase:
        x = data.unit_f32
        o = np.full_like(x, np.nan)
        return TimedCase(lambda: wall(lambda: np.copyto(o, x)), lambda: W.check_copy(o, x),
                         "wall", extra={"how": "np.copyto into an array made once (the data "
                                               "is on the host already)"})

    def _saxpy(self, data: W.Data) -> TimedCase:
        x, y = data.saxpy_x, data.saxpy_y0.copy()
        tmp = np.empty_like(x)
        count = [0]
        a = np.float32(W.SAXPY_A)

        def work() -> None:
            np.multiply(x, a, out=tmp)
            np.add(y, tmp, out=y)
            count[0] += 1

        return TimedCase(lambda: wall(work), lambda: W.check_saxpy(y, x, data.saxpy_y0, count[0]), "wall")

    def _sum(self, data: W.Data) -> TimedCase:
        x = data.unit_f32
        out = [np.float32(np.nan)]

        def work() -> None:
            out[0] = x.sum()

        return TimedCase(lambda: wall(work), lambda: W.check_sum(float(out[0]), data), "wall")

    def _scan(self, data: W.Data) -> TimedCase:
        x = data.unit_f32
        o = np.full_like(x, np.nan)

        def work() -> None:
            np.cumsum(x, out=o)

        return TimedCase(lambda: wall(work), lambda: W.check_scan(o, data), "wall")

    def _histogram(self, data: W.Data) -> TimedCase:
        x = data.hist_u32
        out: list[np.ndarray] = [np.zeros(0)]

        def work() -> None:
            out[0] = np.bincount(x, minlength=W.HIST_BINS)

        return TimedCase(lambda: wall(work), lambda: W.check_histogram(out[0], data), "wall",
                         extra={"how": "np.bincount"})

    def _sort(self, data: W.Data) -> TimedCase:
        x = data.sort_keys
        out: list[np.ndarray] = [np.zeros(0)]

        def work() -> None:
            out[0] = np.sort(x)

        return TimedCase(lambda: wall(work), lambda: W.check_sort(out[0], data), "wall",
                         extra={"how": "np.sort (a new array each run)"})

    def _matmul(self, data: W.Data) -> TimedCase:
        a, b = data.matmul_ab
        c = np.full((a.shape[0], b.shape[1]), np.nan, np.float32)

        def work() -> None:
            np.matmul(a, b, out=c)

        return TimedCase(lambda: wall(work), lambda: W.check_matmul(c, data), "wall")

    def _matmul_i8(self, data: W.Data) -> TimedCase:
        a, b = (v.astype(np.int32) for v in data.matmul_i8_ab)
        c = np.zeros((a.shape[0], b.shape[1]), np.int32)

        def work() -> None:
            np.matmul(a, b, out=c)  # int32 products and sums wrap like the int8 product's

        return TimedCase(lambda: wall(work), lambda: W.check_matmul_i8(c, data), "wall",
                         extra={"how": "np.matmul on int32 copies"})


# ----------------------------------------------------------------------------- CuPy


class CupyPeer(Peer):
    """CuPy: RawKernel / ElementwiseKernel / library calls, timed with CUDA events."""

    name = "cupy"

    def __init__(self) -> None:
        try:
            import cupy as cp

            cp.cuda.runtime.getDeviceCount()
            cp.zeros(1).sum()
        except Exception as exc:
            raise PeerUnavailable(f"{type(exc).__name__}: {exc}") from None
        self.cp = cp
        self._inc_k: Any = None

    def not_applicable(self, metric: str) -> str:
        if metric.startswith("cpp"):
            return "no CuPy port of the C front end"
        if metric in ("compile.warm_memory", "compile.warm_disk"):
            return "CuPy's kernel caches are not separable from outside (cold only)"
        return super().not_applicable(metric)

    def _events(self, fn: Callable[[], Any]) -> Callable[[], float]:
        cp = self.cp
        s, e = cp.cuda.Event(), cp.cuda.Event()

        def run() -> float:
            s.record()
            fn()
            e.record()
            e.synchronize()
            return float(cp.cuda.get_elapsed_time(s, e)) / 1e3
        return run

    def _inc(self) -> Any:
        if self._inc_k is None:
            self._inc_k = self.cp.RawKernel(CUDA_INC, "inc")
        return self._inc_k

    def _inc_case(self, data: W.Data, mode: str) -> TimedCase:
        rounds = W.dispatch_rounds(mode, data.sizes)
        cp = self.cp
        n = data.sizes.small
        y = cp.asarray(data.small_y0)
        ker = self._inc()
        args = ((_grid(n),), (WG,), (y, np.uint32(n)))
        count = [0]
        sync = cp.cuda.Device().synchronize
        extra: dict[str, Any] = {}
        if mode == "launch":
            k = data.sizes.launches

            def work() -> None:
                for _ in range(k):
                    ker(*args)
                count[0] += k
        elif mode == "roundtrip":
            def work() -> None:
                ker(*args)
                count[0] += 1
        elif mode == "readback":
            sync = None  # (get() waits)
            extra["how"] = "kernel, then y.get()"

            def work() -> None:
                ker(*args)
                y.get()
                count[0] += 1
        else:
            nb = data.sizes.batch
            stream = cp.cuda.Stream(non_blocking=True)
            with stream:
                stream.begin_capture()
                for _ in range(nb):
                    ker(*args)
                graph = stream.end_capture()
            extra["how"] = f"{nb} launches captured into a CUDA graph, graph.launch() per run"

            def work() -> None:
                graph.launch(stream)
                stream.synchronize()
                count[0] += nb

        def run() -> float:
            return wall_rounds(work, sync, rounds)

        return TimedCase(run, lambda: W.check_inc(cp.asnumpy(y), data.small_y0, count[0]),
                         "wall", extra=extra)

    def _dispatch_launch(self, data: W.Data) -> TimedCase:
        return self._inc_case(data, "launch")

    def _dispatch_roundtrip(self, data: W.Data) -> TimedCase:
        return self._inc_case(data, "roundtrip")

    def _dispatch_readback(self, data: W.Data) -> TimedCase:
        return self._inc_case(data, "readback")

    def _dispatch_batch100(self, data: W.Data) -> TimedCase:
        return self._inc_case(data, "batch")

    def _copy(self, data: W.Data) -> TimedCase:
        cp = self.cp
        x = cp.asarray(data.unit_f32)
        o = cp.full(x.size, cp.nan, dtype=cp.float32)
        return TimedCase(self._events(lambda: cp.copyto(o, x)),
                         lambda: W.check_copy(cp.asnumpy(o), data.unit_f32), "device",
                         extra={"how": "cupy.copyto"})

    def _to_host(self, data: W.Data) -> TimedCase:
        x = self.cp.asarray(data.unit_f32)
        o = np.full_like(data.unit_f32, np.nan)
        return TimedCase(lambda: wall(lambda: x.get(out=o)),
                         lambda: W.check_copy(o, data.unit_f32), "wall",
                         extra={"how": "ndarray.get(out=o), o a NumPy array made once"})

    def _transcendental_map(self, fn: Fn, data: W.Data) -> TimedCase:
        cp = self.cp
        args, want, unsure = data.fn_map(fn)
        xs = [cp.asarray(a) for a in args]
        y = cp.empty_like(xs[0])
        f = getattr(cp, fn.cupy)
        return TimedCase(self._events(lambda: f(*xs, out=y)),
                         lambda: check_map(fn, args, want, unsure, cp.asnumpy(y), exact=False),
                         "device", extra={"how": f"cupy.{fn.cupy}(x, out=y)"})

    def _saxpy(self, data: W.Data) -> TimedCase:
        cp = self.cp
        x, y = cp.asarray(data.saxpy_x), cp.asarray(data.saxpy_y0)
        k = cp.ElementwiseKernel("float32 x, float32 a", "float32 y", "y = a * x + y",
                                 "bench_saxpy")
        a = np.float32(W.SAXPY_A)
        count = [0]

        def work() -> None:
            k(x, a, y)
            count[0] += 1

        return TimedCase(self._events(work),
                         lambda: W.check_saxpy(cp.asnumpy(y), data.saxpy_x, data.saxpy_y0,
                                               count[0]),
                         "device", extra={"how": "ElementwiseKernel y = a * x + y"})

    def _sum(self, data: W.Data) -> TimedCase:
        cp = self.cp
        x = cp.asarray(data.unit_f32)
        out = cp.full((), cp.nan, dtype=cp.float32)
        return TimedCase(self._events(lambda: cp.sum(x, out=out)),
                         lambda: W.check_sum(float(out.get()), data), "device")

    def _scan(self, data: W.Data) -> TimedCase:
        cp = self.cp
        x = cp.asarray(data.unit_f32)
        o = cp.full(x.size, cp.nan, dtype=cp.float32)
        return TimedCase(self._events(lambda: cp.cumsum(x, out=o)),
                         lambda: W.check_scan(cp.asnumpy(o), data), "device")


    def _histogram(self, data: W.Data) -> TimedCase:
        cp = self.cp
        x = cp.asarray(data.hist_u32)
        out = [cp.zeros(0)]

        def work() -> None:
            out[0] = cp.bincount(x, minlength=W.HIST_BINS)

        return TimedCase(self._events(work),
                         lambda: W.check_histogram(cp.asnumpy(out[0]), data), "device",
                         extra={"how": "cp.bincount"})

    def _sort(self, data: W.Data) -> TimedCase:
        cp = self.cp
        x = cp.asarray(data.sort_keys)
        out = [cp.zeros(0)]

        def work() -> None:
            out[0] = cp.sort(x)

        return TimedCase(self._events(work), lambda: W.check_sort(cp.asnumpy(out[0]), data),
                         "device", extra={"how": "cp.sort (a new array each run)"})
    def _matmul(self, data: W.Data) -> TimedCase:
        cp = self.cp
        a, b = (cp.asarray(v) for v in data.matmul_ab)
        c = cp.full((a.shape[0], b.shape[1]), cp.nan, dtype=cp.float32)
        return TimedCase(self._events(lambda: cp.matmul(a, b, out=c)),
                         lambda: W.check_matmul(cp.asnumpy(c), data), "device",
                         extra={"how": "cupy.matmul (cuBLAS SGEMM)"})

    def _compile_cold(self, data: W.Data) -> TimedCase:
        cp = self.cp
        kernels: list[Any] = []

        def run() -> float:
            salt = time.perf_counter_ns()
            ker = cp.RawKernel(cuda_compile_source(f"probe_{salt}", salt), f"probe_{salt}")
            t0 = time.perf_counter_ns()
            ker.compile()
            kernels.append(ker)
            return (time.perf_counter_ns() - t0) / 1e9

        def check() -> str | None:
            if not kernels or kernels[-1].attributes.get("max_threads_per_block", 0) <= 0:
                return "the compiled kernel has no usable function"
            return None

        return TimedCase(run, check, "wall", extra={"how": "RawKernel(...).compile(), NVRTC"})


# ----------------------------------------------------------------------------- PyTorch


class TorchPeer(Peer):
    """PyTorch on CUDA: in-place tensor ops, CUDA graphs, CUDA events; TF32 off."""

    name = "torch"

    def __init__(self) -> None:
        try:
            import torch

            if not torch.cuda.is_available():
                raise PeerUnavailable("torch is installed but torch.cuda.is_available() is "
                                      "False")
        except PeerUnavailable:
            raise
        except Exception as exc:
            raise PeerUnavailable(f"{type(exc).__name__}: {exc}") from None
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.set_float32_matmul_precision("highest")
        self.torch = torch

    def not_applicable(self, metric: str) -> str:
        if metric.startswith("cpp"):
            return "no PyTorch port of the C front end"
        if metric.startswith("compile"):
            return "PyTorch ships precompiled kernels (torch.compile is a different thing)"
        return super().not_applicable(metric)

    def _dev(self, arr: np.ndarray) -> Any:
        return self.torch.from_numpy(np.ascontiguousarray(arr)).cuda()

    def _matmul_i8(self, data: W.Data) -> TimedCase:
        """torch._int_mm: what a PyTorch user calls for int8 x int8 -> int32 (cuBLASLt)."""
        a, b = (self._dev(v) for v in data.matmul_i8_ab)
        out: list[Any] = [None]

        def work() -> None:
            out[0] = self.torch._int_mm(a, b)

        return TimedCase(self._events(work),
                         lambda: W.check_matmul_i8(out[0].cpu().numpy(), data), "device",
                         extra={"how": "torch._int_mm (int8 x int8 -> int32)"})

    def _events(self, fn: Callable[[], Any]) -> Callable[[], float]:
        torch = self.torch
        s = torch.cuda.Event(enable_timing=True)
        e = torch.cuda.Event(enable_timing=True)

        def run() -> float:
            s.record()
            fn()
            e.record()
            e.synchronize()
            return float(s.elapsed_time(e)) / 1e3
        return run

    def _inc_case(self, data: W.Data, mode: str) -> TimedCase:
        rounds = W.dispatch_rounds(mode, data.sizes)
        torch = self.torch
        y = self._dev(data.small_y0.astype(np.int32))
        count = [0]
        sync = torch.cuda.synchronize
        extra: dict[str, Any] = {"how": "tensor.add_(1) (an elementwise kernel, not empty)"}
        if mode == "launch":
            k = data.sizes.launches

            def work() -> None:
                for _ in range(k):
                    y.add_(1)
                count[0] += k
        elif mode == "roundtrip":
            def work() -> None:
                y.add_(1)
                count[0] += 1
        elif mode == "readback":
            sync = None  # (cpu() waits)
            extra["how"] += ", then tensor.cpu()"

            def work() -> None:
                y.add_(1)
                y.cpu()
                count[0] += 1
        else:
            nb = data.sizes.batch
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                for _ in range(3):
                    y.add_(1)
            torch.cuda.current_stream().wait_stream(side)
            count[0] += 3
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                for _ in range(nb):
                    y.add_(1)
            extra["how"] = f"{nb} add_(1) captured in a torch.cuda.CUDAGraph, replay() per run"

            def work() -> None:
                g.replay()
                count[0] += nb

        def run() -> float:
            return wall_rounds(work, sync, rounds)

        def check() -> str | None:
            got = y.cpu().numpy().astype(np.uint32)
            return W.check_inc(got, data.small_y0, count[0])

        return TimedCase(run, check, "wall", extra=extra)

    def _dispatch_launch(self, data: W.Data) -> TimedCase:
        return self._inc_case(data, "launch")

    def _dispatch_roundtrip(self, data: W.Data) -> TimedCase:
        return self._inc_case(data, "roundtrip")

    def _dispatch_readback(self, data: W.Data) -> TimedCase:
        return self._inc_case(data, "readback")

    def _dispatch_batch100(self, data: W.Data) -> TimedCase:
        return self._inc_case(data, "batch")

    def _copy(self, data: W.Data) -> TimedCase:
        x = self._dev(data.unit_f32)
        o = self.torch.full_like(x, float("nan"))
        return TimedCase(self._events(lambda: o.copy_(x)),
                         lambda: W.check_copy(o.cpu().numpy(), data.unit_f32), "device",
                         extra={"how": "tensor.copy_ (cudaMemcpyAsync device to device)"})

    def _to_host(self, data: W.Data) -> TimedCase:
        x = self._dev(data.unit_f32)
        o = np.full_like(data.unit_f32, np.nan)
        o_t = self.torch.from_numpy(o)
        return TimedCase(lambda: wall(lambda: o_t.copy_(x)),
                         lambda: W.check_copy(o, data.unit_f32), "wall",
                         extra={"how": "torch.from_numpy(o).copy_(tensor), o a NumPy array "
                                       "made once (a copy to pageable memory waits)"})

    def _saxpy(self, data: W.Data) -> TimedCase:
        return self._saxpy_case(data, lambda x, y: y.add_(x, alpha=W.SAXPY_A),
                                "y.add_(x, alpha=a)")

    def _transcendental_map(self, fn: Fn, data: W.Data) -> TimedCase:
        torch = self.torch
        args, want, unsure = data.fn_map(fn)
        xs = [self._dev(a) for a in args]
        y = torch.empty_like(xs[0])
        f = getattr(torch, fn.torch)
        return TimedCase(self._events(lambda: f(*xs, out=y)),
                         lambda: check_map(fn, args, want, unsure, y.cpu().numpy(),
                                           exact=False),
                         "device", extra={"how": f"torch.{fn.torch}(x, out=y)"})

    def _saxpy_case(self, data: W.Data, step: Callable[[Any, Any], Any], how: str
                    ) -> TimedCase:
        """saxpy timed by events: `step(x, y)` does y = a * x + y on the device tensors."""
        x, y = self._dev(data.saxpy_x), self._dev(data.saxpy_y0)
        count = [0]

        def work() -> None:
            step(x, y)
            count[0] += 1

        return TimedCase(self._events(work),
                         lambda: W.check_saxpy(y.cpu().numpy(), data.saxpy_x, data.saxpy_y0,
                                               count[0]),
                         "device", extra={"how": how})

    def _sum(self, data: W.Data) -> TimedCase:
        torch = self.torch
        x = self._dev(data.unit_f32)
        out = torch.full((), float("nan"), device="cuda", dtype=torch.float32)
        return TimedCase(self._events(lambda: torch.sum(x, dim=0, out=out)),
                         lambda: W.check_sum(float(out.item()), data), "device")

    def _scan(self, data: W.Data) -> TimedCase:
        torch = self.torch
        x = self._dev(data.unit_f32)
        o = torch.full_like(x, float("nan"))
        return TimedCase(self._events(lambda: torch.cumsum(x, 0, out=o)),
                         lambda: W.check_scan(o.cpu().numpy(), data), "device")


    def _histogram(self, data: W.Data) -> TimedCase:
        torch = self.torch
        x = self._dev(data.hist_u32.astype(np.int32))  # torch.bincount takes signed ints
        out = [torch.zeros(0)]

        def work() -> None:
            out[0] = torch.bincount(x, minlength=W.HIST_BINS)

        return TimedCase(self._events(work),
                         lambda: W.check_histogram(out[0].cpu().numpy(), data), "device",
                         extra={"how": "torch.bincount over int32"})

    def _index_add(self, data: W.Data, scatter: bool) -> TimedCase:
        torch = self.torch
        v = self._dev(data.atomic_values)
        idx = self._dev((data.atomic_perm if scatter else data.atomic_bins).astype(np.int64))
        out = torch.zeros(data.sizes.atomics if scatter else W.HIST_BINS, device="cuda")
        count = [0]
        timed = self._events(lambda: out.index_add_(0, idx, v))

        def run() -> float:
            count[0] += 1
            return timed()

        def check() -> str | None:
            got = out.cpu().numpy()
            if scatter:
                return W.check_atomic_scatter(got, data, count[0])
            return W.check_atomic_hist(got, data, count[0], exact=False)

        return TimedCase(run, check, "device",
                         extra={"how": "Tensor.index_add_ (atomicAdd on CUDA; order-dependent)"})

    def _atomics_hist_relaxed(self, data: W.Data) -> TimedCase:
        return self._index_add(data, scatter=False)

    def _atomics_scatter_relaxed(self, data: W.Data) -> TimedCase:
        return self._index_add(data, scatter=True)

    def _sort(self, data: W.Data) -> TimedCase:
        torch = self.torch
        x = self._dev(data.sort_keys.astype(np.int32))  # keys < 2^31: same order as u32
        vals = torch.empty_like(x)
        idx = torch.empty(x.shape, dtype=torch.int64, device=x.device)

        def work() -> None:
            torch.sort(x, out=(vals, idx))

        return TimedCase(self._events(work), lambda: W.check_sort(vals.cpu().numpy(), data),
                         "device", extra={"how": "torch.sort over int32 (also writes indices)"})
    def _matmul(self, data: W.Data) -> TimedCase:
        torch = self.torch
        a, b = (self._dev(v) for v in data.matmul_ab)
        c = torch.full((a.shape[0], b.shape[1]), float("nan"), device="cuda")
        return TimedCase(self._events(lambda: torch.matmul(a, b, out=c)),
                         lambda: W.check_matmul(c.cpu().numpy(), data), "device",
                         extra={"how": "torch.matmul, allow_tf32=False"})


# ----------------------------------------------------------------------------- Triton


class TritonPeer(TorchPeer):
    """Triton kernels (vyre/tools/bench/triton_kernels.py) on torch tensors; timed with
    torch's CUDA events like the torch peer, launches by the host clock like every peer."""

    name = "triton"
    BLOCK = 1024

    def __init__(self) -> None:
        super().__init__()
        try:
            from . import triton_kernels
        except Exception as exc:
            raise PeerUnavailable(f"triton is not importable: {type(exc).__name__}: {exc}"
                                  ) from None
        self.k = triton_kernels

    def not_applicable(self, metric: str) -> str:
        if metric == "scan":
            return "no Triton scan kernel here (tl.associative_scan is per block only)"
        if metric in ("copy", "to_host"):
            return "a copy is not a Triton kernel (torch's copy_ is the peer)"
        if metric in ("histogram", "sort"):
            return "no Triton kernel here (torch.bincount / torch.sort are the peers)"
        if metric.startswith("compile"):
            return "Triton's JIT cache is process-wide; a cold compile is not repeatable here"
        return super().not_applicable(metric)

    def _blocks(self, n: int) -> tuple[int]:
        return (-(-n // self.BLOCK),)

    def _inc_case(self, data: W.Data, mode: str) -> TimedCase:
        rounds = W.dispatch_rounds(mode, data.sizes)
        torch = self.torch
        y = self._dev(data.small_y0.astype(np.int32))
        n = int(y.numel())
        grid = self._blocks(n)
        kern = self.k.inc_kernel
        kern[grid](y, n, BLOCK=self.BLOCK)  # compile outside the timing
        count = [1]
        k = data.sizes.launches if mode == "launch" else (
            data.sizes.batch if mode == "batch" else 1)
        readback = mode == "readback"

        def work() -> None:
            for _ in range(k):
                kern[grid](y, n, BLOCK=self.BLOCK)
            if readback:
                y.cpu()
            count[0] += k

        def check() -> str | None:
            got = y.cpu().numpy().astype(np.uint32)
            return W.check_inc(got, data.small_y0, count[0])

        how = {"batch": f"{k} kernel[grid](...) calls in a row (no graph)",
               "readback": "kernel[grid](...), then tensor.cpu()"}.get(
                   mode, "kernel[grid](...) per dispatch")
        sync = None if readback else torch.cuda.synchronize
        return TimedCase(lambda: wall_rounds(work, sync, rounds), check, "wall",
                         extra={"how": how})

    def _copy(self, data: W.Data) -> TimedCase:
        raise NotApplicable(self.not_applicable("copy"))

    def _to_host(self, data: W.Data) -> TimedCase:
        raise NotApplicable(self.not_applicable("to_host"))

    def _histogram(self, data: W.Data) -> TimedCase:
        raise NotApplicable(self.not_applicable("histogram"))

    def _sort(self, data: W.Data) -> TimedCase:
        raise NotApplicable(self.not_applicable("sort"))

    def _saxpy(self, data: W.Data) -> TimedCase:
        n = int(data.saxpy_x.size)
        grid = self._blocks(n)
        return self._saxpy_case(
            data, lambda x, y: self.k.saxpy_kernel[grid](x, y, W.SAXPY_A, n, BLOCK=self.BLOCK),
            "triton: one block of 1024 per program")

    def _sum(self, data: W.Data) -> TimedCase:
        torch = self.torch
        x = self._dev(data.unit_f32)
        n = int(x.numel())
        out = torch.zeros((), device="cuda", dtype=torch.float32)
        grid = self._blocks(n)

        def work() -> None:
            out.zero_()
            self.k.sum_kernel[grid](x, out, n, BLOCK=self.BLOCK)

        return TimedCase(self._events(work), lambda: W.check_sum(float(out.item()), data),
                         "device", extra={"how": "triton: tl.sum per block + atomic_add"})

    def _scan(self, data: W.Data) -> TimedCase:
        raise NotApplicable(self.not_applicable("scan"))

    def _matmul(self, data: W.Data) -> TimedCase:
        torch = self.torch
        a, b = (self._dev(v) for v in data.matmul_ab)
        m = int(a.shape[0])
        c = torch.full((m, m), float("nan"), device="cuda")
        bm, bn, bk = 128, 128, 32
        grid = (-(-m // bm) * -(-m // bn),)

        def work() -> None:
            self.k.matmul_kernel[grid](a, b, c, m, m, m, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk,
                                       GROUP_M=8, num_warps=8, num_stages=3)

        return TimedCase(self._events(work), lambda: W.check_matmul(c.cpu().numpy(), data),
                         "device", extra={"how": "triton tutorial matmul, tl.dot "
                                                 "input_precision='ieee' (no TF32)"})


# ----------------------------------------------------------------------------- raw CUDA


class RawCudaPeer(Peer):
    """Hand-written CUDA C through cuda-bindings: NVRTC to a cubin, cuLaunchKernel with a
    pre-packed argument array, stream capture for graphs, events for timing."""

    name = "raw cuda-bindings"

    def __init__(self) -> None:
        try:
            from cuda.bindings import driver, nvrtc
        except Exception as exc:
            raise PeerUnavailable(f"cuda-bindings is not importable: {exc}") from None
        self.drv, self.nv = driver, nvrtc
        try:
            self._cu(driver.cuInit, 0)
            dev = self._cu(driver.cuDeviceGet, 0)
            self.ctx = self._cu(driver.cuDevicePrimaryCtxRetain, dev)
            self._cu(driver.cuCtxSetCurrent, self.ctx)
            attr = driver.CUdevice_attribute
            major = self._cu(driver.cuDeviceGetAttribute,
                             attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev)
            minor = self._cu(driver.cuDeviceGetAttribute,
                             attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev)
            self.arch = f"sm_{major}{minor}"
            self.dev = dev
            self.stream = self._cu(driver.cuStreamCreate,
                                   int(driver.CUstream_flags.CU_STREAM_NON_BLOCKING))
        except PeerUnavailable:
            raise
        except Exception as exc:
            raise PeerUnavailable(f"the CUDA driver could not be used: {exc}") from None
        self._mods: dict[str, Any] = {}

    @staticmethod
    def _cu(fn: Any, *args: Any) -> Any:
        res = fn(*args)
        if not isinstance(res, tuple):
            res = (res,)
        if int(res[0]) != 0:
            raise PeerUnavailable(f"{getattr(fn, '__name__', fn)} failed: {res[0]}")
        rest = res[1:]
        return rest[0] if len(rest) == 1 else (rest or None)

    def not_applicable(self, metric: str) -> str:
        if metric in ("sum", "scan", "histogram", "sort", "matmul", "matmul_i8"):
            return ("raw cuda-bindings has no library kernels for this (CuPy and PyTorch are "
                    "the library peers)")
        if metric.startswith("cpp"):
            return "no hand-written CUDA port of the C front end"
        if metric in ("compile.warm_memory", "compile.warm_disk"):
            return "raw NVRTC has no cache (cold only)"
        return super().not_applicable(metric)

    def _function(self, src: str, name: str) -> Any:
        nv, drv = self.nv, self.drv
        opts = [f"--gpu-architecture={self.arch}".encode(), b"--std=c++17"]
        prog = self._nv(nv.nvrtcCreateProgram, src.encode(), f"{name}.cu".encode(), 0, [], [])
        try:
            res = nv.nvrtcCompileProgram(prog, len(opts), opts)
            if int(res[0]) != 0:
                raise RuntimeError(f"NVRTC failed on {name}: {res[0]}")
            size = self._nv(nv.nvrtcGetCUBINSize, prog)
            cubin = b" " * size
            self._nv(nv.nvrtcGetCUBIN, prog, cubin)
        finally:
            nv.nvrtcDestroyProgram(prog)
        mod = self._cu(drv.cuModuleLoadData, cubin)
        self._mods[name] = mod
        return self._cu(drv.cuModuleGetFunction, mod, name.encode())

    @staticmethod
    def _nv(fn: Any, *args: Any) -> Any:
        res = fn(*args)
        if not isinstance(res, tuple):
            res = (res,)
        if int(res[0]) != 0:
            raise RuntimeError(f"{getattr(fn, '__name__', fn)} failed: {res[0]}")
        rest = res[1:]
        return rest[0] if len(rest) == 1 else (rest or None)

    def _alloc(self, arr: np.ndarray) -> int:
        ptr = self._cu(self.drv.cuMemAlloc, max(arr.nbytes, 4))
        self._cu(self.drv.cuMemcpyHtoD, ptr, arr.ctypes.data, arr.nbytes)
        return int(ptr)

    def _read(self, ptr: int, like: np.ndarray) -> np.ndarray:
        out = np.empty_like(like)
        self._cu(self.drv.cuCtxSynchronize)
        self._cu(self.drv.cuMemcpyDtoH, out.ctypes.data, ptr, out.nbytes)
        return out

    def _free(self, *ptrs: int) -> Callable[[], None]:
        def close() -> None:
            self._cu(self.drv.cuCtxSynchronize)
            for p in ptrs:
                self._cu(self.drv.cuMemFree, p)
        return close

    @staticmethod
    def _pack(*args: ctypes._SimpleCData) -> tuple[int, tuple[Any, ...]]:
        arr = (ctypes.c_void_p * len(args))(*[ctypes.addressof(a) for a in args])
        return ctypes.addressof(arr), (arr, args)

    def _launcher(self, fn: Any, grid: int, params: int) -> Callable[[], None]:
        launch, stream = self.drv.cuLaunchKernel, self.stream

        def go() -> None:
            (err,) = launch(fn, grid, 1, 1, WG, 1, 1, 0, stream, params, 0)
            if int(err):
                raise RuntimeError(f"cuLaunchKernel failed: {err}")
        return go

    def _events(self, fn: Callable[[], Any]) -> Callable[[], float]:
        drv = self.drv
        s = self._cu(drv.cuEventCreate, 0)
        e = self._cu(drv.cuEventCreate, 0)

        def run() -> float:
            self._cu(drv.cuEventRecord, s, self.stream)
            fn()
            self._cu(drv.cuEventRecord, e, self.stream)
            self._cu(drv.cuEventSynchronize, e)
            return float(self._cu(drv.cuEventElapsedTime, s, e)) / 1e3
        return run

    def _sync(self) -> None:
        self._cu(self.drv.cuStreamSynchronize, self.stream)

    def _inc_case(self, data: W.Data, mode: str) -> TimedCase:
        rounds = W.dispatch_rounds(mode, data.sizes)
        drv = self.drv
        n = data.sizes.small
        y = self._alloc(data.small_y0)
        fn = self._function(CUDA_INC, "inc")
        params, keep = self._pack(ctypes.c_void_p(y), ctypes.c_uint(n))
        go = self._launcher(fn, _grid(n), params)
        count = [0]
        extra: dict[str, Any] = {}
        if mode == "launch":
            k = data.sizes.launches

            def work() -> None:
                for _ in range(k):
                    go()
                count[0] += k
        elif mode == "roundtrip":
            def work() -> None:
                go()
                count[0] += 1
        elif mode == "readback":
            out = np.empty_like(data.small_y0)
            copy, sync_stream = drv.cuMemcpyDtoHAsync, drv.cuStreamSynchronize
            extra["how"] = ("cuLaunchKernel, cuMemcpyDtoHAsync into a host array, "
                            "cuStreamSynchronize")

            def work() -> None:
                go()
                self._cu(copy, out.ctypes.data, y, out.nbytes, self.stream)
                self._cu(sync_stream, self.stream)
                count[0] += 1
        else:
            nb = data.sizes.batch
            mode_g = drv.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_GLOBAL
            self._cu(drv.cuStreamBeginCapture, self.stream, mode_g)
            for _ in range(nb):
                go()
            graph = self._cu(drv.cuStreamEndCapture, self.stream)
            gexec = self._cu(drv.cuGraphInstantiate, graph, 0)
            launch_graph = drv.cuGraphLaunch
            extra["how"] = f"{nb} launches stream-captured into a graph, cuGraphLaunch per run"

            def work() -> None:
                (err,) = launch_graph(gexec, self.stream)
                if int(err):
                    raise RuntimeError(f"cuGraphLaunch failed: {err}")
                count[0] += nb

        def run() -> float:
            _ = keep  # the packed argument array must outlive every launch
            return wall_rounds(work, None if mode == "readback" else self._sync, rounds)

        return TimedCase(run, lambda: W.check_inc(self._read(y, data.small_y0), data.small_y0,
                                                  count[0]),
                         "wall", self._free(y), extra=extra)

    def _dispatch_launch(self, data: W.Data) -> TimedCase:
        return self._inc_case(data, "launch")

    def _dispatch_roundtrip(self, data: W.Data) -> TimedCase:
        return self._inc_case(data, "roundtrip")

    def _dispatch_readback(self, data: W.Data) -> TimedCase:
        return self._inc_case(data, "readback")

    def _dispatch_batch100(self, data: W.Data) -> TimedCase:
        return self._inc_case(data, "batch")

    def _copy(self, data: W.Data) -> TimedCase:
        x = data.unit_f32
        src = self._alloc(x)
        dst = self._alloc(np.full_like(x, np.nan))
        drv, nbytes = self.drv, x.nbytes

        def work() -> None:
            self._cu(drv.cuMemcpyDtoDAsync, dst, src, nbytes, self.stream)

        return TimedCase(self._events(work), lambda: W.check_copy(self._read(dst, x), x),
                         "device", self._free(src, dst), extra={"how": "cuMemcpyDtoDAsync"})

    def _to_host(self, data: W.Data) -> TimedCase:
        x = data.unit_f32
        src = self._alloc(x)
        o = np.full_like(x, np.nan)
        dst, nbytes, stream = o.ctypes.data, o.nbytes, self.stream
        drv = self.drv

        def work() -> None:
            self._cu(drv.cuMemcpyDtoHAsync, dst, src, nbytes, stream)
            self._cu(drv.cuStreamSynchronize, stream)

        return TimedCase(lambda: wall(work), lambda: W.check_copy(o, x), "wall",
                         self._free(src), extra={"how": "cuMemcpyDtoHAsync into a NumPy array "
                                                        "made once, then cuStreamSynchronize"})

    def _saxpy(self, data: W.Data) -> TimedCase:
        x, y0 = data.saxpy_x, data.saxpy_y0
        n = x.size
        xp, yp = self._alloc(x), self._alloc(y0)
        fn = self._function(CUDA_SAXPY, "saxpy")
        params, keep = self._pack(ctypes.c_void_p(xp), ctypes.c_void_p(yp),
                                  ctypes.c_float(W.SAXPY_A), ctypes.c_uint(n))
        go = self._launcher(fn, _grid(n), params)
        count = [0]

        def work() -> None:
            _ = keep
            go()
            count[0] += 1

        return TimedCase(self._events(work),
                         lambda: W.check_saxpy(self._read(yp, y0), x, y0, count[0]),
                         "device", self._free(xp, yp),
                         extra={"how": "hand-written kernel, one element per thread"})

    def _transcendental_map(self, fn: Fn, data: W.Data) -> TimedCase:
        args, want, unsure = data.fn_map(fn)
        n = args[0].size
        ptrs = [self._alloc(a) for a in args]
        yp = self._alloc(np.zeros_like(args[0]))
        k = self._function(cuda_function_source(fn), f"{fn.name}_map")
        params, keep = self._pack(*(ctypes.c_void_p(p) for p in ptrs), ctypes.c_void_p(yp),
                                  ctypes.c_uint(n))
        go = self._launcher(k, _grid(n), params)

        def work() -> None:
            _ = keep
            go()

        return TimedCase(self._events(work), lambda: check_map(
            fn, args, want, unsure, self._read(yp, args[0]), exact=False), "device",
            self._free(*ptrs, yp),
            extra={"how": f"hand-written kernel, {fn.cuda} (accurate, no fast math)"})

    def _transcendental_chain(self, fn: Fn, data: W.Data) -> TimedCase:
        x0, want = data.fn_chain(fn)
        n = x0.size
        x0p, xp = self._alloc(x0), self._alloc(np.zeros_like(x0))
        k = self._function(cuda_function_source(fn), f"{fn.name}_chain")
        params, keep = self._pack(ctypes.c_void_p(x0p), ctypes.c_void_p(xp), ctypes.c_uint(n))
        go = self._launcher(k, _grid(n), params)

        def work() -> None:
            _ = keep
            go()

        return TimedCase(self._events(work), lambda: check_chain(
            fn, x0, want, self._read(xp, x0), exact=False), "device", self._free(x0p, xp),
            extra={"how": f"hand-written kernel, {fn.cuda} (accurate, no fast math)"})

    def _compile_cold(self, data: W.Data) -> TimedCase:
        fns: list[Any] = []

        def run() -> float:
            salt = time.perf_counter_ns()
            name = f"probe_{salt}"
            src = cuda_compile_source(name, salt)
            t0 = time.perf_counter_ns()
            fns.append(self._function(src, name))
            return (time.perf_counter_ns() - t0) / 1e9

        return TimedCase(run, lambda: None if fns and fns[-1] is not None
                         else "no function was loaded", "wall",
                         extra={"how": "nvrtcCompileProgram to a cubin + cuModuleLoadData"})

    def close(self) -> None:
        for mod in self._mods.values():
            self.drv.cuModuleUnload(mod)
        self._mods.clear()
        self.drv.cuStreamDestroy(self.stream)
        self.drv.cuDevicePrimaryCtxRelease(self.dev)


# ----------------------------------------------------------------------------- raw wgpu


WGSL_INC = f"""
@group(0) @binding(0) var<storage, read_write> y: array<u32>;
@compute @workgroup_size({WG})
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {{
    let i = gid.x;
    if (i < arrayLength(&y)) {{ y[i] = y[i] + 1u; }}
}}
"""
WGSL_SAXPY = f"""
struct P {{ a: f32 }}
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;
@compute @workgroup_size({WG})
fn main(@builtin(global_invocation_id) gid: vec3<u32>,
        @builtin(num_workgroups) nwg: vec3<u32>) {{
    let i = gid.x + gid.y * nwg.x * {WG}u;
    if (i < arrayLength(&y)) {{ y[i] = p.a * x[i] + y[i]; }}
}}
"""


def _wgsl_float(v: float) -> str:
    return f"{v!r}" if v >= 0 else f"({v!r})"

# f32 atomic add through WGSL's atomic<f32> (wgpu's shader-float32-atomic): the hardware's
# order-dependent atomic, what vyre's atomic_add_relaxed spells
WGSL_ATOMIC_ADD = f"""
@group(0) @binding(0) var<storage, read> vals: array<f32>;
@group(0) @binding(1) var<storage, read> keys: array<u32>;
@group(0) @binding(2) var<storage, read_write> out: array<atomic<f32>>;
@compute @workgroup_size({WG})
fn main(@builtin(global_invocation_id) gid: vec3<u32>,
        @builtin(num_workgroups) nwg: vec3<u32>) {{
    let i = gid.x + gid.y * nwg.x * {WG}u;
    if (i < arrayLength(&vals)) {{ atomicAdd(&out[keys[i]], vals[i]); }}
}}
"""


def wgsl_map_source(fn: Fn) -> str:
    """`fn`'s map with WGSL's builtin (bindings: the arguments, then y)."""
    decls = "".join(f"@group(0) @binding({j}) var<storage, read> x{j}: array<f32>;\n"
                    for j in range(fn.arity))
    call = fn.wgsl.format(*(f"x{j}[i]" for j in range(fn.arity)))
    return (f"{decls}@group(0) @binding({fn.arity}) var<storage, read_write> y: array<f32>;\n"
            f"@compute @workgroup_size({WG})\n"
            "fn main(@builtin(global_invocation_id) gid: vec3<u32>,\n"
            "        @builtin(num_workgroups) nwg: vec3<u32>) {\n"
            f"    let i = gid.x + gid.y * nwg.x * {WG}u;\n"
            f"    if (i < arrayLength(&y)) {{ y[i] = {call}; }}\n}}\n")


def wgsl_chain_source(fn: Fn) -> str:
    """`fn`'s chain with WGSL's builtin (functions.py: the step)."""
    step = fn.wgsl.format(*fn.chain_args("v", _wgsl_float))
    return ("@group(0) @binding(0) var<storage, read> x0: array<f32>;\n"
            "@group(0) @binding(1) var<storage, read_write> x: array<f32>;\n"
            f"@compute @workgroup_size({WG})\n"
            "fn main(@builtin(global_invocation_id) gid: vec3<u32>,\n"
            "        @builtin(num_workgroups) nwg: vec3<u32>) {\n"
            f"    let i = gid.x + gid.y * nwg.x * {WG}u;\n"
            "    if (i < arrayLength(&x)) {\n        var v = x0[i];\n"
            f"        for (var k = 0; k < {W.CHAIN_STEPS}; k++) {{ v = {step}; }}\n"
            "        x[i] = v;\n    }\n}\n")


# A tiled matmul as a user would hand-write it in WGSL: 64x64 output tiles per workgroup of
# 16x16 invocations, 4x4 outputs per invocation held in four vec4 registers, 16-deep K
# slices staged in workgroup memory (A transposed so both operands read as vec4s). Edges
# are handled with explicit checks (sizes need not divide 64).
WGSL_MATMUL = """
struct P { n: u32 }
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read> a: array<f32>;
@group(0) @binding(2) var<storage, read> b: array<f32>;
@group(0) @binding(3) var<storage, read_write> c: array<f32>;
var<workgroup> ta: array<vec4<f32>, 256>;  // [16 k][16 row quads]
var<workgroup> tb: array<vec4<f32>, 256>;  // [16 k][16 col quads]
fn lda(r: u32, k: u32, n: u32) -> f32 {
    if (r < n && k < n) { return a[r * n + k]; }
    return 0.0;
}
fn ldb(k: u32, col: u32, n: u32) -> f32 {
    if (k < n && col < n) { return b[k * n + col]; }
    return 0.0;
}
@compute @workgroup_size(16, 16)
fn main(@builtin(local_invocation_id) lid: vec3<u32>,
        @builtin(workgroup_id) wid: vec3<u32>) {
    let n = p.n;
    let tid = lid.y * 16u + lid.x;
    let r0 = wid.y * 64u;
    let c0 = wid.x * 64u;
    var acc0 = vec4<f32>(0.0);
    var acc1 = vec4<f32>(0.0);
    var acc2 = vec4<f32>(0.0);
    var acc3 = vec4<f32>(0.0);
    // each invocation stages one vec4 of A (4 rows, one k) and one of B (one k, 4 columns)
    let ak = tid % 16u;
    let aq = tid / 16u;
    let bk = tid / 16u;
    let bq = tid % 16u;
    for (var k0 = 0u; k0 < n; k0 += 16u) {
        let ar = r0 + aq * 4u;
        ta[ak * 16u + aq] = vec4<f32>(lda(ar, k0 + ak, n), lda(ar + 1u, k0 + ak, n),
                                      lda(ar + 2u, k0 + ak, n), lda(ar + 3u, k0 + ak, n));
        let bc = c0 + bq * 4u;
        tb[bk * 16u + bq] = vec4<f32>(ldb(k0 + bk, bc, n), ldb(k0 + bk, bc + 1u, n),
                                      ldb(k0 + bk, bc + 2u, n), ldb(k0 + bk, bc + 3u, n));
        workgroupBarrier();
        for (var k = 0u; k < 16u; k++) {
            let x = ta[k * 16u + lid.y];
            let y = tb[k * 16u + lid.x];
            acc0 = fma(vec4<f32>(x.x), y, acc0);
            acc1 = fma(vec4<f32>(x.y), y, acc1);
            acc2 = fma(vec4<f32>(x.z), y, acc2);
            acc3 = fma(vec4<f32>(x.w), y, acc3);
        }
        workgroupBarrier();
    }
    let col = c0 + lid.x * 4u;
    let rows = array<vec4<f32>, 4>(acc0, acc1, acc2, acc3);
    for (var i = 0u; i < 4u; i++) {
        let r = r0 + lid.y * 4u + i;
        for (var j = 0u; j < 4u; j++) {
            if (r < n && col + j < n) { c[r * n + col + j] = rows[i][j]; }
        }
    }
}
"""


def _grid2(groups: int) -> tuple[int, int, int]:
    if groups <= 65535:
        return (groups, 1, 1)
    y = -(-groups // 65535)
    return (-(-groups // y), y, 1)


class RawWgpuPeer(Peer):
    """Hand-written WGSL through wgpu-py on the adapter vyre's wgpu backend uses; one
    pipeline and bind group per kernel, reused; timestamp queries where available."""

    name = "raw wgpu-py"

    def __init__(self, device_name: str, dispatch_device: Any = None) -> None:
        try:
            import wgpu
        except Exception as exc:
            raise PeerUnavailable(f"wgpu-py is not importable: {exc}") from None
        self.wgpu = wgpu
        adapter = None
        try:
            for a in wgpu.gpu.enumerate_adapters_sync():
                if a.info.get("device", "") == device_name or device_name.startswith(
                        a.info.get("device", "\0")):
                    adapter = a
                    break
            if adapter is None:
                adapter = wgpu.gpu.request_adapter_sync(power_preference="high-performance")
            lim = dict(adapter.limits)
            feats = [f for f in ("timestamp-query", "timestamp-query-inside-encoders",
                                 "shader-float32-atomic") if f in adapter.features]
            self.dev = adapter.request_device_sync(required_features=feats, required_limits={
                "max-storage-buffer-binding-size": lim["max-storage-buffer-binding-size"],
                "max-buffer-size": lim["max-buffer-size"],
            })
        except Exception as exc:
            raise PeerUnavailable(f"no wgpu device: {exc}") from None
        self.adapter_name = adapter.info.get("device", "?")
        self.timestamps = "timestamp-query" in feats
        self.float_atomics = "shader-float32-atomic" in feats
        self.encoder_timestamps = "timestamp-query-inside-encoders" in feats
        self.U = wgpu.BufferUsage
        # The dispatch workloads run on `dispatch_device` (vyre's wgpu device in the bench)
        # so their rows compare two code paths on one device: two wgpu devices of one GPU
        # differ by up to 28% in what a submit costs (docs/perf-notes.md, session 17). The
        # twin is never closed: its device is vyre's.
        self._on_dispatch_device: RawWgpuPeer | None = None
        if dispatch_device is not None:
            self._on_dispatch_device = copy.copy(self)
            self._on_dispatch_device.dev = dispatch_device

    def not_applicable(self, metric: str) -> str:
        if metric in ("sum", "scan", "histogram", "sort"):
            return "wgpu-py has no library kernels (a hand-written one would be vyre's)"
        if metric.startswith("cpp"):
            return "no hand-written WGSL port of the C front end"
        if metric in ("compile.warm_memory", "compile.warm_disk"):
            return "wgpu-py has no pipeline cache here (cold only)"
        return super().not_applicable(metric)

    def _buffer(self, data: np.ndarray) -> Any:
        return self.dev.create_buffer_with_data(
            data=np.ascontiguousarray(data),
            usage=self.U.STORAGE | self.U.COPY_SRC | self.U.COPY_DST)

    def _kernel(self, code: str, buffers: list[Any], uniform: bytes | None = None
                ) -> tuple[Any, Any]:
        mod = self.dev.create_shader_module(code=code)
        pipe = self.dev.create_compute_pipeline(layout="auto",
                                                compute={"module": mod, "entry_point": "main"})
        entries = []
        first = 0
        if uniform is not None:
            ub = self.dev.create_buffer_with_data(data=uniform, usage=self.U.UNIFORM)
            entries.append({"binding": 0, "resource": {"buffer": ub, "offset": 0,
                                                       "size": ub.size}})
            first = 1
        for j, b in enumerate(buffers):
            entries.append({"binding": first + j,
                            "resource": {"buffer": b, "offset": 0, "size": b.size}})
        bg = self.dev.create_bind_group(layout=pipe.get_bind_group_layout(0), entries=entries)
        return pipe, bg

    def _wait(self) -> None:
        poll = getattr(self.dev, "_poll_wait", None)
        if poll is not None:
            poll()
        else:  # reading anything back waits for the queue
            self.dev.queue.read_buffer(self._tiny())

    def _tiny(self) -> Any:
        if not hasattr(self, "_tiny_buf"):
            self._tiny_buf = self._buffer(np.zeros(1, np.uint32))
        return self._tiny_buf

    def _read(self, buf: Any, dtype: Any) -> np.ndarray:
        return np.frombuffer(self.dev.queue.read_buffer(buf), dtype=dtype).copy()

    def _query(self) -> tuple[Any, Any, Any]:
        qs = self.dev.create_query_set(type="timestamp", count=2)
        resolve = self.dev.create_buffer(size=16, usage=self.U.QUERY_RESOLVE | self.U.COPY_SRC)
        staging = self.dev.create_buffer(size=16, usage=self.U.COPY_DST | self.U.MAP_READ)
        return qs, resolve, staging

    def _ts_read(self, enc: Any, q: tuple[Any, Any, Any]) -> float:
        qs, resolve, staging = q
        enc.resolve_query_set(qs, 0, 2, resolve, 0)
        enc.copy_buffer_to_buffer(resolve, 0, staging, 0, 16)
        self.dev.queue.submit([enc.finish()])
        staging.map_sync(self.wgpu.MapMode.READ)
        raw = bytes(staging.read_mapped())
        staging.unmap()
        begin, end = struct.unpack_from("<QQ", raw)
        return (end - begin) / 1e9

    def _pass(self, pipe: Any, bg: Any, grid: tuple[int, int, int], count: int,
              q: tuple[Any, Any, Any] | None = None) -> float | None:
        enc = self.dev.create_command_encoder()
        tw = None
        if q is not None:
            tw = {"query_set": q[0], "beginning_of_pass_write_index": 0,
                  "end_of_pass_write_index": 1}
        cp = enc.begin_compute_pass(timestamp_writes=tw) if tw else enc.begin_compute_pass()
        cp.set_pipeline(pipe)
        cp.set_bind_group(0, bg)
        for _ in range(count):
            cp.dispatch_workgroups(*grid)
        cp.end()
        if q is not None:
            return self._ts_read(enc, q)
        self.dev.queue.submit([enc.finish()])
        return None

    def _timed_pass(self, pipe: Any, bg: Any, grid: tuple[int, int, int],
                    q: tuple[Any, Any, Any] | None) -> float:
        """One pass of one dispatch, in seconds: by the timestamps `q` where the device has
        them, else by the host clock around it and a wait."""
        if q is not None:
            t = self._pass(pipe, bg, grid, 1, q)
            assert t is not None
            return t
        return wall_rounds(lambda: self._pass(pipe, bg, grid, 1), self._wait)

    def _inc_case(self, data: W.Data, mode: str) -> TimedCase:
        rounds = W.dispatch_rounds(mode, data.sizes)
        n = data.sizes.small
        y = self._buffer(data.small_y0)
        owned = [y]  # (destroyed by the case's close)
        pipe, bg = self._kernel(WGSL_INC, [y])
        g = (_grid(n), 1, 1)
        count = [0]
        if mode == "launch":
            k = data.sizes.launches

            def work() -> None:
                for _ in range(k):
                    self._pass(pipe, bg, g, 1)
                count[0] += k
        elif mode == "roundtrip":
            def work() -> None:
                self._pass(pipe, bg, g, 1)
                count[0] += 1
        elif mode == "readback":
            staging = self.dev.create_buffer(size=y.size,
                                             usage=self.U.MAP_READ | self.U.COPY_DST)
            owned.append(staging)
            read_mode = self.wgpu.MapMode.READ

            def work() -> None:
                self._pass(pipe, bg, g, 1)
                enc = self.dev.create_command_encoder()
                enc.copy_buffer_to_buffer(y, 0, staging, 0, y.size)
                self.dev.queue.submit([enc.finish()])
                staging.map_sync(read_mode)
                np.frombuffer(staging.read_mapped(), np.uint32)
                staging.unmap()
                count[0] += 1
        else:
            nb = data.sizes.batch

            def work() -> None:
                self._pass(pipe, bg, g, nb)
                count[0] += nb

        def run() -> float:
            return wall_rounds(work, None if mode == "readback" else self._wait, rounds)

        def close() -> None:
            for buf in owned:
                buf.destroy()

        how = {"launch": "one encoder + pass + submit per dispatch",
               "roundtrip": "one encoder + pass + submit, then wait",
               "readback": "one encoder + pass + submit, a copy into a kept MAP_READ buffer, "
                           "map_sync + read_mapped + unmap",
               "batch": "all dispatches in one compute pass, one submit"}[mode]
        return TimedCase(run, lambda: W.check_inc(self._read(y, np.uint32), data.small_y0,
                                                  count[0]),
                         "wall", close, extra={"how": how})

    def _dispatch_case(self, data: W.Data, mode: str) -> TimedCase:
        twin = self._on_dispatch_device
        case = (twin or self)._inc_case(data, mode)
        case.extra["device"] = "vyre's wgpu device" if twin else "its own wgpu device"
        return case

    def _dispatch_launch(self, data: W.Data) -> TimedCase:
        return self._dispatch_case(data, "launch")

    def _dispatch_roundtrip(self, data: W.Data) -> TimedCase:
        return self._dispatch_case(data, "roundtrip")

    def _dispatch_readback(self, data: W.Data) -> TimedCase:
        return self._dispatch_case(data, "readback")

    def _dispatch_batch100(self, data: W.Data) -> TimedCase:
        return self._dispatch_case(data, "batch")

    def _copy(self, data: W.Data) -> TimedCase:
        x = data.unit_f32
        src, dst = self._buffer(x), self._buffer(np.full_like(x, np.nan))
        probe = self.dev.create_command_encoder()
        has_write = self.encoder_timestamps and hasattr(probe, "write_timestamp")
        q = self._query() if has_write else None

        def run() -> float:
            enc = self.dev.create_command_encoder()
            if q is None:
                t0 = time.perf_counter_ns()
                enc.copy_buffer_to_buffer(src, 0, dst, 0, x.nbytes)
                self.dev.queue.submit([enc.finish()])
                self._wait()
                return (time.perf_counter_ns() - t0) / 1e9
            enc.write_timestamp(q[0], 0)
            enc.copy_buffer_to_buffer(src, 0, dst, 0, x.nbytes)
            enc.write_timestamp(q[0], 1)
            return self._ts_read(enc, q)

        def close() -> None:
            src.destroy()
            dst.destroy()

        return TimedCase(run, lambda: W.check_copy(self._read(dst, np.float32), x),
                         "device" if q is not None else "wall", close,
                         extra={"how": "copy_buffer_to_buffer"})

    def _to_host(self, data: W.Data) -> TimedCase:
        x = data.unit_f32
        src = self._buffer(x)
        staging = self.dev.create_buffer(size=x.nbytes, usage=self.U.MAP_READ | self.U.COPY_DST)
        o = np.full_like(x, np.nan)

        def work() -> None:
            enc = self.dev.create_command_encoder()
            enc.copy_buffer_to_buffer(src, 0, staging, 0, x.nbytes)
            self.dev.queue.submit([enc.finish()])
            staging.map_sync("READ")
            try:
                o[...] = np.frombuffer(staging.read_mapped(copy=False), np.float32)
            finally:
                staging.unmap()

        def close() -> None:
            src.destroy()
            staging.destroy()

        return TimedCase(lambda: wall(work), lambda: W.check_copy(o, x), "wall", close,
                         extra={"how": "copy_buffer_to_buffer into a kept MAP_READ buffer, "
                                       "map_sync, read_mapped(copy=False) into a NumPy array "
                                       "made once, unmap"})

    def _saxpy(self, data: W.Data) -> TimedCase:
        x, y0 = data.saxpy_x, data.saxpy_y0
        xb, yb = self._buffer(x), self._buffer(y0)
        uni = np.array([W.SAXPY_A, 0, 0, 0], np.float32).tobytes()
        pipe, bg = self._kernel(WGSL_SAXPY, [xb, yb], uni)
        g = _grid2(_grid(x.size))
        q = self._query() if self.timestamps else None
        count = [0]

        def run() -> float:
            count[0] += 1
            return self._timed_pass(pipe, bg, g, q)

        def close() -> None:
            xb.destroy()
            yb.destroy()

        return TimedCase(run, lambda: W.check_saxpy(self._read(yb, np.float32), x, y0,
                                                    count[0]),
                         "device" if q is not None else "wall", close,
                         extra={"how": "hand-written WGSL, one element per invocation"})

    def _wgsl_case(self, code: str, src: np.ndarray | list[np.ndarray], n: int,
                   check: Callable[[np.ndarray], str | None], how: str) -> TimedCase:
        """One pass of `code` over buffers (the sources, then an out of n f32), timed like
        saxpy."""
        ibs = [self._buffer(a) for a in (src if isinstance(src, list) else [src])]
        ob = self._buffer(np.zeros(n, np.float32))
        pipe, bg = self._kernel(code, [*ibs, ob])
        g = _grid2(_grid(n))
        q = self._query() if self.timestamps else None

        def close() -> None:
            for b in (*ibs, ob):
                b.destroy()

        return TimedCase(lambda: self._timed_pass(pipe, bg, g, q),
                         lambda: check(self._read(ob, np.float32)),
                         "device" if q is not None else "wall", close, extra={"how": how})

    def _atomic_add(self, data: W.Data, scatter: bool) -> TimedCase:
        """atomicAdd on atomic<f32> of data.atomic_values into bins or a permutation."""
        if not self.float_atomics:
            raise NotApplicable(f"{self.adapter_name} has no shader-float32-atomic")
        n = data.sizes.atomics
        vb = self._buffer(data.atomic_values)
        kb = self._buffer(data.atomic_perm if scatter else data.atomic_bins)
        ob = self._buffer(np.zeros(n if scatter else W.HIST_BINS, np.float32))
        pipe, bg = self._kernel(WGSL_ATOMIC_ADD, [vb, kb, ob])
        g = _grid2(_grid(n))
        q = self._query() if self.timestamps else None
        count = [0]

        def run() -> float:
            count[0] += 1
            return self._timed_pass(pipe, bg, g, q)

        def check() -> str | None:
            got = self._read(ob, np.float32)
            if scatter:
                return W.check_atomic_scatter(got, data, count[0])
            return W.check_atomic_hist(got, data, count[0], exact=False)

        def close() -> None:
            for b in (vb, kb, ob):
                b.destroy()

        return TimedCase(run, check, "device" if q is not None else "wall", close,
                         extra={"how": "hand-written WGSL atomicAdd on atomic<f32> "
                                       "(order-dependent)"})

    def _atomics_hist_relaxed(self, data: W.Data) -> TimedCase:
        return self._atomic_add(data, scatter=False)

    def _atomics_scatter_relaxed(self, data: W.Data) -> TimedCase:
        return self._atomic_add(data, scatter=True)

    def _transcendental_map(self, fn: Fn, data: W.Data) -> TimedCase:
        args, want, unsure = data.fn_map(fn)
        return self._wgsl_case(wgsl_map_source(fn), list(args), args[0].size,
                               lambda y: check_map(fn, args, want, unsure, y, exact=False,
                                                   vulkan=True),
                               f"hand-written WGSL, the builtin {fn.wgsl.format('x', 'y')}")

    def _transcendental_chain(self, fn: Fn, data: W.Data) -> TimedCase:
        x0, want = data.fn_chain(fn)
        return self._wgsl_case(wgsl_chain_source(fn), [x0], x0.size,
                               lambda x: check_chain(fn, x0, want, x, exact=False,
                                                     vulkan=True),
                               f"hand-written WGSL, the builtin {fn.wgsl.format('x', 'y')}")

    def _matmul(self, data: W.Data) -> TimedCase:
        a, b = data.matmul_ab
        n = a.shape[0]
        ab, bb = self._buffer(a), self._buffer(b)
        cb = self._buffer(np.full((n, n), np.nan, np.float32))
        uni = np.array([n, 0, 0, 0], np.uint32).tobytes()
        pipe, bg = self._kernel(WGSL_MATMUL, [ab, bb, cb], uni)
        g = (-(-n // 64), -(-n // 64), 1)
        q = self._query() if self.timestamps else None

        def run() -> float:
            if q is not None:
                t = self._pass(pipe, bg, g, 1, q)
                assert t is not None
                return t
            return wall_rounds(lambda: self._pass(pipe, bg, g, 1), self._wait)

        def close() -> None:
            for buf in (ab, bb, cb):
                buf.destroy()

        return TimedCase(run, lambda: W.check_matmul(self._read(cb, np.float32), data),
                         "device" if q is not None else "wall", close,
                         extra={"how": "hand-written WGSL: 64x64 tiles, 4x4 per invocation in "
                                       "vec4 registers, workgroup-memory K slices of 16"})

    def _compile_cold(self, data: W.Data) -> TimedCase:
        made: list[Any] = []

        def run() -> float:
            code = wgsl_compile_source(time.perf_counter_ns())
            t0 = time.perf_counter_ns()
            mod = self.dev.create_shader_module(code=code)
            pipe = self.dev.create_compute_pipeline(
                layout="auto", compute={"module": mod, "entry_point": "main"})
            made.append(pipe)
            return (time.perf_counter_ns() - t0) / 1e9

        def check() -> str | None:
            if not made:
                return "nothing was compiled"
            made[-1].get_bind_group_layout(0)
            return None

        return TimedCase(run, check, "wall",
                         extra={"how": "create_shader_module + create_compute_pipeline"})

    def close(self) -> None:
        self.dev.destroy()


def peers_for(kind: str, device_name: str, enabled: bool = True, vyre_device: Any = None
              ) -> tuple[list[Peer], dict[str, str]]:
    """The peers of a vyre backend kind that can run here, and {name: reason} for those
    that cannot. `vyre_device`: the wgpu device of vyre's wgpu backend, where the raw
    wgpu peer runs its dispatch workloads (RawWgpuPeer)."""
    if not enabled:
        return [], {}
    makers: list[tuple[str, Callable[[], Peer]]]
    if kind == "cuda":
        makers = [("raw cuda-bindings", RawCudaPeer), ("cupy", CupyPeer), ("torch", TorchPeer),
                  ("triton", TritonPeer)]
    elif kind == "wgpu":
        makers = [("raw wgpu-py", lambda: RawWgpuPeer(device_name, vyre_device))]
    elif kind == "reference":
        makers = [("numpy", NumpyPeer)]
    else:
        makers = []
    ok: list[Peer] = []
    missing: dict[str, str] = {}
    for name, make in makers:
        try:
            ok.append(make())
        except PeerUnavailable as exc:
            missing[name] = str(exc)
        except Exception as exc:  # a broken install is reported, never hidden
            missing[name] = f"{type(exc).__name__}: {exc}"
    return ok, missing
