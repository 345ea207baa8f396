"""Exactness of what a dispatch binds, on every backend (issue 13): re-dispatching one
Program over the same resident buffers uses each call's own params bit for bit (+0.0 and
-0.0 are different params: 1/a tells them apart), a param of the wrong kind is refused on
every call (not only the first, before anything is remembered), and a buffer that is not a
whole number of elements is refused with a message that says how to fix it (docs/IR.md).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from vyre import DispatchConfig, ProgramBuilder, ScalarType
from vyre.backend import BaseBackend
from vyre.errors import InvalidDispatch
from vyre.ir.nodes import Program

ST = ScalarType


def _upload(b: BaseBackend, data: np.ndarray) -> Any:
    buf = b.allocate_device_buffer(data.nbytes)
    b.write(buf, data)
    return buf


def _reciprocal() -> Program:
    k = ProgramBuilder("reciprocal_of_param", workgroup_size=4)
    x = k.buffer("x", ST.F32)
    out = k.buffer("out", ST.F32, "write")
    a = k.param("a", ST.F32)
    i = k.global_linear_id()
    with k.if_(i < out.length()):
        out[i] = x[i] / a
    return k.build()


def test_redispatch_tells_plus_zero_from_minus_zero(backend: BaseBackend) -> None:
    prog = _reciprocal()
    bx = _upload(backend, np.ones(4, np.float32))
    bo = _upload(backend, np.zeros(4, np.float32))
    try:
        for a, want in [(0.0, np.inf), (-0.0, -np.inf), (0.0, np.inf), (-0.0, -np.inf)]:
            backend.dispatch_with_device_buffers(prog, {"x": bx}, {"out": bo},
                                                 DispatchConfig(grid=1, params={"a": a}))
            got = backend.read(bo, dtype=np.float32)
            assert got.tolist() == [want] * 4, f"1 / {a!r} gave {got.tolist()}"
    finally:
        backend.free(bx)
        backend.free(bo)


def _scaled() -> Program:
    k = ProgramBuilder("scaled_by_u32", workgroup_size=4)
    out = k.buffer("out", ST.U32, "write")
    n = k.param("n", ST.U32)
    i = k.global_linear_id()
    with k.if_(i < out.length()):
        out[i] = i * n
    return k.build()


def test_a_bool_for_a_u32_param_is_refused_on_every_call(backend: BaseBackend) -> None:
    prog = _scaled()
    bo = _upload(backend, np.zeros(4, np.uint32))
    try:
        # True == 1 and False == 0: a memo that compares params with == would let them in.
        for n in [True, 1, True, 0, False, 3, True]:
            cfg = DispatchConfig(grid=1, params={"n": n})
            if isinstance(n, bool):
                with pytest.raises(InvalidDispatch, match="'n'"):
                    backend.dispatch_with_device_buffers(prog, [], {"out": bo}, cfg)
                continue
            backend.dispatch_with_device_buffers(prog, [], {"out": bo}, cfg)
            assert backend.read(bo, dtype=np.uint32).tolist() == [0, n, 2 * n, 3 * n]
    finally:
        backend.free(bo)


def test_a_buffer_of_partial_elements_is_refused_naming_the_fix(backend: BaseBackend) -> None:
    """docs/IR.md: a bound buffer holds a whole number of elements; 10 bytes bound as u32
    is refused (not silently read as 2 elements), and the message says what to bind."""
    k = ProgramBuilder("copy_u32", workgroup_size=4)
    src = k.buffer("src", ST.U32)
    dst = k.buffer("dst", ST.U32, "write")
    i = k.global_linear_id()
    with k.if_(i < dst.length()):
        dst[i] = src[i]
    prog = k.build()
    b10 = backend.allocate_device_buffer(10)
    bo = _upload(backend, np.zeros(2, np.uint32))
    try:
        with pytest.raises(InvalidDispatch, match=r"'src'.*10 bytes.*multiple of 4 bytes"):
            backend.dispatch_with_device_buffers(prog, {"src": b10}, {"dst": bo},
                                                 DispatchConfig(grid=1))
        b8 = _upload(backend, np.array([7, 9], np.uint32))
        backend.dispatch_with_device_buffers(prog, {"src": b8}, {"dst": bo},
                                             DispatchConfig(grid=1))
        assert backend.read(bo, dtype=np.uint32).tolist() == [7, 9]
        backend.free(b8)
    finally:
        backend.free(b10)
        backend.free(bo)
