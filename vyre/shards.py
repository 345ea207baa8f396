"""The data of sharded work: `split` (rows over parts), `Shard`, `ShardedArray` and
`Replicated`, and `ShardGroup`, what they (and vyre.group_sort) ask of the group that owns
them. `vyre.group.DeviceGroup` and `vyre.distributed.Sharded` are such groups; this module
sits below both and below the sample sort, so none of them imports another for these.
It must never launch work or move data itself: the group does.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from vyre.errors import InvalidDispatch
from vyre.interface import Backend
from vyre.programs._common import ceil_div


class ShardGroup(Protocol):
    """What sharded arrays and the sample sort ask of their group (module docstring)."""

    backends: tuple[Backend, ...]

    def _write_all(self, items: Sequence[tuple[Any, Any, np.ndarray, int]]) -> None: ...

    def _read_all(self, items: Sequence[tuple[Any, Any, int, int, np.dtype]]
                  ) -> list[np.ndarray]: ...

    def _copy_all(self, copies: list[tuple[Any, Any, int, int, int]]) -> None: ...

    def _release(self, buffer: Any) -> None: ...

    def _scratch_buffer(self, backend: Backend, key: tuple[Any, ...], nbytes: int) -> Any: ...


def split(n: int, parts: int, align: int = 1) -> list[tuple[int, int]]:
    """`n` rows as `parts` contiguous (start, count) ranges, starts multiples of `align`,
    as even as the alignment allows (trailing ranges may be empty)."""
    if parts < 1 or align < 1 or n < 0:
        raise InvalidDispatch(f"split needs n >= 0, parts >= 1, align >= 1; got {n}, {parts}, {align}")
    units = ceil_div(n, align)
    per, extra = divmod(units, parts)
    out, u = [], 0
    for p in range(parts):
        k = per + (p < extra)
        start, end = min(n, u * align), min(n, (u + k) * align)
        out.append((start, end - start))
        u += k
    return out


@dataclass(frozen=True)
class Shard:
    """Rows [start, start + count) of a sharded array, on `backend`."""

    index: int
    backend: Backend  # a local backend in DeviceGroup; a RemoteBackend in Sharded
    start: int
    count: int


class Replicated:
    """The same data on every backend of a group (e.g. a matrix every shard multiplies by)."""

    def __init__(self, group: ShardGroup, buffers: Mapping[int, Any]) -> None:
        self.group = group
        self.buffers = dict(buffers)  # by shard index

    def free(self) -> None:
        for b in self.buffers.values():
            self.group._release(b)


class ShardedArray:
    """An array split along its first axis over a group's backends, resident there. With
    `halo` h > 0, shard i's buffer holds its `count` rows between h ghost rows on each
    side (rows [start - h, start + count + h) of the whole array; zeros beyond its ends
    until a kernel writes them), which `exchange_halos` fills from the neighbours."""

    def __init__(self, group: ShardGroup, shards: Sequence[Shard], buffers: Sequence[Any],
                 dtype: np.dtype, row_shape: tuple[int, ...], label: str,
                 halo: int = 0) -> None:
        self.group = group
        self.shards = tuple(shards)
        self.buffers = tuple(buffers)
        self.dtype = np.dtype(dtype)
        self.row_shape = row_shape
        self.label = label
        self.halo = halo

    @property
    def rows(self) -> int:
        return sum(s.count for s in self.shards)

    @property
    def row_bytes(self) -> int:
        return self.dtype.itemsize * int(np.prod(self.row_shape, dtype=np.int64))

    @property
    def layout(self) -> tuple[tuple[int, int, int, int], ...]:
        return tuple((id(s.backend), s.start, s.count, self.halo) for s in self.shards)

    def live(self) -> list[tuple[Shard, Any]]:
        """The non-empty shards and their buffers."""
        return [(s, b) for s, b in zip(self.shards, self.buffers) if b is not None]

    def gather(self) -> np.ndarray:
        """Every shard's own rows read back and concatenated in order (halos left out)."""
        rb = self.row_bytes
        parts = self.group._read_all([(s.backend, b, self.halo * rb, s.count * rb, self.dtype)
                                      for s, b in self.live()])
        flat = np.concatenate(parts) if parts else np.zeros(0, self.dtype)
        return flat.reshape((self.rows, *self.row_shape))

    def free(self) -> None:
        for b in self.buffers:
            if b is not None:
                self.group._release(b)
