"""Sorting a sharded 1-D array over a DeviceGroup: sample sort with one exchange.

1. Each member maps its shard to the library's order-preserving u32 sort bits
   (radix_sort.key_map_program; u32 keys are used as they are).
2. Evenly spaced samples of every shard (a small kernel gathers them; one read per member)
   give p - 1 splitters; bucket j holds the keys in [splitter j-1, splitter j).
3. Each member counts its keys per bucket (workgroup counts, then one global atomic per
   bucket and workgroup) and scatters them into a send buffer grouped by bucket (ranks from
   the same atomics: the order inside a bucket is arbitrary, which the sort below erases).
4. Bucket j of every member is copied (vyre.copy_many: device to device where the members
   reach each other) into member j's receive buffer, which member j sorts (the library's
   radix sort, every member's passes enqueued before any is waited for) and maps back.
So every key is sorted once, by the member its range went to: shard j of the result holds
the j-th range of the global order, and `gather()` is exactly the single-backend sort of
the whole array (sorting keys is deterministic whatever the split and the bucket order).
This module must never move a whole shard through the host.
"""

from __future__ import annotations

from functools import cache
from typing import Any

import numpy as np

from vyre.builder import ProgramBuilder, select
from vyre.config import DispatchConfig
from vyre.errors import InvalidDispatch
from vyre.interface import Backend
from vyre.ir.nodes import Program
from vyre.ir.types import ScalarType, f32, i32, u32
from vyre.programs import radix_sort
from vyre.programs._common import blocks_grid, ceil_div
from vyre.shards import Shard, ShardedArray, ShardGroup

SAMPLES_PER_MEMBER = 256
PARTITION_WORKGROUP = 256
PARTITION_PER_THREAD = 8  # keys per invocation: 2,048 per workgroup, one global atomic
                          # per bucket for them


@cache
def _samples_program() -> Program:
    """out[i] = src[i * stride] for i < m: evenly spaced samples, read with one copy."""
    k = ProgramBuilder("group_sort_samples", 64)
    src = k.buffer("src", u32)
    out = k.buffer("out", u32, "write")
    m, stride = k.param("m", u32), k.param("stride", u32)
    i = k.let(k.global_linear_id())
    with k.if_(i < m):
        out[i] = src[i * stride]
    return k.build()


@cache
def _partition_program(p: int, scatter: bool) -> Program:
    """Bucket keys[:n] by the p - 1 sorted `splitters` (bucket = how many are <= the key).
    Counting (`scatter=False`): totals[b] += the keys of bucket b. Scattering: each
    workgroup reserves its run of every bucket with one atomic on cursors[b] and writes its
    keys there in `send`. Each invocation counts its own keys per bucket first, so a
    workgroup makes one workgroup-memory atomic per bucket and invocation, not per key."""
    wg, per = PARTITION_WORKGROUP, PARTITION_PER_THREAD
    k = ProgramBuilder(f"group_sort_{'scatter' if scatter else 'count'}_{p}", wg)
    keys = k.buffer("keys", u32)
    splitters = k.buffer("splitters", u32)
    if scatter:
        cursors = k.buffer("cursors", u32, "read_write")
        send = k.buffer("send", u32, "write")
    else:
        totals = k.buffer("totals", u32, "read_write")
    n = k.param("n", u32)
    counts = k.shared("bucket_counts", u32, p)
    t = k.let(k.local_index())
    with k.if_(t < p):
        counts[t] = 0
    k.barrier()
    split = [k.let(splitters[j]) for j in range(p - 1)]
    first = k.let(k.workgroup_linear_id() * (wg * per))
    mine = []
    runs = [k.let(k.lit(0, u32)) for _ in range(p)]  # this invocation's keys per bucket
    one, zero = k.lit(1, u32), k.lit(0, u32)
    for j in range(per):
        i = k.let(first + j * wg + t)
        valid = k.let(i < n)
        key = k.let(zero)
        with k.if_(valid):
            key.set(keys[i])
        b = k.let(zero)
        for sp in split:
            b.set(b + select(key >= sp, one, zero))
        # the key's place among this invocation's keys of its bucket, then count it
        rank = k.let(zero)
        for c, run in enumerate(runs):
            hit = k.let(valid & (b == c))
            rank.set(select(hit, run, rank))
            run.set(run + select(hit, one, zero))
        mine.append((valid, key, b, rank))
    # one workgroup atomic per bucket and invocation (not per key: all of a workgroup's
    # keys hit the same p counters); `starts` is where this invocation's run begins
    if not scatter:
        for c, run in enumerate(runs):
            counts.atomic_add(c, run)
        k.barrier()
        with k.if_(t < p):
            mine_total = k.let(counts[t])
            with k.if_(mine_total != 0):
                totals.atomic_add(t, mine_total)
        return k.build()
    starts = [k.let(counts.atomic_add(c, run)) for c, run in enumerate(runs)]
    k.barrier()
    base = k.shared("bucket_base", u32, p)
    with k.if_(t < p):
        base[t] = cursors.atomic_add(t, counts[t])
    k.barrier()
    for valid, key, b, rank in mine:
        with k.if_(valid):
            at = k.let(rank)
            for c, st in enumerate(starts):
                at.set(at + select(b == c, st, zero))
            send[base[b] + at] = key
    return k.build()


