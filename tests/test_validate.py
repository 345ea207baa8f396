"""The validator rejects every class of invalid Program (built directly from nodes) with an
InvalidProgram naming the node (path + kind), and accepts valid ones (docs/IR.md)."""

from __future__ import annotations

import time
from typing import Any

import pytest

from vyre.errors import InvalidProgram
from vyre.ir import nodes as N
from vyre.ir import validate
from vyre.ir.types import ScalarType
from vyre.ir.validate import MAX_DEPTH, MAX_NODES

B, I32, U32, F32 = ScalarType.BOOL, ScalarType.I32, ScalarType.U32, ScalarType.F32
I64, F64 = ScalarType.I64, ScalarType.F64

BUFFERS = (
    N.BufferDecl(name="x", ty=F32, access="read"),
    N.BufferDecl(name="y", ty=F32, access="read_write"),
    N.BufferDecl(name="o", ty=U32, access="write"),
    N.BufferDecl(name="r", ty=U32, access="read_write"),
    N.BufferDecl(name="ri", ty=I32, access="read_write"),
    N.BufferDecl(name="rin", ty=U32, access="read"),
)
PARAMS = (N.ParamDecl(name="a", ty=F32), N.ParamDecl(name="n", ty=U32))
ARRAYS = (N.WorkgroupArray(name="tile", ty=U32, count=64),)


def u(v: int) -> N.Const:
    return N.Const(ty=U32, value=v)


def i(v: int) -> N.Const:
    return N.Const(ty=I32, value=v)


def f(v: float) -> N.Const:
    return N.Const(ty=F32, value=v)


TRUE = N.Const(ty=B, value=True)
GID = N.Builtin(name="global_id")
LID = N.Builtin(name="local_id")
WID = N.Builtin(name="workgroup_id")


def var(name: str, ty: ScalarType = U32) -> N.Var:
    return N.Var(name=name, ty=ty)


def lt(a: Any, b: Any) -> N.Binary:
    return N.Binary(op="lt", a=a, b=b, ty=B)


def add(a: Any, b: Any) -> N.Binary:
    return N.Binary(op="add", a=a, b=b, ty=a.ty)


def store(value: Any, buf: str = "r", index: Any = None) -> N.Store:
    return N.Store(buffer=buf, index=index if index is not None else u(0), value=value)


def prog(*body: Any, **kw: Any) -> N.Program:
    kw.setdefault("buffers", BUFFERS)
    kw.setdefault("params", PARAMS)
    kw.setdefault("workgroup_arrays", ARRAYS)
    return N.Program(name=kw.pop("name", "t"), body=tuple(body), **kw)


def rejects(p: N.Program, *fragments: str, node: str | None = None) -> InvalidProgram:
    with pytest.raises(InvalidProgram) as info:
        validate(p)
    msg = str(info.value)
    for frag in fragments:
        assert frag in msg, f"{frag!r} not in {msg!r}"
    if node is not None:
        assert info.value.node is not None
        assert info.value.node.split(" (")[0] == node, info.value.node
    return info.value


# ------------------------------------------------------------------ valid programs


def test_valid_saxpy_from_nodes_passes_and_is_cached() -> None:
    gi = GID
    p = prog(N.If(cond=lt(gi, N.Length(buffer="y")), then=(
        N.Store(buffer="y", index=gi, value=add(
            N.Binary(op="mul", a=N.Param(name="a", ty=F32), b=N.Load(buffer="x", index=gi, ty=F32),
                     ty=F32),
            N.Load(buffer="y", index=gi, ty=F32))),
    )))
    validate(p)
    t0 = time.perf_counter()
    for _ in range(1000):
        validate(p)  # cached by identity
    assert time.perf_counter() - t0 < 0.5


def test_error_names_path_and_kind() -> None:
    p = prog(N.If(cond=TRUE, then=(store(N.Binary(op="add", a=u(1), b=i(1), ty=U32)),)))
    err = rejects(p, "u32 and i32", "cast", node="body[0].then[0].value")
    assert err.node == "body[0].then[0].value (binary add)"
    assert str(err).startswith("body[0].then[0].value (binary add): ")


