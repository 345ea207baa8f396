"""A readable pseudo-code listing of a Program: what `ReferenceBackend.source` returns.

For inspection and error messages only; this module must never be parsed back or executed.
"""

from __future__ import annotations

from vyre.ir import nodes as N
from vyre.ir.visit import Fold

_SYM = {
    "add": "+", "sub": "-", "mul": "*", "div": "/", "rem": "%", "and": "&", "or": "|",
    "xor": "^", "shl": "<<", "shr": ">>", "eq": "==", "ne": "!=", "lt": "<", "le": "<=",
    "gt": ">", "ge": ">=", "logical_and": "&&", "logical_or": "||",
}
_UNARY = {"neg": "-", "bit_not": "~", "not": "!"}


def _expr(e: N.ExprNode, k: tuple[str, ...]) -> str:
    if isinstance(e, N.Const):
        return f"{e.value!r}:{e.ty}"
    if isinstance(e, (N.Var, N.Param)):
        return e.name
    if isinstance(e, N.Builtin):
        flat = ("local_index", "subgroup_size", "subgroup_lane")
        return e.name if e.name in flat else f"{e.name}.{'xyz'[e.axis]}"
    if isinstance(e, N.Load):  # (raw: the lowered core's unchecked access, vyre.lower)
        return f"{'raw ' if isinstance(e, N.RawLoad) else ''}{e.buffer}[{k[0]}]"
    if isinstance(e, N.Length):
        return f"len({e.buffer})"
    if isinstance(e, N.Unary):
        return f"{_UNARY[e.op]}({k[0]})"
    if isinstance(e, N.Binary):
        if e.op in ("min", "max"):
            return f"{e.op}({k[0]}, {k[1]})"
        return f"({k[0]} {_SYM[e.op]} {k[1]})"
    if isinstance(e, N.Call):
        return f"{e.fn}({', '.join(k)})"
    if isinstance(e, N.Select):
        return f"{'guarded' if isinstance(e, N.Guarded) else 'select'}({k[0]}, {k[1]}, {k[2]})"
    if isinstance(e, N.Cast):
        return f"{e.ty}({k[0]})"
    if isinstance(e, N.Bitcast):
        return f"bitcast<{e.ty}>({k[0]})"
    if isinstance(e, N.Native):  # the lowered core (vyre.lower)
        return f"native_{e.op}<{e.ty}>({', '.join(k)})"
    if isinstance(e, N.Table):
        return f"table<{e.ty}>[{len(e.values)}]({k[0]})"
    if isinstance(e, N.Invoke):
        return f"{e.fn.name}({', '.join(k)})"
    if isinstance(e, N.Subgroup):
        return f"subgroup_{e.op}{f'<{e.combine}>' if e.combine else ''}({', '.join(k)})"
    return repr(e)


def expr(e: N.ExprNode) -> str:
    return Fold(_expr)(e)


def _body(stmts: tuple[N.Stmt, ...], depth: int, out: list[str]) -> None:
    if stmts:
        _block(stmts, depth, out)
    else:
        out.append("    " * depth + "pass")


def _block(stmts: tuple[N.Stmt, ...], depth: int, out: list[str]) -> None:
    pad = "    " * depth
    for s in stmts:
        if isinstance(s, N.Let):
            out.append(f"{pad}let {s.name}: {s.value.ty} = {expr(s.value)}")
        elif isinstance(s, N.Assign):
            out.append(f"{pad}{s.name} = {expr(s.value)}")
        elif isinstance(s, N.Store):
            raw = "raw " if isinstance(s, N.RawStore) else ""
            out.append(f"{pad}{raw}{s.buffer}[{expr(s.index)}] = {expr(s.value)}")
        elif isinstance(s, N.If):
            out.append(f"{pad}if {expr(s.cond)}:")
            _body(s.then, depth + 1, out)
            if s.orelse:
                out.append(f"{pad}else:")
                _block(s.orelse, depth + 1, out)
        elif isinstance(s, N.For):
            out.append(
                f"{pad}for {s.var}: {s.ty} in range({expr(s.start)}, {expr(s.end)}, {s.step}):"
            )
            _body(s.body, depth + 1, out)
        elif isinstance(s, N.While):
            out.append(f"{pad}while {expr(s.cond)}:")
            _body(s.body, depth + 1, out)
        elif isinstance(s, N.Atomic):
            args = [f"{s.buffer}[{expr(s.index)}]"]
            if s.comparand is not None:
                args.append(f"compare={expr(s.comparand)}")
            args.append(expr(s.value))
            raw = "raw_" if isinstance(s, N.RawAtomic) else ""
            call = f"{raw}atomic_{s.op}({', '.join(args)})"
            out.append(f"{pad}let {s.result} = {call}" if s.result else f"{pad}{call}")
        else:
            out.append(f"{pad}{s.kind}")


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
    _block(program.body, 1, out)
    return "\n".join(out) + "\n"
