"""The cases `vyre demo` runs: each runs one standard program (or multi-pass driver) on a
backend from fixed-seed host inputs and returns its named host outputs, so the CLI can
compare every backend with the reference.

Sizes are moderate so the reference backend finishes each in about a second. Every case
here is bit-exact across backends (fixed operation order, no fma, no float atomics), so the
tolerance is exact for every backend kind; it still goes through `tolerance_for` so a
backend with looser float rules would be held to its stated rule. This module must never
pick a backend itself or print anything.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from vyre.interface import Backend
from vyre.ir.compare import Tolerance, tolerance_for
from vyre.ir.nodes import Program

from . import elementwise, histogram, matmul, radix_onesweep, radix_sort, reduce, scan
from ._common import f32, read_elems, upload

SEED = 20251122


@dataclass(frozen=True)
class DemoCase:
    name: str  # e.g. "saxpy 1M f32"
    run: Callable[[Backend], dict[str, np.ndarray]]  # fixed-seed inputs -> host outputs
    tolerance: Callable[[str], Tolerance]  # by backend kind ("reference", "wgpu", "cuda")


def _rng(salt: int) -> np.random.Generator:
    return np.random.default_rng(SEED + salt)


def _tol(*programs: Program) -> Callable[[str], Tolerance]:
    def tol(kind: str) -> Tolerance:
        rules = [tolerance_for(p, kind) for p in programs]
        return max(rules, key=lambda t: (t.ulps, t.atol, t.rtol))

    return tol


def _saxpy(backend: Backend) -> dict[str, np.ndarray]:
    n = 1 << 20
    rng = _rng(1)
    x = rng.standard_normal(n).astype(np.float32)
    y = rng.standard_normal(n).astype(np.float32)
    xb, yb = upload(backend, x, "x"), upload(backend, y, "y")
    try:
        elementwise.run_elementwise(backend, elementwise.saxpy(f32), {"x": xb}, {"y": yb}, n,
                                    a=2.5)
        return {"y": read_elems(backend, yb, f32, n)}
    finally:
        backend.free(xb)
        backend.free(yb)


def _sum(backend: Backend) -> dict[str, np.ndarray]:
    x = _rng(2).standard_normal(1 << 20).astype(np.float32)
    total, _ = reduce.reduce_host(backend, x, "sum")
    value, index = reduce.reduce_host(backend, x, "argmax")
    return {
        "sum": np.array([total], dtype=np.float32),
        "max": np.array([value], dtype=np.float32),
        "argmax": np.array([index], dtype=np.uint32),
    }


def _scan(backend: Backend) -> dict[str, np.ndarray]:
    x = _rng(3).integers(0, 1000, 1 << 20).astype(np.uint32)
    f = _rng(4).standard_normal(1 << 16).astype(np.float32)
    return {
        "inclusive_u32": scan.scan_host(backend, x, inclusive=True),
        "exclusive_f32": scan.scan_host(backend, f, inclusive=False),
    }


def _histogram(backend: Backend) -> dict[str, np.ndarray]:
    x = _rng(5).standard_normal(1 << 20).astype(np.float32)
    return {"bins": histogram.histogram_host(backend, x, 256, lo=-4.0, scale=32.0)}


def _radix_sort(backend: Backend) -> dict[str, np.ndarray]:
    rng = _rng(6)
    keys = rng.integers(0, 1 << 16, 1 << 18).astype(np.uint32)  # many duplicate keys
    values = np.arange(keys.size, dtype=np.uint32)
    k, v = radix_sort.radix_sort_host(backend, keys, values)
    assert v is not None
    return {"keys": k, "values": v}


def _matmul(backend: Backend) -> dict[str, np.ndarray]:
    rng = _rng(7)
    a = rng.standard_normal((200, 300)).astype(np.float32)
    b = rng.standard_normal((300, 250)).astype(np.float32)
    return {"c": matmul.matmul_host(backend, a, b)}


def demo_cases() -> list[DemoCase]:
    """The standard demo: saxpy, reduction, scan, histogram, radix sort, matmul."""
    return [
        DemoCase("saxpy 1M f32", _saxpy, _tol(elementwise.saxpy(f32))),
        DemoCase("sum + argmax 1M f32", _sum,
                 _tol(reduce.reduce_program("sum", f32),
                      reduce.arg_reduce_program("argmax", f32, True))),
        DemoCase("prefix scan 1M u32 + 64K f32", _scan,
                 _tol(scan.scan_block_program(f32, False))),
        DemoCase("histogram 1M f32 -> 256 bins", _histogram,
                 _tol(histogram.histogram_program(256, f32))),
        DemoCase("radix sort 256K u32 key-value", _radix_sort,
                 _tol(radix_onesweep.onesweep_program(True, *radix_sort.UNTUNED[True]))),
        DemoCase("matmul 200x300 @ 300x250 f32", _matmul, _tol(matmul.matmul_program())),
    ]
