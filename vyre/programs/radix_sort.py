"""Stable LSD radix sort of u32 keys, optionally carrying 32-bit values, 4 bits per pass.

Each pass over blocks of `workgroup_size * per_thread` keys: (1) count the digits of every
block into counts[digit * blocks + block]; (2) exclusive-scan the counts, which gives each
(digit, block) its first output slot; (3) scatter. Within a block the rank of a key among
equal digits is computed deterministically, never from atomic ordering: invocation t owns
the consecutive keys [t*per, (t+1)*per) of its block and counts its digits in its own column
of a digit-major table in workgroup memory; an exclusive scan of that table gives every
(digit, invocation) the number of equal digits before it in the block. Keys keep their
input order among equal digits, so the sort is stable and the values of equal keys keep
their input order. Results are bit-exact on every backend.

Values are moved as raw 32-bit words (declared u32), so any 32-bit payload (u32, i32, f32
bits) works. i32 and f32 keys are sorted through an order-preserving map to u32 (flip the
sign bit; for floats flip every bit of negatives), so floats sort by their IEEE total order:
-NaN < -inf < ... < -0.0 < +0.0 < ... < +inf < +NaN. This module must never use atomics to decide where a key goes, and never read
back to the host between passes.
"""

from __future__ import annotations

from functools import cache

import numpy as np

from vyre.backend import BaseBackend
from vyre.buffer import BufferBase
from vyre.builder import ProgramBuilder, Value, select
from vyre.config import MAX_GRID_DIM
from vyre.ir.nodes import Program
from vyre.ir.types import ScalarType

from ._common import (
    Plan,
    alloc,
    blocks_grid,
    ceil_div,
    check_pow2,
    check_type,
    emit_block_scan,
    f32,
    grid,
    i32,
    read_elems,
    run_plan,
    u32,
    upload,
)
from .elementwise import convert, map_program
from .scan import plan_scan

RADIX_BITS = 4
RADIX = 1 << RADIX_BITS
WORKGROUP = 128
PER_THREAD = 8


@cache
def radix_count_program(workgroup_size: int = WORKGROUP, per_thread: int = PER_THREAD) -> Program:
    """counts[d * num_blocks + b] = number of keys[:n] in block b whose digit at `shift` is d."""
    wg, per = workgroup_size, per_thread
    if wg < RADIX:
        raise ValueError(f"radix sort needs workgroup_size >= {RADIX}")
    k = ProgramBuilder(f"radix_count_{wg}x{per}", wg)
    keys = k.buffer("keys", u32)
    counts = k.buffer("counts", u32, "write")
    n = k.param("n", u32)
    shift = k.param("shift", u32)
    nb = k.param("num_blocks", u32)
    hist = k.shared("digit_counts", u32, RADIX)
    t = k.let(k.local_index())
    g = k.let(k.workgroup_linear_id())
    base = k.let(g * (wg * per))
    with k.if_(t < RADIX):
        hist[t] = 0
    k.barrier()
    with k.for_range(0, per) as j:
        i = k.let(base + j * wg + t)
        with k.if_(i < n):
            hist.atomic_add((keys[i] >> shift) & (RADIX - 1), 1)
    k.barrier()
    with k.if_((t < RADIX) & (base < n)):
        counts[t * nb + g] = hist[t]
    return k.build()


@cache
def radix_scatter_program(
    with_values: bool, workgroup_size: int = WORKGROUP, per_thread: int = PER_THREAD
) -> Program:
    """Stable scatter of keys[:n] (and values) by the digit at `shift` to keys_out / values_out,
    given offsets = exclusive scan of the radix_count_program counts."""
    wg, per = workgroup_size, per_thread
    check_pow2(wg, "workgroup_size")
    if wg < RADIX:
        raise ValueError(f"radix sort needs workgroup_size >= {RADIX}")
    k = ProgramBuilder(f"radix_scatter_{'kv' if with_values else 'k'}_{wg}x{per}", wg)
    keys = k.buffer("keys", u32)
    values = k.buffer("values", u32) if with_values else None
    offsets = k.buffer("offsets", u32)
    keys_out = k.buffer("keys_out", u32, "write")
    values_out = k.buffer("values_out", u32, "write") if with_values else None
    n = k.param("n", u32)
    shift = k.param("shift", u32)
    nb = k.param("num_blocks", u32)
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
            slot = k.let(((keys[i] >> shift) & (RADIX - 1)) * wg + t)
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
            dig = k.let((key >> shift) & (RADIX - 1))
            slot = k.let(dig * wg + t)
            r = k.let(table[slot])
            table[slot] = r + 1
            pos = k.let(offsets[dig * nb + g] + (r - digit_start[dig]))
            keys_out[pos] = key
            if values is not None and values_out is not None:
                values_out[pos] = values[i]
    return k.build()


