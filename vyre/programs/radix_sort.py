"""Stable LSD radix sort of u32 keys, optionally carrying 32-bit values.

Two designs, both exact and stable on every backend, chosen with `digit_bits`:

- 8 bits per pass (the default; 4 passes for 32-bit keys). Each pass: (1) count the digits
  of every block of `workgroup_size * per_thread` keys into counts[digit * blocks + block]
  (workgroup-memory atomics: counting is order-free); (2) exclusive-scan the counts, which
  gives each (digit, block) its first output slot; (3) one scatter program loads its block
  coalesced into workgroup memory, sorts it there stably by the digit in two 4-bit ranking
  rounds, then writes it out coalesced within each digit's run. A ranking round: invocation
  t takes the consecutive keys [t*per, (t+1)*per) of the block and counts their 4-bit
  nibbles in its own column of a table held as 8 words per invocation, nibble v in the low
  (v < 8) or high (v >= 8) 16-bit half of word v mod 8; its rank among equal nibbles in its
  own run is the count before its increment. One exclusive scan of the table (words, then
  invocations: the low halves give the nibbles 0..7 their starts, the high halves 8..15
  theirs after all low ones) turns the columns into each key's new slot. Where the backend
  has subgroups of a size that divides the workgroup, that scan combines the invocations'
  totals with subgroup scans (integer sums: the same bits as the workgroup-memory scan).
- 4 bits per pass (8 passes): the same three steps with a 16-digit table of one word per
  (digit, invocation) and no local reordering; it needs far less workgroup memory.

Ranks are computed deterministically, never from atomic ordering, and keys keep their input
order among equal digits, so the sort is stable and the values of equal keys keep their
input order. Results are bit-exact on every backend.

Values are moved as raw 32-bit words (declared u32), so any 32-bit payload (u32, i32, f32
bits) works. i32 and f32 keys are sorted through an order-preserving map to u32 (flip the
sign bit; for floats flip every bit of negatives), so floats sort by their IEEE total order:
-NaN < -inf < ... < -0.0 < +0.0 < ... < +inf < +NaN. This module must never use atomics to
decide where a key goes, and never read back to the host between passes.
"""

from __future__ import annotations

from functools import cache
from typing import Any

import numpy as np

from vyre.buffer import DeviceBuffer
from vyre.builder import ProgramBuilder, Value, select
from vyre.config import MAX_GRID_DIM
from vyre.interface import Backend
from vyre.ir.nodes import Program
from vyre.ir.types import ScalarType

from ._common import (
    LibraryArgumentError,
    Plan,
    alloc,
    bank_padded,
    blocks_grid,
    ceil_div,
    check_pow2,
    check_room,
    check_type,
    emit_block_scan,
    f32,
    grid,
    host_array,
    i32,
    read_elems,
    run_plan,
    subgroup_exclusive_total,
    subgroups_for,
    u32,
    upload,
)
from .elementwise import convert, map_program
from .scan import plan_scan

RADIX_BITS = 4  # the 4-bit design's digit
RADIX = 1 << RADIX_BITS
WORKGROUP = 128
PER_THREAD = 8

DIGIT_BITS = 8  # the default design's digit: 4 passes for 32-bit keys
DIGITS = 1 << DIGIT_BITS
WORKGROUP8 = 256
PER_THREAD8 = 16  # keys per invocation

#: (workgroup_size, per_thread) of the 8-bit design on a backend of this kind, keys alone
#: and key-value, when the caller names none (H100 sweeps, scripts/sort_bench.py, 2^24 u32
#: keys, Mkeys/s with the copy-in, the second round). Other kinds use UNTUNED.
TUNED: dict[tuple[str, bool], tuple[int, int]] = {
    # 24,229 (0.80x CuPy's 30,408); 256x16 23,664, 128x16 20,549, 256x12 20,622
    ("cuda", False): (512, 8),
    # 14,275; 256x8 13,178, 64x32 12,567
    ("cuda", True): (128, 16),
    # NVIDIA Vulkan: 17,211 (0.71x CUDA's 512x8); 128x32 16,428, 128x16 15,581, 512x8 14,459
    ("wgpu", False): (256, 12),
    # 10,509-10,706; 256x8 8,453, 64x32 8,027
    ("wgpu", True): (128, 16),
}
#: The shapes of kinds without a sweep (27 and 22 KiB of workgroup memory).
UNTUNED: dict[bool, tuple[int, int]] = {False: (WORKGROUP8, PER_THREAD8), True: (128, 16)}
_WORDS = RADIX // 2  # table words per invocation in a ranking round: two 16-bit counts each


