"""WGSL helper functions of the IR's maths semantics that WGSL's builtins do not give.

Exact f32 / f64 division and square root, exact fma (f16, f32, f64), f64 trunc and round,
NaN-exact min / max / abs, and the approximate functions' own definitions (asin, atan2,
sin / cos, tan): each a helper emitted once, where the printer calls it
(expressions.py). Text only; this module must never walk a Program.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from vyre.ir.types import ScalarType

from . import loopcount
from .float_fences import _fence_fn
from .spelling import _BITS_F32, U_VAR, T, _helper, wgsl_type
from .uniforms import ZERO_FIELD

if TYPE_CHECKING:
    from .state import WgslState as _Ctx

# ------------------------------------------------------------------ helpers by semantics


def _isnan(ctx: _Ctx, ty: ScalarType) -> str:
    name = f"vy_isnan_{wgsl_type(ty)}"
    if ty is T.F32:
        body = "return (bitcast<u32>(x) & 0x7fffffffu) > 0x7f800000u;"
    elif ty is T.F16:
        _isnan(ctx, T.F32)
        body = "return vy_isnan_f32(f32(x));"
    else:
        body = "return !(x == x);"
    return _helper(ctx, name, f"fn {name}(x: {wgsl_type(ty)}) -> bool {{ {body} }}")


# ------------------------------------------------------------------ exact division and sqrt
#
# Vulkan only bounds f32 division and sqrt to 2.5 / 3 ulp, and NVIDIA's driver computes
# a / b as a * (1 / b) (FLT_MAX / FLT_MAX = 0, 33 / 33 = 0.99999994). Where the adapter
# probe finds the driver's operation not correctly rounded (adapter._probe_div_sqrt), these
# compute the IEEE result from the operands' bits with integer arithmetic only: no float
# operation a driver may approximate, flush, contract or fold, and no need for fma or f64.
# Both produce the quotient / root to 27 bits plus a sticky bit (the remainder is nonzero),
# then vy_pack_f32 rounds once to nearest even, subnormal and overflowing results included.
# f16 division and sqrt use them too (in f32, then rounded once to f16: innocuous).
# Fast path, where the device has f64 and the operands are in a safe range (everything
# normal, no overflow): the driver's estimate, one Newton step in f64 (the residual
# a - q*b, or x - s*s, is exact in f64: products of two f32 are) makes it faithful, and an
# exact f64 comparison with the midpoint to each neighbour fixes the last bit.


def _unpack_f32(ctx: _Ctx) -> None:
    _helper(
        ctx, "vy_mant_f32",
        "// a nonzero finite magnitude's significand, normalised to [2^23, 2^24)\n"
        "fn vy_mant_f32(x: u32) -> u32 {\n"
        "    if (x < 0x00800000u) { return x << (countLeadingZeros(x) - 8u); }\n"
        "    return (x & 0x007fffffu) | 0x00800000u;\n}",
    )
    _helper(
        ctx, "vy_ebits_f32",
        "// its exponent e: x = vy_mant_f32(x) * 2^(e - 150) (subnormals normalised)\n"
        "fn vy_ebits_f32(x: u32) -> i32 {\n"
        "    if (x < 0x00800000u) { return 9i - i32(countLeadingZeros(x)); }\n"
        "    return i32(x >> 23u);\n}",
    )
    _helper(
        ctx, "vy_pack_f32",
        "// sign s, value (m + f) * 2^e with m in [2^26, 2^27), f in [0, 1) nonzero iff sticky:\n"
        "// rounded once to nearest even (subnormal results and overflow to inf included)\n"
        "fn vy_pack_f32(s: u32, m: u32, e: i32, sticky: bool) -> f32 {\n"
        "    let ef = e + 153i;  // the biased exponent if the result is normal\n"
        "    if (ef >= 255i) { return bitcast<f32>(s | 0x7f800000u); }\n"
        "    let sh = u32(min(3i + max(1i - ef, 0i), 31i));\n"
        "    let mant = m >> sh;\n"
        "    let low = m & ((1u << sh) - 1u);\n"
        "    let half = 1u << (sh - 1u);\n"
        "    let up = low > half || (low == half && (sticky || (mant & 1u) != 0u));\n"
        "    let base = select(0u, u32(ef - 1i) << 23u, ef > 0i);  // + mant's leading bit\n"
        "    return bitcast<f32>(s | (base + mant + select(0u, 1u, up)));\n}",
    )


def _estimate(ctx: _Ctx, fn: str) -> str:
    """The driver's f32 estimate for a fast path (tests: deliberately off by an ulp more)."""
    f0 = _fence_fn(ctx, T.F32, 0)
    if fn == "div":
        exact, bad = "a / b", "a * (1.0f / b)"
    else:
        exact, bad = "sqrt(a)", "a * inverseSqrt(a)"
    if ctx.bad_base:
        return f"{f0}(bitcast<f32>(bitcast<u32>({f0}({bad})) ^ 1u))"
    return f"{f0}({exact})"


def _coarse(ctx: _Ctx, text: str) -> str:
    """The Newton step's factor; in tests (bad_base) cut to 4 significant bits, so that
    the step leaves about a third of the results for the midpoint test to fix."""
    f1 = _fence_fn(ctx, T.F32, 1)
    if ctx.bad_base:
        return f"bitcast<f32>(bitcast<u32>({f1}({text})) & 0xfff80000u)"
    return f"{f1}({text})"


