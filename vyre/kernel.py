"""`@vyre.kernel`: a type-annotated Python function becomes a Program.

    @vyre.kernel(workgroup_size=256)
    def saxpy(x: vyre.Buffer[f32], y: vyre.InOut[f32], a: f32):
        i = vyre.global_linear_id()
        if i < y.length():
            y[i] = a * x[i] + y[i]

    saxpy.program                                   # the validated Program (built once)
    saxpy.launch(gpu, n, xs, ys, a=2.0)             # grid from the element count
    saxpy.launch(gpu, vyre.IndirectGrid(buffer=g), xb, yb, a=2.0)  # grid read on the device

The function's source is compiled (vyre/kernel_ast.py rewrites its AST into calls of
vyre/kernel_flow.py) and the result is called once with proxy values (the builder's `Value`
and `BufferRef`); every operation on them records IR through a `ProgramBuilder`.
Consequences, stated plainly (docs/guide.md, "Control flow"):

- `if`/`elif`/`else`, `while`, `for v in range(...)`, `break`, `continue`, `return`,
  `a if c else b`, `and`/`or`/`not`, chained comparisons, `min()`/`max()` test their value
  when the kernel is built: on a kernel value they are the device's control flow (per
  invocation), on a Python value they run at build time (unroll, specialise).
  `vyre.range` forces a device loop; `vyre.static(x)` requires a build-time value.
- Locals keep Python's value semantics on the device: a local a per-invocation block
  assigns becomes a kernel variable (a `let`) before it; a name bound to a value reading
  memory that can change holds a copy.
- What cannot be compiled (`try`, `global`, `match`, `:=`, `for v in buf`, returning a
  value, ...) is an error at its line naming the fix.
- A function Python has no source for (a REPL, `exec`) is traced as written: a kernel value
  in a Python `if` there is an error naming `with vyre.if_(...)`. Helpers the kernel calls
  are traced too. The explicit forms (`with vyre.if_(c):` / `with vyre.else_():`,
  `with vyre.while_(c):`, `vyre.let` + `.set`, `vyre.select`, `vyre.break_()`) work
  everywhere; they act only through `with` (and `vyre.range` through `for`): one made and
  never entered is an error at build, never a block silently dropped.
- A kernel is a plain `def` (no `yield`, no `async`).

Annotations: `vyre.Buffer[ty]` (read-only), `vyre.Output[ty]` (write-only),
`vyre.InOut[ty]` (read and written; also spelled `vyre.Buffer[ty, "read_write"]`), each
optionally with a row-major shape (`vyre.Buffer[f32, (H, W)]`, vyre.shapes: indexed
`x[i, j]`, launched with the data's shape in NumPy order and `vyre.global_index`), a vyre
scalar type (`a: f32`) is a param; keyword-only arguments with any other annotation (or
none) are build-time constants: `.build(tile=32)`, or given to `.launch(...)`. Annotations
are evaluated as typing.get_type_hints does (module globals and closure). Programs are
cached per constants by type and bits (`0.0` / `-0.0`, `1` / `True` are different kernels).

This module must never evaluate a kernel or talk to a device except through a backend's
public dispatch methods.
"""

from __future__ import annotations
import __future__

import builtins
import inspect
import struct
import sys
from collections.abc import Callable, Iterator, Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

import numpy as np

from .buffer import BufferBase, DeviceBuffer
from .builder import (
    _FOR_IN,
    BufferRef,
    BuildError,
    ProgramBuilder,
    Value,
    Variable,
)
from .config import DispatchConfig, IndirectGrid
from .errors import InvalidDispatch
from .interface import Backend
from .ir.nodes import Program
from .ir.types import ScalarType
from .kernel_ast import compile_kernel
from .kernel_flow import DEVICE_RANGE_MARK
from .lru import LruDict
from .pipeline import Step
from .shapes import XYZ, static_extents

_ACCESS = ("read", "write", "read_write")
# what launch / step / config take as the extent of a launch (see Kernel.config)
LaunchShape = int | tuple[int, ...] | XYZ | IndirectGrid
KERNEL_CACHE_SIZE = 256  # Programs a kernel keeps, one per distinct build-time constants
_current: ContextVar[ProgramBuilder | None] = ContextVar("vyre_kernel_builder", default=None)
# the kernels whose functions are being traced now (a kernel that builds itself recurses)
_tracing: ContextVar[tuple[Kernel, ...]] = ContextVar("vyre_kernel_tracing", default=())


@dataclass(frozen=True)
class BufferSpec:
    """What `vyre.Buffer[ty, access]` stands for in an annotation."""

    ty: ScalarType | str  # a str names a build-time constant holding the type
    access: str = "read"
    count: int | None = None
    # a declared shape, row-major (vyre.shapes): ints, names of build-time constants or of
    # u32/i32 params, and None (first extent only)
    shape: tuple[int | str | None, ...] | None = None


