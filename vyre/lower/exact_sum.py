"""Order-independent float atomic add (f32 and f64), written once as IR -> IR rewrites.

A float atomic add whose old value is never read (vyre.ir.analysis.exact_sum_targets) is
summed exactly. Each target element has an accumulator of `Format.words` signed 32-bit
digits (a balanced base-2^32 number, digit j worth 2^(32 j) units), whose unit is the
smallest subnormal (2^-149, 2^-1074), so every finite value is an integer of at most 24
(53) significant bits there; 320 (2,144) bits hold the sum of up to 2^41 (2^44) values.
`plan_for` rewrites each add into integer atomic adds of the value's significand into
the two (three) digits it spans; a digit that leaves [-2^31, 2^31) wraps and the thread
whose add wrapped it (read from the atomic's old value) carries +1 or -1 into the next
digit with another atomic add. Integer addition with every carry propagated that way is
exact whatever the order, and a balanced representation is unique, so the digits end as
the one representation of the exact sum on every backend and every run. Digits start at
0 (the middle of their range), so adding and subtracting small values does not ripple
through the digits above (two's complement words would borrow through every zero word
above a negative value). inf and NaN values set bits of a flag word instead.

Storage targets of at least SLOT_MIN_ELEMENTS elements (a scatter-add, where most elements
get one value) first try to claim the element's slot: a compare-exchange of the value's
bits into a zero slot word (f64: of 1 into a claim word, then two stores: WGSL has no
64-bit atomics). Only the adds that find the slot taken go to the digits, and they set the
element's bit in a used bitmap. The sum is the slot's value plus the digits whichever add
won the slot, so the result does not depend on it. Smaller targets (histograms, where
elements get many values) use the digits only.

`FINALIZE` / `FINALIZE_F64` then fold in the element's initial value, round the exact
total once (nearest even; past the largest float: inf), store it and zero every scratch
word that was used, so the next dispatch finds them clear. An element whose only add won
its slot is finished with the IR's float addition: round(x + v) is exactly that. f32's
finalisation is unrolled over its 10 digits in locals; f64's loops over its 67 in place
(unrolled, NVRTC and lavapipe each took 10 s to compile it). Semantics (docs/IR.md
"Atomic"):

- the result is round(initial + S), S the exact sum of the added values;
- an element whose S is exactly zero and that got no inf or NaN keeps its bits (S acts as
  -0, IEEE's additive identity: -0 stays -0, an element nothing was added to is unchanged);
- inf and NaN follow IEEE: any NaN, or +inf and -inf both, give NaN; else an inf wins;
- in flush mode the added values and the initial value are read as arithmetic operands (a
  subnormal as a zero of its sign) and a subnormal result becomes a zero of its sign:
  both through float comparisons with zero, which flush exactly there.

Scratch layout of a storage target of n elements (u32 words; `scratch_words`): n words
(f32: the slots; f64: the claim words), ceil(n / 32) words of used bits, (f64 only) 2 n
slot words, then per element its digits and its flag word. The dispatch plan that runs
these (scratch buffers, two device dispatches per user dispatch) is vyre.exact_sum_plan;
the reference backend runs the same plan. On a workgroup array the digits are a workgroup
array too (no slot), zeroed when the workgroup starts, and the same finalisation runs after
every barrier (then another barrier), so the sums of a phase land before any invocation
reads the array. This module must never decide how a plan is dispatched or allocated.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from ..ir.analysis import exact_shared_targets, exact_sum_targets, walk_stmts
from ..ir.nodes import (
    Assign,
    Atomic,
    Barrier,
    Binary,
    Bitcast,
    Break,
    BufferDecl,
    Builtin,
    Cast,
    Const,
    Expr,
    For,
    If,
    Length,
    Let,
    Load,
    Program,
    Select,
    Stmt,
    Store,
    Unary,
    Var,
    While,
    WorkgroupArray,
)
from ..ir.types import ScalarType
from ..ir.visit import map_block

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


# ------------------------------------------------------------------ the rewritten kernel
def _carry_chain(p: str, fmt: Format, acc: str, rec: Expr, bits: Expr) -> list[Stmt]:
    """Atomic adds of the finite, nonzero float with `bits` into the digits at `rec`."""
    out: list[Stmt] = []
    fx = _fixed(p, fmt, bits, out)
    out += [
        Let(name=f"{p}neg", value=fx.neg),
        Let(name=f"{p}k", value=_op("add", rec, fx.word)),
        Let(name=f"{p}end", value=_op("add", rec, _u(fmt.words))),
        Let(name=f"{p}x", value=fx.parts[0]),
        Let(name=f"{p}c", value=_u(0)),
    ]
    neg, k, x, c = _v(f"{p}neg", BOOL), _v(f"{p}k"), _v(f"{p}x"), _v(f"{p}c")
    middle = fmt.parts > 2  # a middle part can be 2^32 - 1: adding a carry to it wraps
    if middle:
        out.append(Let(name=f"{p}ov", value=_u(0)))
    # one step per digit, unrolled (no loop: lavapipe counts loop passes per shader): add
    # x to digit k; whether it wrapped (a carry, or a borrow for a negative value) is read
    # from the old value, the digit's unsigned view being old + 2^31; then x = the next
    # part + that.
    for j in range(fmt.words):
        old = _v(f"{p}o{j}")
        view = _op("xor", old, _u(_BIAS))
        moved = Cast(a=_sel(neg, _cmp("lt", view, x),
                            _cmp("gt", view, Unary(op="bit_not", a=x, ty=U32)), BOOL), ty=U32)
        out.append(If(
            cond=_and(_cmp("ne", x, _u(0)), _cmp("lt", k, _v(f"{p}end"))),
            then=(Atomic(op="add", buffer=acc, index=k,
                         value=_sel(neg, _op("sub", _u(0), x), x), result=old.name),
                  Assign(name=c.name, value=moved)),
            orelse=(Assign(name=c.name, value=_u(0)),)))
        if middle and 0 < j < fmt.parts - 1:
            out.append(Assign(name=c.name, value=_op("or", c, _v(f"{p}ov"))))
        if j + 1 < fmt.parts:
            out.append(Assign(name=x.name, value=_op("add", fx.parts[j + 1], c)))
            if middle and j + 1 < fmt.parts - 1:
                out.append(Assign(name=f"{p}ov", value=Cast(
                    a=_cmp("lt", x, fx.parts[j + 1]), ty=U32)))
        else:
            out.append(Assign(name=x.name, value=c))
        if j < fmt.words - 1:
            out.append(Assign(name=k.name, value=_op("add", k, _u(1))))
    return out


def _accumulate(p: str, fmt: Format, acc: str, target: str, site: Atomic,
                storage: bool) -> list[Stmt]:
    """The statements replacing one order-independent add of `site` into `target`."""
    body: list[Stmt] = [Let(name=f"{p}i", value=site.index), Let(name=f"{p}v", value=site.value),
                        Let(name=f"{p}n", value=Length(buffer=target))]
    i, v, n = _v(f"{p}i"), _v(f"{p}v", fmt.ty), _v(f"{p}n")
    lay = _Layout(fmt, n if storage else None)
    inner: list[Stmt] = [Let(name=f"{p}b", value=Bitcast(a=v, ty=fmt.bits)),
                         Let(name=f"{p}r", value=lay.record(i))]
    b, rec = _v(f"{p}b", fmt.bits), _v(f"{p}r")
    big = _cmp("ge", n, _u(SLOT_MIN_ELEMENTS))
    mark: tuple[Stmt, ...] = ()
    if storage:  # the finalisation reads the digits of a slotted element only if marked
        mark = (If(cond=big, then=(Atomic(op="or", buffer=acc, index=lay.used(i),
                                          value=_bit(i)),)),)
    set_flag = (*mark, Atomic(op="or", buffer=acc, index=_op("add", rec, _u(fmt.words)),
                              value=_flag(fmt, b)))
    digits = (*mark, *_carry_chain(p, fmt, acc, rec, b))
    finite: list[Stmt]
    if storage:
        won = _v(f"{p}won", BOOL)
        old = f"{p}old"
        if fmt.claim_words:  # claim, then the value into the slot words
            claim: tuple[Stmt, ...] = (
                Atomic(op="compare_exchange", buffer=acc, index=lay.claim(i), value=_u(1),
                       comparand=_u(0), result=old),
                If(cond=_cmp("eq", _v(old), _u(0)), then=tuple(
                    Store(buffer=acc, index=lay.slot(i, j),
                          value=_cast(_op("shr", b, _u(32 * j), fmt.bits)
                                      if j else _op("and", b, _c(fmt.bits, _MASK), fmt.bits),
                                      U32))
                    for j in range(fmt.slot_words))))
        else:  # the value's bits into the slot (a finite nonzero value's bits are not 0)
            claim = (Atomic(op="compare_exchange", buffer=acc, index=lay.claim(i), value=b,
                            comparand=_u(0), result=old),)
        finite = [Let(name=won.name, value=Const(ty=BOOL, value=False)),
                  If(cond=big, then=(*claim, Assign(name=won.name,
                                                    value=_cmp("eq", _v(old), _u(0))))),
                  If(cond=won, orelse=digits)]
    else:
        finite = list(digits)
    special = _cmp("eq", _exponent(fmt, b), _u(fmt.emax))
    inner.append(If(cond=special, then=set_flag, orelse=(
        If(cond=_is_zero(v), orelse=tuple(finite)),)))
    body.append(If(cond=_cmp("lt", i, n), then=tuple(inner)))
    return body


def _names(program: Program) -> set[str]:
    names = {b.name for b in program.buffers} | {q.name for q in program.params}
    names |= {a.name for a in program.workgroup_arrays}
    for s in walk_stmts(program.body):
        for attr in ("name", "var", "result"):
            n = getattr(s, attr, None)
            if isinstance(n, str):
                names.add(n)
    return names


def _prefix(program: Program) -> str:
    """A name prefix no declaration of `program` starts with."""
    names = _names(program)
    n = 0
    while any(x.startswith(f"xsum{n}_") for x in names):
        n += 1
    return f"xsum{n}_"


@dataclass(frozen=True)
class Plan:
    """How one Program runs with exact sums: `main` (the program with its order-independent
    adds rewritten, a scratch buffer per target appended after its buffers) and, per target,
    the slot of its buffer in the program's declarations."""

    main: Program
    targets: tuple[int, ...]


