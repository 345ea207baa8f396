"""A Program's `Print` / `Assert` statements rewritten as plain IR that writes records to a
debug log buffer, so every backend runs them with the code it already has (the same
atomics and stores as any kernel): output is the same everywhere because the records are.

The log is one u32 buffer, declared last (the last output of the dispatch):

    [0] words reserved   [1] records attempted   [2], [3] zero     (HEADER_WORDS)
    [4 ...] records, back to back

A record is [site, global id x, y, z, seq, value words...]: `site` indexes `Instrumented.
sites` (which statement, its format and value types), `seq` counts the records this
invocation made before (program order). An invocation reserves its record's words with an
atomic add on word 0 and writes them only if they fit; one that does not fit marks its
start (MARKER) when that lies inside the buffer, so the host reads exactly the records
that fit and counts the rest (word 1) as dropped. Every record slot is written by one
invocation only, so the checked mode finds no race in the log.

A Program without Print / Assert is never rewritten (`instrumented` is only called for
one that has them): its code is exactly what it was before debug output existed.

This module must never run anything; vyre.debug.launch binds and reads the log.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from dataclasses import dataclass

from vyre.ir import nodes as N
from vyre.ir.analysis import walk_stmts
from vyre.ir.sites import site_of
from vyre.ir.types import ScalarType
from vyre.ir.visit import map_block
from vyre.lru import LruDict

from .fmt import words_of

HEADER_WORDS = 4
RECORD_HEAD = 5  # site, global id x, y, z, seq
MARKER = 0xFFFFFFFF  # a reserved record start that did not fit
_TYPED_LITERAL = re.compile(r"\b([0-9][0-9.e+-]*):(?:bool|[iuf](?:16|32|64))\b")
OPERAND_TEXT = 24  # an operand's text longer than this is named by its side instead
_U32 = ScalarType.U32
_U64 = ScalarType.U64


@dataclass(frozen=True)
class Site:
    """One Print / Assert statement of the original Program."""

    kind: str  # "print" or "assert"
    fmt: str
    types: tuple[ScalarType, ...]  # of the format's values, in order
    # an assert whose condition is a comparison also logs both operands: (text, type)
    operands: tuple[tuple[str, ScalarType], ...]
    where: str | None  # the user's "file:line", when the Program was built here

    @property
    def words(self) -> int:
        return RECORD_HEAD + sum(words_of(t) for t in self.types) + sum(
            words_of(t) for _, t in self.operands)


@dataclass(frozen=True)
class Instrumented:
    """The rewritten Program, the name of its log buffer and the sites of its records."""

    program: N.Program
    log: str
    sites: tuple[Site, ...]

    @property
    def max_record_words(self) -> int:
        return max(s.words for s in self.sites)


def has_debug(program: N.Program) -> bool:
    """Whether `program` has a Print or Assert (cached on the Program)."""
    return program.debug_statements


def debug_program(program: N.Program) -> N.Program:
    """The Program a dispatch of `program` runs: its instrumented twin when it has debug
    statements, else `program` itself (what `backend.source` shows)."""
    return instrumented(program).program if has_debug(program) else program


def without_debug(program: N.Program) -> N.Program:
    """`program` with its Print / Assert statements removed (they never change a buffer, so
    its buffers' results are the same): what a second run that must stay quiet executes
    (a shadow run, vyre.tools.shadow). `program` itself when it has none."""
    if not has_debug(program):
        return program
    body = map_block(program.body, lambda s: [] if isinstance(s, N.DEBUG_STMTS) else [s])
    return program.model_copy(update={"body": body})


_CACHE: LruDict[N.Program, Instrumented] = LruDict(256)
_CACHE_LOCK = threading.Lock()


def instrumented(program: N.Program) -> Instrumented:
    """`program` with its debug statements as log writes (cached per Program)."""
    with _CACHE_LOCK:
        got = _CACHE.get(program)
    if got is None:
        got = _rewrite(program)
        with _CACHE_LOCK:
            _CACHE[program] = got
    return got


def _names(program: N.Program) -> set[str]:
    names: set[str] = {d.name for d in program.buffers}
    names.update(d.name for d in program.params)
    names.update(d.name for d in program.workgroup_arrays)
    for s in walk_stmts(program.body):
        for attr in ("name", "var", "result"):
            v = getattr(s, attr, None)
            if isinstance(v, str):
                names.add(v)
    return names


def _prefix(program: N.Program) -> str:
    """A name prefix no name of `program` starts with (the log's own locals use it)."""
    names = _names(program)
    n = 0
    while True:
        p = f"vyre_dbg{n or ''}"
        if not any(x.startswith(p) for x in names):
            return p
        n += 1


def _c(v: int) -> N.Const:
    return N.Const(ty=_U32, value=v)


def _encode(e: N.ExprNode) -> list[N.ExprNode]:
    """The u32 words holding the bits of `e` (low word first)."""
    ty = e.ty
    if ty is ScalarType.BOOL:
        return [N.Select(cond=e, a=_c(1), b=_c(0), ty=_U32)]
    if ty is _U32:
        return [e]
    if ty in (ScalarType.I32, ScalarType.F32):
        return [N.Bitcast(a=e, ty=_U32)]
    if ty is ScalarType.F16:  # widened to f32: exact
        return [N.Bitcast(a=N.Cast(a=e, ty=ScalarType.F32), ty=_U32)]
    bits = e if ty is _U64 else N.Bitcast(a=e, ty=_U64)
    high = N.Binary(op="shr", a=bits, b=_c(32), ty=_U64)
    return [N.Cast(a=bits, ty=_U32), N.Cast(a=high, ty=_U32)]


def _operands(cond: N.ExprNode) -> list[tuple[str, N.ExprNode]]:
    """The non-constant operands of a comparison (logged with a failed assert), named by
    their text when it is short, else a load by its buffer (`x[...]`), else by its side."""
    from vyre.backends.reference.render import expr as expr_text

    if not (isinstance(cond, N.Binary) and cond.op in N.COMPARISON_OPS):
        return []
    out: list[tuple[str, N.ExprNode]] = []
    for side, e in (("left", cond.a), ("right", cond.b)):
        if not isinstance(e, N.Const):
            text = _TYPED_LITERAL.sub(r"\1", expr_text(e))  # tile[0:u32] -> tile[0]
            if len(text) > OPERAND_TEXT:
                text = f"{e.buffer}[...]" if isinstance(e, N.Load) else f"{side} operand"
            out.append((text, e))
    return out


def _rewrite(program: N.Program) -> Instrumented:
    p = _prefix(program)
    log = f"{p}_log"
    seq = f"{p}_seq"
    sites: list[Site] = []
    counter = [0]

    def fresh(what: str) -> str:
        counter[0] += 1
        return f"{p}_{what}{counter[0]}"

    def record(stmt: N.Print | N.Assert, values: list[N.ExprNode]) -> list[N.StmtNode]:
        """Reserve, then write the record of `stmt` (`values` logged in order)."""
        named = _operands(stmt.cond) if isinstance(stmt, N.Assert) else []
        ops = [e for _, e in named]
        site = Site(stmt.kind, stmt.fmt, tuple(v.ty for v in values),
                    tuple((text, e.ty) for text, e in named),
                    stmt.site or site_of(program, stmt))
        sid = len(sites)
        sites.append(site)
        w = site.words
        out: list[N.StmtNode] = []
        words: list[N.ExprNode] = [_c(sid)]
        words += [N.Builtin(name="global_id", axis=a) for a in range(3)]
        words.append(N.Var(name=seq, ty=_U32))
        for v in (*values, *ops):
            # evaluated once, into a local: its words are stores of the local
            tmp = fresh("v")
            out.append(N.Let(name=tmp, value=v))
            words.extend(_encode(N.Var(name=tmp, ty=v.ty)))
        at = fresh("at")
        out += [
            N.Atomic(op="add", buffer=log, index=_c(1), value=_c(1)),
            N.Atomic(op="add", buffer=log, index=_c(0), value=_c(w), result=at),
        ]
        at_v = N.Var(name=at, ty=_U32)
        room = N.Binary(op="sub", a=N.Length(buffer=log), b=_c(HEADER_WORDS + w), ty=_U32)
        fits = N.Binary(op="le", a=at_v, b=room, ty=ScalarType.BOOL)
        start = N.Binary(op="add", a=at_v, b=_c(HEADER_WORDS), ty=_U32)
        stores: list[N.StmtNode] = [
            N.Store(buffer=log, index=start if j == 0 else
                    N.Binary(op="add", a=start, b=_c(j), ty=_U32), value=word)
            for j, word in enumerate(words)]
        inside = N.Binary(op="lt", a=start, b=N.Length(buffer=log), ty=ScalarType.BOOL)
        marker = N.If(cond=inside, then=(N.Store(buffer=log, index=start, value=_c(MARKER)),))
        out.append(N.If(cond=fits, then=tuple(stores), orelse=(marker,)))
        out.append(N.Assign(name=seq, value=N.Binary(
            op="add", a=N.Var(name=seq, ty=_U32), b=_c(1), ty=_U32)))
        return out

    def rewrite(s: N.StmtNode) -> list[N.StmtNode]:
        if isinstance(s, N.Print):
            return record(s, list(s.args))
        if isinstance(s, N.Assert):
            failed = N.Unary(op="not", a=s.cond, ty=ScalarType.BOOL)
            return [N.If(cond=failed, then=tuple(record(s, list(s.args))))]
        return [s]

    body = map_block(program.body, rewrite)
    decl = N.BufferDecl(name=log, ty=_U32, access="read_write")
    new = program.model_copy(update={
        "buffers": (*program.buffers, decl),
        "body": (N.Let(name=seq, value=_c(0)), *body),
    })
    return Instrumented(new, log, tuple(sites))


#: (for tests and tools) the rewrite itself, uncached
rewrite_uncached: Callable[[N.Program], Instrumented] = _rewrite