def _scatter_io(k: ProgramBuilder, with_values: bool) -> tuple[Any, ...]:
    """The buffers and params every scatter program declares, in this order: keys, values,
    offsets, keys_out, values_out (values: None without them), n, shift, mask, num_blocks."""
    keys = k.buffer("keys", u32)
    values = k.buffer("values", u32) if with_values else None
    offsets = k.buffer("offsets", u32)
    keys_out = k.buffer("keys_out", u32, "write")
    values_out = k.buffer("values_out", u32, "write") if with_values else None
    return (keys, values, offsets, keys_out, values_out, k.param("n", u32),
            k.param("shift", u32), k.param("mask", u32), k.param("num_blocks", u32))


@cache
def radix_scatter_program(
    with_values: bool, workgroup_size: int = WORKGROUP, per_thread: int = PER_THREAD
) -> Program:
    """Stable scatter of keys[:n] (and values) by the digit (key >> shift) & mask (< 16) to
    keys_out / values_out, given offsets = exclusive scan of the radix_count_program counts."""
    wg, per = workgroup_size, per_thread
    check_pow2(wg, "workgroup_size")
    if wg < RADIX:
        raise LibraryArgumentError(f"radix sort needs workgroup_size >= {RADIX} (one invocation per "
                                   f"digit value); got {wg}, pass {RADIX} or more")
    k = ProgramBuilder(f"radix_scatter_{'kv' if with_values else 'k'}_{wg}x{per}", wg)
    keys, values, offsets, keys_out, values_out, n, shift, mask, nb = _scatter_io(k, with_values)
    table = k.shared("rank_table", u32, RADIX * wg)  # [digit][invocation]
    totals = k.shared("scan_totals", u32, wg)
    digit_start = k.shared("digit_start", u32, RADIX)
    t = k.let(k.local_index())
    g = k.let(k.workgroup_linear_id())
    own = k.let(g * (wg * per) + t * per)
    for d in range(RADIX):
        table[t + d * wg] = 0
    with k.for_range(0, per) as j:
        i = k.let(own + j)
        with k.if_(i < n):
            slot = k.let(((keys[i] >> shift) & mask) * wg + t)
            table[slot] = table[slot] + 1
    k.barrier()
    emit_block_scan(k, table, totals, wg, RADIX, u32, t, inclusive=False)
    with k.if_(t < RADIX):
        digit_start[t] = table[t * wg]
    k.barrier()
    with k.for_range(0, per) as j:
        i = k.let(own + j)
        with k.if_(i < n):
            key = k.let(keys[i])
            dig = k.let((key >> shift) & mask)
            slot = k.let(dig * wg + t)
            r = k.let(table[slot])
            table[slot] = r + 1
            pos = k.let(offsets[dig * nb + g] + (r - digit_start[dig]))
            keys_out[pos] = key
            if values is not None and values_out is not None:
                values_out[pos] = values[i]
    return k.build()


def _check_digit_shape(wg: int, per: int) -> None:
    check_pow2(wg, "workgroup_size")
    if per < 1:
        raise LibraryArgumentError(f"per_thread must be at least 1, got {per}; leave it out for the "
                                   "tuned default")
    if wg * per > 1 << 16:  # the ranking table counts in 16-bit halves
        raise LibraryArgumentError(f"radix sort blocks hold at most 65536 keys, got workgroup_size "
                                   f"{wg} * per_thread {per}; make one of them smaller")