def plan_for(program: Program) -> Plan | None:
    """The exact-sum plan of a valid `program`, or None when it has no exact adds."""
    if exact_sum_targets(program) or exact_shared_targets(program):
        return _plan(program)
    return None


@lru_cache(maxsize=256)
def _plan(program: Program) -> Plan:
    targets = exact_sum_targets(program)
    shared = exact_shared_targets(program)
    prefix = _prefix(program)
    acc = {t: f"{prefix}acc{j}" for j, t in enumerate(targets)}
    acc.update({t: f"{prefix}wacc{j}" for j, t in enumerate(shared)})
    fmts = {d.name: FORMATS[d.ty] for d in program.buffers if d.name in acc}
    fmts.update({a.name: FORMATS[a.ty] for a in program.workgroup_arrays if a.name in acc})
    counts = {a.name: a.count for a in program.workgroup_arrays}
    size = program.workgroup_size[0] * program.workgroup_size[1] * program.workgroup_size[2]
    sites = [0]

    def rewrite(s: Stmt) -> list[Stmt]:
        if type(s) is Atomic and s.buffer in acc and s.op == "add" and not s.relaxed:
            sites[0] += 1
            return _accumulate(f"{prefix}{sites[0]}_", fmts[s.buffer], acc[s.buffer],
                               s.buffer, s, storage=s.buffer not in counts)
        if type(s) is Barrier and shared:  # the phase's sums land before anyone reads
            out: list[Stmt] = [s]
            for t in shared:
                sites[0] += 1
                p = f"{prefix}{sites[0]}_"
                out.append(For(var=f"{p}el", ty=U32, start=Builtin(name="local_index"),
                               end=_u(counts[t]), step=size,
                               body=tuple(finalize_element(p, fmts[t], t, acc[t],
                                                           _v(f"{p}el")))))
            return [*out, Barrier()]
        return [s]

    body = map_block(program.body, rewrite)
    if shared:  # workgroup memory starts undefined: zero the words, then a barrier
        clear = tuple(For(var=f"{prefix}z{j}", ty=U32, start=Builtin(name="local_index"),
                          end=_u(fmts[t].stride * counts[t]), step=size,
                          body=(Store(buffer=acc[t], index=_v(f"{prefix}z{j}"), value=_u(0)),))
                      for j, t in enumerate(shared))
        body = (*clear, Barrier(), *body)
    scratch = tuple(BufferDecl(name=acc[t], ty=U32, access="read_write") for t in targets)
    words = tuple(WorkgroupArray(name=acc[t], ty=U32, count=fmts[t].stride * counts[t])
                  for t in shared)
    main = program.model_copy(update={
        "body": body, "buffers": (*program.buffers, *scratch),
        "workgroup_arrays": (*program.workgroup_arrays, *words)})
    slots = tuple(next(j for j, b in enumerate(program.buffers) if b.name == t) for t in targets)
    return Plan(main=main, targets=slots)


