"""The element-wise stage kernels of the C front end (scans live in cpp_scan).

Every kernel works on one u32 word per byte except `splice_flags` / `splice_scatter`, which
read the source as a u8 buffer of its bytes, and `finalize`, which writes its three outputs
as u8 buffers (one invocation per byte: each stores its own byte, next to its
neighbours', docs/IR.md "Narrow integers"). Sizes that are only known on the device (the spliced
length m1, the stripped length m2) are read from 1-word buffers, so no stage needs a host
round trip. The rules are cpp_rules'; this module only builds Programs and must never
allocate, dispatch or decide the order of stages.
"""

from __future__ import annotations

from functools import cache

from vyre.builder import BufferRef, ProgramBuilder, Value, select
from vyre.ir.nodes import Program
from vyre.ir.types import ScalarType

from .cpp_rules import (
    BACKSLASH,
    CLASS_DIGIT,
    CLASS_IDENT,
    CLASS_LITERAL,
    CLASS_NEWLINE,
    CLASS_OTHER,
    CLASS_PUNCT,
    CLASS_SPACE,
    CR,
    DQUOTE,
    IDENTITY_FN,
    LF,
    SLASH,
    SPACE,
    SQUOTE,
    ST_BLOCK,
    ST_CHAR,
    ST_CHAR_ESC,
    ST_EDGE,
    ST_LINE,
    ST_NORMAL,
    ST_STRING,
    ST_STRING_ESC,
    STAR,
)

U32 = ScalarType.U32
U8 = ScalarType.U8


def _u(k: ProgramBuilder, x: int) -> Value:
    return k.lit(x, U32)


def _in(k: ProgramBuilder, b: Value, *values: int) -> Value:
    out = b == _u(k, values[0])
    for v in values[1:]:
        out = out | (b == _u(k, v))
    return out


def _between(k: ProgramBuilder, b: Value, lo: int, hi: int) -> Value:
    return (b >= _u(k, lo)) & (b <= _u(k, hi))


@cache
def splice_flags_program(workgroup_size: int) -> Program:
    """keep[i] = 0 where source byte i belongs to a backslash-(CR)LF splice, else 1."""
    k = ProgramBuilder("cpp_splice_flags", workgroup_size=workgroup_size)
    src = k.buffer("src", U8, "read")
    keep = k.buffer("keep", U32, "write")
    n = k.param("n", U32)
    i = k.let(k.global_linear_id(), name="i")
    with k.if_(i < n):
        zero = _u(k, 0)
        c = k.let(src[i], name="c")
        p1 = k.let(select(i >= 1, src[select(i >= 1, i - 1, zero)], zero), name="p1")
        p2 = k.let(select(i >= 2, src[select(i >= 2, i - 2, zero)], zero), name="p2")
        n1 = k.let(select(i + 1 < n, src[i + 1], zero), name="n1")
        n2 = k.let(select(i + 2 < n, src[i + 2], zero), name="n2")
        bs, cr, lf = _u(k, BACKSLASH), _u(k, CR), _u(k, LF)
        gone = (
            ((c == bs) & (n1 == lf))
            | ((c == bs) & (n1 == cr) & (n2 == lf))
            | ((c == cr) & (p1 == bs) & (n1 == lf))
            | ((c == lf) & (p1 == bs))
            | ((c == lf) & (p1 == cr) & (p2 == bs))
        )
        keep[i] = select(gone, zero, _u(k, 1))
    return k.build()


def _kept(k: ProgramBuilder, pos: BufferRef, total: BufferRef, i: Value, n: Value) -> Value:
    """Whether element i was kept, from the exclusive scan of its 0/1 flags."""
    nxt = select(i + 1 < n, pos[select(i + 1 < n, i + 1, i)], total[0])
    return nxt != pos[i]


