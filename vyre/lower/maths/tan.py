"""tan of f32 and f16, correctly rounded: sin(r) / cos(r) of sincos.py's reduction (on a
target with cheap tables, `Traits.indexed_tables`, f32's common path is sincos32.tan_f32's,
in f32 alone, with this one as its slow path).

tan(k pi/2 + r) is sin(r) / cos(r) for an even k and -cos(r) / sin(r) for an odd one
(the denominator is never small: cos(r) >= 0.7, and an odd k means |x| >= pi/4, whose
|r| is at least 2^-29 (pio2.py)); tan is odd, tan(+-0) = +-0, tan(+-inf) and NaN are NaN.
The quotient without division (f64 division is not exact on every backend): 1/d from
the f32 reciprocal's bit trick (within 12.5%) and five Newton steps r (2 - d r) (error
squared each step: below 2^-52 after five), then n * (1/d). Fast path error: numerator
and denominator within 3.5 * 2^-53 each, the reciprocal within 2^-52, two roundings:
below 2^-49.7, so `FAST_ERR` = 2^-48. Slow path (where that bound straddles an f32
rounding boundary): the double-double sin and cos, q = n * (1/d), corrected once by the
double-double residual n - d q (a few 2^-100).
"""

from __future__ import annotations

from vyre.ir.types import ScalarType

from . import dd
from .build import Builder, X
from .dd import reciprocal
from .registry import lowering
from .rounding import finish
from .sincos import nan_of, reduce, sin_cos_fast, sin_cos_slow
from .sincos32 import tan_f32

T = ScalarType
FAST_ERR = 2.0**-48


@lowering("tan", T.F32, T.F16)
def tan(b: Builder, args: tuple[X, ...]) -> X:
    x = args[0]
    if b.f32_path(x):  # sincos32's f32 path, this one its slow
        return tan_f32(b, x, b.slow_path(x, _tan))
    return _tan(b, x)


def _tan(b: Builder, x: X) -> X:
    r = reduce(b, x)
    odd = b.let((r.k & 1).eq(1))
    neg = b.let((r.bits >> 31).eq(1))
    s, c = sin_cos_fast(b, r)
    num = b.let(b.select(odd, -c, s))
    den = b.let(b.select(odd, s, c))
    inv = reciprocal(b, den)
    y = b.let(num * inv)
    y = b.select(neg, -y, y)

    def slow() -> dd.DD:
        sn, cs = sin_cos_slow(b, r)
        n = (b.let(b.select(odd, -cs[0], sn[0])), b.let(b.select(odd, -cs[1], sn[1])))
        d = (b.let(b.select(odd, sn[0], cs[0])), b.let(b.select(odd, sn[1], cs[1])))
        q1 = b.let(n[0] * inv)
        e = dd.add(b, n, dd.mul_d(b, d, -q1))  # n - d q1, nearly exact
        hi, lo = dd.fast_two_sum(b, q1, b.let(e[0] * inv))
        return b.select(neg, -hi, hi), b.select(neg, -lo, lo)

    out = finish(b, r.ty, y, FAST_ERR, slow)
    return b.select(r.special, nan_of(b, r.ty), out)
