"""Resources: thousands of allocate / write / dispatch / read / free cycles leave no live
buffers and flat host memory; close() frees everything and later calls raise
BackendUnavailable.

Host memory is checked two ways: Python allocations with tracemalloc (catches lists, dicts
and caches that grow per call) and the process RSS (catches native allocations of the
device library). Device memory is checked with `vyre.tools.testing.device_resources`: on CUDA
vyre's own live driver allocations (device and managed memory, pinned host memory, loaded
modules), counted by a CudaAllocationLedger around each test, so other processes on the GPU
(parallel test shards) cannot move them; on wgpu wgpu-py's count of every live native object
and the bytes of its buffers (on lavapipe device memory is host memory, so RSS covers it
too). The CUDA device's used bytes (cuMemGetInfo, device-wide) are reported, never asserted
on. This file must never assert on absolute memory numbers, only on growth between a
warmed-up point and the end, and exactly: every counter is vyre's own.

With VYRE_RESOURCE_REPORT=path set, the growth each test measured is also written there as
JSON lines (how `scripts/gpu_check.sh resources` reports it for the H100 and lavapipe).
"""

from __future__ import annotations

import gc
import json
import os
import time
import tracemalloc
from collections.abc import Iterator

import numpy as np
import pytest

import vyre
from vyre import DispatchConfig, ProgramBuilder, ReadRange, Step, u32
from vyre.backend import BaseBackend
from vyre.errors import BackendUnavailable
from vyre.ir import nodes as N
from vyre.tools.testing import CudaAllocationLedger, device_resources, resources_grown

BACKENDS = [a.name for a in vyre.available_backends() if a.available]
CYCLES = int(os.environ.get("VYRE_RESOURCE_CYCLES", "2000"))
REPORT = os.environ.get("VYRE_RESOURCE_REPORT")


def report(be: BaseBackend, case: str, cycles: int, seconds: float, py: int | None,
           rss: int | None, device: dict[str, int]) -> None:
    """Append one measurement to $VYRE_RESOURCE_REPORT (nothing when it is unset)."""
    if not REPORT:
        return
    row = {"backend": be.id, "device": be.capabilities().device, "case": case,
           "cycles": cycles, "seconds": round(seconds, 3), "python_bytes": py,
           "rss_bytes": rss, "device_growth": {k: v for k, v in device.items() if v}}
    with open(REPORT, "a") as f:
        f.write(json.dumps(row) + "\n")


@pytest.fixture
def ledger(be: BaseBackend) -> Iterator[CudaAllocationLedger | None]:
    """On CUDA, vyre's driver allocations from the backend's creation on (None elsewhere)."""
    if be.kind != "cuda":
        yield None
        return
    with CudaAllocationLedger.for_backend(be) as book:
        yield book


def allocations(ledger: CudaAllocationLedger | None) -> int:
    """Allocating driver calls the ledger has seen so far (0 without one)."""
    return ledger.allocations() if ledger is not None else 0


def assert_saw(ledger: CudaAllocationLedger | None, since: int, least: int, what: str) -> None:
    """The ledger saw at least `least` of vyre's allocations after `since`: the CUDA check
    is not passing because the ledger is off vyre's path."""
    if ledger is not None:
        seen = ledger.allocations() - since
        assert seen >= least, f"the ledger saw {seen} allocations during {what}, not {least}"


def add_one() -> N.Program:
    k = ProgramBuilder("add_one", workgroup_size=64)
    x = k.buffer("x", u32)
    y = k.buffer("y", u32, "write")
    i = k.global_linear_id()
    with k.if_(i < y.length()):
        y[i] = x[i] + 1
    return k.build()


def rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def cycle(be: BaseBackend, prog: N.Program, i: int) -> None:
    n = 64 + (i % 7) * 50  # a few sizes, so allocator reuse is not trivially perfect
    x = np.arange(n, dtype=np.uint32) + np.uint32(i)
    bx = be.allocate_device_buffer(x.nbytes, label="x")
    by = be.allocate_device_buffer(x.nbytes, label="y")
    be.write(bx, x)
    be.dispatch_with_device_buffers(prog, [bx], [by], DispatchConfig.for_elements(n, 64))
    got = be.read(by, dtype=np.uint32)
    if got[0] != x[0] + 1 or got[-1] != x[-1] + 1:
        raise AssertionError(f"cycle {i}: wrong result {got[:4]}")
    be.free(bx)
    by.free()


