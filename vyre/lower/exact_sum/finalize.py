"""The exact sum's finalisation: the programs (`FINALIZE`, `FINALIZE_F64`) that fold an
element's initial value into its digits, round the exact total once, store it and zero
the scratch words used; and `finalize_element`, the same for a workgroup array after a
barrier (the rewrite inserts it).

This module must never rewrite an atomic add nor decide how a plan is dispatched.
"""

from __future__ import annotations

from ...ir.nodes import (
    Assign,
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
    Stmt,
    Store,
    Unary,
    While,
)
from .digits import (
    _BIAS,
    _MASK,
    BOOL,
    F32,
    F32_SUM,
    F64,
    F64_SUM,
    FINALIZE_WORKGROUP,
    FLAG_NAN,
    FLAG_NEG_INF,
    FLAG_POS_INF,
    SLOT_MIN_ELEMENTS,
    U32,
    U64,
    Format,
    _and,
    _c,
    _cast,
    _cmp,
    _exponent,
    _fixed,
    _is_zero,
    _Layout,
    _mantissa_set,
    _op,
    _sel,
    _sign_set,
    _u,
    _v,
)


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
