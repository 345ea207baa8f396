"""The host path: dispatches on host data, built from a backend's public resident methods.

`dispatch` uploads host arrays into new buffers, dispatches over them and reads every
writable buffer back; `stream_chunks` runs a program over successive chunks with chunk i+1
uploaded and enqueued before chunk i is read back. Both work over the public `Backend`
surface alone, so every backend (BaseBackend's and RemoteBackend) shares them. This module
must never touch a device itself, nor keep a buffer past the call that made it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from .buffer import DeviceBuffer, host_bytes
from .config import DispatchConfig
from .errors import DispatchError, InvalidDispatch, OutOfDeviceMemory
from .interface import Backend, PendingWork
from .ir.nodes import Program
from .pipeline import ReadRange
from .replay_file import save_failure_on_request


def dispatch_host(
    backend: Backend,
    program: Program,
    inputs: Mapping[str, Any] | Sequence[Any],
    config: DispatchConfig,
) -> dict[str, np.ndarray]:
    """`Backend.dispatch` over the backend's resident methods: upload, dispatch, read back
    every writable buffer; the caller has checked that `backend` is open and `program`
    valid. Every buffer it made is freed, whatever happens."""
    if not isinstance(config, DispatchConfig):
        raise InvalidDispatch(
            f"config must be a DispatchConfig, got {type(config).__name__}; pass "
            "vyre.DispatchConfig(grid=..., params=...)"
        )
    limit = backend.capabilities().limits.get("max_allocation_bytes")
    data = host_inputs(program, inputs, limit)
    bufs: dict[str, DeviceBuffer] = {}
    try:
        for d in program.buffers:
            arr = data[d.name]
            bufs[d.name] = backend.allocate_device_buffer(arr.nbytes, label=d.name)
        backend.write_many([(bufs[n], data[n], 0) for n in bufs if data[n].nbytes])
        try:
            backend.dispatch_with_device_buffers(
                program,
                {d.name: bufs[d.name] for d in program.inputs},
                {d.name: bufs[d.name] for d in program.outputs},
                config,
            )
            # (a vyre.print / assert_ program's log comes back in this batch)
            outs = backend.read_many(
                [ReadRange(bufs[d.name], 0, None, d.ty.numpy) for d in program.outputs]
            )
        except DispatchError as exc:
            save_failure_on_request(program, data, config, backend, exc)
            raise
        return {d.name: o for d, o in zip(program.outputs, outs)}
    finally:
        for b in bufs.values():
            if not backend.closed:
                backend.free(b)


def stream_chunks(
    backend: Backend,
    program: Program,
    chunks: Iterable[Mapping[str, Any] | Sequence[Any]],
    config: DispatchConfig | Callable[[int, Mapping[str, np.ndarray]], DispatchConfig],
) -> Iterator[dict[str, np.ndarray]]:
    """`Backend.stream` over any backend's public methods (BaseBackend's and
    RemoteBackend's): chunk i+1 is uploaded and enqueued before chunk i is read back. The
    caller has checked that `backend` is open and `program` valid."""
    if isinstance(chunks, (str, bytes, Mapping)) or not isinstance(chunks, Iterable):
        one = " (one chunk is [chunk])" if isinstance(chunks, Mapping) else ""
        raise InvalidDispatch(
            f"stream takes an iterable of chunks{one}, each host data for every buffer (a "
            f"dict of buffer name -> array, or a list in declaration order), got "
            f"{type(chunks).__name__}; e.g. stream(program, [chunk0, chunk1], config)")
    in_flight: list[tuple[dict[str, DeviceBuffer], PendingWork]] = []

    def finish(
        item: tuple[dict[str, DeviceBuffer], PendingWork],
    ) -> dict[str, np.ndarray]:
        bufs, pending = item
        pending.wait()
        outs = backend.read_many(
            [ReadRange(bufs[d.name], 0, None, d.ty.numpy) for d in program.outputs]
        )
        for b in bufs.values():
            backend.free(b)
        return {d.name: o for d, o in zip(program.outputs, outs)}

    try:
        for i, chunk in enumerate(chunks):
            data = host_inputs(program, chunk,
                                backend.capabilities().limits.get("max_allocation_bytes"))
            cfg = config(i, data) if callable(config) else config
            bufs: dict[str, DeviceBuffer] = {}
            try:  # (this chunk's buffers are freed if it fails before it is in flight)
                for d in program.buffers:
                    bufs[d.name] = backend.allocate_device_buffer(data[d.name].nbytes,
                                                                  label=d.name)
                backend.write_many([(bufs[n], data[n], 0) for n in bufs if data[n].nbytes])
                pending = backend.dispatch_async(
                    program,
                    {d.name: bufs[d.name] for d in program.inputs},
                    {d.name: bufs[d.name] for d in program.outputs},
                    cfg,
                )
            except BaseException:
                for b in bufs.values():
                    if not backend.closed:
                        backend.free(b)
                raise
            in_flight.append((bufs, pending))
            if len(in_flight) > 1:
                yield finish(in_flight.pop(0))
        while in_flight:
            yield finish(in_flight.pop(0))
    finally:
        for bufs, _ in in_flight:
            for b in bufs.values():
                if not backend.closed:
                    backend.free(b)


def host_inputs(
    program: Program, inputs: Mapping[str, Any] | Sequence[Any], limit: int | None = None
) -> dict[str, np.ndarray]:
    """Host arrays for every buffer of `program`, typed and contiguous (see dispatch);
    `limit`: the backend's largest allocation, which bounds zero-filled outputs."""
    if isinstance(inputs, Mapping):
        given = dict(inputs)
        unknown = sorted(set(given) - {d.name for d in program.buffers})
        if unknown:
            raise InvalidDispatch(
                f"program {program.name!r} has no buffer(s) {unknown}; "
                f"its buffers are {[d.name for d in program.buffers]}"
            )
    else:
        seq = list(iterable_of(inputs, f"program {program.name!r} inputs",
                             "host data: a dict of buffer name -> array, or a list in "
                             "declaration order"))
        names = [d.name for d in program.buffers]
        if len(seq) != len(names):
            raise InvalidDispatch(
                f"program {program.name!r} takes data for {len(names)} buffers {names} "
                f"in declaration order, got {len(seq)}; or pass a dict by name"
            )
        given = dict(zip(names, seq))
    out: dict[str, np.ndarray] = {}
    for d in program.buffers:
        what = f"program {program.name!r} buffer {d.name!r}"
        if d.name not in given:
            if d.access == "write" and d.count is not None:
                out[d.name] = _zeros(d.count, d.ty.numpy, what, limit)
                continue
            need = (
                "an int element count or an array of initial contents"
                if d.access == "write"
                else f"a {d.ty.numpy} array"
            )
            raise InvalidDispatch(f"{what} ({d.access}) needs {need}")
        v = given[d.name]
        if d.access == "write" and isinstance(v, (int, np.integer)) and not isinstance(v, bool):
            if v < 0:
                raise InvalidDispatch(f"{what}: element count must be >= 0, got {v}")
            out[d.name] = _zeros(int(v), d.ty.numpy, what, limit)
            continue
        mv = host_bytes(v, what, d.ty)
        arr = np.frombuffer(mv, dtype=d.ty.numpy) if mv.nbytes % d.ty.byte_size == 0 else None
        if arr is None:
            raise InvalidDispatch(f"{what}: {mv.nbytes} bytes is not a whole number of {d.ty}")
        out[d.name] = arr
    return out


def iterable_of(items: Any, what: str, of: str) -> Iterable[Any]:
    """`items` if it can be iterated (and is not text), else InvalidDispatch naming `of`."""
    if type(items) is list or type(items) is tuple:
        return items  # (the usual case, without the abstract-base-class test)
    if isinstance(items, (str, bytes)) or not isinstance(items, Iterable):
        raise InvalidDispatch(f"{what} takes an iterable of {of}, got {type(items).__name__}")
    return items


def _zeros(count: int, dtype: np.dtype, what: str, limit: int | None) -> np.ndarray:
    """A zero-filled host output of `count` elements, refused when no device could hold it
    (`limit`: the backend's largest allocation) or the host cannot allocate it."""
    nbytes = count * dtype.itemsize
    if limit is not None and nbytes > limit:
        raise OutOfDeviceMemory(
            "host dispatch", nbytes,
            f"{what} asks for {count} elements; the largest allocation here is {limit} bytes",
        )
    try:
        return np.zeros(count, dtype=dtype)
    except (MemoryError, ValueError) as exc:
        raise OutOfDeviceMemory(
            "host", nbytes, f"{what}: the host output array of {count} elements ({exc})"
        ) from None

