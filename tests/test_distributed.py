"""vyre.distributed on a local Ray cluster: remote backends (reference and wgpu actors, each
in its own worker process) against the local reference, ownership and stale handles across
processes, program caching, GPU placement through Ray's logical GPUs, transfer and the
sharded helper's bit-identity with the single-backend library.

One cluster for the session (2 CPUs, 2 logical GPUs, a small object store, no dashboard);
every test skips, with the reason, where Ray is not installed.
"""

from __future__ import annotations

import builtins
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import vyre
from vyre import DispatchConfig, ProgramBuilder, Step
from vyre.backend import BaseBackend
from vyre.errors import (
    BackendUnavailable,
    BufferOwnershipError,
    BufferStateError,
    InvalidDispatch,
    UnsupportedFeature,
)
from vyre.ir.nodes import Program
from vyre.ir.types import ScalarType as ST
from vyre.programs.elementwise import saxpy
from vyre.programs.matmul import matmul_config, matmul_host, matmul_program
from vyre.programs.reduce import reduce_host
from vyre.programs.scan import scan_host

ray = pytest.importorskip("ray", reason="Ray is not installed: pip install 'vyre[distributed]'")

from vyre import distributed as vd  # noqa: E402
from vyre.distributed.sharded import LIBRARY_BLOCK  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


@pytest.fixture(scope="session")
def cluster() -> Iterator[None]:
    ray.init(num_cpus=2, num_gpus=2, include_dashboard=False, object_store_memory=80 * 2**20,
             log_to_driver=False, configure_logging=False)
    yield
    ray.shutdown()


def _spawn(kind: str, **kw: Any) -> vd.RemoteBackend:
    """An actor that holds no logical CPU, so that the 2-CPU test cluster fits them all."""
    return vd.spawn(kind, num_cpus=kw.pop("num_cpus", 0), **kw)


@pytest.fixture(scope="session")
def ref_actor(cluster: None) -> Iterator[vd.RemoteBackend]:
    b = _spawn("reference")
    yield b
    b.close()


@pytest.fixture(scope="session")
def wgpu_actor(cluster: None) -> Iterator[vd.RemoteBackend]:
    avail = {a.name: a for a in vyre.available_backends()}
    if "wgpu" not in avail or not avail["wgpu"].available:
        pytest.skip(f"no wgpu adapter here ({avail.get('wgpu')})")
    b = _spawn("wgpu")
    yield b
    b.close()


@pytest.fixture(params=["ref", "wgpu"])
def remote(request: Any) -> vd.RemoteBackend:
    b: vd.RemoteBackend = request.getfixturevalue(f"{request.param}_actor")
    return b


def _accumulate() -> Program:
    """acc[i] += x[i] * a: its result after `repeat` runs shows every run happened, in order."""
    k = ProgramBuilder("dist_accumulate", workgroup_size=64)
    x = k.buffer("x", ST.F32)
    acc = k.buffer("acc", ST.F32, "read_write")
    a = k.param("a", ST.F32)
    i = k.global_linear_id()
    with k.if_(i < acc.length()):
        acc[i] = acc[i] + x[i] * a
    return k.build()


def _slow() -> Program:
    """A dispatch that keeps the reference backend busy for seconds."""
    k = ProgramBuilder("dist_slow", workgroup_size=64)
    out = k.buffer("out", ST.U32, "read_write")
    with k.for_range(0, k.param("iters", ST.U32)) as j:
        out[k.global_linear_id()] = out[k.global_linear_id()] + j
    return k.build()


def _bits(a: Any) -> np.ndarray:
    arr = np.asarray(a)
    return arr.view(np.dtype(f"u{arr.dtype.itemsize}"))


