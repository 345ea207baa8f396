"""Host interop on every available backend: NumPy arrays, memoryviews and bytes in, typed
NumPy arrays out, clear errors (naming the fix) for non-contiguous or wrongly typed data,
UnsupportedFeature where a backend cannot borrow/export/map memory, and stale buffers.
Runs in CI (reference, and wgpu on lavapipe)."""

from __future__ import annotations

import array
from typing import Any

import numpy as np
import pytest

import vyre
from vyre import DispatchConfig, Program, ReadRange, ScalarType, Step
from vyre.backend import BaseBackend
from vyre.builder import ProgramBuilder
from vyre.errors import BufferStateError, InvalidDispatch, UnsupportedFeature

ST = ScalarType


def _scale() -> vyre.Program:
    k = ProgramBuilder("scale", workgroup_size=64)
    x = k.buffer("x", ST.F32)
    y = k.buffer("y", ST.F32, "write")
    i = k.global_linear_id()
    with k.if_(i < x.length()):
        y[i] = x[i] * 2.0
    return k.build()


def _double_f16() -> Program:
    k = ProgramBuilder("double_f16", 64)
    x = k.buffer("x", ST.F16)
    y = k.buffer("y", ST.F16, "write")
    i = k.global_linear_id()
    with k.if_(i < x.length()):
        y[i] = x[i] * 2.0
    return k.build()


def test_write_accepts_numpy_bytes_bytearray_memoryview(backend: BaseBackend) -> None:
    data = np.arange(16, dtype=np.uint32)
    forms = [data, data.tobytes(), bytearray(data.tobytes()), memoryview(data),
             memoryview(data.tobytes()), array.array("I", data.tolist())]
    for form in forms:
        with backend.allocate_device_buffer(data.nbytes) as buf:
            if isinstance(form, array.array):
                form = memoryview(form)
            backend.write(buf, form)
            got = backend.read(buf, dtype=np.uint32)
            assert got.dtype == np.uint32
            np.testing.assert_array_equal(got, data)


@pytest.mark.parametrize("ty", [ST.F16, ST.F32, ST.F64, ST.I32, ST.U32, ST.I64, ST.U64])
def test_read_with_vyre_type_gives_that_numpy_dtype(backend: BaseBackend, ty: ScalarType) -> None:
    # np.dtype("f16") is float128: a vyre type must map through its own numpy dtype
    data = np.arange(8).astype(ty.numpy)
    with backend.allocate_device_buffer(data.nbytes) as buf:
        backend.write(buf, data)
        got = backend.read(buf, dtype=ty)
    assert got.dtype == ty.numpy
    np.testing.assert_array_equal(got, data)


def test_pipeline_read_with_vyre_type_gives_that_numpy_dtype(backend: BaseBackend) -> None:
    # the pipeline's readbacks follow the same rule as backend.read (vyre.f16 is float16)
    prog = _double_f16()
    if not backend.supports("f16"):
        pytest.skip(f"{backend.kind} lacks the f16 feature")
    data = np.array([0.5, -1.25, 3.0, 65504.0], dtype=np.float16)
    with backend.allocate_device_buffer(data.nbytes) as src, \
            backend.allocate_device_buffer(data.nbytes) as dst:
        backend.write(src, data)
        cfg = DispatchConfig(grid=1)
        run = backend.pipeline([Step(prog, [src], [dst], cfg)]).run(
            read=[ReadRange(dst, 0, None, ST.F16)])
    assert run.reads[0].dtype == np.float16
    np.testing.assert_array_equal(run.reads[0], data * np.float16(2))

def test_dispatch_returns_declared_type_and_matches_reference(
    backend: BaseBackend, reference: BaseBackend
) -> None:
    x = np.linspace(-3, 3, 100, dtype=np.float32)
    cfg = DispatchConfig.for_elements(100, 64)
    want = reference.dispatch(_scale(), {"x": x, "y": 100}, cfg)["y"]
    for form in (x, memoryview(x), x.tobytes()):
        got = backend.dispatch(_scale(), {"x": form, "y": 100}, cfg)["y"]
        assert got.dtype == np.float32
        np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(want, x * 2)


def test_wrong_dtype_names_astype(backend: BaseBackend) -> None:
    cfg = DispatchConfig.for_elements(10, 64)
    for bad in (np.arange(10, dtype=np.float64), memoryview(np.arange(10, dtype=np.int32)),
                np.arange(10, dtype=">f4")):
        with pytest.raises(InvalidDispatch, match=r"astype\(np\.float32\)"):
            backend.dispatch(_scale(), {"x": bad, "y": 10}, cfg)