class Buffer:
    """Annotation for a storage buffer argument: `Buffer[f32]` is read-only,
    `Buffer[f32, "write"]` write-only, `Buffer[f32, "read_write"]` both; an optional third
    item fixes the element count (`Buffer[u32, "write", 4]`) or declares a shape, row-major
    like NumPy (`Buffer[f32, (H, W)]`, `Output[f32, (W, H)]`: ints, `vyre.Dim`s naming
    build-time constants or u32 params, None for as many rows as bound), so the kernel
    indexes it `x[i, j]`.
    `Buffer["T"]` takes its element type from the keyword-only constant `T` (one kernel for
    several types)."""

    def __class_getitem__(cls, item: Any) -> BufferSpec:
        args = item if isinstance(item, tuple) else (item,)
        if not 1 <= len(args) <= 3:
            raise TypeError("vyre.Buffer[ty] or vyre.Buffer[ty, access] or [ty, access, count]")
        ty: ScalarType | str
        if isinstance(args[0], TypeParam):
            args = (args[0].name, *args[1:])
        try:
            ty = ScalarType(args[0])
        except ValueError:
            if not isinstance(args[0], str) or not args[0].isidentifier():
                raise TypeError(
                    f"vyre.Buffer element type must be a vyre type (f32, u32, ...) or the name "
                    f"of a build-time constant holding one, got {args[0]!r}"
                ) from None
            ty = args[0]
        if len(args) == 2 and isinstance(args[1], (tuple, list)):  # Buffer[f32, (H, W)]
            args = (args[0], "read", args[1])
        access = args[1] if len(args) > 1 else "read"
        if access not in _ACCESS:
            raise TypeError(f"vyre.Buffer access must be one of {_ACCESS}, got {access!r}")
        third = args[2] if len(args) > 2 else None
        if isinstance(third, (tuple, list)):
            return BufferSpec(ty, access, None, tuple(
                n.name if isinstance(n, Dim) else n for n in third))
        return BufferSpec(ty, access, third)


class Output(Buffer):
    """`Output[ty]` = `Buffer[ty, "write"]`: a write-only buffer (lint-friendly spelling)."""

    def __class_getitem__(cls, item: Any) -> BufferSpec:
        return Buffer.__class_getitem__(_with_access(item, "write"))


class InOut(Buffer):
    """`InOut[ty]` = `Buffer[ty, "read_write"]`: a buffer read and written."""

    def __class_getitem__(cls, item: Any) -> BufferSpec:
        return Buffer.__class_getitem__(_with_access(item, "read_write"))


def _with_access(item: Any, access: str) -> tuple[Any, ...]:
    args = item if isinstance(item, tuple) else (item,)
    return (args[0], access, *args[1:])


@dataclass(frozen=True)
class Dim:
    """A named extent of a declared buffer shape: `H, W = vyre.Dim("H"), vyre.Dim("W")` at
    module level, `x: vyre.Buffer[f32, (H, W)]` in the signature, and a u32 param or a
    build-time constant named `H` / `W` in the kernel's arguments. (A plain string "H"
    works too, but linters read a string in an annotation as a forward reference.)"""

    name: str


@dataclass(frozen=True)
class TypeParam:
    """A buffer element type chosen at build time: `T = vyre.TypeParam("T")` at module
    level, `x: vyre.Buffer[T]` in the signature and a keyword-only constant `T` (a vyre
    type) in the kernel's arguments; `.build(T=f32)` / `.launch(..., T=f32)`."""

    name: str


def _builder(what: str) -> ProgramBuilder:
    b = _current.get()
    if b is None:
        raise BuildError(f"vyre.{what}() is only meaningful inside a @vyre.kernel function")
    return b


# ------------------------------------------------------------------ the kernel language


def _axis_builder(what: str, axis: int) -> ProgramBuilder:
    """The builder, noting a global id read along y or z: the kernel maps ids to data in
    axis order x, y, z, which decides how a tuple launch shape is read (vyre.shapes).
    (Local and workgroup ids say nothing of it: a NumPy-order kernel tiles with them too.)"""
    b = _builder(what)
    if axis in (1, 2):
        b.index_orders.add("xyz")
    return b


def global_id(axis: int = 0) -> Value:
    """This invocation's global id along `axis` (u32; axis 0 = x, the fastest). For data
    indices in NumPy order use `global_index(ndim)`."""
    return _axis_builder("global_id", axis).global_id(axis)


def global_index(ndim: int) -> tuple[Value, ...]:
    """This invocation's index in NumPy order over an `ndim`-axis launch: `(i,)`,
    `(row, col)`, `(depth, row, col)`; launch the kernel with the data's shape in NumPy
    order (`kernel.launch(gpu, m.shape, ...)`)."""
    return _builder("global_index").global_index(ndim)


def local_id(axis: int = 0) -> Value:
    """This invocation's id within its workgroup along `axis` (u32)."""
    return _builder("local_id").local_id(axis)


def workgroup_id(axis: int = 0) -> Value:
    """The workgroup's id along `axis` (u32)."""
    return _builder("workgroup_id").workgroup_id(axis)


def num_workgroups(axis: int = 0) -> Value:
    """The grid's workgroup count along `axis` (u32)."""
    return _builder("num_workgroups").num_workgroups(axis)


def local_index() -> Value:
    """The flattened id within the workgroup (0 .. invocations per workgroup - 1)."""
    return _builder("local_index").local_index()


def subgroup_size() -> Value:
    """The number of lanes of a subgroup (u32, uniform; docs/IR.md, "Subgroups")."""
    return _builder("subgroup_size").subgroup_size()


def subgroup_lane() -> Value:
    """This invocation's lane in its subgroup: local_index mod subgroup_size (u32)."""
    return _builder("subgroup_lane").subgroup_lane()


