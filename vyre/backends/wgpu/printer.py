"""The WGSL printer: vyre.backends.printer's skeleton filled in with WGSL's spellings.

`WgslPrinter` is the state of printing one module (state.py) with each node kind mapped to
its spelling: expressions.py (expressions), memory.py (loads, stores, vec4 runs,
barriers), atomics.py, loops.py; the literals, fences and maths helpers those call are
spelling.py's, float_fences.py's and maths.py's. render.py builds the module around the
body. Every user name is mangled with a prefix, so no IR name can collide with a WGSL
keyword or builtin. Pure: it must never touch a device, and never decide which features a
device has."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from vyre.ir import nodes as N
from vyre.ir.types import ScalarType

from ..printer import Printer, StmtSpelling
from . import atomics, expressions, loops, memory
from .fences import FenceFlow
from .spelling import wgsl_type
from .state import WgslState
from .vectors import LANES


def _emitting(spell: Callable[[Any, Any, int], list[str]]) -> StmtSpelling:
    """A statement spelling that returns its lines (indented) as one that emits them."""
    def emit(printer: Printer, s: Any, depth: int) -> None:
        printer.lines.extend(spell(printer, s, depth))
    return emit


class WgslPrinter(WgslState):
    """WGSL's spelling of each node kind, over the state of one module (state.py)."""

    # ------------------------------------------------------------ the skeleton's hooks
    NAME = "the WGSL printer"
    LEAVES = expressions.LEAVES
    EXPRESSIONS = expressions.EXPRESSIONS
    STATEMENTS = {
        N.While: _emitting(loops._while), N.For: _emitting(loops._for),
        N.Break: _emitting(loops._break), N.Continue: _emitting(loops._continue),
        N.Return: _emitting(loops._return), N.Barrier: _emitting(memory._barrier),
        N.Atomic: _emitting(atomics._atomic),
    }

    def intercept(self, e: N.ExprNode) -> str | None:
        return expressions._intercept(self, e)

    def opaque_operands(self, kids: tuple[N.ExprNode, ...]) -> bool:
        return expressions._opaque_operands(self, kids)

    def open_scope(self) -> None:
        self.scopes.append({})
        self.flow.enter_scope()

    def close_scope(self) -> None:
        self.flow.exit_scope()
        self.scopes.pop()

    def run_at(self, body: tuple[N.StmtNode, ...], i: int, depth: int) -> int:
        run = None if self.vec is None else self.vec.run_at(body, i)
        if run is None:
            return 0
        self.lines.extend(memory._vec_run(self, run, body[i:i + LANES], self.indent(depth)))
        return LANES

    def before_branches(self) -> FenceFlow:
        return self.flow.copy()

    def between_branches(self, before: FenceFlow) -> FenceFlow:
        taken, self.flow = self.flow, before
        return taken

    def after_branches(self, taken: FenceFlow) -> None:
        self.flow.join(taken)

    def bound_value(self, value: N.ExprNode) -> str:
        return memory._bound_value(self, value)

    def bind(self, name: str, value: N.ExprNode) -> str:
        self.flow.declare(name, self.flow.bound_kinds(value))
        return self.declare(name)

    def rebind(self, name: str, value: N.ExprNode) -> str:
        self.flow.assign(name, self.flow.bound_kinds(value))
        return self.lookup(name)

    def let_text(self, name: str, ty: ScalarType, value: str) -> str:
        return f"var {name}: {wgsl_type(ty)} = {value};"

    def store_index(self, index: N.ExprNode) -> str:
        return memory._index(self, index)

    def stored_value(self, s: N.Store) -> str:
        return memory._stored_value(self, s)

    def store_text(self, s: N.Store, index: str, value: str) -> str:
        return memory._raw_store(self, s, index, value)
