"""Exact division and sqrt (f32, f16 in f32, f64), as IR definitions, for targets whose
own are not exact.

Vulkan only bounds f32 division and sqrt to 2.5 / 3 ulp, and NVIDIA's driver computes
a / b as a * (1 / b) (FLT_MAX / FLT_MAX = 0, 33 / 33 = 0.99999994). Where a target's
`Traits` say its operation is not correctly rounded (`float_div` / `float_sqrt` False:
the wgpu adapter probe's finding, adapter._probe_div_sqrt), vyre.lower.passes replaces
each f32 division / sqrt (f16's, in f32, then rounded once to f16: innocuous) by an
`Invoke` of one of these definitions, which compute the IEEE result from the operands'
bits with integer arithmetic only: no float operation a driver may approximate, flush,
contract or fold. Both produce the quotient / root to 27 bits plus a sticky bit (the
remainder is nonzero), then `_pack` rounds once to nearest even, subnormal and
overflowing results included. f64's (below: no wider float to refine an estimate in) are
integer methods in u64 alone.

Fast path, for operands in a safe range (everything normal, no overflow): the target's
own estimate (`Native` approx_div / approx_sqrt, which may be a few ulp off; the
reference computes it correctly rounded), one Newton step (its factor a second
estimate) makes it faithful, and an exact test against the midpoint to each neighbour
fixes the last bit. Division's is in f32 alone where the target's f32 fma rounds once
(`Traits.fused_fma`: the residual x - q*y of a faithful q is an f32, `_div_fused`);
otherwise, and for sqrt, in f64 where the target has it (`Traits.wide`: the residual
a - q*b, or x - s*s, is exact in f64, as products of two f32 are). So the fast paths
tolerate estimates a few ulp off and a factor with a few significant bits
(tests/test_exact_divsqrt.py checks that with deliberately bad ones).

Flush mode (docs/IR.md): the slow path reads its operands as `x * 1`, which flush mode
reads as a zero of its sign where x is subnormal (an exact identity otherwise), and
gives its quotient as `q * 1`, flushed where subnormal (quotients of normal floats are
never within an ulp below the smallest normal, so every tininess rule agrees); the fast
path's operands and results are normal. This module must never print source.
"""

from __future__ import annotations

from collections.abc import Callable

from vyre.ir import nodes as N
from vyre.ir.nodes import made
from vyre.ir.types import ScalarType

from .maths.build import Builder, X, define

T = ScalarType
_SIGN, _MAG, _INF = 0x80000000, 0x7FFFFFFF, 0x7F800000
_ONE = 0x3F800000  # 1.0f: the stand-in operand of the special cases


def _estimate(b: Builder, op: str, *args: X) -> X:
    """The target's own f32 `op` (approx_div / approx_sqrt): an estimate only."""
    return b.wrap(made(N.Native, op=op, args=tuple(x.e for x in args), ty=T.F32))


def _flushed(x: X) -> X:
    """`x` as flush mode's arithmetic reads it (a subnormal as a zero of its sign); an
    exact identity outside flush mode."""
    return x * 1.0


def _nan(b: Builder, *operands: X) -> X:
    """The NaN an IEEE operation on (quiet) `operands` gives where one is NaN (the first
    NaN operand) or the operation is invalid (the default NaN, made as inf - inf), as the
    reference's own float arithmetic makes them: docs/IR.md leaves NaN bits open, but a
    lowering's bits are the reference's bits exactly (tests/test_lowering.py)."""
    inf = b.const(operands[0].ty, float("inf"))
    out = inf - inf
    for x in reversed(operands):
        out = b.select(x.ne(x), x, out)
    return out


def _mant(b: Builder, x: X) -> tuple[X, X]:
    """A nonzero finite magnitude's significand (u32 bits `x`), normalised to [2^23, 2^24)
    (a subnormal's through its value as an f32, exact below 2^24: its exponent is the
    position of the leading bit), and that exponent's bits."""
    lead = b.let(x.cast(T.F32).bitcast(T.U32) >> 23)  # 127 + floor(log2 x), for x < 2^23
    sub = x << (b.u32(150) - lead)
    return b.let(b.select(x.lt(0x00800000), sub, (x & 0x007FFFFF) | 0x00800000)), lead


def _unpacked(b: Builder, x: X) -> tuple[X, X]:
    """(significand in [2^23, 2^24), exponent e): x = significand * 2^(e - 150)."""
    m, lead = _mant(b, x)
    e = b.select(x.lt(0x00800000), lead.bitcast(T.I32) - 149, (x >> 23).bitcast(T.I32))
    return m, b.let(e)


