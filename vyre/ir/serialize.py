"""The versioned JSON wire format of a Program.

    {"format": "vyre.program", "version": 1, "program": {...the Program's fields...}}

`to_json` writes it; `from_json` reads it back into an equal Program (same content hash),
float constants included bit for bit: NaN, Infinity and -Infinity are written as the JSON
extensions ``NaN`` / ``Infinity`` / ``-Infinity`` and -0.0 keeps its sign (NaN payloads are
not kept: every NaN reads back as the canonical quiet NaN).

`from_json` treats its input as hostile: every problem (not UTF-8, malformed or truncated
JSON, nesting past the parser's limit, a wrong format tag, a version newer than this vyre,
unknown node kinds, extra or missing fields, wrongly typed values, a Program that breaks the
IR's rules) is raised as `InvalidProgram` with a message saying what and where; it never
lets a RecursionError, a pydantic ValidationError or a JSON decoder error escape. Parsing is
strict (no "3" for 3, no true for a number, no "64" for a workgroup size); the one leniency
is that an integral float (1.0) given for an integer constant reads as that integer, as it
does in the builder. Documents written by `to_json` never rely on it.

This module must never execute anything a document says, import a backend, or accept a
document it cannot fully validate.
"""

from __future__ import annotations

from typing import Any, Final, Literal

import pydantic_core
from pydantic import BaseModel, ConfigDict, ValidationError

from ..errors import InvalidProgram
from .nodes import Program, check_tree_size
from .validate import MAX_NODES, validate

FORMAT: Final = "vyre.program"
VERSION: Final = 1
MAX_DOCUMENT_BYTES = 64 * 1024 * 1024
"""Largest document from_json reads (a guard against memory exhaustion)."""
MAX_DOCUMENT_OBJECTS = MAX_NODES + 65_536
"""Most JSON objects ("{") a document may hold: nodes plus declarations, checked before
parsing so a document of millions of trivial statements costs milliseconds, not gigabytes."""


class Envelope(BaseModel):
    """The outer object of the wire format."""

    model_config = ConfigDict(frozen=True, extra="forbid", ser_json_inf_nan="constants")

    format: Literal["vyre.program"] = FORMAT
    version: Literal[1] = VERSION
    program: Program


def to_json(program: Program, *, indent: int | None = None, check: bool = True) -> str:
    """The wire-format document of `program` (validated first unless check=False)."""
    if not isinstance(program, Program):
        raise InvalidProgram(f"to_json needs a vyre Program, got {type(program).__name__}")
    if check:
        validate(program)
    else:
        check_tree_size(program)  # the dump below is a tree: bound it, whatever `check` says
    return Envelope(program=program).model_dump_json(indent=indent)


def from_json(text: str | bytes) -> Program:
    """Parse and validate a wire-format document; InvalidProgram says what is wrong."""
    if isinstance(text, (bytes, bytearray, memoryview)):
        raw = bytes(text)
        if len(raw) > MAX_DOCUMENT_BYTES:
            raise _too_big(len(raw))
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InvalidProgram(f"wire format: the document is not UTF-8 text ({exc})") from None
    if not isinstance(text, str):
        raise InvalidProgram(
            f"from_json needs the document as str or bytes, got {type(text).__name__}"
        )
    if len(text) > MAX_DOCUMENT_BYTES:
        raise _too_big(len(text))
    # Every node is a JSON object, and a valid document has no "{" inside its strings (names
    # are identifiers): counting them bounds the work before anything is built.
    objects = text.count("{")
    if objects > MAX_DOCUMENT_OBJECTS:
        raise InvalidProgram(
            f"wire format: the document has {objects} JSON objects; a Program has at most "
            f"MAX_NODES={MAX_NODES} nodes (plus declarations, {MAX_DOCUMENT_OBJECTS} objects "
            "in all), so it is refused before parsing; keep shared values in a let"
        )
    doc = _parse(text)
    _check_header(doc)
    try:
        envelope = Envelope.model_validate_json(text, strict=True)
    except ValidationError as exc:
        raise InvalidProgram(_describe(exc)) from None
    except (RecursionError, ValueError) as exc:  # belt and braces: never leak these
        raise InvalidProgram(f"wire format: the document cannot be read ({exc})") from None
    validate(envelope.program)
    return envelope.program


def _too_big(n: int) -> InvalidProgram:
    return InvalidProgram(
        f"wire format: the document is {n} bytes; at most {MAX_DOCUMENT_BYTES} are read"
    )


