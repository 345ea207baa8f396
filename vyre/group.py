"""Data-parallel work over several backends of this process: split, dispatch everywhere,
exchange, gather, and combine in exactly the single-backend library's order.

`DeviceGroup(backends)` takes local backends of any kinds (cuda:0..N, or cuda with wgpu and
the reference). It splits arrays along their first axis into contiguous shards, one per
backend (`scatter`, optionally with `halo` ghost rows on each side), keeps them resident,
runs a Program on every shard at once (`map`, with a per-shard DispatchConfig), moves rows
between shards explicitly (`exchange_halos`, `all_gather`, `broadcast`: device to device
where the backends reach each other, `vyre.copy_many`) and gathers the shards back in order.
`sort` (sample sort, vyre.group_sort), `histogram` and `matmul` (split by rows) run the
library on every shard and give its single-backend results.
A kernel that computes each output row from its own input rows, its halo and replicated
buffers gives the single-backend bits.

`reduce` (sum, min, max) and `scan` combine shards as the single-backend library
(vyre.programs.reduce / scan) orders the operations (vyre.group_combine: shards start on
block boundaries of the library's first pass, `LIBRARY_BLOCK` elements), so the result is
bit-identical for any number of devices. `vyre.distributed.Sharded` is the same class over
Ray actors: it replaces the primitives below (`_write_all`, `_read_all`, `_release`,
`_copy_all`) with batched messages.

This module must never reorder a float combination, nor move whole shards through the host
except in `scatter` / `gather`.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from vyre.backend import BaseBackend
from vyre.config import DispatchConfig, Timing
from vyre.errors import InvalidDispatch
from vyre.group_combine import LIBRARY_BLOCK as LIBRARY_BLOCK
from vyre.group_combine import wait_all
from vyre.interface import Backend
from vyre.ir.nodes import Program
from vyre.ir.types import ScalarType
from vyre.shards import Replicated as Replicated
from vyre.shards import Shard as Shard
from vyre.shards import ShardedArray as ShardedArray
from vyre.shards import split as split
from vyre.transfers import copy_many


class DeviceGroup:
    """Backends that data-parallel work is split over (see the module docstring)."""

    def __init__(self, backends: Sequence[Backend]) -> None:
        self.backends: tuple[Backend, ...] = self._checked_backends(backends)
        # the group's own intermediate buffers, kept between calls (_scratch_buffer)
        self._scratch: dict[tuple[Any, ...], Any] = {}

    def _scratch_buffer(self, backend: Backend, key: tuple[Any, ...], nbytes: int) -> Any:
        """A buffer of `backend` for the group's own intermediate values (per-block
        partials, the head's passes), kept between calls: no allocation (and on CUDA no
        free's implicit device sync) per reduce or scan, and the launches stay bound.
        `free_scratch()` releases them."""
        scratch = self._scratch
        buf = scratch.get(key)
        if buf is not None and buf.byte_len >= nbytes and not buf.freed:
            return buf
        if buf is not None and not buf.freed:
            self._release(buf)
        buf = backend.allocate_device_buffer(max(nbytes, 4), label=f"group_scratch{key}")
        scratch[key] = buf
        return buf

    def free_scratch(self) -> None:
        """Release the intermediate buffers reduce, scan, sort (its send buffers: as large
        as the shards) and histogram keep between calls
        (also at the end of a `with DeviceGroup(...) as group:` block). The group's
        backends and arrays stay as they are."""
        scratch, self._scratch = self._scratch, {}
        for buf in scratch.values():
            if not buf.freed and not getattr(buf.owner, "closed", False):
                self._release(buf)

    def __enter__(self) -> DeviceGroup:
        return self

    def __exit__(self, *exc: object) -> None:
        self.free_scratch()

    #: whether work enqueued on a member is ordered before the member's (and a copy's)
    #: later work without a host wait (local backends: their stream/queue order)
    _DEVICE_ORDERED = True

    #: what a member must be, an example of the call, and where other members go: a
    #: backend of this process (BaseBackend, not just any `Backend`: a RemoteBackend's work
    #: is not ordered on its device as _DEVICE_ORDERED assumes; it goes in Sharded)
    _MEMBER: type = BaseBackend
    _KIND = "backend"
    _EXAMPLE = "DeviceGroup([vyre.get_backend('cuda:0'), vyre.get_backend('cuda:1')])"
    _ELSEWHERE = ("pass vyre.get_backend(...) instances (Ray actors from "
                  "vyre.distributed.spawn go in vyre.distributed.Sharded)")

    @classmethod
    def _checked_backends(cls, backends: Any) -> tuple[Backend, ...]:
        name, kind = cls.__name__, cls._KIND
        if isinstance(backends, (str, bytes)) or not isinstance(backends, Sequence):
            raise InvalidDispatch(f"{name} takes a list of {kind}s, got "
                                  f"{type(backends).__name__}; e.g. {cls._EXAMPLE}")
        if not backends:
            raise InvalidDispatch(f"{name} needs at least one {kind}; e.g. {cls._EXAMPLE}")
        bad = [i for i, b in enumerate(backends) if not isinstance(b, cls._MEMBER)]
        if bad:
            i = bad[0]
            raise InvalidDispatch(f"{name}: member {i} is a {type(backends[i]).__name__}, not "
                                  f"a {kind}; {cls._ELSEWHERE}")
        return tuple(backends)

    # ------------------------------------------------------------ primitives
    # (vyre.distributed.Sharded sends these as batched messages to its actors)
    def _write_all(self, items: Sequence[tuple[Any, Any, np.ndarray, int]]) -> None:
        """(backend, buffer, host array, byte offset) uploads."""
        for backend, buf, data, offset in items:
            backend.write(buf, data, offset)

    def _read_all(self, items: Sequence[tuple[Any, Any, int, int, np.dtype]]) -> list[np.ndarray]:
        """(backend, buffer, byte offset, byte length, dtype) reads, in order: one
        read_many (one wait) per backend."""
        by_backend: dict[int, list[int]] = {}
        for i, (backend, *_rest) in enumerate(items):
            by_backend.setdefault(id(backend), []).append(i)
        out: list[Any] = [None] * len(items)
        for indices in by_backend.values():
            backend = items[indices[0]][0]
            got = backend.read_many([(items[i][1], items[i][2], items[i][3], items[i][4])
                                     for i in indices])
            for i, arr in zip(indices, got):
                out[i] = np.asarray(arr)
        return out

    def _release(self, buffer: Any) -> None:
        buffer.owner.free(buffer)

    def _copy_all(self, copies: list[tuple[Any, Any, int, int, int]]) -> None:
        """(src, dst, src_offset, dst_offset, nbytes) copies between shards' buffers, all
        at once (device to device and concurrent where the members reach each other,
        vyre.copy_many)."""
        copy_many(copies)

    # ------------------------------------------------------------ data
    def layout(self, rows: int, align: int = 1) -> tuple[Shard, ...]:
        return tuple(Shard(i, b, s, c) for i, (b, (s, c))
                     in enumerate(zip(self.backends, split(rows, len(self.backends), align))))

    def empty(self, shards: Sequence[Shard], dtype: Any, row_shape: tuple[int, ...] = (),
              label: str = "sharded", halo: int = 0) -> ShardedArray:
        """Uninitialised shards with the rows of `shards` (e.g. another array's `.shards`),
        each with `halo` ghost rows on both sides."""
        dt = np.dtype(dtype)
        halo = _halo(halo)
        row_bytes = dt.itemsize * int(np.prod(row_shape, dtype=np.int64))
        bufs = [s.backend.allocate_device_buffer((s.count + 2 * halo) * row_bytes,
                                                 label=f"{label}[{s.index}]")
                if s.count else None for s in shards]
        return ShardedArray(self, shards, bufs, dt, row_shape, label, halo)

    def scatter(self, array: Any, align: int = 1, label: str = "sharded",
                halo: int = 0) -> ShardedArray:
        """Split `array` along axis 0 over the backends (starts multiples of `align` rows);
        with `halo`, each shard also gets the h rows on each side of its own (zeros beyond
        the array's ends)."""
        a = np.ascontiguousarray(array)
        if a.ndim == 0:
            raise InvalidDispatch(f"scatter needs an array with at least one axis, got {a!r}")
        out = self.empty(self.layout(a.shape[0], align), a.dtype, a.shape[1:], label, halo)
        h = out.halo
        items = []
        for s, b in out.live():
            lo, hi = max(0, s.start - h), min(a.shape[0], s.start + s.count + h)
            rows = a[lo:hi]
            if h:  # the shard's window, zero rows where it runs past the array
                window = np.zeros((s.count + 2 * h, *a.shape[1:]), a.dtype)
                first = lo - (s.start - h)
                window[first:first + rows.shape[0]] = rows
                rows = window
            items.append((s.backend, b, rows, 0))
        self._write_all(items)
        return out

    def replicate(self, array: Any, label: str = "replicated") -> Replicated:
        """`array` uploaded once to every backend."""
        a = np.ascontiguousarray(array)
        bufs = {i: b.allocate_device_buffer(max(a.nbytes, a.itemsize), label=f"{label}[{i}]")
                for i, b in enumerate(self.backends)}
        if a.nbytes:
            self._write_all([(self.backends[i], buf, a, 0) for i, buf in bufs.items()])
        return Replicated(self, bufs)

    def broadcast(self, buffer: Any, label: str = "broadcast") -> Replicated:
        """A resident buffer of one member copied to every member (device to device where
        they reach each other); the member that owns it keeps its own buffer."""
        owners = [i for i, b in enumerate(self.backends) if b is getattr(buffer, "owner", None)]
        if not owners:
            raise InvalidDispatch(
                f"broadcast: {getattr(buffer, 'label', None) or buffer!r:.40} is not a buffer "
                "of a member of this group; allocate it on one of group.backends")
        bufs = {i: buffer if i in owners else
                b.allocate_device_buffer(buffer.byte_len, label=f"{label}[{i}]")
                for i, b in enumerate(self.backends)}
        self._copy_all([(buffer, dst, 0, 0, buffer.byte_len)
                        for dst in bufs.values() if dst is not buffer])
        return Replicated(_Borrowing(self, buffer), bufs)

    def all_gather(self, arr: ShardedArray, label: str = "all_gathered",
                   out: Replicated | None = None) -> Replicated:
        """The whole array (every shard's own rows, in order) on every backend, copied
        shard to shard on the devices: what a kernel needs that reads any row. `out` (an
        earlier all_gather's result, or a `replicate` of the right size) is filled again
        instead of allocating."""
        rb, h = arr.row_bytes, arr.halo
        total = max(arr.rows * rb, arr.dtype.itemsize)
        if out is None:
            out = Replicated(self, {i: b.allocate_device_buffer(total, label=f"{label}[{i}]")
                                    for i, b in enumerate(self.backends)})
        elif (sorted(out.buffers) != list(range(len(self.backends)))
              or any(b.byte_len < total for b in out.buffers.values())):
            raise InvalidDispatch(
                f"all_gather: out must hold {total} bytes on each of the "
                f"{len(self.backends)} members; pass an earlier all_gather's result")
        self._copy_all([(src, dst, h * rb, s.start * rb, s.count * rb)
                        for dst in out.buffers.values() for s, src in arr.live()])
        return out

    def exchange_halos(self, arr: ShardedArray) -> None:
        """Fill every shard's ghost rows with its neighbours' edge rows (the rows
        [start - h, start) and [start + count, start + count + h) of the whole array), on
        the devices; ghost rows past the array's ends are left as they are. Each shard
        needs at least h rows of its own (scatter fewer backends otherwise)."""
        h, rb = arr.halo, arr.row_bytes
        if not h:
            raise InvalidDispatch(f"exchange_halos: {arr.label!r} has no halo rows; scatter "
                                  "it with halo=h (the rows a step reads on each side)")
        live = arr.live()
        thin = [s.index for s, _ in live if s.count < h]
        if thin and len(live) > 1:
            raise InvalidDispatch(
                f"exchange_halos: shards {thin} of {arr.label!r} have fewer than {h} rows of "
                "their own, so a ghost row would come from beyond a neighbour; use fewer "
                "backends or a larger array")
        # s's last h own rows -> t's leading ghost rows; t's first h -> s's trailing
        self._copy_all([item for (s, b), (_t, c) in itertools.pairwise(live)
                        for item in ((b, c, s.count * rb, 0, h * rb),
                                     (c, b, h * rb, (s.count + h) * rb, h * rb))])

    # ------------------------------------------------------------ dispatch
    def map(self, program: Program, inputs: Mapping[str, ShardedArray | Replicated],
            outputs: Mapping[str, ShardedArray | Replicated],
            config: Callable[[Shard], DispatchConfig], wait: bool = True) -> list[Timing]:
        """Dispatch `program` on every non-empty shard at once, with `config(shard)`; the
        sharded arguments must share one layout. Waits for all and returns their Timings;
        with `wait=False` returns at once (nothing to return): later work on the shards
        (maps, exchanges, reads) is ordered after it on each backend."""
        sharded = [(n, a) for n, a in (*inputs.items(), *outputs.items())
                   if isinstance(a, ShardedArray)]
        if not sharded:
            raise InvalidDispatch(f"map of {program.name!r} needs at least one ShardedArray")
        name0, first = sharded[0]
        for n, a in sharded[1:]:
            if a.layout != first.layout:
                raise InvalidDispatch(
                    f"map of {program.name!r}: buffer {n!r} is split differently from "
                    f"{name0!r} (rows {[s.count for s in a.shards]}, halo {a.halo} vs "
                    f"{[s.count for s in first.shards]}, halo {first.halo}); allocate it "
                    f"with group.empty({name0}.shards, ..., halo={first.halo})")

        def pick(arg: ShardedArray | Replicated, i: int) -> Any:
            b = arg.buffers[i]
            assert b is not None
            return b

        if not wait:
            for s in first.shards:
                if s.count:
                    s.backend.dispatch_with_device_buffers(
                        program, {n: pick(a, s.index) for n, a in inputs.items()},
                        {n: pick(a, s.index) for n, a in outputs.items()}, config(s))
            return []
        pending = [
            s.backend.dispatch_async(
                program, {n: pick(a, s.index) for n, a in inputs.items()},
                {n: pick(a, s.index) for n, a in outputs.items()}, config(s))
            for s in first.shards if s.count
        ]
        return wait_all(pending)

    # ------------------------------------------------------------ library combinations
    def reduce(self, arr: ShardedArray, op: str) -> np.generic:
        """sum / min / max of a sharded 1-D array: the single-backend library's bits
        (vyre.group_combine)."""
        from vyre.group_combine import reduce

        return reduce(self, arr, op)

    def scan(self, arr: ShardedArray, inclusive: bool = True, label: str = "scan",
             out: ShardedArray | None = None) -> ShardedArray:
        """Prefix sum of a sharded 1-D array, left resident in the same layout; the
        single-backend library's bits (vyre.group_combine). `out` (an earlier scan's result
        of an array of the same layout, or `group.empty(arr.shards, arr.dtype)`) is written
        instead of allocating (on CUDA a new result costs an allocation and its free a
        device wait)."""
        from vyre.group_combine import scan

        return scan(self, arr, inclusive, label, out)

    def sort(self, arr: ShardedArray, label: str = "sorted") -> ShardedArray:
        """The sorted keys (u32, i32 or f32; the library radix sort's order) of a sharded
        1-D array, resident over the group with one exchange of buckets between members
        (vyre.group_sort); `gather()` gives the single-backend sort's bits. Shards of the
        result have the sizes their key ranges got."""
        from vyre.group_sort import sample_sort

        return sample_sort(self, arr, label)

    def histogram(self, arr: ShardedArray, nbins: int, lo: float = 0.0,
                  scale: float = 1.0) -> np.ndarray:
        """The library histogram (vyre.programs.histogram) of a sharded 1-D array: each
        member counts its shard, the counts are added as u32 (exact, in any order)."""
        from vyre.programs import histogram as _hist

        if arr.row_shape != () or arr.halo:
            raise InvalidDispatch(f"histogram works on 1-D arrays without halos; {arr.label!r} "
                                  f"has rows of {arr.row_shape} and halo {arr.halo}")
        ty = ScalarType.from_numpy(arr.dtype)
        reads = []
        for s, b in arr.live():
            bins = self._scratch_buffer(s.backend, ("bins", s.index), 4 * nbins)
            _hist.histogram_device(s.backend, b, s.count, bins, nbins, ty, use_pipeline=False,
                                   lo=lo, scale=scale)
            reads.append((s.backend, bins, 0, 4 * nbins, np.dtype(np.uint32)))
        counts = self._read_all(reads) if nbins else []
        total = np.zeros(nbins, np.uint32)
        for c in counts:
            total += c  # u32, wrapping like the device's counters: exact in any order
        return total

    def matmul(self, a: ShardedArray, b: Replicated, n: int, label: str = "matmul") -> ShardedArray:
        """C = A @ B with A (M x K, f32) split by rows and B (K x N, f32) on every member
        (`replicate` or `broadcast`): each member multiplies its rows with the library
        matmul, so C has the single-backend bits (a product's value does not depend on the
        tile shape, vyre.programs.matmul). C is split like A."""
        from vyre.programs import matmul as _mm

        if len(a.row_shape) != 1 or a.dtype != np.float32 or a.halo:
            raise InvalidDispatch(f"matmul takes A as a sharded f32 matrix (rows of K) without "
                                  f"halos; {a.label!r} has rows of {a.row_shape}, {a.dtype}")
        kdim = a.row_shape[0]
        if n < 0 or any(buf.byte_len < 4 * kdim * n for buf in b.buffers.values()):
            raise InvalidDispatch(f"matmul: B must hold K x N = {kdim} x {n} f32 values on "
                                  "every member; replicate it with group.replicate(b)")
        c = self.empty(a.shards, np.float32, (n,), label)
        for (s, ab), cb in zip(a.live(), [x for x in c.buffers if x is not None]):
            _mm.matmul_device(s.backend, ab, b.buffers[s.index], cb, s.count, n, kdim)
        return c


class _Borrowing(DeviceGroup):
    """A broadcast's Replicated frees the copies it made, never the caller's buffer."""

    def __init__(self, group: DeviceGroup, kept: Any) -> None:  # no super(): a view
        self.backends = group.backends
        self._group = group
        self._kept = kept

    def _release(self, buffer: Any) -> None:
        if buffer is not self._kept:
            self._group._release(buffer)


def _halo(halo: Any) -> int:
    if isinstance(halo, bool) or not isinstance(halo, (int, np.integer)) or halo < 0:
        raise InvalidDispatch(f"halo must be an int >= 0 (ghost rows on each side), got {halo!r}")
    return int(halo)
