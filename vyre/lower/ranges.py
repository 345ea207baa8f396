"""Value ranges of integer index expressions, for the memory rule (vyre.lower.memory).

`Ranges(program).of(e)` gives an inclusive interval (lo, hi) that holds every value the
u32 / i32 expression `e` of `program` takes in any invocation, or None when nothing is
known. It follows docs/IR.md's operations exactly (wrapping, division by zero -> 0) and
only claims a bound that no wrap can break. Locals are bounded by their `let` when never
assigned (names are unique program-wide), loop variables by their loop's bounds, builtins
by the workgroup size, workgroup array lengths are constants; buffers and params are
unknown. The memory rule drops an index test that the range decides (an access into a
workgroup array always in range, like the tile reads of the library matmul). This module
must never rewrite anything.
"""

from __future__ import annotations

from vyre.ir import nodes as N
from vyre.ir.analysis import walk_stmts
from vyre.ir.types import ScalarType

Range = tuple[int, int]
_LIMITS = {ScalarType.U32: (0, 2**32 - 1), ScalarType.I32: (-(2**31), 2**31 - 1)}


class Ranges:
    def __init__(self, program: N.Program) -> None:
        wx, wy, wz = program.workgroup_size
        self.local = {0: wx - 1, 1: wy - 1, 2: wz - 1}
        self.invocations = wx * wy * wz
        self.arrays = {a.name: a.count for a in program.workgroup_arrays}
        assigned = {s.name for s in walk_stmts(program.body) if isinstance(s, N.Assign)}
        self.env: dict[str, Range] = {}
        # by node identity (a shared subexpression is bounded once), keeping the node alive
        self.memo: dict[int, tuple[N.ExprNode, Range | None]] = {}
        for s in walk_stmts(program.body):  # pre-order: a let's inputs are bounded before it
            if isinstance(s, N.Let) and s.name not in assigned:
                r = self.of(s.value)
                if r is not None:
                    self.env[s.name] = r
            elif isinstance(s, N.For):
                start, end = self.of(s.start), self.of(s.end)
                if start is not None and end is not None:  # start <= var < end
                    self.env[s.var] = (start[0], max(start[0], end[1] - 1))

    def of(self, e: N.ExprNode) -> Range | None:
        got = self.memo.get(id(e))
        if got is not None:
            return got[1]
        limits = _LIMITS.get(e.ty)
        r = None if limits is None else self._of(e, limits)
        if r is not None and limits is not None and not (
                limits[0] <= r[0] <= r[1] <= limits[1]):
            r = None  # (an operation that might wrap claims nothing)
        self.memo[id(e)] = (e, r)
        return r

    def _of(self, e: N.ExprNode, limits: Range) -> Range | None:
        if isinstance(e, N.Const):
            v = int(e.value)
            return (v, v)
        if isinstance(e, N.Var):
            return self.env.get(e.name)
        if isinstance(e, N.Builtin):
            if e.name == "local_id":
                return (0, self.local[e.axis])
            if e.name == "local_index":
                return (0, self.invocations - 1)
            return None
        if isinstance(e, N.Length):
            n = self.arrays.get(e.buffer)
            return None if n is None else (n, n)
        if isinstance(e, N.Cast):
            a = self.of(e.a) if e.a.ty in _LIMITS else None
            return a  # of() refuses it when it does not fit the new type
        if isinstance(e, N.Select):
            a, b = self.of(e.a), self.of(e.b)
            return None if a is None or b is None else (min(a[0], b[0]), max(a[1], b[1]))
        if isinstance(e, N.Binary):
            return self._binary(e, limits)
        if isinstance(e, N.Native) and e.op in ("div", "rem", "shr"):
            # the target's own operation, used only inside its domain: the IR's result there
            x, y = e.args
            return self._binary(N.Binary(op=e.op, a=x, b=y, ty=e.ty), limits)
        return None

    def _binary(self, e: N.Binary, limits: Range) -> Range | None:
        a, b = self.of(e.a), self.of(e.b)
        unsigned = limits[0] == 0
        if e.op == "and" and unsigned:
            his = [r[1] for r in (a, b) if r is not None]
            return (0, min(his)) if his else None
        if e.op == "rem" and unsigned and b is not None:  # x % 0 = 0
            hi = max(b[1] - 1, 0)
            return (0, hi if a is None else min(hi, a[1]))
        if e.op == "shr" and unsigned and isinstance(e.b, N.Const):
            k = int(e.b.value) % 32
            lo, hi = a if a is not None else limits
            return (lo >> k, hi >> k)
        if a is None or b is None:
            return None
        if e.op == "add":
            return (a[0] + b[0], a[1] + b[1])
        if e.op == "sub":
            return (a[0] - b[1], a[1] - b[0])
        if e.op == "mul" and a[0] >= 0 and b[0] >= 0:
            return (a[0] * b[0], a[1] * b[1])
        if e.op == "div" and unsigned:  # x / 0 = 0
            return (0 if b[0] == 0 else a[0] // b[1], a[1] // max(b[0], 1))
        if e.op == "min":
            return (min(a[0], b[0]), min(a[1], b[1]))
        if e.op == "max":
            return (max(a[0], b[0]), max(a[1], b[1]))
        return None
