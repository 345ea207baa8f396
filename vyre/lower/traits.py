"""What a target gives exactly by itself: the switches that choose the lowering passes.

A trait set to True means the target's own operation already has the IR's semantics, so
the lowering leaves the IR node in place for the printer; False means the lowering
rewrites it into the core (vyre.lower.passes). `guarded_expr` and `in_place` are
capabilities instead: they choose the form of one rewrite. This module must never hold rules.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, fields


@dataclass(frozen=True)
class Traits:
    # integer div / rem: truncating, by zero -> 0, MIN / -1 -> MIN, MIN % -1 -> 0
    int_divrem: bool = False
    # shl / shr take the amount modulo the bit width
    masked_shifts: bool = False
    # integer abs wraps (abs(MIN) = MIN) and is the identity on unsigned types
    int_abs: bool = False
    # float -> int casts truncate, saturate to the range and map NaN to 0
    saturating_f2i: bool = False
    # float rem is a - b * trunc(a / b) with every step rounded in the type
    float_rem: bool = False
    # a for loop with a step > 1 never overflows its variable (a step of 1 never can:
    # var < end <= MAX, so var + 1 fits; printers spell that natively)
    stepped_for: bool = False
    # f16 + - * / sqrt min max clamp floor ceil trunc round and comparisons are done in
    # f16 itself (False: in f32, rounded once to f16, exact since 24 >= 2 * 11 + 2 bits)
    f16_arith: bool = False
    # loads / stores / atomics outside a buffer's length read 0 / do nothing by themselves
    # (the reference interpreter; a GPU's robust access clamps or is undefined instead)
    checked_memory: bool = False
    # a guarded load may stay an expression (`Guarded`): the target's conditional
    # evaluates only the operand it chooses (C's `?:`), or its select evaluates both but a
    # raw load of any index reads some value without faulting (WebGPU's robust buffer
    # access), so the discarded read is harmless; False: a local set under an `if`
    guarded_expr: bool = False
    # the printer evaluates a statement's expressions only where control reaches the
    # statement, so an access may rely on an enclosing condition's index test
    # (vyre.lower.facts); False: it may evaluate them ahead of the conditions around
    # them (CUDA's lockstep coarsening), and every access keeps its own test
    in_place: bool = False
    # float division (f32, f16 done in f32, f64) is correctly rounded; False: vyre's exact
    # method from the operands' bits (vyre.lower.divsqrt; NVIDIA's Vulkan driver)
    float_div: bool = False
    # float sqrt is correctly rounded; False: vyre's exact method likewise
    float_sqrt: bool = False
    # the target runs f64 and i64 (a capability): the exact division and sqrt then take
    # their f64 fast path for operands in a safe range
    wide: bool = False
    # f32 fma rounds once (False: vyre's exact one through f64, vyre.lower.fma, where the
    # target is `wide`); the exact division's fast path is then in f32 alone
    fused_fma: bool = False
    # f16 and f64 fma round once (False: vyre's exact ones, f16's through f32, f64's in
    # 64-bit integers; Vulkan lets both round twice)
    fused_fma_f16_f64: bool = False
    # a constant table (the core's N.Table) read at a runtime index costs one memory read
    # (CUDA: a __device__ array through L1); False: the printer spells it as a tree of
    # selects (WGSL), and the function definitions take their paths with small tables
    # (vyre.lower.maths: exp32, log32, sincos32)
    indexed_tables: bool = False


ALL_NATIVE = Traits(**{f.name: True for f in fields(Traits)})  # the reference: nothing to do
NOTHING_NATIVE = Traits()  # C-like targets (CUDA C, WGSL): every rule lowered

# the traits of operations vyre replaces by exact methods of its own (vyre.lower.divsqrt,
# vyre.lower.fma) or that choose among a function's exact definitions (indexed_tables),
# and the rules whose rewrites make such an operation (float rem divides; f16 arithmetic
# divides and takes roots in f32)
_EXACT_OPS = ("float_div", "float_sqrt", "wide", "fused_fma", "fused_fma_f16_f64",
              "indexed_tables")
_MAKING_EXACT_OPS = ("float_rem", "f16_arith")


def all_traits() -> list[Traits]:
    """The combinations the lowering check runs: every combination of the rule traits
    with the exact operations native, and every combination of the exact operations'
    traits with those of the rules that make such operations (the other rules never
    produce or rewrite a division, sqrt or fma, so they combine with these independently)."""
    names = [f.name for f in fields(Traits) if f.name not in _EXACT_OPS]
    out = [Traits(**dict(zip(names, bits)), **dict.fromkeys(_EXACT_OPS, True))
           for bits in itertools.product((False, True), repeat=len(names))]
    for bits in itertools.product((False, True), repeat=len(_EXACT_OPS) + len(_MAKING_EXACT_OPS)):
        t = Traits(**dict(zip(_EXACT_OPS + _MAKING_EXACT_OPS, bits)))
        if t not in out:
            out.append(t)
    return out
