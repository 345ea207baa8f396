"""Order-independent atomic adds into large targets (each element's first add claims a slot,
the rest go to the exact digits: vyre.lower.exact_sum) and in f64: the same bits as an
exact oracle in Python's `fractions` on every backend and in every order, whichever add
won a slot; adversarial values (huge and tiny mixed, cancellation to zero, signed zeros,
infinities and NaN, subnormals, digits at the edge of their range, one target receiving
everything); the backend's scratch left clear for targets of other sizes and types."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

import vyre
from vyre import InvalidProgram, ProgramBuilder, ScalarType
from vyre.backend import BaseBackend
from vyre.builder import BuildError
from vyre.lower.exact_sum import SLOT_MIN_ELEMENTS

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_exact_atomics import (
    WG,
    _wide_values,
    flushes,
    histogram,
    need,
    oracle,
    run,
    same_bits,
)

F32, F64, U32 = ScalarType.F32, ScalarType.F64, ScalarType.U32
BIG = SLOT_MIN_ELEMENTS  # the smallest target that claims slots
TYPES = [np.float32, np.float64]


def _units(dt: type, k: int) -> np.floating:
    """2^k times the smallest subnormal of `dt` (the digits' unit)."""
    return dt(np.ldexp(1.0, k + (-1074 if dt is np.float64 else -149)))


def _edges(dt: type) -> np.ndarray:
    """A sum whose digits sit at the edge of their range (2^31 - 1 in every digit up to the
    8th), then single units and a few larger steps: carries ripple through every digit."""
    parts = []
    for j in range(8):
        parts += [_units(dt, 32 * j + 31), -_units(dt, 32 * j)]
    steps = [_units(dt, 0)] * 9 + [-_units(dt, 0)] * 4 + [_units(dt, 31)] * 3
    return np.array(parts + steps + [-_units(dt, 63)] * 2, dt)


def _scatter_case(rng: np.random.Generator, dt: type) -> tuple[np.ndarray, ...]:
    """(vals, keys, init) into a BIG-element target: single adds, duplicates, cancelling
    pairs, one element receiving everything else, specials, an index past the end."""
    info = np.finfo(dt)
    perm = rng.permutation(BIG).astype(np.uint32)
    single = _wide_values(rng, 600, dt)
    dups = _wide_values(rng, 300, dt)
    pair = (rng.standard_normal(100) * np.exp2(rng.integers(-60, 60, 100))).astype(dt)
    heavy = np.concatenate([_edges(dt), _wide_values(rng, 100, dt),
                            np.array([info.max, info.max, -info.max], dt)])
    specials = np.array([np.inf, 1, -np.inf, np.nan, 2, np.inf, -np.inf, -0.0, 0.0,
                         info.tiny / 4, -info.tiny / 4], dt)
    vals = np.concatenate([single, dups, pair, -pair, heavy, specials, [dt(5)]])
    keys = np.concatenate([
        perm[:600],                                    # one add each (the slot only)
        perm[600:700].repeat(3),                       # three adds each
        perm[700:800], perm[700:800],                  # v and -v: S == 0 keeps init
        np.full(len(heavy), perm[800], np.uint32),     # one element gets everything
        perm[801:812],                                 # specials (and zeros) alone
        [BIG + 3],                                     # past the end: nothing happens
    ]).astype(np.uint32)
    init = (rng.standard_normal(BIG) * np.exp2(rng.integers(-30, 30, BIG))).astype(dt)
    init[perm[700:750]] = -0.0  # an exact zero sum keeps -0
    init[perm[:4]] = [np.nan, np.inf, -np.inf, info.tiny / 8]
    return vals, keys, init


@pytest.mark.parametrize("dt", TYPES)
def test_scatter_with_slots_equals_exact_oracle_in_every_order(backend: BaseBackend,
                                                              dt: type) -> None:
    """A target of SLOT_MIN_ELEMENTS elements: whichever add wins an element's slot, the
    result is the correctly rounded exact sum, bit for bit, and untouched elements keep
    every bit."""
    need(backend, dt)
    rng = np.random.default_rng(7 if dt is np.float32 else 8)
    vals, keys, init = _scatter_case(rng, dt)
    want = oracle(init, keys, vals, flush=flushes(backend, dt))
    for _ in range(2):
        perm = rng.permutation(len(vals))
        got = run(backend, vals[perm], keys[perm], init)
        assert same_bits(got, want)


@pytest.mark.parametrize("dt", TYPES)
def test_carries_through_every_digit(backend: BaseBackend, dt: type) -> None:
    """Digits at the edge of their range, in three orders, into a small target (digits
    only) and into a large one (the first add claims the slot)."""
    need(backend, dt)
    rng = np.random.default_rng(3)
    vals = _edges(dt)
    keys = np.full(len(vals), 2, np.uint32)
    for bins, orders in ((4, 3), (BIG, 1)):
        init = np.zeros(bins, dt)
        want = oracle(init, keys, vals, flush=flushes(backend, dt))
        for _ in range(orders):
            got = run(backend, vals[rng.permutation(len(vals))], keys, init)
            assert same_bits(got, want)


@pytest.mark.parametrize("case", [
    ("inf", [np.inf, 1.0], [0.0], np.inf),
    ("inf-inf", [np.inf, -np.inf], [0.0], np.nan),
    ("nan", [np.nan, 1.0], [0.0], np.nan),
    ("init_inf_minus_inf", [-np.inf], [np.inf], np.nan),
    ("overflow", [1.7e308, 1.7e308], [0.0], np.inf),
    ("overflow_then_back", [1.7e308, 1.7e308, -1.7e308], [0.0], 1.7e308),
    ("negzero_plus_negzero", [-0.0, -0.0], [-0.0], -0.0),
    ("cancel_to_init_negzero", [1.0, -1.0], [-0.0], -0.0),
    ("x_minus_x", [-5.0], [5.0], 0.0),
    ("subnormal_sum", [5e-324] * 3, [0.0], 1.5e-323),
    ("subnormal_to_normal", [2.0**-1023] * 2, [0.0], 2.0**-1022),
    ("one_plus_ulp_tie", [2.0**-53], [1.0], 1.0),
    ("one_plus_past_tie", [2.0**-53, 5e-324], [1.0], 1.0 + 2.0**-52),
], ids=lambda c: c[0])
def test_f64_special_values(backend: BaseBackend, case: tuple) -> None:
    """f64 as docs/IR.md says for f32: IEEE specials, overflow of the final sum only, the
    sign of zero, subnormals and ties to even of the exact sum."""
    need(backend, np.float64)
    _, vals, init, want = case
    v = np.array(vals, np.float64)
    got = run(backend, v, np.zeros(len(v), np.uint32), np.array(init, np.float64))
    flush = flushes(backend, np.float64)
    if not flush:
        assert same_bits(got, np.array([want], np.float64)), (got, want)
    assert same_bits(got, oracle(np.array(init, np.float64), np.zeros(len(v), np.uint32), v,
                                 flush=flush))


def test_scratch_is_left_clear_for_other_sizes_and_types(backend: BaseBackend) -> None:
    """One backend instance's scratch serves targets of every size and type in turn (their
    layouts differ): each finalisation leaves every word its dispatch wrote zero."""
    rng = np.random.default_rng(9)
    for dt, bins in [(np.float32, BIG + 17), (np.float64, 5), (np.float32, 7),
                     (np.float64, BIG), (np.float32, BIG), (np.float64, 3)]:
        if dt is np.float64 and {"f64", "i64"} - set(backend.capabilities().features):
            continue  # (need() says why in the f64 tests)
        vals = _wide_values(rng, 500, dt)
        keys = rng.integers(0, min(bins, 300), 500).astype(np.uint32)
        init = rng.standard_normal(bins).astype(dt)
        want = oracle(init, keys, vals, flush=flushes(backend, dt))
        assert same_bits(run(backend, vals, keys, init), want), (dt, bins)


def test_reference_checked_mode_finds_no_race() -> None:
    """The plan's kernels touch scratch words only atomically in the rewritten program and
    only plainly in the finalisation (a barrier between the used bits' reads and clears):
    the reference's checked mode reports nothing."""
    be = vyre.get_backend("reference", check="error")
    try:
        rng = np.random.default_rng(5)
        vals, keys, init = _scatter_case(rng, np.float32)
        assert same_bits(run(be, vals, keys, init), oracle(init, keys, vals))
        for dt in TYPES:  # (f64's finalisation loops over the digits in place)
            small = rng.integers(0, 4, 300).astype(np.uint32)
            v = _wide_values(rng, 300, dt)
            v[::50] = np.inf
            assert same_bits(run(be, v, small, np.zeros(4, dt)),
                             oracle(np.zeros(4, dt), small, v))
    finally:
        be.close()


def test_f64_atomic_add_exists_only_order_independent() -> None:
    """An f64 atomic add cannot be relaxed or have its old value read (no backend offers
    an order-dependent f64 atomic through the IR: WGSL has none); other f64 atomics are
    refused as for f32."""
    k = ProgramBuilder("relaxed64", workgroup_size=WG)
    v, h = k.buffer("vals", F64), k.buffer("hist", F64, "read_write")
    with pytest.raises(BuildError, match="only order-independent"):
        h.atomic_add_relaxed(0, v[k.global_id()])
    k = ProgramBuilder("olds64", workgroup_size=WG)
    v, h = k.buffer("vals", F64), k.buffer("hist", F64, "read_write")
    o = k.buffer("olds", F64, "write")
    i = k.global_id()
    o[i] = h.atomic_add(0, v[i])
    with pytest.raises(InvalidProgram, match="whose old value is read") as info:
        k.build()
    assert "do not read the old value" in str(info.value)
    k = ProgramBuilder("max64", workgroup_size=WG)
    h = k.buffer("hist", F64, "read_write")
    with pytest.raises(BuildError, match="only atomic add exists for floats"):
        h.atomic_max(0, 1.0)
    assert histogram("ok64", F64).buffers[2].ty is F64  # the order-independent add builds