# ------------------------------------------------------------------ the finalisation
def finalize_element(p: str, fmt: Format, out: str, acc: str, e: Expr,
                     n: Expr | None = None, used_word: Expr | None = None) -> list[Stmt]:
    """Element e of float array `out` (its exact sum in `acc`, laid out for a storage
    target of `n` elements whose used-bit word for e is `used_word`, or with n None as a
    workgroup array's records): if anything was added, fold in the initial value, round
    once, store, and zero the scratch words used. Locals are named with prefix `p`."""
    lay = _Layout(fmt, n)
    rec = lay.record(e)
    if n is None:
        return _record_finalize(p, fmt, out, acc, e, rec, None)
    assert used_word is not None
    big = _cmp("ge", n, _u(SLOT_MIN_ELEMENTS))  # (smaller targets have digits only)
    s: list[Stmt] = [Let(name=p + "cl", value=_u(0)), If(cond=big, then=(
        Assign(name=p + "cl", value=Load(buffer=acc, index=lay.claim(e), ty=U32)),))]
    claimed = _cmp("ne", _v(p + "cl"), _u(0))
    if fmt.claim_words:
        for j in range(fmt.slot_words):
            s.append(Let(name=p + f"sl{j}", value=_sel(
                claimed, Load(buffer=acc, index=lay.slot(e, j), ty=U32), _u(0))))
        sbits: Expr = _op("or", _op("shl", _cast(_v(p + "sl1"), U64), _u(32), U64),
                          _cast(_v(p + "sl0"), U64), U64)
    else:
        sbits = _v(p + "cl")
    s.append(Let(name=p + "sb", value=sbits))
    sb = _v(p + "sb", fmt.bits)
    used = Binary(op="logical_or", a=Unary(op="not", a=big, ty=BOOL), b=_cmp(
        "ne", _op("and", _op("shr", used_word, _op("and", e, _u(31))), _u(1)), _u(0)), ty=BOOL)
    # an element whose one add won its slot: round(x + v) is the IR's float addition (a
    # NaN x stays as it was)
    xb = Bitcast(a=_v(p + "x1", fmt.ty), ty=fmt.bits)
    x_nan = _and(_cmp("eq", _exponent(fmt, xb), _u(fmt.emax)), _mantissa_set(fmt, xb))
    one = (Let(name=p + "x1", value=Load(buffer=out, index=e, ty=fmt.ty)),
           If(cond=x_nan, orelse=(Store(buffer=out, index=e, value=_op(
               "add", _v(p + "x1", fmt.ty), Bitcast(a=sb, ty=fmt.ty), fmt.ty)),)))
    return [*s,
            If(cond=used, then=tuple(_record_finalize(p, fmt, out, acc, e, rec, sb)),
               orelse=(If(cond=claimed, then=one),)),
            If(cond=claimed, then=tuple(
                Store(buffer=acc, index=w, value=_u(0))
                for w in (lay.claim(e), *(lay.slot(e, j) for j in range(fmt.slot_words)
                                          if fmt.claim_words))))]


