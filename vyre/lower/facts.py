"""Index tests an enclosing condition already decides, for the memory rule (vyre.lower.memory).

A fact `x < Length(b)` holds at a statement of a Program when control can only reach it
with the test true and nothing it reads has changed since:
- in the `then` block of an `If` whose condition is `x < Length(b)` or `Length(b) > x`, or
  a `logical_and` with such an operand;
- in the `orelse` block of an `If` whose condition is `x >= Length(b)`, `Length(b) <= x`
  or `not` of a fact, or a `logical_or` with such an operand;
- in the rest of a block after an `If` with no `orelse` whose `then` block never falls
  through (it holds a `return`, `break` or `continue` of its own) and whose condition,
  false, is a fact as in the `orelse` case (`if (i >= len(b)) { return; }`);
- in the body of `for v in start..Length(b)`: `v < Length(b)` (any step: v < end).
Only an `x` that cannot change while the fact holds counts: constants, params, builtins,
lengths (fixed for a dispatch) and locals never assigned, with pure operations; never a
memory load (a store may change it) or a subgroup operation. Names are unique program-wide
and scoped to their block, so a local in `x` is the very value the condition read: a loop
that re-runs its `let` re-runs the condition too. An access of buffer `b` whose index is
the same expression as `x` (`same`: floats compared by their bits) is then in range and
needs no run-time test. This module must never rewrite anything.
"""

from __future__ import annotations

from collections.abc import Iterator

from pydantic import BaseModel

from vyre.ir import nodes as N
from vyre.ir.analysis import walk_stmts
from vyre.ir.types import ScalarType
from vyre.ir.visit import Fold

Fact = tuple[str, N.ExprNode]  # (buffer, x): x < Length(buffer)
_JUMPS = (N.Return, N.Break, N.Continue)
# the operations whose value depends on their operands only (a Load or Subgroup does not)
_PURE = (N.Const, N.Var, N.Param, N.Builtin, N.Length, N.Unary, N.Binary, N.Call, N.Select,
         N.Cast, N.Bitcast)
# the same, as exact classes (Guarded derives from Select; nothing derives from Var)
_PURE_CLASSES = frozenset({*_PURE, N.Guarded})


class Facts:
    """The facts of one Program, as a stack the lowering pushes and pops as it walks."""

    def __init__(self, program: N.Program) -> None:
        known = program.__dict__.get("expr_facts")  # (cached by the content hash's walk)
        assigned = frozenset() if known is not None and N.Assign not in known.classes else (
            frozenset(s.name for s in walk_stmts(program.body) if isinstance(s, N.Assign)))
        self.stack: list[Fact] = []
        pure, var = _PURE_CLASSES, N.Var
        self.fixed: Fold[bool] = Fold(lambda e, kids: type(e) in pure and all(kids) and not (
            type(e) is var and e.name in assigned))

    # ------------------------------------------------------------ where facts hold
    def of_then(self, s: N.If) -> list[Fact]:
        return list(self._when(s.cond, True))

    def of_else(self, s: N.If) -> list[Fact]:
        return list(self._when(s.cond, False))

    def after(self, s: N.StmtNode) -> list[Fact]:
        """Facts for the statements after `s` in its block (an early exit's negation)."""
        if isinstance(s, N.If) and not s.orelse and any(isinstance(t, _JUMPS) for t in s.then):
            return list(self._when(s.cond, False))
        return []

    def of_body(self, s: N.For) -> list[Fact]:
        if isinstance(s.end, N.Length) and s.ty is ScalarType.U32:
            return [(s.end.buffer, N.Var(name=s.var, ty=s.ty))]
        return []

    def _when(self, cond: N.ExprNode, value: bool) -> Iterator[Fact]:
        """The facts that hold where `cond` evaluated to `value`."""
        if isinstance(cond, N.Unary) and cond.op == "not":
            yield from self._when(cond.a, not value)
            return
        if not isinstance(cond, N.Binary):
            return
        op, a, b = cond.op, cond.a, cond.b
        if op == ("logical_and" if value else "logical_or"):
            yield from self._when(a, value)
            yield from self._when(b, value)
            return
        # x < L  (true)  /  x >= L  (false), either way round
        if isinstance(b, N.Length) and op == ("lt" if value else "ge"):
            x, buf = a, b.buffer
        elif isinstance(a, N.Length) and op == ("gt" if value else "le"):
            x, buf = b, a.buffer
        else:
            return
        if self.fixed(x):
            yield (buf, x)

    # ------------------------------------------------------------ the question
    def proves(self, buffer: str, index: N.ExprNode) -> bool:
        """Whether a fact in force says `index` (of the Program as written) < Length(buffer)."""
        return any(buf == buffer and same(x, index) for buf, x in self.stack)


def same(a: object, b: object) -> bool:
    """Whether two expressions (or field values) are the same expression: the same node
    kinds and fields, floats equal by their bits (0.0 is not -0.0; a NaN matches nothing)."""
    if a is b:
        return not (isinstance(a, float) and a != a)
    if type(a) is not type(b):
        return False
    if isinstance(a, BaseModel):
        fa, fb = vars(a), vars(b)
        return fa.keys() == fb.keys() and all(same(v, fb[k]) for k, v in fa.items())
    if isinstance(a, tuple) and isinstance(b, tuple):
        return len(a) == len(b) and all(map(same, a, b))
    if isinstance(a, float) and isinstance(b, float):
        return a.hex() == b.hex() and a == a
    return a == b