def _fast_path(ctx: _Ctx, fn: str) -> str:
    """The f64 fast path of vy_div_f32 / vy_sqrt_f32 (see above): the result's bits."""
    _helper(
        ctx, "vy_mids_f32",
        "// the midpoints between a positive normal f32 and its neighbours, exactly in f64\n"
        "fn vy_mids_f32(bits: u32) -> vec2<f64> {\n"
        "    let d = f64(bitcast<f32>(bits));\n"
        "    return vec2<f64>((d + f64(bitcast<f32>(bits + 1u))) * 0.5lf,"
        " (d + f64(bitcast<f32>(bits - 1u))) * 0.5lf);\n}",
    )
    if fn == "div":  # a / b for a, b in [2^-62, 2^63), both positive
        name, args, x, y, factor = "vy_div_fast_f32", "a: f32, b: f32", "f64(a)", "f64(b)", "1.0f / b"
        resid, above, below = "dx - d0 * dy", "dx > m.x * dy", "dx < m.y * dy"
    else:  # sqrt(a) for a in [2^-60, 2^61)
        name, args, x, y, factor = "vy_sqrt_fast_f32", "a: f32", "f64(a)", "0.0lf", "0.5f / e0"
        resid, above, below = "dx - d0 * d0", "dx > m.x * m.x", "dx < m.y * m.y"
    return _helper(
        ctx, name,
        f"fn {name}({args}) -> u32 {{\n"
        f"    let e0 = {_estimate(ctx, fn)};  // the driver's estimate\n"
        f"    let dx = {x};\n"
        f"    let dy = {y};\n"
        "    let d0 = f64(e0);\n"
        f"    let r1 = f32(d0 + ({resid}) * f64({_coarse(ctx, factor)}));  // faithful\n"
        "    let bits = bitcast<u32>(r1);\n"
        "    let m = vy_mids_f32(bits);\n"
        f"    if ({above}) {{ return bits + 1u; }}\n"
        f"    if ({below}) {{ return bits - 1u; }}\n"
        "    return bits;\n}",
    )


def _exact_div_f32(ctx: _Ctx) -> str:
    _unpack_f32(ctx)
    fast = ""
    if ctx.wide_ok:
        fast = (
            "    if ((xa >> 23u) - 65u <= 124u && (xb >> 23u) - 65u <= 124u) {\n"
            f"        return bitcast<f32>(s | {_fast_path(ctx, 'div')}(bitcast<f32>(xa), bitcast<f32>(xb)));\n"
            "    }\n"
        )
    chunk = (
        "    r = r << {k}u; d = r / mb; q = (q << {k}u) | d; r = r - d * mb;\n"
    )
    return _helper(
        ctx, "vy_div_f32",
        "// IEEE f32 a / b from the bits: long division of the significands in u32 chunks\n"
        "fn vy_div_f32(a: f32, b: f32) -> f32 {\n"
        "    let ua = bitcast<u32>(a);\n"
        "    let ub = bitcast<u32>(b);\n"
        "    let s = (ua ^ ub) & 0x80000000u;\n"
        "    let xa = ua & 0x7fffffffu;\n"
        "    let xb = ub & 0x7fffffffu;\n"
        + fast
        + "    if (xa > 0x7f800000u || xb > 0x7f800000u || (xa == xb && (xa == 0u || xa == 0x7f800000u))) {\n"
        "        return bitcast<f32>(0x7fc00000u);  // NaN operand, 0 / 0, inf / inf\n"
        "    }\n"
        "    if (xa == 0x7f800000u || xb == 0u) { return bitcast<f32>(s | 0x7f800000u); }\n"
        "    if (xa == 0u || xb == 0x7f800000u) { return bitcast<f32>(s); }\n"
        "    let ma = vy_mant_f32(xa);\n"
        "    let mb = vy_mant_f32(xb);\n"
        "    var q = select(0u, 1u, ma >= mb);\n"
        "    var r = ma - q * mb;\n"
        "    var d = 0u;\n"
        + chunk.format(k=8) * 3 + chunk.format(k=2)
        + "    // q = floor(ma * 2^26 / mb) in [2^25, 2^27), r its remainder\n"
        "    var e = vy_ebits_f32(xa) - vy_ebits_f32(xb) - 26i;\n"
        "    if (q < 0x04000000u) { q = q << 1u; e = e - 1i; }\n"
        "    return vy_pack_f32(s, q, e, r != 0u);\n}",
    )


def _exact_sqrt_f32(ctx: _Ctx) -> str:
    _unpack_f32(ctx)
    fast = ""
    if ctx.wide_ok:
        fast = (
            "    if ((u >> 23u) - 67u <= 120u) {  // x in [2^-60, 2^61)\n"
            f"        return bitcast<f32>({_fast_path(ctx, 'sqrt')}(x));\n"
            "    }\n"
        )
    steps = []
    for j in range(26):  # two radicand bits per step, from the top: m then zeros
        pair = f"((m >> {24 - 2 * j}u) & 3u)" if j <= 12 else "0u"
        steps.append(
            f"    r = (r << 2u) | {pair}; t = (q << 2u) | 1u; "
            "ge = r >= t; r = select(r, r - t, ge); q = (q << 1u) | select(0u, 1u, ge);\n"
        )
    return _helper(
        ctx, "vy_sqrt_f32",
        "// IEEE f32 sqrt from the bits: digit-by-digit integer root of the significand\n"
        "fn vy_sqrt_f32(x: f32) -> f32 {\n"
        "    let u = bitcast<u32>(x);\n"
        + fast
        + ""
        "    if ((u & 0x7fffffffu) == 0u || u >= 0x7f800000u) {  // +-0, +inf, NaN, negative\n"
        "        if (u <= 0x7f800000u || u == 0x80000000u) { return x; }\n"
        "        return bitcast<f32>(0x7fc00000u);\n"
        "    }\n"
        "    var m = vy_mant_f32(u);\n"
        "    var k = vy_ebits_f32(u) - 150i;  // x = m * 2^k\n"
        "    if ((k & 1i) != 0i) { m = m << 1u; k = k - 1i; }\n"
        "    // q = floor(sqrt(m * 2^26)) in (2^24, 2^26), r = m * 2^26 - q^2\n"
        "    var q = 0u;\n    var r = 0u;\n    var t = 0u;\n    var ge = false;\n"
        + "".join(steps)
        + "    var e = k / 2i - 13i;\n"
        # q < 2^25 exactly when m < 2^24 (m * 2^26 < 2^50): test m, not q, so that no branch
        # depends on the 26 steps' chain. Mesa's lavapipe (22.3) looks for branches on
        # values computed from uniforms only (to inline them) by walking each condition's
        # operands without memoising: through the chain that walk is exponential, and a
        # sqrt of a param never finished compiling.
        "    if (m < 0x01000000u) { q = q << 2u; e = e - 2i; } else { q = q << 1u; e = e - 1i; }\n"
        "    return vy_pack_f32(0u, q, e, r != 0u);\n}",
    )


