"""A correctly rounded oracle for the float functions, independent of vyre's code.

Each function is evaluated exactly or in Python's `decimal` at 60+ significant digits
(`Decimal.exp`, `ln`, `sqrt` are correctly rounded at that precision), the exact rational
of the result (`Fraction(Decimal)`) is then rounded once, exactly, to f64, f32 or f16 by
`round_fraction`. A decimal result this close to a midpoint that is not one would be a
hard case 10^-55 away, which no f32 or f16 argument of these functions has (their worst
cases are near 2^-60 relative) and no f64 one is known to (Lefèvre and Muller's worst
cases for exp and log lie near 2^-112 and 2^-117); the exact cases (exp2 of integers, log2 of powers
of two, hypot of Pythagorean triples) are exact rationals, and so are pow's integer and
half-integer powers (`_exact_power`: decimal could not show an f64 tie such as 2^-1075).
Special values follow C99 Annex F. Pure Python: slow (about 20 us a value; f64 up to
200 us), so tests use it for f16 (65,536 values) and samples of f32 and f64;
scripts/exact_functions.py uses it only where NumPy's f64 (for f64: long double) result
is too close to a midpoint to decide.

It lives in vyre.tools so that `vyre certify` can check an adapter's functions without the
tests. This module (and function_oracle_trig) must never import vyre's own definitions
(vyre.lower.maths) or any backend: it is the independent check of them.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from decimal import Decimal, localcontext
from fractions import Fraction

import numpy as np

from vyre.tools.function_oracle_trig import TRIG

_PREC = 70
_FORMATS: dict[type, tuple[int, int, int]] = {np.float64: (53, -1022, 1024),
                                              np.float32: (24, -126, 128),
                                              np.float16: (11, -14, 16)}


def round_fraction(q: Fraction, dtype: type) -> float:
    """The exact rational `q` rounded to nearest even in `dtype` (np.float32 / float16),
    overflowing to inf, as a Python float."""
    p, emin, emax = _FORMATS[dtype]
    if q == 0:
        return 0.0
    neg = q < 0
    a = -q if neg else q
    e = a.numerator.bit_length() - a.denominator.bit_length()
    if Fraction(2) ** e > a:
        e -= 1
    quantum = Fraction(2) ** (max(e, emin) - (p - 1))
    n = a / quantum
    whole = n.numerator // n.denominator
    rest = n - whole
    if rest > Fraction(1, 2) or (rest == Fraction(1, 2) and whole % 2 == 1):
        whole += 1
    v = whole * quantum
    out = math.inf if v >= Fraction(2) ** emax else float(v)
    return -out if neg else out


def _dec(x: float) -> Decimal:
    return Decimal(x)  # exact


def _exp(x: float) -> Fraction | float:
    if math.isnan(x):
        return math.nan
    if x == math.inf:
        return math.inf
    if x == -math.inf:
        return 0.0
    if x > 710:  # e^710 > 2^1024: inf in every type
        return math.inf
    if x < -746:  # e^-746 < 2^-1076: 0 in every type
        return Fraction(0)
    with localcontext() as c:
        c.prec = _PREC
        return Fraction(_dec(x).exp())


def _exp2(x: float) -> Fraction | float:
    if math.isnan(x):
        return math.nan
    if x == math.inf:
        return math.inf
    if x == -math.inf or x < -1080:
        return Fraction(0)
    if x > 1030:
        return math.inf
    if x == int(x):
        return Fraction(2) ** int(x)
    with localcontext() as c:
        c.prec = _PREC
        return Fraction((_dec(x) * Decimal(2).ln()).exp())


def _log_special(x: float) -> float | None:
    if math.isnan(x) or x < 0:
        return math.nan
    if x == 0:
        return -math.inf
    if x == math.inf:
        return math.inf
    return None


def _log(x: float) -> Fraction | float:
    s = _log_special(x)
    if s is not None:
        return s
    if x == 1:
        return Fraction(0)
    with localcontext() as c:
        c.prec = _PREC
        return Fraction(_dec(x).ln())


def _log2(x: float) -> Fraction | float:
    s = _log_special(x)
    if s is not None:
        return s
    m, e = math.frexp(x)
    if m == 0.5:
        return Fraction(e - 1)
    with localcontext() as c:
        c.prec = _PREC
        return Fraction(_dec(x).ln() / Decimal(2).ln())


def _tanh(x: float) -> Fraction | float:
    if math.isnan(x):
        return math.nan
    if math.isinf(x):
        return math.copysign(1.0, x)
    if x == 0:
        return x  # keeps the zero's sign
    if abs(x) > 20:
        # 1 - tanh < 2 e^-40 < 2^-57: rounds to +-1 in f32 and f16
        return Fraction(int(math.copysign(1, x)))
    if abs(x) < 1e-6:
        q = Fraction(x)
        return q - q**3 / 3 + 2 * q**5 / 15 - 17 * q**7 / 315  # error < x^9 / 2
    with localcontext() as c:
        c.prec = _PREC
        t = (2 * _dec(x)).exp()
        return Fraction((t - 1) / (t + 1))


def _hypot(x: float, y: float) -> Fraction | float:
    if math.isinf(x) or math.isinf(y):
        return math.inf
    if math.isnan(x) or math.isnan(y):
        return math.nan
    q = Fraction(x) ** 2 + Fraction(y) ** 2
    if q == 0:
        return 0.0
    return _sqrt_fraction(q)


def _sqrt_fraction(q: Fraction) -> Fraction:
    """sqrt(q) to 2^-200 relative, exact when q is the square of a dyadic rational."""
    # scale by an even power of two so the integer square root carries 220 bits
    shift = 440 - (q.numerator.bit_length() - q.denominator.bit_length())
    shift += shift % 2
    n = (q.numerator << shift) // q.denominator if shift >= 0 else \
        q.numerator // (q.denominator << -shift)
    r = math.isqrt(n)
    exact = r * r == n and ((q.numerator << shift) % q.denominator == 0 if shift >= 0 else True)
    v = Fraction(r) / Fraction(2) ** (shift // 2)
    if not exact:
        v += Fraction(1, 2) / Fraction(2) ** (shift // 2)  # strictly inside (r, r + 1)
    return v


def _is_odd_integer(y: float) -> bool:
    return y == int(y) and abs(y) < 2**53 and int(y) % 2 == 1


def _exact_power(a: float, y: float) -> Fraction | None:
    """a^y exactly where it is rational and not beyond every type's range: an integer y
    (a dyadic a to an integer power) or a half-integer y of a perfect square; decimal's
    70 digits cannot show an f64 result such as 2^-1075 (a tie) exactly."""
    if abs(y) > 4096 or y != int(2 * y) / 2:
        return None
    if abs(y * math.log2(a)) > 1200:  # beyond 2^+-1200: 0 or inf (decimal decides)
        return None
    if y == int(y):
        return Fraction(a) ** int(y)
    root = _sqrt_fraction(Fraction(a))
    if root * root != Fraction(a):
        return None
    return root ** int(2 * y)


def _pow(x: float, y: float) -> Fraction | float:
    """C99 Annex F pow."""
    if y == 0 or x == 1:
        return 1.0
    if math.isnan(x) or math.isnan(y):
        return math.nan
    if math.isinf(y):
        if x == -1:
            return 1.0
        big = abs(x) > 1
        return math.inf if big == (y > 0) else 0.0
    odd = _is_odd_integer(y)
    if x == 0:
        if y < 0:
            return math.copysign(math.inf, x) if odd else math.inf
        return math.copysign(0.0, x) if odd else 0.0
    if math.isinf(x):
        if x > 0:
            return math.inf if y > 0 else 0.0
        if y > 0:
            return -math.inf if odd else math.inf
        return -0.0 if odd else 0.0
    if x < 0 and y != int(y):
        return math.nan
    neg = x < 0 and odd
    a = abs(x)
    exact = _exact_power(a, y)
    if exact is not None:
        v = exact
    else:
        with localcontext() as c:
            c.prec = _PREC
            ly = _dec(y) * _dec(a).ln()
            if ly > 750:  # beyond e^750 > 2^1082 (f64's overflow and underflow included)
                return -math.inf if neg else math.inf
            if ly < -750:
                return -0.0 if neg else 0.0
            v = Fraction(_dec(a) ** _dec(y))
    return -v if neg else v


FUNCTIONS: dict[str, Callable[..., Fraction | float]] = {
    "exp": _exp, "exp2": _exp2, "log": _log, "log2": _log2, "tanh": _tanh,
    "hypot": _hypot, "pow": _pow,
}
FUNCTIONS.update(TRIG)  # sin, cos, tan, asin, atan2: function_oracle_trig.py


def correctly_rounded(fn: str, dtype: type, *args: float) -> float:
    """fn(*args) correctly rounded to `dtype` (a Python float; NaN for NaN)."""
    v = FUNCTIONS[fn](*(float(a) for a in args))
    if isinstance(v, float):
        return v
    if v == 0:
        return 0.0
    return round_fraction(v, dtype)


def oracle(fn: str, dtype: type, *arrays: np.ndarray) -> np.ndarray:
    """`correctly_rounded` elementwise over arrays of `dtype`."""
    flat: list[np.ndarray] = [np.asarray(a, dtype).ravel() for a in arrays]
    out: np.ndarray = np.array([correctly_rounded(fn, dtype, *vals) for vals in zip(*flat)], dtype=dtype)
    return out.reshape(np.shape(arrays[0]))


# ------------------------------------------------------------------ the fast oracle
#
# NumPy's f64 function (the C library's, or NumPy's own SIMD code: within a few f64 ulp,
# 2^-50 relative) rounded once to the type is the correctly rounded result unless the f64
# value lies within that error of a midpoint of the type; those arguments (about 2^-19
# of them for f32, none but the exact cases for f16) are redone with `correctly_rounded`.

_NUMPY: dict[str, Callable[..., np.ndarray]] = {
    "exp": np.exp, "exp2": np.exp2, "log": np.log, "log2": np.log2, "tanh": np.tanh,
    "pow": np.power, "hypot": lambda x, y: np.where(np.isinf(x) | np.isinf(y), np.inf,
                                                    np.hypot(x, y)),
    # (C99 Annex F specials, the sign of zero included, as the C library's f64 functions)
    "sin": np.sin, "cos": np.cos, "tan": np.tan, "asin": np.arcsin, "acos": np.arccos, "atan2": np.arctan2,
}
_WINDOW = 2.0**-44  # far above the f64 libraries' error, far below half an f32 ulp


# f64 results: the same with NumPy's long double (x86's 80-bit format: the C library's
# expl, logl, ... within 2 ulp of a 64-bit significand, 2^-62 relative); where the
# platform's long double is no wider than f64, every argument goes to `correctly_rounded`.
_WIDE = np.longdouble if np.finfo(np.longdouble).nmant >= 63 else None
_WINDOW_F64 = 2.0**-59


def fast_oracle(fn: str, dtype: type, *arrays: np.ndarray) -> np.ndarray:
    """`oracle`'s answers (correctly rounded fn elementwise, C99 Annex F specials),
    vectorised: NumPy in f64 (for f64 results: in long double) where that decides the
    rounding, `correctly_rounded` where it cannot."""
    wide, window = (np.float64, _WINDOW) if dtype is not np.float64 else (_WIDE, _WINDOW_F64)
    if wide is None:
        return oracle(fn, dtype, *arrays)
    with np.errstate(all="ignore"):
        args = [np.asarray(a, dtype).astype(wide) for a in arrays]
        w = _NUMPY[fn](*args)
        if fn == "pow":  # C99: pow(1, y) = pow(x, 0) = 1 even for NaN (NumPy agrees; pin it)
            w = np.where((args[0] == 1) | (args[1] == 0), 1.0, w)
        out: np.ndarray = w.astype(dtype)
        lo = (w - np.abs(w) * window).astype(dtype)
        hi = (w + np.abs(w) * window).astype(dtype)
    unsure = np.flatnonzero((lo != hi) & np.isfinite(w))
    for j in unsure:
        out[j] = correctly_rounded(fn, dtype, *(float(a[j]) for a in args))
    return out
