"""The CUDA backend keeps freed device memory for reuse (device.ContextState.recycle), on the
stand-in driver (tests/cuda_standin.py): a free costs no device wait and no cuMemFree, the
next allocation of the same rounded size reuses the memory, memory lent outside vyre's
stream order (DLPack) is freed for real, an allocation the device refuses first gives the
kept memory back, and release_cached_memory / close give it all back."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("cuda.bindings.driver", reason="cuda-bindings is not installed")
sys.path.insert(0, str(Path(__file__).resolve().parent))
import cuda_standin

RECORDED = frozenset({"cuMemAlloc", "cuMemFree", "cuStreamSynchronize", "cuStreamQuery"})


@pytest.fixture
def drv() -> Iterator[Any]:
    with cuda_standin.installed(RECORDED) as fake:
        yield fake


@pytest.fixture
def cuda(drv: Any, tmp_path: Path) -> Iterator[Any]:
    with cuda_standin.backend(str(tmp_path)) as b:
        yield b


def _count(drv: Any, name: str) -> int:
    return sum(1 for n, _t, _a in drv.calls if n == name)


def test_a_freed_buffer_is_reused_without_a_wait_or_a_free(cuda: Any, drv: Any) -> None:
    a = cuda.allocate_device_buffer(3000)
    ptr = a.ptr
    drv.calls.clear()
    cuda.free(a)
    b = cuda.allocate_device_buffer(2500)  # rounds to the same 4 KiB
    assert b.ptr == ptr and b.byte_len == 2500
    assert _count(drv, "cuMemAlloc") == _count(drv, "cuMemFree") == 0
    assert _count(drv, "cuStreamSynchronize") + _count(drv, "cuStreamQuery") == 0
    c = cuda.allocate_device_buffer(3000)  # b holds the kept one: a new allocation
    assert c.ptr != ptr and _count(drv, "cuMemAlloc") == 1
    del b  # a dropped buffer is kept too
    d = cuda.allocate_device_buffer(4096)
    assert d.ptr == ptr


def test_large_sizes_round_to_2_mib_and_release_gives_it_all_back(cuda: Any, drv: Any) -> None:
    sizes = [(3 << 20) + 1, (4 << 20) - 1]  # both 4 MiB
    first = cuda.allocate_device_buffer(sizes[0])
    ptr = first.ptr
    cuda.free(first)
    again = cuda.allocate_device_buffer(sizes[1])
    assert again.ptr == ptr
    cuda.free(again)
    drv.calls.clear()
    assert cuda.release_cached_memory() == 4 << 20
    assert _count(drv, "cuMemFree") == 1
    assert cuda.release_cached_memory() == 0


def test_memory_lent_through_dlpack_is_freed_not_kept(cuda: Any, drv: Any) -> None:
    a = cuda.allocate_device_buffer(1024)
    cuda.write(a, np.arange(256, dtype=np.uint32))
    capsule = a.__dlpack__(stream=None)
    ptr = a.ptr
    del capsule  # the consumer is done: the memory goes back to the driver on free
    drv.calls.clear()
    cuda.free(a)
    assert _count(drv, "cuMemFree") == 1
    assert cuda.allocate_device_buffer(1024).ptr != ptr


def test_an_allocation_the_device_refuses_first_frees_the_kept_memory(
        cuda: Any, drv: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from cuda.bindings import driver as real

    kept = cuda.allocate_device_buffer(1 << 20)
    cuda.free(kept)
    refused = {"left": 1}
    alloc = drv.cuMemAlloc

    def once_out_of_memory(n: int) -> Any:
        if refused["left"]:
            refused["left"] -= 1
            return real.CUresult.CUDA_ERROR_OUT_OF_MEMORY, None
        return alloc(n)

    monkeypatch.setattr(drv, "cuMemAlloc", once_out_of_memory)
    drv.calls.clear()
    big = cuda.allocate_device_buffer(8 << 20)
    assert big.byte_len == 8 << 20 and _count(drv, "cuMemFree") == 1


def test_close_gives_the_kept_memory_back(drv: Any, tmp_path: Path) -> None:
    from vyre.backends.cuda.runtime import CudaBackend

    b = CudaBackend(0, cache_dir=str(tmp_path))
    for n in (100, 5000, 3 << 20):
        b.free(b.allocate_device_buffer(n))
    drv.calls.clear()
    b.close()
    assert _count(drv, "cuMemFree") == 3
