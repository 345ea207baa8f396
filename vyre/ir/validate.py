"""The Program validator: every rule of docs/IR.md that can be checked before a backend runs.

`validate(program)` returns None for a valid Program and raises `InvalidProgram` otherwise.
The error's `node` is the path of the offending node (e.g. ``body[2].then[0].value``); the
message names the node kind, what is wrong and how to fix it.

Rules checked, in one walk over the program:

- names: every buffer, param, workgroup array, local (`Let`), loop variable (`For.var`) and
  atomic result is an ASCII identifier (``[A-Za-z_][A-Za-z0-9_]*``, at most
  `MAX_NAME_LEN` chars) and unique program-wide (no shadowing). The program's own name is
  looser: non-empty, at most `MAX_NAME_LEN` chars of letters, digits, ``_ . -``.
- declarations: element types of buffers, params and workgroup arrays are not bool; a fixed
  buffer count is >= 0; a workgroup array count is >= 1; the workgroup size is >= 1 in
  every axis, at most (1024, 1024, 64) and at most 1024 invocations.
- scoping: a `Let` (or an atomic `result`) is visible after it in its block and in nested
  blocks; a loop variable only inside its loop body. Assign only to visible locals that are
  not loop variables.
- types: every expression's `ty` is recomputed from its children (the builder's rules) and
  must match; loads/lengths/stores/atomics name declared buffers or arrays; indices and
  shift amounts are u32; conditions are bool; casts between any scalar types are legal;
  bitcasts need equal widths and no bool; `Const` values must be exactly representable.
- access: no load from a `write` buffer, no store/atomic to a `read` buffer; atomics need a
  `read_write` buffer or a workgroup array, an i32/u32/i64/u64 element (f32: `add` only),
  and a comparand exactly for `compare_exchange`.
- control flow: break/continue only inside a loop; `For` has ty i32/u32, bounds of that
  type and a step in 1..max of the type.
- uniformity: every `Barrier` sits in uniform control flow (docs/IR.md, "Uniformity"). The
  analysis is flow-insensitive for locals: a local is non-uniform if *any* of its
  assignments (Let, Assign, loop bounds) is non-uniform or sits in non-uniform control
  flow; atomic results and loads are always non-uniform. A loop containing a `break` or
  `continue` (of that loop) or a `return` in non-uniform control flow has a non-uniform
  body (the back edge makes every iteration after it divergent); a `return` in
  non-uniform control flow makes everything after it non-uniform.
- subgroups: subgroup operations take i32/u32/f32 values (bitwise combines: i32/u32), a
  u32 lane for shuffle / broadcast only, a combine for reduce / scans only; like a
  `Barrier` they must sit in uniform control flow, and a broadcast's lane must be uniform
  (`subgroup_size` is uniform, `subgroup_lane` and every subgroup result are not).
- depth: statement plus expression nesting is at most `MAX_DEPTH` (64) levels, so no walk
  over a valid Program (here, in serialisation or in a backend) can overflow the stack.
- size: at most `MAX_NODES` nodes, a shared subexpression counted once per use.

Programs are immutable, so a validated Program is remembered (by identity, and by content
hash where one was already computed) and validating it again is O(1).

This module must never mutate a Program, import a backend, or evaluate a kernel.
"""

from __future__ import annotations

import math
import re
import weakref
from collections import OrderedDict
from collections.abc import Iterator
from typing import NoReturn

from ..errors import InvalidProgram
from . import ops
from .analysis import exact_sum_targets, has_any, read_locals, walk_expr
from .nodes import (
    CORE_ONLY,
    MAX_WORKGROUP_DIM,
    MAX_WORKGROUP_INVOCATIONS,
    Assert,
    Assign,
    Atomic,
    Barrier,
    Binary,
    Bitcast,
    Break,
    Builtin,
    Call,
    Cast,
    Const,
    Continue,
    For,
    If,
    Length,
    Let,
    Load,
    Native,
    Param,
    Print,
    Program,
    Return,
    Select,
    StmtNode,
    Store,
    Subgroup,
    Unary,
    Var,
    While,
    check_tree_size,
)
from .types import ScalarType, normalise_literal
from .visit import stmt_exprs

MAX_DEPTH = 64
"""Most nested levels of statements plus expressions (a top-level statement is level 1)."""
MAX_NAME_LEN = 64
"""Longest name of a declaration or local (and of the program)."""
MAX_NODES = 1_000_000
"""Most statement + expression nodes, a subexpression shared by several parents counted once
per use (what every walk, the wire format and code generation see). Python code can build
a DAG whose tree is exponentially large (x = x + x, 60 times); this bound turns that into
an error instead of a hang."""

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_PROGRAM_NAME = re.compile(r"[A-Za-z0-9_.\-]+\Z")

_BOOL = ScalarType.BOOL
_U32 = ScalarType.U32
_I32 = ScalarType.I32
_F32 = ScalarType.F32
_ATOMIC_INT = frozenset({ScalarType.I32, ScalarType.U32, ScalarType.I64, ScalarType.U64})
_UNIFORM_BUILTINS = frozenset({"workgroup_id", "num_workgroups", "subgroup_size"})
_SUBGROUP_TYPES = frozenset({ScalarType.I32, ScalarType.U32, ScalarType.F32})
_COMPARISON = ops.binary_names("comparison")
_LOGICAL = ops.binary_names("logical")
_BITWISE = ops.binary_names("bitwise")
_SHIFT = ops.binary_names("shift")


