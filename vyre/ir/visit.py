"""One traversal framework for the Program IR: the children of a node, a node rebuilt with
new children, and bottom-up rewrites of expressions and statement blocks.

Every walker (validation, analysis, the lowering passes, the printers) gets a node's
children here instead of keeping its own `isinstance` chain, so a new node kind is added
in one place. Rewrites memoise by node identity, so a subexpression shared by several
parents is rewritten once and stays shared. This module must never know what an
operation means (that is vyre.lower and the reference backend) nor print anything.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, TypeVar

from . import nodes as N

Expr = N.ExprNode
Stmt = N.StmtNode
R = TypeVar("R")


def children(e: Expr) -> tuple[Expr, ...]:
    """The operand expressions of `e`, in evaluation order."""
    if isinstance(e, N.Load):
        return (e.index,)
    if isinstance(e, (N.Unary, N.Cast, N.Bitcast)):
        return (e.a,)
    if isinstance(e, N.Binary):
        return (e.a, e.b)
    if isinstance(e, (N.Call, N.Native)):
        return e.args
    if isinstance(e, N.Select):
        return (e.cond, e.a, e.b)
    return ()


def with_children(e: Expr, kids: tuple[Expr, ...]) -> Expr:
    """`e` with its operands replaced by `kids` (the same node when nothing changed)."""
    old = children(e)
    if len(kids) != len(old):
        raise ValueError(f"{e.kind} has {len(old)} operands, got {len(kids)}")
    if all(a is b for a, b in zip(old, kids)):
        return e
    if isinstance(e, N.Load):
        upd: dict[str, object] = {"index": kids[0]}
    elif isinstance(e, (N.Unary, N.Cast, N.Bitcast)):
        upd = {"a": kids[0]}
    elif isinstance(e, N.Binary):
        upd = {"a": kids[0], "b": kids[1]}
    elif isinstance(e, (N.Call, N.Native)):
        upd = {"args": tuple(kids)}
    else:
        assert isinstance(e, N.Select)
        upd = {"cond": kids[0], "a": kids[1], "b": kids[2]}
    return e.model_copy(update=upd)


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
}
_BLOCK_FIELDS: dict[type, tuple[str, ...]] = {
    N.If: ("then", "orelse"), N.For: ("body",), N.While: ("body",),
}


def with_parts(s: Stmt, exprs: tuple[Expr, ...], blocks: tuple[tuple[Stmt, ...], ...]) -> Stmt:
    """`s` with the expressions of `stmt_exprs` and the blocks of `child_blocks` replaced."""
    upd: dict[str, object] = {}
    names = [f for f in _EXPR_FIELDS.get(type(s), ()) if getattr(s, f) is not None]
    for f, new in zip(names, exprs, strict=True):
        if getattr(s, f) is not new:
            upd[f] = new
    for f, blk in zip(_BLOCK_FIELDS.get(type(s), ()), blocks, strict=True):
        if getattr(s, f) != blk or len(blk) != len(getattr(s, f)):
            upd[f] = tuple(blk)
    return s.model_copy(update=upd) if upd else s


class Fold(Generic[R]):
    """A bottom-up fold: `fn(node, results_of_its_children)` gives the node's result.

    Memoised by node identity (a shared subexpression is visited once; its result is
    reused), iterative (a deep expression never hits Python's recursion limit). One
    instance may fold several roots, sharing the memo.
    """

    def __init__(self, fn: Callable[[Expr, tuple[R, ...]], R]) -> None:
        self.fn = fn
        self.memo: dict[int, tuple[Expr, R]] = {}  # id -> (node kept alive, result)

    def __call__(self, root: Expr) -> R:
        memo = self.memo
        stack: list[tuple[Expr, bool]] = [(root, False)]
        while stack:
            e, ready = stack.pop()
            if id(e) in memo:
                continue
            kids = children(e)
            if not ready:
                stack.append((e, True))
                stack.extend((k, False) for k in reversed(kids) if id(k) not in memo)
                continue
            memo[id(e)] = (e, self.fn(e, tuple(memo[id(k)][1] for k in kids)))
        return memo[id(root)][1]


class ExprMap(Fold[Expr]):
    """A bottom-up expression rewrite: `fn(node, new_children)` returns the replacement
    (a Fold whose results are expressions; shared subexpressions stay shared)."""


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

    def visit(n: Expr, _kids: tuple[Expr, ...]) -> Expr:
        seen.append(n)
        return n

    ExprMap(visit)(e)
    return seen
