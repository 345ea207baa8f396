"""The lowering passes: each IR rule a target lacks, rewritten into the core.

First, for every target, every call of a function with an exact definition (exp, log,
...) is replaced by it (vyre.lower.maths: the same IR for every backend, the reference
included). Then the rules (docs/IR.md), each applied unless the target's `Traits` says it
has it natively:
- integer div / rem: by zero -> 0, MIN / -1 -> MIN, MIN % -1 -> 0, as a native division
  by a divisor made safe (`select(bad, 1, b)`: a / 1 = a and a % 1 = 0 are the IR's answers
  for MIN / -1 and MIN % -1) and a select for division by zero;
- shifts: the amount masked to the width, then a native shift;
- integer abs: `select(x < 0, -x, x)` (IR neg wraps, so abs(MIN) = MIN); identity unsigned;
- float -> int casts: saturate at the range ends, NaN -> 0, and a native truncating
  conversion only of an in-range value (f16 goes through f32, exactly);
- for loops with a step > 1: a loop over the trip count with step 1 (which never
  overflows) whose body first computes the variable, start + i * step, wrapping in u32 (the
  true value is below end, so the wrapped one is it);
- float rem: `a - b * trunc(a / b)`, each step an IR operation rounded in the type;
- division and sqrt (f32, f16 in f32, f64): vyre's exact methods (vyre.lower.divsqrt, an Invoke of
  one definition per program; with a fast path in f32 where its fma rounds once, else in
  f64 where the target is `wide`); f32 and f16 fma where the target's rounds twice
  (vyre.lower.fma: the f32 one where the target is `wide`);
- f16 arithmetic: the exact operations (+ - * / sqrt, min / max / clamp, floor / ceil /
  trunc / round, comparisons) in f32 and rounded once to f16, which is exact because f32
  has more than 2 * 11 + 2 bits; abs and neg are sign-bit operations and stay, fma and the
  approximate functions are left to the target;
- bounds-checked loads / stores / atomics: the index test around an unchecked access
  (vyre.lower.memory), none where an enclosing condition proves it (vyre.lower.facts,
  for an `in_place` target).
- subgroup operations: always, each into a local of its own just before its statement, so
  every lane runs it whatever a target or a later rewrite makes of the statement.
An operand used more than once is evaluated once into a new local (`let`, named with a
`.`, which no user name can contain) just before its statement; a `while` whose condition
needs such locals becomes `while true { lets; if !cond { break } ... }`. Rewrites are
memoised per statement only: a local made for one statement is never used by another.
This module must never print source or know a target's spelling.
"""

from __future__ import annotations

from operator import is_not

from vyre.ir import nodes as N
from vyre.ir.nodes import made
from vyre.ir.types import ScalarType
from vyre.ir.visit import ExprMap, child_blocks, map_block, stmt_exprs, with_parts

from .divsqrt import definition, definition_f64, fast_path
from .fma import definition as exact_fma
from .maths import lower_maths
from .maths.apply import opaque
from .memory import Guards
from .traits import Traits

T = ScalarType
_BOOL = T.BOOL
_SIMPLE = (N.Const, N.Var, N.Param, N.Builtin, N.Length)
# the operand-less expressions (no class derives from them): no rule rewrites one
_LEAVES = frozenset(_SIMPLE)
_F16_EXACT_BIN = frozenset({"add", "sub", "mul", "div", "min", "max", *N.COMPARISON_OPS})
_F16_EXACT_FNS = frozenset({"sqrt", "min", "max", "clamp", "floor", "ceil", "trunc", "round"})
_EXACT_TYPES = frozenset({T.F32, T.F16, T.F64})  # division and sqrt vyre.lower.divsqrt defines


def _c(ty: ScalarType, v: bool | int | float) -> N.Const:
    return N.Const(ty=ty, value=v)


