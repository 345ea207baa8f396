"""vyre.programs.matmul_i8: exact int8 / uint8 -> int32 matrix products, bit-identical on
every backend and to NumPy, wrapping modulo 2^32 at the overflow edge; the CUDA tensor-core
kernel compiled by NVRTC and launched on the stand-in driver with the right grid and
arguments (its results on a GPU: the `cuda` rows of the backend-parametrised tests)."""

from __future__ import annotations

import ctypes
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import vyre
from vyre.backend import BaseBackend
from vyre.programs import matmul_i8 as mi
from vyre.programs.matmul_i8 import (
    LibraryArgumentError,
    matmul_i8_host,
    matmul_i8_reference,
    pack_i8,
    packed_words,
)

SHAPES = [(1, 1, 1), (3, 0, 2), (70, 37, 65), (64, 64, 64), (130, 100, 129), (2, 257, 3)]


def _exact(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """C in Python ints, wrapped to int32 (the definition, independent of NumPy's matmul)."""
    rows = [[sum(int(x) * int(y) for x, y in zip(a[i], b[:, j])) for j in range(b.shape[1])]
            for i in range(a.shape[0])]
    return np.array([[(v + 2**31) % 2**32 - 2**31 for v in r] for r in rows], np.int64).astype(np.int32)


def _random(rng: np.random.Generator, shape: tuple[int, int], dt: Any) -> np.ndarray:
    info = np.iinfo(dt)
    return rng.integers(info.min, info.max + 1, shape).astype(dt)


@pytest.mark.parametrize("dt", [np.int8, np.uint8], ids=["i8", "u8"])
def test_matches_numpy_on_every_backend(backend: BaseBackend, dt: Any) -> None:
    rng = np.random.default_rng(11)
    for m, k, n in SHAPES:
        a, b = _random(rng, (m, k), dt), _random(rng, (k, n), dt)
        got = matmul_i8_host(backend, a, b)
        assert got.dtype == np.int32 and got.shape == (m, n)
        np.testing.assert_array_equal(got, matmul_i8_reference(a, b), err_msg=f"{(m, k, n)}")
    a, b = _random(rng, (9, 13), dt), _random(rng, (13, 7), dt)
    np.testing.assert_array_equal(matmul_i8_host(backend, a, b), _exact(a, b))


def test_the_numpy_reference_wraps() -> None:
    k = 131073  # 131073 * 16384 = 2^31 + 16384: past INT_MAX
    a = np.full((1, k), -128, np.int8)
    b = np.full((k, 2), -128, np.int8)
    b[:, 1] = 127
    got = matmul_i8_reference(a, b)
    assert got.tolist() == [[(k * 16384 + 2**31) % 2**32 - 2**31, -k * 16256]]
    assert got[0, 0] == -(2**31) + 16384


def test_wraps_at_the_overflow_edge(backend: BaseBackend) -> None:
    """K large enough that the int32 sums wrap, both ways, for i8 and u8 (the tensor cores
    on CUDA: `.satfinite` is never asked for, so they wrap too)."""
    if backend.kind == "reference":
        pytest.skip("the reference interprets 32,769 K steps here (about 90 s); its dot4 "
                    "wrap is the conformance case ir_dot4, its matmul_i8 the test above")
    k = 131073
    a = np.full((3, k), -128, np.int8)
    a[2] = 127
    b = np.full((k, 2), -128, np.int8)
    b[:, 1] = 127
    got = matmul_i8_host(backend, a, b)
    wrap = lambda v: (v + 2**31) % 2**32 - 2**31  # noqa: E731
    assert got.tolist() == [[wrap(k * 16384), wrap(-k * 16256)]] * 2 + [
        [wrap(-k * 16256), wrap(k * 16129)]]
    assert got[0, 0] == -(2**31) + 16384  # not INT_MAX: no saturation
    k = 66100  # 66100 * 255^2 > 2^32: the u8 sum wraps all the way round
    ua = np.full((2, k), 255, np.uint8)
    ub = np.full((k, 3), 255, np.uint8)
    got = matmul_i8_host(backend, ua, ub)
    assert (got == k * 65025 - 2**32).all()
    if mi.tensor_cores(backend):  # the Program on CUDA too (dp4a), the same integers
        np.testing.assert_array_equal(matmul_i8_host(backend, ua, ub, kernel="program"), got)


def test_pack_layout() -> None:
    x = np.array([[1, -1, 2, -128, 5]], np.int8)
    p = pack_i8(x)
    assert p.dtype == np.uint32 and p.shape == (1, packed_words(5)) == (1, 4)
    assert p[0].tolist() == [0x80_02_FF_01, 5, 0, 0]
    assert [packed_words(k) for k in (0, 1, 16, 17)] == [0, 4, 4, 8]


def test_argument_errors(reference: BaseBackend) -> None:
    a = np.zeros((2, 3), np.int8)
    with pytest.raises(LibraryArgumentError, match=r"int8 or uint8 matrix, got float32.*astype"):
        matmul_i8_host(reference, a.astype(np.float32), a.T)
    with pytest.raises(LibraryArgumentError, match=r"int8 @ int8 or uint8 @ uint8, got int8 @ uint8"):
        matmul_i8_host(reference, a, a.T.astype(np.uint8))
    with pytest.raises(LibraryArgumentError, match=r"inner dimensions differ: \(2, 3\) @ \(2, 3\)"):
        matmul_i8_host(reference, a, a)
    with pytest.raises(vyre.UnsupportedFeature, match="kernel='program'"):
        matmul_i8_host(reference, a, a.T, kernel="mma")
    with pytest.raises(LibraryArgumentError, match="'auto', 'program', 'mma'"):
        matmul_i8_host(reference, a, a.T, kernel="tensor")  # type: ignore[arg-type]
    assert isinstance(LibraryArgumentError("x"), vyre.BackendError)


def test_tile_knobs_give_the_same_bits(reference: BaseBackend) -> None:
    rng = np.random.default_rng(2)
    a, b = _random(rng, (20, 45), np.int8), _random(rng, (45, 19), np.int8)
    pa, pb = pack_i8(a), pack_i8(np.ascontiguousarray(b.T))
    cfg = mi.matmul_i8_config(20, 19, pa.shape[1], block=16)
    prog = mi.matmul_i8_program(True, block=16, per_thread=2, block_kw=4)
    got = reference.dispatch(prog, {"a": pa, "bt": pb, "c": 20 * 19}, cfg)["c"]
    np.testing.assert_array_equal(got.reshape(20, 19), matmul_i8_reference(a, b))
    with pytest.raises(LibraryArgumentError, match="leave them out for the defaults"):
        mi.matmul_i8_program(True, block=64, per_thread=1)


# ------------------------------------------------------------------ the tensor-core kernel


@pytest.mark.parametrize("signed", [True, False], ids=["s8", "u8"])
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_mma_kernel_compiles(signed: bool, arch: str) -> None:
    from vyre.backends.cuda import compile_source
    from vyre.programs.matmul_i8_cuda import mma_kernel

    kernel = mma_kernel(signed)
    ty = "s8" if signed else "u8"
    assert f"mma.sync.aligned.m16n8k32.row.col.s32.{ty}.{ty}.s32" in kernel.source
    assert "satfinite" not in kernel.source  # saturation would break the wrap
    assert compile_source(kernel.source, arch, name=f"{kernel.name}.cu")


@pytest.fixture
def standin() -> Iterator[Any]:
    pytest.importorskip("cuda.bindings.driver", reason="cuda-bindings is not installed")
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import cuda_standin

    from vyre.backends.cuda import driver as D

    before = D._driver
    fake = cuda_standin.install(frozenset({"cuLaunchKernel", "cuModuleLoadData"}))
    try:
        yield fake
    finally:
        D._driver = before


def test_mma_launch_on_the_standin(standin: Any, tmp_path: Path) -> None:
    """On an sm_90 device, matmul_i8_device launches the tensor-core kernel: 256 threads,
    one block per 128 x 128 tile, arguments (A, Bt, C pointers, M, N, K4); a second call
    loads no new module; kernel='program' launches the generated Program instead."""
    from vyre.backends.cuda.runtime import CudaBackend

    seen: list[tuple[tuple[int, ...], list[int]]] = []
    real_launch = standin.cuLaunchKernel

    def launch(f: Any, gx: int, gy: int, gz: int, bx: int, by: int, bz: int, shm: int,
               stream: Any, params: int, extra: int) -> Any:
        ptrs = (ctypes.c_void_p * 6).from_address(params)
        vals = [ctypes.c_uint64.from_address(p).value for p in ptrs[:3]]
        vals += [ctypes.c_uint32.from_address(p).value for p in ptrs[3:]]
        seen.append(((gx, gy, gz, bx, by, bz), vals))
        return real_launch(f, gx, gy, gz, bx, by, bz, shm, stream, params, extra)

    standin.cuLaunchKernel = launch
    be = CudaBackend(0, cache_dir=str(tmp_path))
    try:
        m, n, k = 300, 129, 70
        k4 = packed_words(k)
        a = be.allocate_device_buffer(m * k4 * 4)
        bt = be.allocate_device_buffer(n * k4 * 4)
        c = be.allocate_device_buffer(m * n * 4)
        mi.matmul_i8_device(be, a, bt, c, m, n, k)
        mi.matmul_i8_device(be, a, bt, c, m, n, k, signed=True)
        assert seen[0] == ((2, 3, 1, 256, 1, 1), [a.ptr, bt.ptr, c.ptr, m, n, k4])
        assert seen[1] == seen[0]
        assert len(standin.calls_of("cuModuleLoadData")) == 1
        mi.matmul_i8_device(be, a, bt, c, m, n, k, kernel="program")
        assert seen[2][0][3] == 256 and seen[2][0][:2] == (3, 5)  # the Program's 64 x 64 tiles
        with pytest.raises(LibraryArgumentError, match="fewer than 300 rows of 24 packed words"):
            mi.matmul_i8_device(be, a, bt, c, m, n, 90)
        be.free(a)
        with pytest.raises(vyre.BufferStateError):
            mi.matmul_i8_device(be, a, bt, c, m, n, k)
        for buf in (bt, c):
            be.free(buf)
    finally:
        be.close()


def _mma_emulated(a_tile_words: np.ndarray, b_tile_words: np.ndarray, signed: bool) -> np.ndarray:
    """PTX mma.m16n8k32 .row.col on fragments as the ISA lays them out: per lane (g, t), A
    regs (g, t), (g + 8, t), (g, t + 4), (g + 8, t + 4) and B regs (t, g), (t + 4, g) in
    k-words of four bytes; returns the 16 x 8 product. `a_tile_words[lane] = [a0..a3]`,
    `b_tile_words[lane] = [b0, b1]`."""
    a = np.zeros((16, 8), np.uint32)  # rows x k-words
    b = np.zeros((8, 8), np.uint32)  # k-words x columns
    for lane in range(32):
        g, t = lane >> 2, lane & 3
        a[g, t], a[g + 8, t], a[g, t + 4], a[g + 8, t + 4] = a_tile_words[lane]
        b[t, g], b[t + 4, g] = b_tile_words[lane]
    dt = np.int8 if signed else np.uint8
    ab = a.view(np.uint8).view(dt).reshape(16, 32).astype(np.int64)  # little-endian bytes
    bb = b.T.copy().view(np.uint8).view(dt).reshape(8, 32).astype(np.int64)
    return ab @ bb.T


def test_mma_kernel_plan_emulated() -> None:
    """The tensor-core kernel's index plan, emulated in NumPy step for step (the staging of
    128-row tiles with zero fill, each lane's 16-byte reads of words 4t .. 4t + 3 standing
    for k-words t and t + 4 of two k32 steps, the fragment layout of the PTX ISA, the
    epilogue), gives A @ B: a check of the plan in matmul_i8_cuda.py, not of the GPU."""
    from vyre.programs import matmul_i8_cuda as mc

    rng = np.random.default_rng(4)
    m, k, n = 140, 70, 129
    for dt in (np.int8, np.uint8):
        a, b = _random(rng, (m, k), dt), _random(rng, (k, n), dt)
        pa, pb = pack_i8(a), pack_i8(np.ascontiguousarray(b.T))
        k4 = pa.shape[1]
        c = np.full((m, n), 7, np.int64)  # every element must be written
        gx, gy, _ = mc.mma_grid(m, n)
        ktiles = -(-k4 // mc.STAGE_WORDS)
        for by in range(gy):
            for bx in range(gx):
                row0, col0 = by * mc.BLOCK_M, bx * mc.BLOCK_N
                span = ktiles * mc.STAGE_WORDS
                sa = np.zeros((mc.BLOCK_M, span), np.uint32)  # all stages side by side
                sb = np.zeros((mc.BLOCK_N, span), np.uint32)
                ra, rb = pa[row0:row0 + mc.BLOCK_M], pb[col0:col0 + mc.BLOCK_N]
                sa[:len(ra), :k4], sb[:len(rb), :k4] = ra, rb
                for warp in range(mc.THREADS // 32):
                    wm, wn = (warp >> 2) * 64, (warp & 3) * 32
                    acc = np.zeros((4, 4, 16, 8), np.int64)
                    lanes = np.arange(32)
                    g, t = lanes >> 2, lanes & 3
                    for kt in range(ktiles):
                        w0 = kt * mc.STAGE_WORDS + 4 * t
                        for i in range(4):
                            r = wm + 16 * i + g
                            for j in range(4):
                                col = wn + 8 * j + g
                                for s in range(2):
                                    af = np.stack([sa[r, w0 + 2 * s], sa[r + 8, w0 + 2 * s],
                                                   sa[r, w0 + 2 * s + 1],
                                                   sa[r + 8, w0 + 2 * s + 1]], 1)
                                    bf = np.stack([sb[col, w0 + 2 * s],
                                                   sb[col, w0 + 2 * s + 1]], 1)
                                    acc[i, j] += _mma_emulated(af, bf, dt == np.int8)
                    for i in range(4):
                        for j in range(4):
                            for lane in range(32):
                                gg, tt = lane >> 2, lane & 3
                                for e in range(4):  # C regs: (g, 2t), (g, 2t+1), (g+8, ...)
                                    rr = row0 + wm + 16 * i + gg + 8 * (e >> 1)
                                    cc = col0 + wn + 8 * j + 2 * tt + (e & 1)
                                    if rr < m and cc < n:
                                        c[rr, cc] = acc[i, j, gg + 8 * (e >> 1), 2 * tt + (e & 1)]
        np.testing.assert_array_equal(c, matmul_i8_reference(a, b).astype(np.int64))


def test_bench_workload(reference: BaseBackend) -> None:
    """The `matmul_i8` bench row: vyre's case and NumPy's run and pass the exact check; a
    wrong element, or a saturated sum, fails it with a sentence."""
    from vyre.tools.bench import workloads as W
    from vyre.tools.bench.peers import NumpyPeer, TorchPeer
    from vyre.tools.bench.vyre_impl import VyreImpl

    data = W.Data(W.QUICK)
    assert "matmul_i8" in W.WORKLOADS and W.metric("matmul_i8", W.QUICK).unit == "TOPS"
    for impl in (VyreImpl(reference, "reference"), NumpyPeer()):
        case = impl.case("matmul_i8", data)
        assert case.run() > 0
        assert case.check() is None
        case.close()
    a, b = data.matmul_i8_ab
    right = matmul_i8_reference(a, b)
    assert W.check_matmul_i8(right, data) is None
    wrong = right.copy()
    wrong[data.matmul_i8_rows[3], 5] += 1
    assert "1 of" in (W.check_matmul_i8(wrong, data) or "")
    assert "int32" in (W.check_matmul_i8(right.astype(np.int64), data) or "")
    assert hasattr(TorchPeer, "_matmul_i8")
