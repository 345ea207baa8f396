"""Declared buffer shapes and `C[i, j]` indexing (issue 31 item 2), for the builder and
`@vyre.kernel`.

A buffer may declare a shape, row-major like NumPy: `(rows, cols)`, `(depth, rows, cols)`,
... Each extent is an int, a u32 / i32 kernel value (a param, so one Program serves every
size), or `None` for the first extent only (as many rows as the bound length holds). The
IR has no shapes: `C[i, j]` becomes the flat index `i * cols + j`, and an index outside its
own axis (j >= cols, or a negative i32) makes the whole access out of range (a load reads
0, a store does nothing), exactly as NumPy refuses `C[0, cols]` rather than reading the
next row. This module never knows about backends.

Launch shapes (`vyre.xyz`, `index_order`): a tuple launch shape of a kernel that indexes
with `vyre.global_index` is the data's shape in NumPy order, (rows, cols) -> x = cols,
y = rows; a kernel indexing with raw `vyre.global_id(axis)` (axis order x, y, z) gets its
grid as `vyre.xyz(nx, ny[, nz])`, and a plain tuple that reads differently in the two
orders is refused, naming both (kernel.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .ir import nodes as N
from .ir.types import ScalarType

# (vyre.builder imports this module; the builder's classes reach it through the builder
# instance, `builder.kinds`, so that this module never imports the builder back)
ProgramBuilder = Any
BufferRef = Any

U32 = ScalarType.U32
_OUT_OF_RANGE = 0xFFFFFFFF  # an index no buffer reaches (a binding holds < 2**32 elements)

Extent = int | Any | None  # an int, a kernel Value (u32 / i32) or None (first axis only)


def check_shape(name: str, shape: Any, builder: ProgramBuilder) -> tuple[Extent, ...]:
    """The declared shape of buffer `name` as a tuple, or BuildError naming what is wrong."""
    BuildError, Value = builder.kinds

    if not isinstance(shape, (tuple, list)) or not shape:
        raise BuildError(f"buffer {name!r}: shape must be a non-empty tuple of extents "
                         f"(rows, cols, ...), got {shape!r}")
    out: list[Extent] = []
    for axis, n in enumerate(shape):
        if n is None:
            if axis:
                raise BuildError(f"buffer {name!r} shape {tuple(shape)!r}: only the first "
                                 "extent may be None (as many rows as the bound length holds)")
        elif isinstance(n, Value):
            if n._b is not builder or n.ty not in (U32, ScalarType.I32):
                raise BuildError(f"buffer {name!r} shape {tuple(shape)!r}: extent {axis} is "
                                 f"a {n.ty} value; an extent is an int, a u32/i32 param of "
                                 "this kernel or None")
        elif isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise BuildError(f"buffer {name!r} shape {tuple(shape)!r}: extent {axis} = {n!r}; "
                             "every extent must be an int >= 1, a u32/i32 param, or None "
                             "(first only)")
        out.append(n)
    return tuple(out)


def static_count(shape: tuple[Extent, ...]) -> int | None:
    """The element count a shape fixes (every extent an int), else None."""
    total = 1
    for n in shape:
        if not isinstance(n, int):
            return None
        total *= n
    return total


def _u32(builder: ProgramBuilder, v: Any) -> N.ExprNode:
    e = builder._coerce(v, U32, "an index or extent")
    if e.ty is ScalarType.I32:  # a negative one becomes huge: out of its axis
        e = N.Bitcast(a=e, ty=U32)
    if e.ty is not U32:
        raise builder.kinds[0](f"an index must be u32 or i32, got {e.ty}; cast it")
    return e


def _bin(op: str, a: N.ExprNode, b: N.ExprNode) -> N.ExprNode:
    ty = ScalarType.BOOL if op in ("lt", "logical_and") else U32
    return N.Binary(op=op, a=a, b=b, ty=ty)


def flat_index(buf: BufferRef, index: tuple[Any, ...]) -> N.ExprNode:
    """`buf[i, j, ...]` as a flat u32 index: row-major, and out of range (all ones) where
    any index is outside its own axis."""
    b, shape, name = buf._b, buf.dims, buf.name
    BuildError = b.kinds[0]
    if shape is None:
        raise BuildError(
            f"{name}[{', '.join('...' for _ in index)}]: buffer {name!r} declares no shape, so "
            f"it takes one flat index; declare one (vyre.Buffer[ty, access, (rows, cols)] or "
            f"k.buffer(..., shape=(rows, cols))) or index {name}[i * cols + j]")
    if len(index) != len(shape):
        raise BuildError(
            f"{name} has shape {_text(shape)} ({len(shape)} axes) but is indexed with "
            f"{len(index)} index(es); write {name}[{', '.join('ijklmn'[:len(shape)])}] (row-major, "
            f"like NumPy), or {name}.flat[k] for the flat element k")
    checks: list[N.ExprNode] = []
    flat: N.ExprNode | None = None
    for axis, (i, n) in enumerate(zip(index, shape)):
        if isinstance(i, (int,)) and not isinstance(i, bool):
            if i < 0:
                raise BuildError(f"{name}[...]: index {i} on axis {axis} is negative; kernel "
                                 "indices do not count from the end (write the extent minus "
                                 "one, e.g. cols - 1)")
            if isinstance(n, int) and i >= n:
                raise BuildError(f"{name}[...]: index {i} is out of range for axis {axis} of "
                                 f"shape {_text(shape)} (size {n})")
        if isinstance(i, tuple):
            raise BuildError(f"{name}[...]: axis {axis} got a tuple; index each axis with one "
                             "value")
        e = _u32(b, i)
        proven = isinstance(i, int) and isinstance(n, int)  # (checked just above)
        if not proven:
            if n is None:  # rows = length / (product of the other extents)
                rest: N.ExprNode = N.Const(ty=U32, value=1)
                for m in shape[1:]:
                    rest = _bin("mul", rest, _u32(b, m))
                bound: N.ExprNode = _bin("div", N.Length(buffer=name), rest)
            else:
                bound = _u32(b, n)
            checks.append(_bin("lt", e, bound))
        flat = e if flat is None else _bin("add", _bin("mul", flat, _u32(b, n)), e)
    assert flat is not None
    if not checks:
        return flat
    ok = checks[0]
    for c in checks[1:]:
        ok = _bin("logical_and", ok, c)
    return N.Select(cond=ok, a=flat, b=N.Const(ty=U32, value=_OUT_OF_RANGE), ty=U32)


def _text(shape: tuple[Extent, ...]) -> str:
    parts = ["None" if n is None else str(n) if isinstance(n, int) else "param"
             for n in shape]
    return f"({', '.join(parts)}{',' if len(parts) == 1 else ''})"


@dataclass(frozen=True)
class XYZ:
    """A launch grid given in axis order x, y, z (`vyre.xyz(nx, ny[, nz])`): x is
    `global_id(0)`, the fastest-varying axis (a row of a row-major array)."""

    extents: tuple[int, ...]

    def __repr__(self) -> str:
        return f"vyre.xyz{self.extents!r}"


def xyz(*extents: int) -> XYZ:
    """A launch shape in axis order x, y, z (for kernels indexing with `global_id(axis)`);
    a plain tuple is read in NumPy order, or refused where that is ambiguous."""
    return XYZ(tuple(extents))


def global_index(builder: ProgramBuilder, ndim: int) -> tuple[Any, ...]:
    """This invocation's index in NumPy order over a launch of `ndim` axes: (i,) (the
    linear id of a 1-D launch), (row, col) = (gid.y, gid.x), (depth, row, col)."""
    BuildError = builder.kinds[0]

    if isinstance(ndim, bool) or ndim not in (1, 2, 3):
        raise BuildError(f"global_index(ndim): ndim must be 1, 2 or 3, got {ndim!r}")
    builder.index_orders.add("numpy")
    if ndim == 1:
        return (builder.global_linear_id(),)
    return tuple(builder.global_id(axis) for axis in reversed(range(ndim)))


def static_extents(shape: tuple[Extent, ...], params: dict[str, Any],
                   names: tuple[str | None, ...]) -> tuple[int | None, ...]:
    """The extents of a declared shape at launch: ints stay, a param's extent is the value
    given for it (`names[axis]` is the param's name), None stays None."""
    out: list[int | None] = []
    for n, pname in zip(shape, names):
        if isinstance(n, int):
            out.append(n)
        elif pname is not None and pname in params:
            out.append(int(params[pname]))
        else:
            out.append(None)
    return tuple(out)


__all__ = ["XYZ", "check_shape", "flat_index", "global_index", "static_count", "xyz"]
