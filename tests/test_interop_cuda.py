"""Zero-copy interop on a GPU: torch -> vyre -> torch and cupy -> vyre -> cupy on the same
device pointer, a vyre kernel in the middle of a loaded torch side stream, a CUDA graph
(vyre Pipeline) over a borrowed buffer, managed memory, lending lifetimes and stale
buffers. Every test is `gpu` and skips with the reason without one; torch/cupy/jax tests
skip with the reason when that framework is not installed.
"""

from __future__ import annotations

import gc
from typing import Any

import numpy as np
import pytest

import vyre
from vyre import DispatchConfig, ScalarType, Step
from vyre import dlpack as DL
from vyre.builder import ProgramBuilder
from vyre.errors import (
    BufferOwnershipError,
    BufferStateError,
    InvalidDispatch,
    OutOfDeviceMemory,
)

ST = ScalarType
pytestmark = pytest.mark.gpu


def _skip_without_cuda() -> None:
    a = {x.name: x for x in vyre.available_backends()}.get("cuda")
    if a is None or not a.available:
        pytest.skip(f"no CUDA here: {a.reason if a else 'backend not registered'}")


@pytest.fixture(scope="module")
def cuda() -> Any:
    _skip_without_cuda()
    b = vyre.get_backend("cuda")
    yield b
    b.close()


@pytest.fixture(scope="module")
def torch() -> Any:
    _skip_without_cuda()
    t = pytest.importorskip("torch", reason="PyTorch is not installed here")
    if not t.cuda.is_available():
        pytest.skip("this PyTorch build has no CUDA")
    return t


@pytest.fixture(scope="module")
def cupy() -> Any:
    _skip_without_cuda()
    return pytest.importorskip("cupy", reason="CuPy is not installed here")


def _affine() -> vyre.Program:
    """y = y * a + b, in place."""
    k = ProgramBuilder("affine", workgroup_size=256)
    y = k.buffer("y", ST.F32, "read_write")
    a, b = k.param("a", ST.F32), k.param("b", ST.F32)
    i = k.global_linear_id()
    with k.if_(i < y.length()):
        y[i] = y[i] * a + b
    return k.build()


def _add_into() -> vyre.Program:
    """z = x + z."""
    k = ProgramBuilder("add_into", workgroup_size=256)
    x, z = k.buffer("x", ST.F32), k.buffer("z", ST.F32, "read_write")
    i = k.global_linear_id()
    with k.if_(i < x.length()):
        z[i] = x[i] + z[i]
    return k.build()


def _cfg(n: int, a: float = 1.0, b: float = 0.0) -> DispatchConfig:
    return DispatchConfig.for_elements(n, 256, params={"a": a, "b": b})


def test_torch_vyre_torch_round_trip_same_pointer(cuda: Any, torch: Any) -> None:
    n = 1 << 20
    t = torch.arange(n, dtype=torch.float32, device="cuda")
    buf = cuda.from_dlpack(t)
    assert buf.borrowed and buf.kind == "borrowed"
    assert cuda.device_pointer(buf) == t.data_ptr()
    assert buf.dtype == np.float32 and buf.shape == (n,) and buf.byte_len == 4 * n
    cuda.dispatch_with_device_buffers(_affine(), [], [buf], _cfg(n, 2.0, 1.0))
    back = torch.from_dlpack(buf)
    assert back.data_ptr() == t.data_ptr() and back.dtype == torch.float32
    assert back.shape == t.shape
    want = np.arange(n, dtype=np.float32) * 2 + 1
    np.testing.assert_array_equal(back.cpu().numpy(), want)  # ordered by torch's stream
    np.testing.assert_array_equal(t.cpu().numpy(), want)
    np.testing.assert_array_equal(cuda.read(buf, dtype=np.float32), want)
    # a 2-D tensor keeps its shape through the round trip
    m = torch.ones((64, 32), dtype=torch.float32, device="cuda")
    mb = cuda.from_dlpack(m)
    assert mb.shape == (64, 32) and torch.from_dlpack(mb).shape == (64, 32)


def test_vyre_buffer_to_torch_and_back_same_pointer(cuda: Any, torch: Any) -> None:
    n = 4096
    buf = cuda.allocate_device_buffer(4 * n, label="vyre-owned")
    cuda.write(buf, np.arange(n, dtype=np.float32))
    raw = torch.from_dlpack(buf)  # element type unknown: bytes
    assert raw.dtype == torch.uint8 and raw.numel() == 4 * n
    t = torch.from_dlpack(buf.as_dlpack(np.float32, (64, 64)))
    assert t.data_ptr() == cuda.device_pointer(buf) and t.shape == (64, 64)
    t.mul_(3)  # torch writes vyre's memory; vyre's later work is ordered after it
    cuda.dispatch_with_device_buffers(_affine(), [], [buf], _cfg(n, 1.0, 1.0))
    want = np.arange(n, dtype=np.float32) * 3 + 1
    np.testing.assert_array_equal(cuda.read(buf, dtype=np.float32), want)
    again = cuda.from_dlpack(t)
    assert cuda.device_pointer(again) == cuda.device_pointer(buf)
    with pytest.raises(InvalidDispatch, match="holds"):
        buf.as_dlpack(np.float32, (3,)).__dlpack__()


