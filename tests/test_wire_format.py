"""The JSON wire format: exact round trips (special floats included), a stable content hash,
and hostile documents rejected with InvalidProgram (never RecursionError or pydantic)."""

from __future__ import annotations

import json
import math
import os
import struct
import subprocess
import sys
import textwrap
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import vyre
from vyre import InvalidProgram, ProgramBuilder, f32, u32
from vyre.ir import digest, from_json, to_json
from vyre.ir import nodes as N
from vyre.ir.serialize import VERSION
from vyre.tools.fuzz import programs

SETTINGS = settings(max_examples=150, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def saxpy() -> N.Program:
    k = ProgramBuilder("saxpy", workgroup_size=256)
    x, y = k.buffer("x", f32), k.buffer("y", f32, "read_write")
    a = k.param("a", f32)
    i = k.global_linear_id()
    with k.if_(i < y.length()):
        y[i] = a * x[i] + y[i]
    return k.build()


def special_floats() -> N.Program:
    k = ProgramBuilder("specials", workgroup_size=(8, 8))
    out = k.buffer("out", f32, "write")
    for j, v in enumerate([float("nan"), float("inf"), float("-inf"), -0.0, 0.0,
                           3.4028234663852886e38, 1.401298464324817e-45, -1.5]):
        out[j] = k.lit(v, f32)
    return k.build()


def consts(p: N.Program) -> list[float]:
    return [s.value.value for s in p.body]  # type: ignore[union-attr]


def bits(x: float) -> int:
    return int(struct.unpack("<I", struct.pack("<f", x))[0])


def test_saxpy_round_trip_exact() -> None:
    p = saxpy()
    text = to_json(p)
    doc = json.loads(text)
    assert doc["format"] == "vyre.program" and doc["version"] == VERSION == 1
    assert set(doc) == {"format", "version", "program"}
    q = from_json(text)
    assert q == p and q.content_hash == p.content_hash
    assert to_json(q) == text
    assert from_json(text.encode()) == p  # bytes too
    assert vyre.from_json is from_json and vyre.to_json is to_json


def test_special_floats_survive_bit_exactly() -> None:
    p = special_floats()
    q = from_json(to_json(p))
    before, after = consts(p), consts(q)
    assert math.isnan(after[0])
    assert after[1] == math.inf and after[2] == -math.inf
    assert after[3] == 0.0 and math.copysign(1.0, after[3]) == -1.0  # -0.0 keeps its sign
    assert math.copysign(1.0, after[4]) == 1.0
    assert [bits(v) for v in after[1:]] == [bits(v) for v in before[1:]]
    assert q == p and q.content_hash == p.content_hash
    assert p.content_hash != _replace_neg_zero(p).content_hash


def _replace_neg_zero(p: N.Program) -> N.Program:
    body = list(p.body)
    s = body[3]
    assert isinstance(s, N.Store)
    body[3] = N.Store(buffer=s.buffer, index=s.index, value=N.Const(ty=N.ScalarType.F32, value=0.0))
    return p.model_copy(update={"body": tuple(body)})


@SETTINGS
@given(programs())
def test_random_programs_round_trip(p: N.Program) -> None:
    text = to_json(p)
    q = from_json(text)
    assert q == p
    assert q.content_hash == p.content_hash
    assert to_json(q) == text


# ------------------------------------------------------------------ content hash

_HASH_SNIPPET = textwrap.dedent("""
    from vyre import ProgramBuilder, f32
    k = ProgramBuilder("saxpy", workgroup_size=256)
    x, y = k.buffer("x", f32), k.buffer("y", f32, "read_write")
    a = k.param("a", f32)
    i = k.global_linear_id()
    with k.if_(i < y.length()):
        y[i] = a * x[i] + y[i]
    print(k.build().content_hash)
""")


def test_content_hash_identical_across_processes() -> None:
    here = saxpy().content_hash
    assert len(here) == 64 and int(here, 16) >= 0
    for seed in ("0", "12345"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        out = subprocess.run([sys.executable, "-c", _HASH_SNIPPET], capture_output=True,
                             text=True, env=env, check=True, timeout=120)
        assert out.stdout.strip() == here


def test_content_hash_equal_and_different() -> None:
    assert saxpy().content_hash == saxpy().content_hash
    assert saxpy() == saxpy() and hash(saxpy()) == hash(saxpy())
    other = saxpy().model_copy(update={"workgroup_size": (128, 1, 1)})
    assert other.content_hash != saxpy().content_hash
    renamed = saxpy().model_copy(update={"name": "saxpy2"})
    assert renamed.content_hash != saxpy().content_hash


def test_content_hash_algorithm_is_pinned() -> None:
    """The hash keys the on-disk compile caches and heads every generated WGSL source: a
    change of its algorithm must be deliberate (update this value, say caches are void)."""
    assert saxpy().content_hash == (
        "170b152f3ee6c65c4e0f2adb0a13882648143baf1a45a09d9ecc45ae819f0565")
    assert special_floats().content_hash == digest._dag_digest_iterative(special_floats())


@SETTINGS
@given(programs())
def test_content_hash_fast_path_equals_the_iterative_one(p: N.Program) -> None:
    """The recursive digest (inlined field spellings) and the iterative post-order one are
    the same function; the latter takes over past the recursion bound."""
    assert N.dag_digest(p) == digest._dag_digest_iterative(p)


def test_content_hash_past_the_recursion_bound_is_the_same_function() -> None:
    def nested(depth: int) -> N.Program:
        e: Any = N.Const(ty=N.ScalarType.I32, value=1)
        for _ in range(depth):
            e = N.Unary(op="neg", a=e, ty=N.ScalarType.I32)
        return N.Program(name="deep", buffers=(N.BufferDecl(name="o", ty=N.ScalarType.I32,
                                                            access="write"),),
                         body=(N.Store(buffer="o", index=N.Const(ty=u32, value=0), value=e),))

    for depth in (digest._RECURSION_MAX - 3, digest._RECURSION_MAX + 3, 5000):
        p = nested(depth)
        assert N.dag_digest(p) == digest._dag_digest_iterative(p)
    assert nested(1000).content_hash != nested(1001).content_hash


# ------------------------------------------------------------------ hostile documents


def doc(**program: Any) -> dict[str, Any]:
    d = json.loads(to_json(saxpy()))
    d["program"].update(program)
    return d


def rejects(text: str | bytes, *fragments: str) -> str:
    with pytest.raises(InvalidProgram) as info:
        from_json(text)
    msg = str(info.value)
    for frag in fragments:
        assert frag in msg, f"{frag!r} not in {msg!r}"
    return msg


def test_future_version() -> None:
    d = doc()
    d["version"] = 2
    rejects(json.dumps(d), "version 2 is newer than this vyre understands (1); upgrade vyre")
    d["program"] = {"kind": "something-from-the-future"}
    rejects(json.dumps(d), "version 2 is newer")


@pytest.mark.parametrize(
    ("mutate", "fragment"),
    [
        (lambda d: d.update(version=0), "version 0 does not exist"),
        (lambda d: d.update(version="1"), "version must be an integer"),
        (lambda d: d.update(version=True), "version must be an integer"),
        (lambda d: d.update(format="vyre.kernel"), "format tag is 'vyre.kernel'"),
        (lambda d: d.pop("format"), "format tag is None"),
        (lambda d: d.pop("program"), "no 'program'"),
        (lambda d: d.update(program=[]), "'program' must be an object"),
        (lambda d: d.update(extra=1), "unknown top-level field(s) ['extra']"),
        (lambda d: d["program"].update(workgroup_size="64"), "workgroup_size"),
        (lambda d: d["program"].update(name=7), "program.name"),
        (lambda d: d["program"].update(colour="blue"), "Extra inputs"),
        (lambda d: d["program"]["buffers"][0].update(ty="i33"), "buffers[0].ty"),
        (lambda d: d["program"]["buffers"][0].update(count=True), "buffers[0].count"),
        (lambda d: d["program"]["buffers"][0].update(access="rw"), "access"),
        (lambda d: d["program"]["body"].append({"kind": "frobnicate"}), "frobnicate"),
        (lambda d: d["program"]["body"].append({"kind": "barrier", "x": 1}), "Extra inputs"),
        (lambda d: d["program"]["body"].append({"kind": "break"}), "break outside a loop"),
        (lambda d: d["program"]["body"].append(
            {"kind": "for", "var": "q", "ty": "u32", "start": {"kind": "const", "ty": "u32",
             "value": 0}, "end": {"kind": "const", "ty": "u32", "value": 1}, "step": 1.0}),
         "step"),
        (lambda d: d["program"]["body"].append(
            {"kind": "store", "buffer": "y", "index": {"kind": "const", "ty": "u32",
             "value": "3"}, "value": {"kind": "const", "ty": "f32", "value": 1.0}}),
         "body[1].index"),
        (lambda d: d["program"]["body"].append(
            {"kind": "store", "buffer": "y", "index": {"kind": "const", "ty": "u32",
             "value": 0}, "value": {"kind": "const", "ty": "f32", "value": True}}),
         "bool"),
    ],
)
def test_bad_documents(mutate: Any, fragment: str) -> None:
    d = doc()
    mutate(d)
    rejects(json.dumps(d), fragment)


def test_invalid_program_in_a_well_formed_document() -> None:
    d = doc()
    d["program"]["body"].append({"kind": "if", "cond": {
        "kind": "binary", "op": "lt", "a": {"kind": "builtin", "name": "local_id", "axis": 0,
                                            "ty": "u32"},
        "b": {"kind": "const", "ty": "u32", "value": 1}, "ty": "bool"},
        "then": [{"kind": "barrier"}], "orelse": []})
    rejects(json.dumps(d), "body[1].then[0] (barrier)", "non-uniform")


def test_not_json() -> None:
    rejects("", "empty")
    rejects("   ", "empty")
    rejects("{'format': 1}", "malformed JSON")
    rejects("nonsense", "malformed JSON")
    rejects(b"\xff\xfe{}", "not UTF-8")
    rejects("[]", "expected a JSON object", "an array")
    rejects("null", "got null")
    rejects('"vyre.program"', "a string")
    with pytest.raises(InvalidProgram, match="str or bytes"):
        from_json(12)  # type: ignore[arg-type]


def test_every_truncation_is_rejected_cleanly() -> None:
    text = to_json(special_floats())
    for cut in range(len(text)):
        with pytest.raises(InvalidProgram) as info:
            from_json(text[:cut])
        msg = str(info.value)
        assert "wire format" in msg
    assert "truncated" in rejects(text[: len(text) // 2])


@pytest.mark.parametrize("opener", ["[", '{"a":', '{"format":"vyre.program","version":1,"program":'])
def test_100k_deep_nesting(opener: str) -> None:
    text = opener * 100_000
    rejects(text, "nested too deeply")
    closer = {"[": "]", '{"a":': "}"}.get(opener, "}")
    rejects(text + "1" + closer * 100_000, "nested too deeply")


def test_deep_program_nesting_in_json() -> None:
    def chain(k: int) -> dict[str, Any]:
        e: dict[str, Any] = {"kind": "const", "ty": "i32", "value": 1}
        for _ in range(k):
            e = {"kind": "unary", "op": "neg", "a": e, "ty": "i32"}
        return e

    def wrap(k: int) -> str:
        d = doc()
        d["program"]["body"] = [{"kind": "store", "buffer": "y", "index": {
            "kind": "const", "ty": "u32", "value": 0},
            "value": {"kind": "cast", "a": chain(k), "ty": "f32"}}]
        return json.dumps(d)

    assert isinstance(from_json(wrap(60)), N.Program)
    rejects(wrap(100), "MAX_DEPTH")  # parses, but is deeper than the IR allows
    # 100k nested unary nodes (built as text: json.dumps itself would recurse too deep)
    head, tail = wrap(0).split('{"kind": "const", "ty": "i32", "value": 1}')
    node = '{"kind": "unary", "op": "neg", "ty": "i32", "a": '
    deep = head + node * 100_000 + '{"kind": "const", "ty": "i32", "value": 1}' + "}" * 100_000
    rejects(deep + tail, "nested too deeply")


def test_integral_float_for_an_integer_constant_reads_as_the_integer() -> None:
    d = doc()
    d["program"]["body"].append(
        {"kind": "store", "buffer": "y", "index": {"kind": "const", "ty": "u32", "value": 1.0},
         "value": {"kind": "const", "ty": "f32", "value": 1.0}})
    p = from_json(json.dumps(d))
    index = p.body[1].index  # type: ignore[union-attr]
    assert isinstance(index, N.Const) and index.value == 1 and type(index.value) is int
    d["program"]["body"][1]["index"]["value"] = 1.5
    rejects(json.dumps(d), "not an integer")


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_mutated_documents_never_escape(data: st.DataObject) -> None:
    text = to_json(saxpy()).encode()
    pos = data.draw(st.integers(0, len(text) - 1))
    action = data.draw(st.sampled_from(["flip", "delete", "insert", "truncate"]))
    byte = data.draw(st.integers(0, 255))
    if action == "flip":
        mutated = text[:pos] + bytes([byte]) + text[pos + 1:]
    elif action == "delete":
        mutated = text[:pos] + text[pos + 1:]
    elif action == "insert":
        mutated = text[:pos] + bytes([byte]) + text[pos:]
    else:
        mutated = text[:pos]
    try:
        result = from_json(mutated)
    except InvalidProgram:
        return
    assert isinstance(result, N.Program)
    vyre.validate(result)


def test_to_json_validates_unless_told_not_to() -> None:
    bad = N.Program(name="bad", body=(N.Break(),))
    with pytest.raises(InvalidProgram, match="break outside a loop"):
        to_json(bad)
    text = to_json(bad, check=False)
    with pytest.raises(InvalidProgram, match="break outside a loop"):
        from_json(text)
    with pytest.raises(InvalidProgram, match="needs a vyre Program"):
        to_json("x")  # type: ignore[arg-type]


def test_indent_and_u32_extremes() -> None:
    k = ProgramBuilder("ext")
    o = k.buffer("o", u32, "write")
    o[0] = k.lit(2**32 - 1, u32)
    o[1] = k.lit(0, u32)
    p = k.build()
    pretty = to_json(p, indent=2)
    assert "\n" in pretty
    assert from_json(pretty) == p


def test_deepest_valid_programs_round_trip() -> None:
    """A Program at MAX_DEPTH stays well inside the JSON parser's nesting limit."""
    from vyre.ir.validate import MAX_DEPTH

    true = N.Const(ty=N.ScalarType.BOOL, value=True)
    stmt: Any = N.If(cond=true)
    for _ in range(MAX_DEPTH - 2):
        stmt = N.If(cond=true, then=(stmt,))
    ifs = N.Program(name="ifs", body=(stmt,))
    # fma args: each level is an object inside an array (two JSON levels per IR level)
    e: Any = N.Const(ty=N.ScalarType.F32, value=1.0)
    two = N.Const(ty=N.ScalarType.F32, value=2.0)
    for _ in range(MAX_DEPTH - 2):
        e = N.Call(fn="fma", args=(two, two, e), ty=N.ScalarType.F32)
    calls = N.Program(name="calls", buffers=(N.BufferDecl(name="o", ty=f32, access="write"),),
                      body=(N.Store(buffer="o", index=N.Const(ty=u32, value=0), value=e),))
    for p in (ifs, calls):
        vyre.validate(p)
        assert from_json(to_json(p)) == p


def test_absurdly_deep_program_hashes_but_is_refused_cleanly() -> None:
    e: Any = N.Const(ty=N.ScalarType.I32, value=1)
    for _ in range(20_000):
        e = N.Unary(op="neg", a=e, ty=N.ScalarType.I32)
    p = N.Program(name="deep", buffers=(N.BufferDecl(name="o", ty=N.ScalarType.I32,
                                                     access="write"),),
                  body=(N.Store(buffer="o", index=N.Const(ty=u32, value=0), value=e),))
    assert len(p.content_hash) == 64  # iterative: no recursion limit, no error
    with pytest.raises(InvalidProgram, match="MAX_DEPTH"):
        vyre.validate(p)
    with pytest.raises(InvalidProgram, match="MAX_DEPTH"):
        to_json(p)


def _doubled(times: int, shared: bool) -> N.Program:
    """y[0] = x + x + ... (2^times leaves), the subexpression shared or rebuilt each time."""
    def load() -> Any:
        return N.Load(buffer="y", index=N.Const(ty=u32, value=0), ty=N.ScalarType.F32)

    def build(k: int) -> Any:
        if k == 0:
            return load()
        if shared:
            e = build(k - 1)
            return N.Binary(op="add", a=e, b=e, ty=N.ScalarType.F32)
        return N.Binary(op="add", a=build(k - 1), b=build(k - 1), ty=N.ScalarType.F32)

    return N.Program(name="doubled", buffers=(N.BufferDecl(name="y", ty=N.ScalarType.F32,
                                                           access="read_write"),),
                     body=(N.Store(buffer="y", index=N.Const(ty=u32, value=0),
                                   value=build(times)),))


def test_content_hash_is_linear_in_distinct_nodes() -> None:
    """x = x + x sixty times hashes at once (a 2^60-node tree); compile and to_json refuse
    it by the node limit at once instead of dumping the tree."""
    import time

    p = _doubled(60, shared=True)
    t0 = time.perf_counter()
    assert len(p.content_hash) == 64
    with pytest.raises(InvalidProgram, match="MAX_NODES"):
        vyre.validate(p)
    with pytest.raises(InvalidProgram, match="MAX_NODES"):
        to_json(p, check=False)
    with pytest.raises(InvalidProgram, match="MAX_NODES"):
        vyre.get_backend("reference").compile(p)
    assert time.perf_counter() - t0 < 10
    # equal programs hash equal however their nodes are shared
    assert _doubled(8, shared=True).content_hash == _doubled(8, shared=False).content_hash
    assert _doubled(8, shared=True) == _doubled(8, shared=False)
    assert _doubled(8, shared=True).content_hash != _doubled(9, shared=True).content_hash


def test_millions_of_statements_are_refused_before_parsing() -> None:
    """A 60 MB document of 3.5M trivial statements: refused by count in well under a
    second (it took 22 s and 3.2 GB when it was parsed and built first)."""
    import time

    body = ",".join(['{"kind":"barrier"}'] * 3_500_000)
    doc = ('{"format":"vyre.program","version":1,"program":{"name":"x","body":['
           + body + "]}}")
    t0 = time.perf_counter()
    with pytest.raises(InvalidProgram, match="MAX_NODES"):
        from_json(doc)
    assert time.perf_counter() - t0 < 2