def _pack(b: Builder, s: X, m: X, e: X, sticky: X) -> X:
    """The f32 bits of sign s, value (m + f) * 2^e with m in [2^26, 2^27), f in [0, 1)
    nonzero iff `sticky`: rounded once to nearest even (subnormal results and overflow to
    inf included)."""
    ef = b.let(e + 153)  # the biased exponent if the result is normal
    sh = b.let(((1 - ef).max(0) + 3).min(31).bitcast(T.U32))
    mant = b.let(m >> sh)
    low = m & ((b.u32(1) << sh) - 1)
    half = b.let(b.u32(1) << (sh - 1))
    low = b.let(low)
    up = low.gt(half).lor(low.eq(half).land(sticky.lor((mant & 1).ne(0))))
    base = b.select(ef.gt(0), (ef - 1).bitcast(T.U32) << 23, 0)  # + mant's leading bit
    bits = s | (base + mant + b.select(up, b.u32(1), 0))
    return b.select(ef.ge(255), s | _INF, bits)


def _mids_test(b: Builder, r1: X, above: Callable[[X], X], below: Callable[[X], X]) -> X:
    """The bits of the f32 nearest the exact result, from a faithful `r1`: the midpoints
    between r1 and its neighbours, exactly in f64; `above(m)` / `below(m)`: whether the
    exact result lies beyond upper / lower midpoint m."""
    bits = b.let(r1.bitcast(T.U32))
    d = r1.cast(T.F64)
    hi = b.let((d + (bits + 1).bitcast(T.F32).cast(T.F64)) * 0.5)
    lo = b.let((d + (bits - 1).bitcast(T.F32).cast(T.F64)) * 0.5)
    return b.select(above(hi), bits + 1, b.select(below(lo), bits - 1, bits))


def _div_fast(b: Builder, x: X, y: X) -> X:
    """x / y for x, y in [2^-62, 2^63), both positive: the result's bits."""
    e0 = _estimate(b, "approx_div", x, y)
    dx, dy = b.let(x.cast(T.F64)), b.let(y.cast(T.F64))
    d0 = b.let(b.let(e0).cast(T.F64))
    factor = _estimate(b, "approx_div", b.f32(1.0), y).cast(T.F64)
    r1 = b.let((d0 + (dx - d0 * dy) * factor).cast(T.F32))  # faithful
    return _mids_test(b, r1, lambda m: dx.gt(m * dy), lambda m: dx.lt(m * dy))


def _fma(b: Builder, x: X, y: X, z: X) -> X:
    return b.wrap(made(N.Call, fn="fma", args=(x.e, y.e, z.e), ty=T.F32))


def _div_fused(b: Builder, x: X, y: X) -> X:
    """x / y for x, y in [2^-62, 2^63), both positive, in f32 alone with an fma that
    rounds once: the result's bits. q1, the estimate after one Newton step, is faithful,
    so r = x - q1 y is an f32 (it is a multiple of ulp(q1) ulp(y) below ulp(q1) y, so it
    has at most 24 bits) and the fma gives it exactly; the exact quotient lies beyond
    the upper midpoint q1 + ulp / 2 iff r > y ulp / 2, and below the lower one iff -r
    exceeds y times half the gap below (ulp / 4 where q1 is a power of two). y ulp / 2
    is y with its exponent moved (exact); no quotient of two floats is a midpoint.
    Everything is normal in this range (|r| >= ulp(q1) ulp(y) >= 2^-108)."""
    q0 = b.let(_estimate(b, "approx_div", x, y))
    rcp = _estimate(b, "approx_div", b.f32(1.0), y)
    q1 = b.let(_fma(b, _fma(b, -q0, y, x), rcp, q0))  # faithful
    r = b.let(_fma(b, -q1, y, x))  # exact
    bits = b.let(q1.bitcast(T.U32))
    # y * ulp(q1) / 2: y's exponent plus ulp's, 2^(e(q1) - 24) (u32 arithmetic wraps)
    half = b.let(y.bitcast(T.U32) + (bits & _INF) - (151 << 23))
    below = half - b.select((bits & 0x007FFFFF).eq(0), b.u32(1 << 23), 0)
    return b.select(r.gt(half.bitcast(T.F32)), bits + 1,
                    b.select((-r).gt(below.bitcast(T.F32)), bits - 1, bits))


