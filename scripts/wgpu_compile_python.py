"""vyre's own Python per wgpu cold compile, the driver's time left out:

    python scripts/wgpu_compile_python.py [--rounds N] [--cold]

Per round, a never-seen Program (the bench's compile.cold probe, a new salt) compiled by
WgpuBackend.compile with the device's create_shader_module and create_compute_pipeline
answered by stand-ins, so the figure is vyre's Python alone (content hash, checks,
lowering, printing, layouts, cache); then the stages alone on another never-seen Program:
content hash, feature and limit checks, generate = lower + print WGSL. This thread's CPU
time in us, median and p10 (the tenth fastest of a hundred: steadier on a shared host).
--cold: before each round the driver compiles a never-seen shader for real, as in the
bench, where vyre's Python runs in the caches the driver's compile leaves (on NVIDIA's
driver that is most of the difference to a warm loop). Runs on any wgpu adapter; compare
two trees by PYTHONPATH (scripts/source_digests.py proves their sources equal). This is a
measurement tool: it must never change what it measures.
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

import vyre
from vyre.binding import check_program_fits
from vyre.tools.bench.vyre_impl import compile_probe_program

_CPU = time.thread_time_ns


class _NoDriver:
    """The device, its two compile calls answered without the driver."""

    def __init__(self, device: Any) -> None:
        self._device = device

    def __getattr__(self, name: str) -> Any:
        if name in ("create_shader_module", "create_compute_pipeline"):
            return lambda *args, **kwargs: object()
        return getattr(self._device, name)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=400)
    ap.add_argument("--cold", action="store_true",
                    help="a real driver compile of a never-seen shader before each round")
    a = ap.parse_args()
    b: Any = vyre.get_backend("wgpu")
    dev = b.device
    salt = [time.perf_counter_ns()]

    def fresh() -> Any:
        salt[0] += 1
        return compile_probe_program(salt[0])

    def driver() -> None:
        salt[0] += 1
        code = ("@group(0) @binding(0) var<storage, read_write> o: array<u32>;\n"
                "@compute @workgroup_size(64) fn main() { o[0] = "
                f"{salt[0] % 1000000}u; }}\n")
        sm = dev.create_shader_module(code=code)
        dev.create_compute_pipeline(layout="auto", compute={"module": sm, "entry_point": "main"})

    got: dict[str, list[int]] = {}
    b.device = _NoDriver(dev)
    try:
        for _ in range(5):  # (first compiles: layouts, tables)
            b.compile(fresh())
        for _ in range(a.rounds):
            if a.cold:
                driver()
            prog = fresh()
            t0 = _CPU()
            b.compile(prog)
            got.setdefault("compile(), driver left out", []).append(_CPU() - t0)
            if a.cold:
                driver()
            prog = fresh()
            t0 = _CPU()
            _ = prog.content_hash
            t1 = _CPU()
            check_program_fits(b, prog)
            t2 = _CPU()
            b.generate(prog)
            t3 = _CPU()
            for key, ns in (("stage: content hash", t1 - t0),
                            ("stage: feature/limit checks", t2 - t1),
                            ("stage: generate = lower + WGSL", t3 - t2)):
                got.setdefault(key, []).append(ns)
    finally:
        b.device = dev
    print(f"vyre's Python per wgpu cold compile, {a.rounds} rounds"
          f"{' (a driver compile before each)' if a.cold else ''}; thread CPU, us")
    print(f"  {'':40s} {'median':>8s} {'p10':>8s}")
    for key, ns in got.items():
        ns.sort()
        print(f"  {key:40s} {statistics.median(ns) / 1e3:8.1f} {ns[len(ns) // 10] / 1e3:8.1f}")


if __name__ == "__main__":
    main()
