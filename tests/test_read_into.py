"""backend.read_into: device bytes copied into the caller's own array (reused across reads),
on every backend, compared with read() and with the values the host wrote or a dispatch
computed."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import vyre
from vyre import DispatchConfig, u32
from vyre.backend import BaseBackend
from vyre.programs.elementwise import saxpy


def test_read_into_copies_what_read_returns(backend: BaseBackend) -> None:
    rng = np.random.default_rng(7)
    data = rng.integers(0, 256, 4096, dtype=np.uint8)
    buf = backend.allocate_device_buffer(data.nbytes)
    try:
        backend.write(buf, data)
        for dtype, count, offset in [(np.uint8, 4096, 0), (np.float32, 3, 4), (np.int64, 8, 8),
                                     (np.uint16, 5, 6), (np.float64, 511, 8)]:
            out = np.full(count, 7, dtype)
            got = backend.read_into(buf, out, offset)
            assert got is out
            n = out.nbytes
            assert out.tobytes() == data[offset:offset + n].tobytes()
            np.testing.assert_array_equal(out, backend.read(buf, offset, n, dtype))
        grid = np.zeros((4, 16), np.uint32)  # any C-contiguous shape: its bytes in order
        backend.read_into(buf, grid, 1024)
        assert grid.tobytes() == data[1024:1024 + 256].tobytes()
    finally:
        backend.free(buf)


def test_one_array_reused_after_each_dispatch(backend: BaseBackend) -> None:
    """The copy waits for the dispatches enqueued before it (no synchronize() call here)."""
    n = 1000
    xb = backend.allocate_device_buffer(4 * n)
    yb = backend.allocate_device_buffer(4 * n)
    prog = saxpy(u32)  # y = 1 * x + y with x all ones: y grows by one per dispatch
    cfg = DispatchConfig.for_elements(n, 64, params={"n": n, "a": 1})
    out = np.empty(n, np.uint32)
    try:
        backend.write_many([(xb, np.ones(n, np.uint32)), (yb, np.arange(n, dtype=np.uint32))])
        for round_ in range(1, 4):
            backend.dispatch_with_device_buffers(prog, [xb], [yb], cfg)
            backend.read_into(yb, out)
            np.testing.assert_array_equal(out, np.arange(n, dtype=np.uint32) + round_)
    finally:
        backend.free(xb)
        backend.free(yb)


def test_read_into_an_empty_array_copies_nothing(backend: BaseBackend) -> None:
    buf = backend.allocate_device_buffer(16)
    try:
        backend.write(buf, np.arange(4, dtype=np.float32))
        empty = np.empty(0, np.float32)
        assert backend.read_into(buf, empty, 16) is empty
        np.testing.assert_array_equal(backend.read(buf, dtype=np.float32), np.arange(4))
    finally:
        backend.free(buf)


def _cuda_and_torch() -> tuple[BaseBackend, Any]:
    torch = pytest.importorskip(
        "torch", reason="torch is not installed (it makes this test's page-locked host array)")
    try:
        return vyre.get_backend("cuda"), torch
    except vyre.BackendUnavailable as exc:
        pytest.skip(f"the CUDA backend is not available here: {exc}")


def test_read_into_a_page_locked_array_on_cuda() -> None:
    """A page-locked array (here torch's pinned memory, as a NumPy view) is written by DMA."""
    b, torch = _cuda_and_torch()
    n = 1 << 20
    with b:
        buf = b.allocate_device_buffer(4 * n)
        want = np.random.default_rng(3).standard_normal(n).astype(np.float32)
        b.write(buf, want)
        pinned = torch.empty(n, dtype=torch.float32, pin_memory=True)
        out = pinned.numpy()
        assert b.read_into(buf, out) is out
        np.testing.assert_array_equal(out, want)
        np.testing.assert_array_equal(pinned.numpy(), want)


def test_a_write_from_a_page_locked_array_sends_the_bytes_of_the_call() -> None:
    """From page-locked memory the driver's copy runs on after its call returns; write()
    must still send the array as it was when called, however soon the caller reuses it
    (here the tail is overwritten at once: a copy still running would send -1s)."""
    b, torch = _cuda_and_torch()
    n = 16 << 20  # 64 MiB: a DMA of ~1 ms, far longer than overwriting the tail
    with b:
        buf = b.allocate_device_buffer(4 * n)
        locked = torch.empty(n, dtype=torch.float32, pin_memory=True).numpy()
        for round_ in range(1, 4):
            locked[...] = round_
            b.write(buf, locked)
            locked[-4096:] = -1.0
            got = b.read(buf, dtype=np.float32)
            assert (got == round_).all(), f"round {round_}: {np.count_nonzero(got != round_)} " \
                "elements differ from what was written"


def test_page_locked_array_where_the_backend_has_none(backend: BaseBackend) -> None:
    if backend.supports("page_locked_host"):
        a = backend.page_locked_array(16, np.uint32)
        assert a.shape == (16,) and a.dtype == np.uint32
        return
    with pytest.raises(vyre.UnsupportedFeature, match=r"np\.empty"):
        backend.page_locked_array(16, np.uint32)


def test_page_locked_array_round_trip_on_cuda() -> None:
    """vyre's own page-locked array: written from and read into by DMA, the bits kept; the
    driver knows its memory only while the array lives."""
    import gc

    try:
        b = vyre.get_backend("cuda")
    except vyre.BackendUnavailable as exc:
        pytest.skip(f"the CUDA backend is not available here: {exc}")
    n = 16 << 20
    with b:
        want = np.random.default_rng(5).standard_normal(n).astype(np.float32)
        a = b.page_locked_array(n, np.float32)
        a[...] = want
        buf = b.allocate_device_buffer(4 * n)
        b.write(buf, a)
        a[-4096:] = -1.0  # at once: the write already has its bytes
        back = b.page_locked_array((4, n // 4), np.float32)
        assert b.read_into(buf, back) is back
        np.testing.assert_array_equal(back.reshape(-1), want)
        drv = b.driver  # type: ignore[attr-defined]
        kind = drv.CUpointer_attribute.CU_POINTER_ATTRIBUTE_MEMORY_TYPE
        ptr = back.ctypes.data
        assert int(drv.cuPointerGetAttribute(kind, ptr)[0]) == 0
        del back
        gc.collect()
        assert int(drv.cuPointerGetAttribute(kind, ptr)[0]) != 0
