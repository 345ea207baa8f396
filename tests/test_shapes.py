"""Shapes and indexing that cannot be misread (issue 31, item 2), through the public API on
every backend: declared buffer shapes, `C[i, j]` row-major like NumPy, launch shapes in
NumPy order with `vyre.global_index`, `vyre.xyz` for axis order, and the refusal of a tuple
that reads differently in the two orders."""

from __future__ import annotations

import numpy as np
import pytest

import vyre
from vyre import Buffer, DispatchConfig, InOut, InvalidDispatch, Output, ProgramBuilder, f32, u32
from vyre.backend import BaseBackend

H, W = vyre.Dim("H"), vyre.Dim("W")


@vyre.kernel(workgroup_size=(16, 16))
def transpose(src: Buffer[f32, (H, W)], dst: Output[f32, (W, H)],
              H: u32, W: u32) -> None:
    i, j = vyre.global_index(2)
    dst[j, i] = src[i, j]


@vyre.kernel(workgroup_size=(8, 8))
def mark(out: Output[u32, (None, W)], W: u32) -> None:
    """out[i, j] = 1000 * i + j over a NumPy-order launch (the rows from the length)."""
    i, j = vyre.global_index(2)
    out[i, j] = i * 1000 + j


@vyre.kernel(workgroup_size=(8, 8))
def mark_xyz(out: Output[u32], W: u32, H: u32) -> None:
    x, y = vyre.global_id(0), vyre.global_id(1)
    with vyre.if_((x < W) & (y < H)):
        out[y * W + x] = y * 1000 + x


def test_numpy_order_launch_writes_every_element(backend: BaseBackend) -> None:
    """The issue's case: 240 outputs, (rows, cols) = (12, 20), launched in NumPy order:
    every element written (vyre's old (x, y) reading left 144 of them at 0)."""
    got = mark.launch(backend, (12, 20), 240, W=20)["out"]
    assert got.shape == (12, 20)
    want = np.add.outer(np.arange(12) * 1000, np.arange(20)).astype(np.uint32)
    np.testing.assert_array_equal(got, want)


def test_transpose_with_declared_shapes(backend: BaseBackend) -> None:
    m = np.arange(35, dtype=np.float32).reshape(5, 7)
    t = transpose.launch(backend, m.shape, m, m.size, H=5, W=7)["dst"]
    assert t.shape == (7, 5)
    np.testing.assert_array_equal(t, m.T)
    flat = transpose.launch(backend, m.shape, m.reshape(-1), m.size, H=5, W=7)["dst"]
    np.testing.assert_array_equal(flat, m.T)


def test_an_index_past_its_axis_never_reaches_the_next_row(backend: BaseBackend) -> None:
    """j = cols (and a negative i32 row) is out of range: the load reads 0 and the store
    does nothing, where the flat index i * cols + j would be the next row's first element."""
    k = ProgramBuilder("axis_bounds", 64)
    w = k.param("W", u32)
    src = k.buffer("src", f32, shape=(None, w))
    dst = k.buffer("dst", f32, "read_write", shape=(3, 4))
    i = k.global_linear_id()
    with k.if_(i < 3):
        dst[i, 0] = src[i, w]                       # column W: 0
        dst[i, 1] = src[k.lit(-1) + i.bitcast(vyre.i32), 1]   # row i - 1: 0 for i = 0
        dst[i, i + 4] = 99.0                         # column 4.. of 4: nothing
        dst[i, 3] = src.shape[0].cast(f32)           # the rows the length holds
    src_in = np.arange(12, dtype=np.float32) + 1
    dst_in = np.full(12, -1, np.float32)
    got = backend.dispatch(k.build(), {"src": src_in, "dst": dst_in},
                           DispatchConfig(grid=(1, 1, 1), params={"W": 4}))["dst"]
    want = np.full((3, 4), -1, np.float32)
    want[:, 0] = 0.0
    want[:, 1] = [0.0, 2.0, 6.0]
    want[:, 3] = 3.0
    np.testing.assert_array_equal(got.reshape(3, 4), want)


