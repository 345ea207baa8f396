"""The wgpu backend's runtime: probing, capabilities, resident buffers (ranged and unaligned
writes / reads), aliasing, caches, pipelines (dependent chains, repeat, reads), indirect
dispatch, profiling, error paths (CompileError, ownership, binding-size limit) and the
generated source.

Skips with the probe's reason when no WebGPU adapter exists (never silently).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

import vyre
from vyre import (
    BufferOwnershipError,
    BufferStateError,
    CompileError,
    DispatchConfig,
    IndirectGrid,
    InvalidDispatch,
    ProgramBuilder,
    ReadRange,
    ScalarType,
    Step,
    UnsupportedFeature,
    f32,
    u32,
)
from vyre.backend import BaseBackend
from vyre.features import LIMIT_KEYS
from vyre.ir.nodes import Program
from vyre.tools.testing import HostShimBuffer

pytestmark = pytest.mark.wgpu


@pytest.fixture(scope="module")
def wg() -> Iterator[BaseBackend]:
    from vyre.backends.wgpu import PROVIDER

    avail = PROVIDER.probe()
    if not avail.available:
        pytest.skip(f"wgpu backend unavailable: {avail.reason}")
    b = PROVIDER.create()
    yield b
    b.close()


def saxpy() -> Program:
    k = ProgramBuilder("saxpy", workgroup_size=64)
    x, y = k.buffer("x", f32), k.buffer("y", f32, "read_write")
    a = k.param("a", f32)
    i = k.global_linear_id()
    with k.if_(i < y.length()):
        y[i] = a * x[i] + y[i]
    return k.build()


def add_one() -> Program:
    """out[i] = in[i] + c"""
    k = ProgramBuilder("add_c", workgroup_size=64)
    a = k.buffer("src", u32)
    o = k.buffer("dst", u32, "write")
    c = k.param("c", u32)
    i = k.global_linear_id()
    with k.if_(i < o.length()):
        o[i] = a[i] + c
    return k.build()


def inc_in_place() -> Program:
    k = ProgramBuilder("inc", workgroup_size=64)
    a = k.buffer("a", u32, "read_write")
    i = k.global_linear_id()
    with k.if_(i < a.length()):
        a[i] = a[i] * 2 + 1
    return k.build()


# ------------------------------------------------------------------ probe, capabilities


def test_probe_and_registry(wg: BaseBackend) -> None:
    avail = {a.name: a for a in vyre.available_backends()}
    assert avail["wgpu"].available, avail["wgpu"].reason
    assert avail["wgpu"].devices
    b = vyre.get_backend("wgpu:0")
    try:
        assert b.id == "wgpu:0"
        assert b.capabilities().kind == "wgpu"
    finally:
        b.close()


def test_adapter_by_name_and_bad_spec(wg: BaseBackend) -> None:
    name = wg.capabilities().device.split()[0]
    b = vyre.get_backend(f"wgpu:{name}")
    b.close()
    with pytest.raises(vyre.BackendUnavailable, match="adapters here"):
        vyre.get_backend("wgpu:no-such-adapter-xyz")
    with pytest.raises(vyre.BackendUnavailable, match="out of range"):
        vyre.get_backend("wgpu:99")


def test_probe_without_wgpu_package(monkeypatch: pytest.MonkeyPatch) -> None:
    import builtins

    from vyre.backends.wgpu import PROVIDER

    real = builtins.__import__

    def fake(name: str, *a: object, **kw: object) -> object:
        if name == "wgpu" or name.startswith("wgpu."):
            raise ImportError("No module named 'wgpu'")
        return real(name, *a, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(builtins, "__import__", fake)
    av = PROVIDER.probe()
    assert not av.available
    assert "pip install 'vyre[wgpu]'" in av.reason


def test_probe_without_adapter(monkeypatch: pytest.MonkeyPatch) -> None:
    import wgpu

    from vyre.backends.wgpu import PROVIDER

    monkeypatch.setattr(wgpu.gpu, "request_adapter_sync", lambda **kw: None)
    av = PROVIDER.probe()
    assert not av.available
    assert "adapter" in av.reason and ("mesa-vulkan-drivers" in av.reason or "driver" in av.reason)


def test_capabilities(wg: BaseBackend) -> None:
    caps = wg.capabilities()
    for key in LIMIT_KEYS:
        assert key in caps.limits and caps.limits[key] > 0, key
    assert "max_allocation_bytes" in caps.limits
    assert {"resident", "pipeline", "async", "indirect_dispatch",
            "workgroup_memory"} <= caps.features
    assert caps.features <= vyre.features.ALL_FEATURES
    assert "atomic_i64" not in caps.features  # never emitted by this lowering
    assert caps.details["backend_type"]
    assert caps.details["adapter_type"]
    assert wg.supports("resident") and not wg.supports("no-such-feature")


def test_unsupported_type_fails_before_compile(wg: BaseBackend, monkeypatch: pytest.MonkeyPatch
                                                ) -> None:
    from vyre.backend import Capabilities

    k = ProgramBuilder("needs_f64", 1)
    o = k.buffer("o", vyre.f64, "write")
    o[0] = k.lit(1.0, vyre.f64)
    prog = k.build()
    caps = wg.capabilities()
    reduced = Capabilities(**{**caps.model_dump(), "features": caps.features - {"f64"}})
    monkeypatch.setattr(wg, "capabilities", lambda: reduced)
    with pytest.raises(UnsupportedFeature, match="f64"):
        wg.dispatch(prog, {"o": 1}, DispatchConfig())


# ------------------------------------------------------------------ resident buffers


def test_resident_round_trip_and_ranges(wg: BaseBackend) -> None:
    data = np.arange(100, dtype=np.uint8)
    with wg.allocate_device_buffer(100, label="bytes") as buf:
        wg.write(buf, data)
        assert np.array_equal(wg.read(buf), data)
        assert np.array_equal(wg.read(buf, 8, 16), data[8:24])
        assert np.array_equal(wg.read(buf, 4, 8, dtype=np.uint32), data[4:12].view(np.uint32))
    assert buf.freed


@pytest.mark.parametrize(("offset", "length"),
                         [(1, 1), (3, 2), (5, 10), (0, 3), (2, 0), (97, 3), (6, 93), (4, 5)])
def test_unaligned_write_and_read(wg: BaseBackend, offset: int, length: int) -> None:
    host = (np.arange(100, dtype=np.uint32) * 7 % 251).astype(np.uint8)
    buf = wg.allocate_device_buffer(100)
    try:
        wg.write(buf, host)
        patch = (np.arange(length, dtype=np.uint8) + 200).astype(np.uint8)
        wg.write(buf, patch, offset)
        host[offset : offset + length] = patch
        assert np.array_equal(wg.read(buf), host)
        assert np.array_equal(wg.read(buf, offset, length), host[offset : offset + length])
        assert np.array_equal(wg.read(buf, 1, 98), host[1:99])
    finally:
        wg.free(buf)


def test_odd_sized_buffers_and_read_many(wg: BaseBackend) -> None:
    bufs = [wg.allocate_device_buffer(n) for n in (0, 1, 3, 5, 7)]
    for i, b in enumerate(bufs):
        if b.byte_len:
            wg.write(b, np.full(b.byte_len, i, dtype=np.uint8))
    outs = wg.read_many([(b, 0, None) for b in bufs])
    for i, (b, o) in enumerate(zip(bufs, outs)):
        assert o.nbytes == b.byte_len and np.all(o == i)
    for b in bufs:
        b.free()


def test_resident_dispatch_no_host_copy_and_params_change(wg: BaseBackend) -> None:
    prog = saxpy()
    n = 1000
    x = np.random.default_rng(0).standard_normal(n).astype(np.float32)
    y = np.random.default_rng(1).standard_normal(n).astype(np.float32)
    bx, by = wg.allocate_device_buffer(x.nbytes), wg.allocate_device_buffer(y.nbytes)
    wg.write_many([(bx, x), (by, y)])
    expect = y.copy()
    for a in (2.0, 3.0, 2.0, -1.0):  # changing params reuses the bind group
        wg.dispatch_with_device_buffers(prog, [bx], [by],
                                        DispatchConfig.for_elements(n, 64, params={"a": a}))
        expect = (np.float32(a) * x + expect).astype(np.float32)
    assert np.array_equal(wg.read(by, dtype=np.float32), expect)
    bx.free()
    by.free()


def test_async_pending_and_profile(wg: BaseBackend) -> None:
    prog = inc_in_place()
    buf = wg.allocate_device_buffer(4096 * 4)
    wg.write(buf, np.zeros(4096, np.uint32))
    pend = [wg.dispatch_async(prog, [], [buf], DispatchConfig.for_elements(4096, 64))
            for _ in range(5)]
    t = pend[-1].wait()
    assert pend[-1].is_ready() and t.wall_ns > 0
    timing = wg.dispatch_with_device_buffers(
        prog, [], [buf], DispatchConfig.for_elements(4096, 64, profile=True))
    if wg.supports("device_timers"):
        assert timing.device_ns is not None and timing.device_ns >= 0
    assert np.all(wg.read(buf, dtype=np.uint32) == 63)
    buf.free()


def test_profiled_dispatches_in_flight_each_get_their_timing(wg: BaseBackend) -> None:
    """More profiled dispatches in flight than the backend keeps timestamp sets for, waited
    in reverse order, around a large read: each reports its own device time and the work
    is all done (timestamp sets are reused only once read)."""
    if not wg.supports("device_timers"):
        pytest.skip("this adapter has no timestamp queries")
    prog = inc_in_place()
    buf = wg.allocate_device_buffer(4096 * 4)
    big = wg.allocate_device_buffer(8 << 20)
    wg.write(buf, np.zeros(4096, np.uint32))
    cfg = DispatchConfig.for_elements(4096, 64, profile=True)
    for _ in range(2):
        pend = [wg.dispatch_async(prog, [], [buf], cfg) for _ in range(12)]
        times = [p.wait() for p in reversed(pend)]
        assert all(t.device_ns is not None and t.device_ns >= 0 for t in times)
        assert wg.read(big, dtype=np.uint8).size == 8 << 20
    assert np.all(wg.read(buf, dtype=np.uint32) == 2**24 - 1)  # x -> 2x + 1, 24 times
    buf.free()
    big.free()


def _busy() -> Program:
    """Each element through 60,000 dependent steps (under lavapipe's 65,535-iteration loop
    cap): ~50 ms over 4,096 elements on lavapipe, a few hundred us on an H100."""
    k = ProgramBuilder("busy", workgroup_size=64)
    a = k.buffer("a", u32, "read_write")
    i = k.global_linear_id()
    with k.if_(i < a.length()):
        acc = k.let(a[i])
        with k.for_range(0, 60_000) as j:
            acc.set(acc * 3 + j)
        a[i] = acc
    return k.build()


def _busy_expected(rounds: int) -> int:
    acc = 0
    for _ in range(rounds):
        for j in range(60_000):
            acc = (acc * 3 + j) & 0xFFFFFFFF
    return acc


BUSY_ROUNDS = 4
BUSY_RESULT = _busy_expected(BUSY_ROUNDS)


def _long_work(wg: BaseBackend) -> tuple[Any, vyre.Pending]:
    """BUSY_ROUNDS busy dispatches (far longer than the wait's spin), the last one through
    dispatch_async; returns the buffer and that Pending."""
    n = 4096
    buf = wg.allocate_device_buffer(n * 4)
    wg.write(buf, np.zeros(n, np.uint32))
    bound = wg.bind(_busy(), [], [buf], DispatchConfig.for_elements(n, 64))
    for _ in range(BUSY_ROUNDS - 1):
        wg.dispatch_with_device_buffers(bound)
    return buf, wg.dispatch_async(bound)


def test_is_ready_is_false_while_the_work_runs(wg: BaseBackend) -> None:
    """Pending.is_ready asks the queue without blocking; wgpu-native answers in one byte of
    a 32-bit register (queue_wait.QueueWait), which read whole said "ready" at once."""
    buf, last = _long_work(wg)
    assert not last.is_ready()
    last.wait()
    assert last.is_ready()
    assert np.all(wg.read(buf, dtype=np.uint32) == BUSY_RESULT)
    buf.free()


@pytest.mark.parametrize("spin_ns", [0, None, 10**12], ids=["blocks-at-once", "default",
                                                          "only-spins"])
def test_synchronize_returns_only_once_the_work_is_done(
        wg: BaseBackend, monkeypatch: pytest.MonkeyPatch, spin_ns: int | None) -> None:
    """synchronize asks the queue without blocking for a while, then blocks (queue_wait):
    whichever way it ends, every submission has finished when it returns."""
    from vyre.backends.wgpu import queue_wait

    if spin_ns is not None:
        monkeypatch.setattr(queue_wait, "SPIN_NS", spin_ns)
        monkeypatch.setattr(wg._device.waiter, "spins", True)  # type: ignore[attr-defined]
    buf, last = _long_work(wg)
    wg.synchronize()
    assert last.is_ready()  # (a fresh, non-blocking question to the queue)
    assert np.all(wg.read(buf, dtype=np.uint32) == BUSY_RESULT)
    buf.free()


def test_a_wait_longer_than_the_spin_ends_in_a_blocking_wait(
        wg: BaseBackend, monkeypatch: pytest.MonkeyPatch) -> None:
    """The spin is bounded: work that outlasts it is waited for by a blocking poll."""
    from vyre.backends.wgpu import queue_wait

    monkeypatch.setattr(queue_wait, "SPIN_NS", 1_000)
    waits: list[bool] = []
    queue: Any = wg._device.waiter  # type: ignore[attr-defined]  # (how the host waits)
    monkeypatch.setattr(queue, "spins", True)
    poll = queue._poll

    def recording_poll(device: Any, wait: bool, index: Any) -> Any:
        waits.append(bool(wait))
        return poll(device, wait, index)

    buf, last = _long_work(wg)
    monkeypatch.setattr(queue, "_poll", recording_poll)
    # off the main thread: there Ctrl-C cannot arrive, so the wait blocks in the driver (on
    # the main thread it sleeps between asks instead: tests/test_runtime_reliability.py's
    # Ctrl-C tests)
    waiter = threading.Thread(target=last.wait)
    waiter.start()
    waiter.join()
    seen = list(waits)  # (the read below waits too)
    # a 1 us spin: one or two non-blocking asks, then blocking waits (the queue's, and the
    # read-back of the loop's status flags)
    assert True in seen and seen.count(False) <= 10, seen
    assert np.all(wg.read(buf, dtype=np.uint32) == BUSY_RESULT)
    buf.free()


def test_host_dispatch_and_bound_reuse(wg: BaseBackend) -> None:
    prog = add_one()
    src = np.arange(10, dtype=np.uint32)
    out = wg.dispatch(prog, {"src": src, "dst": 10}, DispatchConfig(grid=1, params={"c": 5}))
    assert np.array_equal(out["dst"], src + 5)
    assert wg.live_buffers() == [] or all(not b.freed for b in wg.live_buffers())
    a, d = wg.allocate_device_buffer(40), wg.allocate_device_buffer(40)
    wg.write(a, src)
    bound = wg.bind(prog, [a], [d], DispatchConfig(grid=1, params={"c": 1}))
    for _ in range(3):
        wg.dispatch_with_device_buffers(bound)
    assert np.array_equal(wg.read(d, dtype=np.uint32), src + 1)
    a.free()
    d.free()
    with pytest.raises(BufferStateError):
        wg.dispatch_with_device_buffers(bound)


def test_compile_cache_counters(wg: BaseBackend) -> None:
    k = ProgramBuilder("cache_probe_unique", 1)
    o = k.buffer("o", u32, "write")
    o[0] = k.lit(41, u32) + 1
    prog = k.build()
    before = wg.compile_stats.misses, wg.compile_stats.hits
    wg.dispatch(prog, {"o": 1}, DispatchConfig())
    wg.dispatch(prog, {"o": 1}, DispatchConfig())
    assert wg.compile_stats.misses == before[0] + 1
    assert wg.compile_stats.hits >= before[1] + 1


def test_programs_of_one_binding_shape_share_layouts(wg: BaseBackend) -> None:
    """A compile makes the shader and pipeline only: programs whose bindings have the same
    access share one bind group layout, and each still runs its own code, also across
    evictions and with the aliased (read_write) specialisation in between."""
    def prog(name: str, op: str) -> Program:
        k = ProgramBuilder(f"shape_{name}", 64)
        x, y = k.buffer("x", u32), k.buffer("y", u32, "read_write")
        c = k.param("c", u32)
        i = k.global_id()
        with k.if_(i < y.length()):
            v = {"add": x[i] + c, "mul": x[i] * c, "xor": x[i] ^ c}[op]
            y[i] = v
        return k.build()

    progs = {op: prog(op, op) for op in ("add", "mul", "xor")}
    fns = {"add": np.add, "mul": np.multiply, "xor": np.bitwise_xor}
    layouts = {id(wg._compiled_for(p, None).bind_group_layout) for p in progs.values()}
    assert len(layouts) == 1
    limit = wg.compile_cache_limit
    x = np.arange(64, dtype=np.uint32) * 7
    bx, by = wg.allocate_device_buffer(x.nbytes), wg.allocate_device_buffer(x.nbytes)
    wg.write(bx, x)
    try:
        wg.set_compile_cache_limit(1)  # every switch of program compiles again
        for rnd in range(2):
            for c, (op, p) in enumerate(progs.items(), start=3 + rnd):
                wg.dispatch_with_device_buffers(p, [bx], [by], DispatchConfig(
                    grid=1, params={"c": c}))
                assert np.array_equal(wg.read(by, dtype=np.uint32),
                                      fns[op](x, np.uint32(c)).astype(np.uint32)), op
                wg.write(by, x)  # x read through a read_write binding: another shape
                wg.dispatch_with_device_buffers(p, [by], [by], DispatchConfig(
                    grid=1, params={"c": c}))
                assert np.array_equal(wg.read(by, dtype=np.uint32),
                                      fns[op](x, np.uint32(c)).astype(np.uint32)), op
    finally:
        wg.set_compile_cache_limit(limit)
        bx.free()
        by.free()


# ------------------------------------------------------------------ aliasing


def test_aliased_read_and_write_slots(wg: BaseBackend) -> None:
    prog = add_one()
    buf = wg.allocate_device_buffer(64 * 4)
    wg.write(buf, np.arange(64, dtype=np.uint32))
    wg.dispatch_with_device_buffers(prog, [buf], [buf], DispatchConfig(grid=1, params={"c": 3}))
    assert np.array_equal(wg.read(buf, dtype=np.uint32), np.arange(64, dtype=np.uint32) + 3)
    src = wg.source(prog)
    assert "var<storage, read> b_src" in src
    compiled = wg._compiled_for(prog, frozenset({0}))  # the aliased specialisation
    assert "var<storage, read_write> b_src" in compiled.source
    buf.free()


def test_aliased_two_read_slots(wg: BaseBackend) -> None:
    k = ProgramBuilder("sum2", 64)
    a, b = k.buffer("a", u32), k.buffer("b", u32)
    o = k.buffer("o", u32, "write")
    i = k.global_id()
    with k.if_(i < o.length()):
        o[i] = a[i] + b[i]
    prog = k.build()
    src = wg.allocate_device_buffer(64 * 4)
    out = wg.allocate_device_buffer(64 * 4)
    wg.write(src, np.arange(64, dtype=np.uint32))
    wg.dispatch_with_device_buffers(prog, [src, src], [out], DispatchConfig(grid=1))
    assert np.array_equal(wg.read(out, dtype=np.uint32), np.arange(64, dtype=np.uint32) * 2)
    src.free()
    out.free()


# ------------------------------------------------------------------ pipelines


def test_pipeline_dependent_chain_repeat_and_reads(wg: BaseBackend) -> None:
    n = 1000
    prog = add_one()
    a, b = wg.allocate_device_buffer(n * 4), wg.allocate_device_buffer(n * 4)
    wg.write(a, np.zeros(n, np.uint32))
    cfg = DispatchConfig.for_elements
    pipe = wg.pipeline([
        Step(prog, [a], [b], cfg(n, 64, params={"c": 1})),   # b = a + 1
        Step(prog, [b], [a], cfg(n, 64, params={"c": 10})),  # a = b + 10 (reads b)
    ])
    res = pipe.run(repeat=5, read=[ReadRange(a, 0, None, np.uint32),
                                   ReadRange(b, 4, 8, np.uint32), (b, 1, 3)])
    assert np.all(res.reads[0] == 55)
    assert np.array_equal(res.reads[1], [45, 45])
    assert res.reads[2].nbytes == 3
    assert res.timing.wall_ns > 0
    res2 = pipe.run(repeat=1, read=[ReadRange(a, 0, 8, np.uint32)])  # runs on from the state
    assert np.array_equal(res2.reads[0], [66, 66])
    a.free()
    b.free()


def test_pipeline_profile_and_no_reads(wg: BaseBackend) -> None:
    prog = inc_in_place()
    a = wg.allocate_device_buffer(4096 * 4)
    wg.write(a, np.zeros(4096, np.uint32))
    pipe = wg.pipeline([Step(prog, [], [a], DispatchConfig.for_elements(4096, 64, profile=True))])
    res = pipe.run(repeat=3)
    assert res.reads == []
    if wg.supports("device_timers"):
        assert res.timing.device_ns is not None
    assert np.all(wg.read(a, dtype=np.uint32) == 7)
    a.free()


def test_pipeline_many_steps_one_submit(wg: BaseBackend) -> None:
    prog = inc_in_place()
    a = wg.allocate_device_buffer(256 * 4)
    wg.write(a, np.zeros(256, np.uint32))
    pipe = wg.pipeline([Step(prog, [], [a], DispatchConfig(grid=4))] * 20)
    res = pipe.run(repeat=1, read=[ReadRange(a, 0, None, np.uint32)])
    assert np.all(res.reads[0] == 2**20 - 1)
    a.free()


# ------------------------------------------------------------------ indirect dispatch


def test_indirect_dispatch(wg: BaseBackend) -> None:
    prog = add_one()
    n = 64 * 3
    src, dst = wg.allocate_device_buffer(n * 4), wg.allocate_device_buffer(n * 4)
    grid = wg.allocate_device_buffer(16)
    wg.write(src, np.arange(n, dtype=np.uint32))
    wg.write(dst, np.zeros(n, np.uint32))
    wg.write(grid, np.array([7, 2, 1, 1], dtype=np.uint32))  # at offset 4: (2, 1, 1)
    cfg = DispatchConfig(grid=IndirectGrid(buffer=grid, offset=4), params={"c": 1})
    wg.dispatch_with_device_buffers(prog, [src], [dst], cfg)
    out = wg.read(dst, dtype=np.uint32)
    assert np.array_equal(out[:128], np.arange(128) + 1) and np.all(out[128:] == 0)
    # in a pipeline, with a step computing the grid that the next step uses
    k = ProgramBuilder("set_grid", 1)
    g = k.buffer("g", u32, "read_write")
    g[1] = 3  # the x count at byte offset 4
    pipe = wg.pipeline([Step(k.build(), [], [grid], DispatchConfig()),
                        Step(prog, [src], [dst], cfg)])
    pipe.run(read=[])
    assert np.array_equal(wg.read(dst, dtype=np.uint32), np.arange(n) + 1)
    for b in (src, dst, grid):
        b.free()


def test_indirect_grid_buffer_also_bound(wg: BaseBackend) -> None:
    """The grid buffer is also a storage binding of the same dispatch: wgpu would reject
    INDIRECT + STORAGE in one usage scope; the backend copies the grid first."""
    k = ProgramBuilder("self_grid", 64)
    g = k.buffer("g", u32, "read_write")
    i = k.global_id()
    with k.if_(i >= 3), k.if_(i < g.length()):
        g[i] = g[i] + 1
    prog = k.build()
    buf = wg.allocate_device_buffer(256 * 4)
    wg.write(buf, np.array([2, 1, 1] + [0] * 253, dtype=np.uint32))
    wg.dispatch_with_device_buffers(prog, [], [buf], DispatchConfig(grid=IndirectGrid(buffer=buf)))
    out = wg.read(buf, dtype=np.uint32)
    assert np.all(out[3:128] == 1) and np.all(out[128:] == 0)
    buf.free()


# ------------------------------------------------------------------ errors


def test_compile_error_and_recovery(wg: BaseBackend, monkeypatch: pytest.MonkeyPatch) -> None:
    from vyre.backends.wgpu import render as wgsl

    real = wgsl.generate

    def broken(*a: object, **kw: object) -> wgsl.WgslModule:
        mod = real(*a, **kw)  # type: ignore[arg-type]
        return wgsl.WgslModule(mod.source.replace("fn main(", "fn main(((", 1), mod.layout,
                               mod.storage_access)

    k = ProgramBuilder("will_break", 1)
    o = k.buffer("o", u32, "write")
    o[0] = 1
    prog = k.build()
    monkeypatch.setattr(wgsl, "generate", broken)
    with pytest.raises(CompileError) as info:
        wg.dispatch(prog, {"o": 1}, DispatchConfig())
    assert "fn main(((" in info.value.source
    assert info.value.log
    monkeypatch.setattr(wgsl, "generate", real)
    assert wg.dispatch(prog, {"o": 1}, DispatchConfig())["o"][0] == 1
    assert wg.dispatch(add_one(), {"src": np.ones(3, np.uint32), "dst": 3},
                       DispatchConfig(params={"c": 1}))["dst"].tolist() == [2, 2, 2]


def test_ownership_errors(wg: BaseBackend) -> None:
    other = vyre.get_backend("wgpu")
    try:
        foreign = other.allocate_device_buffer(64, label="theirs")
        mine = wg.allocate_device_buffer(64)
        with pytest.raises(BufferOwnershipError, match="theirs"):
            wg.dispatch_with_device_buffers(add_one(), [foreign], [mine],
                                            DispatchConfig(params={"c": 1}))
        with pytest.raises(BufferOwnershipError):
            wg.write(foreign, b"abcd")
        with pytest.raises(BufferOwnershipError):
            wg.read(foreign)
        with pytest.raises(BufferOwnershipError, match="HostShimBuffer"):
            wg.dispatch_with_device_buffers(add_one(), [HostShimBuffer(64, "wgpu")], [mine],
                                            DispatchConfig(params={"c": 1}))
        mine.free()
        with pytest.raises(BufferStateError):
            wg.read(mine)
    finally:
        other.close()


def test_binding_size_limit(wg: BaseBackend) -> None:
    limit = wg.capabilities().limits["max_storage_binding_bytes"]
    if limit + 4 > wg.capabilities().limits["max_allocation_bytes"] or limit > (1 << 31):
        pytest.skip(f"binding limit {limit} is not below the allocation limit here")
    big = wg.allocate_device_buffer(limit + 4, label="too-big")
    small = wg.allocate_device_buffer(64)
    try:
        with pytest.raises(InvalidDispatch, match="max storage binding size"):
            wg.dispatch_with_device_buffers(inc_in_place(), [], [big], DispatchConfig())
        with pytest.raises(InvalidDispatch, match="max storage binding size"):
            wg.pipeline([Step(inc_in_place(), [], [big], DispatchConfig())])
        # still usable afterwards
        wg.write(small, np.zeros(16, np.uint32))
        wg.dispatch_with_device_buffers(inc_in_place(), [], [small], DispatchConfig())
        assert np.all(wg.read(small, dtype=np.uint32) == 1)
    finally:
        big.free()
        small.free()


def test_allocation_over_limit(wg: BaseBackend) -> None:
    lim = wg.capabilities().limits["max_allocation_bytes"]
    with pytest.raises(vyre.OutOfDeviceMemory):
        wg.allocate_device_buffer(lim + 1)


# ------------------------------------------------------------------ generated source


def test_generated_source_is_readable_and_mangled(wg: BaseBackend) -> None:
    k = ProgramBuilder("names", 8)
    # WGSL keywords and builtins as user names
    loop = k.buffer("loop", u32)
    fn = k.buffer("fn", u32, "write")
    var = k.param("var", u32)
    i = k.global_id()
    let = k.let(loop[i] // var, name="let")
    fn[i] = let % 3
    prog = k.build()
    src = wg.source(prog)
    assert "b_loop" in src and "b_fn" in src and "p_var" in src and "v_let" in src
    assert "arrayLength" not in src
    assert "(vy_u.p_var == 0u)" in src  # the division by a param is guarded (vyre.lower)
    assert "struct VyUniforms" in src
    out = wg.dispatch(prog, {"loop": np.arange(8, dtype=np.uint32), "fn": 8},
                      DispatchConfig(params={"var": 0}))
    assert np.all(out["fn"] == 0)
    k2 = ProgramBuilder("atomics_src", 8)
    acc = k2.buffer("acc", u32, "read_write")
    acc.atomic_add(0, 1)
    acc[1] = acc[2]
    src2 = wg.source(k2.build())
    assert "array<atomic<u32>>" in src2 and "atomicLoad" in src2 and "atomicStore" in src2
    k3 = ProgramBuilder("barrier_src", 8)
    w = k3.shared("w", f32, 8)
    w[k3.local_index()] = 1.0
    k3.barrier()
    src3 = wg.source(k3.build())  # no storage buffer: workgroup memory only (barriers.py)
    assert "workgroupBarrier();" in src3 and "storageBarrier" not in src3


def test_closed_backend(wg: BaseBackend) -> None:
    b = vyre.get_backend("wgpu")
    buf = b.allocate_device_buffer(16)
    b.close()
    assert buf.freed
    with pytest.raises(vyre.BackendUnavailable):
        b.allocate_device_buffer(4)


def test_lost_device_is_reported_and_backend_can_be_recreated(wg: BaseBackend) -> None:
    """A device loss (here forced by destroying the wgpu device, as a driver reset would)
    fails the operation that meets it with DispatchError saying so, then every later call
    with BackendUnavailable; freeing and closing stay harmless; a new instance works."""
    b = vyre.get_backend("wgpu")
    prog = add_one()
    x = np.arange(64, dtype=np.uint32)
    bx, by = b.allocate_device_buffer(x.nbytes), b.allocate_device_buffer(x.nbytes)
    b.write(bx, x)
    cfg = DispatchConfig(grid=1, params={"c": 1})
    b.dispatch_with_device_buffers(prog, [bx], [by], cfg)
    np.testing.assert_array_equal(b.read(by, dtype=np.uint32), x + 1)
    generation = b.context_generation

    b.device.destroy()  # type: ignore[attr-defined]
    with pytest.raises(vyre.DispatchError, match="device was lost") as info:
        b.dispatch_with_device_buffers(prog, [bx], [by], cfg)
    assert "vyre.get_backend('wgpu')" in str(info.value)
    assert b.context_generation == generation + 1
    for call in (
        lambda: b.read(by, dtype=np.uint32),
        lambda: b.write(bx, x),
        lambda: b.allocate_device_buffer(16),
        lambda: b.dispatch(prog, {"src": x, "dst": 64}, cfg),
        lambda: b.pipeline([Step(prog, [bx], [by], cfg)]),
        lambda: b.synchronize(),
    ):
        with pytest.raises(vyre.BackendUnavailable, match=r"was lost.*get_backend"):
            call()
    bx.free()
    b.free(by)
    b.close()
    assert b.live_buffers() == []

    b2 = vyre.get_backend("wgpu")
    try:
        out = b2.dispatch(prog, {"src": x, "dst": 64}, cfg)["dst"]
        np.testing.assert_array_equal(out, x + 1)
    finally:
        b2.close()


def test_f64_transcendental_is_refused_not_wrong(wg: BaseBackend) -> None:
    """WGSL has no f64 exp/log/sin/...: the generator refuses such calls, naming the
    function, rather than emitting what drivers compute wrongly (or crash on); f64 itself
    is reported wherever the adapter has shader-f64 (tests/test_wgpu_f64.py)."""
    from vyre.backends.wgpu import render as wgsl
    from vyre.builder import exp2, sqrt

    def one(name: str, fn: Any) -> Program:
        k = ProgramBuilder(name, workgroup_size=64)
        x, y = k.buffer("x", ScalarType.F64), k.buffer("y", ScalarType.F64, "write")
        i = k.global_id()
        y[i] = fn(x[i])
        return k.build()

    assert wg.supports("f64") == ("shader-f64" in wg.capabilities().details["wgpu_features"])
    with pytest.raises(UnsupportedFeature, match="f64 approx_exp2"):
        wgsl.generate(one("exp2_f64", vyre.approx.exp2))
    assert "fn vy_fn_exp2_" in wgsl.generate(one("exp2_f64", exp2)).source  # vyre's own
    assert "sqrt(" in wgsl.generate(one("sqrt_f64", sqrt)).source
