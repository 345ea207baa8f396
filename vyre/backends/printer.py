"""The printer skeleton every backend's source printer fills in: the walk over the IR.

A printer turns a (lowered) Program into source text. What every printer does the same way
lives here, once: the dispatch of each expression and statement kind to its spelling (by
exact class, else the nearest base class: a RawLoad is spelled as a Load unless the
printer spells it on its own), the output lines and their indentation, the blocks and
their scopes, and the statement structure that all C-like targets share (let, assign,
store, if). A printer subclasses `Printer` and supplies only spellings:

- `LEAVES`: the kinds without operand expressions (Const, Var, Param, Builtin, Length),
  each `spell(printer, node, opaque) -> text`;
- `EXPRESSIONS`: every other expression kind, `spell(printer, node) -> text`; a spelling
  asks for its operands' text with `operands(node)` (or `expr` on one operand, where it
  must print something before them);
- `STATEMENTS`: the statement kinds the skeleton does not spell itself (all but let,
  assign, store and if: loops, jumps, barriers, atomics), `spell(printer, node, depth)
  -> None`, emitting lines;
- the hooks below (naming, scopes, the value of a binding or store, the if's text),
  whose defaults fit a printer that needs nothing more.

vyre/backends/cuda/printer.py, vyre/backends/wgpu/printer.py and
vyre/backends/reference/render.py are the three fillings. This module must never know a
target's syntax beyond the hooks' defaults, and never touch a device: Program in, text out.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, ClassVar

from vyre.errors import InvalidProgram
from vyre.ir import nodes as N
from vyre.ir.visit import children

LeafSpelling = Callable[[Any, Any, bool], str]
ExprSpelling = Callable[[Any, Any], str]
StmtSpelling = Callable[[Any, Any, int], None]


def _nearest(table: dict[type, Any], t: type) -> Any:
    """The entry of `t`'s nearest class in `table` (its own, else its bases', in MRO
    order), remembered under `t`; None when no class of `t` has one."""
    for base in t.__mro__:
        got = table.get(base)
        if got is not None:
            table[t] = got
            return got
    return None


class Printer:
    """The walk: `expr`, `stmt`, `block`, and `lines` (the output so far)."""

    #: one level of indentation
    INDENT: ClassVar[str] = "    "
    #: the line of an empty block (None: nothing; a language without braces needs one)
    EMPTY_BLOCK: ClassVar[str | None] = None
    LEAVES: ClassVar[dict[type, LeafSpelling]] = {}
    EXPRESSIONS: ClassVar[dict[type, ExprSpelling]] = {}
    STATEMENTS: ClassVar[dict[type, StmtSpelling]] = {}
    #: the printer's name in its errors ("the CUDA printer")
    NAME: ClassVar[str] = "the printer"

    def __init__(self) -> None:
        self.lines: list[str] = []

    def unlowered(self, what: str) -> InvalidProgram:
        """The error for a node vyre.lower rewrites away, met by this printer."""
        return InvalidProgram(f"{what} reached {self.NAME} without vyre.lower (generate "
                              "lowers every Program first)")

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        # each printer class its own tables (_nearest remembers subclasses in them)
        for name in ("LEAVES", "EXPRESSIONS", "STATEMENTS"):
            setattr(cls, name, dict(getattr(cls, name)))

    # ------------------------------------------------------------ expressions
    def expr(self, e: N.ExprNode, opaque: bool = False) -> str:
        """The text of `e`. `opaque`: a printer's request to hide a literal leaf from the
        target's constant evaluation (see `opaque_operands`)."""
        t = type(e)
        leaf = self.LEAVES.get(t)
        if leaf is not None:
            return leaf(self, e, opaque)
        early = self.intercept(e)
        if early is not None:
            return early
        spell = self.EXPRESSIONS.get(t) or _nearest(self.EXPRESSIONS, t)
        if spell is None:
            leaf = _nearest(self.LEAVES, t)
            if leaf is None:
                raise InvalidProgram(f"unknown expression {t.__name__}")
            return leaf(self, e, opaque)
        return spell(self, e)

    def operands(self, e: N.ExprNode) -> list[str]:
        """The text of `e`'s operands, in evaluation order (vyre.ir.visit.children)."""
        kids = children(e)
        hide = self.opaque_operands(kids)
        n = len(kids)  # (no comprehension for the common arities: a frame of its own each)
        if n == 1:
            return [self.expr(kids[0], hide)]
        if n == 2:
            return [self.expr(kids[0], hide), self.expr(kids[1], hide)]
        return [self.expr(k, hide) for k in kids]

    def intercept(self, e: N.ExprNode) -> str | None:
        """The text of `e` where the printer has it already (a hoisted value), else None:
        asked of every expression with operands before they are printed."""
        return None

    def opaque_operands(self, kids: tuple[N.ExprNode, ...]) -> bool:
        """Whether the operands `kids` of one expression are printed opaque."""
        return False

    # ------------------------------------------------------------ output
    def emit(self, depth: int, line: str) -> None:
        self.lines.append(self.INDENT * depth + line)

    def indent(self, depth: int) -> str:
        return self.INDENT * depth

    def capture(self, write: Callable[[], None]) -> list[str]:
        """The lines `write` emits, kept apart from the output (a function's body printed
        where its first call is met, or lines a spelling places itself)."""
        outer, self.lines = self.lines, []
        try:
            write()
            return self.lines
        finally:
            self.lines = outer

    def block_lines(self, body: Iterable[N.StmtNode], depth: int) -> list[str]:
        """`block(body, depth)`'s lines, kept apart from the output."""
        return self.capture(lambda: self.block(tuple(body), depth))

    # ------------------------------------------------------------ statements
    def block(self, body: tuple[N.StmtNode, ...], depth: int) -> None:
        """The statements of `body`, in a scope of their own; a run of them the printer
        spells as one (`run_at`) is printed as one."""
        if not body and self.EMPTY_BLOCK is not None:
            self.emit(depth, self.EMPTY_BLOCK)
            return
        self.open_scope()
        i = 0
        while i < len(body):
            n = self.run_at(body, i, depth)
            if n:
                i += n
            else:
                self.stmt(body[i], depth)
                i += 1
        self.close_scope()

    def stmt(self, s: N.StmtNode, depth: int) -> None:
        t = type(s)
        if t is N.Let:
            self.let(s, depth)  # type: ignore[arg-type]
        elif t is N.Assign:
            self.assign(s, depth)  # type: ignore[arg-type]
        elif t is N.If:
            self.if_(s, depth)  # type: ignore[arg-type]
        elif t is N.RawStore or t is N.Store:
            self.store(s, depth)  # type: ignore[arg-type]
        else:
            spell = self.STATEMENTS.get(t) or _nearest(self.STATEMENTS, t)
            if spell is None:
                raise InvalidProgram(f"unknown statement {t.__name__}")
            spell(self, s, depth)

    def let(self, s: N.Let, depth: int) -> None:
        value = self.bound_value(s.value)
        self.emit(depth, self.let_text(self.bind(s.name, s.value), s.value.ty, value))

    def assign(self, s: N.Assign, depth: int) -> None:
        value = self.bound_value(s.value)
        self.emit(depth, f"{self.rebind(s.name, s.value)} = {value}{self.END_STATEMENT}")

    def store(self, s: N.Store, depth: int) -> None:
        index = self.store_index(s.index)
        self.emit(depth, self.store_text(s, index, self.stored_value(s)))

    def if_(self, s: N.If, depth: int) -> None:
        self.emit(depth, self.if_text(self.expr(s.cond)))
        before = self.before_branches()
        self.block(s.then, depth + 1)
        taken = self.between_branches(before)
        if s.orelse:
            self.emit(depth, self.ELSE)
            self.block(s.orelse, depth + 1)
        self.after_branches(taken)
        if self.END_IF is not None:
            self.emit(depth, self.END_IF)

    # ------------------------------------------------------------ hooks of the statements
    END_STATEMENT: ClassVar[str] = ";"
    ELSE: ClassVar[str] = "} else {"
    END_IF: ClassVar[str | None] = "}"

    def if_text(self, cond: str) -> str:
        return f"if ({cond}) {{"

    def let_text(self, name: str, ty: Any, value: str) -> str:
        raise NotImplementedError

    def store_text(self, s: N.Store, index: str, value: str) -> str:
        raise NotImplementedError

    def bind(self, name: str, value: N.ExprNode) -> str:
        """The target's name of a new local `name` bound to `value`."""
        raise NotImplementedError

    def rebind(self, name: str, value: N.ExprNode) -> str:
        """The target's name of local `name`, assigned `value`."""
        raise NotImplementedError

    def bound_value(self, value: N.ExprNode) -> str:
        """The text of a let's or assign's value."""
        return self.expr(value)

    def store_index(self, index: N.ExprNode) -> str:
        return self.expr(index)

    def stored_value(self, s: N.Store) -> str:
        return self.expr(s.value)

    def run_at(self, body: tuple[N.StmtNode, ...], i: int, depth: int) -> int:
        """How many statements from body[i] the printer printed as one (0: none)."""
        return 0

    def open_scope(self) -> None:
        """A block begins."""

    def close_scope(self) -> None:
        """The block `open_scope` began ends."""

    def before_branches(self) -> Any:
        """Before an if's branches: what the printer tracks, to restart the else from."""
        return None

    def between_branches(self, before: Any) -> Any:
        """After the then branch: restart from `before`; returns what the then left."""
        return None

    def after_branches(self, taken: Any) -> None:
        """After both branches: join what the then branch left (`between_branches`' result)."""