def test_three_axes_and_shared_tiles(backend: BaseBackend) -> None:
    @vyre.kernel(workgroup_size=(4, 4, 2))
    def flip(src: Buffer[u32, (2, 3, 4)], out: Output[u32, (2, 3, 4)]) -> None:
        d, i, j = vyre.global_index(3)
        tile = vyre.shared(u32, (2, 4, 4))
        li, lj, ld = vyre.local_id(1), vyre.local_id(0), vyre.local_id(2)
        tile[ld, li, lj] = src[d, i, j] + 1
        vyre.barrier()
        out[d, i, j] = tile[ld, li, 3 - lj]

    src = np.arange(24, dtype=np.uint32).reshape(2, 3, 4)
    got = flip.launch(backend, src.shape, src, 24)["out"]
    np.testing.assert_array_equal(got, src[:, :, ::-1] + 1)


def test_atomics_take_a_tuple_index(backend: BaseBackend) -> None:
    @vyre.kernel(workgroup_size=64)
    def hist2(keys: Buffer[u32], h: InOut[u32, (4, 8)]) -> None:
        i = vyre.global_linear_id()
        with vyre.if_(i < keys.length()):
            h.atomic_add((keys[i] >> 3, keys[i] & 7), 1)

    keys = np.random.default_rng(5).integers(0, 32, 500).astype(np.uint32)
    got = hist2.launch(backend, keys.size, keys, np.zeros((4, 8), np.uint32))["h"]
    np.testing.assert_array_equal(got, np.bincount(keys, minlength=32).reshape(4, 8))


def test_axis_order_kernels_take_xyz_and_refuse_ambiguous_tuples(reference: BaseBackend
                                                                  ) -> None:
    got = mark_xyz.launch(reference, vyre.xyz(20, 12), 240, W=20, H=12)["out"]
    want = np.add.outer(np.arange(12) * 1000, np.arange(20)).astype(np.uint32)
    np.testing.assert_array_equal(got.reshape(12, 20), want)
    with pytest.raises(InvalidDispatch) as info:
        mark_xyz.launch(reference, (12, 20), 240, W=20, H=12)
    msg = str(info.value)
    for phrase in ("ambiguous", "(rows, cols) = (12, 20)", "vyre.xyz(20, 12)",
                   "vyre.xyz(12, 20)", "vyre.global_index(2)"):
        assert phrase in msg
    square = mark_xyz.launch(reference, (6, 6), 36, W=6, H=6)["out"]  # the same either way
    np.testing.assert_array_equal(square.reshape(6, 6), want[:6, :6])


def test_one_d_code_is_untouched(reference: BaseBackend) -> None:
    @vyre.kernel
    def twice(x: Buffer[f32], y: Output[f32]) -> None:
        i = vyre.global_linear_id()
        y[i] = x[i] * 2.0

    x = np.arange(5, dtype=np.float32)
    out = twice.launch(reference, 5, x, 5)["y"]
    assert out.shape == (5,)
    np.testing.assert_array_equal(out, x * 2)


def test_steps_check_resident_buffers_against_their_shape(backend: BaseBackend) -> None:
    m = np.arange(12, dtype=np.float32).reshape(3, 4)
    src = backend.allocate_device_buffer(m.nbytes)
    dst = backend.allocate_device_buffer(m.nbytes)
    short = backend.allocate_device_buffer(m.nbytes - 4)
    try:
        backend.write(src, m)
        pipe = backend.pipeline([transpose.step(m.shape, src, dst, H=3, W=4)])
        got = pipe.run(read=[dst]).reads[0]
        np.testing.assert_array_equal(np.asarray(got).view(np.float32).reshape(4, 3), m.T)
        with pytest.raises(InvalidDispatch, match=r"'src'.*11 elements.*holds 12"):
            transpose.step(m.shape, short, dst, H=3, W=4)
    finally:
        for b in (src, dst, short):
            backend.free(b)


def test_one_axis_global_index(reference: BaseBackend) -> None:
    @vyre.kernel
    def iota(out: Output[u32, (None,)]) -> None:
        (i,) = vyre.global_index(1)
        out[i] = i * 3

    got = iota.launch(reference, (70,), 70)["out"]
    np.testing.assert_array_equal(got, np.arange(70, dtype=np.uint32) * 3)
