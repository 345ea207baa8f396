"""The registry of function lowerings: (function name, result type) -> lowering.

A lowering is `fn(b: Builder, args: tuple[X, ...]) -> X`: given the call's arguments
(each already evaluated once into a local or a constant) it returns an expression of the
call's type, adding the statements it needs to `b` (vyre.lower.maths.build). Register one
with `@lowering("exp", F32, F16)` in a module of this package: every module of the package
but the infrastructure ones (`_INFRASTRUCTURE`) is imported on first use, so a new
function is one new module and no edit here. `lowered(fn, ty)` is what
vyre.lower.maths.apply asks.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable

from vyre.ir.types import ScalarType

from .build import Builder, X

Lowering = Callable[[Builder, tuple[X, ...]], X]

_LOWERINGS: dict[tuple[str, ScalarType], Lowering] = {}

# the package's modules that register nothing; every other one is imported on first use
# (not at import of vyre.lower: they compute constant tables)
_INFRASTRUCTURE = frozenset({"apply", "build", "dd", "registry", "rounding", "rounding64"})
_loaded = False


def lowering(fn: str, *types: ScalarType) -> Callable[[Lowering], Lowering]:
    """Register the decorated function as the lowering of `fn` for each of `types`."""

    def register(f: Lowering) -> Lowering:
        for ty in types:
            key = (fn, ty)
            assert key not in _LOWERINGS, f"two lowerings of {fn} for {ty}"
            _LOWERINGS[key] = f
        return f

    return register


def _load() -> None:
    global _loaded
    if not _loaded:
        _loaded = True
        path = importlib.import_module(__package__ or "vyre.lower.maths").__path__
        for m in sorted(i.name for i in pkgutil.iter_modules(path)):
            if m not in _INFRASTRUCTURE:
                importlib.import_module(f"{__package__}.{m}")


def lowered(fn: str, ty: ScalarType) -> Lowering | None:
    """The lowering of `fn` with result type `ty`, or None (the call stays as it is)."""
    _load()
    return _LOWERINGS.get((fn, ty))


def registered() -> frozenset[tuple[str, ScalarType]]:
    """Every (function, type) with a lowering."""
    _load()
    return frozenset(_LOWERINGS)


__all__ = ["Lowering", "lowered", "lowering", "registered"]
