"""Data-parallel work over several backend actors: split, dispatch everywhere, gather.

`Sharded(backends)` splits arrays along their first axis into contiguous shards, one per
actor (`scatter`), keeps them resident, runs a Program on every shard at once (`map`, with a
per-shard DispatchConfig: a 1-D grid over the shard's elements, or a 2-D grid over its rows)
and gathers the shards back in order. A kernel that computes each output row from its own
input rows (and replicated buffers) gives the single-backend bits.

`reduce` (sum, min, max) and `scan` combine shards exactly as the single-backend library
(vyre.programs.reduce / scan) orders the operations: shards start on block boundaries of
the library's first pass (`LIBRARY_BLOCK` elements), each actor runs that first pass on its
shard, the per-block values (n / 4096 of them) are concatenated in order through the driver
and the rest of the library's passes run on the first actor; a scan's block offsets go back
to each actor for the last pass. Every float addition therefore happens in the same order
with the same operands as on one backend: the result is bit-identical. This module must
never reorder a float combination, nor move whole shards through the driver except in
`scatter` / `gather`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

import numpy as np

from vyre.backend import BaseBackend
from vyre.config import DispatchConfig, Timing
from vyre.errors import InvalidDispatch
from vyre.ir.nodes import Program
from vyre.ir.types import ScalarType
from vyre.programs import reduce as _reduce
from vyre.programs import scan as _scan
from vyre.programs._common import blocks_grid, ceil_div, identity

from .handle import RemoteBuffer
from .remote import RemoteBackend, RemotePending

#: Shards of arrays given to `reduce` and `scan` start on multiples of this many elements
#: (one block of the library's first pass); `scatter(..., align=LIBRARY_BLOCK)`.
LIBRARY_BLOCK = _reduce.WORKGROUP * _reduce.PER_THREAD
assert LIBRARY_BLOCK == _scan.WORKGROUP * _scan.PER_THREAD


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
    backend: RemoteBackend
    start: int
    count: int


class Replicated:
    """The same data on every actor of a Sharded (e.g. a matrix every shard multiplies by)."""

    def __init__(self, buffers: Mapping[int, RemoteBuffer]) -> None:
        self.buffers = dict(buffers)  # by shard index

    def free(self) -> None:
        for b in self.buffers.values():
            b.free()


class ShardedArray:
    """An array split along its first axis over actors, resident there."""

    def __init__(self, shards: Sequence[Shard], buffers: Sequence[RemoteBuffer | None],
                 dtype: np.dtype, row_shape: tuple[int, ...], label: str) -> None:
        self.shards = tuple(shards)
        self.buffers = tuple(buffers)
        self.dtype = np.dtype(dtype)
        self.row_shape = row_shape
        self.label = label

    @property
    def rows(self) -> int:
        return sum(s.count for s in self.shards)

    @property
    def layout(self) -> tuple[tuple[int, int, int], ...]:
        return tuple((id(s.backend), s.start, s.count) for s in self.shards)

    def live(self) -> list[tuple[Shard, RemoteBuffer]]:
        """The non-empty shards and their buffers."""
        return [(s, b) for s, b in zip(self.shards, self.buffers) if b is not None]

    def gather(self) -> np.ndarray:
        """Every shard read back (all actors at once) and concatenated in order."""
        parts = _all([(s.backend, "read_many", [(b.ref, 0, None, self.dtype)], [b])
                      for s, b in self.live()])
        flat = np.concatenate([p[0] for p in parts]) if parts else np.zeros(0, self.dtype)
        return flat.reshape((self.rows, *self.row_shape))

    def free(self) -> None:
        for b in self.buffers:
            if b is not None:
                b.free()


def _all(calls: Sequence[tuple[RemoteBackend, str, Any, Sequence[RemoteBuffer]]]) -> list[Any]:
    """(backend, method, its one argument, handles): every message sent before any answer
    is awaited, so the actors work at once."""
    sent = [(b, b._send(m, arg, handles=h), m, h) for b, m, arg, h in calls]
    return [b._get(ref, m, h) for b, ref, m, h in sent]


def _wait_all(pending: Sequence[RemotePending]) -> list[Timing]:
    return [p.wait() for p in pending]


class Sharded:
    """A group of backend actors that data-parallel work is split over (module docstring)."""

    def __init__(self, backends: Sequence[RemoteBackend]) -> None:
        if isinstance(backends, (str, bytes)) or not isinstance(backends, Iterable):
            raise InvalidDispatch(
                f"Sharded takes a list of RemoteBackends, got {type(backends).__name__}; e.g. "
                "Sharded([vyre.distributed.spawn('cuda') for _ in range(2)])")
        group = tuple(backends)
        if not group:
            raise InvalidDispatch("Sharded needs at least one RemoteBackend")
        for i, b in enumerate(group):
            if not isinstance(b, RemoteBackend):
                raise InvalidDispatch(
                    f"Sharded's backend {i} is a {type(b).__name__}, not a RemoteBackend: "
                    "every shard lives in a backend actor; spawn one with "
                    f"vyre.distributed.spawn({getattr(b, 'kind', 'reference')!r}), or move "
                    "local data there with vyre.distributed.transfer")
        self.backends = group

    def layout(self, rows: int, align: int = 1) -> tuple[Shard, ...]:
        return tuple(Shard(i, b, s, c) for i, (b, (s, c))
                     in enumerate(zip(self.backends, split(rows, len(self.backends), align))))

    # ------------------------------------------------------------ data
    def empty(self, shards: Sequence[Shard], dtype: Any, row_shape: tuple[int, ...] = (),
              label: str = "sharded") -> ShardedArray:
        """Uninitialised shards with the rows of `shards` (e.g. another array's `.shards`)."""
        dt = np.dtype(dtype)
        row_bytes = dt.itemsize * int(np.prod(row_shape, dtype=np.int64))
        bufs = [s.backend.allocate_device_buffer(s.count * row_bytes, label=f"{label}[{s.index}]")
                if s.count else None for s in shards]
        return ShardedArray(shards, bufs, dt, row_shape, label)

    def scatter(self, array: Any, align: int = 1, label: str = "sharded") -> ShardedArray:
        """Split `array` along axis 0 over the actors (starts multiples of `align` rows)."""
        a = np.ascontiguousarray(array)
        if a.ndim == 0:
            raise InvalidDispatch(f"scatter needs an array with at least one axis, got {a!r}")
        out = self.empty(self.layout(a.shape[0], align), a.dtype, a.shape[1:], label)
        _all([(s.backend, "write_many", [(b.ref, a[s.start:s.start + s.count], 0)], [b])
              for s, b in out.live()])
        return out

    def replicate(self, array: Any, label: str = "replicated") -> Replicated:
        """`array` uploaded once to every actor."""
        a = np.ascontiguousarray(array)
        bufs = {i: b.allocate_device_buffer(max(a.nbytes, a.itemsize), label=f"{label}[{i}]")
                for i, b in enumerate(self.backends)}
        _all([(self.backends[i], "write_many", [(buf.ref, a, 0)], [buf])
              for i, buf in bufs.items() if a.nbytes])
        return Replicated(bufs)

    # ------------------------------------------------------------ dispatch
    def map(self, program: Program, inputs: Mapping[str, ShardedArray | Replicated],
            outputs: Mapping[str, ShardedArray | Replicated],
            config: Callable[[Shard], DispatchConfig]) -> list[Timing]:
        """Dispatch `program` on every non-empty shard at once, with `config(shard)`; the
        sharded arguments must share one layout. Waits for all; returns their Timings."""
        sharded = [(n, a) for n, a in (*inputs.items(), *outputs.items())
                   if isinstance(a, ShardedArray)]
        if not sharded:
            raise InvalidDispatch(f"map of {program.name!r} needs at least one ShardedArray")
        name0, first = sharded[0]
        for n, a in sharded[1:]:
            if a.layout != first.layout:
                raise InvalidDispatch(
                    f"map of {program.name!r}: buffer {n!r} is split differently from "
                    f"{name0!r} (rows {[s.count for s in a.shards]} vs "
                    f"{[s.count for s in first.shards]}); allocate it with "
                    f"sharded.empty({name0}.shards, ...)")

        def pick(arg: ShardedArray | Replicated, i: int) -> RemoteBuffer:
            b = arg.buffers[i]
            assert b is not None
            return b

        pending = [
            s.backend.dispatch_async(
                program, {n: pick(a, s.index) for n, a in inputs.items()},
                {n: pick(a, s.index) for n, a in outputs.items()}, config(s))
            for s in first.shards if s.count
        ]
        return _wait_all(pending)

    # ------------------------------------------------------------ library combinations
    def _first_pass(self, arr: ShardedArray, what: str) -> tuple[ScalarType, list[tuple[Shard, RemoteBuffer, int]]]:
        """Check `arr` fits the library's block split; (element type, (shard, buf, blocks))."""
        if arr.row_shape != ():
            raise InvalidDispatch(f"{what} works on 1-D arrays; {arr.label!r} has rows of {arr.row_shape}")
        bad = [s.start for s in arr.shards if s.count and s.start % LIBRARY_BLOCK]
        if bad:
            raise InvalidDispatch(
                f"{what} of {arr.label!r}: shards start at {bad}, not multiples of "
                f"{LIBRARY_BLOCK} elements, so the combination could not follow the library's "
                "order; scatter it with align=vyre.distributed.sharded.LIBRARY_BLOCK")
        ty = ScalarType.from_numpy(arr.dtype)
        return ty, [(s, b, ceil_div(s.count, LIBRARY_BLOCK)) for s, b in arr.live()]

    def _block_pass(self, program: Program, parts: list[tuple[Shard, RemoteBuffer, int]],
                    ty: ScalarType, label: str, per_element: bool = False,
                    extra: Mapping[int, Mapping[str, RemoteBuffer]] | None = None,
                    ) -> list[RemoteBuffer]:
        """`program` ({"src", *extra} -> {"dst"}) over each shard's blocks, all at once; the
        dst buffers (one value per block, or per element when `per_element`)."""
        outs, pending = [], []
        for s, b, g in parts:
            length = s.count if per_element else g
            dst = s.backend.allocate_device_buffer(length * ty.byte_size, label=f"{label}[{s.index}]")
            outs.append(dst)
            ins = {"src": b, **((extra or {}).get(s.index, {}))}
            pending.append(s.backend.dispatch_async(
                program, ins, {"dst": dst}, blocks_grid(g, _reduce.WORKGROUP, n=s.count)))
        _wait_all(pending)
        return outs

    def _gather_blocks(self, parts: list[tuple[Shard, RemoteBuffer, int]],
                       bufs: list[RemoteBuffer], ty: ScalarType) -> np.ndarray:
        reads = _all([(s.backend, "read_many", [(d.ref, 0, None, ty.numpy)], [d])
                      for (s, _, _), d in zip(parts, bufs)])
        for d in bufs:
            d.free()
        return np.concatenate([r[0] for r in reads])

    def reduce(self, arr: ShardedArray, op: str) -> np.generic:
        """sum / min / max of a sharded 1-D array: the single-backend library's bits."""
        if op not in ("sum", "min", "max"):
            raise InvalidDispatch(f"Sharded.reduce supports sum, min and max, not {op!r}")
        ty, parts = self._first_pass(arr, f"reduce {op}")
        if not parts:
            return cast(np.generic, ty.numpy.type(identity(op, ty)))
        partials = self._gather_blocks(
            parts, self._block_pass(_reduce.reduce_program(op, ty), parts, ty, label="partial"), ty)
        if partials.size == 1:  # one block in all: the library's first pass is its last
            return cast(np.generic, partials[0])
        # the library's remaining passes, over the partials in order, on the first actor
        head = self._library_backend()
        src = head.allocate_device_buffer(partials.nbytes, label="reduce_partials")
        out = head.allocate_device_buffer(ty.byte_size, label="reduce_out")
        try:
            head.write(src, partials)
            _reduce.reduce_device(cast(BaseBackend, head), cast(Any, src), partials.size, op, ty,
                                  cast(Any, out))
            return cast(np.generic, head.read(out, dtype=ty.numpy)[0])
        finally:
            src.free()
            out.free()

    def scan(self, arr: ShardedArray, inclusive: bool = True, label: str = "scan") -> ShardedArray:
        """Prefix sum of a sharded 1-D array, left resident in the same layout; the
        single-backend library's bits."""
        ty, parts = self._first_pass(arr, "scan")
        total_blocks = sum(g for _, _, g in parts)
        if total_blocks <= 1:  # no carry between blocks: the library's one-block program
            out = self.empty(arr.shards, arr.dtype, (), label)
            for (s, b, _), d in zip(parts, [b for b in out.buffers if b is not None]):
                _scan.scan_device(cast(BaseBackend, s.backend), cast(Any, b), cast(Any, d),
                                  s.count, ty, inclusive)
            return out
        sums = self._gather_blocks(
            parts, self._block_pass(_reduce.reduce_program("sum", ty), parts, ty, label="sums"), ty)
        head = self._library_backend()
        hs = head.allocate_device_buffer(sums.nbytes, label="scan_block_sums")
        ho = head.allocate_device_buffer(sums.nbytes, label="scan_block_offsets")
        try:
            head.write(hs, sums)
            _scan.scan_device(cast(BaseBackend, head), cast(Any, hs), cast(Any, ho), sums.size, ty,
                              inclusive=False)
            offsets = head.read(ho, dtype=ty.numpy)
        finally:
            hs.free()
            ho.free()
        extra: dict[int, dict[str, RemoteBuffer]] = {}
        first = 0
        for s, _, g in parts:
            ob = s.backend.allocate_device_buffer(g * ty.byte_size, label=f"scan_offsets[{s.index}]")
            s.backend.write(ob, offsets[first:first + g])
            extra[s.index] = {"offsets": ob}
            first += g
        try:
            prog = _scan.scan_block_program(ty, inclusive, _scan.WORKGROUP, _scan.PER_THREAD,
                                            carry_in=True)
            dsts = iter(self._block_pass(prog, parts, ty, label, per_element=True, extra=extra))
            bufs = [next(dsts) if s.count else None for s in arr.shards]
        finally:
            for e in extra.values():
                e["offsets"].free()
        return ShardedArray(arr.shards, bufs, arr.dtype, (), label)

    def _library_backend(self) -> RemoteBackend:
        return self.backends[0]
