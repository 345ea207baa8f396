"""CUDA backend on a GPU: device facts, resident buffers, async, profiling, pipelines as
CUDA graphs, OOM, leaks, faults. Every test is `gpu` and skips with the reason without one.
"""

from __future__ import annotations

import gc
import subprocess
import sys
import textwrap
from typing import Any

import numpy as np
import pytest

import vyre
from vyre import DispatchConfig, ScalarType, Step
from vyre.builder import ProgramBuilder
from vyre.tools.testing import CudaAllocationLedger, device_resources, resources_grown

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


def _inc() -> vyre.Program:
    k = ProgramBuilder("inc", workgroup_size=128)
    y = k.buffer("y", ST.U32, "read_write")
    i = k.global_linear_id()
    with k.if_(i < y.length()):
        y[i] = y[i] + 1
    return k.build()


def _copy() -> vyre.Program:
    k = ProgramBuilder("copy", workgroup_size=128)
    x = k.buffer("x", ST.U32)
    y = k.buffer("y", ST.U32, "write")
    i = k.global_linear_id()
    y[i] = x[i] * 2
    return k.build()


def _saxpy() -> vyre.Program:
    k = ProgramBuilder("saxpy", workgroup_size=256)
    x, y = k.buffer("x", ST.F32), k.buffer("y", ST.F32, "read_write")
    a = k.param("a", ST.F32)
    i = k.global_linear_id()
    with k.if_(i < y.length()):
        y[i] = a * x[i] + y[i]
    return k.build()


def test_capabilities(cuda: Any) -> None:
    caps = cuda.capabilities()
    d = caps.details
    for key in ("name", "compute_capability", "sm_count", "total_memory",
                "max_threads_per_block", "shared_memory_per_block", "warp_size", "arch"):
        assert key in d, key
    assert d["warp_size"] == 32 and d["sm_count"] > 0
    for f in ("f16", "f64", "i64", "atomic_float", "atomic_i64", "workgroup_memory",
              "resident", "async", "pipeline", "device_timers", "disk_cache"):
        assert cuda.supports(f), f
    assert cuda.supports("indirect_dispatch")
    assert cuda.arch == "sm_{}{}".format(*d["compute_capability"])


def test_resident_roundtrip_and_bound_dispatch(cuda: Any) -> None:
    n = 1 << 20
    x = np.arange(n, dtype=np.float32)
    y = np.full(n, 3.0, np.float32)
    bx = cuda.allocate_device_buffer(x.nbytes, "x")
    by = cuda.allocate_device_buffer(y.nbytes, "y")
    cuda.write(bx, x)
    cuda.write(by, y)
    cfg = DispatchConfig.for_elements(n, 256, params={"a": 2.0})
    bound = cuda.bind(_saxpy(), [bx], [by], cfg)
    for _ in range(10):
        cuda.dispatch_with_device_buffers(bound)
    for _ in range(5):  # the unbound path, cached per binding
        cuda.dispatch_with_device_buffers(_saxpy(), [bx], [by], cfg)
    got = cuda.read(by, dtype=np.float32)
    expect = y.copy()
    for _ in range(15):
        expect = np.float32(2.0) * x + expect
    np.testing.assert_array_equal(got, expect)
    part = cuda.read(by, offset=8, length=16, dtype=np.float32)
    np.testing.assert_array_equal(part, expect[2:6])
    bx.free()
    by.free()


def test_async_and_profile(cuda: Any) -> None:
    n = 1 << 16
    with cuda.allocate_device_buffer(4 * n) as by:
        cuda.write(by, np.zeros(n, np.uint32))
        pend = [cuda.dispatch_async(_inc(), [], [by], DispatchConfig.for_elements(n, 128))
                for _ in range(20)]
        t = pend[-1].wait()
        assert pend[-1].is_ready() and pend[0].wait().wall_ns >= 0
        assert t.wait_ns >= 0
        prof = cuda.dispatch_with_device_buffers(
            _inc(), [], [by], DispatchConfig.for_elements(n, 128, profile=True))
        assert prof.device_ns is not None and prof.device_ns > 0
        assert (cuda.read(by, dtype=np.uint32) == 21).all()


def test_aliased_buffers(cuda: Any) -> None:
    k = ProgramBuilder("alias", workgroup_size=64)
    x = k.buffer("x", ST.U32)
    y = k.buffer("y", ST.U32, "read_write")
    i = k.global_id(0)
    with k.if_(i < y.length()):
        y[i] = x[i] + y[i]
    prog = k.build()
    with cuda.allocate_device_buffer(256) as b:
        cuda.write(b, np.arange(64, dtype=np.uint32))
        cuda.dispatch_with_device_buffers(prog, [b], [b], DispatchConfig(grid=1))
        assert (cuda.read(b, dtype=np.uint32) == 2 * np.arange(64)).all()


