"""Exact IR semantics of every operator, on NumPy arrays of one lane per invocation.

This is where docs/IR.md's arithmetic rules live: wrapping integers, division by zero,
shifts modulo the bit width, IEEE float behaviour without contraction, single-rounding
fma, saturating float->int casts. Every function takes arrays (or 0-d arrays) already of
the operand type and returns an array of the result type. This module must never know
about statements, masks, buffers or backends, and must never let NumPy's own promotion or
warnings decide a result: types are explicit and evaluation runs under `quiet()`.

Flush mode (docs/IR.md, "Subnormals and flush mode"): inside `flushing(types, tininess)`,
float arithmetic of those types treats a subnormal operand as a zero of its sign and turns
a tiny result into a zero of its sign, "tiny" by one of `vyre.features.TININESS_RULES` (they differ only
for products, fma and narrowing casts whose exact value lies within half an ulp below the
smallest normal); moves (select, bitcast, loads/stores) and the sign-bit operations `neg`
and `abs` never flush. It exists so a backend whose device flushes can be compared exactly;
the default (no types) is IEEE.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from fractions import Fraction

import numpy as np

from vyre import features as F
from vyre.ir import ops
from vyre.ir.types import ScalarType

Array = np.ndarray

_UNSIGNED_OF: dict[np.dtype, np.dtype] = {
    np.dtype(np.int32): np.dtype(np.uint32),
    np.dtype(np.uint32): np.dtype(np.uint32),
    np.dtype(np.int64): np.dtype(np.uint64),
    np.dtype(np.uint64): np.dtype(np.uint64),
}


_FLUSH: ContextVar[frozenset[ScalarType]] = ContextVar("vyre_flush_subnormals", default=frozenset())
_TININESS: ContextVar[str] = ContextVar("vyre_flush_tininess", default=F.TININESS_AFTER_ROUNDING)


@contextmanager
def flushing(types: Iterable[ScalarType], tininess: str = F.TININESS_AFTER_ROUNDING) -> Iterator[None]:
    """Evaluate with float arithmetic of `types` in flush mode, tiny results decided by
    `tininess` (one of `vyre.features.TININESS_RULES`; see the module docstring)."""
    if tininess not in F.TININESS_RULES:
        raise ValueError(f"unknown tininess rule {tininess!r}; use one of {F.TININESS_RULES}")
    token = _FLUSH.set(frozenset(types))
    rule = _TININESS.set(tininess)
    try:
        yield
    finally:
        _TININESS.reset(rule)
        _FLUSH.reset(token)


def flush_subnormals(x: Array, ty: ScalarType) -> Array:
    """`x` (of float type `ty`) with every subnormal replaced by a zero of its sign."""
    a = np.asarray(x, dtype=ty.numpy)
    with np.errstate(invalid="ignore"):
        sub = (a != 0) & (np.abs(a) < np.finfo(ty.numpy).tiny)  # NaN: False
    if not np.any(sub):
        return a
    return np.where(sub, np.copysign(ty.numpy.type(0), a), a).astype(ty.numpy, copy=False)


def _flush_in(args: list[Array], ty: ScalarType) -> list[Array]:
    if ty not in _FLUSH.get():
        return args
    return [flush_subnormals(a, ty) for a in args]


def _flush_out(r: Array, ty: ScalarType) -> Array:
    """Flush a result whose tiny results are exact (sums, differences, quotients: see
    `_flush_rounded`), so every tininess rule flushes exactly its subnormal results."""
    return flush_subnormals(r, ty) if ty in _FLUSH.get() else r


def _flush_rounded(r: Array, wide: Array, ty: ScalarType) -> Array:
    """Flush result `r` of float type `ty`, rounded from the f64 values `wide` (the exact
    value, or its round-to-odd 53-bit approximation: either gives every rule's decision),
    by the tininess rule in force. Products, fma, narrowing casts and approximate functions
    come here; a sum or difference that is tiny is exact, and a quotient of two normal
    floats never lies within an ulp below the smallest normal, so `_flush_out` decides those.
    f64 results have no wider value here: they flush when subnormal."""
    if ty not in _FLUSH.get():
        return r
    rule = _TININESS.get()
    if rule == F.TININESS_SUBNORMAL_RESULT or ty is ScalarType.F64:
        return flush_subnormals(r, ty)
    info = np.finfo(ty.numpy)
    w = np.asarray(wide, dtype=np.float64)
    if rule == F.TININESS_BEFORE_ROUNDING:
        mag = np.abs(w)
    else:  # scaled into the normal range (exact in f64), rounded there, scaled back
        k = float(2 ** (int(info.nmant) + 2))
        mag = np.abs((w * k).astype(ty.numpy).astype(np.float64)) / k
    tiny = (w != 0) & (mag < float(info.tiny))  # NaN: False
    if not np.any(tiny):
        return flush_subnormals(r, ty)  # (an operand's own flush already made it exact)
    zero = np.copysign(np.zeros_like(w), w).astype(ty.numpy)
    return np.where(tiny, zero, r).astype(ty.numpy, copy=False)


def quiet() -> np.errstate:
    """Wrapping and IEEE specials are intended: no NumPy warnings during evaluation."""
    return np.errstate(all="ignore")


def as_type(x: object, ty: ScalarType) -> Array:
    """`x` as an array of `ty`'s dtype (no copy when it already is one)."""
    return np.asarray(x, dtype=ty.numpy)


# ------------------------------------------------------------------ integer helpers


def _int_div_rem(a: Array, b: Array, ty: ScalarType) -> tuple[Array, Array]:
    """C division and remainder: truncate toward zero; by zero -> 0; MIN / -1 -> MIN, % -> 0."""
    dt = ty.numpy
    zero = b == 0
    if ty.is_signed:
        info = np.iinfo(dt)
        # Replacing the divisor by 1 where b == 0 or (a == MIN and b == -1) gives exactly
        # a / 1 = a (= MIN) and a % 1 = 0 there: the IR's answers for MIN / -1 and MIN % -1.
        safe = np.where(zero | ((a == info.min) & (b == -1)), dt.type(1), b).astype(dt, copy=False)
        r = np.fmod(a, safe).astype(dt, copy=False)  # integer fmod: sign of the dividend (C semantics)
        q = ((a - r) // safe).astype(dt, copy=False)  # exact division; a - r lies between 0 and a
    else:
        safe = np.where(zero, dt.type(1), b).astype(dt, copy=False)
        q = (a // safe).astype(dt, copy=False)
        r = (a % safe).astype(dt, copy=False)
    q = np.where(zero, dt.type(0), q).astype(dt, copy=False)
    r = np.where(zero, dt.type(0), r).astype(dt, copy=False)
    return q, r


def _shift(op: str, a: Array, amount: Array, ty: ScalarType) -> Array:
    """Shift by `amount % bits`; shl in the unsigned view (wraps), shr arithmetic if signed."""
    dt = ty.numpy
    udt = _UNSIGNED_OF[dt]
    amt = (np.asarray(amount, dtype=np.uint32) % np.uint32(ty.bits)).astype(udt, copy=False)
    if op == "shl":
        return np.left_shift(np.asarray(a).astype(udt, copy=False), amt).astype(udt, copy=False).astype(dt, copy=False)
    if ty.is_signed:
        return np.right_shift(np.asarray(a, dtype=dt), amt.astype(dt, copy=False)).astype(dt, copy=False)
    return np.right_shift(np.asarray(a, dtype=dt), amt).astype(dt, copy=False)


# ------------------------------------------------------------------ floats


def _float_rem(a: Array, b: Array, ty: ScalarType) -> Array:
    """a - b * trunc(a / b), each step rounded to the type (no contraction)."""
    dt = ty.numpy
    q = _flush_out(np.divide(a, b).astype(dt, copy=False), ty)  # (flush mode: each step)
    t = np.trunc(q).astype(dt, copy=False)
    m = _flush_rounded(np.multiply(b, t).astype(dt, copy=False),
                       np.asarray(b, np.float64) * np.asarray(t, np.float64), ty)
    return np.subtract(a, m).astype(dt, copy=False)


def _round_to_odd_sum(p: Array, c: Array) -> Array:
    """p + c (p, c exact f64 values) rounded to 53 bits with round-to-odd.

    Rounding that to a narrower format (f32: 24 bits, f16: 11 bits) is then correctly
    rounded to nearest-even, which is how fma gets its single rounding for f32 and f16.
    """
    s = p + c
    # TwoSum: the exact rounding error of s (valid for finite values).
    bb = s - p
    e = (p - (s - bb)) + (c - bb)
    bits = s.view(np.int64)
    fix = np.isfinite(s) & np.isfinite(e) & (e != 0) & ((bits & 1) == 0)
    if np.any(fix):
        towards = np.where(e > 0, np.inf, -np.inf)
        s = np.where(fix, np.nextafter(s, towards), s)
    return s


def _fma(a: Array, b: Array, c: Array, ty: ScalarType) -> Array:
    dt = ty.numpy
    if ty is ScalarType.F64:
        return _fma_f64(a, b, c)
    return _fma_wide(a, b, c).astype(dt, copy=False)


def _fma_wide(a: Array, b: Array, c: Array) -> Array:
    """a*b + c of f32 or f16 operands, rounded to odd in f64 (see `_round_to_odd_sum`)."""
    # a*b is exact in f64 (at most 2x24 significant bits, exponent in range), then one
    # round-to-odd addition in f64 and one rounding to the type: a single correct rounding.
    a64, b64, c64 = np.broadcast_arrays(
        np.asarray(a, np.float64), np.asarray(b, np.float64), np.asarray(c, np.float64)
    )
    shape = a64.shape
    p = (a64 * b64).reshape(-1)
    s = _round_to_odd_sum(p, np.ascontiguousarray(c64).reshape(-1))
    return s.reshape(shape)


def _fma_f64(a: Array, b: Array, c: Array) -> Array:
    """Exact fma for f64: rational arithmetic per element where all inputs are finite.

    NumPy has no fused multiply-add and Python 3.11 has no math.fma, so each finite element
    is computed as the exact rational a*b+c and rounded once (Python's int/int true
    division is correctly rounded). Non-finite inputs follow a*b+c, which is exact for them
    except where a*b overflows and c is infinite (handled: the result is c).
    """
    a, b, c = np.broadcast_arrays(
        np.asarray(a, np.float64), np.asarray(b, np.float64), np.asarray(c, np.float64)
    )
    naive = np.asarray(a * b + c, dtype=np.float64)
    out = np.array(naive, copy=True).reshape(-1)
    fa, fb, fc = a.reshape(-1), b.reshape(-1), c.reshape(-1)
    finite_ab = np.isfinite(fa) & np.isfinite(fb)
    inf_c = finite_ab & np.isinf(fc)
    out[inf_c] = fc[inf_c]
    for i in np.flatnonzero(finite_ab & np.isfinite(fc)):
        exact = Fraction(float(fa[i])) * Fraction(float(fb[i])) + Fraction(float(fc[i]))
        if exact == 0:
            continue  # a*b = -c exactly: the naive sum is exact, with IEEE's zero sign
        try:
            out[i] = exact.numerator / exact.denominator
        except OverflowError:
            out[i] = np.inf if exact > 0 else -np.inf
    return out.reshape(naive.shape)


def _approx(fn: Callable[..., Array], ty: ScalarType, *args: Array) -> Array:
    """Approximate functions: computed in f64 and rounded once to the type."""
    return _approx_wide(fn, *args).astype(ty.numpy, copy=False)


def _approx_wide(fn: Callable[..., Array], *args: Array) -> Array:
    return np.asarray(fn(*(np.asarray(x, dtype=np.float64) for x in args)))


# the registry's f64 NumPy function of each approximate function (vyre.ir.ops)
_APPROX: dict[str, Callable[..., Array]] = {
    op.name: op.reference for op in ops.CALL_OPS if op.approximate and op.reference
}


# ------------------------------------------------------------------ operators


def binary(op: str, a: Array, b: Array, ty: ScalarType, operand_ty: ScalarType) -> Array:
    """`a op b`; `ty` is the result type, `operand_ty` the type of `a`."""
    if operand_ty.is_float and _FLUSH.get():
        a, b = _flush_in([a, b], operand_ty)
        r = _binary(op, a, b, ty, operand_ty)
        if op == "mul" and ty is not ScalarType.F64:  # exact in f64: 2 x 24 bits
            return _flush_rounded(r, np.asarray(a, np.float64) * np.asarray(b, np.float64), ty)
        return _flush_out(r, ty)
    return _binary(op, a, b, ty, operand_ty)


def _binary(op: str, a: Array, b: Array, ty: ScalarType, operand_ty: ScalarType) -> Array:
    t = operand_ty
    dt = t.numpy
    if op in ("eq", "ne", "lt", "le", "gt", "ge"):
        fn = {"eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal,
              "gt": np.greater, "ge": np.greater_equal}[op]
        return np.asarray(fn(a, b), dtype=np.bool_)
    if op == "logical_and":
        return np.logical_and(a, b)
    if op == "logical_or":
        return np.logical_or(a, b)
    if op in ("shl", "shr"):
        return _shift(op, a, b, t)
    if op == "and":
        return np.bitwise_and(a, b).astype(dt, copy=False)
    if op == "or":
        return np.bitwise_or(a, b).astype(dt, copy=False)
    if op == "xor":
        return np.bitwise_xor(a, b).astype(dt, copy=False)
    if op == "min":
        return (np.fmin(a, b) if t.is_float else np.minimum(a, b)).astype(dt, copy=False)
    if op == "max":
        return (np.fmax(a, b) if t.is_float else np.maximum(a, b)).astype(dt, copy=False)
    if op == "add":
        return np.add(a, b).astype(dt, copy=False)
    if op == "sub":
        return np.subtract(a, b).astype(dt, copy=False)
    if op == "mul":
        return np.multiply(a, b).astype(dt, copy=False)
    if op == "div":
        if t.is_float:
            return np.divide(a, b).astype(dt, copy=False)
        return _int_div_rem(np.asarray(a), np.asarray(b), t)[0]
    if op == "rem":
        if t.is_float:
            return _float_rem(a, b, t)
        return _int_div_rem(np.asarray(a), np.asarray(b), t)[1]
    raise NotImplementedError(f"binary op {op!r}")


def unary(op: str, a: Array, ty: ScalarType) -> Array:
    if op == "neg":
        if ty.is_int:
            return np.subtract(ty.numpy.type(0), a).astype(ty.numpy, copy=False)  # wraps: -MIN = MIN
        return np.negative(a).astype(ty.numpy, copy=False)
    if op == "bit_not":
        return np.invert(a).astype(ty.numpy, copy=False)
    if op == "not":
        return np.logical_not(a)
    raise NotImplementedError(f"unary op {op!r}")


def call(fn: str, args: list[Array], ty: ScalarType) -> Array:
    if ty.is_float and fn != "abs" and _FLUSH.get():  # abs clears the sign bit: no flush
        args = _flush_in(args, ty)
        if ty is not ScalarType.F64 and fn == "fma":
            wide = _fma_wide(*args)
            return _flush_rounded(wide.astype(ty.numpy, copy=False), wide, ty)
        if ty is not ScalarType.F64 and fn in _APPROX:
            wide = _approx_wide(_APPROX[fn], *args)
            return _flush_rounded(wide.astype(ty.numpy, copy=False), wide, ty)
        return _flush_out(_call(fn, args, ty), ty)
    return _call(fn, args, ty)


def dot4(a: Array, b: Array, acc: Array, signed: bool) -> Array:
    """acc + sum over the four bytes i of a's byte i * b's byte i (IR `dot4_i8` / `dot4_u8`),
    the products and their sum exact in i64, the total wrapped to 32 bits."""
    ua = np.asarray(a, np.uint32).astype(np.int64)
    ub = np.asarray(b, np.uint32).astype(np.int64)
    total = np.asarray(acc).astype(np.int64)
    for i in range(4):
        x, y = (ua >> (8 * i)) & 0xFF, (ub >> (8 * i)) & 0xFF
        if signed:  # sign-extend each byte
            x, y = x - ((x & 0x80) << 1), y - ((y & 0x80) << 1)
        total = total + x * y
    dt = np.int32 if signed else np.uint32
    return (total & 0xFFFFFFFF).astype(np.uint32).view(dt)


def _call(fn: str, args: list[Array], ty: ScalarType) -> Array:
    dt = ty.numpy
    if fn in ("dot4_i8", "dot4_u8"):
        return dot4(args[0], args[1], args[2], fn == "dot4_i8")
    if fn == "abs":
        (a,) = args
        if ty.is_float:
            return np.abs(a).astype(dt, copy=False)
        if not ty.is_signed:
            return np.asarray(a, dtype=dt)
        return np.where(a < 0, np.subtract(dt.type(0), a), a).astype(dt, copy=False)  # abs(MIN) = MIN
    if fn == "clamp":
        x, lo, hi = args
        return binary("min", binary("max", x, lo, ty, ty), hi, ty, ty)
    if fn == "fma":
        return _fma(args[0], args[1], args[2], ty)
    if fn == "sqrt":
        if ty is ScalarType.F16:  # f32 has > 2*11+2 bits: rounding twice is innocuous
            return np.sqrt(np.asarray(args[0], np.float32)).astype(dt, copy=False)
        return np.sqrt(args[0]).astype(dt, copy=False)
    if fn == "floor":
        return np.floor(args[0]).astype(dt, copy=False)
    if fn == "ceil":
        return np.ceil(args[0]).astype(dt, copy=False)
    if fn == "trunc":
        return np.trunc(args[0]).astype(dt, copy=False)
    if fn == "round":
        return np.rint(args[0]).astype(dt, copy=False)  # half to even
    if fn in _APPROX:
        return _approx(_APPROX[fn], ty, *args)
    raise NotImplementedError(f"function {fn!r}")


def select(cond: Array, a: Array, b: Array, ty: ScalarType) -> Array:
    return np.where(cond, a, b).astype(ty.numpy, copy=False)


def cast(a: Array, src: ScalarType, dst: ScalarType) -> Array:
    """Value conversion (docs/IR.md, Cast)."""
    if _FLUSH.get() and (src.is_float or dst.is_float):
        if src.is_float:
            a = flush_subnormals(a, src) if src in _FLUSH.get() else a
        r = _cast(a, src, dst)
        if src.is_float and dst.is_float and src.bits > dst.bits:  # a narrowing rounding
            return _flush_rounded(r, np.asarray(a, np.float64), dst)
        return _flush_out(r, dst) if dst.is_float else r
    return _cast(a, src, dst)


def _cast(a: Array, src: ScalarType, dst: ScalarType) -> Array:
    a = np.asarray(a)
    if dst is ScalarType.BOOL:
        return np.asarray(a != 0, dtype=np.bool_)  # NaN != 0 is true
    ddt = dst.numpy
    if src is ScalarType.BOOL:
        return a.astype(ddt, copy=False)
    if src.is_int and dst.is_int:
        return a.astype(ddt, copy=False)  # two's complement: low bits, sign-extended from signed
    if src.is_int and dst.is_float:
        if dst is ScalarType.F16:
            # Through f64 (exact for |x| <= 2**53): one rounding. Larger magnitudes are inf
            # in f16 anyway, so clip them to a value that still rounds to inf.
            if src.bits == 64:
                a = np.clip(a, -(2**20), 2**20) if src.is_signed else np.minimum(a, 2**20)
            return a.astype(np.float64).astype(ddt, copy=False)
        return a.astype(ddt, copy=False)  # a single C conversion: round to nearest even
    if src.is_float and dst.is_float:
        return a.astype(ddt, copy=False)
    # float -> int: truncate, saturate, NaN -> 0
    info = np.iinfo(ddt)
    w = np.trunc(a.astype(np.float64))
    lo = float(info.min)  # -2**(n-1) or 0: exact in f64
    hi_excl = float(int(info.max) + 1)  # 2**n or 2**(n-1): exact in f64
    inside = (w >= lo) & (w < hi_excl)
    safe = np.where(inside, w, 0.0).astype(ddt, copy=False)
    out = np.where(w >= hi_excl, ddt.type(info.max), safe)
    out = np.where(w < lo, ddt.type(info.min), out)
    return np.asarray(out, dtype=ddt)


def bitcast(a: Array, dst: ScalarType) -> Array:
    arr = np.asarray(a)
    if arr.ndim and not arr.flags.c_contiguous:
        arr = np.ascontiguousarray(arr)  # (keeps 0-d values 0-d, unlike ascontiguousarray)
    return arr.view(dst.numpy)


# ------------------------------------------------------------------ the lowered core


def table(values: tuple[float, ...] | tuple[int, ...], index: Array, ty: ScalarType) -> Array:
    """A `Table` node of vyre.lower's core: values[index], for an index the lowering must
    keep below len(values) (asserted on every lane, as for `native`)."""
    i = np.asarray(index)
    if np.any(i >= len(values)):
        raise AssertionError(f"lowering read a table of {len(values)} at index {int(i.max())}")
    return np.asarray(values, dtype=ty.numpy)[i]


def native(op: str, args: list[Array], ty: ScalarType, operand_ty: ScalarType,
           active: Array | bool = True) -> Array:
    """A `Native` node of vyre.lower's core: the target's own operation, which the lowering
    must only apply inside its domain. The precondition is asserted on every lane of
    `active` (the lanes running it: this is how the reference checks a lowering); inside
    it the result is the IR operation's."""
    if op in ("div", "rem"):
        a, b = (np.asarray(x) for x in args)
        bad = b == 0
        if operand_ty.is_signed:
            bad = bad | ((a == np.iinfo(operand_ty.numpy).min) & (b == -1))
        if np.any(bad & active):
            raise AssertionError(f"lowering applied native {op} outside its domain "
                                 "(divisor 0 or MIN / -1)")
        return binary(op, a, b, ty, operand_ty)
    if op in ("shl", "shr"):
        if np.any((np.asarray(args[1]) >= operand_ty.bits) & active):
            raise AssertionError(f"lowering applied native {op} with an amount >= the width")
        return binary(op, args[0], args[1], ty, operand_ty)
    if op == "f2i":
        info = np.iinfo(ty.numpy)
        w = np.trunc(np.asarray(args[0], dtype=np.float64))
        ok = (w >= float(info.min)) & (w < float(int(info.max) + 1))  # NaN: not ok
        if not np.all(ok | ~np.asarray(active)):
            raise AssertionError("lowering applied native f2i to a float out of the range "
                                 f"of {ty} (or NaN)")
        return cast(args[0], operand_ty, ty)
    if op == "approx_div":  # an estimate: here correctly rounded, on a device maybe not
        return binary("div", args[0], args[1], ty, operand_ty)
    if op == "approx_sqrt":
        return call("sqrt", args, ty)
    raise NotImplementedError(f"native op {op!r}")
