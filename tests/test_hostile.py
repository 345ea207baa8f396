"""Hostile input: every misuse gets a precise vyre error, the process stays alive, and the
backend keeps doing valid work afterwards.

Covers malformed / truncated / deeply nested / future-version wire documents, absurd sizes,
grids over the limits or empty, wrong element types, counts and parameter sets, buffers of
another instance, HostShimBuffers, freed buffers and closed backends. Every test runs on
every available backend and ends with a real dispatch checked against the expected result.
This file must never accept a bare Exception (or a pydantic / NumPy error) as the answer.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import vyre
from vyre import DispatchConfig, IndirectGrid, ProgramBuilder, ReadRange, Step, f32, i32, u32
from vyre.backend import BaseBackend
from vyre.errors import (
    BackendError,
    BackendUnavailable,
    BufferOwnershipError,
    BufferStateError,
    InvalidDispatch,
    InvalidProgram,
    OutOfDeviceMemory,
    UnsupportedFeature,
)
from vyre.ir import nodes as N
from vyre.ir.serialize import from_json, to_json
from vyre.tools.testing import HostShimBuffer

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common_programs import saxpy as shared_saxpy

BACKENDS = [a.name for a in vyre.available_backends() if a.available]


@pytest.fixture(params=BACKENDS)
def be(request: pytest.FixtureRequest) -> Iterator[BaseBackend]:
    b = vyre.get_backend(request.param)
    yield b
    if not b.closed:
        assert_alive(b)
        b.close()


saxpy = shared_saxpy


def fixed_count() -> N.Program:
    k = ProgramBuilder("fixed", workgroup_size=4)
    x = k.buffer("x", i32, count=4)
    o = k.buffer("o", i32, "write", count=4)
    i = k.global_id()
    o[i] = x[i] + 1
    return k.build()


def assert_alive(b: BaseBackend) -> None:
    """A host dispatch and a resident dispatch both give the right answer."""
    n = 100
    x = np.arange(n, dtype=np.float32)
    y = np.ones(n, dtype=np.float32)
    cfg = DispatchConfig.for_elements(n, 64, params={"a": 2.0})
    out = b.dispatch(saxpy(), {"x": x, "y": y}, cfg)["y"]
    np.testing.assert_array_equal(out, 2 * x + 1)
    bx = b.allocate_device_buffer(x.nbytes, label="alive_x")
    by = b.allocate_device_buffer(y.nbytes, label="alive_y")
    try:
        b.write_many([(bx, x, 0), (by, y, 0)])
        b.dispatch_with_device_buffers(saxpy(), [bx], [by], cfg)
        np.testing.assert_array_equal(b.read(by, dtype=np.float32), 2 * x + 1)
    finally:
        b.free(bx)
        b.free(by)


def raises(
    exc: type[BaseException], *phrases: str
) -> Callable[[Callable[[], Any]], BaseException]:
    """Run the call; it must raise `exc` (a vyre error) whose message has every phrase."""

    def run(fn: Callable[[], Any]) -> BaseException:
        with pytest.raises(exc) as info:
            fn()
        assert isinstance(info.value, BackendError), type(info.value)
        msg = str(info.value)
        for p in phrases:
            assert p.lower() in msg.lower(), f"{p!r} not in {msg!r}"
        return info.value

    return run


# ------------------------------------------------------------------ wire format


VALID = to_json(saxpy())


def _doc() -> dict[str, Any]:
    return json.loads(VALID)


def _nested_not(depth: int) -> str:
    """JSON text of `depth` nested logical nots (built as text: json.dumps would recurse)."""
    return ('{"kind":"unary","op":"not","ty":"bool","a":' * depth
            + '{"kind":"const","ty":"bool","value":true}' + "}" * depth)


def _with_body(body: list[Any]) -> str:
    d = _doc()
    d["program"]["body"] = ["BODY"]
    text = json.dumps(d)
    parts = [p if isinstance(p, str) else json.dumps(p) for p in body]
    return text.replace('["BODY"]', "[" + ",".join(parts) + "]")


def _let(value: str, name: str = "v") -> str:
    return f'{{"kind":"let","name":"{name}","value":{value}}}'


WIRE_CASES: list[tuple[str, str | bytes, tuple[str, ...]]] = [
    ("empty", "", ("empty",)),
    ("whitespace", "   \n", ("empty",)),
    ("not json", "hello", ("malformed json",)),
    ("truncated", VALID[: len(VALID) // 2], ("truncated",)),
    ("truncated at end", VALID[:-1], ("truncated",)),
    ("not utf8", b"\xff\xfe{}", ("not utf-8",)),
    ("array", "[1, 2]", ("expected a json object",)),
    ("wrong format", json.dumps({**_doc(), "format": "other"}), ("format tag", "not a vyre")),
    ("future version", json.dumps({**_doc(), "version": 2}), ("version 2", "newer", "upgrade")),
    ("far future version", json.dumps({**_doc(), "version": 10**30}), ("newer",)),
    ("version zero", json.dumps({**_doc(), "version": 0}), ("does not exist",)),
    ("string version", json.dumps({**_doc(), "version": "1"}), ("version must be an integer",)),
    ("no program", json.dumps({"format": "vyre.program", "version": 1}), ("no 'program'",)),
    ("extra top field", json.dumps({**_doc(), "x": 1}), ("unknown top-level",)),
    ("deep arrays", "[" * 100_000 + "]" * 100_000, ("nested too deeply",)),
    ("deep objects", '{"a":' * 50_000 + "1" + "}" * 50_000, ("nested too deeply",)),
    ("deep expression", _with_body([_let(_nested_not(5000))]), ("nested too deeply",)),
    ("past MAX_DEPTH", _with_body([_let(_nested_not(80))]), ("MAX_DEPTH",)),
    ("unknown node kind", _with_body([{"kind": "launch_missiles"}]), ("ir schema",)),
    ("wrong field type", _with_body(['{"kind":"let","name":3,"value":' + _nested_not(1) + "}"]),
     ("ir schema",)),
    ("store to read buffer",
     _with_body([{"kind": "store", "buffer": "x",
                  "index": {"kind": "const", "ty": "u32", "value": 0},
                  "value": {"kind": "const", "ty": "f32", "value": 1.0}}]),
     ("declared 'read'",)),
    ("undeclared var",
     _with_body([{"kind": "let", "name": "v", "value": {"kind": "var", "name": "nope",
                                                        "ty": "i32"}}]),
     ("not a local",)),
]


@pytest.mark.parametrize("doc,phrases", [(d, p) for _, d, p in WIRE_CASES],
                         ids=[n for n, _, _ in WIRE_CASES])
def test_hostile_wire_documents(doc: str | bytes, phrases: tuple[str, ...]) -> None:
    raises(InvalidProgram, *phrases)(lambda: from_json(doc))


def test_huge_wire_document_is_refused_without_parsing() -> None:
    from vyre.ir.serialize import MAX_DOCUMENT_BYTES

    raises(InvalidProgram, "bytes", "at most")(lambda: from_json(b" " * (MAX_DOCUMENT_BYTES + 1)))


def test_valid_wire_document_runs_everywhere(be: BaseBackend) -> None:
    prog = from_json(VALID)
    x = np.arange(8, dtype=np.float32)
    out = be.dispatch(prog, {"x": x, "y": x}, DispatchConfig(grid=1, params={"a": 3.0}))["y"]
    np.testing.assert_array_equal(out, 4 * x)


def test_unvalidated_program_object_is_rejected_at_dispatch(be: BaseBackend) -> None:
    """A Program built with model_construct (skipping validation) still cannot run."""
    bad = N.Program.model_construct(
        name="bad", workgroup_size=(1, 1, 1),
        buffers=(N.BufferDecl(name="x", ty=f32, access="read"),),
        params=(), workgroup_arrays=(),
        body=(N.Store(buffer="x", index=N.Const(ty=u32, value=0),
                      value=N.Const(ty=f32, value=1.0)),),
    )
    raises(InvalidProgram, "declared 'read'")(
        lambda: be.dispatch(bad, {"x": np.zeros(1, np.float32)}, DispatchConfig()))
    raises(InvalidDispatch, "expected a vyre program")(lambda: be.compile("not a program"))  # type: ignore[arg-type]


# ------------------------------------------------------------------ sizes and grids


@pytest.mark.parametrize("n", [2**62, 2**63 - 1, 2**80])
def test_absurd_allocation(be: BaseBackend, n: int) -> None:
    raises(OutOfDeviceMemory, "out of device memory", str(n))(
        lambda: be.allocate_device_buffer(n))
    assert be.live_buffers() == []


@pytest.mark.parametrize("n,phrase", [(-1, ">= 0"), (2.5, "must be an int"), ("8", "must be an int"),
                                      (True, "must be an int"), (None, "must be an int")])
def test_bad_allocation_size(be: BaseBackend, n: Any, phrase: str) -> None:
    raises(InvalidDispatch, phrase)(lambda: be.allocate_device_buffer(n))


@pytest.mark.parametrize("grid,phrase", [(0, "grid[0] = 0"), ((1, 0, 1), "grid[1] = 0"),
                                         ((1, 1, -5), "grid[2] = -5"), ((), "1 to 3"),
                                         ((1, 2, 3, 4), "1 to 3"), ("big", "grid"),
                                         (1.5, "grid")])
def test_bad_grid_config(grid: Any, phrase: str) -> None:
    raises(InvalidDispatch, "DispatchConfig", phrase)(lambda: DispatchConfig(grid=grid))


def test_empty_for_elements() -> None:
    raises(InvalidDispatch, "n >= 1")(lambda: DispatchConfig.for_elements(0, 64))


def test_bad_config_fields() -> None:
    raises(InvalidDispatch, "params")(lambda: DispatchConfig(params={"a": "text"}))
    raises(InvalidDispatch, "unknown_option")(lambda: DispatchConfig(unknown_option=1))
    raises(InvalidDispatch, "multiple of 4")(lambda: IndirectGrid(buffer=None, offset=2))


@pytest.mark.parametrize("grid", [(70000, 1, 1), (1, 2**31, 1), (1, 1, 2**40)])
def test_grid_over_limits(be: BaseBackend, grid: tuple[int, int, int]) -> None:
    y = be.allocate_device_buffer(16)
    x = be.allocate_device_buffer(16)
    try:
        raises(InvalidDispatch, "exceeds", "limit")(
            lambda: be.dispatch_with_device_buffers(
                saxpy(), [x], [y], DispatchConfig(grid=grid, params={"a": 1.0})))
        raises(InvalidDispatch, "exceeds")(
            lambda: be.dispatch(saxpy(), {"x": np.zeros(4, np.float32),
                                          "y": np.zeros(4, np.float32)},
                                DispatchConfig(grid=grid, params={"a": 1.0})))
    finally:
        be.free(x)
        be.free(y)
    assert be.live_buffers() == []


def test_indirect_grid_too_short(be: BaseBackend) -> None:
    if "indirect_dispatch" not in be.capabilities().features:
        pytest.skip("no indirect dispatch")
    g = be.allocate_device_buffer(8)
    x = be.allocate_device_buffer(16)
    y = be.allocate_device_buffer(16)
    try:
        raises(InvalidDispatch, "indirect grid needs 12 bytes")(
            lambda: be.dispatch_with_device_buffers(
                saxpy(), [x], [y],
                DispatchConfig(grid=IndirectGrid(buffer=g), params={"a": 1.0})))
    finally:
        for b in (g, x, y):
            be.free(b)


def test_workgroup_memory_over_limit(be: BaseBackend) -> None:
    limit = be.capabilities().limits["max_workgroup_bytes"]
    k = ProgramBuilder("big_shared", workgroup_size=1)
    sh = k.shared("sh", u32, limit // 4 + 1)
    o = k.buffer("o", u32, "write")
    sh[0] = k.lit(1, u32)
    k.barrier()
    o[0] = sh[0]
    raises(InvalidDispatch, "workgroup memory", str(limit))(
        lambda: be.dispatch(k.build(), {"o": 1}, DispatchConfig()))


def test_missing_feature(be: BaseBackend) -> None:
    feats = be.capabilities().features
    missing = next((f for f in ("atomic_i64", "f64", "f16") if f not in feats), None)
    if missing is None:
        pytest.skip(f"{be.id} reports every feature this test can ask for")
    k = ProgramBuilder("needs", workgroup_size=1)
    if missing == "atomic_i64":
        acc = k.buffer("acc", vyre.i64, "read_write")
        acc.atomic_add(0, k.lit(1, vyre.i64))
        inputs: dict[str, Any] = {"acc": np.zeros(1, np.int64)}
    else:
        ty = vyre.f64 if missing == "f64" else vyre.f16
        o = k.buffer("o", ty, "write")
        o[0] = k.lit(1.0, ty)
        inputs = {"o": 1}
    raises(UnsupportedFeature, missing, be.id)(
        lambda: be.dispatch(k.build(), inputs, DispatchConfig()))


# ------------------------------------------------------------------ wrong arguments


def test_wrong_host_dtype(be: BaseBackend) -> None:
    raises(InvalidDispatch, "float64", "f32", "astype")(
        lambda: be.dispatch(saxpy(), {"x": np.zeros(4), "y": np.zeros(4, np.float32)},
                            DispatchConfig(params={"a": 1.0})))


def test_wrong_buffer_names_and_counts(be: BaseBackend) -> None:
    y = np.zeros(4, np.float32)
    cfg = DispatchConfig(params={"a": 1.0})
    raises(InvalidDispatch, "no buffer", "zz")(
        lambda: be.dispatch(saxpy(), {"x": y, "y": y, "zz": y}, cfg))
    raises(InvalidDispatch, "needs")(lambda: be.dispatch(saxpy(), {"y": y}, cfg))
    raises(InvalidDispatch, "2 buffers", "got 3")(lambda: be.dispatch(saxpy(), [y, y, y], cfg))
    bx = be.allocate_device_buffer(16)
    by = be.allocate_device_buffer(16)
    try:
        raises(InvalidDispatch, "takes 1 input", "got 2")(
            lambda: be.dispatch_with_device_buffers(saxpy(), [bx, by], [by], cfg))
        raises(InvalidDispatch, "missing ['x']", "unexpected ['q']")(
            lambda: be.dispatch_with_device_buffers(saxpy(), {"q": bx}, {"y": by}, cfg))
    finally:
        be.free(bx)
        be.free(by)


def test_partial_elements_and_fixed_counts(be: BaseBackend) -> None:
    odd = be.allocate_device_buffer(10)  # 2.5 f32 elements
    x = be.allocate_device_buffer(16)
    three = be.allocate_device_buffer(12)
    four = be.allocate_device_buffer(16)
    cfg = DispatchConfig(params={"a": 1.0})
    try:
        raises(InvalidDispatch, "not a whole number of elements")(
            lambda: be.dispatch_with_device_buffers(saxpy(), [x], [odd], cfg))
        raises(InvalidDispatch, "declares 4 elements", "holds 3")(
            lambda: be.dispatch_with_device_buffers(fixed_count(), [three], [four],
                                                    DispatchConfig()))
        raises(InvalidDispatch, "not a whole number")(
            lambda: be.dispatch(saxpy(), {"x": b"\x00" * 6, "y": np.zeros(2, np.float32)}, cfg))
    finally:
        for b in (odd, x, three, four):
            be.free(b)


@pytest.mark.parametrize("params,phrases", [
    ({}, ("missing ['a']",)),
    ({"a": 1.0, "b": 2}, ("unexpected ['b']",)),
    ({"a": True}, ("'a'", "bool")),
])
def test_wrong_params(be: BaseBackend, params: dict[str, Any], phrases: tuple[str, ...]) -> None:
    z = np.zeros(4, np.float32)
    raises(InvalidDispatch, *phrases)(
        lambda: be.dispatch(saxpy(), {"x": z, "y": z}, DispatchConfig(params=params)))


def test_wrong_int_params(be: BaseBackend) -> None:
    k = ProgramBuilder("ip", workgroup_size=1)
    o = k.buffer("o", i32, "write")
    p = k.param("p", i32)
    o[0] = p
    prog = k.build()
    raises(InvalidDispatch, "'p'", "does not fit")(
        lambda: be.dispatch(prog, {"o": 1}, DispatchConfig(params={"p": 2**40})))
    raises(InvalidDispatch, "'p'", "not an integer")(
        lambda: be.dispatch(prog, {"o": 1}, DispatchConfig(params={"p": 1.5})))
    assert be.dispatch(prog, {"o": 1}, DispatchConfig(params={"p": -7}))["o"][0] == -7


def test_bad_reads_and_writes(be: BaseBackend) -> None:
    b = be.allocate_device_buffer(16)
    try:
        raises(BufferStateError, "lies outside")(lambda: be.read(b, 8, 16))
        raises(BufferStateError, "lies outside")(lambda: be.read(b, -4, 4))
        raises(BufferStateError, "lies outside")(lambda: be.write(b, np.zeros(5, np.float32)))
        raises(BufferStateError, "lies outside")(lambda: be.write(b, b"\x00", 16))
        raises(InvalidDispatch, "whole number")(lambda: be.read(b, 0, 6, dtype=np.float32))
        raises(InvalidDispatch, "list has no element type")(lambda: be.write(b, [1, 2]))
        raises(InvalidDispatch, "not c-contiguous")(
            lambda: be.write(b, np.zeros((2, 4), np.float32)[:, ::2]))
        raises(InvalidDispatch, "expected a numpy array")(lambda: be.write(b, object()))
        # Nothing partial happened: write_many validates every item before writing any.
        be.write(b, np.arange(4, dtype=np.float32))
        raises(BufferStateError, "lies outside")(
            lambda: be.write_many([(b, np.full(4, 9, np.float32), 0), (b, b"\x00" * 4, 14)]))
        np.testing.assert_array_equal(be.read(b, dtype=np.float32), np.arange(4))
    finally:
        be.free(b)


def test_read_dtype_spellings_and_index_types(be: BaseBackend) -> None:
    """vyre.f16 is float16 and the string "f16" is refused as ambiguous (numpy's float128,
    vyre's half), in either order (the dtype cache keys them apart although the str enum
    makes them equal); numpy integer bounds and dtype None (bytes) read the same bytes as
    plain ones."""
    b = be.allocate_device_buffer(32)
    try:
        be.write(b, np.arange(16, dtype=np.float16))
        for _ in range(2):
            assert be.read(b, dtype=vyre.f16).dtype == np.float16
            with pytest.raises(InvalidDispatch, match=r"ambiguous.*vyre\.f16 or np\.float16"):
                be.read(b, dtype="f16")
        np.testing.assert_array_equal(be.read(b, dtype=vyre.f16), np.arange(16))
        got = be.read(b, np.int64(4), np.uint32(8), None)
        assert got.dtype == np.uint8
        np.testing.assert_array_equal(got, np.arange(16, dtype=np.float16).view(np.uint8)[4:12])
        assert be.read_many([(b, np.int32(2), 4, vyre.f16)])[0].tolist() == [1.0, 2.0]
    finally:
        be.free(b)


# ------------------------------------------------------------------ ownership and state


def test_buffer_of_another_instance(be: BaseBackend) -> None:
    other = vyre.get_backend(be.kind if be.kind != "reference" else "reference")
    try:
        foreign = other.allocate_device_buffer(16, label="foreign")
        mine = be.allocate_device_buffer(16)
        cfg = DispatchConfig(params={"a": 1.0})
        raises(BufferOwnershipError, "foreign", "another instance of", "transfer")(
            lambda: be.dispatch_with_device_buffers(saxpy(), [foreign], [mine], cfg))
        raises(BufferOwnershipError, "foreign")(lambda: be.read(foreign))
        raises(BufferOwnershipError, "foreign")(lambda: be.write(foreign, b"\x00" * 4))
        raises(BufferOwnershipError, "foreign")(lambda: be.free(foreign))
        assert not foreign.freed
        moved = vyre.transfer(foreign, be)
        be.dispatch_with_device_buffers(saxpy(), [moved], [mine], cfg)
        be.free(moved)
        be.free(mine)
    finally:
        other.close()


def test_buffer_of_another_backend_kind(be: BaseBackend) -> None:
    kinds = [n for n in BACKENDS if n != be.kind]
    if not kinds:
        pytest.skip("only one backend kind is available")
    other = vyre.get_backend(kinds[0])
    try:
        foreign = other.allocate_device_buffer(16, label="alien")
        mine = be.allocate_device_buffer(16)
        raises(BufferOwnershipError, "alien", repr(other.id), repr(be.id))(
            lambda: be.dispatch_with_device_buffers(saxpy(), [foreign], [mine],
                                                    DispatchConfig(params={"a": 1.0})))
        be.free(mine)
    finally:
        other.close()


def test_host_shim_buffer(be: BaseBackend) -> None:
    shim = HostShimBuffer(16, backend_id=be.id, label="shim")
    mine = be.allocate_device_buffer(16)
    try:
        raises(BufferOwnershipError, "HostShimBuffer", "never device memory")(
            lambda: be.dispatch_with_device_buffers(saxpy(), [shim], [mine],
                                                    DispatchConfig(params={"a": 1.0})))
        raises(BufferOwnershipError, "HostShimBuffer")(lambda: be.read(shim))
        raises(BufferOwnershipError, "HostShimBuffer")(lambda: be.write(shim, b"\x00" * 4))
        raises(BufferOwnershipError, "HostShimBuffer")(lambda: be.free(shim))
    finally:
        be.free(mine)


def test_use_after_free(be: BaseBackend) -> None:
    x = be.allocate_device_buffer(16, label="gone")
    y = be.allocate_device_buffer(16)
    cfg = DispatchConfig(params={"a": 1.0})
    bound = be.bind(saxpy(), [x], [y], cfg)
    pipe = be.pipeline([Step(saxpy(), [x], [y], cfg)]) if "pipeline" in \
        be.capabilities().features else None
    be.free(x)
    be.free(x)  # twice is harmless
    x.free()
    assert x.freed and x not in be.live_buffers()
    raises(BufferStateError, "gone", "was freed")(lambda: be.read(x))
    raises(BufferStateError, "was freed")(lambda: be.write(x, b"\x00" * 4))
    raises(BufferStateError, "was freed")(
        lambda: be.dispatch_with_device_buffers(saxpy(), [x], [y], cfg))
    raises(BufferStateError, "was freed")(lambda: be.dispatch_with_device_buffers(bound))
    raises(BufferStateError, "was freed")(lambda: be.dispatch_async(bound))
    if pipe is not None:
        raises(BufferStateError, "was freed")(lambda: pipe.run())
    raises(BufferStateError, "was freed")(lambda: be.read_many([ReadRange(x)]))
    be.free(y)
    assert be.live_buffers() == []


def test_closed_backend(be: BaseBackend) -> None:
    b = vyre.get_backend(be.kind)
    buf = b.allocate_device_buffer(16)
    other = b.allocate_device_buffer(16)
    prog = saxpy()
    b.compile(prog)
    pipe = (b.pipeline([Step(prog, [buf], [other], DispatchConfig(params={"a": 1.0}))])
            if "pipeline" in b.capabilities().features else None)
    pending = b.dispatch_async(prog, [buf], [other], DispatchConfig(params={"a": 1.0}))
    pending.wait()
    b.close()
    b.close()  # twice is harmless
    assert b.closed and buf.freed and b.live_buffers() == []
    z = np.zeros(4, np.float32)
    cfg = DispatchConfig(params={"a": 1.0})
    for call in (
        lambda: b.allocate_device_buffer(16),
        lambda: b.read(buf),
        lambda: b.write(buf, b"\x00" * 4),
        lambda: b.dispatch(prog, {"x": z, "y": z}, cfg),
        lambda: b.dispatch_with_device_buffers(prog, [buf], [buf], cfg),
        lambda: b.compile(prog),
        lambda: b.synchronize(),
        lambda: b.pipeline([Step(prog, [buf], [buf], cfg)]),
        lambda: list(b.stream(prog, [{"x": z, "y": z}], cfg)),
    ):
        raises(BackendUnavailable, "closed", b.id)(call)
    if pipe is not None:  # a pipeline recorded before close() cannot run after it
        raises(BackendUnavailable, "closed", b.id)(lambda: pipe.run())
    assert pending.is_ready()
    b.free(buf)  # freeing a buffer of a closed backend is harmless
    assert_alive(be)  # other instances are unaffected


def test_errors_leave_no_buffers_behind(be: BaseBackend) -> None:
    """A host dispatch that fails after allocating frees what it allocated."""
    z = np.zeros(4, np.float32)
    raises(InvalidDispatch)(lambda: be.dispatch(saxpy(), {"x": z, "y": z},
                                                DispatchConfig(params={})))
    raises(InvalidDispatch)(lambda: be.dispatch(saxpy(), {"x": z, "y": z},
                                                DispatchConfig(grid=70000, params={"a": 1.0})))
    assert be.live_buffers() == []


# ------------------------------------------------------------------ the hostile table
#
# Every public entry point with hostile values of each kind. Each row: an id, the call (given
# a Ctx on one backend), the vyre error it must raise, and phrases its message must have
# (what was wrong, and the fix). After every row the instance must still dispatch correctly
# (compared with the reference backend).


def _readonly(n: int) -> np.ndarray:
    a = np.zeros(n, np.float32)
    a.flags.writeable = False
    return a


class Ctx:
    """One backend, a live buffer, a freed one and one of another instance."""

    def __init__(self, b: BaseBackend, foreign: BaseBackend) -> None:
        self.b = b
        self.live = b.allocate_device_buffer(16, label="live16")
        self.freed = b.allocate_device_buffer(16, label="freed16")
        b.free(self.freed)
        self.foreign = foreign.allocate_device_buffer(16, label="foreign16")
        self.cfg = DispatchConfig(params={"a": 1.0})

    def disp(self, **inputs: Any) -> Any:
        z = np.zeros(4, np.float32)
        data: dict[str, Any] = {"x": z, "y": z, **inputs}
        return self.b.dispatch(saxpy(), data, self.cfg)

    def params(self, **params: Any) -> Any:
        z = np.zeros(4, np.float32)
        return self.b.dispatch(saxpy(), {"x": z, "y": z}, DispatchConfig(params=params))


def _doubling(times: int = 60) -> N.Program:
    """x = x + x, `times` times, sharing the subexpression: a 2^times-node tree."""
    e: Any = N.Load(buffer="y", index=N.Const(ty=u32, value=0), ty=f32)
    for _ in range(times):
        e = N.Binary(op="add", a=e, b=e, ty=f32)
    return N.Program(name="doubling", buffers=(N.BufferDecl(name="y", ty=f32,
                                                            access="read_write"),),
                     body=(N.Store(buffer="y", index=N.Const(ty=u32, value=0), value=e),))


def _builder_call(f: Callable[[ProgramBuilder], Any]) -> Callable[[Ctx], Any]:
    def call(c: Ctx) -> Any:
        k = ProgramBuilder("hostile", workgroup_size=64)
        return f(k)
    return call


def _const_doc(value: str, ty: str = "f32") -> str:
    return _with_body([_let(f'{{"kind":"const","ty":"{ty}","value":{value}}}')])


E = InvalidDispatch
Row = tuple[str, Callable[[Ctx], Any], type[BackendError], tuple[str, ...]]
TABLE: list[Row] = [
    # get_backend
    ("get_backend int", lambda c: vyre.get_backend(3), BackendUnavailable, ("string", "probe")),  # type: ignore[arg-type]
    ("get_backend bytes", lambda c: vyre.get_backend(b"wgpu"), BackendUnavailable, ("string",)),  # type: ignore[arg-type]
    ("get_backend object", lambda c: vyre.get_backend(object()), BackendUnavailable, ("string",)),  # type: ignore[arg-type]
    ("get_backend unknown", lambda c: vyre.get_backend("nope"), BackendUnavailable, ("known",)),
    ("get_backend cache 0", lambda c: vyre.get_backend("reference", compile_cache_size=0),
     E, ("int >= 1",)),
    ("get_backend cache str", lambda c: vyre.get_backend("reference", compile_cache_size="8"),  # type: ignore[arg-type]
     E, ("int >= 1",)),
    # allocate_device_buffer
    ("alloc None", lambda c: c.b.allocate_device_buffer(None), E, ("must be an int",)),  # type: ignore[arg-type]
    ("alloc str", lambda c: c.b.allocate_device_buffer("8"), E, ("must be an int",)),  # type: ignore[arg-type]
    ("alloc negative", lambda c: c.b.allocate_device_buffer(-8), E, (">= 0",)),
    ("alloc nan", lambda c: c.b.allocate_device_buffer(float("nan")), E, ("must be an int",)),
    ("alloc 2**80", lambda c: c.b.allocate_device_buffer(2**80), OutOfDeviceMemory, ("free buffers",)),
    ("alloc kind", lambda c: c.b.allocate_device_buffer(8, kind="gpu"), E, ("'device' or 'managed'",)),
    ("alloc kind None", lambda c: c.b.allocate_device_buffer(8, kind=None), E, ("'device' or 'managed'",)),  # type: ignore[arg-type]
    # write / write_many
    ("write None buffer", lambda c: c.b.write(None, b"1234"), BufferOwnershipError, ("allocate it",)),  # type: ignore[arg-type]
    ("write int buffer", lambda c: c.b.write(5, b"1234"), BufferOwnershipError, ("allocate it",)),  # type: ignore[arg-type]
    ("write freed", lambda c: c.b.write(c.freed, b"1234"), BufferStateError, ("was freed", "allocate")),
    ("write foreign", lambda c: c.b.write(c.foreign, b"1234"), BufferOwnershipError, ("transfer",)),
    ("write None data", lambda c: c.b.write(c.live, None), E, ("expected a numpy array",)),
    ("write str data", lambda c: c.b.write(c.live, "abcd"), E, ("expected a numpy array",)),
    ("write object data", lambda c: c.b.write(c.live, object()), E, ("expected a numpy array",)),
    ("write list", lambda c: c.b.write(c.live, [1, 2]), E, ("no element type", "numpy array")),
    ("write object array", lambda c: c.b.write(c.live, np.array([1, None])), E, ("astype",)),
    ("write too big", lambda c: c.b.write(c.live, np.zeros(5, np.float32)), BufferStateError, ("outside",)),
    ("write offset None", lambda c: c.b.write(c.live, b"1234", None), E, ("offset must be an int",)),  # type: ignore[arg-type]
    ("write offset str", lambda c: c.b.write(c.live, b"1234", "0"), E, ("offset must be an int",)),  # type: ignore[arg-type]
    ("write offset float", lambda c: c.b.write(c.live, b"1234", 1.0), E, ("offset must be an int",)),  # type: ignore[arg-type]
    ("write offset -4", lambda c: c.b.write(c.live, b"1234", -4), BufferStateError, ("outside",)),
    ("write offset 2**70", lambda c: c.b.write(c.live, b"1234", 2**70), BufferStateError, ("outside",)),
    ("write masked", lambda c: c.b.write(c.live, np.ma.array(np.zeros(4, np.float32))), E, ("filled",)),
    ("write noncontiguous", lambda c: c.b.write(c.live, np.zeros(8, np.float32)[::2]), E, ("ascontiguousarray",)),
    ("write_many None", lambda c: c.b.write_many(None), E, ("iterable",)),  # type: ignore[arg-type]
    ("write_many int items", lambda c: c.b.write_many([1]), E, ("(buffer, data)",)),  # type: ignore[list-item]
    ("write_many 1-tuple", lambda c: c.b.write_many([(c.live,)]), E, ("(buffer, data)",)),  # type: ignore[list-item]
    ("write_many 4-tuple", lambda c: c.b.write_many([(c.live, b"", 0, 0)]), E, ("(buffer, data)",)),  # type: ignore[list-item]
    # read / read_many
    ("read offset None", lambda c: c.b.read(c.live, offset=None), E, ("offset must be an int",)),  # type: ignore[arg-type]
    ("read offset True", lambda c: c.b.read(c.live, offset=True), E, ("offset must be an int",)),
    ("read dtype unhashable", lambda c: c.b.read(c.live, dtype=[("a", "f4")]), E, ("numeric numpy dtype",)),
    ("read length str", lambda c: c.b.read(c.live, length="4"), E, ("length must be an int",)),  # type: ignore[arg-type]
    ("read length -4", lambda c: c.b.read(c.live, length=-4), BufferStateError, ("outside",)),
    ("read past end", lambda c: c.b.read(c.live, 8, 16), BufferStateError, ("outside",)),
    ("read dtype object", lambda c: c.b.read(c.live, dtype=object), E, ("numeric numpy dtype",)),
    ("read dtype str", lambda c: c.b.read(c.live, dtype=str), E, ("numeric numpy dtype",)),
    ("read dtype U4", lambda c: c.b.read(c.live, dtype="U4"), E, ("numeric numpy dtype",)),
    ("read dtype nonsense", lambda c: c.b.read(c.live, dtype="nonsense"), E, ("numeric numpy dtype",)),
    ("read dtype void", lambda c: c.b.read(c.live, dtype=np.void), E, ("numeric numpy dtype",)),
    ("read partial element", lambda c: c.b.read(c.live, 0, 6, np.float32), E, ("whole number",)),
    ("read freed", lambda c: c.b.read(c.freed), BufferStateError, ("was freed",)),
    ("read foreign", lambda c: c.b.read(c.foreign), BufferOwnershipError, ("transfer",)),
    ("read None", lambda c: c.b.read(None), BufferOwnershipError, ("allocate it",)),  # type: ignore[arg-type]
    ("read_into list", lambda c: c.b.read_into(c.live, [0] * 16), E, ("numpy array to copy into", "np.empty")),  # type: ignore[arg-type]
    ("read_into bytearray", lambda c: c.b.read_into(c.live, bytearray(16)), E, ("numpy array to copy into",)),  # type: ignore[arg-type]
    ("read_into read-only", lambda c: c.b.read_into(c.live, _readonly(4)), E, ("read-only", "writable")),
    ("read_into strided", lambda c: c.b.read_into(c.live, np.empty(8, np.float32)[::2]), E, ("not C-contiguous",)),
    ("read_into objects", lambda c: c.b.read_into(c.live, np.empty(2, object)), E, ("Python objects", "numeric")),
    ("read_into masked", lambda c: c.b.read_into(c.live, np.ma.array(np.empty(4, np.float32))), E, ("numpy array to copy into",)),
    ("read_into too long", lambda c: c.b.read_into(c.live, np.empty(5, np.float32)), BufferStateError, ("outside",)),
    ("read_into past end", lambda c: c.b.read_into(c.live, np.empty(2, np.float32), 12), BufferStateError, ("outside",)),
    ("read_into offset str", lambda c: c.b.read_into(c.live, np.empty(1, np.float32), "0"), E, ("offset must be an int",)),  # type: ignore[arg-type]
    ("read_into freed", lambda c: c.b.read_into(c.freed, np.empty(4, np.float32)), BufferStateError, ("was freed",)),
    ("read_into foreign", lambda c: c.b.read_into(c.foreign, np.empty(4, np.float32)), BufferOwnershipError, ("transfer",)),
    ("read_many None item", lambda c: c.b.read_many([None]), BufferOwnershipError, ("allocate it",)),
    ("read_many 5-tuple", lambda c: c.b.read_many([(c.live, 0, 4, np.uint8, 1)]), E, ("tuple",)),
    ("read_many not iterable", lambda c: c.b.read_many(5), E, ("iterable",)),  # type: ignore[arg-type]
    # dispatch (host path): programs, inputs, configs, params
    ("dispatch None program", lambda c: c.b.dispatch(None, {}, c.cfg), InvalidProgram, ("ProgramBuilder",)),  # type: ignore[arg-type]
    ("dispatch str program", lambda c: c.b.dispatch("saxpy", {}, c.cfg), InvalidProgram, ("ProgramBuilder",)),  # type: ignore[arg-type]
    ("dispatch None inputs", lambda c: c.b.dispatch(saxpy(), None, c.cfg), E, ("dict",)),  # type: ignore[arg-type]
    ("dispatch int inputs", lambda c: c.b.dispatch(saxpy(), 5, c.cfg), E, ("dict",)),  # type: ignore[arg-type]
    ("dispatch None config", lambda c: c.b.dispatch(saxpy(), {}, None), E, ("DispatchConfig",)),  # type: ignore[arg-type]
    ("dispatch dict config", lambda c: c.b.dispatch(saxpy(), {}, {"grid": 1}), E, ("DispatchConfig",)),  # type: ignore[arg-type]
    ("list 1e40 for f32", lambda c: c.disp(x=[1e40] * 4), E, ("overflows f32", "wider type")),
    ("list None for f32", lambda c: c.disp(x=[None] * 4), E, ("none", "numbers only")),
    ("list of strings", lambda c: c.disp(x=["1", "2", "3", "4"]), E, ("numbers only",)),
    ("ragged list", lambda c: c.disp(x=[[1.0, 2.0], [3.0]]), E, ("ragged",)),
    ("list of objects", lambda c: c.disp(x=[object()] * 4), E, ("numbers only",)),
    ("masked array input", lambda c: c.disp(x=np.ma.array(np.zeros(4, np.float32), mask=[1, 0, 0, 0])), E, ("filled",)),
    ("wrong dtype input", lambda c: c.disp(x=np.zeros(4, np.float64)), E, ("astype",)),
    ("host output 2**40", lambda c: c.b.dispatch(_write_only(), {"o": 2**40}, DispatchConfig(grid=1)),
     OutOfDeviceMemory, ("smaller chunks",)),
    ("param str", lambda c: c.params(a="2.0"), E, ("not a number", "float(s)")),
    ("param None", lambda c: c.params(a=None), E, ("not a number",)),
    ("param list", lambda c: c.params(a=[1.0]), E, ("not a number",)),
    ("param 1e39 for f32", lambda c: c.params(a=1e39), E, ("overflows f32", "float('inf')")),
    ("param 10**400 for f32", lambda c: c.params(a=10**400), E, ("overflows f32",)),
    ("param missing", lambda c: c.params(), E, ("missing ['a']",)),
    ("param extra", lambda c: c.params(a=1.0, b=2.0), E, ("unexpected ['b']",)),
    ("param bool for f32", lambda c: c.params(a=True), E, ("is a bool",)),
    # resident dispatch, async, bind
    ("resident freed", lambda c: c.b.dispatch_with_device_buffers(saxpy(), [c.freed], [c.live], c.cfg),
     BufferStateError, ("was freed",)),
    ("resident foreign", lambda c: c.b.dispatch_with_device_buffers(saxpy(), [c.foreign], [c.live], c.cfg),
     BufferOwnershipError, ("transfer",)),
    ("resident None buffers", lambda c: c.b.dispatch_with_device_buffers(saxpy(), [None], [None], c.cfg),
     BufferOwnershipError, ("allocate it",)),
    ("resident ints", lambda c: c.b.dispatch_with_device_buffers(saxpy(), [1], [2], c.cfg),
     BufferOwnershipError, ("allocate it",)),
    ("resident count", lambda c: c.b.dispatch_with_device_buffers(saxpy(), [], [c.live], c.cfg),
     E, ("declaration order",)),
    ("resident None inputs", lambda c: c.b.dispatch_with_device_buffers(saxpy(), None, None, c.cfg),  # type: ignore[arg-type]
     E, ("buffers",)),
    ("resident bad config", lambda c: c.b.dispatch_with_device_buffers(saxpy(), [c.live], [c.live], 5),  # type: ignore[arg-type]
     E, ("DispatchConfig",)),
    ("async freed", lambda c: c.b.dispatch_async(saxpy(), [c.freed], [c.live], c.cfg),
     BufferStateError, ("was freed",)),
    ("async bad params", lambda c: c.b.dispatch_async(saxpy(), [c.live], [c.live], DispatchConfig(params={"a": 1e39})),
     E, ("overflows",)),
    ("bind foreign", lambda c: c.b.bind(saxpy(), [c.foreign], [c.live], c.cfg), BufferOwnershipError, ("transfer",)),
    ("bind None config", lambda c: c.b.bind(saxpy(), [c.live], [c.live], None), E, ("DispatchConfig",)),  # type: ignore[arg-type]
    # pipeline / run
    ("pipeline empty", lambda c: c.b.pipeline([]), E, ("at least one step",)),
    ("pipeline None step", lambda c: c.b.pipeline([None]), E, ("vyre.Step",)),  # type: ignore[list-item]
    ("pipeline freed", lambda c: c.b.pipeline([Step(saxpy(), [c.freed], [c.live], c.cfg)]),
     BufferStateError, ("was freed",)),
    ("pipeline bad param", lambda c: c.b.pipeline([Step(saxpy(), [c.live], [c.live], DispatchConfig(params={"a": "x"}))]),
     E, ("not a number",)),
    ("run repeat 0", lambda c: _pipe(c).run(0), E, ("repeat",)),
    ("run repeat str", lambda c: _pipe(c).run("2"), E, ("repeat",)),  # type: ignore[arg-type]
    ("run read None", lambda c: _pipe(c).run(read=[None]), BufferOwnershipError, ("allocate it",)),
    ("run read offset None", lambda c: _pipe(c).run(read=[(c.live, None)]), E, ("offset must be an int",)),
    ("run read dtype object", lambda c: _pipe(c).run(read=[(c.live, 0, None, object)]), E, ("numeric numpy dtype",)),
    # compile
    ("compile None", lambda c: c.b.compile(None), E, ("program",)),  # type: ignore[arg-type]
    ("compile 2^60 tree", lambda c: c.b.compile(_doubling()), InvalidProgram, ("MAX_NODES", "let")),
    # wire format
    ("from_json None", lambda c: from_json(None), InvalidProgram, ("str or bytes",)),  # type: ignore[arg-type]
    ("from_json int", lambda c: from_json(5), InvalidProgram, ("str or bytes",)),  # type: ignore[arg-type]
    ("from_json f32 1e400", lambda c: from_json(_const_doc("1" + "0" * 400)), InvalidProgram, ("overflows f32",)),
    ("from_json f32 1e39", lambda c: from_json(_const_doc("1e39")), InvalidProgram, ("overflows f32",)),
    ("from_json i32 2**40", lambda c: from_json(_const_doc(str(2**40), "i32")), InvalidProgram, ("does not fit",)),
    ("from_json 3.5M statements", lambda c: from_json(_with_body(['{"kind":"barrier"}'] * 1_100_000)),
     InvalidProgram, ("MAX_NODES", "objects")),
    ("to_json None", lambda c: to_json(None), InvalidProgram, ("Program",)),  # type: ignore[arg-type]
    ("to_json 2^60 tree", lambda c: to_json(_doubling()), InvalidProgram, ("MAX_NODES",)),
    ("to_json unchecked 2^60", lambda c: to_json(_doubling(), check=False), InvalidProgram, ("MAX_NODES",)),
    # ProgramBuilder
    ("builder name None", lambda c: ProgramBuilder(None).build(), InvalidProgram, ("name",)),  # type: ignore[arg-type]
    ("builder workgroup 0", lambda c: ProgramBuilder("w", workgroup_size=0).build(), InvalidProgram, ("workgroup",)),
    ("builder workgroup str", lambda c: ProgramBuilder("w", workgroup_size="64"), InvalidProgram, ("workgroup",)),  # type: ignore[arg-type]
    ("builder workgroup 2**40", lambda c: ProgramBuilder("w", workgroup_size=2**40).build(), InvalidProgram, ("workgroup",)),
    ("lit 10**400 f32", _builder_call(lambda k: k.lit(10**400, f32)), InvalidProgram, ("overflows f32",)),
    ("lit 1e39 f32", _builder_call(lambda k: k.lit(1e39, f32)), InvalidProgram, ("overflows f32",)),
    ("lit 2**40 u32", _builder_call(lambda k: k.lit(2**40, u32)), InvalidProgram, ("does not fit",)),
    ("lit str", _builder_call(lambda k: k.lit("2", f32)), InvalidProgram, ("not a number",)),
    ("lit None", _builder_call(lambda k: k.lit(None)), InvalidProgram, ("cannot be used",)),
    ("lit object", _builder_call(lambda k: k.lit(object())), InvalidProgram, ("cannot be used",)),
    ("buffer bad type", _builder_call(lambda k: k.buffer("x", "f128")), InvalidProgram, ("type",)),  # type: ignore[arg-type]
    ("buffer bad name", _builder_call(lambda k: k.buffer("1x", f32)), InvalidProgram, ("name",)),
    ("buffer None name", _builder_call(lambda k: k.buffer(None, f32)), InvalidProgram, ("name",)),  # type: ignore[arg-type]
    ("buffer bad access", _builder_call(lambda k: k.buffer("x", f32, "rw")), InvalidProgram, ("access",)),
    ("buffer count -1", _builder_call(lambda k: k.buffer("x", f32, count=-1)), InvalidProgram, ("count",)),
    ("param bad type", _builder_call(lambda k: k.param("a", None)), InvalidProgram, ("type",)),  # type: ignore[arg-type]
    # DispatchConfig
    ("config grid None", lambda c: DispatchConfig(grid=None), E, ("grid",)),
    ("config grid str", lambda c: DispatchConfig(grid="8"), E, ("grid",)),
    ("config grid 4 dims", lambda c: DispatchConfig(grid=(1, 1, 1, 1)), E, ("grid",)),
    ("config grid 0", lambda c: DispatchConfig(grid=0), E, ("grid",)),
    ("config grid nan", lambda c: DispatchConfig(grid=float("nan")), E, ("grid",)),
    ("config params None", lambda c: DispatchConfig(params=None), E, ("params",)),
    ("config params object", lambda c: DispatchConfig(params={"a": object()}), E, ("not a number",)),
    ("config unknown field", lambda c: DispatchConfig(grdi=1), E, ("grdi",)),
    ("config profile str", lambda c: DispatchConfig(profile="yes please"), E, ("profile",)),
    # transfer / free
    ("transfer None", lambda c: vyre.transfer(None, c.b), BufferOwnershipError, ("allocate_device_buffer",)),  # type: ignore[arg-type]
    ("transfer to None", lambda c: vyre.transfer(c.live, None), BackendUnavailable, ("get_backend",)),  # type: ignore[arg-type]
    ("transfer freed", lambda c: vyre.transfer(c.freed, c.b), BufferStateError, ("was freed",)),
    ("free None", lambda c: c.b.free(None), BufferOwnershipError, ("allocate it",)),  # type: ignore[arg-type]
    ("free foreign", lambda c: c.b.free(c.foreign), BufferOwnershipError, ("transfer",)),
    ("free int", lambda c: c.b.free(7), BufferOwnershipError, ("allocate it",)),  # type: ignore[arg-type]
]


def _extra_rows() -> list[Row]:
    """Rows kept in tests/hostile_rows_*.py (one file per area, each a `ROWS` list of the
    same (id, call(ctx), error class, phrases) rows), so the table grows without every
    area editing this file."""
    import importlib.util
    from pathlib import Path

    rows: list[Row] = []
    for path in sorted(Path(__file__).resolve().parent.glob("hostile_rows_*.py")):
        spec = importlib.util.spec_from_file_location(path.stem, path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        rows.extend(module.ROWS)
    return rows


TABLE += _extra_rows()


def _write_only() -> N.Program:
    k = ProgramBuilder("wo", workgroup_size=4)
    o = k.buffer("o", u32, "write")
    o[k.global_id()] = k.lit(1, u32)
    return k.build()


def _pipe(c: Ctx) -> Any:
    if "pipeline" not in c.b.capabilities().features:
        pytest.skip(f"{c.b.id} has no pipelines")
    return c.b.pipeline([Step(saxpy(), [c.live], [c.live], c.cfg)])


_INSTANCES: dict[str, tuple[BaseBackend, BaseBackend]] = {}


@pytest.fixture(scope="module", params=[n for n in ("reference", "wgpu", "cuda") if n in BACKENDS])
def table_ctx(request: pytest.FixtureRequest) -> Iterator[Ctx]:
    b = vyre.get_backend(request.param)
    foreign = vyre.get_backend("reference")
    ctx = Ctx(b, foreign)
    yield ctx
    for inst in (b, foreign):
        inst.close()


def assert_alive_vs_reference(b: BaseBackend) -> None:
    """A host dispatch gives the reference backend's answer, bit for bit."""
    x = np.linspace(-3, 3, 100, dtype=np.float32)
    y = np.full(100, 0.25, np.float32)
    cfg = DispatchConfig.for_elements(100, 64, params={"a": -1.5})
    with vyre.get_backend("reference") as ref:
        want = ref.dispatch(saxpy(), {"x": x, "y": y}, cfg)["y"]
    np.testing.assert_array_equal(b.dispatch(saxpy(), {"x": x, "y": y}, cfg)["y"], want)