def _bin(op: str, a: N.ExprNode, b: N.ExprNode, ty: ScalarType | None = None) -> N.Binary:
    if ty is None:
        ty = _BOOL if op in N.COMPARISON_OPS or op in N.LOGICAL_OPS else a.ty
    return made(N.Binary, op=op, a=a, b=b, ty=ty)


def _sel(c: N.ExprNode, a: N.ExprNode, b: N.ExprNode) -> N.Select:
    return made(N.Select, cond=c, a=a, b=b, ty=a.ty)


def _plain(e: N.ExprNode) -> N.ExprNode:
    return e


class _Lowering:
    def __init__(self, program: N.Program, traits: Traits, in_function: bool = False) -> None:
        self.t = traits
        self.program = program
        # lowering a Function's body: its code cannot read builtins (a WGSL helper function
        # sees none of main's), and its values come from the caller's opaque arguments
        self.in_function = in_function
        self.defined: dict[str, N.Function] = {}  # the exact definitions called, lowered
        self.count = 0
        self.pending: list[N.StmtNode] = []
        # one map, its memo cleared per statement (module docstring); the subtrees with
        # nothing to lower are shared by all statements
        self.map = ExprMap(self.rewrite, kept=_LEAVES)
        self.memory = None if traits.checked_memory else Guards(
            program, traits.guarded_expr, traits.in_place)

    # ------------------------------------------------------------ locals
    def fresh(self) -> str:
        """A new local's name (with a `.`, which no user name can contain)."""
        self.count += 1
        return f"lw.{self.count}"

    def once(self, e: N.ExprNode) -> N.ExprNode:
        """`e` evaluated once: itself when trivial, else a new local set just before."""
        if isinstance(e, _SIMPLE):
            return e
        name = self.fresh()
        self.pending.append(made(N.Let, name=name, value=e))
        return made(N.Var, name=name, ty=e.ty)

    # ------------------------------------------------------------ rules
    def divrem(self, e: N.Binary) -> N.ExprNode:
        ty, op = e.ty, e.op
        if isinstance(e.b, N.Const):
            k = int(e.b.value)
            if k == 0:
                return _c(ty, 0)
            if ty.is_signed and k == -1:
                return made(N.Unary, op="neg", a=e.a, ty=ty) if op == "div" else _c(ty, 0)
            return made(N.Native, op=op, args=(e.a, e.b), ty=ty)
        b = self.once(e.b)
        zero = _bin("eq", b, _c(ty, 0))
        bad: N.ExprNode = zero
        a = e.a
        if ty.is_signed:
            a = self.once(a)
            mn = _c(ty, -(1 << (ty.bits - 1)))
            overflow = _bin("logical_and", _bin("eq", a, mn), _bin("eq", b, _c(ty, -1)))
            bad = _bin("logical_or", zero, overflow)
        nat = made(N.Native, op=op, args=(a, _sel(bad, _c(ty, 1), b)), ty=ty)
        return _sel(zero, _c(ty, 0), nat) if op == "div" else nat

    def shift(self, e: N.Binary) -> N.ExprNode:
        bits = e.ty.bits
        if isinstance(e.b, N.Const):
            amount: N.ExprNode = _c(T.U32, int(e.b.value) % bits)
        else:
            amount = _bin("and", e.b, _c(T.U32, bits - 1))
        return made(N.Native, op=e.op, args=(e.a, amount), ty=e.ty)

    def int_abs(self, e: N.Call) -> N.ExprNode:
        if not e.ty.is_signed:
            return e.args[0]
        x = self.once(e.args[0])
        return _sel(_bin("lt", x, _c(e.ty, 0)), made(N.Unary, op="neg", a=x, ty=e.ty), x)

    def float_to_int(self, e: N.Cast) -> N.ExprNode:
        dst = e.ty
        x = e.a
        if x.ty is T.F16:  # exact in f32, whose range holds every bound below
            x = made(N.Cast, a=x, ty=T.F32)
        x = self.once(x)
        f = x.ty
        hi = float(2 ** dst.bits) if not dst.is_signed else float(2 ** (dst.bits - 1))
        lo = -hi if dst.is_signed else 0.0  # powers of two: exact in f32 and f64
        info_max = (1 << dst.bits) - 1 if not dst.is_signed else (1 << (dst.bits - 1)) - 1
        info_min = 0 if not dst.is_signed else -(1 << (dst.bits - 1))
        inside = _bin("logical_and", _bin("gt", x, _c(f, lo)), _bin("lt", x, _c(f, hi)))
        conv = made(N.Native, op="f2i", args=(_sel(inside, x, _c(f, 0.0)),), ty=dst)
        below = _sel(_bin("le", x, _c(f, lo)), _c(dst, info_min), conv)
        return _sel(_bin("ge", x, _c(f, hi)), _c(dst, info_max), below)  # NaN: conv of 0

    def float_rem(self, e: N.Binary) -> N.ExprNode:
        a, b = self.once(e.a), self.once(e.b)
        q = self.float_op("div", a, b)
        t = self.float_call("trunc", (q,), e.ty)
        return self.float_op("sub", a, self.float_op("mul", b, t))

    def widen(self, e: N.ExprNode) -> N.ExprNode:
        return made(N.Cast, a=e, ty=T.F32)

    def exact(self, op: str, args: tuple[N.ExprNode, ...]) -> N.ExprNode:
        """Division or sqrt (`op`) by vyre's exact method (vyre.lower.divsqrt; f16 in f32,
        rounded once: exact since 24 >= 2 * 11 + 2): an Invoke of the definition."""
        ty = args[0].ty
        if ty is T.F64:
            return self.invoke(definition_f64(op), args)
        fn = definition(op, fast_path(op, self.t.wide, self.t.fused_fma))
        wide = args if ty is T.F32 else tuple(map(self.widen, args))
        call = self.invoke(fn, wide)
        return call if ty is T.F32 else made(N.Cast, a=call, ty=ty)

    def invoke(self, fn: N.Function, args: tuple[N.ExprNode, ...]) -> N.ExprNode:
        """A call of definition `fn` (lowered for the target once per program) on opaque
        arguments (as the functions' definitions, vyre.lower.maths.apply.opaque: a
        driver must not evaluate the definition at compile time; plain inside a Function's
        body: opaque reads a builtin, and the body's values come from opaque arguments)."""
        got = self.defined.get(fn.name)
        if got is None:
            got = self.defined[fn.name] = _lower_function(self.program, fn, self.t)
        wrap = _plain if self.in_function else opaque
        return made(N.Invoke, fn=got, args=tuple(wrap(self.once(x)) for x in args), ty=fn.ty)

    def float_op(self, op: str, a: N.ExprNode, b: N.ExprNode) -> N.ExprNode:
        """`a op b` on floats, with the f16 rule applied when the target needs it."""
        if op == "div" and not self.t.float_div and a.ty in _EXACT_TYPES:
            return self.exact("div", (a, b))
        if a.ty is not T.F16 or self.t.f16_arith or op not in _F16_EXACT_BIN:
            return _bin(op, a, b)
        wide = _bin(op, self.widen(a), self.widen(b))
        return wide if wide.ty is _BOOL else made(N.Cast, a=wide, ty=T.F16)

    def float_call(self, fn: str, args: tuple[N.ExprNode, ...], ty: ScalarType) -> N.ExprNode:
        if fn == "sqrt" and not self.t.float_sqrt and ty in _EXACT_TYPES:
            return self.exact("sqrt", args)
        call = made(N.Call, fn=fn, args=args, ty=ty)
        if ty is not T.F16 or self.t.f16_arith or fn not in _F16_EXACT_FNS:
            return call
        wide = made(N.Call, fn=fn, args=tuple(self.widen(x) for x in args), ty=T.F32)
        return made(N.Cast, a=wide, ty=T.F16)

    def stepped_for(self, s: N.For, start: N.ExprNode, end: N.ExprNode) -> list[N.StmtNode]:
        u = T.U32
        self.pending = []
        lo, hi = self.once(start), self.once(end)
        lo_u = lo if s.ty is u else made(N.Bitcast, a=lo, ty=u)
        hi_u = hi if s.ty is u else made(N.Bitcast, a=hi, ty=u)
        dist = _bin("sub", hi_u, lo_u)  # the true distance where lo < hi (the validator
        # keeps the step below 2**31, so it is a u32 constant)
        trips = _bin("add", made(N.Native,
            op="div", args=(_bin("sub", dist, _c(u, 1)), _c(u, s.step)), ty=u), _c(u, 1))
        n = self.once(_sel(_bin("lt", lo, hi), trips, _c(u, 0)))
        i = made(N.Var, name=self.fresh(), ty=u)
        step = _c(u, s.step)
        v_u = _bin("add", lo_u, _bin("mul", i, step))
        var = made(N.Let, name=s.var, value=v_u if s.ty is u else made(N.Bitcast, a=v_u, ty=s.ty))
        lets, self.pending = self.pending, []
        loop = made(N.For, var=i.name, ty=u, start=_c(u, 0), end=n, step=1, body=(var, *s.body))
        return [*lets, loop]

    # ------------------------------------------------------------ traversal
    def rewrite(self, e: N.ExprNode, written: N.ExprNode) -> N.ExprNode:
        """The replacement of `written`, given `e`: it over its operands' replacements."""
        k, t = type(e), self.t
        if k is N.Binary:
            assert isinstance(e, N.Binary)
            ty = e.a.ty
            if ty.is_int:
                if e.op in ("div", "rem") and not t.int_divrem:
                    return self.divrem(e)
                if e.op in ("shl", "shr") and not t.masked_shifts:
                    return self.shift(e)
            elif ty.is_float:
                if e.op == "rem" and not t.float_rem:
                    return self.float_rem(e)
                if e.op == "div" and not t.float_div and ty in _EXACT_TYPES:
                    return self.float_op(e.op, e.a, e.b)
                if ty is T.F16 and not t.f16_arith and e.op in _F16_EXACT_BIN:
                    return self.float_op(e.op, e.a, e.b)
            return e
        if k is N.Load:
            if self.memory is None:
                return e
            assert isinstance(e, N.Load) and isinstance(written, N.Load)
            return self.memory.load(self, e, written.index)
        if k is N.Subgroup:
            # into a local of its own, just before the statement: every lane then runs it,
            # never only some (a C `?:` or `&&` evaluates one side; a later rewrite may put
            # the statement under a condition), as shuffles need (docs/IR.md, "Subgroups")
            return self.once(e)
        if k is N.Call:
            assert isinstance(e, N.Call)
            if e.fn == "abs" and e.ty.is_int and not t.int_abs:
                return self.int_abs(e)
            if e.fn == "sqrt" and not t.float_sqrt and e.ty in _EXACT_TYPES:
                return self.exact("sqrt", e.args)
            if e.fn == "fma" and ((e.ty is T.F32 and not t.fused_fma and t.wide)
                                  or (e.ty in (T.F16, T.F64) and not t.fused_fma_f16_f64)):
                return self.invoke(exact_fma(e.ty), e.args)
            if e.ty is T.F16 and not t.f16_arith and e.fn in _F16_EXACT_FNS:
                return self.float_call(e.fn, e.args, e.ty)
            return e
        if k is N.Cast:
            assert isinstance(e, N.Cast)
            if e.a.ty.is_float and e.ty.is_int and not t.saturating_f2i:
                return self.float_to_int(e)
        return e

    def stmt(self, s: N.StmtNode) -> list[N.StmtNode]:
        exprs = stmt_exprs(s)
        if not exprs:
            return [s]
        self.map.memo.clear()
        if self.memory is not None:
            self.memory.touches.memo.clear()
        self.pending = []
        new = tuple(map(self.map, exprs))
        mem = self.memory
        if mem is not None and type(s) in (N.Store, N.Atomic):
            if isinstance(s, N.Store):
                out = mem.store(self, s, *new)
            else:
                assert isinstance(s, N.Atomic)
                out = mem.atomic(self, s, new)
            lets, self.pending = self.pending, []
            return [*lets, *out]
        lets, self.pending = self.pending, []
        if isinstance(s, N.For) and s.step != 1 and not self.t.stepped_for:
            return [*lets, *self.stepped_for(s, new[0], new[1])]
        if isinstance(s, N.While) and lets:
            (cond,) = new
            stop = made(N.If, cond=made(N.Unary, op="not", a=cond, ty=_BOOL), then=(made(N.Break),))
            return [made(N.While, cond=_c(_BOOL, True), body=(*lets, stop, *s.body))]
        if isinstance(s, N.Let) and mem is not None and not mem.as_expr:
            into = mem.into_let(lets, s.name, new[0])
            if into is not None:
                return into
        if any(map(is_not, exprs, new)):  # (its blocks are already rewritten: block)
            s = with_parts(s, new, tuple(_blocks(s)))
        return [*lets, s]


    def block(self, body: tuple[N.StmtNode, ...]) -> tuple[N.StmtNode, ...]:
        """map_block(body, self.stmt), with the index facts (vyre.lower.facts) in force
        pushed while each nested block is rewritten, for the memory rule to consult."""
        assert self.memory is not None and self.memory.facts is not None
        facts = self.memory.facts
        depth = len(facts.stack)
        out: list[N.StmtNode] = []
        for written in body:
            s, blocks = written, child_blocks(written)
            if blocks:
                if isinstance(s, N.If):
                    # (an empty orelse has no statement to consult its facts)
                    known = [facts.of_then(s), facts.of_else(s) if s.orelse else []]
                elif isinstance(s, N.For):
                    known = [facts.of_body(s)]
                else:
                    known = [[] for _ in blocks]
                new = []
                for blk, fs in zip(blocks, known, strict=True):
                    facts.stack += fs
                    new.append(self.block(blk))
                    del facts.stack[len(facts.stack) - len(fs):]
                s = with_parts(s, stmt_exprs(s), tuple(new))
            out.extend(self.stmt(s))
            facts.stack += facts.after(written)
        del facts.stack[depth:]
        return tuple(out)