def _sqrt_fast(b: Builder, x: X) -> X:
    """sqrt(x) for x in [2^-60, 2^61): the result's bits."""
    e0 = b.let(_estimate(b, "approx_sqrt", x))
    dx = b.let(x.cast(T.F64))
    d0 = b.let(e0.cast(T.F64))
    factor = _estimate(b, "approx_div", b.f32(0.5), e0).cast(T.F64)
    r1 = b.let((d0 + (dx - d0 * d0) * factor).cast(T.F32))  # faithful
    return _mids_test(b, r1, lambda m: dx.gt(m * m), lambda m: dx.lt(m * m))


def _div_slow(b: Builder, a: X, c: X) -> X:
    """IEEE a / c from the bits: long division of the significands in u32 chunks."""
    fa, fc = b.let(_flushed(a)), b.let(_flushed(c))
    ua, uc = b.let(fa.bitcast(T.U32)), b.let(fc.bitcast(T.U32))
    s = b.let((ua ^ uc) & _SIGN)
    xa, xc = b.let(ua & _MAG), b.let(uc & _MAG)
    nan = b.let(xa.gt(_INF).lor(xc.gt(_INF)).lor(xa.eq(xc).land(xa.eq(0).lor(xa.eq(_INF)))))
    inf = b.let(xa.eq(_INF).lor(xc.eq(0)))  # (after NaN: 0 / 0 and inf / inf are NaN)
    zero = b.let(xa.eq(0).lor(xc.eq(_INF)))
    special = nan.lor(inf).lor(zero)
    ma, ea = _unpacked(b, b.let(b.select(special, b.u32(_ONE), xa)))
    mc, ec = _unpacked(b, b.let(b.select(special, b.u32(_ONE), xc)))
    q = b.let(b.select(ma.ge(mc), b.u32(1), 0))
    r = b.let(ma - q * mc)
    for k in (8, 8, 8, 2):
        r = b.let(r << k)
        d = b.let(b.wrap(made(N.Native, op="div", args=(r.e, mc.e), ty=T.U32)))  # mc >= 2^23
        q = b.let((q << k) | d)
        r = b.let(r - d * mc)
    # q = floor(ma * 2^26 / mc) in [2^25, 2^27), r its remainder
    e = ea - ec - 26
    low = b.let(q.lt(0x04000000))
    packed = _pack(b, s, b.let(b.select(low, q << 1, q)), b.let(b.select(low, e - 1, e)),
                   r.ne(0))
    bits = b.select(inf, s | _INF, b.select(zero, s, packed))
    return b.select(nan, _nan(b, fa, fc), _flushed(bits.bitcast(T.F32)))


def _sqrt_slow(b: Builder, x: X) -> X:
    """IEEE f32 sqrt from the bits: digit-by-digit integer root of the significand."""
    xf = b.let(_flushed(x))
    u = b.let(xf.bitcast(T.U32))
    special = b.let((u & _MAG).eq(0).lor(u.ge(_INF)))  # +-0, +inf, NaN, negative
    kept = u.le(_INF).lor(u.eq(_SIGN))  # +-0 and +inf are their own roots
    m0, e0 = _unpacked(b, b.let(b.select(special, b.u32(_ONE), u)))
    k0 = e0 - 150  # x = m * 2^k
    odd = b.let((k0 & 1).ne(0))
    m = b.let(b.select(odd, m0 << 1, m0))
    k = b.let(b.select(odd, k0 - 1, k0))
    # q = floor(sqrt(m * 2^26)) in (2^24, 2^26), r = m * 2^26 - q^2: two radicand bits
    # per step, from the top, m then zeros
    q, r = b.u32(0), b.u32(0)
    for j in range(26):
        pair = (m >> (24 - 2 * j)) & 3 if j <= 12 else b.u32(0)
        r = b.let((r << 2) | pair)
        t = b.let((q << 2) | 1)
        ge = b.let(r.ge(t))
        r = b.let(b.select(ge, r - t, r))
        q = b.let((q << 1) | b.select(ge, b.u32(1), 0))
    e = b.let(b.wrap(made(N.Native, op="div", args=(k.e, b.i32(2).e), ty=T.I32)) - 13)
    # q < 2^25 exactly when m < 2^24 (m * 2^26 < 2^50): test m, not q, so that nothing
    # chosen depends on the 26 steps' chain. Mesa's lavapipe (22.3) looks for branches
    # on values computed from uniforms only by walking each condition's operands without
    # memoising: through the chain that walk is exponential.
    small = b.let(m.lt(0x01000000))
    packed = _pack(b, b.u32(0), b.let(b.select(small, q << 2, q << 1)),
                   b.let(b.select(small, e - 2, e - 1)), r.ne(0))
    # (a root is never subnormal: no flush of the result)
    return b.select(special, b.select(kept, xf, _nan(b, xf)), packed.bitcast(T.F32))