# ------------------------------------------------------------------ types


@pytest.mark.parametrize(
    ("expr", "fragment"),
    [
        (N.Binary(op="add", a=u(1), b=u(2), ty=F32), "make it u32"),
        (N.Binary(op="lt", a=u(1), b=u(2), ty=U32), "make it bool"),
        (N.Binary(op="logical_and", a=u(1), b=u(2), ty=B), "needs bool operands"),
        (N.Binary(op="and", a=f(1), b=f(2), ty=F32), "needs integers"),
        (N.Binary(op="lt", a=TRUE, b=TRUE, ty=B), "not defined on bool"),
        (N.Binary(op="add", a=TRUE, b=TRUE, ty=B), "needs numbers"),
        (N.Binary(op="shl", a=u(1), b=i(2), ty=U32), "must be u32"),
        (N.Binary(op="shr", a=f(1), b=u(2), ty=F32), "integer left operand"),
        (N.Unary(op="neg", a=u(1), ty=U32), "0 - x"),
        (N.Unary(op="not", a=u(1), ty=U32), "needs bool"),
        (N.Unary(op="bit_not", a=f(1), ty=F32), "needs an integer"),
        (N.Unary(op="neg", a=i(1), ty=U32), "make it i32"),
        (N.Call(fn="sqrt", args=(u(1),), ty=U32), "needs a float"),
        (N.Call(fn="pow", args=(f(1),), ty=F32), "takes 2"),
        (N.Call(fn="clamp", args=(u(1), i(0), u(2)), ty=U32), "share one type"),
        (N.Call(fn="abs", args=(TRUE,), ty=B), "needs numbers"),
        (N.Call(fn="abs", args=(f(1),), ty=U32), "make it f32"),
        (N.Select(cond=u(1), a=u(1), b=u(2), ty=U32), "not bool"),
        (N.Select(cond=TRUE, a=u(1), b=i(2), ty=U32), "share one"),
        (N.Load(buffer="x", index=u(0), ty=U32), "load from 'x' has ty u32"),
        (N.Load(buffer="rin", index=i(0), ty=U32), "index must be u32"),
        (N.Load(buffer="nope", index=u(0), ty=U32), "not a declared buffer"),
        (N.Load(buffer="n", index=u(0), ty=U32), "not a declared buffer"),
        (N.Length(buffer="x", ty=I32), "make it u32"),
        (N.Length(buffer="nope"), "not a declared buffer"),
        (N.Param(name="a", ty=U32), "param 'a' has ty u32"),
        (N.Param(name="x", ty=F32), "not declared"),
        (N.Builtin(name="global_id", ty=I32), "make it u32"),
        (N.Bitcast(a=u(1), ty=I64), "one width"),
        (N.Bitcast(a=TRUE, ty=U32), "one width"),
        (N.Cast(a=f(1), ty=I32), "store of a i32"),
    ],
)
def test_expression_type_errors(expr: Any, fragment: str) -> None:
    err = rejects(prog(store(expr)), fragment)
    assert err.node is not None and err.node.startswith("body[0].value"), err.node


def test_nested_operand_path() -> None:
    bad = N.Binary(op="add", a=u(1), b=N.Unary(op="neg", a=u(1), ty=U32), ty=U32)
    rejects(prog(store(bad)), "negation", node="body[0].value.b")
    bad_call = N.Call(fn="fma", args=(f(1), f(2), N.Cast(a=TRUE, ty=U32)), ty=F32)
    rejects(prog(store(bad_call, "y")), "share one type", node="body[0].value")


def test_legal_casts_and_bitcasts() -> None:
    exprs = [N.Cast(a=TRUE, ty=F32), N.Cast(a=N.Cast(a=f(1.5), ty=B), ty=F32),
             N.Bitcast(a=N.Bitcast(a=u(7), ty=F32), ty=F32), N.Cast(a=f(float("nan")), ty=F32)]
    validate(prog(*[store(e, "y") for e in exprs]))


