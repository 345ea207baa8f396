"""`reduce` and `scan` of a sharded 1-D array in exactly the single-backend library's order
(the combinations of `vyre.group.DeviceGroup` and `vyre.distributed.Sharded`, which
delegate to it).

Shards start on block boundaries of the library's first pass (`LIBRARY_BLOCK` elements);
each member runs that first pass on its shard, the per-block values are concatenated in
order on the group's first backend (device to device where the members reach each other)
and the rest of the library's passes run there; a scan's block offsets go back to each
member for the last pass. Every float operation therefore happens in the same order with
the same operands as on one backend: the result is bit-identical for any number of devices.

This module must never reorder a float combination, nor move shards through the host.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

import numpy as np

from vyre.config import Timing
from vyre.errors import InvalidDispatch
from vyre.interface import Backend, PendingWork
from vyre.ir.nodes import Program
from vyre.ir.types import ScalarType
from vyre.programs import reduce as _reduce
from vyre.programs import scan as _scan
from vyre.programs._common import blocks_grid, ceil_div, identity
from vyre.shards import Shard, ShardedArray, ShardGroup

#: Shards of arrays given to `reduce` and `scan` start on multiples of this many elements
#: (one block of the library's first pass); `scatter(..., align=LIBRARY_BLOCK)`.
LIBRARY_BLOCK = _reduce.WORKGROUP * _reduce.PER_THREAD
assert LIBRARY_BLOCK == _scan.WORKGROUP * _scan.PER_THREAD

#: (shard, its buffer, its number of library blocks) for each non-empty shard
Parts = list[tuple[Shard, Any, int]]


class CombiningGroup(ShardGroup, Protocol):
    """What a combination asks of its group (DeviceGroup is one; typed here so that this
    module, below vyre.group, never imports it)."""

    #: whether work enqueued on a member is ordered before its later work (and a copy's)
    #: without a host wait
    _DEVICE_ORDERED: bool

    def empty(self, shards: Sequence[Shard], dtype: Any, row_shape: tuple[int, ...] = (),
              label: str = "sharded", halo: int = 0) -> ShardedArray: ...


def wait_all(pending: Sequence[PendingWork]) -> list[Timing]:
    return [p.wait() for p in pending]


def reduce(group: CombiningGroup, arr: ShardedArray, op: str) -> np.generic:
    """sum / min / max of a sharded 1-D array: the single-backend library's bits."""
    if op not in ("sum", "min", "max"):
        raise InvalidDispatch(f"{type(group).__name__}.reduce supports sum, min and max, "
                              f"not {op!r}")
    ty, parts = _first_pass(arr, f"reduce {op}")
    if not parts:
        return _scalar(ty.numpy.type(identity(op, ty)))
    bufs = _block_pass(group, _reduce.reduce_program(op, ty), parts, ty, label="partial",
                       wait=False)
    # the library's remaining passes, over the partials in order, on the first backend
    head = group.backends[0]
    src, total = _blocks_on_head(group, parts, bufs, ty, "head_in")
    out = group._scratch_buffer(head, ("head_out",), ty.byte_size)
    if total == 1:  # one block in all: the library's first pass is its last
        return _scalar(head.read(src, 0, ty.byte_size, dtype=ty.numpy)[0])
    _reduce.reduce_device(head, src, total, op, ty, out, use_pipeline=False)
    return _scalar(head.read(out, 0, ty.byte_size, dtype=ty.numpy)[0])


def _scalar(value: Any) -> np.generic:
    """A NumPy scalar (indexing a typed array, or a dtype's constructor, gives one)."""
    assert isinstance(value, np.generic)
    return value


def scan(group: CombiningGroup, arr: ShardedArray, inclusive: bool, label: str,
         out: ShardedArray | None) -> ShardedArray:
    """Prefix sum of a sharded 1-D array in the same layout (`DeviceGroup.scan`)."""
    ty, parts = _first_pass(arr, "scan")
    if out is not None:
        _check_out(group, arr, out, "scan")
    total_blocks = sum(g for _, _, g in parts)
    if total_blocks <= 1:  # no carry between blocks: the library's one-block program
        if out is None:
            out = group.empty(arr.shards, arr.dtype, (), label)
        for (s, b, _), d in zip(parts, [b for b in out.buffers if b is not None]):
            _scan.scan_device(s.backend, b, d, s.count, ty, inclusive, use_pipeline=False)
        return out
    sums = _block_pass(group, _reduce.reduce_program("sum", ty), parts, ty, label="sums",
                       wait=False)
    head = group.backends[0]
    hs, total = _blocks_on_head(group, parts, sums, ty, "head_in")
    ho = group._scratch_buffer(head, ("head_out",), total * ty.byte_size)
    _scan.scan_device(head, hs, ho, total, ty, inclusive=False, use_pipeline=False)
    # each shard's slice of the block offsets back to it, device to device
    extra: dict[int, dict[str, Any]] = {}
    copies = []
    first = 0
    for s, _, g in parts:
        ob = group._scratch_buffer(s.backend, ("offsets", s.index), g * ty.byte_size)
        extra[s.index] = {"offsets": ob}
        copies.append((ho, ob, first * ty.byte_size, 0, g * ty.byte_size))
        first += g
    group._copy_all(copies)
    prog = _scan.scan_block_program(ty, inclusive, _scan.WORKGROUP, _scan.PER_THREAD,
                                    carry_in=True)
    into = None if out is None else {s.index: d for s, d in out.live()}
    dsts = iter(_block_pass(group, prog, parts, ty, label, per_element=True, extra=extra,
                            into=into))
    bufs = [next(dsts) if s.count else None for s in arr.shards]
    return out if out is not None else ShardedArray(group, arr.shards, bufs, arr.dtype, (),
                                                    label)


