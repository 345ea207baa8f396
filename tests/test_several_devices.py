"""Several backends (CUDA ones especially) in one process, on one or many threads, with other code changing
the thread's current context in between (another vyre instance on another GPU, torch or
CuPy on another device, a raw cuCtxSetCurrent): every call still runs in its own instance's
context. On a stand-in driver that keeps contexts as the real one does (objects belong to
the context current when they were made; a launch of another context's function is
refused with CUDA_ERROR_INVALID_HANDLE), so it runs without a GPU; tests/test_cuda_runtime.py
has the same on real GPUs.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import vyre
from vyre import DispatchConfig, Step
from vyre.tools.bench.vyre_impl import inc_program  # y[i] += 1 over u32

pytest.importorskip("cuda.bindings.driver", reason="cuda-bindings is not installed")
sys.path.insert(0, str(Path(__file__).resolve().parent))
import cuda_standin

N = 256


@pytest.fixture
def drv() -> Iterator[Any]:
    from vyre.backends.cuda import driver as D

    before = D._driver
    fake = cuda_standin.install(devices=2, strict_contexts=True)
    try:
        yield fake
    finally:
        D._driver = before


@pytest.fixture
def pair(drv: Any, tmp_path: Path) -> Iterator[tuple[Any, Any]]:
    from vyre.backends.cuda.runtime import CudaBackend

    a = CudaBackend(0, cache_dir=str(tmp_path))
    b = CudaBackend(1, cache_dir=str(tmp_path))
    try:
        yield a, b
    finally:
        a.close()
        b.close()


def _ctx(backend: Any) -> int:
    return int(backend.context_state.ctx_id)


def _work(backend: Any, drv: Any) -> None:
    """Everything a user does with one instance: each object lands in its context."""
    y = backend.allocate_device_buffer(4 * N)
    assert drv.context_of[int(y.ptr)] == _ctx(backend), "allocated under another context"
    backend.write(y, np.zeros(N, np.uint32))
    cfg = DispatchConfig.for_elements(N, 64)
    backend.dispatch_with_device_buffers(inc_program(), [], [y], cfg)
    bound = backend.bind(inc_program(), [], [y], cfg)
    backend.dispatch_with_device_buffers(bound)
    backend.dispatch_async(bound).wait()
    backend.pipeline([Step(inc_program(), [], [y], cfg)]).run(repeat=2)
    backend.read(y, dtype=np.uint32)
    backend.synchronize()
    backend.free(y)


def test_two_devices_alternating_on_one_thread(pair: tuple[Any, Any], drv: Any) -> None:
    a, b = pair
    for _ in range(3):
        _work(a, drv)
        _work(b, drv)


def test_a_bound_relaunch_after_another_device_was_used(pair: tuple[Any, Any],
                                                        drv: Any) -> None:
    """The launch hot path skips every check: a failed launch must find the context that
    another instance made current, and launch again (the bug: CUDA_ERROR_INVALID_HANDLE)."""
    a, b = pair
    cfg = DispatchConfig.for_elements(N, 64)
    ya = a.allocate_device_buffer(4 * N)
    yb = b.allocate_device_buffer(4 * N)
    bound_a = a.bind(inc_program(), [], [ya], cfg)
    bound_b = b.bind(inc_program(), [], [yb], cfg)
    for _ in range(4):
        a.dispatch_with_device_buffers(bound_a)
        b.dispatch_with_device_buffers(bound_b)
    assert drv.current_context() == _ctx(b)


@pytest.mark.parametrize("foreign", ["other device", "no context"])
def test_someone_else_changes_the_current_context(pair: tuple[Any, Any], drv: Any,
                                                  foreign: str) -> None:
    """What torch or CuPy on another GPU, or a user's own cuCtxSetCurrent, does."""
    a, b = pair
    other = b.context_state.ctx if foreign == "other device" else None
    cfg = DispatchConfig.for_elements(N, 64)
    y = a.allocate_device_buffer(4 * N)
    bound = a.bind(inc_program(), [], [y], cfg)
    for step in range(6):
        drv.cuCtxSetCurrent(other)
        if step % 2:
            a.dispatch_with_device_buffers(bound)
        else:
            _work(a, drv)
        assert drv.current_context() == _ctx(a)


