"""The in-workgroup stable sort of one block of u32 keys (and 32-bit values) by an 8-bit
digit, which both 8-bit radix sort designs (vyre.programs.radix_sort: count + scan +
scatter; vyre.programs.radix_onesweep: one pass with decoupled look-back) build on.

A block is workgroup_size * per_thread keys, loaded coalesced into workgroup memory (keys
past n are all ones: the largest digit, after every real key, so the first n - base slots
of the sorted block are the real keys). It is sorted there stably by the digit
(key >> shift) & mask in two 4-bit ranking rounds (low nibble, then high: a stable LSD
sort). A round: invocation t takes the consecutive keys [t*per, (t+1)*per) of the block and
counts their nibbles; nibble v's count sits in the low (v < 8) or high (v >= 8) 16-bit half
of table word v mod 8 of its own column; its rank among equal nibbles in its own run is the
count before its increment. One exclusive scan of the table (words, then invocations: the
low halves give the nibbles 0..7 their starts, the high halves 8..15 theirs after all low
ones) turns the columns into each key's new slot. Two ways to count, the same ranks (so the
same bits): `table` increments the words in workgroup memory, one read-modify-write per
key; `registers` keeps the run's counts in packed fields of locals (4 bits per nibble for
per_thread <= 15, else 8 bits) and stores the eight words once. Where the backend has
subgroups of a size that divides the workgroup, the scan combines the invocations' totals
with subgroup scans (integer sums: the same bits as the workgroup-memory scan).

Ranks are computed deterministically, never from atomic ordering. Besides the tile sort
this module holds what both sort plans share around it: writing a sorted block to the
places its caller computed, the ping-pong temporaries and the copy home after an odd
number of passes. It must never declare a buffer in a Program or decide where a block
goes in global memory (its callers do).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from vyre.buffer import DeviceBuffer
from vyre.builder import ProgramBuilder, Value, select
from vyre.interface import Backend

from ._common import (
    LibraryArgumentError,
    Plan,
    alloc,
    bank_padded,
    ceil_div,
    check_pow2,
    emit_block_scan,
    grid,
    subgroup_exclusive_total,
    u32,
)
from .elementwise import convert

RADIX_BITS = 4  # a ranking round's digit (a nibble of the 8-bit digit)
RADIX = 1 << RADIX_BITS
DIGIT_BITS = 8  # the digit a block is sorted by
DIGITS = 1 << DIGIT_BITS
WORDS = RADIX // 2  # table words per invocation in a ranking round: two 16-bit counts each
LOCAL_COUNTS = ("table", "registers")
#: the most keys per invocation `registers` counts (8-bit fields)
MAX_REGISTER_RUN = 255


def check_digit_shape(wg: int, per: int) -> None:
    check_pow2(wg, "workgroup_size")
    if per < 1:
        raise LibraryArgumentError(f"per_thread must be at least 1, got {per}; leave it out for the "
                                   "tuned default")
    if wg * per > 1 << 16:  # the ranking table counts in 16-bit halves
        raise LibraryArgumentError(f"radix sort blocks hold at most 65536 keys, got workgroup_size "
                                   f"{wg} * per_thread {per}; make one of them smaller")


def check_local_counts(local_counts: str, per: int) -> None:
    if local_counts not in LOCAL_COUNTS:
        raise LibraryArgumentError(f"local_counts must be one of {LOCAL_COUNTS}, got "
                                   f"{local_counts!r}")
    if local_counts == "registers" and per > MAX_REGISTER_RUN:
        raise LibraryArgumentError(f"local_counts='registers' counts at most {MAX_REGISTER_RUN} keys "
                                   f"per invocation, got per_thread {per}; use 'table' or a "
                                   "smaller per_thread")


@dataclass(frozen=True)
class Block:
    """The workgroup arrays of one block's sort (values: None without them)."""

    keys: Any
    values: Any
    table: Any
    totals: Any
    total: Any


def declare_block(k: ProgramBuilder, wg: int, per: int, with_values: bool) -> Block:
    block = wg * per
    bk = k.shared("block_keys", u32, bank_padded(block - 1) + 1)
    bv = k.shared("block_values", u32, bank_padded(block - 1) + 1) if with_values else None
    table = k.shared("rank_table", u32, WORDS * wg)  # [nibble mod 8][invocation], 2 halves
    totals = k.shared("scan_totals", u32, wg)
    total = k.shared("table_total", u32, 1)
    return Block(bk, bv, table, totals, total)


