"""Per-dispatch configuration and timing records.

`DispatchConfig` checks what it can on its own (positive workgroup counts, plain-scalar
params); the checks against a Program and a backend's limits live in vyre.binding. This
module must never talk to a device.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, NamedTuple, NoReturn

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from .errors import InvalidDispatch

MAX_GRID_DIM = 65535


def _invalid(what: str, exc: ValidationError) -> InvalidDispatch:
    """A pydantic error as the vyre error users catch (every user error is a BackendError)."""
    parts = []
    for err in exc.errors(include_url=False)[:3]:
        loc = ".".join(str(x) for x in err["loc"]) or what
        parts.append(f"{loc}: {err['msg'].removeprefix('Value error, ')}")
    return InvalidDispatch(f"invalid {what}: " + "; ".join(parts))


class Params(dict[str, bool | int | float]):
    """A DispatchConfig's params: a dict that refuses every change.

    The launch caches remember what a config object proved (its params sorted and their
    bits read once per config, not per call), so a config must never change behind them:
    `cfg.params["a"] = 5.0` would otherwise be silently ignored by the next resident
    dispatch. Still a dict (reads, `{**cfg.params}`, json, isinstance checks work).
    """

    __slots__ = ()

    def _refuse(self, *_args: Any, **_kw: Any) -> NoReturn:
        """Refused: a config's params never change (see Params); make a new config."""
        raise InvalidDispatch(
            "DispatchConfig params cannot be changed once the config is made (dispatches "
            "remember a config's params); make a new config instead, e.g. "
            "cfg.model_copy(update={'params': {**cfg.params, 'a': 5.0}})"
        )

    __setitem__ = __delitem__ = __ior__ = _refuse
    clear = pop = popitem = setdefault = update = _refuse

    def __reduce__(self) -> tuple[Any, ...]:
        # dict's own pickling refills the object with __setitem__, which refuses
        return (Params, (dict(self),))

    def __copy__(self) -> Params:
        return self

    def __deepcopy__(self, _memo: Any) -> Params:
        return self  # its values are immutable scalars


class IndirectGrid(BaseModel):
    """The workgroup counts are three u32 values (x, y, z) in a device buffer at `offset`
    bytes, read when the dispatch runs: `DispatchConfig(grid=IndirectGrid(buffer=b))`, or
    the shape of `kernel.launch` / `kernel.step` (docs/guide.md, "Grids the device
    computes")."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    buffer: Any
    offset: int = Field(default=0, ge=0)

    def __init__(self, **data: Any) -> None:
        try:
            super().__init__(**data)
        except ValidationError as exc:
            raise _invalid("IndirectGrid", exc) from None

    @field_validator("offset")
    @classmethod
    def _aligned(cls, v: int) -> int:
        if v % 4:
            raise ValueError(f"indirect grid offset {v} must be a multiple of 4 bytes")
        return v


class DispatchOptions(BaseModel):
    """Typed per-dispatch options (DispatchConfig(options=...) also takes them as a dict).

    timing: True makes dispatch_with_device_buffers time its own host enqueue (wall_ns =
    enqueue_ns, read from the host clock around it); by default it returns an all-zero
    Timing, the cheapest launch (on the H100 host the timed one cost ~0.9 us more, a sixth
    of a raw cuLaunchKernel). `profile=True` times the device; dispatch_async's and
    pipelines' Timings are always filled. max_loop_iterations: on the reference backend,
    a loop that runs more iterations than this raises DispatchError (a guard against
    runaway loops in generated programs); None = no bound.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    timing: bool = False
    max_loop_iterations: int | None = Field(default=None, ge=0)

    @property
    def key(self) -> tuple[bool, int | None]:
        """What tells two option sets apart (part of the launch cache's key)."""
        return (self.timing, self.max_loop_iterations)


DEFAULT_OPTIONS = DispatchOptions()


