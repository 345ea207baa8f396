"""The exact sum's rewrite: `plan_for(program)` turns each order-independent float
atomic add of a program into integer atomic adds of its significand into the element's
digits (and the carries they wrap), after a slot claim on large storage targets; the
`Plan` names the targets, their formats and the rewritten program.

This module must never finalise a sum (vyre.lower.exact_sum.finalize does) nor decide how
a plan is dispatched or allocated (vyre.exact_sum_plan).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from ...ir.analysis import exact_shared_targets, exact_sum_targets, walk_stmts
from ...ir.nodes import (
    Assign,
    Atomic,
    Barrier,
    Bitcast,
    BufferDecl,
    Builtin,
    Cast,
    Const,
    Expr,
    For,
    If,
    Length,
    Let,
    Program,
    Stmt,
    Store,
    Unary,
    WorkgroupArray,
)
from ...ir.visit import map_block
from .digits import (
    _BIAS,
    _MASK,
    BOOL,
    FORMATS,
    SLOT_MIN_ELEMENTS,
    U32,
    Format,
    _and,
    _bit,
    _c,
    _cast,
    _cmp,
    _exponent,
    _fixed,
    _flag,
    _is_zero,
    _Layout,
    _op,
    _sel,
    _u,
    _v,
)
from .finalize import (
    finalize_element,
)


def _carry_chain(p: str, fmt: Format, acc: str, rec: Expr, bits: Expr) -> list[Stmt]:
    """Atomic adds of the finite, nonzero float with `bits` into the digits at `rec`."""
    out: list[Stmt] = []
    fx = _fixed(p, fmt, bits, out)
    out += [
        Let(name=f"{p}neg", value=fx.neg),
        Let(name=f"{p}k", value=_op("add", rec, fx.word)),
        Let(name=f"{p}end", value=_op("add", rec, _u(fmt.words))),
        Let(name=f"{p}x", value=fx.parts[0]),
        Let(name=f"{p}c", value=_u(0)),
    ]
    neg, k, x, c = _v(f"{p}neg", BOOL), _v(f"{p}k"), _v(f"{p}x"), _v(f"{p}c")
    middle = fmt.parts > 2  # a middle part can be 2^32 - 1: adding a carry to it wraps
    if middle:
        out.append(Let(name=f"{p}ov", value=_u(0)))
    # one step per digit, unrolled (no loop: lavapipe counts loop passes per shader): add
    # x to digit k; whether it wrapped (a carry, or a borrow for a negative value) is read
    # from the old value, the digit's unsigned view being old + 2^31; then x = the next
    # part + that.
    for j in range(fmt.words):
        old = _v(f"{p}o{j}")
        view = _op("xor", old, _u(_BIAS))
        moved = Cast(a=_sel(neg, _cmp("lt", view, x),
                            _cmp("gt", view, Unary(op="bit_not", a=x, ty=U32)), BOOL), ty=U32)
        out.append(If(
            cond=_and(_cmp("ne", x, _u(0)), _cmp("lt", k, _v(f"{p}end"))),
            then=(Atomic(op="add", buffer=acc, index=k,
                         value=_sel(neg, _op("sub", _u(0), x), x), result=old.name),
                  Assign(name=c.name, value=moved)),
            orelse=(Assign(name=c.name, value=_u(0)),)))
        if middle and 0 < j < fmt.parts - 1:
            out.append(Assign(name=c.name, value=_op("or", c, _v(f"{p}ov"))))
        if j + 1 < fmt.parts:
            out.append(Assign(name=x.name, value=_op("add", fx.parts[j + 1], c)))
            if middle and j + 1 < fmt.parts - 1:
                out.append(Assign(name=f"{p}ov", value=Cast(
                    a=_cmp("lt", x, fx.parts[j + 1]), ty=U32)))
        else:
            out.append(Assign(name=x.name, value=c))
        if j < fmt.words - 1:
            out.append(Assign(name=k.name, value=_op("add", k, _u(1))))
    return out


def _accumulate(p: str, fmt: Format, acc: str, target: str, site: Atomic,
                storage: bool) -> list[Stmt]:
    """The statements replacing one order-independent add of `site` into `target`."""
    body: list[Stmt] = [Let(name=f"{p}i", value=site.index), Let(name=f"{p}v", value=site.value),
                        Let(name=f"{p}n", value=Length(buffer=target))]
    i, v, n = _v(f"{p}i"), _v(f"{p}v", fmt.ty), _v(f"{p}n")
    lay = _Layout(fmt, n if storage else None)
    inner: list[Stmt] = [Let(name=f"{p}b", value=Bitcast(a=v, ty=fmt.bits)),
                         Let(name=f"{p}r", value=lay.record(i))]
    b, rec = _v(f"{p}b", fmt.bits), _v(f"{p}r")
    big = _cmp("ge", n, _u(SLOT_MIN_ELEMENTS))
    mark: tuple[Stmt, ...] = ()
    if storage:  # the finalisation reads the digits of a slotted element only if marked
        mark = (If(cond=big, then=(Atomic(op="or", buffer=acc, index=lay.used(i),
                                          value=_bit(i)),)),)
    set_flag = (*mark, Atomic(op="or", buffer=acc, index=_op("add", rec, _u(fmt.words)),
                              value=_flag(fmt, b)))
    digits = (*mark, *_carry_chain(p, fmt, acc, rec, b))
    finite: list[Stmt]
    if storage:
        won = _v(f"{p}won", BOOL)
        old = f"{p}old"
        if fmt.claim_words:  # claim, then the value into the slot words
            claim: tuple[Stmt, ...] = (
                Atomic(op="compare_exchange", buffer=acc, index=lay.claim(i), value=_u(1),
                       comparand=_u(0), result=old),
                If(cond=_cmp("eq", _v(old), _u(0)), then=tuple(
                    Store(buffer=acc, index=lay.slot(i, j),
                          value=_cast(_op("shr", b, _u(32 * j), fmt.bits)
                                      if j else _op("and", b, _c(fmt.bits, _MASK), fmt.bits),
                                      U32))
                    for j in range(fmt.slot_words))))
        else:  # the value's bits into the slot (a finite nonzero value's bits are not 0)
            claim = (Atomic(op="compare_exchange", buffer=acc, index=lay.claim(i), value=b,
                            comparand=_u(0), result=old),)
        finite = [Let(name=won.name, value=Const(ty=BOOL, value=False)),
                  If(cond=big, then=(*claim, Assign(name=won.name,
                                                    value=_cmp("eq", _v(old), _u(0))))),
                  If(cond=won, orelse=digits)]
    else:
        finite = list(digits)
    special = _cmp("eq", _exponent(fmt, b), _u(fmt.emax))
    inner.append(If(cond=special, then=set_flag, orelse=(
        If(cond=_is_zero(v), orelse=tuple(finite)),)))
    body.append(If(cond=_cmp("lt", i, n), then=tuple(inner)))
    return body


def _names(program: Program) -> set[str]:
    names = {b.name for b in program.buffers} | {q.name for q in program.params}
    names |= {a.name for a in program.workgroup_arrays}
    for s in walk_stmts(program.body):
        for attr in ("name", "var", "result"):
            n = getattr(s, attr, None)
            if isinstance(n, str):
                names.add(n)
    return names


def _prefix(program: Program) -> str:
    """A name prefix no declaration of `program` starts with."""
    names = _names(program)
    n = 0
    while any(x.startswith(f"xsum{n}_") for x in names):
        n += 1
    return f"xsum{n}_"


@dataclass(frozen=True)
class Plan:
    """How one Program runs with exact sums: `main` (the program with its order-independent
    adds rewritten, a scratch buffer per target appended after its buffers) and, per target,
    the slot of its buffer in the program's declarations."""

    main: Program
    targets: tuple[int, ...]


