"""A decorated kernel's launch signature: the annotations its parameters take
(`vyre.Buffer[ty]`, `Output`, `InOut`, a shape of `Dim`s, a `TypeParam`, a scalar type)
and how each parameter of a function is classified (buffer, param, build-time constant).

This module must never build a Program or launch one (vyre.kernel does).
"""

from __future__ import annotations
import __future__

import builtins
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from .builder import (
    BuildError,
)
from .ir.types import ScalarType

_ACCESS = ("read", "write", "read_write")


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


def _def_site(fn: Callable[..., Any]) -> str:
    code = fn.__code__
    return f"{code.co_filename}:{code.co_firstlineno}"