def global_linear_id() -> Value:
    """The element index of a 1-D launch (accounts for grids folded into y)."""
    return _builder("global_linear_id").global_linear_id()


def workgroup_linear_id() -> Value:
    """The workgroup index of a 1-D launch (accounts for grids folded into y)."""
    return _builder("workgroup_linear_id").workgroup_linear_id()


def let(value: Any, ty: ScalarType | None = None) -> Variable:
    """A mutable local named after the Python name it is assigned to; change it with
    `.set(x)` or `+=` etc. A Python number becomes i32 / f32 unless `ty` says otherwise."""
    return _builder("let").let(value, ty)


def lit(value: Any, ty: ScalarType | None = None) -> Value:
    """A literal of type `ty` (default: i32 for int, f32 for float, bool for bool)."""
    return _builder("lit").lit(value, ty)


def shared(ty: ScalarType, count: int | tuple[int, ...]) -> BufferRef:
    """A workgroup (shared) array of `count` elements (a build-time int) or of a shape (a
    tuple of ints: `tile[i, j]` indexes it), named after the Python name it is assigned
    to."""
    b = _builder("shared")
    return b.shared(b._name_for(None, "shared"), ty, count)


def barrier() -> None:
    """Workgroup barrier; every invocation of the workgroup must reach it (uniform flow)."""
    _builder("barrier").barrier()


def print(*items: Any, sep: str = " ") -> None:
    """Print from the device: `vyre.print("i = {} x = {}", i, x)` (a format, one `{}` or
    `{:spec}` per value) or `vyre.print("x =", x)` (like Python's print). Each invocation
    that reaches it writes a record to the dispatch's debug log; when the dispatch's
    results come back (with host arrays: the call; resident buffers: the next read,
    synchronize() or pipeline run) the host prints the records ordered by invocation
    (global id z, y, x), then program order, the same on every backend. Floats print exactly (shortest round-trip text). Python's
    own print() of a kernel value is an error: it would run once, at build time."""
    _builder("print").print(*items, sep=sep)


def assert_(cond: Any, *items: Any, sep: str = " ") -> None:
    """Check `cond` on the device: where it is false, the dispatch raises DispatchError
    (naming the kernel, this line, the invocation's global id, the message `items`
    formatted as for vyre.print, and the operands of a comparison) once it has finished
    (where vyre.print's records come out).
    The failing invocation carries on (barriers stay uniform); the dispatch's writes are
    kept."""
    _builder("assert_").assert_(cond, *items, sep=sep)


def if_(cond: Any) -> Any:
    """`with vyre.if_(cond):` runs its block where `cond` (a bool value) holds."""
    return _builder("if_").if_(cond)


def else_() -> Any:
    """`with vyre.else_():` directly after a `with vyre.if_(...)` block."""
    return _builder("else_").else_()


def while_(cond: Any) -> Any:
    """`with vyre.while_(cond):` loops while `cond` holds (re-evaluated each iteration)."""
    return _builder("while_").while_(cond)


def break_() -> None:
    """Leave the innermost device loop (Python `break` would end the trace, not the loop)."""
    _builder("break_").break_()


def continue_() -> None:
    """Next iteration of the innermost device loop (Python `continue` would skip tracing)."""
    _builder("continue_").continue_()


def return_() -> None:
    """End this invocation (Python `return` would only stop tracing the function)."""
    _builder("return_").return_()


def range(start: Any, end: Any = None, step: int = 1, ty: ScalarType | None = None
          ) -> Iterator[Value]:
    """`for i in vyre.range(n):` / `range(start, end, step)`: a loop on the device (step a
    nonzero int constant; a negative one counts down, as Python's range does).

    The body is traced once with the loop variable (u32 unless a bound or `ty` says i32).
    A Python `range` instead unrolls at build time. Use `vyre.break_()`, never `break`.
    """
    b = _builder("range")
    name = b._name_for(None, "i", _FOR_IN)
    return _loop(b, b.for_range(start, end, step, ty, loop_name=name))


setattr(range, DEVICE_RANGE_MARK, True)


def static(value: Any) -> Any:
    """`value`, which must be known when the kernel is built (a Python value, not a kernel
    value): `if vyre.static(flag):` / `for k in range(vyre.static(taps)):` say, and check,
    that this control flow runs at build time (one branch built, the loop unrolled)."""
    if isinstance(value, (Value, BufferRef)):
        raise BuildError(
            "vyre.static(...) got a kernel value, which is known only per invocation on "
            "the device, not a build-time value; drop vyre.static to make this control "
            "flow the device's (`for j in range(n)` over a kernel value loops on the "
            "device), or pass the value as a keyword-only constant of the kernel")
    return value


def _loop(b: ProgramBuilder, ctx: Any) -> Iterator[Value]:
    finished = False
    with ctx as var:
        try:
            yield var
            finished = True
        finally:
            if not finished:  # the for statement was left early: a Python break/return
                b._trace_errors.append(BuildError(
                    "a `for ... in vyre.range(...)` body was left with a Python break or "
                    "return, which only stops tracing; use vyre.break_() / vyre.return_()"
                ))


# ------------------------------------------------------------------ decorated kernels


@dataclass(frozen=True)
class _Arg:
    name: str
    kind: str  # "buffer", "param", "const"
    spec: Any  # BufferSpec, ScalarType, or the constant's default (inspect.Parameter.empty)


