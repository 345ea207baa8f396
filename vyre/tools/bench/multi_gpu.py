"""The `multi_gpu` benchmark: vyre over several CUDA devices of one process, every output
checked, each figure next to its peer in the same run.

- transfer: `vyre.transfer(x, b, out=y)` between two GPUs against torch's peer copy
  (`dst.copy_(src)`), GB/s;
- all_gather: `DeviceGroup.all_gather` (peer copies) against NCCL's all-gather through
  `torch.cuda.nccl.all_gather` (one process, every GPU), GB/s of gathered output per GPU;
- sum, scan, sort and a 100-step stencil with halo exchange, sharded over 1, 2, ... N GPUs
  (`DeviceGroup`), as the speedup over one GPU; every result is checked bit-identical to
  the one-GPU run.
Timed by the host clock around whole calls that end in a synchronize of every GPU, median
of 5 rounds. Skipped, with the reason, on fewer than two CUDA devices.

    python -m vyre.tools.bench.multi_gpu [--quick] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np

import vyre
from vyre.group import LIBRARY_BLOCK, DeviceGroup


def median_seconds(fn: Callable[[], object], sync: Callable[[], object], repeat: int) -> float:
    """Median seconds per call over 5 rounds of `repeat` calls, each round ended by sync."""
    fn()
    sync()
    rounds = []
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(repeat):
            fn()
        sync()
        rounds.append((time.perf_counter() - t0) / repeat)
    return statistics.median(rounds)


def _cuda_devices() -> tuple[int, str]:
    a = {x.name: x for x in vyre.available_backends()}.get("cuda")
    if a is None or not a.available:
        return 0, f"no CUDA backend here ({a.reason if a else 'not registered'})"
    from vyre.backends.cuda import driver as D

    return D.device_count(), ""


def _transfer(gpus: list[Any], nbytes: int, repeat: int, rows: list[dict[str, Any]]) -> None:
    a, b = gpus[0], gpus[1]
    data = np.random.default_rng(0).integers(0, 2**32, nbytes // 4, dtype=np.uint32)
    x = a.allocate_device_buffer(nbytes)
    a.write(x, data)
    y = b.allocate_device_buffer(nbytes)
    t = median_seconds(lambda: vyre.transfer(x, b, out=y), b.synchronize, repeat)
    ok = bool(np.array_equal(np.asarray(b.read(y, dtype=np.uint32)), data))
    row = {"metric": "transfer", "unit": "GB/s", "gpus": 2, "vyre": nbytes / t / 1e9,
           "checked": ok}
    try:
        import torch

        src = torch.from_numpy(data.view(np.int32)).to("cuda:0")
        dst = torch.empty_like(src, device="cuda:1")

        def sync() -> None:
            torch.cuda.synchronize(0)
            torch.cuda.synchronize(1)

        row["peer"] = "torch dst.copy_(src)"
        row["peer_value"] = nbytes / median_seconds(lambda: dst.copy_(src), sync, repeat) / 1e9
    except ImportError:
        row["peer"] = "torch not installed"
    a.free(x)
    b.free(y)
    rows.append(row)


def _all_gather(gpus: list[Any], per_gpu: int, repeat: int, rows: list[dict[str, Any]]) -> None:
    k = len(gpus)
    data = np.random.default_rng(1).standard_normal(per_gpu * k).astype(np.float32)
    group = DeviceGroup(gpus)
    arr = group.scatter(data)
    out = group.all_gather(arr)

    def sync() -> None:
        for g in gpus:
            g.synchronize()

    t = median_seconds(lambda: group.all_gather(arr, out=out), sync, repeat)
    ok = all(np.array_equal(np.asarray(g.read(out.buffers[i], dtype=np.float32)), data)
             for i, g in enumerate(gpus))
    row = {"metric": "all_gather", "unit": "GB/s", "gpus": k, "vyre": data.nbytes / t / 1e9,
           "checked": ok}
    try:
        import torch
        import torch.cuda.nccl as nccl

        ins = [torch.from_numpy(data[i * per_gpu:(i + 1) * per_gpu]).to(f"cuda:{i}")
               for i in range(k)]
        outs = [torch.empty(per_gpu * k, dtype=torch.float32, device=f"cuda:{i}")
                for i in range(k)]

        def tsync() -> None:
            for i in range(k):
                torch.cuda.synchronize(i)

        row["peer"] = "NCCL all_gather (torch.cuda.nccl)"
        row["peer_value"] = data.nbytes / median_seconds(lambda: nccl.all_gather(ins, outs), tsync,
                                                    repeat) / 1e9
    except Exception as exc:  # no torch, or NCCL unusable here: say why in the table
        row["peer"] = f"unavailable: {exc}"[:80]
    arr.free()
    out.free()
    rows.append(row)


def _cases(group: DeviceGroup, arr: Any, karr: Any, grid: np.ndarray
           ) -> tuple[dict[str, tuple[Callable[[], Any], Callable[[Any], bytes], bool]], list[Any]]:
    """name -> (one timed call, the bits of its result, whether each call's result is a new
    resident array to free), and the resident arrays to free after every case ran."""
    from vyre.tools.bench.multi_gpu_kernels import heat_arrays, heat_steps

    u, v = heat_arrays(group, grid)  # resident: the steps are timed, not the upload
    scanned = group.empty(arr.shards, arr.dtype, label="scanned")
    return {
        "sum": (lambda: group.reduce(arr, "sum"), lambda r: r.tobytes(), False),
        # into one result array (out=), as a stencil keeps its two: the scan is timed, not
        # a 2 GiB allocation and its free
        "scan": (lambda: group.scan(arr, out=scanned), lambda r: r.gather().tobytes(), False),
        "sort": (lambda: group.sort(karr), lambda r: r.gather().tobytes(), True),
        # 100 steps (even): the result is back in u, which the next call starts from
        "stencil100": (lambda: heat_steps(group, u, v, 100)[0],
                       lambda r: r.gather().tobytes(), False),
    }, [u, v, scanned]


def _scaling(gpus: list[Any], n: int, grid_side: int, repeat: int,
             rows: list[dict[str, Any]]) -> None:
    rng = np.random.default_rng(2)
    data = rng.standard_normal(n).astype(np.float32)
    keys = rng.integers(0, 2**32, n // 4, dtype=np.uint32)
    grid = rng.standard_normal((grid_side, grid_side)).astype(np.float32)
    counts = sorted({1, 2, 4, len(gpus)} & set(range(1, len(gpus) + 1)))
    baseline: dict[str, tuple[float, bytes]] = {}
    for k in counts:
        group = DeviceGroup(gpus[:k])

        def sync(group: DeviceGroup = group) -> None:
            for g in group.backends:
                g.synchronize()

        arr = group.scatter(data, align=LIBRARY_BLOCK)
        karr = group.scatter(keys)
        cases, resident = _cases(group, arr, karr, grid)
        for name, (fn, bits, owned) in cases.items():
            made: list[Any] = []

            def call(fn: Callable[[], Any] = fn, made: list[Any] = made,
                     owned: bool = owned) -> None:
                made.append(fn())
                if len(made) > 1:  # keep the newest result only
                    old = made.pop(0)
                    if owned:
                        old.free()

            t = median_seconds(call, sync, 1 if name in ("sort", "stencil100") else repeat)
            got = bits(made[-1])
            if owned:
                made[-1].free()
            if k == counts[0]:
                baseline[name] = (t, got)
            t1, want = baseline[name]
            rows.append({"metric": name, "unit": "speedup over 1 GPU", "gpus": k,
                         "vyre": t1 / t, "ms": t * 1e3, "checked": got == want})
        for a in (arr, karr, *resident):
            a.free()
        group.free_scratch()


def run(quick: bool = False) -> dict[str, Any]:
    count, why = _cuda_devices()
    if count < 2:
        return {"skipped": why or f"needs 2 CUDA devices, this machine has {count}", "rows": []}
    gpus = [vyre.get_backend(f"cuda:{i}") for i in range(count)]
    rows: list[dict[str, Any]] = []
    try:
        _transfer(gpus, (16 if quick else 256) << 20, 5 if quick else 20, rows)
        _all_gather(gpus, (1 if quick else 16) << 20, 3 if quick else 10, rows)
        _scaling(gpus, (1 << 22) if quick else (1 << 29), 1024 if quick else 16384,
                 2 if quick else 5, rows)
    finally:
        for g in gpus:
            g.close()
    return {"skipped": None, "gpus": count, "rows": rows}


def text(doc: dict[str, Any]) -> str:
    if doc.get("skipped"):
        return f"multi_gpu: skipped: {doc['skipped']}"
    lines = [f"multi_gpu ({doc['gpus']} GPUs)",
             f"{'metric':12s} {'gpus':>4s} {'vyre':>9s} {'unit':20s} {'peer':>9s}  "
             f"{'ratio':>6s}  checked  peer"]
    for r in doc["rows"]:
        pv = r.get("peer_value")
        ratio = f"{r['vyre'] / pv:5.2f}x" if pv else "     -"
        extra = f"{r['ms']:.3f} ms" if "ms" in r else r.get("peer", "")
        lines.append(f"{r['metric']:12s} {r['gpus']:4d} {r['vyre']:9.2f} {r['unit']:20s} "
                     f"{pv if pv is None else round(pv, 2)!s:>9s}  {ratio}  "
                     f"{'yes' if r['checked'] else 'NO':7s}  {extra}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="small sizes")
    ap.add_argument("--json", metavar="FILE", help="also write the figures as JSON")
    args = ap.parse_args(argv)
    doc = run(args.quick)
    print(text(doc))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(doc, f, indent=1)
    return 1 if any(not r["checked"] for r in doc["rows"]) else 0


if __name__ == "__main__":
    sys.exit(main())
