"""The fixed `vyre bench` suite: workloads, their sizes, their input data and their checks.

Implementation-neutral: every implementation (vyre on each backend, and each peer library)
gets the same host arrays from `Data` and has its outputs judged by the same `check_*`
function here, so figures on one device are comparable. A check returns None when the
output is right and a sentence saying what is wrong otherwise. This module must never run
anything on a device and never time anything.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cached_property
from typing import Any

import numpy as np

from .functions import FUNCTIONS, Fn, chain, rounded
from .runner import Metric

#: Workload names accepted by --workloads, in the order they run.
WORKLOADS = ("dispatch", "cpp", "copy", "to_host", "saxpy", "sum", "scan", "histogram", "sort", "matmul",
             "matmul_i8", "compile", "atomics", "transcendental")

#: The metrics each workload produces, in table order.
METRICS_OF = {
    "dispatch": ("dispatch.launch", "dispatch.roundtrip", "dispatch.readback",
                 "dispatch.batch100"),
    "cpp": ("cpp.resident", "cpp.host"),
    "copy": ("copy",),
    "to_host": ("to_host",),
    "saxpy": ("saxpy",),
    "sum": ("sum",),
    "scan": ("scan",),
    "histogram": ("histogram",),
    "sort": ("sort",),
    "matmul": ("matmul",),
    "matmul_i8": ("matmul_i8",),
    "compile": ("compile.cold", "compile.warm_memory", "compile.warm_disk"),
    # f32 atomic add: vyre's order-independent (exact) add against the relaxed hardware one
    "atomics": ("atomics.hist_exact", "atomics.hist_relaxed", "atomics.scatter_exact",
                "atomics.scatter_relaxed"),
    # per exact function (functions.py): a memory-bound map and a compute-bound chain
    "transcendental": tuple(f"transcendental.{f}.{kind}" for f in FUNCTIONS
                            for kind in ("map", "chain")),
}
#: Grid of the atomics workload's values: multiples of 2^-ATOMIC_FRACTION_BITS in
#: (-ATOMIC_RANGE, ATOMIC_RANGE), so every bin's sum is exact in float64 (the check's oracle).
ATOMIC_FRACTION_BITS, ATOMIC_RANGE = 8, 8

#: Metrics measured in bytes moved per second, reported against the copy bandwidth.
#: The transcendental workload's functions under --quick unless --functions names others
#: (every function's map and chain on lavapipe take minutes: CI runs --quick).
QUICK_FUNCTIONS = ("exp", "pow")
BANDWIDTH_METRICS = ("saxpy", "sum", "scan", "histogram",
                     *(f"transcendental.{f}.map" for f in FUNCTIONS))
#: Bins of the histogram workload (its u32 inputs are uniform in [0, HIST_BINS)).
HIST_BINS = 256

SAXPY_A = 0.5
#: exp calls per element of the compute-bound chain (x <- exp(-x), which stays in (0, 1]).
CHAIN_STEPS = 64
#: Relative L2 error allowed for float32 sums, scans and products against float64 (float32
#: arithmetic lands far below it; tf32 or bf16 would not).
F32_REL_TOL = 1e-4
#: Rows of a large matmul result checked against float64 (all rows up to this many).
MATMUL_CHECK_ROWS = 256


@dataclass(frozen=True)
class Sizes:
    """Problem sizes and repetition counts for one run of the suite."""

    small: int = 1024  # u32 elements of the dispatch-overhead buffer
    launches: int = 1000  # back-to-back dispatches per launch-timing repetition
    batch: int = 100  # dispatches per batched repetition
    roundtrips: int = 100  # dispatch-and-wait rounds per roundtrip repetition
    batch_runs: int = 10  # runs of the batch (each waited for) per batched repetition
    stream: int = 1 << 26  # f32 elements for copy, saxpy, sum, scan
    matmul: int = 4096  # M = N = K
    matmul_i8: int = 4096  # M = N = K of the int8 product (torch._int_mm's anchor size)
    sort: int = 1 << 24  # u32 keys sorted
    cpp_bytes: int = 1 << 22  # bytes of C source for the front end
    atomics: int = 1 << 22  # f32 values added atomically (histogram and scatter-add)
    chain: int = 1 << 22  # f32 elements of the transcendental chain
    warmup: int = 3
    repeat: int = 15
    dispatch_repeat: int = 15  # repetitions of the dispatch-overhead metrics
    compile_repeat: int = 25  # (each cold compile is a new program: ~10-50 ms)
    warmup_s: float = 0.25  # keep warming up for at least this long (clocks, caches)

    def capped(self, max_stream_bytes: int | None) -> Sizes:
        """These sizes with the streaming buffers shrunk to fit one binding of the device."""
        if not max_stream_bytes:
            return self
        n = self.stream
        while n * 4 > max_stream_bytes and n > 1024:
            n //= 2
        return replace(self, stream=n, chain=min(self.chain, n))


def compile_constant(salt: int) -> int:
    """The constant of the compile workload's program for `salt` (every implementation
    compiles `y[i] = (a * x[i] + y[i]) * 0.5 + c`): 24 bits of it, exact in f32, so a
    cold compile is never a hit of a driver's shader cache (NVIDIA's persists on disk
    across processes and keys on the code)."""
    return salt % (1 << 24)


def dispatch_rounds(mode: str, s: Sizes) -> int:
    """How many times one repetition of a dispatch workload does its work and waits:
    "launch" once (its `launches` dispatches, then one wait), "roundtrip" and "readback"
    `roundtrips` times, "batch" `batch_runs` times. One round of a roundtrip is a few
    microseconds on a GPU, so a repetition of one would be timer noise and the order of the
    implementations."""
    return {"launch": 1, "roundtrip": s.roundtrips, "readback": s.roundtrips,
            "batch": s.batch_runs}[mode]


FULL = Sizes()
QUICK = Sizes(small=1024, launches=20, batch=100, roundtrips=3, batch_runs=2, stream=1 << 16,
              matmul=64, matmul_i8=64, sort=1 << 12, cpp_bytes=1 << 14, atomics=1 << 16,
              chain=1 << 10,
              warmup=1, repeat=3, dispatch_repeat=3, compile_repeat=2, warmup_s=0.0)
#: The reference backend is an interpreter (the oracle, not a fast path): it and its NumPy
#: peer always run these sizes.
REFERENCE = QUICK


def transcendental_metric(name: str, s: Sizes) -> Metric:
    """transcendental.<fn>.map / .chain (functions.py)."""
    _, fn_name, kind = name.split(".")
    fn = FUNCTIONS[fn_name]
    if kind == "map":
        per = 4 * (fn.arity + 1)
        return Metric(
            name, "GB/s", "higher", lambda t: per * s.stream / t / 1e9,
            f"y = {fn.name}(x) over f32, {fn.what} ({per} bytes per element; vyre: the "
            f"correctly rounded {fn.name}, others: their accurate {fn.name})",
            {"elements": s.stream})
    args = ", ".join(fn.chain_args("x", lambda v: f"{v:g}"))
    return Metric(
        name, f"G{fn.name}/s", "higher", lambda t: s.chain * CHAIN_STEPS / t / 1e9,
        f"compute-bound: x <- {fn.name}({args}) {CHAIN_STEPS} times per f32 element "
        f"(one {fn.name} call a step)", {"elements": s.chain, "steps": CHAIN_STEPS})


def metric(name: str, s: Sizes) -> Metric:
    """The Metric for `name` at sizes `s`."""
    if name.startswith("transcendental."):
        return transcendental_metric(name, s)
    n, m = s.stream, s.matmul
    us = 1e6
    table: dict[str, Metric] = {
        "dispatch.launch": Metric(
            name, "us", "lower", lambda t: t * us / s.launches,
            f"host cost per dispatch: {s.launches} small dispatches back to back over "
            "resident buffers, then one wait", {"elements": s.small, "dispatches": s.launches}),
        "dispatch.roundtrip": Metric(
            name, "us", "lower", lambda t: t * us / s.roundtrips,
            f"one small dispatch and a wait for it ({s.roundtrips} in a row per repetition)",
            {"elements": s.small, "rounds": s.roundtrips}),
        "dispatch.readback": Metric(
            name, "us", "lower", lambda t: t * us / s.roundtrips,
            f"one small dispatch, then its {s.small * 4:,}-byte result read back into a host "
            f"array ({s.roundtrips} in a row per repetition)",
            {"elements": s.small, "rounds": s.roundtrips}),
        "dispatch.batch100": Metric(
            name, "us", "lower", lambda t: t * us / (s.batch * s.batch_runs),
            f"per dispatch, {s.batch} small dependent dispatches recorded once and run "
            f"behind one wait (pipeline / graph replay; {s.batch_runs} runs per repetition)",
            {"elements": s.small, "dispatches": s.batch, "rounds": s.batch_runs}),
        "cpp.resident": Metric(
            name, "ms", "lower", lambda t: t * 1e3,
            "C front end, resident path: one upload, every stage on the device, one readback",
            {"bytes": s.cpp_bytes}),
        "cpp.host": Metric(
            name, "ms", "lower", lambda t: t * 1e3,
            "C front end, host path: every stage through dispatch() (a host round trip each)",
            {"bytes": s.cpp_bytes}),
        "copy": Metric(
            name, "GB/s", "higher", lambda t: 8 * n / t / 1e9,
            "device-to-device copy of f32 (bytes read + written)", {"elements": n}),
        "to_host": Metric(
            name, "GB/s", "higher", lambda t: 4 * n / t / 1e9,
            "f32 read from the device into a host array made once (pageable; bytes read)",
            {"elements": n}),
        "saxpy": Metric(
            name, "GB/s", "higher", lambda t: 12 * n / t / 1e9,
            "y = a*x + y over f32 (12 bytes per element)", {"elements": n}),
        "sum": Metric(
            name, "GB/s", "higher", lambda t: 4 * n / t / 1e9,
            "sum of f32 (4 bytes read per element)", {"elements": n}),
        "scan": Metric(
            name, "GB/s", "higher", lambda t: 8 * n / t / 1e9,
            "inclusive prefix sum of f32 (8 bytes per element)", {"elements": n}),
        "histogram": Metric(
            name, "GB/s", "higher", lambda t: 4 * n / t / 1e9,
            f"histogram of u32 into {HIST_BINS} bins (4 bytes read per element)",
            {"elements": n, "bins": HIST_BINS}),
        "sort": Metric(
            name, "Mkeys/s", "higher", lambda t: s.sort / t / 1e6,
            "sort of u32 keys (uniform below 2^31) from an unsorted copy each run",
            {"keys": s.sort}),
        "matmul": Metric(
            name, "GFLOP/s", "higher", lambda t: 2.0 * m * m * m / t / 1e9,
            "C = A @ B, f32, square (2*M*N*K flops)", {"M": m, "N": m, "K": m}),
        "atomics.hist_exact": Metric(
            name, "Gadd/s", "higher", lambda t: s.atomics / t / 1e9,
            f"{s.atomics:,} f32 atomic adds into {HIST_BINS} bins, order-independent (exact, "
            "rounded once; two device dispatches)", {"values": s.atomics, "bins": HIST_BINS}),
        "atomics.hist_relaxed": Metric(
            name, "Gadd/s", "higher", lambda t: s.atomics / t / 1e9,
            f"{s.atomics:,} f32 atomic adds into {HIST_BINS} bins, relaxed (order-dependent "
            "bits)", {"values": s.atomics, "bins": HIST_BINS}),
        "atomics.scatter_exact": Metric(
            name, "Gadd/s", "higher", lambda t: s.atomics / t / 1e9,
            f"scatter-add of {s.atomics:,} f32 into as many elements (a permutation), "
            "order-independent", {"values": s.atomics}),
        "atomics.scatter_relaxed": Metric(
            name, "Gadd/s", "higher", lambda t: s.atomics / t / 1e9,
            f"scatter-add of {s.atomics:,} f32 into as many elements (a permutation), relaxed",
            {"values": s.atomics}),
        "matmul_i8": Metric(
            name, "TOPS", "higher", lambda t: 2.0 * s.matmul_i8**3 / t / 1e12,
            "C = A @ B, int8 x int8 -> int32 (wrapping), square (2*M*N*K ops)",
            {"M": s.matmul_i8, "N": s.matmul_i8, "K": s.matmul_i8}),
        "compile.cold": Metric(
            name, "ms", "lower", lambda t: t * 1e3,
            "compile a program never seen before (no memory or disk cache)", {}),
        "compile.warm_memory": Metric(
            name, "ms", "lower", lambda t: t * 1e3,
            "compile again on the same instance (in-memory cache)", {}),
        "compile.warm_disk": Metric(
            name, "ms", "lower", lambda t: t * 1e3,
            "compile on a new instance after another compiled it (on-disk cache)", {}),
    }
    return table[name]


# ----------------------------------------------------------------------------- data


class Data:
    """The host inputs of every workload for one device group, made once, shared by all
    implementations on that device; expected results are computed on first use."""

    def __init__(self, sizes: Sizes, seed: int = 20240611) -> None:
        self.sizes = sizes
        self.seed = seed
        self._fn_cache: tuple[object, object] = (None, None)
        self._chains: dict[str, tuple[np.ndarray, np.ndarray]] = {}

    def _rng(self, salt: int) -> np.random.Generator:
        return np.random.default_rng(self.seed + salt)

    @cached_property
    def small_y0(self) -> np.ndarray:
        """Start values of the dispatch-overhead buffer (each dispatch adds 1)."""
        return self._rng(1).integers(0, 1 << 20, self.sizes.small).astype(np.uint32)

    @cached_property
    def unit_f32(self) -> np.ndarray:
        """Uniform [0, 1) f32: copy, sum and scan input."""
        return self._rng(2).random(self.sizes.stream, dtype=np.float32)

    @cached_property
    def saxpy_x(self) -> np.ndarray:
        """Integer-valued f32 so that y0 + k*a*x is exact after any number of runs."""
        return self._rng(3).integers(1, 100, self.sizes.stream).astype(np.float32)

    @cached_property
    def saxpy_y0(self) -> np.ndarray:
        return self._rng(4).integers(1, 100, self.sizes.stream).astype(np.float32)

    @cached_property
    def hist_u32(self) -> np.ndarray:
        """Uniform u32 in [0, HIST_BINS): the histogram input."""
        return self._rng(7).integers(0, HIST_BINS, self.sizes.stream).astype(np.uint32)

    @cached_property
    def hist_expected(self) -> np.ndarray:
        return np.bincount(self.hist_u32, minlength=HIST_BINS).astype(np.uint32)

    @cached_property
    def atomic_values(self) -> np.ndarray:
        """f32 on the grid of ATOMIC_FRACTION_BITS in (-ATOMIC_RANGE, ATOMIC_RANGE)."""
        lim = ATOMIC_RANGE << ATOMIC_FRACTION_BITS
        ints = self._rng(9).integers(-lim + 1, lim, self.sizes.atomics)
        return (ints * 2.0**-ATOMIC_FRACTION_BITS).astype(np.float32)

    @cached_property
    def atomic_bins(self) -> np.ndarray:
        """Uniform u32 in [0, HIST_BINS): the bin of each value."""
        return self._rng(10).integers(0, HIST_BINS, self.sizes.atomics).astype(np.uint32)

    @cached_property
    def atomic_bin_sums(self) -> np.ndarray:
        """Each bin's exact sum (float64 holds it exactly on this grid)."""
        return np.bincount(self.atomic_bins, self.atomic_values.astype(np.float64), HIST_BINS)

    @cached_property
    def atomic_perm(self) -> np.ndarray:
        """The scatter-add's target of each value: a permutation."""
        return self._rng(11).permutation(self.sizes.atomics).astype(np.uint32)

    @cached_property
    def sort_keys(self) -> np.ndarray:
        """Uniform u32 below 2^31 (so peers without unsigned sorts may sort them as i32)."""
        return self._rng(8).integers(0, 1 << 31, self.sizes.sort).astype(np.uint32)

    @cached_property
    def sort_expected(self) -> np.ndarray:
        return np.sort(self.sort_keys)

    @cached_property
    def matmul_ab(self) -> tuple[np.ndarray, np.ndarray]:
        m = self.sizes.matmul
        rng = self._rng(5)
        a = rng.uniform(-1, 1, (m, m)).astype(np.float32)
        b = rng.uniform(-1, 1, (m, m)).astype(np.float32)
        return a, b

    @cached_property
    def matmul_i8_ab(self) -> tuple[np.ndarray, np.ndarray]:
        """Uniform int8 matrices (M x K, K x N) for the int8 product."""
        m = self.sizes.matmul_i8
        rng = self._rng(9)
        return (rng.integers(-128, 128, (m, m)).astype(np.int8),
                rng.integers(-128, 128, (m, m)).astype(np.int8))

    @cached_property
    def matmul_i8_rows(self) -> np.ndarray:
        """Rows of the int8 product checked exactly (all rows up to MATMUL_CHECK_ROWS)."""
        m = self.sizes.matmul_i8
        if m <= MATMUL_CHECK_ROWS:
            return np.arange(m)
        return np.sort(self._rng(10).choice(m, MATMUL_CHECK_ROWS, replace=False))

    @cached_property
    def matmul_i8_expected_rows(self) -> np.ndarray:
        """Those rows exactly: float64 products and sums are exact here (|sum| <= K * 2^14
        < 2^53), then wrapped to int32 like the product."""
        a, b = self.matmul_i8_ab
        exact = a[self.matmul_i8_rows].astype(np.float64) @ b.astype(np.float64)
        return (exact.astype(np.int64) & 0xFFFFFFFF).astype(np.uint32).view(np.int32)

    @cached_property
    def cpp_source(self) -> bytes:
        from vyre.programs.cpp_corpus import generate_c_source

        return generate_c_source(self.sizes.cpp_bytes, seed=7)

    @cached_property
    def cpp_expected(self) -> Any:
        from vyre.programs.cpp_python import cpp_frontend_python

        return cpp_frontend_python(self.cpp_source)

    def fn_map(self, fn: Fn) -> tuple[tuple[np.ndarray, ...], np.ndarray, np.ndarray]:
        """The map's f32 arguments for `fn`, its f64-rounded values and where those cannot
        be trusted (functions.rounded). One function's at a time (they are large)."""
        key = ("map", fn.name)
        if self._fn_cache[0] != key:
            self._fn_cache = (key, None)
            salt = 9 + 2 * list(FUNCTIONS).index(fn.name)
            args = fn.inputs(self._rng(salt), self.sizes.stream)
            self._fn_cache = (key, (args, *rounded(fn, args)))
        out: Any = self._fn_cache[1]
        return out

    def fn_chain(self, fn: Fn) -> tuple[np.ndarray, np.ndarray]:
        """The chain's start values for `fn` and its f64-rounded result (functions.chain)."""
        got = self._chains.get(fn.name)
        if got is None:
            lo, hi = fn.start
            salt = 10 + 2 * list(FUNCTIONS).index(fn.name)
            x0 = self._rng(salt).uniform(lo, hi, self.sizes.chain).astype(np.float32)
            got = self._chains[fn.name] = (x0, chain(fn, x0, CHAIN_STEPS))
        return got

    @cached_property
    def sum_f64(self) -> float:
        return float(self.unit_f32.astype(np.float64).sum())

    @cached_property
    def scan_f64(self) -> np.ndarray:
        return np.cumsum(self.unit_f32.astype(np.float64))

    @cached_property
    def matmul_rows(self) -> np.ndarray:
        m = self.sizes.matmul
        if m <= MATMUL_CHECK_ROWS:
            return np.arange(m)
        return np.sort(self._rng(6).choice(m, MATMUL_CHECK_ROWS, replace=False))

    @cached_property
    def matmul_f64_rows(self) -> np.ndarray:
        a, b = self.matmul_ab
        return a[self.matmul_rows].astype(np.float64) @ b.astype(np.float64)


