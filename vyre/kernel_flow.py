"""What a compiled `@vyre.kernel` body calls at build time (see vyre/kernel_ast.py).

vyre/kernel_ast.py rewrites the kernel function's `if` / `while` / `for` / `break` /
`continue` / `return` / `and` / `or` / `not` / `a if c else b` / assignments into calls of
one `Flow` (made per build). Each decides *when the kernel is built* which kind of control
flow a statement is:

- on Python values (build-time constants) it is plain Python: a loop unrolls, an `if`
  picks one branch;
- on kernel values (anything computed from buffers, params, ids) it becomes the device's
  control flow through the builder's existing `if_` / `else_` / `while_` / `for_range`,
  so each invocation takes its own branch.

Locals follow Python's value semantics on the device: before a per-invocation `if` or loop,
every local it assigns that already holds a kernel value or a Python number becomes a
kernel variable (a `let`), and an assignment inside then changes that variable; a local
first assigned inside such a block has no value after it (using it is an error naming the
fix). Binding a name to a value that reads memory which can change (a variable, a
writable buffer or workgroup array) snapshots it in a `let`, so `tmp = a[i]; a[i] = a[j];
a[j] = tmp` swaps; so does binding a subgroup operation (every lane computes it there).

This module must never evaluate a kernel or talk to a device; it only calls the builder.
"""

from __future__ import annotations

import builtins
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from .builder import (
    BOOL,
    BufferRef,
    BuildError,
    ProgramBuilder,
    Value,
    Variable,
    user_site,
)
from .builder.control import _Control
from .builder.values import _Scope
from .ir import nodes as N
from .ir.types import ScalarType
from .ir.validate import is_valid_name
from .ir.visit import walk_exprs
from .kernel_expr import ExpressionFlow, Unbound

#: the attribute vyre.kernel sets on vyre.range (a loop on the device, never unrolled)
DEVICE_RANGE_MARK = "_vyre_device_range"


UNBOUND = Unbound("a local is used before it is assigned")


class PlainVariable(Variable):
    """A kernel variable the compiled body made from a plain assignment: its type hint
    speaks of plain assignments, not `vyre.let`."""

    __slots__ = ()

    def _literal_hint(self) -> str:
        if self.literal is None:
            return ""
        lit = self.literal
        return (
            f". Note: `{self.name}` is a {self.ty} kernel variable because it held the Python "
            f"{type(lit).__name__} {lit!r} {self.site or ''}; a kernel variable keeps one "
            f"type: start it with the type you mean (`{self.name} = {float(lit)!r}` for "
            f"f32, `{self.name} = vyre.lit({lit!r}, vyre.f64)` for another type) or convert "
            f"the value with .cast({self.ty})"
        )


def _plain(var: Variable, literal: Any, where: str) -> Variable:
    var.__class__ = PlainVariable
    var.literal = literal
    var.site = where
    return var

def _is_number(x: Any) -> bool:
    return isinstance(x, (bool, int, float, np.generic)) and not isinstance(x, np.str_)


def _line(site: str | None) -> str:
    return site.rsplit(":", 1)[1] if site else "?"


