"""naga's bounds checks on and off, in one process, on the bench's wgpu workloads:

    python scripts/wgpu_bounds_checks_ab.py [--workloads matmul,sort,scan] [--quick]
                                            [--repeat N] [--no-cuda]

Two wgpu backends on one adapter: "trusted" (the default: modules without naga's bounds
checks where the printer proves every array access in range, vyre/backends/wgpu/trusted.py)
and "checked" (VYRE_WGPU_BOUNDS_CHECKS=1: every module with them). Per workload, the bench's
own vyre case for each (vyre.tools.bench: same data, same checks, interleaved repetitions,
the order reversed every other round), then one table: each backend's figure, the ratio, how
many of the workload's programs were compiled without checks, and whether both backends'
outputs (the library's host call at the same size) are the same bits. A CUDA backend is
opened first where there is one: on NVIDIA it keeps the SM clock up for Vulkan work too
(docs/perf-notes.md, session 17). --quick: the bench's quick sizes (any adapter, lavapipe).
Exit status 1 when a check failed or the bits differ. This is a measurement tool: it must
never change what it measures.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
from functools import partial

import numpy as np

import vyre
from vyre.backend import BaseBackend
from vyre.backends.wgpu import trusted
from vyre.ir.nodes import Program
from vyre.programs.matmul import matmul_host
from vyre.programs.radix_sort import radix_sort_host
from vyre.programs.scan import scan_host
from vyre.tools.bench import workloads as W
from vyre.tools.bench.runner import Entry, measure_together
from vyre.tools.bench.vyre_impl import VyreImpl

WORKLOADS = ("matmul", "sort", "scan")


class _Recording(VyreImpl):
    """The bench's vyre cases, noting the Programs each one runs."""

    def __init__(self, backend: BaseBackend, spec: str) -> None:
        super().__init__(backend, spec)
        self.programs: dict[str, Program] = {}

    def _note_source(self, program: Program) -> None:
        self.programs[program.name] = program
        super()._note_source(program)


def _open(checked: bool) -> BaseBackend:
    """A wgpu backend with the switch set (checked) or cleared, the environment restored."""
    old = os.environ.get(trusted.ENV_BOUNDS_CHECKS)
    if checked:
        os.environ[trusted.ENV_BOUNDS_CHECKS] = "1"
    else:
        os.environ.pop(trusted.ENV_BOUNDS_CHECKS, None)
    try:
        return vyre.get_backend("wgpu")
    finally:
        if old is None:
            os.environ.pop(trusted.ENV_BOUNDS_CHECKS, None)
        else:
            os.environ[trusted.ENV_BOUNDS_CHECKS] = old


def _outputs(b: BaseBackend, workload: str, data: W.Data) -> np.ndarray:
    """The workload's result through the library's host call (same inputs as the bench)."""
    if workload == "matmul":
        a, bm = data.matmul_ab
        return matmul_host(b, a, bm)
    if workload == "sort":
        return radix_sort_host(b, data.sort_keys)[0]
    return scan_host(b, data.unit_f32, inclusive=True)


def _same_bits(x: np.ndarray, y: np.ndarray) -> bool:
    return x.shape == y.shape and bool(np.array_equal(x.view(np.uint32), y.view(np.uint32)))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workloads", default=",".join(WORKLOADS))
    ap.add_argument("--quick", action="store_true", help="the bench's quick sizes")
    ap.add_argument("--repeat", type=int, default=0, help="timed rounds (default: the bench's)")
    ap.add_argument("--no-cuda", action="store_true", help="do not open a CUDA backend first")
    a = ap.parse_args()
    names = [w for w in a.workloads.split(",") if w]
    unknown = sorted(set(names) - set(WORKLOADS))
    if unknown:
        ap.error(f"unknown workloads {unknown}; choose from {','.join(WORKLOADS)}")
    sizes = W.QUICK if a.quick else W.FULL
    if a.repeat:
        sizes = dataclasses.replace(sizes, repeat=a.repeat)
    keep: list[BaseBackend] = []
    if not a.no_cuda:
        try:
            keep.append(vyre.get_backend("cuda"))
        except vyre.BackendError as exc:
            print(f"# no cuda backend ({exc}); wgpu's clocks are the driver's choice")
    sides = {"trusted": _open(False), "checked": _open(True)}
    for label, b in sides.items():
        info = b.capabilities()
        print(f"# {label}: {info.device}; shader_bounds_checks: "
              f"{info.details['shader_bounds_checks']}")
    if sides["trusted"].capabilities().details["shader_bounds_checks"].startswith("on"):
        print("# the trusted side keeps the checks here: both sides are the same modules")
    data = W.Data(sizes.capped(sides["trusted"].capabilities().limits.get(
        "max_storage_binding_bytes")))
    rows: list[tuple[str, ...]] = []
    bad = False
    for name in names:
        metric = W.metric(name, data.sizes)
        impls = {label: _Recording(b, "wgpu") for label, b in sides.items()}
        entries = [Entry(f"wgpu {label}", True, partial(impl.case, name, data))
                   for label, impl in impls.items()]
        results = measure_together(metric, "wgpu", entries, sizes.warmup, sizes.repeat,
                                   sizes.warmup_s)
        proven = {label: sum(not i.backend.compile(p).bounds_checks
                             for p in i.programs.values())
                  for label, i in impls.items()}
        got = {label: _outputs(b, name, data) for label, b in sides.items()}
        same = _same_bits(got["trusted"], got["checked"])
        figs = {r.implementation.split()[-1]: r for r in results}
        tv, cv = figs["trusted"].value, figs["checked"].value
        ratio = f"{tv / cv:.3f}" if tv and cv else "-"
        checks = "/".join(figs[k].status + ("" if not figs[k].detail else f" ({figs[k].detail})")
                          for k in ("trusted", "checked"))
        bad |= not same or any(figs[k].status != "ok" for k in figs)
        n_prog = len(impls["trusted"].programs)
        rows.append((name, metric.unit, f"{tv:.1f}" if tv else "-", f"{cv:.1f}" if cv else "-",
                     ratio, f"{proven['trusted']}/{n_prog}", f"{proven['checked']}/{n_prog}",
                     "same" if same else "DIFFER", checks))
    head = ("workload", "unit", "trusted", "checked", "ratio", "no-checks (t)",
            "no-checks (c)", "bits", "status")
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
    for r in [head, *rows]:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip())
    for b in [*sides.values(), *keep]:
        b.close()
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
