"""A kernel's values while it is written: `Value` (an expression: Python's operators
build IR nodes) and `Variable` (a mutable local), and what refuses host-only uses of them
(bool(), float(), NumPy functions) with the kernel spelling.

This module must never emit a statement itself (a Variable's assignment goes through its
builder) nor evaluate a kernel.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Protocol

import numpy as np

from ..ir import nodes as N
from ..ir.types import ScalarType
from .rules import (
    BOOL,
    _binary,
    _call,
    _promote,
    _scalar_type,
    _unary,
)
from .sites import BuildError, _no_host_print, _user_line, user_site


class _Scope:
    __slots__ = ("alive", "what")

    def __init__(self, what: str) -> None:
        self.alive = True
        self.what = what


Number = int | float | bool | np.generic


def _is_number(x: object) -> bool:
    return isinstance(x, (int, float, bool, np.generic)) and not isinstance(x, Value)



class Builder(Protocol):
    """What values and buffer handles ask of the ProgramBuilder that made them (it imports
    this module, so they name it by this protocol instead of importing it back)."""

    name: str
    _unentered: dict[int, Any]

    def _block_scope(self) -> _Scope | None: ...
    def _coerce(self, x: Any, ty: ScalarType | None, what: str) -> N.ExprNode: ...
    def _shift_amount(self, x: Any) -> N.ExprNode: ...
    def _index(self, index: Any) -> N.ExprNode: ...
    def assign(self, var: Variable, value: Any) -> None: ...
    def store(self, buf: Any, index: Any, value: Any) -> None: ...
    def atomic(self, op: str, buf: Any, index: Any, value: Any, comparand: Any = None,
               relaxed: bool = False) -> Value: ...


class Value:
    """An expression being built. Operators build IR; `bool(value)` is an error."""

    __slots__ = ("_b", "_expr", "_scope")

    def __init__(self, builder: Builder, expr: N.ExprNode, scope: _Scope | None = None):
        self._b = builder
        self._expr = expr
        # strict (decorated-kernel) mode: a value computed inside a block dies with it, so
        # `y = y * 2` inside `with vyre.if_(...)` cannot leak out as if it were an assignment
        self._scope = scope if scope is not None else builder._block_scope()

    @property
    def ty(self) -> ScalarType:
        return self._expr.ty

    @property
    def expr(self) -> N.ExprNode:
        if self._scope is not None and not self._scope.alive:
            raise BuildError(
                f"{self._scope.what} is used outside the block that declares it; a Python "
                "assignment inside a block does not change a kernel variable: declare it "
                "before the block with let() and assign it inside with .set(...) or +="
            )
        return self._expr

    def __repr__(self) -> str:
        return f"<vyre Value {self.ty}: {self._expr.kind}>"

    # print(v), str(v), f"{v}" would show this proxy once, while the kernel is built (not
    # the values on the device): an error naming vyre.print. repr() stays for debuggers.
    def __str__(self) -> str:
        raise _no_host_print("a kernel value")

    def __format__(self, spec: str) -> str:
        raise _no_host_print("a kernel value")

    def __bool__(self) -> bool:
        if _user_line().startswith("assert"):
            raise BuildError(
                "Python's assert on a kernel value would test it once, while the kernel is "
                "built; check it on the device with vyre.assert_(cond, \"message {}\", value) "
                "(k.assert_(...) with the builder): a failed one raises DispatchError naming "
                "the invocation and the values", user_site())
        raise BuildError(
            "a kernel value has no Python truth value here: plain if/while/and/or/not/min()"
            "/max() on kernel values are compiled only in the body of a @vyre.kernel "
            "function whose source Python can read (not in a helper function it calls, a "
            "Builder program, or a kernel defined in a REPL or by exec); here use "
            "`with k.if_(cond):` / "
            "`with vyre.if_(cond):`, a while_ loop, or select(cond, a, b) instead of Python "
            "if/while/and/or/not, min_/max_ instead of min()/max(), and vyre.assert_(cond) "
            "instead of assert. If you combined "
            "comparisons with & or |, parenthesise each one: `(i < n) & (j < n)` (Python "
            "binds & and | tighter than <, so `i < n & j < n` means the chained comparison "
            "`i < (n & j) < n`)",
            user_site(),
        )

    def __index__(self) -> int:
        raise BuildError(
            "a kernel value cannot be used as a Python int (int(v), a list index, range() "
            "inside enumerate / zip / reversed / a comprehension): loop on the device with "
            "`for j in range(n):` itself in a kernel's body (a negative step counts down: "
            "`range(n - 1, -1, -1)`), vyre.range(...) or k.for_range(...); convert a value "
            "with v.cast(vyre.i32)",
            user_site(),
        )

    __hash__ = None  # type: ignore[assignment]

    def __iter__(self) -> Iterator[Any]:
        raise BuildError("a kernel value is one scalar and cannot be iterated; loop on the "
                         "device with `for i in vyre.range(n):`")

    # Python operators and builtins with no IR operation: an error naming what to write,
    # never Python's bare TypeError from deep inside the trace
    def _no(self, what: str, fix: str) -> BuildError:
        return BuildError(f"{what} is not defined on kernel values; write {fix}")

    def __pow__(self, o: Any) -> Value:
        raise self._no("**", "v * v (a square), v * v * v, ... or vyre.pow_(x, y) for floats")

    def __rpow__(self, o: Any) -> Value:
        raise self._no("**", "vyre.pow_(x, y) (floats) or repeated *")

    def __round__(self, ndigits: Any = None) -> Value:
        raise self._no("round()", "vyre.round_(v) (to nearest, ties to even), vyre.floor, "
                       "vyre.ceil or vyre.trunc")

    def __float__(self) -> float:  # float(v), and math.sqrt(v) & co, which call it
        raise self._no("float() and the math module (they compute on the host)",
                       "vyre.sqrt, vyre.exp, vyre.sin, ... for math, v.cast(f32) to convert")

    def __floor__(self) -> Value:
        raise self._no("math.floor()", "vyre.floor(v)")

    def __ceil__(self) -> Value:
        raise self._no("math.ceil()", "vyre.ceil(v)")

    def __trunc__(self) -> Value:
        raise self._no("math.trunc()", "vyre.trunc(v)")

    def __divmod__(self, o: Any) -> Value:
        raise self._no("divmod()", "q = a // b and r = a % b (integers)")

    def __rdivmod__(self, o: Any) -> Value:
        raise self._no("divmod()", "q = a // b and r = a % b (integers)")

    def __matmul__(self, o: Any) -> Value:
        raise self._no("@ (matrix product)", "a * b for scalars, or a loop over "
                       "vyre.range(n) summing a[i] * b[i] into a vyre.let")

    def __rmatmul__(self, o: Any) -> Value:
        raise self._no("@ (matrix product)", "a * b for scalars")

    def __array_ufunc__(self, ufunc: Any, method: str, *inputs: Any, **kwargs: Any) -> Any:
        """NumPy scalars meet kernel values through here: `np.float32(2) * v` is the
        operator (a literal of v's type); any other NumPy function is an error naming the
        vyre function to use (NumPy would compute on the host, not in the kernel)."""
        pair = _UFUNC_OPERATORS.get(ufunc.__name__)
        if method == "__call__" and not kwargs and pair is not None and len(inputs) == 2:
            # NumPy may hand the scalar over as a 0-d array: back to the scalar (a literal)
            a, b = (x[()] if isinstance(x, np.ndarray) and x.ndim == 0 else x for x in inputs)
            if isinstance(a, Value):
                return getattr(a, f"__{pair[0]}__")(b)
            return getattr(b, f"__{pair[1]}__")(a)
        name = ufunc.__name__
        fix = _NUMPY_FIX.get(name, f"the vyre function (vyre.{name}, if it exists; see "
                                   "docs/guide.md)")
        raise BuildError(f"numpy.{name} cannot run on a kernel value (NumPy computes on "
                         f"host arrays while the kernel is traced); use {fix}")

    # -- helpers
    def _other(self, other: Any, op: str) -> N.ExprNode:
        return self._b._coerce(other, self.ty, f"right operand of {op}")

    def _bin(self, op: str, other: Any, swap: bool = False) -> Value:
        a = self.expr
        b = self._other(other, op)
        if swap:
            a, b = b, a
        try:
            return Value(self._b, _binary(op, a, b))
        except BuildError as exc:
            hints = [v._literal_hint() for v in (self, other) if isinstance(v, Variable)]
            hint = next((h for h in hints if h), "")
            raise BuildError(f"{exc.detail}{hint}") from None

    def _literal_hint(self) -> str:
        return ""

    # -- arithmetic
    def __add__(self, o: Any) -> Value: return self._bin("add", o)
    def __radd__(self, o: Any) -> Value: return self._bin("add", o, True)
    def __sub__(self, o: Any) -> Value: return self._bin("sub", o)
    def __rsub__(self, o: Any) -> Value: return self._bin("sub", o, True)
    def __mul__(self, o: Any) -> Value: return self._bin("mul", o)
    def __rmul__(self, o: Any) -> Value: return self._bin("mul", o, True)
    def __truediv__(self, o: Any) -> Value: return self._bin("div", o)
    def __rtruediv__(self, o: Any) -> Value: return self._bin("div", o, True)
    def __floordiv__(self, o: Any) -> Value:
        if self.ty.is_float:
            raise BuildError("// is integer division; use / for floats (or floor(a / b))")
        return self._bin("div", o)
    def __rfloordiv__(self, o: Any) -> Value:
        if self.ty.is_float:
            raise BuildError("// is integer division; use / for floats (or floor(a / b))")
        return self._bin("div", o, True)
    def __mod__(self, o: Any) -> Value: return self._bin("rem", o)
    def __rmod__(self, o: Any) -> Value: return self._bin("rem", o, True)
    def __and__(self, o: Any) -> Value:
        return self._bin("logical_and" if self.ty is BOOL else "and", o)
    def __rand__(self, o: Any) -> Value:
        return self._bin("logical_and" if self.ty is BOOL else "and", o, True)
    def __or__(self, o: Any) -> Value:
        return self._bin("logical_or" if self.ty is BOOL else "or", o)
    def __ror__(self, o: Any) -> Value:
        return self._bin("logical_or" if self.ty is BOOL else "or", o, True)
    def __xor__(self, o: Any) -> Value:
        return self._bin("ne" if self.ty is BOOL else "xor", o)
    def __rxor__(self, o: Any) -> Value:
        return self._bin("ne" if self.ty is BOOL else "xor", o, True)

    def __lshift__(self, o: Any) -> Value:
        return Value(self._b, _binary("shl", self.expr, self._b._shift_amount(o)))

    def __rshift__(self, o: Any) -> Value:
        return Value(self._b, _binary("shr", self.expr, self._b._shift_amount(o)))

    def __neg__(self) -> Value:
        return Value(self._b, _unary("neg", self.expr))

    def __pos__(self) -> Value:
        return self

    def __invert__(self) -> Value:
        return Value(self._b, _unary("not" if self.ty is BOOL else "bit_not", self.expr))

    def __abs__(self) -> Value:
        return Value(self._b, _call("abs", self.expr))

    # -- comparisons
    def __lt__(self, o: Any) -> Value: return self._bin("lt", o)
    def __le__(self, o: Any) -> Value: return self._bin("le", o)
    def __gt__(self, o: Any) -> Value: return self._bin("gt", o)
    def __ge__(self, o: Any) -> Value: return self._bin("ge", o)
    def __eq__(self, o: Any) -> Value: return self._bin("eq", o)  # type: ignore[override]
    def __ne__(self, o: Any) -> Value: return self._bin("ne", o)  # type: ignore[override]

    # -- conversions
    def cast(self, ty: ScalarType) -> Value:
        """Value conversion (float->int truncates and saturates, NaN -> 0). To an 8/16-bit
        type: the value that type holds, as its 32-bit integer (`x.cast(u8)` is the u32
        0..255 that storing x into a u8 buffer keeps)."""
        ty = _scalar_type(ty, "cast")
        return Value(self._b, _promote(N.Cast(a=self.expr, ty=ty)))

    def bitcast(self, ty: ScalarType) -> Value:
        """Reinterpret the bits as `ty` (same width)."""
        ty = _scalar_type(ty, "bitcast")
        if ty.bits != self.ty.bits or BOOL in (ty, self.ty):
            hint = (f" (a kernel value is never {ty}: use .cast({ty}) to keep the low bits)"
                    if ty.is_narrow else "")
            raise BuildError(f"bitcast needs two types of one width; {self.ty} -> {ty} is "
                             f"not{hint}")
        return Value(self._b, N.Bitcast(a=self.expr, ty=ty))


class Variable(Value):
    """A mutable local (from k.let). Assign with `v.set(x)` or augmented operators."""

    __slots__ = ("literal", "name", "site")

    def __init__(self, builder: Builder, name: str, ty: ScalarType, scope: _Scope,
                 literal: Any = None, site: str | None = None):
        super().__init__(builder, N.Var(name=name, ty=ty), scope)
        self.name = name
        self.literal = literal  # the Python number it was declared from (its type guessed)
        self.site = site

    def _literal_hint(self) -> str:
        if self.literal is None:
            return ""
        where = f" at {self.site}" if self.site else ""
        return (
            f". Note: {self.name!r} is {self.ty} because let({self.literal!r}){where} made a "
            f"Python {type(self.literal).__name__} a {self.ty} literal; declare it with the "
            f"type you mean, e.g. let({self.literal!r}, ty=f64) or let(lit({self.literal!r}, f64))"
        )

    def set(self, value: Any) -> None:
        """Assign `value` (of the variable's type) to the variable."""
        self._b.assign(self, value)

    def _aug(self, op: str, o: Any) -> Variable:
        self._b.assign(self, self._bin(op, o))
        return self

    def __iadd__(self, o: Any) -> Variable: return self._aug("add", o)
    def __isub__(self, o: Any) -> Variable: return self._aug("sub", o)
    def __imul__(self, o: Any) -> Variable: return self._aug("mul", o)
    def __itruediv__(self, o: Any) -> Variable: return self._aug("div", o)
    def __imod__(self, o: Any) -> Variable: return self._aug("rem", o)

    def __ifloordiv__(self, o: Any) -> Variable:
        self._b.assign(self, self // o)
        return self

    def __iand__(self, o: Any) -> Variable:
        return self._aug("logical_and" if self.ty is BOOL else "and", o)

    def __ior__(self, o: Any) -> Variable:
        return self._aug("logical_or" if self.ty is BOOL else "or", o)

    def __ixor__(self, o: Any) -> Variable:
        return self._aug("ne" if self.ty is BOOL else "xor", o)

    def __ilshift__(self, o: Any) -> Variable:
        self._b.assign(self, self << o)
        return self

    def __irshift__(self, o: Any) -> Variable:
        self._b.assign(self, self >> o)
        return self



# NumPy ufuncs that are Python operators: (method when the Value is on the left, on the right)
_UFUNC_OPERATORS: dict[str, tuple[str, str]] = {
    "add": ("add", "radd"), "subtract": ("sub", "rsub"), "multiply": ("mul", "rmul"),
    "true_divide": ("truediv", "rtruediv"), "floor_divide": ("floordiv", "rfloordiv"),
    "remainder": ("mod", "rmod"), "bitwise_and": ("and", "rand"),
    "bitwise_or": ("or", "ror"), "bitwise_xor": ("xor", "rxor"),
    "less": ("lt", "gt"), "less_equal": ("le", "ge"), "greater": ("gt", "lt"),
    "greater_equal": ("ge", "le"), "equal": ("eq", "eq"), "not_equal": ("ne", "ne"),
}
_NUMPY_FIX: dict[str, str] = {
    "power": "v * v (a square) or vyre.pow_(x, y) (floats)", "square": "v * v",
    "absolute": "vyre.abs_(v)", "fabs": "vyre.abs_(v)", "rint": "vyre.round_(v)",
    "minimum": "vyre.min_(a, b)", "maximum": "vyre.max_(a, b)", "fmin": "vyre.min_(a, b)",
    "fmax": "vyre.max_(a, b)", "arctan2": "vyre.atan2(y, x)", "negative": "-v",
    "matmul": "a * b for scalars", "divmod": "a // b and a % b",
    **{f: f"vyre.{f}(v)" for f in ("sqrt", "exp", "exp2", "log", "log2", "sin", "cos", "tan",
                                   "tanh", "floor", "ceil", "trunc")},
}
