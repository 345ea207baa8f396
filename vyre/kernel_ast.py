"""Compile a `@vyre.kernel` function's source so plain Python control flow works on kernel
values.

The function's source (`inspect.getsource`) is parsed, and every statement whose meaning
depends on whether a value is known at build time is rewritten into calls of a
`vyre.kernel_flow.Flow` (one per build), which decides while the kernel is built:

    if c: ...            ->  f = flow.if_(c); if f.then(): ...; f.end_then(); ...
    while c: ...         ->  f = flow.while_(lambda: c, ...); while f.test(): ...
    for j in range(n):   ->  f = flow.for_(range, (n,), {}, "j", ...); for j in f: ...
    break / continue     ->  if flow.loop_exit(f, "break"): break
    return               ->  if flow.return_(): return
    x = e, x += e        ->  x = flow.assign(locals(), "x", e)
    a and b, not a       ->  flow.and_(lambda: a, lambda: b), flow.not_(a)
    a if c else b        ->  flow.ifexp(c, lambda: a, lambda: b)
    a < b < c, v in (..) ->  flow.compare((lambda: a, ...), ("Lt", "Lt"))

Everything else is left as written; functions defined inside the kernel (and helpers it
calls) are not rewritten: they are traced when called, so a kernel value in a Python `if`
there is an error naming `vyre.select` / `with vyre.if_(...)`. The rewritten function is compiled with the kernel's
own file name and line numbers (so errors and vyre/ir/sites.py name the user's lines) and
made with the original function's globals, closure cells and defaults: it runs exactly
where the original would have. Constructs that cannot be compiled (`try`, `global`,
`match`, `:=`, returning a value) are errors at
their line naming what to write instead, raised when the kernel is decorated (so is
`del`).

A function Python has no source for (defined in a REPL or by `exec` of a string) is not
compiled: it is traced as before, where a kernel value in a Python `if` / `while` / `and`
is an error naming the `with vyre.if_(...)` forms; no construct silently changes meaning.
This module must never evaluate a kernel.
"""

from __future__ import annotations

import ast
import builtins
import inspect
import operator
import sys
import textwrap
import types
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from .builder import BuildError, ProgramBuilder
from .kernel_flow import UNBOUND, Flow

_RT, _LOCALS, _OP, _UNB = "__vy_rt", "__vy_locals", "__vy_op", "__vy_unbound"
_INJECTED = (_RT, _LOCALS, _OP, _UNB)
_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef, ast.ListComp,
           ast.SetComp, ast.DictComp, ast.GeneratorExp)
_AUG = {ast.Add: "iadd", ast.Sub: "isub", ast.Mult: "imul", ast.Div: "itruediv",
        ast.FloorDiv: "ifloordiv", ast.Mod: "imod", ast.Pow: "ipow", ast.LShift: "ilshift",
        ast.RShift: "irshift", ast.BitOr: "ior", ast.BitXor: "ixor", ast.BitAnd: "iand",
        ast.MatMult: "imatmul"}


def _walk_scope(nodes: Iterable[ast.AST]) -> Iterable[ast.AST]:
    """Every node under `nodes`, not descending into nested scopes."""
    todo = list(nodes)
    while todo:
        n = todo.pop()
        yield n
        if not isinstance(n, _SCOPES):
            todo.extend(ast.iter_child_nodes(n))


def _stored(nodes: Iterable[ast.AST]) -> set[str]:
    return {n.id for n in _walk_scope(nodes) if isinstance(n, ast.Name)
            and isinstance(n.ctx, ast.Store)}


def _loop_targets(nodes: Iterable[ast.AST]) -> set[str]:
    return _stored(n.target for n in _walk_scope(nodes) if isinstance(n, (ast.For,
                                                                           ast.AsyncFor)))


_EXITS = (ast.Return, ast.Break, ast.Continue, ast.Raise)


