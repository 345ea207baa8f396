"""Data-parallel work over several backend actors: `vyre.group.DeviceGroup` over Ray.

`Sharded(actors)` has the API and the guarantees of `DeviceGroup` (split along axis 0,
`map` on every shard at once, `gather`, `replicate`, and `reduce` / `scan` combined in
exactly the single-backend library's order, so float results are bit-identical to one
backend). Only the primitives differ: uploads and reads to several actors are sent as
messages before any answer is awaited, so the actors work at once; rows moved between
shards (`exchange_halos`, `all_gather`, `broadcast`) go through the driver. This module
must never reorder a float combination, nor move whole shards through the driver except in
`scatter`, `gather` and those explicit exchanges.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from vyre.group import LIBRARY_BLOCK, DeviceGroup, Replicated, Shard, ShardedArray, split

from .remote import RemoteBackend

__all__ = ["LIBRARY_BLOCK", "Replicated", "Shard", "Sharded", "ShardedArray", "split"]


class Sharded(DeviceGroup):
    """A group of backend actors that data-parallel work is split over (module docstring)."""

    def __init__(self, backends: Sequence[RemoteBackend]) -> None:
        super().__init__(backends)  # (members checked there)

    _MEMBER = RemoteBackend
    _KIND = "RemoteBackend"
    _EXAMPLE = "Sharded([spawn('cuda'), spawn('cuda')])"
    _ELSEWHERE = ("every member is a Ray actor from vyre.distributed.spawn (backends of this "
                  "process go in vyre.DeviceGroup; move data between the two with "
                  "vyre.distributed.transfer)")

    def _write_all(self, items: Sequence[tuple[Any, Any, np.ndarray, int]]) -> None:
        sent = [(b, b._send("write_many", [(buf.ref, data, off)], handles=[buf]), buf)
                for b, buf, data, off in items]
        for b, ref, buf in sent:
            b._get(ref, "write_many", [buf])

    def _read_all(self, items: Sequence[tuple[Any, Any, int, int, np.dtype]]) -> list[np.ndarray]:
        sent = [(b, b._send("read_many", [(buf.ref, off, n, dt)], handles=[buf]), buf)
                for b, buf, off, n, dt in items]
        return [b._get(ref, "read_many", [buf])[0] for b, ref, buf in sent]

    def _release(self, buffer: Any) -> None:
        buffer.free()

    def _copy_all(self, copies: list[tuple[Any, Any, int, int, int]]) -> None:
        datas = self._read_all([(src.owner, src, so, n, np.dtype(np.uint8))
                                for src, _dst, so, _do, n in copies])
        self._write_all([(dst.owner, dst, data, do)
                         for (_src, dst, _so, do, _n), data in zip(copies, datas)])