def _check_out(group: CombiningGroup, arr: ShardedArray, out: Any, what: str) -> None:
    """`out` can take a result of `arr`'s layout and type (else InvalidDispatch)."""
    same = (isinstance(out, ShardedArray) and out.group is group and out.dtype == arr.dtype
            and out.row_shape == arr.row_shape and out.halo == 0
            and [(s.backend, s.start, s.count) for s in out.shards]
            == [(s.backend, s.start, s.count) for s in arr.shards]
            and all(b is None or not b.freed for b in out.buffers))
    if not same:
        raise InvalidDispatch(
            f"{what}: out must be a live ShardedArray of this group with {arr.label!r}'s "
            f"shards and dtype {arr.dtype} (no halo); pass an earlier {what}'s result or "
            f"group.empty({arr.label}.shards, {arr.label}.dtype)")


def _first_pass(arr: ShardedArray, what: str) -> tuple[ScalarType, Parts]:
    """Check `arr` fits the library's block split; (element type, (shard, buf, blocks))."""
    if arr.row_shape != () or arr.halo:
        raise InvalidDispatch(f"{what} works on 1-D arrays without halos; {arr.label!r} "
                              f"has rows of {arr.row_shape} and halo {arr.halo}")
    bad = [s.start for s in arr.shards if s.count and s.start % LIBRARY_BLOCK]
    if bad:
        raise InvalidDispatch(
            f"{what} of {arr.label!r}: shards start at {bad}, not multiples of "
            f"{LIBRARY_BLOCK} elements, so the combination could not follow the library's "
            "order; scatter it with align=LIBRARY_BLOCK (vyre.group.LIBRARY_BLOCK)")
    ty = ScalarType.from_numpy(arr.dtype)
    return ty, [(s, b, ceil_div(s.count, LIBRARY_BLOCK)) for s, b in arr.live()]


def _block_pass(group: CombiningGroup, program: Program, parts: Parts, ty: ScalarType,
                label: str, per_element: bool = False,
                extra: Mapping[int, Mapping[str, Any]] | None = None,
                wait: bool = True, into: Mapping[int, Any] | None = None) -> list[Any]:
    """`program` ({"src", *extra} -> {"dst"}) over each shard's blocks, all at once; the
    dst buffers (one value per block, or per element when `per_element`). `wait=False`
    leaves the passes enqueued: what follows on the same backends (or a `_copy_all`,
    ordered after their work) sees their results without a host wait in between.
    `into`: shard index -> the buffer a per-element pass writes (else a new one)."""
    outs, pending = [], []
    for s, b, g in parts:
        if per_element and into is not None:
            dst = into[s.index]
        elif per_element:  # the caller's result: its own buffer
            dst = s.backend.allocate_device_buffer(s.count * ty.byte_size,
                                                   label=f"{label}[{s.index}]")
        else:
            dst = group._scratch_buffer(s.backend, ("blocks", s.index), g * ty.byte_size)
        outs.append(dst)
        ins = {"src": b, **((extra or {}).get(s.index, {}))}
        pending.append(s.backend.dispatch_async(
            program, ins, {"dst": dst}, blocks_grid(g, _reduce.WORKGROUP, n=s.count)))
    if wait or not group._DEVICE_ORDERED:
        wait_all(pending)
    return outs


def _blocks_on_head(group: CombiningGroup, parts: Parts, bufs: list[Any], ty: ScalarType,
                    key: str) -> tuple[Any, int]:
    """Every shard's per-block values, in order, in one buffer of the first backend
    (copied device to device where the members reach each other; no host round trip);
    (that buffer, the number of values)."""
    total = sum(g for _, _, g in parts)
    head: Backend = group.backends[0]
    if len(parts) == 1 and parts[0][0].backend is head:
        return bufs[0], total  # already there
    dst = group._scratch_buffer(head, (key,), total * ty.byte_size)
    copies, at = [], 0
    for (_s, _b, g), d in zip(parts, bufs):
        copies.append((d, dst, 0, at * ty.byte_size, g * ty.byte_size))
        at += g
    group._copy_all(copies)
    return dst, total
