"""The loop-budget accounting the generated WGSL carries on adapters with a loop limit.

Mesa's llvmpipe (lavapipe) runs the invocations of a workgroup in SIMD groups (neighbours
along x: 8 at 256 bits) and silently ends a loop once 65,535 loop passes have run in the
group, counted over all loops of the shader. A pass is one trip round a loop by the group,
whichever of its lanes are in it; a group of lanes none of which is in the loop still
makes one pass on entering it. Lanes that pad a workgroup whose x size is not a multiple
of the group's width are in that count too: their stores are dropped and their loads read
0, but a loop that their zeros keep running runs, and costs, its full length (measured on
llvmpipe 22.3 / LLVM 15: a loop under an If that no invocation of a (4, 4, 4) workgroup
takes made 65,534 passes, because the padding lanes' zeros took it). So the budget being
spent says nothing about results: only a loop that was ended while a real invocation was
still in it truncates anything.

That is what the accounting detects, per invocation: `vy_open` counts the loops the
invocation is in (one more on entering a loop, one less on the pass that leaves it), and
an invocation that ends with `vy_open != 0` was inside a loop the driver ended: it writes
the status flag (padding lanes cannot: their writes are dropped) and the runtime raises
DispatchError. A For with no `break` or `return` of its own needs no work per pass: after
it, its counter is below its end only where the loop was cut (`count_cut` adds one then).
Two rules keep the count true under the driver's compiler, which does not
know about the hidden exit:
- every counted loop has exactly one exit, and the decrement is computed on every pass
  before the exit test, as a loop-carried value (the compiler can neither sink it out of
  the loop nor fold it with the exit condition). A `break` or `return` inside a loop
  becomes "set this loop's flag; continue" and the loop exits in its continuing block;
  with several exits the compiler would merge the count at the exit with copies that a
  cut-off lane never ran.
- every loop of the module is counted, the helpers' retry loops included: each is tagged
  (`COUNTED`), and `all_counted` checks the final source. A module with an untagged loop
  falls back to render.py's end-of-shader sentinel, which raises whenever the budget ran
  out (never silent, but it cannot tell a cut loop from a spent budget).

This module spells the WGSL pieces and says which loops need an exit flag; it must never
decide whether an adapter has a limit (the runtime's probe does), and render.py adds none
of this where there is none.
"""

from __future__ import annotations

import re

from vyre.ir import nodes as N
from vyre.ir.analysis import walk_stmts

#: per-invocation count of the loops the invocation is in (module scope, 0 at the start)
OPEN = "vy_open"
#: set by a `return` inside loops: each loop it leaves exits, then the function returns
RETURNING = "vy_ret"
#: the tag every counted loop's opening line carries (see all_counted)
COUNTED = "// vy:counted"

DECLARATION = f"var<private> {OPEN}: u32;"


def enter() -> str:
    """The statement before a counted loop (only where the loop is entered)."""
    return f"{OPEN} = {OPEN} + 1u;"


def leave(exits: str) -> str:
    """The statement of every pass, just before the loop's one exit test `exits` (a bool
    expression, normally a name): one less once the loop is left."""
    return f"{OPEN} = {OPEN} - select(0u, 1u, {exits});"


def count_cut(stopped_short: str) -> str:
    """After a For with no `break` or `return` of its own (so its continuing block is its
    one exit, and its counter is current after it even where the loop was cut):
    `stopped_short` (the counter below the end, compared through a uniform zero so that
    the compiler cannot fold it with the exit test) means the loop was cut. No work per
    pass."""
    return f"if ({stopped_short}) {{ {OPEN} = {OPEN} + 1u; }}"


def check(flag_statement: str) -> str:
    """The end-of-invocation test: `flag_statement` runs where a loop was cut."""
    return f"if ({OPEN} != 0u) {{ {flag_statement} }}"


_LOOP_OPENING = re.compile(r"\bloop\s*\{|\bfor\s*\(|\bwhile\s*\(")


def all_counted(code: str) -> bool:
    """Whether every loop that `code` opens is a counted one (its line carries COUNTED)."""
    for line in code.splitlines():
        text = line.split("//", 1)[0]
        if _LOOP_OPENING.search(text) and COUNTED not in line:
            return False
    return True


def leaves_by_jump(body: tuple[N.StmtNode, ...]) -> bool:
    """Whether a loop with this body can be left other than by its own condition: a `break`
    of its own (not one of a nested loop's) or a `return` anywhere inside."""
    for s in body:
        if isinstance(s, (N.Break, N.Return)):
            return True
        if isinstance(s, N.If) and (leaves_by_jump(s.then) or leaves_by_jump(s.orelse)):
            return True
        if isinstance(s, (N.For, N.While)) and returns(s.body):
            return True
    return False


def returns(body: tuple[N.StmtNode, ...]) -> bool:
    """Whether `body` holds a `return`, at any depth."""
    return any(isinstance(s, N.Return) for s in walk_stmts(body))
