"""The CUDA allocation ledger (vyre.tools.testing.CudaAllocationLedger) that the CUDA leak
checks assert on: its bookkeeping on a fake driver module; that it sees every allocation
vyre's CUDA backend makes and its release (device, managed and pinned memory, modules);
and that the resource check built on it (device_resources + resources_grown) fails on a
deliberate leak of each kind and passes without one.

The backend tests run on the stand-in driver (tests/cuda_standin.py, no GPU needed) and on
a real GPU (`gpu`: skipped with the reason where there is none).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

import vyre
from vyre import DispatchConfig, ProgramBuilder, u32
from vyre.tools.testing import CudaAllocationLedger, device_resources, resources_grown

OK, OOM = 0, 2  # CUresult values: success, out of memory


class FakeDriver(SimpleNamespace):
    """A driver module object whose functions answer (err, handle) tuples like cuda-python's;
    `fail` names the calls that answer out-of-memory instead."""

    def __init__(self) -> None:
        super().__init__()
        self.fail: set[str] = set()
        self.next = 0x1000

        def alloc(name: str) -> Callable[..., tuple[int, int]]:
            def call(*args: Any) -> tuple[int, int]:
                if name in self.fail:
                    return OOM, 0
                self.next += 0x1000
                return OK, self.next
            return call

        def release(name: str) -> Callable[[Any], tuple[int]]:
            return lambda handle: (OOM,) if name in self.fail else (OK,)

        for name in ("cuMemAlloc", "cuMemAllocManaged", "cuMemAllocHost", "cuModuleLoadData"):
            setattr(self, name, alloc(name))
        for name in ("cuMemFree", "cuMemFreeHost", "cuModuleUnload"):
            setattr(self, name, release(name))


def live(ledger: CudaAllocationLedger) -> dict[str, int]:
    return {k: v for k, v in ledger.counters().items() if v}


def test_the_ledger_books_each_kind_until_its_release() -> None:
    drv = FakeDriver()
    with CudaAllocationLedger(drv) as ledger:
        _, d = drv.cuMemAlloc(100)
        _, m = drv.cuMemAllocManaged(50, 1)
        _, h = drv.cuMemAllocHost(4096)
        _, mod = drv.cuModuleLoadData(b"\x7fELF" + bytes(60))
        assert live(ledger) == {
            "cuda_live_device_allocations": 2, "cuda_live_device_bytes": 150,
            "cuda_live_pinned_allocations": 1, "cuda_live_pinned_bytes": 4096,
            "cuda_live_modules": 1}
        assert ledger.modules == {mod: 64}
        drv.cuMemFree(m)  # managed memory is released by cuMemFree too
        assert ledger.device == {d: 100}
        drv.cuMemFree(d), drv.cuMemFreeHost(h), drv.cuModuleUnload(mod)
        assert live(ledger) == {}
        assert ledger.allocations() == 4
        assert ledger.calls == {"cuMemAlloc": 1, "cuMemAllocManaged": 1, "cuMemAllocHost": 1,
                                "cuModuleLoadData": 1, "cuMemFree": 2, "cuMemFreeHost": 1,
                                "cuModuleUnload": 1}


def test_failed_calls_and_foreign_releases_change_nothing() -> None:
    drv = FakeDriver()
    _, before = drv.cuMemAlloc(8)  # allocated before the ledger: not its business
    with CudaAllocationLedger(drv) as ledger:
        drv.fail = {"cuMemAlloc", "cuModuleLoadData"}
        assert drv.cuMemAlloc(64) == (OOM, 0)
        assert drv.cuModuleLoadData(b"x")[0] == OOM
        assert live(ledger) == {} and ledger.allocations() == 0
        drv.fail = {"cuMemFree"}
        _, p = drv.cuMemAllocHost(16)
        _, d = drv.cuMemAlloc(32)
        assert drv.cuMemFree(d) == (OOM,)  # the driver refused: still live, and listed
        assert ledger.device == {d: 32}
        assert ledger.failed_releases == [f"cuMemFree({d:#x}): {OOM}"]
        drv.fail = set()
        drv.cuMemFree(before)
        drv.cuMemFreeHost(0xdead)
        assert ledger.device == {d: 32} and ledger.pinned == {p: 16}


def test_the_ledger_is_removed_in_order() -> None:
    drv = FakeDriver()
    real = {n: getattr(drv, n) for n in ("cuMemAlloc", "cuMemFree", "cuModuleUnload")}
    outer = CudaAllocationLedger(drv).install()
    with pytest.raises(RuntimeError, match="installed already"):
        outer.install()
    with CudaAllocationLedger(drv) as inner:  # stacked: both count
        drv.cuMemAlloc(4)
    assert inner.allocations() == outer.allocations() == 1
    drv.cuMemAlloc = real["cuMemAlloc"]  # something replaced a wrapped function
    with pytest.raises(RuntimeError, match="cuMemAlloc were replaced"):
        outer.remove()
    drv.cuMemAlloc = outer._saved[0][2]
    outer.remove()
    assert all(getattr(drv, n) is f for n, f in real.items())
    outer.remove()  # not installed: nothing to do


def test_cuda_counters_are_checked_on_a_ledger_only() -> None:
    without = {"vyre_live_buffers": 0, "cuda_device_used_bytes": 5 << 30}
    with pytest.raises(ValueError, match="CudaAllocationLedger"):
        resources_grown(without, without)
    counters = CudaAllocationLedger(FakeDriver()).counters()
    before = {**without, **counters}
    after = {**before, "cuda_device_used_bytes": 6 << 30, "cuda_live_modules": 1,
             "vyre_live_buffers": -1}
    # another process's gigabyte is information only; one module more is a leak
    assert resources_grown(before, after) == {"cuda_live_modules": 1}


# ------------------------------------------------------------------ on vyre's CUDA backend
sys.path.insert(0, str(Path(__file__).resolve().parent))


@pytest.fixture(params=["standin", pytest.param("gpu", marks=pytest.mark.gpu)])
def cuda(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    """A CUDA backend on the stand-in driver, or on the real one."""
    if request.param == "gpu":
        a = {x.name: x for x in vyre.available_backends()}.get("cuda")
        if a is None or not a.available:
            pytest.skip(f"no CUDA here: {a.reason if a else 'backend not registered'}")
        b = vyre.get_backend("cuda")
        yield b
        b.close()
        return
    pytest.importorskip("cuda.bindings.driver", reason="cuda-bindings is not installed")
    import cuda_standin

    from vyre.backends.cuda import driver as D
    from vyre.backends.cuda.runtime import CudaBackend

    saved = D._driver
    cuda_standin.install()
    try:
        b = CudaBackend(0, cache_dir=str(tmp_path))
        yield b
        b.close()
    finally:
        D._driver = saved


def add(c: int) -> vyre.Program:
    """y = x + c: a distinct kernel (and module) for each c."""
    k = ProgramBuilder(f"add_{c}", workgroup_size=64)
    x, y = k.buffer("x", u32), k.buffer("y", u32, "write")
    i = k.global_linear_id()
    with k.if_(i < y.length()):
        y[i] = x[i] + c
    return k.build()


def cycle(be: Any, c: int = 1, kind: str = "device") -> None:
    x = np.arange(256, dtype=np.uint32)
    bx = be.allocate_device_buffer(x.nbytes, kind=kind)
    by = be.allocate_device_buffer(x.nbytes)
    be.write(bx, x)
    be.dispatch_with_device_buffers(add(c), [bx], [by], DispatchConfig.for_elements(256, 64))
    be.read(by, dtype=np.uint32)
    bx.free()
    by.free()
    # freed memory is kept for reuse (device.ContextState.recycle): give it back, so that each
    # cycle allocates and frees through the driver the leak checks watch
    be.release_cached_memory()


def test_the_ledger_sees_every_allocation_vyre_makes(cuda: Any) -> None:
    """Device and managed buffers, the read's pinned staging memory and the kernel's module
    are booked while they live, and a closed instance has released all of them."""
    with CudaAllocationLedger.for_backend(cuda) as ledger:
        x = cuda.allocate_device_buffer(1024)
        m = cuda.allocate_device_buffer(512, kind="managed")
        cuda.write(x, np.arange(256, dtype=np.uint32))
        y = cuda.allocate_device_buffer(1024)
        cuda.dispatch_with_device_buffers(add(3), [x], [y], DispatchConfig.for_elements(256, 64))
        cuda.read(y)
        assert ledger.calls == {"cuMemAlloc": 2, "cuMemAllocManaged": 1, "cuMemAllocHost": 1,
                                "cuModuleLoadData": 1}
        assert set(ledger.device) == {x.ptr, m.ptr, y.ptr}
        c = ledger.counters()
        assert (c["cuda_live_device_bytes"], c["cuda_live_pinned_allocations"],
                c["cuda_live_modules"]) == (2560, 1, 1)
        m.free()
        del x  # dropped: its finalizer frees it
        y.free()
        # x and y are kept for reuse (device.ContextState.recycle) until given back
        assert ledger.counters()["cuda_live_device_allocations"] == 2
        assert cuda.release_cached_memory() == 2048
        assert ledger.counters()["cuda_live_device_allocations"] == 0
        cuda.close()
        assert live(ledger) == {}
        assert not ledger.failed_releases


def scenario(be: Any, leak: str, leaking: bool, kept: list[tuple[Any, Any]],
             cache_dir: Path) -> None:
    """One cycle of the work whose `leak` the check must catch: a compute cycle on `be`
    (its first buffer managed memory for "managed"; for "pinned", when `leaking`, 4 KiB of
    pinned memory allocated through the backend's driver and kept in `kept`), or for
    "module" a second instance that compiles a kernel and is closed."""
    if leak == "module":
        b = type(be)(0, cache_dir=str(cache_dir))
        cycle(b, 1)
        b.close()
        return
    cycle(be, 0, "managed" if leak == "managed" else "device")
    if leak == "pinned" and leaking:
        err, p = be.driver.cuMemAllocHost(4096)
        assert int(err) == 0
        kept.append((be.driver.cuMemFreeHost, p))


LEAKS = {  # the leak -> the counters that must grow, by how much over 3 cycles
    "device": {"cuda_live_device_allocations": 6, "cuda_live_device_bytes": 6 * 1024},
    "managed": {"cuda_live_device_allocations": 6, "cuda_live_device_bytes": 6 * 1024},
    "pinned": {"cuda_live_pinned_allocations": 3, "cuda_live_pinned_bytes": 3 * 4096},
    "module": {"cuda_live_modules": 3},
}


@pytest.mark.parametrize("leak", LEAKS)
def test_the_check_catches_a_leak(cuda: Any, leak: str, monkeypatch: pytest.MonkeyPatch,
                                  tmp_path: Path) -> None:
    """The resource check of tests/test_resources.py (growth of device_resources with the
    ledger, after a warm-up) passes on three cycles and fails on the same cycles with a
    leak: vyre's frees dropped (device and managed memory), pinned memory allocated through
    the backend's driver and kept, or closing instances that never unload their kernels'
    modules. Whatever was leaked is released afterwards, through the ledger."""
    drv = cuda.driver
    ok = drv.CUresult.CUDA_SUCCESS
    kept: list[tuple[Any, Any]] = []  # (the real release, handle): called at the end

    def dropped(name: str) -> Callable[[Any], tuple[Any]]:
        """`name` answering success without releasing (kept for the real release later)."""
        release = getattr(drv, name)

        def call(handle: Any) -> tuple[Any]:
            kept.append((release, handle))
            return (ok,)
        return call

    grown: dict[bool, dict[str, int]] = {}
    with CudaAllocationLedger.for_backend(cuda) as ledger:
        scenario(cuda, leak, False, kept, tmp_path)  # warm-up: the module, the staging memory
        start = device_resources(cuda, ledger)
        for leaking in (False, True):
            before = device_resources(cuda, ledger)
            seen = ledger.allocations()
            with monkeypatch.context() as mp:  # over the ledger: vyre's calls never reach it
                if leaking and leak in ("device", "managed"):
                    mp.setattr(drv, "cuMemFree", dropped("cuMemFree"))
                if leaking and leak == "module":
                    mp.setattr(drv, "cuModuleUnload", dropped("cuModuleUnload"))
                for _ in range(3):
                    scenario(cuda, leak, leaking, kept, tmp_path)
            grown[leaking] = resources_grown(before, device_resources(cuda, ledger))
            assert ledger.allocations() - seen >= 3, "the ledger did not see the cycles"
        for release, handle in kept:
            release(handle)
        assert resources_grown(start, device_resources(cuda, ledger)) == {}
    assert grown[False] == {}
    assert grown[True] == LEAKS[leak]