def test_statement_type_errors() -> None:
    rejects(prog(store(f(1))), "store of a f32 value into 'r'", node="body[0].value")
    rejects(prog(N.Store(buffer="r", index=f(0), value=u(1))), "index must be u32",
            node="body[0].index")
    rejects(prog(N.If(cond=u(1))), "if condition is u32", node="body[0].cond")
    rejects(prog(N.While(cond=f(1))), "while condition is f32", node="body[0].cond")
    rejects(prog(N.Let(name="v", value=u(1)), N.Assign(name="v", value=i(1))),
            "assign of a i32", node="body[1]")


def test_for_loop_rules() -> None:
    ok = N.For(var="k", ty=I32, start=i(0), end=i(4), step=2,
               body=(store(N.Bitcast(a=var("k", I32), ty=U32)),))
    validate(prog(ok))
    rejects(prog(N.For(var="k", ty=F32, start=f(0), end=f(4))), "must be i32 or u32",
            node="body[0]")
    rejects(prog(N.For(var="k", ty=U32, start=i(0), end=u(4))), "start is i32",
            node="body[0].start")
    rejects(prog(N.For(var="k", ty=U32, start=u(0), end=i(4))), "end is i32",
            node="body[0].end")
    rejects(prog(N.For(var="k", ty=U32, start=u(0), end=u(4), step=0)), "step 0")
    rejects(prog(N.For(var="k", ty=I32, start=i(0), end=i(4), step=2**31)), "1..2147483647")
    validate(prog(N.For(var="k", ty=U32, start=u(0), end=u(4), step=2**32 - 1)))


# ------------------------------------------------------------------ atomics


def test_atomic_rules() -> None:
    def at(op: Any, buf: str = "r", value: Any = None, comparand: Any = None,
           **kw: Any) -> N.Program:
        return prog(N.Atomic(op=op, buffer=buf, index=u(0),
                             value=value if value is not None else u(1),
                             comparand=comparand, result="old"),
                    store(var("old", kw.get("ty", U32)), kw.get("out", "r")), **kw.get("p", {}))

    for op in ("add", "min", "max", "and", "or", "xor", "exchange"):
        validate(at(op))
    validate(at("compare_exchange", comparand=u(3)))
    validate(at("add", "tile"))
    validate(at("add", "y", f(1.0), ty=F32, out="y"))
    rejects(at("min", "y", f(1.0), ty=F32, out="y"), "only atomic add exists for floats (f32, f64)")
    i64p = {"buffers": (*BUFFERS, N.BufferDecl(name="big", ty=I64, access="read_write"))}
    validate(at("max", "big", N.Const(ty=I64, value=-(2**40)), ty=I64, out="big", p=i64p))
    f64p = {"buffers": (*BUFFERS, N.BufferDecl(name="d", ty=F64, access="read_write"))}
    # an f64 add exists only order-independent: its old value unread, not relaxed
    rejects(at("add", "d", N.Const(ty=F64, value=1.0), ty=F64, out="d", p=f64p),
            "f64 atomic add whose old value is read")
    validate(prog(N.Atomic(op="add", buffer="d", index=u(0), value=N.Const(ty=F64, value=1.0)),
                  **f64p))
    rejects(prog(N.Atomic(op="add", buffer="d", index=u(0), value=N.Const(ty=F64, value=1.0),
                          relaxed=True), **f64p), "f64 atomic add relaxed")
    rejects(at("max", "d", N.Const(ty=F64, value=1.0), ty=F64, out="d", p=f64p),
            "only atomic add exists for floats (f32, f64)")
    rejects(at("compare_exchange"), "needs a comparand", node="body[0]")
    rejects(at("add", comparand=u(1)), "takes no comparand", node="body[0].comparand")
    rejects(at("compare_exchange", comparand=i(1)), "comparand is i32", node="body[0].comparand")
    rejects(at("add", value=i(1)), "value is i32", node="body[0].value")
    rejects(at("add", "rin"), "atomics need a 'read_write' buffer")
    rejects(at("add", "o"), "atomics need a 'read_write' buffer")
    rejects(at("add", "nope"), "not a declared buffer")


# ------------------------------------------------------------------ names and scopes