def _record_finalize(p: str, fmt: Format, out: str, acc: str, e: Expr, rec: Expr,
                     slot: Expr | None) -> list[Stmt]:
    """The element's digits at `rec` (and, where `slot` is given, the finite value or 0
    with those bits) plus its initial value, rounded once and stored; the digits zeroed."""
    if fmt.looped:
        return _record_finalize_looped(p, fmt, out, acc, e, rec, slot)
    words, b = fmt.words, fmt.bits
    body: list[Stmt] = [Let(name=p + "base", value=rec)]
    base = _v(p + "base")
    for j in range(fmt.stride):
        body.append(Let(name=p + f"w{j}", value=Load(buffer=acc, index=_op("add", base, _u(j)),
                                                 ty=U32)))
    body.append(Let(name=p + "any", value=_v(p + "w0")))
    for j in range(1, fmt.stride):
        body.append(Assign(name=p + "any", value=_op("or", _v(p + "any"), _v(p + f"w{j}"))))
    # zero what is not zero already (a sum spans a few digits: most need no store)
    work: list[Stmt] = [If(cond=_cmp("ne", _v(p + f"w{j}"), _u(0)), then=(
        Store(buffer=acc, index=_op("add", base, _u(j)), value=_u(0)),))
        for j in range(fmt.stride)]
    # the balanced digits as a two's complement number: r_j = w_j - borrow_j, where the
    # borrow into the next word is set by a negative digit, or by a zero one passing it on
    work.append(Let(name=p + "bw", value=Const(ty=BOOL, value=False)))
    for j in range(words):
        w = _v(p + f"w{j}")
        work.append(Let(name=p + f"n{j}", value=_op("sub", w, Cast(a=_v(p + "bw", BOOL),
                                                                ty=U32))))
        if j < words - 1:
            work.append(Assign(name=p + "bw", value=_borrow_on(w, _v(p + "bw", BOOL))))
    total = [p + f"n{j}" for j in range(words)]
    if slot is not None:
        total = _add_float(p + "s", fmt, total, slot, work)
    x_nan, flags, store_special = _initial(p, fmt, out, e, _v(p + f"w{words}"), work)
    rounded = tuple(_round_and_store(p, fmt, out, e, total))
    if slot is not None:  # the slot's value may cancel the digits: then S is zero
        work.append(Let(name=p + "nz", value=_v(total[0])))
        for name in total[1:]:
            work.append(Assign(name=p + "nz", value=_op("or", _v(p + "nz"), _v(name))))
        rounded = (If(cond=_cmp("ne", _v(p + "nz"), _u(0)), then=rounded),)
    work.append(If(cond=x_nan, orelse=(If(cond=_cmp("ne", flags, _u(0)),
                                            then=(store_special,), orelse=rounded),)))
    anything: Expr = _v(p + "any")
    if slot is not None:
        anything = _op("or", anything, Cast(a=_cmp("ne", slot, _c(b, 0)), ty=U32))
    body.append(If(cond=_cmp("ne", anything, _u(0)), then=tuple(work)))
    return body


def _borrow_on(w: Expr, borrow: Expr) -> Expr:
    """The borrow out of balanced digit w (bits) made two's complement: set by a negative
    digit, or passed on by a zero one."""
    return Binary(op="logical_or", a=_cmp("ge", w, _u(_BIAS)),
                  b=_and(_cmp("eq", w, _u(0)), borrow), ty=BOOL)


def _initial(p: str, fmt: Format, out: str, e: Expr, flag_word: Expr, s: list[Stmt]
             ) -> tuple[Expr, Expr, Stmt]:
    """Statements (appended to `s`) reading the element's initial value x (locals p + x,
    p + xb): whether x is NaN, the flags with x's infinity, and the store of the special
    result those flags give."""
    b = fmt.bits
    s += [Let(name=p + "x", value=Load(buffer=out, index=e, ty=fmt.ty)),
          Let(name=p + "xb", value=Bitcast(a=_v(p + "x", fmt.ty), ty=b))]
    xb = _v(p + "xb", b)
    x_special = _cmp("eq", _exponent(fmt, xb), _u(fmt.emax))
    x_nan = _and(x_special, _mantissa_set(fmt, xb))
    x_inf = _sel(x_special, _sel(_sign_set(fmt, xb), _u(FLAG_NEG_INF), _u(FLAG_POS_INF)),
                 _u(0))
    s.append(Let(name=p + "fl", value=_op("or", flag_word, x_inf)))
    fl = _v(p + "fl")
    is_nan = Binary(op="logical_or", a=_cmp("ne", _op("and", fl, _u(FLAG_NAN)), _u(0)),
                    b=_cmp("eq", _op("and", fl, _u(3)), _u(3)), ty=BOOL)
    inf = fmt.emax << fmt.mant_bits
    nan = inf | (1 << (fmt.mant_bits - 1))
    sign = 1 << (fmt.width - 1)
    special_bits = _sel(is_nan, _c(b, nan), _sel(_cmp("eq", fl, _u(FLAG_NEG_INF)),
                                                 _c(b, inf | sign), _c(b, inf), b), b)
    return x_nan, fl, Store(buffer=out, index=e, value=Bitcast(a=special_bits, ty=fmt.ty))


