"""Device-to-device copies between CUDA instances of one process (`vyre.copy`,
`vyre.copy_many`, `vyre.transfer`): one or many, through `copy_batch`.

Each copy runs on the destination's stream (cuMemcpyPeerAsync: over NVLink or PCIe peer to
peer where the two devices can reach each other, with peer access enabled once per pair;
staged through host memory by the driver where they cannot). It is ordered with events,
never with a host wait: after everything already enqueued on the source's stream (its last
writer), and the source's later work after the copy (so a later write to the source cannot
overtake the read). The destination's own later work follows on its stream.

This module must never copy through vyre's host memory or block the host on the device.
"""

from __future__ import annotations

import contextlib
from typing import Any

from vyre.buffer import BufferBase

from . import driver as D
from . import interop

# (destination ordinal, source ordinal) -> whether the destination's context may access
# the source's memory directly (peer access enabled once, for the process)
_PEER: dict[tuple[int, int], bool] = {}
_PEER_ACCESS_ALREADY_ENABLED = 704


def peer_access(dst: Any, src: Any) -> bool:
    """Enable (once) and report direct access from `dst`'s device to `src`'s memory. The
    caller holds `dst`'s lock and has made its context current."""
    key = (dst.ordinal, src.ordinal)
    known = _PEER.get(key)
    if known is not None:
        return known
    if dst.ordinal == src.ordinal:
        _PEER[key] = True
        return True
    drv = dst.driver
    can = int(dst.driver_call(drv.cuDeviceCanAccessPeer, _device(drv, dst.ordinal),
                              _device(drv, src.ordinal), what="cuDeviceCanAccessPeer"))
    if can:
        (err,) = drv.cuCtxEnablePeerAccess(src.context_state.ctx, 0)
        if int(err) not in (0, _PEER_ACCESS_ALREADY_ENABLED):
            can = 0  # e.g. too many peers: the driver stages the copy through the host
    _PEER[key] = bool(can)
    return bool(can)


def _device(drv: Any, ordinal: int) -> Any:
    return D.call(drv.cuDeviceGet, ordinal)


def copy_batch(copies: list[tuple[Any, BufferBase, int, Any, BufferBase, int, int]]) -> None:
    """Several (src backend, buffer, offset, dst backend, out, offset, nbytes) copies,
    checked, all between CUDA instances of one driver, run concurrently: each source
    records one event for all its copies (one `written`), each destination waits for the
    sources it reads, copies, and records one `read` event; each source then waits for
    every destination that read it. Copies issued one by one would serialise every copy
    from one source behind the previous one's wait. A source buffer shared with a
    framework stream is read after the framework's pending writes, and the framework's
    later work follows the copies (interop.py)."""
    members = sorted({id(b): b for c in copies for b in (c[0], c[3])}.values(), key=id)
    with contextlib.ExitStack() as locks:
        for b in members:  # one lock order for every set: no deadlock
            locks.enter_context(b.lock)
        for b in members:
            b.check_open()
        drv = members[0].driver
        flags = int(drv.CUevent_flags.CU_EVENT_DISABLE_TIMING)
        events: list[tuple[Any, Any]] = []  # (owner, event), destroyed at the end
        try:
            sources = {id(c[0]): c[0] for c in copies}.values()
            streams = {id(src): (interop.streams_of([c[1] for c in copies if c[0] is src])
                                 if src.interop_active else ()) for src in sources}
            written: dict[int, Any] = {}
            for src in sources:
                src.context_state.make_current()
                if streams[id(src)]:
                    interop.wait_for(src, streams[id(src)])
                ev = src.driver_call(drv.cuEventCreate, flags, what="cuEventCreate")
                events.append((src, ev))
                src.driver_call(drv.cuEventRecord, ev, src.cu_stream, what="cuEventRecord")
                written[id(src)] = ev
            reads: dict[int, list[Any]] = {}
            by_dst: dict[int, list[tuple[Any, BufferBase, int, Any, BufferBase, int, int]]] = {}
            for c in copies:
                by_dst.setdefault(id(c[3]), []).append(c)
            for group in by_dst.values():
                dst = group[0][3]
                dst.context_state.make_current()
                for src in {id(c[0]): c[0] for c in group}.values():
                    peer_access(dst, src)
                    dst.driver_call(drv.cuStreamWaitEvent, dst.cu_stream, written[id(src)], 0,
                                    what="cuStreamWaitEvent")
                for src, buffer, so, _dst, out, do, n in group:
                    dst.driver_call(drv.cuMemcpyPeerAsync, dst.device_pointer(out) + do,
                                    dst.context_state.ctx, src.device_pointer(buffer) + so,
                                    src.context_state.ctx, n, dst.cu_stream,
                                    what=f"cuMemcpyPeerAsync of {n} bytes")
                ev = dst.driver_call(drv.cuEventCreate, flags, what="cuEventCreate")
                events.append((dst, ev))
                dst.driver_call(drv.cuEventRecord, ev, dst.cu_stream, what="cuEventRecord")
                for c in group:
                    reads.setdefault(id(c[0]), []).append(ev)
            for src in sources:
                src.context_state.make_current()
                for ev in {id(e): e for e in reads[id(src)]}.values():
                    src.driver_call(drv.cuStreamWaitEvent, src.cu_stream, ev, 0,
                                    what="cuStreamWaitEvent")
                if streams[id(src)]:
                    interop.signal(src, streams[id(src)])
        finally:
            for _owner, ev in events:
                with contextlib.suppress(Exception):
                    drv.cuEventDestroy(ev)
