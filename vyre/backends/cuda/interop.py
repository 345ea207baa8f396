"""Zero-copy exchange between the CUDA backend and array frameworks (PyTorch, CuPy, JAX,
Numba): DLPack both ways, __cuda_array_interface__ (v3) out, and the stream ordering that
keeps both sides' work in order.

Importing (`backend.from_dlpack(x)`) borrows the producer's memory: the buffer keeps the
producer alive, vyre never frees that memory, and dropping/freeing the buffer only tells the
producer it is done. Exporting (`torch.from_dlpack(buf)`) lends vyre's memory; a buffer
freed while a framework still holds it is released only when the framework lets go.

Ordering is done on the GPU with events, never by blocking the host: a buffer may carry the
framework streams it is shared with (`ext_streams`); before vyre enqueues work touching it,
vyre's stream waits on an event recorded on each such stream, and after, each such stream
waits on an event recorded on vyre's stream. This happens around launches and graph
launches, never inside a CUDA graph capture (a captured wait on an outside event would be
frozen into the graph).

This module must never copy device memory, never synchronise the host, and never free
memory it borrowed.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Iterable, Sequence
from typing import Any, Protocol

import numpy as np

from vyre import dlpack as DL
from vyre.buffer import check_usable
from vyre.errors import BufferOwnershipError, InvalidDispatch
from vyre.hostarrays import as_dtype

from .device import CudaBuffer, CudaInstance

STREAM_AUTO = "auto"


class Ordering(Protocol):
    """What ordering with framework streams asks: the instance's stream, driver and events
    (the device part has them, and the CudaBackend publishes the same names)."""

    @property
    def interop_events(self) -> dict[int, Any]: ...  # framework stream -> ordering event

    @property
    def cu_stream(self) -> Any: ...

    @property
    def driver(self) -> Any: ...

    def driver_call(self, fn: Any, *args: Any, what: str | None = None) -> Any: ...

_CU_STREAM_LEGACY = 1  # CU_STREAM_LEGACY: the DLPack value for "the legacy default stream"
_pin_lock = threading.Lock()


# --------------------------------------------------------------------- streams
def stream_handle(stream: Any) -> int | None:
    """The CUstream handle (int) of a stream given as an int or a framework stream object."""
    if stream is None:
        return None
    if isinstance(stream, bool):
        raise InvalidDispatch(f"stream must be a stream handle or stream object, got {stream!r}")
    if isinstance(stream, int):
        return stream
    for attr in ("cuda_stream", "ptr", "handle"):  # torch, cupy, numba / cuda.core
        v = getattr(stream, attr, None)
        if v is not None:
            try:
                return int(v)
            except (TypeError, ValueError):
                continue
    raise InvalidDispatch(
        f"cannot tell which CUDA stream {type(stream).__name__} is; pass its handle as an int "
        "(torch: s.cuda_stream, cupy: s.ptr) or stream=None"
    )


def framework_stream(tensor: Any) -> int | None:
    """The stream a framework is currently issuing work for `tensor` on, where it says so.

    PyTorch and CuPy have a "current stream"; JAX and others do not expose one (their
    pending work is ordered once, at import, through the DLPack stream protocol).
    """
    mod = type(tensor).__module__.split(".", 1)[0]
    if mod == "torch":
        import torch

        return int(torch.cuda.current_stream(tensor.device).cuda_stream)
    if mod == "cupy":
        import cupy

        return int(cupy.cuda.get_current_stream().ptr)
    return None


def _event_for(backend: Ordering, key: int) -> Any:
    ev = backend.interop_events
    e = ev.get(key)
    if e is None:
        flags = backend.driver.CUevent_flags.CU_EVENT_DISABLE_TIMING
        e = backend.driver_call(backend.driver.cuEventCreate, int(flags), what="cuEventCreate")
        ev[key] = e
    return e


def streams_of(buffers: Iterable[Any]) -> tuple[int, ...]:
    """The distinct framework streams shared by `buffers` (empty for plain vyre buffers)."""
    out: list[int] = []
    for b in buffers:
        for s in getattr(b, "ext_streams", ()):
            if s not in out:
                out.append(s)
    return tuple(out)


def wait_for(backend: Ordering, streams: Sequence[int]) -> None:
    """vyre's stream waits (on the GPU) for work already issued on each framework stream.

    An event is re-recorded for each call; cuStreamWaitEvent captures the event's state at
    the time of the call, so reusing one event per stream is safe.
    """
    drv = backend.driver
    for s in streams:
        e = _event_for(backend, s)
        backend.driver_call(drv.cuEventRecord, e, s, what="cuEventRecord(framework stream)")
        backend.driver_call(drv.cuStreamWaitEvent, backend.cu_stream, e, 0, what="cuStreamWaitEvent")


def signal(backend: Ordering, streams: Sequence[int]) -> None:
    """Each framework stream waits (on the GPU) for the work vyre issued so far."""
    if not streams:
        return
    drv = backend.driver
    e = _event_for(backend, -1)
    backend.driver_call(drv.cuEventRecord, e, backend.cu_stream, what="cuEventRecord(vyre stream)")
    for s in streams:
        backend.driver_call(drv.cuStreamWaitEvent, s, e, 0, what="cuStreamWaitEvent(framework stream)")


def link_stream(buffer: Any, stream: int) -> None:
    """From now on, order vyre's work on `buffer` with `stream` (both ways)."""
    _not_recycled(buffer)
    if stream not in buffer.ext_streams:
        buffer.ext_streams = (*buffer.ext_streams, stream)
    buffer.owner.interop_active = True


