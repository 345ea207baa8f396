"""tanh (f32, f16): correctly rounded, evaluated in f64.

tanh|x| = E / (E + 2) with E = expm1(2|x|), |x| clamped to 20 (tanh rounds to 1 long
before). E comes from exp's reduction (vyre.lower.maths.exp): 2|x| log2(e) = k / 16 + r,
E = (S - 1) + (S_lo + S q(r)) with S + S_lo the table entry 2^(k/16) as a double-double
and q(r) = 2^r - 1 (its Taylor polynomial without the constant term), so E keeps its
relative accuracy down to the tiniest x (S - 1 is exact where it cancels). The
reciprocal of E + 2 has no division: the f32 quotient 1 / f32(E + 2) (correctly rounded
on every backend) and two Newton steps y (2 - d y) in f64 (relative error ~2^-51). Fast
path error below 2^-49; `_FAST_ERR` = 2^-45. The slow path repeats this in double-double
(Taylor to degree 12, one double-double Newton step). The sign is put back before the
one rounding (tanh is odd, and rounding to nearest is symmetric); tanh(+-0) = +-0 (in
flush mode a subnormal x too), tanh(+-inf) = +-1, NaN -> NaN.
"""

from __future__ import annotations

from vyre.ir import nodes as N
from vyre.ir.nodes import made
from vyre.ir.types import ScalarType

from . import dd
from .build import Builder, X
from .exp import (
    _FAST_COEFFS,
    _L2E_HI,
    _L2E_LO,
    _L2E_MID,
    _ROUND,
    _SLOW_COEFFS,
    _TABLE,
    DD_TERMS,
    power_of_two,
)
from .registry import lowering
from .rounding import finish

T = ScalarType
_FAST_ERR = 2.0**-45


def reciprocal(b: Builder, d: X) -> X:
    """1 / d for f64 d in [2^-100, 2^100], relative error ~2^-51, without f64 division."""
    y0 = b.let(_f32_div_one(b, d))
    y1 = b.let(y0 + y0 * (1.0 - d * y0))
    return b.let(y1 + y1 * (1.0 - d * y1))


def _f32_div_one(b: Builder, d: X) -> X:
    """f64(1 / f32(d)): IR f32 division is correctly rounded on every backend."""
    return b.wrap(made(N.Binary, op="div", a=b.f32(1.0).e, b=d.cast(T.F32).e,
                       ty=T.F32)).cast(T.F64)


@lowering("tanh", T.F32, T.F16)
def tanh(b: Builder, args: tuple[X, ...]) -> X:
    (x,) = args
    d = b.let(x.cast(T.F64))
    a = b.let(d.abs().min(20.0))  # (NaN -> 20: selected below)
    u = b.let(a * 2.0)
    zh = b.let(u * _L2E_HI)  # exact
    kf = b.let(((zh * 16.0) + _ROUND) - _ROUND)
    r0 = b.let(zh - kf * 0.0625)  # exact
    r = b.let(r0 + u * _L2E_MID)
    k = b.let(b.f2i(kf))  # (0 <= kf < 2^10)
    i = b.let(k.bitcast(T.U32) & 15)
    scale = b.let(power_of_two(b, k >> 4))  # k >= 0, 2^(k >> 4) <= 2^58
    s_hi = b.let(b.table(i, [h for h, _ in _TABLE]) * scale)
    s_lo = b.let(b.table(i, [lo for _, lo in _TABLE]) * scale)
    q = b.f64(_FAST_COEFFS[-1])
    for c in reversed(_FAST_COEFFS[1:-1]):
        q = b.let(q * r + c)
    q = b.let(q * r)  # 2^r - 1
    em1 = b.let((s_hi - 1.0) + (s_lo + s_hi * q))
    den = b.let(em1 + 2.0)
    rec = reciprocal(b, den)
    y = em1 * rec
    neg = b.let(d.lt(0.0))
    y = b.select(neg, -y, y)

    def slow() -> dd.DD:
        m = dd.two_prod(b, u, b.f64(_L2E_MID))
        rd = dd.add_d(b, dd.add_d(b, m, b.let(u * _L2E_LO)), r0)
        coeffs = [(b.f64(h), b.f64(lo)) for h, lo in _SLOW_COEFFS[1:]]
        qd = dd.mul(b, dd.horner(b, coeffs, rd, DD_TERMS), rd)
        s = (s_hi, s_lo)
        e = dd.add(b, dd.add_d(b, s, b.f64(-1.0)), dd.mul(b, s, qd))
        den_dd = dd.add_d(b, e, b.f64(2.0))
        resid = dd.add_d(b, dd.mul_d(b, den_dd, rec), b.f64(-1.0))  # d y - 1, tiny
        inv = dd.add_d(b, dd.mul_d(b, resid, b.let(-rec)), rec)  # y (1 - (d y - 1))
        hi, lo = dd.mul(b, e, inv)
        return b.let(b.select(neg, -hi, hi)), b.let(b.select(neg, -lo, lo))

    out = finish(b, x.ty, y, _FAST_ERR, slow)
    out = b.select(d.eq(0.0), d.cast(x.ty), out)  # +-0 (flush mode: a subnormal's zero)
    return b.select(d.ne(d), x, out)
