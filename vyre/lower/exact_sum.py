"""Order-independent f32 atomic add, written once as IR -> IR rewrites.

An f32 atomic add whose old value is never read (vyre.ir.analysis.exact_sum_targets) is
summed exactly: each target element gets an accumulator of WORDS u32 words, a 320-bit
two's complement fixed-point number whose unit is 2^-149 (the smallest subnormal), so
every finite f32 is an integer of at most 24 significant bits there and a sum of up to
2^42 of them cannot overflow it. `main_program` rewrites each such add into integer atomic
adds of the value's significand into the two words it spans, the carry (or borrow) out of
each word read from the atomic's old value and added to the next word by another atomic
add. Integer addition with carries propagated that way is exact whatever the order, so the
words end as the exact sum on every backend and every run. inf and NaN values set bits of
a flag word instead. `FINALIZE` then folds in the element's initial value, rounds the exact
total once to f32 (nearest even; past the largest float: inf), stores it and zeroes the
words again, so the next dispatch finds them clear. Semantics (docs/IR.md "Atomic"):

- the result is round(initial + S), S the exact sum of the added values;
- an element whose S is exactly zero and that got no inf or NaN keeps its bits (S acts as
  -0, IEEE's additive identity: -0 stays -0, an element nothing was added to is unchanged);
- inf and NaN follow IEEE: any NaN, or +inf and -inf both, give NaN; else an inf wins;
- in flush mode the added values and the initial value are read as arithmetic operands (a
  subnormal as a zero of its sign) and a subnormal result becomes a zero of its sign:
  both through float comparisons with zero, which flush exactly there.

The dispatch plan that runs these (scratch buffers, two device dispatches per user
dispatch) is vyre.exact_sum_plan; the reference backend runs the same plan. On a
workgroup array the words are a workgroup array too, zeroed when the workgroup starts, and
the same finalisation runs after every barrier (then another barrier), so the sums of a
phase land before any invocation reads the array.
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
    WorkgroupArray,
)
from ..ir.types import ScalarType
from ..ir.visit import map_block

WORDS = 10
"""Accumulator words per element: 320 bits, unit 2^-149 (f32 values span bits 0..277)."""
STRIDE = WORDS + 1
"""u32 words of scratch per target element: the accumulator, then the flag word."""
FLAG_POS_INF, FLAG_NEG_INF, FLAG_NAN = 1, 2, 4
FINALIZE_WORKGROUP = 256

U32, F32, BOOL = ScalarType.U32, ScalarType.F32, ScalarType.BOOL
_MASK = 0xFFFFFFFF


# ------------------------------------------------------------------ expression helpers
def _u(v: int) -> Expr:
    return Const(ty=U32, value=v & _MASK)


def _op(op: str, a: Expr, b: Expr, ty: ScalarType = U32) -> Expr:
    return Binary(op=op, a=a, b=b, ty=ty)


def _cmp(op: str, a: Expr, b: Expr) -> Expr:
    return Binary(op=op, a=a, b=b, ty=BOOL)


def _sel(cond: Expr, a: Expr, b: Expr, ty: ScalarType = U32) -> Expr:
    """`a` where `cond` else `b`."""
    return Select(cond=cond, a=a, b=b, ty=ty)


def _v(name: str, ty: ScalarType = U32) -> Var:
    return Var(name=name, ty=ty)


def _is_zero_f32(x: Expr) -> Expr:
    """x == 0.0 as a float comparison: true for ±0, and in flush mode for subnormals too."""
    return _cmp("eq", x, Const(ty=F32, value=0.0))


@dataclass(frozen=True)
class _Fixed:
    """A finite f32 as a fixed-point integer: significand `lo | hi << 32` at word `word`."""

    neg: Expr  # bool
    word: Expr
    lo: Expr
    hi: Expr


def _fixed(p: str, bits: Expr, out: list[Stmt]) -> _Fixed:
    """Statements (appended to `out`) splitting the f32 with `bits` into words: the value is
    m * 2^(max(e, 1) - 150) = m << s in units of 2^-149, s = max(e, 1) - 1 in 0..253."""
    e = _op("and", _op("shr", bits, _u(23)), _u(0xFF))
    out.append(Let(name=f"{p}e", value=e))
    out.append(Let(name=f"{p}m", value=_op("or", _op("and", bits, _u(0x7FFFFF)),
                                         _sel(_cmp("ne", _v(f"{p}e"), _u(0)), _u(0x800000),
                                              _u(0)))))
    out.append(Let(name=f"{p}s", value=_op("sub", _op("max", _v(f"{p}e"), _u(1)), _u(1))))
    out.append(Let(name=f"{p}sh", value=_op("and", _v(f"{p}s"), _u(31))))
    m, sh = _v(f"{p}m"), _v(f"{p}sh")
    # (a shift by 32 - 0 = 32 is taken modulo 32 by the IR: hence the select)
    hi = _sel(_cmp("ne", sh, _u(0)), _op("shr", m, _op("sub", _u(32), sh)), _u(0))
    return _Fixed(neg=_cmp("ne", _op("shr", bits, _u(31)), _u(0)),
                  word=_op("shr", _v(f"{p}s"), _u(5)), lo=_op("shl", m, sh), hi=hi)


# ------------------------------------------------------------------ the rewritten kernel
def _accumulate(p: str, acc: str, target: str, site: Atomic) -> list[Stmt]:
    """The statements replacing one order-independent add of `site` into `target`."""
    body: list[Stmt] = [Let(name=f"{p}i", value=site.index), Let(name=f"{p}v", value=site.value)]
    i, v = _v(f"{p}i"), _v(f"{p}v", F32)
    inner: list[Stmt] = [Let(name=f"{p}b", value=Bitcast(a=v, ty=U32))]
    b = _v(f"{p}b")
    base = _op("mul", i, _u(STRIDE))
    special = _cmp("eq", _op("and", _op("shr", b, _u(23)), _u(0xFF)), _u(0xFF))
    flag = _sel(_cmp("ne", _op("and", b, _u(0x7FFFFF)), _u(0)), _u(FLAG_NAN),
                _sel(_cmp("ne", _op("shr", b, _u(31)), _u(0)), _u(FLAG_NEG_INF),
                     _u(FLAG_POS_INF)))
    set_flag = Atomic(op="or", buffer=acc, index=_op("add", base, _u(WORDS)), value=flag)
    finite: list[Stmt] = []
    fx = _fixed(p, b, finite)
    finite += [
        Let(name=f"{p}neg", value=fx.neg),
        Let(name=f"{p}k", value=_op("add", base, fx.word)),
        Let(name=f"{p}end", value=_op("add", base, _u(WORDS))),
        Let(name=f"{p}x", value=fx.lo),
        Let(name=f"{p}hi", value=fx.hi),
        Let(name=f"{p}c", value=_u(0)),
    ]
    neg, k, x, c = _v(f"{p}neg", BOOL), _v(f"{p}k"), _v(f"{p}x"), _v(f"{p}c")
    # one step per word, unrolled (no loop: lavapipe counts loop passes per shader): add x
    # to word k; what moves to word k+1 (carry, or borrow for a negative value) is read
    # from the old value; then x = the next word's part + that.
    for j in range(WORDS):
        old = _v(f"{p}o{j}")
        moved = Cast(a=_sel(neg, _cmp("lt", old, x), _cmp("gt", old, Unary(op="bit_not", a=x,
                                                                           ty=U32)), BOOL),
                     ty=U32)
        finite.append(If(
            cond=Binary(op="logical_and", a=_cmp("ne", x, _u(0)), b=_cmp("lt", k, _v(f"{p}end")),
                        ty=BOOL),
            then=(Atomic(op="add", buffer=acc, index=k,
                         value=_sel(neg, _op("sub", _u(0), x), x), result=old.name),
                  Assign(name=c.name, value=moved)),
            orelse=(Assign(name=c.name, value=_u(0)),)))
        finite.append(Assign(name=x.name, value=_op("add", _v(f"{p}hi"), c) if j == 0 else c))
        if j < WORDS - 1:
            finite.append(Assign(name=k.name, value=_op("add", k, _u(1))))
    inner.append(If(cond=special, then=(set_flag,), orelse=(
        If(cond=_is_zero_f32(v), orelse=tuple(finite)),)))
    body.append(If(cond=_cmp("lt", i, Length(buffer=target)), then=tuple(inner)))
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
    counts = {a.name: a.count for a in program.workgroup_arrays}
    size = program.workgroup_size[0] * program.workgroup_size[1] * program.workgroup_size[2]
    sites = [0]

    def rewrite(s: Stmt) -> list[Stmt]:
        if type(s) is Atomic and s.buffer in acc and s.op == "add" and not s.relaxed:
            sites[0] += 1
            return _accumulate(f"{prefix}{sites[0]}_", acc[s.buffer], s.buffer, s)
        if type(s) is Barrier and shared:  # the phase's sums land before anyone reads
            out: list[Stmt] = [s]
            for t in shared:
                sites[0] += 1
                p = f"{prefix}{sites[0]}_"
                out.append(For(var=f"{p}el", ty=U32, start=Builtin(name="local_index"),
                               end=_u(counts[t]), step=size,
                               body=tuple(finalize_element(p, t, acc[t], _v(f"{p}el")))))
            return [*out, Barrier()]
        return [s]

    body = map_block(program.body, rewrite)
    if shared:  # workgroup memory starts undefined: zero the words, then a barrier
        clear = tuple(For(var=f"{prefix}z{j}", ty=U32, start=Builtin(name="local_index"),
                          end=_u(STRIDE * counts[t]), step=size,
                          body=(Store(buffer=acc[t], index=_v(f"{prefix}z{j}"), value=_u(0)),))
                      for j, t in enumerate(shared))
        body = (*clear, Barrier(), *body)
    scratch = tuple(BufferDecl(name=acc[t], ty=U32, access="read_write") for t in targets)
    words = tuple(WorkgroupArray(name=acc[t], ty=U32, count=STRIDE * counts[t]) for t in shared)
    main = program.model_copy(update={
        "body": body, "buffers": (*program.buffers, *scratch),
        "workgroup_arrays": (*program.workgroup_arrays, *words)})
    slots = tuple(next(j for j, b in enumerate(program.buffers) if b.name == t) for t in targets)
    return Plan(main=main, targets=slots)


# ------------------------------------------------------------------ the finalisation
def finalize_element(p: str, out: str, acc: str, e: Expr) -> list[Stmt]:
    """Element e of f32 array `out` (whose exact sum is in words e * STRIDE.. of u32 array
    `acc`): if anything was added, fold in the initial value, round once, store, and zero
    the words. Locals are named with prefix `p`."""
    body: list[Stmt] = [Let(name=p + "base", value=_op("mul", e, _u(STRIDE)))]
    base = _v(p + "base")
    for j in range(STRIDE):
        body.append(Let(name=p + f"w{j}", value=Load(buffer=acc, index=_op("add", base, _u(j)),
                                                 ty=U32)))
    anything: Expr = _v(p + "w0")
    for j in range(1, STRIDE):
        anything = _op("or", anything, _v(p + f"w{j}"))
    # zero what is not zero already (a sum spans two or three words: most need no store)
    work: list[Stmt] = [If(cond=_cmp("ne", _v(p + f"w{j}"), _u(0)), then=(
        Store(buffer=acc, index=_op("add", base, _u(j)), value=_u(0)),)) for j in range(STRIDE)]
    work += [Let(name=p + "x", value=Load(buffer=out, index=e, ty=F32)),
             Let(name=p + "xb", value=Bitcast(a=_v(p + "x", F32), ty=U32)),
             Let(name=p + "xe", value=_op("and", _op("shr", _v(p + "xb"), _u(23)), _u(0xFF)))]
    xb, xe = _v(p + "xb"), _v(p + "xe")
    x_special = _cmp("eq", xe, _u(0xFF))
    x_nan = Binary(op="logical_and", a=x_special,
                   b=_cmp("ne", _op("and", xb, _u(0x7FFFFF)), _u(0)), ty=BOOL)
    x_inf = _sel(x_special, _sel(_cmp("ne", _op("shr", xb, _u(31)), _u(0)), _u(FLAG_NEG_INF),
                                 _u(FLAG_POS_INF)), _u(0))
    work.append(Let(name=p + "fl", value=_op("or", _v(p + f"w{WORDS}"), x_inf)))
    fl = _v(p + "fl")
    is_nan = Binary(op="logical_or", a=_cmp("ne", _op("and", fl, _u(FLAG_NAN)), _u(0)),
                    b=_cmp("eq", _op("and", fl, _u(3)), _u(3)), ty=BOOL)
    special_bits = _sel(is_nan, _u(0x7FC00000),
                        _sel(_cmp("eq", fl, _u(FLAG_NEG_INF)), _u(0xFF800000), _u(0x7F800000)))
    store_special = Store(buffer=out, index=e, value=Bitcast(a=special_bits, ty=F32))
    work.append(If(cond=x_nan, orelse=(If(cond=_cmp("ne", fl, _u(0)), then=(store_special,),
                                            orelse=tuple(_round_and_store(p, out, e))),)))
    body.append(If(cond=_cmp("ne", anything, _u(0)), then=tuple(work)))
    return body


def _finalize() -> Program:
    """Per element e < Length(out): finalize_element. One program for every target."""
    gid = _op("add", Builtin(name="global_id", axis=0),
              _op("mul", Builtin(name="global_id", axis=1),
                  _op("mul", Builtin(name="num_workgroups", axis=0), _u(FINALIZE_WORKGROUP))))
    e = _v("e")
    s: list[Stmt] = [Let(name="e", value=gid), If(
        cond=_cmp("lt", e, Length(buffer="out")), then=tuple(finalize_element("", "out", "acc", e)))]
    return Program(name="vyre_exact_sum_finalize", workgroup_size=(FINALIZE_WORKGROUP, 1, 1),
                   buffers=(BufferDecl(name="out", ty=F32, access="read_write"),
                            BufferDecl(name="acc", ty=U32, access="read_write")),
                   body=tuple(s))


def _round_and_store(p: str, out: str, e: Expr) -> list[Stmt]:
    """(x finite, the words w0..w9 the exact sum S != 0.) out[e] = round(x + S)."""
    s: list[Stmt] = []
    fx = _fixed(p + "xf", _sel(_is_zero_f32(_v(p + "x", F32)), _u(0), _v(p + "xb")), s)
    s += [Let(name=p + "xneg", value=fx.neg), Let(name=p + "xw", value=fx.word),
          Let(name=p + "xlo", value=fx.lo), Let(name=p + "xhi", value=fx.hi), Let(name=p + "c", value=_u(0))]
    xneg, c = _v(p + "xneg", BOOL), _v(p + "c")
    # total = S + x, word by word with a carry (x >= 0) or a borrow (x < 0)
    for j in range(WORDS):
        w = _v(p + f"w{j}")
        part = _op("add", _sel(_cmp("eq", _v(p + "xw"), _u(j)), _v(p + "xlo"), _u(0)),
                   _sel(_cmp("eq", _op("add", _v(p + "xw"), _u(1)), _u(j)), _v(p + "xhi"), _u(0)))
        s.append(Let(name=p + f"t{j}", value=_op("add", part, c)))
        t = _v(p + f"t{j}")
        s.append(Let(name=p + f"n{j}", value=_sel(xneg, _op("sub", w, t), _op("add", w, t))))
        s.append(Assign(name=p + "c", value=Cast(a=_sel(xneg, _cmp("lt", w, t),
                                                     _cmp("lt", _v(p + f"n{j}"), t), BOOL), ty=U32)))
    # magnitude and sign of the two's complement total
    s.append(Let(name=p + "sign", value=_op("shr", _v(p + f"n{WORDS - 1}"), _u(31))))
    neg = _cmp("ne", _v(p + "sign"), _u(0))
    s.append(Let(name=p + "cn", value=_u(1)))
    for j in range(WORDS):
        n = _v(p + f"n{j}")
        s.append(Let(name=p + f"m{j}", value=_sel(neg, _op("add", Unary(op="bit_not", a=n, ty=U32),
                                                       _v(p + "cn")), n)))
        s.append(Assign(name=p + "cn", value=_op("and", _v(p + "cn"),
                                             Cast(a=_cmp("eq", n, _u(0)), ty=U32))))
    # the top nonzero word t and the two below it; `rest`: whether anything lies lower
    s.append(Let(name=p + "t", value=_u(0)))
    for j in range(1, WORDS):
        s.append(Assign(name=p + "t", value=_sel(_cmp("ne", _v(p + f"m{j}"), _u(0)), _u(j), _v(p + "t"))))
    t = _v(p + "t")
    top: Expr = _v(p + "m0")
    mid: Expr = _u(0)
    low: Expr = _u(0)
    rest: Expr = _u(0)
    for j in range(WORDS):
        m = _v(p + f"m{j}")
        if j:
            top = _sel(_cmp("eq", t, _u(j)), m, top)
        mid = _sel(_cmp("eq", t, _u(j + 1)), m, mid)
        low = _sel(_cmp("eq", t, _u(j + 2)), m, low)
        rest = _op("or", rest, _sel(_cmp("gt", t, _u(j + 2)), m, _u(0)))
    s += [Let(name=p + "top", value=top), Let(name=p + "mid", value=mid), Let(name=p + "low", value=low),
          Let(name=p + "rest", value=rest)]
    # leading zeros of top (a binary search; the IR has no clz)
    s += [Let(name=p + "lz", value=_u(0)), Let(name=p + "y", value=_v(p + "top"))]
    for width in (16, 8, 4, 2, 1):
        small = _cmp("lt", _v(p + "y"), _u(1 << (32 - width)))
        s.append(Assign(name=p + "lz", value=_op("add", _v(p + "lz"), _sel(small, _u(width), _u(0)))))
        s.append(Assign(name=p + "y", value=_sel(small, _op("shl", _v(p + "y"), _u(width)), _v(p + "y"))))
    lz = _v(p + "lz")
    nz = _cmp("ne", lz, _u(0))

    def shifted(a: str, b: str) -> Expr:
        return _op("or", _op("shl", _v(p + a), lz),
                   _sel(nz, _op("shr", _v(p + b), _op("sub", _u(32), lz)), _u(0)))

    s += [Let(name=p + "h", value=shifted("top", "mid")), Let(name=p + "l", value=shifted("mid", "low")),
          Let(name=p + "ll", value=_op("shl", _v(p + "low"), lz)),
          # the top bit's position p = 32 t + 31 - lz; the biased exponent is p - 22
          Let(name=p + "p", value=_op("sub", _op("add", _op("mul", t, _u(32)), _u(31)), lz))]
    h, pos = _v(p + "h"), _v(p + "p")
    sig = _op("shr", h, _u(8))
    rnd = _op("and", _op("shr", h, _u(7)), _u(1))
    sticky = _cmp("ne", _op("or", _op("or", _op("and", h, _u(0x7F)), _v(p + "l")),
                            _op("or", _v(p + "ll"), _v(p + "rest"))), _u(0))
    up = _op("and", rnd, _op("or", Cast(a=sticky, ty=U32), _op("and", sig, _u(1))))
    # (E - 1) << 23 plus the significand with its leading bit: a carry of the rounding
    # walks into the exponent, up to inf, by itself
    normal = _op("add", _op("add", _op("shl", _op("sub", pos, _u(23)), _u(23)), sig), up)
    s.append(Let(name=p + "r", value=_sel(
        _cmp("ge", pos, _u(277)), _u(0x7F800000),  # p - 22 >= 255: past the largest float
        _sel(_cmp("lt", pos, _u(23)), _v(p + "m0"), normal))))
    s.append(Let(name=p + "rb", value=_sel(_cmp("eq", _v(p + "top"), _u(0)), _u(0),
                                       _op("or", _v(p + "r"), _op("shl", _v(p + "sign"), _u(31))))))
    # flush mode: a subnormal result compares equal to zero and becomes a zero of its sign
    rb = _v(p + "rb")
    s.append(Assign(name=p + "rb", value=_sel(_is_zero_f32(Bitcast(a=rb, ty=F32)),
                                          _op("and", rb, _u(0x80000000)), rb)))
    s.append(Store(buffer=out, index=e, value=Bitcast(a=_v(p + "rb"), ty=F32)))
    return s


FINALIZE = _finalize()
"""The finalisation program (buffers: out f32 read_write, acc u32 read_write)."""