@pytest.mark.parametrize("call,exc,phrases", [r[1:] for r in TABLE], ids=[r[0] for r in TABLE])
def test_hostile_table(table_ctx: Ctx, call: Callable[[Ctx], Any], exc: type[BackendError],
                       phrases: tuple[str, ...]) -> None:
    live_before = len(table_ctx.b.live_buffers())
    raises(exc, *phrases)(lambda: call(table_ctx))
    assert len(table_ctx.b.live_buffers()) == live_before, "an error left buffers behind"
    assert_alive_vs_reference(table_ctx.b)


class _FullDevice:
    """A wgpu device whose memory is exhausted (wgpu-native's own messages)."""

    def __init__(self, device: Any, message: str) -> None:
        self._device, self._message = device, message

    def __getattr__(self, name: str) -> Any:
        return getattr(self._device, name)

    def create_buffer(self, **kw: Any) -> Any:
        raise RuntimeError(f"Validation Error\n\nCaused by:\n  {self._message}")


@pytest.mark.skipif("wgpu" not in BACKENDS, reason="wgpu is not available here")
@pytest.mark.parametrize("message", ["Not enough memory left.", "Out of memory"])
def test_wgpu_out_of_memory_is_out_of_device_memory(message: str) -> None:
    """The README promises OutOfDeviceMemory, not DispatchError, when the device is full."""
    b = vyre.get_backend("wgpu")
    try:
        real = b.device
        b.device = _FullDevice(real, message)
        raises(OutOfDeviceMemory, "out of device memory", "free buffers")(
            lambda: b.allocate_device_buffer(1 << 20))
        b.device = real
        assert b.live_buffers() == []
        assert_alive_vs_reference(b)
    finally:
        b.close()