# ---------------------------------------------------------------- the local API, remotely
def test_resident_dispatch_bind_async_pipeline_match_local(
    remote: vd.RemoteBackend, reference: BaseBackend
) -> None:
    rng = np.random.default_rng(3)
    x = rng.standard_normal(1000).astype(np.float32)
    y = rng.standard_normal(1000).astype(np.float32)
    prog = _accumulate()
    cfg = DispatchConfig.for_elements(1000, 64, params={"a": 1.5})
    bx, bacc = (remote.allocate_device_buffer(4000, label=n) for n in ("x", "acc"))
    remote.write_many([(bx, x), (bacc, y)])
    t = remote.dispatch_with_device_buffers(prog, {"x": bx}, {"acc": bacc}, cfg)
    assert isinstance(t, vyre.Timing)
    remote.dispatch_async(prog, [bx], [bacc], cfg).wait()
    bound = remote.bind(prog, {"x": bx}, {"acc": bacc}, cfg)
    remote.dispatch_with_device_buffers(bound)
    pipe = remote.pipeline([Step(prog, {"x": bx}, {"acc": bacc}, cfg), bound])
    res = pipe.run(repeat=2, read=[vyre.ReadRange(bacc, 0, None, np.float32)])
    remote.synchronize()
    # the same seven dispatches on the local oracle
    lx, lacc = reference.allocate_device_buffer(4000), reference.allocate_device_buffer(4000)
    reference.write_many([(lx, x), (lacc, y)])
    for _ in range(7):
        reference.dispatch_with_device_buffers(prog, {"x": lx}, {"acc": lacc}, cfg)
    expect = reference.read(lacc, dtype=np.float32)
    assert np.array_equal(_bits(res.reads[0]), _bits(expect))
    assert np.array_equal(_bits(remote.read(bacc, dtype=np.float32)), _bits(expect))
    into = np.full(1000, np.nan, np.float32)
    assert remote.read_into(bacc, into) is into
    assert np.array_equal(_bits(into), _bits(expect))
    assert not remote.supports("page_locked_host")
    with pytest.raises(vyre.UnsupportedFeature, match="own process"):
        remote.page_locked_array(4)
    with pytest.raises(InvalidDispatch, match="read-only"):
        frozen = np.zeros(4, np.float32)
        frozen.flags.writeable = False
        remote.read_into(bacc, frozen)
    # ranged read and write at an offset, as locally
    remote.write(bacc, np.array([7.0], np.float32), offset=8)
    assert remote.read(bacc, 8, 4, np.float32)[0] == 7.0
    # the host path
    out = remote.dispatch(saxpy(), {"x": x, "y": y}, DispatchConfig.for_elements(
        1000, 256, params={"n": 1000, "a": 2.0}))
    local = reference.dispatch(saxpy(), {"x": x, "y": y}, DispatchConfig.for_elements(
        1000, 256, params={"n": 1000, "a": 2.0}))
    assert all(np.array_equal(_bits(out[k]), _bits(local[k])) for k in local)
    caps = remote.capabilities()
    assert caps.backend == remote.id and caps.details["ray_actor"] == remote.actor_name
    assert remote.supports("resident") and not remote.supports("no_such_feature")
    for b in (bx, bacc, lx, lacc):
        b.free()


def test_errors_in_the_actor_come_back_as_vyre_errors(ref_actor: vd.RemoteBackend) -> None:
    buf = ref_actor.allocate_device_buffer(16, label="small")
    with pytest.raises(BufferStateError, match="outside"):
        ref_actor.write(buf, np.zeros(8, np.float32))
    with pytest.raises(InvalidDispatch, match="params"):
        ref_actor.dispatch_with_device_buffers(
            _accumulate(), {"x": buf}, {"acc": buf}, DispatchConfig(grid=1))
    buf.free()
    buf.free()  # twice is harmless, as locally
    with pytest.raises(BufferStateError, match="freed"):
        ref_actor.read(buf)


def test_programs_travel_once_as_wire_json_then_by_hash(cluster: None) -> None:
    with _spawn("reference") as b:
        prog = _accumulate()
        bx, bacc = b.allocate_device_buffer(256), b.allocate_device_buffer(256)
        cfg = DispatchConfig.for_elements(64, 64, params={"a": 1.0})
        for _ in range(3):
            b.dispatch_with_device_buffers(prog, [bx], [bacc], cfg)
        b.pipeline([Step(prog, [bx], [bacc], cfg)]).run()
        assert b.programs_sent == 1
        assert b.stats()["programs_loaded"] == 1
        # an equal program built again has the same content hash: not sent again
        b.dispatch_with_device_buffers(_accumulate(), [bx], [bacc], cfg)
        assert b.programs_sent == 1


