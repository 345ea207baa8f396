"""A readable pseudo-code listing of a Program: what `ReferenceBackend.source` returns.

The third filling of vyre.backends.printer's skeleton (beside the CUDA and WGSL printers):
a Python-like spelling of each node kind, the walk the skeleton's. For inspection and
error messages only; this module must never be parsed back or executed.
"""

from __future__ import annotations

from vyre.ir import nodes as N
from vyre.ir.types import ScalarType

from ..printer import Printer

_SYM = {
    "add": "+", "sub": "-", "mul": "*", "div": "/", "rem": "%", "and": "&", "or": "|",
    "xor": "^", "shl": "<<", "shr": ">>", "eq": "==", "ne": "!=", "lt": "<", "le": "<=",
    "gt": ">", "ge": ">=", "logical_and": "&&", "logical_or": "||",
}
_UNARY = {"neg": "-", "bit_not": "~", "not": "!"}


class _Listing(Printer):
    """The listing's spellings; the walk is the skeleton's."""

    EMPTY_BLOCK = "pass"
    END_STATEMENT = ""
    ELSE = "else:"
    END_IF = None
    NAME = "the reference listing"

    def if_text(self, cond: str) -> str:
        return f"if {cond}:"

    def let_text(self, name: str, ty: ScalarType, value: str) -> str:
        return f"let {name}: {ty} = {value}"

    def bind(self, name: str, value: N.ExprNode) -> str:
        return name

    def rebind(self, name: str, value: N.ExprNode) -> str:
        return name

    def store_text(self, s: N.Store, index: str, value: str) -> str:
        raw = "raw " if isinstance(s, N.RawStore) else ""
        return f"{raw}{s.buffer}[{index}] = {value}"

    # ------------------------------------------------------------ leaves
    def const(self, e: N.Const, opaque: bool) -> str:
        return f"{e.value!r}:{e.ty}"

    def name(self, e: N.Var | N.Param, opaque: bool) -> str:
        return e.name

    def builtin(self, e: N.Builtin, opaque: bool) -> str:
        flat = ("local_index", "subgroup_size", "subgroup_lane")
        return e.name if e.name in flat else f"{e.name}.{'xyz'[e.axis]}"

    def length(self, e: N.Length, opaque: bool) -> str:
        return f"len({e.buffer})"

    # ------------------------------------------------------------ expressions
    def load(self, e: N.Load) -> str:  # (raw: the lowered core's unchecked access, vyre.lower)
        return f"{'raw ' if isinstance(e, N.RawLoad) else ''}{e.buffer}[{self.operands(e)[0]}]"

    def unary(self, e: N.Unary) -> str:
        return f"{_UNARY[e.op]}({self.operands(e)[0]})"

    def binary(self, e: N.Binary) -> str:
        a, b = self.operands(e)
        if e.op in ("min", "max"):
            return f"{e.op}({a}, {b})"
        return f"({a} {_SYM[e.op]} {b})"

    def call(self, e: N.Call) -> str:
        return f"{e.fn}({', '.join(self.operands(e))})"

    def select(self, e: N.Select) -> str:
        k = self.operands(e)
        return f"{'guarded' if isinstance(e, N.Guarded) else 'select'}({k[0]}, {k[1]}, {k[2]})"

    def cast(self, e: N.Cast) -> str:
        return f"{e.ty}({self.operands(e)[0]})"

    def bitcast(self, e: N.Bitcast) -> str:
        return f"bitcast<{e.ty}>({self.operands(e)[0]})"

    def native(self, e: N.Native) -> str:  # the lowered core (vyre.lower)
        return f"native_{e.op}<{e.ty}>({', '.join(self.operands(e))})"

    def table(self, e: N.Table) -> str:
        return f"table<{e.ty}>[{len(e.values)}]({self.operands(e)[0]})"

    def invoke(self, e: N.Invoke) -> str:
        return f"{e.fn.name}({', '.join(self.operands(e))})"

    def subgroup(self, e: N.Subgroup) -> str:
        combine = f"<{e.combine}>" if e.combine else ""
        return f"subgroup_{e.op}{combine}({', '.join(self.operands(e))})"

    def other(self, e: N.Node) -> str:
        return repr(e)

    # ------------------------------------------------------------ statements
    def for_(self, s: N.For, d: int) -> None:
        start, end = self.expr(s.start), self.expr(s.end)
        self.emit(d, f"for {s.var}: {s.ty} in range({start}, {end}, {s.step}):")
        self.block(s.body, d + 1)

    def while_(self, s: N.While, d: int) -> None:
        self.emit(d, f"while {self.expr(s.cond)}:")
        self.block(s.body, d + 1)

    def atomic(self, s: N.Atomic, d: int) -> None:
        args = [f"{s.buffer}[{self.expr(s.index)}]"]
        if s.comparand is not None:
            args.append(f"compare={self.expr(s.comparand)}")
        args.append(self.expr(s.value))
        raw = "raw_" if isinstance(s, N.RawAtomic) else ""
        call = f"{raw}atomic_{s.op}({', '.join(args)})"
        self.emit(d, f"let {s.result} = {call}" if s.result else call)

    def kind(self, s: N.StmtNode, d: int) -> None:  # break, continue, return, barrier, ...
        self.emit(d, s.kind)

    LEAVES = {N.Const: const, N.Var: name, N.Param: name, N.Builtin: builtin,
              N.Length: length}
    EXPRESSIONS = {
        N.Load: load, N.Unary: unary, N.Binary: binary, N.Call: call, N.Select: select,
        N.Cast: cast, N.Bitcast: bitcast, N.Native: native, N.Table: table, N.Invoke: invoke,
        N.Subgroup: subgroup, N.Node: other,
    }
    STATEMENTS = {N.For: for_, N.While: while_, N.Atomic: atomic, N.Node: kind}


def expr(e: N.ExprNode) -> str:
    return _Listing().expr(e)


def listing(program: N.Program) -> str:
    out = [f"# vyre program {program.name!r} (reference interpreter)"]
    out.append(f"workgroup_size {program.workgroup_size}")
    for b in program.buffers:
        count = f"; count {b.count}" if b.count is not None else ""
        out.append(f"buffer {b.name}: {b.ty} {b.access}{count}")
    for p in program.params:
        out.append(f"param {p.name}: {p.ty}")
    for a in program.workgroup_arrays:
        out.append(f"workgroup {a.name}: array<{a.ty}, {a.count}>")
    out.append("body:")
    printer = _Listing()
    if program.body:  # (an empty body lists nothing, no `pass`)
        printer.block(program.body, 1)
    return "\n".join([*out, *printer.lines]) + "\n"
