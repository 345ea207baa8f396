"""The exact sum's number format and scratch layout: how many signed 32-bit digits a
float type's accumulator has (`Format`), where each element's slot, used bit, digits and
flag word sit in the scratch buffer, and the IR helpers (fields of a float's bits, its
fixed-point significand) that the rewrite and the finalisation both build from.

Constants and pure IR builders: this module must never rewrite a Program.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...ir.nodes import (
    Binary,
    Cast,
    Const,
    Expr,
    Let,
    Select,
    Stmt,
    Var,
)
from ...ir.types import ScalarType

FLAG_POS_INF, FLAG_NEG_INF, FLAG_NAN = 1, 2, 4
FINALIZE_WORKGROUP = 256
SLOT_MIN_ELEMENTS = 1 << 16
"""Storage targets with at least this many elements claim a slot per element first."""

U32, U64, F32, F64, BOOL = (ScalarType.U32, ScalarType.U64, ScalarType.F32, ScalarType.F64,
                            ScalarType.BOOL)
_MASK = 0xFFFFFFFF
_BIAS = 0x80000000  # a digit d is stored as d mod 2^32; d + 2^31 is its unsigned view


@dataclass(frozen=True)
class Format:
    """How one float type is summed exactly: its fields, its digits, how many digits a
    value's significand spans, and the u32 words that hold one value in a slot."""

    ty: ScalarType
    bits: ScalarType  # the unsigned integer of the float's width
    exp_bits: int
    mant_bits: int
    words: int  # signed 32-bit digits of the accumulator
    parts: int  # digits a significand shifted into place spans
    slot_words: int  # u32 words of a slot
    claim_words: int  # 1: a claim word besides the slot (f64); 0: the slot is claimed (f32)
    looped: bool  # finalise with loops over the digits in place (else unrolled in locals)

    @property
    def stride(self) -> int:
        """u32 words of an element's record: its digits, then its flag word."""
        return self.words + 1

    @property
    def width(self) -> int:
        return self.bits.bits

    @property
    def emax(self) -> int:
        return (1 << self.exp_bits) - 1

    @property
    def per_element(self) -> int:
        """u32 words of a storage target's scratch per element (besides its used bit)."""
        return self.claim_words + self.slot_words + self.stride


F32_SUM = Format(F32, U32, 8, 23, words=10, parts=2, slot_words=1, claim_words=0, looped=False)
F64_SUM = Format(F64, U64, 11, 52, words=67, parts=3, slot_words=2, claim_words=1, looped=True)
FORMATS = {F32: F32_SUM, F64: F64_SUM}
WORDS, STRIDE = F32_SUM.words, F32_SUM.stride  # (f32: 10 digits, 11 words a record)


def scratch_words(fmt: Format, n: int) -> int:
    """u32 words of the scratch of a storage target of `n` elements."""
    return n * fmt.per_element + (n + 31) // 32


# ------------------------------------------------------------------ expression helpers
def _c(ty: ScalarType, v: int) -> Expr:
    return Const(ty=ty, value=v & ((1 << ty.bits) - 1))


def _u(v: int) -> Expr:
    return _c(U32, v)


def _op(op: str, a: Expr, b: Expr, ty: ScalarType = U32) -> Expr:
    return Binary(op=op, a=a, b=b, ty=ty)


def _cmp(op: str, a: Expr, b: Expr) -> Expr:
    return Binary(op=op, a=a, b=b, ty=BOOL)


def _and(a: Expr, b: Expr) -> Expr:
    return Binary(op="logical_and", a=a, b=b, ty=BOOL)


def _sel(cond: Expr, a: Expr, b: Expr, ty: ScalarType = U32) -> Expr:
    """`a` where `cond` else `b`."""
    return Select(cond=cond, a=a, b=b, ty=ty)


def _v(name: str, ty: ScalarType = U32) -> Var:
    return Var(name=name, ty=ty)


def _cast(a: Expr, ty: ScalarType) -> Expr:
    return a if a.ty is ty else Cast(a=a, ty=ty)


def _is_zero(x: Expr) -> Expr:
    """x == 0 as a float comparison: true for ±0, and in flush mode for subnormals too."""
    return _cmp("eq", x, Const(ty=x.ty, value=0.0))


def _exponent(fmt: Format, bits: Expr) -> Expr:
    """The biased exponent field of float bits, as u32."""
    return _cast(_op("and", _op("shr", bits, _u(fmt.mant_bits), fmt.bits),
                     _c(fmt.bits, fmt.emax), fmt.bits), U32)


