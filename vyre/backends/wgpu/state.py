"""What printing one WGSL module tracks: `WgslState`, the WGSL printer's state.

The helpers printed so far, the scopes of the local names, the fence flow of the f32
values, the hoisted global-id arithmetic, the loop flags and the facts of the device and
the Program that the spellings read. printer.py's `WgslPrinter` adds the spellings of each
node kind; the spelling modules (expressions.py, memory.py, ...) take it as their `ctx`.
This module must never spell a node.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from vyre import features as F
from vyre.errors import InvalidProgram
from vyre.ir import nodes as N
from vyre.ir.types import ScalarType
from vyre.lower import mangle

from ..printer import Printer
from .fences import FenceFlow
from .vectors import VectorPlan


@dataclass(eq=False)
class WgslState(Printer):
    """The state of printing one WGSL module (the walk is the skeleton's, vyre.backends.printer)."""

    program: N.Program
    atomic: frozenset[str]
    buffer_slot: dict[str, int]
    arrays: dict[str, N.WorkgroupArray]
    helpers: dict[str, str] = field(default_factory=dict)
    scopes: list[dict[str, str]] = field(default_factory=list)
    used_names: set[str] = field(default_factory=set)
    counter: int = 0
    wide_ok: bool = False  # the device runs i64 and f64 (vyre.approx's trig reduction)
    fma_fused: bool = True  # the driver's fma rounds once
    flush: bool = False  # f32 subnormals flush to zero (docs/IR.md's flush mode), explicitly
    # which tiny results flush mode turns into zeros (features.TININESS_RULES): vy_ftz gives
    # 'subnormal result'; a narrowing cast spells the other two itself (_narrowed_f32)
    tininess: str = F.TININESS_SUBNORMAL_RESULT
    # flush mode's f32 + - * fma left to the device, which computes it (native_flush.py)
    native_flush: bool = False
    wg_f32_atomic: frozenset[str] = frozenset()  # workgroup arrays with f32 atomics (as u32)
    # fence only the f32 operands a driver could fold (fences.py); False: every one
    minimal: bool = False
    reloaded: set[int] = field(default_factory=set)  # ids of stores read back (fences.py)
    # Barrier also orders storage memory (barriers.py: only where an invocation can touch a
    # written storage buffer before a barrier; naga's storageBarrier fences the whole GPU)
    storage_barrier: bool = True
    flow: FenceFlow = field(default_factory=FenceFlow)  # what the compiler sees of f32 vars
    vec: VectorPlan | None = None  # workgroup arrays declared as vec4 and their runs
    # the driver ends long loops silently: count the loops each invocation is in
    # (loopcount.py); the exit flag of each enclosing loop, innermost last (None: no flag)
    count_loops: bool = False
    loop_flags: list[str | None] = field(default_factory=list)
    returns_in_loops: bool = False  # a `return` inside a counted loop (needs loopcount.RETURNING)
    # integer expressions of builtins and constants only (the global id), printed once as
    # a `let` at the top of the entry point: {text: (name, type)} (see _invariant)
    hoisted: dict[str, tuple[str, ScalarType]] | None = None
    hoisted_nodes: dict[int, tuple[N.ExprNode, str]] = field(default_factory=dict)  # by id
    invariant: dict[int, tuple[N.ExprNode, int]] = field(default_factory=dict)  # _invariant's
    # the first access printed that is not in range by construction (WgslModule's field)
    unproven: str | None = None
    # the 8/16-bit buffers and workgroup arrays stored into: arrays of atomic<u32> words
    packed_stored: frozenset[str] = frozenset()
    lines: list[str] = field(default_factory=list)  # (the skeleton's output)

    def fresh(self, prefix: str) -> str:
        self.counter += 1
        return f"{prefix}{self.counter}"

    def declare(self, ir_name: str) -> str:
        base = f"v_{mangle(ir_name)}"
        name = base
        while name in self.used_names:
            self.counter += 1
            name = f"{base}_{self.counter}"
        self.used_names.add(name)
        self.scopes[-1][ir_name] = name
        return name

    def lookup(self, ir_name: str) -> str:
        for scope in reversed(self.scopes):
            if ir_name in scope:
                return scope[ir_name]
        raise InvalidProgram(f"variable {ir_name!r} is not declared (the validator catches this)")
