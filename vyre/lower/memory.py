"""The bounds-checked memory rule, written once: an explicit index test around an
unchecked core access.

docs/IR.md: a load at `index >= length` reads 0, a store there does nothing, an atomic
there does nothing and its old value reads 0. Unless the target's `Traits` say its memory
is checked by itself (`checked_memory`: the reference interpreter), every Load, Store and
Atomic becomes the test `index < Length(buffer)` in the IR around a RawLoad / RawStore /
RawAtomic (vyre.ir.nodes), which a printer spells as a plain, unchecked access:
- store: `if (i < len(b)) { raw b[i] = v }`;
- atomic: the same; a `result` local is declared 0 before and assigned the old value
  inside (`let r = 0; if (i < len(b)) { raw let t = atomic(..); r = t }`);
- load: on a target where a guarded load may stay an expression (`guarded_expr`: C's
  `?:` evaluates only its chosen operand; WGSL's `select` evaluates both, but WebGPU
  reads any index without faulting, so the read it discards is harmless) it is
  `Guarded(i < len(b), raw b[i], 0)`; elsewhere a local is set under an `if` just before
  the statement (`let t = 0; if (i < len(b)) { t = raw b[i] }`, then `t`; `let x = b[i]`
  sets `x` itself), which is the same thing because IR expressions have no side effects.
An index into a workgroup array (whose length is declared) that vyre.lower.ranges bounds
needs no run-time test: always in range it is the raw access itself (the library
matmul's tile reads), never in range 0 / nothing. Nor does an index that an enclosing
condition already tested against the same length (vyre.lower.facts: `if (i < len(y))
{ y[i] = y[i] + 1 }` tests once), on a target that evaluates an access only where
control reaches it (`Traits.in_place`).
The index is evaluated once by the test and the access: repeated when it holds no memory
access (a pure expression every target compiler computes once; a local would also hide
its form from target analyses such as CUDA's stride analysis), else set in a local.
`guarded_load` / `guarded_store` recognise the guarded forms, for a printer that wants
to treat one as a unit (CUDA's vectorised loads and stores). This module must never
print source or know a target's spelling.
"""

from __future__ import annotations

from typing import Protocol

from vyre.ir import nodes as N
from vyre.ir.nodes import copied, made
from vyre.ir.types import ScalarType
from vyre.ir.visit import Fold

from .facts import Facts
from .ranges import Ranges

_BOOL = ScalarType.BOOL


class Host(Protocol):
    """What the rule needs from the lowering it runs in (vyre.lower.passes)."""

    pending: list[N.StmtNode]

    def once(self, e: N.ExprNode) -> N.ExprNode: ...

    def fresh(self) -> str: ...


_ZEROS: dict[ScalarType, N.Const] = {}


def zero(ty: ScalarType) -> N.Const:
    """The IR's 0 of `ty` (one node per type: nodes are immutable, a shared one is fine)."""
    z = _ZEROS.get(ty)
    if z is None:
        z = _ZEROS[ty] = N.Const(ty=ty, value=False if ty is _BOOL else 0.0 if ty.is_float else 0)
    return z


def in_range(index: N.ExprNode, buffer: str) -> N.Binary:
    """The IR's test: `index < Length(buffer)`."""
    return made(N.Binary, op="lt", a=index, b=made(N.Length, buffer=buffer), ty=_BOOL)


def guarded_load(e: N.ExprNode) -> N.RawLoad | None:
    """The raw load of `e` when `e` is this rule's lazy guarded load, else None."""
    if isinstance(e, N.Guarded) and isinstance(e.a, N.RawLoad):
        c = e.cond
        if (isinstance(c, N.Binary) and c.op == "lt" and (c.a is e.a.index or c.a == e.a.index)
                and isinstance(c.b, N.Length) and c.b.buffer == e.a.buffer):
            return e.a
    return None


def guarded_store(s: N.StmtNode) -> N.RawStore | None:
    """The raw store of `s` when `s` is this rule's `if (i < len(b)) { raw b[i] = v }`."""
    if isinstance(s, N.If) and not s.orelse and len(s.then) == 1:
        st, c = s.then[0], s.cond
        if (isinstance(st, N.RawStore) and isinstance(c, N.Binary) and c.op == "lt"
                and (c.a is st.index or c.a == st.index) and isinstance(c.b, N.Length) and c.b.buffer == st.buffer):
            return st
    return None


