"""The CUDA backend runs an exact f32 atomic add's plan (vyre.exact_sum_plan) as two kernel
launches per dispatch, behind the same one-call hot path, with the stand-in driver (no GPU:
tests/cuda_standin.py; NVRTC compiles the real kernels)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from vyre import DispatchConfig

pytest.importorskip("cuda.bindings.driver", reason="cuda-bindings is not installed")
sys.path.insert(0, str(Path(__file__).resolve().parent))
import cuda_standin
from test_exact_atomics import histogram


@pytest.fixture
def cuda(tmp_path: Path) -> Iterator[tuple[Any, Any]]:
    from vyre.backends.cuda import driver as D
    from vyre.backends.cuda.runtime import CudaBackend

    before = D._driver
    fake = cuda_standin.install(frozenset({"cuLaunchKernel"}))
    try:
        b = CudaBackend(0, cache_dir=str(tmp_path))
        try:
            yield b, fake
        finally:
            b.close()
    finally:
        D._driver = before


def test_exact_histogram_is_kernel_then_finalisation(cuda: tuple[Any, Any]) -> None:
    be, drv = cuda
    vals = be.allocate_device_buffer(4 * 1024)
    keys = be.allocate_device_buffer(4 * 1024)
    hist = be.allocate_device_buffer(4 * 16)
    bound = be.bind(histogram(), [vals, keys], [hist], DispatchConfig.for_elements(1024, 64))
    be.dispatch_with_device_buffers(bound)
    drv.calls.clear()
    for _ in range(3):
        be.dispatch_with_device_buffers(bound)
    launches = [args for name, _tid, args in drv.calls if name == "cuLaunchKernel"]
    assert len(launches) == 6
    kernels = [a[0] for a in launches]
    assert kernels[0] != kernels[1] and kernels[0::2] == [kernels[0]] * 3
    assert [a[1] for a in launches[1::2]] == [1] * 3  # 16 elements: one finalisation block
    assert set(be.live_buffers()) == {vals, keys, hist}  # the scratch is the backend's own
    np.testing.assert_array_equal(be.read(hist, dtype=np.float32), np.zeros(16, np.float32))


def test_async_and_pipeline_run_both_kernels(cuda: tuple[Any, Any]) -> None:
    from vyre import Step

    be, drv = cuda
    vals = be.allocate_device_buffer(4 * 1024)
    keys = be.allocate_device_buffer(4 * 1024)
    hist = be.allocate_device_buffer(4 * 16)
    cfg = DispatchConfig.for_elements(1024, 64)
    be.dispatch_async(histogram(), [vals, keys], [hist], cfg).wait()
    drv.calls.clear()
    be.dispatch_async(histogram(), [vals, keys], [hist], cfg).wait()
    assert [n for n, _t, _a in drv.calls].count("cuLaunchKernel") == 2
    pipe = be.pipeline([Step(histogram(), [vals, keys], [hist], cfg)])
    assert len(pipe.steps) == 2
    pipe.run(repeat=3)
