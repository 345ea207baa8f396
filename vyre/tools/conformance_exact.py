"""Conformance cases with docs/IR.md's own values: each case of this module carries, for some
of its outputs, the result docs/IR.md defines, computed here independently of every backend
(Python ints, exact fractions, IEEE rounding of a wider exact value), so the reference is
checked too and not only compared with itself. `vyre.tools.conformance` adds these to its
table; `check_case` there compares each backend with the reference and the reference with
these values. Outputs that depend on the order of colliding atomics are named in
`order_dependent` and checked by an invariant that holds for every order (`atomic_chain`).

This module must never compute an expected value by running a backend, and never weaken a
rule of docs/IR.md to fit one.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Sequence
from fractions import Fraction
from typing import TYPE_CHECKING, Any

import numpy as np

from vyre import DispatchConfig, ScalarType
from vyre.builder import (
    ProgramBuilder,
    Value,
    abs_,
    atan2,
    call_fn,
    ceil,
    clamp,
    cos,
    exp,
    exp2,
    floor,
    fma,
    log,
    log2,
    max_,
    min_,
    pow_,
    round_,
    select,
    sin,
    sqrt,
    tan,
    tanh,
    trunc,
)
from vyre.ir import ops
from vyre.tools.function_oracle import correctly_rounded
from vyre.tools.testing import random_array

if TYPE_CHECKING:
    from vyre.tools.conformance_case import Case

ST = ScalarType
I32, U32, I64, U64 = ST.I32, ST.U32, ST.I64, ST.U64
F32, F16, F64, BOOL = ST.F32, ST.F16, ST.F64, ST.BOOL
INT_TYPES = (I32, U32, I64, U64)
FLOAT_TYPES = (F32, F64, F16)
Arrays = dict[str, Any]
IrFn = Callable[..., Any]  # (the row's loaded values by column) -> the IR expression
PyFn = Callable[..., Any]  # (the input columns) -> the expected values, one per row


# ------------------------------------------------------------------ exact arithmetic


def wrap(v: int, ty: ScalarType) -> int:
    """`v` wrapped to the integer type (two's complement)."""
    v &= (1 << ty.bits) - 1
    if ty.is_signed and v >= 1 << (ty.bits - 1):
        v -= 1 << ty.bits
    return v


def int_range(ty: ScalarType) -> tuple[int, int]:
    if ty.is_signed:
        return -(1 << (ty.bits - 1)), (1 << (ty.bits - 1)) - 1
    return 0, (1 << ty.bits) - 1


def c_div(a: int, b: int, ty: ScalarType) -> int:
    """Integer division truncating toward zero; x / 0 = 0; MIN / -1 wraps to MIN."""
    if b == 0:
        return 0
    q = abs(a) // abs(b)
    return wrap(q if (a < 0) == (b < 0) else -q, ty)


def c_rem(a: int, b: int, ty: ScalarType) -> int:
    """The remainder with the dividend's sign; x % 0 = 0; MIN % -1 = 0."""
    if b == 0:
        return 0
    return wrap(a - b * c_div(a, b, ty), ty)


_FMT = {F16: (11, -14, 15), F32: (24, -126, 127), F64: (53, -1022, 1023)}


def round_exact(q: Fraction, ty: ScalarType, negative_zero: bool = False) -> float:
    """The exact value `q` rounded once to the float type (to nearest, ties to even,
    subnormals kept, overflow to +-inf); a zero is -0 only if `negative_zero`."""
    if q == 0:
        return -0.0 if negative_zero else 0.0
    p, emin, emax = _FMT[ty]
    sign = -1.0 if q < 0 else 1.0
    m = abs(q)
    e = m.numerator.bit_length() - m.denominator.bit_length()
    if Fraction(2) ** e > m:
        e -= 1
    ulp = Fraction(2) ** (max(e, emin) - (p - 1))
    n = m / ulp
    r = math.floor(n)
    rest = n - r
    if rest > Fraction(1, 2) or (rest == Fraction(1, 2) and r % 2 == 1):
        r += 1
    v = r * ulp
    if v >= Fraction(2) ** (emax + 1):
        return sign * math.inf
    return sign * (v.numerator / v.denominator)


def to_type(x: Any, ty: ScalarType) -> np.ndarray:
    """Python floats (or f64 values) rounded once to `ty` (numpy's IEEE conversion)."""
    with np.errstate(over="ignore", invalid="ignore"):
        return np.asarray(x, dtype=np.float64).astype(ty.numpy)


def ints(a: np.ndarray) -> list[int]:
    return [int(v) for v in a.tolist()]


def floats(a: np.ndarray) -> np.ndarray:
    return np.asarray(a, dtype=np.float64)


# ------------------------------------------------------------------ case construction


def elementwise_case(
    name: str,
    columns: dict[str, ScalarType],
    outputs: Sequence[tuple[str, ScalarType, Sequence[tuple[IrFn, PyFn | None]]]],
    data: Callable[[np.random.Generator], Arrays],
    workgroup_size: int = 64,
) -> Case:
    """A Case computing, for each element i of the input columns (all of one length),
    `out[i * len(fns) + j] = fns[j][0](row)` for each output; the expected value of each
    output is the fns' Python halves (`fns[j][1](columns)`, an array over i) interleaved
    the same way (an output with a None half has no expected value)."""
    from vyre.tools.conformance_case import Case

    k = ProgramBuilder(name, workgroup_size=workgroup_size)
    bufs = {c: k.buffer(c, t) for c, t in columns.items()}
    outs = {o: k.buffer(o, t, "write") for o, t, _ in outputs}
    i = k.let(k.global_id(0))
    first = next(iter(bufs.values()))
    with k.if_(i < first.length()):
        row = {c: k.let(b[i]) for c, b in bufs.items()}
        for o, _, fns in outputs:
            for j, (f, _) in enumerate(fns):
                outs[o][i * len(fns) + j] = f(row)
    prog = k.build()

    def size(rng: np.random.Generator) -> tuple[Arrays, int]:
        d = data(rng)
        return d, len(next(iter(d.values())))

    def inputs(rng: np.random.Generator) -> Arrays:
        d, n = size(rng)
        out: Arrays = {c: np.asarray(d[c], dtype=columns[c].numpy) for c in columns}
        for o, _, fns in outputs:
            out[o] = n * len(fns)
        return out

    def expected(ins: Arrays) -> Arrays:
        res: Arrays = {}
        cols = {c: ins[c] for c in columns}
        for o, t, fns in outputs:
            if any(py is None for _, py in fns):
                continue
            with np.errstate(all="ignore"):
                kind: Any = object if t.is_int else np.float64
                parts = [np.asarray(py(cols), dtype=kind) for _, py in fns if py is not None]
            stacked = np.stack(parts, axis=1).reshape(-1)
            res[o] = (np.array([int(v) for v in stacked], dtype=object).astype(t.numpy)
                      if t.is_int else to_type(stacked, t))
        return res

    n_probe = size(np.random.default_rng(0))[1]
    return Case(name, prog, inputs, DispatchConfig(grid=max(1, -(-n_probe // workgroup_size))),
                expected=expected)


def _pairs(values: Sequence[Any], dtype: Any) -> tuple[np.ndarray, np.ndarray]:
    xs, ys = np.meshgrid(np.array(values, dtype=dtype), np.array(values, dtype=dtype),
                         indexing="ij")
    return xs.ravel(), ys.ravel()


# ------------------------------------------------------------------ integers


def extremes(ty: ScalarType) -> list[int]:
    lo, hi = int_range(ty)
    out = [lo, lo + 1, 0, 1, 2, 3, 7, hi - 1, hi, hi // 2, 1 << (ty.bits // 2)]
    if ty.is_signed:
        out += [-1, -2, -7, -(1 << (ty.bits // 2))]
    return out


def _int_data(ty: ScalarType) -> Callable[[np.random.Generator], Arrays]:
    def data(rng: np.random.Generator) -> Arrays:
        a, b = _pairs(extremes(ty), np.dtype(object))
        ra = random_array(rng, ty, 400).astype(object)
        rb = random_array(rng, ty, 400).astype(object)
        small = rng.integers(-8 if ty.is_signed else 0, 9, (2, 100)).astype(object)
        a = np.concatenate([a, ra, small[0]])
        b = np.concatenate([b, rb, small[1]])
        amounts = [0, 1, 5, ty.bits - 1, ty.bits, ty.bits + 3, 2 * ty.bits + 1, 0xFFFFFFFF,
                   31, 32, 33]
        s = np.array([amounts[j % len(amounts)] if j < 2 * len(amounts) ** 2
                      else int(rng.integers(0, 2**32)) for j in range(len(a))], dtype=object)
        return {"a": a.astype(ty.numpy), "b": b.astype(ty.numpy), "s": s.astype(np.uint32)}

    return data


def _int_ops(ty: ScalarType) -> list[tuple[IrFn, PyFn]]:
    def bin_(ir: Callable[[Value, Value], Any], py: Callable[[int, int], int]) -> tuple[IrFn, PyFn]:
        return (lambda r: ir(r["a"], r["b"]),
                lambda c: [py(x, y) for x, y in zip(ints(c["a"]), ints(c["b"]))])

    def un(ir: Callable[[Value], Any], py: Callable[[int], int]) -> tuple[IrFn, PyFn]:
        return (lambda r: ir(r["a"]), lambda c: [py(x) for x in ints(c["a"])])

    def sh(ir: Callable[[Value, Value], Any], py: Callable[[int, int], int]) -> tuple[IrFn, PyFn]:
        return (lambda r: ir(r["a"], r["s"]),
                lambda c: [py(x, s % ty.bits) for x, s in zip(ints(c["a"]), ints(c["s"]))])

    w = lambda v: wrap(v, ty)  # noqa: E731
    ops = [
        bin_(lambda x, y: x + y, lambda x, y: w(x + y)),
        bin_(lambda x, y: x - y, lambda x, y: w(x - y)),
        bin_(lambda x, y: x * y, lambda x, y: w(x * y)),
        bin_(lambda x, y: x / y, lambda x, y: c_div(x, y, ty)),
        bin_(lambda x, y: x % y, lambda x, y: c_rem(x, y, ty)),
        bin_(min_, min), bin_(max_, max),
        bin_(lambda x, y: x & y, lambda x, y: w(x & y)),
        bin_(lambda x, y: x | y, lambda x, y: w(x | y)),
        bin_(lambda x, y: x ^ y, lambda x, y: w(x ^ y)),
        bin_(lambda x, y: clamp(x, min_(x, y), max_(x, y)), lambda x, y: x),
        bin_(lambda x, y: select(x > y, x - y, y - x),
             lambda x, y: w(x - y) if x > y else w(y - x)),
        un(lambda x: ~x, lambda x: w(~x)),
        un(abs_, lambda x: w(abs(x))),
        sh(lambda x, s: x << s, lambda x, s: w(x << s)),
        sh(lambda x, s: x >> s, lambda x, s: x >> s),  # Python's >> is arithmetic on ints
    ]
    if ty.is_signed:
        ops.append(un(lambda x: -x, lambda x: w(-x)))
    return ops


_CMP: list[tuple[Callable[[Any, Any], Any], Callable[[Any, Any], bool]]] = [
    (lambda x, y: x < y, lambda x, y: x < y), (lambda x, y: x <= y, lambda x, y: x <= y),
    (lambda x, y: x > y, lambda x, y: x > y), (lambda x, y: x >= y, lambda x, y: x >= y),
    (lambda x, y: x == y, lambda x, y: x == y), (lambda x, y: x != y, lambda x, y: x != y),
]


def _int_cmp() -> list[tuple[IrFn, PyFn]]:
    out: list[tuple[IrFn, PyFn]] = [
        ((lambda r, f=f: f(r["a"], r["b"]).cast(U32)),
         (lambda c, p=p: [int(p(x, y)) for x, y in zip(ints(c["a"]), ints(c["b"]))]))
        for f, p in _CMP
    ]
    out.append((lambda r: (((r["a"] > 1) & (r["b"] > 1)) | ~(r["a"] == r["b"])).cast(U32),
                lambda c: [int((x > 1 and y > 1) or x != y)
                           for x, y in zip(ints(c["a"]), ints(c["b"]))]))
    out.append((lambda r: r["a"].cast(BOOL).cast(U32), lambda c: [int(x != 0) for x in ints(c["a"])]))
    return out


def int_case(ty: ScalarType) -> Case:
    """Every integer operator of docs/IR.md on every pair of extreme values (MIN, MAX, -1,
    0, ...) and on random pairs: wrapping add/sub/mul/neg/abs, division toward zero with
    x / 0 = 0 and MIN / -1 = MIN, remainders, shifts modulo the width (arithmetic right
    shift for signed types), bitwise ops, min/max/clamp/select, comparisons."""
    return elementwise_case(
        f"ir_int_{ty}", {"a": ty, "b": ty, "s": U32},
        [("out", ty, _int_ops(ty)), ("cmp", U32, _int_cmp())], _int_data(ty))


def int_cast_case() -> Case:
    """Integer <-> integer casts wrap (two's complement); an integer to bool is x != 0."""
    def data(rng: np.random.Generator) -> Arrays:
        cols = {}
        for t in INT_TYPES:
            e = np.array(extremes(t) * 4, dtype=object)[:40]
            cols[f"x_{t}"] = np.concatenate([e, random_array(rng, t, 200).astype(object)])
        return {k: v.astype(ScalarType(k[2:]).numpy) for k, v in cols.items()}

    outputs = []
    for dst in INT_TYPES:
        fns: list[tuple[IrFn, PyFn]] = [
            ((lambda r, s=src, d=dst: r[f"x_{s}"].cast(d)),
             (lambda c, s=src, d=dst: [wrap(x, d) for x in ints(c[f"x_{s}"])]))
            for src in INT_TYPES if src is not dst
        ]
        outputs.append((f"to_{dst}", dst, fns))
    return elementwise_case("ir_int_casts", {f"x_{t}": t for t in INT_TYPES}, outputs, data)


def _dot4_exact(a: int, b: int, acc: int, signed: bool) -> int:
    """docs/IR.md's dot4: acc + sum of the byte products (bytes sign- or zero-extended),
    wrapped to 32 bits, in Python ints."""
    total = acc
    for i in range(4):
        x, y = (a >> (8 * i)) & 0xFF, (b >> (8 * i)) & 0xFF
        if signed:
            x, y = x - ((x & 0x80) << 1), y - ((y & 0x80) << 1)  # sign-extend
        total += x * y
    return wrap(total, I32 if signed else U32)


def dot4_case() -> Case:
    """The packed dot products dot4_i8 / dot4_u8 at the edges: bytes 0x80 (-128) and 0x7F
    and 0xFF, each byte lane alone, accumulators at MIN / MAX so the final addition wraps
    both ways (4 * (-128)^2 = 65536 + INT_MAX wraps to negative; 4 * 127 * -128 + INT_MIN
    to positive), and random words."""
    from vyre.builder import dot4_i8, dot4_u8

    words = [0, 1, 0x80, 0x7F, 0xFF, 0x8000, 0x800000, 0x80000000, 0x7F000000, 0x80808080,
             0x7F7F7F7F, 0xFFFFFFFF, 0x01010101, 0x807F807F, 0x00FF00FF]
    accs = [0, 1, -1, 2**31 - 1, -(2**31), 2**31 - 65536, -(2**31) + 65024, 12345]

    def data(rng: np.random.Generator) -> Arrays:
        a, b = _pairs(words, np.dtype(object))
        acc = np.array([accs[j % len(accs)] for j in range(len(a))], dtype=object)
        n = 300
        ra = rng.integers(0, 2**32, n, dtype=np.uint64).astype(object)
        rb = rng.integers(0, 2**32, n, dtype=np.uint64).astype(object)
        rc = rng.integers(-(2**31), 2**31, n, dtype=np.int64).astype(object)
        return {"a": np.concatenate([a, ra]).astype(np.uint32),
                "b": np.concatenate([b, rb]).astype(np.uint32),
                "c": np.concatenate([acc, rc]).astype(np.int32)}

    def exact(signed: bool) -> PyFn:
        def py(c: Arrays) -> list[int]:
            accs_ = ints(c["c"]) if signed else [v & 0xFFFFFFFF for v in ints(c["c"])]
            return [_dot4_exact(x, y, z, signed)
                    for x, y, z in zip(ints(c["a"]), ints(c["b"]), accs_)]
        return py

    return elementwise_case(
        "ir_dot4", {"a": U32, "b": U32, "c": I32},
        [("signed", I32, [(lambda r: dot4_i8(r["a"], r["b"], r["c"]), exact(True)),
                          (lambda r: dot4_i8(r["a"], r["b"]), lambda c: exact(True)(
                              {**c, "c": np.zeros_like(c["c"])}))]),
         ("unsigned", U32, [(lambda r: dot4_u8(r["a"], r["b"], r["c"].bitcast(U32)),
                             exact(False))])],
        data)


# ------------------------------------------------------------------ floats


def float_specials(ty: ScalarType) -> list[float]:
    info = np.finfo(ty.numpy)
    vals = [0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 1.5, -2.5, 2.5, 2.7, 3.0, 7.0, 0.1, -1e-3,
            float(info.max), -float(info.max), float(info.tiny), -float(info.tiny),
            float(info.smallest_subnormal), 1e4, math.inf, -math.inf, math.nan,
            16777217.0, 1e30]
    return [float(v) for v in to_type(vals, ty)]


def _float_data(ty: ScalarType) -> Callable[[np.random.Generator], Arrays]:
    def data(rng: np.random.Generator) -> Arrays:
        a, b = _pairs(float_specials(ty), np.float64)
        info = np.finfo(ty.numpy)
        lo, hi = int(info.minexp) - int(info.nmant), int(info.maxexp)

        def wide(n: int) -> np.ndarray:  # every exponent, either sign
            v = np.ldexp(rng.uniform(1, 2, n), rng.integers(lo, hi, n))
            return np.clip(v * rng.choice([-1.0, 1.0], n), -float(info.max), float(info.max))

        ra = np.concatenate([rng.standard_normal(300) * 100, wide(200)])
        rb = np.concatenate([rng.standard_normal(300), wide(200)])
        c = np.concatenate([to_type(rng.standard_normal(a.size) * 10, ty).astype(np.float64),
                            rng.standard_normal(ra.size)])
        # a*b + c just below an f32 tie (single rounding gives the lower neighbour), and a
        # product on an f32 tie plus a tiny c (fma(-2147483904, 3, 1e-30))
        ta, tb, tc = 2**-12 * (1 + 2**-23), 2**-12 * (1 - 2**-23), 1 + 2**-23
        extra = np.array([[ta, tb, tc], [-2147483904.0, 3.0, 1e-30], [-2147483904.0, 3.0, 1e-45],
                          [1 + 2**-52, 1 - 2**-52, -1.0], [1e308, 10.0, -math.inf]])
        return {"a": to_type(np.concatenate([a, ra, extra[:, 0]]), ty),
                "b": to_type(np.concatenate([b, rb, extra[:, 1]]), ty),
                "c": to_type(np.concatenate([c, extra[:, 2]]), ty)}

    return data


def _fma_exact(x: float, y: float, z: float, ty: ScalarType) -> float:
    if math.isnan(x) or math.isnan(y) or math.isnan(z):
        return math.nan
    if math.isinf(x) or math.isinf(y):  # an infinite product (the exact one, never rounded)
        if x == 0 or y == 0:
            return math.nan
        p = math.copysign(math.inf, math.copysign(1, x) * math.copysign(1, y))
        return math.nan if math.isinf(z) and z != p else p
    if math.isinf(z):
        return z
    q = Fraction(x) * Fraction(y) + Fraction(z)
    prod_neg = (math.copysign(1, x) * math.copysign(1, y)) < 0
    neg_zero = (x == 0 or y == 0) and z == 0 and prod_neg and math.copysign(1, z) < 0
    return round_exact(q, ty, negative_zero=neg_zero)


def _float_rem(x: np.ndarray, y: np.ndarray, ty: ScalarType) -> np.ndarray:
    """docs/IR.md's float rem, step by step with each step rounded to the type:
    x - y * trunc(x / y)."""
    q = to_type(floats(x) / floats(y), ty).astype(np.float64)
    t = np.trunc(q)  # keeps the sign of zero; +-inf and NaN stay
    m = to_type(floats(y) * t, ty).astype(np.float64)
    return to_type(floats(x) - m, ty)


def _float_ops(ty: ScalarType) -> list[tuple[IrFn, PyFn]]:
    def bin_(ir: Callable[[Value, Value], Any], py: Callable[[np.ndarray, np.ndarray], Any],
             ) -> tuple[IrFn, PyFn]:
        return (lambda r: ir(r["a"], r["b"]), lambda c: py(floats(c["a"]), floats(c["b"])))

    def un(ir: Callable[[Value], Any], py: Callable[[np.ndarray], Any]) -> tuple[IrFn, PyFn]:
        return (lambda r: ir(r["a"]), lambda c: py(floats(c["a"])))

    r_ = lambda v: to_type(v, ty).astype(np.float64)  # noqa: E731  one rounding to ty
    return [
        # f64 results round innocuously to f32/f16: 53 >= 2 * 24 + 2
        bin_(lambda x, y: x + y, lambda x, y: x + y),
        bin_(lambda x, y: x - y, lambda x, y: x - y),
        bin_(lambda x, y: x * y, lambda x, y: x * y),
        bin_(lambda x, y: x / y, lambda x, y: x / y),
        bin_(lambda x, y: x % y, lambda x, y: _float_rem(x, y, ty)),
        bin_(lambda x, y: x * y + x, lambda x, y: r_(x * y) + x),  # no contraction
        bin_(lambda x, y: x * y - y, lambda x, y: r_(x * y) - y),
        bin_(lambda x, y: select(x < y, x, y), lambda x, y: np.where(x < y, x, y)),
        un(lambda x: -x, np.negative), un(abs_, np.abs), un(sqrt, np.sqrt),
        un(floor, np.floor), un(ceil, np.ceil), un(trunc, np.trunc),
        un(round_, np.rint),  # half to even
        un(lambda x: (x != 0).cast(ty), lambda x: (x != 0).astype(np.float64)),  # bool -> float
        (lambda r: fma(r["a"], r["b"], r["c"]),
         lambda c: [_fma_exact(x, y, z, ty) for x, y, z in
                    zip(c["a"].tolist(), c["b"].tolist(), c["c"].tolist())]),
    ]


def _float_cmp() -> list[tuple[IrFn, PyFn]]:
    out: list[tuple[IrFn, PyFn]] = [
        ((lambda r, f=f: f(r["a"], r["b"]).cast(U32)),
         (lambda c, p=p: np.asarray(p(floats(c["a"]), floats(c["b"])), dtype=np.int64)))
        for f, p in _CMP
    ]
    out.append((lambda r: r["a"].cast(BOOL).cast(U32),  # NaN is true: only +-0 is false
                lambda c: (floats(c["a"]) != 0).astype(np.int64)))
    return out


def float_case(ty: ScalarType) -> Case:
    """IEEE float arithmetic (docs/IR.md): add, sub, mul, div and sqrt correctly rounded;
    no contraction of a*b+c; fma rounded once; rem step by step; floor/ceil/trunc/round
    (half to even); signed zeros, infinities and NaN; comparisons (unordered with NaN);
    on every pair of special values and on random values of every exponent."""
    return elementwise_case(
        f"ir_float_{ty}", {"a": ty, "b": ty, "c": ty},
        [("out", ty, _float_ops(ty)), ("cmp", U32, _float_cmp())], _float_data(ty))


def _minnum(x: np.ndarray, y: np.ndarray, op: str) -> np.ndarray:
    f = np.minimum if op == "min" else np.maximum
    with np.errstate(invalid="ignore"):
        return np.where(np.isnan(x), y, np.where(np.isnan(y), x, f(x, y)))


def float_minmax_case(ty: ScalarType) -> Case:
    """Float min/max are minNum/maxNum (a NaN operand yields the other operand), clamp is
    min(max(x, lo), hi); docs/IR.md leaves the sign of a zero result open."""
    def mm(op: str) -> tuple[IrFn, PyFn]:
        ir = min_ if op == "min" else max_
        return (lambda r: ir(r["a"], r["b"]),
                lambda c: _minnum(floats(c["a"]), floats(c["b"]), op))

    clamp_ = (lambda r: clamp(r["a"], r["b"], r["c"]),
              lambda c: _minnum(_minnum(floats(c["a"]), floats(c["b"]), "max"),
                                floats(c["c"]), "min"))
    return elementwise_case(f"ir_float_minmax_{ty}", {"a": ty, "b": ty, "c": ty},
                            [("out", ty, [mm("min"), mm("max"), clamp_])], _float_data(ty))


# ------------------------------------------------------------------ casts


def float_to_int(x: float, ty: ScalarType) -> int:
    """docs/IR.md: truncate toward zero, saturate at the type's limits, NaN -> 0."""
    if math.isnan(x):
        return 0
    lo, hi = int_range(ty)
    if math.isinf(x):
        return hi if x > 0 else lo
    return max(lo, min(hi, math.trunc(x)))


CAST_SPECIALS = [0.0, -0.0, 0.5, -0.5, 1.5, -1.5, 2.7, -2.7, -0.99, 1e10, -1e10, 2147483520.0,
                 2147483648.0, -2147483648.0, 4294967040.0, 4294967296.0, 3e19, -3e19,
                 9.223372036854775808e18, -9.223372036854775808e18, 1.8446744073709552e19,
                 65504.0, -65504.0, 1e30, -1e30, math.inf, -math.inf, math.nan]


def float_to_int_case(src: ScalarType) -> Case:
    """Float -> integer casts truncate toward zero and saturate (NaN -> 0), to every
    integer type, on special values and on random bit patterns (every exponent)."""
    def data(rng: np.random.Generator) -> Arrays:
        bits = rng.integers(0, 2**src.bits, 300, dtype=np.uint64).astype(
            {16: np.uint16, 32: np.uint32, 64: np.uint64}[src.bits])
        with np.errstate(invalid="ignore"):  # signalling NaNs are quietened
            rand = bits.view(src.numpy).astype(np.float64)
        return {"x": to_type(np.concatenate([CAST_SPECIALS, rand,
                                             rng.standard_normal(100) * 1e3]), src)}

    fns: list[tuple[str, ScalarType, Sequence[tuple[IrFn, PyFn | None]]]] = [
        (f"to_{dst}", dst, [((lambda r, d=dst: r["x"].cast(d)),
                             (lambda c, d=dst: [float_to_int(v, d) for v in c["x"].tolist()]))])
        for dst in INT_TYPES
    ]
    return elementwise_case(f"ir_float_to_int_{src}", {"x": src}, fns, data)


def int_to_float_case(dsts: tuple[ScalarType, ...], name: str) -> Case:
    """Integer -> float casts round to nearest, ties to even (16777217 -> 16777216 in f32),
    and overflow to +-inf (f16 above 65519)."""
    vals: dict[ScalarType, list[int]] = {
        I32: [16777217, 16777219, -16777217, 2**31 - 1, -(2**31), 0, 3, 2049, 2051, 65519,
              65520, 100000, -100000],
        U32: [2**32 - 1, 2**31 + 1, 16777217, 0, 65520],
        I64: [2**63 - 1, -(2**63), 2**53 + 1, 2**53 + 3, (1 << 40) + (1 << 16) + 1,
              (1 << 40) + (1 << 16), 2**40, -(2**40)],
        U64: [2**64 - 1, 2**63 + 2**39 + 1, 2**53 + 1],
    }

    def data(rng: np.random.Generator) -> Arrays:
        out = {}
        for t in INT_TYPES:
            v = (vals[t] * 8)[:24]
            out[f"x_{t}"] = np.concatenate([np.array(v, dtype=object),
                                            random_array(rng, t, 200).astype(object)]).astype(t.numpy)
        return out

    outputs: list[tuple[str, ScalarType, Sequence[tuple[IrFn, PyFn | None]]]] = [
        (f"to_{dst}", dst, [((lambda r, s=src, d=dst: r[f"x_{s}"].cast(d)),
                             (lambda c, s=src, d=dst: [round_exact(Fraction(v), d)
                                                       for v in ints(c[f"x_{s}"])]))
                            for src in INT_TYPES])
        for dst in dsts
    ]
    return elementwise_case(name, {f"x_{t}": t for t in INT_TYPES}, outputs, data)


def float_float_case(src: ScalarType, dsts: tuple[ScalarType, ...]) -> Case:
    """Float -> float casts: widening is exact; narrowing rounds once to nearest even and
    overflows to +-inf, underflows to a (signed) zero; NaN stays NaN."""
    def data(rng: np.random.Generator) -> Arrays:
        v = [0.1, 1e300, -1e-300, 3.4028235677973366e38, 65520.0, 65519.0, 1e-8, -1e-8,
             2.0**-24, 2.0**-25, 3 * 2.0**-26, *CAST_SPECIALS]
        return {"x": to_type(np.concatenate([v, rng.standard_normal(200) * 1e4,
                                             np.ldexp(rng.uniform(1, 2, 200),
                                                      rng.integers(-160, 130, 200))]), src)}

    outputs: list[tuple[str, ScalarType, Sequence[tuple[IrFn, PyFn | None]]]] = [
        (f"to_{d}", d, [((lambda r, d=d: r["x"].cast(d)),
                         (lambda c, d=d: [math.nan if math.isnan(v) else round_exact(
                             Fraction(v), d, math.copysign(1, v) < 0) if math.isfinite(v)
                                          else v for v in c["x"].tolist()]))])
        for d in dsts
    ]
    return elementwise_case(f"ir_cast_{src}_to_{'_'.join(str(d) for d in dsts)}", {"x": src},
                            outputs, data)


def bitcast_case(width: int) -> Case:
    """Bitcasts keep the bits (f32 1.0 is 0x3F800000, -0.0 is 0x80000000, i32 -1 is
    0xFFFFFFFF); floats are read from memory, so every NaN's bits survive."""
    tys = (F32, I32, U32) if width == 32 else (F64, I64, U64)
    ut = np.uint32 if width == 32 else np.uint64

    def data(rng: np.random.Generator) -> Arrays:
        fixed = np.array([1.0, -0.0, 0.0, np.inf, -np.inf], dtype=tys[0].numpy).view(ut)
        bits = np.concatenate([fixed, rng.integers(0, 2**width, 300, dtype=np.uint64).astype(ut)])
        return {f"x_{t}": bits.view(t.numpy) for t in tys}

    outputs: list[tuple[str, ScalarType, Sequence[tuple[IrFn, PyFn | None]]]] = []
    for dst in tys:
        outputs.append((f"to_{dst}", dst, [
            ((lambda r, s=src, d=dst: r[f"x_{s}"].bitcast(d)),
             (lambda c, s=src, d=dst: c[f"x_{s}"].view(d.numpy).astype(np.float64)
              if d.is_float else c[f"x_{s}"].view(d.numpy).astype(object)))
            for src in tys if src is not dst]))
    return elementwise_case(f"ir_bitcast_{width}", {f"x_{t}": t for t in tys}, outputs, data)


# ------------------------------------------------------------------ approximate functions


def approx_case(ty: ScalarType) -> Case:
    """The functions on ordinary arguments: f32 / f16 against Python's math library
    rounded once (exact definitions: the f64 value rounded to the type is the correctly
    rounded one but for near-midpoint arguments, which these are not); f64, where every
    one is an exact definition too, against the correctly rounded oracle
    (vyre.tools.function_oracle: math's own f64 results are not correctly rounded)."""
    def data(rng: np.random.Generator) -> Arrays:
        x = np.concatenate([[0.1, 0.5, 1.0, 2.0, 3.0], rng.uniform(0.05, 3.0, 120)])
        y = np.concatenate([[0.1, 0.5, 1.0, 2.0, 3.0], rng.uniform(-3.0, 3.0, 120)])
        return {"x": to_type(x, ty), "y": to_type(y, ty)}

    def rounded(name: str, py: Callable[..., float]) -> Callable[..., float]:
        if ty is not ScalarType.F64:
            return py
        return lambda *a: correctly_rounded(name, np.float64, *a)

    def un(ir: Callable[[Value], Any], name: str, py: Callable[[float], float]
           ) -> tuple[IrFn, PyFn]:
        f = rounded(name, py)
        return (lambda r: ir(r["x"]), lambda c: [f(v) for v in c["x"].tolist()])

    pw = rounded("pow", lambda x, y: x**y)
    at = rounded("atan2", math.atan2)
    fns = [un(exp, "exp", math.exp), un(exp2, "exp2", lambda v: 2.0**v),
           un(log, "log", math.log), un(log2, "log2", math.log2), un(sin, "sin", math.sin),
           un(cos, "cos", math.cos), un(tan, "tan", math.tan), un(tanh, "tanh", math.tanh),
           (lambda r: pow_(r["x"], r["y"]),
            lambda c: [pw(x, y) for x, y in zip(c["x"].tolist(), c["y"].tolist())]),
           (lambda r: atan2(r["y"], r["x"]),
            lambda c: [at(y, x) for x, y in zip(c["x"].tolist(), c["y"].tolist())])]
    return elementwise_case(f"ir_approx_{ty}", {"x": ty, "y": ty}, [("out", ty, fns)], data)


def registry_case(ty: ScalarType) -> Case | None:
    """Every approximate function of the op registry (vyre.ir.ops) that names conformance
    samples, on those samples: within docs/IR.md's bound of its f64 reference rounded once
    to `ty`. A function added to the registry is checked here with no edit to this file."""
    sampled = [op for op in ops.CALL_OPS if op.approximate and op.samples]
    if not sampled:
        return None
    n = max(len(col) for op in sampled for col in op.samples)
    cols = {f"{op.name}_{k}": ty for op in sampled for k in range(op.arity)}

    def data(rng: np.random.Generator) -> Arrays:
        return {f"{op.name}_{k}": to_type(np.resize(np.asarray(col, np.float64), n), ty)
                for op in sampled for k, col in enumerate(op.samples)}

    def check(op: ops.CallOp) -> tuple[IrFn, PyFn]:
        names = [f"{op.name}_{k}" for k in range(op.arity)]
        ref = op.reference
        assert ref is not None
        return (lambda r: call_fn(op.name, *(r[c] for c in names)),
                lambda c: ref(*(floats(c[x]) for x in names)))

    return elementwise_case(f"ir_registry_approx_{ty}", cols,
                            [("out", ty, [check(op) for op in sampled])], data)


# ------------------------------------------------------------------ programs with fixed values


def _case(prog: Any, inputs: Arrays, config: DispatchConfig, expected: Arrays,
          order_dependent: frozenset[str] = frozenset(),
          invariant: Callable[[Arrays, Arrays], str | None] | None = None) -> Case:
    """A Case with fixed inputs and fixed expected values."""
    from vyre.tools.conformance_case import Case

    return Case(prog.name, prog, lambda rng: dict(inputs), config,
                expected=lambda ins: expected, order_dependent=order_dependent,
                invariant=invariant)


def oob_case() -> Case:
    """Loads past the end read 0; stores past the end do nothing (index 0xFFFFFFFF, and an
    i32 -1 index, bitcast to u32, included); atomics past the end do nothing and return 0."""
    k = ProgramBuilder("ir_out_of_bounds", workgroup_size=8)
    src = k.buffer("src", I32)
    dst = k.buffer("dst", I32, "read_write")
    out = k.buffer("out", I32, "write")
    acc = k.buffer("acc", U32, "read_write")
    old = k.buffer("old", U32, "write")
    i = k.global_id()
    out[i] = src[i + 100] + src[i]
    dst[i + 4] = src[i]
    dst[k.lit(0xFFFFFFFF, U32)] = 5
    dst[k.lit(-1).bitcast(U32)] = 6
    o = acc.atomic_add(i * 2, 1)  # half of these are out of range
    old[i] = o + 100
    return _case(k.build(), {"src": np.arange(1, 9, dtype=np.int32),
                             "dst": np.full(8, -7, np.int32), "out": 16,
                             "acc": np.zeros(8, np.uint32), "old": 16},
                 DispatchConfig(grid=2),
                 {"out": list(range(1, 9)) + [0] * 8, "dst": [-7] * 4 + [1, 2, 3, 4],
                  "acc": [1, 0, 1, 0, 1, 0, 1, 0], "old": [100] * 16})


def params_case(types: tuple[ScalarType, ...], name: str) -> Case:
    """Params of each of `types`, read back exactly."""
    k = ProgramBuilder(name, workgroup_size=1)
    vals: dict[ScalarType, Any] = {I32: -7, U32: 2**32 - 2, F32: 0.25, F16: 1.5,
                                   F64: 2.0**60 + 0.5, I64: -(2**40) - 3, U64: 2**63 + 5}
    params, expected = {}, {}
    for t in types:
        o = k.buffer(f"o_{t}", t, "write", count=1)
        o[0] = k.param(f"p_{t}", t)
        params[f"p_{t}"] = vals[t]
        expected[f"o_{t}"] = np.array([vals[t]], t.numpy)
    return _case(k.build(), {}, DispatchConfig(params=params), expected)


def length_case() -> Case:
    """length() of a buffer (its bound element count), of a declared count and of a
    workgroup array; a zero-length buffer (every load reads 0)."""
    k = ProgramBuilder("ir_length", workgroup_size=1)
    a = k.buffer("a", F32)
    e = k.buffer("e", U32)
    out = k.buffer("out", U32, "write", count=5)
    sh = k.shared("sh", F32, 17)
    p = k.param("p", U32)
    out[0] = a.length()
    out[1] = sh.length()
    out[2] = p * 2
    out[3] = e.length()
    out[4] = e[0] + e.length() + 1
    return _case(k.build(), {"a": np.zeros(11, np.float32), "e": np.zeros(0, np.uint32)},
                 DispatchConfig(params={"p": 21}), {"out": [11, 17, 42, 0, 1]})


def f16_odd_case() -> Case:
    """f16 buffers of odd length (two elements share a 32-bit word on some devices): every
    element, the last one included, is read and written on its own."""
    k = ProgramBuilder("ir_f16_odd_length", workgroup_size=4)
    x = k.buffer("x", F16)
    y = k.buffer("y", F16, "write")
    i = k.global_id()
    with k.if_(i < x.length()):
        y[i] = x[i] * 2.0 + 1.0
    v = np.array([1.0, -2.5, 65504.0, np.nan, 0.1], np.float16)
    with np.errstate(over="ignore"):
        exp = to_type(to_type(v.astype(np.float64) * 2.0, F16).astype(np.float64) + 1.0, F16)
    return _case(k.build(), {"x": v, "y": 5}, DispatchConfig(grid=2), {"y": exp})


def approx_wide_case() -> Case:
    """Approximate f32 functions over their whole domains (within docs/IR.md's bound,
    against f64 results rounded to f32): sin/cos/tan of huge arguments (the reduction must
    be exact), tan near pi/2, exp/exp2 near overflow and underflow, tanh saturating, log
    of subnormals, pow of negative bases with integer exponents, atan2 of every pair of
    special values (signed zeros, infinities)."""
    def data(rng: np.random.Generator) -> Arrays:
        trig = np.concatenate([
            rng.uniform(-7, 7, 300), rng.uniform(-1e4, 1e4, 200),
            10.0 ** rng.uniform(4, 38, 200) * rng.choice([-1, 1], 200),
            np.pi * np.arange(-20, 20) / 2, np.pi / 2 + rng.uniform(-1e-3, 1e-3, 60),
            [0.0, -0.0, 1e-30, 2.0**31, 1e10, -1e10, 3.4e38, 15225262.0, 8000.0, np.inf,
             -np.inf, np.nan]])
        n = trig.size
        ex = rng.uniform(-20, 20, n)
        ex[:6] = [88.7, -87.0, -103.0, 127.9, -149.0, 89.0]
        th = rng.uniform(-5, 5, n)
        th[:4] = [50.0, -50.0, 100.0, 0.0]
        lg = np.abs(rng.standard_normal(n) * 100) + 1e-3
        lg[:4] = [1e-45, 1e-40, 3.4e38, 1.0]
        sp = np.array([0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, np.nan, 1e-30, -1e30, 3.0])
        yy, xx = np.meshgrid(sp, sp)
        ay = np.resize(np.concatenate([yy.ravel(), rng.standard_normal(n) * 10]), n)
        ax = np.resize(np.concatenate([xx.ravel(), rng.standard_normal(n) * 10]), n)
        pb = rng.uniform(-4, 4, n)
        pe = np.round(rng.uniform(-4, 4, n))
        pe[::3] = rng.uniform(-3, 3, pe[::3].size)
        pb[::3] = np.abs(pb[::3])  # a negative base with a fractional exponent is NaN
        return {k_: to_type(v, F32) for k_, v in dict(trig=trig, ex=ex, th=th, lg=lg, ay=ay,
                                                     ax=ax, pb=pb, pe=pe).items()}

    def np1(f: Callable[..., Any], *cols: str) -> PyFn:
        return lambda c: f(*(floats(c[k_]) for k_ in cols))

    fns: list[tuple[IrFn, PyFn | None]] = [
        (lambda r: sin(r["trig"]), np1(np.sin, "trig")),
        (lambda r: cos(r["trig"]), np1(np.cos, "trig")),
        (lambda r: tan(r["trig"]), np1(np.tan, "trig")),
        (lambda r: exp(r["ex"]), np1(np.exp, "ex")),
        (lambda r: exp2(r["ex"]), np1(np.exp2, "ex")),
        (lambda r: tanh(r["th"]), np1(np.tanh, "th")),
        (lambda r: log(r["lg"]), np1(np.log, "lg")),
        (lambda r: log2(r["lg"]), np1(np.log2, "lg")),
        (lambda r: atan2(r["ay"], r["ax"]), np1(np.arctan2, "ay", "ax")),
        (lambda r: pow_(r["pb"], r["pe"]), np1(np.power, "pb", "pe")),
    ]
    cols = {c: F32 for c in ("trig", "ex", "th", "lg", "ay", "ax", "pb", "pe")}
    return elementwise_case("ir_approx_wide_f32", cols, [("out", F32, fns)], data)


def literal_case() -> Case:
    """Operators over literals only give the run-time results (a backend's constant folding
    must not refuse or change them): wrapping overflow, x / 0, MIN / -1, shifts past the
    width, float division by zero, -0, the smallest subnormal, float overflow."""
    k = ProgramBuilder("ir_literals", workgroup_size=1)
    out = k.buffer("out", I32, "write")
    fo = k.buffer("fo", F32, "write")
    mx = k.lit(2147483647, I32)
    out[0] = mx + 1
    out[1] = k.lit(5, I32) // 0
    out[2] = k.lit(-2147483648, I32) // -1
    out[3] = -k.lit(-2147483648, I32)
    out[4] = k.lit(1, I32) << k.lit(40, U32)
    out[5] = abs_(k.lit(-2147483648, I32))
    out[6] = k.lit(-7, I32) % 0
    fo[0] = k.lit(1.0, F32) / 0.0
    fo[1] = k.lit(float("inf"), F32)
    fo[2] = k.lit(float("nan"), F32)
    fo[3] = k.lit(-0.0, F32)
    fo[4] = k.lit(1e-45, F32)
    fo[5] = k.lit(3.0e38, F32) * 10.0
    fo[6] = k.lit(-1.0, F32) / 0.0
    fo[7] = k.lit(0.0, F32) / 0.0
    mn = -(2**31)
    return _case(k.build(), {"out": 7, "fo": 8}, DispatchConfig(),
                 {"out": [mn, 0, mn, mn, 256, mn, 0],
                  "fo": np.array([np.inf, np.inf, np.nan, -0.0, 1e-45, np.inf, -np.inf, np.nan],
                                 np.float32)})


def builtins_expected(grid: tuple[int, int, int], wgs: tuple[int, int, int]) -> list[list[int]]:
    """The rows of conformance's `builtins` case (one per invocation, by linear workgroup
    and local index): global, local and workgroup ids, workgroup counts, local_index."""
    rows = []
    for wz in range(grid[2]):
        for wy in range(grid[1]):
            for wx in range(grid[0]):
                for lz in range(wgs[2]):
                    for ly in range(wgs[1]):
                        for lx in range(wgs[0]):
                            li = lx + ly * wgs[0] + lz * wgs[0] * wgs[1]
                            rows.append([wx * wgs[0] + lx, wy * wgs[1] + ly, wz * wgs[2] + lz,
                                         lx, ly, lz, wx, wy, wz, *grid, li])
    return rows


def control_case() -> Case:
    """Control flow: divergent if/else; a For with continue and break; For bounds evaluated
    once; For loops whose end is the type's maximum (no overflow, no endless loop); a While
    with break (Collatz) and with continue; break leaves only the inner loop; return ends
    the invocation (even inside a loop)."""
    n = 32
    k = ProgramBuilder("ir_control", workgroup_size=n)
    out = k.buffer("out", I32, "read_write")
    g = k.global_id()
    i = k.let(g.cast(I32))
    v = k.let(0)
    with k.if_(i % 2 == 0):
        v.set(i * 10)
        with k.if_(i > 6):
            v += 1
    with k.else_():
        v.set(-i)
    out[g * 8] = v
    acc = k.let(0)
    with k.for_range(0, 20, step=3, ty=I32) as j:
        with k.if_(j == 6):
            k.continue_()
        with k.if_(j > i):
            k.break_()
        acc += j
    out[g * 8 + 1] = acc
    end = k.let(5)
    count = k.let(0)
    with k.for_range(0, end, ty=I32):
        end.set(100)
        count += 1
    c0 = k.let(0, ty=U32)
    with k.for_range(k.lit(2147483640, I32), k.lit(2147483647, I32), step=3):
        c0 += 1
    c1 = k.let(0, ty=U32)
    with k.for_range(k.lit(0xFFFFFFF0, U32), k.lit(0xFFFFFFFF, U32), step=4):
        c1 += 1
    c2 = k.let(0, ty=U32)
    with k.for_range(k.lit(-2147483648, I32), k.lit(-2147483640, I32), step=1000000):
        c2 += 1
    c3 = k.let(0, ty=U32)
    with k.for_range(k.lit(10, U32), k.lit(5, U32)):
        c3 += 1
    out[g * 8 + 2] = count * 10000 + (c0 * 1000 + c1 * 100 + c2 * 10 + c3).cast(I32)
    x = k.let(g + 1)
    steps = k.let(0, ty=U32)
    with k.while_(x != 1):
        with k.if_(x % 2 == 0):
            x.set(x / 2)
        with k.else_():
            x.set(x * 3 + 1)
        steps += 1
        with k.if_(steps >= 100):
            k.break_()
    total = k.let(0, ty=U32)
    with k.for_range(0, 4) as a, k.for_range(0, 10) as b:
        with k.if_(b > a):
            k.break_()
        total += 1
    out[g * 8 + 3] = (steps * 1000 + total).cast(I32)
    m = k.let(0, ty=U32)
    s = k.let(0, ty=U32)
    with k.while_(m < 10):
        m += 1
        with k.if_(m % (g + 2) == 0):
            k.continue_()
        s += m
    out[g * 8 + 4] = s.cast(I32)
    out[g * 8 + 5] = 1
    with k.if_(g % 3 == 0):
        k.return_()
    out[g * 8 + 5] = 2
    with k.for_range(0, 5) as j2, k.if_(j2 == g):
        k.return_()
    out[g * 8 + 5] = 3
    prog = k.build()

    def collatz(v: int) -> int:
        st = 0
        while v != 1:
            v = v // 2 if v % 2 == 0 else 3 * v + 1
            st += 1
            if st >= 100:
                break
        return st

    exp = []
    for t in range(n):
        acc_ = 0
        for jj in range(0, 20, 3):
            if jj == 6:
                continue
            if jj > t:
                break
            acc_ += jj
        ret = 1 if t % 3 == 0 else (2 if t < 5 else 3)
        exp += [(t * 10 + (t > 6)) if t % 2 == 0 else -t, acc_, 5 * 10000 + 3000 + 400 + 10,
                collatz(t + 1) * 1000 + 10, sum(v for v in range(1, 11) if v % (t + 2)), ret,
                -9, -9]
    return _case(prog, {"out": np.full(8 * n, -9, np.int32)}, DispatchConfig(), {"out": exp})


def workgroup_case() -> Case:
    """Workgroup memory: written before a barrier, read (reversed) after it; a tree
    reduction with a barrier in a uniform loop; out-of-range workgroup accesses read 0 and
    store nothing."""
    wg = 32
    k = ProgramBuilder("ir_workgroup", workgroup_size=wg)
    src = k.buffer("src", I32)
    rev = k.buffer("rev", I32, "write")
    red = k.buffer("red", I32, "write")
    sh = k.shared("sh", I32, wg)
    li = k.local_index()
    g = k.global_id()
    sh[li] = src[g]
    k.barrier()
    rev[g] = sh[wg - 1 - li]
    k.barrier()
    stride = k.let(wg // 2, ty=U32)
    with k.while_(stride > 0):
        with k.if_(li < stride):
            sh[li] = sh[li] + sh[li + stride]
        k.barrier()
        stride.set(stride / 2)
    with k.if_(li == 0):
        red[k.workgroup_id() * 2] = sh[0]
    with k.if_(li == 1):
        sh[wg + 3] = 99
        red[k.workgroup_id() * 2 + 1] = sh[wg + 3] + sh[1000000]
    data = np.arange(wg * 3, dtype=np.int32) * 7 - 40
    return _case(k.build(), {"src": data, "rev": data.size, "red": 6}, DispatchConfig(grid=3),
                 {"rev": data.reshape(3, wg)[:, ::-1].reshape(-1),
                  "red": [v for s_ in data.reshape(3, wg).sum(axis=1) for v in (int(s_), 0)]})


# ------------------------------------------------------------------ atomics


#: The read-modify-write atomics: (old value, operand, type) -> new value.
RMW_OPS: dict[str, Callable[[int, int, ScalarType], int]] = {
    "add": lambda a, b, t: wrap(a + b, t), "min": lambda a, b, t: min(a, b),
    "max": lambda a, b, t: max(a, b), "and": lambda a, b, t: wrap(a & b, t),
    "or": lambda a, b, t: wrap(a | b, t), "xor": lambda a, b, t: wrap(a ^ b, t),
    "exchange": lambda a, b, t: b,
}


def atomic_rmw_case(ty: ScalarType) -> Case:
    """Every read-modify-write atomic on one integer type, many lanes per slot, some slots
    out of range (they return 0 and change nothing): the final values of the commutative
    ops are order-independent; the old values (and exchange's final value) must be those
    of some order of the lanes (`atomic_chain`)."""
    n, bins = 640, 7
    rng = np.random.default_rng(3)
    lo, hi = int_range(ty)
    vals = [int(v) for v in rng.integers(max(lo, -(2**40)), min(hi, 2**40), n)]
    vals[:4] = [hi, lo, hi, lo]
    keys = [int(v) for v in rng.integers(0, bins + 2, n)]
    init = [int(v) for v in rng.integers(max(lo, -1000), min(hi, 1000), bins)]
    k = ProgramBuilder(f"ir_atomic_rmw_{ty}", workgroup_size=64)
    vb = k.buffer("vals", ty)
    kb = k.buffer("keys", U32)
    i = k.global_id()
    inputs: Arrays = {"vals": np.array(vals, dtype=object).astype(ty.numpy),
                      "keys": np.array(keys, np.uint32)}
    expected: Arrays = {}
    mems = {}
    with k.if_(i < vb.length()):
        for op in RMW_OPS:
            h = k.buffer(f"h_{op}", ty, "read_write")
            o = k.buffer(f"old_{op}", ty, "write")
            o[i] = getattr(h, f"atomic_{op}")(kb[i], vb[i])
            inputs[f"h_{op}"] = np.array(init, dtype=object).astype(ty.numpy)
            inputs[f"old_{op}"] = n
            mem = list(init)
            for v, key in zip(vals, keys):
                if key < bins:
                    mem[key] = RMW_OPS[op](mem[key], v, ty)
            mems[op] = mem
            if op != "exchange":
                expected[f"h_{op}"] = np.array(mem, dtype=object).astype(ty.numpy)
    prog = k.build()

    def step(op: str) -> Callable[[int, int], int]:
        return lambda a, b: RMW_OPS[op](a, b, ty)

    def invariant(ins: Arrays, out: Arrays) -> str | None:
        for op in RMW_OPS:
            why = atomic_chain(init, keys, vals, ints(out[f"old_{op}"]), ints(out[f"h_{op}"]),
                               step(op))
            if why:
                return f"atomic {op}: {why}"
        return None

    dep = frozenset({f"old_{op}" for op in RMW_OPS} | {"h_exchange"})
    return _case(prog, inputs, DispatchConfig(grid=n // 64), expected, dep, invariant)


def atomic_float_case() -> Case:
    """f32 atomic add: exact sums (multiples of 0.25); old values from some lane order."""
    n = 512
    vals = [float(v) for v in np.arange(n) % 5 * 0.25]
    keys = [j % 3 for j in range(n)]
    k = ProgramBuilder("ir_atomic_f32_add", workgroup_size=64)
    vb, kb = k.buffer("vals", F32), k.buffer("keys", U32)
    h, o = k.buffer("hist", F32, "read_write"), k.buffer("olds", F32, "write")
    i = k.global_id()
    o[i] = h.atomic_add(kb[i], vb[i])
    sums = [sum(v for v, key in zip(vals, keys) if key == b) for b in range(3)]

    def invariant(ins: Arrays, out: Arrays) -> str | None:
        return atomic_chain([0.0] * 3, keys, vals, out["olds"].tolist(), out["hist"].tolist(),
                            lambda a, b: a + b)

    return _case(k.build(), {"vals": np.array(vals, np.float32), "keys": np.array(keys, np.uint32),
                             "hist": np.zeros(3, np.float32), "olds": n},
                 DispatchConfig(grid=n // 64), {"hist": sums}, frozenset({"olds"}), invariant)


def atomic_counters_case() -> Case:
    """A histogram through atomic add with unused results; tickets from one shared counter
    (each value once); compare-exchange loops (lock-free counters, also at high contention:
    every lane eventually succeeds); one compare-exchange winner from 0; exchange."""
    n = 1024
    k = ProgramBuilder("ir_atomic_counters", workgroup_size=256)
    data = k.buffer("data", U32)
    hist = k.buffer("hist", U32, "read_write")
    tickets = k.buffer("tickets", U32, "write")
    ctr = k.buffer("ctr", U32, "read_write")
    cas_t = k.buffer("cas_tickets", U32, "write")
    lock = k.buffer("lock", U32, "read_write")
    i = k.global_linear_id()
    k.atomic("add", hist, data[i] % 16, k.lit(1, U32))
    tickets[i] = hist.atomic_add(16, 1)
    done = k.let(False)
    with k.while_(~done):
        cur = k.let(ctr[0])
        old = ctr.atomic_compare_exchange(0, cur, cur + 1)
        with k.if_(old == cur):
            cas_t[i] = cur
            done.set(True)
    won = lock.atomic_compare_exchange(0, 0, i + 1)
    with k.if_(won == 0):
        hist.atomic_add(17, 1)
    lock.atomic_exchange(1, 7)
    d = np.random.default_rng(0).integers(0, 1000, n).astype(np.uint32)
    h = [int(np.count_nonzero(d % 16 == b)) for b in range(16)] + [n, 1]

    def invariant(ins: Arrays, out: Arrays) -> str | None:
        for name in ("tickets", "cas_tickets"):
            if sorted(ints(out[name])) != list(range(n)):
                return f"{name} are not each of 0..{n - 1} once"
        if not 1 <= int(out["lock"][0]) <= n:
            return f"lock holds {int(out['lock'][0])}, no lane's id + 1"
        return None

    return _case(k.build(), {"data": d, "hist": np.zeros(18, np.uint32), "tickets": n,
                             "ctr": np.zeros(1, np.uint32), "cas_tickets": n,
                             "lock": np.zeros(2, np.uint32)},
                 DispatchConfig(grid=n // 256), {"hist": h, "ctr": [n]},
                 frozenset({"tickets", "cas_tickets", "lock"}), invariant)


def compare_exchange_case() -> Case:
    """compare_exchange stores only if the slot holds the compared value and returns the
    old value; out of range it returns 0 (own slots: fixed values); with collisions the
    olds and final values must come from some lane order."""
    k = ProgramBuilder("ir_compare_exchange", workgroup_size=64)
    mem = k.buffer("mem", I32, "read_write")
    olds = k.buffer("olds", I32, "write")
    idx, cmp_, val = k.buffer("idx", U32), k.buffer("cmp", I32), k.buffer("val", I32)
    mem2 = k.buffer("mem2", I32, "read_write")
    olds2 = k.buffer("olds2", I32, "write")
    i = k.global_id()
    with k.if_(i < 4):
        olds[i] = mem.atomic_compare_exchange(i, 5, i.cast(I32) + 100)
    with k.if_(i < idx.length()):
        olds2[i] = mem2.atomic_compare_exchange(idx[i], cmp_[i], val[i])
    rng = np.random.default_rng(11)
    n, m = 640, 5
    ix = [int(v) for v in rng.integers(0, m + 1, n)]
    cm = [int(v) for v in rng.integers(0, 4, n)]
    vl = [int(v) for v in rng.integers(0, 4, n)]
    init = [0, 1, 2, 3, 0]

    def invariant(ins: Arrays, out: Arrays) -> str | None:
        return atomic_chain(init, ix, list(zip(cm, vl)), ints(out["olds2"]), ints(out["mem2"]),
                            lambda o, cv: cv[1] if o == cv[0] else o)

    return _case(k.build(), {"mem": np.array([5, 6, 5], np.int32), "olds": 4,
                             "idx": np.array(ix, np.uint32), "cmp": np.array(cm, np.int32),
                             "val": np.array(vl, np.int32), "mem2": np.array(init, np.int32),
                             "olds2": n},
                 DispatchConfig(grid=n // 64), {"mem": [100, 6, 102], "olds": [5, 6, 5, 0]},
                 frozenset({"mem2", "olds2"}), invariant)


def workgroup_atomics_case() -> Case:
    """Atomics on workgroup memory: add and max from every lane of the workgroup."""
    k = ProgramBuilder("ir_workgroup_atomics", workgroup_size=64)
    out = k.buffer("out", U32, "write")
    sh = k.shared("cnt", U32, 3)
    li = k.local_index()
    with k.if_(li < 3):
        sh[li] = 0
    k.barrier()
    sh.atomic_add(li % 2, li)
    sh.atomic_max(k.lit(2, U32), li * 7 % 61)
    k.barrier()
    with k.if_(li < 3):
        out[k.workgroup_id() * 3 + li] = sh[li]
    evens, odds = sum(range(0, 64, 2)), sum(range(1, 64, 2))
    return _case(k.build(), {"out": 9}, DispatchConfig(grid=3),
                 {"out": [evens, odds, max(j * 7 % 61 for j in range(64))] * 3})


def cases() -> list[Case]:
    return [
        *(int_case(t) for t in INT_TYPES), int_cast_case(), dot4_case(),
        *(float_case(t) for t in FLOAT_TYPES), *(float_minmax_case(t) for t in FLOAT_TYPES),
        *(float_to_int_case(t) for t in FLOAT_TYPES),
        int_to_float_case((F32, F16), "ir_int_to_f32_f16"),
        int_to_float_case((F64,), "ir_int_to_f64"),
        float_float_case(F32, (F16,)), float_float_case(F32, (F64,)),
        float_float_case(F16, (F32,)),
        float_float_case(F64, (F32, F16)),
        bitcast_case(32), bitcast_case(64),
        approx_case(F32), approx_case(F64),
        approx_wide_case(), f16_odd_case(),
        *(c for c in (registry_case(F32), registry_case(F64)) if c is not None),
        params_case((I32, U32, F32, F16, I64, U64), "ir_params"),
        params_case((F64,), "ir_params_f64"),
        oob_case(), length_case(), literal_case(), control_case(), workgroup_case(),
        *(atomic_rmw_case(t) for t in INT_TYPES), atomic_float_case(), atomic_counters_case(),
        compare_exchange_case(), workgroup_atomics_case(),
    ]


__all__ = ["RMW_OPS", "atomic_chain", "c_div", "c_rem", "cases", "round_exact", "wrap"]


def atomic_chain(init: Sequence[Any], keys: Sequence[int], vals: Sequence[Any],
                 olds: Sequence[Any], final: Sequence[Any],
                 step: Callable[[Any, Any], Any]) -> str | None:
    """Why `olds` and `final` cannot come from applying `step` (old, value) -> new for each
    lane in some order (None if they can): lanes whose key is out of range read 0 and change
    nothing; per key, the multiset of old values plus the final value must equal the initial
    value plus the multiset of new values (each lane's new value is the next lane's old)."""
    per: dict[int, list[tuple[Any, Any]]] = {}
    for lane, (k, v, o) in enumerate(zip(keys, vals, olds)):
        if k >= len(init):
            if o != 0:
                return f"lane {lane}: out-of-range atomic returned {o!r}, not 0"
            continue
        per.setdefault(k, []).append((v, o))
    for k in range(len(init)):
        pairs = per.get(k, [])
        left = Counter([o for _, o in pairs] + [final[k]])
        right = Counter([init[k]] + [step(o, v) for v, o in pairs])
        if left != right:
            return (f"slot {k}: old values {sorted(left.elements())[:6]}... and final "
                    f"{final[k]!r} are no order of the {len(pairs)} atomics from {init[k]!r}")
    return None
