"""The CUDA backend's host-side launch path, on a stand-in driver (no GPU needed).

What the driver is asked to do, call by call: a re-launched bound dispatch is exactly one
cuLaunchKernel with its packed record; everything that must be checked still is (freed
buffers, a closed or poisoned instance, a new thread, buffers shared with a framework
stream, profiling). Results on a real GPU are tests/test_cuda_runtime.py's.
"""

from __future__ import annotations

import ctypes
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import vyre
from vyre import DispatchConfig
from vyre.tools.bench.vyre_impl import inc_program  # y[i] += 1 over u32

pytest.importorskip("cuda.bindings.driver", reason="cuda-bindings is not installed")
sys.path.insert(0, str(Path(__file__).resolve().parent))
import cuda_standin

RECORDED = frozenset({"cuLaunchKernel", "cuCtxSetCurrent", "cuEventRecord",
                      "cuStreamWaitEvent", "cuGraphLaunch", "cuEventSynchronize",
                      "cuStreamSynchronize", "cuEventQuery", "cuStreamQuery"})
# the tests run on the main thread, where a wait for the device asks the driver (one query
# when the work is done) instead of blocking in it, so that Ctrl-C can end it (waits.py)
STREAM_WAIT, EVENT_WAIT = "cuStreamQuery", "cuEventQuery"


@pytest.fixture
def drv() -> Iterator[Any]:
    with cuda_standin.installed(RECORDED) as fake:
        yield fake


@pytest.fixture
def cuda(drv: Any, tmp_path: Path) -> Iterator[Any]:
    with cuda_standin.backend(str(tmp_path)) as b:
        yield b


def _bound(cuda: Any, **cfg: Any) -> tuple[Any, Any]:
    y = cuda.allocate_device_buffer(4 * 256)
    cuda.write(y, np.zeros(256, np.uint32))
    bound = cuda.bind(inc_program(), [], [y], DispatchConfig.for_elements(256, 256, **cfg))
    return y, bound


def _names(drv: Any) -> list[str]:
    return [name for name, _tid, _args in drv.calls]


def test_a_bound_relaunch_is_one_launch_call(cuda: Any, drv: Any) -> None:
    _y, bound = _bound(cuda, options={"timing": True})
    cuda.dispatch_with_device_buffers(bound)  # first: compiled and packed
    fn, grid, block, params = cuda.launch_args(bound)
    drv.calls.clear()
    ts = [cuda.dispatch_with_device_buffers(bound) for _ in range(5)]
    assert _names(drv) == ["cuLaunchKernel"] * 5
    assert drv.calls[0][2] == (fn, *grid, *block, 0, cuda.cu_stream, params, 0)
    assert all(type(t) is vyre.Timing and t.wall_ns > 0 and t.enqueue_ns == t.wall_ns
               and t.wait_ns == 0 and t.device_ns is None for t in ts)
    _y2, untimed = _bound(cuda, options={"timing": False})
    assert cuda.dispatch_with_device_buffers(untimed) == vyre.Timing()
    _y3, default = _bound(cuda)  # host timing is asked for, not the default
    assert cuda.dispatch_with_device_buffers(default) == vyre.Timing()


def test_each_timed_launch_times_itself(cuda: Any, drv: Any, monkeypatch: Any) -> None:
    """With options timing=True each launch's Timing is its own host time (a fake clock):
    wall = enqueue, nothing waited, no device time."""
    import vyre.backend as core

    _y, bound = _bound(cuda, options={"timing": True})
    cuda.dispatch_with_device_buffers(bound)
    durations = [700 + (k * 7919) % 1500 for k in range(600)]
    reads = iter([r for k, d in enumerate(durations) for r in (10**9 * k, 10**9 * k + d)])
    monkeypatch.setattr(core, "_perf_ns", lambda: next(reads))
    got = [cuda.dispatch_with_device_buffers(bound) for _ in durations]
    assert got == [vyre.Timing(d, d, 0, None) for d in durations]
    assert all(type(t) is vyre.Timing for t in got)


def test_a_free_makes_launches_recheck_their_buffers(cuda: Any, drv: Any) -> None:
    y, bound = _bound(cuda)
    cuda.dispatch_with_device_buffers(bound)
    other = cuda.allocate_device_buffer(16)
    other.free()
    drv.calls.clear()
    cuda.dispatch_with_device_buffers(bound)  # re-checked, still fine
    assert _names(drv) == ["cuLaunchKernel"]
    y.free()
    drv.calls.clear()
    with pytest.raises(vyre.BufferStateError):
        cuda.dispatch_with_device_buffers(bound)
    assert _names(drv) == []


def test_a_closed_instance_launches_nothing(cuda: Any, drv: Any) -> None:
    _y, bound = _bound(cuda)
    cuda.dispatch_with_device_buffers(bound)
    cuda.close()
    drv.calls.clear()
    with pytest.raises(vyre.BackendUnavailable):
        cuda.dispatch_with_device_buffers(bound)
    assert "cuLaunchKernel" not in _names(drv)