def _map(backend: Backend, ty: ScalarType, src: Any, dst: Any, n: int, to_bits: bool) -> None:
    prog = radix_sort.key_map_program(ty, to_bits)
    backend.dispatch_with_device_buffers(
        prog, {"x0": src}, {"out": dst},
        DispatchConfig.for_elements(n, prog.workgroup_size[0], params={"n": n}))


def _partition(backend: Backend, prog: Program, ins: dict[str, Any], outs: dict[str, Any],
               n: int) -> None:
    blocks = ceil_div(n, PARTITION_WORKGROUP * PARTITION_PER_THREAD)
    backend.dispatch_with_device_buffers(prog, ins, outs,
                                         blocks_grid(blocks, PARTITION_WORKGROUP, n=n))


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
    made: list[Any] = []     # this call's temporaries, released at the end
    results: list[Any] = []  # the result's buffers (released only if the call fails)

    def alloc(backend: Backend, count: int, name: str, into: list[Any]) -> Any:
        buf = backend.allocate_device_buffer(max(count, 1) * 4, label=name)
        into.append(buf)
        return buf

    def sort_all(bufs: list[tuple[Any, Any, int]]) -> None:
        """Sort each (backend, u32 buffer, n) in place: every member's passes enqueued
        before any is waited for (run_plan would wait for each member in turn)."""
        for backend, buf, n in bufs:
            plan = radix_sort.plan_radix_sort(backend, buf, n)
            made.extend(plan.temporaries)
            for st in plan.steps:
                backend.dispatch_with_device_buffers(st.program, st.inputs, st.outputs,
                                                     st.config)

    ok = False
    try:
        if p == 1 or not live:
            done = _sort_in_place(group, arr, ty, label, alloc, made, results, sort_all)
            ok = True
            return done
        # 1. sort bits (u32 keys: the shard itself)
        bits = []
        for s, b in live:
            if ty is u32:
                bits.append(b)
            else:
                kb = group._scratch_buffer(s.backend, ("sort_bits", s.index), s.count * 4)
                _map(s.backend, ty, b, kb, s.count, True)
                bits.append(kb)
        # 2. splitters from evenly spaced samples (a kernel gathers them; one read each)
        reads = []
        for (s, _), kb in zip(live, bits):
            m = min(SAMPLES_PER_MEMBER, s.count)
            out = group._scratch_buffer(s.backend, ("sort_samples", s.index), m * 4)
            s.backend.dispatch_with_device_buffers(
                _samples_program(), {"src": kb}, {"out": out},
                DispatchConfig.for_elements(m, 64, params={"m": m, "stride": s.count // m}))
            reads.append((s.backend, out, 0, m * 4, np.dtype(np.uint32)))
        samples = np.sort(np.concatenate(group._read_all(reads)))
        splitters = samples[[(j * samples.size) // p for j in range(1, p)]].astype(np.uint32)
        # 3. bucket sizes per member, then each member's keys grouped by bucket
        spl, tot = [], []
        for s, _ in live:
            spl.append(group._scratch_buffer(s.backend, ("sort_splitters", s.index), 4 * p))
            tot.append(group._scratch_buffer(s.backend, ("sort_totals", s.index), 4 * p))
        group._write_all([(s.backend, sb, splitters, 0) for (s, _), sb in zip(live, spl)]
                         + [(s.backend, tb, np.zeros(p, np.uint32), 0)
                            for (s, _), tb in zip(live, tot)])
        count_prog, scatter_prog = _partition_program(p, False), _partition_program(p, True)
        for (s, _), kb, sb, tb in zip(live, bits, spl, tot):
            _partition(s.backend, count_prog, {"keys": kb, "splitters": sb}, {"totals": tb},
                       s.count)
        totals = group._read_all([(s.backend, tb, 0, 4 * p, np.dtype(np.uint32))
                                  for (s, _), tb in zip(live, tot)])
        starts = [np.concatenate(([0], np.cumsum(t)[:-1])).astype(np.uint32) for t in totals]
        group._write_all([(s.backend, tb, st, 0) for (s, _), tb, st in zip(live, tot, starts)])
        sends = []
        for (s, _), kb, sb, tb in zip(live, bits, spl, tot):
            send = group._scratch_buffer(s.backend, ("sort_send", s.index), s.count * 4)
            _partition(s.backend, scatter_prog, {"keys": kb, "splitters": sb},
                       {"cursors": tb, "send": send}, s.count)
            sends.append(send)
        # 4. bucket j of every member into member j (all copies at once), sorted there
        sizes = [int(sum(int(t[j]) for t in totals)) for j in range(p)]
        recvs: list[Any] = []
        for j, backend in enumerate(members):
            if not sizes[j]:
                recvs.append(None)
            elif ty is u32:
                recvs.append(alloc(backend, sizes[j], f"{label}[{j}]", results))
            else:
                recvs.append(group._scratch_buffer(backend, ("sort_recv", j), sizes[j] * 4))
        copies = []
        for j, recv in enumerate(recvs):
            at = 0
            for send, t, st in zip(sends, totals, starts):
                if t[j]:
                    copies.append((send, recv, 4 * int(st[j]), 4 * at, 4 * int(t[j])))
                    at += int(t[j])
        group._copy_all(copies)
        sort_all([(members[j], r, sizes[j]) for j, r in enumerate(recvs) if r is not None])
        shards: list[Shard] = []
        buffers: list[Any] = []
        start = 0
        for j, (backend, recv) in enumerate(zip(members, recvs)):
            out_buf = recv
            if recv is not None and ty is not u32:
                out_buf = alloc(backend, sizes[j], f"{label}[{j}]", results)
                _map(backend, ty, recv, out_buf, sizes[j], False)
            shards.append(Shard(j, backend, start, sizes[j]))
            buffers.append(out_buf)
            start += sizes[j]
        ok = True
        return ShardedArray(group, shards, buffers, arr.dtype, (), label)
    finally:
        for backend in members:  # the temporaries may still be in use by queued work
            backend.synchronize()
        for buf in made + ([] if ok else results):
            group._release(buf)


def _sort_in_place(group: ShardGroup, arr: ShardedArray, ty: ScalarType, label: str,
                   alloc: Any, made: list[Any], results: list[Any], sort_all: Any
                   ) -> ShardedArray:
    """One member (or an empty array): each shard copied into its result and sorted there,
    once (its order is the whole order)."""
    buffers: list[Any] = []
    copies, sorts = [], []
    for s, b in zip(arr.shards, arr.buffers):
        if b is None or not s.count:
            buffers.append(None)
            continue
        out = alloc(s.backend, s.count, f"{label}[{s.index}]", results)
        buffers.append(out)
        if ty is u32:
            copies.append((b, out, 0, 0, s.count * 4))
        else:
            _map(s.backend, ty, b, out, s.count, True)
        sorts.append((s.backend, out, s.count))
    group._copy_all(copies)
    sort_all(sorts)
    for (backend, out, n) in sorts:
        if ty is not u32:
            _map(backend, ty, out, out, n, False)
    return ShardedArray(group, arr.shards, buffers, arr.dtype, (), label)