# ---------------------------------------------------------------- ownership and transfer
def test_a_handle_given_to_another_actor_is_an_ownership_error_naming_both(
    ref_actor: vd.RemoteBackend, wgpu_actor: vd.RemoteBackend, reference: BaseBackend
) -> None:
    a = ref_actor.allocate_device_buffer(64, label="mine")
    b = wgpu_actor.allocate_device_buffer(64, label="theirs")
    cfg = DispatchConfig.for_elements(16, 64, params={"a": 1.0})
    with pytest.raises(BufferOwnershipError) as exc:
        wgpu_actor.dispatch_with_device_buffers(_accumulate(), {"x": a}, {"acc": b}, cfg)
    msg = str(exc.value)
    assert ref_actor.actor_name in msg and wgpu_actor.actor_name in msg and "transfer" in msg
    with pytest.raises(BufferOwnershipError, match=wgpu_actor.actor_name):
        wgpu_actor.read(a)
    # the actor checks on its own too: a reference forged past the driver's check
    with pytest.raises(BufferOwnershipError) as exc2:
        wgpu_actor._call("read", a.ref)
    assert ref_actor.actor_name in str(exc2.value) and wgpu_actor.actor_name in str(exc2.value)
    local = reference.allocate_device_buffer(64)
    with pytest.raises(BufferOwnershipError, match="local buffer"):
        ref_actor.write(local, np.zeros(16, np.float32))
    with pytest.raises(BufferOwnershipError):
        reference.read(a)
    for x in (a, b, local):
        x.free()


def test_transfer_between_actors_and_the_driver(
    ref_actor: vd.RemoteBackend, wgpu_actor: vd.RemoteBackend, reference: BaseBackend
) -> None:
    data = (np.arange(300, dtype=np.uint64) * 2654435761 % 2**32).astype(np.uint32)
    src = ref_actor.allocate_device_buffer(data.nbytes, label="src")
    ref_actor.write(src, data)
    moved = vd.transfer(src, wgpu_actor)
    assert moved.owner is wgpu_actor and moved.label == "src"
    assert np.array_equal(wgpu_actor.read(moved, dtype=np.uint32), data)
    local = vd.transfer(moved, reference)
    assert np.array_equal(reference.read(local, dtype=np.uint32), data)
    back = vd.transfer(local, ref_actor, label="back")
    assert np.array_equal(ref_actor.read(back, dtype=np.uint32), data)
    for b in (src, moved, local, back):
        b.free()


# ---------------------------------------------------------------- dead and hung actors
def test_a_killed_actor_mid_pipeline_makes_its_handles_stale_and_the_others_keep_working(
    cluster: None,
) -> None:
    victim, survivor = _spawn("reference"), _spawn("reference")
    prog = _accumulate()
    x = np.arange(256, dtype=np.float32)
    cfg = DispatchConfig.for_elements(256, 64, params={"a": 2.0})
    pipes = {}
    for b in (victim, survivor):
        bx, bacc = b.allocate_device_buffer(1024, label="x"), b.allocate_device_buffer(1024, label="acc")
        b.write_many([(bx, x), (bacc, np.zeros(256, np.float32))])
        pipes[b.actor_name] = (b.pipeline([Step(prog, [bx], [bacc], cfg)]), bacc)
        pipes[b.actor_name][0].run()
    slow_buf = victim.allocate_device_buffer(64 * 4, label="slow")
    pending = victim.dispatch_async(_slow(), [], [slow_buf],
                                    DispatchConfig(grid=1, params={"iters": 200_000}))
    time.sleep(0.5)  # the victim is inside the dispatch now
    ray.kill(victim.actor, no_restart=True)
    t0 = time.monotonic()
    with pytest.raises(BackendUnavailable, match=victim.actor_name):
        pending.wait()
    assert time.monotonic() - t0 < 30
    vpipe, vacc = pipes[victim.actor_name]
    with pytest.raises(BufferStateError) as exc:
        victim.read(vacc)
    assert victim.actor_name in str(exc.value) and "spawn" in str(exc.value)
    with pytest.raises(BufferStateError, match=victim.actor_name):
        vpipe.run()
    with pytest.raises(BackendUnavailable, match="spawn"):
        victim.allocate_device_buffer(16)
    spipe, sacc = pipes[survivor.actor_name]
    res = spipe.run(repeat=2, read=[vyre.ReadRange(sacc, 0, None, np.float32)])
    assert np.array_equal(res.reads[0], x * 2.0 * 3)
    victim.close()
    survivor.close()


