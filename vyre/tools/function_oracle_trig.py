"""The correctly rounded oracle's trigonometric functions (sin, cos, tan, asin,
acos, atan2), independent of vyre's code: exact rational arguments, Python's `decimal`, series.

pi comes from Machin's formula summed in `decimal` at 300 digits; a huge argument is
reduced by pi/2 at 300 digits (an f32 is below 2^128, 39 digits, so r keeps 250 correct
digits, and no f32 lies within 10^-40 of a multiple of pi/2), then sin and cos are
Taylor series at 90 digits, asin(x) = atan(x / sqrt(1 - x^2)) and atan(t) halves its
argument (atan t = 2 atan(t / (1 + sqrt(1 + t^2)))) to below 1/16 before its series.
The results go back as exact `Fraction`s of 80+ correct digits (function_oracle rounds
them once); every exact case (sin(+-0), asin(+-0), atan2 of zeros and infinities) is
returned as the exact value, and no other f32 or f16 argument has a rational result.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from decimal import Decimal, localcontext
from fractions import Fraction

_PREC = 90


def _machin_pi() -> Decimal:
    with localcontext() as c:
        c.prec = 310

        def atan_inv(n: int) -> Decimal:
            x = Decimal(1) / n
            x2 = x * x
            total, term, k = Decimal(0), x, 1
            while abs(term) > Decimal(10) ** -305:
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
    """(n mod 4, r) with x = n pi/2 + r, |r| <= pi/4, r to 250+ digits."""
    with localcontext() as c:
        c.prec = 300
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
        else:
            a = _atan_dec(abs(Decimal(y)) / abs(Decimal(x)))
            v = a if x > 0 else pi - a
        return Fraction(-v if neg else v)


TRIG: dict[str, Callable[..., Fraction | float]] = {
    "sin": _sin, "cos": _cos, "tan": _tan, "asin": _asin, "acos": _acos,
    "atan2": _atan2}
