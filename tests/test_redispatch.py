"""Re-dispatching one Program over resident buffers (validated once, then remembered): the
results follow the buffers, parameters and sizes of each call, a freed buffer is still
refused, and a freed buffer is not kept alive by vyre. On every available backend."""

from __future__ import annotations

import gc
import weakref
from typing import Any

import numpy as np
import pytest

from vyre import DispatchConfig, ProgramBuilder, ScalarType
from vyre.backend import BaseBackend
from vyre.errors import BufferStateError, InvalidDispatch
from vyre.ir.nodes import Program

ST = ScalarType


def _axpy() -> Program:
    k = ProgramBuilder("redispatch_axpy", workgroup_size=64)
    x = k.buffer("x", ST.U32)
    y = k.buffer("y", ST.U32, "read_write")
    a = k.param("a", ST.U32)
    i = k.global_linear_id()
    with k.if_(i < y.length()):
        y[i] = a * x[i] + y[i]
    return k.build()


def _upload(b: BaseBackend, data: np.ndarray) -> Any:
    buf = b.allocate_device_buffer(data.nbytes)
    b.write(buf, data)
    return buf


def test_each_call_uses_its_own_buffers_and_params(backend: BaseBackend) -> None:
    prog = _axpy()
    rng = np.random.default_rng(1)
    x1, x2 = rng.integers(0, 1000, 300, dtype=np.uint32), rng.integers(0, 1000, 300, dtype=np.uint32)
    bx1, bx2, by = _upload(backend, x1), _upload(backend, x2), _upload(backend, np.zeros(300, np.uint32))
    expect = np.zeros(300, np.uint32)
    for a, bx, x in [(3, bx1, x1), (3, bx1, x1), (5, bx2, x2), (3, bx1, x1), (7, bx1, x1)]:
        backend.dispatch_with_device_buffers(
            prog, {"x": bx}, {"y": by}, DispatchConfig(grid=5, params={"a": a}))
        expect = expect + np.uint32(a) * x
    np.testing.assert_array_equal(backend.read(by, dtype=np.uint32), expect)
    for buf in (bx1, bx2, by):
        backend.free(buf)


def test_a_freed_buffer_is_refused_on_the_next_identical_call(backend: BaseBackend) -> None:
    prog = _axpy()
    bx = _upload(backend, np.ones(64, np.uint32))
    by = _upload(backend, np.zeros(64, np.uint32))
    cfg = DispatchConfig(grid=1, params={"a": 2})
    backend.dispatch_with_device_buffers(prog, [bx], [by], cfg)
    backend.free(bx)
    with pytest.raises(BufferStateError, match="freed"):
        backend.dispatch_with_device_buffers(prog, [bx], [by], cfg)
    np.testing.assert_array_equal(backend.read(by, dtype=np.uint32), np.full(64, 2, np.uint32))
    backend.free(by)


def test_a_new_buffer_in_an_old_buffers_place_is_validated_afresh(backend: BaseBackend) -> None:
    """Ids of dropped objects are recycled; a new, smaller buffer must not inherit the old
    one's element count (its extra elements must stay untouched: out of bounds)."""
    prog = _axpy()
    cfg = DispatchConfig(grid=2, params={"a": 1})
    by = _upload(backend, np.zeros(100, np.uint32))
    for n in (100, 40, 100, 7):
        bx = _upload(backend, np.ones(n, np.uint32))
        backend.dispatch_with_device_buffers(prog, [bx], [by], cfg)
        backend.synchronize()
        backend.free(bx)
        del bx
        gc.collect()
    expect = np.zeros(100, np.uint32)
    for n in (100, 40, 100, 7):
        expect[:n] += 1
    np.testing.assert_array_equal(backend.read(by, dtype=np.uint32), expect)
    # a wrong size is still caught on a call that looks like an earlier one
    bad = backend.allocate_device_buffer(6)
    with pytest.raises(InvalidDispatch, match="whole number"):
        backend.dispatch_with_device_buffers(prog, [bad], [by], cfg)
    backend.free(bad)
    backend.free(by)