def _record_finalize_looped(p: str, fmt: Format, out: str, acc: str, e: Expr, rec: Expr,
                            slot: Expr | None) -> list[Stmt]:
    """_record_finalize with loops over the digits in place (for f64's 67 digits, whose
    unrolled form NVRTC and lavapipe compiled for 10 s each): fold the slot's value into
    the digits, test the sum for zero, fold in x, find the top nonzero digit t, and read
    the three digits from k = max(t, 2) - 2 up plus the sign of the first nonzero digit
    below k (the tail T, |T| < 2^(32 k) / 2 because digits are balanced): the magnitude
    |S| is |V| 2^(32 k) + |T| when T has V's sign, else (|V| - 1) 2^(32 k) + (2^(32 k) -
    |T|), so |V| or |V| - 1 and whether T is nonzero are all the rounding needs."""
    words = fmt.words
    body: list[Stmt] = [Let(name=p + "base", value=rec)]
    base = _v(p + "base")
    if slot is not None:
        body.append(If(cond=_cmp("ne", slot, _c(fmt.bits, 0)),
                       then=tuple(_fold(p + "s", fmt, acc, base, slot))))
    body += _top_digit(p + "a", acc, base, words)
    work: list[Stmt] = []
    x_nan, flags, store_special = _initial(p, fmt, out, e, Load(
        buffer=acc, index=_op("add", base, _u(words)), ty=U32), work)
    x = _v(p + "x", fmt.ty)
    rounded: list[Stmt] = [If(cond=Unary(op="not", a=_is_zero(x), ty=BOOL), then=tuple(
        _fold(p + "x", fmt, acc, base, _v(p + "xb", fmt.bits))))]
    rounded += _top_digit(p, acc, base, words)
    t = _v(p + "t")
    rounded.append(Let(name=p + "k", value=_op("sub", _op("max", t, _u(2)), _u(2))))
    k = _v(p + "k")
    for j in range(3):
        rounded.append(Let(name=p + f"d{j}", value=Load(
            buffer=acc, index=_op("add", base, _op("add", k, _u(j))), ty=U32)))
    # the tail below k: its first nonzero digit from the top gives its sign
    rounded += [Let(name=p + "rest", value=_u(0)),
                Let(name=p + "tneg", value=Const(ty=BOOL, value=False)),
                For(var=p + "i", ty=U32, start=_u(0), end=k, body=(
                    Let(name=p + "dj", value=Load(buffer=acc, index=_op("add", base, _op(
                        "sub", _op("sub", k, _u(1)), _v(p + "i"))), ty=U32)),
                    If(cond=_cmp("ne", _v(p + "dj"), _u(0)), then=(
                        Assign(name=p + "rest", value=_u(1)),
                        Assign(name=p + "tneg", value=_cmp("ge", _v(p + "dj"), _u(_BIAS))),
                        Break())))),
                ]
    # V = d2 2^64 + d1 2^32 + d0 as 128-bit two's complement, then its magnitude
    rounded.append(Let(name=p + "bw", value=Const(ty=BOOL, value=False)))
    for j in range(3):
        d = _v(p + f"d{j}")
        rounded += [Let(name=p + f"v{j}", value=_op("sub", d, Cast(a=_v(p + "bw", BOOL),
                                                                ty=U32))),
                    Assign(name=p + "bw", value=_borrow_on(d, _v(p + "bw", BOOL)))]
    rounded += [Let(name=p + "sign", value=Cast(a=_v(p + "bw", BOOL), ty=U32)),
                Let(name=p + "cn", value=Cast(a=_v(p + "bw", BOOL), ty=U32))]
    neg = _cmp("ne", _v(p + "sign"), _u(0))
    # the integer part: |V|, less one where T has the other sign (then T is a fraction)
    rounded.append(Let(name=p + "dec", value=Cast(a=_and(
        _cmp("ne", _v(p + "rest"), _u(0)),
        _cmp("ne", Cast(a=_v(p + "tneg", BOOL), ty=U32), _v(p + "sign"))), ty=U32)))
    for j in range(3):
        vj = _v(p + f"v{j}")
        mag = _sel(neg, _op("add", Unary(op="bit_not", a=vj, ty=U32), _v(p + "cn")), vj)
        rounded += [Let(name=p + f"a{j}", value=mag),
                    Assign(name=p + "cn", value=_op("and", _v(p + "cn"), Cast(
                        a=_cmp("eq", vj, _u(0)), ty=U32))),
                    Let(name=p + f"m{j}", value=_op("sub", _v(p + f"a{j}"), _v(p + "dec"))),
                    Assign(name=p + "dec", value=_op("and", _v(p + "dec"), Cast(
                        a=_cmp("eq", _v(p + f"a{j}"), _u(0)), ty=U32)))]
    # its top nonzero word, in the digits' numbering (at most k + 2)
    m0, m1, m2 = _v(p + "m0"), _v(p + "m1"), _v(p + "m2")
    two, one = _cmp("ne", m2, _u(0)), _cmp("ne", m1, _u(0))
    rounded += [
        Assign(name=p + "t", value=_op("add", k, _sel(two, _u(2), _sel(one, _u(1), _u(0))))),
        Let(name=p + "top", value=_sel(two, m2, _sel(one, m1, m0))),
        Let(name=p + "mid", value=_sel(two, m1, _sel(one, m0, _u(0)))),
        Let(name=p + "low", value=_sel(two, m0, _u(0))),
    ]
    rounded += _round_store(p, fmt, out, e)
    work.append(If(cond=x_nan, orelse=(If(cond=_cmp("ne", flags, _u(0)),
                                            then=(store_special,), orelse=tuple(rounded)),)))
    work.append(For(var=p + "z", ty=U32, start=_u(0), end=_u(fmt.stride), body=(
        If(cond=_cmp("ne", Load(buffer=acc, index=_op("add", base, _v(p + "z")), ty=U32),
                     _u(0)),
           then=(Store(buffer=acc, index=_op("add", base, _v(p + "z")), value=_u(0)),)),)))
    # S is zero (nothing was added, or it cancelled: then every digit is zero) and no flag
    # is set: x keeps its bits, and there is nothing to clear
    body.append(If(cond=Binary(op="logical_or", a=_v(p + "afound", BOOL), b=_cmp(
        "ne", Load(buffer=acc, index=_op("add", base, _u(words)), ty=U32), _u(0)), ty=BOOL),
        then=tuple(work)))
    return body