def _branch(b: Builder, fast: X, fast_bits: Callable[[], X], slow: Callable[[], X]) -> X:
    """`fast_bits()` (an f32's bits) where `fast`, else `slow()` (an f32): one branch, the
    slow path's code run only where it is taken."""
    res = b.var(b.f32(0.0))
    b.if_else(fast, lambda: b.assign(res, fast_bits().bitcast(T.F32)),
              lambda: b.assign(res, slow()))
    return res


def _div(path: str) -> N.Function:
    def body(b: Builder, args: tuple[X, ...]) -> X:
        a, c = args
        if not path:
            return _div_slow(b, a, c)
        fast_path = _div_fused if path == "fused" else _div_fast
        ua, uc = b.let(a.bitcast(T.U32)), b.let(c.bitcast(T.U32))
        xa, xc = b.let(ua & _MAG), b.let(uc & _MAG)
        fast = ((xa >> 23) - 65).le(124).land(((xc >> 23) - 65).le(124))

        def fast_bits() -> X:
            return ((ua ^ uc) & _SIGN) | fast_path(b, xa.bitcast(T.F32), xc.bitcast(T.F32))

        return _branch(b, fast, fast_bits, lambda: _div_slow(b, a, c))

    return define(f"exact_div_f32{'_' if path else ''}{path}", T.F32, (T.F32, T.F32), body)


def _sqrt(path: str) -> N.Function:
    def body(b: Builder, args: tuple[X, ...]) -> X:
        (x,) = args
        if not path:
            return _sqrt_slow(b, x)
        u = b.let(x.bitcast(T.U32))
        fast = ((u >> 23) - 67).le(120)  # x in [2^-60, 2^61)
        return _branch(b, fast, lambda: _sqrt_fast(b, x), lambda: _sqrt_slow(b, x))

    return define(f"exact_sqrt_f32{'_' if path else ''}{path}", T.F32, (T.F32,), body)


# ------------------------------------------------------------------ f64
#
# Correctly rounded f64 division and sqrt in 64-bit integers, for a target whose own are
# not (NVIDIA's Vulkan driver; there is no wider float to refine an estimate in): 58
# quotient bits by restoring division / a 56-bit root digit by digit, a sticky bit from
# the remainder, one rounding (`round_f64`, shared with vyre.lower.fma's f64 fma). Unrolled: no loop to count against a loop
# limit. Specials, zeros and infinities are decided from the bits, as for f32.
_SIGN64, _MAG64, _INF64, _ONE64 = 1 << 63, (1 << 63) - 1, 0x7FF0000000000000, 0x3FF0000000000000


def log2_64(b: Builder, m: X) -> X:
    """floor(log2 m) (i32) of a nonzero u64 `m`, from its 32-bit halves' values as f64
    (exact for every u32: no count-leading-zeros operation in the IR)."""
    hi = b.let((m >> 32).cast(T.U32))
    half = b.select(hi.ne(0), hi, (m & 0xFFFFFFFF).cast(T.U32))
    lead = (half.cast(T.F64).bitcast(T.U64) >> 52).cast(T.I32) - 1023
    return b.let(lead + b.select(hi.ne(0), b.i32(32), 0))


def _norm_f64(b: Builder, u: X) -> tuple[X, X]:
    """(m, e) of finite nonzero f64 bits u: the significand shifted so that bit 52 is its
    leading one, and value = m * 2^e."""
    eb = b.let(((u >> 52) & 0x7FF).cast(T.I32))
    m = b.let((u & ((1 << 52) - 1)) | b.select(eb.ne(0), b.const(T.U64, 1 << 52), 0))
    k = b.let(52 - log2_64(b, m))
    return b.let(m << k.bitcast(T.U32)), b.let(eb.max(1) - 1075 - k)


W128 = tuple[X, X]  # a 128-bit integer as its (high, low) u64 halves


def u64(b: Builder, v: int) -> X:
    """The u64 constant `v`."""
    return b.const(T.U64, v)


def log2_128(b: Builder, x: W128) -> X:
    """floor(log2 x) (i32) of a nonzero 128-bit `x`."""
    hi, lo = x
    return b.let(b.select(hi.ne(0), log2_64(b, b.select(hi.ne(0), hi, lo)) + 64,
                          log2_64(b, b.select(hi.ne(0), hi, lo))))


