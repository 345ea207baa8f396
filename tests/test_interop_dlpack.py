"""DLPack plumbing and the CUDA import/export error paths, without a GPU.

The CUDA backend's DLPack import checks the producer's device, layout and element type
before it touches any device memory, so those refusals are exercised here against a
stand-in for the backend (id, ordinal and stream only) and fake producers; the real
round trips run in test_interop_cuda.py on a GPU. Runs in CI.
"""

from __future__ import annotations

import gc
import threading
from typing import Any

import numpy as np
import pytest

from vyre import dlpack as DL
from vyre.backends.cuda import interop
from vyre.errors import BufferOwnershipError, InvalidDispatch


class StandInCuda:
    """What interop.import_dlpack reads of a CudaBackend before any driver call."""

    id = "cuda:0"
    ordinal = 0
    cu_stream = 0xABC0

    def __init__(self) -> None:
        self.lock = threading.RLock()

    def check_open(self) -> None:
        pass


class FakeTensor:
    """A producer on (device_type, device_id) whose capsule points at no real memory."""

    __module__ = "fakeframework"

    def __init__(self, device: tuple[int, int], shape: tuple[int, ...] = (4, 4),
                 strides: tuple[int, ...] | None = None, versioned: bool = True) -> None:
        self.device = device
        self.shape = shape
        self.strides = strides
        self.versioned = versioned
        self.calls: list[dict[str, Any]] = []
        self.released = 0

    def __dlpack_device__(self) -> tuple[int, int]:
        return self.device

    def __dlpack__(self, stream: Any = None, **kw: Any) -> Any:
        if kw and not self.versioned:
            raise TypeError("__dlpack__() got an unexpected keyword argument 'max_version'")
        self.calls.append({"stream": stream, **kw})

        def done() -> None:
            self.released += 1

        return DL.make_capsule(0x7F0000001000, self.device[0], self.device[1], self.shape,
                               np.dtype(np.float32), keep=None, on_release=done,
                               strides=self.strides)


def test_cpu_arrays_are_refused_with_the_host_path_named() -> None:
    x = np.arange(8, dtype=np.float32)  # numpy's own __dlpack__ says kDLCPU
    with pytest.raises(InvalidDispatch, match=r"host memory.*backend\.write"):
        interop.import_dlpack(StandInCuda(), x)  # type: ignore[arg-type]
    pinned = FakeTensor((DL.KDL_CUDA_HOST, 0))
    with pytest.raises(InvalidDispatch, match="host memory"):
        interop.import_dlpack(StandInCuda(), pinned)  # type: ignore[arg-type]
    assert pinned.calls == []  # refused before asking for a capsule


def test_other_device_names_both_ordinals() -> None:
    t = FakeTensor((DL.KDL_CUDA, 3))
    with pytest.raises(BufferOwnershipError) as exc:
        interop.import_dlpack(StandInCuda(), t)  # type: ignore[arg-type]
    msg = str(exc.value)
    assert "CUDA device 3" in msg and "CUDA device 0" in msg and "cuda:3" in msg
    assert t.calls == []


def test_non_cuda_devices_and_non_arrays_are_refused() -> None:
    with pytest.raises(InvalidDispatch, match="ROCm"):
        interop.import_dlpack(StandInCuda(), FakeTensor((DL.KDL_ROCM, 0)))  # type: ignore[arg-type]
    with pytest.raises(InvalidDispatch, match="neither DLPack"):
        interop.import_dlpack(StandInCuda(), [1, 2, 3])  # type: ignore[arg-type]


@pytest.mark.parametrize("versioned", [True, False])
def test_non_contiguous_is_refused_and_the_producer_released(versioned: bool) -> None:
    t = FakeTensor((DL.KDL_CUDA, 0), shape=(4, 4), strides=(1, 4), versioned=versioned)
    before = DL.live_exports()
    with pytest.raises(InvalidDispatch, match=r"not C-contiguous.*\.contiguous\(\)"):
        interop.import_dlpack(StandInCuda(), t, stream=None)  # type: ignore[arg-type]
    # the DLPack stream protocol: the producer was asked to order its work before vyre's
    assert t.calls[-1]["stream"] == StandInCuda.cu_stream
    if versioned:
        assert t.calls[-1]["max_version"] == (1, 0)
    gc.collect()
    assert t.released == 1 and DL.live_exports() == before


def test_stream_arguments() -> None:
    class TorchLike:
        cuda_stream = 77

    class CupyLike:
        ptr = 88

    assert interop.stream_handle(None) is None
    assert interop.stream_handle(5) == 5
    assert interop.stream_handle(TorchLike()) == 77
    assert interop.stream_handle(CupyLike()) == 88
    with pytest.raises(InvalidDispatch, match="cuda_stream"):
        interop.stream_handle(object())
    # export side: the DLPack protocol's stream values
    assert interop._consumer_stream(None) == 1  # legacy default stream
    assert interop._consumer_stream(-1) is None  # no synchronisation
    assert interop._consumer_stream(0x1234) == 0x1234
    with pytest.raises(ValueError, match="ambiguous"):
        interop._consumer_stream(0)


def test_consume_numpy_capsules_both_versions() -> None:
    a = np.arange(12, dtype=np.int32).reshape(3, 4)
    for kw in ({}, {"max_version": (1, 0)}):
        try:
            cap = a.__dlpack__(**kw)
        except TypeError:
            pytest.skip(f"numpy {np.__version__} has no versioned DLPack export")
        t = DL.consume(cap)
        try:
            assert t.data == a.ctypes.data and t.shape == (3, 4)
            assert t.device_type == DL.KDL_CPU and t.is_c_contiguous()
            assert DL.numpy_dtype(t.dtype) == np.int32 and t.nbytes == a.nbytes
        finally:
            t.release()
        with pytest.raises(BufferError, match="consumed already"):
            DL.consume(cap)
    t = DL.consume(a[:, ::2].__dlpack__())
    assert not t.is_c_contiguous()
    t.release()


def test_exported_capsule_lives_until_the_consumer_lets_go() -> None:
    src = np.arange(6, dtype=np.float32)
    released: list[int] = []
    before = DL.live_exports()

    class Producer:
        def __dlpack__(self, stream: Any = None, **kw: Any) -> Any:
            return DL.make_capsule(src.ctypes.data, DL.KDL_CPU, 0, (2, 3), src.dtype, src,
                                   lambda: released.append(1))

        def __dlpack_device__(self) -> tuple[int, int]:
            return (DL.KDL_CPU, 0)

    view = np.from_dlpack(Producer())
    assert view.shape == (2, 3) and view.ctypes.data == src.ctypes.data
    np.testing.assert_array_equal(view.ravel(), src)
    assert DL.live_exports() == before + 1 and not released
    del view
    gc.collect()
    assert released == [1] and DL.live_exports() == before
    # a capsule nobody consumes is released when it dies
    cap = Producer().__dlpack__()
    del cap
    gc.collect()
    assert released == [1, 1] and DL.live_exports() == before


def test_dtype_mapping() -> None:
    for dt in (np.int8, np.int32, np.int64, np.uint8, np.uint32, np.uint64, np.float16,
               np.float32, np.float64, np.bool_):
        assert DL.numpy_dtype(DL.dl_dtype(np.dtype(dt))) == np.dtype(dt)
    assert DL.numpy_dtype(DL.DLDataType(4, 16, 1)) is None  # bfloat16: raw bytes
    assert DL.describe_dtype(DL.DLDataType(2, 32, 4)) == "float32x4"
    with pytest.raises(ValueError):
        DL.dl_dtype(np.dtype("complex64"))
