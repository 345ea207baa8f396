"""Which f32 operands the WGSL printer must fence, and which it may leave bare.

A driver may rewrite float code (see the "float fences" comment in render.py): Mesa's NIR
folds x*0, x-x, (a-b)+b and fma(a, b, 0); it factors fma(a, b, fma(a, c, d)) into
fma(a, b + c, d); NVIDIA's compiler contracts a*b + c and reassociates. Every such rewrite
matches an operation whose operand the compiler can see is (1) a constant, (2) another
float operation, or (3) the same SSA value as another operand of the pattern. A *fence*
(the bits plus a uniform 0) hides all three. This module tracks, through the statements of
a lowered Program, what the compiler could see each f32 value to be:

- "o" (opaque): a load (the printer fences non-opaque values it stores, so a store the
  compiler forwards to a load is opaque too; an out-of-bounds load's 0 is opaque as well),
  a parameter (a uniform), a negation or abs (spelled as integer operations), or a
  select of two opaque values. Nothing is known of its value or origin.
- "v" (visible): a constant, a float operation, or anything this module does not know.
- "fma:raw" / "fma:0" / "fma:1": the result of a native single-rounding fma whose two
  multiplicands are bare opaque values ("raw") or fenced with uniform 0 / 1.

The rule the printer applies (f32, outside flush mode; everything else keeps every fence):
- add, mul and sub's left operand: bare only if "o"; sub's right operand is always fenced
  (NIR turns a - b into a + (-b), and (-x) + x folds to 0).
- fma: the multiplicands are bare if both are "o" and the addend was not itself produced
  by a bare-multiplicand fma ("fma:raw"); otherwise both are fenced with the same uniform,
  0 or 1, chosen to differ from the addend's fma (so fma(a, b, fma(a', c, d)) never shows
  the compiler a shared multiplicand a == a' to factor out). The addend is bare if it is
  "o" or the result of such an fma of another class; otherwise (a constant, another float
  operation, or no free class, e.g. an fma chain around a loop of one link) it is fenced.
  An fma result used anywhere else is "v".
- comparisons, division, min/max and every other call keep all their fences.
- a float constant bound to a variable is fenced there, once (so `acc = 0.0` feeding an
  fma chain is opaque instead of fencing the chain's every link).

This module must never print WGSL; it only answers "fence this operand?" for render.py.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from vyre.ir import nodes as N
from vyre.ir.types import ScalarType

OPAQUE = frozenset({"o"})
VISIBLE = frozenset({"v"})
_FMA_CLASSES = ("raw", "0", "1")
TOP = frozenset({"v", *(f"fma:{c}" for c in _FMA_CLASSES)})
Kinds = frozenset[str]


@dataclass(frozen=True)
class FmaPlan:
    """How to spell one native f32 fma: the class of its result, the uniform its two
    multiplicands are fenced with (None: bare), and whether its addend is fenced."""

    cls: str
    mult_fence: int | None
    addend_fence: bool


def fma_plan(ka: Kinds, kb: Kinds, kc: Kinds) -> FmaPlan:
    """The plan for fma(a, b, c) given what the compiler can see of a, b and c."""
    bare_mults = ka == OPAQUE and kb == OPAQUE
    order = (["raw"] if bare_mults else []) + ["0", "1"]
    addend_fence = "v" in kc
    taken = set() if addend_fence else {k[4:] for k in kc if k.startswith("fma:")}
    free = [c for c in order if c not in taken]
    if not free:  # the addend may come from an fma of every class: hide it instead
        addend_fence, free = True, order
    cls = free[0]
    return FmaPlan(cls, None if cls == "raw" else int(cls), addend_fence)


def _join(a: Kinds, b: Kinds) -> Kinds:
    return a | b


@dataclass
class FenceFlow:
    """What the compiler can see each f32 variable to be, at the current program point.

    Variables are keyed by IR name; a declaration in an inner scope saves the outer
    binding's kinds and `exit_scope` restores them."""

    vars: dict[str, Kinds] = field(default_factory=dict)
    saved: list[list[tuple[str, Kinds | None]]] = field(default_factory=list)

    def copy(self) -> FenceFlow:
        return FenceFlow(dict(self.vars), [list(s) for s in self.saved])

    def enter_scope(self) -> None:
        self.saved.append([])

    def exit_scope(self) -> None:
        for name, old in reversed(self.saved.pop()):
            if old is None:
                self.vars.pop(name, None)
            else:
                self.vars[name] = old

    def declare(self, name: str, kinds: Kinds) -> None:
        if self.saved:
            self.saved[-1].append((name, self.vars.get(name)))
        self.vars[name] = kinds

    def assign(self, name: str, kinds: Kinds) -> None:
        self.vars[name] = kinds

    def join(self, other: FenceFlow) -> None:
        """Merge the state of another path reaching the same point (same scopes)."""
        for name in set(self.vars) | set(other.vars):
            self.vars[name] = _join(self.vars.get(name, TOP), other.vars.get(name, TOP))

    # ------------------------------------------------------------ expressions

    def kinds(self, e: N.ExprNode) -> Kinds:
        """What the compiler can see of f32 expression `e` (non-f32: "v")."""
        if e.ty is not ScalarType.F32:
            return VISIBLE
        if isinstance(e, N.Var):
            return self.vars.get(e.name, TOP)
        if isinstance(e, (N.Load, N.Param)):
            return OPAQUE
        if isinstance(e, N.Unary) and e.op == "neg":
            return OPAQUE  # an integer sign flip of the fenced bits (wgsl._unary)
        if isinstance(e, N.Call) and e.fn == "abs":
            return OPAQUE  # likewise (wgsl._float_abs)
        if isinstance(e, N.Select):
            both = self.kinds(e.a) | self.kinds(e.b)
            return OPAQUE if both == OPAQUE else VISIBLE
        if isinstance(e, N.Call) and e.fn == "fma":
            plan = fma_plan(*(self.kinds(a) for a in e.args))
            return frozenset({f"fma:{plan.cls}"})
        return VISIBLE

    def bound_kinds(self, value: N.ExprNode) -> Kinds:
        """Kinds of a variable bound to `value` (a float constant is fenced there)."""
        if isinstance(value, N.Const) and value.ty is ScalarType.F32:
            return OPAQUE
        return self.kinds(value)