def _top_digit(p: str, acc: str, base: Expr, words: int) -> list[Stmt]:
    """Locals p + t (the highest nonzero digit, else 0) and p + found (any nonzero)."""
    return [Let(name=p + "t", value=_u(0)), Let(name=p + "found", value=Const(ty=BOOL, value=False)),
            For(var=p + "j", ty=U32, start=_u(0), end=_u(words), body=(
                If(cond=_cmp("ne", Load(buffer=acc, index=_op("add", base, _op(
                    "sub", _u(words - 1), _v(p + "j"))), ty=U32), _u(0)), then=(
                    Assign(name=p + "t", value=_op("sub", _u(words - 1), _v(p + "j"))),
                    Assign(name=p + "found", value=Const(ty=BOOL, value=True)),
                    Break())),))]


def _fold(p: str, fmt: Format, acc: str, base: Expr, bits: Expr) -> list[Stmt]:
    """Add the finite float with `bits` (nonzero) into the balanced digits at `base` in
    place: its parts, then the carry (borrow) while a digit wraps."""
    out: list[Stmt] = []
    fx = _fixed(p, fmt, bits, out)
    out += [Let(name=p + "neg", value=fx.neg),
            Let(name=p + "k", value=_op("add", base, fx.word)),
            Let(name=p + "c", value=_u(0))]
    neg, k, c = _v(p + "neg", BOOL), _v(p + "k"), _v(p + "c")

    def step(q: int, add: Expr) -> list[Stmt]:
        view = _op("xor", Load(buffer=acc, index=k, ty=U32), _u(_BIAS))
        return [Let(name=p + f"t{q}", value=add),
                Let(name=p + f"w{q}", value=view),
                Let(name=p + f"r{q}", value=_sel(neg, _op("sub", _v(p + f"w{q}"), _v(p + f"t{q}")),
                                                 _op("add", _v(p + f"w{q}"), _v(p + f"t{q}")))),
                Store(buffer=acc, index=k, value=_op("xor", _v(p + f"r{q}"), _u(_BIAS)))]

    # (a value's parts always lie below the top digit: no bound check needed for them)
    for q, part in enumerate(fx.parts):
        out += step(q, _op("add", part, c))
        t, w, r = _v(p + f"t{q}"), _v(p + f"w{q}"), _v(p + f"r{q}")
        moved: Expr = _sel(neg, _cmp("lt", w, t), _cmp("lt", r, t), BOOL)
        if 0 < q < fmt.parts - 1:  # a middle part of 2^32 - 1 plus a carry wraps to 0
            moved = Binary(op="logical_or", a=moved, b=_cmp("lt", t, part), ty=BOOL)
        out += [Assign(name=c.name, value=Cast(a=moved, ty=U32)),
                Assign(name=k.name, value=_op("add", k, _u(1)))]
    end = _op("add", base, _u(fmt.words))
    ripple = step(fmt.parts, _u(1))
    w = _v(p + f"w{fmt.parts}")
    out.append(While(cond=_and(_cmp("ne", c, _u(0)), _cmp("lt", k, end)), body=(
        *ripple,
        Assign(name=c.name, value=Cast(a=_sel(neg, _cmp("eq", w, _u(0)),
                                              _cmp("eq", w, _u(_MASK)), BOOL), ty=U32)),
        Assign(name=k.name, value=_op("add", k, _u(1))))))
    return out


