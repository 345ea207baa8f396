"""Which f32 operands the WGSL printer must fence, and which it may leave bare.

A driver may rewrite float code (see the "float fences" comment in render.py): Mesa's NIR
folds x*0, x-x, (a-b)+b and fma(a, b, 0); it factors fma(a, b, fma(a, c, d)) into
fma(a, b + c, d); NVIDIA's compiler contracts a*b + c and reassociates. Every such rewrite
matches an operation whose operand the compiler can see is (1) a constant, (2) another
float operation, or (3) the same SSA value as another operand of the pattern. A *fence*
(the bits plus a uniform 0) hides all three. This module tracks, through the statements of
a lowered Program, what the compiler could see each f32 value to be:

- "o" (opaque): a load (the printer fences non-opaque values it stores where the
  invocation may read them back, so a store the compiler forwards to a load is opaque too;
  a guarded load's 0 is fenced, so it is opaque as well),
  a parameter (a uniform), a negation or abs (spelled as integer operations), or a
  select of two opaque values. Nothing is known of its value or origin.
- "v" (visible): a constant, a float operation, or anything this module does not know.
- "fma:raw" / "fma:0" / "fma:1": the result of a native single-rounding fma whose two
  multiplicands are bare opaque values ("raw") or fenced with uniform 0 / 1.

The rule the printer applies (f32, outside flush mode; everything else keeps every fence):
- add, mul and sub's left operand: bare only if "o", or a constant that no rewrite
  matches (`inert_constant`: finite, normal, not a power of two, the other operand not a
  constant); sub's right operand is always fenced (NIR turns a - b into a + (-b), and
  (-x) + x folds to 0).
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
- a stored value that is not "o" is fenced where the invocation may read the buffer again
  (`reloaded_stores`: a later statement or an enclosing loop loads it); elsewhere no load
  can see it, so it is stored bare.

This module must never print WGSL; it only answers "fence this operand?" for render.py.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from vyre.ir import nodes as N
from vyre.ir.types import ScalarType
from vyre.ir.visit import child_blocks, children, stmt_exprs

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


# the expression classes FenceFlow.kinds finds "v" by class alone (no class derives from them)
_VISIBLE_CLASSES = frozenset({N.Const, N.Builtin, N.Length, N.Binary, N.Cast, N.Bitcast,
                              N.Native, N.Table, N.Invoke, N.Subgroup})


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
        # by exact class first (the printer asks this of most operands), as the isinstance
        # chain below decides for each
        t = type(e)
        if t is N.Var:
            return self.vars.get(e.name, TOP)  # type: ignore[union-attr]
        if t is N.RawLoad or t is N.Load or t is N.Param:
            return OPAQUE
        if t in _VISIBLE_CLASSES:
            return VISIBLE
        if t is N.Unary:
            return OPAQUE if e.op == "neg" else VISIBLE  # type: ignore[union-attr]
        return self._kinds(e)

    def _kinds(self, e: N.ExprNode) -> Kinds:
        """`kinds` by isinstance (any class)."""
        if e.ty is not ScalarType.F32:
            return VISIBLE
        if isinstance(e, N.Var):
            return self.vars.get(e.name, TOP)
        if isinstance(e, (N.Load, N.Param)):
            return OPAQUE
        if isinstance(e, N.Unary) and e.op == "neg":
            return OPAQUE  # an integer sign flip of the fenced bits (expressions._unary)
        if isinstance(e, N.Call) and e.fn == "abs":
            return OPAQUE  # likewise (maths._float_abs)
        if isinstance(e, N.Guarded):  # a guarded load: its 0 is fenced where printed
            both = self.kinds(e.a) | self.bound_kinds(e.b)
            return OPAQUE if both == OPAQUE else VISIBLE
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


# ------------------------------------------------------------------ constants and stores

_F32_MIN_NORMAL = 2.0**-126


def inert_constant(e: N.ExprNode, other: N.ExprNode) -> bool:
    """Whether f32 constant `e`, an operand of an add / mul (or sub's left operand) whose
    other operand is `other`, may go unfenced: no known rewrite matches it. The rewrites a
    constant operand enables alone are identities and strength reductions on 0, -0, +-1
    and powers of two (x*0 -> 0, x+0 -> x, x*1 -> x, x*-1 -> -x, x*2 -> x+x, a
    multiplication by 2^k spelled as an exponent change, which would not flush in flush
    mode), and the folding of inf / NaN / subnormal operands; everything else needs a
    second visible operation, and the other operand and the result are fenced where a
    rewrite could see them. Two constants would be folded by WGSL's constant evaluator
    (outside flush mode's rules), so one of them stays fenced."""
    if not isinstance(e, N.Const) or isinstance(other, N.Const) or e.ty is not ScalarType.F32:
        return False
    v = abs(float(e.value))
    if not (_F32_MIN_NORMAL <= v < float("inf")):
        return False
    mantissa, _ = math.frexp(v)
    return mantissa != 0.5  # not a power of two


def reloaded_stores(body: tuple[N.StmtNode, ...]) -> set[int]:
    """ids of the stores after which the invocation may read the same buffer or array
    again (a later statement loads it, or a loop around the store does): a driver may
    forward the stored value to that load, so a value it can see must be fenced there.
    A store outside this set is never read back by its invocation in this dispatch
    (another invocation's load cannot be forwarded: nothing proves it is the same
    element), so its value needs no fence. Conservative: a shared store node counts as
    reloaded if any of its occurrences is."""
    out: set[int] = set()
    holders: set[int] = set()
    _holds_store(body, holders)
    _reads_from(body, frozenset(), out, {}, holders, False)
    return out


def _holds_store(body: tuple[N.StmtNode, ...], holders: set[int]) -> bool:
    """Whether `body` holds a store; the ids of its statements that do (nested blocks
    included) into `holders`."""
    found = False
    for s in body:
        t = type(s)
        if t is N.Store or t is N.RawStore:
            holders.add(id(s))
            found = True
        elif t is N.If:
            a = _holds_store(s.then, holders)  # type: ignore[union-attr]
            if _holds_store(s.orelse, holders) or a:  # type: ignore[union-attr]
                holders.add(id(s))
                found = True
        elif (t is N.For or t is N.While) and _holds_store(s.body, holders):  # type: ignore[union-attr]
            holders.add(id(s))
            found = True
    return found


def _reads_from(body: tuple[N.StmtNode, ...], after: frozenset[str] | None, out: set[int],
                memo: dict[int, frozenset[str]], holders: set[int],
                needed: bool) -> frozenset[str] | None:
    """Buffers read from the start of `body` on, given those read after it (`after`);
    records the reloaded stores of `body` in `out`. Only what a store asks is computed
    (most programs store last): the reads from statement k on are used by a store
    before k (in `body[:k]`, nested blocks included) or by the caller (`needed`); those
    no one uses stay None. `holders`: the statements that hold a store (_holds_store)."""
    # used[k]: whether the reads from statement k on are used
    used = [needed]
    for s in body[:-1]:
        used.append(used[-1] or id(s) in holders)
    for k in range(len(body) - 1, -1, -1):
        s, use = body[k], used[k]
        if isinstance(s, (N.For, N.While)):
            if id(s) in holders:  # the next pass may read anything it reads
                assert after is not None  # (used: a store holder is before it)
                after = after | _reads_in(s, memo)
                _reads_from(s.body, after, out, memo, holders, False)
            elif use:
                assert after is not None
                after = after | _reads_in(s, memo)
            else:
                after = None
        elif isinstance(s, N.If):
            then = _reads_from(s.then, after, out, memo, holders, use)
            orelse = _reads_from(s.orelse, after, out, memo, holders, use)
            if use:
                assert then is not None and orelse is not None
                after = then | orelse | _expr_reads(s.cond, memo)
            else:
                after = None
        else:
            if isinstance(s, N.Store):
                assert after is not None
                if s.buffer in after:
                    out.add(id(s))
            if use:
                assert after is not None
                after = after | _reads_in(s, memo)
            else:
                after = None
    return after


_NOTHING: frozenset[str] = frozenset()
# operand-less expressions (no class derives from them): they read no buffer
_LEAVES = frozenset({N.Const, N.Var, N.Param, N.Builtin, N.Length})


def _reads_in(s: N.StmtNode, memo: dict[int, frozenset[str]]) -> frozenset[str]:
    """Buffers statement `s` (with its nested blocks) loads or updates atomically."""
    got = frozenset({s.buffer}) if isinstance(s, N.Atomic) else _NOTHING
    for e in stmt_exprs(s):
        r = _expr_reads(e, memo)
        if r:  # (most expressions read nothing: no new set for them)
            got = got | r
    for block in child_blocks(s):
        for inner in block:
            r = _reads_in(inner, memo)
            if r:
                got = got | r
    return got


def _expr_reads(e: N.ExprNode, memo: dict[int, frozenset[str]]) -> frozenset[str]:
    if type(e) in _LEAVES:
        return _NOTHING
    hit = memo.get(id(e))
    if hit is None:
        hit = frozenset({e.buffer}) if isinstance(e, N.Load) else _NOTHING
        for k in children(e):
            if type(k) not in _LEAVES:
                r = _expr_reads(k, memo)
                if r:
                    hit = hit | r
        memo[id(e)] = hit
    return hit


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