# ------------------------------------------------------------------ vyre bench --out


def _bench(out_dir: str) -> tuple[int, str]:
    import io

    from vyre.tools import cli

    buf = io.StringIO()
    rc = cli.main(["bench", "--quick", "--backend", "reference", "--no-peers",
                   "--workloads", "saxpy", "--repeat", "1", "--out", out_dir], out=buf)
    return rc, buf.getvalue()


def test_bench_out_unwritable_is_a_clear_error(tmp_path: Any) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    rc, text = _bench(str(blocker / "sub"))  # a directory under a regular file
    assert rc == 2 and "cannot write to the output directory" in text and "--out" in text


def test_bench_out_full_disk_is_a_clear_error(tmp_path: Any, monkeypatch: Any) -> None:
    """The disk fills up after the run: the figures are printed, then one clear line."""
    import errno

    from vyre.tools.bench import command

    def full(*_a: Any, **_k: Any) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(command, "write_json", full)
    rc, text = _bench(str(tmp_path))
    assert rc == 1
    assert "writing the results" in text and "No space left" in text and "--out" in text
    assert "Traceback" not in text


@pytest.mark.skipif(not __import__("os").path.exists("/dev/full"), reason="no /dev/full")
def test_bench_out_on_a_full_device_is_caught_up_front(tmp_path: Any) -> None:
    """/dev/full as the write probe's target: refused before any figure is measured."""
    import os

    d = tmp_path / "out"
    d.mkdir()
    os.symlink("/dev/full", d / ".vyre-bench-write-test")
    rc, text = _bench(str(d))
    assert rc == 2 and "No space left" in text