# ----------------------------------------------------------------------------- checks


def _rel_l2(got: np.ndarray, ref: np.ndarray) -> float:
    g = np.asarray(got, dtype=np.float64).reshape(-1)
    r = np.asarray(ref, dtype=np.float64).reshape(-1)
    denom = float(np.linalg.norm(r)) or 1.0
    return float(np.linalg.norm(g - r)) / denom


def _first_diff(got: np.ndarray, exp: np.ndarray) -> str:
    bad = np.flatnonzero(got.reshape(-1) != exp.reshape(-1))
    i = int(bad[0])
    return (f"{bad.size} of {exp.size} elements wrong; [{i}] is {got.reshape(-1)[i]!r}, "
            f"expected {exp.reshape(-1)[i]!r}")


def check_inc(got: np.ndarray, y0: np.ndarray, count: int) -> str | None:
    """After `count` dispatches that each add 1 to every element."""
    exp = (y0.astype(np.uint64) + count).astype(np.uint32)
    got = np.asarray(got).reshape(-1)
    if got.shape != exp.shape:
        return f"{got.size} elements, expected {exp.size}"
    if not np.array_equal(got, exp):
        return f"after {count} dispatches: " + _first_diff(got, exp)
    return None


def check_atomic_hist(got: np.ndarray, data: Data, count: int, exact: bool) -> str | None:
    """Bins after `count` dispatches from zero. Exact: each dispatch's result rounded once
    from the exact sum, bit for bit. Relaxed: within F32_REL_TOL of it (its bits depend on
    the order the adds ran in)."""
    exp = np.zeros(HIST_BINS, np.float32)
    for _ in range(count):
        exp = (exp.astype(np.float64) + data.atomic_bin_sums).astype(np.float32)
    got = np.asarray(got, np.float32).reshape(-1)
    if exact:
        if not np.array_equal(got.view(np.uint32), exp.view(np.uint32)):
            return f"after {count} dispatches (exact sums): " + _first_diff(got, exp)
        return None
    err = _rel_l2(got.astype(np.float64), exp.astype(np.float64))
    return None if err <= F32_REL_TOL else f"relative L2 error {err:.3g} > {F32_REL_TOL}"


