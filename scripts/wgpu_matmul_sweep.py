#!/usr/bin/env python3
"""Time vyre's library matmul on wgpu per WGSL spelling and tile shape, against the raw WGSL peer.

  python3 scripts/wgpu_matmul_sweep.py [--n 4096] [--reps 5] [--tiles 128x8x8,64x4x16,...]

Variants (each on its own backend instance, so each compiles its own WGSL):
- "vec4"       vyre's default spelling (workgroup tiles declared vec4, four adjacent reads as
               one vec4 read: vectors.py; barriers without storageBarrier where no buffer
               access can conflict: barriers.py), for every --tiles shape;
- "old"        vyre's spelling before vectors.py and barriers.py: every workgroup access
               scalar, every barrier with storageBarrier() (VYRE_WGPU_SHARED=scalar,
               VYRE_WGPU_BARRIERS=storage), --old-tiles;
- "st-barrier" vec4, but every barrier also storageBarrier() (spelling before barriers.py),
               --barrier-tiles;
- "all-fence"  vec4 with every f32 operand fenced (VYRE_WGPU_FENCES=all), --all-tiles;
- "unsplit"    vec4 without matmul's split edge loads (its `split` knob), --unsplit-tiles;
- "bare-fma"   MEASUREMENT ONLY, NOT EXACT IN GENERAL: the matmul's fma chain with no fence
               at all (expressions._fma_minimal patched in this process), --bare-tiles: an upper
               bound on what fences cost. Its bits are reported, never counted as a failure.

Exactness: the fma order over k is fixed, so every exact variant must return the same bits.
The first exact variant's C is checked bit for bit against matmul_reference on sampled rows
(and against float64 like the bench); every other variant is compared with it in full. Each
exact variant also multiplies an edge shape (--edge, not multiples of any tile) and is
checked bit for bit against matmul_reference on sampled rows. The raw peer is the bench's
hand-written vec4 WGSL kernel (vyre/tools/bench/peers.py, WGSL_MATMUL). With --cuda (the
default, where CUDA is available) vyre CUDA's default matmul runs last on the same data:
its TFLOP/s and whether its bits are the wgpu ones.

Prints one line per variant: TFLOP/s (median of --reps after one warm-up), the ratio to the
raw peer, whether C matched. Times are device timestamps where the adapter has them, else
wall clock with a sync (lavapipe: correctness only). Budget: about 60 s on the H100 at
n=4096. This script must never change vyre's defaults; it only measures.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import os
import statistics
import sys
import time
from collections.abc import Callable, Iterator

import numpy as np

import vyre
from vyre import features as F
from vyre.backend import BaseBackend
from vyre.backends.wgpu import expressions
from vyre.programs._common import upload
from vyre.programs.matmul import (
    Side,
    matmul_config,
    matmul_program,
    matmul_reference,
    tiles_for,
)
from vyre.tools.bench import workloads as W
from vyre.tools.bench.peers import RawWgpuPeer

# (block, per_thread, block_k): the library default first, then shapes a Vulkan compiler may
# like better (fewer registers per invocation, a longer K step per barrier)
DEFAULT_TILES = "128x8x8,64x4x8,64x4x16,128x8x16,64.128x4.8x8"
Tile = tuple[Side, Side, int]


@dataclasses.dataclass(frozen=True)
class Variant:
    label: str
    tiles: str
    env: dict[str, str] = dataclasses.field(default_factory=dict)
    split: bool = True
    exact: bool = True  # False: a measurement whose bits may differ (bare-fma)


def _side(text: str) -> Side:
    """"8" (square) or "8.4" (rows.columns)."""
    if "." in text:
        r, c = text.split(".")
        return (int(r), int(c))
    return int(text)


def _tiles(spec: str) -> list[Tile]:
    """"128x8x8,64.128x4.8x8": block x per_thread x block_k, a side as rows.columns."""
    out = []
    for t in spec.split(","):
        if t:
            block, per_thread, block_k = t.split("x")
            out.append((_side(block), _side(per_thread), int(block_k)))
    return out


def _tile_name(tile: Tile) -> str:
    return "x".join(".".join(map(str, v)) if isinstance(v, tuple) else str(v) for v in tile)


@contextlib.contextmanager
def _env(values: dict[str, str]) -> Iterator[None]:
    keys = ("VYRE_WGPU_FENCES", "VYRE_WGPU_SHARED", "VYRE_WGPU_BARRIERS")
    old = {k: os.environ.get(k) for k in keys}
    for k in keys:
        os.environ[k] = values.get(k, "")
    try:
        yield
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


@contextlib.contextmanager
def _bare_fma(on: bool) -> Iterator[None]:
    """Every native f32 fma printed without fences (NOT exact in general: a driver may
    contract or factor; this only bounds what the fences cost)."""
    if not on:
        yield
        return
    saved = expressions._fma_minimal
    expressions._fma_minimal = lambda ctx, e, args: f"fma({', '.join(args)})"
    try:
        yield
    finally:
        expressions._fma_minimal = saved


WARMUP_S = 0.3  # of back-to-back runs before timing: the GPU's clocks drop while it idles


def median_time(run: Callable[[], float], reps: int) -> float:
    """Median of `reps` runs after a warm-up (compile, first touch, and WARMUP_S of runs:
    on the H100 a 4096^3 matmul right after a compile or a 2 s pause runs ~5x slower for
    tens of milliseconds while the clocks come back up); reps 0: the first run alone."""
    first = run()
    if not reps:
        return first
    end = time.perf_counter() + WARMUP_S
    while time.perf_counter() < end:
        run()
    return statistics.median(run() for _ in range(reps))


def multiply(b: BaseBackend, a: np.ndarray, bm: np.ndarray, tile: Tile, reps: int,
             split: bool = True, unroll: bool = True) -> tuple[float, np.ndarray]:
    """(seconds per dispatch, C) of A @ B with `tile` on backend `b` (median of `reps`
    device-timed dispatches after a warm-up; wall clock with a sync without timers)."""
    (m, k), n = a.shape, bm.shape[1]
    block, per_thread, block_k = tile
    ab, bb = upload(b, a, "sweep_a"), upload(b, bm, "sweep_b")
    cb = upload(b, np.full(m * n, np.nan, np.float32), "sweep_c")
    cfg = matmul_config(m, n, k, block, per_thread, block_k)
    if b.supports(F.DEVICE_TIMERS):
        cfg = cfg.model_copy(update={"profile": True})
    bound = b.bind(matmul_program(block, per_thread, block_k, split, unroll),
                   {"a": ab, "b": bb}, {"c": cb}, cfg)

    def run() -> float:
        t0 = time.perf_counter_ns()
        t = b.dispatch_with_device_buffers(bound)
        if t.device_ns is not None:
            return t.device_ns / 1e9
        b.synchronize()
        return (time.perf_counter_ns() - t0) / 1e9

    try:
        sec = median_time(run, reps)
        return sec, b.read(cb, dtype=np.float32).reshape(m, n)
    finally:
        for buf in (ab, bb, cb):
            b.free(buf)


def matmul_data(n: int) -> tuple[W.Data, np.ndarray, np.ndarray, float]:
    """The bench's n x n matmul data (checked against float64 by W.check_matmul), its A
    and B, and the flops of one multiply."""
    data = W.Data(dataclasses.replace(W.Sizes(), matmul=n))
    a, bm = data.matmul_ab
    return data, a, bm, 2.0 * n * n * n


def _rows(m: int, count: int) -> np.ndarray:
    """Sampled rows: the first, the last and evenly spaced ones between."""
    return np.unique(np.linspace(0, m - 1, count).astype(np.int64))


def _bits_vs_reference(c: np.ndarray, a: np.ndarray, bm: np.ndarray, rows: np.ndarray) -> str:
    want = matmul_reference(a[rows], bm)
    bad = int(np.count_nonzero(c[rows].view(np.uint32) != want.view(np.uint32)))
    return "" if bad == 0 else f"{bad} elements of {want.size} differ from matmul_reference"


def _cuda_line(a: np.ndarray, bm: np.ndarray, reps: int, baseline: np.ndarray | None,
               flop: float, raw_s: float, t_start: float) -> bool:
    """vyre CUDA's default matmul on the same A and B: its TFLOP/s, and whether its bits
    are the wgpu variants' (the same fma order on both backends)."""
    try:
        b = vyre.get_backend("cuda")
    except Exception as exc:
        print(f"vyre cuda: not available here ({type(exc).__name__}: {exc})", flush=True)
        return True
    try:
        tiles = tiles_for(b)
        sec, c = multiply(b, a, bm, (tiles.block, tiles.per_thread, tiles.block_k), reps,
                           tiles.split)
    finally:
        b.close()
    same = baseline is not None and np.array_equal(c.view(np.uint32), baseline.view(np.uint32))
    print(f"vyre cuda       {_tile_name((tiles.block, tiles.per_thread, tiles.block_k)):12s}: "
          f"{flop / sec / 1e12:8.3f} TFLOP/s = {raw_s / sec:5.2f}x raw  "
          f"{'same bits as wgpu' if same else 'DIFFERENT BITS from wgpu'}"
          f"  [{time.perf_counter() - t_start:.0f} s]", flush=True)
    return same


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=4096, help="M = N = K (default 4096)")
    ap.add_argument("--reps", type=int, default=5, help="timed runs per variant (median)")
    ap.add_argument("--tiles", default=DEFAULT_TILES,
                    help="blockxper_threadxblock_k, ... (a side as rows.columns: 64.128x4.8x8)")
    for flag, default, what in (
        ("old", "128x8x8", "in the old spelling (scalar, storage barriers)"),
        ("barrier", "128x8x8", "with storageBarrier() in every barrier"),
        ("all", "128x8x8", "with every f32 operand fenced"),
        ("unsplit", "", "without matmul's split edge loads (split=False)"),
        ("bare", "128x8x8", "with unfenced fmas (inexact; measurement only)"),
    ):
        ap.add_argument(f"--{flag}-tiles", default=default, help=f"tiles also timed {what}")
    ap.add_argument("--edge", default="517x389x301",
                    help="MxNxK also multiplied by every exact variant, bits checked ('' none)")
    ap.add_argument("--cuda", action=argparse.BooleanOptionalAction, default=True,
                    help="also time vyre CUDA's default matmul and compare its bits")
    ap.add_argument("--check-rows", type=int, default=6,
                    help="rows of C checked bit for bit against matmul_reference")
    args = ap.parse_args()
    t_start = time.perf_counter()
    n = args.n
    data, a, bm, flop = matmul_data(n)
    rng = np.random.default_rng(17)
    edge = None
    if args.edge:
        em, en, ek = (int(v) for v in args.edge.split("x"))
        edge = (rng.standard_normal((em, ek)).astype(np.float32),
                rng.standard_normal((ek, en)).astype(np.float32))

    peer = RawWgpuPeer(vyre.get_backend("wgpu").capabilities().device)
    case = peer.case("matmul", data)
    raw_s = median_time(case.run, args.reps)
    problem = case.check()
    case.close()
    peer.close()
    print(f"raw WGSL peer (vec4, 64x64x16)  : {flop / raw_s / 1e12:8.3f} TFLOP/s "
          f"({case.timer} time){'  CHECK FAILED: ' + problem if problem else ''}", flush=True)

    variants = (
        Variant("vec4", args.tiles),
        Variant("old", args.old_tiles,
                {"VYRE_WGPU_SHARED": "scalar", "VYRE_WGPU_BARRIERS": "storage"}),
        Variant("st-barrier", args.barrier_tiles, {"VYRE_WGPU_BARRIERS": "storage"}),
        Variant("bare-fma", args.bare_tiles, exact=False),
        Variant("all-fence", args.all_tiles, {"VYRE_WGPU_FENCES": "all"}),
        Variant("unsplit", args.unsplit_tiles, split=False),
    )
    # most telling first (the default tile of every variant), so a cut-off run still says
    # what matters; then the other vec4 tiles, then the other tiles of the other variants
    jobs = [(v, t) for v in variants for t in _tiles(v.tiles)[:1]]
    jobs += [(v, t) for v in variants for t in _tiles(v.tiles)[1:]]
    backends: dict[str, BaseBackend] = {}
    baseline: np.ndarray | None = None
    ok_all = problem is None
    try:
        for v, tile in jobs:
            name = f"vyre {v.label:10s} {_tile_name(tile):12s}"
            try:
                if v.label not in backends:
                    with _env(v.env):
                        backends[v.label] = vyre.get_backend("wgpu")
                b = backends[v.label]
                with _bare_fma(not v.exact):
                    sec, c = multiply(b, a, bm, tile, args.reps, v.split)
                    notes = []
                    if edge is not None and v.exact:
                        _, ce = multiply(b, *edge, tile, 0, v.split)
                        bad = _bits_vs_reference(ce, *edge, _rows(len(ce), args.check_rows))
                        notes.append(f"edge {args.edge}: " + (bad or "ref bits"))
            except Exception as exc:  # a shape a device refuses is a result, not a crash
                print(f"{name}: failed: {type(exc).__name__}: {exc}", flush=True)
                ok_all = False
                continue
            if baseline is None and v.exact:
                baseline = c
                bad = W.check_matmul(c, data) or _bits_vs_reference(
                    c, a, bm, _rows(n, args.check_rows))
                same = "ref bits (sampled rows)" if not bad else f"CHECK FAILED: {bad}"
            elif baseline is None:
                same, bad = "no baseline", ""
            else:
                equal = np.array_equal(c.view(np.uint32), baseline.view(np.uint32))
                same = "same bits" if equal else "DIFFERENT BITS"
                bad = "" if equal or not v.exact else same
            if not v.exact:
                same += " (inexact variant: informational)"
            ok_all &= not bad and all("differ" not in x for x in notes)
            tf = flop / sec / 1e12
            print(f"{name}: {tf:8.3f} TFLOP/s = {raw_s / sec:5.2f}x raw  {same}"
                  + "".join(f"; {x}" for x in notes)
                  + f"  [{time.perf_counter() - t_start:.0f} s]", flush=True)
    finally:
        for b in backends.values():
            b.close()
    if args.cuda:
        ok_all &= _cuda_line(a, bm, args.reps, baseline, flop, raw_s, t_start)
    print("ALL EXACT VARIANTS BIT-IDENTICAL" if ok_all else "SOME CHECK FAILED", flush=True)
    return 0 if ok_all else 1


if __name__ == "__main__":
    sys.exit(main())