def test_scoping() -> None:
    validate(prog(N.Let(name="v", value=u(1)), store(var("v"))))
    rejects(prog(store(var("v")), N.Let(name="v", value=u(1))), "not a local visible here",
            node="body[0].value")
    rejects(prog(N.If(cond=TRUE, then=(N.Let(name="v", value=u(1)),)), store(var("v"))),
            "not a local visible here", node="body[1].value")
    validate(prog(N.Let(name="v", value=u(1)),
                  N.If(cond=TRUE, then=(N.While(cond=TRUE, body=(store(var("v")), N.Break())),))))
    validate(prog(N.If(cond=TRUE, then=(N.Let(name="v", value=u(1)), store(var("v"))))))
    loop = N.For(var="k", ty=U32, start=u(0), end=u(4), body=(store(var("k")),))
    validate(prog(loop))
    rejects(prog(loop, store(var("k"))), "not a local visible here", node="body[1].value")
    rejects(prog(N.For(var="k", ty=U32, start=var("k"), end=u(4))), "not a local",
            node="body[0].start")
    atomic = N.Atomic(op="add", buffer="r", index=u(0), value=u(1), result="old")
    validate(prog(atomic, store(var("old")), N.Assign(name="old", value=u(3))))
    rejects(prog(store(var("old")), atomic), "not a local visible here")
    rejects(prog(N.If(cond=TRUE, then=(atomic,)), store(var("old"))), "not a local visible")
    rejects(prog(N.Let(name="v", value=u(1)), store(var("v", I32))), "local is u32")


def test_undeclared_and_assignment_errors() -> None:
    rejects(prog(N.Store(buffer="zz", index=u(0), value=u(1))), "'zz'", node="body[0]")
    rejects(prog(N.Assign(name="q", value=u(1))), "not a local visible here", node="body[0]")
    loop = N.For(var="k", ty=U32, start=u(0), end=u(4),
                 body=(N.Assign(name="k", value=u(9)),))
    rejects(prog(loop), "loop variables are read-only", node="body[0].body[0]")


@pytest.mark.parametrize(
    ("kw", "fragment"),
    [
        ({"buffers": (*BUFFERS, N.BufferDecl(name="x", ty=U32))}, "'x' is already declared"),
        ({"params": (*PARAMS, N.ParamDecl(name="x", ty=U32))}, "'x' is already declared"),
        ({"workgroup_arrays": (N.WorkgroupArray(name="n", ty=U32, count=1),)},
         "'n' is already declared"),
    ],
)
def test_duplicate_declarations(kw: dict[str, Any], fragment: str) -> None:
    rejects(prog(**kw), fragment, "unique")


def test_duplicate_locals_program_wide() -> None:
    rejects(prog(N.Let(name="x", value=u(1))), "'x' is already declared", node="body[0]")
    rejects(prog(N.If(cond=TRUE, then=(N.Let(name="v", value=u(1)),),
                      orelse=(N.Let(name="v", value=u(2)),))),
            "'v' is already declared", node="body[0].orelse[0]")
    rejects(prog(N.Let(name="v", value=u(1)), N.For(var="v", ty=U32, start=u(0), end=u(1))),
            "'v' is already declared")
    rejects(prog(N.Atomic(op="add", buffer="r", index=u(0), value=u(1), result="a")),
            "'a' is already declared")


@pytest.mark.parametrize("name", ["", "a-b", "1x", "ñ", "a b", "x" * 65])
def test_bad_names(name: str) -> None:
    rejects(prog(buffers=(N.BufferDecl(name=name, ty=U32),)), "not a valid name",
            node="buffers[0]")
    rejects(prog(N.Let(name=name, value=u(1))), "not a valid name", node="body[0]")


def test_program_name() -> None:
    validate(prog(name="saxpy-f32.v2"))
    rejects(prog(name=""), "program name", node="name")
    rejects(prog(name="has space"), "program name", node="name")


# ------------------------------------------------------------------ access and declarations


