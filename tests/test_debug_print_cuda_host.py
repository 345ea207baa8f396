"""vyre.print / vyre.assert_ on the CUDA backend's host path, on the stand-in driver (no GPU
needed): a debug dispatch asks the driver for exactly what the same dispatch without them
does, plus the log's own copies (its header reset before, its words read after) and no
wait of its own: the log comes back with a completion that happens anyway (issue 30:
"no extra host sync when nothing was printed"). What the records say on a real GPU is
tests/test_debug_print.py's (its `backend` tests run on cuda there)."""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import vyre
from vyre import Buffer, InOut, f32

pytest.importorskip("cuda.bindings.driver", reason="cuda-bindings is not installed")
sys.path.insert(0, str(Path(__file__).resolve().parent))
import cuda_standin

WAITS = ("cuStreamSynchronize", "cuEventSynchronize", "cuStreamQuery", "cuEventQuery")
HTOD, DTOH = "cuMemcpyHtoDAsync", "cuMemcpyDtoHAsync"
RECORDED = frozenset({"cuLaunchKernel", "cuEventRecord", "cuGraphLaunch", HTOD, DTOH, *WAITS})


@vyre.kernel(workgroup_size=4)
def _plain(x: Buffer[f32], y: InOut[f32]) -> None:
    i = vyre.global_linear_id()
    with vyre.if_(i < y.length()):
        y[i] = x[i]


@vyre.kernel(workgroup_size=4)
def _logged(x: Buffer[f32], y: InOut[f32]) -> None:
    i = vyre.global_linear_id()
    with vyre.if_(i < y.length()):
        vyre.assert_(x[i] >= 0.0, "negative at {}", i)
        y[i] = x[i]


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory: pytest.TempPathFactory) -> str:
    return str(tmp_path_factory.mktemp("cuda-cache"))  # (compiled once for every test)


@pytest.fixture
def drv() -> Iterator[Any]:
    with cuda_standin.installed(RECORDED) as fake:
        yield fake


@pytest.fixture
def cuda(drv: Any, cache_dir: str) -> Iterator[Any]:
    with cuda_standin.backend(cache_dir) as b:
        yield b


def _calls(drv: Any, work: Callable[[], Any]) -> list[str]:
    drv.calls.clear()
    work()
    return [name for name, _tid, _args in drv.calls]


def _paths(cuda: Any, kernel: Any) -> dict[str, list[str]]:
    """The driver calls of each dispatch path for `kernel` (compiled before)."""
    xb, yb = cuda.allocate_device_buffer(32), cuda.allocate_device_buffer(32)
    kernel.launch(cuda, 8, xb, yb)
    cuda.synchronize()
    pipe = cuda.pipeline([kernel.step(8, xb, yb)])
    pipe.run(read=[yb])  # (records its graph)
    pending: list[Any] = []
    out = {
        "resident": _calls(cuda.driver, lambda: kernel.launch(cuda, 8, xb, yb)),
        "next read": _calls(cuda.driver, lambda: cuda.read(yb, dtype=np.float32)),
        "host": _calls(cuda.driver, lambda: kernel.launch(cuda, 8, np.ones(8, np.float32),
                                                        np.zeros(8, np.float32))),
        "async": _calls(cuda.driver, lambda: pending.append(
            cuda.dispatch_async(kernel.program, [xb], [yb], kernel.config(8)))),
        "async wait": _calls(cuda.driver, lambda: pending[0].wait()),
        "pipeline": _calls(cuda.driver, lambda: pipe.run(read=[yb])),
    }
    cuda.free(xb)
    cuda.free(yb)
    return out


def test_a_debug_dispatch_adds_only_the_logs_copies_and_no_wait(cuda: Any) -> None:
    plain, logged = _paths(cuda, _plain), _paths(cuda, _logged)
    # the log's header is reset on the stream before the kernel, its words read after it
    extra = {"resident": {HTOD: 1}, "next read": {DTOH: 1}, "host": {HTOD: 1, DTOH: 1},
             "async": {HTOD: 1}, "pipeline": {HTOD: 1}}
    for path, want in extra.items():
        got = Counter(logged[path])
        got.subtract(Counter(plain[path]))
        assert +got == Counter(want) and -got == Counter(), (path, plain[path], logged[path])
    for path in extra:  # as many waits as without the log: none of its own
        assert sum(logged[path].count(w) for w in WAITS) == \
            sum(plain[path].count(w) for w in WAITS), (path, plain[path], logged[path])
    assert not any(w in logged["resident"] for w in WAITS)  # enqueued, never waited for
    # dispatch_async: the log's copy is queued behind the kernel before the host waits, so
    # the read's one wait is the dispatch's completion and the kernel's event, asked after
    # it, is found done (a query, no second wait)
    assert plain["async wait"] == ["cuEventQuery"]
    assert logged["async wait"] == [DTOH, "cuStreamSynchronize", "cuEventQuery"]
    assert all(b.label != "vyre_debug_log" for b in cuda.live_buffers())


def test_a_failed_wait_names_the_kernel(cuda: Any, drv: Any) -> None:
    """A device fault in a debug dispatch_async is reported as the dispatch's own error
    (naming the kernel), not as a failed read of the log."""
    from cuda.bindings import driver as real

    xb, yb = cuda.allocate_device_buffer(32), cuda.allocate_device_buffer(32)
    pending = cuda.dispatch_async(_logged.program, [xb], [yb], _logged.config(8))
    fault = (real.CUresult.CUDA_ERROR_ILLEGAL_ADDRESS,)
    drv.cuStreamSynchronize = drv.cuEventSynchronize = lambda *a: fault
    drv.cuStreamQuery = drv.cuEventQuery = lambda *a: fault
    with pytest.raises(vyre.DispatchError, match="_logged"):
        pending.wait()
