"""The format strings of `vyre.print` / `vyre.assert_`: checked when the Program is built
and validated, applied on the host to the values a dispatch logged.

A format is Python's `str.format` mini-language restricted to what needs no Python object:
automatically numbered fields `{}` with an optional spec (`{:08x}`, `{:.3f}`, `{:>6}`), one
per value, no names, indices, attributes or conversions (`{!r}`). A field without a spec
prints its value exactly: integers in decimal, bool as True / False, floats as the
shortest text that reads back to the same bits in their own type (NumPy's repr rules:
`0.1` for the f32 nearest 0.1, `nan`, `-inf`, `-0.0`), the same on every backend.

This module must never touch a device or the IR's semantics.
"""

from __future__ import annotations

import string
from typing import Any

import numpy as np

from vyre.ir.types import ScalarType

_FORMATTER = string.Formatter()
# a value of each type to try a spec on when the Program is validated
_SAMPLE: dict[ScalarType, Any] = {
    ScalarType.BOOL: True, ScalarType.I32: -1, ScalarType.U32: 1, ScalarType.I64: -1,
    ScalarType.U64: 1, ScalarType.F16: 1.5, ScalarType.F32: 1.5, ScalarType.F64: 1.5,
}


def fields(fmt: str) -> list[tuple[str, str]] | str:
    """(literal text, spec) per part of `fmt`: the text before a replacement field and the
    field's spec, or spec "\\0" for text that no field follows; or a message saying what
    is wrong."""
    try:
        parts = list(_FORMATTER.parse(fmt))
    except ValueError as exc:
        return (f"format {fmt!r} is malformed ({exc}); write {{}} for a value and {{{{ / }}}} "
                "for a literal brace")
    out: list[tuple[str, str]] = []
    for literal, name, spec, conversion in parts:
        if name is None:
            out.append((literal, "\0"))
            continue
        if name != "" or conversion is not None:
            return (f"format {fmt!r}: field {{{name}{'!' + conversion if conversion else ''}}} "
                    "is not supported; write {} (optionally {:spec}) per value, in order")
        if spec and "{" in spec:
            return f"format {fmt!r}: a nested field in a spec ({spec!r}) is not supported"
        out.append((literal, spec or ""))
    return out


def check_format(fmt: object, types: list[ScalarType]) -> str | None:
    """None if `fmt` (a str) formats values of `types`, else what is wrong."""
    if not isinstance(fmt, str):
        return f"the format must be a str, got {type(fmt).__name__}"
    parsed = fields(fmt)
    if isinstance(parsed, str):
        return parsed
    specs = [spec for _, spec in parsed if spec != "\0"]
    if len(specs) != len(types):
        return (f"format {fmt!r} has {len(specs)} field(s) {{}} for {len(types)} value(s); "
                "give one {} per value")
    for spec, ty in zip(specs, types):
        try:
            format(_SAMPLE[ty], spec)
        except (ValueError, TypeError) as exc:
            return f"format {fmt!r}: spec {spec!r} does not format a {ty} value ({exc})"
    return None


def exact(value: Any, ty: ScalarType) -> str:
    """`value` (decoded from the log) as text that reads back to the same bits."""
    if ty is ScalarType.BOOL:
        return "True" if value else "False"
    if ty.is_float:
        return str(value)  # NumPy's shortest round-trip repr in the value's own type
    return str(int(value))


def render(fmt: str, values: list[Any], types: list[ScalarType]) -> str:
    """`fmt` applied to the decoded `values` (checked by check_format at build time)."""
    parsed = fields(fmt)
    assert not isinstance(parsed, str)  # (validated when the Program was)
    out: list[str] = []
    it = iter(zip(values, types))
    for literal, spec in parsed:
        out.append(literal)
        if spec == "\0":
            continue
        v, ty = next(it)
        if spec:
            py: Any = bool(v) if ty is ScalarType.BOOL else (
                float(v) if ty.is_float else int(v))
            out.append(format(py, spec))
        else:
            out.append(exact(v, ty))
    return "".join(out)


def print_format(items: tuple[Any, ...], sep: str, is_value: Any) -> tuple[str, list[Any]]:
    """A format and its values from `vyre.print`'s arguments: `print("i = {}", i)` (a str
    first with fields: a format) or `print("i =", i, "x =", x)` (like Python's print:
    every str is text, every other item a value, joined by `sep`)."""
    if items and isinstance(items[0], str):
        parsed = fields(items[0])
        if isinstance(parsed, str) or any(spec != "\0" for _, spec in parsed):
            return items[0], list(items[1:])
    parts: list[str] = []
    values: list[Any] = []
    for x in items:
        if isinstance(x, str):
            parts.append(x.replace("{", "{{").replace("}", "}}"))
        elif is_value(x):
            parts.append("{}")
            values.append(x)
        else:
            raise TypeError(f"{x!r} ({type(x).__name__})")
    return sep.replace("{", "{{").replace("}", "}}").join(parts), values


def from_bits(words: np.ndarray, ty: ScalarType) -> Any:
    """The value of type `ty` held in one or two little-endian u32 log words."""
    w = [int(x) for x in words]
    if ty is ScalarType.BOOL:
        return w[0] != 0
    if ty is ScalarType.U32:
        return w[0]
    if ty is ScalarType.I32:
        return int(np.uint32(w[0]).view(np.int32))
    if ty is ScalarType.F32:
        return np.uint32(w[0]).view(np.float32)
    if ty is ScalarType.F16:  # logged widened to f32 (exact)
        return np.float16(np.uint32(w[0]).view(np.float32))
    bits = w[0] | (w[1] << 32)
    if ty is ScalarType.U64:
        return bits
    if ty is ScalarType.I64:
        return int(np.uint64(bits).view(np.int64))
    return float(np.uint64(bits).view(np.float64))


def words_of(ty: ScalarType) -> int:
    """Log words (u32) a value of `ty` takes."""
    return 2 if ty.bits == 64 else 1
