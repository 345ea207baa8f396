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
vyre/kernel_flow.py and vyre/kernel_expr.py) and the result is called once with proxy values
(the builder's `Value` and `BufferRef`); every operation on them records IR through a
`ProgramBuilder`.
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

import inspect
import struct
import sys
from collections.abc import Callable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

import numpy as np

from .buffer import BufferBase, DeviceBuffer
from .builder import (
    BuildError,
    ProgramBuilder,
)
from .config import DispatchConfig, IndirectGrid
from .errors import InvalidDispatch
from .interface import Backend
from .ir.nodes import Program
from .ir.types import ScalarType
from .kernel_ast import compile_kernel
from .kernel_lang import (
    assert_,
    barrier,
    break_,
    continue_,
    else_,
    global_id,
    global_index,
    global_linear_id,
    if_,
    let,
    lit,
    local_id,
    local_index,
    num_workgroups,
    print,
    range,
    return_,
    shared,
    static,
    subgroup_lane,
    subgroup_size,
    while_,
    workgroup_id,
    workgroup_linear_id,
)
from .kernel_lang import current as _current
from .kernel_signature import (
    Buffer,
    BufferSpec,
    Dim,
    InOut,
    Output,
    TypeParam,
    _classify,
    _def_site,
)
from .lru import LruDict
from .pipeline import Step
from .shapes import XYZ, static_extents

# what launch / step / config take as the extent of a launch (see Kernel.config)
LaunchShape = int | tuple[int, ...] | XYZ | IndirectGrid
KERNEL_CACHE_SIZE = 256  # Programs a kernel keeps, one per distinct build-time constants
# the kernels whose functions are being traced now (a kernel that builds itself recurses)
_tracing: ContextVar[tuple[Kernel, ...]] = ContextVar("vyre_kernel_tracing", default=())



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