class Flow(ExpressionFlow):
    """The build-time state of one compiled kernel body (one per build)."""

    def __init__(self, builder: ProgramBuilder) -> None:
        super().__init__(builder)
        self._bound: dict[int, Variable] = {}  # variables some name holds (an alias is copied)
        # per open plain if/while/for: the names first assigned inside it that are assigned
        # on every path through it, and where to declare them (before its statement)
        self._pending: list[_Pending] = []
        self._declared: set[int] = set()  # the variables _declare_pending made
        self._frozen: list[tuple[int, dict[str, str]]] = []  # per open device block
        # the blocks opened by a plain if/while/for (not `with vyre.if_`, whose old rules
        # stand: a name rebound inside it is a new value that dies with the block)
        self._managed: set[int] = set()

    # -- helpers
    @property
    def depth(self) -> int:
        return len(self.b._blocks)

    def _declared_depth(self, var: Variable) -> int | None:
        for d, scopes in enumerate(self.b._scopes):
            if any(s is var._scope for s in scopes):
                return d + 1
        return None

    def _outer_variable(self, x: Any) -> bool:
        """A live variable declared outside the innermost open block: assigning the name
        changes it (Python's semantics for a local assigned in a branch or loop)."""
        if not (isinstance(x, Variable) and x._b is self.b):
            return False
        if x._scope is not None and not x._scope.alive:
            return False
        if id(self.b._blocks[-1]) not in self._managed:
            return False
        d = self._declared_depth(x)
        return d is not None and d < self.depth

    def opened(self) -> None:
        """A plain if/while/for just opened the builder's innermost block."""
        self._managed.add(id(self.b._blocks[-1]))

    def _name(self, name: str) -> str:
        if not is_valid_name(name):
            return self.b._fresh("v")
        cand, n = name, 1
        while cand in self.b._names:
            cand, n = f"{name}_{n}", n + 1
        return cand

    def _let(self, name: str, value: Any, ty: ScalarType | None = None) -> Variable:
        var = self.b.let(value, ty, name=self._name(name))
        self._bound[id(var)] = var
        return var

    def _computed_where_named(self, v: Value) -> bool:
        """Whether a name bound to `v` must hold a copy made at the assignment (a let), as
        in Python: `v` reads memory that can change (a variable, a written buffer), or is
        a subgroup operation, which every lane must reach where it is written (used only
        inside a later `if`, the expression would be evaluated there, by some lanes)."""
        for e in walk_exprs(v.expr):
            if isinstance(e, N.Subgroup):
                return True
            if isinstance(e, N.Var) and e.name in self.b._let_names:
                return True
            if isinstance(e, N.Load):
                ref = self.b._refs.get(e.buffer)
                if ref is None or ref.access != "read":
                    return True
        return False

    # -- assignments
    def assign(self, found: dict[str, Any], name: str, new: Any) -> Any:
        """`name = new` in the kernel's body (`found`: its locals before)."""
        return self.bind(name, found.get(name, UNBOUND), new)

    def assign_typed(self, found: dict[str, Any], name: str, new: Any, ty: Any) -> Any:
        """`name: ty = new` in the kernel's body."""
        return self.bind_typed(name, found.get(name, UNBOUND), new, ty)

    def bind(self, name: str, old: Any, new: Any) -> Any:
        """`name = new` where `name` held `old` (UNBOUND if nothing)."""
        if new is old:
            return new
        for _, frozen in self._frozen:
            if name in frozen:
                raise BuildError(
                    f"`{name}` holds {frozen[name]} before a per-invocation block that assigns "
                    f"it: only kernel values and numbers can change per invocation; give "
                    f"`{name}` a kernel value before the block (e.g. `{name} = 0.0`) or use "
                    "another name inside it")
        if self._outer_variable(old):
            self._assign(old, new)
            return old
        if old is UNBOUND or isinstance(old, Unbound):
            var = self._declare_pending(name, new)
            if var is not None:
                self._assign(var, new)
                return var
        if isinstance(new, Variable) and new._b is self.b:
            if id(new) in self._bound:  # `t = acc`: Python copies the value, so must we
                return self._let(name, new)
            self._bound[id(new)] = new
            return new
        if self._mine(new) and self._computed_where_named(new):
            return self._let(name, new)
        return new

    def bind_typed(self, name: str, old: Any, new: Any, ty: Any) -> Any:
        """`name: ty = new`: a vyre type declares a kernel variable of that type."""
        if not isinstance(ty, ScalarType):
            return self.bind(name, old, new)
        if _is_number(new):
            new = self.b.lit(new, ty)
        elif self._mine(new) and new.ty is not ty:
            raise BuildError(f"`{name}: {ty} = ...` got a {new.ty} value; convert it with "
                             f".cast({ty}) (vyre never converts implicitly)")
        if self._outer_variable(old):
            self._assign(old, new)
            return old
        return self._let(name, new, ty)

    def unpack(self, value: Any, n: int) -> tuple[Any, ...]:
        """The values of `a, b = value` (a kernel value is one scalar)."""
        if self._mine(value) or isinstance(value, BufferRef):
            raise BuildError(f"a kernel value or buffer cannot be unpacked into {n} names; "
                             "assign each name on its own (`a = x[i]`, `b = x[i + 1]`)")
        items = tuple(value)
        if len(items) != n:
            raise BuildError(f"cannot unpack {len(items)} values into {n} names")
        # `a, b = b, a + b`: Python computes every value before it assigns any name, so a
        # value reading a variable that an earlier name of this statement changes is a copy
        return tuple(self.b.let(v, name=self.b._fresh("t")) if self._mine(v) and
                     not isinstance(v, Variable) and self._computed_where_named(v)
                     else v for v in items)

    def _assign(self, var: Variable, value: Any) -> None:
        self.b.assign(var, value)

    def _declare_pending(self, name: str, new: Any) -> Variable | None:
        """The variable for `name`'s first assignment inside a plain if/while/for that
        assigns it on every path, declared before that statement (Numba's rule: a name
        assigned in both branches of an `if` is usable after it)."""
        if not (self._mine(new) or _is_number(new)) or id(self.b._blocks[-1]) not in \
                self._managed:
            return None
        for p in self._pending:  # declared at an earlier assignment of this statement
            var = p.declared.get(name)
            if var is not None and var._scope is not None and var._scope.alive:
                return var
        owner = next((p for p in self._pending if name in p.names), None)
        if owner is None:
            return None
        for p in self._pending:
            p.names.discard(name)
        e = self.b._coerce(new, None, f"value assigned to {name!r}")
        var_name = self._name(name)
        self.b._declare_name(var_name, "variable")
        self.b._let_names.add(var_name)
        zero = N.Const(ty=e.ty, value=False if e.ty is BOOL else (0.0 if e.ty.is_float else 0))
        let = N.Let(name=var_name, value=zero)
        owner.block.insert(owner.at, let)
        owner.at += 1
        if owner.site:
            self.b._sites[id(let)] = owner.site
        scope = _Scope(f"variable {var_name!r}")
        self.b._scopes[owner.depth - 1].append(scope)
        var = Variable(self.b, var_name, e.ty, scope)
        if _is_number(new):
            _plain(var, new, f"at its first assignment (line {_line(user_site())})")
        self._bound[id(var)] = var
        owner.declared[name] = var
        self._declared.add(id(var))
        return var

    # -- blocks: promotion before, poisoning after
    def _enter(self, names: tuple[str, ...], targets: tuple[str, ...], found: dict[str, Any],
               where: str, definite: tuple[str, ...] = ()) -> tuple[tuple[Any, ...], dict[str, Any]]:
        site = user_site()
        pending = _Pending({n for n in definite if found.get(n, UNBOUND) is UNBOUND
                            or isinstance(found.get(n), Unbound)},
                           self.b._blocks[-1], len(self.b._blocks[-1]), self.depth, site)
        self._pending.append(pending)
        where = f"when the {where} at line {_line(site)} began"
        before: dict[str, Any] = {}
        out: list[Any] = []
        frozen: dict[str, str] = {}
        for name in names:
            old = found.get(name, UNBOUND)
            before[name] = old
            if name in targets or old is UNBOUND or isinstance(old, Unbound):
                out.append(old)
            elif isinstance(old, Variable) and old._b is self.b and (
                    old._scope is None or old._scope.alive):
                self._bound[id(old)] = old
                out.append(old)
            elif self._mine(old) or _is_number(old):
                var = self._let(name, old)
                if _is_number(old):
                    _plain(var, old, where)
                out.append(var)
            else:
                frozen[name] = (f"a {type(old).__name__}" if not isinstance(old, BufferRef)
                                else f"the buffer {old.name!r}")
                out.append(old)
        self._frozen.append((self.depth, frozen))
        return tuple(out), before

    def _leave(self, names: tuple[str, ...], targets: tuple[str, ...], found: dict[str, Any],
               before: dict[str, Any], what: str) -> tuple[Any, ...]:
        self._frozen.pop()
        pending = self._pending.pop()
        out: list[Any] = []
        for name in names:
            now = found.get(name, UNBOUND)
            if name in pending.definite and isinstance(now, Variable) and \
                    id(now) in self._declared:
                out.append(now)  # assigned on every path: declared before the statement
            elif name in targets:
                out.append(Unbound(
                    f"`{name}` is the variable of a loop inside the {what}, so it has no "
                    f"value after that block; keep what you need in a variable assigned "
                    f"before the block (`last = 0` before, `last = {name}` inside)"))
            elif before[name] is UNBOUND or isinstance(before[name], Unbound):
                out.append(now if isinstance(now, Unbound) else Unbound(
                    f"`{name}` is first assigned inside the {what}, so it has no value on "
                    f"the invocations that skip that assignment; give it a value before the "
                    f"block (e.g. `{name} = 0` or `{name} = 0.0`, of the type it will hold)"))
            else:
                out.append(now)
        return tuple(out)

    # -- if
    def if_(self, test: Any) -> IfFlow:
        return IfFlow(self, test)

    # -- loops
    def while_(self, test: Callable[[], Any], has_else: bool) -> WhileFlow:
        return WhileFlow(self, test, has_else)

    def for_(self, fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any], target: str | None,
             has_else: bool) -> ForFlow:
        if fn is None:  # `for v in <not a call>`
            return ForFlow(self, self.iterable(args[0]), None, target, has_else)
        # (vyre.range is told by its mark: this module never imports vyre.kernel, which
        # imports it)
        if getattr(fn, DEVICE_RANGE_MARK, False) or (fn is builtins.range and any(self._mine(a) for a in args)):
            if fn is builtins.range and kwargs:
                raise BuildError("range() takes no keyword arguments")
            return ForFlow(self, None, (args, kwargs), target, has_else)
        return ForFlow(self, self.iterable(fn(*args, **kwargs)), None, target, has_else)

    def iterable(self, it: Any) -> Any:
        if isinstance(it, BufferRef):
            raise BuildError(
                f"`for v in {it.name}` cannot be compiled (a kernel does not iterate a "
                f"buffer's elements); loop over its indices: `for j in range("
                f"{it.name}.length()):` and read {it.name}[j]")
        if self._mine(it):
            raise BuildError("a kernel value is one scalar and cannot be iterated; loop "
                             "over indices with `for j in range(n):`")
        return it

    def loop_exit(self, loop: LoopFlow | None, what: str) -> bool:
        """`break` / `continue`: True for Python's (a loop unrolled at build time); on the
        device it records vyre.break_() / continue_() and Python carries on tracing."""
        if loop is None or loop.device:
            (self.b.break_ if what == "break" else self.b.continue_)()
            return False
        if self.depth != loop.depth:
            raise BuildError(
                f"`{what}` inside a per-invocation `if` cannot leave the loop at line "
                f"{_line(loop.site)}: that loop runs at build time (it is unrolled), so it "
                f"cannot stop per invocation; loop on the device with `for ... in "
                f"vyre.range(...)` (or a `while` on a kernel value; `while vyre.lit(True):` "
                f"for a device loop left by `break`)")
        return True

    def return_(self) -> bool:
        """`return`: Python's at the top level; inside a device block, vyre.return_()."""
        if self.depth > 1:
            self.b.return_()
            return False
        return True

    def raise_(self) -> bool:
        if self.depth > 1:
            raise BuildError(
                "`raise` inside a per-invocation `if` or loop would run while the kernel is "
                "built, not on the device; a kernel cannot raise: write a flag or code to an "
                "output buffer and check it on the host")
        return True

    def assert_(self, test: Any, message: Callable[[], Any] | None) -> None:
        """`assert test, message`: on a kernel value, vyre.assert_ (checked per invocation
        on the device; the message a string, a kernel value or a tuple of them, as
        vyre.print takes them); on a Python value, Python's assert at build time."""
        if self._mine(test):
            items = () if message is None else message()
            self.b.assert_(test, *(items if isinstance(items, tuple) else (items,)))
            return
        if not test:
            raise AssertionError(message() if message is not None else None)

    def with_(self, ctx: Any) -> Any:
        if isinstance(ctx, _Control):
            return ctx
        raise BuildError(
            f"`with` on {type(ctx).__name__} cannot be compiled in a kernel (only vyre's "
            "`with vyre.if_(...)` / `vyre.else_()` / `vyre.while_(...)` blocks are); use a "
            "plain `if` / `while`, or run that code outside the kernel")


