"""`RemoteBackend`: the driver's view of one backend actor; it satisfies `vyre.Backend`.

Every method checks what it can on the driver first (closed, dead actor, ownership and
freed state of the handles), then sends one message and waits for the answer with a
timeout, so a dead, restarted or hung actor is a clear vyre error, never a hang. Programs go
to each actor once, as wire JSON, and are named by content hash afterwards. Errors raised in
the actor come back as the same vyre error. The messaging and the wire form of what a
message carries are `vyre.distributed.link.ActorLink`'s, RemoteBackend's base. This module must never move buffer contents
between actors (that is `transfer`) or fall back to the host for resident work.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from vyre import features as F
from vyre.backend import Capabilities, CompileStats
from vyre.binding import BufferArg
from vyre.buffer import check_label
from vyre.config import DispatchConfig, Timing
from vyre.errors import (
    BackendError,
    BufferOwnershipError,
    InvalidDispatch,
    UnsupportedFeature,
)
from vyre.host_path import stream_chunks
from vyre.hostarrays import host_bytes, host_destination
from vyre.interface import Backend
from vyre.ir.nodes import Program
from vyre.ir.validate import validate
from vyre.pipeline import PipelineResult, ReadRange, Step, as_read_range, as_steps

from ._ray import require_ray
from .handle import RemoteBuffer
from .link import ActorLink

DEFAULT_TIMEOUT_S = 300.0


class RemotePending:
    """A dispatch_async in an actor; `wait()` returns its Timing (or raises its error)."""

    def __init__(self, backend: RemoteBackend, ref: Any, what: str, handles: Sequence[RemoteBuffer]):
        self._backend = backend
        self._ref = ref
        self._what = what
        self._handles = handles
        self._timing: Timing | None = None

    def is_ready(self) -> bool:
        if self._timing is not None:
            return True
        ready, _ = require_ray().wait([self._ref], timeout=0)
        return bool(ready)

    def wait(self) -> Timing:
        if self._timing is None:
            self._timing = self._backend._get(self._ref, self._what, self._handles)
        return self._timing


class RemoteBound:
    """A dispatch bound once in the actor (`RemoteBackend.bind`); re-issue it cheaply."""

    def __init__(self, backend: RemoteBackend, key: str, program: Program,
                 handles: Sequence[RemoteBuffer], config: DispatchConfig) -> None:
        self.backend = backend
        self.key = key
        self.program = program
        self.buffers = tuple(handles)
        self.config = config


class RemotePipeline:
    """A pipeline recorded in the actor; `run(repeat, read)` as Pipeline.run."""

    def __init__(self, backend: RemoteBackend, key: str, handles: Sequence[RemoteBuffer],
                 steps: Sequence[Step | RemoteBound]):
        self.backend = backend
        self.key = key
        self._handles = tuple(handles)
        self.steps = tuple(steps)  # as recorded, one per dispatch

    def run(self, repeat: int = 1, read: Sequence[Any] = ()) -> PipelineResult:
        b = self.backend
        reads = b._read_refs(read)
        result: PipelineResult = b._call(
            "run_pipeline", self.key, repeat, reads,
            what=f"pipeline run ({len(self._handles)} buffers)", handles=self._handles)
        return result

    def buffers(self) -> list[RemoteBuffer]:
        return list(self._handles)


class RemoteBackend(ActorLink):
    """One backend instance in a Ray actor; use `vyre.distributed.spawn` to make one."""

    id: str  # "ray:<actor name>/<backend instance id>"
    kind: str  # the actor's backend kind
    options: Any  # the actor's backend's options (a copy: they are fixed there)

    def __init__(self, actor: Any, actor_name: str, info: Mapping[str, Any],
                 timeout_s: float = DEFAULT_TIMEOUT_S) -> None:
        super().__init__(actor, actor_name, info["instance"], info["backend_id"], timeout_s)
        self.kind: str = info["kind"]
        self.node_id: str = info["node_id"]
        self.gpu_ids: tuple[str, ...] = tuple(info["gpu_ids"])
        self.pid: int = info["pid"]
        self.generation: int = info["generation"]
        self.options = info.get("options")
        caps: Capabilities = info["capabilities"]
        details = {**caps.details, "ray_actor": actor_name, "ray_node_id": self.node_id,
                   "ray_gpu_ids": list(self.gpu_ids)}
        # (page-locked host memory would be the actor's, never the caller's: not offered)
        self._caps = caps.model_copy(update={
            "backend": self.id, "details": details,
            "features": caps.features - {F.PAGE_LOCKED_HOST}})

    # ------------------------------------------------------------ vyre.Backend's members
    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def context_generation(self) -> int:
        return self.generation

    def capabilities(self) -> Capabilities:
        return self._caps

    def supports(self, feature: str) -> bool:
        return feature in self._caps.features

    def allocate_device_buffer(self, byte_len: int, label: str | None = None,
                               kind: str = "device") -> RemoteBuffer:
        check_label(label, "allocate_device_buffer")
        key, token, generation, instance = self._call("allocate", byte_len, label, kind,
                                                      what=f"allocating {byte_len} bytes")
        if instance != self.instance:  # Ray restarted the actor (max_restarts > 0)
            self._dead = f"restarted by Ray as instance {instance}"
            raise self._lost("allocate_device_buffer", ())
        buf = RemoteBuffer(self, key, token, int(byte_len), label, generation)
        self._live[key] = buf
        return buf

    def free(self, buffer: Any) -> None:
        """Release a buffer in the actor; twice is harmless, and so is a dead actor's."""
        if not isinstance(buffer, RemoteBuffer) or buffer.owner is not self:
            self._ref(buffer)  # raises the ownership error
        assert isinstance(buffer, RemoteBuffer)
        if buffer.freed:
            return
        self._check_genuine(buffer)  # a forged handle never frees the buffer it copied
        buffer._freed = True
        self._live.pop(buffer.key, None)
        if self._dead is None and not self._closed:
            self._call("free", buffer.ref, what=f"freeing {buffer.describe()}")

    def live_buffers(self) -> list[RemoteBuffer]:
        return list(self._live.values())

    def write(self, buffer: Any, data: Any, offset: int = 0) -> None:
        self.write_many([(buffer, data, offset)])

    def write_many(self, items: Iterable[tuple[Any, Any, int] | tuple[Any, Any]]) -> None:
        handles: list[RemoteBuffer] = []
        msg = []
        if isinstance(items, (str, bytes, Mapping)) or not isinstance(items, Iterable):
            raise InvalidDispatch(
                f"write_many takes an iterable of (buffer, data[, offset]) tuples, got "
                f"{type(items).__name__}")
        for item in items:
            if not isinstance(item, (tuple, list)) or len(item) not in (2, 3):
                raise InvalidDispatch(
                    f"write_many takes (buffer, data) or (buffer, data, offset) tuples, got "
                    f"{type(item).__name__} {item!r:.60}; e.g. write_many([(buffer, array)])")
            buf, data = item[0], item[1]
            ref = self._ref(buf, len(handles))
            # checked here as a local write checks it (a typed memoryview would reach the
            # actor as plain bytes, its element type and byte order lost), and sent as bytes
            raw = np.frombuffer(host_bytes(data, f"write to {buf.describe()}"), np.uint8)
            msg.append((ref, raw, item[2] if len(item) > 2 else 0))
            handles.append(buf)
        self._call("write_many", msg, what="write", handles=handles)

    def read(self, buffer: Any, offset: int = 0, length: int | None = None,
             dtype: Any = np.uint8) -> np.ndarray:
        return self.read_many([ReadRange(buffer, offset, length, dtype)])[0]

    def read_into(self, buffer: Any, out: np.ndarray, offset: int = 0) -> np.ndarray:
        """`BaseBackend.read_into` across the actor boundary: the bytes come back through
        Ray's object store, then into `out` (checked before anything is sent)."""
        dst = host_destination(out, "read_into")
        dst[...] = self.read(buffer, offset, dst.nbytes)
        return out

    def page_locked_array(self, shape: Any, dtype: Any = np.float32) -> np.ndarray:
        """Never here: page-locked memory would live in the actor's process, not yours."""
        raise UnsupportedFeature(
            F.PAGE_LOCKED_HOST, self.id,
            "an actor's page-locked memory is in its own process; read into a NumPy array "
            "of yours with read_into(buffer, np.empty(shape, dtype))",
        )

    def from_dlpack(self, tensor: Any, *, stream: Any = "auto",
                    label: str | None = None) -> RemoteBuffer:
        """Never here: a framework's device array lives in your process, not the actor's."""
        raise UnsupportedFeature(
            "from_dlpack", self.id,
            "a framework's device array lives in your process and this backend in ray actor "
            f"{self.actor_name!r}: borrow it with vyre.get_backend(...).from_dlpack(tensor) "
            "here and move it with vyre.distributed.transfer(buffer, backend), or upload it "
            "with write(buffer, np.asarray(tensor))",
        )

    def read_many(self, ranges: Iterable[Any]) -> list[np.ndarray]:
        if isinstance(ranges, (str, bytes)) or not isinstance(ranges, Iterable):
            raise InvalidDispatch(
                f"read_many takes an iterable of buffers or (buffer, offset, length, dtype) "
                f"tuples, got {type(ranges).__name__}")
        rs = [as_read_range(r) for r in ranges]
        refs = self._read_refs(rs)
        out: list[np.ndarray] = self._call("read_many", refs, what="read",
                                           handles=[r.buffer for r in rs])
        return out

    def compile(self, program: Program) -> str:
        """Send and compile `program` in the actor; returns its content hash."""
        self._program_hash(program)  # checked (and sent) before its name is used
        self._with_program(program, "compile", what=f"compiling {program.name!r}", handles=())
        return program.content_hash

    def source(self, program: Program) -> str:
        src: str = self._with_program(program, "source", what="source", handles=())
        return src

    @property
    def compile_stats(self) -> CompileStats:
        """The actor's backend's compile-cache counters (a snapshot: one round trip)."""
        stats: CompileStats = self._call("compile_cache", None, what="compile cache")[2]
        return stats

    @property
    def compile_cache_limit(self) -> int:
        """Most compiled programs the actor's backend keeps (one round trip)."""
        limit: int = self._call("compile_cache", None, what="compile cache")[0]
        return limit

    def set_compile_cache_limit(self, n: int) -> None:
        """`BaseBackend.set_compile_cache_limit` on the actor's backend."""
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
            raise InvalidDispatch(f"the compile cache size must be an int >= 1, got {n!r:.40}")
        self._call("compile_cache", int(n), what="setting the compile cache limit")

    def compile_cache_size(self) -> int:
        """Compiled programs the actor's backend holds now (one round trip)."""
        size: int = self._call("compile_cache", None, what="compile cache")[1]
        return size

    def dispatch(self, program: Program, inputs: Any, config: DispatchConfig) -> dict[str, np.ndarray]:
        """Host path in the actor: the data travels with the message, outputs come back."""
        validate(program)  # InvalidProgram naming the fix, as the local dispatch says
        out: dict[str, np.ndarray] = self._with_program(
            program, "dispatch", inputs, config, what=f"dispatch of {program.name!r}", handles=())
        return out

    def stream(
        self, program: Program, chunks: Iterable[Mapping[str, Any] | Sequence[Any]],
        config: DispatchConfig | Callable[[int, Mapping[str, np.ndarray]], DispatchConfig],
    ) -> Iterator[dict[str, np.ndarray]]:
        """`BaseBackend.stream` in the actor: each chunk is uploaded to resident buffers
        there and dispatched without waiting, then read back after the next is sent."""
        self._check_open()
        validate(program)
        yield from stream_chunks(self, program, chunks, config)

    def _resident(self, program: Program | RemoteBound, inputs: BufferArg, outputs: BufferArg,
                  config: DispatchConfig | None, wait: bool) -> RemotePending:
        """Send one resident dispatch (a Program by hash, or a bound dispatch by key)."""
        handles: list[RemoteBuffer] = []
        if isinstance(program, RemoteBound):
            if program.backend is not self:
                raise BufferOwnershipError(
                    f"this dispatch of {program.program.name!r} was bound by "
                    f"{program.backend.id!r}, not by this backend ({self.id!r}); bind it here "
                    "with bind(program, inputs, outputs, config)")
            for i, b in enumerate(program.buffers):
                self._ref(b, i)
            handles.extend(program.buffers)
            target: tuple[str, str] | str = ("bound", program.key)
            args: tuple[Any, ...] = ((), (), None)
            name = program.program.name
        else:
            target = self._program_hash(program)
            args = (self._refs(inputs, handles), self._refs(outputs, handles),
                    self._config(config, handles))
            name = program.name
        # one argument: Ray serialises each argument of a call on its own, and five cost
        # about 130 us more than one tuple of them (measured on the H100 host)
        ref = self._send("dispatch_resident", (target, *args, wait), handles=handles)
        return RemotePending(self, ref, f"dispatch of {name!r}", handles)

    def dispatch_with_device_buffers(self, program: Program | RemoteBound, inputs: BufferArg = (),
                                     outputs: BufferArg = (),
                                     config: DispatchConfig | None = None) -> Timing:
        """Dispatch on resident buffers in the actor; returns once the actor enqueued it
        (one round trip, so its errors are raised here)."""
        return self._resident(program, inputs, outputs, config, wait=False).wait()

    def dispatch_async(self, program: Program | RemoteBound, inputs: BufferArg = (),
                       outputs: BufferArg = (), config: DispatchConfig | None = None) -> RemotePending:
        """Send the dispatch and return at once; `wait()` blocks until the device is done."""
        return self._resident(program, inputs, outputs, config, wait=True)

    def bind(self, program: Program, inputs: BufferArg, outputs: BufferArg,
             config: DispatchConfig) -> RemoteBound:
        handles: list[RemoteBuffer] = []
        self._program_hash(program)
        ins, outs = self._refs(inputs, handles), self._refs(outputs, handles)
        cfg = self._config(config, handles)
        key: str = self._with_program(program, "bind", ins, outs, cfg,
                                      what=f"binding {program.name!r}", handles=handles)
        return RemoteBound(self, key, program, handles, config)

    def pipeline(self, steps: Sequence[Step | RemoteBound]) -> RemotePipeline:
        handles: list[RemoteBuffer] = []
        wire: list[tuple[Any, ...]] = []
        steps = as_steps(steps)  # read once: an iterator must not be half-consumed here
        for i, s in enumerate(steps):
            if isinstance(s, RemoteBound):
                if s.backend is not self:
                    raise BufferOwnershipError(
                        f"pipeline step {i} was bound by {s.backend.id!r}, not by this backend "
                        f"({self.id!r}); bind it here with bind(program, inputs, outputs, "
                        "config)")
                handles.extend(s.buffers)
                wire.append(("bound", s.key))
            elif isinstance(s, Step):
                wire.append(("step", self._program_hash(s.program), self._refs(s.inputs, handles),
                             self._refs(s.outputs, handles), self._config(s.config, handles)))
            else:
                raise InvalidDispatch(f"pipeline step {i} must be a vyre.Step, got {type(s)}")
        key = self._call("pipeline", wire, what="recording a pipeline", handles=handles)
        return RemotePipeline(self, key, handles, steps)

    def synchronize(self) -> None:
        self._call("synchronize", what="synchronize")

    def release_cached_memory(self) -> int:
        """The actor's backend gives back its kept device memory (BaseBackend's method)."""
        freed: int = self._call("release_cached_memory", what="release_cached_memory")
        return freed

    def stats(self) -> dict[str, int]:
        """The actor's counters (programs loaded, programs and buffers held)."""
        out: dict[str, int] = self._call("stats")
        return out

    def close(self) -> None:
        """Close the backend in the actor and end the actor (its GPU goes back to Ray)."""
        if self._closed:
            return
        ray = require_ray()
        try:
            if self._dead is None:
                self._call("close", what="close")
        except BackendError:
            pass  # closing a dead or hung actor: killing it below is all that is left
        finally:
            self._closed = True
            for b in self._live.values():
                b._freed = True
            self._live.clear()
            ray.kill(self.actor, no_restart=True)

    def __enter__(self) -> RemoteBackend:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = " closed" if self._closed else f" dead ({self._dead})" if self._dead else ""
        return f"<RemoteBackend {self.id}{state}>"


if TYPE_CHECKING:  # mypy holds RemoteBackend to the public protocol (tests check it at run time)
    def _satisfies_backend(b: RemoteBackend) -> Backend:
        return b