KEY_TYPES = (u32, i32, f32)


@cache
def key_map_program(ty: ScalarType, to_bits: bool) -> Program:
    """The order-preserving map between i32 / f32 keys and u32 sort bits (or back)."""
    ty = ScalarType(ty)
    if ty not in (i32, f32):
        raise ValueError(f"key_map_program is for i32 and f32 keys, got {ty}")
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


def plan_radix_sort(
    backend: BaseBackend,
    keys: BufferBase,
    n: int,
    values: BufferBase | None = None,
    key_bits: int = 32,
    key_type: ScalarType = u32,
    workgroup_size: int = WORKGROUP,
    per_thread: int = PER_THREAD,
    max_per_dim: int = MAX_GRID_DIM,
) -> Plan:
    """Passes sorting keys[:n] in place, stably, moving values[:n] (any 32-bit type) along.

    u32 keys sort by their low `key_bits` bits; i32 / f32 keys (`key_type`) by value, through
    the order-preserving map of `key_map_program` (all 32 bits). n == 0 gives no steps."""
    if not 1 <= key_bits <= 32:
        raise ValueError(f"key_bits must be in 1..32, got {key_bits}")
    key_type = check_type(key_type, KEY_TYPES, "radix sort keys")
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
                                    per_thread, max_per_dim))
        plan.add(from_bits, {"x0": bits}, {"out": keys}, cfg)
        return plan
    block = workgroup_size * per_thread
    nb = ceil_div(n, block)
    counts = alloc(backend, u32, RADIX * nb, "radix_counts")
    offsets = alloc(backend, u32, RADIX * nb, "radix_offsets")
    tmp_keys = alloc(backend, u32, n, "radix_tmp_keys")
    plan.temporaries += [counts, offsets, tmp_keys]
    tmp_values = None
    if values is not None:
        tmp_values = alloc(backend, u32, n, "radix_tmp_values")
        plan.temporaries.append(tmp_values)
    count_prog = radix_count_program(workgroup_size, per_thread)
    scatter_prog = radix_scatter_program(values is not None, workgroup_size, per_thread)
    src_k, dst_k, src_v, dst_v = keys, tmp_keys, values, tmp_values
    passes = ceil_div(key_bits, RADIX_BITS)
    for p in range(passes):
        params = {"n": n, "shift": p * RADIX_BITS, "num_blocks": nb}
        cfg = blocks_grid(nb, workgroup_size, max_per_dim, **params)
        plan.add(count_prog, {"keys": src_k}, {"counts": counts}, cfg)
        plan.extend(plan_scan(backend, counts, offsets, RADIX * nb, u32, False,
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
    backend: BaseBackend,
    keys: BufferBase,
    n: int,
    values: BufferBase | None = None,
    use_pipeline: bool | None = None,
    key_type: ScalarType = u32,
    **kw: int,
) -> None:
    """Sort resident keys[:n] (u32, i32 or f32: `key_type`) and values in place; no readback."""
    plan = plan_radix_sort(backend, keys, n, values, key_type=key_type, **kw)
    run_plan(backend, plan, use_pipeline)


def radix_sort_host(
    backend: BaseBackend,
    keys: np.ndarray,
    values: np.ndarray | None = None,
    use_pipeline: bool | None = None,
    **kw: int,
) -> tuple[np.ndarray, np.ndarray | None]:
    """Upload, sort on `backend`, read back (sorted keys, values in the same order)."""
    key_type = ScalarType.from_numpy(keys.dtype)
    check_type(key_type, KEY_TYPES, "radix sort keys")
    if values is not None and (values.dtype.itemsize != 4 or values.shape != keys.shape):
        raise ValueError("values must be a 32-bit array of the keys' shape")
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