class _Pending:
    """Names a plain if/while/for may declare before its statement (see _declare_pending)."""

    def __init__(self, names: set[str], block: list[N.StmtNode], at: int, depth: int,
                 site: str | None) -> None:
        self.names = names
        self.definite = set(names)
        self.block = block
        self.at = at
        self.depth = depth
        self.site = site
        self.declared: dict[str, Variable] = {}


class IfFlow:
    """One `if` statement: Python's on a Python value, the device's on a kernel value."""

    def __init__(self, flow: Flow, test: Any) -> None:
        self.flow = flow
        self.device = flow._mine(test)
        self.test = test
        self._ctx: Any = None
        self._before: dict[str, Any] = {}

    def promote(self, found: dict[str, Any], names: tuple[str, ...],
                targets: tuple[str, ...], definite: tuple[str, ...] = ()) -> tuple[Any, ...]:
        out, self._before = self.flow._enter(names, targets, found, "`if`", definite)
        self._entered = dict(zip(names, out))
        return out

    def reset(self, found: dict[str, Any], names: tuple[str, ...],
              targets: tuple[str, ...], definite: tuple[str, ...] = ()) -> tuple[Any, ...]:
        """At the `else` of a per-invocation `if`: the names as they were before its `if`
        branch ran (Python traced that branch first; the else branch must not see it),
        except variables declared for both branches."""
        out = []
        for name in names:
            now = found.get(name, UNBOUND)
            keep = isinstance(now, Variable) and id(now) in self.flow._declared
            out.append(now if keep else self._entered[name])
        return tuple(out)

    def finish(self, found: dict[str, Any], names: tuple[str, ...],
               targets: tuple[str, ...], definite: tuple[str, ...] = ()) -> tuple[Any, ...]:
        return self.flow._leave(names, targets, found, self._before,
                                "per-invocation `if`")

    def then(self) -> bool:
        if not self.device:
            return bool(self.test)
        self._ctx = self.flow.b.if_(self.test)
        self._ctx.__enter__()
        self.flow.opened()
        return True

    def end_then(self) -> None:
        if self.device:
            self._ctx.__exit__(None, None, None)

    def orelse(self) -> bool:
        if not self.device:
            return not self.test
        self._ctx = self.flow.b.else_()
        self._ctx.__enter__()
        self.flow.opened()
        return True


