"""The builder DSL: write kernels that read like kernels.

    k = ProgramBuilder("saxpy", workgroup_size=256)
    x, y = k.buffer("x", f32), k.buffer("y", f32, "read_write")
    a = k.param("a", f32)
    i = k.global_linear_id()
    with k.if_(i < y.length()):
        y[i] = a * x[i] + y[i]
    program = k.build()

Python numbers and numpy scalars become literals of the other operand's type; every type
rule of the IR is checked as the kernel is written, so misuse fails at build time with a
message naming the fix. Elements of 8/16-bit buffers are read as the 32-bit integer of
their signedness (u8/u16 -> u32, i8/i16 -> i32) and a u32 or i32 stored into one keeps
its low bits (docs/IR.md "Narrow integers"), so a kernel value is never 8 or 16 bits. This module must never evaluate a kernel or know about backends.
"""

from __future__ import annotations

import contextlib
import functools
import linecache
import math
import os
import re
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, cast

import numpy as np

from .errors import InvalidProgram
from .ir import nodes as N
from .ir import ops
from .ir.sites import remember as remember_sites
from .ir.types import ScalarType, normalise_literal
from .ir.validate import MAX_DEPTH, MAX_NAME_LEN, is_valid_name, validate

U32 = ScalarType.U32
BOOL = ScalarType.BOOL


class BuildError(InvalidProgram):
    """A kernel was written wrongly (raised while building, before any backend sees it).

    `site` is the user's source line ("file.py:12") where it is known.
    """

    def __init__(self, message: str, site: str | None = None) -> None:
        self.site = site if site is not None else user_site()
        self.detail = message
        super().__init__(message if self.site is None else f"{self.site}: {message}")


# Frames in these files are vyre's own; a "site" is the first frame outside them, i.e. the
# line of the user's kernel (or program factory) that made the node.
_HERE = os.path.abspath(__file__)
_INTERNAL_FILES = frozenset({
    _HERE, __file__, str(contextlib.__file__),
    *(f.replace("builder.py", mod) for f in (_HERE, __file__)
      for mod in ("kernel.py", "kernel_flow.py", "kernel_ast.py", "shapes.py")),
})


def _user_frame() -> Any:
    f = sys._getframe(1)
    while f is not None and f.f_code.co_filename in _INTERNAL_FILES:
        f = f.f_back  # type: ignore[assignment]
    return f


def user_site() -> str | None:
    """"file.py:LINE" of the user code currently building a node, or None."""
    f = _user_frame()
    return None if f is None else f"{f.f_code.co_filename}:{f.f_lineno}"


_ASSIGNED = re.compile(r"\s*([A-Za-z_][A-Za-z0-9_]*)\s*(?::[^=]*)?=(?!=)")
_WITH_AS = re.compile(r".*\bas\s+([A-Za-z_][A-Za-z0-9_]*)\s*:")
_IR_PATH = re.compile(r"body(?:\[\d+\](?:\.(?:then|orelse|body)\[\d+\])*)(?:\.[a-z_]+)*")
_FOR_IN = re.compile(r"\s*for\s+([A-Za-z_][A-Za-z0-9_]*)\s+in\b")


def user_name(pattern: re.Pattern[str] = _ASSIGNED) -> str | None:
    """The Python name the user's current line binds (`acc = k.let(0)` -> "acc"), or None.

    Only used to give IR locals the user's names, so generated code and error messages
    read like the source; a line that does not match keeps a generated name.
    """
    f = _user_frame()
    if f is None:
        return None
    m = pattern.match(linecache.getline(f.f_code.co_filename, f.f_lineno))
    return m.group(1) if m else None


class _Scope:
    __slots__ = ("alive", "what")

    def __init__(self, what: str) -> None:
        self.alive = True
        self.what = what


Number = int | float | bool | np.generic


def _is_number(x: object) -> bool:
    return isinstance(x, (int, float, bool, np.generic)) and not isinstance(x, Value)


def _literal_type(x: Any) -> ScalarType:
    if isinstance(x, (bool, np.bool_)):
        return BOOL
    if isinstance(x, np.generic):
        return ScalarType.from_numpy(x.dtype).promoted  # (np.uint8(7): a u32 literal)
    if isinstance(x, int):
        return ScalarType.I32
    if isinstance(x, float):
        return ScalarType.F32
    raise BuildError(f"{x!r} ({type(x).__name__}) cannot be used in a kernel")


def _user_line() -> str:
    """The stripped source line of the user code building a node ("" if unknown)."""
    f = _user_frame()
    return "" if f is None else linecache.getline(f.f_code.co_filename, f.f_lineno).strip()


def _no_host_print(what: str) -> BuildError:
    return BuildError(
        f"{what} cannot be printed or formatted by Python: the kernel is only being built, "
        "so this would show a placeholder, not a value. Print on the device with "
        "vyre.print(\"x = {}\", x) (k.print(...) with the builder): each invocation's "
        "output is printed after the dispatch, in invocation order; repr(v) shows what the "
        "placeholder is", user_site())


def _const(x: Any, ty: ScalarType) -> N.Const:
    try:
        return N.Const(ty=ty, value=normalise_literal(x, ty))
    except ValueError as exc:
        raise BuildError(f"literal {x!r} as {ty}: {exc}") from None


