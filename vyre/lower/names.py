"""Identifiers for user names in generated source: one injective scheme for every printer.

ASCII letters and digits stay, `_` becomes `_1`, anything else `_<hex>_`; a printer adds a
prefix per namespace (buffers, params, locals, ...), so no user name can collide with a
keyword, a builtin, a generated name or another user name (names the lowering invents
contain a `.`, which no user name can). This module must never know a target language.
"""

from __future__ import annotations

import re
from functools import lru_cache

_OK = re.compile(r"[A-Za-z0-9]")


def mangle(name: str) -> str:
    """An identifier fragment for `name` (injective; the caller adds a prefix)."""
    if name.isascii() and name.isalnum():
        return name
    return _mangled(name)


@lru_cache(maxsize=4096)  # (the lowering's locals, lw.1, lw.2, ..., recur in every program)
def _mangled(name: str) -> str:
    out = []
    for ch in name:
        if _OK.match(ch):
            out.append(ch)
        elif ch == "_":
            out.append("_1")
        else:
            out.append(f"_{ord(ch):x}_")
    return "".join(out)
