"""Handles of a kernel's memory: `BufferRef` (a storage buffer or workgroup array:
index to load, assign to store, atomics, a declared shape) and its flat view.

Loads are built here; stores and atomics are statements, emitted by the builder the handle
belongs to. This module must never declare a buffer (ProgramBuilder does).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ..ir import nodes as N
from ..ir.types import ScalarType
from .rules import _promote
from .sites import BuildError, _no_host_print
from .values import Builder, Value


class BufferRef:
    """A storage buffer or workgroup array: index to load, assign to store, atomics. With a
    declared shape (vyre.shapes), `C[i, j]` indexes it row-major and `C.shape` gives its
    extents; `C.flat[k]` is the flat element k either way."""

    def __init__(self, builder: Builder, name: str, ty: ScalarType, access: str,
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
        from ..shapes import flat_index

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