def test_a_new_thread_makes_the_context_current_first(cuda: Any, drv: Any) -> None:
    _y, bound = _bound(cuda)
    cuda.dispatch_with_device_buffers(bound)
    drv.calls.clear()
    seen: list[int] = []

    def work() -> None:
        seen.append(threading.get_ident())
        for _ in range(3):
            cuda.dispatch_with_device_buffers(bound)

    t = threading.Thread(target=work)
    t.start()
    t.join()
    assert [(n, tid) for n, tid, _ in drv.calls] == \
        [("cuCtxSetCurrent", seen[0])] + [("cuLaunchKernel", seen[0])] * 3


def test_launch_errors_and_a_poisoned_context(cuda: Any, drv: Any) -> None:
    from cuda.bindings import driver as real

    err = real.CUresult
    drv.cuLaunchKernel = lambda *a: (err.CUDA_ERROR_INVALID_VALUE,)  # packed into records
    _y, bound = _bound(cuda)
    for _ in range(2):  # the first launch prepares the record, the second is unchecked
        with pytest.raises(vyre.DispatchError, match="cuLaunchKernel"):
            cuda.dispatch_with_device_buffers(bound)
    drv.cuLaunchKernel = lambda *a: (err.CUDA_ERROR_ILLEGAL_ADDRESS,)
    _y2, poisoning = _bound(cuda)
    with pytest.raises(vyre.DispatchError, match="unusable"):
        cuda.dispatch_with_device_buffers(poisoning)
    with pytest.raises(vyre.BackendUnavailable, match="context was lost"):
        cuda.dispatch_with_device_buffers(bound)


def test_buffers_shared_with_a_framework_stream_are_ordered(cuda: Any, drv: Any) -> None:
    from vyre.backends.cuda import interop

    y, bound = _bound(cuda)
    _plain_y, plain = _bound(cuda)
    cuda.dispatch_with_device_buffers(bound)
    cuda.dispatch_with_device_buffers(plain)
    interop.link_stream(y, 0x5000)
    assert cuda.interop_active
    drv.calls.clear()
    cuda.dispatch_with_device_buffers(bound)
    assert _names(drv) == ["cuEventRecord", "cuStreamWaitEvent", "cuLaunchKernel",
                           "cuEventRecord", "cuStreamWaitEvent"]
    assert drv.calls[0][2][1] == 0x5000  # the framework stream's work comes first
    drv.calls.clear()
    cuda.dispatch_with_device_buffers(plain)  # shares no stream: a launch and nothing else
    assert _names(drv) == ["cuLaunchKernel"]


def test_a_profiled_bound_dispatch_waits_and_times(cuda: Any, drv: Any) -> None:
    _y, bound = _bound(cuda, profile=True)
    for _ in range(2):  # never the unchecked path, also once prepared
        drv.calls.clear()
        t = cuda.dispatch_with_device_buffers(bound)
        assert _names(drv) == ["cuEventRecord", "cuLaunchKernel", "cuEventRecord",
                               EVENT_WAIT]
        assert t.device_ns == 1000  # the stand-in's cuEventElapsedTime: 0.001 ms


def test_a_pipeline_run_is_its_graph_launches_and_one_sync(cuda: Any, drv: Any) -> None:
    """What the raw peer's batch does (cuGraphLaunch, cuStreamSynchronize); device timing
    only when a step asks for it, between two events."""
    y, bound = _bound(cuda)
    _yp, profiled = _bound(cuda, profile=True)
    pipe, timed = cuda.pipeline([bound] * 10), cuda.pipeline([profiled] * 10)
    pipe.run(repeat=3)  # captures the graph of two body copies too
    timed.run(repeat=3)
    drv.calls.clear()
    for repeat in (1, 3):
        graphs = 1 if repeat == 1 else 2  # 3 = 2 + 1 body copies
        res = pipe.run(repeat=repeat)
        assert _names(drv) == [*["cuGraphLaunch"] * graphs, STREAM_WAIT]
        assert res.timing.device_ns is None and res.extra["graph_launches"] == graphs
        assert res.timing.wall_ns >= res.timing.enqueue_ns + res.timing.wait_ns
        drv.calls.clear()
        res = timed.run(repeat=repeat)
        assert _names(drv) == ["cuEventRecord", *["cuGraphLaunch"] * graphs, "cuEventRecord",
                               EVENT_WAIT]
        assert res.timing.device_ns == 1000 and res.extra["graph_launches"] == graphs
        drv.calls.clear()
    other = cuda.allocate_device_buffer(16)
    other.free()  # the buffers are re-checked, and still fine
    pipe.run()
    assert "cuGraphLaunch" in _names(drv)
    y.free()
    drv.calls.clear()
    with pytest.raises(vyre.BufferStateError):
        pipe.run()
    assert _names(drv) == []