def _add_float(p: str, fmt: Format, words: list[str], bits: Expr, out: list[Stmt]) -> list[str]:
    """Statements (appended to `out`) adding the finite float with `bits` (zero in flush
    mode when it compares equal to zero) to the two's complement number in u32 locals
    `words`; returns the locals of the result."""
    val = _sel(_is_zero(Bitcast(a=bits, ty=fmt.ty)), _c(fmt.bits, 0), bits, fmt.bits)
    fx = _fixed(p + "f", fmt, val, out)
    out += [Let(name=p + "neg", value=fx.neg), Let(name=p + "wd", value=fx.word),
            Let(name=p + "c", value=_u(0))]
    for q, piece in enumerate(fx.parts):
        out.append(Let(name=p + f"q{q}", value=piece))
    neg, c, wd = _v(p + "neg", BOOL), _v(p + "c"), _v(p + "wd")
    res: list[str] = []
    for j, name in enumerate(words):
        w = _v(name)
        part: Expr = _u(0)
        for q in range(len(fx.parts)):
            part = _op("add", part, _sel(_cmp("eq", _op("add", wd, _u(q)), _u(j)),
                                         _v(p + f"q{q}"), _u(0)))
        out.append(Let(name=p + f"pt{j}", value=part))
        out.append(Let(name=p + f"t{j}", value=_op("add", _v(p + f"pt{j}"), c)))
        t = _v(p + f"t{j}")
        out.append(Let(name=p + f"r{j}", value=_sel(neg, _op("sub", w, t), _op("add", w, t))))
        # carry (borrow) out of this word; a part of 2^32 - 1 plus a carry wraps to 0
        moved: Expr = _sel(neg, _cmp("lt", w, t), _cmp("lt", _v(p + f"r{j}"), t), BOOL)
        if len(fx.parts) > 2:
            moved = Binary(op="logical_or", a=moved, b=_cmp("lt", t, _v(p + f"pt{j}")),
                           ty=BOOL)
        out.append(Assign(name=c.name, value=Cast(a=moved, ty=U32)))
        res.append(p + f"r{j}")
    return res


def _round_and_store(p: str, fmt: Format, out: str, e: Expr, total: list[str]) -> list[Stmt]:
    """(x finite, `total` the u32 locals of the exact sum S as a two's complement number.)
    out[e] = round(x + S)."""
    words, b = fmt.words, fmt.bits
    s: list[Stmt] = []
    n = _add_float(p + "x", fmt, total, _v(p + "xb", b), s)
    # magnitude and sign of the two's complement total
    s.append(Let(name=p + "sign", value=_op("shr", _v(n[words - 1]), _u(31))))
    neg = _cmp("ne", _v(p + "sign"), _u(0))
    s.append(Let(name=p + "cn", value=_u(1)))
    for j in range(words):
        nj = _v(n[j])
        s.append(Let(name=p + f"m{j}", value=_sel(
            neg, _op("add", Unary(op="bit_not", a=nj, ty=U32), _v(p + "cn")), nj)))
        s.append(Assign(name=p + "cn", value=_op("and", _v(p + "cn"),
                                             Cast(a=_cmp("eq", nj, _u(0)), ty=U32))))
    # the top nonzero word t and the two below it; `rest`: whether anything lies lower
    s.append(Let(name=p + "t", value=_u(0)))
    for j in range(1, words):
        s.append(Assign(name=p + "t", value=_sel(_cmp("ne", _v(p + f"m{j}"), _u(0)), _u(j),
                                              _v(p + "t"))))
    t = _v(p + "t")
    # (one assignment per word: nested selects over 67 words would pass MAX_DEPTH)
    s += [Let(name=p + "top", value=_v(p + "m0")), Let(name=p + "mid", value=_u(0)),
          Let(name=p + "low", value=_u(0)), Let(name=p + "rest", value=_u(0))]
    for j in range(words):
        m = _v(p + f"m{j}")
        if j:
            s.append(Assign(name=p + "top", value=_sel(_cmp("eq", t, _u(j)), m, _v(p + "top"))))
        s.append(Assign(name=p + "mid", value=_sel(_cmp("eq", t, _u(j + 1)), m, _v(p + "mid"))))
        s.append(Assign(name=p + "low", value=_sel(_cmp("eq", t, _u(j + 2)), m, _v(p + "low"))))
        s.append(Assign(name=p + "rest", value=_op("or", _v(p + "rest"), _sel(
            _cmp("gt", t, _u(j + 2)), m, _u(0)))))
    return s + _round_store(p, fmt, out, e)