def _resolve(fn: Callable[..., Any], arg: str, ann: Any) -> Any:
    """The object an annotation stands for, evaluated like typing.get_type_hints does: a
    string (every annotation under `from __future__ import annotations`, or a quoted one)
    is evaluated in the function's module globals and closure, never looked up as a bare
    name in vyre's own namespace. A vyre type is itself a str (an Enum of str), so it is
    told apart first: `a: vyre.f32` without the future import is the type itself."""
    if not isinstance(ann, str) or isinstance(ann, ScalarType):
        return ann
    closure = dict(zip(fn.__code__.co_freevars,
                       (c.cell_contents for c in fn.__closure__ or ()
                        if _cell_filled(c))))
    namespace = {"__builtins__": builtins, **fn.__globals__}
    try:
        return eval(ann, namespace, closure)  # the user's own annotation text
    except Exception as exc:
        future = bool(fn.__code__.co_flags & __future__.annotations.compiler_flag)
        why = (" (with `from __future__ import annotations` an annotation is evaluated at "
               "build time, and a name used only in annotations inside a function is not "
               "kept by Python: define it at module level or write vyre.f32 / "
               "vyre.Buffer[vyre.f32] directly)") if future else ""
        raise BuildError(
            f"the annotation {ann!r} of kernel argument {arg!r} cannot be evaluated in "
            f"{fn.__qualname__}'s module: {type(exc).__name__}: {exc}{why}", _def_site(fn)
        ) from None


def _looks_like_a_type_for_data(ann: Any) -> bool:
    """A NumPy scalar type or dtype (or its name as text): a data type, but not vyre's."""
    if isinstance(ann, np.dtype) or (isinstance(ann, type) and issubclass(ann, np.generic)):
        return True
    return isinstance(ann, str) and ann in {t.value for t in ScalarType}


def _cell_filled(cell: Any) -> bool:
    try:
        cell.cell_contents  # noqa: B018 (an unassigned closure cell raises ValueError)
    except ValueError:
        return False
    return True


def _classify(fn: Callable[..., Any]) -> list[_Arg]:
    out = []
    for p in inspect.signature(fn).parameters.values():
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            raise BuildError(f"kernel argument *{p.name}: a kernel's arguments must be named",
                             _def_site(fn))
        if p.kind is p.POSITIONAL_ONLY:
            raise BuildError(
                f"kernel argument {p.name!r} is positional-only: kernels pass every argument "
                "by name; remove the `/` from the signature", _def_site(fn))
        ann = _resolve(fn, p.name, p.annotation)
        if isinstance(ann, BufferSpec):
            out.append(_Arg(p.name, "buffer", ann))
        elif isinstance(ann, ScalarType):
            out.append(_Arg(p.name, "param", ann))
        elif isinstance(ann, TypeParam):
            out.append(_Arg(p.name, "param", ann.name))
        elif _looks_like_a_type_for_data(ann):
            # most likely meant as a param (a module's own `u32 = np.uint32`, say): taking
            # it as a build-time constant would silently change the kernel's interface
            raise BuildError(
                f"kernel argument {p.name!r} is annotated {ann!r}, which is not a vyre type: "
                f"for a param write a vyre type (vyre.u32, vyre.f32, ...); for a "
                f"build-time constant annotate it with int / float / vyre.ScalarType or "
                f"nothing", _def_site(fn))
        elif p.kind is p.KEYWORD_ONLY:
            out.append(_Arg(p.name, "const", p.default))
        else:
            got = ("no annotation" if ann is inspect.Parameter.empty
                   else f"{ann!r} ({type(ann).__name__}), which is not a vyre type")
            raise BuildError(
                f"kernel argument {p.name!r} needs an annotation: vyre.Buffer[ty] / "
                f"vyre.Buffer[ty, 'read_write'] for a buffer, a vyre type (vyre.f32, vyre.u32, "
                f"...) for a param, or make it keyword-only (after *) for a build-time "
                f"constant; got {got}",
                _def_site(fn),
            )
    return out


def _const_key(value: Any) -> Any:
    """A cache key for a build-time constant that tells apart what `==` conflates: the
    type and, for numbers, the bits (0.0 vs -0.0, NaN payloads, True vs 1 vs 1.0, np.float32
    vs float). Raises TypeError for an unhashable value (then the kernel is not cached)."""
    if isinstance(value, np.generic):
        return (type(value), value.tobytes())
    if isinstance(value, float):
        return (type(value), struct.pack("<d", value))
    if isinstance(value, complex):
        return (type(value), struct.pack("<dd", value.real, value.imag))
    if isinstance(value, (tuple, frozenset)):
        items = sorted(value, key=repr) if isinstance(value, frozenset) else value
        return (type(value), tuple(_const_key(v) for v in items))
    hash(value)
    return (type(value), value)


def _def_site(fn: Callable[..., Any]) -> str:
    code = fn.__code__
    return f"{code.co_filename}:{code.co_firstlineno}"


def _site_of(tb: Any, filename: str) -> str | None:
    """The deepest traceback line inside the kernel's own file (the user's line)."""
    site = None
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == filename:
            site = f"{filename}:{tb.tb_lineno}"
        tb = tb.tb_next
    return site


@dataclass(frozen=True)
class _Built:
    """One traced Program and what launching it needs beyond the IR: how the kernel maps
    ids to data ("numpy", "xyz", "mixed" or "none": how a tuple launch shape is read) and
    the declared buffer shapes (ints, None, or a param's name)."""

    program: Program
    order: str
    shapes: dict[str, tuple[int | str | None, ...]]


