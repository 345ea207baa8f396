"""Plain-text tables for the command line (`vyre probe`, `vyre demo`, later `vyre bench`).

Formatting only: this module takes rows of already-computed strings and numbers and returns
text. It must never run a backend, time anything or decide pass/fail; it has no
dependencies beyond the standard library so every command can share it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["format_kv", "format_ms", "format_table", "ns_to_ms"]


def ns_to_ms(ns: int | float) -> float:
    """Nanoseconds as milliseconds."""
    return float(ns) / 1e6


def format_ms(ms: float | None) -> str:
    """A duration in milliseconds, with precision that suits its size ('-' for None)."""
    if ms is None:
        return "-"
    if ms < 1:
        return f"{ms:.3f} ms"
    if ms < 100:
        return f"{ms:.2f} ms"
    return f"{ms:.0f} ms"


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def _is_numeric(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def format_table(
    headers: Sequence[str],
    rows: Sequence[Sequence[Any]],
    *,
    align: Sequence[str] | None = None,
    indent: str = "",
) -> str:
    """A fixed-width text table with a header rule.

    Cells are converted with str() (None -> '-', bools -> yes/no). `align` gives one of
    'l' / 'r' per column; by default a column is right-aligned when all its cells are
    numbers. Multi-line cells are not supported: newlines are replaced by spaces.
    """
    ncols = len(headers)
    for i, row in enumerate(rows):
        if len(row) != ncols:
            raise ValueError(f"row {i} has {len(row)} cells, the table has {ncols} columns")
    text = [[_cell(c).replace("\n", " ") for c in row] for row in rows]
    if align is None:
        align = [
            "r" if rows and all(_is_numeric(row[c]) for row in rows) else "l"
            for c in range(ncols)
        ]
    elif len(align) != ncols:
        raise ValueError(f"align has {len(align)} entries, the table has {ncols} columns")
    widths = [
        max([len(h)] + [len(row[c]) for row in text]) for c, h in enumerate(headers)
    ]

    def line(cells: Sequence[str]) -> str:
        parts = [
            cell.rjust(w) if a == "r" else cell.ljust(w)
            for cell, w, a in zip(cells, widths, align)
        ]
        return (indent + "  ".join(parts)).rstrip()

    out = [line(list(headers)), indent + "  ".join("-" * w for w in widths)]
    out.extend(line(row) for row in text)
    return "\n".join(out)


def format_kv(pairs: Mapping[str, Any] | Sequence[tuple[str, Any]], *, indent: str = "") -> str:
    """Aligned 'key: value' lines."""
    items = list(pairs.items()) if isinstance(pairs, Mapping) else list(pairs)
    if not items:
        return ""
    width = max(len(k) for k, _ in items)
    return "\n".join(f"{indent}{k + ':':<{width + 1}} {_cell(v)}" for k, v in items)
