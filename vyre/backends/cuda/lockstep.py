"""Lockstep coarsening of the CUDA kernel: the k invocations of a thread statement by statement.

`LockstepPrinter` is the CUDA printer (printer.py) for a coarsened body of let / assign /
store / if / atomic statements: every statement is done for all k invocations before the
next (like lanes of a warp), so their loads are in flight together, and a load or store of
consecutive elements by consecutive invocations is one vector access where aligned and in
bounds. This module must never talk to NVRTC or the driver.
"""

from __future__ import annotations

from typing import Any

from vyre.errors import InvalidProgram
from vyre.ir import nodes as N
from vyre.ir.visit import children
from vyre.lower import guarded_load, guarded_store

from .printer import CudaPrinter
from .spelling import CTYPE, INT32, VEC_TYPES


class LockstepPrinter(CudaPrinter):
    """The body of a lockstep kernel (`kernel_lines`); the rest is CudaPrinter's."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # lockstep vectorisation: lanes per vector (0: off), the stride in the x invocation
        # id of top-level variables, hoisted vector loads
        self.vec = 0
        self.cur_j: int | None = None
        self.var_stride: dict[str, int] = {}
        self.hoisted: dict[N.ExprNode, list[str]] = {}  # guarded loads -> lane values
        # masks of bounds tests (`if i < len(b)`), under which total values are computed
        # for every lane (speculated) and only their effect is masked
        self.bounds_masks: set[str] = set()

    def speculated(self, m: str | None, *exprs: N.ExprNode) -> bool:
        """Whether the values `exprs` under mask `m` are computed for every lane: `m` a
        bounds mask, the values total (CudaOptions.speculate). A masked-off lane is past
        its buffer's end, so nothing is lost, and the k computations become one basic
        block the compiler interleaves (exp's map 2,819 -> 3,071 GB/s on the H200)."""
        return (m is not None and self.options.speculate and m in self.bounds_masks
                and all(map(_total, exprs)))

    def intercept(self, e: N.ExprNode) -> str | None:
        """A guarded load hoisted for the statement being printed: the current lane's value."""
        if self.hoisted and self.cur_j is not None and isinstance(e, N.Guarded):
            names = self.hoisted.get(e)
            if names is not None:
                return names[self.cur_j]
        return None

    def kernel_lines(self, head: list[str], k: int) -> str:
        """The k invocations of a thread run statement by statement (like lanes of a warp):
        every statement is done for all k before the next, and a store evaluates all k
        values before writing any, so the loads of all k invocations are in flight
        together. Only for bodies of let / assign / store / if / atomic (no loops, no
        return), where this is one valid interleaving of independent invocations."""
        wx, wy, _ = self.p.workgroup_size
        bx = wx // k
        v = self.plan_vectors(k)
        defs = []
        for j in range(k):
            if v:  # lanes of a vector are consecutive invocations; vectors `bx * v` apart
                g, lane = divmod(j, v)
                lid = f"{g * bx * v}u + {self.tx} * {v}u + {lane}u"
            else:  # consecutive threads run consecutive invocations (coalesced scalars)
                lid = f"{self.tx} + {j * bx}u"
            defs += [
                f"  const unsigned vy_lid0_{j} = {lid};",
                f"  const unsigned vy_gid0_{j} = vy_wid0 * {wx}u + vy_lid0_{j};",
                f"  const unsigned vy_lidx_{j} = vy_lid0_{j} + vy_lid1 * {wx}u"
                f" + vy_lid2 * {wx * wy}u;",
            ]
        head.append(f"  // lockstep: {k} invocations per thread, statement by statement")
        if v:
            head.append(f"  // vectorised: loads / stores at the x invocation id + an invariant"
                        f" move {v} elements at once when aligned and in bounds")
        self.ls_block(self.p.body, 1, [None] * k)
        return "\n".join([*head, *defs, *self.lines, "}", ""])

    # ------------------------------------------------------------ vectorisation
    def stride(self, e: N.ExprNode) -> int | None:
        """How `e` changes from one lane to the next of a vector: 0 (the same in every lane),
        1 (a 32-bit integer one larger, wrapping) or None (anything else)."""
        if isinstance(e, N.Builtin):
            moves = e.name == "local_index" or (
                e.axis == 0 and e.name in ("global_id", "local_id"))
            return 1 if moves else 0
        if isinstance(e, (N.Const, N.Param, N.Length)):
            return 0
        if isinstance(e, N.Var):
            return self.var_stride.get(e.name)
        if isinstance(e, N.Load):
            return 0 if self.stride(e.index) == 0 else None
        kids: tuple[N.ExprNode, ...]
        if isinstance(e, N.Binary) and e.op in ("add", "sub") and e.ty in INT32:
            sa, sb = self.stride(e.a), self.stride(e.b)
            if sa is None or sb is None:
                return None
            if e.op == "add" and sa + sb <= 1:
                return sa + sb
            return sa if e.op == "sub" and sb == 0 else None
        if isinstance(e, N.Cast) and e.ty in INT32 and e.a.ty in INT32:
            return self.stride(e.a)  # same width: the bits are unchanged
        from vyre.ir.analysis import child_exprs

        kids = child_exprs(e)
        return 0 if all(self.stride(c) == 0 for c in kids) else None

    def vec_load(self, e: N.ExprNode) -> bool:
        """Whether `e` is a guarded load (vyre.lower) of consecutive buffer elements."""
        ld = guarded_load(e)
        return (ld is not None and ld.buffer in self.buf_ty and ld.ty in VEC_TYPES
                and self.stride(ld.index) == 1)

    def plan_vectors(self, k: int) -> int:
        """Lanes per vector for this lockstep body (0: no vectorised access, keep the
        strided mapping). Top-level lets assigned once get a known stride first."""
        if not self.options.vectorise or k % 2:
            return 0
        from vyre.ir.analysis import stmt_exprs, walk_expr, walk_stmts

        body = self.p.body
        lets: dict[str, int] = {}
        assigned: set[str] = set()
        for st in walk_stmts(body):
            if isinstance(st, N.Let):
                lets[st.name] = lets.get(st.name, 0) + 1
            elif isinstance(st, N.Assign):
                assigned.add(st.name)
            elif isinstance(st, N.Atomic) and st.result is not None:
                assigned.add(st.result)
        for st in body:  # only top level: there every lane runs the let (no mask)
            if isinstance(st, N.Let) and lets[st.name] == 1 and st.name not in assigned:
                sv = self.stride(st.value)
                if sv is not None:
                    self.var_stride[st.name] = sv
        found = False
        for st in walk_stmts(body):
            if isinstance(st, N.Atomic):
                continue
            if isinstance(st, N.Store) and st.buffer in self.buf_ty and \
                    self.buf_ty[st.buffer] in VEC_TYPES and self.stride(st.index) == 1:
                found = True
            for ex in stmt_exprs(st):
                if any(self.vec_load(x) for x in walk_expr(ex)):
                    found = True
        if not found:
            self.var_stride.clear()
            return 0
        self.vec = 4 if k % 4 == 0 else 2
        return self.vec

    def hoist_loads(self, exprs: tuple[N.ExprNode, ...], d: int) -> None:
        """Load every vectorisable load of a statement for all lanes before the statement.

        Guarded loads have no side effects, so loading them all first (also for lanes whose
        mask is off) is one valid order. A vector is used when its first lane's index is
        aligned and all lanes are in bounds (then, with stride 1 and no wrap, lane l reads
        index + l); otherwise every lane does its own guarded scalar load of its own index.
        """
        from vyre.ir.analysis import walk_expr

        k, v = self.coarsen, self.vec
        for ex in exprs:
            for e in walk_expr(ex):
                ld = guarded_load(e)
                if ld is None or not self.vec_load(e) or e in self.hoisted:
                    continue
                ptr, n = self.mem(ld.buffer)
                c = CTYPE[ld.ty]
                names = [self.fresh("vy_lv") for _ in range(k)]
                self.emit(d, f"{c} {', '.join(names)};")
                for g in range(0, k, v):
                    self.per(g)
                    ix = self.fresh("vy_ix")
                    pack = f"vy_pack<{c}, {v}>"
                    self.emit(d, f"{{ const unsigned {ix} = {self.expr(ld.index)};")
                    self.emit(d + 1, f"if (vy_vok<{c}, {v}>({ptr}, {ix}, {n})) {{")
                    self.emit(d + 2, f"const {pack} vy_pk = *reinterpret_cast<const {pack}*>"
                                     f"({ptr} + {ix});")
                    self.emit(d + 2, " ".join(f"{names[g + ln]} = vy_pk.v[{ln}];"
                                              for ln in range(v)))
                    self.emit(d + 1, "} else {")
                    for ln in range(v):
                        self.per(g + ln)
                        self.emit(d + 2, f"{names[g + ln]} = {self.expr(e)};")
                    self.emit(d + 1, "} }")
                self.hoisted[e] = names
        self.sfx, self.cur_j = "", None

    def per(self, j: int) -> None:
        self.sfx = f"_{j}"
        self.cur_j = j

    def ls_block(self, body: tuple[N.StmtNode, ...], d: int, masks: list[str | None]) -> None:
        for s in body:
            self.ls_stmt(s, d, masks)
        self.sfx = ""
        self.cur_j = None

    def ls_stmt(self, s: N.StmtNode, d: int, masks: list[str | None]) -> None:
        k = len(masks)
        saved = dict(self.hoisted)
        if self.vec and not isinstance(s, N.Atomic):
            from vyre.ir.analysis import stmt_exprs

            self.hoist_loads(stmt_exprs(s), d)
        try:
            self.ls_stmt_body(s, d, masks, k)
        finally:
            self.hoisted = saved  # a hoisted value is only valid within its statement

    def ls_stmt_body(self, s: N.StmtNode, d: int, masks: list[str | None], k: int) -> None:
        if isinstance(s, (N.Let, N.Assign)):
            for j, m in enumerate(masks):
                self.per(j)
                name, val = self.name_of(s.name), self.expr(s.value)
                decl = f"{CTYPE[s.value.ty]} " if isinstance(s, N.Let) else ""
                spec = self.speculated(m, s.value)
                if m is None or (decl and spec):
                    self.emit(d, f"{decl}{name} = {val};")
                elif spec:
                    self.emit(d, f"{name} = {m} ? {val} : {name};")
                else:
                    if decl:
                        self.emit(d, f"{decl}{name}{{}};")
                    self.emit(d, f"if ({m}) {name} = {val};")
        elif isinstance(s, N.Store):
            self.ls_store(s, d, masks, k, None)
        elif isinstance(s, N.If) and (raw := guarded_store(s)) is not None:
            if self.vec:  # vyre.lower's `if (i < len(b)) { raw b[i] = v }` as one store
                from vyre.ir.analysis import stmt_exprs

                self.hoist_loads(stmt_exprs(raw), d)
            self.ls_store(raw, d, masks, k, s.cond)
        elif isinstance(s, N.If):
            conds = []
            for j in range(k):
                self.per(j)
                c = self.fresh("vy_c")
                self.emit(d, f"const bool {c} = {self.expr(s.cond)};")
                conds.append(c)
            then = [c if m is None else f"({m} && {c})" for m, c in zip(masks, conds)]
            other = [f"!{c}" if m is None else f"({m} && !{c})" for m, c in zip(masks, conds)]
            mt = [self.fresh("vy_m") for _ in range(k)]
            for name, expr_ in zip(mt, then):
                self.emit(d, f"const bool {name} = {expr_};")
            if _bounds_test(s.cond):
                self.bounds_masks.update(
                    t for t, m in zip(mt, masks) if m is None or m in self.bounds_masks)
            self.emit(d, "{")
            self.ls_block(s.then, d + 1, list(mt))
            self.emit(d, "}")
            if s.orelse:
                mo = [self.fresh("vy_m") for _ in range(k)]
                for name, expr_ in zip(mo, other):
                    self.emit(d, f"const bool {name} = {expr_};")
                self.emit(d, "{")
                self.ls_block(s.orelse, d + 1, list(mo))
                self.emit(d, "}")
        elif isinstance(s, N.Atomic):
            for j, m in enumerate(masks):
                self.per(j)
                if s.result is not None:
                    ty = self.buf_ty.get(s.buffer) or self.arr[s.buffer].ty
                    self.emit(d, f"{CTYPE[ty]} {self.name_of(s.result)}{{}};")
                    s_ = s.model_copy(update={"result": None})
                    target = self.name_of(s.result)
                else:
                    s_, target = s, None
                self.emit(d, f"if ({m or 'true'}) {{")
                self.atomic(s_, d + 1, target)
                self.emit(d, "}")
        else:
            raise InvalidProgram(f"{type(s).__name__} cannot run in lockstep")

    def ls_store(self, s: N.Store, d: int, masks: list[str | None], k: int,
                 guard: N.ExprNode | None) -> None:
        """A store for all lanes: every value first, then one vector store where all lanes
        are on and the vector is aligned and in bounds, else each lane's own store (only
        where `guard`, vyre.lower's index test of a raw store, holds)."""
        ptr, n = self.mem(s.buffer)
        ty = self.buf_ty.get(s.buffer) or self.arr[s.buffer].ty
        slots = []
        ok: dict[str, str] = {}  # per lane (by its index slot): its guard, masked (pure)
        for j, m in enumerate(masks):
            self.per(j)
            si, sv = self.fresh("vy_si"), self.fresh("vy_sv")
            idx, val = self.expr(s.index), self.expr(s.value)
            if m is None:
                self.emit(d, f"const unsigned {si} = {idx}; const {CTYPE[ty]} {sv} = {val};")
            elif self.speculated(m, s.index, s.value):
                self.emit(d, f"const unsigned {si} = {m} ? {idx} : 0u; "
                             f"const {CTYPE[ty]} {sv} = {val};")
            else:
                self.emit(d, f"unsigned {si} = 0u; {CTYPE[ty]} {sv}{{}};")
                self.emit(d, f"if ({m}) {{ {si} = {idx}; {sv} = {val}; }}")
            if guard is not None:
                test = self.expr(guard)
                ok[si] = test if m is None else f"{m} && {test}"
            slots.append((m, si, sv))
        self.sfx, self.cur_j = "", None
        v = self.vec
        if not (v and ty in VEC_TYPES and s.buffer in self.buf_ty
                and self.stride(s.index) == 1):
            v = 0
        for g in range(0, k, v or k):
            group = slots[g:g + v] if v else slots
            if v:  # all lanes on and the vector aligned and in bounds: one store
                c, pack = CTYPE[ty], f"vy_pack<{CTYPE[ty]}, {v}>"
                on = [m for m, _, _ in group if m is not None]
                cond = " && ".join([*on, f"vy_vok<{c}, {v}>({ptr}, {group[0][1]}, {n})"])
                self.emit(d, f"if ({cond}) {{")
                self.emit(d + 1, f"{pack} vy_pk; " + " ".join(
                    f"vy_pk.v[{ln}] = {sv};" for ln, (_, _, sv) in enumerate(group)))
                self.emit(d + 1, f"*reinterpret_cast<{pack}*>({ptr} + {group[0][1]}) = vy_pk;")
                self.emit(d, "} else {")
            for m, si, sv in group:  # all values first, then the stores
                on_j = ok[si] if guard is not None else m
                self.emit(d + (1 if v else 0),
                          f"{f'if ({on_j}) ' if on_j is not None else ''}{self.raw(s, si)} = {sv};")
            if v:
                self.emit(d, "}")



_ORDER = frozenset({"lt", "le", "gt", "ge"})


def _bounds_test(e: N.ExprNode) -> bool:
    """Whether `e` is a bounds test: an order comparison with a buffer's length (or a
    logical and of tests one of which is)."""
    if isinstance(e, N.Binary):
        if e.op in _ORDER:
            return isinstance(e.a, N.Length) or isinstance(e.b, N.Length)
        if e.op == "logical_and":
            return _bounds_test(e.a) or _bounds_test(e.b)
    return False


def _total(e: N.ExprNode) -> bool:
    """Whether `e` may be evaluated where its statement's mask is off: no unchecked read
    (a RawLoad outside the operand a Guarded protects), no Native (whose domain a
    surrounding test may be what guarantees), no subgroup operation; a core function's
    body is total by construction, so an Invoke only needs total arguments."""
    if isinstance(e, N.Guarded):
        return _total(e.cond) and _total(e.b)  # (its `a` runs only where cond holds)
    if isinstance(e, (N.RawLoad, N.Native, N.Subgroup)):
        return False
    return all(map(_total, children(e)))