def test_two_threads_each_driving_its_own_device(pair: tuple[Any, Any], drv: Any) -> None:
    errors: list[BaseException] = []
    barrier = threading.Barrier(2)

    def drive(backend: Any) -> None:
        try:
            barrier.wait()
            for _ in range(5):
                _work(backend, drv)
        except BaseException as exc:  # reported below, with the thread's own traceback
            errors.append(exc)

    threads = [threading.Thread(target=drive, args=(be,)) for be in pair]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors


def test_a_real_launch_error_is_still_raised(pair: tuple[Any, Any], drv: Any) -> None:
    """A launch refused while vyre's own context is current is not retried away."""
    a, _b = pair
    y = a.allocate_device_buffer(4 * N)
    bound = a.bind(inc_program(), [], [y], DispatchConfig.for_elements(N, 64))
    a.dispatch_with_device_buffers(bound)
    fn, *_ = a.launch_args(bound)
    drv.context_of[int(fn)] = 0x7777  # the driver now answers INVALID_HANDLE whatever is current
    with pytest.raises(vyre.BackendError, match="cuLaunchKernel"):
        a.dispatch_with_device_buffers(bound)


# ------------------------------------------------------------------ on real GPUs


def _cuda_devices() -> int:
    a = {x.name: x for x in vyre.available_backends()}.get("cuda")
    if a is None or not a.available:
        pytest.skip(f"no CUDA here: {a.reason if a else 'backend not registered'}")
    from vyre.backends.cuda import driver as D

    return D.device_count()


def _incremented(backend: Any, rounds: int) -> np.ndarray:
    y = backend.allocate_device_buffer(4 * N)
    backend.write(y, np.zeros(N, np.uint32))
    bound = backend.bind(inc_program(), [], [y], DispatchConfig.for_elements(N, 64))
    for _ in range(rounds):
        backend.dispatch_with_device_buffers(bound)
    out = backend.read(y, dtype=np.uint32)
    backend.free(y)
    return np.asarray(out)


@pytest.mark.gpu
def test_gpu_a_foreign_context_between_calls() -> None:
    """A context of someone else's (a raw cuCtxCreate, then none at all) made current
    between vyre's calls on one GPU."""
    _cuda_devices()
    from vyre.backends.cuda import driver as D

    drv = D.load()
    with vyre.get_backend("cuda") as gpu:
        try:
            foreign = D.call(drv.cuCtxCreate, None, 0, D.call(drv.cuDeviceGet, 0))
        except TypeError:  # cuda-bindings 12
            foreign = D.call(drv.cuCtxCreate, 0, D.call(drv.cuDeviceGet, 0))
        try:
            for other in (foreign, None):
                y = gpu.allocate_device_buffer(4 * N)
                gpu.write(y, np.zeros(N, np.uint32))
                bound = gpu.bind(inc_program(), [], [y], DispatchConfig.for_elements(N, 64))
                for _ in range(3):
                    D.call(drv.cuCtxSetCurrent, other)
                    gpu.dispatch_with_device_buffers(bound)
                D.call(drv.cuCtxSetCurrent, other)
                assert (np.asarray(gpu.read(y, dtype=np.uint32)) == 3).all()
                gpu.free(y)
        finally:
            D.call(drv.cuCtxDestroy, foreign)


