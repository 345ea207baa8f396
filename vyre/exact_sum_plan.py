"""How a dispatch with order-independent float atomic adds runs: one plan for every backend.

A Program whose f32 / f64 atomic adds are summed exactly (vyre.lower.exact_sum) runs as two
device dispatches per user dispatch, enqueued together under the backend's lock so that
nothing lands between them: the rewritten program (`Plan.main`: its adds go into integer
scratch words) over the user's buffers plus one scratch buffer per target, then per target
the finalisation of its type (`FINALIZE_FOR`), which rounds each touched element once,
stores it and zeroes its scratch again. Every backend runs the same plan through its own
queue (`prepare`, `launch`: vyre.parts.Queue), the reference included, so the bits are the
same.

Scratch buffers belong to the backend instance (`ScratchPool`), not to a binding: they
start zeroed and every finalisation leaves every word its dispatch wrote zero, so any later
dispatch may use them, whatever its target's size and type (their layouts differ). A
backend's queue is in order, so dispatches sharing them never overlap. A pool only grows
(the bound dispatches and recorded pipelines that use a smaller buffer keep working); it is
freed when the backend closes, and it is not among `live_buffers()`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Protocol

from .binding import BindingBackend, BoundDispatch, bind
from .buffer import BufferBase
from .config import DispatchConfig
from .errors import OutOfDeviceMemory
from .ir.types import ScalarType
from .lower.exact_sum import (
    FINALIZE_FOR,
    FINALIZE_WORKGROUP,
    FORMATS,
    Format,
    Plan,
    plan_for,
    scratch_words,
)


class PlanMemory(Protocol):
    """The allocator part of the backend (vyre.parts.Allocator): the scratch's memory."""

    def allocate(self, byte_len: int, label: str | None) -> Any: ...

    def write(self, buffer: Any, data: memoryview, offset: int) -> None: ...

    def free(self, buffer: Any) -> None: ...


class PlanBackend(BindingBackend, Protocol):
    """What a plan asks of its backend (vyre.backend.BaseBackend, typed here by what is
    used so that this module never imports the base class, which imports it): its lock,
    scratch pool and allocator, and a launch record per sub-dispatch."""

    _lock: Any
    _exact_scratch: Any

    @property
    def _memory(self) -> PlanMemory: ...

    def capabilities(self) -> Any: ...

    def _prepare_launch(self, bound: Any) -> Any: ...

def max_target_elements(fmt: Format) -> int:
    """Most elements of one exact-sum target: its scratch words are indexed with u32."""
    n = (2**32 - 1) * 32 // (32 * fmt.per_element + 1)
    while scratch_words(fmt, n) > 2**32 - 1:
        n -= 1
    return n

Slot = int | BufferBase  # a sub-dispatch's buffer: the user's buffer slot, or a scratch buffer


@dataclass(frozen=True)
class PlanStep:
    """One device dispatch of a plan: the backend's launch record, where each of its buffers
    comes from, and the dispatch itself without buffers (an async launch fills them in)."""

    record: Any
    slots: tuple[Slot, ...]
    template: BoundDispatch


@dataclass(frozen=True)
class PlanRecord:
    """A launch record standing for several device dispatches (PlanBackend._ready makes it)."""

    steps: tuple[PlanStep, ...]


