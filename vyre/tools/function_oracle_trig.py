"""The correctly rounded oracle's trigonometric functions (sin, cos, tan, asin, acos,
atan2), independent of vyre's code: exact rational arguments, Python's `decimal`, series;
and their f64 forms with f64 hypot (`correctly_rounded64`, vectorised by `fast_oracle64`:
the C library's long double where it decides the rounding, these where it cannot).

pi comes from Machin's formula summed in `decimal` at 440 digits; a huge argument is
reduced by pi/2 at 430 digits (an f64 is below 2^1024, 309 digits, so r keeps 120 correct
digits, and no f64 lies within 10^-19 of a multiple of pi/2: Muller's worst case of
binary64 is 2^-60.9 away; an f32, below 2^128, keeps 390), then sin and cos are
Taylor series at 90 digits, asin(x) = atan(x / sqrt(1 - x^2)) and atan(t) halves its
argument (atan t = 2 atan(t / (1 + sqrt(1 + t^2)))) to below 1/16 before its series.
The results go back as exact `Fraction`s of 80+ correct digits (function_oracle rounds
them once to f32 / f16; `float()` of one is the correctly rounded f64, as CPython's
integer true division rounds correctly); every exact case (sin(+-0), asin(+-0), atan2
of zeros and infinities) is returned as the exact value, and no other f32 or f16
argument has a rational result. atan2 of a ratio below 2^-100 (x > 0) is t - t^3/3
exactly (an f64 ratio may lie exactly halfway between two subnormals, where 90 digits
of t could round either way). f64 hypot is exact: an integer square root.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from decimal import Decimal, localcontext
from fractions import Fraction

import numpy as np

_PREC = 90


def _machin_pi() -> Decimal:
    with localcontext() as c:
        c.prec = 440

        def atan_inv(n: int) -> Decimal:
            x = Decimal(1) / n
            x2 = x * x
            total, term, k = Decimal(0), x, 1
            while abs(term) > Decimal(10) ** -435:
                total += term / k
                term = -term * x2
                k += 2
            return total

        return +(16 * atan_inv(5) - 4 * atan_inv(239))


_PI = _machin_pi()


def _sin_cos_series(r: Decimal) -> tuple[Decimal, Decimal]:
    """(sin r, cos r) for |r| <= 1, to _PREC digits (the caller's context)."""
    r2 = r * r
    s, term, k = Decimal(0), r, 1
    while term != 0 and abs(term) > abs(r) * Decimal(10) ** -(_PREC + 5):
        s += term
        term = -term * r2 / ((k + 1) * (k + 2))
        k += 2
    c, term, k = Decimal(0), Decimal(1), 0
    while term != 0 and abs(term) > Decimal(10) ** -(_PREC + 5):
        c += term
        term = -term * r2 / ((k + 1) * (k + 2))
        k += 2
    return s, c


def _reduced(x: float) -> tuple[int, Decimal]:
    """(n mod 4, r) with x = n pi/2 + r, |r| <= pi/4, r to 100+ digits."""
    with localcontext() as c:
        c.prec = 430
        half_pi = _PI / 2
        d = Decimal(x)
        n = int((d / half_pi).to_integral_value())
        return n % 4, d - n * half_pi


def _sin(x: float) -> Fraction | float:
    if math.isnan(x) or math.isinf(x):
        return math.nan
    if x == 0:
        return x  # keeps the zero's sign
    n, r = _reduced(x)
    with localcontext() as c:
        c.prec = _PREC
        s, co = _sin_cos_series(r)
        v = (s, co, -s, -co)[n]
        return Fraction(v)


def _cos(x: float) -> Fraction | float:
    if math.isnan(x) or math.isinf(x):
        return math.nan
    if x == 0:
        return 1.0
    n, r = _reduced(x)
    with localcontext() as c:
        c.prec = _PREC
        s, co = _sin_cos_series(r)
        return Fraction((co, -s, -co, s)[n])


def _tan(x: float) -> Fraction | float:
    if math.isnan(x) or math.isinf(x):
        return math.nan
    if x == 0:
        return x
    n, r = _reduced(x)
    with localcontext() as c:
        c.prec = _PREC
        s, co = _sin_cos_series(r)
        return Fraction(s / co if n % 2 == 0 else -co / s)


def _atan_dec(t: Decimal) -> Decimal:
    """atan(t) for t >= 0, to _PREC digits (the caller's context)."""
    if t > 1:
        return _PI / 2 - _atan_dec(1 / t)
    halvings = 0
    while t > Decimal(1) / 16:
        t = t / (1 + (1 + t * t).sqrt())
        halvings += 1
    t2 = t * t
    s, term, k = Decimal(0), t, 1
    while term != 0 and abs(term) > t * Decimal(10) ** -(_PREC + 5):
        s += term / k
        term = -term * t2
        k += 2
    return s * (2**halvings)


def _asin(x: float) -> Fraction | float:
    if math.isnan(x) or abs(x) > 1:
        return math.nan
    if x == 0:
        return x
    with localcontext() as c:
        c.prec = _PREC + 10
        d = abs(Decimal(x))
        v = _PI / 2 if d == 1 else _atan_dec(d / (1 - d * d).sqrt())
        return Fraction(v if x > 0 else -v)


def _acos(x: float) -> Fraction | float:
    """acos(x) = pi/2 - asin(x) (no f32 or f16 x but 1 has a rational acos: Niven)."""
    if math.isnan(x) or abs(x) > 1:
        return math.nan
    if x == 1:
        return 0.0
    with localcontext() as c:
        c.prec = _PREC + 10
        d = Decimal(x)
        # pi/2 - asin(x), asin(x) = atan(x / sqrt(1 - x^2)); near 1 that difference keeps
        # _PREC digits: acos(1 - 2^-24) is about 2^-11.5, a loss of four digits
        a = Decimal(0) if x == 0 else _atan_dec(abs(d) / (1 - d * d).sqrt())
        v = _PI if x == -1 else _PI / 2 - a if x > 0 else _PI / 2 + a
        return Fraction(v)


def _atan2(y: float, x: float) -> Fraction | float:
    """C99 F.9.1.4 atan2."""
    if math.isnan(x) or math.isnan(y):
        return math.nan
    neg = math.copysign(1.0, y) < 0
    with localcontext() as c:
        c.prec = _PREC + 10
        pi = +_PI
        if y == 0:
            v: Decimal | None = pi if math.copysign(1.0, x) < 0 else None
            if v is None:
                return -0.0 if neg else 0.0
        elif math.isinf(y):
            v = pi / 4 if x == math.inf else 3 * pi / 4 if x == -math.inf else pi / 2
        elif math.isinf(x):
            if x > 0:
                return -0.0 if neg else 0.0
            v = pi
        elif x == 0:
            v = pi / 2
        elif x > 0 and abs(y) < x * 2.0**-100:
            # atan(t) = t - t^3/3 (+ below 2^-500 t) exactly: at _PREC digits t itself
            # would be rounded, and a t exactly halfway between two subnormals must come
            # out a little below it
            t = abs(Fraction(y)) / Fraction(x)
            return -(t - t**3 / 3) if neg else t - t**3 / 3
        else:
            a = _atan_dec(abs(Decimal(y)) / abs(Decimal(x)))
            v = a if x > 0 else pi - a
        return Fraction(-v if neg else v)


TRIG: dict[str, Callable[..., Fraction | float]] = {
    "sin": _sin, "cos": _cos, "tan": _tan, "asin": _asin, "acos": _acos,
    "atan2": _atan2}


def correctly_rounded64(fn: str, *args: float) -> float:
    """fn(*args) correctly rounded to f64 (C99 Annex F specials): `float()` of the exact
    `Fraction` (CPython's integer true division rounds once, to nearest even); hypot by
    `hypot64`."""
    if fn == "hypot":
        return hypot64(*args)
    v = TRIG[fn](*args)
    return float(v)


# the C library's long double functions (x87: 64-bit significands) are within a few of
# their ulps, 2^-63; a result that far from an f64 rounding boundary decides it
_WINDOW64 = 2.0**-58
_LONG = {"sin": np.sin, "cos": np.cos, "tan": np.tan, "asin": np.arcsin, "acos": np.arccos,
         "atan2": np.arctan2, "hypot": np.hypot}


def fast_oracle64(fn: str, *arrays: np.ndarray) -> np.ndarray:
    """`correctly_rounded64` elementwise, vectorised: NumPy's long double function where
    it decides the rounding to f64 (needs a long double of 64+ bits: x86's x87 format),
    the decimal evaluation where it cannot."""
    args = [np.asarray(a, np.float64) for a in arrays]
    assert np.finfo(np.longdouble).nmant >= 63, "fast_oracle64 needs an 80-bit long double"
    with np.errstate(all="ignore"):
        w = _LONG[fn](*(a.astype(np.longdouble) for a in args))
        out: np.ndarray = w.astype(np.float64)
        lo = (w - np.abs(w) * _WINDOW64).astype(np.float64)
        hi = (w + np.abs(w) * _WINDOW64).astype(np.float64)
    # undecided, or a zero / subnormal result (the relative window says nothing there)
    unsure = np.flatnonzero((lo != hi) | ~np.isfinite(w) | (np.abs(w) < 2.0**-1000))
    for j in unsure:
        out[j] = correctly_rounded64(fn, *(float(a[j]) for a in args))
    return out


def hypot64(x: float, y: float) -> float:
    """hypot(x, y) correctly rounded to f64, exactly (ties included: sqrt of an exact
    rational by an integer square root): C99 F.9.4.3's specials (+inf beside a NaN)."""
    if math.isinf(x) or math.isinf(y):
        return math.inf
    if math.isnan(x) or math.isnan(y):
        return math.nan
    s = Fraction(x) ** 2 + Fraction(y) ** 2  # denominator a power of two
    if s == 0:
        return 0.0
    k = s.denominator.bit_length() - 1
    n = s.numerator << (k & 1)
    k += k & 1
    j = max(0, 64 - n.bit_length() // 2)  # a root of 64+ bits: no f64 midpoint inside
    q = math.isqrt(n << (2 * j))
    exact = q * q == n << (2 * j)
    # the root lies in [q, q + 1) units of 2^-(k / 2 + j); an inexact one rounds as the
    # middle of that open interval does (every f64 midpoint there is a whole unit)
    v = Fraction(q, 1 << (k // 2 + j)) if exact else Fraction(2 * q + 1, 2 << (k // 2 + j))
    try:
        return float(v)
    except OverflowError:  # rounds past the largest f64
        return math.inf
