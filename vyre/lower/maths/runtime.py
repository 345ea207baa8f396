"""Which arguments of a function call are runtime values: values that no compiler can
reduce to a constant, so that a definition called on them needs no `opaque` guard.

`apply.opaque` keeps a driver's compiler from evaluating a whole definition at compile
time when its argument is a constant (lavapipe's LLVM took 448 s over atan2(0, -0)), at
the price of a compare and a select per call (about 2 of a chain's 40 issue slots on
CUDA). An argument read from memory, or made of such a value by steps that cannot cancel
it, is never a constant, so it goes unguarded. The rule is deliberately narrow (it must
hold even for a compiler that folds algebraically, as some do without fast-math flags
for x - x or x * 0): a runtime leaf (a buffer or workgroup element, a parameter, a
buffer's length, a varying id; a local every one of whose definitions is runtime), then
only steps that keep a value varying: negation, casts and bitcasts, a select of two
runtime values, a table read or a call at runtime arguments, and a binary operation of
a runtime value and a constant that cannot absorb it (+ and - of a finite constant, *
and / by a nonzero finite one, an integer xor) or of two different runtime values in
float + - * /. Anything else is "maybe constant" and keeps its guard. This module only decides; it
must never rewrite a program.
"""

from __future__ import annotations

import math

from vyre.ir import nodes as N
from vyre.ir.visit import child_blocks

_LEAVES = (N.Load, N.Param, N.Length)  # RawLoad is a Load
# ids that differ between invocations (another axis may be a size-1 constant)
_VARYING = frozenset({"global_id", "local_id", "workgroup_id", "local_index", "subgroup_lane"})
_KEEPS = frozenset({"add", "sub"})  # x op c is never a constant
_FLOAT_PAIR = frozenset({"add", "sub", "mul", "div"})


def runtime_locals(body: tuple[N.StmtNode, ...]) -> frozenset[str]:
    """The locals of `body` every one of whose definitions (lets, assignments, an
    atomic's old value) is a runtime value: the greatest such set (a local defined only
    from itself and runtime values is runtime); a loop variable never is."""
    defs: dict[str, list[N.ExprNode | None]] = {}  # None: always runtime (atomic result)
    fixed: set[str] = set()  # loop variables: known at compile time once unrolled

    def visit(stmts: tuple[N.StmtNode, ...]) -> None:
        for s in stmts:
            if isinstance(s, (N.Let, N.Assign)):
                defs.setdefault(s.name, []).append(s.value)
            elif isinstance(s, N.Atomic) and s.result is not None:
                defs.setdefault(s.result, []).append(None)
            elif isinstance(s, N.For):
                fixed.add(s.var)
            for blk in child_blocks(s):
                visit(blk)

    visit(body)
    live = set(defs) - fixed
    changed = True
    while changed:
        changed = False
        for name in list(live):
            if not all(v is None or is_runtime(v, live) for v in defs[name]):
                live.discard(name)
                changed = True
    return frozenset(live)


def is_runtime(e: N.ExprNode, locals_: frozenset[str] | set[str]) -> bool:
    """Whether `e` is a runtime value (module docstring), `locals_` the runtime locals."""
    t = type(e)
    if isinstance(e, _LEAVES):
        return True
    if t is N.Var:
        return e.name in locals_  # type: ignore[union-attr]
    if t is N.Builtin:
        assert isinstance(e, N.Builtin)
        return e.name == "num_workgroups" or (e.name in _VARYING and e.axis == 0)
    if t is N.Unary:
        assert isinstance(e, N.Unary)
        return is_runtime(e.a, locals_)
    if t in (N.Cast, N.Bitcast):
        return is_runtime(e.a, locals_)  # type: ignore[union-attr]
    if t in (N.Select, N.Guarded):
        assert isinstance(e, N.Select)
        return is_runtime(e.a, locals_) and is_runtime(e.b, locals_)
    if t is N.Table:
        assert isinstance(e, N.Table)
        return is_runtime(e.index, locals_)
    if t in (N.Call, N.Invoke, N.Native):
        args = e.args  # type: ignore[union-attr]
        return bool(args) and all(is_runtime(a, locals_) for a in args)
    if t is N.Binary:
        assert isinstance(e, N.Binary)
        return _binary(e, locals_)
    return False


def _binary(e: N.Binary, locals_: frozenset[str] | set[str]) -> bool:
    ra, rb = is_runtime(e.a, locals_), is_runtime(e.b, locals_)
    if ra and rb:
        return e.a.ty.is_float and e.op in _FLOAT_PAIR and e.a != e.b
    if not (ra or rb):
        return False
    c = e.b if ra else e.a
    if not isinstance(c, N.Const):
        return False
    if not e.ty.is_float:
        return e.op in _KEEPS or e.op == "xor"
    v = float(c.value)  # (an infinite or NaN constant can absorb x)
    return math.isfinite(v) and (e.op in _KEEPS or (e.op in ("mul", "div") and v != 0.0))


__all__ = ["is_runtime", "runtime_locals"]