def test_access_rules() -> None:
    rejects(prog(store(N.Load(buffer="o", index=u(0), ty=U32))), "declared 'write'",
            "read_write", node="body[0].value")
    rejects(prog(N.Store(buffer="rin", index=u(0), value=u(1))), "declared 'read'",
            node="body[0]")
    validate(prog(N.Store(buffer="o", index=u(0), value=u(1)),
                  N.Store(buffer="tile", index=u(0), value=u(1)),
                  store(N.Load(buffer="tile", index=u(0), ty=U32))))


def test_bool_element_types_rejected() -> None:
    rejects(prog(buffers=(N.BufferDecl(name="b", ty=B),)), "bool", node="buffers[0]")
    rejects(prog(params=(N.ParamDecl(name="b", ty=B),)), "bool", node="params[0]")
    rejects(prog(workgroup_arrays=(N.WorkgroupArray(name="b", ty=B, count=4),)), "bool",
            node="workgroup_arrays[0]")


def test_counts() -> None:
    rejects(prog(workgroup_arrays=(N.WorkgroupArray(name="w", ty=U32, count=0),)),
            "at least 1", node="workgroup_arrays[0]")
    rejects(prog(buffers=(N.BufferDecl(name="c", ty=U32, count=-1),)), ">= 0",
            node="buffers[0]")
    validate(prog(buffers=(N.BufferDecl(name="c", ty=U32, count=0),)))


@pytest.mark.parametrize(
    ("ws", "fragment"),
    [((0, 1, 1), "axis x is 0"), ((1025, 1, 1), "1..1024"), ((1, 1, 65), "axis z is 65"),
     ((64, 32, 1), "2048 invocations"), ((1, -1, 1), "axis y")],
)
def test_workgroup_size_limits(ws: tuple[int, int, int], fragment: str) -> None:
    rejects(prog(workgroup_size=ws), fragment, node="workgroup_size")


def test_workgroup_size_edges_valid() -> None:
    for ws in ((1024, 1, 1), (1, 1024, 1), (1, 1, 64), (16, 8, 8), (1, 1, 1)):
        validate(prog(workgroup_size=ws))


# ------------------------------------------------------------------ constants and builtins


def test_unrepresentable_constants() -> None:
    for c, frag in [
        (N.Const.model_construct(ty=I32, value=2**40), "does not fit"),
        (N.Const.model_construct(ty=U32, value=-1), "does not fit"),
        (N.Const.model_construct(ty=U32, value=True), "is a bool"),
        (N.Const.model_construct(ty=F32, value=0.1), "not exactly representable"),
        (N.Const.model_construct(ty=F32, value=1e300), "overflows f32"),
        (N.Const.model_construct(ty=F32, value=1), "not exactly representable"),
        (N.Const.model_construct(ty=B, value=1), "True or False"),
    ]:
        if c.ty is B:
            stmt: Any = N.If.model_construct(cond=c, then=(), orelse=())
        else:
            target = {F32: "y", U32: "r", I32: "ri"}[c.ty]
            stmt = N.Store.model_construct(buffer=target, index=u(0), value=c)
        rejects(prog(stmt), frag)
    for v in (float("nan"), float("inf"), -0.0, 3.4028234663852886e38):
        validate(prog(store(f(v), "y")))


def test_builtin_axes() -> None:
    rejects(prog(store(N.Builtin(name="global_id", axis=3))), "0, 1 or 2", node="body[0].value")
    rejects(prog(store(N.Builtin(name="local_index", axis=1))), "axis must be 0")
    for name in ("global_id", "local_id", "workgroup_id", "num_workgroups"):
        validate(prog(*[store(N.Builtin(name=name, axis=a)) for a in range(3)]))


def test_break_continue_outside_loop() -> None:
    rejects(prog(N.Break()), "break outside a loop", node="body[0]")
    rejects(prog(N.If(cond=TRUE, then=(N.Continue(),))), "continue outside a loop",
            node="body[0].then[0]")
    validate(prog(N.While(cond=TRUE, body=(N.If(cond=TRUE, then=(N.Break(),)), N.Continue()))))


# ------------------------------------------------------------------ uniformity


