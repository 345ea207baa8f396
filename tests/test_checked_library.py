"""The program library runs clean under the reference's checked mode with every finding an
error, out-of-bounds accesses included (issue 30): a library program that reads past a
buffer (defined by the IR as a zero read, nearly always a bug) must not pass unnoticed.
Sizes cover the awkward cases: a bin count that is no multiple of the workgroup size, grids
folded into y (more workgroups launched than there are blocks), multi-pass scans."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

import vyre
from vyre.backend import BaseBackend
from vyre.backends.reference.checked import CheckSetting
from vyre.programs import histogram as H
from vyre.programs import matmul as M
from vyre.programs import radix_sort as RS
from vyre.programs import reduce as R
from vyre.programs import scan as S
from vyre.programs import stencil as ST


@pytest.fixture
def checked() -> Iterator[BaseBackend]:
    be = vyre.get_backend("reference", check=CheckSetting(mode="error", bounds="error"))
    try:
        yield be
    finally:
        be.close()


def _ok(be: BaseBackend) -> None:
    report = be.last_check_report  # type: ignore[attr-defined]
    assert report is not None and report.ok, str(report)


@pytest.mark.parametrize("nbins", [5, 100, 300])       # 300: two rounds of 256, the last partial
def test_histogram_shared_bins_not_a_multiple_of_the_workgroup(checked: BaseBackend,
                                                               nbins: int) -> None:
    x = np.random.default_rng(nbins).integers(0, nbins + 7, 3000).astype(np.uint32)
    got = H.histogram_host(checked, x, nbins)
    np.testing.assert_array_equal(got, np.bincount(x[x < nbins], minlength=nbins))
    _ok(checked)


def test_histogram_strided_and_float(checked: BaseBackend) -> None:
    xf = np.random.default_rng(1).standard_normal(5000).astype(np.float32)
    got = H.histogram_host(checked, xf, 70, lo=-4.0, scale=8.0, workgroup_size=64,
                           per_thread=2, max_groups=3)
    np.testing.assert_array_equal(got, H.histogram_reference(xf, 70, lo=-4.0, scale=8.0))
    _ok(checked)


@pytest.mark.parametrize("inclusive", [True, False])
def test_scan_multi_pass_with_a_folded_grid(checked: BaseBackend, inclusive: bool) -> None:
    x = np.random.default_rng(2).integers(0, 9, 9000).astype(np.uint32)
    # max_per_dim=3 folds the block grid into y: more workgroups than blocks, so the last
    # ones have no block (and no carry-in offset) at all
    got = S.scan_host(checked, x, inclusive, workgroup_size=64, per_thread=2, max_per_dim=3)
    want = np.cumsum(x, dtype=np.uint32)
    np.testing.assert_array_equal(got, want if inclusive else np.concatenate(([0], want[:-1])))
    _ok(checked)


def test_reduce_compact_sort(checked: BaseBackend) -> None:
    x = np.random.default_rng(3).integers(0, 1000, 5000).astype(np.uint32)
    total, _ = R.reduce_host(checked, x, "sum")
    assert int(total) == int(x.sum(dtype=np.uint32))
    _ok(checked)
    _, at = R.reduce_host(checked, x, "argmax")
    assert at == int(np.argmax(x))
    _ok(checked)
    np.testing.assert_array_equal(S.compact_host(checked, x % 3), (x % 3)[x % 3 != 0])
    _ok(checked)
    keys, _ = RS.radix_sort_host(checked, x[:1500])
    np.testing.assert_array_equal(keys, np.sort(x[:1500]))
    _ok(checked)
    vals = np.arange(1500, dtype=np.uint32)
    keys, moved = RS.radix_sort_host(checked, x[:1500], vals)
    order = np.argsort(x[:1500], kind="stable")
    np.testing.assert_array_equal(keys, x[:1500][order])
    np.testing.assert_array_equal(moved, vals[order])
    _ok(checked)
    pos = S.compact_indices_host(checked, x % 3)[1]
    np.testing.assert_array_equal(pos, np.flatnonzero(x % 3))
    _ok(checked)


def test_matmul_and_stencil(checked: BaseBackend) -> None:
    rng = np.random.default_rng(4)
    a = rng.standard_normal((37, 29)).astype(np.float32)
    b = rng.standard_normal((29, 41)).astype(np.float32)
    np.testing.assert_array_equal(M.matmul_host(checked, a, b), M.matmul_reference(a, b))
    _ok(checked)
    g = rng.standard_normal((19, 23)).astype(np.float32)
    plain = vyre.get_backend("reference")
    try:
        want = ST.stencil_host(plain, g, steps=2)
    finally:
        plain.close()
    np.testing.assert_array_equal(ST.stencil_host(checked, g, steps=2), want)
    _ok(checked)
