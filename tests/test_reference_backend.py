"""The reference backend as a vyre backend: provider, capabilities, resident buffers,
pipelines, indirect dispatch, ownership errors, chunking, a 1M-element timing, and its own
choice among the orders docs/IR.md allows for colliding atomics (lane order). Its semantics
are checked against docs/IR.md's values by the conformance table (tests/test_conformance.py)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest

import vyre
from vyre import (
    DispatchConfig,
    IndirectGrid,
    ProgramBuilder,
    ReadRange,
    Step,
    f32,
    i32,
    u32,
)
from vyre.backends import reference as ref_pkg
from vyre.backends.reference import PROVIDER, ReferenceBackend
from vyre.backends.reference import plan as ref_plan
from vyre.errors import (
    BackendUnavailable,
    BufferOwnershipError,
    BufferStateError,
    InvalidDispatch,
)
from vyre.features import IR_FEATURES, LIMIT_KEYS
from vyre.ir.nodes import Program
from vyre.ir.types import ScalarType
from vyre.registry import Availability
from vyre.tools.conformance import CASES, inputs_of
from vyre.tools.conformance_exact import RMW_OPS
from vyre.tools.testing import HostShimBuffer


@pytest.fixture()
def be() -> Iterator[ReferenceBackend]:
    b = PROVIDER.create()
    yield b
    b.close()


def add_one_program() -> Program:
    """y[i] = x[i] + 1 over the first len(y) elements."""
    k = ProgramBuilder("add_one", workgroup_size=64)
    x = k.buffer("x", i32)
    y = k.buffer("y", i32, "write")
    i = k.global_linear_id()
    with k.if_(i < y.length()):
        y[i] = x[i] + 1
    return k.build()


def inc_in_place_program() -> Program:
    k = ProgramBuilder("inc", workgroup_size=64)
    y = k.buffer("y", i32, "read_write")
    d = k.param("d", i32)
    i = k.global_linear_id()
    with k.if_(i < y.length()):
        y[i] = y[i] + d
    return k.build()


# ------------------------------------------------------------------ provider, capabilities


def test_provider_and_registry() -> None:
    assert PROVIDER.name == "reference"
    av = PROVIDER.probe()
    assert isinstance(av, Availability) and av.available
    b = vyre.get_backend("reference")
    try:
        assert isinstance(b, ReferenceBackend)
        assert b.id == "reference" and b.kind == "reference"
    finally:
        b.close()
    assert ref_pkg.PROVIDER is PROVIDER
    assert any(a.name == "reference" and a.available for a in vyre.available_backends())


def test_capabilities(be: ReferenceBackend) -> None:
    caps = be.capabilities()
    assert caps.kind == "reference" and caps.backend == be.id
    assert caps.features >= IR_FEATURES
    for f in ("resident", "async", "pipeline", "indirect_dispatch"):
        assert be.supports(f)
    assert not be.supports("no_such_feature")
    for key in LIMIT_KEYS:
        assert caps.limits[key] > 0
    assert caps.limits["max_workgroup_invocations"] == 1024
    assert caps.limits["max_workgroup_size_z"] == 64


def test_source_listing(be: ReferenceBackend) -> None:
    src = be.source(add_one_program())
    assert "buffer x: i32 read" in src and "y[" in src and "if " in src


def test_compile_cache(be: ReferenceBackend) -> None:
    p = add_one_program()
    first = be.compile(p)
    assert be.compile(add_one_program()) is first
    assert be.compile_stats.misses == 1 and be.compile_stats.hits == 1


# ------------------------------------------------------------------ host path


def test_host_dispatch_with_write_only_count(be: ReferenceBackend) -> None:
    x = np.arange(100, dtype=np.int32)
    out = be.dispatch(add_one_program(), {"x": x, "y": 100}, DispatchConfig.for_elements(100, 64))
    assert out["y"].dtype == np.int32 and out["y"].tolist() == list(range(1, 101))
    out = be.dispatch(add_one_program(), [x, 10], DispatchConfig(grid=1))
    assert out["y"].tolist() == list(range(1, 11))
    assert be.live_buffers() == []


def test_host_dispatch_rejects_wrong_dtype(be: ReferenceBackend) -> None:
    with pytest.raises(InvalidDispatch, match="int32"):
        be.dispatch(add_one_program(), {"x": np.zeros(4, np.float32), "y": 4}, DispatchConfig())


# ------------------------------------------------------------------ resident buffers


def test_allocate_write_read_ranges(be: ReferenceBackend) -> None:
    buf = be.allocate_device_buffer(64, label="scratch")
    assert buf.byte_len == 64 and buf.backend_id == be.id
    assert be.read(buf).tolist() == [0] * 64  # zero-initialised
    be.write(buf, np.arange(4, dtype=np.uint32), offset=16)
    assert be.read(buf, 16, 16, dtype=np.uint32).tolist() == [0, 1, 2, 3]
    be.write_many([(buf, b"\x01\x02", 0), (buf, bytearray(b"\xff"), 63)])
    a, b = be.read_many([ReadRange(buf, 0, 2), (buf, 63, 1)])
    assert a.tolist() == [1, 2] and b.tolist() == [255]
    with pytest.raises(BufferStateError):
        be.write(buf, b"\x00" * 8, offset=60)
    be.free(buf)
    be.free(buf)  # twice is harmless
    with pytest.raises(BufferStateError, match="scratch"):
        be.read(buf)


def test_dispatch_with_device_buffers_and_dependent_chain(be: ReferenceBackend) -> None:
    n = 1000
    x = be.allocate_device_buffer(n * 4, label="x")
    y = be.allocate_device_buffer(n * 4, label="y")
    be.write(x, np.arange(n, dtype=np.int32))
    cfg = DispatchConfig.for_elements(n, 64)
    t = be.dispatch_with_device_buffers(add_one_program(), [x], [y], cfg)
    assert t.wall_ns >= 0
    # a chain: y += 3, five times, each dispatch reading what the last one wrote
    inc = inc_in_place_program()
    cfg3 = DispatchConfig.for_elements(n, 64, params={"d": 3})
    for _ in range(5):
        be.dispatch_with_device_buffers(inc, {}, {"y": y}, cfg3)
    assert be.read(y, dtype=np.int32).tolist() == [v + 1 + 15 for v in range(n)]
    pending = be.dispatch_async(inc, [], [y], cfg3)
    assert pending.is_ready()
    timing = pending.wait()
    assert timing.wall_ns >= 0
    prof = be.dispatch_with_device_buffers(
        inc, [], [y], DispatchConfig.for_elements(n, 64, params={"d": 0}, profile=True)
    )
    assert prof.device_ns is not None
    assert be.read(y, 0, 8, dtype=np.int32).tolist() == [19, 20]


def test_bound_dispatch_reuse(be: ReferenceBackend) -> None:
    y = be.allocate_device_buffer(16, label="y")
    bound = be.bind(inc_in_place_program(), [], [y], DispatchConfig(params={"d": 2}))
    for _ in range(4):
        be.dispatch_with_device_buffers(bound)
    assert be.read(y, dtype=np.int32).tolist() == [8, 8, 8, 8]


def test_pipeline_run_with_repeat_and_reads(be: ReferenceBackend) -> None:
    n = 256
    x = be.allocate_device_buffer(n * 4, label="x")
    y = be.allocate_device_buffer(n * 4, label="y")
    be.write(x, np.arange(n, dtype=np.int32))
    cfg = DispatchConfig.for_elements(n, 64)
    pipe = be.pipeline([
        Step(inc_in_place_program(), [], [x], DispatchConfig.for_elements(n, 64, params={"d": 1})),
        Step(add_one_program(), [x], [y], cfg),
    ])
    res = pipe.run(repeat=3, read=[ReadRange(y, 0, 16, np.int32), (x, 4 * (n - 1), 4, np.int32)])
    assert res.reads[0].tolist() == [4, 5, 6, 7]  # x + 3, then + 1
    assert res.reads[1].tolist() == [n - 1 + 3]
    assert res.timing.wall_ns > 0
    res = pipe.run()
    assert be.read(y, 0, 4, dtype=np.int32).tolist() == [5]
    with pytest.raises(InvalidDispatch):
        pipe.run(repeat=0)


def test_indirect_dispatch(be: ReferenceBackend) -> None:
    n = 640
    x = be.allocate_device_buffer(n * 4)
    y = be.allocate_device_buffer(n * 4)
    be.write(x, np.arange(n, dtype=np.int32))
    args = be.allocate_device_buffer(16, label="grid")
    be.write(args, np.array([0, 3, 1, 1], dtype=np.uint32))  # grid (3, 1, 1) at offset 4
    cfg = DispatchConfig(grid=IndirectGrid(buffer=args, offset=4))
    be.dispatch_with_device_buffers(add_one_program(), [x], [y], cfg)
    got = be.read(y, dtype=np.int32)
    assert got[:192].tolist() == list(range(1, 193)) and not got[192:].any()
    # a zero count dispatches nothing
    be.write(args, np.array([0, 0, 1, 1], dtype=np.uint32))
    be.write(y, np.zeros(n, np.int32))
    be.dispatch_with_device_buffers(add_one_program(), [x], [y], cfg)
    assert not be.read(y).any()


# ------------------------------------------------------------------ ownership


def test_buffer_of_another_instance_is_rejected(be: ReferenceBackend) -> None:
    other = PROVIDER.create()
    try:
        theirs = other.allocate_device_buffer(16, label="theirs")
        mine = be.allocate_device_buffer(16, label="mine")
        with pytest.raises(BufferOwnershipError, match="theirs"):
            be.dispatch_with_device_buffers(add_one_program(), [theirs], [mine], DispatchConfig())
        with pytest.raises(BufferOwnershipError, match="theirs"):
            be.read(theirs)
        with pytest.raises(BufferOwnershipError, match="theirs"):
            be.write(theirs, b"\x00")
        # explicit transfer is the way across
        moved = vyre.transfer(theirs, be)
        assert moved.owner is be
    finally:
        other.close()


def test_host_shim_buffer_is_rejected(be: ReferenceBackend) -> None:
    shim = HostShimBuffer(16, backend_id=be.id, label="shim")
    y = be.allocate_device_buffer(16)
    with pytest.raises(BufferOwnershipError, match="shim") as exc:
        be.dispatch_with_device_buffers(add_one_program(), [shim], [y], DispatchConfig())
    assert "HostShimBuffer" in str(exc.value)
    with pytest.raises(BufferOwnershipError):
        be.pipeline([Step(add_one_program(), [shim], [y], DispatchConfig())])


def test_closed_backend(be: ReferenceBackend) -> None:
    buf = be.allocate_device_buffer(8)
    be.close()
    assert buf.freed
    with pytest.raises(BackendUnavailable):
        be.allocate_device_buffer(8)


# ------------------------------------------------------------------ chunking, performance


def test_small_chunks_give_the_same_answer(monkeypatch: pytest.MonkeyPatch) -> None:
    """Workgroups split across chunks (here 2 workgroups per chunk) run independently."""
    wg = 32
    k = ProgramBuilder("rev", workgroup_size=wg)
    src = k.buffer("src", u32)
    dst = k.buffer("dst", u32, "write")
    total = k.buffer("total", u32, "read_write")
    sh = k.shared("sh", u32, wg)
    li = k.local_index()
    sh[li] = src[k.global_id()]
    k.barrier()
    dst[k.global_id()] = sh[wg - 1 - li]
    total.atomic_add(0, sh[li])
    prog = k.build()
    data = np.arange(wg * 9, dtype=np.uint32)
    inputs = {"src": data, "dst": data.size, "total": np.zeros(1, np.uint32)}
    with PROVIDER.create() as big:
        expected = big.dispatch(prog, inputs, DispatchConfig(grid=9))
    monkeypatch.setattr(ref_plan, "CHUNK_LANES", 2 * wg)
    with PROVIDER.create() as small:
        got = small.dispatch(prog, inputs, DispatchConfig(grid=9))
    assert got["dst"].tolist() == expected["dst"].tolist()
    assert got["dst"].tolist() == data.reshape(9, wg)[:, ::-1].reshape(-1).tolist()
    assert got["total"].tolist() == [int(data.sum())]


def test_million_element_elementwise_timing(be: ReferenceBackend) -> None:
    k = ProgramBuilder("saxpy", workgroup_size=256)
    x, y = k.buffer("x", f32), k.buffer("y", f32, "read_write")
    a = k.param("a", f32)
    i = k.global_linear_id()
    with k.if_(i < y.length()):
        y[i] = a * x[i] + y[i]
    prog = k.build()
    n = 1 << 20
    xs = np.arange(n, dtype=np.float32)
    ys = np.ones(n, dtype=np.float32)
    xb = be.allocate_device_buffer(xs.nbytes)
    yb = be.allocate_device_buffer(ys.nbytes)
    be.write_many([(xb, xs, 0), (yb, ys, 0)])
    cfg = DispatchConfig.for_elements(n, 256, params={"a": 2.0})
    be.dispatch_with_device_buffers(prog, [xb], [yb], cfg)  # compile + warm up
    be.write(yb, ys)
    t0 = time.perf_counter()
    be.dispatch_with_device_buffers(prog, [xb], [yb], cfg)
    dt = time.perf_counter() - t0
    print(f"\nreference: 1M-element saxpy dispatch took {dt * 1e3:.1f} ms")
    out = be.read(yb, dtype=np.float32)
    assert np.array_equal(out, np.float32(2.0) * xs + ys)


def test_loop_iteration_guard(be: ReferenceBackend) -> None:
    from vyre.errors import DispatchError

    k = ProgramBuilder("forever", workgroup_size=1)
    out = k.buffer("out", u32, "write", count=1)
    n = k.let(0, ty=u32)
    with k.while_(n < 10):
        out[0] = n
    prog = k.build()
    with pytest.raises(DispatchError, match="100"):
        be.dispatch(prog, {}, DispatchConfig(options={"max_loop_iterations": 100}))


def test_stream_and_conformance_helper(be: ReferenceBackend) -> None:
    from vyre.tools.testing import check_against_reference

    prog = add_one_program()
    chunks = [{"x": np.arange(n, dtype=np.int32), "y": n} for n in (10, 64, 130)]
    outs = list(be.stream(prog, chunks, lambda i, d: DispatchConfig.for_elements(d["y"].size, 64)))
    assert [o["y"].tolist() for o in outs] == [list(range(1, n + 1)) for n in (10, 64, 130)]
    with PROVIDER.create() as other:
        check_against_reference(prog, {"x": np.arange(70, dtype=np.int32), "y": 70},
                                DispatchConfig.for_elements(70, 64), [other], be)


def test_aliased_buffers_share_memory(be: ReferenceBackend) -> None:
    k = ProgramBuilder("alias", workgroup_size=4)
    a = k.buffer("a", i32, "read_write")
    b = k.buffer("b", i32, "read_write")
    i = k.global_id()
    a[i] = a[i] + 1
    b[i] = b[i] * 10  # same memory: sees a's update (program order within the invocation)
    prog = k.build()
    buf = be.allocate_device_buffer(16)
    be.write(buf, np.arange(4, dtype=np.int32))
    be.dispatch_with_device_buffers(prog, [], [buf, buf], DispatchConfig())
    assert be.read(buf, dtype=np.int32).tolist() == [10, 20, 30, 40]


def test_chunks_bound_workgroup_memory(be: ReferenceBackend) -> None:
    """One invocation per workgroup and 64 KiB of workgroup memory each: chunks stay small."""
    k = ProgramBuilder("bigshared", workgroup_size=1)
    out = k.buffer("out", u32, "write")
    sh = k.shared("sh", u32, 16384)
    w = k.workgroup_id()
    sh[16383] = w
    k.barrier()
    out[w] = sh[16383] + sh[0] * 0
    prog = k.build()
    assert ref_plan.Plan.prepare(prog).workgroups_per_chunk <= ref_plan.CHUNK_WORKGROUP_BYTES // 65536
    n = 20000
    got = be.dispatch(prog, {"out": n}, DispatchConfig(grid=n))["out"]
    assert got.tolist() == list(range(n))


# ------------------------------------------------------------------ atomics: lane order


def _in_lane_order(init: list[Any], keys: list[int], vals: list[Any],
                   step: Callable[[Any, Any], Any]) -> tuple[list[Any], list[Any]]:
    """Final memory and old values of the atomics applied one lane after another."""
    mem, olds = list(init), []
    for key, v in zip(keys, vals):
        if key < len(mem):
            olds.append(mem[key])
            mem[key] = step(mem[key], v)
        else:
            olds.append(0)  # out of range: reads 0, changes nothing
    return mem, olds


@pytest.mark.parametrize("ty", ["i32", "u32", "i64", "u64"])
def test_colliding_atomics_apply_in_lane_order(be: ReferenceBackend, ty: str) -> None:
    """The reference's own choice among docs/IR.md's valid orders (the conformance case
    ir_atomic_rmw_* accepts any order): colliding atomics apply in lane order."""
    case = CASES[f"ir_atomic_rmw_{ty}"]
    ins = inputs_of(case)
    res = be.dispatch(case.program, ins, case.config)
    keys, vals = ins["keys"].tolist(), ins["vals"].tolist()
    for op, f in RMW_OPS.items():
        mem, olds = _in_lane_order(ins[f"h_{op}"].tolist(), keys, vals,
                                   lambda a, b, f=f: f(a, b, ScalarType(ty)))
        assert res[f"h_{op}"].tolist() == mem, op
        assert res[f"old_{op}"].tolist() == olds, op


def test_colliding_compare_exchanges_apply_in_lane_order(be: ReferenceBackend) -> None:
    """Random colliding compare-exchanges, and a chain where lane j expects j and stores
    j + 1: in lane order every lane of the chain succeeds."""
    case = CASES["ir_compare_exchange"]
    ins = inputs_of(case)
    res = be.dispatch(case.program, ins, case.config)

    def cas(old: int, cv: tuple[int, int]) -> int:
        return cv[1] if old == cv[0] else old

    mem, olds = _in_lane_order(ins["mem2"].tolist(), ins["idx"].tolist(),
                               list(zip(ins["cmp"].tolist(), ins["val"].tolist())), cas)
    assert res["mem2"].tolist() == mem
    assert res["olds2"].tolist() == olds
    n = ins["idx"].size
    chain = {**ins, "idx": np.zeros(n, np.uint32), "cmp": np.arange(n, dtype=np.int32),
             "val": np.arange(1, n + 1, dtype=np.int32), "mem2": np.zeros(1, np.int32)}
    res = be.dispatch(case.program, chain, case.config)
    assert res["mem2"].tolist() == [n]
    assert res["olds2"].tolist() == list(range(n))
