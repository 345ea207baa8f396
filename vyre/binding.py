"""Binding a Program to device buffers and a DispatchConfig, checked once.

`bind` is the single place where a dispatch is validated: ownership, freed buffers, sizes
and element types against the declarations, the exact parameter set, the grid and the
workgroup against the backend's limits, and the features the Program needs. Backends and
recorded pipelines run only BoundDispatch values, so they never re-check and never fail on
those things at run time. This module must never touch device memory.
"""

from __future__ import annotations

import itertools
import weakref
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from .buffer import BufferBase, DeviceBuffer
from .config import DispatchConfig, IndirectGrid
from .errors import BufferOwnershipError, BufferStateError, InvalidDispatch, UnsupportedFeature
from .features import INDIRECT_DISPATCH
from .ir.nodes import BufferDecl, Program
from .ir.types import ScalarType, normalise_literal


class _Limits(Protocol):
    """The capabilities binding checks a dispatch against (vyre.Capabilities is one)."""

    @property
    def features(self) -> frozenset[str]: ...

    @property
    def limits(self) -> dict[str, int]: ...


class BindingBackend(Protocol):
    """What binding asks of the backend it validates a dispatch for: its id and
    capabilities (BindingBackend is one; typed here so this module never imports it)."""

    id: str

    def capabilities(self) -> _Limits: ...

BufferArg = Sequence[DeviceBuffer] | Mapping[str, DeviceBuffer]


@dataclass(frozen=True)
class BoundDispatch:
    """A validated dispatch: buffers in declaration order, element counts, typed params."""

    program: Program
    buffers: tuple[BufferBase, ...]
    counts: tuple[int, ...]
    params: tuple[bool | int | float, ...]  # in program.params order
    grid: tuple[int, int, int] | IndirectGrid
    config: DispatchConfig
    aliased: frozenset[int]  # indices of buffer slots that share a buffer with another slot
    # the backend's launch record for this binding (the one mutable part; see Launch)
    launch: Launch = field(compare=False, repr=False, default=None)  # type: ignore[assignment]

    def __post_init__(self) -> None:
        if self.launch is None:
            object.__setattr__(self, "launch", Launch(self.config))

    def param_dict(self) -> dict[str, bool | int | float]:
        return {p.name: v for p, v in zip(self.program.params, self.params)}


def readable_twice(arg: BufferArg) -> BufferArg:
    """`arg` as a sequence or mapping that can be read more than once: a list, tuple or
    mapping as is, anything else (an iterator, a generator) read into a tuple, here, once."""
    if isinstance(arg, (tuple, list, Mapping)) or not isinstance(arg, Iterable):
        return arg  # not iterable at all: bind() says what is wrong
    return tuple(arg)


def buffers_of(arg: BufferArg) -> Iterable[Any]:
    """The buffers of an inputs / outputs argument, in the order given."""
    t = type(arg)
    if t is list or t is tuple:  # the common cases, without an ABC check
        return arg
    if t is dict:
        return arg.values()  # type: ignore[union-attr]
    if isinstance(arg, Mapping):
        return arg.values()
    if not isinstance(arg, Iterable) or isinstance(arg, (str, bytes)):
        return ()  # not buffers at all: bind() says what is wrong
    return arg


def _describe(buf: object) -> str:
    if isinstance(buf, BufferBase):
        return buf.describe()
    label = getattr(buf, "label", None)
    return f"{type(buf).__name__}{f' {label!r}' if label else ''}"


def owned_buffer(backend: BindingBackend, buffer: object) -> BufferBase:
    """`buffer`, a live buffer of `backend` (else validate_buffer_ownership's error): the
    common case in a few attribute reads, since a small read's or write's Python is most
    of its time on a fast device."""
    if not (isinstance(buffer, BufferBase) and buffer.owner is backend and not buffer.freed):
        validate_buffer_ownership(backend, [buffer])  # raises, saying what is wrong
    assert isinstance(buffer, BufferBase)
    return buffer