class ScratchPool:
    """Zeroed u32 scratch buffers of one backend instance, one growing list per target
    position (a plan's first target uses position 0, and so on)."""

    def __init__(self) -> None:
        self._by_position: dict[int, list[BufferBase]] = {}

    def get(self, backend: PlanBackend, position: int, words: int, fmt: Format
            ) -> BufferBase:
        """A zeroed buffer of at least `words` u32 words (caller holds the backend's lock)."""
        held = self._by_position.setdefault(position, [])
        if held and held[-1].byte_len >= 4 * words:
            return held[-1]
        grown = max(words, 2 * held[-1].byte_len // 4 if held else 0, 64)
        limit = backend.capabilities().limits.get("max_allocation_bytes")
        if limit is not None and 4 * grown > limit:
            grown = max(words, limit // 4)
            if 4 * grown > limit:
                raise OutOfDeviceMemory(
                    backend.id, 4 * words,
                    f"the exact {fmt.ty} atomic sums of a target need {4 * words} bytes of "
                    f"scratch ({4 * fmt.per_element} bytes an element), more than "
                    f"the largest allocation ({limit} bytes); split the target buffer"
                    + (", or use atomic_add_relaxed (order-dependent bits)"
                       if fmt.ty is ScalarType.F32 else ""))
        memory = backend._memory
        buf = memory.allocate(4 * grown, f"vyre.exact_sum.scratch{position}")
        try:
            memory.write(buf, memoryview(bytes(4 * grown)), 0)
        except BaseException:
            memory.free(buf)
            raise
        held.append(buf)
        return buf

    def release(self, backend: PlanBackend) -> list[BufferBase]:
        """Forget every buffer and return them (the backend frees them)."""
        out = [b for held in self._by_position.values() for b in held]
        self._by_position.clear()
        return out


def _check_size(program_name: str, buffer: str, count: int, fmt: Format) -> None:
    most = max_target_elements(fmt)
    if count > most:
        raise OutOfDeviceMemory(
            "exact_sum", 4 * scratch_words(fmt, count),
            f"program {program_name!r} adds to {fmt.ty} buffer {buffer!r} of {count} elements "
            f"with order-independent atomic adds, whose scratch ({fmt.per_element} u32 "
            f"words an element) is indexed with u32, so at most {most} elements; split the "
            "buffer" + (", or use atomic_add_relaxed (order-dependent bits)"
                        if fmt.ty is ScalarType.F32 else ""))


def sub_dispatches(backend: PlanBackend, bound: BoundDispatch, plan: Plan
                   ) -> list[tuple[BoundDispatch, tuple[Slot, ...]]]:
    """The device dispatches of `bound` under `plan`, bound, each with its buffer slots."""
    program = bound.program
    scratch: list[BufferBase] = []
    fmts = [FORMATS[program.buffers[slot].ty] for slot in plan.targets]
    for position, slot in enumerate(plan.targets):
        count = bound.counts[slot]
        _check_size(program.name, program.buffers[slot].name, count, fmts[position])
        scratch.append(backend._exact_scratch.get(
            backend, position, scratch_words(fmts[position], max(count, 1)), fmts[position]))
    decls = plan.main.buffers
    buffers: list[BufferBase] = [*bound.buffers, *scratch]
    ins = [b for d, b in zip(decls, buffers) if not d.writable]
    outs = [b for d, b in zip(decls, buffers) if d.writable]
    main_slots: tuple[Slot, ...] = (*range(len(bound.buffers)), *scratch)
    out = [(bind(backend, plan.main, ins, outs, bound.config), main_slots)]
    cfg = bound.config
    for position, slot in enumerate(plan.targets):
        count = bound.counts[slot]
        if count == 0:
            continue
        fin_cfg = DispatchConfig.for_elements(
            count, FINALIZE_WORKGROUP,
            max_per_dim=backend.capabilities().limits["max_workgroups_per_dimension"],
            options=cfg.options, profile=cfg.profile)
        fin = bind(backend, FINALIZE_FOR[fmts[position].ty], [],
                   [bound.buffers[slot], scratch[position]], fin_cfg)
        out.append((fin, (slot, scratch[position])))
    return out


def prepare(backend: PlanBackend, bound: BoundDispatch) -> Any:
    """`bound`'s launch record: the backend's own, or a PlanRecord when it has exact sums."""
    plan = plan_for(bound.program)
    if plan is None:
        return backend._prepare_launch(bound)
    steps = []
    for sub, slots in sub_dispatches(backend, bound, plan):
        sub.launch.record = backend._prepare_launch(sub)
        steps.append(PlanStep(sub.launch.record, slots, dataclasses.replace(sub, buffers=())))
    return PlanRecord(tuple(steps))


def step_buffers(step: PlanStep, buffers: tuple[BufferBase, ...]) -> tuple[BufferBase, ...]:
    return tuple(buffers[s] if type(s) is int else s for s in step.slots)  # type: ignore[misc]


def expand(backend: PlanBackend, bound: BoundDispatch) -> list[BoundDispatch]:
    """`bound` as the device dispatches it runs (itself when it has no exact sums): what a
    recorded pipeline records in its place."""
    plan = plan_for(bound.program)
    if plan is None:
        return [bound]
    with backend._lock:
        return [sub for sub, _ in sub_dispatches(backend, bound, plan)]
