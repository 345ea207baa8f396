"""The shared lowering: docs/IR.md's rules written once, as IR -> IR rewrites.

`lower(program, traits)` rewrites every operation whose IR semantics a target does not
give natively (per `Traits`) into a small core of operations the target's printer only
has to spell: ordinary IR nodes plus `Native` nodes (vyre.ir.nodes), which a printer maps
to the target's own operator and which the lowering only applies inside their domain,
and raw memory accesses (RawLoad / RawStore / RawAtomic, behind the IR's index tests;
`Guarded` where a load's test stays an expression), which it only makes in range (no
test where an enclosing condition already proves the index, vyre.lower.facts).
The reference backend interprets both with an assertion of that domain, so
`reference(P) == reference(lower(P, traits))` checks the lowering on the CPU
(tests/test_lowering.py). This package must never print source or know a backend's
spelling; accuracy fixes for one driver stay in that backend. `lower_maths` (the
functions' exact definitions, vyre.lower.maths) is its first step, and all the reference
backend applies.
"""

from .maths import lower_maths
from .memory import guarded_load, guarded_store
from .names import mangle
from .passes import lower
from .traits import ALL_NATIVE, NOTHING_NATIVE, Traits, all_traits

__all__ = ["ALL_NATIVE", "NOTHING_NATIVE", "Traits", "all_traits", "guarded_load",
           "guarded_store", "lower", "lower_maths", "mangle"]