@cache
def radix_count_program(workgroup_size: int = WORKGROUP8, per_thread: int = PER_THREAD8,
                        digits: int = DIGITS) -> Program:
    """counts[d * num_blocks + b] = number of keys[:n] in block b whose digit
    (key >> shift) & mask is d (mask < digits: 256 or 16)."""
    wg, per = workgroup_size, per_thread
    _check_digit_shape(wg, per)
    k = ProgramBuilder(f"radix_count{digits}_{wg}x{per}", wg)
    keys = k.buffer("keys", u32)
    counts = k.buffer("counts", u32, "write")
    n = k.param("n", u32)
    shift = k.param("shift", u32)
    mask = k.param("mask", u32)
    nb = k.param("num_blocks", u32)
    hist = k.shared("digit_counts", u32, digits)
    t = k.let(k.local_index())
    g = k.let(k.workgroup_linear_id())
    base = k.let(g * (wg * per))
    for c in range(ceil_div(digits, wg)):
        with k.if_(t + c * wg < digits):
            hist[t + c * wg] = 0
    k.barrier()
    loaded = []
    for j in range(per):  # coalesced, every load in flight before the first atomic
        i = k.let(base + j * wg + t)
        loaded.append((i, k.let(select(i < n, keys[i], k.lit(0, u32)))))  # (masked: past n)
    for i, key in loaded:
        with k.if_(i < n):
            hist.atomic_add((key >> shift) & mask, 1)
    k.barrier()
    for c in range(ceil_div(digits, wg)):
        d = k.let(t + c * wg)
        with k.if_((d < digits) & (base < n)):  # (a folded grid has spare workgroups)
            counts[d * nb + g] = hist[d]
    return k.build()


def _scan_columns(k: ProgramBuilder, table: Any, totals: Any, total_out: Any, wg: int,
                  t: Value, subgroups: bool) -> Value:
    """Exclusive scan, in place, of the ranking table (wg * _WORDS words, word-major);
    returns the table's total (packed halves). Invocation t scans words [t*_WORDS, ...)
    serially; the run totals are combined by subgroup scans (`subgroups`) or Hillis-Steele
    in workgroup memory (emit_block_scan). Integer sums: both give the same bits. Starts
    after a barrier, ends with one."""
    if not subgroups:
        return emit_block_scan(k, table, totals, wg, _WORDS, u32, t, inclusive=False)
    start = k.let(t * _WORDS)
    run = [k.let(table[start + j]) for j in range(_WORDS)]
    s = k.let(run[0])
    for j in range(1, _WORDS):
        s.set(s + run[j])
    acc = k.let(subgroup_exclusive_total(k, s, t, totals, wg))
    with k.if_(t == wg - 1):
        total_out[0] = acc + s
    for j in range(_WORDS):
        table[start + j] = acc
        acc.set(acc + run[j])
    k.barrier()
    return k.let(total_out[0])


