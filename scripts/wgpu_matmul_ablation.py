#!/usr/bin/env python3
"""Where vyre's wgpu matmul loses to the raw vec4 WGSL peer: the peer on vyre's own device,
and vyre's generated WGSL with one thing at a time taken out of it.

  python3 scripts/wgpu_matmul_ablation.py [--n 4096] [--reps 5] [--tiles 128x8x8,64x4x16]

The H100 sweep (scripts/wgpu_matmul_sweep.py, session 17.1) found vyre's 128x8x8 at 6.6
TFLOP/s and the peer at 20.3, with fences (bare-fma, all-fence), vec4 workgroup reads and
tile shape (64x4x16 is the peer's geometry: 6.0) each moving it by at most ~10%. This
script asks what is left, each line on the same A and B:

- `peer, own device`     the bench's raw peer (its own wgpu device, as in `vyre bench`);
- `peer, vyre's device`  the same WGSL on the device vyre's backend opened (vyre asks for
                         more features and limits): a device-level cause shows here;
- `vyre`                 vyre's WGSL as generated, per --tiles shape;
- `vyre -guards`         every storage-buffer index test (`if (i < vy_u.n_k)`) made `true`
                         (exact here: n is a multiple of every tile, nothing is out of range);
- `vyre -fences`         every fence call removed (NOT exact in general; bits reported);
- `vyre let`             every `var` that is never assigned again spelled `let`;
- `vyre -guards -fences` -guards and -fences together;
- `vyre all three`       all of the above;
- `vyre explicit flush`  flush mode spelled by vyre for every f32 operation, as before
                         native_flush.py (only differs on a device that flushes by itself);
- `vyre rolled`          matmul_program(unroll=False): the block_k steps of a K slab as an
                         IR loop instead of written out (a shader ~block_k times shorter
                         in its K loop; the same bits), per --tiles shape.
The variants of vyre's WGSL are textual rewrites of the generated module (the backend's
`generate` is wrapped on a fresh backend instance), bound and dispatched by vyre as usual.

Prints TFLOP/s (median of --reps after a warm-up, device timestamps), the ratio to the
peer on its own device, and whether C has the first vyre line's bits. It only measures;
it must never change vyre's defaults. Budget: about 45 s on the H100 at n=4096.
"""

from __future__ import annotations

import argparse
import dataclasses
import re
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np
from wgpu_matmul_sweep import matmul_data, median_time, multiply  # (scripts/, next to this one)

import vyre
from vyre.backend import BaseBackend
from vyre.tools.bench import workloads as W
from vyre.tools.bench.peers import RawWgpuPeer

Rewrite = Callable[[str], str]
_GUARD = re.compile(r"^(\s*)if \(\(.* < vy_u\.n_\d+\)\) \{$", re.M)
_VAR = re.compile(r"^(\s*)var (v_\w+): (\w+) = ", re.M)


def no_guards(src: str) -> str:
    """Every storage-buffer index test of vyre.lower (`if ((i < vy_u.n_k)) {`) -> true."""
    return _GUARD.sub(r"\1if (true) {", src)


def no_fences(src: str) -> str:
    """Every fence call `vy_fenceK_f32(x)` / `vy_fenceK_f32_ftz(x)` -> `(x)` (the helper
    definitions stay, unused)."""
    return re.sub(r"(?<!fn )vy_fence\d_f32(?:_ftz)?\(", "(", src)


def lets(src: str) -> str:
    """`var v_x: T = e;` -> `let v_x: T = e;` where no statement assigns v_x again."""
    assigned = set(re.findall(r"^\s*(v_\w+) = ", src, re.M))

    def one(m: re.Match[str]) -> str:
        if m.group(2) in assigned:
            return m.group(0)
        return f"{m.group(1)}let {m.group(2)}: {m.group(3)} = "

    return _VAR.sub(one, src)


def all_three(src: str) -> str:
    return lets(no_fences(no_guards(src)))


REWRITES: dict[str, Rewrite | None] = {
    "vyre": None, "vyre -guards": no_guards, "vyre -fences": no_fences, "vyre let": lets,
    "vyre -guards -fences": lambda src: no_fences(no_guards(src)), "vyre all three": all_three,
}
EXACT = {"vyre", "vyre -guards", "vyre let", "vyre rolled", "vyre explicit flush"}