@cache
def splice_scatter_program(workgroup_size: int) -> Program:
    """spliced[pos[i]] = source byte i for every kept byte (one u32 per byte)."""
    k = ProgramBuilder("cpp_splice_scatter", workgroup_size=workgroup_size)
    src = k.buffer("src", U8, "read")
    pos = k.buffer("pos", U32, "read")
    m1 = k.buffer("m1", U32, "read")
    out = k.buffer("spliced", U32, "write")
    n = k.param("n", U32)
    i = k.let(k.global_linear_id(), name="i")
    with k.if_(i < n), k.if_(_kept(k, pos, m1, i, n)):
        out[pos[i]] = src[i]
    return k.build()


@cache
def lex_delta_program(workgroup_size: int) -> Program:
    """delta[i] = the DFA transition function of spliced byte i, packed 4 bits per state."""
    k = ProgramBuilder("cpp_lex_delta", workgroup_size=workgroup_size)
    text = k.buffer("spliced", U32, "read")
    m1b = k.buffer("m1", U32, "read")
    delta = k.buffer("delta", U32, "write")
    n = k.param("n", U32)
    i = k.let(k.global_linear_id(), name="i")
    with k.if_(i < n):
        m1 = k.let(m1b[0], name="m1v")
        c = k.let(text[i], name="c")
        nx = k.let(select(i + 1 < m1, text[i + 1], _u(k, 0)), name="nx")
        slash, star = c == _u(k, SLASH), c == _u(k, STAR)
        lf, bsl = c == _u(k, LF), c == _u(k, BACKSLASH)
        dq, sq = c == _u(k, DQUOTE), c == _u(k, SQUOTE)
        nx_star, nx_slash = nx == _u(k, STAR), nx == _u(k, SLASH)

        def st(s: int) -> Value:
            return _u(k, s)

        to = {
            ST_NORMAL: select(slash & nx_star, st(ST_EDGE),
                              select(slash & nx_slash, st(ST_LINE),
                                     select(dq, st(ST_STRING),
                                            select(sq, st(ST_CHAR), st(ST_NORMAL))))),
            ST_STRING: select(lf | dq, st(ST_NORMAL),
                              select(bsl, st(ST_STRING_ESC), st(ST_STRING))),
            ST_STRING_ESC: select(lf, st(ST_NORMAL), st(ST_STRING)),
            ST_CHAR: select(lf | sq, st(ST_NORMAL), select(bsl, st(ST_CHAR_ESC), st(ST_CHAR))),
            ST_CHAR_ESC: select(lf, st(ST_NORMAL), st(ST_CHAR)),
            ST_LINE: select(lf, st(ST_NORMAL), st(ST_LINE)),
            ST_BLOCK: select(star & nx_slash, st(ST_EDGE), st(ST_BLOCK)),
            ST_EDGE: select(slash, st(ST_NORMAL), st(ST_BLOCK)),
        }
        word: Value | None = None
        for s, target in to.items():
            part = target << (4 * s)
            word = part if word is None else word | part
        delta[i] = select(i < m1, word, _u(k, IDENTITY_FN))
    return k.build()


def _class_expr(k: ProgramBuilder, b: Value, lit: Value) -> Value:
    """cpp_rules.byte_class as a kernel expression."""
    def c(x: int) -> Value:
        return _u(k, x)

    space = _in(k, b, 0x20, 0x09, 0x0D, 0x0B, 0x0C)
    ident = (_between(k, b, 0x41, 0x5A) | _between(k, b, 0x61, 0x7A) | (b == c(0x5F))
             | (b >= c(0x80)))
    return select(lit, c(CLASS_LITERAL),
                  select(b == c(LF), c(CLASS_NEWLINE),
                         select(space, c(CLASS_SPACE),
                                select(ident, c(CLASS_IDENT),
                                       select(_between(k, b, 0x30, 0x39), c(CLASS_DIGIT),
                                              select(_between(k, b, 0x21, 0x7E),
                                                     c(CLASS_PUNCT), c(CLASS_OTHER)))))))