def _div_text(ctx: _Ctx, ct: ScalarType, fa: str, fb: str) -> str:
    """fa / fb (fenced operands of compute type `ct`), exact where the driver's is not."""
    if ct is T.F32 and ctx.exact_div:
        return f"{_exact_div_f32(ctx)}({fa}, {fb})"
    if ct is T.F64 and ctx.exact_div:
        return f"{_exact_div_f64(ctx)}({fa}, {fb})"
    return f"({fa} / {fb})"


def _float_minmax(ctx: _Ctx, op: str, ty: ScalarType) -> str:
    t = wgsl_type(ty)
    nan = _isnan(ctx, ty)
    name = f"vy_{op}_{t}"
    return _helper(
        ctx, name,
        f"// IEEE minNum/maxNum: a NaN operand yields the other operand\n"
        f"fn {name}(a: {t}, b: {t}) -> {t} {{\n"
        f"    if ({nan}(a)) {{ return b; }}\n"
        f"    if ({nan}(b)) {{ return a; }}\n"
        f"    return {op}(a, b);\n}}",
    )


def _float_abs(ctx: _Ctx, ty: ScalarType) -> str:
    t = wgsl_type(ty)
    name = f"vy_abs_{t}"
    if ty is T.F32:
        # uniform 0 in the bits: not a float abs the driver could flush (see _unary's neg)
        body = f"return bitcast<f32>((bitcast<u32>(x) + {U_VAR}.{ZERO_FIELD}) & 0x7fffffffu);"
    else:
        body = "return abs(x);"
    return _helper(ctx, name, f"fn {name}(x: {t}) -> {t} {{ {body} }}")


def _helper_loop(ctx: _Ctx, ind: str, before: list[str], done: str, after: list[str],
                 note: str = "") -> str:
    """A helper function's loop, one exit: each pass runs `before`, leaves if `done`, else
    runs `after`. Counted on an adapter with a loop limit (loopcount.py: every loop of the
    module is, or the module falls back to the sentinel)."""
    inner = ind + "    "
    counted = ctx.count_loops
    tag = f"{loopcount.COUNTED}{f' ({note})' if note else ''}" if counted else (
        f"// {note}" if note else "")
    lines = [f"{ind}{loopcount.enter()}"] if counted else []
    lines.append(f"{ind}loop {{{f'  {tag}' if tag else ''}")
    lines += [inner + x for x in before]
    lines.append(f"{inner}let done = {done};")
    if counted:
        lines.append(f"{inner}{loopcount.leave('done')}")
    lines.append(f"{inner}if (done) {{ break; }}")
    lines += [inner + x for x in after]
    lines.append(f"{ind}}}")
    return "\n".join(lines) + "\n"


def _atan2_f32(ctx: _Ctx, ty: ScalarType) -> str:
    """Vulkan allows 4096 ulp for atan/atan2 (llvmpipe is ~20 ulp off); this is the
    Cephes atanf polynomial (about 2 ulp) with IEEE atan2's special cases, on |y| / |x|
    scaled first (NVIDIA's Vulkan driver returned 0 for atan2(1e38, 1e38))."""
    nan = _isnan(ctx, T.F32)
    _helper(
        ctx, "vy_atan_f32",
        "fn vy_atan_f32(x: f32) -> f32 {\n"
        "    let ax = abs(x);\n"
        "    var base = 0.0f;\n"
        "    var t = ax;\n"
        "    if (ax > 2.4142135623730950f) { base = 1.5707963267948966f; t = -1.0f / ax; }\n"
        "    else if (ax > 0.4142135623730950f) {\n"
        "        base = 0.7853981633974483f; t = (ax - 1.0f) / (ax + 1.0f);\n"
        "    }\n"
        "    let z = t * t;\n"
        "    let q = ((8.05374449538e-2f * z - 1.38776856032e-1f) * z + 1.99777106478e-1f) * z"
        " - 3.33329491539e-1f;\n"
        "    let r = base + (q * z * t + t);\n"
        "    return select(r, -r, x < 0.0f);\n}",
    )
    _helper(ctx, "vy_bits_f32", _BITS_F32)
    return _helper(
        ctx, "vy_approx_atan2_f32",
        "fn vy_approx_atan2_f32(y: f32, x: f32) -> f32 {\n"
        f"    if ({nan}(x) || {nan}(y)) {{ return vy_bits_f32(0x7fc00000u); }}\n"
        "    let ys = bitcast<u32>(y) & 0x80000000u;\n"
        "    let xneg = (bitcast<u32>(x) & 0x80000000u) != 0u;\n"
        "    let pi = 3.14159274f;\n"
        "    let pi_lo = -8.74227766e-8f;\n"
        "    var r: f32;\n"
        "    let xinf = abs(x) > 3.40282347e38f;\n"
        "    let yinf = abs(y) > 3.40282347e38f;\n"
        "    if (y == 0.0f) { r = select(0.0f, pi, xneg); }\n"
        "    else if (x == 0.0f) { r = 1.57079637f; }\n"
        "    else if (xinf && yinf) { r = select(0.785398185f, 2.35619450f, xneg); }\n"
        "    else if (xinf) { r = select(0.0f, pi, xneg); }\n"
        "    else if (yinf) { r = 1.57079637f; }\n"
        "    else {\n"
        "        // both scaled by one power of two (exact) so the larger is in [1, 4): NVIDIA's\n"
        "        // division underflows in its reciprocal (1 / 3e38 is subnormal, flushed)\n"
        "        let e = (max(bitcast<u32>(abs(x)), bitcast<u32>(abs(y))) >> 23u);\n"
        "        let s = bitcast<f32>(clamp(254u - min(e, 254u), 1u, 254u) << 23u);\n"
        "        let a = vy_atan_f32((abs(y) * s) / (abs(x) * s));\n"
        "        r = select(a, (pi_lo - a) + pi, xneg);\n"
        "    }\n"
        "    return bitcast<f32>(bitcast<u32>(r) | ys);  // the sign of y\n}",
    )