def is_valid_name(name: object) -> bool:
    """Whether `name` may name a buffer, param, workgroup array or local."""
    return isinstance(name, str) and len(name) <= MAX_NAME_LEN and bool(_IDENT.match(name))


# ------------------------------------------------------------------ cache

_VALID_BY_ID: dict[int, weakref.ref[Program]] = {}
_VALID_HASHES: OrderedDict[str, None] = OrderedDict()
_MAX_HASHES = 4096


class _Forget:
    __slots__ = ("pid",)

    def __init__(self, pid: int) -> None:
        self.pid = pid

    def __call__(self, _ref: object) -> None:
        _VALID_BY_ID.pop(self.pid, None)


def _is_cached(program: Program) -> bool:
    ref = _VALID_BY_ID.get(id(program))
    if ref is not None and ref() is program:
        return True
    h = program.__dict__.get("content_hash")  # only if already computed (cached_property)
    if h is not None and h in _VALID_HASHES:
        _remember(program)
        return True
    return False


def _remember(program: Program) -> None:
    pid = id(program)
    _VALID_BY_ID[pid] = weakref.ref(program, _Forget(pid))
    h = program.__dict__.get("content_hash")
    if h is not None:
        _VALID_HASHES[h] = None
        if len(_VALID_HASHES) > _MAX_HASHES:
            _VALID_HASHES.popitem(last=False)


def validate(program: Program) -> None:
    """Raise InvalidProgram (naming the node and the fix) unless `program` is valid."""
    if not isinstance(program, Program):
        raise InvalidProgram(
            f"expected a vyre Program, got {type(program).__name__}; build one with "
            "vyre.ProgramBuilder or vyre.ir.from_json"
        )
    if _is_cached(program):
        return
    check_tree_size(program)  # linear in distinct nodes: refuses 2^60-node trees at once
    _Validator(program).run()
    _remember(program)


def _stmt_paths(body: tuple[StmtNode, ...], path: str) -> Iterator[tuple[str, StmtNode]]:
    """Every statement under `body` with its path (``body[2].then[0]``), parents first."""
    for i, s in enumerate(body):
        here = f"{path}[{i}]"
        yield here, s
        if isinstance(s, If):
            yield from _stmt_paths(s.then, f"{here}.then")
            yield from _stmt_paths(s.orelse, f"{here}.orelse")
        elif isinstance(s, For | While):
            yield from _stmt_paths(s.body, f"{here}.body")


# ------------------------------------------------------------------ error paths

_PART = re.compile(r"([A-Za-z_]+)((?:\[\d+\])*)\Z")


def _node_at(program: Program, path: str) -> object:
    """The object at `path` (e.g. ``body[2].then[0].value``); only used to word errors."""
    cur: object = program
    try:
        for part in path.split("."):
            m = _PART.match(part)
            if m is None:
                return None
            cur = getattr(cur, m.group(1))
            for idx in re.findall(r"\d+", m.group(2)):
                cur = cur[int(idx)]  # type: ignore[index]
    except (AttributeError, IndexError, KeyError, TypeError):
        return None
    return cur


def _kind(node: object) -> str:
    """A short description of a node: "binary add", "builtin global_id", "store", ..."""
    if isinstance(node, Binary | Unary):
        return f"{node.kind} {node.op}"
    if isinstance(node, Call):
        return f"call {node.fn}"
    if isinstance(node, Builtin):
        return f"builtin {node.name}"
    if isinstance(node, Subgroup):
        return f"subgroup {node.op}"
    if isinstance(node, Atomic):
        return f"atomic {node.op}"
    if isinstance(node, Load | Store | Length):
        return f"{node.kind} {node.buffer}"
    kind = getattr(node, "kind", None)
    if isinstance(kind, str):
        return kind
    name = type(node).__name__
    return {"BufferDecl": "buffer", "ParamDecl": "param", "WorkgroupArray": "workgroup array",
            "tuple": "workgroup size", "str": "name"}.get(name, name)


# ------------------------------------------------------------------ uniformity graph
#
# Nodes are ints. A node is non-uniform if it is a source (marked directly) or any of its
# dependencies is non-uniform. Locals, control-flow contexts, loop divergence and
# divergent returns are nodes; after the walk one linear propagation settles them all.

_UNIFORM_CF = 0  # the control flow at the top of the program: uniform


