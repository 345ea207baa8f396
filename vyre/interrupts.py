"""Ctrl-C that cannot tear a native critical section in half.

A KeyboardInterrupt is raised at whatever Python bytecode the main thread runs next: inside
a backend call that maps a staging buffer, records a command encoder or builds a pipeline,
it can leave a device library in a state it cannot recover from (wgpu-native aborts the
process on the next submit while a buffer is still mapped). `deferred_interrupts()` holds
SIGINT back across such a section and delivers it, to whatever handler was installed,
the moment the section ends, so cleanup always runs and the interrupt still arrives.

Only the main thread receives SIGINT, so elsewhere this is a no-op; nested sections defer
to the outermost. This module must never swallow an interrupt, nor install a handler when
the user's is not a Python callable (SIG_IGN, SIG_DFL are left alone).
"""

from __future__ import annotations

import functools
import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

F = TypeVar("F", bound=Callable[..., Any])

_depth = 0  # main thread only
_pending: list[tuple[int, Any]] = []


def _record(signum: int, frame: Any) -> None:
    _pending.append((signum, frame))


@contextmanager
def deferred_interrupts() -> Iterator[None]:
    """Run the block with SIGINT deferred to its end (see the module docstring)."""
    global _depth
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    if _depth:
        _depth += 1
        try:
            yield
        finally:
            _depth -= 1
        return
    previous = signal.getsignal(signal.SIGINT)
    if not callable(previous):
        yield
        return
    try:
        signal.signal(signal.SIGINT, _record)
    except (ValueError, OSError):  # not the main interpreter, or signals unavailable
        yield
        return
    _depth = 1
    try:
        yield
    finally:
        _depth = 0
        signal.signal(signal.SIGINT, previous)
        if _pending:
            signum, frame = _pending[-1]
            _pending.clear()
            previous(signum, frame)  # the default handler raises KeyboardInterrupt here


def interrupt_safe(fn: F) -> F:
    """Decorator: `fn` runs with SIGINT deferred to its end."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with deferred_interrupts():
            return fn(*args, **kwargs)

    return wrapper  # type: ignore[return-value]


__all__ = ["deferred_interrupts", "interrupt_safe"]
