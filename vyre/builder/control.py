"""Control blocks made but not yet entered (`if_`, `else_`, `while_`, `for_range`):
the builder keeps each until its `with` enters it, so one written without `with` (which
would silently do nothing) is refused at build().

This module must never emit a statement.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from .sites import BuildError, user_site
from .values import Builder


class _Control:
    """A control block (`if_`, `else_`, `while_`, `for_range`) made but not yet entered.

    Python runs `k.if_(c)` without `with` as a call whose result is dropped: nothing would
    be recorded and the indented code would run unconditionally. Every one made is kept
    until entered, and `build()` refuses a program with any left over.
    """

    __slots__ = ("_b", "_cm", "_entered", "_fix", "_site")

    def __init__(self, builder: Builder, fix: str, cm: Any) -> None:
        self._b = builder
        self._cm = cm
        self._fix = fix
        self._site = user_site()
        self._entered = False
        builder._unentered[id(self)] = self

    def __enter__(self) -> Any:
        if self._entered:
            raise BuildError(f"a control block is entered once; write a new {self._fix}")
        self._entered = True
        self._b._unentered.pop(id(self), None)
        return self._cm.__enter__()

    def __exit__(self, *exc: Any) -> Any:
        return self._cm.__exit__(*exc)

    def error(self) -> BuildError:
        return BuildError(
            f"a control block was made but never entered, so it does nothing (the code meant "
            f"for its block ran unconditionally, or not at all); write {self._fix}", self._site
        )


def _tracked(fix: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Make a control-block method return a `_Control` (see there); `fix` is the spelling."""
    def wrap(method: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(method)
        def control(self: Builder, *args: Any, **kwargs: Any) -> _Control:
            return _Control(self, fix, method(self, *args, **kwargs))
        return control
    return wrap