def _round_store(p: str, fmt: Format, out: str, e: Expr) -> list[Stmt]:
    """out[e] = the magnitude in u32 locals p + top, mid, low (words t, t - 1, t - 2 of it;
    top is its highest nonzero word unless it is zero), `rest` (nonzero: something lies
    below) and m0, m1 (its words 0 and 1, read below 2^M units), with sign p + sign (0 or
    1), rounded once to nearest even."""
    b, mb = fmt.bits, fmt.mant_bits
    t = _v(p + "t")
    s: list[Stmt] = []
    # leading zeros of top (a binary search; the IR has no clz)
    s += [Let(name=p + "lz", value=_u(0)), Let(name=p + "y", value=_v(p + "top"))]
    for width in (16, 8, 4, 2, 1):
        small = _cmp("lt", _v(p + "y"), _u(1 << (32 - width)))
        s.append(Assign(name=p + "lz", value=_op("add", _v(p + "lz"),
                                             _sel(small, _u(width), _u(0)))))
        s.append(Assign(name=p + "y", value=_sel(small, _op("shl", _v(p + "y"), _u(width)),
                                             _v(p + "y"))))
    lz = _v(p + "lz")
    nz = _cmp("ne", lz, _u(0))

    def shifted(a: str, c: str) -> Expr:
        return _op("or", _op("shl", _v(p + a), lz),
                   _sel(nz, _op("shr", _v(p + c), _op("sub", _u(32), lz)), _u(0)))

    s += [Let(name=p + "h", value=shifted("top", "mid")),
          Let(name=p + "l", value=shifted("mid", "low")),
          Let(name=p + "ll", value=_op("shl", _v(p + "low"), lz)),
          # the top bit's position p = 32 t + 31 - lz; the biased exponent is p - M + 1
          Let(name=p + "p", value=_op("sub", _op("add", _op("mul", t, _u(32)), _u(31)), lz))]
    h, pos = _v(p + "h"), _v(p + "p")
    # the leading bits in the float's width: h (f32) or h:l (f64), then what lies below
    if fmt.width == 32:
        lead: Expr = h
        below: Expr = _op("or", _op("or", _v(p + "l"), _v(p + "ll")), _v(p + "rest"))
    else:
        lead = _op("or", _op("shl", _cast(h, b), _u(32), b), _cast(_v(p + "l"), b), b)
        below = _op("or", _v(p + "ll"), _v(p + "rest"))
    drop = fmt.width - (mb + 1)  # bits of `lead` below the significand
    s.append(Let(name=p + "ld", value=lead))
    ld = _v(p + "ld", b)
    sig = _op("shr", ld, _u(drop), b)
    rnd = _op("and", _op("shr", ld, _u(drop - 1), b), _c(b, 1), b)
    sticky = Binary(op="logical_or", a=_cmp("ne", _op("and", ld, _c(b, (1 << (drop - 1)) - 1),
                                                         b), _c(b, 0)),
                    b=_cmp("ne", below, _u(0)), ty=BOOL)
    up = _op("and", rnd, _op("or", _cast(Cast(a=sticky, ty=U32), b),
                             _op("and", sig, _c(b, 1), b), b), b)
    # (E - 1) << M plus the significand with its leading bit: a carry of the rounding
    # walks into the exponent, up to inf, by itself
    normal = _op("add", _op("add", _op("shl", _cast(_op("sub", pos, _u(mb)), b), _u(mb), b),
                            sig, b), up, b)
    tiny: Expr = _v(p + "m0")  # below 2^M units the value is its own encoding
    if fmt.width == 64:
        tiny = _op("or", _op("shl", _cast(_v(p + "m1"), b), _u(32), b), _cast(tiny, b), b)
    s.append(Let(name=p + "r", value=_sel(
        _cmp("ge", pos, _u(fmt.emax + mb - 1)), _c(b, fmt.emax << mb),  # past the largest
        _sel(_cmp("lt", pos, _u(mb)), tiny, normal, b), b)))
    s.append(Let(name=p + "rb", value=_sel(
        _cmp("eq", _v(p + "top"), _u(0)), _c(b, 0),
        _op("or", _v(p + "r", b), _op("shl", _cast(_v(p + "sign"), b), _u(fmt.width - 1), b),
            b), b)))
    # flush mode: a subnormal result compares equal to zero and becomes a zero of its sign
    rb = _v(p + "rb", b)
    s.append(Assign(name=p + "rb", value=_sel(_is_zero(Bitcast(a=rb, ty=fmt.ty)),
                                          _op("and", rb, _c(b, 1 << (fmt.width - 1)), b), rb,
                                          b)))
    s.append(Store(buffer=out, index=e, value=Bitcast(a=rb, ty=fmt.ty)))
    return s


def _finalize(fmt: Format) -> Program:
    """Per element e < Length(out): finalize_element; then, after a barrier, the first
    invocation of every 32 clears their used-bit word (all of them have read it)."""
    gid = _op("add", Builtin(name="global_id", axis=0),
              _op("mul", Builtin(name="global_id", axis=1),
                  _op("mul", Builtin(name="num_workgroups", axis=0), _u(FINALIZE_WORKGROUP))))
    e, n, used = _v("e"), _v("n"), _v("used")
    lay = _Layout(fmt, n)
    big = _cmp("ge", n, _u(SLOT_MIN_ELEMENTS))
    inside = _cmp("lt", e, n)
    s: list[Stmt] = [
        Let(name="e", value=gid), Let(name="n", value=Length(buffer="out")),
        Let(name="used", value=_u(0)),
        If(cond=inside, then=(
            If(cond=big, then=(Assign(name="used", value=Load(buffer="acc", index=lay.used(e),
                                                               ty=U32)),)),
            *finalize_element("", fmt, "out", "acc", e, n, used))),
        Barrier(),
        If(cond=_and(_and(inside, _cmp("eq", _op("and", e, _u(31)), _u(0))),
                     _cmp("ne", used, _u(0))),
           then=(Store(buffer="acc", index=lay.used(e), value=_u(0)),)),
    ]
    return Program(name=f"vyre_exact_sum_finalize{'' if fmt.ty is F32 else '_' + fmt.ty.value}",
                   workgroup_size=(FINALIZE_WORKGROUP, 1, 1),
                   buffers=(BufferDecl(name="out", ty=fmt.ty, access="read_write"),
                            BufferDecl(name="acc", ty=U32, access="read_write")),
                   body=tuple(s))


FINALIZE = _finalize(F32_SUM)
"""The f32 finalisation program (buffers: out f32 read_write, acc u32 read_write)."""
FINALIZE_F64 = _finalize(F64_SUM)
"""The f64 finalisation program (buffers: out f64 read_write, acc u32 read_write)."""
FINALIZE_FOR = {F32: FINALIZE, F64: FINALIZE_F64}
