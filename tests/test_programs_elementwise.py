"""Elementwise standard programs on every available backend vs the reference and NumPy:
saxpy / axpby, fused maps, conversions, fill / iota, gather / scatter; sizes 0, 1,
non-multiples of the workgroup and folded (> max_per_dim workgroups) grids."""

from __future__ import annotations

import numpy as np
import pytest

from vyre.backend import BaseBackend
from vyre.builder import max_, select
from vyre.errors import UnsupportedFeature
from vyre.ir.nodes import Program
from vyre.ir.types import ScalarType
from vyre.programs import elementwise as E
from vyre.programs._common import alloc, read_elems, upload
from vyre.tools.testing import assert_agree, random_array, tolerance_for

f32, i32, u32, f16 = ScalarType.F32, ScalarType.I32, ScalarType.U32, ScalarType.F16
SIZES = [0, 1, 255, 1000]



def run(
    be: BaseBackend, prog: Program, ins: dict[str, np.ndarray], outs: dict[str, np.ndarray],
    n: int, max_per_dim: int = 65535, **params: object,
) -> dict[str, np.ndarray]:
    """Upload, run the elementwise program over n elements, read back every output."""
    bufs = {k: upload(be, v, k) for k, v in {**ins, **outs}.items()}
    try:
        E.run_elementwise(be, prog, {k: bufs[k] for k in ins}, {k: bufs[k] for k in outs}, n,
                          max_per_dim, **params)
        return {k: read_elems(be, bufs[k], ScalarType.from_numpy(v.dtype), v.size)
                for k, v in outs.items()}
    finally:
        for buf in bufs.values():
            be.free(buf)


def both(
    be: BaseBackend, ref: BaseBackend, prog: Program, ins: dict[str, np.ndarray],
    outs: dict[str, np.ndarray], n: int, **params: object,
) -> dict[str, np.ndarray]:
    """Run on `b` and on the reference; assert they agree; return b's outputs."""
    got = run(be, prog, ins, outs, n, **params)  # type: ignore[arg-type]
    exp = run(ref, prog, ins, outs, n, **params)  # type: ignore[arg-type]
    for k in outs:
        assert_agree(got[k], exp[k], tolerance_for(prog, be.kind), f"{prog.name} {k} on {be.id}")
    return got


@pytest.mark.parametrize("n", SIZES)
def test_saxpy(backend: BaseBackend, reference: BaseBackend, n: int) -> None:
    rng = np.random.default_rng(n)
    x = rng.standard_normal(n).astype(np.float32)
    y = rng.standard_normal(n).astype(np.float32)
    got = both(backend, reference, E.saxpy(f32), {"x": x}, {"y": y.copy()}, n, a=1.75)
    np.testing.assert_array_equal(got["y"], np.float32(1.75) * x + y)  # exact: no fma


@pytest.mark.parametrize("ty", [f32, i32, u32])
def test_axpby(backend: BaseBackend, reference: BaseBackend, ty: ScalarType) -> None:
    rng = np.random.default_rng(1)
    n = 777
    x, y = random_array(rng, ty, n), random_array(rng, ty, n)
    a, c = (ty.numpy.type(3), ty.numpy.type(5))
    got = both(backend, reference, E.axpby(ty), {"x": x, "y": y},
               {"out": np.zeros(n, ty.numpy)}, n, a=a.item(), b=c.item())
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(got["out"], a * x + c * y)


def test_map_fused_expression(backend: BaseBackend, reference: BaseBackend) -> None:
    rng = np.random.default_rng(2)
    n = 1000
    x = rng.standard_normal(n).astype(np.float32)
    y = rng.standard_normal(n).astype(np.float32)
    prog = E.map_program(lambda a, b, s: select(a > b, a * s, max_(b, 0.0) - a), [f32, f32],
                         f32, "relu_mix", params=[("s", f32)])
    got = both(backend, reference, prog, {"x0": x, "x1": y},
               {"out": np.zeros(n, np.float32)}, n, s=0.5)
    exp = np.where(x > y, x * np.float32(0.5), np.maximum(y, np.float32(0)) - x)
    np.testing.assert_array_equal(got["out"], exp)