def host_cycle(be: BaseBackend, prog: N.Program, i: int) -> None:
    x = np.full(100, i, dtype=np.uint32)
    out = be.dispatch(prog, {"x": x, "y": 100}, DispatchConfig(grid=2))["y"]
    if out[0] != i + 1:
        raise AssertionError(f"host cycle {i}: wrong result {out[:4]}")


def _growth(be: BaseBackend, ledger: CudaAllocationLedger | None, fn: object,
            cycles: int) -> tuple[int, int, dict[str, int], dict[str, int]]:
    """(traced Python bytes, RSS bytes, device counters before, after) between cycle
    cycles/4 and the end."""
    prog = add_one()
    warm = max(cycles // 4, 1)
    for i in range(warm):
        fn(be, prog, i)  # type: ignore[operator]
    gc.collect()
    tracemalloc.start()
    try:
        t0, _ = tracemalloc.get_traced_memory()
        r0 = rss_bytes()
        d0 = device_resources(be, ledger)
        s0 = time.perf_counter()
        for i in range(warm, cycles):
            fn(be, prog, i)  # type: ignore[operator]
        seconds = time.perf_counter() - s0
        gc.collect()
        t1, _ = tracemalloc.get_traced_memory()
        r1 = rss_bytes()
        d1 = device_resources(be, ledger)
    finally:
        tracemalloc.stop()
    report(be, getattr(fn, "__name__", "?"), cycles - warm, seconds, t1 - t0, r1 - r0,
           _minus(d1, d0))
    return t1 - t0, r1 - r0, d0, d1


def _minus(after: dict[str, int], before: dict[str, int]) -> dict[str, int]:
    """Device counters grown from `before` to `after`."""
    return {k: v - before.get(k, 0) for k, v in after.items()}


def assert_device_flat(before: dict[str, int], after: dict[str, int]) -> None:
    """No device object, allocation or byte more than after warm-up, exactly (every counter
    asserted on is vyre's own; see resources_grown)."""
    over = resources_grown(before, after)
    assert not over, f"device resources grew: {over}"


@pytest.mark.parametrize("fn", [cycle, host_cycle], ids=["resident", "host"])
def test_cycles_leave_nothing_behind(be: BaseBackend, ledger: CudaAllocationLedger | None,
                                     fn: object) -> None:
    seen = allocations(ledger)
    py, rss, d0, d1 = _growth(be, ledger, fn, CYCLES)
    assert be.live_buffers() == []
    assert_device_flat(d0, d1)
    # CUDA keeps freed memory for reuse: the driver is asked for the first cycle's two
    # buffers, every later cycle reuses them (a buffer kept alive would need new memory
    # each cycle, which assert_device_flat counts)
    assert_saw(ledger, seen, 2, "the cycles (two device buffers each, kept for reuse)")
    # Per cycle, less than 64 bytes of Python memory and 2 KiB of RSS may remain: a leak of
    # even one small object or one device allocation per cycle exceeds that.
    n = CYCLES - CYCLES // 4
    assert py < 64 * n + 256 * 1024, f"Python memory grew {py} bytes over {n} cycles"
    assert rss < 2048 * n + 16 * 1024 * 1024, f"RSS grew {rss} bytes over {n} cycles"
    assert be.compile_stats.misses == 1


def test_pipeline_runs_leave_nothing_behind(be: BaseBackend,
                                            ledger: CudaAllocationLedger | None) -> None:
    if "pipeline" not in be.capabilities().features:
        pytest.skip(f"{be.id} has no pipelines")
    x = np.arange(1000, dtype=np.uint32)
    bx = be.allocate_device_buffer(x.nbytes)
    by = be.allocate_device_buffer(x.nbytes)
    be.write(bx, x)
    pipe = be.pipeline([Step(add_one(), [bx], [by], DispatchConfig.for_elements(1000, 64))])
    for _ in range(100):
        pipe.run(read=[ReadRange(by, 0, None, np.uint32)])
    # the runs allocate nothing once warm: the ledger is shown on vyre's path by the
    # buffers, the kernel's module and the read's pinned memory of the recording
    assert_saw(ledger, 0, 4, "the pipeline's recording")
    gc.collect()
    d0 = device_resources(be, ledger)
    r0 = rss_bytes()
    tracemalloc.start()
    try:
        t0, _ = tracemalloc.get_traced_memory()
        s0 = time.perf_counter()
        for _ in range(CYCLES // 2):
            res = pipe.run(read=[ReadRange(by, 0, None, np.uint32)])
        seconds = time.perf_counter() - s0
        del res
        gc.collect()
        t1, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    d1 = device_resources(be, ledger)
    report(be, "pipeline_run", CYCLES // 2, seconds, t1 - t0, rss_bytes() - r0, _minus(d1, d0))
    assert t1 - t0 < 64 * CYCLES + 256 * 1024, f"Python memory grew {t1 - t0} bytes"
    assert_device_flat(d0, d1)
    be.free(bx)
    be.free(by)
    assert be.live_buffers() == []


def test_buffer_context_manager_frees(be: BaseBackend) -> None:
    for _ in range(200):
        with be.allocate_device_buffer(1024) as b:
            be.write(b, np.zeros(256, np.uint32))
        assert b.freed
    assert be.live_buffers() == []


def test_close_frees_everything(be: BaseBackend, ledger: CudaAllocationLedger | None) -> None:
    d0 = device_resources(be, ledger)
    seen = allocations(ledger)
    b = vyre.get_backend(be.kind)
    bufs = [b.allocate_device_buffer(4096 * (i + 1), label=f"b{i}") for i in range(20)]
    prog = add_one()
    b.write(bufs[0], np.zeros(1024, np.uint32))
    b.dispatch_with_device_buffers(prog, [bufs[0]], [bufs[1]], DispatchConfig(grid=16))
    b.free(bufs[2])
    assert len(b.live_buffers()) == 19
    b.close()
    assert b.closed
    assert b.live_buffers() == []
    assert all(x.freed for x in bufs)
    if ledger is not None:
        # the driver got back every allocation of the closed instance: its 20 buffers and
        # its kernel's module (`be` made none meanwhile)
        assert_device_flat(d0, device_resources(be, ledger))
        assert_saw(ledger, seen, 21, "the closed instance's life")
    for call in (
        lambda: b.allocate_device_buffer(4),
        lambda: b.read(bufs[0]),
        lambda: b.write(bufs[0], b"\x00" * 4),
        lambda: b.dispatch_with_device_buffers(prog, [bufs[0]], [bufs[1]], DispatchConfig()),
        lambda: b.dispatch(prog, {"x": np.zeros(4, np.uint32), "y": 4}, DispatchConfig()),
        lambda: b.compile(prog),
        lambda: b.synchronize(),
    ):
        with pytest.raises(BackendUnavailable, match="closed"):
            call()
    for x in bufs:
        x.free()  # harmless after close
    b.close()


def test_many_instances_open_and_close(be: BaseBackend,
                                       ledger: CudaAllocationLedger | None) -> None:
    """Creating and closing instances repeatedly accumulates neither device objects nor host
    memory. RSS is read per window of 15 instances: the first windows may grow while the
    allocator and the driver (lavapipe starts threads per device) reach their plateau, so
    the test asks that growth stops, which a per-instance leak never does."""
    def once() -> None:
        b = vyre.get_backend(be.kind)
        x = b.allocate_device_buffer(4096)
        b.write(x, np.zeros(1024, np.uint32))
        b.close()

    for _ in range(5):
        once()
    gc.collect()
    d0 = device_resources(be, ledger)
    seen = allocations(ledger)
    windows: list[int] = []
    s0 = time.perf_counter()
    for _ in range(3):
        r0 = rss_bytes()
        for _ in range(15):
            once()
        gc.collect()
        windows.append(rss_bytes() - r0)
    seconds = time.perf_counter() - s0
    d1 = device_resources(be, ledger)
    report(be, "open_close_instance", 45, seconds, None, sum(windows), _minus(d1, d0))
    assert min(windows[1:]) < 16 * 1024 * 1024, f"RSS grew per 15 instances: {windows}"
    assert_device_flat(d0, d1)
    assert_saw(ledger, seen, 45, "45 instances' lives (a buffer each)")