# ------------------------------------------------------------------ statements (analysis)

MAX_LOOP_PASSES = 4


def _has_jump(body: tuple[N.StmtNode, ...]) -> bool:
    for s in body:
        if isinstance(s, (N.Break, N.Continue)):
            return True
        if isinstance(s, N.If) and (_has_jump(s.then) or _has_jump(s.orelse)):
            return True
        if isinstance(s, (N.For, N.While)) and _has_jump(s.body):
            return True
    return False


def _assigned(body: tuple[N.StmtNode, ...], out: set[str]) -> set[str]:
    for s in body:
        if isinstance(s, N.Assign):
            out.add(s.name)
        elif isinstance(s, N.If):
            _assigned(s.then, out)
            _assigned(s.orelse, out)
        elif isinstance(s, (N.For, N.While)):
            _assigned(s.body, out)
    return out


def flow_block(flow: FenceFlow, body: tuple[N.StmtNode, ...]) -> None:
    """Advance `flow` over `body` in its own scope (as the printer's _block does)."""
    flow.enter_scope()
    for s in body:
        flow_stmt(flow, s)
    flow.exit_scope()


def flow_stmt(flow: FenceFlow, s: N.StmtNode) -> None:
    if isinstance(s, N.Let):
        flow.declare(s.name, flow.bound_kinds(s.value))
    elif isinstance(s, N.Assign):
        flow.assign(s.name, flow.bound_kinds(s.value))
    elif isinstance(s, N.Atomic) and s.result is not None:
        flow.declare(s.result, VISIBLE)
    elif isinstance(s, N.If):
        other = flow.copy()
        flow_block(flow, s.then)
        flow_block(other, s.orelse)
        flow.join(other)
    elif isinstance(s, (N.For, N.While)):
        head = loop_head(flow, s)
        flow.vars = head.vars


def loop_head(flow: FenceFlow, s: N.For | N.While) -> FenceFlow:
    """The state at the top of loop `s` entered with `flow` (also its exit state): the
    join of the entry state and the state at the end of the body, to a fixed point."""
    head = flow.copy()
    changed = set(_assigned(s.body, set()))
    if _has_jump(s.body):  # break / continue paths: give up on what the loop assigns
        for name in changed:
            if name in head.vars:
                head.vars[name] = TOP
        return head
    for _ in range(MAX_LOOP_PASSES):
        end = head.copy()
        end.enter_scope()
        if isinstance(s, N.For):
            end.declare(s.var, VISIBLE)
        flow_block(end, s.body)
        end.exit_scope()
        new = head.copy()
        new.join(end)
        if new.vars == head.vars:
            return head
        head = new
    for name in changed:
        if name in head.vars:
            head.vars[name] = TOP
    return head