def _tan_big(ctx: _Ctx) -> None:
    if ctx.wide_ok:
        _sincos_f32(ctx, "sin")
        code = (
            "fn vy_tan_big(x: f32) -> f32 {\n"
            "    if ((bitcast<u32>(x) & 0x7fffffffu) >= 0x7f800000u) {"
            " return vy_bits_f32(0x7fc00000u); }\n"
            "    let red = vy_trig_reduce(x);\n"
            "    let q = u32(red.y);\n"
            "    let sn = vy_sincos_poly(red.x, 0u);\n"
            "    let cs = vy_sincos_poly(red.x, 1u);\n"
            "    let t = select(sn / cs, -cs / sn, (q & 1u) != 0u);\n"
            "    return select(t, -t, x < 0.0f);\n}"
        )
    else:
        code = "fn vy_tan_big(x: f32) -> f32 { return tan(x); }  // no i64/f64: the driver's"
    _helper(ctx, "vy_tan_big", code)


def _tan_f32(ctx: _Ctx) -> str:
    """vyre.approx.tan on wgpu. Vulkan derives tan from its sin/cos (absolute error 2^-11), so drivers miss the IR's
    ulp tolerance near the poles; this is Cephes tanf (Cody-Waite reduction by pi/4, about
    3 ulp) for |x| <= 8192, the driver's tan beyond. Next to a pole (x within 2^-12 of an
    odd multiple of pi/2) the reduced argument is a few ulp of x, and the f32 Cody-Waite
    constants leave it 5-50 ulp off (tan(f32(3 pi / 2))); with i64/f64 on the device those
    arguments take the exact reduction of vy_tan_big."""
    _tan_big(ctx)
    f0, f1 = _fence_fn(ctx, T.F32, 0), _fence_fn(ctx, T.F32, 1)
    near_pole = ("    if ((j & 2u) != 0u && abs(z) < 2.44140625e-4f && x > 2.0f)"
                 " { return vy_tan_big(xx); }\n") if ctx.wide_ok else ""
    return _helper(
        ctx, "vy_tan_f32",
        "fn vy_tan_f32(xx: f32) -> f32 {\n"
        "    let x = abs(xx);\n"
        "    if ((bitcast<u32>(x) & 0x7fffffffu) > 0x46000000u) { return vy_tan_big(xx); }"
        "  // NaN, inf, > 8192\n"
        "    var j = u32(1.27323954473516f * x);\n"
        "    var y = f32(j);\n"
        "    if ((j & 1u) != 0u) { j = j + 1u; y = y + 1.0f; }\n"
        # each Cody-Waite step fenced: NVIDIA's compiler reassociated the three into one
        # product (tan 40 ulp off near its poles on the H100)
        f"    let z1 = {f0}(x - {f1}(y * 0.78515625f));\n"
        f"    let z2 = {f0}(z1 - {f1}(y * 2.4187564849853515625e-4f));\n"
        f"    let z = {f0}(z2 - {f1}(y * 3.77489497744594108e-8f));\n"
        f"{near_pole}"
        "    let zz = z * z;\n"
        "    var r = z;\n"
        "    if (x > 1.0e-4f) {\n"
        "        r = (((((9.38540185543e-3f * zz + 3.11992232697e-3f) * zz + 2.44301354525e-2f)"
        " * zz + 5.34112807005e-2f) * zz + 1.33387994085e-1f) * zz + 3.33331568548e-1f)"
        " * zz * z + z;\n"
        "    }\n"
        "    if ((j & 2u) != 0u) { r = -1.0f / r; }\n"
        "    return bitcast<f32>(bitcast<u32>(r) ^ (bitcast<u32>(xx) & 0x80000000u));  // tan(-0) = -0\n}",
    )


_INV_PIO4 = "0x000000a2u, 0x0000a2f9u, 0x00a2f983u, 0xa2f9836eu, 0xf9836e4eu, 0x836e4e44u, 0x6e4e4415u, 0x4e441529u, 0x441529fcu, 0x1529fc27u, 0x29fc2757u, 0xfc2757d1u, 0x2757d1f5u, 0x57d1f534u, 0xd1f534ddu, 0xf534ddc0u, 0x34ddc0dbu, 0xddc0db62u, 0xc0db6295u, 0xdb629599u, 0x6295993cu, 0x95993c43u, 0x993c4390u, 0x3c439041u"


