"""The validator's statement walk: declarations, scoping, control flow, atomics, debug
statements, exact sums and the uniformity verdict over a whole Program (the rules
docs/IR.md lists and vyre.ir.validate names), its expressions checked by ExprChecks.

This module must never mutate a Program, import a backend, or evaluate a kernel.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import NoReturn

from .analysis import exact_sum_targets, has_any, read_locals, walk_expr
from .limits import (
    MAX_DEPTH,
    MAX_NAME_LEN,
    MAX_NODES,
    MAX_WORKGROUP_DIM,
    MAX_WORKGROUP_INVOCATIONS,
)
from .nodes import (
    CORE_ONLY,
    Assert,
    Assign,
    Atomic,
    Barrier,
    Break,
    Continue,
    For,
    If,
    Let,
    Load,
    Print,
    Return,
    StmtNode,
    Store,
    While,
)
from .types import ScalarType
from .uniformity import UNIFORM_CF
from .validate_exprs import (
    F32,
    I32,
    U32,
    ExprChecks,
    Local,
    Loop,
    is_valid_name,
)
from .visit import stmt_exprs

_ATOMIC_INT = frozenset({ScalarType.I32, ScalarType.U32, ScalarType.I64, ScalarType.U64})
_PROGRAM_NAME = re.compile(r"[A-Za-z0-9_.\-]+\Z")


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


# ------------------------------------------------------------------ the walk


class Validator(ExprChecks):
    """One Program's check: `run()` returns None or raises InvalidProgram."""

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
        self.block(p.body, "body", 1, UNIFORM_CF)
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
                  declared: list[str] | None) -> Local:
        n = self.declare(name, path, what)
        loc = Local(ty, self.u.node(f"{what} {n!r} ({path})"), loop)
        self.locals[n] = loc
        if declared is not None:
            declared.append(n)
        return loc

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
            self.loops.append(Loop(path, div))
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
        if s.ty not in (I32, U32):
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
        self.loops.append(Loop(path, div))
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
        if ety in (F32, ScalarType.F64):
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
