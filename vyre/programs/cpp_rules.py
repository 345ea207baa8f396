"""The exact rules of the C front end, as constants and tiny pure functions.

Both the plain-Python implementation (cpp_python) and the GPU kernels (cpp_kernels) follow
what is stated here; the rules themselves are documented in full in `cpp_frontend`'s
docstring. This module holds data and byte-level predicates only: it must never import a
backend, build a kernel or process a whole buffer.
"""

from __future__ import annotations

# ------------------------------------------------------------------ bytes
BACKSLASH = 0x5C
LF = 0x0A
CR = 0x0D
SLASH = 0x2F
STAR = 0x2A
DQUOTE = 0x22
SQUOTE = 0x27
SPACE = 0x20

# ------------------------------------------------------------------ byte classes
CLASS_SPACE = 0  # ' ', \t, \r, \v, \f (and the space a comment becomes)
CLASS_IDENT = 1  # A-Z a-z _ and every byte >= 0x80 (UTF-8 in identifiers)
CLASS_DIGIT = 2  # 0-9
CLASS_PUNCT = 3  # every other printable ASCII byte 0x21..0x7E
CLASS_LITERAL = 4  # any byte of a string or char literal, its quotes included
CLASS_NEWLINE = 5  # \n outside literals (a newline always ends a literal)
CLASS_OTHER = 6  # remaining control bytes: 0x00-0x08, 0x0E-0x1F, 0x7F

SPACE_BYTES = frozenset({0x20, 0x09, 0x0D, 0x0B, 0x0C})

# ------------------------------------------------------------------ lexer DFA
# The state *before* a byte. Transitions look at the byte and the byte after it.
ST_NORMAL = 0  # code
ST_STRING = 1  # inside "..."
ST_STRING_ESC = 2  # inside "...", just after a backslash
ST_CHAR = 3  # inside '...'
ST_CHAR_ESC = 4  # inside '...', just after a backslash
ST_LINE = 5  # inside // ... (up to, not including, the newline)
ST_BLOCK = 6  # inside /* ... */
ST_EDGE = 7  # on the second byte of a block comment's opener "/*" or closer "*/"
NUM_STATES = 8
IDENTITY_FN = 0x76543210  # state s -> s, 4 bits per state


def byte_class(b: int, in_literal: bool) -> int:
    """The class of output byte `b` (see the CLASS_* constants)."""
    if in_literal:
        return CLASS_LITERAL
    if b == LF:
        return CLASS_NEWLINE
    if b in SPACE_BYTES:
        return CLASS_SPACE
    if (0x41 <= b <= 0x5A) or (0x61 <= b <= 0x7A) or b == 0x5F or b >= 0x80:
        return CLASS_IDENT
    if 0x30 <= b <= 0x39:
        return CLASS_DIGIT
    if 0x21 <= b <= 0x7E:
        return CLASS_PUNCT
    return CLASS_OTHER


def starts_token(cls: int, prev_cls: int, literal_start: bool) -> bool:
    """Token boundary rule for one output byte, given the previous output byte's class.

    `prev_cls` is CLASS_SPACE for the first byte.
    """
    if cls in (CLASS_PUNCT, CLASS_OTHER):
        return True
    if cls == CLASS_LITERAL:
        return literal_start
    if cls in (CLASS_IDENT, CLASS_DIGIT):
        return prev_cls not in (CLASS_IDENT, CLASS_DIGIT)
    return False


def transition(state: int, b: int, nxt: int) -> int:
    """The DFA step over byte `b` (followed by `nxt`, 0 at the end) from `state`."""
    if state == ST_NORMAL:
        if b == SLASH and nxt == STAR:
            return ST_EDGE
        if b == SLASH and nxt == SLASH:
            return ST_LINE
        if b == DQUOTE:
            return ST_STRING
        if b == SQUOTE:
            return ST_CHAR
        return ST_NORMAL
    if state == ST_STRING:
        if b in (LF, DQUOTE):
            return ST_NORMAL
        return ST_STRING_ESC if b == BACKSLASH else ST_STRING
    if state == ST_STRING_ESC:
        return ST_NORMAL if b == LF else ST_STRING
    if state == ST_CHAR:
        if b in (LF, SQUOTE):
            return ST_NORMAL
        return ST_CHAR_ESC if b == BACKSLASH else ST_CHAR
    if state == ST_CHAR_ESC:
        return ST_NORMAL if b == LF else ST_CHAR
    if state == ST_LINE:
        return ST_NORMAL if b == LF else ST_LINE
    if state == ST_BLOCK:
        return ST_EDGE if (b == STAR and nxt == SLASH) else ST_BLOCK
    # ST_EDGE: the '*' of an opener (-> inside) or the '/' of a closer (-> code)
    return ST_NORMAL if b == SLASH else ST_BLOCK


def transition_word(b: int, nxt: int) -> int:
    """The whole transition function of one byte, packed 4 bits per state."""
    return sum(transition(s, b, nxt) << (4 * s) for s in range(NUM_STATES))


def compose_words(first: int, then: int) -> int:
    """Packed function `first` followed by `then` (associative; IDENTITY_FN is neutral)."""
    out = 0
    for s in range(NUM_STATES):
        mid = (first >> (4 * s)) & 15
        out |= ((then >> (4 * mid)) & 15) << (4 * s)
    return out


def byte_flags(state: int, b: int, nxt: int) -> tuple[bool, bool, bool, bool]:
    """(in_comment, comment_opener, in_literal, literal_start) of a spliced byte."""
    opener = state == ST_NORMAL and b == SLASH and nxt in (STAR, SLASH)
    in_comment = opener or state in (ST_BLOCK, ST_EDGE) or (state == ST_LINE and b != LF)
    lit_start = state == ST_NORMAL and b in (DQUOTE, SQUOTE)
    in_lit = lit_start or (
        state in (ST_STRING, ST_STRING_ESC, ST_CHAR, ST_CHAR_ESC) and b != LF
    )
    return in_comment, opener, in_lit, lit_start
