"""Checking vyre's exact float functions (vyre.lower.maths) on one backend against the
correctly rounded oracle (vyre.tools.function_oracle, not vyre's code): every one of the
2^32 f32 arguments of a one-argument function, random pairs (after a grid of special
values) of a two-argument one, or a sample of either; for f64 (the functions with an
exact f64 definition, `f64_functions()`), random arguments (2^64 are not exhaustible):
half random bit patterns, half uniform over the range where the result is neither 0
nor inf (`random_f64`). scripts/exact_functions.py checks exhaustively (f64: millions of
random arguments); `vyre certify` checks a sample (or, with --exhaustive, everything).

Bit for bit, any NaN equal to any NaN (docs/IR.md leaves a NaN's bits open). On a backend
in flush mode (docs/IR.md: a subnormal argument reads as a zero of its sign, a tiny result
flushes by the backend's tininess rule) the oracle is given the flushed arguments, and a
result that still differs from it is compared with what the IR defines for that mode, the
reference backend in the same flush mode (`Report.flush_explained` counts those that agree
with it: results next to the smallest normal).

This module must never loosen the comparison, and never import vyre.lower.maths: the
programs it runs reach the definitions only through the public builder.
"""

from __future__ import annotations

import zlib
from collections import deque
from collections.abc import Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import numpy as np

from vyre import DispatchConfig, Program, ScalarType
from vyre.builder import ProgramBuilder, call_fn
from vyre.interface import Backend
from vyre.ir import ops
from vyre.ir.compare import ulp_distance
from vyre.tools.function_oracle import fast_oracle
from vyre.tools.testing import flushed_types, reference_for

# every exact function of the op registry (vyre.ir.ops: one lowered IR definition for f32)
_EXACT = [op for op in ops.CALL_OPS if "f32" in op.exact_types]
ONE_ARG = tuple(op.name for op in _EXACT if op.arity == 1)  # every 2^32 argument
TWO_ARGS = tuple(op.name for op in _EXACT if op.arity == 2)  # random pairs, the special grid
FUNCTIONS = ONE_ARG + TWO_ARGS
SPECIAL = (0.0, -0.0, 1.0, -1.0, 2.0, 0.5, -2.0, 3.0, -3.0, 0.25, 1.5, np.inf, -np.inf, np.nan,
           1e-45, -1e-45, 2.0**-126, 3.4028235e38, -3.4028235e38, 0.99999994, 1.0000001)
F32 = ScalarType.F32
WG = 256
Args = list[np.ndarray]
Mismatch = tuple[Args, np.ndarray, np.ndarray]  # the arguments, results, oracle values


def check_program(fn: str, arity: int, ty: ScalarType = F32) -> Program:
    """out[i] = fn(a0[i], ...) in `ty` (f32 or f64), one invocation per element."""
    k = ProgramBuilder(f"check_{fn}_{ty}", workgroup_size=WG)
    ins = [k.buffer(f"a{j}", ty) for j in range(arity)]
    out = k.buffer("out", ty, "write")
    i = k.let(k.global_linear_id())
    with k.if_(i < out.length()):
        out[i] = call_fn(fn, *(b[i] for b in ins))
    return k.build()


