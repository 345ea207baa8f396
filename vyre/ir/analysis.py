"""Facts derived from a Program's IR: walks, the features it needs, which buffers it uses
atomically. Pure functions over nodes; this module must never mutate or build Programs."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from .nodes import (
    SUBGROUP_BUILTINS,
    Atomic,
    Binary,
    BufferDecl,
    Builtin,
    Call,
    Const,
    Expr,
    ExprFacts,
    For,
    If,
    Param,
    Program,
    RawAtomic,
    Stmt,
    Subgroup,
    Var,
    While,
    WorkgroupArray,
)
from .types import ScalarType
from .visit import child_blocks, stmt_exprs
from .visit import children as child_exprs


def walk_stmts(body: tuple[Stmt, ...]) -> Iterator[Stmt]:
    """Every statement of `body` and of its nested blocks, each before those of its own
    blocks (then before orelse). Collected into a list at once: a generator per nested
    block costs more than the walk (compiling walks the statements several times)."""
    out: list[Stmt] = []
    _collect_stmts(body, out)
    return iter(out)


def _collect_stmts(body: tuple[Stmt, ...], out: list[Stmt]) -> None:
    for s in body:
        out.append(s)
        t = type(s)  # (no class derives from If, For or While: child_blocks' blocks)
        if t is If:
            _collect_stmts(s.then, out)  # type: ignore[union-attr]
            _collect_stmts(s.orelse, out)  # type: ignore[union-attr]
        elif t is For or t is While:
            _collect_stmts(s.body, out)  # type: ignore[union-attr]


def walk_expr(e: Expr) -> Iterator[Expr]:
    stack = [e]
    while stack:
        cur = stack.pop()
        yield cur
        stack.extend(child_exprs(cur))


def walk_all_exprs(program: Program) -> Iterator[Expr]:
    for s in walk_stmts(program.body):
        for e in stmt_exprs(s):
            yield from walk_expr(e)


def has_any(program: Program, classes: tuple[type, ...]) -> bool:
    """Whether a node of `program` is of one of `classes` (exactly; from its cached facts)."""
    return not program.expr_facts.classes.isdisjoint(classes)


def atomic_buffers(program: Program) -> frozenset[str]:
    """Names of buffers / workgroup arrays that some Atomic statement targets."""
    return frozenset(s.buffer for s in walk_stmts(program.body) if isinstance(s, Atomic))


def read_locals(program: Program) -> frozenset[str]:
    """Names of the locals some expression of `program` reads (Var nodes)."""
    return frozenset(e.name for e in walk_all_exprs(program) if isinstance(e, Var))


EXACT_SUM_TYPES = frozenset({ScalarType.F32, ScalarType.F64})
"""The float types whose atomic adds can be order-independent (vyre.lower.exact_sum)."""


def exact_sum_targets(program: Program) -> tuple[str, ...]:
    """The f32 / f64 storage buffers (in declaration order) that an order-independent atomic
    add targets: an `add` not marked `relaxed` whose old value no expression reads. Their
    adds are summed exactly and rounded once when the dispatch ends (vyre.lower.exact_sum)."""
    return _exact_add_targets(program, program.buffers)


def exact_shared_targets(program: Program) -> tuple[str, ...]:
    """The f32 / f64 workgroup arrays (in declaration order) that an order-independent atomic
    add targets (as exact_sum_targets): their sums land at the next barrier."""
    return _exact_add_targets(program, program.workgroup_arrays)


def _exact_add_targets(program: Program, decls: Sequence[BufferDecl | WorkgroupArray]
                       ) -> tuple[str, ...]:
    """Those of `decls` (buffers or workgroup arrays, in order) an exact float add targets."""
    if not has_any(program, (Atomic,)):
        return ()
    floats = {d.name for d in decls if d.ty in EXACT_SUM_TYPES}
    if not floats:
        return ()
    used = read_locals(program)
    hit = {s.buffer for s in walk_stmts(program.body)
           if type(s) is Atomic and s.buffer in floats and s.op == "add" and not s.relaxed
           and (s.result is None or s.result not in used)}
    return tuple(d.name for d in decls if d.name in hit)


def expr_facts(program: Program) -> ExprFacts:
    """types_used and uses_subgroups of `program` in one walk. Callers go through the
    cached `program.expr_facts`: compiling asks both several times (feature checks, the
    printers), and each walk visits every expression of the tree."""
    tys: set[ScalarType] = set()
    tys.update(b.ty for b in program.buffers)
    tys.update(p.ty for p in program.params)
    tys.update(a.ty for a in program.workgroup_arrays)
    classes: set[type] = {type(program)}
    classes.update(type(d) for d in (*program.buffers, *program.params,
                                     *program.workgroup_arrays))
    stack: list[Expr] = []
    for s in walk_stmts(program.body):
        classes.add(type(s))
        if isinstance(s, For):
            tys.add(s.ty)
        stack.extend(stmt_exprs(s))
    # each distinct node once (a shared subexpression adds nothing new); no class derives
    # from Subgroup or Builtin, so their exact types are what to look for
    subgroups = False
    seen: set[int] = set()
    while stack:
        e = stack.pop()
        if id(e) in seen:
            continue
        seen.add(id(e))
        tys.add(e.ty)
        t = type(e)
        classes.add(t)
        if t is Subgroup or (t is Builtin and e.name in SUBGROUP_BUILTINS):  # type: ignore[union-attr]
            subgroups = True
        stack.extend(child_exprs(e))
    return ExprFacts(frozenset(tys), subgroups, frozenset(classes))


def types_used(program: Program) -> frozenset[ScalarType]:
    """Every scalar type `program` declares or computes with."""
    return program.expr_facts.types


def required_features(program: Program) -> frozenset[str]:
    """Capabilities a backend must report to run `program` (see vyre.features)."""
    feats: set[str] = set()
    for t in types_used(program):
        if t.feature:
            feats.add(t.feature)
    elem = {b.name: b.ty for b in program.buffers}
    elem.update({a.name: a.ty for a in program.workgroup_arrays})
    # exact float adds become integer atomics (vyre.lower.exact_sum): no float atomic
    # needed; an f64 one splits the value's bits with u64 operations
    exact = set(exact_sum_targets(program)) | set(exact_shared_targets(program))
    used = read_locals(program) if exact else frozenset()
    # (Atomic and the RawAtomic deriving from it: what isinstance below finds)
    for s in walk_stmts(program.body) if has_any(program, _ATOMICS) else ():
        if isinstance(s, Atomic):
            at = elem.get(s.buffer)
            if at is None:
                continue
            if at.is_float:
                if not (s.buffer in exact and s.op == "add" and not s.relaxed
                        and (s.result is None or s.result not in used)):
                    feats.add("atomic_float")
                elif at is ScalarType.F64:
                    feats.add("i64")
            elif at.bits == 64:
                feats.add("atomic_i64")
    if program.workgroup_arrays:
        feats.add("workgroup_memory")
    if uses_subgroups(program):
        feats.add("subgroup")
    return frozenset(feats)


_ATOMICS = (Atomic, RawAtomic)


def uses_subgroups(program: Program) -> bool:
    """Whether `program` has a subgroup operation or reads a subgroup builtin."""
    return program.expr_facts.subgroups


def uses_approximate_calls(program: Program) -> bool:
    """Whether `program` calls a function that is approximate for the call's type
    (vyre.ir.nodes.approximate_call; not those with an exact definition)."""
    from .nodes import approximate_call

    return any(isinstance(e, Call) and approximate_call(e.fn, e.ty)
               for e in walk_all_exprs(program))


def uses_float_ops(program: Program, names: frozenset[str]) -> bool:
    for e in walk_all_exprs(program):
        if isinstance(e, Call) and e.fn in names and e.ty.is_float:
            return True
        if isinstance(e, Binary) and e.op in names and e.ty.is_float:
            return True
        if isinstance(e, Subgroup) and e.combine in names and e.ty.is_float:
            return True
    return False


__all__ = [
    "Const",
    "ExprFacts",
    "Param",
    "Var",
    "atomic_buffers",
    "child_blocks",
    "child_exprs",
    "expr_facts",
    "has_any",
    "required_features",
    "stmt_exprs",
    "types_used",
    "uses_approximate_calls",
    "uses_float_ops",
    "uses_subgroups",
    "walk_all_exprs",
    "walk_expr",
    "walk_stmts",
]
