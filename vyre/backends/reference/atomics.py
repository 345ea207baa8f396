"""Atomic read-modify-write over many lanes at once, as one valid sequential interleaving.

The lanes that perform one Atomic statement are applied in lane order: each lane's old
value is what a sequential execution in that order would return, and the memory ends up
holding the result of that execution. Commutative integer ops are vectorised (sort by
address + segmented scans); float add and compare-exchange loop over rounds of colliding
lanes (or over addresses, whichever is fewer). This module must never decide which lanes
take part or check bounds: the caller passes only active, in-range lanes.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from vyre.ir.types import ScalarType

Array = np.ndarray
_ASSOC: dict[str, Callable[[Array, Array], Array]] = {
    "and": np.bitwise_and,
    "or": np.bitwise_or,
    "min": np.minimum,
    "max": np.maximum,
}


def _seg_scan(op: Callable[[Array, Array], Array], vals: Array, seg: Array, longest: int) -> Array:
    """Inclusive segmented scan by doubling (exact for the associative and, or, min, max)."""
    acc = vals.copy()
    d = 1
    while d < longest:
        same = seg[d:] == seg[:-d]
        acc[d:] = np.where(same, op(acc[:-d], acc[d:]), acc[d:])
        d *= 2
    return acc


def atomic_rmw(
    op: str,
    target: Array,
    index: Array,
    value: Array,
    comparand: Array | None,
    ty: ScalarType,
) -> Array:
    """Apply `op` for lanes in order on flat array `target`; return each lane's old value.

    `index` holds in-range flat indices (int64), `value`/`comparand` one entry per lane.
    """
    dt = ty.numpy
    n = index.shape[0]
    if n == 0:
        return np.zeros(0, dtype=dt)
    order = np.argsort(index, kind="stable")
    si = index[order]
    sv = np.asarray(value, dtype=dt)[order]
    starts = np.ones(n, dtype=bool)
    starts[1:] = si[1:] != si[:-1]
    start_pos = np.flatnonzero(starts)
    end_pos = np.append(start_pos[1:], n) - 1
    seg = np.cumsum(starts) - 1
    seg_idx = si[start_pos]
    init = target[seg_idx].copy()
    rank = np.arange(n) - start_pos[seg]
    longest = int(rank.max()) + 1

    if op in ("add", "xor") and not ty.is_float:
        f = np.add if op == "add" else np.bitwise_xor
        inv = np.subtract if op == "add" else np.bitwise_xor
        incl = f.accumulate(sv, dtype=dt)
        before = inv(incl[start_pos], sv[start_pos]).astype(dt, copy=False)  # prefix before each segment
        excl = inv(inv(incl, sv), before[seg]).astype(dt, copy=False)
        old = f(init[seg], excl).astype(dt, copy=False)
        final = f(init, inv(incl[end_pos], before)).astype(dt, copy=False)
    elif op in _ASSOC:
        fn = _ASSOC[op]
        if ty.is_float:
            fn = np.fmin if op == "min" else np.fmax
        incl = _seg_scan(fn, sv, seg, longest)
        prev = np.empty_like(incl)
        prev[1:] = incl[:-1]
        prev[0] = incl[0]
        old = np.where(starts, init[seg], fn(init[seg], prev)).astype(dt, copy=False)
        final = fn(init, incl[end_pos]).astype(dt, copy=False)
    elif op == "exchange":
        prev = np.empty_like(sv)
        prev[1:] = sv[:-1]
        prev[0] = sv[0]
        old = np.where(starts, init[seg], prev).astype(dt, copy=False)
        final = sv[end_pos]
    elif op == "compare_exchange":
        assert comparand is not None
        sc = np.asarray(comparand, dtype=dt)[order]
        old, final = _compare_exchange(sv, sc, seg, rank, start_pos, init)
    elif op == "add":
        old, final = _float_add(sv, seg, rank, start_pos, end_pos, init, longest, dt)
    else:
        raise NotImplementedError(f"atomic op {op!r}")

    target[seg_idx] = final
    out = np.empty(n, dtype=dt)
    out[order] = old
    return out


def _float_add(
    sv: Array,
    seg: Array,
    rank: Array,
    start_pos: Array,
    end_pos: Array,
    init: Array,
    longest: int,
    dt: np.dtype,
) -> tuple[Array, Array]:
    """Float add, rounded after every lane: loop over addresses or over collision rounds."""
    old = np.empty_like(sv)
    cur = init.copy()
    if len(start_pos) < longest:
        for k in range(len(start_pos)):
            s, e = int(start_pos[k]), int(end_pos[k]) + 1
            acc = np.add.accumulate(np.concatenate([cur[k : k + 1], sv[s:e]]), dtype=dt)
            old[s:e] = acc[:-1]
            cur[k] = acc[-1]
        return old, cur
    by_rank = np.argsort(rank, kind="stable")
    bounds = np.searchsorted(rank[by_rank], np.arange(longest + 1))
    for r in range(longest):
        lanes = by_rank[bounds[r] : bounds[r + 1]]
        where = seg[lanes]
        o = cur[where]
        old[lanes] = o
        cur[where] = np.add(o, sv[lanes]).astype(dt, copy=False)
    return old, cur


def _compare_exchange(
    sv: Array, sc: Array, seg: Array, rank: Array, start_pos: Array, init: Array
) -> tuple[Array, Array]:
    """Sequential compare-exchange per address, one round per successful exchange.

    Each round finds, in every address's remaining lanes, the first whose comparand equals
    the current value: the lanes up to it see the current value as old; it stores its
    value. Rounds = the most successes at one address + 1 (a CAS counter needs two).
    """
    n = sv.shape[0]
    nseg = start_pos.shape[0]
    old = np.empty_like(sv)
    cur = init.copy()
    lane = np.arange(n)
    seg_len = np.diff(np.append(start_pos, n))
    pos = np.zeros(nseg, dtype=np.int64)  # rank of the next unprocessed lane per address
    while True:
        pending = rank >= pos[seg]
        if not pending.any():
            return old, cur
        match = pending & (sc == cur[seg])
        first = np.full(nseg, n, dtype=np.int64)
        np.minimum.at(first, seg[match], lane[match])
        take = pending & (lane <= first[seg])
        old[take] = cur[seg[take]]
        hit = first < n
        cur[hit] = sv[first[hit]]
        pos = np.where(hit, rank[np.minimum(first, n - 1)] + 1, seg_len)