class LoopFlow:
    """What `break` / `continue` need of their loop."""

    device: bool
    depth: int
    site: str | None


class WhileFlow(LoopFlow):
    """One `while`: Python's while its test is a Python value, else the device's."""

    def __init__(self, flow: Flow, test: Callable[[], Any], has_else: bool) -> None:
        self.flow = flow
        self.site = user_site()
        self._test = test
        emitted = len(flow.b._blocks[-1])
        self._first: Any = test()
        self.device = flow._mine(self._first)
        if self.device and len(flow.b._blocks[-1]) != emitted:
            raise BuildError("the condition of a per-invocation `while` changes memory (an "
                             "atomic): compute it into a variable before the loop and again "
                             "at the end of the body")
        if self.device and has_else:
            raise BuildError("`while ... else` on a kernel value cannot be compiled; set a "
                             "flag before `break` and test it after the loop")
        self.depth = flow.depth
        self._round = 0
        self._ctx: Any = None
        self._before: dict[str, Any] = {}

    def promote(self, found: dict[str, Any], names: tuple[str, ...],
                targets: tuple[str, ...]) -> tuple[Any, ...]:
        out, self._before = self.flow._enter(names, targets, found, "`while` loop")
        return out

    def finish(self, found: dict[str, Any], names: tuple[str, ...],
               targets: tuple[str, ...]) -> tuple[Any, ...]:
        return self.flow._leave(names, targets, found, self._before,
                                "per-invocation `while` loop")

    def test(self) -> bool:
        self._round += 1
        if not self.device:
            return bool(self._first if self._round == 1 else self._test())
        if self._round == 1:  # again, now that the locals it reads are variables
            self._ctx = self.flow.b.while_(self._test())
            self._ctx.__enter__()
            self.flow.opened()
            return True
        self._ctx.__exit__(None, None, None)
        return False