@cache
def radix8_scatter_program(
    with_values: bool,
    workgroup_size: int = WORKGROUP8,
    per_thread: int = PER_THREAD8,
    subgroups: bool = False,
) -> Program:
    """Stable scatter of keys[:n] (and values) by the digit (key >> shift) & mask (< 256)
    to keys_out / values_out, given offsets = exclusive scan of the radix_count_program
    counts: the block is sorted in workgroup memory by two 4-bit ranking rounds, then
    written out in that order (module docstring)."""
    wg, per = workgroup_size, per_thread
    _check_digit_shape(wg, per)
    block = wg * per
    kind = "kv" if with_values else "k"
    k = ProgramBuilder(f"radix8_scatter_{kind}_{wg}x{per}{'_sg' if subgroups else ''}", wg)
    keys, values, offsets, keys_out, values_out, n, shift, mask, nb = _scatter_io(k, with_values)
    bk = k.shared("block_keys", u32, bank_padded(block - 1) + 1)
    bv = k.shared("block_values", u32, bank_padded(block - 1) + 1) if with_values else None
    table = k.shared("rank_table", u32, _WORDS * wg)  # [nibble mod 8][invocation], 2 halves
    totals = k.shared("scan_totals", u32, wg)
    total = k.shared("table_total", u32, 1)
    digit_base = k.shared("digit_base", u32, DIGITS)
    t = k.let(k.local_index())
    g = k.let(k.workgroup_linear_id())
    base = k.let(g * block)
    # keys past n are all ones: the largest digit, after every real key (stable), so the
    # first n - base slots of the sorted block are the real keys
    ones = np.uint32(0xFFFFFFFF)
    lk = []
    for j in range(per):  # coalesced, every load in flight before the first store
        i = k.let(base + j * wg + t)
        lk.append((k.let(select(i < n, keys[i], ones)),
                   k.let(select(i < n, values[i], k.lit(0, values.ty)))
                   if values is not None else None))
    for j, (key, val) in enumerate(lk):
        bk[bank_padded(t + j * wg)] = key
        if bv is not None:
            bv[bank_padded(t + j * wg)] = val
    k.barrier()
    for r in range(2):  # low nibble of the digit, then the high one: a stable LSD sort
        run = [k.let(bk[bank_padded(t * per + j)]) for j in range(per)]
        vrun = [k.let(bv[bank_padded(t * per + j)]) for j in range(per)] if bv is not None else []
        for w in range(_WORDS):
            table[w * wg + t] = 0
        slots, halves, ranks = [], [], []
        for j in range(per):
            nib = k.let((((run[j] >> shift) & mask) >> (4 * r)) & (RADIX - 1))
            slot = k.let((nib & (_WORDS - 1)) * wg + t)
            half = k.let((nib >> 3) << 4)  # 0: low 16 bits, 16: high
            old = k.let(table[slot])
            table[slot] = old + (k.lit(1, u32) << half)
            slots.append(slot)
            halves.append(half)
            ranks.append(k.let((old >> half) & 0xFFFF))
        k.barrier()
        low_total = k.let(_scan_columns(k, table, totals, total, wg, t, subgroups) & 0xFFFF)
        for j in range(per):
            before = k.let((table[slots[j]] >> halves[j]) & 0xFFFF)
            pos = k.let(before + ranks[j] + select(halves[j] == 0, k.lit(0, u32), low_total))
            bk[bank_padded(pos)] = run[j]
            if bv is not None:
                bv[bank_padded(pos)] = vrun[j]
        k.barrier()
    # the block is sorted by digit: each digit's run starts where the digit changes
    out = []
    for j in range(per):
        p = k.let(t + j * wg)
        key = k.let(bk[bank_padded(p)])
        d = k.let((key >> shift) & mask)
        prev = k.let((bk[bank_padded(select(p > 0, p - 1, k.lit(0, u32)))] >> shift) & mask)
        with k.if_((p == 0) | (prev != d)):
            digit_base[d] = p
        out.append((p, key, d))
    k.barrier()
    for c in range(ceil_div(DIGITS, wg)):  # digit_base[d] = global slot of block slot 0
        d = k.let(t + c * wg)
        with k.if_(d < DIGITS):
            digit_base[d] = offsets[d * nb + g] - digit_base[d]
    k.barrier()
    for p, key, d in out:
        with k.if_(base + p < n):
            dst = k.let(digit_base[d] + p)
            keys_out[dst] = key
            if bv is not None and values_out is not None:
                values_out[dst] = bv[bank_padded(p)]
    return k.build()


KEY_TYPES = (u32, i32, f32)


@cache
def key_map_program(ty: ScalarType, to_bits: bool) -> Program:
    """The order-preserving map between i32 / f32 keys and u32 sort bits (or back)."""
    ty = ScalarType(ty)
    if ty not in (i32, f32):
        raise LibraryArgumentError(f"key_map_program is for i32 and f32 keys, got {ty}; u32 keys need "
                                   "no map")
    top, ones = np.uint32(0x80000000), np.uint32(0xFFFFFFFF)

    def fwd(x: Value) -> Value:
        b = x.bitcast(u32)
        if ty is i32:
            return b ^ top
        return b ^ select((b >> 31) == 1, ones, top)

    def back(b: Value) -> Value:
        if ty is i32:
            return (b ^ top).bitcast(i32)
        return (b ^ select((b >> 31) == 1, top, ones)).bitcast(f32)

    name = f"radix_key_{'to_bits' if to_bits else 'from_bits'}_{ty}"
    if to_bits:
        return map_program(fwd, [ty], u32, name)
    return map_program(back, [u32], ty, name)