def bar_if(cond: Any) -> N.If:
    return N.If(cond=cond, then=(N.Barrier(),))


def test_barrier_uniform_conditions_accepted() -> None:
    validate(prog(N.Barrier()))
    validate(prog(bar_if(lt(WID, u(3)))))
    validate(prog(bar_if(lt(N.Param(name="n", ty=U32), N.Length(buffer="x")))))
    validate(prog(bar_if(lt(N.Builtin(name="num_workgroups", axis=1), u(3)))))
    validate(prog(N.Let(name="s", value=N.Param(name="n", ty=U32)),
                  N.Assign(name="s", value=add(var("s"), u(1))), bar_if(lt(var("s"), u(9)))))
    validate(prog(N.For(var="k", ty=U32, start=u(0), end=N.Param(name="n", ty=U32),
                        body=(N.Barrier(), bar_if(lt(var("k"), u(2)))))))
    # A divergent if that does not contain the barrier is fine.
    validate(prog(N.If(cond=lt(LID, u(3)), then=(store(u(1)),)), N.Barrier()))
    # A uniform return; a divergent break whose loop ended before the barrier.
    validate(prog(N.If(cond=lt(WID, u(1)), then=(N.Return(),)), N.Barrier()))
    validate(prog(N.While(cond=TRUE, body=(N.If(cond=lt(GID, u(5)), then=(N.Break(),)),)),
                  N.Barrier()))


def test_tree_reduction_pattern_accepted() -> None:
    stride = var("stride")
    lidx = N.Builtin(name="local_index")
    p = prog(
        N.Store(buffer="tile", index=lidx, value=N.Load(buffer="rin", index=GID, ty=U32)),
        N.Barrier(),
        N.Let(name="stride", value=u(32)),
        N.While(cond=N.Binary(op="gt", a=stride, b=u(0), ty=B), body=(
            N.If(cond=lt(lidx, stride), then=(
                N.Store(buffer="tile", index=lidx, value=add(
                    N.Load(buffer="tile", index=lidx, ty=U32),
                    N.Load(buffer="tile", index=add(lidx, stride), ty=U32))),
            )),
            N.Barrier(),
            N.Assign(name="stride", value=N.Binary(op="shr", a=stride, b=u(1), ty=U32)),
        )),
        workgroup_size=(64, 1, 1),
    )
    validate(p)


@pytest.mark.parametrize(
    ("body", "why", "node"),
    [
        ((bar_if(lt(LID, u(3))),), "builtin local_id", "body[0].then[0]"),
        ((bar_if(lt(N.Load(buffer="rin", index=WID, ty=U32), u(3))),), "a load from 'rin'",
         "body[0].then[0]"),
        ((N.Let(name="v", value=GID), bar_if(lt(var("v"), u(3)))), "local 'v'",
         "body[1].then[0]"),
        # non-uniform once assigned anywhere (flow-insensitive), even later
        ((N.Let(name="v", value=u(0)), bar_if(lt(var("v"), u(3))),
          N.Assign(name="v", value=GID)), "local 'v'", "body[1].then[0]"),
        # assigned a uniform value inside non-uniform control flow
        ((N.Let(name="v", value=u(0)), N.If(cond=lt(GID, u(2)), then=(
            N.Assign(name="v", value=u(1)),)), bar_if(lt(var("v"), u(1)))),
         "the condition of the if at body[1]", "body[2].then[0]"),
        ((N.Atomic(op="add", buffer="r", index=u(0), value=u(1), result="old"),
          bar_if(lt(var("old"), u(3)))), "atomic result 'old'", "body[1].then[0]"),
        ((N.Let(name="v", value=N.Select(cond=lt(GID, u(1)), a=u(1), b=u(2), ty=U32)),
          bar_if(lt(var("v"), u(3)))), "builtin global_id", "body[1].then[0]"),
        ((N.For(var="k", ty=U32, start=u(0), end=N.Load(buffer="rin", index=u(0), ty=U32),
                body=(N.Barrier(),)),), "the bounds of the for at body[0]", "body[0].body[0]"),
        # the back edge: the condition becomes non-uniform in the next iteration
        ((N.Let(name="c", value=u(0)), N.While(cond=lt(var("c"), u(4)), body=(
            N.Barrier(), N.Assign(name="c", value=LID)))),
         "the condition of the while at body[1]", "body[1].body[0]"),
        # after a divergent return
        ((N.If(cond=lt(GID, u(5)), then=(N.Return(),)), N.Barrier()), "return",
         "body[1]"),
        ((N.If(cond=lt(GID, u(5)), then=(N.Return(),)),
          N.If(cond=TRUE, then=(N.Barrier(),))), "return", "body[1].then[0]"),
        # after a divergent break, and before it (the next iteration)
        ((N.While(cond=TRUE, body=(N.If(cond=lt(GID, u(5)), then=(N.Break(),)),
                                   N.Barrier())),), "break/continue/return",
         "body[0].body[1]"),
        ((N.While(cond=TRUE, body=(N.Barrier(),
                                   N.If(cond=lt(GID, u(5)), then=(N.Continue(),)))),),
         "break/continue/return", "body[0].body[0]"),
        # a divergent return inside a loop poisons the rest of the program too
        ((N.While(cond=TRUE, body=(N.If(cond=lt(GID, u(5)), then=(N.Return(),)), N.Break())),
          N.Barrier()), "return", "body[1]"),
        # nested: uniform outer if, divergent inner if
        ((N.If(cond=TRUE, then=(N.If(cond=lt(GID, u(1)), then=(N.Barrier(),)),)),),
         "builtin global_id", "body[0].then[0].then[0]"),
    ],
)
def test_barrier_in_non_uniform_control_flow(body: tuple[Any, ...], why: str, node: str) -> None:
    rejects(prog(*body), "barrier in non-uniform control flow", why, node=node)