class Guards:
    """The rule for one Program (its workgroup array lengths and element types)."""

    def __init__(self, program: N.Program, guarded_expr: bool, in_place: bool) -> None:
        self.as_expr = guarded_expr
        self.program = program
        self._ranges: Ranges | None = None  # made at the first workgroup array access
        # the enclosing conditions' (the lowering pushes them; None: the target may
        # evaluate an access outside them, Traits.in_place)
        self.facts = Facts(program) if in_place else None
        self.sizes = {a.name: a.count for a in program.workgroup_arrays}
        self.elem = {b.name: b.ty for b in program.buffers}
        self.elem.update((a.name, a.ty) for a in program.workgroup_arrays)
        # whether an expression holds a memory access (memo cleared per statement, with
        # the lowering's own memo: node ids are only stable within one statement's map)
        guarded = N.Guarded  # (nothing derives from it)
        self.touches: Fold[bool] = Fold(lambda e, kids: type(e) is guarded or any(kids))
        # whether a lowered expression may hold a Guarded yet: one of the Program's own (a
        # lowered Program lowered again; unknown without its cached facts) or one this
        # rule made (operands are lowered first: an inner load's before the outer index
        # is asked); until then `touches` is False without a walk
        known = program.__dict__.get("expr_facts")
        self.guarded_made = known is None or guarded in known.classes

    def known(self, buffer: str, index: N.ExprNode) -> bool | None:
        """Whether `index` (of the Program as written) is below the length whenever it
        runs, known before the run (None: only the run knows)."""
        n = self.sizes.get(buffer)
        if n is not None:
            if self._ranges is None:  # (most programs have no workgroup array to bound)
                self._ranges = Ranges(self.program)
            r = self._ranges.of(index)
            if r is not None and not r[0] < n <= r[1]:
                return r[1] < n
        return True if self.facts is not None and self.facts.proves(buffer, index) else None

    def index(self, host: Host, index: N.ExprNode) -> N.ExprNode:
        # (only this rule makes a Guarded, and only with guarded_expr: elsewhere nothing does)
        return (host.once(index) if self.as_expr and self.guarded_made and self.touches(index)
                else index)

    def load(self, host: Host, e: N.Load, written: N.ExprNode) -> N.ExprNode:
        """`e` (its operands lowered) whose index was `written` in the Program."""
        known = self.known(e.buffer, written)
        if known is not None:
            return made(N.RawLoad, buffer=e.buffer, index=e.index, ty=e.ty) if known else zero(e.ty)
        i = self.index(host, e.index)
        raw = made(N.RawLoad, buffer=e.buffer, index=i, ty=e.ty)
        if self.as_expr:
            self.guarded_made = True
            return made(N.Guarded, cond=in_range(i, e.buffer), a=raw, b=zero(e.ty), ty=e.ty)
        t = made(N.Var, name=host.fresh(), ty=e.ty)
        set_t = made(N.Assign, name=t.name, value=raw)
        host.pending += [made(N.Let, name=t.name, value=zero(e.ty)),
                         made(N.If, cond=in_range(i, e.buffer), then=(set_t,))]
        return t

    def into_let(self, lets: list[N.StmtNode], name: str, value: N.ExprNode,
                 ) -> list[N.StmtNode] | None:
        """`let name = b[i]` set under the test itself, without a local for the load
        (None when `value` is not the load just set before the statement)."""
        if not (isinstance(value, N.Var) and len(lets) >= 2):
            return None
        decl, test = lets[-2], lets[-1]
        if not (isinstance(decl, N.Let) and decl.name == value.name and isinstance(test, N.If)
                and len(test.then) == 1 and isinstance(set_ := test.then[0], N.Assign)
                and set_.name == value.name):
            return None
        return [*lets[:-2], copied(decl, {"name": name}),
                copied(test, {"then": (copied(set_, {"name": name}),)})]

    def store(self, host: Host, s: N.Store, index: N.ExprNode, value: N.ExprNode,
              ) -> list[N.StmtNode]:
        """Store `s` of the Program, its operands lowered to `index` and `value`."""
        known = self.known(s.buffer, s.index)
        if known is not None:
            return [made(N.RawStore, buffer=s.buffer, index=index, value=value)] if known else []
        i = self.index(host, index)
        raw = made(N.RawStore, buffer=s.buffer, index=i, value=value)
        return [made(N.If, cond=in_range(i, s.buffer), then=(raw,))]

    def atomic(self, host: Host, s: N.Atomic, exprs: tuple[N.ExprNode, ...],
               ) -> list[N.StmtNode]:
        index, value, *rest = exprs
        comparand = rest[0] if rest else None
        known = self.known(s.buffer, s.index)
        ty = self.elem[s.buffer]
        declare: list[N.StmtNode] = []
        if s.result is not None and not known:
            declare = [made(N.Let, name=s.result, value=zero(ty))]  # the old value out of range
        if known is False:
            return declare

        def raw(i: N.ExprNode, result: str | None) -> N.RawAtomic:
            return made(N.RawAtomic, op=s.op, buffer=s.buffer, index=i, value=value,
                               comparand=comparand, result=result)

        if known:
            return [raw(index, s.result)]
        i = self.index(host, index)
        if s.result is None:
            body: tuple[N.StmtNode, ...] = (raw(i, None),)
        else:
            old = made(N.Var, name=host.fresh(), ty=ty)
            body = (raw(i, old.name), made(N.Assign, name=s.result, value=old))
        return [*declare, made(N.If, cond=in_range(i, s.buffer), then=body)]