def validate_buffer_ownership(backend: BindingBackend, buffers: Sequence[object]) -> None:
    """Every buffer must be a live buffer allocated by this backend instance."""
    for i, buf in enumerate(buffers):
        owner = getattr(buf, "owner", None)
        if isinstance(buf, (np.ndarray, bytes, bytearray, memoryview)):
            raise BufferOwnershipError(
                f"buffer {i} is host data ({type(buf).__name__}), not a device buffer; upload "
                "it first: b = backend.allocate_device_buffer(a.nbytes); backend.write(b, a) "
                "(or pass host arrays to backend.dispatch(...), which copies in and out)"
            )
        if owner is not backend or not isinstance(buf, BufferBase):
            owner_id = getattr(buf, "backend_id", None) or getattr(owner, "id", "unknown")
            hint = (
                " (a HostShimBuffer is host memory for tests and is never device memory)"
                if type(buf).__name__ == "HostShimBuffer"
                else ""
            )
            same_kind = owner is not None and getattr(owner, "id", None) == backend.id
            who = "another instance of " if same_kind else ""
            raise BufferOwnershipError(
                f"buffer {i} ({_describe(buf)}) belongs to {who}{owner_id!r}, not to this "
                f"backend {backend.id!r}{hint}; move it explicitly with vyre.transfer(buffer, "
                "backend) or allocate it with this backend's allocate_device_buffer"
            )
        if buf.freed:
            raise BufferStateError(
                f"buffer {i} ({buf.describe()}) was freed and cannot be used; "
                "allocate a new buffer"
            )


def _ordered(
    decls: tuple[BufferDecl, ...], given: BufferArg, role: str, program: Program
) -> list[object]:
    names = [d.name for d in decls]
    if isinstance(given, Mapping):
        extra = sorted(set(given) - set(names))
        missing = [n for n in names if n not in given]
        if extra or missing:
            raise InvalidDispatch(
                f"program {program.name!r} {role}s: expected buffers {names}, "
                f"missing {missing}, unexpected {extra}{_role_hint(program, extra)}"
            )
        return [given[n] for n in names]
    if isinstance(given, (str, bytes)) or not isinstance(given, Iterable):
        raise InvalidDispatch(
            f"program {program.name!r} {role} buffers must be a list in declaration order or "
            f"a dict by name, got {type(given).__name__}"
        )
    seq: list[object] = list(given)
    if len(seq) != len(decls):
        raise InvalidDispatch(
            f"program {program.name!r} takes {len(decls)} {role} buffer(s) {names} "
            f"(in declaration order), got {len(seq)}"
        )
    return seq


def _role_hint(program: Program, names: list[str]) -> str:
    """Say where a buffer given in the wrong role belongs."""
    hints = []
    for n in names:
        d = next((d for d in program.buffers if d.name == n), None)
        if d is not None:
            where = "outputs" if d.writable else "inputs"
            kind = "an output (writable" if d.writable else "an input (read"
            hints.append(f"{n!r} is {kind}: declared {d.access!r}) and belongs in {where}")
    return "; " + "; ".join(hints) if hints else ""


def _check_params(program: Program, params: Mapping[str, Any]) -> tuple[bool | int | float, ...]:
    declared = {p.name: p for p in program.params}
    missing = sorted(set(declared) - set(params))
    extra = sorted(set(params) - set(declared))
    if missing or extra:
        raise InvalidDispatch(
            f"program {program.name!r} params: expected {sorted(declared)}, "
            f"missing {missing}, unexpected {extra}; pass them in DispatchConfig(params=...)"
        )
    out: list[bool | int | float] = []
    for p in program.params:
        try:
            out.append(normalise_literal(params[p.name], p.ty))
        except ValueError as exc:
            raise InvalidDispatch(f"param {p.name!r} ({p.ty}): {exc}") from None
    return tuple(out)


