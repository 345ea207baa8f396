"""The one error hierarchy of vyre.

Every failure a user can cause or meet is a subclass of `BackendError` whose message says
what happened and how to fix it. This module must never import a backend or numpy-heavy
code: it is imported by everything.
"""

from __future__ import annotations

from typing import Any


class BackendError(Exception):
    """Base of every error vyre raises on purpose.

    Every subclass pickles as itself, message and attributes included, whatever its
    constructor takes: errors cross process boundaries (multiprocessing, Ray), and the
    default exception pickling re-calls `cls(*args)` with the one formatted message, which
    breaks a constructor with other arguments (a multiprocessing.Pool parent then hangs).
    """

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild, (type(self), self.args, self.__dict__))


def _rebuild(cls: type[BackendError], args: tuple[Any, ...],
             state: dict[str, Any]) -> BackendError:
    """An unpickled vyre error: made without its constructor, then given back its message
    (args) and attributes."""
    err = cls.__new__(cls)
    err.args = args
    err.__dict__.update(state)
    return err


class UnsupportedFeature(BackendError):
    """The backend cannot do what was asked (a capability it lacks, or an API it does not offer)."""

    def __init__(self, name: str, backend: str, detail: str = "") -> None:
        self.name = name
        self.backend = backend
        self.detail = detail
        msg = f"backend {backend!r} does not support {name!r}"
        if detail:
            msg += f": {detail}"
        else:
            msg += (
                "; check backend.capabilities() before dispatching, or pick a backend that "
                "reports it (see `vyre probe`)"
            )
        super().__init__(msg)


class BufferOwnershipError(BackendError):
    """A device buffer was handed to a backend instance that does not own it."""


class BufferStateError(BackendError):
    """A device buffer was used after it was freed, or a range lies outside it."""


class InvalidProgram(BackendError):
    """The Program (or a wire-format document) breaks the IR's rules."""

    def __init__(self, message: str, node: str | None = None) -> None:
        self.node = node
        super().__init__(message if node is None else f"{node}: {message}")


class InvalidDispatch(BackendError):
    """The dispatch configuration does not fit the program or the backend (grid, params, buffers)."""


class CompileError(BackendError):
    """The backend's compiler rejected the generated source."""

    def __init__(self, backend: str, message: str, source: str, log: str) -> None:
        self.backend = backend
        self.source = source
        self.log = log
        super().__init__(
            f"{backend}: {message}\n--- compiler log ---\n{log.strip()}\n"
            f"--- generated source ({source.count(chr(10)) + 1} lines; see .source) ---\n"
            "This is a bug in vyre's code generation if the Program validated; please report "
            "it with the source above."
        )


class DispatchError(BackendError):
    """The device failed while running work (a fault, a lost device, a driver error)."""


class OutOfDeviceMemory(BackendError):
    """An allocation did not fit in device memory."""

    def __init__(self, backend: str, requested: int, detail: str = "") -> None:
        self.backend = backend
        self.requested = requested  # 0: unknown (an allocation the driver made for itself)
        msg = f"{backend}: out of device memory"
        if requested:
            msg += f" allocating {requested} bytes"
        if detail:
            msg += f" ({detail})"
        msg += "; free buffers you no longer need, or split the work into smaller chunks"
        super().__init__(msg)


class BackendUnavailable(BackendError):
    """The backend cannot run here (no driver, no adapter, a missing package, a closed instance)."""

    def __init__(self, backend: str, reason: str) -> None:
        self.backend = backend
        self.reason = reason
        super().__init__(f"backend {backend!r} is unavailable: {reason}")


__all__ = [
    "BackendError",
    "BackendUnavailable",
    "BufferOwnershipError",
    "BufferStateError",
    "CompileError",
    "DispatchError",
    "InvalidDispatch",
    "InvalidProgram",
    "OutOfDeviceMemory",
    "UnsupportedFeature",
]
