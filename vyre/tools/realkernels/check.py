"""Running one kernel of the real-kernel suite on one backend and comparing its outputs bit
for bit with the C's: the shipped outputs (data/<name>.bin) at the suite's size; at the
larger size (LARGE_ARGS), the C compiled and run here when gcc is present, else the SHA-256
that make_expected.py --large recorded. Shared by scripts/realkernels.py, `vyre certify`
and the tests.

gcc computes in IEEE mode. On a backend in flush mode (docs/IR.md: a subnormal operand
reads as zero, a tiny result flushes; NVIDIA's Vulkan driver), outputs whose computation
meets a subnormal legitimately differ from gcc's (Black-Scholes: an option whose exp(-d^2
/ 2) is subnormal). There, and only where gcc's bits differ, the outputs are compared with
what the IR defines for that mode, the reference backend in the same flush mode, and the
result says so (`KernelCheck.against`, `flush_explained`).

This module must never tolerate a difference and never skip a kernel silently: a backend
that lacks a feature a kernel needs is reported by `missing_features`, for the caller to
say so.
"""

from __future__ import annotations

import hashlib
import json
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from vyre.interface import Backend
from vyre.tools.testing import flushed_types, reference_for

from .common import DATA_DIR, output_bytes, read_output
from .compare import Comparison, compare
from .suite import Kernel

GCC = "gcc"
FLUSH_REFERENCE = "the reference in the backend's flush mode"


@dataclass(frozen=True)
class KernelCheck:
    comparison: Comparison  # the port's outputs against `against`
    against: str  # GCC, or FLUSH_REFERENCE where the backend flushes and gcc's bits differ
    flush_explained: int = 0  # outputs that differ from gcc's IEEE bits (flush mode only)


def missing_features(kernel: Kernel, backend: Backend) -> list[str]:
    """The features the kernel's programs need that `backend` does not report (f64)."""
    need = {f for make in kernel.programs for f in make().required_features}
    return sorted(need - backend.capabilities().features)


def check_kernel(kernel: Kernel, backend: Backend, large: bool = False,
                 reference: Backend | None = None) -> KernelCheck:
    """The kernel's port on `backend` against the C (see the module docstring); `reference`
    (a reference backend) is needed only for a backend in flush mode."""
    got = kernel.port(backend, large)
    against_gcc = _against_c(kernel, got, large)
    if against_gcc.disagreements == 0 or not flushed_types(backend):
        return KernelCheck(against_gcc, GCC)
    if reference is None:
        raise ValueError(f"{kernel.name}: {backend.id} flushes subnormals and "
                         f"{against_gcc.disagreements} outputs differ from gcc's IEEE bits; "
                         "pass a reference backend to compare them with the IR's flush mode")
    want = kernel.port(reference_for(backend, reference), large)
    return KernelCheck(compare(got, want), FLUSH_REFERENCE, against_gcc.disagreements)


def _against_c(kernel: Kernel, got: list[np.ndarray], large: bool) -> Comparison:
    if not large:
        return compare(got, kernel.expected())
    from .make_expected import build_and_run, compiler  # (gcc only for the larger size)

    cc = compiler()
    if cc is not None:
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp) / f"{kernel.name}.bin"
            build_and_run(cc, kernel.name, out, Path(tmp), large=True)
            return compare(got, read_output(out))
    manifest = json.loads((DATA_DIR / "manifest.json").read_text())
    recorded = manifest.get(kernel.name, {}).get("large")
    if recorded is None or recorded.get("args") != kernel.large_args:
        raise ValueError(f"{kernel.name}: no C output is recorded for LARGE_ARGS "
                         f"{kernel.large_args} and there is no gcc here to make one; run "
                         "python -m vyre.tools.realkernels.make_expected --large where gcc is")
    compared = sum(a.size for a in got)
    if hashlib.sha256(output_bytes(got)).hexdigest() == recorded["sha256"]:
        return Comparison(compared, 0, None)
    return Comparison(compared, 1, "the outputs' SHA-256 differs from the recorded C "
                      "output's (no gcc here to find the elements: at least 1 differs)")
