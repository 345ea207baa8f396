"""Thread safety of the launch / free paths, ownership of bindings between instances, and
memory released when a buffer is dropped.

A free() racing a re-dispatch of a bound dispatch over the freed buffer must end in a vyre
error (BufferStateError) on every backend, never a raw exception from deep inside nor a
process abort (wgpu-native panicked on submitting a destroyed buffer); the shared-instance
stress (scripts/thread_stress.py) runs in a subprocess so that an abort fails the test
instead of killing pytest.
"""

from __future__ import annotations

import gc
import os
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

import vyre
from vyre import DispatchConfig, Step, f32
from vyre.backend import BaseBackend
from vyre.errors import BufferOwnershipError, BufferStateError

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common_programs import inc_f32

BACKENDS = [a.name for a in vyre.available_backends() if a.available]
ROOT = Path(__file__).resolve().parents[1]


def _inc() -> vyre.Program:
    return inc_f32()


def test_free_racing_a_bound_redispatch_gives_only_vyre_errors(be: BaseBackend) -> None:
    """One thread re-dispatches a bound dispatch (and records a pipeline) while another
    frees its buffer: before the launch path took the lock around its check and submit, the
    reference raised IndexError from inside the interpreter and wgpu aborted the process;
    a pipeline recorded just after the free failed in wgpu validation (DispatchError)."""
    prog, n = _inc(), 4096
    cfg = DispatchConfig.for_elements(n, 64)
    raw: list[BaseException] = []
    launched = 0
    pipelines = "pipeline" in be.capabilities().features
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as CPython allows
    try:
        for _ in range(150):
            buf = be.allocate_device_buffer(n * 4)
            bound = be.bind(prog, [], [buf], cfg)
            started = threading.Event()

            def hammer(bound: vyre.BoundDispatch = bound, started: threading.Event = started
                       ) -> None:
                nonlocal launched
                while True:
                    started.set()
                    try:
                        be.dispatch_with_device_buffers(bound)
                        launched += 1
                        be.dispatch_with_device_buffers(_inc(), [], [bound.buffers[0]], cfg)
                        if pipelines:  # recorded over the buffer, then run
                            be.pipeline([Step(prog, [], [bound.buffers[0]], cfg)]).run()
                    except BufferStateError:
                        return  # the freed buffer refused, as it must be
                    except BaseException as exc:  # (what the test looks for)
                        raw.append(exc)
                        return

            t = threading.Thread(target=hammer)
            t.start()
            started.wait()
            be.free(buf)
            t.join()
    finally:
        sys.setswitchinterval(old)
    assert not raw, f"raw exceptions from the race: {raw[:3]!r}"
    assert launched > 0  # the race was run, not refused up front
    # the instance still computes right
    with be.allocate_device_buffer(n * 4) as b:
        be.write(b, np.zeros(n, np.float32))
        be.dispatch_with_device_buffers(prog, [], [b], cfg)
        np.testing.assert_array_equal(be.read(b, dtype=np.float32), np.ones(n, np.float32))


def _bound_on_another(be: BaseBackend) -> tuple[BaseBackend, vyre.BoundDispatch]:
    other = vyre.get_backend(be.kind)
    buf = other.allocate_device_buffer(256)
    other.write(buf, np.full(64, 7, np.float32))
    return other, other.bind(_inc(), [], [buf], DispatchConfig.for_elements(64, 64))


@pytest.mark.parametrize("entry", ["dispatch_with_device_buffers", "dispatch_async",
                                   "pipeline", "profiled"])
def test_binding_of_another_instance_is_refused(be: BaseBackend, entry: str) -> None:
    """A BoundDispatch bound by instance A, handed to instance B of the same kind: B ran it
    on A's memory (reference) or failed in wgpu validation."""
    need = {"dispatch_async": "async", "pipeline": "pipeline"}.get(entry)
    if need is not None and need not in be.capabilities().features:
        pytest.skip(f"{be.id} has no {need}")
    other, bound = _bound_on_another(be)
    try:
        other.dispatch_with_device_buffers(bound)  # A itself runs it
        if entry == "dispatch_with_device_buffers":
            call = lambda: be.dispatch_with_device_buffers(bound)  # noqa: E731
        elif entry == "profiled":
            prof = other.bind(bound.program, [], list(bound.buffers),
                              DispatchConfig.for_elements(64, 64, profile=True))
            call = lambda: be.dispatch_with_device_buffers(prof)  # noqa: E731
        elif entry == "dispatch_async":
            call = lambda: be.dispatch_async(bound).wait()  # noqa: E731
        else:
            call = lambda: be.pipeline([bound]).run()  # noqa: E731
        for _ in range(2):  # the second time too (nothing about it is remembered)
            with pytest.raises(BufferOwnershipError) as info:
                call()
            msg = str(info.value)
            assert "bound by" in msg and f"{id(other):#x}" in msg and f"{id(be):#x}" in msg
            assert "bind(program, inputs, outputs, config)" in msg
        # A's memory was not touched by B
        np.testing.assert_array_equal(other.read(bound.buffers[0], dtype=np.float32),
                                      np.full(64, 8, np.float32))
    finally:
        other.close()