def _order(orders: set[str]) -> str:
    if orders == {"numpy"}:
        return "numpy"
    if orders == {"xyz"}:
        return "xyz"
    return "mixed" if orders else "none"


class Kernel:
    """A decorated kernel function: builds (and caches) Programs, launches them."""

    def __init__(self, fn: Callable[..., Any], workgroup_size: Any = 64,
                 name: str | None = None) -> None:
        _check_kernel_function(fn)
        self.fn = fn
        self.name = name or fn.__name__
        self.workgroup_size = workgroup_size
        self.args = _classify(fn)
        # the body with plain if/while/for/... compiled (vyre/kernel_ast.py); None where
        # Python has no source for the function (a REPL, exec): then it is traced as is
        self._compiled = compile_kernel(fn)
        # keyed by (name, _const_key(value)): type and bits, never `==` alone; one Program
        # per distinct build-time constants, the least recently used dropped beyond
        # KERNEL_CACHE_SIZE (rebuilt when asked for again): a caller sweeping a constant
        # through 188,093 values held 677 MiB of Programs
        self._cache: LruDict[tuple[tuple[str, Any], ...], _Built] = LruDict(KERNEL_CACHE_SIZE)
        self.__doc__ = fn.__doc__
        self.__name__ = fn.__name__
        self.__wrapped__ = fn

    def __repr__(self) -> str:
        return f"<vyre.kernel {self.name}({', '.join(a.name for a in self.args)})>"

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise BuildError(
            f"kernel {self.name!r} is not called directly: launch it with "
            f"{self.name}.launch(backend, shape, ...) or use {self.name}.program"
        )

    # -- building
    def _consts(self, given: Mapping[str, Any]) -> dict[str, Any]:
        consts = {}
        for a in self.args:
            if a.kind != "const":
                continue
            if a.name in given:
                consts[a.name] = given[a.name]
            elif a.spec is inspect.Parameter.empty:
                raise BuildError(f"kernel {self.name!r} needs the build-time constant "
                                 f"{a.name!r}: pass {a.name}=... to build() or launch()")
            else:
                consts[a.name] = a.spec
        return consts

    @property
    def program(self) -> Program:
        """The Program built with the constants' defaults (built once, then cached)."""
        return self.build()

    def build(self, **consts: Any) -> Program:
        """The Program for these build-time constants (cached per distinct values)."""
        return self._built(consts).program

    def _built(self, consts: Mapping[str, Any]) -> _Built:
        unknown = sorted(set(consts) - {a.name for a in self.args if a.kind == "const"})
        if unknown:
            raise BuildError(f"kernel {self.name!r} has no build-time constant(s) {unknown}")
        values = self._consts(consts)
        try:
            key = tuple(sorted((k, _const_key(v)) for k, v in values.items()))
            hash(key)
        except TypeError:
            return self._trace(values)
        built = self._cache.get(key)  # one lookup: another thread may evict between two
        if built is None:
            built = self._trace(values)
            self._cache[key] = built
        return built

    def _extent(self, arg: str, n: Any, consts: dict[str, Any], call: dict[str, Any]) -> Any:
        """A declared shape's extent: an int or None as written, a build-time constant's
        value, or a param's kernel value."""
        if n is None or (isinstance(n, int) and not isinstance(n, bool)):
            return n
        if isinstance(n, str) and n in consts:
            return consts[n]
        if isinstance(n, str) and any(a.name == n and a.kind == "param" for a in self.args):
            return call[n]
        raise BuildError(f"the shape of kernel argument {arg!r} names {n!r}, which is neither "
                         "a build-time constant nor a u32/i32 param of the kernel; an extent "
                         "is an int, such a name, or None (first extent only)",
                         _def_site(self.fn))

    def _trace(self, consts: dict[str, Any]) -> _Built:
        ws = self.workgroup_size(**consts) if callable(self.workgroup_size) else self.workgroup_size
        # the constants in the name keep specialisations apart in sources and messages
        suffix = "".join(f"_{k}{v}" for k, v in consts.items() if f"a{v}".isidentifier())
        b = ProgramBuilder(f"{self.name}{suffix}"[:64], ws, strict_scopes=True)
        call: dict[str, Any] = {}
        shapes: dict[str, tuple[int | str | None, ...]] = {}
        try:
            for a in self.args:  # params first: a buffer's shape may name one
                if a.kind == "param":
                    call[a.name] = b.param(a.name, self._type(a.name, a.spec, consts))
            for a in self.args:
                if a.kind == "buffer":
                    ty = self._type(a.name, a.spec.ty, consts)
                    shape = None
                    if a.spec.shape is not None:
                        shape = tuple(self._extent(a.name, n, consts, call)
                                      for n in a.spec.shape)
                        shapes[a.name] = tuple(
                            n if isinstance(n, str) and n not in consts else e
                            for n, e in zip(a.spec.shape, shape))
                    call[a.name] = b.buffer(a.name, ty, a.spec.access, a.spec.count, shape)
                elif a.kind == "const":
                    call[a.name] = consts[a.name]
        except BuildError as exc:
            raise BuildError(f"in kernel {self.name!r}: {exc.detail}", _def_site(self.fn)) from None
        if self in _tracing.get():
            raise BuildError(
                f"kernel {self.name!r} builds itself while it is being traced (its function "
                f"uses {self.name}.program / .build / .launch): a kernel cannot call itself; "
                "compute with a device loop (vyre.range / vyre.while_) instead",
                _def_site(self.fn))
        token = _current.set(b)
        tracing = _tracing.set((*_tracing.get(), self))
        filename = self.fn.__code__.co_filename
        try:
            body = self.fn if self._compiled is None else self._compiled.bind(b)
            result = body(**call)
            if inspect.isawaitable(result) or inspect.isgenerator(result):
                getattr(result, "close", lambda: None)()
                raise BuildError(
                    f"kernel function {self.fn.__qualname__} returned a "
                    f"{type(result).__name__}, so its body was never traced; a kernel is a "
                    "plain `def` without yield or await", _def_site(self.fn))
            if b._trace_errors:
                raise b._trace_errors[0]
            if len(b._blocks) != 1:
                raise BuildError("a block was left open")
            return _Built(b.build(), _order(b.index_orders), shapes)
        except BuildError as exc:
            raise self._relocated(exc, filename, sys.exc_info()[2]) from None
        finally:
            _tracing.reset(tracing)
            _current.reset(token)

    def _type(self, arg: str, ty: ScalarType | str, consts: dict[str, Any]) -> ScalarType:
        """`ty`, or the type held by the constant it names (a TypeParam)."""
        if isinstance(ty, ScalarType):
            return ty
        if ty not in consts:
            raise BuildError(f"argument {arg!r} takes its type from {ty!r}, which is not a "
                             "keyword-only constant of the kernel", _def_site(self.fn))
        try:
            return ScalarType(consts[ty])
        except ValueError:
            raise BuildError(f"constant {ty!r} = {consts[ty]!r} must be a vyre type (f32, u32, "
                             f"...) to type argument {arg!r}", _def_site(self.fn)) from None

    def _relocated(self, exc: BuildError, filename: str, tb: Any) -> BuildError:
        """Point the error at the kernel's own line where the builder saw another one."""
        site = exc.site
        if site is None or not site.startswith(filename + ":"):
            site = _site_of(tb, filename) or site or _def_site(self.fn)
        err = BuildError(f"in kernel {self.name!r}: {exc.detail}", site)
        err.node = exc.node
        return err

    # -- launching
    def config(self, shape: LaunchShape, program: Program | None = None,
               **params: Any) -> DispatchConfig:
        """The DispatchConfig covering `shape`: an element count (a 1-D launch; index with
        `vyre.global_linear_id()`); the data's shape in NumPy order, (rows, cols) or
        (depth, rows, cols), for a kernel indexing with `vyre.global_index(ndim)`; or
        `vyre.xyz(nx, ny[, nz])` in axis order x, y, z for one indexing with
        `vyre.global_id(axis)`. A plain tuple that reads differently in the two orders, for
        a kernel that does not index in NumPy order, is refused, naming both.

        `vyre.IndirectGrid(buffer=g, offset=0)`: the grid is read on the device when the
        dispatch runs, three u32 *workgroup* counts (x, y, z: axis order, whatever order
        the kernel indexes in) at `offset` bytes of the device buffer `g`, e.g. written by
        an earlier kernel or pipeline step; the kernel bounds its own indices (a count
        the device computed, not the launch, says how many elements there are)."""
        built = self._built({}) if program is None else self._built_of(program)
        return self._config(shape, built, params)

    def _built_of(self, program: Program) -> _Built:
        for built in list(self._cache.values()):
            if built.program is program:
                return built
        return _Built(program, "none", {})  # (a Program built elsewhere: nothing known)

    def _config(self, shape: Any, built: _Built, params: dict[str, Any]) -> DispatchConfig:
        prog = built.program
        if isinstance(shape, IndirectGrid):
            return DispatchConfig(grid=shape, params=params)
        if isinstance(shape, XYZ):
            return DispatchConfig.for_shape(shape.extents, prog.workgroup_size, params=params)
        if _is_device_buffer(shape):
            raise InvalidDispatch(
                f"kernel {self.name!r}: the launch shape is a device buffer "
                f"({type(shape).__name__}); to read the workgroup counts from it on the "
                "device, pass vyre.IndirectGrid(buffer=b) (three u32 counts x, y, z at "
                "offset 0; IndirectGrid(buffer=b, offset=k) for k bytes in)")
        if isinstance(shape, (bool, np.bool_)) or not isinstance(
                shape, (int, np.integer, tuple, list)):
            raise InvalidDispatch(
                f"kernel {self.name!r}: the launch shape must be an element count (an int), "
                f"the data's shape in NumPy order (a tuple), vyre.xyz(nx, ny[, nz]) or "
                f"vyre.IndirectGrid(buffer=...) (counts read on the device), got "
                f"{shape!r} ({type(shape).__name__}); e.g. launch(backend, n, ...) with "
                "n = int(...)")
        if isinstance(shape, (int, np.integer)):
            if prog.workgroup_size[1:] != (1, 1):
                raise InvalidDispatch(
                    f"kernel {self.name!r} has a {prog.workgroup_size} workgroup: launch it "
                    "with the data's shape (rows, cols[, ...]) or vyre.xyz(nx, ny[, nz]), not "
                    "an element count"
                )
            return DispatchConfig.for_elements(int(shape), prog.workgroup_size[0], params=params)
        dims = tuple(shape)
        if built.order == "numpy":  # NumPy order: the last extent runs along x
            if len(dims) == 1 and prog.workgroup_size[1:] == (1, 1):
                return self._config(dims[0], built, params)
            return DispatchConfig.for_shape(dims[::-1], prog.workgroup_size, params=params)
        if dims != dims[::-1]:
            raise InvalidDispatch(self._ambiguous(dims, built.order))
        return DispatchConfig.for_shape(dims, prog.workgroup_size, params=params)

    def _ambiguous(self, dims: tuple[Any, ...], order: str) -> str:
        how = {"xyz": "indexes with vyre.global_id(axis) (axis order x, y, z)",
               "mixed": "indexes both with vyre.global_index (NumPy order) and with "
                        "vyre.global_id(axis) (axis order x, y, z)",
               "none": "does not index with vyre.global_index"}[order]
        names = ("rows", "cols") if len(dims) == 2 else ("depth", "rows", "cols")[-len(dims):]
        rev = dims[::-1]
        return (
            f"kernel {self.name!r}: the launch shape {dims!r} is ambiguous: as the data's "
            f"shape in NumPy order it is ({', '.join(names)}) = {dims!r}, i.e. "
            f"vyre.xyz{rev!r} (x runs along a row); in axis order it is vyre.xyz{dims!r}. "
            f"This kernel {how}, so say which is meant: pass vyre.xyz{dims!r} or "
            f"vyre.xyz{rev!r}, or index with `{', '.join(n[0] for n in names)} = "
            f"vyre.global_index({len(dims)})`, which takes the data's shape in NumPy order")

    def _split(self, args: tuple[Any, ...], kwargs: dict[str, Any]
               ) -> tuple[_Built, dict[str, Any], dict[str, Any]]:
        runtime = [a for a in self.args if a.kind != "const"]
        if len(args) > len(runtime):
            raise InvalidDispatch(
                f"kernel {self.name!r} takes {len(runtime)} positional argument(s) "
                f"{[a.name for a in runtime]}, got {len(args)}"
            )
        given = dict(zip((a.name for a in runtime), args))
        for k, v in kwargs.items():
            if k in given:
                raise InvalidDispatch(f"kernel {self.name!r}: argument {k!r} given twice")
            given[k] = v
        consts = {a.name: given.pop(a.name) for a in self.args
                  if a.kind == "const" and a.name in given}
        known = {a.name for a in self.args}
        unknown = sorted(set(given) - known)
        missing = [a.name for a in runtime if a.name not in given]
        if unknown or missing:
            raise InvalidDispatch(
                f"kernel {self.name!r} takes {[a.name for a in runtime]}: missing {missing}, "
                f"unknown {unknown}"
            )
        bufs = {a.name: given[a.name] for a in runtime if a.kind == "buffer"}
        params = {a.name: given[a.name] for a in runtime if a.kind == "param"}
        return self._built(consts), bufs, params

    def _shaped(self, built: _Built, bufs: dict[str, Any], params: dict[str, Any]
                ) -> dict[str, tuple[int | None, ...]]:
        """Check every buffer with a declared shape against what is passed for it (an
        array's shape, or its element count), flattening arrays of that shape in place in
        `bufs`; returns the shapes to give the results (a None extent: from the count)."""
        out: dict[str, tuple[int | None, ...]] = {}
        for name, decl in built.shapes.items():
            ext = static_extents(decl, params, tuple(
                n if isinstance(n, str) else None for n in decl))
            v = bufs[name]
            what = f"kernel {self.name!r} buffer {name!r} (shape {_shape_text(decl)})"
            if isinstance(v, np.ndarray) and (v.ndim > 1 or len(ext) == 1):
                if v.ndim != len(ext):
                    raise InvalidDispatch(
                        f"{what}: the array has {v.ndim} axes {v.shape}, the buffer "
                        f"{len(ext)}; pass an array of that shape, or a flat one of its "
                        "element count (arr.reshape(-1))")
                bad = [a for a, n in enumerate(ext) if n is not None and v.shape[a] != n]
                if bad:
                    raise InvalidDispatch(
                        f"{what}: the array's shape {v.shape} differs on axis {bad[0]} "
                        f"({v.shape[bad[0]]} != {ext[bad[0]]}); pass data of the declared "
                        "shape (NumPy order: rows, cols) or fix the shape's constants/params")
                bufs[name] = np.ascontiguousarray(v).reshape(-1)
                count = v.size
            elif isinstance(v, BufferBase):
                size = built.program.buffer(name).ty.byte_size
                count = v.byte_len // size
            elif isinstance(v, np.ndarray):
                count = v.size
            elif isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_)):
                count = int(v)
            else:
                continue  # (other host data: the backend's own checks word it)
            rest = 1
            for n in ext[1:]:
                rest *= n if n is not None else 1
            if ext[0] is not None and None not in ext[1:] and count != rest * ext[0]:
                raise InvalidDispatch(
                    f"{what}: {count} elements are passed but the shape holds "
                    f"{rest * ext[0]}; pass data of the declared shape, or fix the shape's "
                    "constants/params")
            if ext[0] is None and count % rest:
                raise InvalidDispatch(
                    f"{what}: {count} elements are not a whole number of rows of {rest}; "
                    "pass whole rows")
            out[name] = (count // rest, *ext[1:]) if ext[0] is None else ext
        return out

    def launch(self, backend: Backend, shape: LaunchShape, *args: Any,
               **kwargs: Any) -> Any:
        """Run on `backend` over `shape` (see `config`). Arguments go in signature order or
        by name; build-time constants by name.

        Host arrays in: host arrays out, as `backend.dispatch` returns them (a dict of the
        writable buffers; one with a declared shape comes back in that shape, and takes an
        array of that shape or a flat one). Resident buffers in: enqueued in place with
        `dispatch_with_device_buffers` (returns its Timing). Mixing both is an error.
        """
        built, bufs, params = self._split(args, kwargs)
        program = built.program
        cfg = self._config(shape, built, params)
        shapes = self._shaped(built, bufs, params)
        resident = [_is_device_buffer(v) for v in bufs.values()]
        if resident and all(resident):
            ins = {d.name: bufs[d.name] for d in program.inputs}
            outs = {d.name: bufs[d.name] for d in program.outputs}
            return backend.dispatch_with_device_buffers(program, ins, outs, cfg)
        if any(resident):
            host = [k for k, r in zip(bufs, resident) if not r]
            raise InvalidDispatch(
                f"kernel {self.name!r}: {host} are host data while the other buffers are "
                "device buffers; upload them first (b = backend.allocate_device_buffer(a.nbytes)"
                "; backend.write(b, a)) or pass host arrays for every buffer"
            )
        result = backend.dispatch(program, bufs, cfg)
        if shapes and isinstance(result, dict):
            for name, ext in shapes.items():
                if name in result and None not in ext:
                    result[name] = result[name].reshape(tuple(int(n or 0) for n in ext))
        return result

    def step(self, shape: LaunchShape, *args: Any, index_param: str | None = None,
             **kwargs: Any) -> Step:
        """A pipeline Step over resident buffers (see `launch`); `index_param` names a u32
        param set to the repeat index on each `Pipeline.run(repeat=...)` round. Leave that
        param out of the arguments."""
        if index_param is not None:
            if index_param in kwargs:  # it would be overwritten by the round index
                raise InvalidDispatch(
                    f"kernel {self.name!r}: {index_param}={kwargs[index_param]!r} is given but "
                    f"index_param={index_param!r} sets it to the repeat index each round; "
                    f"leave {index_param} out of the arguments (or drop index_param)")
            kwargs[index_param] = 0
        built, bufs, params = self._split(args, kwargs)
        program = built.program
        self._shaped(built, bufs, params)
        if index_param is not None:
            params.pop(index_param, None)
        cfg = self._config(shape, built, params)
        ins = {d.name: bufs[d.name] for d in program.inputs}
        outs = {d.name: bufs[d.name] for d in program.outputs}
        return Step(program, ins, outs, cfg, index_param=index_param)


def _shape_text(decl: tuple[int | str | None, ...]) -> str:
    parts = [repr(n) if isinstance(n, str) else str(n) for n in decl]
    return f"({', '.join(parts)}{',' if len(parts) == 1 else ''})"


def _check_kernel_function(fn: Any) -> None:
    """A kernel is traced by calling a plain Python function once; anything else (a
    builtin, a class, a partial, a callable object) has no source line or signature to
    trace, and a generator or coroutine function would trace nothing at all."""
    if not inspect.isfunction(fn):
        raise BuildError(
            f"@vyre.kernel decorates a plain `def` function, got {fn!r} "
            f"({type(fn).__name__}); write a def with annotated arguments (it may call "
            "other Python helpers while tracing)")
    if inspect.isgeneratorfunction(fn) or inspect.iscoroutinefunction(fn) or (
            inspect.isasyncgenfunction(fn)):
        kind = "an async def" if (inspect.iscoroutinefunction(fn)
                                  or inspect.isasyncgenfunction(fn)) else "a generator (it uses yield)"
        raise BuildError(
            f"kernel function {fn.__qualname__} is {kind}, so calling it would trace an "
            "empty program; write a plain `def` (loop on the device with vyre.range)",
            _def_site(fn))


def kernel(fn: Callable[..., Any] | None = None, *, workgroup_size: Any = 64,
           name: str | None = None) -> Any:
    """Decorate a type-annotated function as a vyre kernel (see the module docstring).

    `workgroup_size`: an int, a tuple of up to 3 ints, or a function of the build-time
    constants returning one (e.g. `lambda tile: (tile, tile)`).
    """
    if fn is None:
        return lambda f: Kernel(f, workgroup_size, name)
    return Kernel(fn, workgroup_size, name)


def _is_device_buffer(v: object) -> bool:
    """Any backend's buffer, a RemoteBuffer of a Ray actor included (DeviceBuffer); the
    protocol check (~20 us) is asked only of what is neither a local buffer nor an array."""
    if isinstance(v, BufferBase):
        return True
    return not isinstance(v, np.ndarray) and isinstance(v, DeviceBuffer)


__all__ = [
    "Buffer", "BufferSpec", "Dim", "InOut", "Kernel", "Output", "TypeParam", "assert_",
    "barrier", "break_", "continue_", "else_", "global_id", "global_index", "global_linear_id",
    "if_", "kernel", "let", "lit", "local_id", "local_index", "num_workgroups", "print",
    "range", "return_", "shared", "static", "subgroup_lane", "subgroup_size", "while_",
    "workgroup_id", "workgroup_linear_id",
]
