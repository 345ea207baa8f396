"""ProgramBuilder: the control flow of a kernel (if_ / else_, for_range, while_, each a
`with` block) and build(), which validates the Program and names the user's line of the
node an error is about.

This module must never evaluate a kernel or know about backends.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from ..errors import InvalidProgram
from ..ir import nodes as N
from ..ir.limits import MAX_DEPTH
from ..ir.sites import remember as remember_sites
from ..ir.types import ScalarType
from ..ir.validate import validate
from .control import _tracked
from .functions import select
from .rules import BOOL, U32, _const, _scalar_type
from .sites import _IR_PATH, _WITH_AS, BuildError, user_site
from .statements import Statements
from .values import Value, _Scope


class ProgramBuilder(Statements):
    """Builds one Program; see vyre.builder's docstring."""

    @contextmanager
    def _block(self) -> Iterator[list[N.StmtNode]]:
        if len(self._blocks) > MAX_DEPTH:  # refused here, before any deep recursion
            raise BuildError(
                f"control blocks nested more than {MAX_DEPTH} deep (the IR's limit); flatten "
                "them: combine conditions with & (`with vyre.if_((a) & (b)):`), use "
                "vyre.select, or move the inner work into a separate kernel"
            )
        block: list[N.StmtNode] = []
        self._blocks.append(block)
        self._scopes.append([])
        if self._strict:
            where = user_site()
            inner = _Scope(f"a value computed inside the block at {where}" if where
                           else "a value computed inside a block")
            self._block_scopes.append(inner)
            self._scopes[-1].append(inner)
        try:
            yield block
        finally:
            self._blocks.pop()
            if self._strict:
                self._block_scopes.pop()
            for s in self._scopes.pop():
                s.alive = False

    def _cond(self, cond: Any, what: str) -> N.ExprNode:
        e = self._coerce(cond, BOOL, what)
        if e.ty is not BOOL:
            raise BuildError(f"{what} must be bool, got {e.ty}; compare it, e.g. x != 0")
        return e

    @_tracked("`with vyre.if_(cond):` (or `with k.if_(cond):`) with the block indented "
              "under it")
    @contextmanager
    def if_(self, cond: Any) -> Iterator[None]:
        """`with k.if_(cond):` runs the block where the bool `cond` holds."""
        c = self._cond(cond, "if condition")
        site = user_site()
        with self._block() as body:
            yield
        self._emit(N.If(cond=c, then=tuple(body)), site)

    @_tracked("`with vyre.else_():` (or `with k.else_():`) directly after the if_ block")
    @contextmanager
    def else_(self) -> Iterator[None]:
        """Must directly follow a `with k.if_(...)` block."""
        block = self._blocks[-1]
        if not block or not isinstance(block[-1], N.If) or block[-1].orelse:
            raise BuildError("else_() must directly follow a `with k.if_(...)` block")
        last = block.pop()
        assert isinstance(last, N.If)
        try:
            with self._block() as body:
                yield
        finally:
            new = N.If(cond=last.cond, then=last.then, orelse=tuple(body))
            block.append(new)
            if id(last) in self._sites:
                self._sites[id(new)] = self._sites[id(last)]

    @_tracked("`for i in vyre.range(n):` (or `with k.for_range(n) as i:`)")
    @contextmanager
    def for_range(
        self, start: Any, end: Any = None, step: int = 1, ty: ScalarType | None = None,
        loop_name: str | None = None,
    ) -> Iterator[Value]:
        """`for i in range(start, end, step)`, as Python counts it (step: a nonzero int
        constant; a negative one counts down from `start` to just above `end`)."""
        if end is None:
            start, end = 0, start
        if isinstance(step, bool) or not isinstance(step, int) or step == 0:
            raise BuildError(
                f"a device loop's step must be a nonzero Python int (a build-time constant: "
                f"it decides whether the loop counts up or down), got {step!r}; for a step "
                "computed on the device write a while loop: `j = start`, `while j < end:`, "
                "..., `j += step`")
        t = _scalar_type(ty, "loop variable") if ty else None
        if t is None:
            for v in (start, end):
                if isinstance(v, Value):
                    t = v.ty
                    break
            else:
                t = U32
        if t not in (ScalarType.I32, U32):
            raise BuildError(f"a loop variable must be i32 or u32, got {t}")
        s = self._coerce(start, t, "loop start")
        e = self._coerce(end, t, "loop end")
        if s.ty != t or e.ty != t:
            raise BuildError(f"loop bounds must be {t}, got {s.ty} and {e.ty}; cast them")
        name = self._name_for(loop_name, "i", _WITH_AS)
        site = user_site()
        down = None
        if step < 0:  # the IR's For counts up: count the passes, and j = start - pass * k
            down = self._count_down(s, e, -step, t)
            s, e, t = _const(0, U32), down[1], U32
            name = self._fresh(f"{name}_pass")
        self._declare_name(name, "loop variable")
        scope = _Scope(f"loop variable {name!r}")
        self._loop_depth += 1
        try:
            with self._block() as body:
                var = Value(self, N.Var(name=name, ty=t), scope)
                yield var if down is None else down[0](var, scope)
        finally:
            self._loop_depth -= 1
            scope.alive = False
        self._emit(N.For(var=name, ty=t, start=s, end=e, step=1 if down else step,
                         body=tuple(body)), site)

    def _count_down(self, start: N.ExprNode, end: N.ExprNode, k: int, ty: ScalarType
                    ) -> tuple[Callable[[Value, _Scope], Value], N.ExprNode]:
        """`range(start, end, -k)` over a loop of passes 0, 1, ... counting up: (the loop
        variable of a pass, the number of passes). `start` is read once (a let), like a
        For's bounds; the count is exact for every start and end of an i32 or u32 loop
        (start - end, when positive, is below 2**32 as a u32)."""
        first = self.let(Value(self, start))
        last = Value(self, end)
        span = first - last
        if ty is ScalarType.I32:
            span = span.bitcast(U32)
        passes = select(first > last, (span - 1) // k + 1, self.lit(0, U32))

        def variable(p: Value, scope: _Scope) -> Value:
            back = p * k if ty is U32 else (p * k).bitcast(ScalarType.I32)
            return Value(self, (first - back).expr, scope)
        return variable, passes.expr

    @_tracked("`with vyre.while_(cond):` (or `with k.while_(cond):`) with the loop body "
              "indented under it")
    @contextmanager
    def while_(self, cond: Any) -> Iterator[None]:
        """Loop while `cond` (re-evaluated each iteration) holds; break_/continue_ inside."""
        c = self._cond(cond, "while condition")
        site = user_site()
        self._loop_depth += 1
        try:
            with self._block() as body:
                yield
        finally:
            self._loop_depth -= 1
        self._emit(N.While(cond=c, body=tuple(body)), site)

    # -- finish
    def build(self) -> N.Program:
        """The validated, immutable Program."""
        if len(self._blocks) != 1:
            raise BuildError("build() called inside an open block")
        if self._unentered:
            raise next(iter(self._unentered.values())).error()
        prog = N.Program(
            name=self.name,
            workgroup_size=self.workgroup_size,
            buffers=tuple(self._buffers),
            params=tuple(self._params),
            workgroup_arrays=tuple(self._arrays),
            body=tuple(self._blocks[0]),
        )
        try:
            validate(prog)
        except InvalidProgram as exc:
            raise self._located(prog, exc) from None
        self._built = True
        remember_sites(prog, self._sites)  # for diagnostics after the build (checked mode)
        return prog

    def _located(self, prog: N.Program, exc: InvalidProgram) -> InvalidProgram:
        """The validator's error at the user's source line of the failing statement (the
        IR path stays in `.node` for tools)."""
        if not exc.node:
            return exc
        path = exc.node.split(" ")[0]
        sites: dict[str, str] = {}

        def walk(stmts: tuple[N.StmtNode, ...], at: str) -> None:
            for i, st in enumerate(stmts):
                here = f"{at}[{i}]"
                if id(st) in self._sites:
                    sites[here] = self._sites[id(st)]
                for field in ("then", "orelse", "body"):
                    inner = getattr(st, field, None)
                    if isinstance(inner, tuple):
                        walk(inner, f"{here}.{field}")

        walk(prog.body, "body")
        best = max((p for p in sites if path == p or path.startswith(p + ".")), key=len,
                   default=None)
        message = str(exc).removeprefix(f"{exc.node}: ")
        if best is None:
            return exc

        def at_line(m: re.Match[str]) -> str:  # IR paths in the text -> the user's lines
            p = m.group(0)
            hit = max((q for q in sites if p == q or p.startswith(q + ".")), key=len, default=None)
            return f"line {sites[hit].rsplit(':', 1)[1]}" if hit else p

        message = _IR_PATH.sub(at_line, message)
        err = BuildError(f"{message} [IR node {exc.node}]", sites[best])
        err.node = exc.node
        return err