# --------------------------------------------------------------------- lifetime
def _not_recycled(buffer: Any) -> None:
    """The memory leaves vyre's stream order: freed for real, never kept for reuse
    (device.ContextState.recycle), since work outside that order may still touch it."""
    recyclable = getattr(buffer, "recyclable", None)
    if recyclable is not None:
        recyclable[0] = False


def pin(buffer: Any) -> None:
    """Someone outside vyre (a DLPack consumer, a host view) uses the memory now."""
    _not_recycled(buffer)
    with _pin_lock:
        buffer._pins += 1


def unpin(buffer: Any) -> None:
    with _pin_lock:
        buffer._pins -= 1
        release_now = buffer._pins == 0 and buffer._release_pending
    if release_now:
        buffer._release()


def release(buffer: Any) -> None:
    """Free (or hand back, if borrowed) a buffer's memory, deferred while it is lent out."""
    with _pin_lock:
        if buffer._pins > 0:
            buffer._release_pending = True
            return
    buffer._release()


# --------------------------------------------------------------------- import
def _device_error(backend: CudaInstance, dev_type: int, dev_id: int, what: str) -> Exception:
    if dev_type in (DL.KDL_CPU, DL.KDL_CUDA_HOST):
        return InvalidDispatch(
            f"{what} is in host memory ({DL.device_name(dev_type)}), not on {backend.id}; "
            "vyre borrows only device arrays. Copy host data in with backend.write(buffer, "
            "np.from_dlpack(x)) or pass it to backend.dispatch()"
        )
    if dev_type in (DL.KDL_CUDA, DL.KDL_CUDA_MANAGED):
        return BufferOwnershipError(
            f"{what} is on CUDA device {dev_id}, but this backend drives CUDA device "
            f"{backend.ordinal}; borrow it with vyre.get_backend('cuda:{dev_id}'), or move "
            f"it first (torch: x.to('cuda:{backend.ordinal}'))"
        )
    return InvalidDispatch(
        f"{what} lives on a {DL.device_name(dev_type)} device (#{dev_id}); the CUDA backend "
        "can borrow only CUDA device memory"
    )


def _producer_name(x: Any) -> str:
    t = type(x)
    return f"{t.__module__.split('.', 1)[0]}.{t.__name__}"