def test_a_freed_and_dropped_buffer_is_not_kept_alive(backend: BaseBackend) -> None:
    prog = _axpy()
    bx = _upload(backend, np.ones(64, np.uint32))
    by = _upload(backend, np.zeros(64, np.uint32))
    backend.dispatch_with_device_buffers(prog, [bx], [by], DispatchConfig(grid=1, params={"a": 1}))
    backend.synchronize()
    gone = weakref.ref(bx)
    backend.free(bx)
    del bx
    gc.collect()
    assert gone() is None, "a dispatch kept a dropped buffer alive"
    backend.free(by)


def test_buffers_given_as_iterators_are_read_once(backend: BaseBackend) -> None:
    prog = _axpy()
    bx = _upload(backend, np.full(64, 3, np.uint32))
    by = _upload(backend, np.zeros(64, np.uint32))
    cfg = DispatchConfig(grid=1, params={"a": 2})
    for _ in range(2):  # a miss, then a hit
        backend.dispatch_with_device_buffers(prog, iter([bx]), iter([by]), cfg)
    np.testing.assert_array_equal(backend.read(by, dtype=np.uint32), np.full(64, 12, np.uint32))
    backend.free(bx)
    backend.free(by)


def test_bound_dispatches_keep_their_own_params_over_shared_buffers(backend: BaseBackend) -> None:
    """Two bind() results over the same buffers with different params, launched in turn
    and mixed with unbound calls, each a few times, and again after an unrelated buffer
    was freed: every launch uses its own params."""
    prog = _axpy()
    x = np.arange(256, dtype=np.uint32)
    bx, by = _upload(backend, x), _upload(backend, np.zeros(256, np.uint32))
    b2 = backend.bind(prog, [bx], [by], DispatchConfig(grid=4, params={"a": 2}))
    b3 = backend.bind(prog, [bx], [by], DispatchConfig(grid=4, params={"a": 3}))
    total = 0
    for round_ in range(2):
        for bound, a in [(b2, 2), (b2, 2), (b3, 3), (b2, 2), (b3, 3), (b3, 3)]:
            backend.dispatch_with_device_buffers(bound)
            total += a
        backend.dispatch_with_device_buffers(prog, [bx], [by],
                                             DispatchConfig(grid=4, params={"a": 5}))
        total += 5
        np.testing.assert_array_equal(backend.read(by, dtype=np.uint32),
                                      (np.uint32(total) * x).astype(np.uint32))
        if round_ == 0:
            _upload(backend, np.zeros(4, np.uint32)).free()  # moves the backend's epoch
    backend.free(bx)
    with pytest.raises(BufferStateError, match="freed"):
        backend.dispatch_with_device_buffers(b2)
    backend.free(by)


def _scale_f32() -> Program:
    k = ProgramBuilder("redispatch_scale", workgroup_size=64)
    y = k.buffer("y", ST.F32, "read_write")
    a = k.param("a", ST.F32)
    i = k.global_linear_id()
    with k.if_(i < y.length()):
        y[i] = y[i] * a
    return k.build()


def test_a_remembered_call_tells_params_apart_by_type_and_bits(backend: BaseBackend) -> None:
    """0.0 and -0.0 compare equal, and so do 1 and True: the remembered binding of one must
    never serve the other (the sign of zero reaches the kernel; True is refused for u32)."""
    prog = _scale_f32()
    by = _upload(backend, np.ones(64, np.float32))
    for a in (0.0, -0.0):
        backend.write(by, np.ones(64, np.float32))
        backend.dispatch_with_device_buffers(prog, [], [by], DispatchConfig(grid=1, params={"a": a}))
        got = backend.read(by, dtype=np.float32)
        assert np.all(np.signbit(got) == np.signbit(np.float32(a))), (a, got[:4])
    axpy = _axpy()
    bx, b2 = _upload(backend, np.ones(64, np.uint32)), _upload(backend, np.zeros(64, np.uint32))
    backend.dispatch_with_device_buffers(axpy, [bx], [b2], DispatchConfig(grid=1, params={"a": 1}))
    with pytest.raises(InvalidDispatch, match="'a'"):
        backend.dispatch_with_device_buffers(axpy, [bx], [b2], DispatchConfig(grid=1, params={"a": True}))
    with pytest.raises(InvalidDispatch, match="'a'"):  # refused on a first call too
        backend.dispatch_with_device_buffers(axpy, [b2], [bx], DispatchConfig(grid=1, params={"a": True}))
    for buf in (by, bx, b2):
        backend.free(buf)


