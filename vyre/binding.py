"""Binding a Program to device buffers and a DispatchConfig, checked once.

`bind` is the single place where a dispatch is validated: ownership, freed buffers, sizes
and element types against the declarations, the exact parameter set, the grid and the
workgroup against the backend's limits, and the features the Program needs. Backends and
recorded pipelines run only BoundDispatch values, so they never re-check and never fail on
those things at run time. This module must never touch device memory.
"""

from __future__ import annotations

import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from .buffer import BufferBase, DeviceBuffer
from .config import DispatchConfig, IndirectGrid
from .errors import BufferOwnershipError, BufferStateError, InvalidDispatch, UnsupportedFeature
from .features import INDIRECT_DISPATCH
from .ir.nodes import BufferDecl, Program
from .ir.types import ScalarType, normalise_literal

if TYPE_CHECKING:
    from .backend import BaseBackend

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

    def param_dict(self) -> dict[str, bool | int | float]:
        return {p.name: v for p, v in zip(self.program.params, self.params)}


def readable_twice(arg: BufferArg) -> BufferArg:
    """`arg` as a sequence or mapping that can be read more than once: a list, tuple or
    mapping as is, anything else (an iterator, a generator) read into a tuple, here, once."""
    if isinstance(arg, (tuple, list, Mapping)):
        return arg
    return tuple(arg)


def _describe(buf: object) -> str:
    if isinstance(buf, BufferBase):
        return buf.describe()
    label = getattr(buf, "label", None)
    return f"{type(buf).__name__}{f' {label!r}' if label else ''}"


def validate_buffer_ownership(backend: BaseBackend, buffers: Sequence[object]) -> None:
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


def check_program_fits(backend: BaseBackend, program: Program) -> None:
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
    backend: BaseBackend,
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
    )


def _element_count(program: Program, d: BufferDecl, buf: BufferBase) -> int:
    size = d.ty.byte_size
    if buf.byte_len % size:
        raise InvalidDispatch(
            f"program {program.name!r} buffer {d.name!r} ({d.ty}, {size} bytes each): "
            f"{buf.describe()} is not a whole number of elements"
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


class BindMemo:
    """Remembers what `bind` proved about a (program, buffers, grid, params) dispatch, so a
    program re-dispatched over the same resident buffers is validated once, not per call.

    It keeps only weak references to the buffers (a dropped buffer is never kept alive by
    this memo) and checks on every hit that each one is still the very object it validated,
    so a recycled id can never pass for it. Freed buffers, closed or lost backends are still
    refused per call by the caller (check_usable), as before. Indirect grids are not
    remembered: their buffer is part of the grid. Bounded: it starts afresh when full.
    """

    LIMIT = 256

    def __init__(self) -> None:
        self._entries: dict[tuple[Any, ...], _MemoEntry] = {}

    def bind(
        self,
        backend: BaseBackend,
        program: Program,
        inputs: BufferArg,
        outputs: BufferArg,
        config: DispatchConfig,
    ) -> BoundDispatch:
        grid = config.grid
        if type(grid) is not tuple:  # an IndirectGrid (pydantic isinstance checks are slow)
            return bind(backend, program, inputs, outputs, config)
        # bind() gets what was read here: an iterator passed in is consumed by reading it
        ins_arg, outs_arg = readable_twice(inputs), readable_twice(outputs)
        in_map = isinstance(ins_arg, Mapping)
        out_map = isinstance(outs_arg, Mapping)
        ins: tuple[Any, ...] = tuple(ins_arg.values()) if in_map else tuple(ins_arg)  # type: ignore[union-attr]
        outs: tuple[Any, ...] = tuple(outs_arg.values()) if out_map else tuple(outs_arg)  # type: ignore[union-attr]
        given: tuple[Any, ...] = ins + outs
        try:
            key: tuple[Any, ...] = (
                program.content_hash, tuple(map(id, ins)), tuple(map(id, outs)),
                tuple(ins_arg) if in_map else None, tuple(outs_arg) if out_map else None,
                grid, tuple(sorted(config.params.items())),
            )
            hit = self._entries.get(key)
        except TypeError:  # an unhashable param value: bind() will say what is wrong
            return bind(backend, program, ins_arg, outs_arg, config)
        if hit is not None and all(r() is b for r, b in zip(hit.refs, given)):
            return BoundDispatch(
                program=program, buffers=tuple(given[j] for j in hit.order), counts=hit.counts,
                params=hit.params, grid=grid, config=config, aliased=hit.aliased,
            )
        bound = bind(backend, program, ins_arg, outs_arg, config)
        try:
            refs = tuple(weakref.ref(b) for b in given)
        except TypeError:  # not weak-referenceable: not remembered
            return bound
        position = {id(b): j for j, b in enumerate(given)}
        order = tuple(position[id(b)] for b in bound.buffers)
        if len(self._entries) >= self.LIMIT:
            self._entries.clear()
        self._entries[key] = _MemoEntry(refs, order, bound.counts, bound.params, bound.aliased)
        return bound


@dataclass(frozen=True)
class _MemoEntry:
    refs: tuple[weakref.ref[Any], ...]
    order: tuple[int, ...]  # index into inputs + outputs of each declared buffer slot
    counts: tuple[int, ...]
    params: tuple[bool | int | float, ...]
    aliased: frozenset[int]