def test_ownership(cuda: Any) -> None:
    other = vyre.get_backend("cuda")
    try:
        foreign = other.allocate_device_buffer(64)
        y = cuda.allocate_device_buffer(64)
        with pytest.raises(vyre.BufferOwnershipError):
            cuda.dispatch_with_device_buffers(_copy(), [foreign], [y], DispatchConfig())
        y.free()
    finally:
        other.close()


def test_compile_cache_counters(cuda: Any, tmp_path: Any) -> None:
    from vyre.backends.cuda.runtime import CudaBackend

    k = ProgramBuilder("counter_probe", workgroup_size=32)
    y = k.buffer("y", ST.U32, "read_write")
    y[k.global_id(0)] = y[k.global_id(0)] + 7
    prog = k.build()
    b1 = CudaBackend(0, cache_dir=str(tmp_path))
    try:
        b1.compile(prog)
        b1.compile(prog)
        assert (b1.compile_stats.misses, b1.compile_stats.hits, b1.compile_stats.disk_hits) == (1, 1, 0)
    finally:
        b1.close()
    b2 = CudaBackend(0, cache_dir=str(tmp_path))
    try:
        b2.compile(prog)
        assert b2.compile_stats.disk_hits == 1
        assert "vyre_main" in b2.source(prog)
    finally:
        b2.close()


def test_pipeline_graph_repeat_and_reads(cuda: Any) -> None:
    n = 4096
    cfg = DispatchConfig.for_elements(n, 128)
    a = cuda.allocate_device_buffer(4 * n, "a")
    z = cuda.allocate_device_buffer(4 * n, "z")
    cuda.write(a, np.arange(n, dtype=np.uint32))
    p = cuda.pipeline([Step(_inc(), [], [a], cfg), Step(_copy(), [a], [z], cfg)])
    r = p.run(repeat=1000, read=[(z, 0, None, np.uint32), (a, 16, 16, np.uint32)])
    np.testing.assert_array_equal(r.reads[0], (np.arange(n) + 1000) * 2)
    np.testing.assert_array_equal(r.reads[1], np.arange(4, 8) + 1000)
    assert r.extra["graph_launches"] < 20, r.extra  # sublinear host work
    assert r.timing.device_ns is None  # no step asked for device timing
    timed = cuda.pipeline([Step(_inc(), [], [a], cfg.model_copy(update={"profile": True}))])
    t = timed.run(repeat=10).timing
    assert t.device_ns is not None and t.device_ns > 0
    np.testing.assert_array_equal(cuda.read(a, dtype=np.uint32), np.arange(n) + 1010)
    r2 = p.run(repeat=3, read=[(z, 0, None, np.uint32)])
    np.testing.assert_array_equal(r2.reads[0], (np.arange(n) + 1013) * 2)
    a.free()
    z.free()


def test_out_of_memory_reports_sizes(cuda: Any) -> None:
    _free, total = cuda.memory_info()
    with pytest.raises(vyre.OutOfDeviceMemory) as info:
        cuda.allocate_device_buffer(total * 2)
    assert str(total * 2) in str(info.value)
    held = []
    chunk = total // 4
    try:
        with pytest.raises(vyre.OutOfDeviceMemory) as info2:
            for _ in range(8):
                held.append(cuda.allocate_device_buffer(chunk))
        assert str(chunk) in str(info2.value) and "free" in str(info2.value)
    finally:
        for b in held:
            b.free()
    # the backend still works after an OOM
    with cuda.allocate_device_buffer(64) as b:
        cuda.write(b, np.arange(16, dtype=np.uint32))
        assert (cuda.read(b, dtype=np.uint32) == np.arange(16)).all()