@pytest.mark.gpu
def test_gpu_two_devices_in_one_process_and_on_two_threads() -> None:
    if _cuda_devices() < 2:
        pytest.skip("needs 2 CUDA devices (this machine has fewer)")
    with vyre.get_backend("cuda:0") as a, vyre.get_backend("cuda:1") as b:
        for _ in range(3):  # one thread, alternating
            assert (_incremented(a, 2) == 2).all()
            assert (_incremented(b, 3) == 3).all()
        results: dict[str, Any] = {}

        def drive(name: str, backend: Any) -> None:
            try:
                results[name] = [bool((_incremented(backend, 4) == 4).all())
                                 for _ in range(20)]
            except BaseException as exc:  # reported below
                results[name] = exc

        threads = [threading.Thread(target=drive, args=p) for p in (("a", a), ("b", b))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert results == {"a": [True] * 20, "b": [True] * 20}, results


@pytest.mark.gpu
def test_gpu_torch_on_the_other_device_between_calls() -> None:
    if _cuda_devices() < 2:
        pytest.skip("needs 2 CUDA devices (this machine has fewer)")
    torch = pytest.importorskip("torch", reason="torch is not installed")
    with vyre.get_backend("cuda:0") as a:
        y = a.allocate_device_buffer(4 * N)
        a.write(y, np.zeros(N, np.uint32))
        bound = a.bind(inc_program(), [], [y], DispatchConfig.for_elements(N, 64))
        for _ in range(5):
            t = torch.ones(1 << 16, device="cuda:1") * 2  # torch makes device 1 current
            a.dispatch_with_device_buffers(bound)
            assert float(t.sum()) == 2 * (1 << 16)
        assert (np.asarray(a.read(y, dtype=np.uint32)) == 5).all()
        a.free(y)


# ------------------------------------------------------------------ device to device


PEER_CALLS = frozenset({"cuEventRecord", "cuStreamWaitEvent", "cuMemcpyPeerAsync",
                        "cuStreamSynchronize", "cuCtxSynchronize", "cuEventSynchronize",
                        "cuMemcpyDtoH", "cuMemcpyDtoHAsync", "cuMemcpyHtoD",
                        "cuMemcpyHtoDAsync", "cuCtxEnablePeerAccess"})


def test_transfer_between_devices_is_one_peer_copy_ordered_by_events(
        tmp_path: Path) -> None:
    from vyre.backends.cuda import driver as D
    from vyre.backends.cuda.runtime import CudaBackend

    before = D._driver
    drv = cuda_standin.install(PEER_CALLS, devices=2, strict_contexts=True)
    try:
        with CudaBackend(0, cache_dir=str(tmp_path)) as a, \
                CudaBackend(1, cache_dir=str(tmp_path)) as b:
            src = a.allocate_device_buffer(4 * N, label="x")
            drv.calls.clear()
            out = vyre.transfer(src, b)
            assert out.owner is b and out.byte_len == src.byte_len and out.label == "x"
            assert drv.context_of[int(out.ptr)] == _ctx(b)
            names = [name for name, _tid, _args in drv.calls]
            assert not {"cuStreamSynchronize", "cuCtxSynchronize", "cuEventSynchronize",
                        "cuMemcpyDtoH", "cuMemcpyDtoHAsync", "cuMemcpyHtoD",
                        "cuMemcpyHtoDAsync"} & set(names), names  # no host copy, no wait
            calls = [(name, args) for name, _tid, args in drv.calls
                     if name != "cuCtxEnablePeerAccess"]
            (rec1, a1), (wait1, w1), (copy, c), (rec2, a2), (wait2, w2) = calls
            assert (rec1, wait1, copy, rec2, wait2) == (
                "cuEventRecord", "cuStreamWaitEvent", "cuMemcpyPeerAsync", "cuEventRecord",
                "cuStreamWaitEvent")
            assert a1[1] is a.cu_stream and w1[:2] == (b.cu_stream, a1[0])  # after x's writer
            assert c == (out.ptr, b.context_state.ctx, src.ptr, a.context_state.ctx, 4 * N, b.cu_stream)
            assert a2[1] is b.cu_stream and w2[:2] == (a.cu_stream, a2[0])  # x's next use
            drv.calls.clear()
            empty = vyre.transfer(a.allocate_device_buffer(0), b)
            assert empty.byte_len == 0 and not drv.calls_of("cuMemcpyPeerAsync")
            vyre.copy(src, out, src_offset=8, dst_offset=16, nbytes=100)
            (_, args), = drv.calls_of("cuMemcpyPeerAsync")
            assert args == (out.ptr + 16, b.context_state.ctx, src.ptr + 8, a.context_state.ctx, 100,
                            b.cu_stream)
            a.free(src)
            with pytest.raises(vyre.BufferStateError, match="freed"):
                vyre.transfer(src, b)
            assert len(b.live_buffers()) == 2
    finally:
        D._driver = before


@pytest.mark.gpu
def test_gpu_transfer_between_devices_keeps_the_order_of_work() -> None:
    """The bytes of the source as its last kernel left them; a write to the source right
    after the transfer does not reach the copy."""
    count = _cuda_devices()
    pairs = [("cuda:0", "cuda:0")] + ([("cuda:0", "cuda:1"), ("cuda:1", "cuda:0")]
                                      if count >= 2 else [])
    n = 1 << 22
    for src_name, dst_name in pairs:
        with vyre.get_backend(src_name) as a, vyre.get_backend(dst_name) as b:
            y = a.allocate_device_buffer(4 * n)
            a.write(y, np.arange(n, dtype=np.uint32))
            bound = a.bind(inc_program(), [], [y], DispatchConfig.for_elements(n, 256))
            for _ in range(7):
                a.dispatch_with_device_buffers(bound)  # still running when transfer starts
            out = vyre.transfer(y, b)
            a.write(y, np.zeros(n, np.uint32))  # after the copy read it
            got = np.asarray(b.read(out, dtype=np.uint32))
            np.testing.assert_array_equal(got, np.arange(n, dtype=np.uint32) + 7)
            a.dispatch_with_device_buffers(bound)  # ones, into the buffer made above
            assert vyre.transfer(y, b, out=out) is out
            assert (np.asarray(b.read(out, dtype=np.uint32)) == 1).all()


def test_transfer_into_a_given_buffer_and_its_errors(backends: dict[str, Any]) -> None:
    """`out=`: the copy lands in a buffer made once, on every pair of backends here."""
    data = np.arange(64, dtype=np.uint32)
    for src_be in backends.values():
        for dst_be in backends.values():
            x = src_be.allocate_device_buffer(data.nbytes)
            src_be.write(x, data)
            out = dst_be.allocate_device_buffer(data.nbytes + 16)
            dst_be.write(out, np.full(68, 7, np.uint32))
            assert vyre.transfer(x, dst_be, out=out) is out
            got = np.asarray(dst_be.read(out, dtype=np.uint32))
            np.testing.assert_array_equal(got, np.r_[data, [7] * 4])
            small = dst_be.allocate_device_buffer(8)
            with pytest.raises(vyre.InvalidDispatch, match="at least 256 bytes"):
                vyre.transfer(x, dst_be, out=small)
            with pytest.raises(vyre.BufferOwnershipError):
                vyre.transfer(x, dst_be, out=np.zeros(64, np.uint32))
            with pytest.raises(vyre.InvalidDispatch, match="source buffer itself"):
                vyre.transfer(x, src_be, out=x)
            for b, buf in ((src_be, x), (dst_be, out), (dst_be, small)):
                b.free(buf)


def test_copy_ranges_between_any_backends(backends: dict[str, Any]) -> None:
    """`vyre.copy`: a byte range into a buffer, on every pair of backends here (the same
    instance included), and its errors."""
    data = np.arange(64, dtype=np.uint32)
    for src_be in backends.values():
        for dst_be in backends.values():
            x = src_be.allocate_device_buffer(data.nbytes)
            src_be.write(x, data)
            y = dst_be.allocate_device_buffer(data.nbytes)
            dst_be.write(y, np.zeros(64, np.uint32))
            vyre.copy(x, y, src_offset=16, dst_offset=64, nbytes=32)
            want = np.zeros(64, np.uint32)
            want[16:24] = data[4:12]
            np.testing.assert_array_equal(np.asarray(dst_be.read(y, dtype=np.uint32)), want)
            for kw, phrase in [({"nbytes": 300}, "not all in the source"),
                               ({"dst_offset": 200, "nbytes": 64}, "at least 264 bytes"),
                               ({"src_offset": -4}, "int >= 0"),
                               ({"src_offset": 400}, "past the source's end")]:
                with pytest.raises(vyre.InvalidDispatch, match=phrase):
                    vyre.copy(x, y, **kw)
            with pytest.raises(vyre.BufferOwnershipError, match="write"):
                vyre.copy(x, np.zeros(4))
            vyre.copy(x, x, src_offset=0, dst_offset=128, nbytes=128)  # disjoint halves
            with pytest.raises(vyre.InvalidDispatch, match="overlap"):
                vyre.copy(x, x, src_offset=0, dst_offset=64, nbytes=128)
            src_be.free(x)
            with pytest.raises(vyre.BufferStateError, match="freed"):
                vyre.copy(x, y)
            dst_be.free(y)


def test_copy_many_between_devices_runs_concurrently(tmp_path: Path) -> None:
    """One `written` event per source, every copy on its destination's stream after its
    source's event, one `read` event per destination that every source it read waits
    for: no copy waits for another, and nothing waits on the host."""
    from vyre.backends.cuda import driver as D
    from vyre.backends.cuda.runtime import CudaBackend

    before = D._driver
    drv = cuda_standin.install(PEER_CALLS, devices=2, strict_contexts=True)
    try:
        with CudaBackend(0, cache_dir=str(tmp_path)) as a, \
                CudaBackend(1, cache_dir=str(tmp_path)) as b:
            xa = a.allocate_device_buffer(256)
            xb = b.allocate_device_buffer(256)
            ya, yb = a.allocate_device_buffer(256), b.allocate_device_buffer(256)
            drv.calls.clear()
            vyre.copy_many([(xa, yb, 0, 0, 64), (xa, yb, 64, 64, 64), (xb, ya),
                            (xa, ya, 0, 128, 16)])
            calls = [(n, args) for n, _t, args in drv.calls if n != "cuCtxEnablePeerAccess"]
            assert not {"cuStreamSynchronize", "cuCtxSynchronize", "cuEventSynchronize"} & {
                n for n, _ in calls}
            records = [args for n, args in calls if n == "cuEventRecord"]
            copies = [args for n, args in calls if n == "cuMemcpyPeerAsync"]
            assert len(copies) == 4 and len(records) == 4  # 2 sources + 2 destinations
            written = {int(args[1]): args[0] for args in records[:2]}  # stream -> event
            waits = [(int(args[0]), int(args[1])) for n, args in calls
                     if n == "cuStreamWaitEvent"]
            for args in copies:  # each copy's stream waited for its source's event first
                src_stream = a.cu_stream if args[3] == a.context_state.ctx else b.cu_stream
                assert (int(args[5]), int(written[int(src_stream)])) in waits
            reads = {int(args[1]): args[0] for args in records[2:]}
            for src in (a, b):  # each source waits for every destination it was read by
                assert (int(src.cu_stream), int(reads[int(b.cu_stream if src is a else
                                                         a.cu_stream)])) in waits
    finally:
        D._driver = before


def test_copy_many_checks_every_copy_before_any_runs(backends: dict[str, Any]) -> None:
    for be in backends.values():
        x = be.allocate_device_buffer(64)
        be.write(x, np.arange(16, dtype=np.uint32))
        y = be.allocate_device_buffer(64)
        be.write(y, np.zeros(16, np.uint32))
        with pytest.raises(vyre.InvalidDispatch, match="item 1 must be"):
            vyre.copy_many([(x, y), "nope"])
        with pytest.raises(vyre.InvalidDispatch, match="at least 96 bytes"):
            vyre.copy_many([(x, y), (x, y, 0, 32, 64)])
        assert not np.asarray(be.read(y, dtype=np.uint32)).any()  # the first did not run
        vyre.copy_many([(x, y, 0, 32, 32), (x, y, 32, 0, 32)])
        np.testing.assert_array_equal(np.asarray(be.read(y, dtype=np.uint32)),
                                      np.r_[np.arange(8, 16), np.arange(8)])
        be.free(x)
        be.free(y)


def test_cuda_ipc_export_then_copy_from_the_handle(tmp_path: Path) -> None:
    """What two CUDA actors of one node do for vyre.distributed.transfer: the owner waits
    for its stream and exports the buffer's handle; the other process opens it, copies
    device to device on its stream, waits, and closes it before returning."""
    from vyre.backends.cuda import driver as D
    from vyre.backends.cuda import ipc
    from vyre.backends.cuda.runtime import CudaBackend

    before = D._driver
    drv = cuda_standin.install(frozenset({"cuStreamSynchronize", "cuIpcOpenMemHandle",
                                          "cuMemcpyDtoDAsync", "cuIpcCloseMemHandle"}),
                               devices=2)
    try:
        with CudaBackend(0, cache_dir=str(tmp_path)) as a, \
                CudaBackend(1, cache_dir=str(tmp_path)) as b:
            x = a.allocate_device_buffer(1000)
            handle = ipc.export_handle(a, x)
            assert len(handle) == ipc.HANDLE_BYTES
            assert [n for n, _t, _a in drv.calls] == ["cuStreamSynchronize"]
            drv.calls.clear()
            y = b.allocate_device_buffer(1024)
            ipc.copy_from_handle(b, y, handle, 1000)
            names = [n for n, _t, _a in drv.calls]
            assert names == ["cuIpcOpenMemHandle", "cuMemcpyDtoDAsync", "cuStreamSynchronize",
                             "cuIpcCloseMemHandle"]
            (_, args), = drv.calls_of("cuMemcpyDtoDAsync")
            assert (args[0], int(args[1]), *args[2:]) == (y.ptr, x.ptr + 0x1000000, 1000, b.cu_stream)
            assert ipc.export_handle(a, a.allocate_device_buffer(0)) == b""
            with pytest.raises(vyre.InvalidDispatch, match="at most 1024 bytes"):
                ipc.copy_from_handle(b, y, handle, 2000)
            with pytest.raises(vyre.InvalidDispatch, match="64-byte handle"):
                ipc.copy_from_handle(b, y, b"short", 10)
    finally:
        D._driver = before