def shape_for(backend: Backend, with_values: bool) -> tuple[int, int]:
    """The (workgroup_size, per_thread) the 8-bit design uses on `backend` by default."""
    return TUNED.get((backend.kind, with_values), UNTUNED[with_values])


def _digit_design(backend: Backend, with_values: bool, digit_bits: int | None,
                  workgroup_size: int | None, per_thread: int | None
                  ) -> tuple[int, int, int, bool]:
    """(digit bits, workgroup size, keys per invocation, subgroups) for this backend: 8-bit
    digits unless asked for 4 or the 8-bit scatter's workgroup memory does not fit the
    backend's max_workgroup_bytes (then 4, which needs far less)."""
    if digit_bits not in (None, 4, 8):
        raise LibraryArgumentError(f"digit_bits must be 4 or 8 (or None: 8 where it fits), got "
                                   f"{digit_bits}")
    tuned_wg, tuned_per = shape_for(backend, with_values)
    wg, per = workgroup_size or tuned_wg, per_thread or tuned_per
    if digit_bits is None:
        prog = radix8_scatter_program(with_values, wg, per, False)
        limit = backend.capabilities().limits.get("max_workgroup_bytes")
        digit_bits = 8 if limit is None or prog.workgroup_bytes <= limit else 4
    if digit_bits == 4:
        return 4, workgroup_size or WORKGROUP, per_thread or PER_THREAD, False
    return 8, wg, per, subgroups_for(backend, wg)


def plan_radix_sort(
    backend: Backend,
    keys: DeviceBuffer,
    n: int,
    values: DeviceBuffer | None = None,
    key_bits: int = 32,
    key_type: ScalarType = u32,
    workgroup_size: int | None = None,
    per_thread: int | None = None,
    max_per_dim: int = MAX_GRID_DIM,
    digit_bits: int | None = None,
) -> Plan:
    """Passes sorting keys[:n] in place, stably, moving values[:n] (any 32-bit type) along.

    u32 keys sort by their low `key_bits` bits; i32 / f32 keys (`key_type`) by value, through
    the order-preserving map of `key_map_program` (all 32 bits). `digit_bits` 8 or 4 picks
    the design (module docstring; None: 8 where its workgroup memory fits the backend).
    n == 0 gives no steps."""
    if not 1 <= key_bits <= 32:
        raise LibraryArgumentError(f"key_bits must be in 1..32 (the low bits that vary), got "
                                   f"{key_bits}")
    key_type = check_type(key_type, KEY_TYPES, "radix sort keys")
    check_room("plan_radix_sort", ("keys", keys, key_type, n),
               *([("values", values, u32, n)] if values is not None else []))
    plan = Plan()
    if n == 0:
        return plan
    if key_type is not u32:
        bits = alloc(backend, u32, n, "radix_key_bits")
        plan.temporaries.append(bits)
        to_bits, from_bits = key_map_program(key_type, True), key_map_program(key_type, False)
        cfg = grid(n, to_bits.workgroup_size[0], max_per_dim, n=n)
        plan.add(to_bits, {"x0": keys}, {"out": bits}, cfg)
        plan.extend(plan_radix_sort(backend, bits, n, values, 32, u32, workgroup_size,
                                    per_thread, max_per_dim, digit_bits))
        plan.add(from_bits, {"x0": bits}, {"out": keys}, cfg)
        return plan
    bits_per, wg, per, sg = _digit_design(backend, values is not None, digit_bits,
                                          workgroup_size, per_thread)
    digits = 1 << bits_per
    nb = ceil_div(n, wg * per)
    counts = alloc(backend, u32, digits * nb, "radix_counts")
    offsets = alloc(backend, u32, digits * nb, "radix_offsets")
    tmp_keys = alloc(backend, u32, n, "radix_tmp_keys")
    plan.temporaries += [counts, offsets, tmp_keys]
    tmp_values = None
    if values is not None:
        tmp_values = alloc(backend, u32, n, "radix_tmp_values")
        plan.temporaries.append(tmp_values)
    count_prog = radix_count_program(wg, per, digits)
    if bits_per == 8:
        scatter_prog = radix8_scatter_program(values is not None, wg, per, sg)
    else:
        scatter_prog = radix_scatter_program(values is not None, wg, per)
    src_k, dst_k, src_v, dst_v = keys, tmp_keys, values, tmp_values
    passes = ceil_div(key_bits, bits_per)
    for p in range(passes):
        shift = p * bits_per
        # (the last digit may be narrower: only the low key_bits bits count)
        params = {"n": n, "shift": shift, "num_blocks": nb,
                  "mask": (1 << min(bits_per, key_bits - shift)) - 1}
        cfg = blocks_grid(nb, wg, max_per_dim, **params)
        plan.add(count_prog, {"keys": src_k}, {"counts": counts}, cfg)
        plan.extend(plan_scan(backend, counts, offsets, digits * nb, u32, False,
                              max_per_dim=max_per_dim))
        ins = {"keys": src_k, "offsets": offsets}
        outs = {"keys_out": dst_k}
        if values is not None:
            ins["values"] = src_v  # type: ignore[assignment]
            outs["values_out"] = dst_v  # type: ignore[assignment]
        plan.add(scatter_prog, ins, outs, cfg)
        src_k, dst_k, src_v, dst_v = dst_k, src_k, dst_v, src_v
    if passes % 2:  # the result is in the temporaries: copy it home
        copy = convert(u32, u32)
        cfg = grid(n, copy.workgroup_size[0], max_per_dim, n=n)
        plan.add(copy, {"x0": tmp_keys}, {"out": keys}, cfg)
        if values is not None:
            plan.add(copy, {"x0": tmp_values}, {"out": values}, cfg)
    return plan


