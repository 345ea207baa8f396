"""Concurrency: several threads allocating, writing, dispatching (host, resident, async,
pipelines, streams), compiling and reading on ONE backend instance get correct results;
two processes sharing the CUDA on-disk compile cache never load a half-written entry.

BaseBackend serialises device calls with an RLock; these tests check that every public
entry point goes through it (a backend whose device library is not thread-safe would
corrupt results or crash here). They must never share a buffer between threads except
read-only, so any wrong result is the backend's fault, not the test's.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import vyre
from vyre import DispatchConfig, ProgramBuilder, ReadRange, Step, u32
from vyre.backend import BaseBackend
from vyre.errors import BackendUnavailable, BufferStateError
from vyre.ir import nodes as N

BACKENDS = [a.name for a in vyre.available_backends() if a.available]
THREADS = 8


def affine(scale: int) -> N.Program:
    """y[i] = x[i] * scale + p (a distinct program per scale: distinct compile-cache keys)."""
    k = ProgramBuilder(f"affine{scale}", workgroup_size=64)
    x = k.buffer("x", u32)
    y = k.buffer("y", u32, "write")
    p = k.param("p", u32)
    i = k.global_linear_id()
    with k.if_(i < y.length()):
        y[i] = x[i] * scale + p
    return k.build()


def inc() -> N.Program:
    k = ProgramBuilder("inc", workgroup_size=64)
    y = k.buffer("y", u32, "read_write")
    i = k.global_linear_id()
    with k.if_(i < y.length()):
        y[i] = y[i] + 1
    return k.build()


def run_threads(fn: Callable[[int], None], n: int = THREADS) -> None:
    """Run fn(0..n-1) on n threads started together; re-raise the first failure."""
    barrier = threading.Barrier(n)

    def go(t: int) -> None:
        barrier.wait()
        fn(t)

    with ThreadPoolExecutor(n) as ex:
        for f in [ex.submit(go, t) for t in range(n)]:
            f.result()


def test_threads_resident_dispatch_and_read(be: BaseBackend) -> None:
    progs = [affine(s) for s in range(1, 4)]

    def work(t: int) -> None:
        rng = np.random.default_rng(t)
        for it in range(15):
            n = int(rng.integers(1, 3000))
            prog = progs[(t + it) % len(progs)]
            scale = (t + it) % len(progs) + 1
            x = rng.integers(0, 2**32, n, dtype=np.uint32)
            bx = be.allocate_device_buffer(x.nbytes, label=f"x{t}")
            by = be.allocate_device_buffer(x.nbytes, label=f"y{t}")
            be.write(bx, x)
            cfg = DispatchConfig.for_elements(n, 64, params={"p": t})
            be.dispatch_with_device_buffers(prog, [bx], [by], cfg)
            got = be.read(by, dtype=np.uint32)
            np.testing.assert_array_equal(got, x * np.uint32(scale) + np.uint32(t))
            be.free(bx)
            be.free(by)

    run_threads(work)
    assert be.live_buffers() == []
    assert be.compile_stats.misses == len(progs), be.compile_stats  # each compiled once


def test_threads_host_dispatch_and_async(be: BaseBackend) -> None:
    def work(t: int) -> None:
        rng = np.random.default_rng(100 + t)
        for it in range(10):
            n = int(rng.integers(1, 2000))
            x = rng.integers(0, 2**32, n, dtype=np.uint32)
            cfg = DispatchConfig.for_elements(n, 64, params={"p": it})
            out = be.dispatch(affine(2), {"x": x, "y": n}, cfg)["y"]
            np.testing.assert_array_equal(out, x * np.uint32(2) + np.uint32(it))
            # async: several dispatches on one buffer, then wait for all, then read
            by = be.allocate_device_buffer(n * 4)
            be.write(by, np.zeros(n, np.uint32))
            pend = [be.dispatch_async(inc(), [], [by], DispatchConfig.for_elements(n, 64))
                    for _ in range(3)]
            for p in pend:
                p.wait()
                assert p.is_ready()
            np.testing.assert_array_equal(be.read(by, dtype=np.uint32), np.full(n, 3))
            be.free(by)

    run_threads(work)
    assert be.live_buffers() == []


def test_threads_pipelines_and_dispatches(be: BaseBackend) -> None:
    if "pipeline" not in be.capabilities().features:
        pytest.skip(f"{be.id} has no pipelines")

    def work(t: int) -> None:
        n = 500 + t
        by = be.allocate_device_buffer(n * 4)
        be.write(by, np.full(n, t, np.uint32))
        pipe = be.pipeline([Step(inc(), [], [by], DispatchConfig.for_elements(n, 64))])
        total = t
        for it in range(8):
            res = pipe.run(repeat=it + 1, read=[ReadRange(by, 0, None, np.uint32)])
            total += it + 1
            np.testing.assert_array_equal(res.reads[0], np.full(n, total))
            be.dispatch_with_device_buffers(inc(), [], [by], DispatchConfig.for_elements(n, 64))
            total += 1
        np.testing.assert_array_equal(be.read(by, dtype=np.uint32), np.full(n, total))
        be.free(by)

    run_threads(work)


def test_threads_streams(be: BaseBackend) -> None:
    def work(t: int) -> None:
        xs = [np.arange(c * 10 + t, dtype=np.uint32) + np.uint32(t) for c in range(1, 6)]
        chunks = [{"x": x, "y": x.size} for x in xs]
        outs = list(be.stream(affine(3), chunks,
                              lambda i, d: DispatchConfig.for_elements(d["x"].size, 64,
                                                                       params={"p": 1})))
        for x, out in zip(xs, outs):
            np.testing.assert_array_equal(out["y"], x * np.uint32(3) + np.uint32(1))

    run_threads(work)
    assert be.live_buffers() == []


def test_threads_compile_many_programs(be: BaseBackend) -> None:
    progs = [affine(s) for s in range(10, 26)]

    def work(t: int) -> None:
        for p in progs[t % 4:] + progs[: t % 4]:
            be.compile(p)

    run_threads(work)
    assert be.compile_stats.misses == len(progs), be.compile_stats
    assert be.compile_stats.hits == THREADS * len(progs) - len(progs)


def test_close_while_other_threads_work(be: BaseBackend) -> None:
    """Closing mid-flight: the other threads get BackendUnavailable (or a freed-buffer
    error for a buffer close() freed), never a crash, a hang or a device-library error."""
    b = vyre.get_backend(be.kind)
    started = threading.Event()
    errors: list[BaseException] = []

    def worker() -> None:
        try:
            while True:
                bx = b.allocate_device_buffer(4096)
                started.set()
                b.write(bx, np.zeros(1024, np.uint32))
                b.dispatch_with_device_buffers(inc(), [], [bx], DispatchConfig(grid=16))
                b.read(bx, dtype=np.uint32)
                b.free(bx)
        except (BackendUnavailable, BufferStateError) as exc:
            errors.append(exc)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    ts = [threading.Thread(target=worker) for _ in range(4)]
    for th in ts:
        th.start()
    started.wait(10)
    b.close()
    for th in ts:
        th.join(30)
        assert not th.is_alive(), "a worker hung after close()"
    assert len(errors) == 4
    for e in errors:
        assert isinstance(e, (BackendUnavailable, BufferStateError)), repr(e)
    assert b.live_buffers() == []


# ------------------------------------------------------------------ disk cache, 2 processes


def _cuda_disk_cache() -> type | None:
    try:
        from vyre.backends.cuda.nvrtc import DiskCache
    except Exception:
        return None
    return DiskCache


def _payload(key: int, size: int) -> bytes:
    return np.random.default_rng(key).integers(0, 256, size, dtype=np.uint8).tobytes()


def _cache_writer(directory: str, keys: list[str], rounds: int, size: int,
                  go: Any) -> None:
    from vyre.backends.cuda.nvrtc import DiskCache

    cache = DiskCache(directory)
    payloads = [_payload(i, size) for i in range(len(keys))]
    go.wait(60)
    for _ in range(rounds):
        for k, data in zip(keys, payloads):
            cache.put(k, data)


def _cache_reader(directory: str, keys: list[str], size: int, go: Any, stop: Any,
                  out: Any) -> None:
    from vyre.backends.cuda.nvrtc import DiskCache

    cache = DiskCache(directory)
    payloads = [_payload(i, size) for i in range(len(keys))]
    seen = bad = 0
    go.wait(60)
    while True:  # at least one whole pass: a slow-starting reader may find the writers done
        done = stop.is_set()
        for k, data in zip(keys, payloads):
            got = cache.get(k)
            if got is not None:
                seen += 1
                if got != data:
                    bad += 1
        if done:
            break
    out.put((seen, bad, cache.stats.corrupt))


@pytest.mark.skipif(_cuda_disk_cache() is None, reason="vyre/backends/cuda/nvrtc.py DiskCache "
                    "is not importable here")
def test_two_processes_share_disk_cache(tmp_path: Path) -> None:
    keys = [f"{i:064x}" for i in range(6)]
    size = 1 << 20
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    go, stop = ctx.Event(), ctx.Event()
    writers = [ctx.Process(target=_cache_writer, args=(str(tmp_path), keys, 8, size, go))
               for _ in range(2)]
    readers = [ctx.Process(target=_cache_reader, args=(str(tmp_path), keys, size, go, stop, q))
               for _ in range(2)]
    for p in writers + readers:
        p.start()
    go.set()
    for p in writers:
        p.join(120)
        assert p.exitcode == 0
    stop.set()
    results = [q.get(timeout=120) for _ in range(2)]
    for p in readers:
        p.join(120)
        assert p.exitcode == 0
    for _seen, bad, corrupt in results:
        assert bad == 0, f"a reader loaded a wrong (half-written?) entry {bad} times"
        assert corrupt == 0, f"a reader met {corrupt} corrupt entries while writers wrote"
    assert sum(s for s, _, _ in results) > 0, "readers never saw an entry: the test is void"
    assert not [f for f in os.listdir(tmp_path) if f.endswith(".tmp")], "temp files left"


@pytest.mark.skipif(_cuda_disk_cache() is None, reason="CUDA DiskCache not importable")
def test_disk_cache_rejects_truncated_entry(tmp_path: Path) -> None:
    from vyre.backends.cuda.nvrtc import DiskCache

    cache = DiskCache(tmp_path)
    key = "ab" * 32
    cache.put(key, _payload(1, 4096))
    path = cache.path(key)
    full = path.read_bytes()
    for cut in (0, 10, len(full) // 2, len(full) - 1):
        path.write_bytes(full[:cut])
        assert cache.get(key) is None
        assert not path.exists(), "a corrupt entry must be removed"
    path.write_bytes(full[:-1] + bytes([full[-1] ^ 1]))  # one flipped bit
    assert cache.get(key) is None
    cache.put(key, _payload(1, 4096))
    assert cache.get(key) == _payload(1, 4096)
