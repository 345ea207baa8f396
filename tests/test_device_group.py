"""DeviceGroup: data-parallel work over backends of this process (any kinds mixed), with the
single-backend bits for 1, 2 and 3 members: scatter / map / gather, replicate, broadcast,
all_gather, reduce and scan in the library's order, and a 2-D stencil of 100 steps whose
ghost rows are exchanged between the shards every step. On GPUs the same runs over cuda:0..N
(tests marked gpu)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

import vyre
from vyre import DispatchConfig, InvalidDispatch
from vyre.group import LIBRARY_BLOCK, DeviceGroup
from vyre.programs.elementwise import saxpy
from vyre.programs.reduce import reduce_host
from vyre.programs.scan import scan_host
from vyre.tools.bench.multi_gpu_kernels import heat_numpy, run_heat

BACKENDS = [a.name for a in vyre.available_backends() if a.available and a.name != "cuda"]


@pytest.fixture(scope="module")
def members() -> Iterator[list[Any]]:
    made = [vyre.get_backend(n) for n in BACKENDS]
    made.append(vyre.get_backend("reference"))  # a second instance of one kind too
    yield made
    for b in made:
        b.close()


def _groups(members: list[Any]) -> list[DeviceGroup]:
    return [DeviceGroup(members[:k]) for k in range(1, len(members) + 1)]


def test_a_stencil_of_100_steps_with_halo_exchange_has_the_same_bits_on_any_split(
        members: list[Any]) -> None:
    rng = np.random.default_rng(1)
    grid = rng.standard_normal((61, 37)).astype(np.float32)
    want = heat_numpy(grid, 100)
    for group in _groups(members):
        got = run_heat(group, grid, 100)
        np.testing.assert_array_equal(got, want, err_msg=f"{len(group.backends)} members")


@pytest.mark.parametrize("n", [0, 1, 4095, 4096, 3 * LIBRARY_BLOCK + 123])
def test_reduce_and_scan_match_one_backend(members: list[Any], n: int) -> None:
    data = np.random.default_rng(n).standard_normal(n).astype(np.float32)
    one = members[0]
    want = {op: reduce_host(one, data, op)[0] if n else None for op in ("sum", "min", "max")}
    want_scan = scan_host(one, data) if n else np.zeros(0, np.float32)
    for group in _groups(members):
        arr = group.scatter(data, align=LIBRARY_BLOCK)
        for op in ("sum", "min", "max"):
            got = group.reduce(arr, op)
            if n:
                assert got.tobytes() == np.float32(want[op]).tobytes(), (op, len(group.backends))
        prefix = group.scan(arr)
        np.testing.assert_array_equal(prefix.gather(), want_scan)
        # again into the first result's buffers (out=): the same bits, no new buffers
        assert group.scan(arr, out=prefix) is prefix
        np.testing.assert_array_equal(prefix.gather(), want_scan)
        prefix.free()
        arr.free()
        group.free_scratch()
    assert all(not b.live_buffers() for b in members)


def test_scatter_map_gather_replicate_broadcast_all_gather(members: list[Any]) -> None:
    n = 1000
    x = np.linspace(-2, 2, n, dtype=np.float32)
    y = np.arange(n, dtype=np.float32)
    with vyre.get_backend("reference") as ref:
        cfg1 = DispatchConfig.for_elements(n, 256, params={"n": n, "a": 1.5})
        want = ref.dispatch(saxpy(), {"x": x, "y": y}, cfg1)["y"]
    for group in _groups(members):
        sx, sy = group.scatter(x, align=256), group.scatter(y, align=256)
        group.map(saxpy(), {"x": sx}, {"y": sy}, lambda s: DispatchConfig.for_elements(
            s.count, 256, params={"n": s.count, "a": 1.5}))
        np.testing.assert_array_equal(sy.gather(), want)
        everywhere = group.all_gather(sy)
        for i, b in enumerate(group.backends):
            np.testing.assert_array_equal(b.read(everywhere.buffers[i], dtype=np.float32), want)
        everywhere.free()
        rep = group.replicate(x)
        assert all(np.array_equal(b.read(rep.buffers[i], dtype=np.float32), x)
                   for i, b in enumerate(group.backends))
        src = group.backends[-1].allocate_device_buffer(x.nbytes)
        group.backends[-1].write(src, x)
        bc = group.broadcast(src)
        assert bc.buffers[len(group.backends) - 1] is src
        assert all(np.array_equal(b.read(bc.buffers[i], dtype=np.float32), x)
                   for i, b in enumerate(group.backends))
        bc.free()
        assert not src.freed  # the caller's buffer stays theirs
        group.backends[-1].free(src)
        for arr in (sx, sy):
            arr.free()
        rep.free()
    assert all(not b.live_buffers() for b in members)


def test_group_errors_name_the_fix(members: list[Any]) -> None:
    with pytest.raises(InvalidDispatch, match="at least one backend"):
        DeviceGroup([])
    with pytest.raises(InvalidDispatch, match=r"vyre\.get_backend"):
        DeviceGroup([members[0], "cuda:1"])
    with pytest.raises(InvalidDispatch, match="list of backends"):
        DeviceGroup(members[0])
    group = DeviceGroup(members[:2])
    arr = group.scatter(np.zeros(5000, np.float32), align=100)
    with pytest.raises(InvalidDispatch, match="align=LIBRARY_BLOCK"):
        group.reduce(arr, "sum")
    with pytest.raises(InvalidDispatch, match="halo=h"):
        group.exchange_halos(arr)
    with pytest.raises(InvalidDispatch, match="halo must be an int"):
        group.scatter(np.zeros(4, np.float32), halo=-1)
    thin = group.scatter(np.zeros((3, 4), np.float32), halo=2)
    with pytest.raises(InvalidDispatch, match="fewer than 2 rows"):
        group.exchange_halos(thin)
    aligned = group.scatter(np.zeros(5000, np.float32), align=LIBRARY_BLOCK)
    ints = group.empty(aligned.shards, np.int32)
    for bad in (arr, ints, "out"):
        with pytest.raises(InvalidDispatch, match="out must be a live ShardedArray"):
            group.scan(aligned, out=bad)  # type: ignore[arg-type]
    done = group.scan(aligned)
    done.free()
    with pytest.raises(InvalidDispatch, match="out must be a live ShardedArray"):
        group.scan(aligned, out=done)
    for a in (aligned, ints):
        a.free()
    group.free_scratch()
    other = vyre.get_backend("reference")
    stray = other.allocate_device_buffer(16)
    with pytest.raises(InvalidDispatch, match="not a buffer of a member"):
        group.broadcast(stray)
    other.close()
    for a in (arr, thin):
        a.free()


# ------------------------------------------------------------------ on GPUs


def _cuda_count() -> int:
    a = {x.name: x for x in vyre.available_backends()}.get("cuda")
    if a is None or not a.available:
        pytest.skip(f"no CUDA here: {a.reason if a else 'backend not registered'}")
    from vyre.backends.cuda import driver as D

    return D.device_count()


@pytest.mark.gpu
def test_gpu_groups_of_1_to_n_gpus_give_one_gpus_bits() -> None:
    count = _cuda_count()
    gpus = [vyre.get_backend(f"cuda:{i}") for i in range(count)]
    try:
        rng = np.random.default_rng(7)
        grid = rng.standard_normal((517, 300)).astype(np.float32)
        want = heat_numpy(grid, 100)
        data = rng.standard_normal(1 << 22).astype(np.float32)
        one = DeviceGroup(gpus[:1])
        arr = one.scatter(data, align=LIBRARY_BLOCK)
        want_sum = one.reduce(arr, "sum")
        want_scan = one.scan(arr).gather()
        want_sorted = one.sort(arr).gather()
        want_hist = one.histogram(arr, 256, -4.0, 32.0)
        a = rng.standard_normal((1000, 512)).astype(np.float32)
        bm = rng.standard_normal((512, 384)).astype(np.float32)
        want_c = one.matmul(one.scatter(a), one.replicate(bm), bm.shape[1]).gather()
        for k in sorted({1, 2, count} & set(range(1, count + 1))):
            group = DeviceGroup(gpus[:k])
            np.testing.assert_array_equal(run_heat(group, grid, 100), want)
            sharded = group.scatter(data, align=LIBRARY_BLOCK)
            assert group.reduce(sharded, "sum").tobytes() == want_sum.tobytes()
            np.testing.assert_array_equal(group.scan(sharded).gather(), want_scan)
            assert group.sort(sharded).gather().tobytes() == want_sorted.tobytes()
            np.testing.assert_array_equal(group.histogram(sharded, 256, -4.0, 32.0), want_hist)
            c = group.matmul(group.scatter(a), group.replicate(bm), bm.shape[1])
            assert c.gather().tobytes() == want_c.tobytes()
    finally:
        for g in gpus:
            g.close()


@pytest.mark.parametrize("dtype", [np.uint32, np.int32, np.float32])
def test_sort_histogram_matmul_match_one_backend(members: list[Any], dtype: Any) -> None:
    rng = np.random.default_rng(3)
    n = 20_000
    if dtype is np.float32:
        keys = rng.standard_normal(n).astype(np.float32)
        keys[:50] = np.float32(0.5)  # repeats
        keys[50:60] = -np.float32(0.0)
        keys[60:70] = np.float32(0.0)
    else:
        keys = rng.integers(np.iinfo(dtype).min, np.iinfo(dtype).max, n, dtype=dtype)
        keys[:500] = keys[0]  # many repeats of one key
    from vyre.programs.histogram import histogram_host
    from vyre.programs.radix_sort import radix_sort_host

    one = members[0]
    want_sorted = radix_sort_host(one, keys.copy())[0]
    for group in _groups(members):
        with group:  # the sort's send buffers are scratch: released at the block's end
            arr = group.scatter(keys)
            for _ in range(2):  # the second time into the kept scratch buffers
                out = group.sort(arr)
                assert out.gather().tobytes() == want_sorted.tobytes(), len(group.backends)
                out.free()
            arr.free()
    if dtype is np.float32:
        values = np.abs(keys) * np.float32(10)
        want_hist = histogram_host(one, values, 64, lo=0.0, scale=2.0)
        a = rng.standard_normal((45, 33)).astype(np.float32)
        bm = rng.standard_normal((33, 17)).astype(np.float32)
        with vyre.get_backend("reference") as ref:
            from vyre.programs.matmul import matmul_host

            want_c = matmul_host(ref, a, bm)
        for group in _groups(members):
            with group:
                arr = group.scatter(values)
                np.testing.assert_array_equal(group.histogram(arr, 64, lo=0.0, scale=2.0),
                                              want_hist)
                arr.free()
            sa, rb = group.scatter(a), group.replicate(bm)
            c = group.matmul(sa, rb, 17)
            assert c.gather().tobytes() == want_c.tobytes()
            for x in (sa, rb, c):
                x.free()
    assert all(not b.live_buffers() for b in members)


def test_the_multi_gpu_benchmark_checks_its_figures_on_any_members(members: list[Any]) -> None:
    """The benchmark's cases run and check themselves on the backends here (on GPUs:
    `python -m vyre.tools.bench.multi_gpu`)."""
    from vyre.tools.bench import multi_gpu

    rows: list[dict[str, Any]] = []
    multi_gpu._all_gather(members[:2], 1 << 10, 1, rows)
    multi_gpu._scaling(members[:2], 1 << 13, 32, 1, rows)
    assert [r["metric"] for r in rows] == ["all_gather"] + ["sum", "scan", "sort",
                                                            "stencil100"] * 2
    assert all(r["checked"] for r in rows), multi_gpu.text({"gpus": 2, "rows": rows})
    assert "skipped" in multi_gpu.text({"skipped": "no GPUs"})