class Value:
    """An expression being built. Operators build IR; `bool(value)` is an error."""

    __slots__ = ("_b", "_expr", "_scope")

    def __init__(self, builder: ProgramBuilder, expr: N.ExprNode, scope: _Scope | None = None):
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
            "ProgramBuilder program, or a kernel defined in a REPL or by exec); here use "
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

    def __init__(self, builder: ProgramBuilder, name: str, ty: ScalarType, scope: _Scope,
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


class BufferRef:
    """A storage buffer or workgroup array: index to load, assign to store, atomics. With a
    declared shape (vyre.shapes), `C[i, j]` indexes it row-major and `C.shape` gives its
    extents; `C.flat[k]` is the flat element k either way."""

    def __init__(self, builder: ProgramBuilder, name: str, ty: ScalarType, access: str,
                 dims: tuple[Any, ...] | None = None):
        self._b = builder
        self.name = name
        self.ty = ty
        self.access = access
        self.dims = dims  # the declared shape (ints, u32/i32 Values, a leading None), or None

    @property
    def shape(self) -> tuple[Any, ...]:
        """The declared extents (ints or kernel values; a None first extent as the rows the
        bound length holds, a u32 value)."""
        if self.dims is None:
            raise BuildError(f"buffer {self.name!r} declares no shape; use "
                             f"{self.name}.length() for its element count")
        out: list[Any] = []
        for n in self.dims:
            if n is None:
                rest: Any = 1
                for m in self.dims[1:]:
                    rest = rest * m
                n = self.length() // rest
            out.append(n)
        return tuple(out)

    @property
    def flat(self) -> _FlatView:
        """`C.flat[k]`: element k of the buffer in row-major order, whatever its shape."""
        return _FlatView(self)

    def _element(self, index: Any) -> N.ExprNode:
        """The flat u32 index of `self[index]` (a tuple on a shaped buffer)."""
        from .shapes import flat_index

        if isinstance(index, tuple):
            return flat_index(self, index)
        if self.dims is not None and len(self.dims) > 1:
            raise BuildError(
                f"{self.name}[...] with one index, but {self.name!r} has {len(self.dims)} axes; "
                f"write {self.name}[{', '.join('ijklmn'[:len(self.dims)])}] (row-major, like "
                f"NumPy), or {self.name}.flat[k] for the flat element k")
        if self.dims is not None:
            return flat_index(self, (index,))
        return self._b._index(index)

    def __repr__(self) -> str:
        return f"<vyre buffer {self.name}: {self.ty} {self.access}>"

    def __str__(self) -> str:
        raise _no_host_print(f"buffer {self.name!r} (print its elements)")

    def __format__(self, spec: str) -> str:
        raise _no_host_print(f"buffer {self.name!r} (print its elements)")

    def __getitem__(self, index: Any) -> Value:
        if self.access == "write":
            raise BuildError(
                f"buffer {self.name!r} is declared 'write' (write-only) and cannot be loaded; "
                "declare it 'read_write' to read it back"
            )
        return Value(self._b, _promote(
            N.Load(buffer=self.name, index=self._element(index), ty=self.ty)))

    def __setitem__(self, index: Any, value: Any) -> None:
        self._b.store(self, index, value)

    def length(self) -> Value:
        """Number of elements (as bound for buffers; the declared count for arrays), u32."""
        return Value(self._b, N.Length(buffer=self.name))

    def __len__(self) -> int:
        raise BuildError(f"use {self.name}.length() inside a kernel, not len()")

    def __bool__(self) -> bool:  # (else Python would ask __len__, whose error names len())
        raise BuildError(f"a buffer has no truth value in a kernel; test its element count: "
                         f"`if {self.name}.length() > 0:`")

    # without these, `for v in buf` / `sum(buf)` / `v in buf` would index 0, 1, 2, ...
    # forever through __getitem__ (Python's old iteration protocol): a hang that eats memory
    def __iter__(self) -> Iterator[Value]:
        raise BuildError(
            f"a buffer cannot be iterated (nor summed with sum()) while tracing: loop on "
            f"the device with `for i in vyre.range({self.name}.length()):` and use "
            f"{self.name}[i] (accumulate into a vyre.let)"
        )

    def __contains__(self, item: Any) -> bool:
        raise BuildError(
            f"`in {self.name}` would search the buffer on the host; loop on the device with "
            f"`for i in vyre.range({self.name}.length()):` and compare {self.name}[i]"
        )

    def _atomic(self, op: str, index: Any, value: Any, comparand: Any = None,
                relaxed: bool = False) -> Value:
        return self._b.atomic(op, self, index, value, comparand, relaxed)

    def atomic_add(self, index: Any, value: Any) -> Value:
        """Atomically add `value` into element `index`; returns the old value.

        On f32 and f64, when the old value is never used, the adds are order-independent:
        summed exactly and rounded once when the dispatch ends (a workgroup array: at the
        next barrier), the same bits on every run and backend; nothing else in the program
        may then load, store or atomically update such a storage buffer. Using the old value
        makes an f32 add order-dependent; an f64 add exists only order-independent."""
        return self._atomic("add", index, value)

    def atomic_add_relaxed(self, index: Any, value: Any) -> Value:
        """The hardware's f32 atomic add: faster, but a float sum's bits depend on the order
        the invocations ran in (for integer buffers, the same as atomic_add)."""
        return self._atomic("add", index, value, relaxed=True)

    def atomic_min(self, index: Any, value: Any) -> Value:
        """Atomically min `value` into element `index`; returns the old value."""
        return self._atomic("min", index, value)

    def atomic_max(self, index: Any, value: Any) -> Value:
        """Atomically max `value` into element `index`; returns the old value."""
        return self._atomic("max", index, value)

    def atomic_and(self, index: Any, value: Any) -> Value:
        """Atomically and `value` into element `index`; returns the old value."""
        return self._atomic("and", index, value)

    def atomic_or(self, index: Any, value: Any) -> Value:
        """Atomically or `value` into element `index`; returns the old value."""
        return self._atomic("or", index, value)

    def atomic_xor(self, index: Any, value: Any) -> Value:
        """Atomically xor `value` into element `index`; returns the old value."""
        return self._atomic("xor", index, value)


    def atomic_exchange(self, index: Any, value: Any) -> Value:
        """Atomically store `value` at `index`; returns the old value."""
        return self._atomic("exchange", index, value)

    def atomic_compare_exchange(self, index: Any, compare: Any, value: Any) -> Value:
        """Store `value` if the element equals `compare`; returns the old value."""
        return self._atomic("compare_exchange", index, value, compare)


class _FlatView:
    """`buf.flat`: buf indexed by one flat element index, whatever its declared shape."""

    def __init__(self, buf: BufferRef) -> None:
        self._buf = buf

    def __getitem__(self, index: Any) -> Value:
        buf = self._buf
        if buf.access == "write":
            return buf[index]  # (the write-only error)
        b = buf._b
        return Value(b, _promote(N.Load(buffer=buf.name, index=b._index(index), ty=buf.ty)))

    def __setitem__(self, index: Any, value: Any) -> None:
        self._buf._b.store(self._buf, _Flat(index), value)


class _Flat:
    """An index that is already flat (from `buf.flat[k]`)."""

    __slots__ = ("index",)

    def __init__(self, index: Any) -> None:
        self.index = index


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


# ------------------------------------------------------------------ typing rules


def _binary(op: str, a: N.ExprNode, b: N.ExprNode) -> N.Binary:
    ta, tb = a.ty, b.ty
    if op in N.SHIFT_OPS:
        if not ta.is_int:
            raise BuildError(f"{op} needs an integer left operand, got {ta}")
        return N.Binary(op=cast(N.BinaryOp, op), a=a, b=b, ty=ta)
    if ta != tb:
        raise BuildError(
            f"{op} on {ta} and {tb}: both operands must have one type; "
            f"convert one with .cast({ta}) or .cast({tb})"
        )
    if op in N.LOGICAL_OPS:
        if ta is not BOOL:
            raise BuildError(f"{op} needs bool operands, got {ta}")
        return N.Binary(op=cast(N.BinaryOp, op), a=a, b=b, ty=BOOL)
    if op in N.COMPARISON_OPS:
        if ta is BOOL and op not in ("eq", "ne"):
            raise BuildError(f"{op} is not defined on bool; compare numbers")
        return N.Binary(op=cast(N.BinaryOp, op), a=a, b=b, ty=BOOL)
    if op in N.BITWISE_OPS:
        if not ta.is_int:
            raise BuildError(f"bitwise {op} needs integers, got {ta}; bitcast floats first")
        return N.Binary(op=cast(N.BinaryOp, op), a=a, b=b, ty=ta)
    if not ta.is_numeric:
        raise BuildError(f"{op} needs numbers, got {ta}")
    return N.Binary(op=cast(N.BinaryOp, op), a=a, b=b, ty=ta)


def _unary(op: str, a: N.ExprNode) -> N.Unary:
    t = a.ty
    if op == "neg" and not (t.is_float or t.is_signed):
        raise BuildError(f"negation needs a signed or float value, got {t}; use 0 - x to wrap")
    if op == "bit_not" and not t.is_int:
        raise BuildError(f"~ needs an integer or bool, got {t}")
    if op == "not" and t is not BOOL:
        raise BuildError(f"logical not needs bool, got {t}")
    return N.Unary(op=cast(N.UnaryOp, op), a=a, ty=t)


def _call(fn: str, *args: N.ExprNode) -> N.Call:
    rec = ops.CALLS[fn]
    if rec.signature is not None:  # fixed operand types (the packed dot products)
        want, result = rec.signature
        got = tuple(a.ty for a in args)
        if got != want:
            raise BuildError(
                f"{fn} takes ({', '.join(map(str, want))}), got ({', '.join(map(str, got))}); "
                "pass the packed bytes as u32 (x.bitcast(u32) for an i32) and the "
                f"accumulator as {result} (.cast / .bitcast)")
        return N.Call(fn=cast(N.CallFn, fn), args=tuple(args), ty=result)
    t = args[0].ty
    for x in args[1:]:
        if x.ty != t:
            raise BuildError(f"{fn} arguments must share one type, got {[a.ty for a in args]}")
    if rec.float_only and not t.is_float:
        raise BuildError(f"{fn} needs a float argument, got {t}; cast with .cast(f32)")
    if not t.is_numeric:
        raise BuildError(f"{fn} needs numbers, got {t}")
    if len(args) != rec.arity:
        raise BuildError(f"{fn} takes {rec.arity} arguments, got {len(args)}")
    return N.Call(fn=cast(N.CallFn, fn), args=tuple(args), ty=t)


# ------------------------------------------------------------------ the builder


def _promote(e: N.ExprNode) -> N.ExprNode:
    """An 8/16-bit expression as its 32-bit integer (exact: zero- or sign-extended); any
    other expression as it is. Kernel values are never narrow (docs/IR.md)."""
    t = e.ty
    return N.Cast(a=e, ty=t.promoted) if t.is_narrow else e


def _narrowed(e: N.ExprNode, ty: ScalarType, name: str) -> N.ExprNode:
    """The value stored into an 8/16-bit buffer of type `ty`: a 32-bit integer keeps its
    low bits (an explicit Cast in the IR); a value just promoted from `ty` is unwrapped."""
    if isinstance(e, N.Cast) and e.a.ty is ty:
        return e.a
    if e.ty in (ScalarType.I32, U32):
        return N.Cast(a=e, ty=ty)
    if e.ty is ty:  # a literal
        return e
    raise BuildError(
        f"cannot store a {e.ty} into {name!r} ({ty}); a {ty} element is stored from an i32 "
        f"or u32 (its low {ty.bits} bits): cast the value with .cast({ty.promoted}) (a float: "
        f".cast({ty}) saturates to the {ty} range)"
    )


def _scalar_type(ty: Any, name: object) -> ScalarType:
    try:
        return ScalarType(ty)
    except ValueError:
        raise BuildError(
            f"{name!r}: {ty!r} is not a vyre element type; use one of "
            f"{', '.join('vyre.' + t.value for t in ScalarType)}"
        ) from None


class _Control:
    """A control block (`if_`, `else_`, `while_`, `for_range`) made but not yet entered.

    Python runs `k.if_(c)` without `with` as a call whose result is dropped: nothing would
    be recorded and the indented code would run unconditionally. Every one made is kept
    until entered, and `build()` refuses a program with any left over.
    """

    __slots__ = ("_b", "_cm", "_entered", "_fix", "_site")

    def __init__(self, builder: ProgramBuilder, fix: str, cm: Any) -> None:
        self._b = builder
        self._cm = cm
        self._fix = fix
        self._site = user_site()
        self._entered = False
        builder._unentered[id(self)] = self

    def __enter__(self) -> Any:
        if self._entered:
            raise BuildError(f"a control block is entered once; write a new {self._fix}")
        self._entered = True
        self._b._unentered.pop(id(self), None)
        return self._cm.__enter__()

    def __exit__(self, *exc: Any) -> Any:
        return self._cm.__exit__(*exc)

    def error(self) -> BuildError:
        return BuildError(
            f"a control block was made but never entered, so it does nothing (the code meant "
            f"for its block ran unconditionally, or not at all); write {self._fix}", self._site
        )


def _tracked(fix: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Make a control-block method return a `_Control` (see there); `fix` is the spelling."""
    def wrap(method: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(method)
        def control(self: ProgramBuilder, *args: Any, **kwargs: Any) -> _Control:
            return _Control(self, fix, method(self, *args, **kwargs))
        return control
    return wrap


class ProgramBuilder:
    """Builds one Program; see the module docstring."""

    @property
    def kinds(self) -> tuple[type[BuildError], type[Value]]:
        """(BuildError, Value): for vyre.shapes, which the builder imports and which
        therefore never imports the builder."""
        return BuildError, Value

    def __init__(
        self, name: str, workgroup_size: int | tuple[int, ...] = 64, strict_scopes: bool = False
    ) -> None:
        """`strict_scopes`: every value computed inside a block dies with the block (the
        decorator's mode: catches a Python rebinding mistaken for an assignment)."""
        if not isinstance(name, str):
            raise BuildError(f"the program name must be a str, got {type(name).__name__}")
        self.name = name
        ws = (workgroup_size,) if isinstance(workgroup_size, int) else tuple(workgroup_size)
        if not 1 <= len(ws) <= 3 or not all(
            isinstance(n, int) and not isinstance(n, bool) for n in ws
        ):
            raise BuildError(
                f"workgroup_size must be an int or a tuple of 1 to 3 ints, got {workgroup_size!r}"
            )
        x, y, z = [*ws, 1, 1][:3]
        self.workgroup_size: tuple[int, int, int] = (x, y, z)
        self._buffers: list[N.BufferDecl] = []
        self._params: list[N.ParamDecl] = []
        self._arrays: list[N.WorkgroupArray] = []
        self._refs: dict[str, BufferRef] = {}
        self._names: set[str] = set()
        self._blocks: list[list[N.StmtNode]] = [[]]
        self._scopes: list[list[_Scope]] = [[]]
        self._loop_depth = 0
        self._counter = 0
        self._built = False
        self._strict = strict_scopes
        self._block_scopes: list[_Scope] = []
        self._sites: dict[int, str] = {}  # id(statement node) -> user's "file:line"
        self._trace_errors: list[BuildError] = []  # found by the decorator's helpers
        self._unentered: dict[int, _Control] = {}  # control blocks made, not yet entered
        # how the kernel maps ids to data: "numpy" (global_index) and/or "xyz" (its own
        # global_id(axis >= 1) & co): how a tuple launch shape is read (vyre.shapes)
        self.index_orders: set[str] = set()
        self._let_names: set[str] = set()  # the locals that can change (let), not loop vars

    def _block_scope(self) -> _Scope | None:
        return self._block_scopes[-1] if self._strict and self._block_scopes else None

    def _name_for(self, name: str | None, prefix: str, pattern: re.Pattern[str] = _ASSIGNED
                  ) -> str:
        """`name`, else the name the user's line binds (made unique), else a generated one."""
        if name:
            return name
        guess = user_name(pattern)
        if guess is None or not is_valid_name(guess):
            return self._fresh(prefix)
        cand, n = guess, 1
        while cand in self._names:
            cand, n = f"{guess}_{n}", n + 1
        return cand

    # -- declarations
    def _declare_name(self, name: str, what: str) -> None:
        if not is_valid_name(name):
            raise BuildError(
                f"{what} name {name!r} must be an ASCII identifier ([A-Za-z_][A-Za-z0-9_]*, "
                f"at most {MAX_NAME_LEN} characters)"
            )
        if name in self._names:
            raise BuildError(f"{what} name {name!r} is already declared in {self.name!r}")
        self._names.add(name)

    def buffer(
        self, name: str, ty: ScalarType, access: str = "read", count: int | None = None,
        shape: tuple[Any, ...] | None = None,
    ) -> BufferRef:
        """Declare a storage buffer (access: read, write or read_write). `shape`: its
        extents, row-major like NumPy (ints, u32/i32 params, a leading None: as many rows
        as bound); an all-int shape fixes the count, and `buf[i, j]` indexes it."""
        ty = _scalar_type(ty, name)
        if access not in ("read", "write", "read_write"):
            raise BuildError(f"buffer {name!r}: access must be read, write or read_write")
        if count is not None and (isinstance(count, bool) or not isinstance(count, int) or count < 0):
            raise BuildError(f"buffer {name!r}: a fixed count must be an int >= 0, got {count!r}")
        dims = None
        if shape is not None:
            from .shapes import check_shape, static_count

            dims = check_shape(name, shape, self)
            fixed = static_count(dims)
            if count is not None and fixed is not None and count != fixed:
                raise BuildError(f"buffer {name!r}: count={count} but shape {tuple(shape)!r} "
                                 f"holds {fixed} elements; give one of them")
            count = fixed if fixed is not None else count
        self._declare_name(name, "buffer")
        self._buffers.append(
            N.BufferDecl(name=name, ty=ty, access=cast(N.Access, access), count=count)
        )
        ref = BufferRef(self, name, ty, access, dims)
        self._refs[name] = ref
        return ref

    def param(self, name: str, ty: ScalarType) -> Value:
        """Declare a scalar parameter, set per dispatch in DispatchConfig(params=...)."""
        ty = _scalar_type(ty, name)
        if ty.is_narrow:
            raise BuildError(f"param {name!r}: a param cannot be {ty} (8/16-bit integers are "
                             f"storage types); declare it {ty.promoted}")
        self._declare_name(name, "param")
        self._params.append(N.ParamDecl(name=name, ty=ty))
        return Value(self, N.Param(name=name, ty=ty))

    def shared(self, name: str, ty: ScalarType, count: int | tuple[int, ...]) -> BufferRef:
        """Declare a workgroup (shared) array of `count` elements, or of a shape (a tuple
        of ints, row-major: `tile[i, j]` indexes it)."""
        ty = _scalar_type(ty, name)
        dims = None
        if isinstance(count, tuple):
            from .shapes import check_shape, static_count

            dims = check_shape(name, count, self)
            fixed = static_count(dims)
            if fixed is None:
                raise BuildError(f"workgroup array {name!r}: its shape {count!r} must be all "
                                 "ints (a workgroup array's size is fixed at build time)")
            count = fixed
        if isinstance(count, bool) or not isinstance(count, int) or count < 1:
            raise BuildError(f"workgroup array {name!r}: count must be an int >= 1, got {count!r}")
        self._declare_name(name, "workgroup array")
        self._arrays.append(N.WorkgroupArray(name=name, ty=ty, count=count))
        ref = BufferRef(self, name, ty, "workgroup", dims)
        self._refs[name] = ref
        return ref

    # -- builtins
    def _builtin(self, name: str, axis: int) -> Value:
        if axis not in (0, 1, 2):
            raise BuildError(f"{name} axis must be 0, 1 or 2, got {axis}")
        return Value(self, N.Builtin(name=cast(N.BuiltinName, name), axis=axis))

    def global_id(self, axis: int = 0) -> Value:
        """This invocation's global id along `axis` (u32)."""
        return self._builtin("global_id", axis)

    def local_id(self, axis: int = 0) -> Value:
        """The id within the workgroup along `axis` (u32)."""
        return self._builtin("local_id", axis)

    def workgroup_id(self, axis: int = 0) -> Value:
        """The workgroup's id along `axis` (u32)."""
        return self._builtin("workgroup_id", axis)

    def num_workgroups(self, axis: int = 0) -> Value:
        """The grid's workgroup count along `axis` (u32)."""
        return self._builtin("num_workgroups", axis)


    def local_index(self) -> Value:
        """The flattened local invocation index (0 .. workgroup invocations - 1)."""
        return Value(self, N.Builtin(name="local_index", axis=0))

    def subgroup_size(self) -> Value:
        """The number of lanes of a subgroup (u32, uniform; the backend's, see `vyre probe`)."""
        return Value(self, N.Builtin(name="subgroup_size", axis=0))

    def subgroup_lane(self) -> Value:
        """This invocation's lane in its subgroup: local_index mod subgroup_size (u32)."""
        return Value(self, N.Builtin(name="subgroup_lane", axis=0))

    def global_index(self, ndim: int) -> tuple[Value, ...]:
        """This invocation's index in NumPy order over an `ndim`-axis launch: (i,), (row,
        col) = (global_id(1), global_id(0)), or (depth, row, col)."""
        from .shapes import global_index

        return global_index(self, ndim)

    def global_linear_id(self) -> Value:
        """gid.x + gid.y * (grid.x * wg.x): the element index for DispatchConfig.for_elements."""
        row = self.num_workgroups(0) * self.workgroup_size[0]
        return self.global_id(0) + self.global_id(1) * row

    def workgroup_linear_id(self) -> Value:
        """wid.x + wid.y * grid.x: the workgroup index for folded grids."""
        return self.workgroup_id(0) + self.workgroup_id(1) * self.num_workgroups(0)

    # -- coercion
    def _coerce(self, x: Any, ty: ScalarType | None, what: str) -> N.ExprNode:
        if isinstance(x, Value):
            if x._b is not self:
                raise BuildError(
                    f"{what} belongs to another ProgramBuilder ({x._b.name!r}); values "
                    "cannot be shared between programs"
                )
            return x.expr
        if _is_number(x):
            return _const(x, ty if ty is not None else _literal_type(x))
        raise BuildError(f"{what}: {x!r} ({type(x).__name__}) cannot be used in a kernel")

    def lit(self, x: Any, ty: ScalarType | None = None) -> Value:
        """A literal of type `ty` (default: i32 for int, f32 for float, bool); an 8/16-bit
        `ty` checks the range and gives its 32-bit integer (lit(255, u8) is a u32)."""
        t = _scalar_type(ty, "lit") if ty else _literal_type(x)
        c = _const(x, t)
        return Value(self, _const(c.value, t.promoted) if t.is_narrow else c)

    def _index(self, index: Any) -> N.ExprNode:
        e = self._coerce(index, U32, "index")
        if e.ty is ScalarType.I32:  # negative indices become huge: out of bounds, reads 0
            e = N.Bitcast(a=e, ty=U32)
        if e.ty is not U32:
            raise BuildError(f"an index must be u32 or i32, got {e.ty}; cast it")
        return e

    def _shift_amount(self, x: Any) -> N.ExprNode:
        e = self._coerce(x, U32, "shift amount")
        if e.ty is ScalarType.I32:
            e = N.Bitcast(a=e, ty=U32)
        if e.ty is not U32:
            raise BuildError(f"a shift amount must be u32, got {e.ty}")
        return e

    # -- statements
    def _emit(self, stmt: N.StmtNode, site: str | None = None) -> None:
        if self._built:
            raise BuildError(f"program {self.name!r} was already built; start a new builder")
        self._blocks[-1].append(stmt)
        site = site or user_site()
        if site:
            self._sites[id(stmt)] = site

    def _fresh(self, prefix: str) -> str:
        while True:
            self._counter += 1
            name = f"{prefix}{self._counter}"
            if name not in self._names:
                return name

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
        from .debug.fmt import check_format, print_format

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
    @contextmanager
    def _block(self) -> Iterator[list[N.StmtNode]]:
        if len(self._blocks) > MAX_DEPTH:  # refused here, before any deep recursion
            raise BuildError(
                f"control blocks nested more than {MAX_DEPTH} deep (the IR's limit); flatten "
                "them: combine conditions with & (`with vyre.if_((a) & (b)):`), use "
                "vyre.select, or move the inner work into a separate kernel"
            )
        block: list[N.StmtNode] = []
        self._blocks.append(block)
        self._scopes.append([])
        if self._strict:
            where = user_site()
            inner = _Scope(f"a value computed inside the block at {where}" if where
                           else "a value computed inside a block")
            self._block_scopes.append(inner)
            self._scopes[-1].append(inner)
        try:
            yield block
        finally:
            self._blocks.pop()
            if self._strict:
                self._block_scopes.pop()
            for s in self._scopes.pop():
                s.alive = False

    def _cond(self, cond: Any, what: str) -> N.ExprNode:
        e = self._coerce(cond, BOOL, what)
        if e.ty is not BOOL:
            raise BuildError(f"{what} must be bool, got {e.ty}; compare it, e.g. x != 0")
        return e

    @_tracked("`with vyre.if_(cond):` (or `with k.if_(cond):`) with the block indented "
              "under it")
    @contextmanager
    def if_(self, cond: Any) -> Iterator[None]:
        """`with k.if_(cond):` runs the block where the bool `cond` holds."""
        c = self._cond(cond, "if condition")
        site = user_site()
        with self._block() as body:
            yield
        self._emit(N.If(cond=c, then=tuple(body)), site)

    @_tracked("`with vyre.else_():` (or `with k.else_():`) directly after the if_ block")
    @contextmanager
    def else_(self) -> Iterator[None]:
        """Must directly follow a `with k.if_(...)` block."""
        block = self._blocks[-1]
        if not block or not isinstance(block[-1], N.If) or block[-1].orelse:
            raise BuildError("else_() must directly follow a `with k.if_(...)` block")
        last = block.pop()
        assert isinstance(last, N.If)
        try:
            with self._block() as body:
                yield
        finally:
            new = N.If(cond=last.cond, then=last.then, orelse=tuple(body))
            block.append(new)
            if id(last) in self._sites:
                self._sites[id(new)] = self._sites[id(last)]

    @_tracked("`for i in vyre.range(n):` (or `with k.for_range(n) as i:`)")
    @contextmanager
    def for_range(
        self, start: Any, end: Any = None, step: int = 1, ty: ScalarType | None = None,
        loop_name: str | None = None,
    ) -> Iterator[Value]:
        """`for i in range(start, end, step)`, as Python counts it (step: a nonzero int
        constant; a negative one counts down from `start` to just above `end`)."""
        if end is None:
            start, end = 0, start
        if isinstance(step, bool) or not isinstance(step, int) or step == 0:
            raise BuildError(
                f"a device loop's step must be a nonzero Python int (a build-time constant: "
                f"it decides whether the loop counts up or down), got {step!r}; for a step "
                "computed on the device write a while loop: `j = start`, `while j < end:`, "
                "..., `j += step`")
        t = _scalar_type(ty, "loop variable") if ty else None
        if t is None:
            for v in (start, end):
                if isinstance(v, Value):
                    t = v.ty
                    break
            else:
                t = U32
        if t not in (ScalarType.I32, U32):
            raise BuildError(f"a loop variable must be i32 or u32, got {t}")
        s = self._coerce(start, t, "loop start")
        e = self._coerce(end, t, "loop end")
        if s.ty != t or e.ty != t:
            raise BuildError(f"loop bounds must be {t}, got {s.ty} and {e.ty}; cast them")
        name = self._name_for(loop_name, "i", _WITH_AS)
        site = user_site()
        down = None
        if step < 0:  # the IR's For counts up: count the passes, and j = start - pass * k
            down = self._count_down(s, e, -step, t)
            s, e, t = _const(0, U32), down[1], U32
            name = self._fresh(f"{name}_pass")
        self._declare_name(name, "loop variable")
        scope = _Scope(f"loop variable {name!r}")
        self._loop_depth += 1
        try:
            with self._block() as body:
                var = Value(self, N.Var(name=name, ty=t), scope)
                yield var if down is None else down[0](var, scope)
        finally:
            self._loop_depth -= 1
            scope.alive = False
        self._emit(N.For(var=name, ty=t, start=s, end=e, step=1 if down else step,
                         body=tuple(body)), site)

    def _count_down(self, start: N.ExprNode, end: N.ExprNode, k: int, ty: ScalarType
                    ) -> tuple[Callable[[Value, _Scope], Value], N.ExprNode]:
        """`range(start, end, -k)` over a loop of passes 0, 1, ... counting up: (the loop
        variable of a pass, the number of passes). `start` is read once (a let), like a
        For's bounds; the count is exact for every start and end of an i32 or u32 loop
        (start - end, when positive, is below 2**32 as a u32)."""
        first = self.let(Value(self, start))
        last = Value(self, end)
        span = first - last
        if ty is ScalarType.I32:
            span = span.bitcast(U32)
        passes = select(first > last, (span - 1) // k + 1, self.lit(0, U32))

        def variable(p: Value, scope: _Scope) -> Value:
            back = p * k if ty is U32 else (p * k).bitcast(ScalarType.I32)
            return Value(self, (first - back).expr, scope)
        return variable, passes.expr

    @_tracked("`with vyre.while_(cond):` (or `with k.while_(cond):`) with the loop body "
              "indented under it")
    @contextmanager
    def while_(self, cond: Any) -> Iterator[None]:
        """Loop while `cond` (re-evaluated each iteration) holds; break_/continue_ inside."""
        c = self._cond(cond, "while condition")
        site = user_site()
        self._loop_depth += 1
        try:
            with self._block() as body:
                yield
        finally:
            self._loop_depth -= 1
        self._emit(N.While(cond=c, body=tuple(body)), site)

    # -- finish
    def build(self) -> N.Program:
        """The validated, immutable Program."""
        if len(self._blocks) != 1:
            raise BuildError("build() called inside an open block")
        if self._unentered:
            raise next(iter(self._unentered.values())).error()
        prog = N.Program(
            name=self.name,
            workgroup_size=self.workgroup_size,
            buffers=tuple(self._buffers),
            params=tuple(self._params),
            workgroup_arrays=tuple(self._arrays),
            body=tuple(self._blocks[0]),
        )
        try:
            validate(prog)
        except InvalidProgram as exc:
            raise self._located(prog, exc) from None
        self._built = True
        remember_sites(prog, self._sites)  # for diagnostics after the build (checked mode)
        return prog

    def _located(self, prog: N.Program, exc: InvalidProgram) -> InvalidProgram:
        """The validator's error at the user's source line of the failing statement (the
        IR path stays in `.node` for tools)."""
        if not exc.node:
            return exc
        path = exc.node.split(" ")[0]
        sites: dict[str, str] = {}

        def walk(stmts: tuple[N.StmtNode, ...], at: str) -> None:
            for i, st in enumerate(stmts):
                here = f"{at}[{i}]"
                if id(st) in self._sites:
                    sites[here] = self._sites[id(st)]
                for field in ("then", "orelse", "body"):
                    inner = getattr(st, field, None)
                    if isinstance(inner, tuple):
                        walk(inner, f"{here}.{field}")

        walk(prog.body, "body")
        best = max((p for p in sites if path == p or path.startswith(p + ".")), key=len,
                   default=None)
        message = str(exc).removeprefix(f"{exc.node}: ")
        if best is None:
            return exc

        def at_line(m: re.Match[str]) -> str:  # IR paths in the text -> the user's lines
            p = m.group(0)
            hit = max((q for q in sites if p == q or p.startswith(q + ".")), key=len, default=None)
            return f"line {sites[hit].rsplit(':', 1)[1]}" if hit else p

        message = _IR_PATH.sub(at_line, message)
        err = BuildError(f"{message} [IR node {exc.node}]", sites[best])
        err.node = exc.node
        return err


# ------------------------------------------------------------------ functions


def _args(*xs: Any) -> tuple[N.ExprNode, ...]:
    b = next((x._b for x in xs if isinstance(x, Value)), None)
    if b is None:
        raise BuildError("at least one argument must be a kernel value")
    ty = next(x.ty for x in xs if isinstance(x, Value))
    return tuple(b._coerce(x, ty, "argument") for x in xs)


def _fn(fn: str, *xs: Any) -> Value:
    sig = ops.CALLS[fn].signature
    if sig is not None:  # each operand a literal of its own fixed type
        b = next((x._b for x in xs if isinstance(x, Value)), None)
        if b is None:
            raise BuildError(f"{fn}: at least one argument must be a kernel value")
        if len(xs) != len(sig[0]):
            raise BuildError(f"{fn} takes {len(sig[0])} arguments, got {len(xs)}")
        typed = tuple(b._coerce(x, t, f"{fn} argument") for x, t in zip(xs, sig[0]))
        return Value(b, _call(fn, *typed))
    args = _args(*xs)
    b = next(x._b for x in xs if isinstance(x, Value))
    return Value(b, _call(fn, *args))


def call_fn(fn: str, *xs: Any) -> Value:
    """The registry function `fn` (vyre.ir.ops.CALLS) of `xs`, by name: for code generic
    over functions (the conformance suite); programs use the named helpers below."""
    if fn not in ops.CALLS:
        raise BuildError(f"unknown function {fn!r}; the functions are {sorted(ops.CALLS)}")
    return _fn(fn, *xs)


def sqrt(x: Value) -> Value:
    """Square root (correctly rounded)."""
    return _fn("sqrt", x)

def exp(x: Value) -> Value:
    """e**x (f32 / f16: correctly rounded, the same bits on every backend; vyre.approx.exp
    is the device's own)."""
    return _fn("exp", x)

def exp2(x: Value) -> Value:
    """2**x (f32 / f16: correctly rounded, the same bits on every backend)."""
    return _fn("exp2", x)

def log(x: Value) -> Value:
    """Natural logarithm (f32 / f16: correctly rounded, the same bits on every backend)."""
    return _fn("log", x)

def log2(x: Value) -> Value:
    """Base-2 logarithm (f32 / f16: correctly rounded, the same bits on every backend)."""
    return _fn("log2", x)

def sin(x: Value) -> Value:
    """Sine (radians; f32 / f16: correctly rounded for every argument, the same bits
    on every backend; vyre.approx.sin is the device's own)."""
    return _fn("sin", x)

def cos(x: Value) -> Value:
    """Cosine (radians; f32 / f16: correctly rounded for every argument, the same bits
    on every backend; vyre.approx.cos is the device's own)."""
    return _fn("cos", x)

def tan(x: Value) -> Value:
    """Tangent (radians; f32 / f16: correctly rounded for every argument, the same bits
    on every backend; vyre.approx.tan is the device's own)."""
    return _fn("tan", x)

def tanh(x: Value) -> Value:
    """Hyperbolic tangent."""
    return _fn("tanh", x)

def floor(x: Value) -> Value:
    """Round toward -inf."""
    return _fn("floor", x)

def ceil(x: Value) -> Value:
    """Round toward +inf."""
    return _fn("ceil", x)

def trunc(x: Value) -> Value:
    """Round toward zero."""
    return _fn("trunc", x)

def round_(x: Value) -> Value:
    """Round to nearest, ties to even."""
    return _fn("round", x)

def abs_(x: Value) -> Value:
    """Absolute value (ints wrap: abs(INT_MIN) is INT_MIN)."""
    return _fn("abs", x)

def pow_(x: Any, y: Any) -> Value:
    """x**y (floats)."""
    return _fn("pow", x, y)

def atan2(y: Any, x: Any) -> Value:
    """The angle of (x, y), in radians, C99's atan2 (f32 / f16: correctly rounded, the
    same bits on every backend; vyre.approx.atan2 is the device's own)."""
    return _fn("atan2", y, x)

def asin(x: Value) -> Value:
    """Arc sine in [-pi/2, pi/2]; NaN outside [-1, 1] (f32 / f16: correctly rounded, the
    same bits on every backend; vyre.approx.asin is the device's own)."""
    return _fn("asin", x)


def hypot(x: Any, y: Any) -> Value:
    """sqrt(x^2 + y^2) without intermediate overflow or underflow (approximate); +inf if
    either is infinite, even beside a NaN."""
    return _fn("hypot", x, y)


def fma(a: Any, b: Any, c: Any) -> Value:
    """a * b + c rounded once."""
    return _fn("fma", a, b, c)

def clamp(x: Any, lo: Any, hi: Any) -> Value:
    """min(max(x, lo), hi)."""
    return _fn("clamp", x, lo, hi)


def dot4_i8(a: Any, b: Any, acc: Any = 0) -> Value:
    """acc + the dot product of the four signed bytes packed in u32 `a` and `b` (byte i is
    bits 8i..8i+7), as i32; the final addition wraps (CUDA `__dp4a`, WGSL `dot4I8Packed`).
    `acc` is an i32; pack with `vyre.programs.matmul_i8.pack_i8` on the host."""
    return _fn("dot4_i8", a, b, acc)


def dot4_u8(a: Any, b: Any, acc: Any = 0) -> Value:
    """acc + the dot product of the four unsigned bytes packed in u32 `a` and `b`, as u32;
    the final addition wraps (CUDA `__dp4a` on unsigned, WGSL `dot4U8Packed`)."""
    return _fn("dot4_u8", a, b, acc)



def min_(a: Any, b: Any) -> Value:
    """The smaller of a and b (Python's min() cannot be traced)."""
    x, y = _args(a, b)
    return Value(next(v._b for v in (a, b) if isinstance(v, Value)), _binary("min", x, y))


def max_(a: Any, b: Any) -> Value:
    """The larger of a and b (Python's max() cannot be traced)."""
    x, y = _args(a, b)
    return Value(next(v._b for v in (a, b) if isinstance(v, Value)), _binary("max", x, y))


_SUBGROUP_COMBINES = ("add", "min", "max", "and", "or", "xor")


def _subgroup(op: str, x: Any, lane: Any = None, combine: str | None = None) -> Value:
    if not isinstance(x, Value):
        raise BuildError(f"subgroup {op} needs a kernel value, got {type(x).__name__}")
    if combine is not None and combine not in _SUBGROUP_COMBINES:
        raise BuildError(f"subgroup {op}: combine {combine!r} is not one of "
                         f"{_SUBGROUP_COMBINES}")
    lane_e = None if lane is None else x._b._index(lane)
    return Value(x._b, N.Subgroup(op=cast(N.SubgroupOp, op), value=x.expr, lane=lane_e,
                                  combine=cast(N.SubgroupCombine | None, combine), ty=x.ty))


def subgroup_shuffle(x: Value, lane: Any) -> Value:
    """`x` of lane `lane mod subgroup_size` of this subgroup (i32/u32/f32). Like every
    subgroup operation: only in uniform control flow (docs/IR.md, "Subgroups")."""
    return _subgroup("shuffle", x, lane)


def subgroup_broadcast(x: Value, lane: Any) -> Value:
    """`x` of lane `lane mod subgroup_size`, where `lane` is uniform (the same everywhere)."""
    return _subgroup("broadcast", x, lane)


def subgroup_reduce(x: Value, op: str = "add") -> Value:
    """`op` (add, min, max, and, or, xor) over the subgroup's lanes, in every lane; floats
    in the IR's fixed order (a halving-stride tree over the lanes)."""
    return _subgroup("reduce", x, combine=op)


def subgroup_inclusive_scan(x: Value, op: str = "add") -> Value:
    """`op` over lanes 0..this lane (Hillis-Steele order for floats)."""
    return _subgroup("inclusive_scan", x, combine=op)


def subgroup_exclusive_scan(x: Value, op: str = "add") -> Value:
    """`op` over lanes 0..this lane - 1; lane 0 gets the identity of `op`."""
    return _subgroup("exclusive_scan", x, combine=op)


def select(cond: Value, a: Any, b: Any) -> Value:
    """`a` where `cond` else `b` (both sides are evaluated)."""
    if not isinstance(cond, Value) or cond.ty is not BOOL:
        raise BuildError("select needs a bool kernel value as its condition")
    bld = cond._b
    ty = next((x.ty for x in (a, b) if isinstance(x, Value)), None)
    x = bld._coerce(a, ty, "select true value")
    y = bld._coerce(b, x.ty, "select false value")
    if x.ty != y.ty:
        raise BuildError(f"select branches must share a type, got {x.ty} and {y.ty}")
    return Value(bld, N.Select(cond=cond.expr, a=x, b=y, ty=x.ty))


def ceil_div(n: int, d: int) -> int:
    """ceil(n / d) for Python ints (build-time sizes)."""
    return -(-n // d) if n >= 0 else math.ceil(n / d)
