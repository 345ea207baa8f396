"""Register-blocked matmul and the 2-D five-point stencil on every available backend:
bit-exact against the reference and against NumPy evaluating the kernel's own operation
order (fma per term); matmul also within K * 2^-24 * (|A| @ |B|) of a float64 product.
Shapes include 0, 1 and non-multiples of the tile; small tiles give several workgroups per
side and several K steps."""

from __future__ import annotations

import numpy as np
import pytest

from vyre.backend import BaseBackend
from vyre.programs import matmul as MM
from vyre.programs import stencil as ST


@pytest.mark.parametrize(
    ("m", "k", "n"), [(1, 1, 1), (16, 16, 16), (37, 29, 41), (5, 70, 3), (33, 0, 17), (0, 4, 4)]
)
def test_matmul(backend: BaseBackend, reference: BaseBackend, m: int, k: int, n: int) -> None:
    rng = np.random.default_rng(m * 1000 + k * 10 + n)
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    got = MM.matmul_host(backend, a, b)
    np.testing.assert_array_equal(got, MM.matmul_host(reference, a, b))
    np.testing.assert_array_equal(got, MM.matmul_reference(a, b))  # same order: exact
    exact = a.astype(np.float64) @ b.astype(np.float64)
    assert (np.abs(got - exact) <= MM.matmul_error_bound(a, b)).all()


SMALL_TILES: list[dict[str, object]] = [
    {"block": 32, "per_thread": 4, "block_k": 8},
    {"block": 16, "per_thread": 2, "block_k": 4},
    {"block": (32, 64), "per_thread": (4, 8), "block_k": 8},  # wider than tall
    {"block": (64, 32), "per_thread": (8, 4), "block_k": 16},  # taller than wide
]


@pytest.mark.parametrize("tiles", SMALL_TILES, ids=["32x4x8", "16x2x4", "32x64_4x8x8",
                                                     "64x32_8x4x16"])
@pytest.mark.parametrize(("m", "k", "n"), [(70, 45, 37), (16, 16, 16), (3, 9, 65)])
def test_matmul_small_tiles(backend: BaseBackend, reference: BaseBackend,
                            tiles: dict[str, int], m: int, k: int, n: int) -> None:
    """Several workgroups per side and several K steps, edges in every direction."""
    rng = np.random.default_rng(m * 7 + k * 3 + n)
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    got = MM.matmul_host(backend, a, b, **tiles)
    np.testing.assert_array_equal(got, MM.matmul_host(reference, a, b, **tiles))
    np.testing.assert_array_equal(got, MM.matmul_reference(a, b))  # same order: exact
    exact = a.astype(np.float64) @ b.astype(np.float64)
    assert (np.abs(got - exact) <= MM.matmul_error_bound(a, b)).all()


@pytest.mark.parametrize(("m", "k", "n"), [(70, 48, 36), (33, 45, 65)])
def test_matmul_split_edge_loads_same_bits(backend: BaseBackend, m: int, k: int, n: int) -> None:
    """The kernel that reads runs wholly inside A / B without per-element tests (the
    default) and the one that tests every element give the same bits: K a multiple of
    the run (whole runs, aligned vectors) and not (partial runs, misaligned rows)."""
    rng = np.random.default_rng(m + k + n)
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    want = MM.matmul_reference(a, b)
    for tiles in ({"block": 32, "per_thread": 4, "block_k": 8},
                  {"block": 32, "per_thread": 4, "block_k": 16}):
        for split in (True, False):
            got = MM.matmul_host(backend, a, b, split=split, **tiles)
            np.testing.assert_array_equal(got, want, err_msg=f"{tiles} split={split}")


def test_matmul_uses_the_backends_tuned_tiles(backend: BaseBackend,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """matmul_host without a shape takes tiles_for(backend) (TUNED by backend kind, else
    Tiles()); a rectangular tuned shape gives the same bits."""
    assert MM.tiles_for(backend) == MM.TUNED.get(backend.kind, MM.Tiles())
    tuned = MM.Tiles((32, 64), (4, 8), 16, True)
    monkeypatch.setitem(MM.TUNED, backend.kind, tuned)
    assert MM.tiles_for(backend) == tuned
    rng = np.random.default_rng(9)
    a = rng.standard_normal((70, 50)).astype(np.float32)
    b = rng.standard_normal((50, 90)).astype(np.float32)
    np.testing.assert_array_equal(MM.matmul_host(backend, a, b), MM.matmul_reference(a, b))


def test_matmul_special_values(backend: BaseBackend, reference: BaseBackend) -> None:
    """inf / nan / huge products propagate the same way on every backend (fma per term)."""
    rng = np.random.default_rng(5)
    a = rng.standard_normal((20, 30)).astype(np.float32)
    b = rng.standard_normal((30, 9)).astype(np.float32)
    a[1, 2], a[3, 4], b[5, 6], a[7, 8] = np.inf, np.nan, -np.inf, 3e38
    got = MM.matmul_host(backend, a, b)
    np.testing.assert_array_equal(got, MM.matmul_host(reference, a, b))
    np.testing.assert_array_equal(got, MM.matmul_reference(a, b))


def test_matmul_rejects_bad_tiles() -> None:
    with pytest.raises(ValueError, match="power of two"):
        MM.matmul_program(block=48)
    with pytest.raises(ValueError, match="power of two"):
        MM.matmul_program(block=(64, 96))
    with pytest.raises(ValueError, match="at most 1024"):
        MM.matmul_program(block=128, per_thread=2)
    with pytest.raises(ValueError, match="more than the shorter side"):
        MM.matmul_program(block=(16, 128), per_thread=(4, 8))


def test_matmul_deterministic(backend: BaseBackend) -> None:
    rng = np.random.default_rng(1)
    a = rng.standard_normal((50, 64)).astype(np.float32)
    b = rng.standard_normal((64, 20)).astype(np.float32)
    assert MM.matmul_host(backend, a, b).tobytes() == MM.matmul_host(backend, a, b).tobytes()


@pytest.mark.parametrize("boundary", ST.BOUNDARIES)
@pytest.mark.parametrize(("h", "w"), [(1, 1), (1, 7), (17, 33), (40, 16)])
def test_stencil(backend: BaseBackend, reference: BaseBackend, boundary: str, h: int,
                 w: int) -> None:
    u = np.random.default_rng(h * 100 + w).standard_normal((h, w)).astype(np.float32)
    got = ST.stencil_host(backend, u, 1, ST.LAPLACIAN, boundary)
    np.testing.assert_array_equal(got, ST.stencil_host(reference, u, 1, ST.LAPLACIAN, boundary))
    np.testing.assert_array_equal(got, ST.stencil_reference(u, ST.LAPLACIAN, boundary))


@pytest.mark.parametrize("steps", [0, 1, 4, 5])
@pytest.mark.parametrize("use_pipeline", [False, None])
def test_stencil_iterated(backend: BaseBackend, steps: int, use_pipeline: bool | None) -> None:
    u = np.random.default_rng(steps).standard_normal((23, 31)).astype(np.float32)
    got = ST.stencil_host(backend, u, steps, ST.BLUR, "zero", use_pipeline)
    np.testing.assert_array_equal(got, ST.stencil_reference(u, ST.BLUR, "zero", steps))
