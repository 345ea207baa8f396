"""The pass that replaces every call of a registered function by a call of its definition.

It runs first in `vyre.lower.lower` (for every target) and in the reference backend (which
interprets the result), so every backend evaluates the same IR operations and gets the
same bits. Each (function, type) a program calls becomes one `Function` of the lowered
core (its definition, the lowering's statements and result over the parameters), and each
call an `Invoke` of it, so a printer spells the definition once however many calls there
are (a CUDA `__device__` function, a WGSL `fn`: source size and compile time no longer
grow with the calls, docs/perf-notes.md). An argument that may be a constant (runtime.py
says which are not) is made opaque, and if it is not a leaf set in a local just before
the statement (the opaque select names it twice); a `while` whose
condition holds a call becomes `while true { lets; if !cond { break } ... }`.
`vyre.lower.lower` hands each Function's body to the rest of its passes (`lower_body`),
so the target's rules apply to it as to the user's own code; the reference interprets
it as written. Rewrites are memoised per statement only.
"""

from __future__ import annotations

from operator import is_not

from vyre.ir import nodes as N
from vyre.ir.analysis import has_any
from vyre.ir.nodes import made
from vyre.ir.types import ScalarType
from vyre.ir.visit import ExprMap, child_blocks, map_block, stmt_exprs, walk_exprs, with_parts
from vyre.lower.traits import ALL_NATIVE, Traits

from .build import BodyLowering, define
from .registry import lowered, registered
from .runtime import is_runtime, runtime_locals

_LEAVES = frozenset({N.Const, N.Var, N.Param, N.Builtin, N.Length})


_U32, _BOOL = ScalarType.U32, ScalarType.BOOL
# num_workgroups.x == 0 never holds at run time, but no compiler can know it
_NEVER = made(N.Binary, op="eq", a=made(N.Builtin, name="num_workgroups", axis=0, ty=_U32),
              b=N.Const(ty=_U32, value=0), ty=_BOOL)


def opaque(a: N.ExprNode) -> N.ExprNode:
    """`a`, as a value no compiler can fold: select(never, -a, a). A definition called on
    constant arguments is otherwise evaluated by the driver's compiler at compile time:
    lavapipe's LLVM took 448 s over atan2(0, -0) with literal arguments, 0.1 s with
    runtime ones. neg and select are moves (never flushed, docs/IR.md), so the value is
    exactly `a` on every backend."""
    return made(N.Select, cond=_NEVER, a=made(N.Unary, op="neg", a=a, ty=a.ty), b=a, ty=a.ty)


class _Apply:
    def __init__(self, lower_body: BodyLowering, traits: Traits,
                 runtime: frozenset[str]) -> None:
        self.map = ExprMap(self.rewrite, kept=_LEAVES)
        self.traits = traits
        self.runtime = runtime  # the program's runtime locals (runtime.py)
        self.functions: dict[tuple[str, ScalarType], N.Function] = {}
        self.lower_body = lower_body
        self.lets: list[N.StmtNode] = []  # the arguments set in locals, per statement
        self.count = 0

    def function(self, e: N.Call) -> N.Function | None:
        """The program's one Function of `e`'s definition (made on first use)."""
        key = (e.fn, e.ty)
        got = self.functions.get(key)
        if got is None:
            f = lowered(e.fn, e.ty)
            if f is None:
                return None
            got = define(f"{e.fn}_{e.ty}", e.ty, tuple(a.ty for a in e.args), f, self.traits,
                         self.lower_body)
            if self.lower_body is not None:
                got = self.lower_body(got)
            self.functions[key] = got
        return got

    def rewrite(self, e: N.ExprNode, written: N.ExprNode) -> N.ExprNode:
        if type(e) is not N.Call:
            return e
        assert isinstance(e, N.Call)
        fn = self.function(e)
        if fn is None:
            return e
        return made(N.Invoke, fn=fn, args=tuple(map(self.arg, e.args)), ty=e.ty)

    def arg(self, a: N.ExprNode) -> N.ExprNode:
        """`a` as an argument: as it is where it is a runtime value (runtime.py: no
        compiler can fold the call), else opaque (`opaque` names it twice: anything but a
        leaf, another call's result above all, is set in a local first, so no printer
        spells it twice)."""
        if is_runtime(a, self.runtime):
            return a
        if type(a) not in _LEAVES:
            self.count += 1
            name = f"mx.{self.count}"
            self.lets.append(made(N.Let, name=name, value=a))
            a = made(N.Var, name=name, ty=a.ty)
        return opaque(a)

    def stmt(self, s: N.StmtNode) -> list[N.StmtNode]:
        exprs = stmt_exprs(s)
        if not exprs:
            return [s]
        self.map.memo.clear()
        self.lets = []
        new = tuple(map(self.map, exprs))
        lets, self.lets = self.lets, []
        if not any(map(is_not, exprs, new)):
            return [s]
        if isinstance(s, N.While):
            # `while true { lets; if !cond { break } ... }`: the arguments' locals set
            # before each evaluation of the condition
            (cond,) = new
            stop = made(N.If, cond=made(N.Unary, op="not", a=cond, ty=ScalarType.BOOL),
                        then=(made(N.Break),))
            return [made(N.While, cond=N.Const(ty=ScalarType.BOOL, value=True),
                         body=(*lets, stop, *s.body))]
        return [*lets, with_parts(s, new, child_blocks(s))]


def lower_maths(program: N.Program, lower_body: BodyLowering = None,
                traits: Traits = ALL_NATIVE) -> N.Program:
    """`program` with every call of a registered function replaced by an `Invoke` of its
    definition, one `Function` per function and type (the same object when it has
    none), chosen for a target with `traits` (every choice gives the same bits; the
    reference's ALL_NATIVE takes CUDA's); `lower_body` lowers each Function's body for
    the target, once."""
    if not lowered_calls(program):
        return program
    apply = _Apply(lower_body, traits, runtime_locals(program.body))
    body = map_block(program.body, apply.stmt)
    return program.model_copy(update={"body": body})


def lowered_calls(program: N.Program) -> list[str]:
    """The names of the registered functions `program` calls (for error messages).

    [] without walking when `program` has no Call node at all (its cached expression
    facts say so: the content hash found them, so a cold compile of a program without
    calls does not walk every expression once more only to find none)."""
    if not has_any(program, (N.Call,)):
        return []
    keys = registered()
    names: set[str] = set()

    def visit(stmts: tuple[N.StmtNode, ...]) -> None:
        for s in stmts:
            for e in stmt_exprs(s):
                names.update(n.fn for n in walk_exprs(e)
                             if isinstance(n, N.Call) and (n.fn, n.ty) in keys)
            for blk in child_blocks(s):
                visit(blk)

    visit(program.body)
    return sorted(names)


__all__ = ["lower_maths", "lowered_calls", "opaque"]