def check_program_fits(backend: BindingBackend, program: Program) -> None:
    """Features and workgroup limits: fails before any compilation."""
    caps = backend.capabilities()
    missing = sorted(f for f in program.required_features if f not in caps.features)
    if missing:
        raise UnsupportedFeature(
            missing[0],
            backend.id,
            f"program {program.name!r} needs {missing}, which this backend does not report; "
            "see backend.capabilities().features",
        )
    lim = caps.limits
    x, y, z = program.workgroup_size
    if program.invocations_per_workgroup > lim["max_workgroup_invocations"]:
        raise InvalidDispatch(
            f"program {program.name!r}: workgroup size {program.workgroup_size} has "
            f"{program.invocations_per_workgroup} invocations; {backend.id} allows at most "
            f"{lim['max_workgroup_invocations']}"
        )
    for axis, (v, key) in enumerate(zip((x, y, z), ("x", "y", "z"))):
        if v > lim[f"max_workgroup_size_{key}"]:
            raise InvalidDispatch(
                f"program {program.name!r}: workgroup_size[{axis}] = {v} exceeds "
                f"{backend.id}'s limit {lim[f'max_workgroup_size_{key}']}"
            )
    if program.workgroup_bytes > lim["max_workgroup_bytes"]:
        raise InvalidDispatch(
            f"program {program.name!r} declares {program.workgroup_bytes} bytes of workgroup "
            f"memory; {backend.id} allows {lim['max_workgroup_bytes']}; use smaller arrays"
        )
    if len(program.buffers) > lim["max_buffers_per_program"]:
        raise InvalidDispatch(
            f"program {program.name!r} declares {len(program.buffers)} buffers; "
            f"{backend.id} binds at most {lim['max_buffers_per_program']}"
        )


def bind(
    backend: BindingBackend,
    program: Program,
    inputs: BufferArg,
    outputs: BufferArg,
    config: DispatchConfig,
) -> BoundDispatch:
    """Validate one dispatch completely; see the module docstring."""
    if isinstance(inputs, Mapping) and isinstance(outputs, Mapping):
        misplaced = [n for n in outputs if n in {d.name for d in program.inputs}]
        misplaced += [n for n in inputs if n in {d.name for d in program.outputs}]
        if misplaced:
            raise InvalidDispatch(f"program {program.name!r}: buffers in the wrong place"
                                  f"{_role_hint(program, misplaced)}")
    ins = _ordered(program.inputs, inputs, "input", program)
    outs = _ordered(program.outputs, outputs, "output", program)
    validate_buffer_ownership(backend, ins + outs)
    it_in, it_out = iter(ins), iter(outs)
    ordered: list[BufferBase] = []
    for d in program.buffers:
        ordered.append(next(it_out) if d.writable else next(it_in))  # type: ignore[arg-type]
    counts = []
    for d, buf in zip(program.buffers, ordered):
        if d.writable and buf.readonly:
            raise InvalidDispatch(
                f"program {program.name!r} writes buffer {d.name!r}, but {buf.describe()} was "
                "lent read-only by its producer; bind it to a read-only buffer, or borrow a "
                "writable array"
            )
        counts.append(_element_count(program, d, buf))
    seen: dict[int, int] = {}
    aliased: set[int] = set()
    for i, buf in enumerate(ordered):
        if id(buf) in seen:
            aliased.update({i, seen[id(buf)]})
        seen.setdefault(id(buf), i)
    caps = backend.capabilities()
    grid = config.grid
    if isinstance(grid, IndirectGrid):
        if INDIRECT_DISPATCH not in caps.features:
            raise UnsupportedFeature(INDIRECT_DISPATCH, backend.id)
        validate_buffer_ownership(backend, [grid.buffer])
        if grid.offset + 12 > grid.buffer.byte_len:
            raise InvalidDispatch(
                f"indirect grid needs 12 bytes at offset {grid.offset} of "
                f"{grid.buffer.describe()}"
            )
    else:
        limit = caps.limits["max_workgroups_per_dimension"]
        for axis, c in enumerate(grid):
            if c > limit:
                raise InvalidDispatch(
                    f"grid[{axis}] = {c} exceeds {backend.id}'s limit of {limit} workgroups "
                    "per dimension; fold the grid into y/z (DispatchConfig.for_elements does)"
                )
    check_program_fits(backend, program)
    return BoundDispatch(
        program=program,
        buffers=tuple(ordered),
        counts=tuple(counts),
        params=_check_params(program, config.params),
        grid=grid,
        config=config,
        aliased=frozenset(aliased),
        launch=Launch(config, backend),
    )