def shl128(b: Builder, x: W128, s: X) -> W128:
    """x << s for a u32 s in 0..127 (the IR masks a u64 shift amount: each case apart)."""
    hi, lo = x
    big = s.ge(64)
    up = b.let(s - 64)
    back = b.let(b.u32(64) - s)
    h = b.select(big, lo << up, (hi << s) | b.select(s.eq(0), u64(b, 0), lo >> back))
    return b.let(h), b.let(b.select(big, u64(b, 0), lo << s))


def shr128_sticky(b: Builder, x: W128, s: X) -> W128:
    """x >> s for any u32 s, the bits shifted out ORed into bit 0 (sticky)."""
    hi, lo = x
    one, zero = u64(b, 1), u64(b, 0)
    k = b.let(s - 64)
    # s < 64
    lost = b.select((lo << (b.u32(64) - s)).ne(0).land(s.ne(0)), one, zero)
    small = ((hi >> s), (lo >> s) | b.select(s.eq(0), zero, hi << (b.u32(64) - s)) | lost)
    # 64 <= s < 128
    lost_k = b.select(lo.ne(0).lor((hi << (b.u32(64) - k)).ne(0).land(k.ne(0))), one, zero)
    mid = b.let((hi >> k) | lost_k)
    # s >= 128
    gone = b.select((hi | lo).ne(0), one, zero)
    rh = b.select(s.lt(64), small[0], zero)
    rl = b.select(s.lt(64), small[1], b.select(s.lt(128), mid, gone))
    return b.let(rh), b.let(rl)


def round_f64(b: Builder, r: W128, ex: X, sign: X) -> X:
    """The f64 bits of r * 2^ex (r a nonzero 128-bit integer whose bits below the 53 kept
    may end in a sticky bit), rounded once to nearest even, with sign bit `sign` (u64 0
    or 1); subnormal results and overflow included."""
    t = log2_128(b, r)
    e = b.let(t + ex + 1023)  # the biased exponent of the exact result
    shift = b.let((t - 52).max(-1074 - ex))
    s = b.let(shift.bitcast(T.U32))
    left = shl128(b, r, (-shift).bitcast(T.U32).min(127))[1]
    # shift > 0: m = r >> s, the bits below it moved to the top of `low`
    low = shl128(b, r, (b.u32(128) - s).min(127))
    low = (b.select(s.lt(128), low[0], r[0]), b.select(s.lt(128), low[1], r[1]))
    low = (b.let(b.select(s.gt(128), u64(b, 0), low[0])),
           b.let(b.select(s.gt(128), u64(b, 0), low[1])))
    kept = b.select(s.ge(64), r[0] >> (s - 64),
                    (r[1] >> s) | b.select(s.eq(0), u64(b, 0), r[0] << (b.u32(64) - s)))
    kept = b.let(b.select(s.lt(128), kept, u64(b, 0)))
    half = (low[0] >> 63).ne(0)
    below = (low[0] << 1).ne(0).lor(low[1].ne(0))
    up = half.land(below.lor((kept & 1).ne(0)))
    m = b.let(b.select(shift.le(0), left, kept + b.select(up, u64(b, 1), 0)))
    # normal: m's leading bit (52, or 53 after rounding up) adds to the exponent field
    normal = (e - 1).bitcast(T.U32).cast(T.U64) << 52
    bits = b.let(b.select(shift.eq(t - 52), normal + m, m))
    inf = e.ge(2047).lor(bits.ge(_INF64))
    return b.select(inf, u64(b, _INF64), bits) | (sign << 63)


def _specials64(b: Builder, xa: X, xc: X) -> tuple[X, X, X]:
    """(NaN, inf, zero) of a quotient of magnitudes xa / xc (bits)."""
    nan = b.let(xa.gt(_INF64).lor(xc.gt(_INF64)).lor(
        xa.eq(xc).land(xa.eq(0).lor(xa.eq(_INF64)))))
    inf = b.let(xa.eq(_INF64).lor(xc.eq(0)))
    zero = b.let(xa.eq(0).lor(xc.eq(_INF64)))
    return nan, inf, zero