def check_atomic_scatter(got: np.ndarray, data: Data, count: int) -> str | None:
    """Elements after `count` scatter-adds from zero: one add per element per dispatch, so
    exact and relaxed both give f32(previous + value) each time, bit for bit."""
    exp = np.zeros(data.sizes.atomics, np.float32)
    v = np.zeros(data.sizes.atomics, np.float32)
    v[data.atomic_perm] = data.atomic_values
    for _ in range(count):
        exp = exp + v
    got = np.asarray(got, np.float32).reshape(-1)
    if not np.array_equal(got.view(np.uint32), exp.view(np.uint32)):
        return f"after {count} scatter-adds: " + _first_diff(got, exp)
    return None


def check_copy(got: np.ndarray, x: np.ndarray) -> str | None:
    got = np.asarray(got, dtype=np.float32).reshape(-1)
    if got.shape != x.shape:
        return f"{got.size} elements, expected {x.size}"
    if not np.array_equal(got.view(np.uint32), x.view(np.uint32)):
        return "copy differs: " + _first_diff(got, x)
    return None


def saxpy_expected(x: np.ndarray, y0: np.ndarray, count: int) -> np.ndarray:
    return (y0.astype(np.float64) + count * SAXPY_A * x.astype(np.float64)).astype(np.float32)


