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

`native_sigint_shield()` is for a native call that installs a SIGINT handler of its own
while it runs: NVRTC 13's front end does, and exits the whole process with status 4 when
an interrupt lands mid-compile. Around such a call SIGINT is blocked in the calling thread
and set to SIG_IGN (a library that follows the Unix idiom leaves an ignored signal alone,
as NVRTC does), so an interrupt sent to this thread meanwhile stays pending and reaches
the previous handler when the shield is lifted. The one exception to "never swallow": an
interrupt sent to the whole process (a terminal's Ctrl-C) while the shield is up may be
taken by another thread that does not block SIGINT (NumPy's BLAS threads do not) and is
then ignored, where otherwise the compiler would have ended the process; press Ctrl-C again.
"""

from __future__ import annotations

import _signal as _csignal  # the C module behind signal (see _getsignal)
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
# signal.getsignal maps the handler to the Handlers enum by trying Handlers(handler), which
# raises and catches ValueError for every Python handler: ~2 us a call, on every section.
# The C function answers the same handler object (0 / 1 for SIG_DFL / SIG_IGN, which are
# not callable either) in ~0.04 us.
_getsignal = getattr(_csignal, "getsignal", signal.getsignal)
_SIGINT = int(signal.SIGINT)
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
    current = _getsignal(_SIGINT)
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


def interruptible_here() -> bool:
    """Whether a Ctrl-C would be raised in this thread right now: the main thread, outside
    any deferred section, with a Python SIGINT handler (a long native wait should then
    return to Python now and then to let it in)."""
    return (threading.get_ident() == _MAIN and not _depth
            and callable(_getsignal(_SIGINT)))


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


@contextmanager
def native_sigint_shield() -> Iterator[None]:
    """Run a native call that would install its own SIGINT handler with SIGINT held back
    (see the module docstring). On the main thread an interrupt arriving meanwhile is
    delivered when the block ends. Elsewhere only this thread's mask can change, so the
    native library may still install its handler; vyre compiles on the caller's thread,
    so compiling from the main thread is what makes Ctrl-C safe during NVRTC."""
    if not hasattr(signal, "pthread_sigmask"):  # not POSIX: nothing to hold back
        yield
        return
    old_mask = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    previous: Any = None
    # Setting SIG_IGN discards a SIGINT already pending, so one caught between the block
    # and here is re-raised at the end instead.
    arrived = signal.SIGINT in signal.sigpending()
    if threading.get_ident() == _MAIN:
        try:
            previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
        except (ValueError, OSError):  # not the main interpreter
            previous = None
    try:
        yield
    finally:
        if previous is not None:
            signal.signal(signal.SIGINT, previous)
        # unblocking delivers a pending SIGINT to the handler just restored
        signal.pthread_sigmask(signal.SIG_SETMASK, old_mask)
        if arrived and previous is not None:
            signal.raise_signal(signal.SIGINT)


__all__ = ["deferred_interrupts", "interrupt_safe", "interruptible_here",
           "native_sigint_shield"]