def test_a_restarted_actor_refuses_the_handles_of_its_earlier_life(cluster: None) -> None:
    b = _spawn("reference", max_restarts=1)
    buf = b.allocate_device_buffer(16, label="before")
    b.write(buf, np.arange(4, dtype=np.uint32))
    ray.kill(b.actor, no_restart=False)  # Ray starts it again: a new instance, empty
    # ray.kill is asynchronous: the old actor may still answer a call or two (with the right
    # data); then a call meets the restart (unavailable) or the new instance (stale)
    deadline = time.monotonic() + 60
    while True:
        try:
            got = b.read(buf, dtype=np.uint32)
        except (BufferStateError, BackendUnavailable) as exc:
            assert b.actor_name in str(exc)
            break
        assert np.array_equal(got, np.arange(4, dtype=np.uint32)), "wrong data before restart"
        assert time.monotonic() < deadline, "the killed actor kept answering for 60 s"
        time.sleep(0.05)
    with pytest.raises(BufferStateError, match="stale"):
        b.read(buf)
    with pytest.raises(BackendUnavailable, match=b.actor_name):
        b.allocate_device_buffer(16)
    b.close()


def test_the_actor_itself_refuses_a_handle_of_another_instance(ref_actor: vd.RemoteBackend) -> None:
    buf = ref_actor.allocate_device_buffer(16, label="mine")
    forged = buf.ref._replace(instance="0123456789ab")  # as an actor restarted since would see
    with pytest.raises(BufferStateError, match="restarted") as exc:
        ref_actor._call("read", forged)
    assert ref_actor.actor_name in str(exc.value) and "0123456789ab" in str(exc.value)
    buf.free()


def test_a_hung_actor_is_a_timeout_error_not_a_hang(cluster: None) -> None:
    b = _spawn("reference", timeout_s=1.0)
    out = b.allocate_device_buffer(64 * 4)
    t0 = time.monotonic()
    with pytest.raises(BackendUnavailable, match=r"within 1\.0 s"):
        b.dispatch_with_device_buffers(_slow(), [], [out],
                                       DispatchConfig(grid=1, params={"iters": 200_000}))
    assert time.monotonic() - t0 < 10
    b.close()


# ---------------------------------------------------------------- placement
def test_gpu_actors_are_placed_by_rays_resource_accounting(cluster: None) -> None:
    # the session cluster has 2 logical GPUs; a reference actor stands in for cuda (no GPU here)
    first, second = _spawn("reference", num_gpus=1), _spawn("reference", num_gpus=1)
    try:
        assert {first.gpu_ids, second.gpu_ids} == {("0",), ("1",)}
        assert ray.available_resources().get("GPU", 0) == 0
        with pytest.raises(BackendUnavailable, match="GPU") as exc:
            _spawn("reference", num_gpus=1, placement_timeout_s=3)
        assert "2 GPU" in str(exc.value) and "0 GPU" in str(exc.value)
        freed = first.gpu_ids
        first.close()
        third = _spawn("reference", num_gpus=1)
        assert third.gpu_ids == freed
        third.close()
    finally:
        first.close()
        second.close()
    with pytest.raises(InvalidDispatch, match="Ray picks the GPU"):
        vd.spawn("cuda:1")


# ---------------------------------------------------------------- sharded work
@pytest.fixture
def group(ref_actor: vd.RemoteBackend, wgpu_actor: vd.RemoteBackend) -> vd.Sharded:
    # three shards over two worker processes of two backend kinds
    return vd.Sharded([ref_actor, wgpu_actor, ref_actor])