def _blocks(s: N.StmtNode) -> list[tuple[N.StmtNode, ...]]:
    if isinstance(s, N.If):
        return [s.then, s.orelse]
    if isinstance(s, (N.For, N.While)):
        return [s.body]
    return []


def lower(program: N.Program, traits: Traits) -> N.Program:
    """`program` rewritten into the core for a target with `traits` (same declarations)."""
    program = lower_maths(program, lambda fn: _lower_function(program, fn, traits), traits)
    return _lower_body(program, traits)


_RESULT = "lw.result"


def _lower_function(program: N.Program, fn: N.Function, traits: Traits) -> N.Function:
    """`fn` with its body and result lowered as the program's own code would be (its
    result through a final local, whose value the lowering may have rewritten)."""
    body = (*fn.body, made(N.Let, name=_RESULT, value=fn.result))
    lowered = _lower_body(program.model_copy(update={"body": body}), traits, True).body
    last = lowered[-1]
    assert isinstance(last, N.Let) and last.name == _RESULT, last
    return fn.model_copy(update={"body": lowered[:-1], "result": last.value})


def _lower_body(program: N.Program, traits: Traits, in_function: bool = False) -> N.Program:
    lw = _Lowering(program, traits, in_function)
    facts = lw.memory is not None and lw.memory.facts is not None
    body = lw.block(program.body) if facts else map_block(program.body, lw.stmt)
    if len(body) == len(program.body) and all(a is b for a, b in zip(body, program.body)):
        return program
    return program.model_copy(update={"body": body})