def _sincos_f32(ctx: _Ctx, fn: str) -> str:
    """vyre.approx.sin / cos on wgpu (vyre.sin / cos are exact: vyre.lower.maths): f32
    sin/cos with exact argument reduction (the raw builtins give +-1 for 1e30 on llvmpipe): Vulkan only bounds sin/cos on
    [-pi, pi] (absolute 2^-11), and drivers return garbage for huge arguments. |x| < 2:
    Cody-Waite by pi/2; larger: the 4/pi table reduction of ARM's optimized-routines sinf
    (a 32x96-bit product in u64, the remainder in f64). Both feed Cephes' f32 polynomials
    on [-pi/4, pi/4]. Needs i64 + f64 on the device (else the driver's sin/cos is used)."""
    _helper(ctx, "vy_inv_pio4",
            f"var<private> vy_inv_pio4: array<u32, 24> = array<u32, 24>({_INV_PIO4});")
    _helper(
        ctx, "vy_trig_reduce",
        "// |x| reduced by multiples of pi/2: (remainder in [-pi/4, pi/4], quadrant)\n"
        "fn vy_trig_reduce(x: f32) -> vec2<f32> {\n"
        "    let ax = abs(x);\n"
        "    if (ax < 2.0f) {\n"
        "        let n = round(ax * 0.636619772f);\n"
        "        let r = ((ax - n * 1.5703125f) - n * 4.837512969970703125e-4f)"
        " - n * 7.54978995489188216e-8f;\n"
        "        return vec2<f32>(r, n);\n"
        "    }\n"
        "    let xi = bitcast<u32>(ax);\n"
        # (in range by construction: idx <= 15, so idx + 8 <= 23 < 24, the table's length)
        "    let idx = (xi >> 26u) & 15u;\n"
        "    let m = ((xi & 0xffffffu) | 0x800000u) << ((xi >> 23u) & 7u);\n"
        "    let lo = m * vy_inv_pio4[idx];\n"
        "    let r1 = u64(m) * u64(vy_inv_pio4[idx + 4u]);\n"
        "    let r2 = u64(m) * u64(vy_inv_pio4[idx + 8u]);\n"
        "    var res = ((r2 >> 32u) | (u64(lo) << 32u)) + r1;\n"
        "    let n = (res + (1lu << 61u)) >> 62u;\n"
        "    res = res - (n << 62u);\n"
        "    let r = f64(bitcast<i64>(res)) * 3.4061215800865545e-19lf;\n"
        "    return vec2<f32>(f32(r), f32(u32(n & 3lu)));\n}",
    )
    _helper(
        ctx, "vy_sincos_poly",
        "// Cephes sinf/cosf polynomials on [-pi/4, pi/4]; q selects sin (even) or cos (odd)\n"
        "fn vy_sincos_poly(r: f32, q: u32) -> f32 {\n"
        "    let z = r * r;\n"
        "    var v: f32;\n"
        "    if ((q & 1u) == 0u) {\n"
        "        v = r + r * z * ((-1.9515295891e-4f * z + 8.3321608736e-3f) * z"
        " - 1.6666654611e-1f);\n"
        "    } else {\n"
        "        v = 1.0f - 0.5f * z + z * z * ((2.443315711809948e-5f * z"
        " - 1.388731625493765e-3f) * z + 4.166664568298827e-2f);\n"
        "    }\n"
        "    return select(v, -v, (q & 2u) != 0u);\n}",
    )
    _helper(ctx, "vy_bits_f32", _BITS_F32)
    name = f"vy_{fn}_f32"
    if fn == "sin":
        body = (
            "    let red = vy_trig_reduce(x);\n"
            "    let v = vy_sincos_poly(red.x, u32(red.y));\n"
            "    return bitcast<f32>(bitcast<u32>(v) ^ (bitcast<u32>(x) & 0x80000000u));  // sin(-0) = -0\n"
        )
    else:
        body = (
            "    let red = vy_trig_reduce(x);\n"
            "    return vy_sincos_poly(red.x, u32(red.y) + 1u);\n"
        )
    return _helper(
        ctx, name,
        f"fn {name}(x: f32) -> f32 {{\n"
        f"    if ((bitcast<u32>(x) & 0x7fffffffu) >= 0x7f800000u) {{"
        f" return vy_bits_f32(0x7fc00000u); }}  // NaN, inf (a bit test: drivers may assume finite)\n"
        f"{body}}}",
    )


def _fma_f32(ctx: _Ctx) -> str:
    """Single-rounding f32 fma for drivers whose fma rounds twice: the product is exact in
    f64; the f64 sum is made round-to-odd (TwoSum error term) so the final rounding to f32
    is correct. Each TwoSum step is fenced: llvmpipe reassociates f64 arithmetic, folding
    the error term of s = p + c to 0 (fma(-2147483904, 3, 1e-30) then rounded to even)."""
    f = _fence_fn(ctx, T.F64, 0)
    return _helper(
        ctx, "vy_fma_f32",
        "fn vy_fma_f32(a: f32, b: f32, c: f32) -> f32 {\n"
        "    let p = f64(a) * f64(b);\n"
        "    let cd = f64(c);\n"
        f"    let s = {f}(p + cd);\n"
        "    var bits = bitcast<u64>(s);\n"
        "    if ((bits & 0x7ff0000000000000lu) != 0x7ff0000000000000lu) {  // finite\n"
        f"        let bb = {f}(s - p);\n"
        f"        let e = {f}(p - {f}(s - bb)) + {f}(cd - bb);\n"
        "        if (e != 0.0lf && (bits & 1lu) == 0lu) {\n"
        "            if ((e > 0.0lf) == (s > 0.0lf)) { bits = bits + 1lu; } else { bits = bits - 1lu; }\n"
        "        }\n"
        "    }\n"
        "    return f32(bitcast<f64>(bits));\n}",
    )