class _Uniformity:
    def __init__(self) -> None:
        self.what: list[str] = ["the program entry"]
        self.deps: list[list[int]] = [[]]
        self.sources: dict[int, str] = {}
        self.why: dict[int, int | str] = {}

    def node(self, what: str, deps: list[int] | None = None) -> int:
        self.what.append(what)
        self.deps.append(list(deps) if deps else [])
        return len(self.what) - 1

    def mark(self, n: int, reason: str) -> None:
        self.sources.setdefault(n, reason)

    def solve(self) -> None:
        users: list[list[int]] = [[] for _ in self.what]
        for n, ds in enumerate(self.deps):
            for d in ds:
                users[d].append(n)
        stack = list(self.sources)
        for n, reason in self.sources.items():
            self.why[n] = reason
        while stack:
            n = stack.pop()
            for u in users[n]:
                if u not in self.why:
                    self.why[u] = n
                    stack.append(u)

    def explain(self, n: int) -> str:
        chain: list[str] = []
        cur: int | str = n
        for _ in range(8):
            if isinstance(cur, str):
                chain.append(cur)
                break
            if cur in self.sources:
                chain.append(self.sources[cur])
                break
            chain.append(self.what[cur])
            cur = self.why[cur]
        return " <- ".join(chain)


class _Local:
    __slots__ = ("loop", "node", "ty")

    def __init__(self, ty: ScalarType, node: int, loop: bool) -> None:
        self.ty = ty
        self.node = node
        self.loop = loop


class _Loop:
    __slots__ = ("div", "path")

    def __init__(self, path: str, div: int) -> None:
        self.path = path
        self.div = div


# ------------------------------------------------------------------ the walk