def test_no_leaks_over_thousands_of_cycles(cuda: Any) -> None:
    """3000 allocate / write / free cycles (half freed, half dropped to the finalizer) reuse
    one allocation (freed memory is kept for reuse) and, once the kept memory is given
    back, leave none of vyre's device memory, pinned memory or modules allocated, counted
    at the driver calls vyre makes (CudaAllocationLedger: immune to other processes' use of
    the GPU)."""
    with cuda.allocate_device_buffer(1024) as warm:  # the staging memory of a read exists
        cuda.write(warm, np.zeros(256, np.uint32))
        cuda.read(warm)
    cuda.synchronize()
    gc.collect()
    cuda.release_cached_memory()  # the warm-up buffer's memory: not this test's
    data = np.arange(1 << 16, dtype=np.uint32)
    with CudaAllocationLedger.for_backend(cuda) as ledger:
        before = device_resources(cuda, ledger)
        for i in range(3000):
            b = cuda.allocate_device_buffer(data.nbytes)
            cuda.write(b, data)
            if i % 2:
                b.free()
            else:
                del b  # dropped: the finalizer frees it
        gc.collect()
        assert cuda.release_cached_memory() == data.nbytes
        after = device_resources(cuda, ledger)
    assert ledger.calls.get("cuMemAlloc") == 1, \
        f"one allocation should serve every cycle: {ledger.calls}"
    assert ledger.calls.get("cuMemFree") == 1, ledger.calls
    assert not ledger.failed_releases, ledger.failed_releases
    grown = resources_grown(before, after)
    assert not grown, f"leaked: {grown}"
    assert not cuda.live_buffers()


_FAULT = textwrap.dedent("""
    import numpy as np, vyre
    from vyre import DispatchConfig, ScalarType as ST
    from vyre.builder import ProgramBuilder
    from vyre.backends.cuda.runtime import CudaBuffer
    k = ProgramBuilder("poke", workgroup_size=64)
    y = k.buffer("y", ST.U32, "read_write")
    y[k.global_id(0)] = 1
    prog = k.build()
    b = vyre.get_backend("cuda")
    bogus = CudaBuffer(b, 1 << 20, "bogus", 0x1000)   # a pointer into nothing
    bogus._release.detach()
    try:
        b.dispatch_with_device_buffers(prog, [], [bogus], DispatchConfig(grid=64))
        b.synchronize()
        raise SystemExit("no fault reported")
    except vyre.DispatchError as exc:
        print("FAULT", str(exc)[:200])
    try:
        b.allocate_device_buffer(16)
        raise SystemExit("dead context accepted work")
    except vyre.BackendUnavailable as exc:
        print("REFUSED", str(exc)[:120])
    b.close()
    try:
        b2 = vyre.get_backend("cuda")
    except vyre.BackendUnavailable as exc:
        # the driver may refuse any context in a process after a fault: then the reason must
        # say so (the fix is a new process)
        assert "restart the process" in exc.reason, exc.reason
        print("UNRECOVERABLE IN PROCESS", exc.reason)
        raise SystemExit(0)
    out = b2.dispatch(prog, {"y": np.zeros(64, np.uint32)}, DispatchConfig(grid=1))
    assert (out["y"] == 1).all(), out
    print("RECREATED OK", "private context" if b2._private_ctx else "primary context")
    b2.close()
""")


_FRESH = textwrap.dedent("""
    import numpy as np, vyre
    b = vyre.get_backend("cuda")
    with b.allocate_device_buffer(16) as x:
        b.write(x, np.arange(4, dtype=np.uint32))
        assert (b.read(x, dtype=np.uint32) == np.arange(4)).all()
    b.close()
    print("FRESH OK")
""")