_W128 = (
    "struct VyW128 { hi: u64, lo: u64 }\n"
    "fn vy_clz64(x: u64) -> u32 {\n"
    "    let h = u32(x >> 32u);\n"
    "    return select(countLeadingZeros(h), 32u + countLeadingZeros(u32(x & 0xfffffffflu)),"
    " h == 0u);\n}\n"
    "fn vy_clz128(x: VyW128) -> u32 {\n"
    "    return select(vy_clz64(x.hi), 64u + vy_clz64(x.lo), x.hi == 0lu);\n}\n"
    "// x << s for s in 0..127 (WGSL shifts by the width or more are not defined)\n"
    "fn vy_shl128(x: VyW128, s: u32) -> VyW128 {\n"
    "    if (s == 0u) { return x; }\n"
    "    if (s >= 64u) { return VyW128(x.lo << (s - 64u), 0lu); }\n"
    "    return VyW128((x.hi << (s)) | (x.lo >> (64u - s)), x.lo << (s));\n}\n"
    "// x >> s for any s, the bits shifted out ORed into bit 0 (sticky)\n"
    "fn vy_shr128_sticky(x: VyW128, s: u32) -> VyW128 {\n"
    "    if (s == 0u) { return x; }\n"
    "    if (s >= 128u) { return VyW128(0lu, select(0lu, 1lu, (x.hi | x.lo) != 0lu)); }\n"
    "    if (s >= 64u) {\n"
    "        let k = s - 64u;\n"
    "        if (k == 0u) { return VyW128(0lu, x.hi | select(0lu, 1lu, x.lo != 0lu)); }\n"
    "        let lost = x.lo != 0lu || (x.hi << (64u - k)) != 0lu;\n"
    "        return VyW128(0lu, (x.hi >> (k)) | select(0lu, 1lu, lost));\n    }\n"
    "    let lost = (x.lo << (64u - s)) != 0lu;\n"
    "    return VyW128(x.hi >> (s), (x.lo >> (s)) | (x.hi << (64u - s))"
    " | select(0lu, 1lu, lost));\n}\n"
    "fn vy_add128(x: VyW128, y: VyW128) -> VyW128 {\n"
    "    let lo = x.lo + y.lo;\n"
    "    return VyW128(x.hi + y.hi + select(0lu, 1lu, lo < x.lo), lo);\n}\n"
    "fn vy_sub128(x: VyW128, y: VyW128) -> VyW128 {  // x >= y\n"
    "    return VyW128(x.hi - y.hi - select(0lu, 1lu, x.lo < y.lo), x.lo - y.lo);\n}\n"
    "fn vy_ge128(x: VyW128, y: VyW128) -> bool {\n"
    "    return x.hi > y.hi || (x.hi == y.hi && x.lo >= y.lo);\n}"
)


_ROUND_F64 = (
    "// r * 2^ex (r != 0; its bits below the 53 kept may end in a sticky bit) rounded once\n"
    "// to f64, nearest even, the sign bit from sr; subnormal and overflow included\n"
    "fn vy_round_f64(r: VyW128, ex: i32, sr: u64) -> f64 {\n"
        "    let t = i32(127u - vy_clz128(r));\n"
        "    let e = t + ex + 1023i;  // the biased exponent of the exact result\n"
        "    let shift = max(t - 52i, -1074i - ex);\n"
        "    var m: u64;\n"
        "    if (shift <= 0i) { m = vy_shl128(r, u32(-shift)).lo; }\n"
        "    else {\n"
        "        let s = u32(shift);\n"
        "        var low = r;  // the bits below the kept ones, moved to the top\n"
        "        m = 0lu;\n"
        "        if (s < 128u) {\n"
        "            low = vy_shl128(r, 128u - s);\n"
        "            if (s >= 64u) { m = r.hi >> (s - 64u); }\n"
        "            else { m = (r.lo >> (s)) | (r.hi << (64u - s)); }\n"
        "        } else if (s > 128u) { low = VyW128(0lu, 0lu); }  // below half an ulp\n"
        "        let half = (low.hi >> 63u) != 0lu;\n"
        "        let below = (low.hi << 1u) != 0lu || low.lo != 0lu;\n"
        "        if (half && (below || (m & 1lu) != 0lu)) { m = m + 1lu; }\n"
        "    }\n"
        "    var bits = m;  // subnormal (the grid is 2^-1074): m is the encoding\n"
        "    if (shift == t - 52i) { bits = (u64(u32(e - 1i)) << 52u) + m; }\n"
        "    if (e >= 2047i || bits >= 0x7ff0000000000000lu) { bits = 0x7ff0000000000000lu; }\n"
        "    return bitcast<f64>(bits | (sr << 63u));\n}"
)


_NORM_F64 = (
    "// the significand of finite nonzero f64 bits u, shifted so bit 52 is set, and e with\n"
    "// value = m * 2^e\n"
    "struct VyM64 { m: u64, e: i32 }\n"
    "fn vy_norm_f64(u: u64) -> VyM64 {\n"
    "    let eb = u32(u >> 52u) & 0x7ffu;\n"
    "    var m = (u & 0xffffffffffffflu) | select(0lu, 1lu << 52u, eb != 0u);\n"
    "    let k = vy_clz64(m) - 11u;\n"
    "    return VyM64(m << k, i32(max(eb, 1u)) - 1075i - i32(k));\n}"
)


def _f64_int_helpers(ctx: _Ctx) -> None:
    _helper(ctx, "VyW128", _W128)
    _helper(ctx, "vy_round_f64", _ROUND_F64)
    _helper(ctx, "vy_norm_f64", _NORM_F64)


def _exact_div_f64(ctx: _Ctx) -> str:
    """Correctly rounded f64 division in integers, for a driver whose own is not (NVIDIA's
    Vulkan driver): 58 quotient bits by restoring division (unrolled: no loop to count
    against a loop limit), a sticky bit from the remainder, one rounding. Specials, zeros
    and infinities take the driver's division, exact there."""
    _f64_int_helpers(ctx)
    f = _fence_fn(ctx, T.F64, 0)
    steps = "".join("    q = q << 1u; if (rem >= mb) { rem = rem - mb; q = q | 1lu; }"
                    " rem = rem << 1u;\n" for _ in range(58))
    return _helper(
        ctx, "vy_div_f64",
        "fn vy_div_f64(a: f64, b: f64) -> f64 {\n"
        "    let ua = bitcast<u64>(a); let ub = bitcast<u64>(b);\n"
        "    let ea = u32(ua >> 52u) & 0x7ffu; let eb = u32(ub >> 52u) & 0x7ffu;\n"
        "    if (ea == 0x7ffu || eb == 0x7ffu || (ua << 1u) == 0lu || (ub << 1u) == 0lu) {\n"
        f"        return {f}(a) / {f}(b);\n    }}\n"
        "    let na = vy_norm_f64(ua); let nb = vy_norm_f64(ub);\n"
        "    let mb = nb.m;\n"
        "    var rem = na.m; var q = 0lu;\n"
        f"{steps}"
        "    let r = VyW128(0lu, (q << 1u) | select(0lu, 1lu, rem != 0lu));\n"
        "    return vy_round_f64(r, na.e - nb.e - 58i, (ua ^ ub) >> 63u);\n}",
    )


