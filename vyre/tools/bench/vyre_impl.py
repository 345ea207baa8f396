"""The vyre side of `vyre bench`: each workload on one vyre backend, through the public API
and the standard program library only.

Timing: where the backend reports `device_timers`, bandwidth and compute figures use the
device's own time (`Timing.device_ns` of a profiled dispatch or pipeline); otherwise the
host clock around the work and `synchronize()`. Dispatch-overhead and front-end figures are
host-clock by definition. Every case reads its outputs back for the check only after the
timed runs. This module must never reach into a backend's private state and never copy
data through the host inside a timed region of a resident workload.
"""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from vyre import features as F
from vyre import registry
from vyre.binding import BoundDispatch
from vyre.builder import ProgramBuilder, call_fn
from vyre.config import DispatchConfig
from vyre.interface import Backend
from vyre.ir.nodes import Program
from vyre.ir.types import ScalarType
from vyre.pipeline import Step
from vyre.tools.testing import flushed_types

from . import workloads as W
from .functions import FUNCTIONS, Fn, check_chain, check_map
from .runner import NotApplicable, TimedCase, wall, wall_rounds

f32, u32 = ScalarType.F32, ScalarType.U32
WG = 256


def inc_program() -> Program:
    """y[i] += 1 over a u32 buffer: the small dispatch of the overhead workloads."""
    k = ProgramBuilder("bench_inc", workgroup_size=WG)
    y = k.buffer("y", u32, "read_write")
    i = k.global_linear_id()
    with k.if_(i < y.length()):
        y[i] = y[i] + 1
    return k.build()


def map_program(fn: Fn) -> Program:
    """y[i] = f(x[i] [, x1[i]]) (the exact function: vyre.lower.maths)."""
    k = ProgramBuilder(f"bench_{fn.name}_map", workgroup_size=WG)
    xs = [k.buffer(f"x{j}", f32) for j in range(fn.arity)]
    y = k.buffer("y", f32, "write")
    i = k.let(k.global_linear_id())
    with k.if_(i < y.length()):
        y[i] = call_fn(fn.name, *(x[i] for x in xs))
    return k.build()


def chain_program(fn: Fn) -> Program:
    """x[i] = x0[i] <- f(a x + b [, c]), W.CHAIN_STEPS times in a loop (compute-bound;
    functions.py: the same step as the peers' and the check's)."""
    k = ProgramBuilder(f"bench_{fn.name}_chain", workgroup_size=WG)
    x0, x = k.buffer("x0", f32), k.buffer("x", f32, "write")
    i = k.let(k.global_linear_id())
    a, b, c = fn.step
    with k.if_(i < x.length()):
        v = k.let(x0[i])
        with k.for_range(0, W.CHAIN_STEPS):
            u = v if a == 1.0 else -v if a == -1.0 else v * a
            if b:
                u = u + b
            args = [u] if fn.arity == 1 else [k.lit(c, f32), u] if fn.swap \
                else [u, k.lit(c, f32)]
            k.assign(v, call_fn(fn.name, *args))
        x[i] = v
    return k.build()


def compile_probe_program(salt: int) -> Program:
    """A small program whose content hash is new for every `salt` (nothing cached it)."""
    k = ProgramBuilder(f"bench_compile_{salt}", workgroup_size=WG)
    x = k.buffer("x", f32)
    y = k.buffer("y", f32, "read_write")
    a = k.param("a", f32)
    i = k.global_linear_id()
    with k.if_(i < y.length()):
        v = k.let(a * x[i] + y[i])
        y[i] = v * 0.5 + float(W.compile_constant(salt))
    return k.build()


#: int8 products per timed repetition of the tensor-core path (timed by the wall clock:
#: a library CUDA kernel has no profiled dispatch; 10 keep the wait's cost near 1%)
MATMUL_I8_BATCH = 10