def _div_f64(b: Builder, args: tuple[X, ...]) -> X:
    fa, fc = (b.let(_flushed(x)) for x in args)
    ua, uc = b.let(fa.bitcast(T.U64)), b.let(fc.bitcast(T.U64))
    sign = b.let((ua ^ uc) >> 63)
    xa, xc = b.let(ua & _MAG64), b.let(uc & _MAG64)
    nan, inf, zero = _specials64(b, xa, xc)
    special = nan.lor(inf).lor(zero)
    one = b.const(T.U64, _ONE64)
    ma, ea = _norm_f64(b, b.let(b.select(special, one, xa)))
    mc, ec = _norm_f64(b, b.let(b.select(special, one, xc)))
    rem, q = ma, b.const(T.U64, 0)
    for _ in range(58):
        ge = b.let(rem.ge(mc))
        q = b.let((q << 1) | b.select(ge, b.const(T.U64, 1), 0))
        rem = b.let(b.select(ge, rem - mc, rem) << 1)
    r = (q << 1) | b.select(rem.ne(0), b.const(T.U64, 1), 0)
    bits = b.select(inf, (sign << 63) | _INF64, b.select(zero, sign << 63,
                                                          round_f64(b, (u64(b, 0), b.let(r)), ea - ec - 58, sign)))
    return b.select(nan, _nan(b, fa, fc), _flushed(bits.bitcast(T.F64)))


def _sqrt_f64(b: Builder, args: tuple[X, ...]) -> X:
    xf = b.let(_flushed(args[0]))
    u = b.let(xf.bitcast(T.U64))
    special = b.let((u >> 52).ge(0x7FF).lor((u << 1).eq(0)))  # negative, +-0, inf, NaN
    kept = u.le(_INF64).lor(u.eq(_SIGN64))
    m0, e0 = _norm_f64(b, b.let(b.select(special, b.const(T.U64, _ONE64), u)))
    odd = b.let((e0 & 1).ne(0))
    m = b.let(b.select(odd, m0 << 1, m0))
    e = b.let(b.select(odd, e0 - 1, e0))
    hi, lo = b.let(m >> 8), b.let(m << 56)  # the radicand m * 2^56 as hi:lo
    rem, root = b.const(T.U64, 0), b.const(T.U64, 0)
    for i in range(54, -1, -1):
        pair = (hi >> (2 * i - 64)) & 3 if i >= 32 else (lo >> (2 * i)) & 3
        rem = b.let((rem << 2) | pair)
        t = b.let((root << 2) | 1)
        ge = b.let(rem.ge(t))
        rem = b.let(b.select(ge, rem - t, rem))
        root = b.let((root << 1) | b.select(ge, b.const(T.U64, 1), 0))
    r = b.let((root << 1) | b.select(rem.ne(0), b.const(T.U64, 1), 0))
    half_e = b.wrap(made(N.Native, op="div", args=((e - 56).e, b.i32(2).e), ty=T.I32))
    root_bits = round_f64(b, (u64(b, 0), r), half_e - 1, u64(b, 0))
    return b.select(special, b.select(kept, xf, _nan(b, xf)), root_bits.bitcast(T.F64))


_DEFINED: dict[tuple[str, str], N.Function] = {}


def fast_path(op: str, wide: bool, fused_fma: bool) -> str:
    """Which fast path exact `op` takes on a target with f64 (`wide`) and / or an f32
    fma that rounds once: "fused" (division only: f32 alone, preferred: no f64 operation
    and no conversion), "wide" (f64), or "" (none: the integer method for every operand).
    (Session 23 took "fused" for broken on NVIDIA's Vulkan driver: the forced exact
    division test failed there, but only on its assertion that the f64 path's name is in
    the source; the fused path's results were bit-identical to NumPy's on the test's pairs,
    H200, session 24.)"""
    if op == "div" and fused_fma:
        return "fused"
    return "wide" if wide else ""


def definition(op: str, path: str) -> N.Function:
    """The core Function of exact f32 `op` ("div" or "sqrt") with fast path `path`
    (`fast_path`'s). Made once per process (a definition is a constant of the lowering)."""
    key = (op, path)
    got = _DEFINED.get(key)
    if got is None:
        got = _DEFINED[key] = _div(path) if op == "div" else _sqrt(path)
    return got


def definition_f64(op: str) -> N.Function:
    """The core Function of exact f64 `op` ("div" or "sqrt")."""
    key = (op, "f64")
    got = _DEFINED.get(key)
    if got is None:
        if op == "div":
            got = define("exact_div_f64", T.F64, (T.F64, T.F64), _div_f64)
        else:
            got = define("exact_sqrt_f64", T.F64, (T.F64,), _sqrt_f64)
        _DEFINED[key] = got
    return got


__all__ = ["definition", "definition_f64", "fast_path"]
