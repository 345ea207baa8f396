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
import secrets
import uuid
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from vyre.backend import BaseBackend, Capabilities, CompileStats
from vyre.binding import BoundDispatch
from vyre.buffer import BufferBase
from vyre.config import DispatchConfig, Timing
from vyre.errors import (
    BackendError,
    BufferOwnershipError,
    BufferStateError,
    InvalidDispatch,
    UnsupportedFeature,
)
from vyre.ir.nodes import Program
from vyre.ir.serialize import from_json
from vyre.pipeline import Pipeline, PipelineResult, ReadRange, Step
from vyre.registry import get_backend

from .protocol import (
    BufferRef,
    ProgramNotLoaded,
    as_buffers,
    as_config,
    as_list,
    as_ref,
    as_str,
    malformed,
    map_config,
    map_refs,
)

# A pipeline step on the wire: ("step", content_hash, inputs, outputs, config) or
# ("bound", key) for a dispatch bound earlier with `bind`. Every entry method checks the
# shape of its message first (RemoteBackend never sends a malformed one; anyone holding the
# actor handle can), so what it answers is a vyre error, never a TypeError from inside.
WireStep = tuple[Any, ...]


class BackendActor:
    """One backend instance, driven by messages; see the module docstring."""

    def __init__(self, backend: str, name: str) -> None:
        self.name = name
        self.instance = uuid.uuid4().hex[:12]  # a restarted actor is a new instance
        self.backend: BaseBackend = get_backend(backend)
        self._keys = itertools.count(1)
        # key -> (buffer, its token): the token, not the small key, is what proves a handle
        self._buffers: dict[int, tuple[BufferBase, str]] = {}
        self._programs: dict[str, Program] = {}
        # bound dispatches and pipelines by an unguessable token of their own
        self._bound: dict[str, BoundDispatch] = {}
        self._pipelines: dict[str, Pipeline] = {}
        self.programs_loaded = 0
        self.ipc_copies = 0  # same-node device-to-device transfers received (CUDA IPC)

    # ------------------------------------------------------------ identity
    def info(self) -> dict[str, Any]:
        import ray

        ctx = ray.get_runtime_context()
        return {
            "instance": self.instance,
            "backend_id": self.backend.id,
            "kind": self.backend.kind,
            "options": self.backend.options,
            "capabilities": self.backend.capabilities(),
            "generation": self.backend.context_generation,
            "gpu_ids": [str(g) for g in ray.get_gpu_ids()],
            "node_id": ctx.get_node_id(),
            "pid": os.getpid(),
        }

    def stats(self) -> dict[str, int]:
        return {"programs_loaded": self.programs_loaded, "programs": len(self._programs),
                "buffers": len(self._buffers), "ipc_copies": self.ipc_copies}

    # ------------------------------------------------------------ CUDA IPC (one node)
    def _cuda(self, method: str) -> Any:
        from vyre.backends.cuda.runtime import CudaBackend

        if not isinstance(self.backend, CudaBackend):
            raise UnsupportedFeature("cuda_ipc", self.backend.id)
        return self.backend

    def ipc_export(self, ref: BufferRef) -> bytes:
        """The CUDA IPC handle of a buffer, once this actor's earlier work on it is done:
        the sending half of a same-node transfer between two CUDA actors."""
        from vyre.backends.cuda import ipc

        buf = self._buf(ref, "ipc_export")
        return ipc.export_handle(self._cuda("ipc_export"), buf)

    def ipc_copy_from(self, ref: BufferRef, handle: bytes, nbytes: int) -> None:
        """Copy `nbytes` bytes of another CUDA actor's buffer (its `ipc_export` handle) into
        `ref`, device to device, and wait for it: the receiving half of that transfer."""
        from vyre.backends.cuda import ipc

        buf = self._buf(ref, "ipc_copy_from")
        if not isinstance(handle, bytes) or isinstance(nbytes, bool) or not isinstance(nbytes, int):
            raise malformed("ipc_copy_from", "(BufferRef, 64 bytes of handle, int bytes)",
                            (handle, nbytes))
        ipc.copy_from_handle(self._cuda("ipc_copy_from"), buf, handle, nbytes)
        self.ipc_copies += 1

    # ------------------------------------------------------------ references
    def _buf(self, ref: BufferRef, method: str = "dispatch") -> BufferBase:
        actor, instance, key, token, label = as_ref(method, ref)
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
        held = self._buffers.get(key)
        if held is None:
            raise BufferStateError(f"{what} of ray actor {self.name!r} was freed; allocate a new one")
        buf, real = held
        if not secrets.compare_digest(token, real):
            raise BufferOwnershipError(
                f"{what} of ray actor {self.name!r}: the handle's token is not the buffer's, so "
                "it was not made by allocate_device_buffer for this buffer (forged, or edited "
                "by hand); use the handle allocate_device_buffer returned")
        return buf

    def _program(self, content_hash: str, method: str = "dispatch") -> Program:
        prog = self._programs.get(as_str(method, content_hash, "a program's content hash"))
        if prog is None:
            raise ProgramNotLoaded(content_hash, self.name)
        return prog

    def _cfg(self, config: Any, method: str) -> DispatchConfig | None:
        return map_config(as_config(method, config), lambda r: self._buf(r, method))

    def _refs(self, arg: Any, method: str) -> Any:
        return map_refs(as_buffers(method, arg), lambda r: self._buf(r, method))

    # ------------------------------------------------------------ programs
    def load_program(self, content_hash: str, wire_json: str) -> None:
        """Cache a program sent as wire JSON under its content hash (checked)."""
        as_str("load_program", content_hash, "a program's content hash")
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
        self.backend.compile(self._program(content_hash, "compile"))

    def source(self, content_hash: str) -> str:
        return self.backend.source(self._program(content_hash, "source"))

    def compile_cache(self, limit: int | None) -> tuple[int, int, CompileStats]:
        """Set the backend's compile-cache limit (an int) or leave it (None); answer
        (limit, programs held, a copy of its counters)."""
        if limit is not None:
            self.backend.set_compile_cache_limit(limit)
        b = self.backend
        return b.compile_cache_limit, b.compile_cache_size(), replace(b.compile_stats)

    # ------------------------------------------------------------ memory
    def allocate(self, byte_len: int, label: str | None, kind: str) -> tuple[int, str, int, str]:
        """A new buffer: (key, token, context generation, actor instance)."""
        if label is not None and not isinstance(label, str):
            raise malformed("allocate", "a label is a str or None", label)
        buf = self.backend.allocate_device_buffer(byte_len, label=label, kind=kind)
        key, token = next(self._keys), secrets.token_hex(16)
        self._buffers[key] = (buf, token)
        return key, token, buf.generation, self.instance

    def free(self, ref: BufferRef) -> None:
        """Free a buffer (one of another instance, or freed already: nothing to do); a
        forged handle is refused, never frees the buffer whose key it copied."""
        ref = as_ref("free", ref)
        if ref.instance != self.instance or ref.key not in self._buffers:
            return
        buf = self._buf(ref, "free")
        del self._buffers[ref.key]
        self.backend.free(buf)

    def write_many(self, items: Sequence[tuple[BufferRef, Any, int]]) -> None:
        msg = as_list("write_many", items, "(BufferRef, data, offset) tuples", 3)
        self.backend.write_many([(self._buf(r, "write_many"), data, off) for r, data, off in msg])

    def write_from(self, ref: BufferRef, boxed: list[Any], source: str, timeout_s: float) -> None:
        """Write the bytes of another actor's read (an ObjectRef in `boxed`, fetched here
        from the object store) into `ref`: the receiving half of `transfer`."""
        import ray

        buf = self._buf(ref, "write_from")
        if not (isinstance(boxed, list) and len(boxed) == 1
                and isinstance(boxed[0], ray.ObjectRef)):
            raise malformed("write_from", "the source comes as [ObjectRef]", boxed)
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
        return self.backend.read_many(self._ranges(ranges, "read_many"))

    def _ranges(self, ranges: Any, method: str) -> list[ReadRange]:
        msg = as_list(method, ranges, "(BufferRef, offset, length, dtype) tuples", 4)
        return [ReadRange(self._buf(r, method), off, n, dt) for r, off, n, dt in msg]

    def read(self, ref: BufferRef) -> np.ndarray:
        return self.backend.read(self._buf(ref, "read"))

    # ------------------------------------------------------------ dispatch
    def dispatch(self, content_hash: str, inputs: Any, config: DispatchConfig) -> dict[str, np.ndarray]:
        return self.backend.dispatch(self._program(content_hash), inputs, config)

    def _target(self, target: Any, method: str) -> Any:
        if isinstance(target, tuple) and len(target) == 2 and target[0] == "bound":
            bound = self._bound.get(target[1]) if isinstance(target[1], str) else None
            if bound is None:
                raise BufferStateError(
                    f"this bound dispatch of ray actor {self.name!r} is gone (or was never "
                    "bound there); bind it again with RemoteBackend.bind")
            return bound
        return self._program(target, method)

    def dispatch_resident(self, message: Any) -> Timing:
        """dispatch_with_device_buffers (wait=False) or dispatch_async(...).wait(); the
        message is one tuple (target, inputs, outputs, config, wait): the hot path's
        arguments travel as one Ray argument."""
        m = "dispatch_resident"
        if not isinstance(message, tuple) or len(message) != 5:
            raise malformed(m, "a (target, inputs, outputs, config, wait) tuple", message)
        target, inputs, outputs, config, wait = message
        # buffers first: a restarted actor reports its stale buffers, not a missing program
        ins, outs, cfg = self._refs(inputs, m), self._refs(outputs, m), self._cfg(config, m)
        if not isinstance(wait, bool):
            raise malformed(m, "wait is a bool", wait)
        args = (self._target(target, m), ins, outs, cfg)
        if wait:
            return self.backend.dispatch_async(*args).wait()
        return self.backend.dispatch_with_device_buffers(*args)

    def bind(self, content_hash: str, inputs: Any, outputs: Any, config: DispatchConfig) -> str:
        """Bind a dispatch; its key is an unguessable token."""
        m = "bind"
        cfg = as_config(m, config, optional=False)
        bound = self.backend.bind(self._program(content_hash, m), self._refs(inputs, m),
                                  self._refs(outputs, m), self._cfg(cfg, m))  # type: ignore[arg-type]
        key = secrets.token_hex(16)
        self._bound[key] = bound
        return key

    def pipeline(self, steps: Sequence[WireStep]) -> str:
        """Record a pipeline; its key is an unguessable token."""
        m = "pipeline"
        local: list[Step | BoundDispatch] = []
        for s in as_list(m, steps, "wire steps"):
            if isinstance(s, tuple) and len(s) == 2 and s[0] == "bound":
                local.append(self._target(s, m))
            elif isinstance(s, tuple) and len(s) == 5 and s[0] == "step":
                _, h, ins, outs, cfg = s
                local.append(Step(self._program(h, m), self._refs(ins, m), self._refs(outs, m),
                                  self._cfg(cfg, m) or DispatchConfig()))
            else:
                raise malformed(m, "a step is ('bound', key) or ('step', content_hash, inputs, "
                                "outputs, config)", s)
        key = secrets.token_hex(16)
        self._pipelines[key] = self.backend.pipeline(local)
        return key

    def run_pipeline(self, key: str, repeat: int,
                     reads: Sequence[tuple[BufferRef, int, int | None, Any]]) -> PipelineResult:
        p = self._pipelines.get(key) if isinstance(key, str) else None
        if p is None:
            raise BufferStateError(
                f"this pipeline of ray actor {self.name!r} is gone (or was never recorded "
                "there); record it again with RemoteBackend.pipeline")
        res = p.run(repeat, self._ranges(reads, "run_pipeline"))
        # only plain values leave the actor (a backend's extras may hold device objects)
        extra = {k: v for k, v in res.extra.items() if isinstance(v, (bool, int, float, str))}
        return PipelineResult(res.reads, res.timing, extra)

    def release(self, key: str) -> None:
        """Forget a bound dispatch or a pipeline."""
        if not isinstance(key, str):
            raise malformed("release", "a bound dispatch's or pipeline's key (a str)", key)
        self._bound.pop(key, None)
        self._pipelines.pop(key, None)

    # ------------------------------------------------------------ lifecycle
    def capabilities(self) -> Capabilities:
        return self.backend.capabilities()

    def synchronize(self) -> None:
        self.backend.synchronize()

    def release_cached_memory(self) -> int:
        return self.backend.release_cached_memory()

    def close(self) -> None:
        self._bound.clear()
        self._pipelines.clear()
        self._buffers.clear()
        self.backend.close()
