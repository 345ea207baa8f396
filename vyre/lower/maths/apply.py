"""The pass that replaces every call of a registered function by its lowering.

It runs first in `vyre.lower.lower` (for every target) and in the reference backend (which
interprets the result), so every backend evaluates the same IR operations and gets the
same bits. The lowering's statements go just before the statement that held the call; a
`while` whose condition holds a call becomes `while true { stmts; if !cond { break } ... }`
(as in vyre.lower.passes). Rewrites are memoised per statement only. The result still
uses only IR nodes (no `Native`): the other lowering rules then apply to it as to the
user's own code.
"""

from __future__ import annotations

from operator import is_not

from vyre.ir import nodes as N
from vyre.ir.nodes import made
from vyre.ir.types import ScalarType
from vyre.ir.visit import ExprMap, child_blocks, map_block, stmt_exprs, walk_exprs, with_parts

from .build import Builder
from .registry import lowered, registered

_LEAVES = frozenset({N.Const, N.Var, N.Param, N.Builtin, N.Length})


_U32, _BOOL = ScalarType.U32, ScalarType.BOOL
# num_workgroups.x == 0 never holds at run time, but no compiler can know it
_NEVER = made(N.Binary, op="eq", a=made(N.Builtin, name="num_workgroups", axis=0, ty=_U32),
              b=N.Const(ty=_U32, value=0), ty=_BOOL)


def _opaque(a: N.ExprNode) -> N.ExprNode:
    """`a`, as a value no compiler can fold: select(never, -a, a). A definition called on
    constant arguments is otherwise evaluated by the driver's compiler at compile time:
    lavapipe's LLVM took 448 s over atan2(0, -0) with literal arguments, 0.1 s with
    runtime ones. neg and select are moves (never flushed, docs/IR.md), so the value is
    exactly `a` on every backend."""
    return made(N.Select, cond=_NEVER, a=made(N.Unary, op="neg", a=a, ty=a.ty), b=a, ty=a.ty)


class _Apply:
    def __init__(self) -> None:
        self.count = 0
        self.b = Builder(self.fresh)
        self.map = ExprMap(self.rewrite, kept=_LEAVES)

    def fresh(self) -> str:
        self.count += 1
        return f"mx.{self.count}"

    def rewrite(self, e: N.ExprNode, written: N.ExprNode) -> N.ExprNode:
        if type(e) is not N.Call:
            return e
        assert isinstance(e, N.Call)
        f = lowered(e.fn, e.ty)
        if f is None:
            return e
        b = self.b
        args = tuple(b.let(b.wrap(_opaque(a))) for a in e.args)
        return f(b, args).e

    def stmt(self, s: N.StmtNode) -> list[N.StmtNode]:
        exprs = stmt_exprs(s)
        if not exprs:
            return [s]
        self.map.memo.clear()
        self.b.stmts = []
        new = tuple(map(self.map, exprs))
        lets, self.b.stmts = self.b.stmts, []
        if not lets:
            return [s]
        if isinstance(s, N.While):
            (cond,) = new
            stop = made(N.If, cond=made(N.Unary, op="not", a=cond, ty=ScalarType.BOOL),
                        then=(made(N.Break),))
            return [made(N.While, cond=N.Const(ty=ScalarType.BOOL, value=True),
                         body=(*lets, stop, *s.body))]
        if any(map(is_not, exprs, new)):
            s = with_parts(s, new, child_blocks(s))
        return [*lets, s]


def lower_maths(program: N.Program) -> N.Program:
    """`program` with every call of a registered function replaced by its lowering (the
    same object when it has none)."""
    if not lowered_calls(program):
        return program
    body = map_block(program.body, _Apply().stmt)
    return program.model_copy(update={"body": body})


def lowered_calls(program: N.Program) -> list[str]:
    """The names of the registered functions `program` calls (for error messages)."""
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


__all__ = ["lower_maths", "lowered_calls"]
