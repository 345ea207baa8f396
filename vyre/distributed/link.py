"""`ActorLink`: the wire between the driver and one backend actor, under `RemoteBackend`.

It sends one message and waits for the answer with a timeout, turning Ray's failures into
vyre errors (a dead, restarted or hung actor is a clear error, never a hang; an error raised
in the actor comes back as the same vyre error), and it turns what a message carries into
wire form: buffer handles into references (ownership, freed state and genuineness checked
on the driver first), configs, read ranges, and programs (sent once as wire JSON, named by
content hash afterwards). `RemoteBackend` adds the `vyre.Backend` members on top.

This module must never decide what a call means (that is RemoteBackend's) nor move buffer
contents between actors (that is `transfer`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from vyre.binding import BufferArg
from vyre.buffer import BufferBase
from vyre.config import DispatchConfig
from vyre.errors import (
    BackendError,
    BackendUnavailable,
    BufferOwnershipError,
    BufferStateError,
    DispatchError,
    InvalidDispatch,
)
from vyre.ir.nodes import Program
from vyre.ir.serialize import to_json
from vyre.pipeline import as_read_range

from ._ray import require_ray
from .handle import RemoteBuffer
from .protocol import BufferRef, map_config, map_refs


class ActorLink:
    """Messages to one backend actor and the handles, configs and programs they carry."""

    id: str  # "ray:<actor name>/<backend instance id>"

    def __init__(self, actor: Any, actor_name: str, instance: str, backend_id: str,
                 timeout_s: float) -> None:
        self.actor = actor
        self.actor_name = actor_name
        self.instance = instance  # the actor's incarnation (a restart makes a new one)
        self.backend_id = backend_id
        self.id = f"ray:{actor_name}/{backend_id}"
        self.timeout_s = timeout_s
        self._sent: set[str] = set()  # content hashes this actor instance holds
        self._live: dict[int, RemoteBuffer] = {}  # the handles allocate gave out, by key
        self._closed = False
        self._dead: str | None = None  # why the actor is gone, once a call met its death
        self.programs_sent = 0

    # ------------------------------------------------------------ messages
    def _lost(self, what: str, handles: Sequence[RemoteBuffer]) -> BackendError:
        if handles:
            return BufferStateError(
                f"{handles[0].describe()} is stale: ray actor {self.actor_name!r} "
                f"({self.backend_id}) died ({self._dead}); the memory of its buffers is gone "
                "(nothing was read or written): spawn a new actor with "
                "vyre.distributed.spawn(...) and upload the data again"
            )
        return BackendUnavailable(
            self.id, f"ray actor {self.actor_name!r} died ({self._dead}) during or before "
            f"{what}; spawn a new one with vyre.distributed.spawn(...)")

    def _get(self, ref: Any, what: str, handles: Sequence[RemoteBuffer] = ()) -> Any:
        ray = require_ray()
        try:
            return ray.get(ref, timeout=self.timeout_s)
        except ray.exceptions.RayTaskError as exc:
            cause = getattr(exc, "cause", None)
            if isinstance(cause, BackendError):
                raise cause from None
            raise self._foreign_error(what, exc) from None
        except ray.exceptions.GetTimeoutError:
            raise BackendUnavailable(
                self.id, f"{what} got no answer from ray actor {self.actor_name!r} within "
                f"{self.timeout_s} s (hung or overloaded); pass a larger timeout_s to spawn(), "
                "or close() it and spawn a new actor") from None
        except ray.exceptions.RayActorError as exc:
            self._dead = str(exc).strip().splitlines()[0][:300] or type(exc).__name__
            # the call that meets the death reports the backend gone; later uses of its
            # handles report them stale (checked on the driver, no message sent)
            raise self._lost(what, ()) from None
        except ray.exceptions.RayError as exc:  # e.g. an error Ray could not unpickle
            raise self._foreign_error(what, exc) from None

    def _foreign_error(self, what: str, exc: BaseException) -> DispatchError:
        """An answer that is not a vyre error (a bug in vyre, or an error Ray could not
        bring back): a vyre error that keeps its text."""
        text = str(getattr(exc, "cause", None) or exc).strip()
        lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
        # a traceback's last line is the error itself (its type and message)
        detail = lines[-1] if len(lines) > 1 else text
        return DispatchError(
            f"{what} on ray actor {self.actor_name!r} ({self.backend_id}) failed with "
            f"{type(exc).__name__}: {detail[-800:]}; this is not an error vyre raises on "
            "purpose: check that the driver and every node run the same vyre and Ray, and "
            "please report it with this message")

    def _call(self, method: str, *args: Any, what: str = "",
              handles: Sequence[RemoteBuffer] = ()) -> Any:
        return self._get(self._send(method, *args, handles=handles), what or method, handles)

    def _send(self, method: str, *args: Any, handles: Sequence[RemoteBuffer] = ()) -> Any:
        self._check_open(handles)
        return getattr(self.actor, method).remote(*args)

    def _check_open(self, handles: Sequence[RemoteBuffer] = ()) -> None:
        if self._closed:
            raise BackendUnavailable(
                self.id, "this remote backend was closed; spawn a new one with "
                "vyre.distributed.spawn()")
        if self._dead is not None:
            raise self._lost("this call", handles)

    # ------------------------------------------------------------ what messages carry
    def _ref(self, buf: object, i: int = 0) -> BufferRef:
        """The wire reference of a handle of this backend (ownership and state checked)."""
        if isinstance(buf, RemoteBuffer) and buf.owner is self and not buf.freed:
            self._check_genuine(buf, i)
        if not isinstance(buf, (RemoteBuffer, BufferBase)):
            kind = ("host data, not a device buffer: allocate it here with "
                    "allocate_device_buffer(n) and write(buffer, array) first"
                    if isinstance(buf, (np.ndarray, bytes, bytearray, memoryview))
                    else "not a device buffer: allocate it with allocate_device_buffer(n) "
                    f"on ray actor {self.actor_name!r}")
            raise BufferOwnershipError(f"buffer {i} is {type(buf).__name__} {buf!r:.40}, {kind}")
        if not isinstance(buf, RemoteBuffer) or buf.owner is not self:
            where = (f"ray actor {buf.actor!r} ({buf.device}, instance {buf.instance})"
                     if isinstance(buf, RemoteBuffer)
                     else f"{getattr(buf, 'backend_id', type(buf).__name__)!r} (a local buffer)")
            what = buf.describe() if isinstance(buf, RemoteBuffer) else repr(buf)
            raise BufferOwnershipError(
                f"buffer {i} ({what}) lives on {where}, not on ray actor {self.actor_name!r} "
                f"({self.backend_id}, instance {self.instance}); move it explicitly with "
                "vyre.distributed.transfer(buffer, backend)")
        if buf.freed:
            raise BufferStateError(f"buffer {i} ({buf.describe()}) was freed; allocate a new one")
        if self._dead is not None:
            raise self._lost("this call", [buf])
        return buf.ref

    def _check_genuine(self, buf: RemoteBuffer, i: int = 0) -> None:
        """`buf` must be the very handle allocate_device_buffer returned (the actor checks
        its token again: a handle made in another process is refused there)."""
        if self._live.get(buf.key) is not buf:
            raise BufferOwnershipError(
                f"buffer {i} ({buf.describe()}) is not a handle that allocate_device_buffer of "
                f"ray actor {self.actor_name!r} returned (made by hand, or copied): use the "
                "handle allocate_device_buffer returned")

    def _collect(self, handles: list[RemoteBuffer]) -> Callable[[object], BufferRef]:
        """A function giving a handle's wire reference (checked) and noting the handle."""
        def one(b: object) -> BufferRef:
            r = self._ref(b, len(handles))
            assert isinstance(b, RemoteBuffer)
            handles.append(b)
            return r
        return one

    def _refs(self, arg: BufferArg, handles: list[RemoteBuffer]) -> Any:
        if not isinstance(arg, (Mapping, list, tuple)):
            if isinstance(arg, (str, bytes)) or not isinstance(arg, Iterable):
                raise InvalidDispatch(
                    f"buffers are given as a list (declaration order) or a dict by name of "
                    f"RemoteBuffers, got {type(arg).__name__} {arg!r:.40}")
            arg = tuple(arg)  # an iterator is read once, here
        return map_refs(arg, self._collect(handles))

    def _config(self, config: DispatchConfig | None, handles: list[RemoteBuffer]) -> Any:
        if config is not None and not isinstance(config, DispatchConfig):
            raise InvalidDispatch(f"config must be a DispatchConfig, got {type(config).__name__}")
        return map_config(config, self._collect(handles))

    def _program_hash(self, program: Program) -> str:
        """Send `program` as wire JSON the first time this actor instance sees it."""
        if not isinstance(program, Program):
            raise InvalidDispatch(f"expected a vyre Program, got {type(program).__name__}")
        h = program.content_hash
        if h not in self._sent:
            self._call("load_program", h, to_json(program), what=f"sending program {program.name!r}")
            self._sent.add(h)
            self.programs_sent += 1
        return h

    def _with_program(self, program: Program, method: str, *args: Any, what: str,
                      handles: Sequence[RemoteBuffer]) -> Any:
        """Call `method(content_hash, *args)` in the actor, sending the program first if new."""
        return self._call(method, self._program_hash(program), *args, what=what, handles=handles)

    def _read_refs(self, ranges: Iterable[Any]) -> list[tuple[BufferRef, int, int | None, Any]]:
        out = []
        for i, r in enumerate(ranges):
            rr = as_read_range(r)
            out.append((self._ref(rr.buffer, i), rr.offset, rr.length, rr.dtype))
        return out
