"""Which workgroup arrays the WGSL printer declares as `array<vec4<T>>`, and which runs of
statements it spells as one vec4 access of such an array.

WGSL cannot reinterpret memory, so the 16-byte "load runs" of the CUDA printer
(vyre/backends/cuda/render.py) have no direct counterpart: a `vec4` read exists only on
an array of `vec4`. NVIDIA's Vulkan compiler does not merge adjacent scalar workgroup
reads itself (the library matmul reads 16 scalars per K step where a hand-written vec4
kernel reads 4 vectors), so this module finds, in a lowered Program:

- a *run*: four consecutive statements `x_l = arr[base + c + l]` (let or assign of a raw
  load, distinct targets the base does not read) or `arr[base + c + l] = v_l` (raw
  stores whose values and base do not read `arr`), l = 0..3, for one workgroup array of a
  4-byte type (u32 / i32 / f32, not atomic, length a multiple of 4), one base (compared
  as IR, constants summed out of the add tree) and `base + c` provably a multiple of 4
  (`Alignment`: trailing zero bits, exact under u32 wrapping). The lane-0 access is in
  range (the lowering emits raw accesses only there), so the whole vec4 is, and lane l is
  element `base + c + l` exactly, as in the statements; loads have no side effects and a
  store run's values do not read the array, so doing the four at once is their result.
- the *vec4 arrays*: those with at least one run. Every other access of such an array is
  spelled per element (`arr[i >> 2u][i & 3u]`); arrays without a run keep their scalar
  declaration, so no other program's WGSL changes.

This module must never print WGSL and never change a value: it only says where the
printer may use a vector spelling of the same accesses.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from vyre.ir import nodes as N
from vyre.ir.analysis import atomic_buffers, walk_expr, walk_stmts
from vyre.ir.types import ScalarType
from vyre.ir.visit import child_blocks
from vyre.lower.ranges import Ranges

LANES = 4
_ELEMENTS = frozenset({ScalarType.U32, ScalarType.I32, ScalarType.F32})
_INTS = frozenset({ScalarType.U32, ScalarType.I32})
_WORD = 2**32
Op = Literal["load", "store"]


@dataclass(frozen=True)
class Run:
    """Statements body[at:at + LANES] of one block, accessing `array` at `base + c + l`.
    `quad`: the vec4 index of lane 0 spelled as `(base >> 2) + quad` when `split` (the
    sum base + c never wraps), else the printer uses `(index of lane 0) >> 2`."""

    op: Op
    array: str
    base: N.ExprNode
    quad: int
    split: bool


class Alignment:
    """Trailing zero bits every value of a u32 / i32 expression has (32 for 0): the
    largest k with 2^k dividing it in every invocation, modulo 2^32 (so wrapping adds and
    multiplies keep it). Locals are followed through their `let` when never assigned
    (names are unique program-wide); everything unknown has 0."""

    def __init__(self, program: N.Program) -> None:
        assigned = {s.name for s in walk_stmts(program.body) if isinstance(s, N.Assign)}
        self.env = {s.name: s.value for s in walk_stmts(program.body)
                    if isinstance(s, N.Let) and s.name not in assigned}
        self.memo: dict[str, int] = {}

    def zeros(self, e: N.ExprNode) -> int:
        if e.ty not in _INTS:
            return 0
        if isinstance(e, N.Const):
            v = int(e.value) % _WORD
            return 32 if v == 0 else (v & -v).bit_length() - 1
        if isinstance(e, N.Var):
            if e.name not in self.memo:
                self.memo[e.name] = 0  # (a cycle claims nothing)
                if e.name in self.env:
                    self.memo[e.name] = self.zeros(self.env[e.name])
            return self.memo[e.name]
        if isinstance(e, N.Select):
            return min(self.zeros(e.a), self.zeros(e.b))
        if isinstance(e, (N.Binary, N.Native)) and e.op == "shl":
            a, b = (e.a, e.b) if isinstance(e, N.Binary) else e.args
            if isinstance(b, N.Const):  # the amount is taken modulo the width (docs/IR.md)
                return min(32, self.zeros(a) + int(b.value) % 32)
            return self.zeros(a)
        if isinstance(e, N.Binary):
            za, zb = self.zeros(e.a), self.zeros(e.b)
            if e.op in ("add", "sub", "or", "xor", "min", "max"):
                return min(za, zb)
            if e.op == "mul":
                return min(32, za + zb)
            if e.op == "and":
                return max(za, zb)
        return 0


def split_const(e: N.ExprNode) -> tuple[N.ExprNode | None, int]:
    """(base, c) with e == base + c (mod 2^32): the u32 constants of e's add tree summed
    out (base None: e is a constant)."""
    if isinstance(e, N.Const) and e.ty is ScalarType.U32:
        return None, int(e.value) % _WORD
    if not (isinstance(e, N.Binary) and e.op == "add" and e.ty is ScalarType.U32):
        return e, 0
    a, ca = split_const(e.a)
    b, cb = split_const(e.b)
    if a is e.a and b is e.b:
        return e, 0
    if a is None or b is None:
        return (b if a is None else a), (ca + cb) % _WORD
    return N.Binary(op="add", a=a, b=b, ty=ScalarType.U32), (ca + cb) % _WORD


def _access(s: N.StmtNode) -> tuple[Op, str, N.ExprNode] | None:
    """(op, array, index) of a raw load bound by a let / assign, or of a raw store."""
    if isinstance(s, (N.Let, N.Assign)) and isinstance(s.value, N.RawLoad):
        return "load", s.value.buffer, s.value.index
    if isinstance(s, N.RawStore):
        return "store", s.buffer, s.index
    return None


def _reads(e: N.ExprNode, array: str) -> bool:
    return any(isinstance(x, N.Load) and x.buffer == array for x in walk_expr(e))


class VectorPlan:
    """The runs of a lowered Program, by (block, position), and the vec4 arrays."""

    def __init__(self, program: N.Program) -> None:
        self.program = program  # (keeps the blocks alive: runs are keyed by their id)
        atomic = atomic_buffers(program) if program.workgroup_arrays else frozenset()
        self.eligible = {a.name for a in program.workgroup_arrays
                         if a.ty in _ELEMENTS and a.count % LANES == 0 and a.name not in atomic}
        self.runs: dict[tuple[int, int], Run] = {}
        self._align: Alignment | None = None
        self._ranges: Ranges | None = None
        if self.eligible:
            self._scan(program.body)
        self.arrays = frozenset(r.array for r in self.runs.values())

    def run_at(self, body: tuple[N.StmtNode, ...], i: int) -> Run | None:
        return self.runs.get((id(body), i))

    def _scan(self, body: tuple[N.StmtNode, ...]) -> None:
        i = 0
        while i < len(body):
            run = self._run(body, i)
            if run is not None:
                self.runs[(id(body), i)] = run
                i += LANES
                continue
            for block in child_blocks(body[i]):
                self._scan(block)
            i += 1

    def _run(self, body: tuple[N.StmtNode, ...], i: int) -> Run | None:
        head = _access(body[i])
        if head is None or head[1] not in self.eligible or i + LANES > len(body):
            return None
        op, array, index = head
        base, c = split_const(index)
        if base is None or c % LANES:
            return None
        base_vars = {x.name for x in walk_expr(base) if isinstance(x, N.Var)}
        targets: list[str] = []
        for lane in range(LANES):
            s = body[i + lane]
            acc = _access(s)
            if acc is None or acc[:2] != (op, array):
                return None
            b, cl = split_const(acc[2])
            if cl != (c + lane) % _WORD or b != base:
                return None
            if op == "load":
                name = s.name  # type: ignore[union-attr]
                if name in base_vars or name in targets:
                    return None
                targets.append(name)
            elif _reads(s.value, array) or _reads(base, array):  # type: ignore[union-attr]
                return None
        if self._align is None:
            self._align = Alignment(self.program)
        if self._align.zeros(base) < 2:
            return None
        if self._ranges is None:
            self._ranges = Ranges(self.program)
        r = self._ranges.of(base)
        split = r is not None and r[1] + c < _WORD
        return Run(op, array, base, c // LANES, split)


def plan_vectors(program: N.Program) -> VectorPlan:
    """The vec4 spelling of `program` (lowered) for the WGSL printer."""
    return VectorPlan(program)


__all__ = ["LANES", "Alignment", "Run", "VectorPlan", "plan_vectors", "split_const"]