def test_fault_poisons_and_backend_can_be_recreated() -> None:
    _skip_without_cuda()
    out = subprocess.run([sys.executable, "-c", _FAULT], capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    print(out.stdout)
    assert "FAULT" in out.stdout and "REFUSED" in out.stdout
    assert "RECREATED OK" in out.stdout or "UNRECOVERABLE IN PROCESS" in out.stdout
    # a fresh process always gets a working device again
    fresh = subprocess.run([sys.executable, "-c", _FRESH], capture_output=True, text=True,
                           timeout=300)
    assert fresh.returncode == 0 and "FRESH OK" in fresh.stdout, fresh.stdout + fresh.stderr


def test_fast_path_launch_from_another_thread_stays_out_of_a_graph(cuda: Any) -> None:
    """Regression (C2): while thread A captures a pipeline's CUDA graph, a bound launch
    from thread B must run once, now, and not be recorded into A's graph (which would
    replay it with every pipeline run). The interleaving is forced: B launches and
    finishes from inside A's capture."""
    import threading

    n = 1024
    cfg = DispatchConfig.for_elements(n, 128)
    a = cuda.allocate_device_buffer(4 * n, "a")
    z = cuda.allocate_device_buffer(4 * n, "z")
    cuda.write(a, np.zeros(n, np.uint32))
    cuda.write(z, np.zeros(n, np.uint32))
    bound_z = cuda.bind(_inc(), [], [z], cfg)
    cuda.dispatch_with_device_buffers(bound_z)  # packed and checked before the capture
    graphs = cuda._queue.graphs  # (the queue's CUDA graphs: captures enqueue through it)
    real_enqueue = graphs.enqueue
    fired: list[int] = []

    def enqueue_and_interleave(rec: Any, stream: Any = None) -> None:
        real_enqueue(rec, stream)
        if stream is not None and not fired:  # inside a capture
            fired.append(1)
            t = threading.Thread(target=cuda.dispatch_with_device_buffers, args=(bound_z,))
            t.start()
            t.join(timeout=30)  # a launch that waited for A's lock would run after capture

    graphs.enqueue = enqueue_and_interleave
    try:
        p = cuda.pipeline([Step(_inc(), [], [a], cfg)])
    finally:
        graphs.enqueue = real_enqueue
    assert fired, "the pipeline was not captured through the queue's enqueue"
    for _ in range(3):
        r = p.run(repeat=2, read=[(a, 0, None, np.uint32), (z, 0, None, np.uint32)])
    np.testing.assert_array_equal(r.reads[0], np.full(n, 6, np.uint32))
    # z: one launch before the capture, one from thread B; none replayed by the graph
    np.testing.assert_array_equal(r.reads[1], np.full(n, 2, np.uint32))
    a.free()
    z.free()


def test_launch_cache_forgets_freed_and_dropped_buffers(cuda: Any) -> None:
    """Regression (C3): cached unbound launches die with their buffers (freed or dropped),
    so allocate / dispatch / free cycles leave the cache as it was."""
    prog = _inc()
    n = 256
    keep = cuda.allocate_device_buffer(4 * n)
    cuda.write(keep, np.zeros(n, np.uint32))
    cfg = DispatchConfig.for_elements(n, 128)
    cuda.dispatch_with_device_buffers(prog, [], [keep], cfg)
    base = len(cuda._launches)
    for i in range(200):
        y = cuda.allocate_device_buffer(4 * n)
        cuda.write(y, np.full(n, i, np.uint32))
        cuda.dispatch_with_device_buffers(prog, [], [y], cfg)
        cuda.dispatch_with_device_buffers(prog, [], [y], cfg)  # a cache hit
        assert (cuda.read(y, dtype=np.uint32) == i + 2).all()
        if i % 2:
            y.free()
        else:
            del y  # dropped: the weak reference evicts its launches
            gc.collect()
    assert len(cuda._launches) == base
    assert len(cuda._launches._keys) == base and len(cuda._launches._refs) == base
    # the surviving entry still works, and a freed buffer is refused, never launched
    cuda.dispatch_with_device_buffers(prog, [], [keep], cfg)
    assert (cuda.read(keep, dtype=np.uint32) == 2).all()
    keep.free()
    with pytest.raises(vyre.BufferStateError):
        cuda.dispatch_with_device_buffers(prog, [], [keep], cfg)
    assert len(cuda._launches) == base - 1


def test_bound_fast_path_timing_and_freed_buffers(cuda: Any) -> None:
    n = 256
    y = cuda.allocate_device_buffer(4 * n)
    cuda.write(y, np.zeros(n, np.uint32))
    cfg = DispatchConfig.for_elements(n, 128, options={"timing": True})
    bound = cuda.bind(_inc(), [], [y], cfg)
    ts = [cuda.dispatch_with_device_buffers(bound) for _ in range(50)]
    assert all(isinstance(t, vyre.Timing) and t.wall_ns > 0 and t.enqueue_ns == t.wall_ns
               and t.wait_ns == 0 and t.device_ns is None for t in ts)
    assert ts[0]._replace(wait_ns=5).wait_ns == 5  # an ordinary Timing value
    untimed = cuda.bind(_inc(), [], [y],
                        DispatchConfig.for_elements(n, 128, options={"timing": False}))
    assert cuda.dispatch_with_device_buffers(untimed).wall_ns == 0
    default = cuda.bind(_inc(), [], [y], DispatchConfig.for_elements(n, 128))
    assert cuda.dispatch_with_device_buffers(default) == vyre.Timing()
    prof = cuda.bind(_inc(), [], [y], DispatchConfig.for_elements(n, 128, profile=True))
    assert cuda.dispatch_with_device_buffers(prof).device_ns > 0
    assert (cuda.read(y, dtype=np.uint32) == 53).all()
    other = cuda.allocate_device_buffer(16)
    other.free()  # freeing any buffer makes bound launches re-check theirs once
    cuda.dispatch_with_device_buffers(bound)
    assert (cuda.read(y, dtype=np.uint32) == 54).all()
    y.free()
    with pytest.raises(vyre.BufferStateError):
        cuda.dispatch_with_device_buffers(bound)