def test_a_write_from_page_locked_memory_waits_for_its_copy(cuda: Any, drv: Any) -> None:
    """From memory the driver knows (page-locked, registered, managed) the copy runs on after
    cuMemcpyHtoDAsync returns, so write() waits for it (the caller may reuse the array at
    once); from ordinary memory the driver has taken the bytes already: no wait."""
    y = cuda.allocate_device_buffer(4096)
    drv.calls.clear()
    cuda.write(y, np.zeros(1024, np.uint32))
    assert "cuStreamSynchronize" not in _names(drv)
    _err, addr = drv.cuMemAllocHost(4096)
    locked = np.ctypeslib.as_array((ctypes.c_uint32 * 1024).from_address(int(addr)))
    for part in (locked, locked[512:]):  # a pointer inside the allocation counts too
        drv.calls.clear()
        cuda.write(y, part)
        assert _names(drv) == ["cuStreamSynchronize"]
    drv.cuMemFreeHost(addr)


def test_page_locked_arrays_are_registered_while_they_and_the_instance_live(
        cuda: Any, drv: Any) -> None:
    import gc

    a = cuda.page_locked_array((4, 1024), np.float32)
    assert a.shape == (4, 1024) and a.dtype == np.float32 and a.flags.writeable
    ptr = a.ctypes.data
    assert ptr % 4096 == 0 and drv.registered == {ptr: a.nbytes}
    y = cuda.allocate_device_buffer(a.nbytes)
    drv.calls.clear()
    cuda.write(y, a[1:])  # a write from it waits for its copy (the caller may reuse it)
    assert _names(drv) == ["cuStreamSynchronize"]
    assert cuda.read_into(y, a) is a
    view = a[2]  # a view keeps the memory (and its registration) alive
    del a
    gc.collect()
    assert drv.registered == {ptr: 4096 * 4}
    del view
    gc.collect()
    assert drv.registered == {}  # unregistered before NumPy freed it
    assert cuda.page_locked_array(0, np.uint8).size == 0 and drv.registered == {}


def test_page_locked_arrays_outlive_close_as_ordinary_memory(drv: Any, tmp_path: Path) -> None:
    import gc

    from vyre.backends.cuda.runtime import CudaBackend

    b = CudaBackend(0, cache_dir=str(tmp_path))
    a = b.page_locked_array(1000, np.int32)
    a[:] = np.arange(1000)
    b.close()
    assert drv.registered == {}  # close() unregistered it; the array is NumPy's memory
    a += 1
    assert a[-1] == 1000
    del a
    gc.collect()  # its finalizer finds nothing left to unregister
    assert drv.registered == {}


def test_page_locked_array_arguments(cuda: Any) -> None:
    with pytest.raises(vyre.InvalidDispatch, match="shape must be"):
        cuda.page_locked_array((2, -1))
    with pytest.raises(vyre.InvalidDispatch, match="shape must be"):
        cuda.page_locked_array((2.0,))
    with pytest.raises(vyre.InvalidDispatch, match="numeric numpy dtype"):
        cuda.page_locked_array(4, object)
    assert cuda.page_locked_array(3, vyre.f16).dtype == np.float16
    assert cuda.page_locked_array([2, 3], np.uint8).shape == (2, 3)


@pytest.mark.parametrize("wait", ["synchronize", "pending", "pipeline"])
def test_a_long_wait_on_the_main_thread_answers_ctrl_c(cuda: Any, drv: Any,
                                                        wait: str) -> None:
    """The driver's blocking synchronize cannot be interrupted: on the main thread the
    wait polls instead (vyre/backends/cuda/waits.py), so Ctrl-C ends it promptly, and the
    instance works afterwards. Here the stand-in's work never finishes until told to."""
    import signal
    import threading
    import time

    from vyre.backends.cuda import driver as D

    if threading.current_thread() is not threading.main_thread():
        pytest.skip("Ctrl-C reaches the main thread only")
    busy = [True]

    def query(_handle: Any) -> tuple[Any]:
        return (cuda_standin.real.CUresult(D.NOT_READY) if busy[0] else cuda_standin.OK,)

    drv.cuStreamQuery = drv.cuEventQuery = query
    y, bound = _bound(cuda)
    cuda.dispatch_with_device_buffers(bound)
    pipe = cuda.pipeline([bound])
    calls = {"synchronize": cuda.synchronize,
             "pending": lambda: cuda.dispatch_async(bound).wait(),
             "pipeline": lambda: pipe.run(read=[y])}
    timer = threading.Timer(0.2, lambda: signal.pthread_kill(threading.main_thread().ident,
                                                             signal.SIGINT))
    t0 = time.monotonic()
    timer.start()
    returned = False
    with pytest.raises(KeyboardInterrupt):
        calls[wait]()
        returned = True  # the wait did not wait for the (never finishing) work
        time.sleep(5)
    assert not returned, "the wait returned before the work was done"
    assert time.monotonic() - t0 < 2, "Ctrl-C was held until the wait ended"
    busy[0] = False
    calls[wait]()  # the instance is still usable