def _rewritten_backend(rewrite: Rewrite | None, explicit_flush: bool = False) -> BaseBackend:
    """vyre's wgpu backend with its WGSL rewritten; `explicit_flush`: flush mode spelled by
    vyre for every operation even where the device's own add/sub/mul/fma flush
    (VYRE_WGPU_NATIVE_FLUSH=0, as before native_flush.py)."""
    import os

    from vyre.backends.wgpu.options import ENV_NATIVE_FLUSH

    old = os.environ.get(ENV_NATIVE_FLUSH)
    if explicit_flush:
        os.environ[ENV_NATIVE_FLUSH] = "0"
    try:
        b = vyre.get_backend("wgpu")
    finally:
        if old is None:
            os.environ.pop(ENV_NATIVE_FLUSH, None)
        else:
            os.environ[ENV_NATIVE_FLUSH] = old
    if rewrite is not None:
        compiler: Any = b._compiler  # (the compiler part: its compile calls its generate)
        original = compiler.generate

        def generate(program: Any, key: Any = None) -> Any:
            mod = original(program, key)
            return dataclasses.replace(mod, source=rewrite(mod.source))

        compiler.generate = generate
    return b


def _peer_on(device: Any) -> RawWgpuPeer:
    """The raw peer driving an existing device (vyre's) instead of opening its own."""
    import wgpu

    peer = RawWgpuPeer.__new__(RawWgpuPeer)
    peer.wgpu = wgpu
    peer.dev = device
    peer.adapter_name = "vyre's device"
    peer.timestamps = "timestamp-query" in device.features
    peer.encoder_timestamps = "timestamp-query-inside-encoders" in device.features
    peer.U = wgpu.BufferUsage
    return peer


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=4096)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--tiles", default="128x8x8,64x4x16",
                    help="block x per_thread x block_k of the vyre lines (first: every variant)")
    args = ap.parse_args()
    t_start = time.perf_counter()
    data, a, bm, flop = matmul_data(args.n)

    def line(name: str, sec: float, ref: float | None, note: str) -> None:
        ratio = f"{ref / sec:5.2f}x peer" if ref else "          "
        print(f"{name:32s}: {flop / sec / 1e12:8.3f} TFLOP/s = {ratio}  {note}"
              f"  [{time.perf_counter() - t_start:.0f} s]", flush=True)

    own = RawWgpuPeer(vyre.get_backend("wgpu").capabilities().device)
    case = own.case("matmul", data)
    peer_s = median_time(case.run, args.reps)
    line("peer, own device", peer_s, None, case.check() or "checked vs f64")
    case.close()
    own.close()

    ok = True
    baseline: np.ndarray | None = None
    tiles = [tuple(int(v) for v in t.split("x")) for t in args.tiles.split(",") if t]
    jobs = [(name, tiles[0]) for name in REWRITES]
    jobs += [("vyre explicit flush", tiles[0])]
    jobs += [("vyre rolled", t) for t in tiles]
    jobs += [(name, t) for t in tiles[1:] for name in ("vyre", "vyre all three")]
    for name, tile in jobs:
        b = _rewritten_backend(REWRITES.get(name), explicit_flush=name == "vyre explicit flush")
        try:
            if baseline is None:  # the peer on this (vyre's) device, once
                pc = _peer_on(b.device).case("matmul", data)  # type: ignore[attr-defined]
                line("peer, vyre's device", median_time(pc.run, args.reps), peer_s,
                     pc.check() or "checked vs f64")
                pc.close()
            sec, c = multiply(b, a, bm, tile, args.reps,
                              unroll=name != "vyre rolled")
        except Exception as exc:
            print(f"{name} {tile}: failed: {type(exc).__name__}: {exc}", flush=True)
            ok = False
            continue
        finally:
            b.close()
        if baseline is None:
            baseline = c
            bad = W.check_matmul(c, data)
            note = bad or "checked vs f64"
        else:
            same = np.array_equal(c.view(np.uint32), baseline.view(np.uint32))
            note = "same bits" if same else "DIFFERENT BITS"
            bad = None if same or name not in EXACT else note
        ok &= bad is None
        line(f"{name} {'x'.join(map(str, tile))}", sec, peer_s, note)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
