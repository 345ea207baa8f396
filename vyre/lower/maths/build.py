"""A small IR expression builder for writing the function lowerings readably.

`X` wraps an IR expression and gives it Python operators (`+ - *` on numbers, `& | ^ << >>
~` on integers, `-x`), comparisons as methods (`a.lt(b)`: `==` stays Python's), and casts;
a Python number beside an `X` becomes a constant of the `X`'s type. `Builder` makes
constants (f64 ones also by their bits), selects, and locals: `let` evaluates an
expression once into a new local (named with a `.`, which no user name can contain),
`var` / `assign` a mutable one, and `when(cond)` puts the statements made inside it under
an `if`; `outlined` makes a part (a slow path) a cold Function of its own, called by an
`Invoke`. The statements a lowering makes go before the statement that held the call
(vyre.lower.maths.apply). Only IR operations every backend computes exactly belong in a
lowering (the package docstring says which); this module checks nothing of that.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from vyre.ir import nodes as N
from vyre.ir.nodes import made
from vyre.ir.types import ScalarType
from vyre.lower.traits import ALL_NATIVE, Traits

T = ScalarType
#: lowers a Function's body for the target (vyre.lower.lower's passes), or None
BodyLowering = Callable[[N.Function], N.Function] | None


class X:
    """An IR expression under construction (immutable; operators make new ones)."""

    __slots__ = ("b", "e")

    def __init__(self, b: Builder, e: N.ExprNode) -> None:
        self.b = b
        self.e = e

    @property
    def ty(self) -> ScalarType:
        return self.e.ty

    def _o(self, other: X | float | int | bool) -> N.ExprNode:
        if isinstance(other, X):
            return other.e
        return self.b.const(self.ty, other).e

    def _bin(self, op: str, other: X | float | int | bool, swap: bool = False) -> X:
        a, o = self.e, self._o(other)
        if swap:
            a, o = o, a
        ty = T.BOOL if op in N.COMPARISON_OPS or op in N.LOGICAL_OPS else a.ty
        return X(self.b, made(N.Binary, op=op, a=a, b=o, ty=ty))

    # arithmetic (numbers)
    def __add__(self, o: X | float | int) -> X:
        return self._bin("add", o)

    def __radd__(self, o: float | int) -> X:
        return self._bin("add", o, swap=True)

    def __sub__(self, o: X | float | int) -> X:
        return self._bin("sub", o)

    def __rsub__(self, o: float | int) -> X:
        return self._bin("sub", o, swap=True)

    def __mul__(self, o: X | float | int) -> X:
        return self._bin("mul", o)

    def __rmul__(self, o: float | int) -> X:
        return self._bin("mul", o, swap=True)

    def __truediv__(self, o: X | float) -> X:
        """Division (f32 only: correctly rounded on every backend, the target's own or
        vyre.lower.divsqrt's; f64 division is not, the package docstring says)."""
        assert self.ty is T.F32, self.ty
        return self._bin("div", o)

    def __neg__(self) -> X:
        return X(self.b, made(N.Unary, op="neg", a=self.e, ty=self.ty))

    # bits (integers)
    def __and__(self, o: X | int) -> X:
        return self._bin("and", o)

    def __or__(self, o: X | int) -> X:
        return self._bin("or", o)

    def __xor__(self, o: X | int) -> X:
        return self._bin("xor", o)

    def __lshift__(self, o: X | int) -> X:
        return self._bin("shl", o if isinstance(o, X) else self.b.u32(o))

    def __rshift__(self, o: X | int) -> X:
        return self._bin("shr", o if isinstance(o, X) else self.b.u32(o))

    def __invert__(self) -> X:
        return X(self.b, made(N.Unary, op="bit_not", a=self.e, ty=self.ty))

    # comparisons (bool results) and logic
    def lt(self, o: X | float | int) -> X:
        return self._bin("lt", o)

    def le(self, o: X | float | int) -> X:
        return self._bin("le", o)

    def gt(self, o: X | float | int) -> X:
        return self._bin("gt", o)

    def ge(self, o: X | float | int) -> X:
        return self._bin("ge", o)

    def eq(self, o: X | float | int) -> X:
        return self._bin("eq", o)

    def ne(self, o: X | float | int) -> X:
        return self._bin("ne", o)

    def land(self, o: X | bool) -> X:
        return self._bin("logical_and", o)

    def lor(self, o: X | bool) -> X:
        return self._bin("logical_or", o)

    def not_(self) -> X:
        return X(self.b, made(N.Unary, op="not", a=self.e, ty=T.BOOL))

    # conversions
    def cast(self, ty: ScalarType) -> X:
        """Value conversion (docs/IR.md "Cast"; float -> int saturates and truncates)."""
        return self if ty is self.ty else X(self.b, made(N.Cast, a=self.e, ty=ty))

    def bitcast(self, ty: ScalarType) -> X:
        return self if ty is self.ty else X(self.b, made(N.Bitcast, a=self.e, ty=ty))

    def abs(self) -> X:
        """|x| (floats: the sign bit cleared, exact and never flushed)."""
        return X(self.b, made(N.Call, fn="abs", args=(self.e,), ty=self.ty))

    def min(self, o: X | float | int) -> X:
        return self._bin("min", o)

    def max(self, o: X | float | int) -> X:
        return self._bin("max", o)


class Builder:
    """Makes constants, selects and locals; collects the statements a lowering needs
    before the statement that held the call (`stmts`). `traits`: the target's, for a
    lowering that chooses among its exact paths by cost (every path gives the same bits)."""

    def __init__(self, fresh: Callable[[], str], traits: Traits = ALL_NATIVE,
                 name: str = "fn", lower_body: BodyLowering = None) -> None:
        self.fresh = fresh
        self.traits = traits
        self.name = name  # the Function being defined (`outlined` names its parts after it)
        self.lower_body = lower_body
        self.stmts: list[N.StmtNode] = []

    # ------------------------------------------------------------ constants
    def const(self, ty: ScalarType, v: float | int | bool) -> X:
        return X(self, N.Const(ty=ty, value=v))

    def f64(self, v: float) -> X:
        return self.const(T.F64, float(v))

    def f64_bits(self, bits: int) -> X:
        """The f64 constant with these IEEE bits (for constants written as in C's hex)."""
        return self.f64(struct.unpack("<d", struct.pack("<Q", bits))[0])

    def f32(self, v: float) -> X:
        return self.const(T.F32, float(v))

    def i32(self, v: int) -> X:
        return self.const(T.I32, int(v))

    def u32(self, v: int) -> X:
        return self.const(T.U32, int(v))

    def true(self) -> X:
        return self.const(T.BOOL, True)

    # ------------------------------------------------------------ expressions
    def wrap(self, e: N.ExprNode) -> X:
        return X(self, e)

    def select(self, cond: X, a: X | float | int, b: X | float | int) -> X:
        """`a` where `cond`, else `b` (both evaluated; constants take the other's type)."""
        if not isinstance(a, X):
            assert isinstance(b, X), "select needs one typed operand"
            a = self.const(b.ty, a)
        if not isinstance(b, X):
            b = self.const(a.ty, b)
        return X(self, made(N.Select, cond=cond.e, a=a.e, b=b.e, ty=a.ty))

    def table(self, i: X, values: list[float] | list[int], ty: ScalarType = T.F64) -> X:
        """values[i] for a u32 `i` the caller keeps below len(values): an IR `Table` (one
        array per distinct table in the printed code, one read per use; a select tree of
        len - 1 selects cost more than the rest of exp's fast path, docs/perf-notes.md)."""
        assert i.ty is T.U32, i.ty
        vals = tuple(float(v) for v in values) if ty.is_float else tuple(int(v) for v in values)
        return X(self, made(N.Table, values=vals, index=i.e, ty=ty))

    def f32_path(self, x: X) -> bool:
        """Whether a definition takes its common path in f32 alone (exp32, log32,
        sincos32) for `x`: an f32 argument on a target whose constant tables are cheap
        (`Traits.indexed_tables`); its f64 path is then the slow one."""
        return x.ty is T.F32 and self.traits.indexed_tables

    def fma(self, x: X, y: X | float, z: X | float) -> X:
        """x * y + z rounded once (f32: the target's own where `traits.fused_fma`, else
        vyre.lower.fma's exact one, so the same bits everywhere)."""
        assert x.ty is T.F32, x.ty
        return X(self, made(N.Call, fn="fma", args=(x.e, x._o(y), x._o(z)), ty=T.F32))

    def f2i(self, x: X, ty: ScalarType = T.I32) -> X:
        """The truncation of float `x` to int `ty`, for an `x` the caller keeps inside
        ty's range (not NaN): the target's own conversion (`Native` f2i, which the
        reference asserts in range), without the IR cast's saturation tests (three f64
        compares and a branch on CUDA)."""
        return X(self, made(N.Native, op="f2i", args=(x.e,), ty=ty))

    def outlined(self, part: str, ty: ScalarType, args: tuple[X, ...],
                 body: Callable[[Builder, tuple[X, ...]], X]) -> X:
        """`body(b, args)` as a call of a Function of its own, `cold` (a definition's slow
        path: a printer keeps it out of line, so the common path stays small enough to
        inline at every call, and the slow one is spelled once), lowered for the target
        like the definition that calls it."""
        fn = define(f"{self.name}.{part}", ty, tuple(a.ty for a in args), body, self.traits,
                    self.lower_body, cold=True)
        if self.lower_body is not None:
            fn = self.lower_body(fn)
        return X(self, made(N.Invoke, fn=fn, args=tuple(a.e for a in args), ty=ty))

    def slow_path(self, x: X, body: Callable[[Builder, X], X]) -> Callable[[], X]:
        """The slow path an f32 path (exp32, log32, sincos32) calls where it cannot
        decide: `body` of `x` outlined, made when called (under the path's `if`)."""
        return lambda: self.outlined("slow", x.ty, (x,), lambda c, a: body(c, a[0]))

    # ------------------------------------------------------------ locals and statements
    def let(self, v: X) -> X:
        """`v` evaluated once, into a new local (constants and locals as they are)."""
        if isinstance(v.e, (N.Const, N.Var, N.Param)):
            return v
        return self.var(v)

    def var(self, v: X) -> X:
        """A new mutable local initialised to `v` (for `assign`)."""
        name = self.fresh()
        self.stmts.append(made(N.Let, name=name, value=v.e))
        return X(self, made(N.Var, name=name, ty=v.ty))

    def assign(self, var: X, v: X) -> None:
        assert isinstance(var.e, N.Var) and var.ty is v.ty
        self.stmts.append(made(N.Assign, name=var.e.name, value=v.e))

    @contextmanager
    def when(self, cond: X) -> Iterator[None]:
        """The statements made inside run only where `cond` holds (an IR `if`); its
        locals are not visible after it: `assign` a `var` made before it instead."""
        outer, self.stmts = self.stmts, []
        try:
            yield
        finally:
            then, self.stmts = tuple(self.stmts), outer
        self.stmts.append(made(N.If, cond=cond.e, then=then, orelse=()))

    def if_else(self, cond: X, then: Callable[[], None], orelse: Callable[[], None]) -> None:
        """An IR `if` running the statements `then()` makes where `cond` holds and those
        `orelse()` makes elsewhere (their locals are their own: `assign` a `var`)."""
        outer = self.stmts
        blocks = []
        for part in (then, orelse):
            self.stmts = []
            try:
                part()
            finally:
                blocks.append(tuple(self.stmts))
                self.stmts = outer
        self.stmts.append(made(N.If, cond=cond.e, then=blocks[0], orelse=blocks[1]))


def define(name: str, ty: ScalarType, params: tuple[ScalarType, ...],
           body: Callable[[Builder, tuple[X, ...]], X],
           traits: Traits = ALL_NATIVE, lower_body: BodyLowering = None,
           cold: bool = False) -> N.Function:
    """The core `Function` `name` of result type `ty`: `body(b, args)`'s statements and
    result over parameters of types `params` (locals named mx.<n>, parameters mx.a<j>),
    for a target with `traits`; `lower_body` lowers the Functions it outlines
    (`Builder.outlined`), the caller this one."""
    count = [0]

    def fresh() -> str:
        count[0] += 1
        return f"mx.{count[0]}"

    b = Builder(fresh, traits, name, lower_body)
    names = tuple((f"mx.a{j}", t) for j, t in enumerate(params))
    result = body(b, tuple(b.wrap(made(N.Var, name=n, ty=t)) for n, t in names))
    return made(N.Function, name=name, params=names, body=tuple(b.stmts), result=result.e,
                ty=ty, cold=cold)


__all__ = ["Builder", "X", "define"]