@cache
def strip_flags_program(workgroup_size: int) -> Program:
    """From each byte's lexer state: keep flag and info = byte | class << 8 | litstart << 16.

    A comment's opening '/' is kept as a space; the rest of the comment is dropped.
    Elements at or past m1 get keep = 0.
    """
    k = ProgramBuilder("cpp_strip_flags", workgroup_size=workgroup_size)
    text = k.buffer("spliced", U32, "read")
    fns = k.buffer("prefix", U32, "read")
    m1b = k.buffer("m1", U32, "read")
    keep = k.buffer("keep", U32, "write")
    info = k.buffer("info", U32, "write")
    n = k.param("n", U32)
    i = k.let(k.global_linear_id(), name="i")
    with k.if_(i < n):
        m1 = k.let(m1b[0], name="m1v")
        with k.if_(i < m1):
            s = k.let(fns[i] & _u(k, 15), name="state")  # applied to ST_NORMAL (= 0)
            c = k.let(text[i], name="c")
            nx = k.let(select(i + 1 < m1, text[i + 1], _u(k, 0)), name="nx")
            normal = s == _u(k, ST_NORMAL)
            opener = k.let(normal & (c == _u(k, SLASH)) & _in(k, nx, STAR, SLASH),
                           name="opener")
            comment = (opener | _in(k, s, ST_BLOCK, ST_EDGE)
                       | ((s == _u(k, ST_LINE)) & (c != _u(k, LF))))
            lit_start = k.let(normal & _in(k, c, DQUOTE, SQUOTE), name="lit_start")
            lit = lit_start | (_in(k, s, ST_STRING, ST_STRING_ESC, ST_CHAR, ST_CHAR_ESC)
                               & (c != _u(k, LF)))
            b = k.let(select(opener, _u(k, SPACE), c), name="outb")
            cls = _class_expr(k, b, lit)
            keep[i] = select(comment & ~opener, _u(k, 0), _u(k, 1))
            info[i] = b | (cls << 8) | (select(lit_start, _u(k, 1), _u(k, 0)) << 16)
        with k.else_():
            keep[i] = _u(k, 0)
    return k.build()


@cache
def strip_scatter_program(workgroup_size: int) -> Program:
    """out[pos[i]] = info[i] for every kept element."""
    k = ProgramBuilder("cpp_strip_scatter", workgroup_size=workgroup_size)
    pos = k.buffer("pos", U32, "read")
    m2 = k.buffer("m2", U32, "read")
    info = k.buffer("info", U32, "read")
    out = k.buffer("stripped", U32, "write")
    n = k.param("n", U32)
    i = k.let(k.global_linear_id(), name="i")
    with k.if_(i < n), k.if_(_kept(k, pos, m2, i, n)):
        out[pos[i]] = info[i]
    return k.build()


@cache
def finalize_program(workgroup_size: int) -> Program:
    """Text, class and token-start byte of output byte idx < m2, each into a u8 buffer
    (bytes past m2 are left as they are: the readback stops at m2)."""
    k = ProgramBuilder("cpp_finalize", workgroup_size=workgroup_size)
    info = k.buffer("stripped", U32, "read")
    m2b = k.buffer("m2", U32, "read")
    text = k.buffer("text", U8, "write")
    classes = k.buffer("classes", U8, "write")
    bounds = k.buffer("bounds", U8, "write")
    n = k.param("n", U32)
    idx = k.let(k.global_linear_id(), name="idx")
    with k.if_(idx < n), k.if_(idx < m2b[0]):
        zero = _u(k, 0)
        x = k.let(info[idx], name="x")
        prev = select(idx >= 1, info[select(idx >= 1, idx - 1, zero)], zero)
        cls = k.let((x >> 8) & _u(k, 15), name="cls")
        pcls = (prev >> 8) & _u(k, 15)
        word_prev = (pcls == _u(k, CLASS_IDENT)) | (pcls == _u(k, CLASS_DIGIT))
        in_word = (cls == _u(k, CLASS_IDENT)) | (cls == _u(k, CLASS_DIGIT))
        start = (
            _in(k, cls, CLASS_PUNCT, CLASS_OTHER)
            | ((cls == _u(k, CLASS_LITERAL)) & (((x >> 16) & _u(k, 1)) == _u(k, 1)))
            | (in_word & ~word_prev)
        )
        text[idx] = x  # (its low byte: a u8 store keeps the low 8 bits)
        classes[idx] = cls
        bounds[idx] = select(start, _u(k, 1), zero)
    return k.build()