def test_non_contiguous_names_ascontiguousarray(backend: BaseBackend) -> None:
    x = np.arange(20, dtype=np.float32)[::2]
    with pytest.raises(InvalidDispatch, match=r"np\.ascontiguousarray"):
        backend.dispatch(_scale(), {"x": x, "y": 10}, DispatchConfig.for_elements(10, 64))
    with backend.allocate_device_buffer(40) as buf:
        with pytest.raises(InvalidDispatch, match=r"np\.ascontiguousarray"):
            backend.write(buf, x)
        with pytest.raises(InvalidDispatch, match="not contiguous"):
            backend.write(buf, memoryview(np.arange(20, dtype=np.float32))[::2])
        # the fix the message names works
        backend.write(buf, np.ascontiguousarray(x))
        np.testing.assert_array_equal(backend.read(buf, dtype=np.float32), x)


def test_unsupported_host_objects_say_what_to_do(backend: BaseBackend) -> None:
    class FakeDeviceArray:
        __cuda_array_interface__ = {"shape": (4,), "typestr": "<f4", "data": (0, False),
                                    "version": 3}

    class FakeCpuTensor:
        def __dlpack__(self, stream: Any = None) -> Any:
            raise AssertionError("must not be consumed")

        def __dlpack_device__(self) -> tuple[int, int]:
            return (1, 0)

    with backend.allocate_device_buffer(16) as buf:
        with pytest.raises(InvalidDispatch, match="from_dlpack"):
            backend.write(buf, FakeDeviceArray())
        with pytest.raises(InvalidDispatch, match=r"np\.from_dlpack"):
            backend.write(buf, FakeCpuTensor())
        with pytest.raises(InvalidDispatch, match="astype"):
            backend.write(buf, np.array([object()] * 2))
        with pytest.raises(InvalidDispatch, match="numpy array, bytes or memoryview"):
            backend.write(buf, "text")
        with pytest.raises(InvalidDispatch, match="not an element type"):
            backend.read(buf, dtype="not-a-dtype")


def test_backends_without_interop_raise_unsupported(backends: dict[str, BaseBackend]) -> None:
    for name in ("reference", "wgpu"):
        if name not in backends:
            continue
        b = backends[name]
        with b.allocate_device_buffer(16) as buf:
            with pytest.raises(UnsupportedFeature, match=r"backend\.read"):
                buf.__dlpack__()
            with pytest.raises(UnsupportedFeature, match=r"backend\.read"):
                np.from_dlpack(buf.as_dlpack(np.float32))
            with pytest.raises(UnsupportedFeature, match="kind='managed'"):
                buf.host_view()
        with pytest.raises(UnsupportedFeature, match=r"backend\.write"):
            b.from_dlpack(np.zeros(4, np.float32))
        if not b.supports("managed_memory"):
            with pytest.raises(UnsupportedFeature, match="managed"):
                b.allocate_device_buffer(16, kind="managed")
        with pytest.raises(InvalidDispatch, match="kind must be"):
            b.allocate_device_buffer(16, kind="pinned")


def test_buffer_of_closed_backend_is_refused() -> None:
    a = vyre.get_backend("reference")
    other = vyre.get_backend("reference")
    try:
        buf = a.allocate_device_buffer(16, label="old")
        a.write(buf, np.arange(4, dtype=np.uint32))
        a.close()
        assert buf.freed
        with pytest.raises(vyre.BackendUnavailable, match="closed"):
            a.read(buf)
        with pytest.raises(vyre.BufferOwnershipError, match="another instance"):
            other.read(buf)
        with pytest.raises(vyre.BackendUnavailable):
            vyre.transfer(buf, other)
    finally:
        other.close()


def test_stale_buffer_after_context_loss_is_refused() -> None:
    # the reference backend cannot lose its device; simulate the loss a GPU backend
    # reports after a fault, then check the generic generation bookkeeping
    b = vyre.get_backend("reference")
    try:
        old = b.allocate_device_buffer(40, label="before")
        b.write(old, np.arange(10, dtype=np.float32))
        g = b.context_generation
        assert old.generation == g and old.stale_reason is None
        b._context_lost("simulated device loss")
        assert b.context_generation == g + 1
        assert old.stale_reason is not None and "simulated device loss" in old.stale_reason
        cfg = DispatchConfig.for_elements(10, 64)
        with pytest.raises(BufferStateError, match="stale"):
            b.read(old)
        with pytest.raises(BufferStateError, match="stale"):
            b.write(old, np.zeros(10, np.float32))
        new_y = b.allocate_device_buffer(40, label="after")
        with pytest.raises(BufferStateError, match="stale"):
            b.dispatch_with_device_buffers(_scale(), [old], [new_y], cfg)
        # buffers allocated after the loss work
        new_x = b.allocate_device_buffer(40)
        b.write(new_x, np.arange(10, dtype=np.float32))
        b.dispatch_with_device_buffers(_scale(), [new_x], [new_y], cfg)
        np.testing.assert_array_equal(b.read(new_y, dtype=np.float32),
                                      np.arange(10, dtype=np.float32) * 2)
        old.free()  # freeing a stale buffer is harmless
    finally:
        b.close()
