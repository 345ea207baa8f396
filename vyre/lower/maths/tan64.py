"""tan of f64: sin(r) / cos(r) of sincos64.py's reduction and double-double series, below
1 ulp, and correctly rounded unless the exact value lies within 2^-97 (relative) of the
middle of two f64 (docs/IR.md says so).

tan(k pi/2 + r) is sin(r) / cos(r) for an even k and -cos(r) / sin(r) for an odd one
(the denominator is never small: cos(r) >= 0.7, and an odd k means |x| >= pi/4, whose
|r| is at least 2^-60.9, pio2_64.py); tan is odd; |x| < 2^-27 gives x (tan x = x (1 +
x^2/3 + ...) is then within a quarter ulp of it), tan(+-inf) and NaN are NaN.
The quotient without division (f64 division is software on some wgpu drivers): q1 = n
(1/d) with tan.py's Newton reciprocal (within 2^-52), then one correction by the
double-double residual n - d q1 (q = q1 + (n - d q1) / d, the residual's quotient again
by the reciprocal: its error is 2^-52 of a 2^-52 correction). Error: numerator and
denominator within 2^-99 each (sincos64.py), the residual within 2^-104 of n, the
correction within 2^-103 of q: the double-double quotient is within 2^-97.5 of tan, and
its high part (the f64 nearest it) within 0.5 + 2^-44 ulp. No slower path decides the
rest.
"""

from __future__ import annotations

from vyre.ir.types import ScalarType

from . import dd
from .build import Builder, X
from .registry import lowering
from .sincos import nan_of
from .sincos64 import reduce64, sin_cos64
from .tan import reciprocal

T = ScalarType


def quotient(b: Builder, n: dd.DD, d: dd.DD) -> dd.DD:
    """n / d in double-double for 2^-120 < |d| < 2^120 (within a few 2^-104 of n / d,
    relatively: the module docstring), with no division."""
    inv = reciprocal(b, d[0])
    q1 = b.let(n[0] * inv)
    e = dd.add(b, n, dd.mul_d(b, d, -q1))  # n - d q1, within 2^-104 of n
    return dd.fast_two_sum(b, q1, b.let(e[0] * inv))


@lowering("tan", T.F64)
def tan(b: Builder, args: tuple[X, ...]) -> X:
    (x,) = args
    r = reduce64(b, x)
    odd = b.let((r.k & 1).eq(1))
    sn, cs = sin_cos64(b, r)
    num = (b.let(b.select(odd, -cs[0], sn[0])), b.let(b.select(odd, -cs[1], sn[1])))
    den = (b.let(b.select(odd, sn[0], cs[0])), b.let(b.select(odd, sn[1], cs[1])))
    hi, _ = quotient(b, num, den)  # hi: the f64 nearest the double-double
    y = b.select(x.lt(0.0), -hi, hi)
    y = b.select(r.tiny, x, y)
    return b.select(r.special, nan_of(b, T.F64), y)  # inf, NaN -> NaN
