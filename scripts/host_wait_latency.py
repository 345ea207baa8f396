"""How long the host waits for the device, through vyre's public calls only (so the same
script times an older tree: `cd old && PYTHONPATH=$PWD python ../scripts/...`):

    python scripts/host_wait_latency.py [TAG] [--rounds N]

On wgpu: one small dispatch then `synchronize()`, one small dispatch then a 4 KiB read,
a 4 KiB read alone, and a 100-step Pipeline's `run()` (per dispatch), each in interleaved
blocks (median us); then the time of one large read (64 and 256 MiB, best of 4) on every
backend here but the reference, by `read` (a new array each time), by `read_into` (one
array reused) and, where the backend has them, into a `page_locked_array`. TAG starts every line, to tell two trees apart.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import numpy as np

import vyre
from vyre import DispatchConfig
from vyre.tools.bench.vyre_impl import WG, inc_program  # y[i] += 1 over u32


def small_waits(tag: str, b: vyre.BaseBackend, rounds: int) -> None:
    n = 1024
    yb = b.allocate_device_buffer(n * 4)
    b.write(yb, np.zeros(n, np.uint32))
    bound = b.bind(inc_program(), [], [yb], DispatchConfig.for_elements(n, WG))
    pipe = b.pipeline([bound] * 100)

    def dispatch_sync() -> None:
        b.dispatch_with_device_buffers(bound)
        b.synchronize()

    def dispatch_read() -> None:
        b.dispatch_with_device_buffers(bound)
        b.read(yb, dtype=np.uint32)

    cases: dict[str, tuple[Callable[[], object], int]] = {
        "dispatch + synchronize": (dispatch_sync, 1),
        "dispatch + read 4 KiB": (dispatch_read, 1),
        "read 4 KiB": (lambda: b.read(yb, dtype=np.uint32), 1),
        "100-step pipeline run, per dispatch": (pipe.run, 100),
    }
    got: dict[str, list[float]] = {c: [] for c in cases}
    for f, _ in cases.values():
        for _ in range(rounds // 2):
            f()
    for _ in range(7):
        for c, (f, per) in cases.items():
            t0 = time.perf_counter_ns()
            for _ in range(rounds):
                f()
            got[c].append((time.perf_counter_ns() - t0) / rounds / per / 1e3)
    for c in cases:
        print(f"{tag} {b.id} {c:36s} {statistics.median(got[c]):9.2f} us")
    b.free(yb)


def _best_read_into(b: vyre.BaseBackend, buf: object, out: np.ndarray) -> float:
    """Seconds of the fastest of 4 read_into(buf, out), each checked."""
    best = float("inf")
    for _ in range(4):
        out[-1] = 0
        t0 = time.perf_counter()
        b.read_into(buf, out)
        best = min(best, time.perf_counter() - t0)
    assert out[-1] == out.size - 1, "wrong read-back"
    return best


def large_reads(tag: str, b: vyre.BaseBackend) -> None:
    for mib in (64, 256):
        m = mib << 18
        buf = b.allocate_device_buffer(m * 4)
        b.write(buf, np.arange(m, dtype=np.uint32))
        b.synchronize()
        best = float("inf")
        for _ in range(4):
            t0 = time.perf_counter()
            a = b.read(buf, dtype=np.uint32)
            best = min(best, time.perf_counter() - t0)
        assert a[-1] == m - 1 and a.flags.writeable, "wrong read-back"
        print(f"{tag} {b.id} read {mib} MiB {best * 1e3:36.1f} ms")
        if hasattr(b, "read_into"):  # (older trees have no read_into)
            best = _best_read_into(b, buf, np.empty(m, np.uint32))
            print(f"{tag} {b.id} read_into a reused array, {mib} MiB {best * 1e3:16.1f} ms")
        if getattr(b, "supports", lambda _f: False)("page_locked_host"):
            best = _best_read_into(b, buf, b.page_locked_array(m, np.uint32))
            print(f"{tag} {b.id} read_into a page_locked_array, {mib} MiB {best * 1e3:12.1f} ms")
        b.free(buf)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("tag", nargs="?", default="vyre")
    ap.add_argument("--rounds", type=int, default=200)
    a = ap.parse_args()
    backends = []
    for name in ("cuda", "wgpu"):  # cuda first: it keeps an NVIDIA GPU's clock up for wgpu
        try:
            backends.append(vyre.get_backend(name))
        except vyre.BackendError as exc:
            print(f"{a.tag} {name}: not here ({str(exc).splitlines()[0]})")
    for b in backends:
        if b.kind == "wgpu":
            small_waits(a.tag, b, a.rounds)
    for b in backends:
        large_reads(a.tag, b)
    for b in backends:
        b.close()


if __name__ == "__main__":
    main()