def plan_for(program: Program) -> Plan | None:
    """The exact-sum plan of a valid `program`, or None when it has no exact adds."""
    if exact_sum_targets(program) or exact_shared_targets(program):
        return _plan(program)
    return None


@lru_cache(maxsize=256)
def _plan(program: Program) -> Plan:
    targets = exact_sum_targets(program)
    shared = exact_shared_targets(program)
    prefix = _prefix(program)
    acc = {t: f"{prefix}acc{j}" for j, t in enumerate(targets)}
    acc.update({t: f"{prefix}wacc{j}" for j, t in enumerate(shared)})
    fmts = {d.name: FORMATS[d.ty] for d in program.buffers if d.name in acc}
    fmts.update({a.name: FORMATS[a.ty] for a in program.workgroup_arrays if a.name in acc})
    counts = {a.name: a.count for a in program.workgroup_arrays}
    size = program.workgroup_size[0] * program.workgroup_size[1] * program.workgroup_size[2]
    sites = [0]

    def rewrite(s: Stmt) -> list[Stmt]:
        if type(s) is Atomic and s.buffer in acc and s.op == "add" and not s.relaxed:
            sites[0] += 1
            return _accumulate(f"{prefix}{sites[0]}_", fmts[s.buffer], acc[s.buffer],
                               s.buffer, s, storage=s.buffer not in counts)
        if type(s) is Barrier and shared:  # the phase's sums land before anyone reads
            out: list[Stmt] = [s]
            for t in shared:
                sites[0] += 1
                p = f"{prefix}{sites[0]}_"
                out.append(For(var=f"{p}el", ty=U32, start=Builtin(name="local_index"),
                               end=_u(counts[t]), step=size,
                               body=tuple(finalize_element(p, fmts[t], t, acc[t],
                                                           _v(f"{p}el")))))
            return [*out, Barrier()]
        return [s]

    body = map_block(program.body, rewrite)
    if shared:  # workgroup memory starts undefined: zero the words, then a barrier
        clear = tuple(For(var=f"{prefix}z{j}", ty=U32, start=Builtin(name="local_index"),
                          end=_u(fmts[t].stride * counts[t]), step=size,
                          body=(Store(buffer=acc[t], index=_v(f"{prefix}z{j}"), value=_u(0)),))
                      for j, t in enumerate(shared))
        body = (*clear, Barrier(), *body)
    scratch = tuple(BufferDecl(name=acc[t], ty=U32, access="read_write") for t in targets)
    words = tuple(WorkgroupArray(name=acc[t], ty=U32, count=fmts[t].stride * counts[t])
                  for t in shared)
    main = program.model_copy(update={
        "body": body, "buffers": (*program.buffers, *scratch),
        "workgroup_arrays": (*program.workgroup_arrays, *words)})
    slots = tuple(next(j for j, b in enumerate(program.buffers) if b.name == t) for t in targets)
    return Plan(main=main, targets=slots)
