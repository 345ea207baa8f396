"""The bottom of ProgramBuilder: its state, the declarations of a kernel (buffers,
params, workgroup arrays), the invocation ids (global_id, local_index, ...), literals and
how operands become typed IR (coercion, indices, shift amounts).

This module must never emit a control-flow block (vyre.builder.program does).
"""

from __future__ import annotations

import re
from abc import abstractmethod
from typing import Any, cast

from ..ir import nodes as N
from ..ir.limits import MAX_NAME_LEN
from ..ir.types import ScalarType
from ..ir.validate import is_valid_name
from .buffers import BufferRef
from .control import _Control
from .rules import U32, _const, _literal_type, _scalar_type
from .sites import _ASSIGNED, BuildError, user_name, user_site
from .values import Value, Variable, _is_number, _Scope


class Declarations:
    """A ProgramBuilder's state, its declarations (buffers, params, workgroup arrays), the
    invocation ids and how operands become IR (the statements and control flow build on
    it: vyre.builder.statements, vyre.builder.program)."""

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

    # The statements the values and buffer handles made here emit through their builder
    # (vyre.builder.values.Builder): defined one layer up, by Statements.
    @abstractmethod
    def assign(self, var: Variable, value: Any) -> None:
        """Assign `value` to the local `var` (Statements.assign)."""

    @abstractmethod
    def store(self, buf: BufferRef, index: Any, value: Any) -> None:
        """Store `value` at `buf[index]` (Statements.store)."""

    @abstractmethod
    def atomic(self, op: str, buf: BufferRef, index: Any, value: Any, comparand: Any = None,
               relaxed: bool = False) -> Value:
        """An atomic `op` on `buf[index]` (Statements.atomic)."""

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
            from ..shapes import check_shape, static_count

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
            from ..shapes import check_shape, static_count

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
        from ..shapes import global_index

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
