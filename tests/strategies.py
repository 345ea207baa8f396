"""Hypothesis strategies for random *valid* vyre Programs (shared by the wire-format tests
and the fuzzers).

`programs()` draws a whole Program: input buffers, output buffers and params of i32, u32
and f32; a body of lets, stores, ifs and bounded for-loops whose expressions are random
trees (arithmetic, bitwise, shifts, comparisons, select, casts, bitcasts, calls) with
constants that include NaN, infinities and -0.0. Every drawn Program passes
`vyre.ir.validate` by construction. `expressions(ty, scope)` draws one expression tree.

This module must never draw an invalid Program: tests rely on "drawn => valid". It builds
nodes directly (not through the builder) so the IR itself is what is exercised.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hypothesis import strategies as st

from vyre.ir import nodes as N
from vyre.ir.types import ScalarType

I32, U32, F32, BOOL = ScalarType.I32, ScalarType.U32, ScalarType.F32, ScalarType.BOOL
TYPES = (I32, U32, F32)
_SUFFIX = {I32: "i", U32: "u", F32: "f"}

MAX_EXPR_DEPTH = 4


@dataclass
class Scope:
    """What a drawn expression may refer to: declared names and the visible locals."""

    locals: dict[str, ScalarType] = field(default_factory=dict)
    loop_vars: set[str] = field(default_factory=set)
    counter: list[int] = field(default_factory=lambda: [0])

    def child(self) -> Scope:
        return Scope(dict(self.locals), set(self.loop_vars), self.counter)

    def fresh(self, prefix: str) -> str:
        self.counter[0] += 1
        return f"{prefix}{self.counter[0]}"


def in_buf(ty: ScalarType) -> str:
    return f"in_{_SUFFIX[ty]}"


def out_buf(ty: ScalarType) -> str:
    return f"out_{_SUFFIX[ty]}"


def param(ty: ScalarType) -> str:
    return f"p_{_SUFFIX[ty]}"


def constants(ty: ScalarType) -> st.SearchStrategy[N.Const]:
    if ty is I32:
        vals: st.SearchStrategy[Any] = st.integers(-(2**31), 2**31 - 1)
    elif ty is U32:
        vals = st.integers(0, 2**32 - 1)
    elif ty is F32:
        vals = st.floats(width=32, allow_nan=True, allow_infinity=True) | st.sampled_from(
            [0.0, -0.0, 1.0, -1.0, float("inf"), float("-inf"), float("nan")]
        )
    else:
        vals = st.booleans()
    return vals.map(lambda v: N.Const(ty=ty, value=v))


@st.composite
def expressions(draw: st.DrawFn, ty: ScalarType, scope: Scope | None = None,
                depth: int = MAX_EXPR_DEPTH) -> Any:
    """A random well-typed expression of type `ty` (i32, u32, f32 or bool)."""
    scope = scope or Scope()
    if ty is BOOL:
        return draw(_bools(scope, depth))
    leaves = [constants(ty), st.just(N.Param(name=param(ty), ty=ty))]
    names = [n for n, t in scope.locals.items() if t is ty]
    if names:
        leaves.append(st.sampled_from(names).map(lambda n: N.Var(name=n, ty=ty)))
    if ty is U32:
        leaves.append(st.builds(
            lambda name, axis: N.Builtin(name=name, axis=0 if name == "local_index" else axis),
            st.sampled_from(["global_id", "local_id", "workgroup_id", "num_workgroups",
                             "local_index"]),
            st.integers(0, 2),
        ))
        leaves.append(st.sampled_from([in_buf(t) for t in TYPES] + [out_buf(t) for t in TYPES])
                      .map(lambda b: N.Length(buffer=b)))
    if depth <= 1:
        return draw(st.one_of(leaves))
    choice = draw(st.integers(0, 9))
    sub = depth - 1
    if choice <= 1:
        return draw(st.one_of(leaves))
    if choice == 2:  # load
        idx = draw(expressions(U32, scope, sub))
        buf = draw(st.sampled_from([in_buf(ty), out_buf(ty)]))
        return N.Load(buffer=buf, index=idx, ty=ty)
    if choice == 3:  # arithmetic
        op: Any = draw(st.sampled_from(["add", "sub", "mul", "div", "rem", "min", "max"]))
        return N.Binary(op=op, a=draw(expressions(ty, scope, sub)),
                        b=draw(expressions(ty, scope, sub)), ty=ty)
    if choice == 4 and ty.is_int:  # bitwise / shifts
        op = draw(st.sampled_from(["and", "or", "xor", "shl", "shr"]))
        bty = U32 if op in ("shl", "shr") else ty
        return N.Binary(op=op, a=draw(expressions(ty, scope, sub)),
                        b=draw(expressions(bty, scope, sub)), ty=ty)
    if choice == 5:  # unary / abs
        a = draw(expressions(ty, scope, sub))
        if ty is U32:
            return draw(st.sampled_from([N.Unary(op="bit_not", a=a, ty=ty),
                                         N.Call(fn="abs", args=(a,), ty=ty)]))
        ops = [N.Unary(op="neg", a=a, ty=ty), N.Call(fn="abs", args=(a,), ty=ty)]
        if ty is I32:
            ops.append(N.Unary(op="bit_not", a=a, ty=ty))
        return draw(st.sampled_from(ops))
    if choice == 6:  # cast from another type
        src = draw(st.sampled_from([*TYPES, BOOL]))
        return N.Cast(a=draw(expressions(src, scope, sub)), ty=ty)
    if choice == 7:  # bitcast between 32-bit types
        src = draw(st.sampled_from([t for t in TYPES if t is not ty]))
        return N.Bitcast(a=draw(expressions(src, scope, sub)), ty=ty)
    if choice == 8:
        return N.Select(cond=draw(_bools(scope, sub)), a=draw(expressions(ty, scope, sub)),
                        b=draw(expressions(ty, scope, sub)), ty=ty)
    if ty is F32:
        fn: Any = draw(st.sampled_from(sorted(N.FN_ARITY)))
        args = tuple(draw(expressions(ty, scope, sub)) for _ in range(N.FN_ARITY[fn]))
        return N.Call(fn=fn, args=args, ty=ty)
    lo, x, hi = (draw(expressions(ty, scope, sub)) for _ in range(3))
    return N.Call(fn="clamp", args=(x, lo, hi), ty=ty)


@st.composite
def _bools(draw: st.DrawFn, scope: Scope, depth: int) -> Any:
    if depth <= 1:
        return draw(constants(BOOL))
    choice = draw(st.integers(0, 3))
    sub = depth - 1
    if choice == 0:
        return draw(constants(BOOL))
    if choice == 1:
        ty = draw(st.sampled_from(TYPES))
        op: Any = draw(st.sampled_from(["eq", "ne", "lt", "le", "gt", "ge"]))
        return N.Binary(op=op, a=draw(expressions(ty, scope, sub)),
                        b=draw(expressions(ty, scope, sub)), ty=BOOL)
    if choice == 2:
        bop: Any = draw(st.sampled_from(["logical_and", "logical_or", "eq", "ne"]))
        return N.Binary(op=bop, a=draw(_bools(scope, sub)), b=draw(_bools(scope, sub)), ty=BOOL)
    if choice == 3:
        return N.Unary(op="not", a=draw(_bools(scope, sub)), ty=BOOL)
    raise AssertionError("unreachable")


@st.composite
def statements(draw: st.DrawFn, scope: Scope, depth: int = 2, max_len: int = 4,
               in_loop: bool = False) -> tuple[Any, ...]:
    """A block: lets, assigns, stores, ifs and for-loops (no barriers)."""
    out: list[Any] = []
    for _ in range(draw(st.integers(0 if depth < 2 else 1, max_len))):
        kind = draw(st.sampled_from(
            ["let", "store", "store", "assign", "atomic"] + (["if", "for"] if depth > 0 else [])
            + (["break"] if in_loop else [])
        ))
        ty = draw(st.sampled_from(TYPES))
        if kind == "let":
            name = scope.fresh("v")
            out.append(N.Let(name=name, value=draw(expressions(ty, scope, 3))))
            scope.locals[name] = ty
        elif kind == "assign":
            mutable = [n for n in scope.locals if n not in scope.loop_vars]
            if not mutable:
                continue
            name = draw(st.sampled_from(mutable))
            out.append(N.Assign(name=name, value=draw(expressions(scope.locals[name], scope, 3))))
        elif kind == "store":
            out.append(N.Store(buffer=out_buf(ty), index=draw(expressions(U32, scope, 2)),
                               value=draw(expressions(ty, scope))))
        elif kind == "atomic":
            aty = draw(st.sampled_from([I32, U32]))
            op = draw(st.sampled_from(sorted(N.AtomicOp.__args__)))  # type: ignore[attr-defined]
            name = scope.fresh("old")
            out.append(N.Atomic(
                op=op, buffer=out_buf(aty), index=draw(expressions(U32, scope, 2)),
                value=draw(expressions(aty, scope, 2)),
                comparand=draw(expressions(aty, scope, 2)) if op == "compare_exchange" else None,
                result=name,
            ))
            scope.locals[name] = aty
        elif kind == "if":
            cond = draw(_bools(scope, 3))
            then = draw(statements(scope.child(), depth - 1, max_len, in_loop))
            orelse = draw(statements(scope.child(), depth - 1, max_len, in_loop))
            out.append(N.If(cond=cond, then=then, orelse=orelse))
        elif kind == "for":
            lty = draw(st.sampled_from([I32, U32]))
            inner = scope.child()
            var = inner.fresh("i")
            start = draw(expressions(lty, scope, 2))
            end = N.Const(ty=lty, value=draw(st.integers(0, 8)))
            inner.locals[var] = lty
            inner.loop_vars.add(var)
            body = draw(statements(inner, depth - 1, max_len, True))
            out.append(N.For(var=var, ty=lty, start=start, end=end,
                             step=draw(st.integers(1, 3)), body=body))
        elif kind == "break":
            out.append(draw(st.sampled_from([N.Break(), N.Continue()])))
    return tuple(out)


@st.composite
def programs(draw: st.DrawFn, max_depth: int = 2, max_len: int = 4) -> N.Program:
    """A random valid Program over i32/u32/f32 with stores (see the module docstring)."""
    scope = Scope()
    body = draw(statements(scope, max_depth, max_len))
    ws = draw(st.sampled_from([(1, 1, 1), (64, 1, 1), (8, 8, 1), (4, 4, 4), (1024, 1, 1)]))
    buffers = tuple(N.BufferDecl(name=in_buf(t), ty=t, access="read") for t in TYPES) + tuple(
        N.BufferDecl(name=out_buf(t), ty=t, access="read_write",
                     count=draw(st.none() | st.integers(0, 1 << 20)))
        for t in TYPES
    )
    params = tuple(N.ParamDecl(name=param(t), ty=t) for t in TYPES)
    return N.Program(name=draw(st.from_regex(r"[a-z][a-z0-9_]{0,11}", fullmatch=True)),
                     workgroup_size=ws, buffers=buffers, params=params, body=body)


__all__ = ["Scope", "constants", "expressions", "programs", "statements"]
