"""Histogram and radix sort on every available backend vs the reference and NumPy (all
bit-exact): sizes 0, 1, non-multiples, many blocks (small blocks, folded grids), stable
key-value sorting with duplicate keys, determinism."""

from __future__ import annotations

import numpy as np
import pytest

from vyre.backend import BaseBackend
from vyre.programs import histogram as H
from vyre.programs import radix_sort as RS

SIZES = [0, 1, 255, 1000, 5000]



# ------------------------------------------------------------------ histogram


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("nbins", [1, 100, 300])
def test_histogram_u32(backend: BaseBackend, reference: BaseBackend, n: int, nbins: int) -> None:
    x = np.random.default_rng(n + nbins).integers(0, nbins + 20, n).astype(np.uint32)
    kw = {"workgroup_size": 64, "per_thread": 2, "max_per_dim": 5} if n == 5000 else {}
    got = H.histogram_host(backend, x, nbins, **kw)
    np.testing.assert_array_equal(got, H.histogram_host(reference, x, nbins, **kw))
    np.testing.assert_array_equal(got, H.histogram_reference(x, nbins))
    assert got.sum() == (x < nbins).sum()


def test_histogram_i32_and_f32(backend: BaseBackend, reference: BaseBackend) -> None:
    rng = np.random.default_rng(3)
    xi = rng.integers(-50, 80, 4000).astype(np.int32)
    got = H.histogram_host(backend, xi, 64)
    np.testing.assert_array_equal(got, H.histogram_reference(xi, 64))
    xf = rng.standard_normal(4000).astype(np.float32)
    xf[:3] = [np.nan, np.inf, -np.inf]
    got = H.histogram_host(backend, xf, 128, lo=-3.0, scale=128 / 6.0)
    np.testing.assert_array_equal(got, H.histogram_host(reference, xf, 128, lo=-3.0,
                                                         scale=128 / 6.0))
    np.testing.assert_array_equal(got, H.histogram_reference(xf, 128, -3.0, np.float32(128 / 6.0)))


def test_histogram_accumulates_on_device(backend: BaseBackend) -> None:
    from vyre.programs._common import alloc, read_elems, u32, upload

    x = np.arange(1000, dtype=np.uint32) % 10
    src = upload(backend, x, "src")
    bins = alloc(backend, u32, 10, "bins")
    try:
        H.histogram_device(backend, src, 1000, bins, 10)
        H.histogram_device(backend, src, 1000, bins, 10, accumulate=True)
        np.testing.assert_array_equal(read_elems(backend, bins, u32, 10), np.full(10, 200))
    finally:
        backend.free(src)
        backend.free(bins)


# ------------------------------------------------------------------ radix sort


@pytest.mark.parametrize("n", SIZES)
def test_sort_keys(backend: BaseBackend, reference: BaseBackend, n: int) -> None:
    keys = np.random.default_rng(n).integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32)
    if n > 4:
        keys[:4] = [0, 0xFFFFFFFF, 0x80000000, 0]
    kw = {"workgroup_size": 16, "per_thread": 4, "max_per_dim": 7} if n == 5000 else {}
    got, _ = RS.radix_sort_host(backend, keys, **kw)
    exp, _ = RS.radix_sort_host(reference, keys, **kw)
    np.testing.assert_array_equal(got, exp)
    np.testing.assert_array_equal(got, np.sort(keys))


@pytest.mark.parametrize("n", [1, 1000, 5000])
def test_sort_key_value_stable(backend: BaseBackend, reference: BaseBackend, n: int) -> None:
    rng = np.random.default_rng(n + 1)
    keys = rng.integers(0, 40, n).astype(np.uint32) * np.uint32(0x01010101)  # dupes, all digits
    values = rng.standard_normal(n).astype(np.float32)  # any 32-bit payload, moved bit-exactly
    order = np.argsort(keys, kind="stable")
    got_k, got_v = RS.radix_sort_host(backend, keys, values)
    exp_k, exp_v = RS.radix_sort_host(reference, keys, values)
    np.testing.assert_array_equal(got_k, exp_k)
    np.testing.assert_array_equal(got_k, keys[order])
    assert got_v is not None and exp_v is not None
    assert got_v.tobytes() == values[order].tobytes()
    assert got_v.tobytes() == exp_v.tobytes()
    idx = np.arange(n, dtype=np.uint32)
    _, got_i = RS.radix_sort_host(backend, keys, idx)
    np.testing.assert_array_equal(got_i, order.astype(np.uint32))


def test_sort_low_bits_odd_passes(backend: BaseBackend) -> None:
    """key_bits=12 (3 passes, odd): sorted by the low 12 bits, stable, result in place."""
    rng = np.random.default_rng(5)
    keys = rng.integers(0, 2**32, 3000, dtype=np.uint64).astype(np.uint32)
    idx = np.arange(3000, dtype=np.uint32)
    got_k, got_i = RS.radix_sort_host(backend, keys, idx, key_bits=12)
    order = np.argsort(keys & 0xFFF, kind="stable")
    np.testing.assert_array_equal(got_k, keys[order])
    np.testing.assert_array_equal(got_i, order.astype(np.uint32))


def test_sort_deterministic_and_pipeline_modes(backend: BaseBackend) -> None:
    keys = np.random.default_rng(6).integers(0, 500, 4000).astype(np.uint32)
    idx = np.arange(4000, dtype=np.uint32)
    runs = [RS.radix_sort_host(backend, keys, idx, use_pipeline=p) for p in (False, None, None)]
    for k, v in runs[1:]:
        assert k.tobytes() == runs[0][0].tobytes()
        assert v is not None and v.tobytes() == runs[0][1].tobytes()


@pytest.mark.parametrize("dtype", [np.int32, np.float32])
@pytest.mark.parametrize("n", [0, 1, 3000])
def test_sort_signed_and_float_keys(backend: BaseBackend, reference: BaseBackend,
                                    dtype: type, n: int) -> None:
    rng = np.random.default_rng(n + 7)
    if dtype is np.int32:
        keys = rng.integers(-(2**31), 2**31, n, dtype=np.int64).astype(np.int32)
        if n > 3:
            keys[:3] = [-(2**31), 2**31 - 1, 0]
    else:
        keys = (rng.standard_normal(n) * 1e3).astype(np.float32)
        keys[::7] = np.round(keys[::7])  # duplicates
        if n > 4:
            keys[:4] = np.array([np.inf, -np.inf, 0.0, 1e-45], dtype=np.float32)
        keys[keys == 0] = 0.0  # -0.0 sorts before +0.0 here; NumPy calls them equal
    idx = np.arange(n, dtype=np.uint32)
    got_k, got_i = RS.radix_sort_host(backend, keys, idx)
    exp_k, exp_i = RS.radix_sort_host(reference, keys, idx)
    order = np.argsort(keys, kind="stable")
    assert got_k.dtype == keys.dtype
    np.testing.assert_array_equal(got_k, keys[order])
    np.testing.assert_array_equal(got_i, order.astype(np.uint32))
    assert got_k.tobytes() == exp_k.tobytes()
    assert got_i is not None and exp_i is not None and got_i.tobytes() == exp_i.tobytes()
