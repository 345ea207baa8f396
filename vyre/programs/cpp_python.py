"""The plain-Python C front end: the oracle the GPU pipeline must match byte for byte.

It is written as an ordinary sequential scanner (not as the DFA the GPU uses), so that the
two are independent statements of the rules in `cpp_frontend`'s docstring. This module must
never import numpy or a backend, and must never be "optimised" into the GPU's algorithm.
"""

from __future__ import annotations

from dataclasses import dataclass

from ._common import LibraryArgumentError
from .cpp_rules import (
    BACKSLASH,
    CLASS_NEWLINE,
    CLASS_SPACE,
    CR,
    DQUOTE,
    LF,
    SLASH,
    SPACE,
    SQUOTE,
    STAR,
    byte_class,
    starts_token,
)


@dataclass(frozen=True)
class FrontendResult:
    """Spliced and comment-stripped bytes, with a class and a boundary flag per byte."""

    text: bytes
    classes: bytes  # one CLASS_* value per byte of `text`
    boundaries: bytes  # 1 where a token starts, else 0, per byte of `text`

    def __post_init__(self) -> None:
        if not len(self.text) == len(self.classes) == len(self.boundaries):
            raise LibraryArgumentError(
                f"text, classes and boundaries differ in length: "
                f"{len(self.text)}, {len(self.classes)}, {len(self.boundaries)}; give one "
                "class and one boundary flag per byte of text"
            )

    def tokens(self) -> list[bytes]:
        """The tokens (each from its boundary up to the next boundary or whitespace)."""
        out: list[bytes] = []
        start = -1
        for i, (cls, bnd) in enumerate(zip(self.classes, self.boundaries)):
            if bnd or cls in (CLASS_SPACE, CLASS_NEWLINE):
                if start >= 0:
                    out.append(self.text[start:i])
                start = i if bnd else -1
        if start >= 0:
            out.append(self.text[start:])
        return out


def splice(data: bytes) -> bytes:
    """Remove every backslash-LF and backslash-CR-LF pair (one pass, not repeated)."""
    out = bytearray()
    i, n = 0, len(data)
    while i < n:
        b = data[i]
        if b == BACKSLASH and i + 1 < n and data[i + 1] == LF:
            i += 2
            continue
        if b == BACKSLASH and i + 2 < n and data[i + 1] == CR and data[i + 2] == LF:
            i += 3
            continue
        out.append(b)
        i += 1
    return bytes(out)


def strip_comments(text: bytes) -> tuple[bytes, list[bool], list[bool]]:
    """Replace each comment with one space; also flag literal bytes and literal starts."""
    out = bytearray()
    lit: list[bool] = []
    lit_start: list[bool] = []
    i, n = 0, len(text)

    def emit(b: int, in_lit: bool, start: bool) -> None:
        out.append(b)
        lit.append(in_lit)
        lit_start.append(start)

    while i < n:
        b = text[i]
        nxt = text[i + 1] if i + 1 < n else -1
        if b == SLASH and nxt == STAR:
            end = text.find(b"*/", i + 2)
            i = n if end < 0 else end + 2
            emit(SPACE, False, False)
        elif b == SLASH and nxt == SLASH:
            end = text.find(b"\n", i + 2)
            i = n if end < 0 else end
            emit(SPACE, False, False)
        elif b in (DQUOTE, SQUOTE):
            quote = b
            emit(b, True, True)
            i += 1
            while i < n and text[i] != LF:
                c = text[i]
                emit(c, True, False)
                i += 1
                if c == quote:
                    break
                if c == BACKSLASH and i < n and text[i] != LF:
                    emit(text[i], True, False)
                    i += 1
        else:
            emit(b, False, False)
            i += 1
    return bytes(out), lit, lit_start


def cpp_frontend_python(data: bytes) -> FrontendResult:
    """Splice, strip comments, classify and mark token starts (rules: cpp_frontend)."""
    text, lit, lit_start = strip_comments(splice(bytes(data)))
    classes = bytes(byte_class(b, in_lit) for b, in_lit in zip(text, lit))
    bounds = bytearray()
    prev = CLASS_SPACE
    for cls, start in zip(classes, lit_start):
        bounds.append(1 if starts_token(cls, prev, start) else 0)
        prev = cls
    return FrontendResult(text, classes, bytes(bounds))
