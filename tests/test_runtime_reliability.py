"""Runtime reliability (issue 28): configs that cannot change behind the caches, errors that
survive pickling, host arrays of either byte order, bounded indirect grids and repeats."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

import vyre
from vyre import DispatchConfig, ProgramBuilder
from vyre.backend import BaseBackend
from vyre.errors import InvalidDispatch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common_programs import saxpy as shared_saxpy

BACKENDS = [a.name for a in vyre.available_backends() if a.available]


saxpy = shared_saxpy


# ------------------------------------------------------------------ configs are immutable


def test_changed_params_are_refused_not_ignored(be: BaseBackend) -> None:
    """Mutating a config's params used to be silently ignored by the next resident dispatch
    with the same config (the launch cache remembers configs by identity)."""
    x = np.arange(4, dtype=np.float32)
    bx = be.allocate_device_buffer(16)
    by = be.allocate_device_buffer(16)
    try:
        be.write(bx, x)
        be.write(by, np.zeros(4, np.float32))
        cfg = DispatchConfig(params={"a": 1.0})
        be.dispatch_with_device_buffers(saxpy(), [bx], [by], cfg)
        with pytest.raises(InvalidDispatch, match="cannot be changed"):
            cfg.params["a"] = 5.0
        with pytest.raises(InvalidDispatch, match="cannot be changed"):
            cfg.params.clear()
        assert cfg.params == {"a": 1.0}
        be.dispatch_with_device_buffers(saxpy(), [bx], [by], cfg)
        np.testing.assert_array_equal(be.read(by, dtype=np.float32), 2 * x)
        # the way to change them: a new, validated config, which the next dispatch honours
        cfg5 = cfg.model_copy(update={"params": {**cfg.params, "a": 5.0}})
        assert cfg5.params["a"] == 5.0 and cfg.params["a"] == 1.0
        be.dispatch_with_device_buffers(saxpy(), [bx], [by], cfg5)
        np.testing.assert_array_equal(be.read(by, dtype=np.float32), 7 * x)
        with pytest.raises(InvalidDispatch, match="cannot be changed"):
            cfg5.params["a"] = 1.0
    finally:
        be.free(bx)
        be.free(by)


def test_config_survives_pickle_and_copy_immutable() -> None:
    import copy
    import pickle

    cfg = DispatchConfig(grid=(3, 1, 1), params={"a": 2.0, "n": 7})
    for again in (pickle.loads(pickle.dumps(cfg)), copy.deepcopy(cfg), copy.copy(cfg)):
        assert again == cfg and dict(again.params) == {"a": 2.0, "n": 7}
        with pytest.raises(InvalidDispatch, match="cannot be changed"):
            again.params["a"] = 1.0


# ------------------------------------------------------------------ errors cross processes


def _all_error_classes() -> list[type[BaseException]]:
    """Every BackendError subclass vyre defines (its submodules imported first)."""
    import importlib
    import pkgutil

    for mod in pkgutil.walk_packages(vyre.__path__, "vyre."):
        if ".tools." in mod.name or mod.name.endswith("__main__"):
            continue
        try:
            importlib.import_module(mod.name)
        except Exception:  # a backend whose libraries are absent here
            continue
    seen: list[type[BaseException]] = []
    todo: list[type[BaseException]] = [vyre.BackendError]
    while todo:
        cls = todo.pop()
        if cls not in seen:
            seen.append(cls)
            todo.extend(cls.__subclasses__())
    return seen


def _instance(cls: type[BaseException]) -> BaseException:
    """An instance of `cls` built through its own constructor, every argument filled."""
    import inspect

    args = []
    for p in list(inspect.signature(cls.__init__).parameters.values())[1:]:
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            continue
        ann = str(p.annotation)
        args.append(12345 if ann == "int" else f"{p.name}-value")
    return cls(*args)


ERROR_CLASSES = _all_error_classes()


@pytest.mark.parametrize("cls", ERROR_CLASSES, ids=[c.__name__ for c in ERROR_CLASSES])
def test_every_vyre_error_survives_pickling(cls: type[BaseException]) -> None:
    import pickle

    err = _instance(cls)
    again = pickle.loads(pickle.dumps(err))
    assert type(again) is cls
    assert str(again) == str(err) and again.args == err.args
    assert again.__dict__ == err.__dict__


def _raise_out_of_memory(_: int) -> None:
    raise vyre.OutOfDeviceMemory("wgpu", 1 << 40, "a test")


def test_error_from_a_pool_worker_reaches_the_parent() -> None:
    """A multiprocessing.Pool parent used to hang forever in .get() on these errors."""
    import multiprocessing

    with multiprocessing.get_context("fork").Pool(1) as pool:
        res = pool.map_async(_raise_out_of_memory, [0])
        with pytest.raises(vyre.OutOfDeviceMemory, match="free buffers") as info:
            res.get(timeout=60)
    assert info.value.requested == 1 << 40 and info.value.backend == "wgpu"


# ------------------------------------------------------------------ byte order


def test_big_endian_upload_is_refused_and_little_endian_round_trips(be: BaseBackend) -> None:
    """write() used to store '>u4' [1, 2] as 16777216, 33554432; now it refuses like the
    host dispatch, and the fix it names stores the right values."""
    buf = be.allocate_device_buffer(8)
    try:
        be.write(buf, np.array([7, 7], np.uint32))
        data = np.array([1, 2], ">u4")
        with pytest.raises(InvalidDispatch, match="big-endian"):
            be.write(buf, data)
        with pytest.raises(InvalidDispatch, match="big-endian"):
            be.write_many([(buf, data, 0)])
        np.testing.assert_array_equal(be.read(buf, dtype=np.uint32), [7, 7])  # untouched
        be.write(buf, data.astype("<u4"))
        np.testing.assert_array_equal(be.read(buf, dtype=np.uint32), [1, 2])
        with pytest.raises(InvalidDispatch, match="big-endian"):
            be.read(buf, dtype=">u4")
        with pytest.raises(InvalidDispatch, match="big-endian"):
            be.read_into(buf, np.zeros(2, ">u4"))
    finally:
        be.free(buf)


def test_vyre_type_names_as_read_dtypes(be: BaseBackend) -> None:
    """'u32' reads as vyre.u32; 'f16' (numpy: float128, vyre: float16) used to read as
    float128 silently and is refused as ambiguous."""
    buf = be.allocate_device_buffer(8)
    try:
        be.write(buf, np.array([3, 4], np.uint32))
        got = be.read(buf, dtype="u32")
        assert got.dtype == np.uint32
        np.testing.assert_array_equal(got, [3, 4])
        with pytest.raises(InvalidDispatch, match="ambiguous"):
            be.read(buf, dtype="f16")
    finally:
        be.free(buf)


# ------------------------------------------------------------------ indirect grids


@pytest.mark.parametrize("count", [70_000, 0xFFFFFFFF])
def test_indirect_grid_over_the_limit_is_refused_everywhere(be: BaseBackend, count: int) -> None:
    """The reference ran 70,000 workgroups where wgpu refuses them, and 0xFFFFFFFF for hours;
    every backend now runs nothing and raises DispatchError naming the limit."""
    if "indirect_dispatch" not in be.capabilities().features:
        pytest.skip(f"{be.id} has no indirect dispatch")
    limit = be.capabilities().limits["max_workgroups_per_dimension"]
    assert count > limit
    g = be.allocate_device_buffer(12)
    x = be.allocate_device_buffer(16)
    y = be.allocate_device_buffer(16)
    try:
        be.write(x, np.ones(4, np.float32))
        be.write(y, np.zeros(4, np.float32))
        cfg = DispatchConfig(grid=vyre.IndirectGrid(buffer=g), params={"a": 1.0})
        for where in (0, 1, 2):
            grid = np.ones(3, np.uint32)
            grid[where] = count
            be.write(g, grid)
            with pytest.raises(vyre.DispatchError, match=f"indirect grid.*at most {limit}"):
                be.dispatch_with_device_buffers(saxpy(), [x], [y], cfg)
                be.synchronize()
            with pytest.raises(vyre.DispatchError, match="indirect grid"):
                be.pipeline([vyre.Step(saxpy(), [x], [y], cfg)]).run(read=[y])
        be.write(g, np.array([1, 1, 1], np.uint32))
        be.dispatch_with_device_buffers(saxpy(), [x], [y], cfg)
        np.testing.assert_array_equal(be.read(y, dtype=np.float32), [1, 1, 1, 1])
    finally:
        for b in (g, x, y):
            be.free(b)


# ------------------------------------------------------------------ CLI bounds


@pytest.mark.parametrize("repeat", ["0", "-3", str(10**12)])
def test_demo_repeat_out_of_range_exits_2(repeat: str) -> None:
    """`vyre demo --repeat 10**12` ran for ever and `--repeat 0` ran once silently."""
    import io

    from vyre.tools import cli

    buf = io.StringIO()
    assert cli.main(["demo", "--backend", "reference", "--repeat", repeat], out=buf) == 2
    assert f"--repeat must be between 1 and {cli.MAX_REPEAT}" in buf.getvalue()
    assert repeat in buf.getvalue()


@pytest.mark.skipif("wgpu" not in BACKENDS, reason="wgpu is not available here")
def test_wgpu_dump_into_a_directory_or_a_clear_error(tmp_path: object,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """VYRE_WGPU_DUMP=<dir> raised a raw 'Is a directory'; a directory now gets one file per
    program, and an unwritable path is a vyre error naming the variable."""
    from pathlib import Path

    d = Path(str(tmp_path))
    x = np.arange(4, dtype=np.float32)
    b = vyre.get_backend("wgpu")
    try:
        monkeypatch.setenv("VYRE_WGPU_DUMP", str(d))
        out = b.dispatch(saxpy(), {"x": x, "y": x}, DispatchConfig(params={"a": 1.0}))["y"]
        np.testing.assert_array_equal(out, 2 * x)
        (dumped,) = d.glob("saxpy-*.wgsl")
        assert "fn " in dumped.read_text()
        (d / "file").write_text("x")
        monkeypatch.setenv("VYRE_WGPU_DUMP", str(d / "file" / "sub.wgsl"))
        prog = saxpy().model_copy(update={"name": "saxpy2"})
        with pytest.raises(vyre.BackendUnavailable, match="VYRE_WGPU_DUMP"):
            b.compile(prog)
        monkeypatch.delenv("VYRE_WGPU_DUMP")
        out = b.dispatch(prog, {"x": x, "y": x}, DispatchConfig(params={"a": 3.0}))["y"]
        np.testing.assert_array_equal(out, 4 * x)
    finally:
        b.close()


# ------------------------------------------------------------------ misleading messages


@pytest.mark.skipif("wgpu" not in BACKENDS, reason="wgpu is not available here")
def test_wgpu_wait_after_close_says_closed() -> None:
    """pending.wait() after close() said 'device was lost'."""
    b = vyre.get_backend("wgpu")
    y = b.allocate_device_buffer(16)
    x = b.allocate_device_buffer(16)
    pending = b.dispatch_async(saxpy(), [x], [y], DispatchConfig(params={"a": 1.0}))
    b.close()
    with pytest.raises(vyre.BackendUnavailable, match="closed") as info:
        pending.wait()
    assert "lost" not in str(info.value)


class _FullQueue:
    """A wgpu queue whose submissions fail for lack of memory (wgpu-native's message)."""

    def __init__(self, queue: object) -> None:
        self._queue = queue

    def __getattr__(self, name: str) -> object:
        return getattr(self._queue, name)

    def submit(self, *_a: object, **_k: object) -> None:
        raise RuntimeError("Validation Error\n\nCaused by:\n  Out of memory")


@pytest.mark.skipif("wgpu" not in BACKENDS, reason="wgpu is not available here")
def test_wgpu_out_of_memory_without_a_size_says_what_failed() -> None:
    """An OOM while submitting said 'allocating 0 bytes'."""
    b = vyre.get_backend("wgpu")
    x = b.allocate_device_buffer(16)
    y = b.allocate_device_buffer(16)
    try:
        real = b.queue
        b.queue = _FullQueue(real)
        with pytest.raises(vyre.OutOfDeviceMemory, match="dispatching 'saxpy'") as info:
            b.dispatch_with_device_buffers(saxpy(), [x], [y], DispatchConfig(params={"a": 1.0}))
            b.synchronize()
        b.queue = real
        msg = str(info.value)
        assert "0 bytes" not in msg and "driver could not allocate" in msg and "free buffers" in msg
        b.write(x, np.ones(4, np.float32))
        b.write(y, np.zeros(4, np.float32))
        b.dispatch_with_device_buffers(saxpy(), [x], [y], DispatchConfig(params={"a": 2.0}))
        np.testing.assert_array_equal(b.read(y, dtype=np.float32), [2, 2, 2, 2])
    finally:
        b.close()


# ------------------------------------------------------------------ long pipelines


def _inc() -> vyre.Program:
    k = ProgramBuilder("inc", workgroup_size=1)
    y = k.buffer("y", vyre.u32, "read_write")
    y[0] = y[0] + k.lit(1, vyre.u32)
    return k.build()


@pytest.mark.skipif("wgpu" not in BACKENDS, reason="wgpu is not available here")
@pytest.mark.parametrize("profile", [False, True])
@pytest.mark.parametrize("indirect", [False, True])
def test_wgpu_long_pipeline_is_submitted_in_chunks(monkeypatch: pytest.MonkeyPatch,
                                                   profile: bool, indirect: bool) -> None:
    """A run's rounds go to the device in bounded chunks (one command encoder for every
    round grew by ~530 B a dispatch and 4e6 rounds lost the device); every round still runs
    exactly once, in order, with device timing and status checks across the chunks."""
    from vyre.backends.wgpu import queue as wgpu_queue

    monkeypatch.setattr(wgpu_queue, "MAX_DISPATCHES_PER_SUBMIT", 4)
    b = vyre.get_backend("wgpu")
    try:
        y = b.allocate_device_buffer(4)
        z = b.allocate_device_buffer(4)
        g = b.allocate_device_buffer(12)
        b.write(g, np.array([1, 1, 1], np.uint32))
        grid: object = vyre.IndirectGrid(buffer=g) if indirect else (1, 1, 1)
        cfg = DispatchConfig(grid=grid, profile=profile)  # type: ignore[arg-type]
        pipe = b.pipeline([vyre.Step(_inc(), [], [y], cfg), vyre.Step(_inc(), [], [z], cfg),
                           vyre.Step(_inc(), [], [z], cfg)])
        for repeat in (1, 2, 3, 7, 11):
            b.write_many([(y, np.zeros(1, np.uint32)), (z, np.zeros(1, np.uint32))])
            res = pipe.run(repeat=repeat, read=[y, z])
            assert [int(r[0]) for r in res.reads] == [repeat, 2 * repeat]
            assert res.extra["dispatches"] == 3 * repeat
            if profile:
                assert res.timing.device_ns is not None and res.timing.device_ns > 0
        if indirect:  # an over-limit grid in a later chunk is still caught
            b.write(g, np.array([70_000, 1, 1], np.uint32))
            with pytest.raises(vyre.DispatchError, match="indirect grid"):
                pipe.run(repeat=5, read=[y])
            b.write(g, np.array([1, 1, 1], np.uint32))
        b.write(y, np.zeros(1, np.uint32))
        assert int(pipe.run(repeat=3, read=[y]).reads[0][0]) == 3
    finally:
        b.close()


_RSS_SCRIPT = """
import resource, sys, numpy as np, vyre
from vyre import ProgramBuilder, u32, DispatchConfig, Step
k = ProgramBuilder("inc", workgroup_size=1)
y = k.buffer("y", u32, "read_write")
y[0] = y[0] + k.lit(1, u32)
b = vyre.get_backend("wgpu")
buf = b.allocate_device_buffer(4)
b.write(buf, np.zeros(1, np.uint32))
pipe = b.pipeline([Step(k.build(), [], [buf], DispatchConfig())])
pipe.run(repeat=20000)
m0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
got = int(pipe.run(repeat=100000, read=[buf]).reads[0][0])
print(got, (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - m0) / 1024)
"""


@pytest.mark.skipif("wgpu" not in BACKENDS, reason="wgpu is not available here")
def test_wgpu_pipeline_memory_does_not_grow_with_repeat() -> None:
    """100,000 rounds took ~50 MiB of host memory when recorded into one encoder."""
    import os
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", _RSS_SCRIPT], capture_output=True, text=True,
                         timeout=300, env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert out.returncode == 0, out.stderr[-2000:]
    got, grown_mib = out.stdout.split()
    assert int(got) == 120000
    assert float(grown_mib) < 25, f"host memory grew by {grown_mib} MiB over the run"


def _accumulate() -> vyre.Program:
    """y[0] += i and y[1] += 1, where i is the step index."""
    k = ProgramBuilder("acc", workgroup_size=1)
    y = k.buffer("y", vyre.u32, "read_write")
    i = k.param("i", vyre.u32)
    y[0] = y[0] + i
    y[1] = y[1] + k.lit(1, vyre.u32)
    return k.build()


def test_indexed_pipeline_runs_in_blocks(be: BaseBackend, monkeypatch: pytest.MonkeyPatch) -> None:
    """Past MAX_UNROLLED_ROUNDS an index_param run is recorded a block at a time; every
    round still runs once with its own index, and the reads come from the end."""
    from vyre import pipeline as pipeline_module

    monkeypatch.setattr(pipeline_module, "MAX_UNROLLED_ROUNDS", 3)
    y = be.allocate_device_buffer(8)
    try:
        pipe = be.pipeline([vyre.Step(_accumulate(), [], [y], DispatchConfig(), index_param="i")])
        for repeat in (1, 3, 4, 10):
            be.write(y, np.zeros(2, np.uint32))
            res = pipe.run(repeat=repeat, read=[y])
            assert res.reads[0].tolist() == [repeat * (repeat - 1) // 2, repeat]
            assert res.extra["dispatches"] == repeat
            assert res.timing.wall_ns > 0
    finally:
        be.free(y)


def test_indexed_pipeline_memory_does_not_grow_with_repeat(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Every round of an index_param run was bound and recorded at once (431 MiB after 25 s
    on the reference)."""
    import tracemalloc

    from vyre import pipeline as pipeline_module

    monkeypatch.setattr(pipeline_module, "MAX_UNROLLED_ROUNDS", 100, raising=False)
    b = vyre.get_backend("reference")
    y = b.allocate_device_buffer(8)
    pipe = b.pipeline([vyre.Step(_accumulate(), [], [y], DispatchConfig(), index_param="i")])
    peaks = []
    try:
        for repeat in (300, 1500):
            b.write(y, np.zeros(2, np.uint32))
            tracemalloc.start()
            try:
                got = pipe.run(repeat=repeat, read=[y]).reads[0].tolist()
                peaks.append(tracemalloc.get_traced_memory()[1])
            finally:
                tracemalloc.stop()
            assert got == [repeat * (repeat - 1) // 2, repeat]
    finally:
        b.close()
    assert peaks[1] < 1.5 * peaks[0], f"peak memory grew with repeat: {peaks}"


def test_indexed_pipeline_past_its_index_range_is_refused_up_front(be: BaseBackend) -> None:
    k = ProgramBuilder("acc_i32", workgroup_size=1)
    y = k.buffer("y", vyre.i32, "read_write")
    i = k.param("i", vyre.i32)
    y[0] = y[0] + i
    buf = be.allocate_device_buffer(4)
    try:
        be.write(buf, np.zeros(1, np.int32))
        pipe = be.pipeline([vyre.Step(k.build(), [], [buf], DispatchConfig(), index_param="i")])
        with pytest.raises(InvalidDispatch, match="at most 2147483648 rounds"):
            pipe.run(repeat=2**31 + 1)
        assert be.read(buf, dtype=np.int32).tolist() == [0]  # nothing ran
    finally:
        be.free(buf)


# ------------------------------------------------------------------ Ctrl-C


_CTRL_C_SCRIPT = """
import signal, threading, time, numpy as np, vyre
from vyre import ProgramBuilder, u32, DispatchConfig

k = ProgramBuilder("spread", workgroup_size=64)
o = k.buffer("o", u32, "read_write")
i = k.global_linear_id()
o[i % k.lit(64, u32)] = i
b = vyre.get_backend("wgpu")
buf = b.allocate_device_buffer(256)
prog = k.build()
b.dispatch_with_device_buffers(prog, [], [buf], DispatchConfig(grid=(64, 1, 1)))
b.synchronize()
# one dispatch of 1.3e9 invocations: seconds on a CPU adapter, all of them in the wait
big = DispatchConfig(grid=(65535, 300, 1))
WAIT = "{wait}"
if WAIT == "synchronize":
    b.dispatch_with_device_buffers(prog, [], [buf], big)
    wait = b.synchronize
elif WAIT == "pending":
    pending = b.dispatch_async(prog, [], [buf], big)
    wait = pending.wait
else:  # a pipeline run with a read-back: submits, waits, maps
    pipe = b.pipeline([vyre.Step(prog, [], [buf], big)])
    wait = lambda: pipe.run(read=[buf])
main = threading.main_thread().ident
threading.Timer(0.3, lambda: signal.pthread_kill(main, signal.SIGINT)).start()
t0 = time.monotonic()
synced = None
try:
    wait()
    synced = time.monotonic() - t0
    time.sleep(2)  # the work ended first: let the interrupt land here
except KeyboardInterrupt:
    t1 = time.monotonic()
    if synced is not None and synced < 0.3:
        print("finished-first", synced)
        raise SystemExit(0)
    b.synchronize()  # the work goes on; the instance is still usable
    t2 = time.monotonic()
    b.write(buf, np.zeros(64, np.uint32))
    assert b.read(buf, dtype=np.uint32).sum() == 0
    print("interrupted", (synced if synced is not None else t1 - t0), t2 - t0)
"""


@pytest.mark.skipif("wgpu" not in BACKENDS, reason="wgpu is not available here")
@pytest.mark.parametrize("wait", ["synchronize", "pending", "pipeline"])
def test_wgpu_long_waits_answer_ctrl_c(wait: str) -> None:
    """A long wait (synchronize(), Pending.wait(), a pipeline's run) blocked in the driver or
    held Ctrl-C back until the work was done; it now raises KeyboardInterrupt promptly and
    the instance stays usable."""
    import os
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", _CTRL_C_SCRIPT.replace("{wait}", wait)],
                         capture_output=True,
                         text=True, timeout=300,
                         env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert out.returncode == 0, out.stderr[-3000:]
    words = out.stdout.split()
    if words[0] == "finished-first":
        pytest.skip("the device finished the work before the interrupt arrived")
    answered, total = float(words[1]), float(words[2])
    assert answered < 1.5, f"Ctrl-C answered after {answered:.2f} s (work took {total:.2f} s)"
    assert total > answered