def check_saxpy(got: np.ndarray, x: np.ndarray, y0: np.ndarray, count: int) -> str | None:
    """y after `count` in-place saxpy runs; exact because the data is integer-valued."""
    got = np.asarray(got, dtype=np.float32).reshape(-1)
    exp = saxpy_expected(x, y0, count)
    if got.shape != exp.shape:
        return f"{got.size} elements, expected {exp.size}"
    if not np.array_equal(got, exp):
        return f"after {count} runs: " + _first_diff(got, exp)
    return None


def check_sum(got: float, data: Data) -> str | None:
    ref = data.sum_f64
    got = float(got)
    if not np.isfinite(got):
        return f"sum is {got}, expected {ref:.9g}"
    rel = abs(got - ref) / abs(ref)
    if rel > F32_REL_TOL:
        return f"sum {got:.9g} vs float64 {ref:.9g}: relative error {rel:.2e} > {F32_REL_TOL}"
    return None


def check_scan(got: np.ndarray, data: Data) -> str | None:
    ref = data.scan_f64
    got = np.asarray(got).reshape(-1)
    if got.shape != ref.shape:
        return f"{got.size} elements, expected {ref.size}"
    if not np.isfinite(got).all():
        return "scan output has NaN or inf (unwritten elements?)"
    rel = _rel_l2(got, ref)
    if rel > F32_REL_TOL:
        return f"relative L2 error {rel:.2e} against float64 > {F32_REL_TOL}"
    return None