class _Validator:
    def __init__(self, program: Program) -> None:
        self.p = program
        self.names: set[str] = set()
        self.decl: dict[str, tuple[str, ScalarType, str]] = {}  # name -> (what, ty, access)
        self.locals: dict[str, _Local] = {}
        self.u = _Uniformity()
        self.loops: list[_Loop] = []
        self.barriers: list[tuple[str, int]] = []
        self.subgroups: list[tuple[str, int]] = []  # (path, control flow) of subgroup ops
        self.lane_deps: list[tuple[str, list[int]]] = []  # broadcast lanes: must be uniform
        self.cf = _UNIFORM_CF  # the control flow of the statement whose expressions are checked
        self.count = 0

    def fail(self, path: str, message: str) -> NoReturn:
        name = self.p.name if isinstance(self.p.name, str) else repr(self.p.name)
        raise InvalidProgram(f"{message} (program {name[:MAX_NAME_LEN]!r})",
                             node=f"{path} ({_kind(_node_at(self.p, path))})")

    # -- names
    def declare(self, name: object, path: str, what: str) -> str:
        if not is_valid_name(name):
            self.fail(
                path,
                f"{what} name {name!r} is not a valid name; use an ASCII identifier "
                f"([A-Za-z_][A-Za-z0-9_]*, at most {MAX_NAME_LEN} characters)",
            )
        assert isinstance(name, str)
        if name in self.names:
            self.fail(
                path,
                f"{what} name {name!r} is already declared in this program; names of "
                "buffers, params, workgroup arrays and locals must be unique program-wide "
                "(rename one)",
            )
        self.names.add(name)
        return name

    # -- entry
    def run(self) -> None:
        p = self.p
        if not isinstance(p.name, str) or not p.name or len(p.name) > MAX_NAME_LEN or not (
            _PROGRAM_NAME.match(p.name)
        ):
            self.fail("name", f"program name {p.name!r} must be 1..{MAX_NAME_LEN} characters "
                      "of letters, digits, '_', '.' or '-'")
        self.check_workgroup_size()
        for i, b in enumerate(p.buffers):
            path = f"buffers[{i}]"
            self.declare(b.name, path, "buffer")
            if not b.ty.storable:
                self.fail(path, f"buffer {b.name!r} has element type bool, which cannot be "
                          "stored; use u32 (0/1) and compare with != 0")
            if b.count is not None and (isinstance(b.count, bool) or b.count < 0):
                self.fail(path, f"buffer {b.name!r} has fixed count {b.count!r}; a fixed "
                          "count must be an int >= 0 (or None for 'as bound')")
            self.decl[b.name] = ("buffer", b.ty, b.access)
        for i, q in enumerate(p.params):
            path = f"params[{i}]"
            self.declare(q.name, path, "param")
            if not q.ty.storable:
                self.fail(path, f"param {q.name!r} has type bool; params are stored, use "
                          "u32 (0/1) and compare with != 0")
            if q.ty.is_narrow:
                self.fail(path, f"param {q.name!r} has type {q.ty}; 8/16-bit integers are "
                          f"storage types (buffers, workgroup arrays): declare the param "
                          f"{q.ty.promoted} and cast it where a {q.ty} is stored")
            self.decl[q.name] = ("param", q.ty, "read")
        for i, a in enumerate(p.workgroup_arrays):
            path = f"workgroup_arrays[{i}]"
            self.declare(a.name, path, "workgroup array")
            if not a.ty.storable:
                self.fail(path, f"workgroup array {a.name!r} has element type bool; use u32")
            if isinstance(a.count, bool) or a.count < 1:
                self.fail(path, f"workgroup array {a.name!r} has count {a.count!r}; it needs "
                          "at least 1 element")
            self.decl[a.name] = ("array", a.ty, "workgroup")
        self.block(p.body, "body", 1, _UNIFORM_CF)
        self.check_exact_sums()
        self.u.solve()
        fix = ("make the condition depend only on constants, params, workgroup_id, "
               "num_workgroups, lengths and uniform locals")
        for sites, what, move in (
            (self.barriers, "barrier in non-uniform control flow: not every invocation of "
             "the workgroup is guaranteed to reach it", "move the barrier out of the "
             "divergent if/loop"),
            (self.subgroups, "subgroup operation in non-uniform control flow: every "
             "invocation of the workgroup must reach it together", "compute it before the "
             "divergent if/loop (on every invocation) and use the result inside"),
        ):
            for path, cf in sites:
                if cf in self.u.why:
                    self.fail(path, f"{what} (because: {self.u.explain(cf)}); {move}, or {fix}")
        for path, deps in self.lane_deps:
            bad = next((d for d in deps if d in self.u.why), None)
            if bad is not None:
                self.fail(
                    path,
                    "subgroup broadcast from a non-uniform lane (because: "
                    f"{self.u.explain(bad)}); broadcast needs one lane for the whole "
                    "workgroup: use a uniform lane, or subgroup shuffle for a lane per "
                    "invocation",
                )

    def check_exact_sums(self) -> None:
        """A buffer whose float adds are summed exactly (analysis.exact_sum_targets) holds its
        sums only when the dispatch ends, so nothing else in the program may touch it. An
        f64 atomic add exists only in that form."""
        targets = set(exact_sum_targets(self.p))
        f64 = {name for name, (_, ty, _) in self.decl.items()
               if ty is ScalarType.F64} if has_any(self.p, (Atomic,)) else set()
        if not targets and not f64:
            return
        used = read_locals(self.p)
        for path, s in _stmt_paths(self.p.body, "body"):
            if isinstance(s, Atomic) and s.buffer in f64 and (
                    s.relaxed or (s.result is not None and s.result in used)):
                what = "relaxed" if s.relaxed else "whose old value is read"
                self.fail(path, f"f64 atomic add {what} on {s.buffer!r}: an f64 atomic add "
                          "is only order-independent (exact, rounded once when the dispatch "
                          "ends, or for a workgroup array at the next barrier: WGSL has no "
                          "f64 atomic); drop the relaxed form and do not read the old value, "
                          "or add in an f32 buffer")
            if isinstance(s, Atomic) and s.buffer in targets:
                exact = (s.op == "add" and not s.relaxed
                         and (s.result is None or s.result not in used))
                if not exact:
                    what = "an atomic add whose old value is read" if s.op == "add" and not (
                        s.relaxed) else f"a {'relaxed ' if s.relaxed else ''}atomic {s.op}"
                    self._exact_conflict(path, s.buffer, what)
            elif isinstance(s, Store) and s.buffer in targets:
                self._exact_conflict(path, s.buffer, "a store")
            for e in stmt_exprs(s):
                for x in walk_expr(e):
                    if isinstance(x, Load) and x.buffer in targets:
                        self._exact_conflict(path, x.buffer, "a load")

    def _exact_conflict(self, path: str, buf: str, what: str) -> NoReturn:
        self.fail(path, f"{what} of f32 buffer {buf!r}, which the program also adds to with "
                  "order-independent atomic adds (their old value unread): those sums are "
                  "exact and land in the buffer only when the dispatch ends, so no other "
                  "access may see it; do the other access in a separate dispatch, or make "
                  "every add of the buffer relaxed (atomic_add_relaxed: order-dependent "
                  "bits)")

    def check_workgroup_size(self) -> None:
        ws = self.p.workgroup_size
        for axis, (n, hi) in enumerate(zip(ws, MAX_WORKGROUP_DIM)):
            if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= hi:
                self.fail("workgroup_size", f"workgroup size {tuple(ws)} axis {'xyz'[axis]} is "
                          f"{n!r}; each axis must be an int in 1..{hi} (limits "
                          f"{MAX_WORKGROUP_DIM})")
        total = ws[0] * ws[1] * ws[2]
        if total > MAX_WORKGROUP_INVOCATIONS:
            self.fail("workgroup_size", f"workgroup size {tuple(ws)} has {total} invocations; "
                      f"at most {MAX_WORKGROUP_INVOCATIONS} are allowed: shrink an axis")

    # -- statements
    def block(self, stmts: tuple[object, ...], path: str, depth: int, cf: int) -> list[int]:
        """Check a block; returns the control-flow nodes of the returns inside it."""
        if depth > MAX_DEPTH and stmts:
            self.fail(f"{path}[0]", f"nesting deeper than MAX_DEPTH={MAX_DEPTH} levels of "
                      "statements and expressions; split the kernel or flatten the nesting")
        declared: list[str] = []
        returns: list[int] = []
        for i, s in enumerate(stmts):
            sp = f"{path}[{i}]"
            rets = self.stmt(s, sp, depth, cf, declared)
            if rets:
                returns.extend(rets)
                # Everything after a return in non-uniform control flow is non-uniform.
                cf = self.u.node(f"control flow after the return(s) before {sp}", [cf, *rets])
        for name in declared:
            del self.locals[name]
        return returns

    def new_local(self, name: object, path: str, what: str, ty: ScalarType, loop: bool,
                  declared: list[str] | None) -> _Local:
        n = self.declare(name, path, what)
        loc = _Local(ty, self.u.node(f"{what} {n!r} ({path})"), loop)
        self.locals[n] = loc
        if declared is not None:
            declared.append(n)
        return loc

    def too_many(self, path: str) -> NoReturn:
        self.fail(path, f"the program has more than MAX_NODES={MAX_NODES} nodes (a "
                  "subexpression used in several places counts once per use); keep shared "
                  "values in a let instead of repeating the expression")

    def core_only(self, node: object, path: str) -> NoReturn:
        what = f"native {node.op}" if isinstance(node, Native) else type(node).__name__
        self.fail(path, f"{what} is an internal node of the lowered core (vyre.lower); a "
                  "Program cannot contain it: write the IR operation instead")

    def stmt(self, s: object, path: str, depth: int, cf: int, declared: list[str]) -> list[int]:
        if isinstance(s, CORE_ONLY):
            self.core_only(s, path)
        d = depth + 1
        self.count += 1
        if self.count > MAX_NODES:
            self.too_many(path)
        self.cf = cf
        if isinstance(s, Let):
            ty, deps = self.expr(s.value, f"{path}.value", d)
            self.wide(ty, f"{path}.value", "a local")
            loc = self.new_local(s.name, path, "local", ty, False, declared)
            self.u.deps[loc.node].extend([cf, *deps])
            return []
        if isinstance(s, Assign):
            ty, deps = self.expr(s.value, f"{path}.value", d)
            self.wide(ty, f"{path}.value", "a local")
            target = self.locals.get(s.name)
            if target is None:
                self.fail(path, f"assign to {s.name!r}, which is not a local visible here; "
                          "declare it with a let before (in this block or an enclosing one)")
            if target.loop:
                self.fail(path, f"assign to loop variable {s.name!r}: loop variables are "
                          "read-only; copy it into a let and change that")
            if ty is not target.ty:
                self.fail(path, f"assign of a {ty} value to local {s.name!r} ({target.ty}); "
                          f"cast the value to {target.ty}")
            self.u.deps[target.node].extend([cf, *deps])
            return []
        if isinstance(s, Store):
            _, ety, access = self.buffer(s.buffer, path, "store")
            if access == "read":
                self.fail(path, f"store to buffer {s.buffer!r}, which is declared 'read'; "
                          "declare it 'write' or 'read_write'")
            self.index(s.index, f"{path}.index", d)
            ty, _ = self.expr(s.value, f"{path}.value", d)
            if ty is not ety:
                self.fail(f"{path}.value", f"store of a {ty} value into {s.buffer!r} "
                          f"({ety} elements); cast the value to {ety}")
            return []
        if isinstance(s, If):
            deps = self.cond(s.cond, f"{path}.cond", d, "if")
            inner = self.u.node(f"the condition of the if at {path}", [cf, *deps])
            return self.block(s.then, f"{path}.then", d, inner) + self.block(
                s.orelse, f"{path}.orelse", d, inner)
        if isinstance(s, For):
            return self.for_(s, path, d, cf)
        if isinstance(s, While):
            div = self.u.node(f"a break/continue/return in non-uniform control flow in the "
                              f"loop at {path}")
            # the condition is evaluated again after each iteration, by the invocations
            # still looping
            self.cf = self.u.node(f"the iterations of the while at {path}", [cf, div])
            deps = self.cond(s.cond, f"{path}.cond", d, "while")
            inner = self.u.node(f"the condition of the while at {path}", [cf, div, *deps])
            self.loops.append(_Loop(path, div))
            try:
                rets = self.block(s.body, f"{path}.body", d, inner)
            finally:
                self.loops.pop()
            self.u.deps[div].extend(rets)
            return rets
        if isinstance(s, (Break, Continue)):
            if not self.loops:
                self.fail(path, f"{s.kind} outside a loop; it must sit inside a for or while")
            self.u.deps[self.loops[-1].div].append(cf)
            return []
        if isinstance(s, Return):
            return [cf]
        if isinstance(s, Barrier):
            self.barriers.append((path, cf))
            return []
        if isinstance(s, Atomic):
            self.atomic(s, path, d, declared)
            return []
        if isinstance(s, (Print, Assert)):
            self.debug(s, path, d)
            return []
        self.fail(path, f"{type(s).__name__} is not a statement node")

    def debug(self, s: Print | Assert, path: str, d: int) -> None:
        """A vyre.print / vyre.assert_: a bool condition, and a format string whose
        replacement fields match the values (vyre.debug.fmt checks both)."""
        from ..debug.fmt import check_format

        if isinstance(s, Assert):
            self.cond(s.cond, f"{path}.cond", d, "assert")
        types = [self.expr(a, f"{path}.args[{i}]", d)[0] for i, a in enumerate(s.args)]
        problem = check_format(s.fmt, types)
        if problem:
            self.fail(path, f"{s.kind}: {problem}")

    def for_(self, s: For, path: str, d: int, cf: int) -> list[int]:
        if s.ty not in (_I32, _U32):
            self.fail(path, f"for loop of type {s.ty}; a loop variable must be i32 or u32")
        tys, deps_s = self.expr(s.start, f"{path}.start", d)
        tye, deps_e = self.expr(s.end, f"{path}.end", d)
        for what, t in (("start", tys), ("end", tye)):
            if t is not s.ty:
                self.fail(f"{path}.{what}", f"for loop {what} is {t} but the loop is {s.ty}; "
                          f"cast it to {s.ty}")
        hi = (1 << (s.ty.bits - 1)) - 1 if s.ty.is_signed else (1 << s.ty.bits) - 1
        if isinstance(s.step, bool) or not isinstance(s.step, int) or not 1 <= s.step <= hi:
            self.fail(path, f"for loop step {s.step!r}; the step must be an int constant in "
                      f"1..{hi}")
        div = self.u.node(f"a break/continue/return in non-uniform control flow in the "
                          f"loop at {path}")
        inner = self.u.node(f"the bounds of the for at {path}", [cf, div, *deps_s, *deps_e])
        var = self.new_local(s.var, path, "loop variable", s.ty, True, None)
        self.u.deps[var.node].extend([cf, *deps_s, *deps_e])
        self.loops.append(_Loop(path, div))
        try:
            rets = self.block(s.body, f"{path}.body", d, inner)
        finally:
            self.loops.pop()
            self.locals.pop(s.var, None)
        self.u.deps[div].extend(rets)
        return rets

    def atomic(self, s: Atomic, path: str, d: int, declared: list[str]) -> None:
        what, ety, access = self.buffer(s.buffer, path, f"atomic {s.op}")
        if access not in ("read_write", "workgroup"):
            self.fail(path, f"atomic {s.op} on buffer {s.buffer!r}, which is {access!r}; "
                      "atomics need a 'read_write' buffer or a workgroup array")
        if ety in (_F32, ScalarType.F64):
            if s.op != "add":
                self.fail(path, f"atomic {s.op} on {ety} {what} {s.buffer!r}: only atomic add "
                          "exists for floats (f32, f64); use an i32/u32 buffer")
        elif ety.is_narrow:
            self.fail(path, f"atomic {s.op} on {ety} {what} {s.buffer!r}: 8/16-bit elements "
                      "have no atomics (WGSL has none); keep the counters in a u32 or i32 "
                      "buffer")
        elif ety not in _ATOMIC_INT:
            self.fail(path, f"atomic {s.op} on {ety} {what} {s.buffer!r}; atomics need i32, "
                      "u32, i64 or u64 elements (f32 and f64 for add only)")
        self.index(s.index, f"{path}.index", d)
        ty, _ = self.expr(s.value, f"{path}.value", d)
        if ty is not ety:
            self.fail(f"{path}.value", f"atomic {s.op} value is {ty} but {s.buffer!r} holds "
                      f"{ety}; cast the value to {ety}")
        if s.op == "compare_exchange":
            if s.comparand is None:
                self.fail(path, "atomic compare_exchange needs a comparand (the value to "
                          "compare the element with)")
            cty, _ = self.expr(s.comparand, f"{path}.comparand", d)
            if cty is not ety:
                self.fail(f"{path}.comparand", f"comparand is {cty} but {s.buffer!r} holds "
                          f"{ety}; cast it to {ety}")
        elif s.comparand is not None:
            self.fail(f"{path}.comparand", f"atomic {s.op} takes no comparand (only "
                      "compare_exchange does); remove it")
        if s.result is not None:
            loc = self.new_local(s.result, path, "atomic result", ety, False, declared)
            self.u.mark(loc.node, f"the atomic result {s.result!r} ({path})")

    def buffer(self, name: str, path: str, what: str) -> tuple[str, ScalarType, str]:
        d = self.decl.get(name)
        if d is None or d[0] == "param":
            self.fail(path, f"{what} names {name!r}, which is not a declared buffer or "
                      "workgroup array; declare it (k.buffer / k.shared) or fix the name")
        return d

    def cond(self, e: object, path: str, d: int, what: str) -> list[int]:
        ty, deps = self.expr(e, path, d)
        if ty is not _BOOL:
            self.fail(path, f"{what} condition is {ty}, not bool; compare it (e.g. x != 0)")
        return deps

    def index(self, e: object, path: str, d: int) -> None:
        ty, _ = self.expr(e, path, d)
        if ty is not _U32:
            self.fail(path, f"an index must be u32, got {ty}; cast or bitcast it to u32")

    # -- expressions: return (recomputed type, uniformity dependencies)
    def expr(self, e: object, path: str, depth: int) -> tuple[ScalarType, list[int]]:
        if isinstance(e, CORE_ONLY):  # (subclasses of user nodes: checked first)
            self.core_only(e, path)
        if depth > MAX_DEPTH:
            self.fail(path, f"nesting deeper than MAX_DEPTH={MAX_DEPTH} levels of statements "
                      "and expressions; split the expression with lets")
        d = depth + 1
        self.count += 1
        if self.count > MAX_NODES:
            self.too_many(path)
        if isinstance(e, Const):
            self.const(e, path)
            return e.ty, []
        if isinstance(e, Var):
            loc = self.locals.get(e.name)
            if loc is None:
                self.fail(path, f"var {e.name!r} is not a local visible here (a let is "
                          "visible after it in its block; a loop variable only in its body); "
                          "declare it before use")
            if e.ty is not loc.ty:
                self.fail(path, f"var {e.name!r} says {e.ty} but the local is {loc.ty}; fix "
                          "its ty")
            return loc.ty, [loc.node]
        if isinstance(e, Binary):
            ta, da = self.expr(e.a, f"{path}.a", d)
            tb, db = self.expr(e.b, f"{path}.b", d)
            self.wide(ta, f"{path}.a", f"binary {e.op}")
            self.wide(tb, f"{path}.b", f"binary {e.op}")
            ty = self.binary_type(e.op, ta, tb, path)
            self.same(e.ty, ty, path, f"binary {e.op}")
            return ty, da + db
        if isinstance(e, Load):
            _, ety, access = self.buffer(e.buffer, path, "load")
            if access == "write":
                self.fail(path, f"load from buffer {e.buffer!r}, which is declared 'write' "
                          "(write-only); declare it 'read_write' to read it back")
            self.index(e.index, f"{path}.index", d)
            self.same(e.ty, ety, path, f"load from {e.buffer!r}")
            src = self.u.node(f"a load from {e.buffer!r} ({path})")
            self.u.mark(src, f"a load from {e.buffer!r} ({path})")
            return ety, [src]
        if isinstance(e, Param):
            dd = self.decl.get(e.name)
            if dd is None or dd[0] != "param":
                self.fail(path, f"param {e.name!r} is not declared; declare it with k.param")
            self.same(e.ty, dd[1], path, f"param {e.name!r}")
            return e.ty, []
        if isinstance(e, Builtin):
            if isinstance(e.axis, bool) or e.axis not in (0, 1, 2):
                self.fail(path, f"builtin {e.name} axis {e.axis!r}; the axis must be 0, 1 or 2")
            if e.name == "local_index" and e.axis != 0:
                self.fail(path, f"builtin local_index is flat; its axis must be 0, got {e.axis}")
            self.same(e.ty, _U32, path, f"builtin {e.name}")
            if e.name in _UNIFORM_BUILTINS:
                return _U32, []
            src = self.u.node(f"builtin {e.name} ({path})")
            self.u.mark(src, f"builtin {e.name}")
            return _U32, [src]
        if isinstance(e, Length):
            self.buffer(e.buffer, path, "length")
            self.same(e.ty, _U32, path, f"length of {e.buffer!r}")
            return _U32, []
        if isinstance(e, Unary):
            t, deps = self.expr(e.a, f"{path}.a", d)
            self.wide(t, f"{path}.a", f"unary {e.op}")
            if e.op == "neg" and not (t.is_float or t.is_signed):
                self.fail(path, f"unary neg on {t}; negation needs a signed int or float "
                          "(for unsigned wrap-around use 0 - x)")
            if e.op == "bit_not" and not t.is_int:
                self.fail(path, f"unary bit_not on {t}; it needs an integer (use 'not' for "
                          "bool)")
            if e.op == "not" and t is not _BOOL:
                self.fail(path, f"unary not on {t}; it needs bool (use bit_not for integers)")
            self.same(e.ty, t, path, f"unary {e.op}")
            return t, deps
        if isinstance(e, Call):
            return self.call(e, path, d)
        if isinstance(e, Select):
            tc, dc = self.expr(e.cond, f"{path}.cond", d)
            ta, da = self.expr(e.a, f"{path}.a", d)
            tb, db = self.expr(e.b, f"{path}.b", d)
            self.wide(ta, f"{path}.a", "select")
            if tc is not _BOOL:
                self.fail(f"{path}.cond", f"select condition is {tc}, not bool; compare it")
            if ta is not tb:
                self.fail(path, f"select branches are {ta} and {tb}; they must share one "
                          "type (cast one)")
            self.same(e.ty, ta, path, "select")
            return ta, dc + da + db
        if isinstance(e, Cast):
            _, deps = self.expr(e.a, f"{path}.a", d)
            return e.ty, deps
        if isinstance(e, Bitcast):
            t, deps = self.expr(e.a, f"{path}.a", d)
            if _BOOL in (t, e.ty) or t.bits != e.ty.bits:
                self.fail(path, f"bitcast {t} -> {e.ty}: a bitcast needs two non-bool types of "
                          "one width; use a cast for value conversion")
            if (t.is_narrow or e.ty.is_narrow) and not (t.is_int and e.ty.is_int):
                self.fail(path, f"bitcast {t} -> {e.ty}: a 16-bit integer bitcasts only to "
                          "the other 16-bit integer; for f16 bits cast to u32 first and "
                          "bitcast the f16 through f32, or keep the bits in a u16 buffer")
            return e.ty, deps
        if isinstance(e, Subgroup):
            return self.subgroup(e, path, d)
        self.fail(path, f"{type(e).__name__} is not an expression node")

    def subgroup(self, e: Subgroup, path: str, d: int) -> tuple[ScalarType, list[int]]:
        what = f"subgroup {e.op}"
        t, deps = self.expr(e.value, f"{path}.value", d)
        self.wide(t, f"{path}.value", what)
        if t not in _SUBGROUP_TYPES:
            self.fail(path, f"{what} on {t}; subgroup operations take i32, u32 or f32 "
                      "(cast the value)")
        if e.op in ("shuffle", "broadcast"):
            if e.lane is None:
                self.fail(path, f"{what} needs a lane (the u32 lane index to read from)")
            if e.combine is not None:
                self.fail(path, f"{what} takes no combine operation; remove it")
            lt, ldeps = self.expr(e.lane, f"{path}.lane", d)
            if lt is not _U32:
                self.fail(f"{path}.lane", f"{what} lane is {lt}; it must be u32 (cast it)")
            if e.op == "broadcast":
                self.lane_deps.append((f"{path}.lane", ldeps))
            deps = deps + ldeps
        else:
            if e.lane is not None:
                self.fail(path, f"{what} takes no lane (only shuffle and broadcast do)")
            if e.combine is None:
                self.fail(path, f"{what} needs a combine operation: add, min, max, and, or "
                          "or xor")
            if e.combine in _BITWISE and not t.is_int:
                self.fail(path, f"{what} with {e.combine} on {t}; bitwise combines need "
                          "i32 or u32")
        self.same(e.ty, t, path, what)
        self.subgroups.append((path, self.cf))
        # differs between subgroups (and, for shuffles and scans, between lanes)
        src = self.u.node(f"{what} ({path})", deps)
        self.u.mark(src, f"the result of {what} ({path})")
        return t, [src]

    def wide(self, t: ScalarType, path: str, what: str) -> None:
        """8/16-bit values are only loaded, cast, bitcast and stored (docs/IR.md "Narrow
        integers"): refuse one anywhere else, naming the cast to write."""
        if t.is_narrow:
            self.fail(path, f"{what} on a {t} value; 8/16-bit integers are storage types "
                      f"with no arithmetic of their own: cast the value to {t.promoted} "
                      f"first (and back to {t} to store it)")

    def same(self, declared: ScalarType, actual: ScalarType, path: str, what: str) -> None:
        if declared is not actual:
            self.fail(path, f"{what} has ty {declared} but its operands make it {actual}; "
                      f"set ty={actual} (or cast the operands)")

    def const(self, e: Const, path: str) -> None:
        v = e.value
        try:
            n = normalise_literal(v, e.ty)
        except ValueError as exc:
            self.fail(path, f"const {v!r} is not a valid {e.ty}: {exc}")
        if type(n) is not type(v) or not (
            n == v or (isinstance(n, float) and math.isnan(n) and math.isnan(v))
        ):
            self.fail(path, f"const {v!r} is not exactly representable as {e.ty} (nearest "
                      f"{n!r}); use the representable value")

    def binary_type(self, op: str, ta: ScalarType, tb: ScalarType, path: str) -> ScalarType:
        if op in _SHIFT:
            if not ta.is_int:
                self.fail(path, f"binary {op} needs an integer left operand, got {ta}")
            if tb is not _U32:
                self.fail(f"{path}.b", f"shift amount is {tb}; it must be u32 (cast or "
                          "bitcast it)")
            return ta
        if ta is not tb:
            self.fail(path, f"binary {op} on {ta} and {tb}; both operands must have one "
                      "type: cast one of them")
        if op in _LOGICAL:
            if ta is not _BOOL:
                self.fail(path, f"binary {op} needs bool operands, got {ta}; use and/or for "
                          "integers")
            return _BOOL
        if op in _COMPARISON:
            if ta is _BOOL and op not in ("eq", "ne"):
                self.fail(path, f"binary {op} is not defined on bool; only eq/ne are")
            return _BOOL
        if op in _BITWISE:
            if not ta.is_int:
                self.fail(path, f"bitwise {op} needs integers, got {ta}; bitcast floats, use "
                          "logical_and/logical_or for bool")
            return ta
        if not ta.is_numeric:
            self.fail(path, f"binary {op} needs numbers, got {ta}")
        return ta

    def call(self, e: Call, path: str, d: int) -> tuple[ScalarType, list[int]]:
        rec = ops.CALLS[e.fn]
        arity = rec.arity
        if len(e.args) != arity:
            self.fail(path, f"call {e.fn} has {len(e.args)} arguments; it takes {arity}")
        deps: list[int] = []
        tys: list[ScalarType] = []
        for i, a in enumerate(e.args):
            t, da = self.expr(a, f"{path}.args[{i}]", d)
            self.wide(t, f"{path}.args[{i}]", f"call {e.fn}")
            tys.append(t)
            deps += da
        if rec.signature is not None:  # fixed operand and result types (dot4_i8 / _u8)
            want, result = rec.signature
            if tys != list(want):
                self.fail(path, f"call {e.fn} arguments are {[str(x) for x in tys]}; it takes "
                          f"{[str(x) for x in want]} (bitcast or cast them)")
            self.same(e.ty, result, path, f"call {e.fn}")
            return result, deps
        t = tys[0]
        if any(x is not t for x in tys):
            self.fail(path, f"call {e.fn} arguments are {[str(x) for x in tys]}; they must "
                      "share one type (cast them)")
        if not t.is_numeric:
            self.fail(path, f"call {e.fn} needs numbers, got {t}")
        if rec.float_only and not t.is_float:
            self.fail(path, f"call {e.fn} needs a float argument, got {t}; cast it to f32")
        self.same(e.ty, t, path, f"call {e.fn}")
        return t, deps


__all__ = ["MAX_DEPTH", "MAX_NAME_LEN", "MAX_NODES", "is_valid_name", "validate"]