class VyreImpl:
    """vyre on one backend instance (created and closed by the caller)."""

    is_vyre = True

    def __init__(self, backend: Backend, spec: str) -> None:
        self.backend = backend
        self.spec = spec
        self.name = f"vyre {backend.id}"
        self.device_timers = backend.supports(F.DEVICE_TIMERS)
        self.has_pipeline = backend.supports(F.PIPELINE)
        self.sources: dict[str, str] = {}  # program name -> generated device source

    # ------------------------------------------------------------ helpers
    def _note_source(self, program: Program) -> None:
        if program.name in self.sources:
            return
        try:
            self.sources[program.name] = self.backend.source(program)
        except Exception as exc:  # inspection only; never fails a figure
            self.sources[program.name] = f"// source unavailable: {exc!r}"

    def _upload(self, data: np.ndarray, label: str) -> Any:
        buf = self.backend.allocate_device_buffer(max(data.nbytes, 4), label=label)
        if data.nbytes:
            self.backend.write(buf, data)
        return buf

    def _free(self, *bufs: Any) -> Callable[[], None]:
        def close() -> None:
            for b in bufs:
                self.backend.free(b)
        return close

    def _profiled(self, cfg: DispatchConfig) -> DispatchConfig:
        return cfg.model_copy(update={"profile": True}) if self.device_timers else cfg

    def _timed_bound(self, bound: BoundDispatch) -> Callable[[], float]:
        """One dispatch, timed by device timers where there are some, else wall + sync."""
        b = self.backend
        if self.device_timers:
            def run() -> float:
                t = b.dispatch_with_device_buffers(bound)
                if t.device_ns is None:
                    raise RuntimeError(f"{b.id} reports device_timers but gave no device_ns")
                return t.device_ns / 1e9
            return run

        def run_wall() -> float:
            t0 = time.perf_counter_ns()
            b.dispatch_with_device_buffers(bound)
            b.synchronize()
            return (time.perf_counter_ns() - t0) / 1e9
        return run_wall

    def _timed_steps(self, steps: list[Step]) -> tuple[Callable[[], float], str]:
        """Run `steps` as one recorded pipeline (device time where available)."""
        b = self.backend
        if not self.has_pipeline:
            bound = [b.bind(s.program, s.inputs, s.outputs, s.config) for s in steps]

            def run_each() -> float:
                t0 = time.perf_counter_ns()
                for x in bound:
                    b.dispatch_with_device_buffers(x)
                b.synchronize()
                return (time.perf_counter_ns() - t0) / 1e9
            return run_each, "wall"
        prof = [Step(s.program, s.inputs, s.outputs, self._profiled(s.config)) for s in steps]
        pipe = b.pipeline(prof)

        def run() -> float:
            t = pipe.run()
            if self.device_timers and t.timing.device_ns is not None:
                return t.timing.device_ns / 1e9
            return t.timing.wall_ns / 1e9
        return run, "device" if self.device_timers else "wall"

    # ------------------------------------------------------------ cases
    def case(self, metric: str, data: W.Data) -> TimedCase:
        if metric.startswith("transcendental."):  # transcendental.<fn>.map / .chain
            _, fn, kind = metric.split(".")
            if kind == "map":
                return self._transcendental_map(FUNCTIONS[fn], data)
            return self._transcendental_chain(FUNCTIONS[fn], data)
        method = getattr(self, "_" + metric.replace(".", "_"))
        out: TimedCase = method(data)
        return out

    def _inc_setup(self, data: W.Data) -> tuple[Any, BoundDispatch, list[int]]:
        prog = inc_program()
        self._note_source(prog)
        y = self._upload(data.small_y0, "bench_y")
        cfg = DispatchConfig.for_elements(data.sizes.small, WG)
        return y, self.backend.bind(prog, [], [y], cfg), [0]

    def _inc_check(self, y: Any, data: W.Data, count: list[int]) -> Callable[[], str | None]:
        return lambda: W.check_inc(self.backend.read(y, dtype=np.uint32), data.small_y0,
                                   count[0])

    def _dispatch_launch(self, data: W.Data) -> TimedCase:
        b = self.backend
        y, bound, count = self._inc_setup(data)
        k = data.sizes.launches

        def run() -> float:
            t0 = time.perf_counter_ns()
            for _ in range(k):
                b.dispatch_with_device_buffers(bound)
            b.synchronize()
            count[0] += k
            return (time.perf_counter_ns() - t0) / 1e9

        return TimedCase(run, self._inc_check(y, data, count), "wall", self._free(y))

    def _dispatch_roundtrip(self, data: W.Data) -> TimedCase:
        b = self.backend
        y, bound, count = self._inc_setup(data)

        rounds = W.dispatch_rounds("roundtrip", data.sizes)

        def work() -> None:
            b.dispatch_with_device_buffers(bound)
            count[0] += 1

        return TimedCase(lambda: wall_rounds(work, b.synchronize, rounds),
                         self._inc_check(y, data, count), "wall", self._free(y))

    def _dispatch_readback(self, data: W.Data) -> TimedCase:
        b = self.backend
        y, bound, count = self._inc_setup(data)
        rounds = W.dispatch_rounds("readback", data.sizes)

        def work() -> None:
            b.dispatch_with_device_buffers(bound)
            b.read(y, dtype=np.uint32)
            count[0] += 1

        return TimedCase(lambda: wall_rounds(work, None, rounds),
                         self._inc_check(y, data, count), "wall", self._free(y),
                         extra={"how": "dispatch_with_device_buffers, then read(y)"})

    def _dispatch_batch100(self, data: W.Data) -> TimedCase:
        b = self.backend
        if not self.has_pipeline:
            raise NotApplicable(f"{b.id} does not report the 'pipeline' feature")
        y, bound, count = self._inc_setup(data)
        nb = data.sizes.batch
        pipe = b.pipeline([bound] * nb)

        rounds = W.dispatch_rounds("batch", data.sizes)

        def work() -> None:
            pipe.run()  # (it waits: one host sync per run)
            count[0] += nb

        return TimedCase(lambda: wall_rounds(work, None, rounds),
                         self._inc_check(y, data, count), "wall", self._free(y),
                         extra={"how": f"one {nb}-step Pipeline, run() per round"})

    def _cpp(self, data: W.Data, host: bool) -> TimedCase:
        from vyre.programs.cpp_frontend import CppFrontend

        src = data.cpp_source
        fe = CppFrontend(self.backend, capacity=len(src))
        last: list[Any] = [None]
        fn = fe.run_host_path if host else fe.run

        def run() -> float:
            t0 = time.perf_counter_ns()
            last[0] = fn(src)
            return (time.perf_counter_ns() - t0) / 1e9

        def check() -> str | None:
            return W.check_cpp(last[0], data)

        case = TimedCase(run, check, "wall", fe.close)
        case.extra["stages"] = len(fe.stages(len(src)))
        case.extra["python_reference_s"] = None
        return case

    def _cpp_resident(self, data: W.Data) -> TimedCase:
        return self._cpp(data, host=False)

    def _cpp_host(self, data: W.Data) -> TimedCase:
        return self._cpp(data, host=True)

    def _copy(self, data: W.Data) -> TimedCase:
        from vyre.programs.elementwise import map_program

        x = data.unit_f32
        n = x.size
        prog = map_program(lambda v: v, [f32], f32, name="bench_copy_f32")
        self._note_source(prog)
        xb = self._upload(x, "copy_src")
        ob = self._upload(np.full(n, np.nan, np.float32), "copy_dst")  # poisoned
        cfg = self._profiled(DispatchConfig.for_elements(n, WG, params={"n": n}))
        run = self._timed_bound(self.backend.bind(prog, {"x0": xb}, {"out": ob}, cfg))
        return TimedCase(run, lambda: W.check_copy(self.backend.read(ob, dtype=np.float32), x),
                         "device" if self.device_timers else "wall", self._free(xb, ob),
                         extra={"how": "a vyre copy kernel (vyre has no buffer-copy call)"})

    def _to_host(self, data: W.Data) -> TimedCase:
        x = data.unit_f32
        xb = self._upload(x, "to_host_src")
        out = np.full_like(x, np.nan)  # made once, as the peers' destinations are
        b = self.backend
        return TimedCase(lambda: wall(lambda: b.read_into(xb, out)),
                         lambda: W.check_copy(out, x), "wall", self._free(xb),
                         extra={"how": "read_into(buffer, out), out a NumPy array made once"})

    def _saxpy(self, data: W.Data) -> TimedCase:
        from vyre.programs.elementwise import saxpy

        x, y0 = data.saxpy_x, data.saxpy_y0
        n = x.size
        prog = saxpy(f32)
        self._note_source(prog)
        xb, yb = self._upload(x, "saxpy_x"), self._upload(y0, "saxpy_y")
        cfg = self._profiled(DispatchConfig.for_elements(n, WG, params={"n": n, "a": W.SAXPY_A}))
        timed = self._timed_bound(self.backend.bind(prog, {"x": xb}, {"y": yb}, cfg))
        count = [0]

        def run() -> float:
            count[0] += 1
            return timed()

        def check() -> str | None:
            return W.check_saxpy(self.backend.read(yb, dtype=np.float32), x, y0, count[0])

        return TimedCase(run, check, "device" if self.device_timers else "wall",
                         self._free(xb, yb))

    def _transcendental_map(self, fn: Fn, data: W.Data) -> TimedCase:
        args, want, unsure = data.fn_map(fn)
        if ScalarType.F32 in flushed_types(self.backend):
            # (a flushing device's result where the correctly rounded one is subnormal is
            # a zero of its sign: docs/IR.md's flush mode; NVIDIA's Vulkan driver flushes)
            tiny = np.abs(want) < np.finfo(np.float32).tiny
            want = np.where(tiny, np.copysign(np.float32(0.0), want), want)
        prog = map_program(fn)
        self._note_source(prog)
        xb = [self._upload(a, f"{fn.name}_x{j}") for j, a in enumerate(args)]
        yb = self._upload(np.zeros_like(args[0]), f"{fn.name}_y")
        cfg = self._profiled(DispatchConfig.for_elements(args[0].size, WG))
        timed = self._timed_bound(self.backend.bind(
            prog, {f"x{j}": b for j, b in enumerate(xb)}, {"y": yb}, cfg))
        return TimedCase(timed, lambda: check_map(
            fn, args, want, unsure, self.backend.read(yb, dtype=np.float32), exact=True),
            "device" if self.device_timers else "wall", self._free(*xb, yb))

    def _transcendental_chain(self, fn: Fn, data: W.Data) -> TimedCase:
        x0, want = data.fn_chain(fn)
        prog = chain_program(fn)
        self._note_source(prog)
        x0b = self._upload(x0, f"{fn.name}_chain_x0")
        xb = self._upload(np.zeros_like(x0), f"{fn.name}_chain_x")
        cfg = self._profiled(DispatchConfig.for_elements(x0.size, WG))
        timed = self._timed_bound(self.backend.bind(prog, {"x0": x0b}, {"x": xb}, cfg))
        return TimedCase(timed, lambda: check_chain(
            fn, x0, want, self.backend.read(xb, dtype=np.float32), exact=True),
            "device" if self.device_timers else "wall", self._free(x0b, xb))

    def _sum(self, data: W.Data) -> TimedCase:
        from vyre.programs.reduce import plan_reduce

        x = data.unit_f32
        xb = self._upload(x, "sum_src")
        ob = self._upload(np.full(1, np.nan, np.float32), "sum_out")
        plan = plan_reduce(self.backend, xb, x.size, "sum", f32, ob)
        for s in plan.steps:
            self._note_source(s.program)
        run, timer = self._timed_steps(plan.steps)
        check = lambda: W.check_sum(float(self.backend.read(ob, dtype=np.float32)[0]), data)  # noqa: E731
        return TimedCase(run, check, timer, self._free(xb, ob, *plan.temporaries),
                         extra={"passes": len(plan.steps)})

    def _scan(self, data: W.Data) -> TimedCase:
        from vyre.programs.scan import plan_scan

        x = data.unit_f32
        xb = self._upload(x, "scan_src")
        ob = self._upload(np.full(x.size, np.nan, np.float32), "scan_dst")
        plan = plan_scan(self.backend, xb, ob, x.size, f32, inclusive=True)
        for s in plan.steps:
            self._note_source(s.program)
        run, timer = self._timed_steps(plan.steps)
        check = lambda: W.check_scan(self.backend.read(ob, dtype=np.float32), data)  # noqa: E731
        return TimedCase(run, check, timer, self._free(xb, ob, *plan.temporaries),
                         extra={"passes": len(plan.steps)})

    def _histogram(self, data: W.Data) -> TimedCase:
        from vyre.programs.histogram import plan_histogram

        x = data.hist_u32
        xb = self._upload(x, "hist_src")
        bins = self._upload(np.zeros(W.HIST_BINS, np.uint32), "hist_bins")
        plan = plan_histogram(self.backend, xb, x.size, bins, W.HIST_BINS, u32)
        for s in plan.steps:
            self._note_source(s.program)
        run, timer = self._timed_steps(plan.steps)
        check = lambda: W.check_histogram(self.backend.read(bins, dtype=np.uint32), data)  # noqa: E731
        return TimedCase(run, check, timer, self._free(xb, bins, *plan.temporaries),
                         extra={"passes": len(plan.steps), "how": "zero the bins, then count"})

    def _atomic_case(self, data: W.Data, scatter: bool, relaxed: bool) -> TimedCase:
        """f32 atomic adds of data.atomic_values into bins (or a permutation's targets)."""
        k = ProgramBuilder(f"bench_atomic_{'relaxed' if relaxed else 'exact'}",
                           workgroup_size=256)
        v, key = k.buffer("vals", f32), k.buffer("keys", u32)
        h = k.buffer("out", f32, "read_write")
        i = k.global_linear_id()
        with k.if_(i < v.length()):
            if relaxed:
                h.atomic_add_relaxed(key[i], v[i])
            else:
                h.atomic_add(key[i], v[i])
        prog = k.build()
        n = data.sizes.atomics
        vb = self._upload(data.atomic_values, "atomic_vals")
        kb = self._upload(data.atomic_perm if scatter else data.atomic_bins, "atomic_keys")
        ob = self._upload(np.zeros(n if scatter else W.HIST_BINS, np.float32), "atomic_out")
        self._note_source(prog)
        run, timer = self._timed_steps([Step(prog, [vb, kb], [ob],
                                             DispatchConfig.for_elements(n, 256))])
        count = [0]

        def counted() -> float:
            count[0] += 1
            return run()

        def check() -> str | None:
            got = self.backend.read(ob, dtype=np.float32)
            if scatter:
                return W.check_atomic_scatter(got, data, count[0])
            return W.check_atomic_hist(got, data, count[0], exact=not relaxed)

        how = ("atomic_add_relaxed: the hardware's f32 atomic" if relaxed else
               "atomic_add: exact (a slot per element claimed by compare-exchange in a "
               "target of 2^16 elements or more, later adds into integer digits), then a "
               "rounding dispatch")
        return TimedCase(counted, check, timer, self._free(vb, kb, ob), extra={"how": how})

    def _atomics_hist_exact(self, data: W.Data) -> TimedCase:
        return self._atomic_case(data, scatter=False, relaxed=False)

    def _atomics_hist_relaxed(self, data: W.Data) -> TimedCase:
        return self._atomic_case(data, scatter=False, relaxed=True)

    def _atomics_scatter_exact(self, data: W.Data) -> TimedCase:
        return self._atomic_case(data, scatter=True, relaxed=False)

    def _atomics_scatter_relaxed(self, data: W.Data) -> TimedCase:
        return self._atomic_case(data, scatter=True, relaxed=True)

    def _sort(self, data: W.Data) -> TimedCase:
        from vyre.config import MAX_GRID_DIM
        from vyre.programs._common import grid
        from vyre.programs.elementwise import convert
        from vyre.programs.radix_sort import plan_radix_sort

        keys0 = data.sort_keys
        n = keys0.size
        src = self._upload(keys0, "sort_src")
        keys = self._upload(np.zeros(n, np.uint32), "sort_keys")
        plan = plan_radix_sort(self.backend, keys, n)
        copy = convert(u32, u32)
        restore = Step(copy, {"x0": src}, {"out": keys},
                       grid(n, copy.workgroup_size[0], MAX_GRID_DIM, n=n))
        steps = [restore, *plan.steps]
        for s in steps:
            self._note_source(s.program)
        run, timer = self._timed_steps(steps)
        check = lambda: W.check_sort(self.backend.read(keys, dtype=np.uint32), data)  # noqa: E731
        return TimedCase(run, check, timer, self._free(src, keys, *plan.temporaries),
                         extra={"passes": len(steps),
                                "how": "copy the unsorted keys in, then an in-place LSD radix "
                                       "sort (the copy is timed too)"})

    def _matmul(self, data: W.Data) -> TimedCase:
        from vyre.programs.matmul import matmul_config, matmul_program, tiles_for

        a, b = data.matmul_ab
        m = a.shape[0]
        t = tiles_for(self.backend)  # the shape the library uses on this backend
        prog = matmul_program(*t)
        self._note_source(prog)
        ab, bb = self._upload(a, "matmul_a"), self._upload(b, "matmul_b")
        cb = self._upload(np.full(m * m, np.nan, np.float32), "matmul_c")
        cfg = self._profiled(matmul_config(m, m, m, t.block, t.per_thread, t.block_k))
        run = self._timed_bound(self.backend.bind(prog, {"a": ab, "b": bb}, {"c": cb}, cfg))
        check = lambda: W.check_matmul(self.backend.read(cb, dtype=np.float32), data)  # noqa: E731
        return TimedCase(run, check, "device" if self.device_timers else "wall",
                         self._free(ab, bb, cb))

    def _matmul_i8(self, data: W.Data) -> TimedCase:
        from vyre.programs import matmul_i8 as mi

        a, b = data.matmul_i8_ab
        m = a.shape[0]
        k4 = mi.packed_words(m)
        ab = self._upload(mi.pack_i8(a), "matmul_i8_a")
        bb = self._upload(mi.pack_i8(np.ascontiguousarray(b.T)), "matmul_i8_bt")
        cb = self._upload(np.full(m * m, -1, np.int32), "matmul_i8_c")
        check = lambda: W.check_matmul_i8(self.backend.read(cb, dtype=np.int32), data)  # noqa: E731
        if mi.tensor_cores(self.backend):  # the library's CUDA C mma.sync kernel
            launches = MATMUL_I8_BATCH
            b_ = self.backend

            def run() -> float:
                t0 = time.perf_counter_ns()
                for _ in range(launches):
                    mi.matmul_i8_device(b_, ab, bb, cb, m, m, m)
                b_.synchronize()
                return (time.perf_counter_ns() - t0) / 1e9 / launches

            return TimedCase(run, check, "wall", self._free(ab, bb, cb),
                             extra={"how": f"tensor cores (mma.sync m16n8k32 s8, no "
                                           f"saturation); wall time of {launches} launches "
                                           "back to back and one wait, per launch"})
        prog = mi.matmul_i8_program(True)
        self._note_source(prog)
        cfg = self._profiled(mi.matmul_i8_config(m, m, k4))
        run_ = self._timed_bound(self.backend.bind(prog, {"a": ab, "bt": bb}, {"c": cb}, cfg))
        return TimedCase(run_, check, "device" if self.device_timers else "wall",
                         self._free(ab, bb, cb), extra={"how": "the dot4_i8 Program"})

    # ------------------------------------------------------------ compile
    def _compile_check(self, backend: Backend, prog: Program) -> str | None:
        """Run a freshly compiled probe program once on small data and check it."""
        n = 1000
        x = np.arange(n, dtype=np.float32)
        y = np.full(n, 2.0, np.float32)
        got = backend.dispatch(prog, {"x": x, "y": y},
                               DispatchConfig.for_elements(n, WG, params={"a": 3.0}))["y"]
        salt = int(prog.name.rsplit("_", 1)[1])
        exp = ((np.float32(3.0) * x + y) * np.float32(0.5)
               + np.float32(W.compile_constant(salt)))
        if not np.array_equal(got, exp.astype(np.float32)):
            return "the compiled probe program computed a wrong result"
        return None

    def _compile_cold(self, data: W.Data) -> TimedCase:
        b = self.backend
        progs: list[Program] = []

        def run() -> float:
            prog = compile_probe_program(time.perf_counter_ns() + len(progs))
            progs.append(prog)
            return wall(lambda: b.compile(prog))

        return TimedCase(run, lambda: self._compile_check(b, progs[-1]), "wall",
                         extra={"note": "VYRE_CACHE_DIR points at an empty temporary directory; "
                                "compile() builds the one-element-per-invocation kernel, "
                                "the raw peers' shape (on CUDA a grid of 2^20 invocations "
                                "or more compiles a coarsened variant at its first "
                                "dispatch, not timed here)"})

    def _compile_warm_memory(self, data: W.Data) -> TimedCase:
        b = self.backend
        prog = compile_probe_program(time.perf_counter_ns())
        b.compile(prog)
        hits0 = b.compile_stats.hits

        def run() -> float:
            return wall(lambda: b.compile(prog))

        def check() -> str | None:
            if b.compile_stats.hits == hits0:
                return "the in-memory compile cache was never hit"
            return self._compile_check(b, prog)

        return TimedCase(run, check, "wall")

    def _compile_warm_disk(self, data: W.Data) -> TimedCase:
        if not self.backend.supports(F.DISK_CACHE):
            raise NotApplicable(f"{self.backend.id} has no on-disk compile cache")
        instances: list[Backend] = []
        last: list[tuple[Backend, Program] | None] = [None]

        def run() -> float:
            prog = compile_probe_program(time.perf_counter_ns())
            with registry.get_backend(self.spec) as first:
                first.compile(prog)
            fresh = registry.get_backend(self.spec)
            instances.append(fresh)
            t = wall(lambda: fresh.compile(prog))
            if fresh.compile_stats.disk_hits != 1:
                raise RuntimeError("the new instance did not load the program from disk")
            last[0] = (fresh, prog)
            return t

        def check() -> str | None:
            if last[0] is None:
                return "nothing ran"
            return self._compile_check(*last[0])

        def close() -> None:
            for inst in instances:
                inst.close()

        return TimedCase(run, check, "wall", close)


class CacheDir:
    """Point VYRE_CACHE_DIR at an empty temporary directory for the compile workloads
    (cold means cold, and the user's cache is left alone); restored on exit."""

    def __enter__(self) -> CacheDir:
        self._tmp = tempfile.TemporaryDirectory(prefix="vyre-bench-cache-")
        self._old = os.environ.get("VYRE_CACHE_DIR")
        os.environ["VYRE_CACHE_DIR"] = self._tmp.name
        return self

    @property
    def path(self) -> Path:
        return Path(self._tmp.name)

    def __exit__(self, *exc: object) -> None:
        if self._old is None:
            os.environ.pop("VYRE_CACHE_DIR", None)
        else:
            os.environ["VYRE_CACHE_DIR"] = self._old
        self._tmp.cleanup()

