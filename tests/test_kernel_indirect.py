"""Indirect grids through `kernel.launch` / `kernel.step` (issue 31, item 5): the workgroup
counts are read from a device buffer when the dispatch runs, on every backend, with the
reference's results. On CUDA the kernel reads them on the device and a launch of enough
blocks to fill it runs the virtual workgroups in turn, so the grid here is sized past that
(workgroup memory, barriers and `return` across virtual workgroups); its host side, with
NVRTC compiling the kernels, runs on the stand-in driver below."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import vyre
from vyre import Buffer, IndirectGrid, InOut, InvalidDispatch, Output, u32
from vyre.backend import BaseBackend

WX, WY = 16, 16


@vyre.kernel(workgroup_size=(WX, WY))
def where(out: Output[u32]) -> None:
    """Each invocation writes its ids and a neighbour's value from workgroup memory; a
    third of them return before the store (after the barrier, as the validator asks)."""
    tile = vyre.shared(u32, WX * WY)
    t = vyre.local_index()
    x, y, z = vyre.global_id(0), vyre.global_id(1), vyre.global_id(2)
    width, height = vyre.num_workgroups(0) * WX, vyre.num_workgroups(1) * WY
    flat = (z * height + y) * width + x
    tile[t] = flat * 3 + 1
    vyre.barrier()
    near = tile[(t + 1) % (WX * WY)]
    if x % 3 == 1:
        return
    wid = (vyre.workgroup_id(0) << 20) | (vyre.workgroup_id(1) << 8) | vyre.workgroup_id(2)
    out[flat] = near ^ (wid << 1)


@vyre.kernel(workgroup_size=1)
def find_end(src: Buffer[u32], meta: InOut[u32]) -> None:
    """meta = [n, groups, 1, 1]: n elements before src's first 0 (a terminator), and the
    grid of 64-wide workgroups covering them."""
    n = vyre.lit(0, u32)
    while n < src.length():
        if src[n] == 0:
            break
        n += 1
    meta[0] = n
    meta[1] = (n + 63) // 64
    meta[2] = 1
    meta[3] = 1


@vyre.kernel(workgroup_size=64)
def square(x: InOut[u32], meta: InOut[u32]) -> None:
    """x[i] = x[i]^2 for i < meta[0]; invocation 0 also zeroes the grid it runs on (a
    dispatch reads its grid before it starts, on every backend)."""
    i = vyre.global_linear_id()
    if i == 0:
        meta[1] = 0
    if i < meta[0]:
        x[i] = x[i] * x[i]


def _grid_past_resident_blocks(be: BaseBackend) -> tuple[int, int, int]:
    """An indirect grid of more workgroups than CUDA launches blocks (sm_count times the
    workgroups of WX * WY threads an SM holds), so that blocks loop; elsewhere the same
    size for an H200."""
    d = be.capabilities().details
    resident = int(d.get("sm_count") or 132) * max(
        1, int(d.get("max_threads_per_sm") or 2048) // (WX * WY))
    return (6, -(-(resident + 7) // 12), 2)


def _where(be: BaseBackend, counts: tuple[int, int, int], room: int) -> np.ndarray:
    grid = be.allocate_device_buffer(16)
    be.write(grid, np.uint32([99, *counts]))  # offset 4: the counts follow a word
    out = be.allocate_device_buffer(4 * room)
    be.write(out, np.full(room, 7, np.uint32))
    where.launch(be, IndirectGrid(buffer=grid, offset=4), out)
    got = be.read(out, dtype=np.uint32)
    for b in (grid, out):
        be.free(b)
    return got


def _expected_where(counts: tuple[int, int, int]) -> np.ndarray:
    gx, gy, gz = counts
    width, height = gx * WX, gy * WY
    z, y, x = np.meshgrid(np.arange(gz), np.arange(height), np.arange(width), indexing="ij")
    near = (y % WY * WX + x % WX + 1) % (WX * WY)  # the next local index's invocation
    ny, nx = y // WY * WY + near // WX, x // WX * WX + near % WX
    wid = (x // WX << 20) | (y // WY << 8) | z
    stored = ((z * height + ny) * width + nx) * 3 + 1 ^ (wid << 1)
    return np.where(x % 3 == 1, 7, stored).astype(np.uint32).reshape(-1)


def test_an_indirect_launch_has_the_references_results(backend: BaseBackend,
                                                      reference: BaseBackend) -> None:
    counts = _grid_past_resident_blocks(backend)
    room = counts[0] * counts[1] * counts[2] * WX * WY
    got = _where(backend, counts, room)
    want = _where(reference, counts, room)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(want, _expected_where(counts))


@pytest.mark.parametrize("counts", [(0, 1, 1), (2, 0, 3), (1, 1, 0)])
def test_a_zero_count_runs_nothing(backend: BaseBackend, counts: tuple[int, int, int]) -> None:
    np.testing.assert_array_equal(_where(backend, counts, 64), np.full(64, 7, np.uint32))


def _meta_pipeline(be: BaseBackend, texts: list[np.ndarray]) -> list[list[np.ndarray]]:
    """find_end writes the grid, square runs on it (the grid at offset 4 of a buffer it
    also binds and writes); the recorded pipeline runs once per text."""
    src = be.allocate_device_buffer(texts[0].nbytes)
    meta = be.allocate_device_buffer(16)
    pipe = be.pipeline([find_end.step(1, src, meta),
                        square.step(IndirectGrid(buffer=meta, offset=4), src, meta)])
    out = []
    for text in texts:
        be.write(src, text)
        out.append(pipe.run(read=[src, meta]).reads)
    for b in (src, meta):
        be.free(b)
    return out


def test_a_step_on_a_grid_an_earlier_step_wrote(backend: BaseBackend,
                                                reference: BaseBackend) -> None:
    rng = np.random.default_rng(31)
    texts = []
    for end in (700, 0, 1, 64, 65, 999):  # 0: an empty grid; 999: no terminator
        t = rng.integers(1, 1 << 16, 1000).astype(np.uint32)
        t[end:end + 1] = 0
        texts.append(t)
    got = _meta_pipeline(backend, texts)
    want = _meta_pipeline(reference, texts)
    for text, (g_src, g_meta), (w_src, w_meta) in zip(texts, got, want):
        np.testing.assert_array_equal(g_src, w_src)
        np.testing.assert_array_equal(g_meta, w_meta)
        n = int(w_meta[0])
        np.testing.assert_array_equal(w_src[:n], text[:n] * text[:n])
        np.testing.assert_array_equal(w_src[n:], text[n:])
        # the grid was zeroed by the dispatch that ran on it (and is 0 where none ran)
        assert w_meta.tolist() == [n, 0, 1, 1]


def test_indirect_launch_shapes_and_their_errors(reference: BaseBackend) -> None:
    be = reference
    grid = be.allocate_device_buffer(12)
    be.write(grid, np.uint32([2, 1, 1]))
    cfg = square.config(IndirectGrid(buffer=grid))
    assert cfg.grid == IndirectGrid(buffer=grid) and cfg.params == {}
    # host arrays with a grid on the device: the host path reads the grid there
    x = np.arange(200, dtype=np.uint32)
    out = square.launch(be, IndirectGrid(buffer=grid), x, np.uint32([150, 9, 9, 9]))
    np.testing.assert_array_equal(out["x"], np.where(x < 128, x * x, x))  # 2 groups of 64
    with pytest.raises(InvalidDispatch, match=r"device buffer.*vyre\.IndirectGrid\(buffer=b\)"):
        square.launch(be, grid, x, np.uint32([1, 1, 1, 1]))
    with pytest.raises(InvalidDispatch, match=r"device buffer.*vyre\.IndirectGrid"):
        square.step(grid, x, grid)
    with pytest.raises(InvalidDispatch, match="indirect grid needs 12 bytes at offset 4"):
        square.launch(be, IndirectGrid(buffer=grid, offset=4), x, np.uint32([1, 1, 1, 1]))
    other = vyre.get_backend("reference")
    try:
        g2 = other.allocate_device_buffer(12)
        with pytest.raises(vyre.BackendError, match="belongs to"):
            square.launch(be, IndirectGrid(buffer=g2), x, np.uint32([1, 1, 1, 1]))
    finally:
        other.close()
    be.free(grid)


# ------------------------------------------------------------------ CUDA, stand-in driver
@pytest.fixture
def standin_cuda(tmp_path: Path) -> Iterator[tuple[Any, Any]]:
    pytest.importorskip("cuda.bindings.driver", reason="cuda-bindings is not installed")
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import cuda_standin

    recorded = frozenset({"cuLaunchKernel", "cuMemcpyDtoDAsync"})
    with cuda_standin.installed(recorded) as drv, cuda_standin.backend(str(tmp_path)) as cuda:
        yield cuda, drv


def test_cuda_compiles_and_launches_indirect_kernels(standin_cuda: tuple[Any, Any]) -> None:
    """NVRTC compiles the indirect form of each kernel above; a launch fills the device
    (sm_count x workgroups per SM blocks) and a grid buffer the step also binds is copied
    on the stream first."""
    cuda, drv = standin_cuda
    d = cuda.capabilities().details
    grid = cuda.allocate_device_buffer(16)
    out = cuda.allocate_device_buffer(4 * 1024)
    where.launch(cuda, IndirectGrid(buffer=grid, offset=4), out)
    launches = [a for name, _t, a in drv.calls if name == "cuLaunchKernel"]
    per_sm = max(1, (d.get("max_threads_per_sm") or 2048) // (WX * WY))
    assert [a[1:7] for a in launches] == [(d["sm_count"] * per_sm, 1, 1, WX, WY, 1)]
    drv.calls.clear()
    cuda.pipeline([find_end.step(1, out, grid),
                   square.step(IndirectGrid(buffer=grid, offset=4), out, grid)]).run()
    copies = [a for name, _t, a in drv.calls if name == "cuMemcpyDtoDAsync"]
    assert len(copies) == 1 and copies[0][1] == grid.ptr + 4 and copies[0][2] == 12
    for b in (grid, out):
        cuda.free(b)