def import_dlpack(backend: CudaInstance, tensor: Any, stream: Any = STREAM_AUTO,
                  label: str | None = None) -> CudaBuffer:
    """`backend.from_dlpack(tensor)`; see CudaBackend.from_dlpack."""
    backend.check_open()
    what = f"{_producer_name(tensor)} array"
    if not hasattr(tensor, "__dlpack__"):
        if hasattr(tensor, "__cuda_array_interface__"):
            return import_cuda_array_interface(backend, tensor, stream, label)
        raise InvalidDispatch(
            f"{what} supports neither DLPack (__dlpack__) nor __cuda_array_interface__; "
            "vyre can borrow only device arrays of frameworks that export one of them"
        )
    dev_type, dev_id = (int(v) for v in tensor.__dlpack_device__())
    if dev_type not in (DL.KDL_CUDA, DL.KDL_CUDA_MANAGED) or dev_id != backend.ordinal:
        raise _device_error(backend, dev_type, dev_id, what)
    ext = framework_stream(tensor) if stream == STREAM_AUTO else stream_handle(stream)
    # the producer orders its pending work before vyre's stream (DLPack stream protocol)
    vyre_stream = int(backend.cu_stream)
    try:
        capsule = tensor.__dlpack__(stream=vyre_stream, max_version=(1, 0))
    except TypeError:  # a producer older than DLPack 1.0
        capsule = tensor.__dlpack__(stream=vyre_stream)
    taken = DL.consume(capsule)
    try:
        return _wrap(backend, tensor, taken, ext, label, what)
    except BaseException:
        taken.release()
        raise


def _wrap(backend: CudaInstance, tensor: Any, t: DL.Consumed, ext: int | None,
          label: str | None, what: str) -> CudaBuffer:
    if t.device_type not in (DL.KDL_CUDA, DL.KDL_CUDA_MANAGED) or t.device_id != backend.ordinal:
        raise _device_error(backend, t.device_type, t.device_id, what)
    if int(t.dtype.lanes) != 1 or t.itemsize_bits % 8:
        raise InvalidDispatch(
            f"{what} has element type {DL.describe_dtype(t.dtype)}, which is not whole bytes "
            "per element; convert it to a plain scalar type first"
        )
    if not t.is_c_contiguous():
        raise InvalidDispatch(
            f"{what} is not C-contiguous (shape {t.shape}, strides {t.strides} elements); "
            "vyre buffers are dense: pass x.contiguous() (torch), cupy.ascontiguousarray(x) "
            "or jnp.asarray(x) copy"
        )
    buf = CudaBuffer(backend, t.nbytes, label, t.data)
    buf._release.detach()  # never free borrowed memory: hand it back to the producer instead
    setattr(buf, "_release", weakref.finalize(buf, t.release))  # noqa: B010  (typed for ptr)
    buf.kind = "borrowed"
    buf.borrowed = True
    buf.source = tensor
    buf.dtype = DL.numpy_dtype(t.dtype)
    buf.shape = t.shape if buf.dtype is not None else None
    buf.readonly = t.read_only
    if ext is not None:
        link_stream(buf, ext)
    backend.adopt(buf)
    return buf


def import_cuda_array_interface(backend: CudaInstance, obj: Any, stream: Any = STREAM_AUTO,
                                label: str | None = None) -> CudaBuffer:
    """Borrow an object exporting __cuda_array_interface__ (Numba, older CuPy)."""
    backend.check_open()
    what = f"{_producer_name(obj)} array"
    cai = obj.__cuda_array_interface__
    ptr, readonly = int(cai["data"][0] or 0), bool(cai["data"][1])
    dt = np.dtype(cai["typestr"])
    shape = tuple(int(s) for s in cai["shape"])
    strides = cai.get("strides")
    if strides is not None:
        expect, ok = dt.itemsize, True
        for size, st in zip(reversed(shape), reversed(strides)):
            if size != 1 and st != expect:
                ok = False
            expect *= size
        if not ok:
            raise InvalidDispatch(
                f"{what} is not C-contiguous (shape {shape}, strides {tuple(strides)} bytes); "
                "pass a contiguous copy"
            )
    if ptr:
        ordinal = _pointer_ordinal(backend, ptr)
        if ordinal is not None and ordinal != backend.ordinal:
            raise _device_error(backend, DL.KDL_CUDA, ordinal, what)
        producer = cai.get("stream")
        if producer is not None and int(producer) != 0:
            wait_for(backend, (int(producer),))  # order after the producer's pending work
    n = int(np.prod(shape, dtype=np.int64)) * dt.itemsize
    buf = CudaBuffer(backend, n, label, ptr)
    buf._release.detach()
    setattr(buf, "_release", weakref.finalize(buf, _nothing))  # noqa: B010  (typed for ptr)
    buf.kind = "borrowed"
    buf.borrowed = True
    buf.source = obj
    buf.dtype, buf.shape, buf.readonly = dt, shape, readonly
    ext = framework_stream(obj) if stream == STREAM_AUTO else stream_handle(stream)
    if ext is not None:
        link_stream(buf, ext)
    backend.adopt(buf)
    return buf


