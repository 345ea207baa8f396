"""WGSL helper functions of the IR's maths semantics that WGSL's builtins do not give.

f64 trunc and round (lavapipe's own are wrong), NaN-exact min / max / abs, and the
approximate functions' own definitions (asin, atan2, sin / cos, tan): each a helper
emitted once, where the printer calls it (expressions.py). Exact division, sqrt and fma
are not here: they are IR definitions (vyre.lower.divsqrt, vyre.lower.fma) the printer
only spells. Text only; this module must never walk a Program.
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