def radix_sort_device(
    backend: Backend,
    keys: DeviceBuffer,
    n: int,
    values: DeviceBuffer | None = None,
    use_pipeline: bool | None = None,
    key_type: ScalarType = u32,
    **kw: int,
) -> None:
    """Sort resident keys[:n] (u32, i32 or f32: `key_type`) and values in place; no readback."""
    plan = plan_radix_sort(backend, keys, n, values, key_type=key_type, **kw)
    run_plan(backend, plan, use_pipeline)


def radix_sort_host(
    backend: Backend,
    keys: np.ndarray,
    values: np.ndarray | None = None,
    use_pipeline: bool | None = None,
    **kw: int,
) -> tuple[np.ndarray, np.ndarray | None]:
    """Upload, sort on `backend`, read back (sorted keys, values in the same order)."""
    keys, key_type = host_array(keys, "radix_sort_host")
    check_type(key_type, KEY_TYPES, "radix sort keys")
    if values is not None:
        values, _ = host_array(values, "radix_sort_host values")
    if values is not None and (values.dtype.itemsize != 4 or values.shape != keys.shape):
        raise LibraryArgumentError(f"values must be a 32-bit array of the keys' shape {keys.shape}, got "
                                   f"{values.dtype}{values.shape}; e.g. "
                                   "np.arange(keys.size, dtype=np.uint32) for positions")
    kb = upload(backend, keys, "sort_keys")
    vb = upload(backend, values, "sort_values") if values is not None else None
    try:
        radix_sort_device(backend, kb, keys.size, vb, use_pipeline, key_type, **kw)
        out_k = read_elems(backend, kb, key_type, keys.size)
        out_v = None
        if vb is not None and values is not None:
            out_v = read_elems(backend, vb, u32, keys.size).view(values.dtype)
        return out_k, out_v
    finally:
        backend.free(kb)
        if vb is not None:
            backend.free(vb)