def _nothing() -> None:
    """A CUDA-Array-Interface borrow has no deleter: dropping the reference is the release."""


def _pointer_ordinal(backend: CudaInstance, ptr: int) -> int | None:
    drv = backend.driver
    attr = drv.CUpointer_attribute.CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL
    try:
        err, v = drv.cuPointerGetAttribute(attr, ptr)
    except Exception:
        return None
    return int(v) if int(err) == 0 else None


# --------------------------------------------------------------------- export
def _consumer_stream(stream: Any) -> int | None:
    """The DLPack `stream` argument as a CUstream handle; None: do not synchronise."""
    if stream is None:
        return _CU_STREAM_LEGACY  # the protocol: None means the legacy default stream
    if isinstance(stream, bool) or not isinstance(stream, int):
        raise TypeError(f"DLPack stream must be an int or None, got {stream!r}")
    if stream == -1:
        return None
    if stream == 0:
        raise ValueError("DLPack stream 0 is ambiguous and not allowed; pass 1 (legacy "
                         "default stream), 2 (per-thread default stream) or a stream handle")
    return stream


def export_dlpack(backend: CudaInstance, buffer: Any, dtype: Any, shape: Any, stream: Any,
                  max_version: Any, dl_device: Any, copy: Any) -> Any:
    """`buffer.__dlpack__(...)`: a capsule lending vyre's memory, ordered on `stream`."""
    check_usable(buffer)
    backend.check_open()
    if copy:
        raise BufferError("vyre exports its buffers without copying; copy=True is not "
                          "supported (copy on the consumer's side instead)")
    here = (DL.KDL_CUDA, backend.ordinal)
    if dl_device is not None and tuple(int(v) for v in dl_device) != here:
        raise BufferError(f"{buffer.describe()} is on CUDA device {backend.ordinal}; it cannot "
                          f"be exported to device {tuple(dl_device)} without a copy")
    if dtype is None:
        dt = buffer.dtype if buffer.dtype is not None else np.dtype(np.uint8)
        shp = buffer.shape if buffer.dtype is not None else None
    else:
        dt, shp = as_dtype(dtype), None
    if shape is not None:
        shp = tuple(int(s) for s in shape)
    if shp is None:
        if buffer.byte_len % dt.itemsize:
            raise InvalidDispatch(f"{buffer.describe()} is not a whole number of {dt} elements")
        shp = (buffer.byte_len // dt.itemsize,)
    if int(np.prod(shp, dtype=np.int64)) * dt.itemsize != buffer.byte_len:
        raise InvalidDispatch(
            f"shape {shp} of {dt} is {int(np.prod(shp, dtype=np.int64)) * dt.itemsize} bytes; "
            f"{buffer.describe()} holds {buffer.byte_len}"
        )
    try:
        DL.dl_dtype(dt)
    except ValueError:
        raise InvalidDispatch(f"{dt} cannot be exported through DLPack; pick a numeric dtype") from None
    consumer = _consumer_stream(stream)
    if consumer is not None:
        with backend.lock:
            backend.check_open()
            signal(backend, (consumer,))  # the consumer's stream waits for vyre's work
        link_stream(buffer, consumer)  # and vyre's later work waits for the consumer's
    pin(buffer)
    return DL.make_capsule(int(buffer.ptr), DL.KDL_CUDA, backend.ordinal, shp, dt,
                           keep=buffer, on_release=lambda: unpin(buffer))


def dlpack_device(backend: CudaInstance, buffer: Any) -> tuple[int, int]:
    return (DL.KDL_CUDA, backend.ordinal)
