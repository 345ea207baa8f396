"""Runs a Program's statements over a chunk of whole workgroups, as vectors with lane masks.

All invocations of the chunk (workgroup-major, then local_index) advance statement by
statement in lockstep, each statement applied only to the lanes of its mask. Divergent
control flow narrows the mask: `if` splits it, loops keep the lanes still iterating, and
`return` / `break` / `continue` take lanes out until the end of the invocation / loop /
iteration. Because every lane finishes a statement before any lane starts the next, a
Barrier (which the validator only allows in uniform control flow) is satisfied by
construction. Workgroup arrays are (workgroup-in-chunk, element) stored flat.

This module must never allocate or own device buffers, decide the grid or chunking, or
implement operator semantics itself (those are in `numeric` and `atomics`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from vyre.errors import DispatchError
from vyre.ir import nodes as N
from vyre.ir.types import ScalarType

from . import numeric, subgroup
from .atomics import atomic_rmw

Array = np.ndarray
U32 = np.dtype(np.uint32)


@dataclass
class _Loop:
    broken: Array
    continued: Array
    saved_stopped: Array
    iterations: int = 0


@dataclass
class Chunk:
    """Where a chunk sits in the grid: workgroups [first, first + count) in linear order."""

    grid: tuple[int, int, int]
    first: int
    count: int


@dataclass
class Memory:
    """The storage the program sees: typed views of bound buffers and their counts."""

    views: dict[str, Array]
    counts: dict[str, int]
    params: dict[str, Array] = field(default_factory=dict)


class Invocations:
    """The lanes of one chunk and their state (locals, masks, workgroup arrays)."""

    def __init__(
        self,
        program: N.Program,
        memory: Memory,
        chunk: Chunk,
        max_iterations: int | None = None,
        subgroup_size: int = 32,
    ) -> None:
        self.program = program
        self.subgroup_size = subgroup_size
        self.max_iterations = max_iterations
        self.mem = memory
        self.chunk = chunk
        self.wg_size = program.workgroup_size
        self.w = program.invocations_per_workgroup
        self.n = chunk.count * self.w
        self.locals: dict[str, Array] = {}
        self._builtins: dict[tuple[str, int], Array] = {}
        self._wg_local: Array | None = None
        self._wg_base: dict[int, Array] = {}
        self.shared: dict[str, tuple[Array, int, ScalarType]] = {
            a.name: (np.zeros(chunk.count * a.count, dtype=a.ty.numpy), a.count, a.ty)
            for a in program.workgroup_arrays
        }
        self.returned = np.zeros(self.n, dtype=bool)
        self.stopped = np.zeros(self.n, dtype=bool)
        self.any_stopped = False
        self.loops: list[_Loop] = []
        # the lanes evaluating the current statement's expressions (a Guarded operand
        # narrows it): where the lowered core's raw accesses must be in range (`in_range`)
        self.active = np.ones(self.n, dtype=bool)

    # ------------------------------------------------------------ entry
    def run(self) -> None:
        with numeric.quiet():
            self.block(self.program.body, np.ones(self.n, dtype=bool))

    # ------------------------------------------------------------ helpers
    def lanes(self, x: Array) -> Array:
        """`x` broadcast to one entry per lane (read-only view when it was a scalar)."""
        x = np.asarray(x)
        return x if x.shape == (self.n,) else np.broadcast_to(x, (self.n,))

    def wg_local(self) -> Array:
        """Index of each lane's workgroup within the chunk (int64)."""
        if self._wg_local is None:
            self._wg_local = np.repeat(np.arange(self.chunk.count, dtype=np.int64), self.w)
        return self._wg_local

    def wg_base(self, count: int) -> Array:
        """Offset of each lane's workgroup in a flat workgroup array of `count` elements."""
        got = self._wg_base.get(count)
        if got is None:
            got = self._wg_base[count] = self.wg_local() * count
        return got

    def _per_workgroup(self, axis: int) -> Array:
        """workgroup_id[axis] of each workgroup of the chunk (u32, one per workgroup)."""
        gx, gy, _gz = self.chunk.grid
        lin = np.arange(self.chunk.first, self.chunk.first + self.chunk.count, dtype=np.int64)
        comp = (lin % gx, (lin // gx) % gy, lin // (gx * gy))[axis]
        return comp.astype(U32)

    def _per_local(self, axis: int) -> Array:
        """local_id[axis] (axis 0..2) or local_index (axis 3) of one workgroup's lanes."""
        li = np.arange(self.w, dtype=U32)
        wx, wy, _ = self.wg_size
        return (li % U32.type(wx), (li // U32.type(wx)) % U32.type(wy),
                li // U32.type(wx * wy), li)[axis]

    def builtin(self, name: str, axis: int) -> Array:
        key = (name, axis)
        got = self._builtins.get(key)
        if got is not None:
            return got
        g = self.chunk.count
        if name == "num_workgroups":
            val: Array = np.asarray(self.chunk.grid[axis], dtype=U32)
        elif name == "local_index":
            val = np.tile(self._per_local(3), g)
        elif name == "local_id":
            val = np.tile(self._per_local(axis), g)
        elif name == "workgroup_id":
            val = np.repeat(self._per_workgroup(axis), self.w)
        elif name == "subgroup_size":
            val = np.asarray(self.subgroup_size, dtype=U32)
        elif name == "subgroup_lane":
            val = np.tile(self._per_local(3) % U32.type(self.subgroup_size), g)
        elif name == "global_id":
            base = self._per_workgroup(axis) * U32.type(self.wg_size[axis])  # wraps like u32
            val = (base[:, None] + self._per_local(axis)[None, :]).reshape(-1)
        else:
            raise NotImplementedError(f"builtin {name!r}")
        self._builtins[key] = val
        return val

    def _where(self, name: str, index: Array) -> tuple[Array, Array, Array, int, ScalarType]:
        """(flat target, flat in-range index per lane, in-range mask, count, element type).

        Out-of-range lanes get a valid placeholder index; callers must respect the mask.
        """
        sh = self.shared.get(name)
        idx = self.lanes(index)
        if sh is not None:
            arr, count, ty = sh
            ok = idx < count
            flat = self.wg_base(count) + np.minimum(idx, U32.type(count - 1))
            return arr, flat, ok, count, ty
        view = self.mem.views[name]
        count = self.mem.counts[name]
        return view, idx, idx < count, count, ScalarType.from_numpy(view.dtype)

    # ------------------------------------------------------------ expressions
    def eval(self, e: N.ExprNode) -> Array:
        if isinstance(e, N.Const):
            return np.asarray(e.value, dtype=e.ty.numpy)
        if isinstance(e, N.Var):
            return self.locals[e.name]
        if isinstance(e, N.Param):
            return self.mem.params[e.name]
        if isinstance(e, N.Binary):
            return numeric.binary(e.op, self.eval(e.a), self.eval(e.b), e.ty, e.a.ty)
        if isinstance(e, N.Builtin):
            return self.builtin(e.name, e.axis)
        if isinstance(e, N.Load):
            return self.load(e.buffer, self.eval(e.index), e.ty, isinstance(e, N.RawLoad))
        if isinstance(e, N.Length):
            sh = self.shared.get(e.buffer)
            return np.asarray(sh[1] if sh is not None else self.mem.counts[e.buffer], dtype=U32)
        if isinstance(e, N.Unary):
            return numeric.unary(e.op, self.eval(e.a), e.ty)
        if isinstance(e, N.Call):
            return numeric.call(e.fn, [self.eval(a) for a in e.args], e.ty)
        if isinstance(e, N.Guarded):  # the lowered core: `a` only where cond holds
            cond, outer = self.lanes(self.eval(e.cond)), self.active
            self.active = outer & cond
            try:
                a = self.eval(e.a)
            finally:
                self.active = outer
            return numeric.select(cond, a, self.eval(e.b), e.ty)
        if isinstance(e, N.Select):
            return numeric.select(self.eval(e.cond), self.eval(e.a), self.eval(e.b), e.ty)
        if isinstance(e, N.Cast):
            return numeric.cast(self.eval(e.a), e.a.ty, e.ty)
        if isinstance(e, N.Bitcast):
            return numeric.bitcast(self.eval(e.a), e.ty)
        if isinstance(e, N.Native):
            # (asserted on the lanes that run it: a definition's slow path, under an `if`,
            # sees its locals' zeros on the others)
            return numeric.native(e.op, [self.eval(a) for a in e.args], e.ty, e.args[0].ty,
                                  self.active)
        if isinstance(e, N.Table):
            return numeric.table(e.values, self.eval(e.index), e.ty)
        if isinstance(e, N.Invoke):
            return self.invoke(e)
        if isinstance(e, N.Subgroup):
            return self.subgroup(e)
        raise NotImplementedError(f"expression {type(e).__name__}")

    def invoke(self, e: N.Invoke) -> Array:
        """A Function of the lowered core, in place: its parameters bound to the arguments
        in a scope of their own, its body run on the lanes evaluating the call."""
        mask, outer = self.active, self.locals
        args = [self.lanes(self.eval(a)) for a in e.args]
        self.locals = {name: a for (name, _), a in zip(e.fn.params, args, strict=True)}
        try:
            self.block(e.fn.body, mask)
            self.active = mask
            return self.eval(e.fn.result)
        finally:
            self.locals, self.active = outer, mask

    def in_range(self, ok: Array, mask: Array, what: str, name: str) -> None:
        """A raw access of the lowered core (vyre.lower) must be in range on every lane of
        `mask`: this is how the reference checks the lowering's index tests."""
        if np.any(mask & ~np.asarray(ok)):
            raise AssertionError(f"lowering left a raw {what} of {name!r} out of range")

    def subgroup(self, e: N.Subgroup) -> Array:
        """A subgroup operation over every lane (whole workgroups are active: validator)."""
        x = np.ascontiguousarray(self.lanes(np.asarray(self.eval(e.value), dtype=e.ty.numpy)))
        size = self.subgroup_size
        if e.op in ("shuffle", "broadcast"):
            assert e.lane is not None
            return subgroup.shuffle(x, self.eval(e.lane), size)
        assert e.combine is not None
        fn = {"reduce": subgroup.reduce, "inclusive_scan": subgroup.inclusive_scan,
              "exclusive_scan": subgroup.exclusive_scan}[e.op]
        return fn(e.combine, x, size, e.ty)

    def load(self, name: str, index: Array, ty: ScalarType, raw: bool = False) -> Array:
        dt = ty.numpy
        sh = self.shared.get(name)
        if sh is None and np.ndim(index) == 0:  # one address for every lane
            view, count = self.mem.views[name], self.mem.counts[name]
            i = int(index)
            if raw:
                self.in_range(np.asarray(i < count), self.active, "load", name)
            return np.asarray(view[i] if i < count else 0, dtype=dt)
        arr, idx, ok, count, _ = self._where(name, index)
        if raw:
            self.in_range(ok, self.active, "load", name)
        if count == 0:
            return np.zeros(self.n, dtype=dt)
        if ok.all():
            return np.asarray(arr[idx], dtype=dt)
        vals = arr[np.where(ok, idx, 0)]
        return np.where(ok, vals, dt.type(0)).astype(dt, copy=False)

    # ------------------------------------------------------------ statements
    def block(self, stmts: tuple[N.StmtNode, ...] | tuple[N.Stmt, ...], mask: Array) -> None:
        for s in stmts:
            if self.any_stopped:
                mask = mask & ~self.stopped
            if not mask.any():
                return
            self.stmt(s, mask)

    def set_local(self, name: str, value: Array, mask: Array, ty: ScalarType) -> None:
        """Give `name` the value on the lanes of `mask`; other lanes keep theirs.

        Arrays are never modified in place, so a local may share its array with another.
        """
        dt = ty.numpy
        value = np.asarray(value, dtype=dt)
        if mask.all():
            self.locals[name] = self.lanes(value)
            return
        old = self.locals.get(name)
        base = old if old is not None else dt.type(0)
        self.locals[name] = np.where(mask, value, base).astype(dt, copy=False)

    def stmt(self, s: N.StmtNode, mask: Array) -> None:
        self.active = mask  # (a while sets it again before its condition)
        if isinstance(s, (N.Let, N.Assign)):
            self.set_local(s.name, self.eval(s.value), mask, s.value.ty)
        elif isinstance(s, N.Store):
            self.store(s, mask)
        elif isinstance(s, N.If):
            c = self.lanes(self.eval(s.cond))
            if s.then:
                self.block(s.then, mask & c)
            if s.orelse:
                self.block(s.orelse, mask & ~c)
        elif isinstance(s, N.For):
            self.for_loop(s, mask)
        elif isinstance(s, N.While):
            self.while_loop(s, mask)
        elif isinstance(s, N.Return):
            self.returned |= mask
            self._stop(mask)
        elif isinstance(s, N.Break):
            self.loops[-1].broken |= mask
            self._stop(mask)
        elif isinstance(s, N.Continue):
            self.loops[-1].continued |= mask
            self._stop(mask)
        elif isinstance(s, N.Barrier):
            pass  # lockstep execution: every lane has finished the statements before it
        elif isinstance(s, N.Atomic):
            self.atomic(s, mask)
        else:
            raise NotImplementedError(f"statement {type(s).__name__}")

    def _stop(self, mask: Array) -> None:
        self.stopped = self.stopped | mask
        self.any_stopped = True

    def store(self, s: N.Store, mask: Array) -> None:
        idx = self.eval(s.index)
        arr, flat, ok, _count, ty = self._where(s.buffer, idx)
        val = self.lanes(np.asarray(self.eval(s.value), dtype=ty.numpy))
        if isinstance(s, N.RawStore):
            self.in_range(ok, mask, "store", s.buffer)
        sel = mask & ok
        if sel.all():
            arr[flat] = val
        elif sel.any():
            arr[flat[sel]] = val[sel]

    def atomic(self, s: N.Atomic, mask: Array) -> None:
        idx = self.eval(s.index)
        arr, flat, ok, _count, ty = self._where(s.buffer, idx)
        if isinstance(s, N.RawAtomic):
            self.in_range(ok, mask, "atomic", s.buffer)
        sel = np.flatnonzero(mask & ok)
        val = self.lanes(np.asarray(self.eval(s.value), dtype=ty.numpy))[sel]
        cmp = None
        if s.comparand is not None:
            cmp = self.lanes(np.asarray(self.eval(s.comparand), dtype=ty.numpy))[sel]
        old_sel = atomic_rmw(s.op, arr, np.asarray(flat[sel], dtype=np.int64), val, cmp, ty)
        if s.result is not None:
            old = np.zeros(self.n, dtype=ty.numpy)
            old[sel] = old_sel
            self.set_local(s.result, old, mask, ty)

    # ------------------------------------------------------------ loops
    def _enter_loop(self) -> _Loop:
        frame = _Loop(
            broken=np.zeros(self.n, dtype=bool),
            continued=np.zeros(self.n, dtype=bool),
            saved_stopped=self.stopped,
        )
        self.loops.append(frame)
        self.stopped = self.returned.copy()
        return frame

    def _end_iteration(self, frame: _Loop) -> None:
        frame.iterations += 1
        if self.max_iterations is not None and frame.iterations > self.max_iterations:
            raise DispatchError(
                f"program {self.program.name!r}: a loop ran more than {self.max_iterations} "
                "iterations (DispatchOptions.max_loop_iterations); it probably "
                "never terminates"
            )
        frame.continued[:] = False
        self.stopped = self.returned | frame.broken

    def _exit_loop(self, frame: _Loop) -> None:
        self.loops.pop()
        self.stopped = frame.saved_stopped | self.returned

    def for_loop(self, s: N.For, mask: Array) -> None:
        dt = s.ty.numpy
        cur = self.lanes(self.eval(s.start)).astype(np.int64)
        end = self.lanes(self.eval(s.end)).astype(np.int64)
        step = min(s.step, 1 << 34)  # any larger step ends a 32-bit loop after one value
        active = mask & (cur < end)
        frame = self._enter_loop()
        try:
            while active.any():
                self.locals[s.var] = cur.astype(dt, copy=False)
                self.block(s.body, active)
                self._end_iteration(frame)
                nxt = cur + step  # int64: never overflows for 32-bit loop variables
                active = active & ~frame.broken & ~self.returned & (nxt < end)
                cur = np.where(active, nxt, cur)
        finally:
            self._exit_loop(frame)

    def while_loop(self, s: N.While, mask: Array) -> None:
        active = mask.copy()
        frame = self._enter_loop()
        try:
            while True:
                self.active = active
                c = self.lanes(self.eval(s.cond))
                active = active & c & ~frame.broken & ~self.returned
                if not active.any():
                    break
                self.block(s.body, active)
                self._end_iteration(frame)
        finally:
            self._exit_loop(frame)