def test_sharded_1d_and_2d_dispatch_are_bit_identical_to_one_backend(
    group: vd.Sharded, reference: BaseBackend
) -> None:
    rng = np.random.default_rng(5)
    n = 10_001
    x, y = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    sx, sy = group.scatter(x, align=256), group.scatter(y, align=256)
    group.map(saxpy(), {"x": sx}, {"y": sy},
              lambda s: DispatchConfig.for_elements(s.count, 256, params={"n": s.count, "a": 0.75}))
    local = reference.dispatch(saxpy(), {"x": x, "y": y},
                               DispatchConfig.for_elements(n, 256, params={"n": n, "a": 0.75}))
    assert np.array_equal(_bits(sy.gather()), _bits(local["y"]))
    # 2-D: rows of A split, B on every actor, C's rows where A's are
    m, kdim, ncols = 150, 40, 70
    a = rng.standard_normal((m, kdim)).astype(np.float32)
    bm = rng.standard_normal((kdim, ncols)).astype(np.float32)
    sa, rb = group.scatter(a), group.replicate(bm)
    sc = group.empty(sa.shards, np.float32, (ncols,))
    group.map(matmul_program(), {"a": sa, "b": rb}, {"c": sc},
              lambda s: matmul_config(s.count, ncols, kdim))
    got = sc.gather()
    assert got.shape == (m, ncols)
    assert np.array_equal(_bits(got), _bits(matmul_host(reference, a, bm)))
    with pytest.raises(InvalidDispatch, match="split differently"):
        group.map(saxpy(), {"x": sx}, {"y": group.scatter(y)}, lambda s: DispatchConfig(grid=1))
    for arr in (sx, sy, sa, sc, rb):
        arr.free()


@pytest.mark.parametrize("n", [0, 1000, 3 * LIBRARY_BLOCK + 123, 9 * LIBRARY_BLOCK])
@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.uint32])
def test_sharded_reduce_and_scan_equal_the_library_on_one_backend(
    group: vd.Sharded, reference: BaseBackend, n: int, dtype: Any
) -> None:
    rng = np.random.default_rng(n)
    data = (rng.standard_normal(n) * 1000).astype(dtype) if dtype == np.float32 else \
        rng.integers(-2**31 if dtype == np.int32 else 0, 2**31, n).astype(dtype)
    arr = group.scatter(data, align=LIBRARY_BLOCK)
    for op in ("sum", "min", "max"):
        want = reduce_host(reference, data, op)[0] if n else None
        got = group.reduce(arr, op)
        if want is not None:
            assert _bits(got) == _bits(want), op
    for inclusive in (True, False):
        s = group.scan(arr, inclusive)
        assert np.array_equal(_bits(s.gather()), _bits(scan_host(reference, data, inclusive)))
        s.free()
    if n > LIBRARY_BLOCK:  # a split off the library's blocks is refused, not combined anyhow
        odd = group.scatter(data, align=1000)
        with pytest.raises(InvalidDispatch, match="LIBRARY_BLOCK"):
            group.reduce(odd, "sum")
        odd.free()
    arr.free()


@pytest.mark.parametrize("dtype", [np.float32, np.uint32])
def test_sharded_sort_equals_the_library_on_one_backend(
    group: vd.Sharded, reference: BaseBackend, dtype: Any
) -> None:
    from vyre.programs.radix_sort import radix_sort_host

    rng = np.random.default_rng(5)
    keys = (rng.standard_normal(5000).astype(np.float32) if dtype == np.float32
            else rng.integers(0, 2**32, 5000, dtype=np.uint32))
    keys[:300] = keys[7]  # a run of one key: a bucket larger than the rest
    arr = group.scatter(keys)
    out = group.sort(arr)
    assert out.gather().tobytes() == radix_sort_host(reference, keys.copy())[0].tobytes()
    for a in (out, arr):
        a.free()
    group.free_scratch()


def test_empty_sum_is_the_identity(group: vd.Sharded) -> None:
    arr = group.scatter(np.zeros(0, np.float32), align=LIBRARY_BLOCK)
    assert group.reduce(arr, "sum") == 0 and group.reduce(arr, "min") == np.inf


def test_the_readme_example_runs(cluster: None, monkeypatch: pytest.MonkeyPatch) -> None:
    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text()
    section = readme.split("## Scale out with Ray", 1)[1]
    code = re.search(r"```py\n(.*?)```", section, re.S)
    assert code, "the README's Ray section has no example"
    monkeypatch.setattr(ray, "init", lambda *a, **k: None)  # the session's cluster is up
    exec(compile(code.group(1), "README.md (Scale out with Ray)", "exec"), {})


