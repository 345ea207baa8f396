"""The Ray actor that owns one vyre backend instance on one device, in its own process.

It keeps the real buffers, bound dispatches, pipelines and programs (by content hash), and
answers the driver's messages with the local API: every check of the local backend runs
here again on the real objects. A message naming a buffer of another actor, or of an earlier
life of this actor (restarted), is refused with a message naming both. This module is plain
Python; `cluster.spawn` wraps the class with `ray.remote`. It must never hold a reference to
another actor's buffers or reply with device objects (only numpy arrays, Timing and plain
values leave it).
"""

from __future__ import annotations

import itertools
import os
import uuid
from collections.abc import Sequence
from typing import Any

import numpy as np

from vyre.backend import BaseBackend, Capabilities
from vyre.binding import BoundDispatch
from vyre.buffer import BufferBase
from vyre.config import DispatchConfig, Timing
from vyre.errors import BackendError, BufferOwnershipError, BufferStateError, InvalidDispatch
from vyre.ir.nodes import Program
from vyre.ir.serialize import from_json
from vyre.pipeline import Pipeline, PipelineResult, ReadRange, Step
from vyre.registry import get_backend

from .protocol import BufferRef, ProgramNotLoaded, map_config, map_refs

# A pipeline step on the wire: ("step", content_hash, inputs, outputs, config) or
# ("bound", key) for a dispatch bound earlier with `bind`.
WireStep = tuple[Any, ...]


