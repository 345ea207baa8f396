"""A readable pseudo-code listing of a Program: what `ReferenceBackend.source` returns.

For inspection and error messages only; this module must never be parsed back or executed.
"""

from __future__ import annotations

from vyre.ir import nodes as N

_SYM = {
    "add": "+", "sub": "-", "mul": "*", "div": "/", "rem": "%", "and": "&", "or": "|",
    "xor": "^", "shl": "<<", "shr": ">>", "eq": "==", "ne": "!=", "lt": "<", "le": "<=",
    "gt": ">", "ge": ">=", "logical_and": "&&", "logical_or": "||",
}
_UNARY = {"neg": "-", "bit_not": "~", "not": "!"}


def expr(e: N.ExprNode) -> str:
    if isinstance(e, N.Const):
        return f"{e.value!r}:{e.ty}"
    if isinstance(e, (N.Var, N.Param)):
        return e.name
    if isinstance(e, N.Builtin):
        return e.name if e.name == "local_index" else f"{e.name}.{'xyz'[e.axis]}"
    if isinstance(e, N.Load):
        return f"{e.buffer}[{expr(e.index)}]"
    if isinstance(e, N.Length):
        return f"len({e.buffer})"
    if isinstance(e, N.Unary):
        return f"{_UNARY[e.op]}({expr(e.a)})"
    if isinstance(e, N.Binary):
        if e.op in ("min", "max"):
            return f"{e.op}({expr(e.a)}, {expr(e.b)})"
        return f"({expr(e.a)} {_SYM[e.op]} {expr(e.b)})"
    if isinstance(e, N.Call):
        return f"{e.fn}({', '.join(expr(a) for a in e.args)})"
    if isinstance(e, N.Select):
        return f"select({expr(e.cond)}, {expr(e.a)}, {expr(e.b)})"
    if isinstance(e, N.Cast):
        return f"{e.ty}({expr(e.a)})"
    if isinstance(e, N.Bitcast):
        return f"bitcast<{e.ty}>({expr(e.a)})"
    return repr(e)


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
            out.append(f"{pad}{s.buffer}[{expr(s.index)}] = {expr(s.value)}")
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
            call = f"atomic_{s.op}({', '.join(args)})"
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
