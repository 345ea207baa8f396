"""Scan and histogram kernel shapes (issue 17.1).

Scans: the documented f32 order (vyre/programs/scan.py's docstring) against a NumPy model
of it, bit for bit; every backend against the reference for sizes around the block, 0 and
1, u32 / i32 / f32, inclusive and exclusive, several workgroup shapes. Histograms: every
shape (loads first, strided over blocks, folded grids, each backend's default) counts
exactly like NumPy on every backend.
"""

from __future__ import annotations

import numpy as np
import pytest

from vyre.backend import BaseBackend
from vyre.backends.reference import ReferenceBackend
from vyre.ir.types import ScalarType
from vyre.programs import histogram as H
from vyre.programs import scan as S
from vyre.tools.testing import EXACT, assert_agree

f32, i32, u32 = ScalarType.F32, ScalarType.I32, ScalarType.U32


def _data(ty: ScalarType, n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if ty is f32:  # mixed magnitudes and signs: every reassociation shows in the bits
        return (rng.standard_normal(n) * 10.0 ** rng.integers(-3, 4, n)).astype(np.float32)
    return rng.integers(-(2**31) if ty is i32 else 0, 2**31, n).astype(ty.numpy)


def _block_model(x: np.ndarray, wg: int, per: int, inclusive: bool) -> np.ndarray:
    """One block (x.size <= wg * per) scanned in the documented order, in float32 NumPy:
    runs summed left to right, Hillis-Steele over the run totals, each run rewritten from
    0 + the scan at t-1."""
    f = np.float32
    runs = np.zeros(wg * per, np.float32)
    runs[: x.size] = x
    runs = runs.reshape(wg, per)
    s = [runs[t, 0] for t in range(wg)]
    for t in range(wg):
        for j in range(1, per):
            s[t] = f(s[t] + runs[t, j])
    d = 1
    while d < wg:  # all reads before the writes
        s = [f(s[t - d] + s[t]) if t >= d else s[t] for t in range(wg)]
        d *= 2
    out = np.zeros(wg * per, np.float32)
    for t in range(wg):
        acc = f(0.0)
        if t:
            acc = f(acc + s[t - 1])
        for j in range(per):
            if inclusive:
                acc = f(acc + runs[t, j])
                out[t * per + j] = acc
            else:
                out[t * per + j] = acc
                acc = f(acc + runs[t, j])
    return out[: x.size]


@pytest.mark.parametrize("inclusive", [True, False])
@pytest.mark.parametrize("wg,per,n", [(64, 3, 192), (64, 3, 150), (16, 2, 31), (128, 1, 128),
                                      (256, 2, 300)])
def test_block_order_is_the_documented_one(backend: BaseBackend, inclusive: bool, wg: int,
                                           per: int, n: int) -> None:
    x = _data(f32, n, n + wg)
    got = S.scan_host(backend, x, inclusive, workgroup_size=wg, per_thread=per)
    assert got.tobytes() == _block_model(x, wg, per, inclusive).tobytes()


@pytest.mark.parametrize("ty", [u32, i32, f32])
@pytest.mark.parametrize("inclusive", [True, False])
@pytest.mark.parametrize("n", [0, 1, 31, 32, 33, 4095, 4096, 4097, 9000])
def test_scan_matches_reference(backend: BaseBackend, reference: BaseBackend,
                                ty: ScalarType, inclusive: bool, n: int) -> None:
    """The default shape (4096-element blocks) around its block size, 0 and 1."""
    x = _data(ty, n, n + 3)
    got = S.scan_host(backend, x, inclusive)
    assert_agree(got, S.scan_host(reference, x, inclusive), EXACT,
                 f"scan {ty} n={n} on {backend.id}")
    if ty.is_int:
        c = np.cumsum(x, dtype=ty.numpy)
        np.testing.assert_array_equal(got, c if inclusive else c - x)


@pytest.mark.parametrize("wg,per", [(32, 1), (64, 5), (128, 4), (512, 2), (1024, 1)])
def test_scan_shapes_match_reference(backend: BaseBackend, reference: BaseBackend,
                                     wg: int, per: int) -> None:
    n = wg * per * 3 + wg // 2 + 1  # two levels, a ragged last block
    for ty in (f32, i32, u32):
        x = _data(ty, n, wg + per)
        kw = {"workgroup_size": wg, "per_thread": per}
        got = S.scan_host(backend, x, False, **kw)
        assert_agree(got, S.scan_host(reference, x, False, **kw), EXACT,
                     f"scan {ty} {wg}x{per} on {backend.id}")


# ------------------------------------------------------------------ histogram

HIST_SHAPES = [
    {},  # the backend's default
    {"workgroup_size": 256, "per_thread": 16},
    {"workgroup_size": 64, "per_thread": 3, "max_groups": 5},  # strided: 5 workgroups
    {"workgroup_size": 32, "per_thread": 2, "max_groups": 7, "max_per_dim": 3},  # folded
    {"workgroup_size": 32, "per_thread": 1, "max_groups": 1000},  # more groups than blocks
]


@pytest.mark.parametrize("shape", HIST_SHAPES)
@pytest.mark.parametrize("ty", [u32, i32, f32])
@pytest.mark.parametrize("n", [0, 1, 1000, 4097])
def test_histogram_shapes(backend: BaseBackend, reference: BaseBackend, shape: dict[str, int],
                          ty: ScalarType, n: int) -> None:
    rng = np.random.default_rng(n)
    nbins = 300
    kw: dict[str, float] = dict(shape)
    if ty is f32:
        x = rng.normal(0.0, 2.0, n).astype(np.float32)
        kw.update(lo=-3.0, scale=nbins / 6.0)
        want = H.histogram_reference(x, nbins, -3.0, np.float32(nbins / 6.0))
    else:
        x = rng.integers(-20 if ty is i32 else 0, nbins + 20, n).astype(ty.numpy)
        want = H.histogram_reference(x, nbins)
    got = H.histogram_host(backend, x, nbins, **kw)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(got, H.histogram_host(reference, x, nbins, **kw))


def test_histogram_strided_is_used() -> None:
    """max_groups below the block count makes the strided kernel, with `stride` = G."""
    ref = ReferenceBackend()
    try:
        src = ref.allocate_device_buffer(4 * 10_000)
        bins = ref.allocate_device_buffer(4 * 16)
        plan = H.plan_histogram(ref, src, 10_000, bins, 16, workgroup_size=64, per_thread=2,
                                max_groups=9)
        prog, cfg = plan.steps[-1].program, plan.steps[-1].config
        assert prog.name.endswith("_strided") and cfg.params["stride"] == 9
        plain = H.plan_histogram(ref, src, 100, bins, 16, workgroup_size=64, per_thread=2,
                                 max_groups=9)
        assert not plain.steps[-1].program.name.endswith("_strided")  # 1 block < 9
    finally:
        ref.close()