def test_missing_ray_says_how_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    real = builtins.__import__

    def no_ray(name: str, *a: Any, **k: Any) -> Any:
        if name == "ray":
            raise ImportError("No module named 'ray'")
        return real(name, *a, **k)

    monkeypatch.setattr(builtins, "__import__", no_ray)
    from vyre.distributed._ray import require_ray

    with pytest.raises(BackendUnavailable, match=r"vyre\[distributed\]"):
        require_ray()


def test_the_overhead_bench_times_a_bare_ray_call_carrying_the_dispatch_message(
        cluster: None) -> None:
    """vyre.tools.bench.distributed's anchor: a bare actor call with the remote dispatch's
    own message, timed the same way; every figure is a positive time and the ratios follow
    from them; release_cached_memory reaches the actor's backend."""
    from vyre.tools.bench.distributed import overhead

    got = overhead("reference", reps=3)
    for what in ("dispatch", "bound", "async_batched"):
        for side in ("local", "remote", "bare_ray"):
            assert got[f"{side}_{what}_us"] > 0, (side, what)
        assert got[f"ratio_{what}_vs_bare"] == pytest.approx(
            got[f"remote_{what}_us"] / got[f"bare_ray_{what}_us"])
    remote = _spawn("reference")
    try:
        assert remote.release_cached_memory() == 0  # the reference keeps no memory
    finally:
        remote.close()
# ---------------------------------------------------------------- vyre.Backend's whole surface
def test_stream_on_an_actor_equals_the_local_stream(
    ref_actor: vd.RemoteBackend, reference: BaseBackend
) -> None:
    prog = saxpy(ST.F32)
    rng = np.random.default_rng(7)
    chunks = [{"x": rng.random(n, dtype=np.float32), "y": rng.random(n, dtype=np.float32)}
              for n in (1000, 10, 513)]
    before = len(ref_actor.live_buffers())

    def cfg(i: int, data: Any) -> DispatchConfig:
        n = len(data["x"])
        return DispatchConfig(grid=(-(-n // 64), 1, 1), params={"a": 2.5, "n": n})

    got = list(ref_actor.stream(prog, chunks, cfg))
    want = list(reference.stream(prog, chunks, cfg))
    assert len(got) == 3
    for g, w in zip(got, want):
        assert list(g) == list(w) and all(np.array_equal(_bits(g[k]), _bits(w[k])) for k in g)
    assert len(ref_actor.live_buffers()) == before  # every chunk's buffers were freed


def test_compile_cache_controls_act_on_the_actors_backend(cluster: None) -> None:
    b = _spawn("reference")
    try:
        assert b.compile_cache_limit >= 1 and b.compile_cache_size() == 0
        b.set_compile_cache_limit(1)
        assert b.compile_cache_limit == 1
        b.compile(saxpy(ST.F32))
        b.compile(_accumulate())
        stats = b.compile_stats
        assert (stats.misses, stats.evictions, b.compile_cache_size()) == (2, 1, 1)
        with pytest.raises(InvalidDispatch, match="int >= 1"):
            b.set_compile_cache_limit(0)
    finally:
        b.close()


def test_from_dlpack_on_an_actor_says_where_the_memory_is(ref_actor: vd.RemoteBackend) -> None:
    with pytest.raises(UnsupportedFeature, match="lives in your process") as exc:
        ref_actor.from_dlpack(np.zeros(4, np.float32))
    assert "vyre.distributed.transfer" in str(exc.value)


def test_a_kernel_launches_on_an_actors_resident_buffers(ref_actor: vd.RemoteBackend) -> None:
    """`@vyre.kernel`'s launch is typed against vyre.Backend: RemoteBuffers are resident
    buffers there as local ones are (before, they were taken for host data)."""
    @vyre.kernel
    def double(x: vyre.InOut[vyre.f32]) -> None:
        i = vyre.global_linear_id()
        with vyre.if_(i < x.length()):
            x[i] = x[i] * 2.0

    xs = np.arange(100, dtype=np.float32)
    xb = ref_actor.allocate_device_buffer(xs.nbytes)
    try:
        ref_actor.write(xb, xs)
        double.launch(ref_actor, 100, xb)
        assert np.array_equal(ref_actor.read(xb, dtype=np.float32), xs * 2)
    finally:
        xb.free()
