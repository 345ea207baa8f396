"""Multi-level exclusive scans of u32 words, for the C front end's stages.

Two associative operators: `add` (wrapping u32 sum; compaction offsets) and `compose`
(lexer transition functions packed 4 bits per state, "first then second"; see
cpp_rules.compose_words). A scan of n words is: a block-scan pass per level (each block of
`workgroup_size * items` words is scanned in place and its total written to the next
level's array; the top level writes the grand total to a 1-word buffer), then an add-down
pass per lower level. This module builds Programs and describes the passes; it must never
allocate or dispatch anything itself.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

from vyre.builder import ProgramBuilder, Value, select
from vyre.ir.nodes import Program
from vyre.ir.types import ScalarType

from .cpp_rules import IDENTITY_FN, NUM_STATES

U32 = ScalarType.U32
OPS = ("add", "compose")


def identity_of(op: str) -> int:
    return 0 if op == "add" else IDENTITY_FN


def combine(k: ProgramBuilder, op: str, first: Value, then: Value) -> Value:
    """`first` followed by `then` under `op`, as a kernel expression."""
    if op == "add":
        return first + then
    out: Value | None = None
    for s in range(NUM_STATES):
        mid = (first >> (4 * s)) & k.lit(15, U32)
        entry = ((then >> (mid * 4)) & k.lit(15, U32)) << (4 * s)
        out = entry if out is None else out | entry
    assert out is not None
    return out


@cache
def block_scan_program(op: str, workgroup_size: int, items: int) -> Program:
    """Scan each block of `data[0:n]` in place (exclusive); block totals to `sums`."""
    ident = identity_of(op)
    k = ProgramBuilder(f"cpp_scan_block_{op}", workgroup_size=workgroup_size)
    data = k.buffer("data", U32, "read_write")
    sums = k.buffer("sums", U32, "write")
    n = k.param("n", U32)
    sh = k.shared("partial", U32, workgroup_size)
    t = k.local_index()
    wg = k.workgroup_linear_id()
    block = k.let(wg * (workgroup_size * items), name="block_base")
    base = k.let(block + t * items, name="base")
    vals = []
    acc = k.let(k.lit(ident, U32), name="acc")
    for j in range(items):
        v = k.let(select(base + j < n, data[base + j], k.lit(ident, U32)), name=f"x{j}")
        vals.append(v)
        acc.set(combine(k, op, acc, v))
    sh[t] = acc
    k.barrier()
    off = 1
    while off < workgroup_size:
        x = k.let(sh[t], name=f"hs{off}")
        with k.if_(t >= off):
            x.set(combine(k, op, sh[t - off], x))
        k.barrier()
        sh[t] = x
        k.barrier()
        off *= 2
    run = k.let(select(t > 0, sh[select(t > 0, t - 1, k.lit(0, U32))], k.lit(ident, U32)),
                name="run")
    for j in range(items):
        with k.if_(base + j < n):
            data[base + j] = run
        run.set(combine(k, op, run, vals[j]))
    with k.if_((t == 0) & (block < n)):
        sums[wg] = sh[workgroup_size - 1]
    return k.build()


@cache
def add_down_program(op: str, workgroup_size: int, items: int) -> Program:
    """data[i] = sums[i // block] followed by data[i], for i < n (block prefixes)."""
    k = ProgramBuilder(f"cpp_scan_add_{op}", workgroup_size=workgroup_size)
    data = k.buffer("data", U32, "read_write")
    sums = k.buffer("sums", U32, "read")
    n = k.param("n", U32)
    i = k.let(k.global_linear_id(), name="i")
    with k.if_(i < n):
        data[i] = combine(k, op, sums[i / (workgroup_size * items)], data[i])
    return k.build()


@dataclass(frozen=True)
class ScanPass:
    """One dispatch of a scan: a program, which logical buffers it binds, its size."""

    program: Program
    data: str  # logical buffer scanned (in place)
    sums: str  # logical buffer of block totals (read by add-down, written by block scan)
    n: int  # elements of `data` covered
    workgroups: int  # workgroups the dispatch needs (x*y, before folding)


def level_lengths(n: int, block: int) -> list[int]:
    """Lengths of the arrays scanned at each level, bottom first (the last is <= block)."""
    out = [n]
    while out[-1] > block:
        out.append(-(-out[-1] // block))
    return out


def sums_name(level: int) -> str:
    return f"scan_sums{level}"


def scan_passes(
    op: str, data: str, total: str, n: int, workgroup_size: int, items: int
) -> list[ScanPass]:
    """The passes of an exclusive scan of logical buffer `data[0:n]`, total -> `total`[0].

    Level l >= 1 scans logical buffer `scan_sums{l}`; sizes come from `level_lengths`.
    """
    block = workgroup_size * items
    lengths = level_lengths(n, block)
    names = [data] + [sums_name(level) for level in range(1, len(lengths))]
    up = block_scan_program(op, workgroup_size, items)
    down = add_down_program(op, workgroup_size, items)
    passes = []
    for level, length in enumerate(lengths):
        out = names[level + 1] if level + 1 < len(lengths) else total
        passes.append(ScanPass(up, names[level], out, length, -(-length // block)))
    for level in range(len(lengths) - 2, -1, -1):
        passes.append(
            ScanPass(down, names[level], names[level + 1], lengths[level],
                     -(-lengths[level] // workgroup_size))
        )
    return passes