def _definite(body: list[ast.stmt]) -> set[str] | None:
    """The names every path through `body` assigns; None where no path falls through its
    end (it ends in return / break / continue / raise), which assigns "everything"."""
    out: set[str] = set()
    for st in body:
        if isinstance(st, _EXITS):
            return None
        if isinstance(st, ast.If):
            a, b = _definite(st.body), _definite(st.orelse)
            if a is None and b is None:
                return None
            if a is None:
                out |= b or set()
            elif b is None:
                out |= a
            else:
                out |= a & b
        elif isinstance(st, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            out |= _stored([st])
        elif isinstance(st, ast.With):
            inner = _definite(st.body)
            if inner is None:
                return None
            out |= inner | _stored(i.optional_vars for i in st.items if i.optional_vars)
    return out


def _name(id_: str, store: bool = False) -> ast.Name:
    return ast.Name(id=id_, ctx=ast.Store() if store else ast.Load())


def _rt(method: str, *args: ast.expr) -> ast.Call:
    return ast.Call(func=ast.Attribute(value=_name(_RT), attr=method, ctx=ast.Load()),
                    args=list(args), keywords=[])


def _method(obj: str, method: str, *args: ast.expr) -> ast.Call:
    return ast.Call(func=ast.Attribute(value=_name(obj), attr=method, ctx=ast.Load()),
                    args=list(args), keywords=[])


def _thunk(e: ast.expr) -> ast.Lambda:
    return ast.Lambda(args=ast.arguments(posonlyargs=[], args=[], vararg=None, kwonlyargs=[],
                                         kw_defaults=[], kwarg=None, defaults=[]), body=e)


def _strs(names: Iterable[str]) -> ast.Tuple:
    return ast.Tuple(elts=[ast.Constant(n) for n in names], ctx=ast.Load())


def _locals() -> ast.Call:
    return ast.Call(func=_name(_LOCALS), args=[], keywords=[])


def _at(new: Any, node: Any) -> Any:
    """Give the nodes `new` made here the line where `node` starts (start and end: Python
    3.11 reports a method call at its attribute's end line, which for a copied multi-line
    location would be the statement's last line)."""
    sub: Any
    for sub in ast.walk(new):
        if "lineno" in sub._attributes and not hasattr(sub, "lineno"):
            sub.lineno = sub.end_lineno = node.lineno
            sub.col_offset = sub.end_col_offset = node.col_offset
    return new


class _Rewrite(ast.NodeTransformer):
    """The rewrite described in the module docstring."""

    def __init__(self, filename: str) -> None:
        self.filename = filename
        self.loops: list[str] = []
        self.count = 0

    def fail(self, node: ast.AST, message: str) -> BuildError:
        return BuildError(message, f"{self.filename}:{getattr(node, 'lineno', '?')}")

    def fresh(self) -> str:
        self.count += 1
        return f"__vy_f{self.count}"

    def stmts(self, body: list[ast.stmt]) -> list[ast.stmt]:
        out: list[ast.stmt] = []
        for st in body:
            got = self.visit(st)
            out.extend(got if isinstance(got, list) else [got] if got is not None else [])
        return out or [ast.Pass()]

    def located(self, node: ast.AST, out: list[ast.stmt]) -> list[ast.stmt]:
        for n in out:
            _at(n, node)
        return out

    # -- blocks whose locals may change per invocation
    def _around(self, node: ast.stmt, flow: str, names: list[str], targets: list[str],
                inner: list[ast.stmt], definite: Iterable[str] = ()) -> list[ast.stmt]:
        if not names:
            return inner
        tup = ast.Tuple(elts=[_name(n, True) for n in names], ctx=ast.Store())
        tup2 = ast.Tuple(elts=[_name(n, True) for n in names], ctx=ast.Store())
        device = ast.Attribute(value=_name(flow), attr="device", ctx=ast.Load())
        args: tuple[ast.expr, ...] = (_locals(), _strs(names), _strs(targets))
        if isinstance(node, ast.If):
            args += (_strs(sorted(definite)),)
        before = ast.If(test=device, body=[ast.Assign(
            targets=[tup], value=_method(flow, "promote", *args))], orelse=[])
        after = ast.If(test=device, body=[ast.Assign(
            targets=[tup2], value=_method(flow, "finish", *args))], orelse=[])
        return [before, *inner, after]

    def visit_If(self, node: ast.If) -> list[ast.stmt]:
        f = self.fresh()
        names = sorted(_stored(node.body + node.orelse))
        targets = sorted(_loop_targets(node.body + node.orelse))
        out: list[ast.stmt] = [ast.Assign(targets=[_name(f, True)],
                                          value=_rt("if_", self.visit(node.test)))]
        inner: list[ast.stmt] = [
            ast.If(test=_method(f, "then"), body=self.stmts(node.body), orelse=[]),
            ast.Expr(_method(f, "end_then"))]
        both = _definite([node])
        definite = (set(names) if both is None else both) - set(targets)
        if node.orelse:
            orelse = self.stmts(node.orelse)
            if names:  # the else branch starts from the names as they were before the if
                reset = ast.Assign(
                    targets=[ast.Tuple(elts=[_name(n, True) for n in names], ctx=ast.Store())],
                    value=_method(f, "reset", _locals(), _strs(names), _strs(targets)))
                orelse = [ast.If(test=ast.Attribute(value=_name(f), attr="device",
                                                    ctx=ast.Load()),
                                 body=[reset], orelse=[]), *orelse]
            inner += [ast.If(test=_method(f, "orelse"), body=orelse, orelse=[]),
                      ast.Expr(_method(f, "end_then"))]
        return self.located(node, out + self._around(node, f, names, targets, inner, definite))

    def visit_While(self, node: ast.While) -> list[ast.stmt]:
        f = self.fresh()
        names = sorted(_stored(node.body))
        targets = sorted(_loop_targets(node.body))
        start = ast.Assign(targets=[_name(f, True)], value=_rt(
            "while_", _thunk(self.visit(node.test)), ast.Constant(bool(node.orelse))))
        self.loops.append(f)
        body = self.stmts(node.body)
        self.loops.pop()
        loop = ast.While(test=_method(f, "test"), body=body,
                         orelse=self.stmts(node.orelse) if node.orelse else [])
        return self.located(node, [start, *self._around(node, f, names, targets, [loop])])

    def visit_For(self, node: ast.For) -> list[ast.stmt]:
        f = self.fresh()
        own = sorted(_stored([node.target]))
        names = sorted(_stored(node.body) | set(own))
        targets = sorted(_loop_targets(node.body) | set(own))
        it = node.iter
        target = ast.Constant(node.target.id if isinstance(node.target, ast.Name) else None)
        has_else = ast.Constant(bool(node.orelse))
        if isinstance(it, ast.Call) and not any(isinstance(a, ast.Starred) for a in it.args):
            start = _rt("for_", self.visit(it.func),
                        ast.Tuple(elts=[self.visit(a) for a in it.args], ctx=ast.Load()),
                        ast.Dict(keys=[ast.Constant(k.arg) if k.arg else None
                                       for k in it.keywords],
                                 values=[self.visit(k.value) for k in it.keywords]),
                        target, has_else)
        else:
            start = _rt("for_", ast.Constant(None),
                        ast.Tuple(elts=[self.visit(it)], ctx=ast.Load()),
                        ast.Dict(keys=[], values=[]), target, has_else)
        self.loops.append(f)
        body = self.stmts(node.body)
        self.loops.pop()
        loop = ast.For(target=node.target, iter=_name(f), body=body,
                       orelse=self.stmts(node.orelse) if node.orelse else [])
        out = [ast.Assign(targets=[_name(f, True)], value=start)]
        return self.located(node, out + self._around(node, f, names, targets, [loop]))

    def _exit(self, node: ast.stmt, what: str, python: ast.stmt) -> list[ast.stmt]:
        loop = _name(self.loops[-1]) if self.loops else ast.Constant(None)
        call = _rt("loop_exit", loop, ast.Constant(what))
        out: ast.stmt = (ast.If(test=call, body=[python], orelse=[]) if self.loops
                         else ast.Expr(call))
        return self.located(node, [out])

    def visit_Break(self, node: ast.Break) -> list[ast.stmt]:
        return self._exit(node, "break", node)

    def visit_Continue(self, node: ast.Continue) -> list[ast.stmt]:
        return self._exit(node, "continue", node)

    def visit_Return(self, node: ast.Return) -> list[ast.stmt]:
        if node.value is not None and not (isinstance(node.value, ast.Constant)
                                           and node.value.value is None):
            raise self.fail(node, "a kernel returns no value: write results to an Output "
                            "buffer (`out[i] = value`) and end with a bare `return`")
        return self.located(node, [ast.If(test=_rt("return_"), body=[node], orelse=[])])

    def visit_Raise(self, node: ast.Raise) -> list[ast.stmt]:
        self.generic_visit(node)
        return self.located(node, [ast.If(test=_rt("raise_"), body=[node], orelse=[])])

    def visit_Assert(self, node: ast.Assert) -> list[ast.stmt]:
        if sys.flags.optimize:
            return []
        msg = _thunk(self.visit(node.msg)) if node.msg is not None else ast.Constant(None)
        return self.located(node, [ast.Expr(_rt("assert_", self.visit(node.test), msg))])

    def visit_With(self, node: ast.With) -> ast.With:
        for item in node.items:
            item.context_expr = _at(_rt("with_", self.visit(item.context_expr)), node)
        node.body = self.stmts(node.body)
        return node

    # -- assignments
    def _bind(self, target: ast.expr, value: ast.expr, node: ast.stmt) -> list[ast.stmt]:
        if isinstance(target, ast.Name):
            call = _rt("assign", _locals(), ast.Constant(target.id), value)
            return [ast.Assign(targets=[_name(target.id, True)], value=call)]
        if isinstance(target, (ast.Tuple, ast.List)):
            if not all(isinstance(e, (ast.Name, ast.Subscript, ast.Attribute))
                       for e in target.elts):
                raise self.fail(node, "in a kernel, unpack into plain names (`a, b = ...`); "
                                "write a nested or starred unpacking as one assignment per "
                                "name")
            tmp = self.fresh()
            out: list[ast.stmt] = [ast.Assign(targets=[_name(tmp, True)], value=_rt(
                "unpack", value, ast.Constant(len(target.elts))))]
            for k, e in enumerate(target.elts):
                item = ast.Subscript(value=_name(tmp), slice=ast.Constant(k), ctx=ast.Load())
                out += self._bind(e, item, node)
            return out
        if isinstance(target, ast.Starred):
            raise self.fail(node, "a starred assignment target cannot be compiled in a "
                            "kernel; assign each name on its own")
        return [ast.Assign(targets=[self.visit(target)], value=value)]

    def visit_Assign(self, node: ast.Assign) -> list[ast.stmt]:
        value = self.visit(node.value)
        if len(node.targets) == 1:
            return self.located(node, self._bind(node.targets[0], value, node))
        tmp = self.fresh()
        out: list[ast.stmt] = [ast.Assign(targets=[_name(tmp, True)], value=value)]
        for t in node.targets:
            out += self._bind(t, _name(tmp), node)
        return self.located(node, out)

    def visit_AugAssign(self, node: ast.AugAssign) -> list[ast.stmt]:
        if not isinstance(node.target, ast.Name):
            self.generic_visit(node)
            return [node]
        op = ast.Call(func=ast.Attribute(value=_name(_OP), attr=_AUG[type(node.op)],
                                         ctx=ast.Load()),
                      args=[_name(node.target.id), self.visit(node.value)], keywords=[])
        return self.located(node, self._bind(node.target, op, node))

    def visit_AnnAssign(self, node: ast.AnnAssign) -> list[ast.stmt]:
        if node.value is None:
            return []
        if not isinstance(node.target, ast.Name):
            return self.located(node, [ast.Assign(targets=[self.visit(node.target)],
                                                  value=self.visit(node.value))])
        call = _rt("assign_typed", _locals(), ast.Constant(node.target.id),
                   self.visit(node.value), self.visit(node.annotation))
        return self.located(node, [ast.Assign(targets=[_name(node.target.id, True)],
                                              value=call)])

    # -- what cannot be compiled
    def visit_Try(self, node: ast.AST) -> Any:
        raise self.fail(node, "`try` cannot be compiled in a kernel (a kernel raises "
                        "nothing at run time); test the condition with `if` instead")

    visit_TryStar = visit_Try

    def visit_Global(self, node: ast.AST) -> Any:
        raise self.fail(node, "`global` / `nonlocal` cannot be compiled in a kernel (it "
                        "cannot change Python variables at run time); write results to an "
                        "Output buffer")

    visit_Nonlocal = visit_Global

    def visit_Match(self, node: ast.AST) -> Any:
        raise self.fail(node, "`match` cannot be compiled in a kernel; write `if` / `elif`")

    def visit_NamedExpr(self, node: ast.AST) -> Any:
        raise self.fail(node, "`:=` cannot be compiled in a kernel; assign the value on its "
                        "own line first")

    def visit_Delete(self, node: ast.AST) -> Any:
        raise self.fail(node, "`del` cannot be compiled in a kernel (a name or element "
                        "cannot be unbound per invocation); leave the name unused, or "
                        "rebind it")

    def visit_AsyncFor(self, node: ast.AST) -> Any:
        raise self.fail(node, "`async for` cannot be compiled in a kernel; write `for j in "
                        "range(n):`")

    visit_AsyncWith = visit_AsyncFor

    def _as_written(self, node: Any) -> Any:
        return node  # a helper defined inside: traced when called, like any helper

    visit_FunctionDef = visit_AsyncFunctionDef = visit_ClassDef = visit_Lambda = _as_written

    # -- expressions
    def visit_BoolOp(self, node: ast.BoolOp) -> ast.expr:
        parts = [_thunk(self.visit(v)) for v in node.values]
        return _at(_rt("and_" if isinstance(node.op, ast.And) else "or_", *parts), node)

    def visit_UnaryOp(self, node: ast.UnaryOp) -> ast.expr:
        if isinstance(node.op, ast.Not):
            return _at(_rt("not_", self.visit(node.operand)), node)
        self.generic_visit(node)
        return node

    def visit_IfExp(self, node: ast.IfExp) -> ast.expr:
        return _at(_rt("ifexp", self.visit(node.test), _thunk(self.visit(node.body)),
                       _thunk(self.visit(node.orelse))), node)

    def visit_Compare(self, node: ast.Compare) -> ast.expr:
        if len(node.ops) == 1 and not isinstance(node.ops[0], (ast.In, ast.NotIn)):
            self.generic_visit(node)
            return node
        bitwise = any(isinstance(e, ast.BinOp) and isinstance(e.op, (ast.BitAnd, ast.BitOr,
                                                                      ast.BitXor))
                      for e in node.comparators[:-1])
        text = ast.Constant(ast.unparse(node) if bitwise else None)
        parts: list[ast.expr] = [_thunk(self.visit(e)) for e in [node.left, *node.comparators]]
        ops = _strs(type(o).__name__ for o in node.ops)
        return _at(_rt("compare", ast.Tuple(elts=parts, ctx=ast.Load()), ops, text), node)

    def visit_Call(self, node: ast.Call) -> ast.expr:
        self.generic_visit(node)
        if (isinstance(node.func, ast.Name) and node.func.id in ("min", "max")
                and not node.keywords and not any(isinstance(a, ast.Starred)
                                                  for a in node.args)):
            return _at(_rt("minmax", node.func, *node.args), node)
        return node


@dataclass(frozen=True)
class CompiledKernel:
    """The rewritten code of one kernel function and what it closes over."""

    fn: Callable[..., Any]
    code: types.CodeType

    def bind(self, builder: ProgramBuilder) -> Callable[..., Any]:
        """The function to call for one build (its own Flow)."""
        fn = self.fn
        cells: dict[str, Any] = dict(zip(fn.__code__.co_freevars, fn.__closure__ or ()))
        injected = {_RT: Flow(builder), _LOCALS: builtins.locals, _OP: operator,
                    _UNB: UNBOUND}
        closure = tuple(cells[n] if n in cells else types.CellType(injected[n])
                        for n in self.code.co_freevars)
        out = types.FunctionType(self.code, fn.__globals__, fn.__name__, fn.__defaults__,
                                 closure)
        out.__kwdefaults__ = fn.__kwdefaults__
        return out


def _source(fn: Callable[..., Any]) -> tuple[ast.FunctionDef, int] | None:
    try:
        src = inspect.getsource(fn)
    except (OSError, TypeError):
        return None
    text = textwrap.dedent(src)
    shift = 0
    if text[:1].isspace():  # a line of a multi-line string kept the indentation
        text, shift = "if 1:\n" + text, 1
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return None
    node: ast.AST = tree.body[0]
    if shift:
        node = node.body[0]  # type: ignore[attr-defined]
    if not isinstance(node, ast.FunctionDef) or node.name != fn.__name__:
        return None  # a lambda, or the file changed since the import: trace instead
    return node, fn.__code__.co_firstlineno - 1 - shift


def compile_kernel(fn: Callable[..., Any]) -> CompiledKernel | None:
    """The kernel function rewritten (see the module docstring), or None where Python has
    no source for it (then it is traced)."""
    found = _source(fn)
    if found is None:
        return None
    fdef, offset = found
    filename = fn.__code__.co_filename
    ast.increment_lineno(fdef, offset)
    rewrite = _Rewrite(filename)
    body = rewrite.stmts(fdef.body)
    for a in ast.walk(fdef.args):  # never evaluated here: the kernel has read them
        if isinstance(a, ast.arg):
            a.annotation = None
    inner = ast.FunctionDef(name=fdef.name, args=fdef.args, body=body, decorator_list=[],
                            returns=None, type_comment=None)
    ast.copy_location(inner, fdef)
    outer_args = [ast.arg(arg=n) for n in (*_INJECTED, *fn.__code__.co_freevars)]
    factory = ast.FunctionDef(
        name="__vy_factory", args=ast.arguments(posonlyargs=[], args=outer_args, vararg=None,
                                                kwonlyargs=[], kw_defaults=[], kwarg=None,
                                                defaults=[]),
        body=[inner, ast.Return(value=_name(fdef.name))], decorator_list=[], returns=None,
        type_comment=None)
    ast.copy_location(factory, fdef)
    module = ast.Module(body=[factory], type_ignores=[])
    ast.fix_missing_locations(module)
    code = compile(module, filename, "exec", dont_inherit=True)
    factory_code = next(c for c in code.co_consts if isinstance(c, types.CodeType))
    inner_code = next(c for c in factory_code.co_consts if isinstance(c, types.CodeType)
                      and c.co_name == fdef.name)
    unknown = set(inner_code.co_freevars) - set(fn.__code__.co_freevars) - set(_INJECTED)
    if unknown:  # e.g. `__class__` for super(): nothing to close over; trace instead
        return None
    return CompiledKernel(fn, inner_code)


__all__ = ["CompiledKernel", "compile_kernel"]