def test_a_repeated_call_is_prepared_once(backend: BaseBackend) -> None:
    """Unbound calls over the same buffers share one prepared launch (also through
    dispatch_async), a bound dispatch keeps its own, and a free re-prepares nothing that
    does not use the freed buffer."""
    prog = _axpy()
    bx, by = _upload(backend, np.ones(64, np.uint32)), _upload(backend, np.zeros(64, np.uint32))
    other = _upload(backend, np.zeros(4, np.uint32))
    prepared: list[str] = []
    real = type(backend)._prepare_launch

    def spy(self: BaseBackend, bound: Any) -> Any:
        prepared.append(bound.program.name)
        return real(self, bound)

    cfg = DispatchConfig(grid=1, params={"a": 2})
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(type(backend), "_prepare_launch", spy)
        for _ in range(3):
            backend.dispatch_with_device_buffers(prog, [bx], [by], cfg)
        backend.dispatch_async(prog, [bx], [by], cfg).wait()
        assert len(prepared) == 1
        bound = backend.bind(prog, [bx], [by], cfg)
        for _ in range(3):
            backend.dispatch_with_device_buffers(bound)
        assert len(prepared) == 2
        backend.free(other)  # not one of theirs: both stay prepared
        backend.dispatch_with_device_buffers(prog, [bx], [by], cfg)
        backend.dispatch_with_device_buffers(bound)
        assert len(prepared) == 2
    np.testing.assert_array_equal(backend.read(by, dtype=np.uint32), np.full(64, 2 * 9, np.uint32))
    backend.free(bx)
    with pytest.raises(BufferStateError):
        backend.dispatch_with_device_buffers(bound)
    backend.free(by)


def test_options_are_typed() -> None:
    from vyre import DispatchOptions

    assert DispatchConfig(options={"timing": False}).options == DispatchOptions(timing=False)
    with pytest.raises(InvalidDispatch, match="unknown option"):
        DispatchConfig(options={"timming": False})


def test_the_launch_cache_starts_afresh_when_full_and_still_tracks_its_buffers(
        reference: BaseBackend, monkeypatch: pytest.MonkeyPatch) -> None:
    """Regression: entries made right after the cache was cleared for being full still
    watch their buffers (their weak references survive the clear) and die with them."""
    from vyre.launch_cache import LaunchCache

    monkeypatch.setattr(LaunchCache, "LIMIT", 3)
    prog = _axpy()
    cache = reference._launches  # the one launch cache of this instance
    cache.clear()
    bx = _upload(reference, np.ones(64, np.uint32))
    ys = [_upload(reference, np.zeros(64, np.uint32)) for _ in range(4)]
    cfg = DispatchConfig(grid=1, params={"a": 1})
    for y in ys:  # the 4th finds the cache full and clears it first
        reference.dispatch_with_device_buffers(prog, [bx], [y], cfg)
    assert len(cache) == 1
    # every buffer of the entry is watched, so that its death (a dropped CUDA buffer)
    # evicts the entry before its id can be reused
    watched = {bid for bid, ref in cache._refs.items() if ref() is not None}
    assert {id(bx), id(ys[3])} <= watched
    reference.free(ys[3])
    assert len(cache) == 0
    reference.free(bx)
    for y in ys[:3]:
        reference.free(y)