def run(backend: Backend, program: Program, args: Args) -> np.ndarray:
    """The program on `args` (any length: a 2-D grid past 65,535 workgroups)."""
    n = args[0].size
    groups = -(-n // WG)
    cfg = DispatchConfig(grid=(min(groups, 65535), -(-groups // 65535), 1))
    return np.asarray(backend.dispatch(
        program, {f"a{j}": a for j, a in enumerate(args)} | {"out": n}, cfg)["out"])


def arity(fn: str) -> int:
    if fn not in FUNCTIONS:
        raise ValueError(f"unknown function {fn!r}; these are checked: {list(FUNCTIONS)}")
    return 2 if fn in TWO_ARGS else 1


def f64_functions() -> tuple[str, ...]:
    """The checked functions with an exact f64 definition (docs/IR.md "Calls")."""
    from vyre.ir.ops import CALLS

    return tuple(f for f in FUNCTIONS if "f64" in CALLS[f].exact_types)


def _bits(a: np.ndarray) -> np.ndarray:
    return a.view(np.uint64 if a.dtype == np.float64 else np.uint32)


def _same(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    return (_bits(got) == _bits(want)) | (np.isnan(got) & np.isnan(want))


class Report:
    """One function on one backend: arguments checked, results that differ, the largest
    error in ulp, the first few differences."""

    def __init__(self, fn: str, show: int = 20) -> None:
        self.fn, self.show = fn, show
        self.checked = self.bad = self.flush_explained = 0
        self.max_ulp = 0
        self.examples: list[str] = []

    def add(self, checked: int, args: Args, got: np.ndarray, want: np.ndarray) -> None:
        """`checked` arguments, of which those in `args` gave `got` where `want` is right."""
        self.checked += checked
        bad = np.flatnonzero(~_same(got, want))
        self.bad += bad.size
        if not bad.size:
            return
        finite = bad[np.isfinite(got[bad]) & np.isfinite(want[bad])]
        self.max_ulp = max(self.max_ulp, int(ulp_distance(got[finite], want[finite]).max())
                           if finite.size else 1 << 31)  # (a NaN / inf where none belongs)
        for j in bad[: max(0, self.show - len(self.examples))]:
            a = ", ".join(f"{float(x[j])!r} ({_bits(x)[j]:#x})" for x in args)
            self.examples.append(f"{self.fn}({a}) = {float(got[j])!r}, correctly rounded "
                                 f"{float(want[j])!r}")

    def line(self) -> str:
        verdict = ("correctly rounded" if not self.bad
                   else f"{self.bad} differ, max {self.max_ulp} ulp")
        flush = (f" ({self.flush_explained} results next to the smallest normal are the "
                 "IR's flush-mode values)" if self.flush_explained else "")
        return f"{self.fn}: {self.checked} arguments, {verdict}{flush}"

    def as_dict(self) -> dict[str, Any]:
        return {"function": self.fn, "checked": self.checked, "disagreements": self.bad,
                "max_ulp": self.max_ulp, "flush_explained": self.flush_explained,
                "examples": list(self.examples)}


def _flush_arguments(args: Args) -> Args:
    """A subnormal argument as a zero of its sign (flush mode's reading of operands)."""
    dt = args[0].dtype.type
    tiny = np.finfo(dt).tiny
    return [np.where((a != 0) & (np.abs(a) < tiny), np.copysign(dt(0), a), a).astype(dt)
            for a in args]


def _mismatches(fn: str, args: Args, got: np.ndarray, flush: bool) -> Mismatch:
    """The chunk's arguments, results and oracle values where they differ (a worker
    thread: NumPy releases the GIL, so chunks are checked while the next one runs)."""
    want = fast_oracle(fn, args[0].dtype.type,
                       *(_flush_arguments(args) if flush else args))
    bad = np.flatnonzero(~_same(got, want))
    return [a[bad] for a in args], got[bad], want[bad]


def check(backend: Backend, fn: str, chunks: Iterable[Args], report: Report, *,
          reference: Backend | None = None, workers: int = 1,
          progress: Any = None, ty: ScalarType = F32) -> Report:
    """Run `fn` in `ty` (f32 or f64) on every chunk of arguments and add each to
    `report`. A backend in flush mode needs `reference` (a reference backend) for the
    results the oracle cannot give. `progress(n_done, size, report)`, if given, is called
    after each chunk is dispatched."""
    flush = ty in flushed_types(backend)
    mode_ref = None
    if flush:
        if reference is None:
            raise ValueError(f"{backend.id} flushes {ty} subnormals: checking it needs the "
                             "reference backend for the IR's flush-mode results")
        mode_ref = reference_for(backend, reference)
    prog = check_program(fn, arity(fn), ty)
    pending: deque[tuple[int, Future[Mismatch]]] = deque()

    def settle() -> None:
        size, fut = pending.popleft()
        args, got, want = fut.result()
        if mode_ref is not None and got.size:  # the IR's flush-mode values, where they differ
            defined = run(mode_ref, prog, args)
            explained = _same(got, defined) & ~_same(got, want)
            report.flush_explained += int(explained.sum())
            want = np.where(explained, got, want)
        report.add(size, args, got, want)

    with ThreadPoolExecutor(max(1, workers)) as pool:
        for n_done, args in enumerate(chunks):
            got = run(backend, prog, args)
            pending.append((args[0].size, pool.submit(_mismatches, fn, args, got, flush)))
            while len(pending) > 2 * max(1, workers):  # (bounded memory: 2 chunks a worker)
                settle()
            if progress is not None:
                progress(n_done + 1, args[0].size, report)
        while pending:
            settle()
    return report


def every_argument(start: int, stop: int, chunk: int) -> Iterator[Args]:
    """The f32 of bit patterns start..stop-1, `chunk` at a time (2^32 f32 are 16 GiB)."""
    for s in range(start, stop, chunk):
        yield [np.arange(s, min(s + chunk, stop), dtype=np.uint64).astype(np.uint32)
               .view(np.float32)]


def special_grid() -> Args:
    sp = np.array(SPECIAL, np.float32)
    return [np.repeat(sp, sp.size), np.tile(sp, sp.size)]


def random_pairs(pairs: int, chunk: int, seed: int) -> Iterator[Args]:
    """The special grid, then `pairs` random pairs of bit patterns, `chunk` at a time."""
    rng = np.random.default_rng(seed)
    yield special_grid()
    for s in range(0, pairs, chunk):
        n = min(chunk, pairs - s)
        bits = rng.integers(0, 1 << 32, (2, n), dtype=np.uint64).astype(np.uint32)
        yield [bits[0].view(np.float32), bits[1].view(np.float32)]


def sample(fn: str, n: int, seed: int) -> Args:
    """A sample for `fn`: the special values (pairs: their grid), subnormals, then n random
    bit patterns (pairs: n random pairs)."""
    rng = np.random.default_rng([seed, zlib.crc32(fn.encode())])  # (by name: a new function
    # leaves the others' samples as they were)
    bits = rng.integers(0, 1 << 32, (2, n), dtype=np.uint64).astype(np.uint32).view(np.float32)
    sub = rng.integers(1, 0x800000, 64, dtype=np.uint32).view(np.float32)
    if arity(fn) == 1:
        return [np.concatenate([np.array(SPECIAL, np.float32), sub, -sub, bits[0]])]
    grid = special_grid()
    return [np.concatenate([grid[0], sub, bits[0]]), np.concatenate([grid[1], -sub, bits[1]])]


# f64 arguments whose results are neither 0 nor inf (beyond them: the bit patterns)
_F64_RANGES = {"exp": (-746.0, 710.0), "exp2": (-1076.0, 1025.0), "tanh": (-20.0, 20.0)}


def random_f64(fn: str, count: int, chunk: int, seed: int) -> Iterator[Args]:
    """`count` random f64 arguments for `fn` (pairs for a two-argument one), `chunk` at a
    time: the special values (pairs: their grid) first, then half random bit patterns
    and half uniform over the range of finite nonzero results (exp, exp2; tanh: not
    +-1; log, log2:
    positive bit patterns; pow: a positive base's bit pattern beside an exponent that
    keeps |y log x| <= 745)."""
    rng = np.random.default_rng([seed, FUNCTIONS.index(fn), 64])
    sp = np.array(SPECIAL_F64, np.float64)
    yield [sp] if arity(fn) == 1 else [np.repeat(sp, sp.size), np.tile(sp, sp.size)]
    for s in range(0, count, chunk):
        n = min(chunk, count - s)
        bits = rng.integers(0, 1 << 64, (2, n), dtype=np.uint64).view(np.float64)
        half = n // 2
        if fn in _F64_RANGES:
            bits[0, half:] = rng.uniform(*_F64_RANGES[fn], n - half)
        elif fn in ("log", "log2"):
            bits[0, half:] = np.abs(bits[0, half:])
        elif fn == "pow":
            x = np.abs(bits[0, half:])
            with np.errstate(all="ignore"):  # (NaN and inf bases: their own y)
                lx = np.abs(np.log(np.where(x == 0, 1, x)))
            bits[0, half:] = x
            bits[1, half:] = rng.uniform(-745, 745, n - half) / np.maximum(lx, 1e-300)
        yield [bits[0]] if arity(fn) == 1 else [bits[0], bits[1]]


SPECIAL_F64 = (0.0, -0.0, 1.0, -1.0, 2.0, 0.5, -2.0, 3.0, -3.0, 0.25, 1.5, np.inf, -np.inf,
               np.nan, 5e-324, -5e-324, 2.2250738585072014e-308, 2.225073858507201e-308,
               1.7976931348623157e308, -1.7976931348623157e308, 1 - 2.0**-53, 1 + 2.0**-52,
               709.782712893384, -745.1332191019412, -708.3964185322641, 1024.0, -1075.0)


def check_function(backend: Backend, fn: str, *, exhaustive: bool = False,
                   sample_size: int = 4096, seed: int = 2026, chunk: int = 1 << 24,
                   start: int = 0, stop: int = 1 << 32, pairs: int = 1 << 28,
                   reference: Backend | None = None, workers: int = 1, show: int = 20,
                   progress: Any = None, ty: ScalarType = F32) -> Report:
    """`fn` on `backend`: a sample (`sample_size` random arguments after the special ones),
    or with `exhaustive` every f32 bit pattern in [start, stop) (one-argument functions)
    or `pairs` random pairs after the special grid (two-argument ones). f64 (`ty`):
    `random_f64`'s `pairs` arguments (`sample_size` without `exhaustive`)."""
    report = Report(fn, show)
    if ty is ScalarType.F64:
        chunks: Iterable[Args] = random_f64(fn, pairs if exhaustive else sample_size,
                                            chunk, seed)
    elif not exhaustive:
        chunks = [sample(fn, sample_size, seed)]
    elif arity(fn) == 1:
        chunks = every_argument(start, stop, chunk)
    else:
        chunks = random_pairs(pairs, chunk, seed)
    return check(backend, fn, chunks, report, reference=reference, workers=workers,
                 progress=progress, ty=ty)