class ForFlow(LoopFlow):
    """One `for`: Python's over a Python iterable (`range(4)`), the device's for
    `vyre.range(...)` or `range(...)` with a kernel value among its bounds."""

    def __init__(self, flow: Flow, iterable: Any, device_args: Any, target: str | None,
                 has_else: bool) -> None:
        self.flow = flow
        self.site = user_site()
        self.device = device_args is not None
        self.depth = flow.depth
        self._iterable = iterable
        self._args = device_args
        self._target = target
        self._ctx: Any = None
        self._before: dict[str, Any] = {}
        if self.device and target is None:
            raise BuildError("the variable of a device loop is one name (`for j in "
                             "range(n):`); unpack inside the body")
        if self.device and has_else:
            raise BuildError("`for ... else` over a device loop cannot be compiled; set a "
                             "flag before `break` and test it after the loop")

    def promote(self, found: dict[str, Any], names: tuple[str, ...],
                targets: tuple[str, ...]) -> tuple[Any, ...]:
        out, self._before = self.flow._enter(names, targets, found, "loop")
        return out

    def finish(self, found: dict[str, Any], names: tuple[str, ...],
               targets: tuple[str, ...]) -> tuple[Any, ...]:
        return self.flow._leave(names, targets, found, self._before,
                                "per-invocation loop")

    def __iter__(self) -> Iterator[Any]:
        if not self.device:
            yield from self._iterable
            return
        args, kwargs = self._args
        name = self.flow._name(self._target or "i")
        self._ctx = self.flow.b.for_range(*args, **kwargs, loop_name=name)
        var = self._ctx.__enter__()
        self.flow.opened()
        yield var
        self._ctx.__exit__(None, None, None)


__all__ = ["UNBOUND", "Flow"]
