"""Where the user wrote each statement of a built Program ("file:line"), for diagnostics
that run after the build (the reference backend's checked mode).

A Program carries no source locations (the wire format and the compile-cache keys stay
free of them); ProgramBuilder.build `remember`s its sites here, keyed by the Program
object's identity and dropped when the Program is collected. Programs made otherwise
(from_json, lowering, hand-built nodes) simply have none. This module must never hold a
Program alive nor change one.
"""

from __future__ import annotations

import weakref
from collections.abc import Mapping

from . import nodes as N

_BY_PROGRAM: dict[int, dict[int, str]] = {}


def _statements(stmts: tuple[N.StmtNode, ...] | tuple[N.Stmt, ...]) -> list[N.StmtNode]:
    out: list[N.StmtNode] = []
    for st in stmts:
        out.append(st)
        for name in ("then", "orelse", "body"):
            inner = getattr(st, name, None)
            if isinstance(inner, tuple):
                out.extend(_statements(inner))
    return out


def remember(program: N.Program, sites: Mapping[int, str]) -> None:
    """Keep the sites (id(statement) -> "file:line") of `program`'s own statements."""
    mine = {id(s): sites[id(s)] for s in _statements(program.body) if id(s) in sites}
    if not mine:
        return
    key = id(program)
    _BY_PROGRAM[key] = mine
    weakref.finalize(program, _BY_PROGRAM.pop, key, None)


def site_of(program: N.Program, statement: N.StmtNode | N.Stmt) -> str | None:
    """The user's "file:line" of one of `program`'s statements, when it was built here."""
    got = _BY_PROGRAM.get(id(program))
    return None if got is None else got.get(id(statement))


__all__ = ["remember", "site_of"]
