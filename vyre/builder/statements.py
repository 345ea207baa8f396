"""ProgramBuilder's statements: locals (let, assign), stores, atomics, barriers, the
debug statements (print, assert_) and return / break / continue, each emitted into the
current block with the user's site.

This module must never open a block (vyre.builder.program does).
"""

from __future__ import annotations

from typing import Any, cast

from ..ir import nodes as N
from ..ir.types import ScalarType
from .buffers import BufferRef, _Flat
from .declarations import Declarations
from .rules import BOOL, _narrowed, _scalar_type
from .sites import BuildError, user_site
from .values import Value, Variable, _is_number, _Scope


class Statements(Declarations):
    """Declarations plus the statements of a kernel body."""

    def let(self, value: Any, ty: ScalarType | None = None, name: str | None = None) -> Variable:
        """Declare a mutable local initialised to `value` (type from value, or `ty`)."""
        ty = _scalar_type(ty, "let") if ty is not None else None
        if ty is not None and ty.is_narrow:
            raise BuildError(f"let: a local cannot be {ty} (8/16-bit integers are storage "
                             f"types); declare it ty={ty.promoted} and store it into the "
                             f"{ty} buffer, which keeps its low bits")
        e = self._coerce(value, ty, "let value")
        if ty is not None and e.ty != ty:
            raise BuildError(f"let: value is {e.ty} but ty={ty}; cast it with .cast({ty})")
        name = self._name_for(name, "v")
        self._declare_name(name, "variable")
        self._let_names.add(name)
        site = user_site()
        self._emit(N.Let(name=name, value=e), site)
        scope = _Scope(f"variable {name!r}")
        self._scopes[-1].append(scope)
        literal = value if ty is None and _is_number(value) else None
        return Variable(self, name, e.ty, scope, literal, site)

    def assign(self, var: Variable, value: Any) -> None:
        """`var = value` (what `var.set(value)` and `var += x` call)."""
        if not isinstance(var, Variable) or var._b is not self:
            raise BuildError("assign needs a Variable of this program (made with k.let)")
        if var._scope is not None and not var._scope.alive:
            raise BuildError(f"variable {var.name!r} is assigned outside the block declaring it")
        try:
            e = self._coerce(value, var.ty, f"value assigned to {var.name!r}")
        except BuildError as exc:
            hint = var._literal_hint() if _is_number(value) else ""
            if not hint:
                raise
            raise BuildError(f"cannot assign the Python {type(value).__name__} {value!r} "
                             f"to {var.name!r} ({var.ty}){hint}") from exc
        if e.ty != var.ty:
            fix = var._literal_hint() or f"; cast the value with .cast({var.ty})"
            raise BuildError(f"cannot assign a {e.ty} to {var.name!r} ({var.ty}){fix}")
        self._emit(N.Assign(name=var.name, value=e))

    def store(self, buf: BufferRef, index: Any, value: Any) -> None:
        """`buf[index] = value` (a store past the length does nothing)."""
        self._check_ref(buf)
        if buf.access == "read":
            raise BuildError(
                f"buffer {buf.name!r} is declared read-only; declare it 'write' or 'read_write'"
            )
        e = self._coerce(value, buf.ty, f"value stored to {buf.name!r}")
        if buf.ty.is_narrow:
            e = _narrowed(e, buf.ty, buf.name)
        if e.ty != buf.ty:
            raise BuildError(
                f"cannot store a {e.ty} into {buf.name!r} ({buf.ty}); cast it with .cast({buf.ty})"
            )
        flat = self._index(index.index) if isinstance(index, _Flat) else buf._element(index)
        self._emit(N.Store(buffer=buf.name, index=flat, value=e))

    def atomic(
        self, op: str, buf: BufferRef, index: Any, value: Any, comparand: Any = None,
        relaxed: bool = False,
    ) -> Value:
        """An atomic read-modify-write on `buf[index]`; returns the old value."""
        self._check_ref(buf)
        if buf.access not in ("read_write", "workgroup"):
            raise BuildError(f"atomics need a read_write buffer; {buf.name!r} is {buf.access}")
        if buf.ty.is_float and (buf.ty not in (ScalarType.F32, ScalarType.F64) or op != "add"):
            raise BuildError(
                f"atomic {op} on {buf.ty} {buf.name!r}: only atomic add exists for floats "
                "(f32, f64)"
            )
        if buf.ty is ScalarType.F64 and relaxed:
            raise BuildError(
                f"atomic_add_relaxed on f64 {buf.name!r}: an f64 atomic add is only "
                "order-independent (WGSL has no f64 atomic); use atomic_add and leave its "
                "old value unread"
            )
        if not buf.ty.is_numeric:
            raise BuildError(f"atomic {op} needs integer elements, {buf.name!r} is {buf.ty}")
        if buf.ty.is_narrow:
            raise BuildError(f"atomic {op} on {buf.ty} {buf.name!r}: 8/16-bit elements have "
                             "no atomics (WGSL has none); keep the counters in a u32 or i32 "
                             "buffer")
        v = self._coerce(value, buf.ty, f"atomic {op} value")
        if v.ty != buf.ty:
            raise BuildError(f"atomic {op} on {buf.name!r} ({buf.ty}) got a {v.ty} value")
        c = None
        if comparand is not None:
            c = self._coerce(comparand, buf.ty, "compare value")
            if c.ty != buf.ty:
                raise BuildError(f"compare value must be {buf.ty}, got {c.ty}")
        name = self._name_for(None, "old")
        self._names.add(name)
        if (op == "compare_exchange") != (c is not None):
            raise BuildError(f"atomic {op}: a compare value is needed exactly for compare_exchange")
        self._emit(
            N.Atomic(op=cast(N.AtomicOp, op), buffer=buf.name, index=buf._element(index), value=v,
                     comparand=c, result=name, relaxed=relaxed)
        )
        scope = _Scope(f"atomic result {name!r}")
        self._scopes[-1].append(scope)
        return Value(self, N.Var(name=name, ty=buf.ty), scope)

    def _check_ref(self, buf: BufferRef) -> None:
        if not isinstance(buf, BufferRef) or self._refs.get(buf.name) is not buf:
            raise BuildError(f"{buf!r} is not a buffer of program {self.name!r}")

    def barrier(self) -> None:
        """Workgroup barrier; must be reached by every invocation of the workgroup."""
        self._emit(N.Barrier())

    def print(self, *items: Any, sep: str = " ") -> None:
        """Debug output from the device: `k.print("i = {} x = {:.3f}", i, x)` (a format with
        one {} per value) or `k.print("i =", i)` (like Python's print). Written to the
        dispatch's log and printed after it, ordered by invocation (vyre.debug)."""
        fmt, args = self._debug_format("print", items, sep)
        self._emit(N.Print(fmt=fmt, args=args, site=user_site()))

    def assert_(self, cond: Any, *items: Any, sep: str = " ") -> None:
        """Check `cond` (bool) on the device; where it is false the dispatch raises
        DispatchError naming this line, the invocation and the message (`items` as for
        print) once it is done. The invocation itself carries on."""
        c = self._coerce(cond, None, "assert_ condition")
        if c.ty is not BOOL:
            raise BuildError(f"assert_ condition is {c.ty}, not bool; compare it (e.g. x != 0)")
        fmt, args = self._debug_format("assert_", items, sep)
        self._emit(N.Assert(cond=c, fmt=fmt, args=args, site=user_site()))

    def _debug_format(self, what: str, items: tuple[Any, ...], sep: str
                      ) -> tuple[str, tuple[N.ExprNode, ...]]:
        from ..debug.fmt import check_format, print_format

        if not isinstance(sep, str):
            raise BuildError(f"{what}: sep must be a str, got {type(sep).__name__}")
        try:
            fmt, values = print_format(items, sep, lambda x: isinstance(x, Value) or
                                       _is_number(x))
        except TypeError as exc:
            raise BuildError(f"{what}: {exc} cannot be printed from a kernel; give text (str), "
                             "kernel values or Python numbers") from None
        args = tuple(self._coerce(v, None, f"{what} value") for v in values)
        problem = check_format(fmt, [a.ty for a in args])
        if problem:
            raise BuildError(f"{what}: {problem}")
        return fmt, args

    def return_(self) -> None:
        """End this invocation."""
        self._emit(N.Return())

    def break_(self) -> None:
        """Leave the innermost loop."""
        if not self._loop_depth:
            raise BuildError("break outside a loop")
        self._emit(N.Break())

    def continue_(self) -> None:
        """Go to the next iteration of the innermost loop."""
        if not self._loop_depth:
            raise BuildError("continue outside a loop")
        self._emit(N.Continue())

    # -- control flow
