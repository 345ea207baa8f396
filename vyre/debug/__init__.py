"""`vyre.print` and `vyre.assert_` at run time: a dispatch of a Program with Print / Assert
statements runs its instrumented twin (vyre.debug.instrument) with a debug log buffer as
one more output, and reads the log back with the dispatch's own completion:

- `dispatch_with_device_buffers`: enqueued like any resident dispatch (no wait); its log
  waits on the backend (`_debug_logs`) and is read with the next completion that happens
  anyway: the next read (batched with it: one transfer), `synchronize()`, a pipeline run or
  `close()`; then the records are printed and a failed assert raises DispatchError there.
  More than MAX_PENDING_LOGS waiting logs are read at once (each holds device memory);
- `dispatch`: the same, its log read in the batch that reads its outputs back;
- `dispatch_async`: returns at once; `Pending.wait()` reads, prints and raises;
- with $VYRE_REPLAY_DIR set, a resident or async debug dispatch reads its buffers before
  it is enqueued (a host sync, asked for), so that a failed assert saves a replay file
  and names it, as a host dispatch's does (`dispatch` saves from its host arrays);
- a pipeline: each debug step gets its own log, reset before every `run` and read back with
  the run's own reads (one host sync, as before); the records are printed step by step
  after the run, and a failed assert raises naming the step once the whole run is done.

`backend.bind` refuses a debug Program (a bound dispatch is re-issued without any
readback, so its log would never be read). A Program without Print / Assert never comes
here and runs exactly the code it did before these existed.

The log holds `debug_log_bytes()` bytes ($VYRE_DEBUG_LOG_BYTES, `set_debug_log_bytes`;
1 MiB by default); records that do not fit are counted and reported on one line.

This module must never interpret IR; it only binds, launches and reads through the
backend's own methods.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from vyre.binding import BufferArg, readable_twice
from vyre.buffer import BufferBase
from vyre.config import DispatchConfig, Timing
from vyre.errors import DispatchError, InvalidDispatch
from vyre.ir.nodes import Program
from vyre.replay_file import replay_dir, save_failure_on_request

from .instrument import HEADER_WORDS, Instrumented, has_debug, instrumented
from .log import ENV_LOG_BYTES, decode, report

if TYPE_CHECKING:
    from vyre.binding import BoundDispatch, Launch



class LogBackend(Protocol):
    """What making and resetting a log asks of a backend (a Pipeline's backend is typed
    by what it asks too, vyre.pipeline.PipelineBackend)."""

    @property
    def id(self) -> str: ...

    def capabilities(self) -> Any: ...

    def allocate_device_buffer(self, byte_len: int, label: str | None = None,
                               kind: str = "device") -> Any: ...

    def write(self, buffer: Any, data: Any, offset: int = 0) -> None: ...

    def free(self, buffer: Any) -> None: ...


class DebugQueue(Protocol):
    """The queue part of the backend (vyre.parts.Queue): a launch with a Pending."""

    def launch_pending(self, bound: Any) -> Any: ...


class DebugBackend(LogBackend, Protocol):
    """What enqueueing a dispatch with a log asks of its backend (vyre.backend.BaseBackend,
    typed here by what is used so that this package never imports the base class)."""

    _lock: Any

    @property
    def kind(self) -> str: ...

    @property
    def _queue(self) -> DebugQueue: ...

    @property
    def closed(self) -> bool: ...

    def _check_bindable(self, program: Any, config: Any) -> None: ...

    def _ready(self, bound: Any) -> None: ...

    def _launch_record(self, record: Any, buffers: Any) -> None: ...

    def bind(self, program: Any, inputs: Any, outputs: Any, config: Any) -> Any: ...

    def read(self, buffer: Any, offset: int = 0, nbytes: int | None = None,
             dtype: Any = None) -> Any: ...

    def read_many(self, ranges: Any) -> list[np.ndarray]: ...


DEFAULT_LOG_BYTES = 1 << 20
# debug dispatches whose logs may wait for a sync point; one more synchronizes first
MAX_PENDING_LOGS = 16
_override: int | None = None
_override_lock = threading.Lock()


def set_debug_log_bytes(n: int | None) -> None:
    """Bytes of the debug log each dispatch of a vyre.print / vyre.assert_ kernel gets
    (None: back to $VYRE_DEBUG_LOG_BYTES, else 1 MiB). Records past it are counted as
    dropped."""
    global _override
    if n is not None and (isinstance(n, bool) or not isinstance(n, int) or n < 64):
        raise InvalidDispatch(f"set_debug_log_bytes({n!r}): give an int of at least 64 "
                              "bytes (or None for the default)")
    with _override_lock:
        _override = n


def debug_log_bytes() -> int:
    """The debug log size in force (see set_debug_log_bytes)."""
    if _override is not None:
        return _override
    raw = os.environ.get(ENV_LOG_BYTES, "").strip()
    if not raw:
        return DEFAULT_LOG_BYTES
    try:
        n = int(raw, 0)
    except ValueError:
        n = -1
    if n < 64:
        raise InvalidDispatch(f"${ENV_LOG_BYTES}={raw!r}: set it to a number of bytes of at "
                              "least 64 (e.g. 4194304), or unset it for 1 MiB")
    return n


def log_bytes_for(inst: Instrumented) -> int:
    """The log size for `inst`: the setting, rounded up to whole words, and room for at
    least the header and one record of each site."""
    return max(-(-debug_log_bytes() // 4) * 4, 4 * (HEADER_WORDS + inst.max_record_words))


def with_log(outputs: BufferArg, name: str, log: BufferBase) -> BufferArg:
    """`outputs` plus the log buffer (declared last, so last of the outputs)."""
    if isinstance(outputs, Mapping):
        return {**outputs, name: log}
    return [*outputs, log]


def new_log(backend: LogBackend, inst: Instrumented) -> BufferBase:
    """A log buffer for `inst` on `backend`, its header zeroed (InvalidDispatch if the
    backend cannot bind one more buffer: said here, where the extra buffer is known)."""
    most = backend.capabilities().limits.get("max_buffers_per_program")
    if most is not None and len(inst.program.buffers) > most:
        raise InvalidDispatch(
            f"program {inst.program.name!r} declares {len(inst.program.buffers) - 1} buffers "
            f"and its vyre.print / vyre.assert_ need one more (the debug log), but "
            f"{backend.id} binds at most {most}: remove the prints, or pack two buffers into "
            "one")
    log = backend.allocate_device_buffer(log_bytes_for(inst), label="vyre_debug_log")
    try:
        reset_log(backend, log)
    except BaseException:
        backend.free(log)
        raise
    return log


def reset_log(backend: LogBackend, log: BufferBase) -> None:
    backend.write(log, np.zeros(HEADER_WORDS, np.uint32))


def not_bindable(program: Program) -> InvalidDispatch:
    return InvalidDispatch(
        f"program {program.name!r} uses vyre.print / vyre.assert_, whose log is read back "
        "after each dispatch, and a bound dispatch is re-issued without any readback: "
        "dispatch it with dispatch_with_device_buffers(program, ...), dispatch() or "
        "dispatch_async(), or put it in a pipeline as a vyre.Step (or remove the "
        "prints to bind it)")


@dataclass(frozen=True)
class PendingLog:
    """The log of an enqueued debug dispatch, to read at the backend's next sync point;
    with $VYRE_REPLAY_DIR set, `saved` is the dispatch as a failed assert's replay file
    needs it (the Program as written, every buffer before the dispatch, the config)."""

    inst: Instrumented
    kernel: str
    log: BufferBase
    saved: tuple[Program, dict[str, np.ndarray], DispatchConfig] | None = None

    def report(self, backend: DebugBackend, words: np.ndarray) -> None:
        """Print the records; a failed assert raises (naming its replay file, if saved)."""
        try:
            report(decode(self.inst, words), self.kernel, self.log.byte_len)
        except DispatchError as exc:
            if self.saved is not None:
                save_failure_on_request(*self.saved, backend, exc)
            raise


def _enqueue(backend: DebugBackend, program: Program, inputs: BufferArg, outputs: BufferArg,
             config: DispatchConfig, start: Callable[[BoundDispatch], Any]
             ) -> tuple[PendingLog, BoundDispatch, Any]:
    """Bind `program`'s instrumented twin with a fresh log and enqueue it with `start`
    (under the backend's lock); the log is freed again if anything fails on the way."""
    backend._check_bindable(program, config)  # (validates the Program as written)
    inst = instrumented(program)
    outputs = readable_twice(outputs)
    log = new_log(backend, inst)
    saved = None
    try:
        bound = backend.bind(inst.program, inputs, with_log(outputs, inst.log, log), config)
        if replay_dir() is not None:  # asked for: the buffers as they are before it
            saved = (program, _contents(backend, program, bound), config)
        with backend._lock:
            backend._ready(bound)
            started = start(bound)
    except BaseException:
        if not backend.closed:
            backend.free(log)
        raise
    return PendingLog(inst, program.name, log, saved), bound, started


def _contents(backend: DebugBackend, program: Program, bound: BoundDispatch
              ) -> dict[str, np.ndarray]:
    """Every buffer of `program` now (a host sync: only with $VYRE_REPLAY_DIR set)."""
    decls = program.buffers  # (the instrumented twin's buffers: these, then the log)
    got = backend.read_many([(b, 0, None, d.ty.numpy) for d, b in zip(decls, bound.buffers)])
    return {d.name: a for d, a in zip(decls, got)}


def enqueue(backend: DebugBackend, program: Program, inputs: BufferArg, outputs: BufferArg,
            config: DispatchConfig) -> tuple[PendingLog, Launch]:
    """Enqueue `program` (it has debug statements) as a resident dispatch does: no wait.
    The caller keeps the PendingLog until the backend's next sync point (`finish`)."""
    pending, bound, _ = _enqueue(backend, program, inputs, outputs, config,
                                 lambda b: backend._launch_record(b.launch.record, b.buffers))
    return pending, bound.launch


def launch(backend: DebugBackend, program: Program, inputs: BufferArg, outputs: BufferArg,
           config: DispatchConfig, pending_class: Any) -> Any:
    """Enqueue `program` (it has debug statements) with a fresh log (dispatch_async); the
    Pending's wait() reads the log, frees it, prints the records, raises a failed assert.
    `pending_class`: vyre.backend.Pending (passed in: this package never imports the base)."""

    pending, _, inner = _enqueue(backend, program, inputs, outputs, config,
                                  backend._queue.launch_pending)
    state: dict[str, Any] = {}

    def wait() -> Timing:
        if "timing" not in state:
            try:
                # the log's read is queued after the dispatch (stream / queue order), so it
                # is the dispatch's completion: one host sync, after which the dispatch's
                # own wait finds it done (reading after that wait was a second round trip)
                try:
                    words = backend.read(pending.log, dtype=np.uint32)
                except BaseException:
                    inner.wait()  # a device fault: the dispatch's own error names the kernel
                    raise
                state["timing"] = inner.wait()
            finally:
                if not backend.closed:
                    backend.free(pending.log)
            pending.report(backend, words)
        return state["timing"]

    return pending_class(inner.is_ready, wait)


def finish(backend: DebugBackend, logs: list[PendingLog], words: list[np.ndarray]) -> None:
    """The logs' contents were read back: free the logs, print every dispatch's records (in
    dispatch order), then raise the first failed assertion."""
    if not backend.closed:
        for p in logs:
            backend.free(p.log)
    failure: BaseException | None = None
    for p, w in zip(logs, words):
        try:
            p.report(backend, w)
        except DispatchError as exc:
            failure = failure or exc
    if failure is not None:
        raise failure


__all__ = ["DEFAULT_LOG_BYTES", "PendingLog", "debug_log_bytes", "enqueue", "finish",
           "has_debug", "instrumented", "launch", "set_debug_log_bytes"]
