"""Double-double arithmetic (a value hi + lo, |lo| <= ulp(hi) / 2) from f64 add and mul.

Dekker's and Knuth's error-free transformations in round-to-nearest, with no fma (its
rounding is not the same on every backend) and no division: `two_sum`, `fast_two_sum`,
`two_prod` (Veltkamp splitting: exact while |a|, |b| < 2^996 and the product's error
stays above the f64 subnormals), `add` / `mul` of double-doubles (relative error a few
2^-104), Horner evaluation, constants from exact rationals, and an exact sum of three
terms (`sum3`) with its correct rounding (`round3`) for a final step a double-double
cannot hold (1 + 2^-53 + 2^-107 needs 108 bits).
"""

from __future__ import annotations

import struct
from decimal import Decimal
from fractions import Fraction

from vyre.ir.types import ScalarType as T

from .build import Builder, X

DD = tuple[X, X]
_SPLIT = float(2**27 + 1)


def split_const(v: Fraction | Decimal | float) -> tuple[float, float]:
    """The double-double (hi, lo) nearest the exact value `v` (hi = RN(v), lo = RN(v - hi))."""
    f = Fraction(v)
    hi = float(f)  # correctly rounded
    lo = float(f - Fraction(hi))
    return hi, lo


def dd_const(b: Builder, v: Fraction | Decimal | float) -> DD:
    hi, lo = split_const(v)
    return b.f64(hi), b.f64(lo)


def f64_bits(v: float) -> int:
    return int(struct.unpack("<Q", struct.pack("<d", v))[0])


def two_sum(b: Builder, x: X, y: X) -> DD:
    s = b.let(x + y)
    bb = b.let(s - x)
    err = (x - (s - bb)) + (y - bb)
    return s, b.let(err)


def fast_two_sum(b: Builder, x: X, y: X) -> DD:
    """x + y exactly as (s, err), for |x| >= |y| (or x = 0)."""
    s = b.let(x + y)
    return s, b.let(y - (s - x))


def _split(b: Builder, x: X) -> DD:
    c = b.let(x * _SPLIT)
    hi = b.let(c - (c - x))
    return hi, b.let(x - hi)


def two_prod(b: Builder, x: X, y: X) -> DD:
    """x * y exactly as (p, err)."""
    p = b.let(x * y)
    xh, xl = _split(b, x)
    yh, yl = _split(b, y)
    err = (((xh * yh - p) + xh * yl) + xl * yh) + xl * yl
    return p, b.let(err)


def add(b: Builder, x: DD, y: DD) -> DD:
    s, e = two_sum(b, x[0], y[0])
    return fast_two_sum(b, s, b.let(e + (x[1] + y[1])))


def add_d(b: Builder, x: DD, y: X) -> DD:
    s, e = two_sum(b, x[0], y)
    return fast_two_sum(b, s, b.let(e + x[1]))


def mul(b: Builder, x: DD, y: DD) -> DD:
    p, e = two_prod(b, x[0], y[0])
    return fast_two_sum(b, p, b.let(e + (x[0] * y[1] + x[1] * y[0])))


def mul_d(b: Builder, x: DD, y: X) -> DD:
    p, e = two_prod(b, x[0], y)
    return fast_two_sum(b, p, b.let(e + x[1] * y))


def sum3(b: Builder, a: X, y: DD) -> tuple[X, X, X]:
    """a + y[0] + y[1] exactly, as (h, l, m) with h = RN(h + l), |l| <= ulp(h) / 2 and
    |m| so small that RN(h + l + m) is h, or h + 2 l where l is exactly half an ulp of h
    and m has l's sign (`round3`), for |a| >= |y[0]| >= |y[1]| (or zeros)."""
    s, e1 = two_sum(b, a, y[0])
    lo, m = two_sum(b, e1, y[1])
    h, l2 = fast_two_sum(b, s, lo)
    return h, l2, m


def round3(b: Builder, h: X, lo: X, m: X) -> X:
    """RN(h + lo + m) for a `sum3` result: h, except where lo is exactly half an ulp of h
    (h + 2 lo is then h's neighbour, exactly) and m pushes past it."""
    two = b.let(lo * 2.0)
    nb = b.let(h + two)
    mid = lo.ne(0.0).land((nb - h).eq(two))
    return b.select(mid.land((m * lo).gt(0.0)), nb, h)


def reciprocal(b: Builder, d: X, steps: int = 5) -> X:
    """1/d for an f64 `d` with 2^-120 < |d| < 2^120, within about 2^-52 (relative) after
    five Newton steps (2^-24 after three)."""
    # f32 reciprocal estimate from the bits (0x7ef311c7 - bits: within 12.5%), then Newton
    r = b.let((b.u32(0x7EF311C7) - d.cast(T.F32).bitcast(T.U32)).bitcast(T.F32).cast(T.F64))
    for _ in range(steps):
        r = b.let(r * (2.0 - d * r))
    return r


def div(b: Builder, n: DD, d: DD) -> DD:
    """n / d for double-doubles with 2^-120 < |d_hi| < 2^120, relative error below 2^-100:
    q0 = n_hi / d_hi by a Newton reciprocal (`reciprocal`, 2^-52; no f64 division,
    which is not exact on every backend), then q0 + (n - d q0) / d_hi with the residual
    exact to 2^-106 (n_hi - d_hi q0 cancels exactly: Sterbenz)."""
    y = reciprocal(b, d[0])
    q0 = b.let(n[0] * y)
    p, pe = two_prod(b, d[0], q0)
    r = ((n[0] - p) - pe) + (n[1] - d[1] * q0)
    return fast_two_sum(b, q0, b.let(r * y))


def _tail(b: Builder, coeffs: list[DD], t: X, first: int) -> DD:
    """sum coeffs[n] t^(n - first) for n >= first, in plain f64 (the terms whose f64
    rounding error, times t^first, is already below the double-double's)."""
    acc = coeffs[-1][0]
    for c in reversed(coeffs[first:-1]):
        acc = b.let(acc * t + c[0])
    return acc, b.f64(0.0)


def horner(b: Builder, coeffs: list[DD], t: DD, dd_terms: int | None = None) -> DD:
    """coeffs[0] + t * (coeffs[1] + t * (...)) in double-double; with `dd_terms`, only the
    first dd_terms coefficients' steps in double-double, the rest in f64 (by t's hi)."""
    k = len(coeffs) - 1 if dd_terms is None else dd_terms
    acc = coeffs[-1] if dd_terms is None else _tail(b, coeffs, t[0], dd_terms)
    for c in reversed(coeffs[:k]):
        acc = add(b, mul(b, acc, t), c)
    return acc


def horner_d(b: Builder, coeffs: list[DD], t: X, dd_terms: int | None = None) -> DD:
    """Horner by an f64 `t` (`dd_terms` as for `horner`)."""
    k = len(coeffs) - 1 if dd_terms is None else dd_terms
    acc = coeffs[-1] if dd_terms is None else _tail(b, coeffs, t, dd_terms)
    for c in reversed(coeffs[:k]):
        acc = add(b, mul_d(b, acc, t), c)
    return acc


__all__ = ["DD", "add", "add_d", "dd_const", "div", "f64_bits", "fast_two_sum", "horner", "horner_d",
           "mul", "mul_d", "round3", "split_const", "sum3", "two_prod", "two_sum"]