def _rss_kib() -> int:
    with open(f"/proc/{os.getpid()}/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))


def test_dropped_buffers_release_their_memory(be: BaseBackend) -> None:
    """A buffer whose last handle is dropped without free() is released, as CUDA's are:
    on the reference and wgpu 300 dropped 1 MiB buffers stayed allocated until close()."""
    mib = 1 << 20
    prog = _inc()
    cfg = DispatchConfig.for_elements(mib // 4, 256)
    for _ in range(20):  # warm up: compile, staging, allocator pools
        b = be.allocate_device_buffer(mib)
        be.write(b, np.zeros(mib // 4, np.float32))
        be.dispatch_with_device_buffers(prog, [], [b], cfg)
        del b
    be.synchronize()
    gc.collect()
    live0, rss0 = len(be.live_buffers()), _rss_kib()
    for _ in range(300):
        b = be.allocate_device_buffer(mib)
        be.write(b, np.ones(mib // 4, np.float32))  # touched: its pages are really there
        be.dispatch_with_device_buffers(prog, [], [b], cfg)
        del b
    be.synchronize()
    gc.collect()
    assert len(be.live_buffers()) <= live0
    grown = (_rss_kib() - rss0) // 1024
    assert grown < 100, f"300 dropped 1 MiB buffers left {grown} MiB allocated"
    # a kept buffer is untouched by all this
    with be.allocate_device_buffer(256) as keep:
        be.write(keep, np.zeros(64, np.float32))
        be.dispatch_with_device_buffers(prog, [], [keep], DispatchConfig.for_elements(64, 64))
        np.testing.assert_array_equal(be.read(keep, dtype=np.float32), np.ones(64, np.float32))


def test_thread_stress_script(be: BaseBackend) -> None:
    """scripts/thread_stress.py for a few seconds in a subprocess (a SIGABRT fails here)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "thread_stress.py"), "--backend", be.kind,
         "--seconds", "3"],
        capture_output=True, text=True, timeout=240, env=env, cwd=ROOT,
    )
    assert proc.returncode == 0, (proc.returncode, proc.stdout[-3000:], proc.stderr[-3000:])
    assert "wrong results: 0" in proc.stdout and "other exceptions: 0" in proc.stdout
    ops = int(proc.stdout.split("operations: ")[1].split()[0])
    assert ops > 50, proc.stdout


def test_pipeline_step_bound_elsewhere_names_the_step(be: BaseBackend) -> None:
    if "pipeline" not in be.capabilities().features:
        pytest.skip(f"{be.id} has no pipelines")
    other, bound = _bound_on_another(be)
    try:
        with be.allocate_device_buffer(256) as mine, \
                pytest.raises(BufferOwnershipError, match="pipeline step 1"):
            be.pipeline([Step(_inc(), [], [mine], DispatchConfig.for_elements(64, 64)), bound])
    finally:
        other.close()


def test_kernel_keeps_a_bounded_number_of_specialisations() -> None:
    """@vyre.kernel kept one Program per distinct build-time constant value forever
    (188,093 values: 677 MiB); now the least recently used beyond KERNEL_CACHE_SIZE go."""
    from vyre.kernel import KERNEL_CACHE_SIZE

    @vyre.kernel(workgroup_size=64)
    def add_c(y: vyre.InOut[f32], *, c: float = 0.0) -> None:
        i = vyre.global_linear_id()
        with vyre.if_(i < y.length()):
            y[i] = y[i] + c

    first = add_c.build(c=0.0)
    kept = add_c.build(c=1.0)
    assert add_c.build(c=0.0) is first  # cached
    for v in range(2, KERNEL_CACHE_SIZE + 50):
        add_c.build(c=float(v))
        if v % 16 == 0:
            assert add_c.build(c=1.0) is kept  # used recently: stays
    assert add_c.build(c=1.0) is kept
    again = add_c.build(c=0.0)
    assert again is not first  # dropped, rebuilt: the same program
    assert again.content_hash == first.content_hash
    recent = add_c.build(c=float(KERNEL_CACHE_SIZE + 49))
    assert add_c.build(c=float(KERNEL_CACHE_SIZE + 49)) is recent
    with vyre.get_backend("reference") as be:
        out = add_c.launch(be, 4, np.zeros(4, np.float32), c=3.0)
        np.testing.assert_array_equal(out["y"], np.full(4, 3, np.float32))