# ------------------------------------------------------------------ depth


def nested_ifs(k: int) -> N.Program:
    stmt: Any = N.If(cond=TRUE)
    for _ in range(k - 1):
        stmt = N.If(cond=TRUE, then=(stmt,))
    return prog(stmt)


def neg_chain(k: int) -> Any:
    e: Any = i(1)
    for _ in range(k):
        e = N.Unary(op="neg", a=e, ty=I32)
    return e


def test_depth_limit_statements() -> None:
    validate(nested_ifs(MAX_DEPTH - 1))  # innermost cond at level MAX_DEPTH
    rejects(nested_ifs(MAX_DEPTH), f"MAX_DEPTH={MAX_DEPTH}")


def test_depth_limit_expressions() -> None:
    # store at level 1, bitcast at 2, the chain below it: the deepest const at 3 + k
    validate(prog(store(N.Bitcast(a=neg_chain(MAX_DEPTH - 3), ty=U32))))
    rejects(prog(store(N.Bitcast(a=neg_chain(MAX_DEPTH - 2), ty=U32))), "MAX_DEPTH")


def test_absurd_depth_is_a_clean_error() -> None:
    rejects(prog(store(N.Bitcast(a=neg_chain(20_000), ty=U32))), "MAX_DEPTH")
    rejects(nested_ifs(20_000), "MAX_DEPTH")


def test_exponential_dag_is_a_clean_error() -> None:
    # x = x + x, 40 times: 40 Python objects, 2**41 tree nodes
    e: Any = u(1)
    for _ in range(40):
        e = add(e, e)
    t0 = time.perf_counter()
    rejects(prog(store(e)), f"MAX_NODES={MAX_NODES}", "let")
    assert time.perf_counter() - t0 < 30


def test_not_a_program() -> None:
    with pytest.raises(InvalidProgram, match="expected a vyre Program"):
        validate("saxpy")  # type: ignore[arg-type]


def test_validation_is_fast() -> None:
    body: list[Any] = [N.Let(name=f"v{k}", value=add(N.Load(buffer="rin", index=u(k), ty=U32), u(k)))
            for k in range(2000)]
    body += [store(var(f"v{k}"), index=u(k)) for k in range(2000)]
    p = prog(*body)
    t0 = time.perf_counter()
    validate(p)
    assert time.perf_counter() - t0 < 2.0
