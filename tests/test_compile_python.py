"""The shortcuts of vyre's own Python per cold compile give what the plain ways give.

A cold compile hashes the Program (and finds its expression facts on the same walk),
checks its features, lowers it and prints it; each shortcut below is compared with the
straightforward computation it replaces, on random Programs. (scripts/source_digests.py
compares every generated source between two checkouts.)
"""

from __future__ import annotations

import logging
import os
import re
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import pytest
from hypothesis import HealthCheck, given, settings

import vyre
from vyre.backend import BaseBackend
from vyre.backends.wgpu import expressions, fences, uniforms
from vyre.backends.wgpu import render as wgsl
from vyre.backends.wgpu.printer import WgslPrinter
from vyre.ir import analysis, digest, visit
from vyre.ir import nodes as N
from vyre.lower import Traits, lower, mangle
from vyre.tools.bench.vyre_impl import compile_probe_program
from vyre.tools.fuzz import GenOptions, programs

R = TypeVar("R")
SETTINGS = settings(max_examples=120, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@SETTINGS
@given(programs())
def test_the_hash_walk_finds_the_expression_facts(p: N.Program) -> None:
    fresh = p.model_copy()  # nothing derived yet
    assert "expr_facts" not in fresh.__dict__
    assert fresh.content_hash == p.content_hash
    assert fresh.__dict__["expr_facts"] == analysis.expr_facts(p)
    assert fresh.required_features == analysis.required_features(p)


def test_expression_facts_past_the_recursion_bound_are_walked_as_before() -> None:
    e: N.ExprNode = N.Builtin(name="subgroup_size")
    for _ in range(digest._RECURSION_MAX + 5):
        e = N.Unary(op="bit_not", a=e, ty=N.ScalarType.U32)
    p = N.Program(name="deep", buffers=(N.BufferDecl(name="o", ty=N.ScalarType.U32,
                                                     access="write"),),
                  body=(N.Store(buffer="o", index=N.Const(ty=N.ScalarType.U32, value=0),
                                value=e),))
    assert len(p.content_hash) == 64 and "expr_facts" not in p.__dict__
    assert p.expr_facts == analysis.expr_facts(p) and p.expr_facts.subgroups


_WHOLE_WORDS = re.compile(r"\bvy_(?:gid|lid|wid|nwg|lidx|sgsize)\b")


@SETTINGS
@given(programs(GenOptions(subgroup_multiple=32)))  # (core types: every one prints)
def test_builtins_read_are_the_whole_word_matches(p: N.Program) -> None:
    src = wgsl.generate(p).source
    assert wgsl._builtins_read(src) == set(_WHOLE_WORDS.findall(src))


def test_builtins_read_at_word_edges() -> None:
    for text in ("vy_gid.x", "xvy_gid.x", "_vy_lid vy_lidx", "v_vy_nwg(vy_wid.y)",
                 "évy_sgsize vy_sgsize1 (vy_sgsize)", "vy_lidxvy_lid", "9vy_gid", ""):
        assert wgsl._builtins_read(text) == set(_WHOLE_WORDS.findall(text)), text


@SETTINGS
@given(programs())
def test_uniform_layouts_by_shape_are_the_layouts(p: N.Program) -> None:
    names = tuple(mangle(x.name) for x in p.params)
    assert uniforms.layout_for(p, names) == uniforms._layout(p, names)


def test_mangled_names_are_injective_and_cached() -> None:
    names = ["a", "a_b", "a_1b", "lw.1", "lw_2e_1", "é", "_", "__", "x.y", "x_2e_y"]
    assert len({mangle(n) for n in names}) == len(names)
    assert [mangle(n) for n in names] == [mangle(n) for n in names]


def _in_threads(n: int, fn: Callable[[int], R]) -> list[R]:
    """[fn(0), ..., fn(n - 1)], computed by four threads at once (each index by one)."""
    got: dict[int, R] = {}
    errors: list[BaseException] = []

    def work(k: int) -> None:
        try:
            for i in range(k, n, 4):
                got[i] = fn(i)
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    return [got[i] for i in range(n)]


def test_cold_compiles_from_threads_agree_with_one_thread() -> None:
    """Concurrent cold compiles (shared layout, segment and mangling tables) give the
    sources one thread gives."""
    progs = [compile_probe_program(70_000 + i) for i in range(24)]
    alone = [wgsl.generate(p.model_copy()).source for p in progs]
    ref = vyre.get_backend("reference")

    def cold(i: int) -> str:
        p = progs[i].model_copy()
        ref.compile(p)
        return wgsl.generate(p).source

    assert _in_threads(len(progs), cold) == alone


def _nodes(p: N.Program) -> list[N.Node]:
    out: list[N.Node] = []
    for s in analysis.walk_stmts(p.body):
        out.append(s)
        for e in visit.stmt_exprs(s):
            out.extend(visit.walk_exprs(e))
    return out


@SETTINGS
@given(programs(), programs(GenOptions(subgroup_multiple=32)))
def test_made_nodes_are_the_nodes_pydantic_makes(p: N.Program, q: N.Program) -> None:
    """The lowering's unvalidated constructor (nodes.made) gives pydantic's node: the same
    fields in the same order, the same fields set; so is a Program's fast model_copy."""
    lowered = [lower(x, t) for x in (p, q) for t in (wgsl.TRAITS, wgsl.STRAIGHT_TRAITS)]
    for n in [*_nodes(p), *_nodes(q), *(m for x in lowered for m in _nodes(x))]:
        if isinstance(n, N.Const):
            continue  # (has a validator of its own: never made)
        given_ = {f: n.__dict__[f] for f in n.__pydantic_fields_set__}
        m = N.made(type(n), **given_)
        ref = type(n)(**given_)
        assert list(m.__dict__.items()) == list(ref.__dict__.items())
        assert m.__pydantic_fields_set__ == ref.__pydantic_fields_set__
        assert m.__pydantic_extra__ == ref.__pydantic_extra__
        assert m.__pydantic_private__ == ref.__pydantic_private__
        assert m == ref
    body = lowered[0].body
    fast = p.model_copy(update={"body": body})
    slow = N.Node.model_copy(p, update={"body": body})
    for key in N._DERIVED:
        slow.__dict__.pop(key, None)
    assert list(fast.__dict__.items()) == list(slow.__dict__.items())
    assert fast.__pydantic_fields_set__ == slow.__pydantic_fields_set__
    assert fast.content_hash == slow.model_copy().content_hash


@SETTINGS
@given(programs())
def test_rebuilt_expressions_are_with_children(p: N.Program) -> None:
    """The expression map's rebuild over new operands is the generic with_children."""
    for e in (n for n in _nodes(p) if not isinstance(n, N.STMT_TYPES)):
        kids = visit.children(e)
        if not kids:
            continue
        new = tuple(N.Var(name=f"k{i}", ty=k.ty) for i, k in enumerate(kids))
        a, b = visit._rebuilt(e, new), _with_children_by_isinstance(e, new)
        assert list(a.__dict__.items()) == list(b.__dict__.items())
        assert a.__pydantic_fields_set__ == b.__pydantic_fields_set__
        assert visit.with_children(e, kids) is e


def _with_children_by_isinstance(e: N.ExprNode, kids: tuple[N.ExprNode, ...]) -> N.ExprNode:
    """with_children as it was written before the field table (the plain way)."""
    if isinstance(e, N.Load):
        upd: dict[str, object] = {"index": kids[0]}
    elif isinstance(e, (N.Unary, N.Cast, N.Bitcast)):
        upd = {"a": kids[0]}
    elif isinstance(e, N.Binary):
        upd = {"a": kids[0], "b": kids[1]}
    elif isinstance(e, (N.Call, N.Native)):
        upd = {"args": tuple(kids)}
    elif isinstance(e, N.Subgroup):
        upd = {"value": kids[0]} if len(kids) == 1 else {"value": kids[0], "lane": kids[1]}
    else:
        assert isinstance(e, N.Select)
        upd = {"cond": kids[0], "a": kids[1], "b": kids[2]}
    return e.model_copy(update=upd)


@SETTINGS
@given(programs(), programs(GenOptions(subgroup_multiple=32)))
def test_content_hash_with_known_leaves_is_the_plain_digest(p: N.Program, q: N.Program) -> None:
    """Digests of operand-less nodes kept by value (digest._LEAF_DIGESTS, shared by all
    Programs) give the iterative digest's hash, and the same expression facts."""
    for x in (p, q, p.model_copy(), q.model_copy()):
        fresh = x.model_copy()
        assert fresh.content_hash == digest._dag_digest_iterative(x)
        assert fresh.__dict__["expr_facts"] == analysis.expr_facts(x)


def test_known_leaves_tell_values_that_compare_equal_apart() -> None:
    """1, True and 1.0 compare equal but are spelled apart by the digest: a leaf holding
    one of them is never taken for a leaf holding another (nor a name for a type)."""
    u32, f32 = N.ScalarType.U32, N.ScalarType.F32
    b = N.Builtin(name="global_id", axis=1)
    variants = [b, N.copied(b, {"axis": True}), N.copied(b, {"axis": 1.0}),
                N.Var(name="u32", ty=f32), N.Var(name="f32", ty=u32),
                N.copied(N.Var(name="x", ty=f32), {"name": 1}),
                N.copied(N.Var(name="x", ty=f32), {"name": True})]
    for _ in range(2):  # (the second round reads what the first kept)
        got = [N.dag_digest(v) for v in variants]
        assert got == [digest._dag_digest_iterative(v) for v in variants]
        assert len(set(got)) == len(got)


def _plain_reloaded_stores(body: tuple[N.StmtNode, ...]) -> set[int]:
    """fences.reloaded_stores as it was written before it computed only what a store
    asks: every statement's reads, from the last statement back."""
    out: set[int] = set()
    memo: dict[int, frozenset[str]] = {}

    def reads_from(body: tuple[N.StmtNode, ...], after: frozenset[str]) -> frozenset[str]:
        for s in reversed(body):
            if isinstance(s, (N.For, N.While)):
                after = after | fences._reads_in(s, memo)
                reads_from(s.body, after)
            elif isinstance(s, N.If):
                then = reads_from(s.then, after)
                orelse = reads_from(s.orelse, after)
                after = then | orelse | fences._expr_reads(s.cond, memo)
            else:
                if isinstance(s, N.Store) and s.buffer in after:
                    out.add(id(s))
                after = after | fences._reads_in(s, memo)
        return after

    reads_from(body, frozenset())
    return out


@SETTINGS
@given(programs(), programs(GenOptions(subgroup_multiple=32)))
def test_reloaded_stores_are_the_plain_ones(p: N.Program, q: N.Program) -> None:
    for x in (p, q):
        for traits in (wgsl.TRAITS, wgsl.STRAIGHT_TRAITS):
            body = lower(x, traits).body
            assert fences.reloaded_stores(body) == _plain_reloaded_stores(body)


def test_reloaded_stores_in_loops_and_branches() -> None:
    """Stores read back by a later statement, a loop around them, or neither."""
    f32, u32 = N.ScalarType.F32, N.ScalarType.U32
    zero, one = N.Const(ty=u32, value=0), N.Const(ty=f32, value=1.0)

    def store(buf: str) -> N.Store:
        return N.Store(buffer=buf, index=zero, value=one)

    def load(buf: str) -> N.Let:
        return N.Let(name=f"t_{buf}", value=N.Load(buffer=buf, index=zero, ty=f32))

    cond = N.Binary(op="lt", a=zero, b=N.Length(buffer="a"), ty=N.ScalarType.BOOL)
    a1, a2, b1, c1, c2 = store("a"), store("a"), store("b"), store("c"), store("c")
    body: tuple[N.StmtNode, ...] = (
        a1, N.If(cond=cond, then=(b1, load("a")), orelse=(c1,)),
        N.For(var="i", ty=u32, start=zero, end=N.Length(buffer="c"), body=(a2, load("c"), c2)),
        load("b"),
    )
    got = fences.reloaded_stores(body)
    assert got == _plain_reloaded_stores(body)
    # c2: its loop's next pass loads c; a2: nothing loads a after it
    assert got == {id(a1), id(b1), id(c1), id(c2)}


def _plain_invariant(e: N.ExprNode) -> int:
    """expressions._invariant as a plain recursion (no memo, no shortcut by type)."""
    if isinstance(e, (N.Builtin, N.Const)):
        return 1
    kids = visit.children(e)
    if (kids and e.ty in (N.ScalarType.U32, N.ScalarType.I32)
            and not isinstance(e, (N.Load, N.Subgroup, N.Call))):
        return 2 if all(_plain_invariant(k) for k in kids) else 0
    return 0


@SETTINGS
@given(programs(), programs(GenOptions(subgroup_multiple=32)))
def test_printer_shortcuts_by_class_are_the_isinstance_answers(p: N.Program,
                                                               q: N.Program) -> None:
    """FenceFlow.kinds by exact class is its isinstance chain; expressions._invariant is the
    plain recursion; on the nodes of lowered random Programs, with f32 locals of every
    kind in scope."""
    ctx = WgslPrinter(program=p, atomic=frozenset(), buffer_slot={}, arrays={})
    for x in (p, q):
        for traits in (wgsl.TRAITS, wgsl.STRAIGHT_TRAITS):
            nodes = _nodes(lower(x, traits))
            flow = fences.FenceFlow()
            kinds = [fences.OPAQUE, fences.VISIBLE, fences.TOP, frozenset({"fma:0"})]
            for i, n in enumerate(m for m in nodes if isinstance(m, N.Var)):
                flow.declare(n.name, kinds[i % len(kinds)])
            for e in (n for n in nodes if not isinstance(n, N.STMT_TYPES)):
                assert flow.kinds(e) == flow._kinds(e)
                assert expressions._invariant(ctx, e) == _plain_invariant(e)


def test_captured_wgpu_log_reuses_its_handler_and_keeps_captures_apart() -> None:
    """The capture around a compile (a handler reused per thread) collects what the block
    logs, nested captures too, and leaves the logger as it found it."""
    from vyre.backends.wgpu.adapter import captured_wgpu_log

    pytest.importorskip("wgpu")  # (first: it makes the "wgpu" logger of its own class)
    lg = logging.getLogger("wgpu")
    handlers, propagate = list(lg.handlers), lg.propagate
    for _ in range(2):  # (the second round reuses the first's handler)
        with captured_wgpu_log() as a:
            lg.error("first")
            with captured_wgpu_log() as b:
                lg.error("inner")
            lg.error("second")
        with captured_wgpu_log() as c:
            lg.error("third")
        assert a == ["first", "inner", "second"] and b == ["inner"] and c == ["third"]
        assert lg.handlers == handlers and lg.propagate == propagate

    def capture(i: int) -> list[str]:
        with captured_wgpu_log() as log:
            pass  # (a message from one thread reaches every capture open meanwhile)
        return log

    assert _in_threads(8, capture) == [[]] * 8 and lg.handlers == handlers


def test_known_constants_tell_their_values_apart() -> None:
    """A Const's digest is kept by its type and spelling: 0.0 / -0.0, 1 / True / 1.0 and
    NaNs (all spelled "nan") hash as the plain digest says, before and after being kept."""
    f32, i32, b = N.ScalarType.F32, N.ScalarType.I32, N.ScalarType.BOOL
    consts = [N.Const(ty=f32, value=0.0), N.Const(ty=f32, value=-0.0),
              N.Const(ty=f32, value=float("nan")), N.Const(ty=f32, value=-float("nan")),
              N.Const(ty=f32, value=float("inf")), N.Const(ty=i32, value=1),
              N.Const(ty=b, value=True), N.copied(N.Const(ty=i32, value=1), {"value": 1.0}),
              N.copied(N.Const(ty=i32, value=1), {"value": True})]
    for _ in range(2):
        got = [N.dag_digest(c) for c in consts]
        assert got == [digest._dag_digest_iterative(c) for c in consts]
    assert len(set(got)) == len(got) - 1  # (the two NaNs are spelled alike)


def test_content_hashes_from_threads_are_the_plain_digests() -> None:
    """The shared tables of the hash (leaf digests, layouts, segments) filled from four
    threads at once give every Program its plain digest."""
    progs = [compile_probe_program(90_000 + i) for i in range(40)]
    want = [digest._dag_digest_iterative(p) for p in progs]
    assert _in_threads(len(progs), lambda i: progs[i].model_copy().content_hash) == want


@SETTINGS
@given(programs(), programs(GenOptions(subgroup_multiple=32)))
def test_lowering_with_cached_facts_is_the_lowering_without(p: N.Program, q: N.Program) -> None:
    """What the lowering skips on a Program's cached facts (the assignments the index
    facts look for, the walk for a Guarded before the rule made one) changes nothing: a
    copy without them lowers to the same Program."""
    for x in (p, q):
        _ = x.content_hash  # (its facts cached)
        for traits in (wgsl.TRAITS, wgsl.STRAIGHT_TRAITS, Traits(guarded_expr=True)):
            bare = x.model_copy()
            assert "expr_facts" not in bare.__dict__
            assert lower(x, traits) == lower(bare, traits)


def test_the_python_split_script_runs(backends: dict[str, BaseBackend]) -> None:
    """scripts/wgpu_compile_python.py (vyre's Python per cold compile, the driver left
    out) runs, warm and --cold, and reports every row."""
    if "wgpu" not in backends:
        pytest.skip("needs a wgpu adapter (lavapipe in CI)")
    root = Path(__file__).resolve().parents[1]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(root), *filter(None, [os.environ.get("PYTHONPATH")])])}
    for extra in ([], ["--cold"]):
        res = subprocess.run([sys.executable, str(root / "scripts" / "wgpu_compile_python.py"),
                              "--rounds", "3", *extra],
                             env=env, capture_output=True, text=True, timeout=300)
        assert res.returncode == 0, res.stdout + res.stderr
        for row in ("compile(), driver left out", "stage: content hash",
                    "stage: feature/limit checks", "stage: generate = lower + WGSL"):
            assert row in res.stdout, res.stdout