def _exact_sqrt_f64(ctx: _Ctx) -> str:
    """Correctly rounded f64 sqrt in integers (see _exact_div_f64): the radicand's
    significand times 2^56, its root digit by digit (56 bits), a sticky bit, one
    rounding. Negative, zero, inf and NaN take the driver's sqrt, exact there."""
    _f64_int_helpers(ctx)
    f = _fence_fn(ctx, T.F64, 0)
    steps = []
    for i in range(54, -1, -1):
        pair = (f"(hi >> {2 * i - 64}u) & 3lu" if i >= 32 else
                f"(lo >> {2 * i}u) & 3lu" if i < 32 else "")
        steps.append(f"    rem = (rem << 2u) | ({pair}); t = (root << 2u) | 1lu;"
                     " root = root << 1u;"
                     " if (rem >= t) { rem = rem - t; root = root | 1lu; }\n")
    return _helper(
        ctx, "vy_sqrt_f64",
        "fn vy_sqrt_f64(x: f64) -> f64 {\n"
        "    let u = bitcast<u64>(x);\n"
        "    if ((u >> 52u) >= 0x7fflu || (u << 1u) == 0lu) {"
        f" return sqrt({f}(x)); }}  // negative, +-0, inf, NaN\n"
        "    let n = vy_norm_f64(u);\n"
        "    var m = n.m; var e = n.e;\n"
        "    if ((e & 1i) != 0i) { m = m << 1u; e = e - 1i; }\n"
        "    // the radicand m * 2^56 as hi:lo\n"
        "    let hi = m >> 8u; let lo = m << 56u;\n"
        "    var rem = 0lu; var root = 0lu; var t = 0lu;\n"
        + "".join(steps) +
        "    let r = VyW128(0lu, (root << 1u) | select(0lu, 1lu, rem != 0lu));\n"
        "    return vy_round_f64(r, (e - 56i) / 2i - 1i, 0lu);\n}",
    )


def _fma_f64(ctx: _Ctx) -> str:
    """Single-rounding f64 fma computed in integers (128-bit words of u64): Vulkan lets a
    driver's f64 fma round twice (lavapipe's does), and there is no wider float to make it
    exact in. The product's 106 bits and c's 53 are aligned with a sticky bit, added, and
    rounded once to nearest even (to the subnormal grid below 2^-1022; past the largest
    double: inf). Specials and zero operands take a*b + c, exact there (c = 0: a*b alone,
    which keeps the sign of a product that rounds to zero)."""
    _f64_int_helpers(ctx)
    f = _fence_fn(ctx, T.F64, 0)
    return _helper(
        ctx, "vy_fma_f64",
        "fn vy_fma_f64(a: f64, b: f64, c: f64) -> f64 {\n"
        "    let ua = bitcast<u64>(a); let ub = bitcast<u64>(b); let uc = bitcast<u64>(c);\n"
        "    let ea = u32(ua >> 52u) & 0x7ffu; let eb = u32(ub >> 52u) & 0x7ffu;\n"
        "    let ec = u32(uc >> 52u) & 0x7ffu;\n"
        "    if (ea == 0x7ffu || eb == 0x7ffu || ec == 0x7ffu) {\n"
        "        if (ec == 0x7ffu && ea != 0x7ffu && eb != 0x7ffu) { return c; }\n"
        f"        return {f}({f}(a) * {f}(b)) + {f}(c);\n    }}\n"
        "    let frac = 0xfffffffffffffflu >> 4u;  // 52 bits\n"
        "    let ma = (ua & frac) | select(0lu, 1lu << 52u, ea != 0u);\n"
        "    let mb = (ub & frac) | select(0lu, 1lu << 52u, eb != 0u);\n"
        "    let mc = (uc & frac) | select(0lu, 1lu << 52u, ec != 0u);\n"
        f"    if (ma == 0lu || mb == 0lu) {{ return {f}({f}(a) * {f}(b)) + {f}(c); }}\n"
        f"    if (mc == 0lu) {{ return {f}(a) * {f}(b); }}\n"
        "    // the product ma * mb in 128 bits, from 32-bit halves\n"
        "    let al = ma & 0xfffffffflu; let ah = ma >> 32u;\n"
        "    let bl = mb & 0xfffffffflu; let bh = mb >> 32u;\n"
        "    let ll = al * bl; let mid = al * bh + ah * bl;\n"
        "    let plo = ll + (mid << 32u);\n"
        "    let p = VyW128(ah * bh + (mid >> 32u) + select(0lu, 1lu, plo < ll), plo);\n"
        "    // values: p * 2^ep, mc * 2^ecx; both shifted up so the top bit is bit 125\n"
        "    let sp = 125u - (127u - vy_clz128(p));\n"
        "    let sc = 125u - (63u - vy_clz64(mc));\n"
        "    let pn = vy_shl128(p, sp);\n"
        "    let cn = vy_shl128(VyW128(0lu, mc), sc);\n"
        "    let ep = i32(max(ea, 1u)) + i32(max(eb, 1u)) - 2150i - i32(sp);\n"
        "    let ecx = i32(max(ec, 1u)) - 1075i - i32(sc);\n"
        "    let sgp = (ua ^ ub) >> 63u; let sgc = uc >> 63u;\n"
        "    var x = pn; var y = cn; var ex = ep; var sx = sgp; var sy = sgc;\n"
        "    if (ecx > ep) { x = cn; y = pn; ex = ecx; sx = sgc; sy = sgp; }\n"
        "    y = vy_shr128_sticky(y, u32(ex - select(ecx, ep, ecx > ep)));\n"
        "    var r: VyW128; var sr = sx;\n"
        "    if (sx == sy) { r = vy_add128(x, y); }\n"
        "    else if (vy_ge128(x, y)) { r = vy_sub128(x, y); }\n"
        "    else { r = vy_sub128(y, x); sr = sy; }\n"
        "    if ((r.hi | r.lo) == 0lu) { return 0.0lf; }  // exact cancellation: +0\n"
        "    return vy_round_f64(r, ex, sr);\n}",
    )