class DispatchConfig(BaseModel):
    """How to run one dispatch: grid (workgroup counts), params, label and options.

    `grid` is an int, a 1-3 tuple of workgroup counts (each >= 1), or an IndirectGrid.
    `profile=True` makes the dispatch wait and report device nanoseconds where the backend
    has device timers. A config is immutable, its params included (see Params): make a new
    one with `model_copy(update={...})`, which validates the update like the constructor.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", arbitrary_types_allowed=True)

    grid: tuple[int, int, int] | IndirectGrid = (1, 1, 1)
    params: dict[str, bool | int | float] = Field(default_factory=Params)
    label: str | None = None
    profile: bool = False
    options: DispatchOptions = DEFAULT_OPTIONS

    def __init__(self, **data: Any) -> None:
        try:
            super().__init__(**data)
        except ValidationError as exc:
            raise _invalid("DispatchConfig", exc) from None

    @field_validator("options", mode="before")
    @classmethod
    def _options(cls, v: Any) -> Any:
        if isinstance(v, dict):
            known = sorted(DispatchOptions.model_fields)
            unknown = sorted(set(v) - set(known))
            if unknown:
                raise ValueError(f"unknown option(s) {unknown}; the options are {known}")
            return DispatchOptions(**v) if v else DEFAULT_OPTIONS
        return v

    @field_validator("params", mode="before")
    @classmethod
    def _numeric_params(cls, v: Any) -> Any:
        # pydantic's lax mode would read "2.0" as 2 and "1" as True: refuse, never convert
        if isinstance(v, dict):
            for name, x in v.items():
                if not isinstance(x, (bool, int, float, np.bool_, np.integer, np.floating)):
                    raise ValueError(
                        f"param {name!r} = {x!r} is a {type(x).__name__}, not a number; pass "
                        "a Python int, float or bool (convert text with float(s))"
                    )
            # a NumPy scalar as the Python value it holds: np.True_ stays a bool (refused
            # for a number param like True is), where pydantic's lax mode would make it 1
            return {name: x.item() if isinstance(x, np.generic) else x for name, x in v.items()}
        return v

    @field_validator("params", mode="after")
    @classmethod
    def _frozen_params(cls, v: Mapping[str, bool | int | float]) -> Params:
        return v if type(v) is Params else Params(v)

    def __setattr__(self, name: str, value: Any) -> None:
        raise InvalidDispatch(
            f"a DispatchConfig cannot be changed (setting {name!r}); make a new one with "
            f"cfg.model_copy(update={{{name!r}: ...}})"
        )

    def model_copy(self, *, update: Mapping[str, Any] | None = None,
                   deep: bool = False) -> DispatchConfig:
        """A copy with `update` applied, validated like the constructor (pydantic's own
        model_copy skips validation: it would let a plain, mutable params dict in)."""
        if not update:
            return self  # immutable: the copy would be indistinguishable
        fields = {name: getattr(self, name) for name in type(self).model_fields}
        return type(self)(**{**fields, **update})

    @field_validator("grid", mode="before")
    @classmethod
    def _grid(cls, v: Any) -> Any:
        if isinstance(v, IndirectGrid):
            return v
        if isinstance(v, bool):
            raise ValueError("grid must be workgroup counts, not a bool")
        if isinstance(v, int):
            v = (v,)
        if isinstance(v, (list, tuple)):
            if not 1 <= len(v) <= 3:
                raise ValueError(f"grid needs 1 to 3 workgroup counts, got {len(v)}")
            counts = [*v, *([1] * (3 - len(v)))]
            for axis, c in enumerate(counts):
                if isinstance(c, bool) or not isinstance(c, int):
                    raise ValueError(f"grid[{axis}] must be an int, got {c!r}")
                if c < 1:
                    raise ValueError(
                        f"grid[{axis}] = {c}: workgroup counts must be >= 1 (a dispatch over "
                        "zero elements should be skipped by the caller)"
                    )
            return tuple(counts)
        return v

    @classmethod
    def for_elements(
        cls, n: int, workgroup_size: int, max_per_dim: int = MAX_GRID_DIM, **kw: Any
    ) -> DispatchConfig:
        """A grid covering `n` invocations along x with `workgroup_size` per workgroup.

        Past `max_per_dim` workgroups the grid folds into y; kernels should index with the
        builder's `global_linear_id()`, which accounts for that.
        """
        if n < 1:
            raise InvalidDispatch(f"for_elements needs n >= 1, got {n}; skip empty dispatches")
        groups = math.ceil(n / workgroup_size)
        if groups <= max_per_dim:
            return cls(grid=(groups, 1, 1), **kw)
        # Balance the fold: (ceil(g/y), y) launches fewer than y spare workgroups, where
        # (max_per_dim, y) could launch up to max_per_dim - 1 that do nothing.
        y = math.ceil(groups / max_per_dim)
        return cls(grid=(math.ceil(groups / y), y, 1), **kw)

    @classmethod
    def for_shape(
        cls, shape: int | tuple[int, ...], workgroup_size: int | tuple[int, ...], **kw: Any
    ) -> DispatchConfig:
        """A grid covering `shape` = (nx[, ny[, nz]]) invocations, in axis order x, y, z.

        Each axis gets ceil(n / workgroup size along it) workgroups; a kernel indexes with
        `global_id(0)`, `global_id(1)`, `global_id(2)` and guards `< n` on each axis. Note the
        order: a row-major (H, W) NumPy array is shape (W, H) here (x runs along a row).
        """
        dims = (shape,) if isinstance(shape, int) else tuple(shape)
        ws = (workgroup_size,) if isinstance(workgroup_size, int) else tuple(workgroup_size)
        if not 1 <= len(dims) <= 3:
            raise InvalidDispatch(f"for_shape needs 1 to 3 extents (x, y, z), got {shape!r}")
        ws = (*ws, 1, 1, 1)[:3]
        grid = []
        for axis, (n, w) in enumerate(zip(dims, ws)):
            if isinstance(n, bool) or not isinstance(n, int) or n < 1:
                raise InvalidDispatch(
                    f"for_shape extent {axis} = {n!r}: every extent must be an int >= 1; "
                    "skip empty dispatches"
                )
            g = math.ceil(n / w)
            if g > MAX_GRID_DIM:
                raise InvalidDispatch(
                    f"for_shape extent {axis} = {n} needs {g} workgroups of {w}, more than "
                    f"{MAX_GRID_DIM}; use a larger workgroup size along that axis or loop "
                    "inside the kernel"
                )
            grid.append(g)
        return cls(grid=tuple(grid), **kw)

    @property
    def total_workgroups(self) -> int | None:
        if isinstance(self.grid, IndirectGrid):
            return None
        x, y, z = self.grid
        return x * y * z


class Timing(NamedTuple):
    """Nanoseconds spent on one dispatch (or one pipeline run).

    wall: from the call to its return (or to wait() returning, for async work);
    enqueue: recording and submitting; wait: blocked on the device; device: measured by
    device timers where the backend has them and profiling was asked for, else None.

    An immutable NamedTuple rather than a pydantic model: one is built per dispatch, and a
    pydantic model costs about 1 us to build, a quarter of a raw kernel launch.
    """

    wall_ns: int = 0
    enqueue_ns: int = 0
    wait_ns: int = 0
    device_ns: int | None = None