def _sign_set(fmt: Format, bits: Expr) -> Expr:
    return _cmp("ne", _op("shr", bits, _u(fmt.width - 1), fmt.bits), _c(fmt.bits, 0))


def _mantissa_set(fmt: Format, bits: Expr) -> Expr:
    return _cmp("ne", _op("and", bits, _c(fmt.bits, (1 << fmt.mant_bits) - 1), fmt.bits),
                _c(fmt.bits, 0))


@dataclass(frozen=True)
class _Fixed:
    """A finite float as a fixed-point integer: `parts` (u32, lowest first) from digit
    `word` up, and its sign."""

    neg: Expr  # bool
    word: Expr
    parts: tuple[Expr, ...]


def _fixed(p: str, fmt: Format, bits: Expr, out: list[Stmt]) -> _Fixed:
    """Statements (appended to `out`) splitting the float with `bits` into digits: the
    value is m * 2^(max(e, 1) - bias - M) = m << s in units of the smallest subnormal
    (2^(1 - bias - M)), s = max(e, 1) - 1."""
    b = fmt.bits
    out.append(Let(name=f"{p}e", value=_exponent(fmt, bits)))
    lead = _sel(_cmp("ne", _v(f"{p}e"), _u(0)), _c(b, 1 << fmt.mant_bits), _c(b, 0), b)
    out.append(Let(name=f"{p}m", value=_op("or", _op("and", bits,
                                                     _c(b, (1 << fmt.mant_bits) - 1), b),
                                         lead, b)))
    out.append(Let(name=f"{p}s", value=_op("sub", _op("max", _v(f"{p}e"), _u(1)), _u(1))))
    out.append(Let(name=f"{p}sh", value=_op("and", _v(f"{p}s"), _u(31))))
    m, sh = _v(f"{p}m", b), _v(f"{p}sh")
    nz = _cmp("ne", sh, _u(0))
    # (a shift by the width is taken modulo the width by the IR: hence the selects)
    if fmt.width == 32:
        parts: tuple[Expr, ...] = (_op("shl", m, sh),
                                   _sel(nz, _op("shr", m, _op("sub", _u(32), sh)), _u(0)))
    else:
        out.append(Let(name=f"{p}ms", value=_op("shl", m, sh, b)))
        ms = _v(f"{p}ms", b)
        parts = (_cast(_op("and", ms, _c(b, _MASK), b), U32),
                 _cast(_op("shr", ms, _u(32), b), U32),
                 _sel(nz, _cast(_op("shr", m, _op("sub", _u(64), sh), b), U32), _u(0)))
    return _Fixed(neg=_sign_set(fmt, bits), word=_op("shr", _v(f"{p}s"), _u(5)), parts=parts)


def _flag(fmt: Format, bits: Expr) -> Expr:
    """The flag bit of inf or NaN bits."""
    return _sel(_mantissa_set(fmt, bits), _u(FLAG_NAN),
                _sel(_sign_set(fmt, bits), _u(FLAG_NEG_INF), _u(FLAG_POS_INF)))


# ------------------------------------------------------------------ scratch layout
@dataclass(frozen=True)
class _Layout:
    """Where element i's scratch lives in a u32 array: of a storage target of `n` (an Expr)
    elements (slots, used bits, records), or with n None of a workgroup array (records)."""

    fmt: Format
    n: Expr | None  # None: a workgroup array's records, from word 0

    def record(self, i: Expr) -> Expr:
        at = _op("mul", i, _u(self.fmt.stride))
        if self.n is None:
            return at
        head = _op("mul", self.n, _u(self.fmt.claim_words + self.fmt.slot_words))
        return _op("add", _op("add", head, self._bits_words()), at)

    def used(self, i: Expr) -> Expr:
        """The word of element i's used bit (bit i mod 32)."""
        assert self.n is not None
        return _op("add", self.n, _op("shr", i, _u(5)))

    def claim(self, i: Expr) -> Expr:
        """f32: element i's slot; f64: its claim word."""
        return i

    def slot(self, i: Expr, j: int) -> Expr:
        """Word j of element i's slot."""
        if not self.fmt.claim_words:
            return i
        assert self.n is not None
        base = _op("add", self.n, self._bits_words())
        return _op("add", base, _op("add", _op("mul", i, _u(self.fmt.slot_words)), _u(j)))

    def _bits_words(self) -> Expr:
        assert self.n is not None
        return _op("shr", _op("add", self.n, _u(31)), _u(5))


def _bit(i: Expr) -> Expr:
    return _op("shl", _u(1), _op("and", i, _u(31)))
