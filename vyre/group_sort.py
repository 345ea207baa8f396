# mypy: disable-error-code="valid-type,type-arg,index"
# (the decorated kernel annotates with vyre types, which are values, not Python types)
"""Sorting a sharded 1-D array over a DeviceGroup: sample sort with one exchange.

1. Each member maps its shard to the library's order-preserving u32 sort bits
   (radix_sort.key_map_program; u32 keys as they are) and sorts them (radix_sort).
2. Evenly spaced samples of every sorted shard (a few per member, read to the host) give
   p - 1 splitters; a binary-search kernel finds where each splitter falls in each shard.
3. Bucket j of every shard is copied (vyre.copy: device to device where the members reach
   each other) into member j's receive buffer, which member j sorts and maps back.
Shard j of the result holds the j-th range of the global order, so `gather()` is exactly
the single-backend sort of the whole array: sorting keys is deterministic whatever the
split. This module must never move a whole shard through the host.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from vyre.config import DispatchConfig
from vyre.errors import InvalidDispatch
from vyre.ir.types import ScalarType, f32, i32, u32
from vyre.kernel import (  # the kernel language
    Buffer,
    Output,
    else_,
    global_linear_id,
    if_,
    kernel,
    let,
    lit,
    while_,
)
from vyre.programs import radix_sort
from vyre.programs._common import ceil_div
from vyre.shards import Shard, ShardedArray, ShardGroup

SAMPLES_PER_MEMBER = 64


@kernel(workgroup_size=64, name="group_sort_lower_bounds")
def _lower_bounds(keys: Buffer[u32], splitters: Buffer[u32], out: Output[u32], n: u32,
                  m: u32) -> None:
    """out[j] = how many of the sorted keys[:n] are below splitters[j] (binary search)."""
    j = let(global_linear_id())
    with if_(j < m):
        lo = let(lit(0, u32))
        hi = let(n)
        s = let(splitters[j])
        with while_(lo < hi):
            mid = let(lo + ((hi - lo) >> 1))
            with if_(keys[mid] < s):
                lo.set(mid + 1)
            with else_():
                hi.set(mid)
        out[j] = lo


def _map(backend: Any, ty: ScalarType, src: Any, dst: Any, n: int, to_bits: bool) -> None:
    prog = radix_sort.key_map_program(ty, to_bits)
    backend.dispatch_with_device_buffers(
        prog, {"x0": src}, {"out": dst},
        DispatchConfig.for_elements(n, prog.workgroup_size[0], params={"n": n}))


def sample_sort(group: ShardGroup, arr: ShardedArray, label: str) -> ShardedArray:
    """The sorted array, resident over `group` (module docstring)."""
    if arr.row_shape != () or arr.halo:
        raise InvalidDispatch(f"sort works on 1-D arrays without halos; {arr.label!r} has "
                              f"rows of {arr.row_shape} and halo {arr.halo}")
    ty = ScalarType.from_numpy(arr.dtype)
    if ty not in (u32, i32, f32):
        raise InvalidDispatch(f"sort takes u32, i32 or f32 keys, not {ty}; convert the array "
                              "with .astype(np.uint32 / np.int32 / np.float32) before scatter")
    members = group.backends
    p = len(members)
    live = arr.live()
    made: list[Any] = []

    def alloc(backend: Any, count: int, name: str) -> Any:
        buf = backend.allocate_device_buffer(max(count, 1) * 4, label=name)
        made.append(buf)
        return buf

    try:
        # 1. sort bits of every shard, sorted locally
        bits = [alloc(s.backend, s.count, f"{label}_bits[{s.index}]") for s, _ in live]
        if ty is u32:
            group._copy_all([(b, kb, 0, 0, s.count * 4) for (s, b), kb in zip(live, bits)])
        for (s, b), kb in zip(live, bits):
            if ty is not u32:
                _map(s.backend, ty, b, kb, s.count, True)
            radix_sort.radix_sort_device(s.backend, kb, s.count, use_pipeline=False)
        # 2. splitters from evenly spaced samples (one read per member), and each shard's
        # bucket bounds (every member's search enqueued before any is read)
        per = SAMPLES_PER_MEMBER
        samples = np.sort(np.concatenate(group._read_all([
            (s.backend, kb, 4 * min(s.count - 1, (i * s.count) // per), 4, np.dtype(np.uint32))
            for (s, _), kb in zip(live, bits) for i in range(per)]))) if live else np.zeros(
            0, np.uint32)
        splitters = (samples[[(j * samples.size) // p for j in range(1, p)]]
                     if samples.size else np.zeros(p - 1, np.uint32))
        if p == 1:
            bounds = [[0, s.count] for s, _ in live]
        else:
            outs = []
            for (s, _), kb in zip(live, bits):
                sp = alloc(s.backend, p - 1, f"{label}_splitters")
                out = alloc(s.backend, p - 1, f"{label}_bounds")
                group._write_all([(s.backend, sp, splitters.astype(np.uint32), 0)])
                s.backend.dispatch_with_device_buffers(
                    _lower_bounds.program, {"keys": kb, "splitters": sp}, {"out": out},
                    DispatchConfig(grid=(ceil_div(p - 1, 64), 1, 1),
                                   params={"n": s.count, "m": p - 1}))
                outs.append((s.backend, out, 0, 4 * (p - 1), np.dtype(np.uint32)))
            bounds = [[0, *(int(v) for v in inner), s.count]
                      for (s, _), inner in zip(live, group._read_all(outs))]
        # 3. bucket j of every shard into member j (all copies at once), sorted there and
        # mapped back
        sizes = [sum(bd[j + 1] - bd[j] for bd in bounds) for j in range(p)]
        recvs = [alloc(backend, sizes[j], f"{label}_recv[{j}]") if sizes[j] else None
                 for j, backend in enumerate(members)]
        copies = []
        for j, recv in enumerate(recvs):
            at = 0
            for kb, bd in zip(bits, bounds):
                count = bd[j + 1] - bd[j]
                if count:
                    copies.append((kb, recv, 4 * bd[j], 4 * at, 4 * count))
                    at += count
        group._copy_all(copies)
        shards: list[Shard] = []
        buffers: list[Any] = []
        start = 0
        for j, (backend, recv) in enumerate(zip(members, recvs)):
            if recv is None:
                shards.append(Shard(j, backend, start, 0))
                buffers.append(None)
                continue
            radix_sort.radix_sort_device(backend, recv, sizes[j], use_pipeline=False)
            if ty is u32:
                out_buf = recv
                made.remove(recv)
            else:
                out_buf = backend.allocate_device_buffer(sizes[j] * 4, label=f"{label}[{j}]")
                _map(backend, ty, recv, out_buf, sizes[j], False)
            shards.append(Shard(j, backend, start, sizes[j]))
            buffers.append(out_buf)
            start += sizes[j]
        return ShardedArray(group, shards, buffers, arr.dtype, (), label)
    finally:
        for backend in members:  # the temporaries may still be in use by queued work
            backend.synchronize()
        for buf in made:
            group._release(buf)