def _parse(text: str) -> Any:
    if not text.strip():
        raise InvalidProgram("wire format: the document is empty; expected a JSON object")
    try:
        # jiter (pydantic-core's parser): iterative, with a nesting limit, so hostile
        # nesting gives a ValueError here, never a RecursionError.
        return pydantic_core.from_json(text, allow_inf_nan=True)
    except ValueError as exc:
        msg = str(exc)
        if "EOF while parsing" in msg:
            raise InvalidProgram(
                f"wire format: the JSON is truncated ({msg}); the document ends before it is "
                "complete: send the whole document"
            ) from None
        if "recursion limit" in msg:
            raise InvalidProgram(
                f"wire format: the JSON is nested too deeply ({msg}); a valid Program nests "
                "far less (see vyre.ir.validate.MAX_DEPTH)"
            ) from None
        raise InvalidProgram(f"wire format: malformed JSON ({msg})") from None


def _check_header(doc: Any) -> None:
    if not isinstance(doc, dict):
        raise InvalidProgram(
            f"wire format: expected a JSON object with format/version/program, got "
            f"{_json_kind(doc)}"
        )
    fmt = doc.get("format")
    if fmt != FORMAT:
        raise InvalidProgram(
            f"wire format: format tag is {fmt!r}, expected {FORMAT!r}; this is not a vyre "
            "program document"
        )
    version = doc.get("version")
    if isinstance(version, bool) or not isinstance(version, int):
        raise InvalidProgram(
            f"wire format: version must be an integer, got {_json_kind(version)} {version!r}"
        )
    if version > VERSION:
        raise InvalidProgram(
            f"wire format: version {version} is newer than this vyre understands ({VERSION}); "
            "upgrade vyre"
        )
    if version < 1:
        raise InvalidProgram(f"wire format: version {version} does not exist (current: {VERSION})")
    extra = sorted(set(doc) - {"format", "version", "program"})
    if extra:
        raise InvalidProgram(
            f"wire format: unknown top-level field(s) {extra}; the envelope has only "
            "format, version and program"
        )
    if "program" not in doc:
        raise InvalidProgram("wire format: the document has no 'program' field")
    if not isinstance(doc["program"], dict):
        raise InvalidProgram(
            f"wire format: 'program' must be an object, got {_json_kind(doc['program'])}"
        )


def _json_kind(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "a boolean"
    if isinstance(v, (int, float)):
        return "a number"
    if isinstance(v, str):
        return "a string"
    if isinstance(v, list):
        return "an array"
    return "an object"


_KINDS = frozenset({
    "const", "var", "param", "builtin", "load", "length", "unary", "binary", "call", "select",
    "cast", "bitcast", "let", "assign", "store", "if", "for", "while", "break", "continue",
    "return", "barrier", "atomic", "subgroup",
})
_NODE_FIELDS = frozenset({"index", "value", "a", "b", "cond", "start", "end", "comparand", "lane"})
_UNION_MEMBERS = frozenset({"bool", "int", "float"})


def _loc(loc: tuple[int | str, ...]) -> str:
    """pydantic's error location as a path like ``program.body[1].index``.

    pydantic puts the discriminator tag of a node union (``store``) and the member of a
    plain union (``int``) into the location; they are left out of the path.
    """
    out = ""
    prev: int | str | None = None
    prev2: int | str | None = None
    for part in loc:
        skip = (
            isinstance(part, str)
            and (
                (part in _KINDS and (isinstance(prev, int) or prev in _NODE_FIELDS))
                or (part in _UNION_MEMBERS and prev == "value" and prev2 == "const")
            )
        )
        prev2, prev = prev, part
        if skip:
            continue
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out or "(document)"


def _describe(exc: ValidationError) -> str:
    grouped: dict[str, list[str]] = {}
    for err in exc.errors(include_url=False):
        inp = repr(err.get("input"))
        if len(inp) > 60:
            inp = inp[:57] + "..."
        grouped.setdefault(_loc(tuple(err["loc"])), []).append(f"{err['msg']} (got {inp})")
    lines = [f"at {loc}: {' / '.join(dict.fromkeys(msgs))}" for loc, msgs in grouped.items()]
    more = f" (and {len(lines) - 3} more)" if len(lines) > 3 else ""
    return (
        "wire format: the program does not match the IR schema: "
        + "; ".join(lines[:3])
        + more
        + ". Node kinds and fields are listed in vyre/ir/nodes.py; documents written by "
        "vyre.ir.to_json always match it"
    )


__all__ = ["FORMAT", "MAX_DOCUMENT_BYTES", "MAX_DOCUMENT_OBJECTS", "VERSION", "Envelope", "from_json", "to_json"]
