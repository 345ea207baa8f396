"""The kernel language: the functions a decorated kernel calls (vyre.global_id, vyre.let,
vyre.if_, vyre.range, vyre.static, ...), each writing into the ProgramBuilder of the kernel
being traced now (`current`, set by vyre.kernel while it traces).

Outside a kernel each is an error naming why. This module must never trace or launch a
kernel (vyre.kernel does).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextvars import ContextVar
from typing import Any

from .builder import (
    BufferRef,
    BuildError,
    ProgramBuilder,
    Value,
    Variable,
)
from .builder.sites import _FOR_IN
from .ir.types import ScalarType
from .kernel_flow import DEVICE_RANGE_MARK

current: ContextVar[ProgramBuilder | None] = ContextVar("vyre_kernel_builder", default=None)


def _builder(what: str) -> ProgramBuilder:
    b = current.get()
    if b is None:
        raise BuildError(f"vyre.{what}() is only meaningful inside a @vyre.kernel function")
    return b


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