def test_cupy_vyre_cupy_round_trip_same_pointer(cuda: Any, cupy: Any) -> None:
    n = 1 << 16
    c = cupy.arange(n, dtype=cupy.float32)
    buf = cuda.from_dlpack(c)
    assert cuda.device_pointer(buf) == c.data.ptr
    cuda.dispatch_with_device_buffers(_affine(), [], [buf], _cfg(n, -1.0, 0.5))
    back = cupy.from_dlpack(buf)
    assert back.data.ptr == c.data.ptr and back.dtype == cupy.float32
    want = -np.arange(n, dtype=np.float32) + 0.5
    np.testing.assert_array_equal(cupy.asnumpy(back), want)
    # __cuda_array_interface__ (v3) as well
    via_cai = cupy.asarray(buf)
    assert via_cai.data.ptr == c.data.ptr
    cai = buf.__cuda_array_interface__
    assert cai["version"] == 3 and cai["typestr"] == "<f4" and cai["stream"]
    np.testing.assert_array_equal(cupy.asnumpy(via_cai), want)


def test_kernel_in_the_middle_of_a_loaded_torch_stream(cuda: Any, torch: Any) -> None:
    """torch (side stream, busy) -> vyre -> torch, repeatedly, with no host sync between."""
    n = 1 << 22
    side = torch.cuda.Stream()
    heavy = torch.randn((4096, 4096), device="cuda")
    x = torch.zeros(n, dtype=torch.float32, device="cuda")
    torch.cuda.synchronize()
    with torch.cuda.stream(side):
        buf = cuda.from_dlpack(x)  # "auto": ordered with the current (side) stream
        assert side.cuda_stream in buf.ext_streams
        prog, cfg = _affine(), _cfg(n, 2.0, 1.0)
        for _ in range(5):
            for _ in range(4):  # keep the side stream busy so a missing wait would race
                heavy = heavy @ heavy
                heavy /= heavy.norm()
            x.add_(1.0)  # torch writes x after the long matmuls
            cuda.dispatch_with_device_buffers(prog, [], [buf], cfg)  # x = 2x + 1 on vyre
            x.mul_(0.5)  # torch reads vyre's result at once
        got = x.cpu()
    expect = np.zeros(n, dtype=np.float32)
    for _ in range(5):
        expect = ((expect + 1) * 2 + 1) * 0.5
    np.testing.assert_array_equal(got.numpy(), expect)


def test_pipeline_graph_over_a_borrowed_buffer(cuda: Any, torch: Any) -> None:
    n = 1 << 20
    side = torch.cuda.Stream()
    heavy = torch.randn((4096, 4096), device="cuda")
    with torch.cuda.stream(side):
        x = torch.ones(n, dtype=torch.float32, device="cuda")
        z = torch.zeros(n, dtype=torch.float32, device="cuda")
        bx, bz = cuda.from_dlpack(x), cuda.from_dlpack(z)
        cfg = DispatchConfig.for_elements(n, 256)
        p = cuda.pipeline([Step(_add_into(), [bx], [bz], cfg)])  # a CUDA graph
        total = 0.0
        for k in range(3):
            for _ in range(4):
                heavy = heavy @ heavy
                heavy /= heavy.norm()
            x.fill_(float(k + 1))  # written by torch just before the graph runs
            res = p.run(repeat=7, read=[vyre.ReadRange(bz, 0, 16, np.float32)])
            total += 7 * (k + 1)
            np.testing.assert_array_equal(res.reads[0], np.full(4, total, np.float32))
            z.add_(0)  # torch touches z after the graph without a host sync
        side.synchronize()
    np.testing.assert_array_equal(z.cpu().numpy(), np.full(n, total, np.float32))


def test_borrowed_buffer_keeps_producer_alive_and_is_never_freed_by_vyre(
    cuda: Any, torch: Any
) -> None:
    t = torch.full((1024,), 7.0, device="cuda")
    ptr = t.data_ptr()
    buf = cuda.from_dlpack(t)
    del t
    gc.collect()
    np.testing.assert_array_equal(cuda.read(buf, dtype=np.float32), np.full(1024, 7.0))
    src = buf.source
    buf.free()  # hands the tensor back; the memory is torch's
    assert src.data_ptr() == ptr
    np.testing.assert_array_equal(src.cpu().numpy(), np.full(1024, 7.0, np.float32))
    with pytest.raises(BufferStateError, match="freed"):
        cuda.read(buf)