def load_block(k: ProgramBuilder, blk: Block, keys: Any, values: Any, n: Value, base: Value,
               wg: int, per: int, t: Value) -> list[tuple[Value, Value]]:
    """Load keys[base : base + block] (and values) coalesced into the block arrays; returns
    each loaded (index, key). Keys past n are all ones. No barrier after."""
    ones = np.uint32(0xFFFFFFFF)
    lk = []
    idx = []
    for j in range(per):  # coalesced, every load in flight before the first store
        i = k.let(base + j * wg + t)
        idx.append(i)
        lk.append((k.let(select(i < n, keys[i], ones)),
                   k.let(select(i < n, values[i], k.lit(0, values.ty)))
                   if values is not None else None))
    for j, (key, val) in enumerate(lk):
        blk.keys[bank_padded(t + j * wg)] = key
        if blk.values is not None:
            blk.values[bank_padded(t + j * wg)] = val
    return [(i, key) for i, (key, _) in zip(idx, lk)]


def _scan_columns(k: ProgramBuilder, blk: Block, wg: int, t: Value, subgroups: bool) -> Value:
    """Exclusive scan, in place, of the ranking table (wg * WORDS words, word-major);
    returns the table's total (packed halves). Invocation t scans words [t*WORDS, ...)
    serially; the run totals are combined by subgroup scans (`subgroups`) or Hillis-Steele
    in workgroup memory (emit_block_scan). Integer sums: both give the same bits. Starts
    after a barrier, ends with one."""
    table, totals, total_out = blk.table, blk.totals, blk.total
    if not subgroups:
        return emit_block_scan(k, table, totals, wg, WORDS, u32, t, inclusive=False)
    start = k.let(t * WORDS)
    run = [k.let(table[start + j]) for j in range(WORDS)]
    s = k.let(run[0])
    for j in range(1, WORDS):
        s.set(s + run[j])
    acc = k.let(subgroup_exclusive_total(k, s, t, totals, wg))
    with k.if_(t == wg - 1):
        total_out[0] = acc + s
    for j in range(WORDS):
        table[start + j] = acc
        acc.set(acc + run[j])
    k.barrier()
    return k.let(total_out[0])


Counted = tuple[list[Value], list[Value], list[Value]]  # (slots, halves, ranks) per key


def _count_in_table(k: ProgramBuilder, blk: Block, run: list[Value], shift: Value,
                    mask: Value, r: int, wg: int, t: Value) -> Counted:
    """Each key's table slot and half, and its rank among the earlier equal nibbles of its
    run, counting in the table (one read-modify-write per key); the table holds the run's
    counts after."""
    table = blk.table
    for w in range(WORDS):
        table[w * wg + t] = 0
    slots: list[Value] = []
    halves: list[Value] = []
    ranks: list[Value] = []
    for j in range(len(run)):
        nib = k.let((((run[j] >> shift) & mask) >> (4 * r)) & (RADIX - 1))
        slot = k.let((nib & (WORDS - 1)) * wg + t)
        half = k.let((nib >> 3) << 4)  # 0: low 16 bits, 16: high
        old = k.let(table[slot])
        table[slot] = old + (k.lit(1, u32) << half)
        slots.append(slot)
        halves.append(half)
        ranks.append(k.let((old >> half) & 0xFFFF))
    return slots, halves, ranks


def _count_in_registers(k: ProgramBuilder, blk: Block, run: list[Value], shift: Value,
                        mask: Value, r: int, wg: int, t: Value) -> Counted:
    """The same slots, halves, ranks and table words as _count_in_table, counted in packed
    fields of locals (`fields` per word, wide enough for the run's length) and stored
    once."""
    per = len(run)
    bits = 4 if per <= 15 else 8
    fields = 32 // bits
    fshift = fields.bit_length() - 1  # nibble v is field v mod fields of word v / fields
    words = RADIX // fields
    field_mask = (1 << bits) - 1
    counts = [k.let(k.lit(0, u32)) for _ in range(words)]
    slots: list[Value] = []
    halves: list[Value] = []
    ranks: list[Value] = []
    for j in range(per):
        nib = k.let((((run[j] >> shift) & mask) >> (4 * r)) & (RADIX - 1))
        slots.append(k.let((nib & (WORDS - 1)) * wg + t))
        halves.append(k.let((nib >> 3) << 4))
        w = k.let(nib >> fshift)
        sh = k.let((nib & (fields - 1)) * bits)
        cur: Value = counts[0]
        for c in range(1, words):
            cur = select(w == c, counts[c], cur)
        ranks.append(k.let((cur >> sh) & field_mask))
        inc = k.let(k.lit(1, u32) << sh)
        for c in range(words):
            counts[c].set(counts[c] + select(w == c, inc, k.lit(0, u32)))

    def count(v: int) -> Value:
        return (counts[v >> fshift] >> ((v & (fields - 1)) * bits)) & field_mask

    for v in range(WORDS):
        blk.table[v * wg + t] = count(v) | (count(v + WORDS) << 16)
    return slots, halves, ranks


