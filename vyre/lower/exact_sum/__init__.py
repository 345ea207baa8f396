"""Order-independent float atomic add (f32 and f64), written once as IR -> IR rewrites.

A float atomic add whose old value is never read (vyre.ir.analysis.exact_sum_targets) is
summed exactly. Each target element has an accumulator of `Format.words` signed 32-bit
digits (a balanced base-2^32 number, digit j worth 2^(32 j) units), whose unit is the
smallest subnormal (2^-149, 2^-1074), so every finite value is an integer of at most 24
(53) significant bits there; 320 (2,144) bits hold the sum of up to 2^41 (2^44) values.
`plan_for` rewrites each add into integer atomic adds of the value's significand into
the two (three) digits it spans; a digit that leaves [-2^31, 2^31) wraps and the thread
whose add wrapped it (read from the atomic's old value) carries +1 or -1 into the next
digit with another atomic add. Integer addition with every carry propagated that way is
exact whatever the order, and a balanced representation is unique, so the digits end as
the one representation of the exact sum on every backend and every run. Digits start at
0 (the middle of their range), so adding and subtracting small values does not ripple
through the digits above (two's complement words would borrow through every zero word
above a negative value). inf and NaN values set bits of a flag word instead.

Storage targets of at least SLOT_MIN_ELEMENTS elements (a scatter-add, where most elements
get one value) first try to claim the element's slot: a compare-exchange of the value's
bits into a zero slot word (f64: of 1 into a claim word, then two stores: WGSL has no
64-bit atomics). Only the adds that find the slot taken go to the digits, and they set the
element's bit in a used bitmap. The sum is the slot's value plus the digits whichever add
won the slot, so the result does not depend on it. Smaller targets (histograms, where
elements get many values) use the digits only.

`FINALIZE` / `FINALIZE_F64` then fold in the element's initial value, round the exact
total once (nearest even; past the largest float: inf), store it and zero every scratch
word that was used, so the next dispatch finds them clear. An element whose only add won
its slot is finished with the IR's float addition: round(x + v) is exactly that. f32's
finalisation is unrolled over its 10 digits in locals; f64's loops over its 67 in place
(unrolled, NVRTC and lavapipe each took 10 s to compile it). Semantics (docs/IR.md
"Atomic"):

- the result is round(initial + S), S the exact sum of the added values;
- an element whose S is exactly zero and that got no inf or NaN keeps its bits (S acts as
  -0, IEEE's additive identity: -0 stays -0, an element nothing was added to is unchanged);
- inf and NaN follow IEEE: any NaN, or +inf and -inf both, give NaN; else an inf wins;
- in flush mode the added values and the initial value are read as arithmetic operands (a
  subnormal as a zero of its sign) and a subnormal result becomes a zero of its sign:
  both through float comparisons with zero, which flush exactly there.

Scratch layout of a storage target of n elements (u32 words; `scratch_words`): n words
(f32: the slots; f64: the claim words), ceil(n / 32) words of used bits, (f64 only) 2 n
slot words, then per element its digits and its flag word. The dispatch plan that runs
these (scratch buffers, two device dispatches per user dispatch) is vyre.exact_sum_plan;
the reference backend runs the same plan. On a workgroup array the digits are a workgroup
array too (no slot), zeroed when the workgroup starts, and the same finalisation runs after
every barrier (then another barrier), so the sums of a phase land before any invocation
reads the array. This package is split by job: digits (the format, the scratch layout and shared IR
helpers), rewrite (plan_for: the atomic adds rewritten) and finalize (the rounding
programs). It must never decide how a plan is dispatched or allocated.
"""


from __future__ import annotations

from .digits import (
    BOOL,
    F32,
    F32_SUM,
    F64,
    F64_SUM,
    FINALIZE_WORKGROUP,
    FLAG_NAN,
    FLAG_NEG_INF,
    FLAG_POS_INF,
    FORMATS,
    SLOT_MIN_ELEMENTS,
    STRIDE,
    U32,
    U64,
    WORDS,
    Format,
    scratch_words,
)
from .finalize import (
    FINALIZE,
    FINALIZE_F64,
    FINALIZE_FOR,
    finalize_element,
)
from .rewrite import (
    Plan,
    plan_for,
)

__all__ = [
    "BOOL",
    "F32",
    "F32_SUM",
    "F64",
    "F64_SUM",
    "FINALIZE",
    "FINALIZE_F64",
    "FINALIZE_FOR",
    "FINALIZE_WORKGROUP",
    "FLAG_NAN",
    "FLAG_NEG_INF",
    "FLAG_POS_INF",
    "FORMATS",
    "SLOT_MIN_ELEMENTS",
    "STRIDE",
    "U32",
    "U64",
    "WORDS",
    "Format",
    "Plan",
    "finalize_element",
    "plan_for",
    "scratch_words",
]
