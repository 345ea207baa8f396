"""docs/IR.md semantics on the reference backend, through the public API (builder + dispatch).

Expected values are computed independently with plain Python arithmetic (ints, floats,
fractions); numpy is used only to build inputs and to round a Python float to f32/f16.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Callable, Sequence
from fractions import Fraction
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vyre import DispatchConfig, ProgramBuilder, ScalarType
from vyre.backends.reference import PROVIDER, ReferenceBackend
from vyre.builder import (
    Value,
    abs_,
    ceil,
    clamp,
    floor,
    fma,
    max_,
    min_,
    round_,
    select,
    sqrt,
    trunc,
)
from vyre.ir import nodes as N

I32, U32, I64, U64 = ScalarType.I32, ScalarType.U32, ScalarType.I64, ScalarType.U64
F32, F16, F64, BOOL = ScalarType.F32, ScalarType.F16, ScalarType.F64, ScalarType.BOOL
INT_TYPES = (I32, U32, I64, U64)


@pytest.fixture(scope="module")
def be() -> ReferenceBackend:
    return PROVIDER.create()


# ------------------------------------------------------------------ helpers


def elementwise(
    be: ReferenceBackend,
    tys: Sequence[ScalarType],
    out_ty: ScalarType,
    fn: Callable[..., Value],
    *cols: Sequence[Any],
) -> list[Any]:
    """Run `out[i] = fn(in0[i], in1[i], ...)`; returns the outputs as Python values."""
    k = ProgramBuilder("ew", workgroup_size=64)
    bufs = [k.buffer(f"a{j}", t) for j, t in enumerate(tys)]
    out = k.buffer("out", out_ty, "write")
    i = k.global_id()
    with k.if_(i < out.length()):
        out[i] = fn(*[b[i] for b in bufs])
    prog = k.build()
    n = len(cols[0])
    data: dict[str, Any] = {f"a{j}": np.array(c, dtype=t.numpy) for j, (t, c) in enumerate(zip(tys, cols))}
    data["out"] = n
    res = be.dispatch(prog, data, DispatchConfig.for_elements(n, 64))["out"]
    return res.tolist()


def wrap(v: int, ty: ScalarType) -> int:
    bits = ty.bits
    v &= (1 << bits) - 1
    if ty.is_signed and v >= 1 << (bits - 1):
        v -= 1 << bits
    return v


def c_div(a: int, b: int, ty: ScalarType) -> int:
    if b == 0:
        return 0
    q = abs(a) // abs(b)
    return wrap(q if (a < 0) == (b < 0) else -q, ty)


def c_rem(a: int, b: int, ty: ScalarType) -> int:
    if b == 0:
        return 0
    q = abs(a) // abs(b)
    q = q if (a < 0) == (b < 0) else -q
    return wrap(a - b * q, ty)


def f32(x: float) -> float:
    """Round a Python float to f32 (one IEEE conversion, overflow to inf)."""
    with np.errstate(over="ignore"):
        return float(np.float32(x))


def bits_f32(x: float) -> int:
    return int(struct.unpack("<I", struct.pack("<f", x))[0])


def nearest_f32(x: Fraction) -> float:
    """The f32 nearest the exact value x (ties to even), found with exact comparisons."""
    f = float(x)  # correctly rounded to f64; the answer is one of its f32 neighbours
    c = float(np.float32(f))
    cands = {c, float(np.nextafter(np.float32(c), np.float32(np.inf))),
             float(np.nextafter(np.float32(c), np.float32(-np.inf)))}
    best = sorted(cands, key=lambda v: (abs(Fraction(v) - x), bits_f32(v) & 1))
    return best[0]


def int_range(ty: ScalarType) -> tuple[int, int]:
    if ty.is_signed:
        return -(1 << (ty.bits - 1)), (1 << (ty.bits - 1)) - 1
    return 0, (1 << ty.bits) - 1


def extremes(ty: ScalarType) -> list[int]:
    lo, hi = int_range(ty)
    return [lo, lo + 1, -1 if ty.is_signed else 1, 0, 1, 2, 7, hi - 1, hi]


# ------------------------------------------------------------------ integer arithmetic

BIN = {
    "add": lambda a, b: a + b,
    "sub": lambda a, b: a - b,
    "mul": lambda a, b: a * b,
    "div": lambda a, b: a / b,
    "rem": lambda a, b: a % b,
    "min": min_,
    "max": max_,
    "and": lambda a, b: a & b,
    "or": lambda a, b: a | b,
    "xor": lambda a, b: a ^ b,
}


def int_expected(op: str, a: int, b: int, ty: ScalarType) -> int:
    return {
        "add": lambda: wrap(a + b, ty),
        "sub": lambda: wrap(a - b, ty),
        "mul": lambda: wrap(a * b, ty),
        "div": lambda: c_div(a, b, ty),
        "rem": lambda: c_rem(a, b, ty),
        "min": lambda: min(a, b),
        "max": lambda: max(a, b),
        "and": lambda: wrap(a & b, ty),
        "or": lambda: wrap(a | b, ty),
        "xor": lambda: wrap(a ^ b, ty),
    }[op]()


@pytest.mark.parametrize("ty", INT_TYPES, ids=str)
@pytest.mark.parametrize("op", sorted(BIN))
def test_integer_ops_on_extremes(be: ReferenceBackend, ty: ScalarType, op: str) -> None:
    vals = extremes(ty)
    a = [x for x in vals for _ in vals]
    b = [y for _ in vals for y in vals]
    got = elementwise(be, (ty, ty), ty, BIN[op], a, b)
    assert got == [int_expected(op, x, y, ty) for x, y in zip(a, b)]


@pytest.mark.parametrize("ty", (I32, I64), ids=str)
def test_int_min_div_minus_one(be: ReferenceBackend, ty: ScalarType) -> None:
    lo, _ = int_range(ty)
    assert elementwise(be, (ty, ty), ty, lambda a, b: a / b, [lo], [-1]) == [lo]
    assert elementwise(be, (ty, ty), ty, lambda a, b: a % b, [lo], [-1]) == [0]
    assert elementwise(be, (ty, ty), ty, lambda a, b: a / b, [-7, 7, -7], [2, -2, 0]) == [-3, -3, 0]
    assert elementwise(be, (ty, ty), ty, lambda a, b: a % b, [-7, 7, -7], [2, -2, 0]) == [-1, 1, 0]


@pytest.mark.parametrize("ty", (I32, I64), ids=str)
def test_neg_and_abs_wrap(be: ReferenceBackend, ty: ScalarType) -> None:
    vals = extremes(ty)
    assert elementwise(be, (ty,), ty, lambda a: -a, vals) == [wrap(-v, ty) for v in vals]
    assert elementwise(be, (ty,), ty, abs_, vals) == [wrap(abs(v), ty) for v in vals]


@pytest.mark.parametrize("ty", INT_TYPES, ids=str)
def test_bit_not(be: ReferenceBackend, ty: ScalarType) -> None:
    vals = extremes(ty)
    assert elementwise(be, (ty,), ty, lambda a: ~a, vals) == [wrap(~v, ty) for v in vals]


def shift_expected(op: str, a: int, s: int, ty: ScalarType) -> int:
    s %= ty.bits
    if op == "shl":
        return wrap(a << s, ty)
    return a >> s  # Python's >> is arithmetic for negative ints, logical for non-negative


@pytest.mark.parametrize("ty", INT_TYPES, ids=str)
@pytest.mark.parametrize("op", ["shl", "shr"])
def test_shifts_modulo_width(be: ReferenceBackend, ty: ScalarType, op: str) -> None:
    vals = extremes(ty)
    amounts = [0, 1, 5, ty.bits - 1, ty.bits, ty.bits + 3, 2 * ty.bits + 1, 0xFFFFFFFF]
    a = [x for x in vals for _ in amounts]
    s = [y for _ in vals for y in amounts]
    fn = (lambda x, y: x << y) if op == "shl" else (lambda x, y: x >> y)
    got = elementwise(be, (ty, U32), ty, fn, a, s)
    assert got == [shift_expected(op, x, y, ty) for x, y in zip(a, s)]


def test_comparisons_and_logic(be: ReferenceBackend) -> None:
    a = [-1, 0, 5, 5]
    b = [0, 0, 3, 7]
    for name, fn, py in [
        ("lt", lambda x, y: x < y, lambda x, y: x < y),
        ("le", lambda x, y: x <= y, lambda x, y: x <= y),
        ("gt", lambda x, y: x > y, lambda x, y: x > y),
        ("ge", lambda x, y: x >= y, lambda x, y: x >= y),
        ("eq", lambda x, y: x == y, lambda x, y: x == y),
        ("ne", lambda x, y: x != y, lambda x, y: x != y),
    ]:
        got = elementwise(be, (I32, I32), U32, lambda x, y, f=fn: select(f(x, y), 1, 0).cast(U32), a, b)
        assert got == [int(py(x, y)) for x, y in zip(a, b)], name
    got = elementwise(
        be, (I32, I32), U32,
        lambda x, y: select(((x > 0) & (y > 0)) | ~(x == y), 1, 0).cast(U32), a, b,
    )
    assert got == [int((x > 0 and y > 0) or x != y) for x, y in zip(a, b)]


def test_unsigned_comparison_is_unsigned(be: ReferenceBackend) -> None:
    got = elementwise(be, (U32, U32), U32, lambda x, y: select(x < y, 1, 0).cast(U32),
                      [0xFFFFFFFF, 1], [1, 0xFFFFFFFF])
    assert got == [0, 1]


# ------------------------------------------------------------------ hypothesis vs Python ints


def _ints(ty: ScalarType) -> st.SearchStrategy[int]:
    lo, hi = int_range(ty)
    return st.one_of(st.sampled_from(extremes(ty)), st.integers(lo, hi), st.integers(-8, 8).map(
        lambda v: v if ty.is_signed else abs(v)))


def _pairs(ty: ScalarType) -> st.SearchStrategy[list[tuple[int, int]]]:
    return st.lists(st.tuples(_ints(ty), _ints(ty)), min_size=1, max_size=40)


@settings(max_examples=150, deadline=None)
@given(data=st.data(), ty=st.sampled_from(INT_TYPES), op=st.sampled_from(sorted(BIN)))
def test_prop_binary(be: ReferenceBackend, data: st.DataObject, ty: ScalarType, op: str) -> None:
    pairs = data.draw(_pairs(ty))
    a, b = [p[0] for p in pairs], [p[1] for p in pairs]
    got = elementwise(be, (ty, ty), ty, BIN[op], a, b)
    assert got == [int_expected(op, x, y, ty) for x, y in zip(a, b)]


@settings(max_examples=80, deadline=None)
@given(data=st.data(), ty=st.sampled_from(INT_TYPES), op=st.sampled_from(["shl", "shr"]))
def test_prop_shift(be: ReferenceBackend, data: st.DataObject, ty: ScalarType, op: str) -> None:
    pairs = data.draw(st.lists(st.tuples(_ints(ty), st.integers(0, 0xFFFFFFFF)), min_size=1,
                               max_size=40))
    a, s = [p[0] for p in pairs], [p[1] for p in pairs]
    fn = (lambda x, y: x << y) if op == "shl" else (lambda x, y: x >> y)
    got = elementwise(be, (ty, U32), ty, fn, a, s)
    assert got == [shift_expected(op, x, y, ty) for x, y in zip(a, s)]


@settings(max_examples=80, deadline=None)
@given(data=st.data(), ty=st.sampled_from(INT_TYPES), dst=st.sampled_from(INT_TYPES))
def test_prop_int_cast(
    be: ReferenceBackend, data: st.DataObject, ty: ScalarType, dst: ScalarType
) -> None:
    vals = data.draw(st.lists(_ints(ty), min_size=1, max_size=40))
    got = elementwise(be, (ty,), dst, lambda x: x.cast(dst), vals)
    assert got == [wrap(v, dst) for v in vals]


@settings(max_examples=80, deadline=None)
@given(data=st.data(), ty=st.sampled_from(INT_TYPES))
def test_prop_neg_abs_not(be: ReferenceBackend, data: st.DataObject, ty: ScalarType) -> None:
    vals = data.draw(st.lists(_ints(ty), min_size=1, max_size=40))
    assert elementwise(be, (ty,), ty, lambda x: ~x, vals) == [wrap(~v, ty) for v in vals]
    assert elementwise(be, (ty,), ty, abs_, vals) == [wrap(abs(v), ty) for v in vals]
    if ty.is_signed:
        assert elementwise(be, (ty,), ty, lambda x: -x, vals) == [wrap(-v, ty) for v in vals]


@settings(max_examples=80, deadline=None)
@given(data=st.data(), src=st.sampled_from((F32, F64)), dst=st.sampled_from(INT_TYPES))
def test_prop_float_to_int(
    be: ReferenceBackend, data: st.DataObject, src: ScalarType, dst: ScalarType
) -> None:
    width = 32 if src is F32 else 64
    vals = data.draw(st.lists(st.floats(width=width, allow_nan=True), min_size=1, max_size=40))
    got = elementwise(be, (src,), dst, lambda x: x.cast(dst), vals)
    assert got == [float_to_int_expected(v, dst) for v in vals]


# ------------------------------------------------------------------ casts

F32_SPECIALS = [0.0, -0.0, 0.5, -0.5, 1.5, -1.5, 2.7, -2.7, 1e10, -1e10, 2147483520.0,
                2147483648.0, -2147483648.0, 4294967040.0, 4294967296.0, 3e19, -3e19,
                math.inf, -math.inf, math.nan]


def float_to_int_expected(x: float, ty: ScalarType) -> int:
    if math.isnan(x):
        return 0
    lo, hi = int_range(ty)
    if math.isinf(x):
        return hi if x > 0 else lo
    return max(lo, min(hi, math.trunc(x)))


@pytest.mark.parametrize("src", (F32, F64, F16), ids=str)
@pytest.mark.parametrize("dst", INT_TYPES, ids=str)
def test_float_to_int_truncates_and_saturates(
    be: ReferenceBackend, src: ScalarType, dst: ScalarType
) -> None:
    with np.errstate(over="ignore"):
        vals = [float(src.numpy.type(v)) for v in F32_SPECIALS]
    got = elementwise(be, (src,), dst, lambda x: x.cast(dst), vals)
    assert got == [float_to_int_expected(v, dst) for v in vals]


def test_int_to_float_rounds_to_nearest_even(be: ReferenceBackend) -> None:
    vals = [16777217, 16777219, -16777217, 2**31 - 1, -(2**31), 0, 3]
    got = elementwise(be, (I32,), F32, lambda x: x.cast(F32), vals)
    assert got == [nearest_f32(Fraction(v)) for v in vals]
    big = [2**63 - 1, -(2**63), 2**53 + 1, (1 << 40) + (1 << 16) + 1, (1 << 40) + (1 << 16)]
    got = elementwise(be, (I64,), F32, lambda x: x.cast(F32), big)
    assert got == [nearest_f32(Fraction(v)) for v in big]
    ubig = [2**64 - 1, 2**63 + 2**39 + 1]
    got = elementwise(be, (U64,), F32, lambda x: x.cast(F32), ubig)
    assert got == [nearest_f32(Fraction(v)) for v in ubig]
    got = elementwise(be, (I64,), F64, lambda x: x.cast(F64), [2**53 + 1, 2**53 + 3])
    assert got == [float(2**53), float(2**53 + 4)]


def test_int_to_f16(be: ReferenceBackend) -> None:
    vals = [2049, 2051, 65504, 65519, 65520, 100000, -100000, 2**40]
    got = elementwise(be, (I64,), F16, lambda x: x.cast(F16), vals)
    assert got == [2048.0, 2052.0, 65504.0, 65504.0, math.inf, math.inf, -math.inf, math.inf]


def test_bool_number_casts(be: ReferenceBackend) -> None:
    vals = [0.0, -0.0, 1.0, math.nan, -3.5]
    got = elementwise(be, (F32,), U32, lambda x: x.cast(BOOL).cast(U32), vals)
    assert got == [0, 0, 1, 1, 1]
    got = elementwise(be, (I32,), F32, lambda x: (x != 0).cast(F32), [0, 5])
    assert got == [0.0, 1.0]


def test_float_float_casts(be: ReferenceBackend) -> None:
    vals = [0.1, 1e300, -1e-300, 3.4028235677973366e38, math.nan]
    got = elementwise(be, (F64,), F32, lambda x: x.cast(F32), vals)
    assert got[:4] == [f32(0.1), math.inf, -0.0, math.inf]
    assert math.isnan(got[4])
    got = elementwise(be, (F32,), F16, lambda x: x.cast(F16), [f32(0.1), 65520.0, 1e-8])
    assert got == [float(np.float16(0.1)), math.inf, 0.0]


def test_bitcast(be: ReferenceBackend) -> None:
    got = elementwise(be, (F32,), U32, lambda x: x.bitcast(U32), [1.0, -0.0])
    assert got == [0x3F800000, 0x80000000]
    got = elementwise(be, (I32,), U32, lambda x: x.bitcast(U32), [-1])
    assert got == [0xFFFFFFFF]
    got = elementwise(be, (U64,), F64, lambda x: x.bitcast(F64), [0x3FF0000000000000])
    assert got == [1.0]


# ------------------------------------------------------------------ floats


def test_float_arithmetic_is_ieee_f32(be: ReferenceBackend) -> None:
    rng = np.random.default_rng(1)
    a = [f32(float(v)) for v in rng.standard_normal(64) * 1e3]
    b = [f32(float(v)) for v in rng.standard_normal(64)]
    assert elementwise(be, (F32, F32), F32, lambda x, y: x + y, a, b) == [f32(x + y) for x, y in zip(a, b)]
    assert elementwise(be, (F32, F32), F32, lambda x, y: x * y, a, b) == [f32(x * y) for x, y in zip(a, b)]
    assert elementwise(be, (F32, F32), F32, lambda x, y: x / y, a, b) == [f32(x / y) for x, y in zip(a, b)]
    # no contraction: a*b+c rounds the product first
    c = [f32(float(v)) for v in rng.standard_normal(64)]
    got = elementwise(be, (F32, F32, F32), F32, lambda x, y, z: x * y + z, a, b, c)
    assert got == [f32(f32(x * y) + z) for x, y, z in zip(a, b, c)]
    got = elementwise(be, (F32,), F32, sqrt, [abs(x) for x in a])
    assert got == [f32(math.sqrt(abs(x))) for x in a]


def test_float_division_by_zero(be: ReferenceBackend) -> None:
    got = elementwise(be, (F32, F32), F32, lambda x, y: x / y, [1.0, -1.0, 0.0], [0.0, 0.0, 0.0])
    assert got[:2] == [math.inf, -math.inf] and math.isnan(got[2])


def test_float_rem_step_by_step(be: ReferenceBackend) -> None:
    a = [f32(x) for x in [5.5, -5.5, 7.0, 1e10, 0.1, -0.0, 16777217.0, 1e38]]
    b = [f32(x) for x in [2.0, 2.0, -3.0, 3.0, 0.03, 1.0, 0.1, 3e-7]]

    def expected(x: float, y: float) -> float:
        q = f32(x / y)
        t = f32(float(math.trunc(q))) if math.isfinite(q) else q
        return f32(x - f32(y * t))

    got = elementwise(be, (F32, F32), F32, lambda x, y: x % y, a, b)
    assert got == [expected(x, y) for x, y in zip(a, b)]
    # specials follow the formula: b = 0 gives NaN (0 * inf); b = inf gives NaN (inf * 0)
    got = elementwise(be, (F32, F32), F32, lambda x, y: x % y, [1.0, 3.0], [0.0, math.inf])
    assert all(math.isnan(g) for g in got)


def test_float_min_max_are_minnum_maxnum(be: ReferenceBackend) -> None:
    a = [math.nan, 1.0, math.nan, -1.0, 2.0]
    b = [3.0, math.nan, math.nan, -2.0, 2.5]
    lo = elementwise(be, (F32, F32), F32, min_, a, b)
    hi = elementwise(be, (F32, F32), F32, max_, a, b)
    assert lo[0] == 3.0 and lo[1] == 1.0 and math.isnan(lo[2]) and lo[3:] == [-2.0, 2.0]
    assert hi[0] == 3.0 and hi[1] == 1.0 and math.isnan(hi[2]) and hi[3:] == [-1.0, 2.5]
    got = elementwise(be, (F32, F32, F32), F32, clamp, [5.0, -5.0, 0.5], [0.0] * 3, [1.0] * 3)
    assert got == [1.0, 0.0, 0.5]


def test_float_comparisons_with_nan(be: ReferenceBackend) -> None:
    nan = math.nan
    got = elementwise(be, (F32, F32), U32,
                      lambda x, y: (select(x < y, 1, 0) + select(x == y, 2, 0)
                                    + select(x != y, 4, 0) + select(x >= y, 8, 0)).cast(U32),
                      [nan, 1.0, -0.0], [1.0, nan, 0.0])
    assert got == [4, 4, 2 + 8]


def test_rounding_functions(be: ReferenceBackend) -> None:
    vals = [0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 2.7, -2.7, 1e30]
    assert elementwise(be, (F32,), F32, round_, vals) == [float(round(f32(v))) for v in vals]
    assert elementwise(be, (F32,), F32, floor, vals) == [float(math.floor(f32(v))) for v in vals]
    assert elementwise(be, (F32,), F32, ceil, vals) == [float(math.ceil(f32(v))) for v in vals]
    assert elementwise(be, (F32,), F32, trunc, vals) == [float(math.trunc(f32(v))) for v in vals]
    got = elementwise(be, (F32,), U32, lambda x: abs_(x).bitcast(U32), [-0.0, -2.0])
    assert got == [0, bits_f32(2.0)]


def test_fma_single_rounding_f32(be: ReferenceBackend) -> None:
    # exact a*b + c lies just below an f32 midpoint; rounding through f64 would hit the
    # midpoint and then round up (to even): a single rounding gives the lower neighbour.
    a = f32(2**-12 * (1 + 2**-23))
    b = f32(2**-12 * (1 - 2**-23))
    c = f32(1 + 2**-23)
    rng = np.random.default_rng(7)
    xs = [a] + [f32(float(v)) for v in rng.standard_normal(50)]
    ys = [b] + [f32(float(v)) for v in rng.standard_normal(50)]
    zs = [c] + [f32(float(v)) for v in rng.standard_normal(50)]
    got = elementwise(be, (F32, F32, F32), F32, fma, xs, ys, zs)
    expected = [nearest_f32(Fraction(x) * Fraction(y) + Fraction(z)) for x, y, z in zip(xs, ys, zs)]
    assert got == expected
    assert got[0] == 1 + 2**-23


def test_fma_f64_exact(be: ReferenceBackend) -> None:
    a, b, c = 1 + 2**-52, 1 - 2**-52, -1.0
    got = elementwise(be, (F64, F64, F64), F64, fma, [a, 2.0, 1e308], [b, 3.0, 10.0],
                      [c, 1.0, -math.inf])
    assert got == [-(2**-104), 7.0, -math.inf]


def test_approximate_functions_close(be: ReferenceBackend) -> None:
    from vyre.builder import atan2, cos, exp, exp2, log, log2, pow_, sin, tan, tanh

    xs = [0.1, 0.5, 1.0, 2.0, 3.0]
    for fn, py in [(exp, math.exp), (exp2, lambda v: 2.0**v), (log, math.log),
                   (log2, math.log2), (sin, math.sin), (cos, math.cos), (tan, math.tan),
                   (tanh, math.tanh)]:
        got = elementwise(be, (F32,), F32, fn, xs)
        assert got == pytest.approx([f32(py(f32(v))) for v in xs], rel=1e-6)
    got = elementwise(be, (F32, F32), F32, pow_, xs, xs)
    assert got == pytest.approx([f32(f32(v) ** f32(v)) for v in xs], rel=1e-6)
    got = elementwise(be, (F32, F32), F32, atan2, xs, [1.0] * 5)
    assert got == pytest.approx([f32(math.atan2(f32(v), 1.0)) for v in xs], rel=1e-6)


def test_f16_and_f64_arithmetic(be: ReferenceBackend) -> None:
    a = [1.0, 0.1, 2049.0, 65504.0]
    b = [2**-11, 0.2, 1.0, 65504.0]
    got = elementwise(be, (F16, F16), F16, lambda x, y: x + y, a, b)
    with np.errstate(over="ignore"):
        exp = [float(np.float16(float(np.float16(x)) + float(np.float16(y))))
               for x, y in zip(a, b)]
    assert got == exp
    got = elementwise(be, (F64, F64), F64, lambda x, y: x * y + x, [0.1, 1e300], [0.2, 1e10])
    assert got == [0.1 * 0.2 + 0.1, math.inf]


# ------------------------------------------------------------------ memory semantics


def test_out_of_bounds_loads_and_stores(be: ReferenceBackend) -> None:
    k = ProgramBuilder("oob", workgroup_size=8)
    src = k.buffer("src", I32)
    dst = k.buffer("dst", I32, "read_write")
    out = k.buffer("out", I32, "write")
    i = k.global_id()
    out[i] = src[i + 100] + src[i]  # src[i+100] is always out of bounds: reads 0
    dst[i + 4] = src[i]  # lanes 0..3 land in range; the rest do nothing
    dst[k.lit(0xFFFFFFFF, U32)] = 5
    dst[k.lit(-1)] = 6  # i32 index -1 is bitcast to u32: out of bounds
    prog = k.build()
    res = be.dispatch(prog, {"src": np.arange(1, 9, dtype=np.int32),
                             "dst": np.full(8, -7, dtype=np.int32), "out": 16},
                      DispatchConfig(grid=2))
    assert res["out"].tolist() == list(range(1, 9)) + [0] * 8
    assert res["dst"].tolist() == [-7, -7, -7, -7, 1, 2, 3, 4]


def test_builtins(be: ReferenceBackend) -> None:
    k = ProgramBuilder("ids", workgroup_size=(4, 2, 2))
    out = k.buffer("out", U32, "write")
    gx, gy = k.num_workgroups(0), k.num_workgroups(1)
    wx, wy, wz = 4, 2, 2
    nx, ny = gx * wx, gy * wy
    g0, g1, g2 = k.global_id(0), k.global_id(1), k.global_id(2)
    lin = g0 + g1 * nx + g2 * nx * ny
    base = lin * 8
    out[base] = k.local_index()
    out[base + 1] = k.local_id(0)
    out[base + 2] = k.local_id(1)
    out[base + 3] = k.local_id(2)
    out[base + 4] = k.workgroup_id(0)
    out[base + 5] = k.workgroup_id(1)
    out[base + 6] = k.workgroup_id(2)
    out[base + 7] = k.num_workgroups(2)
    prog = k.build()
    grid = (3, 2, 2)
    total = 3 * 4 * 2 * 2 * 2 * 2
    res = be.dispatch(prog, {"out": total * 8}, DispatchConfig(grid=grid))["out"].reshape(-1, 8)
    nxv, nyv = grid[0] * wx, grid[1] * wy
    for z in range(grid[2] * wz):
        for y in range(nyv):
            for x in range(nxv):
                row = res[x + y * nxv + z * nxv * nyv].tolist()
                lx, ly, lz = x % wx, y % wy, z % wz
                assert row == [lx + ly * wx + lz * wx * wy, lx, ly, lz, x // wx, y // wy,
                               z // wz, grid[2]]


def test_length_and_params(be: ReferenceBackend) -> None:
    k = ProgramBuilder("len", workgroup_size=1)
    a = k.buffer("a", F32)
    out = k.buffer("out", U32, "write", count=3)
    sh = k.shared("sh", F32, 17)
    p = k.param("p", U32)
    out[0] = a.length()
    out[1] = sh.length()
    out[2] = p * 2
    prog = k.build()
    res = be.dispatch(prog, {"a": np.zeros(11, np.float32)},
                      DispatchConfig(params={"p": 21}))["out"]
    assert res.tolist() == [11, 17, 42]


def test_select_and_let_assign(be: ReferenceBackend) -> None:
    def body(x: Value) -> Value:
        return select(x > 0, x * 2, -x)

    assert elementwise(be, (I32,), I32, body, [3, -4, 0]) == [6, 4, 0]


# ------------------------------------------------------------------ control flow


def test_if_else_divergence(be: ReferenceBackend) -> None:
    k = ProgramBuilder("ifelse", workgroup_size=16)
    out = k.buffer("out", I32, "write")
    i = k.global_id().cast(I32)
    v = k.let(0)
    with k.if_(i % 2 == 0):
        v.set(i * 10)
        with k.if_(i > 6):
            v += 1
    with k.else_():
        v.set(-i)
    out[k.global_id()] = v
    res = be.dispatch(k.build(), {"out": 16}, DispatchConfig())["out"].tolist()
    assert res == [(i * 10 + (1 if i > 6 else 0)) if i % 2 == 0 else -i for i in range(16)]


def test_for_loop_with_break_continue(be: ReferenceBackend) -> None:
    k = ProgramBuilder("loops", workgroup_size=16)
    out = k.buffer("out", I32, "write")
    i = k.global_id().cast(I32)
    acc = k.let(0)
    with k.for_range(0, 20, step=3, ty=I32) as j:
        with k.if_(j == 6):
            k.continue_()
        with k.if_(j > i):
            k.break_()
        acc += j
    out[k.global_id()] = acc
    res = be.dispatch(k.build(), {"out": 16}, DispatchConfig())["out"].tolist()

    def ref(i: int) -> int:
        acc = 0
        for j in range(0, 20, 3):
            if j == 6:
                continue
            if j > i:
                break
            acc += j
        return acc

    assert res == [ref(i) for i in range(16)]


def test_for_loop_never_overflows(be: ReferenceBackend) -> None:
    k = ProgramBuilder("noovf", workgroup_size=1)
    out = k.buffer("out", U32, "write", count=2)
    n = k.let(0, ty=U32)
    with k.for_range(k.lit(0xFFFFFFF0, U32), k.lit(0xFFFFFFFF, U32), step=4):
        n += 1
    out[0] = n
    m = k.let(0)
    with k.for_range(k.lit(2147483600), k.lit(2147483647), step=1 << 30, ty=I32) as j:
        m += 1
        out[1] = j.bitcast(U32)
    res = be.dispatch(k.build(), {}, DispatchConfig())["out"].tolist()
    assert res == [4, 2147483600]


def test_for_bounds_evaluated_once(be: ReferenceBackend) -> None:
    k = ProgramBuilder("once", workgroup_size=1)
    out = k.buffer("out", I32, "write", count=1)
    end = k.let(5)
    count = k.let(0)
    with k.for_range(0, end, ty=I32):
        end.set(100)
        count += 1
    out[0] = count
    assert be.dispatch(k.build(), {}, DispatchConfig())["out"].tolist() == [5]


def test_while_collatz_and_nested_break(be: ReferenceBackend) -> None:
    k = ProgramBuilder("collatz", workgroup_size=32)
    out = k.buffer("out", U32, "write")
    x = k.let(k.global_id() + 1)
    steps = k.let(0, ty=U32)
    with k.while_(x != 1):
        with k.if_(x % 2 == 0):
            x.set(x / 2)
        with k.else_():
            x.set(x * 3 + 1)
        steps += 1
        with k.if_(steps >= 100):
            k.break_()
    # nested loops: break only leaves the inner one
    total = k.let(0, ty=U32)
    with k.for_range(0, 4) as a, k.for_range(0, 10) as b:
        with k.if_(b > a):
            k.break_()
        total += 1
    out[k.global_id()] = steps * 1000 + total
    res = be.dispatch(k.build(), {"out": 32}, DispatchConfig())["out"].tolist()

    def ref(n: int) -> int:
        s = 0
        while n != 1:
            n = n // 2 if n % 2 == 0 else 3 * n + 1
            s += 1
            if s >= 100:
                break
        return s * 1000 + (1 + 2 + 3 + 4)

    assert res == [ref(i + 1) for i in range(32)]


def test_return_ends_invocation(be: ReferenceBackend) -> None:
    k = ProgramBuilder("ret", workgroup_size=8)
    out = k.buffer("out", I32, "read_write")
    i = k.global_id()
    out[i] = 1
    with k.if_(i % 3 == 0):
        k.return_()
    out[i] = 2
    with k.for_range(0, 5) as j, k.if_(j == i):
        k.return_()
    out[i] = 3
    res = be.dispatch(k.build(), {"out": np.zeros(8, np.int32)}, DispatchConfig())["out"]
    assert res.tolist() == [1, 2, 2, 1, 2, 3, 1, 3]


def test_continue_in_while(be: ReferenceBackend) -> None:
    k = ProgramBuilder("wcont", workgroup_size=4)
    out = k.buffer("out", U32, "write")
    n = k.let(0, ty=U32)
    s = k.let(0, ty=U32)
    with k.while_(n < 10):
        n += 1
        with k.if_(n % (k.global_id() + 2) == 0):
            k.continue_()
        s += n
    out[k.global_id()] = s
    res = be.dispatch(k.build(), {"out": 4}, DispatchConfig())["out"].tolist()
    assert res == [sum(v for v in range(1, 11) if v % (g + 2)) for g in range(4)]


# ------------------------------------------------------------------ workgroup memory


def test_workgroup_reverse_with_barrier(be: ReferenceBackend) -> None:
    wg = 64
    k = ProgramBuilder("rev", workgroup_size=wg)
    src = k.buffer("src", U32)
    dst = k.buffer("dst", U32, "write")
    sh = k.shared("sh", U32, wg)
    li = k.local_index()
    sh[li] = src[k.global_id()]
    k.barrier()
    dst[k.global_id()] = sh[wg - 1 - li]
    data = np.arange(wg * 5, dtype=np.uint32)
    res = be.dispatch(k.build(), {"src": data, "dst": data.size}, DispatchConfig(grid=5))["dst"]
    assert res.tolist() == [int(v) for v in data.reshape(5, wg)[:, ::-1].reshape(-1)]


def test_workgroup_tree_reduction(be: ReferenceBackend) -> None:
    wg = 32
    k = ProgramBuilder("reduce", workgroup_size=wg)
    src = k.buffer("src", I32)
    dst = k.buffer("dst", I32, "write")
    sh = k.shared("sh", I32, wg)
    li = k.local_index()
    sh[li] = src[k.global_id()]
    k.barrier()
    stride = k.let(wg // 2, ty=U32)
    with k.while_(stride > 0):
        with k.if_(li < stride):
            sh[li] = sh[li] + sh[li + stride]
        k.barrier()
        stride.set(stride / 2)
    with k.if_(li == 0):
        dst[k.workgroup_id()] = sh[0]
    # out-of-bounds workgroup array access reads 0 / does nothing
    with k.if_(li == 1):
        sh[wg + 3] = 99
        dst[k.workgroup_id() + 100] = sh[wg + 3]
    data = np.arange(wg * 3, dtype=np.int32) - 40
    res = be.dispatch(k.build(), {"src": data, "dst": 3}, DispatchConfig(grid=3))["dst"]
    assert res.tolist() == [int(v) for v in data.reshape(3, wg).sum(axis=1)]


# ------------------------------------------------------------------ atomics


def _atomic_program(op: str, ty: ScalarType, bins: int, keep_old: bool) -> N.Program:
    k = ProgramBuilder(f"atomic_{op}", workgroup_size=64)
    vals = k.buffer("vals", ty)
    keys = k.buffer("keys", U32)
    hist = k.buffer("hist", ty, "read_write")
    olds = k.buffer("olds", ty, "write")
    i = k.global_id()
    with k.if_(i < vals.length()):
        old = getattr(hist, f"atomic_{op}")(keys[i], vals[i])
        if keep_old:
            olds[i] = old
    return k.build()


@pytest.mark.parametrize("ty", INT_TYPES, ids=str)
@pytest.mark.parametrize("op", ["add", "min", "max", "and", "or", "xor", "exchange"])
def test_atomic_rmw_final_values_and_old_values(
    be: ReferenceBackend, ty: ScalarType, op: str
) -> None:
    rng = np.random.default_rng(3)
    n, bins = 1000, 7
    lo, hi = int_range(ty)
    vals = [int(v) for v in rng.integers(max(lo, -(2**40)), min(hi, 2**40), n)]
    vals[:4] = [hi, lo, hi, lo]
    keys = [int(v) for v in rng.integers(0, bins + 2, n)]  # some out of range
    init = [int(v) for v in rng.integers(max(lo, -1000), min(hi, 1000), bins)]
    prog = _atomic_program(op, ty, bins, keep_old=True)
    res = be.dispatch(prog, {"vals": np.array(vals, ty.numpy), "keys": np.array(keys, np.uint32),
                             "hist": np.array(init, ty.numpy), "olds": n},
                      DispatchConfig(grid=(n + 63) // 64))
    f = {"add": lambda a, b: wrap(a + b, ty), "min": min, "max": max,
         "and": lambda a, b: wrap(a & b, ty), "or": lambda a, b: wrap(a | b, ty),
         "xor": lambda a, b: wrap(a ^ b, ty), "exchange": lambda a, b: b}[op]
    # a sequential execution in lane order
    mem = list(init)
    olds = []
    for v, key in zip(vals, keys):
        if key < bins:
            olds.append(mem[key])
            mem[key] = f(mem[key], v)
        else:
            olds.append(0)
    # the reference applies colliding atomics in lane order (one valid interleaving)
    assert res["hist"].tolist() == mem
    assert res["olds"].tolist() == olds


def test_atomic_float_add_sum(be: ReferenceBackend) -> None:
    n = 512
    vals = [float(v) for v in np.arange(n) % 5 * 0.25]
    keys = [i % 3 for i in range(n)]
    prog = _atomic_program("add", F32, 3, keep_old=True)
    res = be.dispatch(prog, {"vals": np.array(vals, np.float32), "keys": np.array(keys, np.uint32),
                             "hist": np.zeros(3, np.float32), "olds": n},
                      DispatchConfig(grid=n // 64))
    sums = [sum(v for v, key in zip(vals, keys) if key == b) for b in range(3)]
    assert res["hist"].tolist() == sums  # exact: multiples of 0.25, small
    # old values: each lane's old value is the running sum before it, in some order
    for b in range(3):
        olds = sorted(float(res["olds"][j]) for j in range(n) if keys[j] == b)
        assert olds[0] == 0.0 and olds[-1] <= sums[b]


def test_atomic_histogram_without_result(be: ReferenceBackend) -> None:
    k = ProgramBuilder("hist", workgroup_size=256)
    data = k.buffer("data", U32)
    hist = k.buffer("hist", U32, "read_write")
    i = k.global_linear_id()
    with k.if_(i < data.length()):
        k.atomic("add", hist, data[i] % 16, k.lit(1, U32))
    n = 100_000
    rng = np.random.default_rng(0)
    d = rng.integers(0, 1000, n).astype(np.uint32)
    res = be.dispatch(k.build(), {"data": d, "hist": np.zeros(16, np.uint32)},
                      DispatchConfig.for_elements(n, 256))["hist"]
    assert res.tolist() == [int(np.count_nonzero(d % 16 == b)) for b in range(16)]


def test_compare_exchange_lock_free_counter(be: ReferenceBackend) -> None:
    """Each lane increments a counter with a CAS loop; the total equals the lane count."""
    k = ProgramBuilder("cas", workgroup_size=64)
    ctr = k.buffer("ctr", U32, "read_write")
    tickets = k.buffer("tickets", U32, "write")
    done = k.let(False)
    with k.while_(~done):
        cur = k.let(ctr[0])
        old = ctr.atomic_compare_exchange(0, cur, cur + 1)
        with k.if_(old == cur):
            tickets[k.global_id()] = cur
            done.set(True)
    n = 256
    res = be.dispatch(k.build(), {"ctr": np.zeros(1, np.uint32), "tickets": n},
                      DispatchConfig(grid=n // 64))
    assert res["ctr"].tolist() == [n]
    assert sorted(res["tickets"].tolist()) == list(range(n))


def test_compare_exchange_semantics_and_oob(be: ReferenceBackend) -> None:
    k = ProgramBuilder("cas2", workgroup_size=4)
    mem = k.buffer("mem", I32, "read_write")
    olds = k.buffer("olds", I32, "write")
    i = k.global_id()
    old = mem.atomic_compare_exchange(i, 5, i.cast(I32) + 100)
    olds[i] = old
    res = be.dispatch(k.build(), {"mem": np.array([5, 6, 5], np.int32), "olds": 4},
                      DispatchConfig())
    assert res["mem"].tolist() == [100, 6, 102]
    assert res["olds"].tolist() == [5, 6, 5, 0]  # lane 3 is out of range: old reads 0


def test_workgroup_atomics(be: ReferenceBackend) -> None:
    k = ProgramBuilder("wgatomic", workgroup_size=64)
    out = k.buffer("out", U32, "write")
    sh = k.shared("cnt", U32, 2)
    li = k.local_index()
    with k.if_(li < 2):
        sh[li] = 0
    k.barrier()
    sh.atomic_add(li % 2, li)
    sh.atomic_max(k.lit(1, U32), li * 0 + 5000)
    k.barrier()
    with k.if_(li < 2):
        out[k.workgroup_id() * 2 + li] = sh[li]
    res = be.dispatch(k.build(), {"out": 6}, DispatchConfig(grid=3))["out"].tolist()
    evens = sum(range(0, 64, 2))
    assert res == [evens, 5000] * 3


def test_compare_exchange_random_against_sequential(be: ReferenceBackend) -> None:
    """The reference applies colliding compare-exchanges in lane order; check against a
    sequential Python simulation (including chains where every lane succeeds)."""
    k = ProgramBuilder("cas3", workgroup_size=64)
    idx = k.buffer("idx", U32)
    cmp = k.buffer("cmp", I32)
    val = k.buffer("val", I32)
    mem = k.buffer("mem", I32, "read_write")
    olds = k.buffer("olds", I32, "write")
    i = k.global_id()
    with k.if_(i < idx.length()):
        olds[i] = mem.atomic_compare_exchange(idx[i], cmp[i], val[i])
    prog = k.build()
    rng = np.random.default_rng(11)
    n, m = 640, 5
    ix = [int(v) for v in rng.integers(0, m + 1, n)]
    cm = [int(v) for v in rng.integers(0, 4, n)]
    vl = [int(v) for v in rng.integers(0, 4, n)]
    init = [0, 1, 2, 3, 0]
    res = be.dispatch(prog, {"idx": np.array(ix, np.uint32), "cmp": np.array(cm, np.int32),
                             "val": np.array(vl, np.int32), "mem": np.array(init, np.int32),
                             "olds": n}, DispatchConfig(grid=n // 64))
    memv = list(init)
    olds = []
    for a, c, v in zip(ix, cm, vl):
        if a >= m:
            olds.append(0)
            continue
        olds.append(memv[a])
        if memv[a] == c:
            memv[a] = v
    assert res["mem"].tolist() == memv
    assert res["olds"].tolist() == olds
    # a chain: lane j expects j and stores j + 1, so in lane order every lane succeeds
    chain = be.dispatch(prog, {"idx": np.zeros(n, np.uint32), "cmp": np.arange(n, dtype=np.int32),
                               "val": np.arange(1, n + 1, dtype=np.int32),
                               "mem": np.zeros(1, np.int32), "olds": n},
                        DispatchConfig(grid=n // 64))
    assert chain["mem"].tolist() == [n]
    assert chain["olds"].tolist() == list(range(n))


def test_cas_counter_high_contention(be: ReferenceBackend) -> None:
    k = ProgramBuilder("cas_many", workgroup_size=256)
    ctr = k.buffer("ctr", U32, "read_write")
    done = k.let(False)
    with k.while_(~done):
        cur = k.let(ctr[0])
        old = ctr.atomic_compare_exchange(0, cur, cur + 1)
        with k.if_(old == cur):
            done.set(True)
    n = 1024
    res = be.dispatch(k.build(), {"ctr": np.zeros(1, np.uint32)}, DispatchConfig(grid=n // 256))
    assert res["ctr"].tolist() == [n]


def _py_float_op(op: str, x: float, y: float, rnd: Callable[[float], float]) -> float:
    """IEEE op on Python floats (f64), rounded to the type by `rnd` (innocuous double
    rounding for f32: 53 >= 2*24 + 2)."""
    if op == "min" or op == "max":
        if math.isnan(x):
            return y
        if math.isnan(y):
            return x
        return min(x, y) if op == "min" else max(x, y)
    if op == "div" and y == 0.0:
        if math.isnan(x) or x == 0.0:
            return math.nan
        return math.copysign(math.inf, x) * math.copysign(1.0, y)
    if op == "rem":
        q = _py_float_op("div", x, y, rnd)
        # trunc keeps the sign of zero: trunc(-0.5) = -0.0 (Python's int trunc would lose it)
        t = math.copysign(float(math.trunc(q)), q) if math.isfinite(q) else q
        m = _py_float_op("mul", y, t, rnd)
        return _py_float_op("sub", x, m, rnd)
    try:
        v = {"add": lambda: x + y, "sub": lambda: x - y, "mul": lambda: x * y,
             "div": lambda: x / y}[op]()
    except OverflowError:  # pragma: no cover - IEEE ops on floats do not raise in Python
        v = math.inf
    return rnd(v)


FLOAT_BIN = {
    "add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
    "div": lambda a, b: a / b, "rem": lambda a, b: a % b, "min": min_, "max": max_,
}


@settings(max_examples=120, deadline=None)
@given(data=st.data(), ty=st.sampled_from((F32, F64)), op=st.sampled_from(sorted(FLOAT_BIN)))
def test_prop_float_binary(be: ReferenceBackend, data: st.DataObject, ty: ScalarType,
                           op: str) -> None:
    width = 32 if ty is F32 else 64
    rnd = f32 if ty is F32 else float
    fl = st.floats(width=width, allow_nan=True, allow_infinity=True)
    pairs = data.draw(st.lists(st.tuples(fl, fl), min_size=1, max_size=30))
    a, b = [p[0] for p in pairs], [p[1] for p in pairs]
    got = elementwise(be, (ty, ty), ty, FLOAT_BIN[op], a, b)
    for g, x, y in zip(got, a, b):
        e = _py_float_op(op, x, y, rnd)
        if op in ("min", "max") and g == 0.0 and e == 0.0:
            continue  # sign of zero unspecified for min/max
        assert (math.isnan(g) and math.isnan(e)) or (g == e and math.copysign(1, g) == math.copysign(1, e)), (op, x, y, g, e)


@settings(max_examples=60, deadline=None)
@given(trip=st.lists(st.tuples(*[st.floats(width=32, allow_nan=False, allow_infinity=False,
                                           min_value=-(2.0**50), max_value=2.0**50)] * 3),
                     min_size=1, max_size=30))
def test_prop_fma_f32_single_rounding(be: ReferenceBackend,
                                      trip: list[tuple[float, float, float]]) -> None:
    xs, ys, zs = ([t[j] for t in trip] for j in range(3))
    got = elementwise(be, (F32, F32, F32), F32, fma, xs, ys, zs)
    for g, x, y, z in zip(got, xs, ys, zs):
        exact = Fraction(x) * Fraction(y) + Fraction(z)
        if exact == 0:
            continue  # sign of an exact zero: IEEE rule, checked elsewhere
        assert g == nearest_f32(exact), (x, y, z)


@settings(max_examples=60, deadline=None)
@given(trip=st.lists(st.tuples(*[st.floats(allow_nan=False, allow_infinity=False,
                                           min_value=-1e150, max_value=1e150)] * 3),
                     min_size=1, max_size=10))
def test_prop_fma_f64_exact(be: ReferenceBackend, trip: list[tuple[float, float, float]]) -> None:
    xs, ys, zs = ([t[j] for t in trip] for j in range(3))
    got = elementwise(be, (F64, F64, F64), F64, fma, xs, ys, zs)
    for g, x, y, z in zip(got, xs, ys, zs):
        exact = Fraction(x) * Fraction(y) + Fraction(z)
        if exact == 0:
            continue
        assert g == exact.numerator / exact.denominator, (x, y, z)
