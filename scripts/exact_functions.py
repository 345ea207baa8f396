"""Check vyre's exact float functions (vyre.lower.maths) against a correctly rounded oracle:
every one of the 2^32 f32 arguments of each one-argument function, and random pairs
(plus a grid of special values) for the two-argument ones, on one backend.

    python scripts/exact_functions.py --backend cuda                 # all, every argument
    python scripts/exact_functions.py --backend wgpu --functions exp,log --chunk-bits 22
    python scripts/exact_functions.py --backend cuda --functions pow --pairs 268435456
    python scripts/exact_functions.py --backend reference --start 0x3f800000 --stop 0x3f810000

The oracle (vyre/tools/function_oracle.py) is not vyre's code: NumPy's f64 function rounded once
where that decides the rounding, Python's decimal at 70 digits where it cannot. It prints,
per function, the mismatches (argument, result, correctly rounded value) and the maximum
error in ulp, and exits 1 if any result differs. To add a function: its name in
ONE_ARG or TWO_ARGS below and its oracle in vyre/tools/function_oracle.py (FUNCTIONS, _NUMPY).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections import deque
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor

import numpy as np

import vyre
from vyre import ScalarType
from vyre.builder import ProgramBuilder, call_fn
from vyre.ir.compare import ulp_distance
from vyre.tools.function_oracle import fast_oracle

ONE_ARG = ["exp", "exp2", "log", "log2", "tanh", "sin", "cos", "tan", "asin"]  # every 2^32
TWO_ARGS = ["pow", "hypot", "atan2"]  # --pairs random pairs and the special grid
SPECIAL = [0.0, -0.0, 1.0, -1.0, 2.0, 0.5, -2.0, 3.0, -3.0, 0.25, 1.5, np.inf, -np.inf, np.nan,
           1e-45, -1e-45, 2.0**-126, 3.4028235e38, -3.4028235e38, 0.99999994, 1.0000001]
F32 = ScalarType.F32


def _program(fn: str, arity: int) -> vyre.Program:
    k = ProgramBuilder(f"check_{fn}", workgroup_size=256)
    ins = [k.buffer(f"a{j}", F32) for j in range(arity)]
    out = k.buffer("out", F32, "write")
    i = k.let(k.global_linear_id())
    with k.if_(i < out.length()):
        out[i] = call_fn(fn, *(b[i] for b in ins))
    return k.build()


class Report:
    """Mismatches and the largest error of one function."""

    def __init__(self, fn: str, show: int) -> None:
        self.fn, self.show = fn, show
        self.checked = self.bad = 0
        self.max_ulp = 0
        self.examples: list[str] = []

    def add(self, args: list[np.ndarray], got: np.ndarray, want: np.ndarray) -> None:
        same = (got.view(np.uint32) == want.view(np.uint32)) | (np.isnan(got) & np.isnan(want))
        bad = np.flatnonzero(~same)
        self.checked += got.size
        self.bad += bad.size
        if bad.size:
            finite = bad[np.isfinite(got[bad]) & np.isfinite(want[bad])]
            if finite.size:
                self.max_ulp = max(self.max_ulp, int(ulp_distance(got[finite], want[finite]).max()))
            else:
                self.max_ulp = max(self.max_ulp, 1 << 31)  # a NaN / inf where none belongs
            for j in bad[: max(0, self.show - len(self.examples))]:
                a = ", ".join(f"{float(x[j])!r} ({x.view(np.uint32)[j]:#010x})" for x in args)
                self.examples.append(f"{self.fn}({a}) = {float(got[j])!r}, correctly rounded "
                                     f"{float(want[j])!r}")

    def line(self) -> str:
        verdict = "correctly rounded" if not self.bad else f"{self.bad} differ, max {self.max_ulp} ulp"
        return f"{self.fn}: {self.checked} arguments, {verdict}"


def _compare(fn: str, args: list[np.ndarray], got: np.ndarray
             ) -> tuple[list[np.ndarray], np.ndarray, np.ndarray]:
    """The chunk's arguments, results and oracle values where they differ (a worker
    thread: NumPy releases the GIL, so chunks are checked while the next one runs)."""
    want = fast_oracle(fn, np.float32, *args)
    same = (got.view(np.uint32) == want.view(np.uint32)) | (np.isnan(got) & np.isnan(want))
    bad = np.flatnonzero(~same)
    return [a[bad] for a in args], got[bad], want[bad]


def _check(backend: vyre.BaseBackend, fn: str, arity: int,
           chunks: Iterator[list[np.ndarray]], count: int, report: Report,
           verbose: bool, workers: int) -> None:
    prog = _program(fn, arity)
    pending: deque[Future[tuple[list[np.ndarray], np.ndarray, np.ndarray]]] = deque()
    sizes: deque[int] = deque()

    def settle() -> None:
        args, got, want = pending.popleft().result()
        report.checked += sizes.popleft() - got.size  # (add counts the differing ones)
        report.add(args, got, want)

    with ThreadPoolExecutor(workers) as pool:
        for n_done, args in enumerate(chunks):
            n = args[0].size
            groups = -(-n // 256)
            cfg = vyre.DispatchConfig(grid=(min(groups, 65535), -(-groups // 65535), 1))
            t = time.perf_counter()
            got = np.asarray(backend.dispatch(
                prog, {f"a{j}": a for j, a in enumerate(args)} | {"out": n}, cfg)["out"])
            t_run = time.perf_counter() - t
            pending.append(pool.submit(_compare, fn, args, got))
            sizes.append(n)
            while len(pending) > 2 * workers:  # (bounded memory: 2 chunks per worker)
                settle()
            if verbose:
                print(f"  {fn} chunk {n_done + 1}/{count}: {n} in {t_run:.2f} s, "
                      f"{report.bad} differ so far", flush=True)
        while pending:
            settle()


def _one_arg_chunks(start: int, stop: int, chunk: int) -> Iterator[list[np.ndarray]]:
    for s in range(start, stop, chunk):  # (made one at a time: 2^32 f32 are 16 GiB)
        yield [np.arange(s, min(s + chunk, stop), dtype=np.uint64).astype(np.uint32)
               .view(np.float32)]


def _pair_chunks(pairs: int, chunk: int, seed: int) -> Iterator[list[np.ndarray]]:
    rng = np.random.default_rng(seed)
    sp = np.array(SPECIAL, np.float32)
    yield [np.repeat(sp, sp.size), np.tile(sp, sp.size)]
    for s in range(0, pairs, chunk):
        n = min(chunk, pairs - s)
        bits = rng.integers(0, 1 << 32, (2, n), dtype=np.uint64).astype(np.uint32)
        yield [bits[0].view(np.float32), bits[1].view(np.float32)]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--backend", default="cuda")
    p.add_argument("--functions", default=",".join(ONE_ARG + TWO_ARGS))
    p.add_argument("--chunk-bits", type=int, default=24, help="arguments per dispatch: 2^k")
    p.add_argument("--start", type=lambda s: int(s, 0), default=0, help="first f32 bits")
    p.add_argument("--stop", type=lambda s: int(s, 0), default=1 << 32, help="end of the bits")
    p.add_argument("--pairs", type=int, default=1 << 28, help="random pairs per 2-arg function")
    p.add_argument("--seed", type=int, default=2026)
    p.add_argument("--show", type=int, default=20, help="mismatches printed per function")
    p.add_argument("--workers", type=int, default=max(1, (os.cpu_count() or 2) - 1),
                   help="threads checking results against the oracle")
    p.add_argument("-v", "--verbose", action="store_true")
    a = p.parse_args(argv)
    chunk = 1 << a.chunk_bits
    fns = [f for f in a.functions.split(",") if f]
    unknown = sorted(set(fns) - set(ONE_ARG) - set(TWO_ARGS))
    if unknown:
        p.error(f"unknown functions {unknown}; these are checked: {ONE_ARG + TWO_ARGS}")
    failed = False
    with vyre.get_backend(a.backend) as backend:
        print(f"backend {backend.id}; flush mode: "
              f"{backend.capabilities().details.get('flushes_subnormals', [])}", flush=True)
        for fn in fns:
            report = Report(fn, a.show)
            t = time.perf_counter()
            if fn in ONE_ARG:
                count = -(-(a.stop - a.start) // chunk)
                _check(backend, fn, 1, _one_arg_chunks(a.start, a.stop, chunk), count,
                       report, a.verbose, a.workers)
            else:
                _check(backend, fn, 2, _pair_chunks(a.pairs, chunk, a.seed),
                       1 - (-a.pairs // chunk), report, a.verbose, a.workers)
            print(f"{report.line()} ({time.perf_counter() - t:.0f} s)", flush=True)
            for line in report.examples:
                print("   ", line)
            failed |= report.bad > 0
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
