"""One traversal framework for the Program IR: the children of a node, a node rebuilt with
new children, and bottom-up rewrites of expressions and statement blocks.

Every walker (validation, analysis, the lowering passes, the printers) gets a node's
children here instead of keeping its own `isinstance` chain, so a new node kind is added
in one place. Rewrites memoise by node identity, so a subexpression shared by several
parents is rewritten once and stays shared. This module must never know what an
operation means (that is vyre.lower and the reference backend) nor print anything.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any, Generic, TypeVar

from . import nodes as N

Expr = N.ExprNode
Stmt = N.StmtNode
R = TypeVar("R")


_KIDS: dict[type, Callable[[Any], tuple[Expr, ...]]] = {
    N.Load: lambda e: (e.index,),
    N.RawLoad: lambda e: (e.index,),
    N.Table: lambda e: (e.index,),
    N.Unary: lambda e: (e.a,),
    N.Cast: lambda e: (e.a,),
    N.Bitcast: lambda e: (e.a,),
    N.Binary: lambda e: (e.a, e.b),
    N.Call: lambda e: e.args,
    N.Native: lambda e: e.args,
    N.Invoke: lambda e: e.args,  # (the function's body is a scope of its own)
    N.Select: lambda e: (e.cond, e.a, e.b),
    N.Guarded: lambda e: (e.cond, e.a, e.b),
    N.Subgroup: lambda e: (e.value,) if e.lane is None else (e.value, e.lane),
}
_LEAF: Callable[[Any], tuple[Expr, ...]] = lambda e: ()  # noqa: E731


def children(e: Expr) -> tuple[Expr, ...]:
    """The operand expressions of `e`, in evaluation order."""
    return _KIDS.get(type(e), _LEAF)(e)


def with_children(e: Expr, kids: tuple[Expr, ...]) -> Expr:
    """`e` with its operands replaced by `kids` (the same node when nothing changed)."""
    old = children(e)
    if len(kids) != len(old):
        raise ValueError(f"{e.kind} has {len(old)} operands, got {len(kids)}")
    if all(map(operator.is_, old, kids)):
        return e
    return _rebuilt(e, kids)


# the fields holding the operands `children` gives, in its order (Call and Native: `args`)
_KID_FIELDS: dict[type, tuple[str, ...]] = {
    N.Load: ("index",), N.RawLoad: ("index",), N.Table: ("index",), N.Unary: ("a",), N.Cast: ("a",),
    N.Bitcast: ("a",), N.Binary: ("a", "b"), N.Select: ("cond", "a", "b"),
    N.Guarded: ("cond", "a", "b"), N.Subgroup: ("value", "lane"),
}


def _rebuilt(e: Expr, kids: tuple[Expr, ...]) -> Expr:
    """`e` over new operands `kids` (as many as it has; at least one changed)."""
    names = _KID_FIELDS.get(type(e))
    upd: dict[str, object] = {"args": tuple(kids)} if names is None else dict(zip(names, kids))
    return N.copied(e, upd)


def stmt_exprs(s: Stmt) -> tuple[Expr, ...]:
    """The expressions a statement evaluates itself (not those of its nested blocks)."""
    if isinstance(s, (N.Let, N.Assign)):
        return (s.value,)
    if isinstance(s, N.Store):
        return (s.index, s.value)
    if isinstance(s, (N.If, N.While)):
        return (s.cond,)
    if isinstance(s, N.For):
        return (s.start, s.end)
    if isinstance(s, N.Atomic):
        return (s.index, s.value) + ((s.comparand,) if s.comparand is not None else ())
    if isinstance(s, N.Print):
        return s.args
    if isinstance(s, N.Assert):
        return (s.cond, *s.args)
    return ()


def child_blocks(s: Stmt) -> tuple[tuple[Stmt, ...], ...]:
    if isinstance(s, N.If):
        return (s.then, s.orelse)
    if isinstance(s, (N.For, N.While)):
        return (s.body,)
    return ()


_EXPR_FIELDS: dict[type, tuple[str, ...]] = {
    N.Let: ("value",), N.Assign: ("value",), N.Store: ("index", "value"), N.If: ("cond",),
    N.While: ("cond",), N.For: ("start", "end"), N.Atomic: ("index", "value", "comparand"),
    N.RawStore: ("index", "value"), N.RawAtomic: ("index", "value", "comparand"),
}
_BLOCK_FIELDS: dict[type, tuple[str, ...]] = {
    N.If: ("then", "orelse"), N.For: ("body",), N.While: ("body",),
}


def with_parts(s: Stmt, exprs: tuple[Expr, ...], blocks: tuple[tuple[Stmt, ...], ...]) -> Stmt:
    """`s` with the expressions of `stmt_exprs` and the blocks of `child_blocks` replaced."""
    upd: dict[str, object] = {}
    if isinstance(s, (N.Print, N.Assert)):  # (a variable number of operands: args)
        old = stmt_exprs(s)
        if len(exprs) != len(old):
            raise ValueError(f"{s.kind} has {len(old)} operands, got {len(exprs)}")
        if any(a is not b for a, b in zip(exprs, old)):
            if isinstance(s, N.Assert):
                upd = {"cond": exprs[0], "args": tuple(exprs[1:])}
            else:
                upd = {"args": tuple(exprs)}
        return N.copied(s, upd) if upd else s
    names = [f for f in _EXPR_FIELDS.get(type(s), ()) if getattr(s, f) is not None]
    for f, new in zip(names, exprs, strict=True):
        if getattr(s, f) is not new:
            upd[f] = new
    for f, blk in zip(_BLOCK_FIELDS.get(type(s), ()), blocks, strict=True):
        old = getattr(s, f)
        if len(blk) != len(old) or any(a is not b for a, b in zip(blk, old)):
            upd[f] = tuple(blk)
    return N.copied(s, upd) if upd else s


class Fold(Generic[R]):
    """A bottom-up fold: `fn(node, results_of_its_children)` gives the node's result.

    Memoised by node identity (a shared subexpression is visited once; its result is
    reused). One instance may fold several roots, sharing the memo.
    """

    def __init__(self, fn: Callable[[Expr, tuple[R, ...]], R]) -> None:
        self.fn = fn
        self.memo: dict[int, tuple[Expr, R]] = {}  # id -> (node kept alive, result)
        self._go = self._walker()  # made once: folds run per node of every compile

    def _walker(self) -> Callable[[Expr], R]:
        memo, fn, kids_of, leaf = self.memo, self.fn, _KIDS.get, _LEAF

        # Recursive: the validator bounds nesting at 64 levels (MAX_DEPTH), far inside
        # Python's recursion limit, and recursion is several times faster than a stack.
        def go(e: Expr) -> R:
            i = id(e)
            got = memo.get(i)
            if got is not None:
                return got[1]
            r = fn(e, tuple(map(go, kids_of(type(e), leaf)(e))))
            memo[i] = (e, r)
            return r

        return go

    def __call__(self, root: Expr) -> R:
        return self._go(root)


class ExprMap(Fold[Expr]):
    """A bottom-up expression rewrite: `fn(node, written)` returns the replacement of
    `written`, the node as it was, given `node`, that node over its operands' replacements
    (`written` itself when none changed); shared subexpressions stay shared.

    `unchanged`, shared between several maps, records the subtrees a rewrite left as
    they were, so a later map skips them (a rewrite whose results depend on where they
    are used, such as one that adds locals, starts each use with a fresh map but may
    still share what it never changes).
    """

    def __init__(self, fn: Callable[[Expr, Expr], Expr],
                 unchanged: dict[int, Expr] | None = None,
                 kept: frozenset[type] = frozenset()) -> None:
        self.unchanged = unchanged if unchanged is not None else {}
        # operand-less node classes `fn` returns as they are: not even asked (a rewrite's
        # leaves are most of its nodes)
        self.kept = kept
        self.rewrite = fn
        super().__init__(lambda e, kids: e)  # (the fold's own fn is unused: _walker)

    def _walker(self) -> Callable[[Expr], Expr]:
        memo, same, fn, kids_of, leaf = self.memo, self.unchanged, self.rewrite, _KIDS.get, _LEAF
        kept, is_not, rebuilt = self.kept, operator.is_not, _rebuilt

        def go(e: Expr) -> Expr:
            t = type(e)
            if t in kept:
                return e
            i = id(e)
            if i in same:
                return e
            got = memo.get(i)
            if got is not None:
                return got[1]
            old = kids_of(t, leaf)(e)
            node = e
            n = len(old)
            if n == 2:  # (most operations: their kept operands not even called)
                a, b = old
                na = a if type(a) in kept else go(a)
                nb = b if type(b) in kept else go(b)
                if na is not a or nb is not b:
                    node = rebuilt(e, (na, nb))
            elif n == 1:
                a = old[0]
                na = a if type(a) in kept else go(a)
                if na is not a:
                    node = rebuilt(e, (na,))
            elif n:
                new = tuple(map(go, old))
                if any(map(is_not, old, new)):
                    node = rebuilt(e, new)
            r = fn(node, e)
            if r is e:
                same[i] = e  # (keeps e alive: its id is never reused meanwhile)
            else:
                memo[i] = (e, r)
            return r

        return go


def map_block(body: tuple[Stmt, ...], fn: Callable[[Stmt], list[Stmt]]) -> tuple[Stmt, ...]:
    """Rewrite a block: nested blocks first, then `fn(stmt)` (which may return several
    statements, or none) for each statement of this block."""
    out: list[Stmt] = []
    for s in body:
        blocks = child_blocks(s)
        if blocks:
            s = with_parts(s, stmt_exprs(s), tuple(map_block(b, fn) for b in blocks))
        out.extend(fn(s))
    return tuple(out)


def walk_exprs(e: Expr) -> list[Expr]:
    """Every node of `e` (shared nodes once), children before parents."""
    seen: list[Expr] = []

    def visit(n: Expr, _written: Expr) -> Expr:
        seen.append(n)
        return n

    ExprMap(visit)(e)
    return seen