def check_histogram(got: np.ndarray, data: Data) -> str | None:
    """Exact bin counts."""
    exp = data.hist_expected
    got = np.asarray(got).reshape(-1)
    if got.size != exp.size:
        return f"{got.size} bins, expected {exp.size}"
    if not np.array_equal(got.astype(np.uint64), exp.astype(np.uint64)):
        return "bin counts differ: " + _first_diff(got.astype(np.uint32), exp)
    return None


def check_sort(got: np.ndarray, data: Data) -> str | None:
    """Exactly np.sort of the keys."""
    exp = data.sort_expected
    got = np.asarray(got).reshape(-1)
    if got.size != exp.size:
        return f"{got.size} keys, expected {exp.size}"
    if not np.array_equal(got.astype(np.uint32), exp):
        return "sorted keys differ: " + _first_diff(got.astype(np.uint32), exp)
    return None


def check_matmul(got: np.ndarray, data: Data) -> str | None:
    m = data.sizes.matmul
    got = np.asarray(got, dtype=np.float32).reshape(-1)
    if got.size != m * m:
        return f"{got.size} elements, expected {m * m}"
    got = got.reshape(m, m)
    if not np.isfinite(got).all():
        return "result has NaN or inf (unwritten elements?)"
    rel = _rel_l2(got[data.matmul_rows], data.matmul_f64_rows)
    rows = "all rows" if m <= MATMUL_CHECK_ROWS else f"{MATMUL_CHECK_ROWS} sampled rows"
    if rel > F32_REL_TOL:
        return f"relative L2 error {rel:.2e} against float64 ({rows}) > {F32_REL_TOL}"
    return None


def check_matmul_i8(got: np.ndarray, data: Data) -> str | None:
    """Exactly the integers (sampled rows of a large product)."""
    m = data.sizes.matmul_i8
    got = np.asarray(got).reshape(-1)
    if got.size != m * m or got.dtype != np.int32:
        return f"{got.size} {got.dtype} elements, expected {m * m} int32"
    rows = got.reshape(m, m)[data.matmul_i8_rows]
    exp = data.matmul_i8_expected_rows
    if not np.array_equal(rows, exp):
        return "int8 product differs: " + _first_diff(rows, exp)
    return None


def check_cpp(got: Any, data: Data) -> str | None:
    exp = data.cpp_expected
    if got != exp:
        for field_name in ("text", "classes", "boundaries"):
            g, e = getattr(got, field_name, None), getattr(exp, field_name, None)
            if g != e:
                return f"front-end output {field_name!r} differs from plain Python"
        return "front-end output differs from plain Python"
    return None