def rank_block(k: ProgramBuilder, blk: Block, shift: Value, mask: Value, wg: int, per: int,
               t: Value, subgroups: bool, local_counts: str = "table") -> None:
    """Sort the block arrays stably by (key >> shift) & mask (< 256) in two ranking rounds
    (module docstring). Starts after a barrier, ends with one."""
    check_local_counts(local_counts, per)
    bk, bv = blk.keys, blk.values
    counter = _count_in_table if local_counts == "table" else _count_in_registers
    for r in range(2):  # low nibble of the digit, then the high one: a stable LSD sort
        run: list[Value] = [k.let(bk[bank_padded(t * per + j)]) for j in range(per)]
        vrun = [k.let(bv[bank_padded(t * per + j)]) for j in range(per)] if bv is not None else []
        slots, halves, ranks = counter(k, blk, run, shift, mask, r, wg, t)
        k.barrier()
        low_total = k.let(_scan_columns(k, blk, wg, t, subgroups) & 0xFFFF)
        for j in range(per):
            before = k.let((blk.table[slots[j]] >> halves[j]) & 0xFFFF)
            pos = k.let(before + ranks[j] + select(halves[j] == 0, k.lit(0, u32), low_total))
            bk[bank_padded(pos)] = run[j]
            if bv is not None:
                bv[bank_padded(pos)] = vrun[j]
        k.barrier()


def digit_runs(k: ProgramBuilder, blk: Block, shift: Value, mask: Value, wg: int, per: int,
               t: Value, digit_base: Any) -> list[tuple[Value, Value, Value]]:
    """After rank_block: digit_base[d] = the block slot where digit d's run starts (for the
    digits the block holds; the others are left as they were); returns (slot, key, digit)
    of each invocation's keys, slots t, t + wg, ... No barrier after."""
    bk = blk.keys
    out: list[tuple[Value, Value, Value]] = []
    for j in range(per):
        p = k.let(t + j * wg)
        key = k.let(bk[bank_padded(p)])
        d = k.let((key >> shift) & mask)
        prev = k.let((bk[bank_padded(select(p > 0, p - 1, k.lit(0, u32)))] >> shift) & mask)
        with k.if_((p == 0) | (prev != d)):
            digit_base[d] = p
        out.append((p, key, d))
    return out


def write_block(k: ProgramBuilder, blk: Block, out: list[tuple[Value, Value, Value]],
                digit_base: Any, base: Value, n: Value, keys_out: Any, values_out: Any) -> None:
    """Write digit_runs' (slot, key, digit) to keys_out[digit_base[digit] + slot] (and the
    block's values), for the keys below n (digit_base: where the caller puts each digit's
    block slot 0)."""
    for p, key, dig in out:
        with k.if_(base + p < n):
            dst = k.let(digit_base[dig] + p)
            keys_out[dst] = key
            if blk.values is not None and values_out is not None:
                values_out[dst] = blk.values[bank_padded(p)]


def ping_pong(backend: Backend, plan: Plan, n: int, with_values: bool
              ) -> tuple[DeviceBuffer, DeviceBuffer | None]:
    """The temporaries a sort's passes alternate with the caller's keys (and values) through,
    added to the plan's."""
    tmp_keys = alloc(backend, u32, n, "radix_tmp_keys")
    plan.temporaries.append(tmp_keys)
    tmp_values = None
    if with_values:
        tmp_values = alloc(backend, u32, n, "radix_tmp_values")
        plan.temporaries.append(tmp_values)
    return tmp_keys, tmp_values


def copy_home(plan: Plan, passes: int, tmp_keys: DeviceBuffer, keys: DeviceBuffer,
              tmp_values: DeviceBuffer | None, values: DeviceBuffer | None, n: int,
              max_per_dim: int) -> None:
    """After an odd number of passes the result is in the temporaries: copy it home."""
    if passes % 2 == 0:
        return
    copy = convert(u32, u32)
    cfg = grid(n, copy.workgroup_size[0], max_per_dim, n=n)
    plan.add(copy, {"x0": tmp_keys}, {"out": keys}, cfg)
    if values is not None and tmp_values is not None:
        plan.add(copy, {"x0": tmp_values}, {"out": values}, cfg)


def digit_rounds(wg: int) -> int:
    """Rounds of `wg` invocations that cover the DIGITS digits (one digit each per round)."""
    return ceil_div(DIGITS, wg)