class BackendActor:
    """One backend instance, driven by messages; see the module docstring."""

    def __init__(self, backend: str, name: str) -> None:
        self.name = name
        self.instance = uuid.uuid4().hex[:12]  # a restarted actor is a new instance
        self.backend: BaseBackend = get_backend(backend)
        self._keys = itertools.count(1)
        self._buffers: dict[int, BufferBase] = {}
        self._programs: dict[str, Program] = {}
        self._bound: dict[int, BoundDispatch] = {}
        self._pipelines: dict[int, Pipeline] = {}
        self.programs_loaded = 0

    # ------------------------------------------------------------ identity
    def info(self) -> dict[str, Any]:
        import ray

        ctx = ray.get_runtime_context()
        return {
            "instance": self.instance,
            "backend_id": self.backend.id,
            "kind": self.backend.kind,
            "capabilities": self.backend.capabilities(),
            "generation": self.backend.context_generation,
            "gpu_ids": [str(g) for g in ray.get_gpu_ids()],
            "node_id": ctx.get_node_id(),
            "pid": os.getpid(),
        }

    def stats(self) -> dict[str, int]:
        return {"programs_loaded": self.programs_loaded, "programs": len(self._programs),
                "buffers": len(self._buffers)}

    # ------------------------------------------------------------ references
    def _buf(self, ref: BufferRef) -> BufferBase:
        actor, instance, key, label = ref
        what = f"buffer {label!r}" if label else f"buffer #{key}"
        if actor != self.name:
            raise BufferOwnershipError(
                f"{what} belongs to ray actor {actor!r}, not to ray actor {self.name!r}; move "
                "it explicitly with vyre.distributed.transfer(buffer, backend)"
            )
        if instance != self.instance:
            raise BufferStateError(
                f"{what} is stale: it was allocated by instance {instance} of ray actor "
                f"{self.name!r}, which died and was restarted as instance {self.instance}; its "
                "memory is gone: allocate and upload it again"
            )
        buf = self._buffers.get(key)
        if buf is None:
            raise BufferStateError(f"{what} of ray actor {self.name!r} was freed; allocate a new one")
        return buf

    def _program(self, content_hash: str) -> Program:
        prog = self._programs.get(content_hash)
        if prog is None:
            raise ProgramNotLoaded(content_hash, self.name)
        return prog

    def _cfg(self, config: DispatchConfig | None) -> DispatchConfig | None:
        return map_config(config, self._buf)

    # ------------------------------------------------------------ programs
    def load_program(self, content_hash: str, wire_json: str) -> None:
        """Cache a program sent as wire JSON under its content hash (checked)."""
        prog = from_json(wire_json)
        if prog.content_hash != content_hash:
            raise InvalidDispatch(
                f"program {prog.name!r} arrived with content hash {prog.content_hash[:16]}... "
                f"but was sent as {content_hash[:16]}...; the driver and ray actor "
                f"{self.name!r} run different vyre versions: install the same one on every node"
            )
        self._programs[content_hash] = prog
        self.programs_loaded += 1

    def compile(self, content_hash: str) -> None:
        self.backend.compile(self._program(content_hash))

    def source(self, content_hash: str) -> str:
        return self.backend.source(self._program(content_hash))

    # ------------------------------------------------------------ memory
    def allocate(self, byte_len: int, label: str | None, kind: str) -> tuple[int, int, str]:
        buf = self.backend.allocate_device_buffer(byte_len, label=label, kind=kind)
        key = next(self._keys)
        self._buffers[key] = buf
        return key, buf.generation, self.instance

    def free(self, ref: BufferRef) -> None:
        buf = self._buffers.pop(ref.key, None) if ref.instance == self.instance else None
        if buf is not None:
            self.backend.free(buf)

    def write_many(self, items: Sequence[tuple[BufferRef, Any, int]]) -> None:
        self.backend.write_many([(self._buf(r), data, off) for r, data, off in items])

    def write_from(self, ref: BufferRef, boxed: list[Any], source: str, timeout_s: float) -> None:
        """Write the bytes of another actor's read (an ObjectRef in `boxed`, fetched here
        from the object store) into `ref`: the receiving half of `transfer`."""
        import ray

        buf = self._buf(ref)
        try:
            data = ray.get(boxed[0], timeout=timeout_s)
        except ray.exceptions.RayTaskError as exc:
            cause = getattr(exc, "cause", None)
            raise cause if isinstance(cause, BackendError) else exc from None
        except ray.exceptions.RayActorError as exc:
            why = str(exc).strip().splitlines()[0][:300]
            raise BufferStateError(
                f"the source of this transfer, {source}, is stale: its actor died ({why}); "
                "nothing was written: upload the data again") from None
        except ray.exceptions.GetTimeoutError:
            raise BufferStateError(
                f"the source of this transfer, {source}, sent nothing within {timeout_s} s; "
                "nothing was written") from None
        self.backend.write(buf, data)

    def read_many(self, ranges: Sequence[tuple[BufferRef, int, int | None, Any]]) -> list[np.ndarray]:
        return self.backend.read_many(
            [ReadRange(self._buf(r), off, n, dt) for r, off, n, dt in ranges])

    def read(self, ref: BufferRef) -> np.ndarray:
        return self.backend.read(self._buf(ref))

    # ------------------------------------------------------------ dispatch
    def dispatch(self, content_hash: str, inputs: Any, config: DispatchConfig) -> dict[str, np.ndarray]:
        return self.backend.dispatch(self._program(content_hash), inputs, config)

    def _target(self, target: Any) -> Any:
        if isinstance(target, int):  # a bound dispatch's key
            bound = self._bound.get(target)
            if bound is None:
                raise BufferStateError(f"bound dispatch #{target} of ray actor {self.name!r} is gone")
            return bound
        return self._program(target)

    def dispatch_resident(self, target: Any, inputs: Any, outputs: Any,
                          config: DispatchConfig | None, wait: bool) -> Timing:
        """dispatch_with_device_buffers (wait=False) or dispatch_async(...).wait()."""
        # buffers first: a restarted actor reports its stale buffers, not a missing program
        ins, outs, cfg = map_refs(inputs, self._buf), map_refs(outputs, self._buf), self._cfg(config)
        args = (self._target(target), ins, outs, cfg)
        if wait:
            return self.backend.dispatch_async(*args).wait()
        return self.backend.dispatch_with_device_buffers(*args)

    def bind(self, content_hash: str, inputs: Any, outputs: Any, config: DispatchConfig) -> int:
        cfg = self._cfg(config)
        assert cfg is not None
        bound = self.backend.bind(self._program(content_hash), map_refs(inputs, self._buf),
                                  map_refs(outputs, self._buf), cfg)
        key = next(self._keys)
        self._bound[key] = bound
        return key

    def pipeline(self, steps: Sequence[WireStep]) -> int:
        local: list[Step | BoundDispatch] = []
        for s in steps:
            if s[0] == "bound":
                local.append(self._target(s[1]))
            else:
                _, h, ins, outs, cfg = s
                local.append(Step(self._program(h), map_refs(ins, self._buf),
                                  map_refs(outs, self._buf), self._cfg(cfg) or DispatchConfig()))
        key = next(self._keys)
        self._pipelines[key] = self.backend.pipeline(local)
        return key

    def run_pipeline(self, key: int, repeat: int,
                     reads: Sequence[tuple[BufferRef, int, int | None, Any]]) -> PipelineResult:
        p = self._pipelines.get(key)
        if p is None:
            raise BufferStateError(f"pipeline #{key} of ray actor {self.name!r} is gone")
        res = p.run(repeat, [ReadRange(self._buf(r), off, n, dt) for r, off, n, dt in reads])
        # only plain values leave the actor (a backend's extras may hold device objects)
        extra = {k: v for k, v in res.extra.items() if isinstance(v, (bool, int, float, str))}
        return PipelineResult(res.reads, res.timing, extra)

    def release(self, key: int) -> None:
        """Forget a bound dispatch or a pipeline."""
        self._bound.pop(key, None)
        self._pipelines.pop(key, None)

    # ------------------------------------------------------------ lifecycle
    def capabilities(self) -> Capabilities:
        return self.backend.capabilities()

    def synchronize(self) -> None:
        self.backend.synchronize()

    def close(self) -> None:
        self._bound.clear()
        self._pipelines.clear()
        self._buffers.clear()
        self.backend.close()