# f64 trunc and round (half to even) are vyre's on every device with i64: lavapipe's own
# are wrong on a host without AVX-512. llvmpipe evaluates f64 in vectors of 8 lanes (512
# bits); where the CPU has no rounding instruction of that width, gallivm's lp_build_trunc
# / lp_build_round fall back to an f32-era emulation (a conversion through i64 and back,
# and |x| > 2^24 kept as it is): a zero result loses x's sign (trunc(-0.5) = +0), every
# |x| in (2^24, 2^52) keeps its fraction (trunc(2^24 + 0.5) = 2^24 + 0.5, so rem's
# a - b * trunc(a / b) came out 0), and round adds nextafterf(0.5, 0) = 0.49999997 and
# truncates (a tie goes toward zero, 2.5000000001 to 2). floor and ceil are right there
# (gallivm calls LLVM's floor / ceil for 64-bit types), and f32 has rounding instructions
# at its width (256 bits) on every x86-64 with AVX. vyre's: |x| + 2^52 - 2^52 rounds |x|
# to an integer (half to even) below 2^52, which needs only a correctly rounded f64
# addition (Vulkan requires it; vyre.lower.maths's exact functions rely on the same sum,
# on every backend); the fences keep a compiler from folding the sum away, and the sign
# is x's bit. Cheaper than lavapipe's own emulation (docs/perf-notes.md); a device with
# f64 but no i64 keeps its own.
def _integral_f64(ctx: _Ctx, fn: str) -> str:
    """The helper computing f64 `fn` (trunc or round) exactly (see above)."""
    f0, f1 = _fence_fn(ctx, T.F64, 0), _fence_fn(ctx, T.F64, 1)
    two52 = "4503599627370496.0lf"
    if fn == "trunc":  # (r - 1 is exact: r > a >= 0 makes r >= 1)
        name, res = "vy_trunc_f64", "t"
        last = (f"    let fr = {f0}(r);\n"
                "    let t = select(r, fr - 1.0lf, fr > a);  // rounded up: the integer below\n")
    else:
        name, res, last = "vy_round_even_f64", "r", ""
    return _helper(
        ctx, name,
        f"fn {name}(x: f64) -> f64 {{\n"
        "    let u = bitcast<u64>(x);\n"
        "    let a = bitcast<f64>(u & 0x7ffffffffffffffflu);  // |x|\n"
        "    // a < 2^52: the sum's ulp is 1, so it is a rounded to an integer, half to even\n"
        f"    let r = {f1}({f0}(a) + {two52}) - {two52};\n"
        + last +
        "    // from 2^52 up (inf and NaN included) x is integral; the sign is x's\n"
        f"    let m = select({res}, a, !(a < {two52}));\n"
        "    return bitcast<f64>(bitcast<u64>(m) | (u & 0x8000000000000000lu));\n}",
    )


def _fma_f16(ctx: _Ctx) -> str:
    """f16 fma with one rounding, in f32: a*b is exact (2 x 11 bits); the f32 sum is made
    round-to-odd (TwoSum error term), so rounding it to f16 is correct (24 >= 11 + 2)."""
    f0, f1 = _fence_fn(ctx, T.F32, 0), _fence_fn(ctx, T.F32, 1)
    return _helper(
        ctx, "vy_fma_f16",
        "fn vy_fma_f16(a: f32, b: f32, c: f32) -> f16 {\n"
        f"    let p = {f0}(a * b);\n"
        f"    let s = {f0}(p + {f1}(c));\n"
        "    var bits = bitcast<u32>(s);\n"
        "    if ((bits & 0x7f800000u) != 0x7f800000u) {  // finite\n"
        f"        let bb = {f0}({f0}(s) - {f1}(p));\n"
        f"        let e = {f0}({f0}(p) - {f1}({f0}(s) - {f1}(bb))) + {f1}({f0}(c) - {f1}(bb));\n"
        "        if (e != 0.0f && (bits & 1u) == 0u) {\n"
        "            if ((e > 0.0f) == (s > 0.0f)) { bits = bits + 1u; } else { bits = bits - 1u; }\n"
        "        }\n"
        "    }\n"
        "    return f16(bitcast<f32>(bits));\n}",
    )


def _asin(ctx: _Ctx, ty: ScalarType) -> str:
    """Cephes asinf (about 2 ulp; GLSL.std.450's asin inherits atan's 4096 ulp bound, and
    llvmpipe's atan is ~20 ulp off): a polynomial in x^2 below 0.5, above it
    pi/2 - 2 asin(sqrt((1 - |x|) / 2)), pi/2 in two parts; NaN outside [-1, 1]."""
    assert ty is T.F32, "approximate functions are f32 on wgpu (f16 computes in f32)"
    _helper(ctx, "vy_bits_f32", _BITS_F32)
    return _helper(
        ctx, "vy_approx_asin_f32",
        "fn vy_approx_asin_f32(x: f32) -> f32 {\n"
        "    let b = bitcast<u32>(x) & 0x7fffffffu;\n"
        "    if (b > 0x3f800000u) { return vy_bits_f32(0x7fc00000u); }  // NaN or |x| > 1\n"
        "    if (b < 0x38d1b717u) { return x; }  // |x| < 1e-4: x^3 / 6 is below half an ulp\n"
        "    let a = bitcast<f32>(b);\n"
        "    let big = a > 0.5f;\n"
        "    var z = a * a;\n"
        "    var s = a;\n"
        "    if (big) { z = 0.5f * (1.0f - a); s = sqrt(z); }\n"
        "    var r = ((((4.2163199048e-2f * z + 2.4181311049e-2f) * z + 4.5470025998e-2f) * z"
        " + 7.4953002686e-2f) * z + 1.6666752422e-1f) * z * s + s;\n"
        "    if (big) { r = (1.57079637f - (r + r)) - 4.37113883e-8f; }\n"
        "    return bitcast<f32>(bitcast<u32>(r) | (bitcast<u32>(x) & 0x80000000u));\n}",
    )