def test_exported_buffer_outlives_free_until_torch_lets_go(cuda: Any, torch: Any) -> None:
    before = DL.live_exports()
    buf = cuda.allocate_device_buffer(4 * 256)
    cuda.write(buf, np.arange(256, dtype=np.float32))
    t = torch.from_dlpack(buf.as_dlpack(np.float32))
    buf.free()  # deferred: torch still holds the memory
    assert buf.freed
    with pytest.raises(BufferStateError, match="freed"):
        buf.__dlpack__()
    torch.cuda.empty_cache()
    np.testing.assert_array_equal(t.cpu().numpy(), np.arange(256, dtype=np.float32))
    del t
    gc.collect()
    assert DL.live_exports() == before


def test_import_errors_on_a_real_device(cuda: Any, torch: Any) -> None:
    with pytest.raises(InvalidDispatch, match=r"host memory.*backend\.write"):
        cuda.from_dlpack(torch.zeros(4))
    with pytest.raises(InvalidDispatch, match=r"\.contiguous\(\)"):
        cuda.from_dlpack(torch.zeros((8, 8), device="cuda").t())
    other = torch.cuda.device_count()

    class OtherDevice:
        def __dlpack_device__(self) -> tuple[int, int]:
            return (DL.KDL_CUDA, other)

        def __dlpack__(self, **kw: Any) -> Any:
            raise AssertionError("must be refused before export")

    with pytest.raises(BufferOwnershipError, match=f"CUDA device {other}.*CUDA device 0"):
        cuda.from_dlpack(OtherDevice())
    with pytest.raises(InvalidDispatch, match="from_dlpack"):
        cuda.write(cuda.allocate_device_buffer(16), torch.zeros(4, device="cuda"))


def test_jax_array_borrowed(cuda: Any) -> None:
    jax = pytest.importorskip("jax", reason="JAX is not installed here")
    try:
        gpus = jax.devices("gpu")
    except RuntimeError as exc:
        pytest.skip(f"JAX has no GPU here: {exc}")
    if not gpus:
        pytest.skip("JAX has no GPU here")
    jnp = jax.numpy
    x = jax.device_put(jnp.arange(1024, dtype=jnp.float32), gpus[0])
    buf = cuda.from_dlpack(x)
    np.testing.assert_array_equal(cuda.read(buf, dtype=np.float32),
                                  np.arange(1024, dtype=np.float32))
    out = cuda.allocate_device_buffer(4 * 1024)
    cuda.write(out, np.ones(1024, np.float32))
    cuda.dispatch_with_device_buffers(_add_into(), [buf], [out],
                                      DispatchConfig.for_elements(1024, 256))
    y = jnp.from_dlpack(out.as_dlpack(np.float32))
    np.testing.assert_array_equal(np.asarray(y), np.arange(1024, dtype=np.float32) + 1)


def test_managed_memory(cuda: Any) -> None:
    if not cuda.supports("managed_memory"):
        with pytest.raises(vyre.UnsupportedFeature):
            cuda.allocate_device_buffer(16, kind="managed")
        pytest.skip("this device reports no managed memory (the refusal was checked)")
    n = 1 << 16
    m = cuda.allocate_device_buffer(4 * n, label="um", kind="managed")
    assert m.kind == "managed"
    cuda.write(m, np.arange(n, dtype=np.float32))
    cuda.dispatch_with_device_buffers(_affine(), [], [m], _cfg(n, 3.0, 0.0))
    view = m.host_view(np.float32)  # synchronises, then no copy
    np.testing.assert_array_equal(view, np.arange(n, dtype=np.float32) * 3)
    m.free()  # deferred while the view lives
    np.testing.assert_array_equal(view[:4], np.arange(4, dtype=np.float32) * 3)
    del view
    gc.collect()
    dev = cuda.allocate_device_buffer(16)
    with pytest.raises(vyre.UnsupportedFeature, match="kind='managed'"):
        dev.host_view()
    free, _ = cuda.memory_info()
    with pytest.raises(OutOfDeviceMemory, match="free"):
        cuda.allocate_device_buffer(free + (16 << 20), kind="managed")


def test_buffers_of_a_closed_backend_are_refused(torch: Any) -> None:
    b = vyre.get_backend("cuda")
    buf = b.allocate_device_buffer(64)
    b.close()
    with pytest.raises(BufferStateError, match="closed"):
        buf.__dlpack__()
    with pytest.raises(BufferStateError, match="closed"):
        _ = buf.__cuda_array_interface__
