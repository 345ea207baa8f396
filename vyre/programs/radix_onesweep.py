"""The radix sort's single-pass design: one dispatch per 8-bit digit, with decoupled
look-back (Merrill & Garland's single-pass scan as CUB's Onesweep sort uses it: Adinets &
Merrill, "Onesweep: A Faster Least Significant Digit Radix Sort for GPUs", 2022), made safe
without any forward-progress guarantee by decoupled fallback (Smith, Levien & Owens).

The plan (`plan_onesweep`): zero the state buffer's counters; count every pass's digits of
every key in one read (`digit_counts_program`: 256 bins per pass, workgroup atomics, then
integer atomics into the state); the exclusive scan of each pass's 256 counts
(`digit_starts_program`: where digit d starts in the output); then one `onesweep_program`
dispatch per pass. A pass workgroup takes its tile's position from an atomic ticket
(`state[TICKETS + pass]`) when it starts, never from its workgroup id, so every tile before
it belongs to a workgroup that has already started. It loads its tile (workgroup_size *
per_thread keys), counts the tile's digits and publishes them at once, one status word per
(tile, digit): 0 = nothing yet, c + 1 = the tile's own count c (an aggregate), or
INCLUSIVE | s = the digit's start plus the counts of every tile up to and including this
one (an inclusive prefix; tile 0 publishes that at once). It then sorts the tile in
workgroup memory (vyre.programs.radix_rank), and for each digit walks back over the tiles
before it, adding aggregates until it finds an inclusive prefix (or passes tile 0: then it
adds the digit's start), reading the status words of WINDOW tiles at once, publishes its
own inclusive prefix and writes each digit's run to its place. A status word still 0 after
`spin_limit` more reads is not waited for: the workgroup counts that digit in that tile's
keys itself (they are this pass's input, unchanged during the dispatch) and walks on. So a workgroup never depends on another one making progress
(the IR gives none: docs/IR.md, "Execution model"); waiting only saves work, and every value
summed is the same integer whichever way it was found, so results are bit-exact and the
same on every backend and schedule. Each status word is written and read whole with
atomics (relaxed suffices: one word carries both the flag and the count).

Key reads per key: one for the digit counts, then per pass one read and one write (the
count + scan + scatter design reads each key twice per pass). Status words hold counts
below 2^31 and the state is indexed in u32: `fits` says where this design can run; the
plan (radix_sort.plan_radix_sort) chooses it only there. This module must never use
atomics to decide where a key goes (only to publish counts and take tickets), and never
read back to the host between passes.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache
from typing import Any

import numpy as np

from vyre.buffer import DeviceBuffer
from vyre.builder import ProgramBuilder, Value, select
from vyre.config import MAX_GRID_DIM
from vyre.interface import Backend
from vyre.ir.nodes import Program

from ._common import (
    LibraryArgumentError,
    Plan,
    alloc,
    blocks_grid,
    ceil_div,
    emit_block_scan,
    grid,
    u32,
)
from .elementwise import fill
from .radix_rank import (
    DIGIT_BITS,
    DIGITS,
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

#: The state buffer's layout (u32 words): the digit counts of pass p at [p*256, p*256 + 256),
#: pass p's ticket at TICKETS + p, then two status regions of num_blocks * 256 words each
#: (pass p uses region p % 2 and zeroes the other one for pass p + 1).
MAX_PASSES = 4
TICKETS = MAX_PASSES * DIGITS
STATUS = TICKETS + DIGITS
#: The flag of an inclusive prefix in a status word (the low 31 bits hold the count).
INCLUSIVE = 1 << 31
#: The most keys the design sorts: an inclusive prefix is at most n and must fit 31 bits.
MAX_KEYS = INCLUSIVE - 1
#: Reads of a tile's status word still at 0, after the first, before the workgroup counts
#: that tile's digit itself (0: at once):
#: on a GPU a tile publishes its counts a few microseconds after it starts, long before a
#: later tile looks back, so this is almost never reached; on an adapter that ends long
#: loops (lavapipe: `loop_iteration_limit`) a short wait keeps every loop within budget.
SPIN_LIMIT = 1024
SPIN_LIMIT_LOOP_BUDGET = 32
#: Status words a look-back reads at once (the tiles before the next unsummed one): one
#: round trip to L2 sums up to this many aggregates.
WINDOW = 4
#: Keys a fallback count reads per loop pass (unrolled: fewer passes of a loop budget).
FALLBACK_UNROLL = 16
#: The digit-count kernel's shape, and the most workgroups it launches (each then counts
#: every max_groups-th block: fewer global atomics).
COUNT_SHAPE = (256, 16)
COUNT_MAX_GROUPS = 1024


def fits(n: int, workgroup_size: int, per_thread: int) -> str | None:
    """None where this design sorts n keys in blocks of this shape, else why not."""
    if n > MAX_KEYS:
        return (f"n = {n} is above {MAX_KEYS}, the most keys a status word counts (31 bits)")
    words = STATUS + 2 * ceil_div(n, workgroup_size * per_thread) * DIGITS
    if words > 0xFFFFFFFF:
        return (f"{ceil_div(n, workgroup_size * per_thread)} blocks need {words} status words, "
                "past u32 indexing; use larger blocks")
    return None


def spin_limit_for(backend: Backend) -> int:
    """The status reads a pass waits for a tile before counting it itself, on `backend`."""
    budget = backend.capabilities().details.get("loop_iteration_limit")
    return SPIN_LIMIT if budget is None else SPIN_LIMIT_LOOP_BUDGET


def window_for(workgroup_size: int) -> int:
    """The status words a look-back reads at once by default: WINDOW, more for workgroups
    under 256 invocations, which look back for their digits one round after another (and
    the reference, whose workgroups run in lockstep, walks back over every tile of a chunk:
    a longer window is fewer passes)."""
    return max(WINDOW, DIGITS // workgroup_size)


@cache
def digit_counts_program(passes: int, workgroup_size: int = COUNT_SHAPE[0],
                         per_thread: int = COUNT_SHAPE[1]) -> Program:
    """state[p * 256 + d] += number of keys[:n] whose digit p is d, for p < passes (digit
    p: (key >> 8p) & 255, the last one & last_mask). Workgroup g counts blocks g,
    g + stride, ... (param `stride`: the workgroups launched) into workgroup memory, then
    adds its nonzero counts to the state with integer atomics."""
    wg, per = workgroup_size, per_thread
    if not 1 <= passes <= MAX_PASSES:
        raise LibraryArgumentError(f"passes must be in 1..{MAX_PASSES}, got {passes}")
    check_digit_shape(wg, per)
    block = wg * per
    k = ProgramBuilder(f"radix_digit_counts{passes}_{wg}x{per}", wg)
    keys = k.buffer("keys", u32)
    state = k.buffer("state", u32, "read_write")
    n = k.param("n", u32)
    last_mask = k.param("last_mask", u32)
    stride = k.param("stride", u32)
    bins = passes * DIGITS
    local = k.shared("pass_digit_counts", u32, bins)
    t = k.let(k.local_index())
    g = k.let(k.workgroup_linear_id())
    for r in range(ceil_div(bins, wg)):
        with k.if_(t + r * wg < bins):
            local[t + r * wg] = 0
    k.barrier()
    nblocks = k.let(n / block + select(n % block != 0, k.lit(1, u32), k.lit(0, u32)))
    # (a folded grid may launch more than `stride` workgroups: the extra ones count none)
    blk = k.let(select(g < stride, g, nblocks))
    with k.while_(blk < nblocks):
        base = k.let(blk * block)
        loaded = []
        for j in range(per):  # coalesced, every load in flight before the first atomic
            i = k.let(base + j * wg + t)
            loaded.append((i, k.let(select(i < n, keys[i], k.lit(0, u32)))))  # (masked: past n)
        for i, key in loaded:
            with k.if_(i < n):
                for p in range(passes):
                    m = last_mask if p == passes - 1 else k.lit(DIGITS - 1, u32)
                    local.atomic_add(((key >> (DIGIT_BITS * p)) & m) + p * DIGITS, 1)
        blk.set(blk + stride)
    k.barrier()
    for r in range(ceil_div(bins, wg)):
        b = k.let(t + r * wg)
        with k.if_(b < bins):
            c = k.let(local[b])
            with k.if_(c != 0):
                state.atomic_add(b, c)
    return k.build()


@cache
def digit_starts_program() -> Program:
    """starts[p * 256 + d] = exclusive sum of state[p * 256 : p * 256 + d] (where digit d of
    pass p starts in the output); workgroup p scans pass p."""
    k = ProgramBuilder("radix_digit_starts", DIGITS)
    state = k.buffer("state", u32)
    starts = k.buffer("digit_starts", u32, "write")
    data = k.shared("counts", u32, DIGITS)
    totals = k.shared("scan_totals", u32, DIGITS)
    t = k.let(k.local_index())
    at = k.let(k.workgroup_linear_id() * DIGITS + t)
    data[t] = state[at]
    k.barrier()
    emit_block_scan(k, data, totals, DIGITS, 1, u32, t, inclusive=False)
    starts[at] = data[t]
    return k.build()


def _fallback_count(k: ProgramBuilder, keys: Any, n: Value, shift: Value, mask: Value,
                    tile: Value, digit: Value, block: int) -> Value:
    """How many of tile `tile`'s keys (keys[tile*block : ...][:n]) have this digit: what
    that tile publishes, counted here from its keys (decoupled fallback)."""
    c = k.let(k.lit(0, u32))
    first = k.let(tile * block)
    with k.for_range(0, block, FALLBACK_UNROLL) as i0:
        for u in range(FALLBACK_UNROLL):
            i = k.let(first + i0 + u)
            hit = (i < n) & (((keys[i] >> shift) & mask) == digit)
            c.set(c + select(hit, k.lit(1, u32), k.lit(0, u32)))
    return c


def _look_back(k: ProgramBuilder, state: Any, keys: Any, n: Value, shift: Value, mask: Value,
               d: Value, tile: Value, first: Value, status_at: Value, spin_limit: Value,
               block: int, window: int) -> Value:
    """The keys of digit d in tiles 0 .. tile-1 plus the digit's start: read the status words
    of the `window` tiles before the next unsummed one at once, sum aggregates in order up
    to an inclusive prefix (done) or a tile not yet published (read again next time; one
    still unpublished after spin_limit more reads has its keys counted here instead)."""
    inclusive = np.uint32(INCLUSIVE)
    before = k.let(select(tile == 0, first, k.lit(0, u32)))
    j = k.let(tile)  # tiles j .. tile-1 are summed; the next is j - 1
    spins = k.let(k.lit(0, u32))
    looking = k.let(tile > 0)
    with k.while_(looking):
        words = []
        for w in range(window):  # all in flight before the first is used
            word = k.let(k.lit(0, u32))
            with k.if_(j > w):
                word.set(state.atomic_or(status_at + (j - 1 - w) * DIGITS + d, 0))
            words.append(word)
        moved = k.let(k.lit(False))
        walking = k.let(k.lit(True))  # every word so far was an aggregate
        for word in words:  # (branch-free: a word not taken adds nothing)
            take = k.let(walking & (word != 0))  # 0: not published yet (or before tile 0)
            done = k.let(take & (word >= inclusive))
            before.set(before + select(take, select(done, word - inclusive, word - 1),
                                       k.lit(0, u32)))
            j.set(j - select(take & ~done, k.lit(1, u32), k.lit(0, u32)))
            moved.set(moved | take)
            walking.set(take & ~done)
            looking.set(looking & ~done)
        with k.if_(looking & ~walking):  # stopped at tile j - 1, not published yet
            spins.set(select(moved, k.lit(1, u32), spins + 1))  # (its reads so far)
            with k.if_(spins > spin_limit):  # waited long enough: count it here
                before.set(before + _fallback_count(k, keys, n, shift, mask, j - 1, d, block))
                j.set(j - 1)
                spins.set(0)
        with k.if_(looking & (j == 0)):  # every earlier tile counted: add the start
            before.set(before + first)
            looking.set(False)
    return before


@cache
def onesweep_program(
    with_values: bool,
    workgroup_size: int,
    per_thread: int,
    subgroups: bool = False,
    local_counts: str = "table",
    aggregates: bool = True,
    window: int | None = None,
) -> Program:
    """One pass: stable scatter of keys[:n] (and values) by the digit (key >> shift) & mask
    (< 256) to keys_out / values_out, each tile's digit offsets found by decoupled look-back
    (module docstring). `aggregates=False` publishes inclusive prefixes only, so a tile
    whose predecessor is still working always counts that predecessor's keys itself (the
    fallback path; slower, the same bits). `window`: status words read at once (None:
    window_for(workgroup_size))."""
    wg, per = workgroup_size, per_thread
    window = window_for(wg) if window is None else window
    if window < 1:
        raise LibraryArgumentError(f"window must be at least 1, got {window}")
    check_digit_shape(wg, per)
    check_local_counts(local_counts, per)
    if (wg * per) % FALLBACK_UNROLL:
        raise LibraryArgumentError(f"the look-back design's blocks hold a multiple of "
                                   f"{FALLBACK_UNROLL} keys, got workgroup_size {wg} * "
                                   f"per_thread {per}; make one of them larger")
    block = wg * per
    name = (f"radix_onesweep_{'kv' if with_values else 'k'}_{wg}x{per}"
            f"{'_sg' if subgroups else ''}{'' if local_counts == 'table' else '_rc'}"
            f"{'' if aggregates else '_noagg'}"
            f"{'' if window == window_for(wg) else f'_w{window}'}")
    k = ProgramBuilder(name, wg)
    keys = k.buffer("keys", u32)
    values = k.buffer("values", u32) if with_values else None
    starts = k.buffer("digit_starts", u32)
    state = k.buffer("state", u32, "read_write")
    keys_out = k.buffer("keys_out", u32, "write")
    values_out = k.buffer("values_out", u32, "write") if with_values else None
    n = k.param("n", u32)
    shift = k.param("shift", u32)
    mask = k.param("mask", u32)
    nb = k.param("num_blocks", u32)
    pass_index = k.param("pass_index", u32)
    status_at = k.param("status_at", u32)  # this pass's status region in the state
    clear_at = k.param("clear_at", u32)  # the region to zero for the next pass
    clear = k.param("clear", u32)  # 0: no next pass
    spin_limit = k.param("spin_limit", u32)
    blk = declare_block(k, wg, per, with_values)
    tile_at = k.shared("tile", u32, 1)
    counts = k.shared("tile_digit_counts", u32, DIGITS)
    digit_base = k.shared("digit_base", u32, DIGITS)
    t = k.let(k.local_index())
    with k.if_(t == 0):  # this workgroup's tile: tickets go out in the order workgroups start
        tile_at[0] = state.atomic_add(TICKETS + pass_index, 1)

    @contextmanager
    def each_digit(cond: Value) -> Iterator[Value]:
        """The body once for each digit t, t + wg, ... < 256 where `cond` holds (a loop
        where the workgroup is smaller than the digits: the code once)."""
        if wg >= DIGITS:
            with k.if_((t < DIGITS) & cond):
                yield t
        else:
            with k.if_(cond), k.for_range(0, DIGITS // wg) as c:
                yield k.let(t + c * wg)

    for r in range(digit_rounds(wg)):
        with k.if_(t + r * wg < DIGITS):
            counts[t + r * wg] = 0
    k.barrier()
    tile = k.let(tile_at[0])
    valid = k.let(tile < nb)  # (a folded grid has spare workgroups: they take tickets past nb)
    base = k.let(select(valid, tile * block, n))
    loaded = load_block(k, blk, keys, values, n, base, wg, per, t)
    for i, key in loaded:
        with k.if_(i < n):
            counts.atomic_add((key >> shift) & mask, 1)
    k.barrier()
    inclusive = np.uint32(INCLUSIVE)
    with each_digit(valid) as d:  # publish at once: the tile's counts (tile 0: its prefix)
        mine = k.let(counts[d])
        first = k.let(starts[pass_index * DIGITS + d])
        if aggregates:
            word = select(tile == 0, (first + mine) | inclusive, mine + 1)
            state.atomic_exchange(status_at + tile * DIGITS + d, word)
        else:
            with k.if_(tile == 0):
                state.atomic_exchange(status_at + d, (first + mine) | inclusive)
        with k.if_(clear != 0):
            state[clear_at + tile * DIGITS + d] = 0
    rank_block(k, blk, shift, mask, wg, per, t, subgroups, local_counts)
    out = digit_runs(k, blk, shift, mask, wg, per, t, digit_base)
    k.barrier()
    with each_digit(valid) as d:  # look back: the keys of this digit in every earlier tile
        first = k.let(starts[pass_index * DIGITS + d])
        before = _look_back(k, state, keys, n, shift, mask, d, tile, first, status_at,
                            spin_limit, block, window)
        with k.if_(tile > 0):
            state.atomic_exchange(status_at + tile * DIGITS + d,
                                  (before + counts[d]) | inclusive)
        # (digit_base[d]: the digit's first block slot, where the block holds it)
        digit_base[d] = before - digit_base[d]
    k.barrier()
    write_block(k, blk, out, digit_base, base, n, keys_out, values_out)
    return k.build()


def plan_onesweep(
    backend: Backend,
    keys: DeviceBuffer,
    n: int,
    values: DeviceBuffer | None,
    key_bits: int,
    workgroup_size: int,
    per_thread: int,
    subgroups: bool,
    local_counts: str = "registers",
    max_per_dim: int = MAX_GRID_DIM,
    spin_limit: int | None = None,
    aggregates: bool = True,
) -> Plan:
    """The passes sorting u32 keys[:n] (n >= 1, `fits`) in place by their low key_bits bits,
    moving values along (module docstring)."""
    wg, per = workgroup_size, per_thread
    passes = ceil_div(key_bits, DIGIT_BITS)
    nb = ceil_div(n, wg * per)
    plan = Plan()
    state = alloc(backend, u32, STATUS + 2 * nb * DIGITS, "radix_state")
    starts = alloc(backend, u32, passes * DIGITS, "radix_digit_starts")
    plan.temporaries += [state, starts]
    tmp_keys, tmp_values = ping_pong(backend, plan, n, values is not None)
    zero = fill(u32)
    cleared = STATUS + nb * DIGITS  # the counts, the tickets and pass 0's status region
    plan.add(zero, {}, {"out": state},
             grid(cleared, zero.workgroup_size[0], max_per_dim, n=cleared, value=0))
    cwg, cper = COUNT_SHAPE
    groups = min(ceil_div(n, cwg * cper), COUNT_MAX_GROUPS)
    last_mask = (1 << (key_bits - (passes - 1) * DIGIT_BITS)) - 1
    plan.add(digit_counts_program(passes, cwg, cper), {"keys": keys}, {"state": state},
             blocks_grid(groups, cwg, max_per_dim, n=n, last_mask=last_mask, stride=groups))
    plan.add(digit_starts_program(), {"state": state}, {"digit_starts": starts},
             blocks_grid(passes, DIGITS, max_per_dim))
    prog = onesweep_program(values is not None, wg, per, subgroups, local_counts, aggregates)
    spins = spin_limit_for(backend) if spin_limit is None else spin_limit
    src_k, dst_k, src_v, dst_v = keys, tmp_keys, values, tmp_values
    for p in range(passes):
        shift = p * DIGIT_BITS
        params = {"n": n, "shift": shift, "num_blocks": nb, "pass_index": p,
                  "mask": (1 << min(DIGIT_BITS, key_bits - shift)) - 1,
                  "status_at": STATUS + (p % 2) * nb * DIGITS,
                  "clear_at": STATUS + ((p + 1) % 2) * nb * DIGITS,
                  "clear": int(p + 1 < passes), "spin_limit": spins}
        ins: dict[str, DeviceBuffer] = {"keys": src_k, "digit_starts": starts}
        outs: dict[str, DeviceBuffer] = {"keys_out": dst_k, "state": state}
        if src_v is not None and dst_v is not None:
            ins["values"] = src_v
            outs["values_out"] = dst_v
        plan.add(prog, ins, outs, blocks_grid(nb, wg, max_per_dim, **params))
        src_k, dst_k, src_v, dst_v = dst_k, src_k, dst_v, src_v
    copy_home(plan, passes, tmp_keys, keys, tmp_values, values, n, max_per_dim)
    return plan