def _element_count(program: Program, d: BufferDecl, buf: BufferBase) -> int:
    size = d.ty.byte_size
    if buf.byte_len % size:
        raise InvalidDispatch(
            f"program {program.name!r} buffer {d.name!r} ({d.ty}, {size} bytes each): "
            f"{buf.describe()} is not a whole number of elements; bind a buffer whose length "
            f"is a multiple of {size} bytes (e.g. allocate {buf.byte_len // size * size} or "
            f"{-(-buf.byte_len // size) * size} bytes), or declare {d.name!r} with a smaller "
            "element type"
        )
    n = buf.byte_len // size
    if d.count is not None and n != d.count:
        raise InvalidDispatch(
            f"program {program.name!r} buffer {d.name!r} declares {d.count} elements of {d.ty}"
            f" ({d.count * size} bytes); {buf.describe()} holds {n}"
        )
    if n > 0xFFFFFFFF:
        raise InvalidDispatch(
            f"buffer {d.name!r}: {n} elements exceed the IR's u32 indexing; split the data"
        )
    return n


def element_type_of(program: Program, name: str) -> ScalarType:
    for b in program.buffers:
        if b.name == name:
            return b.ty
    for a in program.workgroup_arrays:
        if a.name == name:
            return a.ty
    raise KeyError(name)


class Launch:
    """What a backend prepared to launch one bound dispatch, and when it was last checked.

    `record` is opaque to the core: whatever the backend's `_prepare_launch` returned (a
    packed argument block, a recorded pass, a compiled plan); it must not hold the buffers
    themselves (weakly at most), so that a cached launch never keeps device memory alive.
    `epoch` is the backend's epoch when the launch was last checked runnable (instance open,
    buffers live and unfreed); the backend bumps its epoch on every free, close and context
    loss, so a launch is re-checked exactly when something it depends on may have gone. A
    profiled launch is never stamped (it always takes the checked, waited path), so one
    epoch comparison is all the hot path asks.

    `owner` is a weak reference to the instance that bound it (None for a Launch made
    outside `bind`): an instance refuses another's binding (see `check_bound_owner`). Epoch
    values are drawn from one process-wide counter (`next_epoch`), so a launch stamped by one
    instance never compares equal to another's epoch: the hot path's one comparison also
    proves the binding is this instance's.
    """

    __slots__ = ("epoch", "owner", "profile", "record", "untimed")

    def __init__(self, config: DispatchConfig, owner: BindingBackend | None = None) -> None:
        self.record: Any = None
        self.epoch = -1
        self.owner: weakref.ref[BindingBackend] | None = (
            None if owner is None else weakref.ref(owner))
        self.profile = config.profile
        self.untimed = not config.options.timing


_epochs = itertools.count(1)
#: A fresh epoch value, unique in this process (next() on a count is atomic under the GIL).
next_epoch = _epochs.__next__


def _instance(backend: object) -> str:
    """An instance named so that two of one kind are told apart."""
    return f"{getattr(backend, 'id', '?')!r} (instance {id(backend):#x})"


def check_bound_owner(backend: BindingBackend, bound: BoundDispatch, what: str) -> None:
    """`bound` was bound by `backend`, else BufferOwnershipError naming both instances.

    Its buffers were proved to belong to the instance that bound it; another instance would
    run on memory it does not own (the reference) or hand the driver foreign handles."""
    ref = bound.launch.owner
    binder: object = ref() if ref is not None else None
    if binder is backend:
        return
    if binder is None:  # made outside bind(), or its instance is gone: its buffers decide
        owners = {id(b.owner): b.owner for b in bound.buffers}
        if all(o is backend for o in owners.values()):
            return
        binder = next(o for o in owners.values() if o is not backend)
    raise BufferOwnershipError(
        f"{what}: this BoundDispatch of program {bound.program.name!r} was bound by "
        f"{_instance(binder)}, not by this backend {_instance(backend)}; its buffers are the "
        "other instance's memory. Bind it here with this backend's bind(program, inputs, "
        "outputs, config) over this backend's buffers (move data with vyre.transfer(buffer, "
        "backend)), or dispatch it on the instance that bound it"
    )