@pytest.mark.parametrize(
    ("src", "dst"), [(f32, i32), (f32, u32), (i32, f32), (u32, f32), (f32, f16), (f16, f32)]
)
def test_convert(backend: BaseBackend, reference: BaseBackend, src: ScalarType,
                 dst: ScalarType) -> None:
    prog = E.convert(src, dst)
    if not backend.supports("f16") and f16 in (src, dst):
        with pytest.raises(UnsupportedFeature):
            run(backend, prog, {"x0": np.zeros(1, src.numpy)}, {"out": np.zeros(1, dst.numpy)}, 1)
        return
    rng = np.random.default_rng(3)
    n = 513
    x = random_array(rng, src, n)
    got = both(backend, reference, prog, {"x0": x}, {"out": np.zeros(n, dst.numpy)}, n)
    if src.is_float and dst.is_int:  # NumPy only defines in-range, non-NaN conversions
        info = np.iinfo(dst.numpy)
        ok = np.isfinite(x) & (x > info.min) & (x < info.max)
        np.testing.assert_array_equal(got["out"][ok], x[ok].astype(dst.numpy))
        assert (got["out"][np.isnan(x)] == 0).all()
    else:
        np.testing.assert_array_equal(got["out"], x.astype(dst.numpy))


@pytest.mark.parametrize("n", SIZES)
def test_fill_and_iota(backend: BaseBackend, reference: BaseBackend, n: int) -> None:
    got = both(backend, reference, E.fill(i32), {}, {"out": np.ones(n, np.int32)}, n, value=-7)
    np.testing.assert_array_equal(got["out"], np.full(n, -7, np.int32))
    got = both(backend, reference, E.iota(u32), {}, {"out": np.zeros(n, np.uint32)}, n,
               start=10, step=3)
    np.testing.assert_array_equal(got["out"], (10 + 3 * np.arange(n)).astype(np.uint32))
    got = both(backend, reference, E.iota(f32), {}, {"out": np.zeros(n, np.float32)}, n,
               start=0.5, step=0.25)
    exp = np.float32(0.5) + np.arange(n).astype(np.float32) * np.float32(0.25)
    np.testing.assert_array_equal(got["out"], exp)


@pytest.mark.parametrize("n", SIZES)
def test_gather_scatter(backend: BaseBackend, reference: BaseBackend, n: int) -> None:
    rng = np.random.default_rng(4)
    src = rng.standard_normal(n).astype(np.float32)
    perm = rng.permutation(n).astype(np.uint32)
    idx = perm.copy()
    if n > 1:
        idx[0] = n + 5  # out of range: gather reads 0
    got = both(backend, reference, E.gather(f32), {"src": src, "index": idx},
               {"out": np.full(n, 9, np.float32)}, n)
    exp = np.where(idx < n, src[np.minimum(idx, max(n - 1, 0))], 0).astype(np.float32)
    np.testing.assert_array_equal(got["out"], exp)
    got = both(backend, reference, E.scatter(f32), {"src": src, "index": perm},
               {"out": np.zeros(n, np.float32)}, n)
    exp = np.zeros(n, np.float32)
    exp[perm] = src
    np.testing.assert_array_equal(got["out"], exp)


def test_folded_grid(backend: BaseBackend, reference: BaseBackend) -> None:
    """More workgroups than max_per_dim fold into y; every element is still covered once."""
    n = 5000  # 20 workgroups of 256, folded at 3 per row -> grid (3, 7)
    x = np.arange(n, dtype=np.float32)
    y = np.ones(n, np.float32)
    for b in (backend, reference):
        got = run(b, E.saxpy(f32), {"x": x}, {"y": y.copy()}, n, max_per_dim=3, a=2.0)
        np.testing.assert_array_equal(got["y"], 2 * x + 1)


def test_over_65535_workgroups(backend: BaseBackend) -> None:
    """A real fold past the 65535-workgroup limit (64-wide workgroups, 4.2M elements)."""
    if backend.kind == "reference":
        pytest.skip("covered by test_folded_grid on the reference (kept fast)")
    n = 65536 * 64 + 17
    prog = E.iota(u32, 64)
    out = alloc(backend, u32, n, "out")
    try:
        E.run_elementwise(backend, prog, {}, {"out": out}, n, start=1, step=1)
        got = read_elems(backend, out, u32, n)
    finally:
        backend.free(out)
    np.testing.assert_array_equal(got, np.arange(1, n + 1, dtype=np.uint32))
