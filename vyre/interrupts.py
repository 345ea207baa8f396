"""Ctrl-C that cannot tear a native critical section in half.

A KeyboardInterrupt is raised at whatever Python bytecode the main thread runs next: inside
a backend call that maps a staging buffer, records a command encoder or builds a pipeline,
it can leave a device library in a state it cannot recover from (wgpu-native aborts the
process on the next submit while a buffer is still mapped). `deferred_interrupts()` holds
SIGINT back across such a section and delivers it, to whatever handler was installed,
the moment the section ends, so cleanup always runs and the interrupt still arrives. Outside
a section every interrupt goes straight to the handler that was installed.

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

# How it stays cheap on the launch path: vyre's handler is installed once (in front of the
# handler that was there, which it calls for every interrupt outside a section), so entering
# and leaving a section is a counter, not two sigaction calls (those cost ~15 us a launch).
_MAIN = threading.main_thread().ident
_depth = 0  # main thread only
_pending: list[tuple[int, Any]] = []
_chained: Any = None  # the handler vyre's stands in front of


def _handler(signum: int, frame: Any) -> None:
    if _depth:
        _pending.append((signum, frame))
        return
    _chained(signum, frame)


def _enter() -> bool:
    """Start a section; False where nothing can be deferred (not the main thread, or the
    SIGINT handler is not a Python callable: SIG_IGN / SIG_DFL are left alone)."""
    global _depth, _chained
    if threading.get_ident() != _MAIN:
        return False
    current = signal.getsignal(signal.SIGINT)
    if current is not _handler:
        if not callable(current):
            return False
        try:
            signal.signal(signal.SIGINT, _handler)
        except (ValueError, OSError):  # not the main interpreter, or no signals
            return False
        _chained = current
    _depth += 1
    return True


def _leave() -> None:
    global _depth
    _depth -= 1
    if not _depth and _pending:
        signum, frame = _pending[-1]
        _pending.clear()
        _chained(signum, frame)  # the default handler raises KeyboardInterrupt here


@contextmanager
def deferred_interrupts() -> Iterator[None]:
    """Run the block with SIGINT deferred to its end (see the module docstring)."""
    if not _enter():
        yield
        return
    try:
        yield
    finally:
        _leave()


def interrupt_safe(fn: F) -> F:
    """Decorator: `fn` runs with SIGINT deferred to its end."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if not _enter():
            return fn(*args, **kwargs)
        try:
            return fn(*args, **kwargs)
        finally:
            _leave()

    return wrapper  # type: ignore[return-value]


__all__ = ["deferred_interrupts", "interrupt_safe"]
