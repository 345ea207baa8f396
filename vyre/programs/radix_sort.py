"""Stable LSD radix sort of u32 keys, optionally carrying 32-bit values.

Three designs, all exact and stable on every backend, with the same results; `design_for`
says which one a sort uses and why (`digit_bits`, `lookback` and the sizes choose):

- Look-back (the default; vyre.programs.radix_onesweep): 8-bit digits, one dispatch per
  pass after one read that counts every pass's digits. Each pass workgroup takes its tile
  from an atomic ticket, sorts the tile in workgroup memory (vyre.programs.radix_rank) and
  finds where each digit's run goes from the counts earlier tiles publish (decoupled
  look-back; a tile not yet published is counted from its keys after a bounded wait, so no
  workgroup depends on another's progress). Keys are read once and written once per pass.
  It sorts up to 2^31 - 1 keys (its status words count in 31 bits) where the state's u32
  indexing holds (`radix_onesweep.fits`); past that the library uses count + scan.
- Count + scan + scatter (`lookback=False`): 8-bit digits (4 passes for 32-bit keys). Each
  pass: (1) count the digits of every block of `workgroup_size * per_thread` keys into
  counts[digit * blocks + block] (workgroup-memory atomics: counting is order-free); (2)
  exclusive-scan the counts, which gives each (digit, block) its first output slot; (3) one
  scatter program sorts its block in workgroup memory (radix_rank) and writes it out
  coalesced within each digit's run. Any n; keys are read twice per pass.
- 4 bits per pass (`digit_bits=4`, 8 passes): the same three steps with a 16-digit table of
  one word per (digit, invocation) and no local reordering; it needs far less workgroup
  memory, and is what the library uses where the 8-bit blocks do not fit the backend's
  max_workgroup_bytes.

The 8-bit designs sort a block in two 4-bit ranking rounds whose counts live in workgroup
memory (`local_counts="table"`, count + scan's default) or in packed fields of locals
(`"registers"`, the look-back default): the same ranks either way (radix_rank).

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

from dataclasses import dataclass
from functools import cache
from typing import Any

import numpy as np

from vyre.buffer import DeviceBuffer
from vyre.builder import ProgramBuilder, Value, select
from vyre.config import MAX_GRID_DIM
from vyre.interface import Backend
from vyre.ir.nodes import Program
from vyre.ir.types import ScalarType

from . import radix_onesweep as onesweep
from ._common import (
    LibraryArgumentError,
    Plan,
    alloc,
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
    subgroups_for,
    u32,
    upload,
)
from .elementwise import map_program
from .radix_rank import (
    DIGITS,
    MAX_REGISTER_RUN,
    RADIX,
    check_digit_shape,
    check_local_counts,
    copy_home,
    declare_block,
    digit_rounds,
    digit_runs,
    load_block,
    ping_pong,
    rank_block,
    write_block,
)
from .scan import plan_scan

WORKGROUP = 128  # the 4-bit design's shape
PER_THREAD = 8
WORKGROUP8 = 256
PER_THREAD8 = 16  # keys per invocation

#: (workgroup_size, per_thread) of the 8-bit designs on a backend of this kind, keys alone
#: and key-value, when the caller names none (H100 sweeps of count + scan + scatter,
#: scripts/sort_bench.py, 2^24 u32 keys, Mkeys/s with the copy-in, the second round; the
#: look-back design uses them too until its own sweep). Other kinds use UNTUNED.
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


@cache
def radix_count_program(workgroup_size: int = WORKGROUP8, per_thread: int = PER_THREAD8,
                        digits: int = DIGITS) -> Program:
    """counts[d * num_blocks + b] = number of keys[:n] in block b whose digit
    (key >> shift) & mask is d (mask < digits: 256 or 16)."""
    wg, per = workgroup_size, per_thread
    check_digit_shape(wg, per)
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


@cache
def radix8_scatter_program(
    with_values: bool,
    workgroup_size: int = WORKGROUP8,
    per_thread: int = PER_THREAD8,
    subgroups: bool = False,
    local_counts: str = "table",
) -> Program:
    """Stable scatter of keys[:n] (and values) by the digit (key >> shift) & mask (< 256)
    to keys_out / values_out, given offsets = exclusive scan of the radix_count_program
    counts: the block is sorted in workgroup memory (vyre.programs.radix_rank), then
    written out in that order."""
    wg, per = workgroup_size, per_thread
    check_digit_shape(wg, per)
    check_local_counts(local_counts, per)
    block = wg * per
    kind = "kv" if with_values else "k"
    counted = "" if local_counts == "table" else "_rc"
    k = ProgramBuilder(f"radix8_scatter_{kind}_{wg}x{per}{'_sg' if subgroups else ''}{counted}",
                       wg)
    keys, values, offsets, keys_out, values_out, n, shift, mask, nb = _scatter_io(k, with_values)
    blk = declare_block(k, wg, per, with_values)
    digit_base = k.shared("digit_base", u32, DIGITS)
    t = k.let(k.local_index())
    g = k.let(k.workgroup_linear_id())
    base = k.let(g * block)
    load_block(k, blk, keys, values, n, base, wg, per, t)
    k.barrier()
    rank_block(k, blk, shift, mask, wg, per, t, subgroups, local_counts)
    # the block is sorted by digit: each digit's run starts where the digit changes
    out = digit_runs(k, blk, shift, mask, wg, per, t, digit_base)
    k.barrier()
    for c in range(digit_rounds(wg)):  # digit_base[d] = global slot of block slot 0
        d = k.let(t + c * wg)
        with k.if_(d < DIGITS):
            digit_base[d] = offsets[d * nb + g] - digit_base[d]
    k.barrier()
    write_block(k, blk, out, digit_base, base, n, keys_out, values_out)
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
    """The (workgroup_size, per_thread) the 8-bit designs use on `backend` by default."""
    return TUNED.get((backend.kind, with_values), UNTUNED[with_values])


@dataclass(frozen=True)
class Design:
    """How plan_radix_sort sorts on a backend (`design_for`)."""

    lookback: bool  # the single-pass design (radix_onesweep), else count + scan + scatter
    digit_bits: int
    workgroup_size: int
    per_thread: int
    subgroups: bool
    local_counts: str  # how a block's ranking counts (radix_rank; the 8-bit designs)
    why: str  # the reason for the choice, in words


def design_for(
    backend: Backend,
    n: int,
    with_values: bool = False,
    digit_bits: int | None = None,
    lookback: bool | None = None,
    workgroup_size: int | None = None,
    per_thread: int | None = None,
    local_counts: str | None = None,
) -> Design:
    """The design plan_radix_sort uses for n keys on `backend` (the module docstring's rules).

    The single-pass look-back design wherever it can sort n keys in blocks of this shape
    (radix_onesweep.fits: n < 2^31) and its workgroup memory fits the backend's
    max_workgroup_bytes; else count + scan + scatter with 8-bit digits where that fits; else
    4-bit digits (far less workgroup memory). `digit_bits` 4 or 8 and `lookback` True /
    False ask for one (what cannot run is then an error naming why and the fix).
    `local_counts` (None: `registers` for the look-back design, `table` for the other)."""
    if digit_bits not in (None, 4, 8):
        raise LibraryArgumentError(f"digit_bits must be 4 or 8 (or None: 8 where it fits), got "
                                   f"{digit_bits}")
    if lookback not in (None, True, False):
        raise LibraryArgumentError(f"lookback must be True, False or None (the library's choice), "
                                   f"got {lookback!r}")
    if digit_bits == 4:
        if lookback:
            raise LibraryArgumentError("the look-back design sorts 8-bit digits; pass digit_bits=8 "
                                       "(or leave it out) with lookback=True")
        return Design(False, 4, workgroup_size or WORKGROUP, per_thread or PER_THREAD, False,
                      "table", "digit_bits=4 asked for")
    tuned_wg, tuned_per = shape_for(backend, with_values)
    wg, per = workgroup_size or tuned_wg, per_thread or tuned_per
    sg = subgroups_for(backend, wg)
    blocked = onesweep.fits(n, wg, per)
    if lookback and blocked:
        raise LibraryArgumentError(f"the look-back design cannot sort this: {blocked}; pass "
                                   "lookback=None to let the library choose")
    limit = backend.capabilities().limits.get("max_workgroup_bytes")
    tried: list[str] = []  # why the designs tried do not fit
    order = (lookback,) if lookback is not None else (True, False) if blocked is None else (False,)
    for use in order:
        counts = local_counts or ("registers" if use and per <= MAX_REGISTER_RUN else "table")
        check_local_counts(counts, per)
        prog = (onesweep.onesweep_program(with_values, wg, per, sg, counts) if use
                else radix8_scatter_program(with_values, wg, per, sg, counts))
        if limit is None or prog.workgroup_bytes <= limit:
            why = ("lookback=True asked for" if lookback else
                   "lookback=False asked for" if lookback is False else
                   "8-bit digits, one pass each (n fits)" if use else
                   f"count + scan: {blocked or tried[0]}")
            return Design(use, 8, wg, per, sg, counts, why)
        tried.append(f"the {'look-back' if use else 'count + scan'} blocks need "
                     f"{prog.workgroup_bytes} bytes of workgroup memory, over the backend's "
                     f"{limit}")
    if digit_bits == 8 or lookback is not None:
        raise LibraryArgumentError(
            f"the 8-bit radix sort at {wg} x {per}: {tried[-1]} ({backend.id}); pass smaller "
            "workgroup_size / per_thread, or leave digit_bits and lookback out (4-bit digits "
            "where 8 do not fit)")
    return Design(False, 4, workgroup_size or WORKGROUP, per_thread or PER_THREAD, False,
                  "table", f"4-bit digits: {tried[-1]}")


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
    lookback: bool | None = None,
    local_counts: str | None = None,
) -> Plan:
    """Passes sorting keys[:n] in place, stably, moving values[:n] (any 32-bit type) along.

    u32 keys sort by their low `key_bits` bits; i32 / f32 keys (`key_type`) by value, through
    the order-preserving map of `key_map_program` (all 32 bits). `digit_bits`, `lookback`
    and `local_counts` pick the design (`design_for`; None: the library's choice).
    n == 0 gives no steps."""
    if not 1 <= key_bits <= 32:
        raise LibraryArgumentError(f"key_bits must be in 1..32 (the low bits that vary), got "
                                   f"{key_bits}")
    key_type = check_type(key_type, KEY_TYPES, "radix sort keys")
    check_room("plan_radix_sort", ("keys", keys, key_type, n),
               *([("values", values, u32, n)] if values is not None else []))
    design = design_for(backend, n, values is not None, digit_bits, lookback, workgroup_size,
                        per_thread, local_counts)
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
                                    per_thread, max_per_dim, digit_bits, lookback, local_counts))
        plan.add(from_bits, {"x0": bits}, {"out": keys}, cfg)
        return plan
    bits_per, wg, per, sg = design.digit_bits, design.workgroup_size, design.per_thread, \
        design.subgroups
    if design.lookback:
        plan.extend(onesweep.plan_onesweep(backend, keys, n, values, key_bits, wg, per, sg,
                                           design.local_counts, max_per_dim))
        return plan
    digits = 1 << bits_per
    nb = ceil_div(n, wg * per)
    counts = alloc(backend, u32, digits * nb, "radix_counts")
    offsets = alloc(backend, u32, digits * nb, "radix_offsets")
    plan.temporaries += [counts, offsets]
    tmp_keys, tmp_values = ping_pong(backend, plan, n, values is not None)
    count_prog = radix_count_program(wg, per, digits)
    if bits_per == 8:
        scatter_prog = radix8_scatter_program(values is not None, wg, per, sg,
                                              design.local_counts)
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
    copy_home(plan, passes, tmp_keys, keys, tmp_values, values, n, max_per_dim)
    return plan


def radix_sort_device(
    backend: Backend,
    keys: DeviceBuffer,
    n: int,
    values: DeviceBuffer | None = None,
    use_pipeline: bool | None = None,
    key_type: ScalarType = u32,
    **kw: Any,
) -> None:
    """Sort resident keys[:n] (u32, i32 or f32: `key_type`) and values in place; no readback."""
    plan = plan_radix_sort(backend, keys, n, values, key_type=key_type, **kw)
    run_plan(backend, plan, use_pipeline)


def radix_sort_host(
    backend: Backend,
    keys: np.ndarray,
    values: np.ndarray | None = None,
    use_pipeline: bool | None = None,
    **kw: Any,
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
