"""IR -> WGSL code generation, honouring docs/IR.md exactly where WGSL differs.

Where WGSL's own rule differs from the IR's (NaN in min/max, constant folding of
overflowing literals, float accuracy), the generated code spells the IR's rule out with
small helper functions that are emitted only when used; integer division, shifts, abs,
float->int casts and out-of-bounds access arrive lowered by vyre.lower (memory accesses
as raw ones behind the IR's index tests, against the element counts passed in the
uniform block: the code never relies on robust buffer access or `arrayLength` for a value;
a guarded load's read runs where its test fails, which WebGPU defines, and is discarded). Every
user name is mangled with a prefix, so no IR name can collide with a WGSL keyword or
builtin.

This module is pure: Program in, source text out. It must never touch a device, and it
must never decide which features a device has (the caller passes what may be emitted).
"""

from __future__ import annotations

import math
import re
import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from vyre import features as F
from vyre.errors import InvalidProgram, UnsupportedFeature
from vyre.ir import nodes as N
from vyre.ir import ops
from vyre.ir.analysis import atomic_buffers, has_any, types_used, uses_subgroups, walk_stmts
from vyre.ir.types import ScalarType
from vyre.ir.validate import validate
from vyre.ir.visit import children
from vyre.lower import Traits, lower, mangle
from vyre.lower.maths import lowered_calls
from vyre.subgroups import identity as sg_identity

from . import loopcount, packed
from .barriers import needs_storage_barrier
from .fences import (
    OPAQUE,
    VISIBLE,
    FenceFlow,
    fma_plan,
    inert_constant,
    loop_head,
    reloaded_stores,
)
from .options import DEFAULT_OPTIONS, WgpuOptions
from .uniforms import ZERO_FIELD, ZERO_FIELDS, UniformLayout, layout_for
from .vectors import LANES, Run, VectorPlan, plan_vectors

T = ScalarType
U_VAR = "vy_u"
# WGSL's integer division, shifts, abs, float -> int conversions and memory accesses differ
# from the IR's outside their domain: vyre.lower rewrites them into the core (in-domain
# `Native` ops, raw accesses behind the IR's index tests; none where an enclosing
# condition already tested the index, in_place). A guarded load is a local set under an
# `if`, except in a Program without loops (STRAIGHT_TRAITS), where it stays an expression
# (guarded_expr) printed as an eager `select` (_guarded_load): a shorter shader for the
# driver's compiler (the bench's compile program: -0.2 ms of ~7 on the H100). Not in
# loops: there NVIDIA's compiler makes the unconditional loads slower (the library matmul's
# K loop, 4096^3 on the H100: 24.3 TFLOP/s against 33.8 with the `if`).
# f16 stays f16 in the core: this printer's own f16 spelling (f32 on fenced operands, see
# _fence_f16) is what NVIDIA's compiler cannot drop the rounding of.
TRAITS = Traits(f16_arith=True, in_place=True)
STRAIGHT_TRAITS = Traits(f16_arith=True, guarded_expr=True, in_place=True)

_WGSL_TYPE = {
    T.BOOL: "bool", T.I32: "i32", T.U32: "u32", T.F32: "f32",
    T.F16: "f16", T.F64: "f64", T.I64: "i64", T.U64: "u64",
    # a narrow value lives in the 32-bit integer of its signedness (packed.py)
    T.U8: "u32", T.U16: "u32", T.I8: "i32", T.I16: "i32",
}
_SUFFIX = {T.I32: "i", T.U32: "u", T.F32: "f", T.F16: "h", T.F64: "lf", T.I64: "li", T.U64: "lu",
           T.U8: "u", T.U16: "u", T.I8: "i", T.I16: "i"}
_BUILTIN_VAR = {
    "global_id": "vy_gid", "local_id": "vy_lid", "workgroup_id": "vy_wid",
    "num_workgroups": "vy_nwg",
}
_AXES = "xyz"
# Array accesses the printer makes itself, audited for modules without naga's bounds checks
# (WgslModule.unproven_access): each is in range by construction, as its comment says
# (_raw_ref, _atomic_fn, _lane_fn, _vec_run, packed.py, vy_inv_pio4, vy_status), except the eager
# select of a guarded load (_guarded_load), which marks its module unproven. Uniforms are
# struct fields; subgroup shuffles index no array.
_SIMPLE_BIN = {
    **ops.binary_symbols("arith", "bitwise", "comparison"),
    "logical_and": "&", "logical_or": "|",  # bool operands: WGSL's non-short-circuit forms
}
# functions WGSL spells with a builtin of its own (vyre.ir.ops); the rest have hooks (_call)
_DIRECT_FNS = {op.name: op.wgsl for op in ops.CALL_OPS if op.wgsl}


def wgsl_type(t: ScalarType) -> str:
    return _WGSL_TYPE[t]


# float from bits, opaque to the driver (some assume no NaN/inf and fold such constants)
_BITS_F32 = "fn vy_bits_f32(b: u32) -> f32 { return bitcast<f32>(b + vy_u.vy_zero2); }"

@dataclass(frozen=True)
class WgslModule:
    """Generated source plus what the runtime needs to bind it."""

    source: str
    layout: UniformLayout
    storage_access: tuple[str, ...]  # per buffer slot: "read" or "read_write" as declared
    entry_point: str = "main"
    # the binding of the hidden status buffer (array<atomic<u32>>, bit 0: the driver ended a
    # loop an invocation was in, see LOOP_LIMIT_FLAG), or None when the shader has none
    status_binding: int | None = None
    # the first array access printed whose index this printer cannot vouch for (the eager
    # select of a guarded load reads out of range on purpose), or None: every access of
    # the source is in range by construction, so the runtime may compile it without naga's
    # bounds checks (trusted.py). A function of the source: the same text, the same answer.
    unproven_access: str | None = None


@dataclass
class _Ctx:
    program: N.Program
    atomic: frozenset[str]
    buffer_slot: dict[str, int]
    arrays: dict[str, N.WorkgroupArray]
    helpers: dict[str, str] = field(default_factory=dict)
    scopes: list[dict[str, str]] = field(default_factory=list)
    used_names: set[str] = field(default_factory=set)
    counter: int = 0
    wide_ok: bool = False  # the device runs i64 and f64 (vyre.approx's trig reduction)
    fma_fused: bool = True  # the driver's fma rounds once
    flush: bool = False  # f32 subnormals flush to zero (docs/IR.md's flush mode), explicitly
    # which tiny results flush mode turns into zeros (features.TININESS_RULES): vy_ftz gives
    # 'subnormal result'; a narrowing cast spells the other two itself (_narrowed_f32)
    tininess: str = F.TININESS_SUBNORMAL_RESULT
    # flush mode's f32 + - * fma left to the device, which computes it (native_flush.py)
    native_flush: bool = False
    exact_div: bool = False  # f32 division by vyre's exact integer method, not the driver's
    exact_sqrt: bool = False  # f32 sqrt likewise
    bad_base: bool = False  # tests only: the exact fast paths start from a worse estimate
    wg_f32_atomic: frozenset[str] = frozenset()  # workgroup arrays with f32 atomics (as u32)
    # fence only the f32 operands a driver could fold (fences.py); False: every one
    minimal: bool = False
    reloaded: set[int] = field(default_factory=set)  # ids of stores read back (fences.py)
    # Barrier also orders storage memory (barriers.py: only where an invocation can touch a
    # written storage buffer before a barrier; naga's storageBarrier fences the whole GPU)
    storage_barrier: bool = True
    flow: FenceFlow = field(default_factory=FenceFlow)  # what the compiler sees of f32 vars
    vec: VectorPlan | None = None  # workgroup arrays declared as vec4 and their runs
    # the driver ends long loops silently: count the loops each invocation is in
    # (loopcount.py); the exit flag of each enclosing loop, innermost last (None: no flag)
    count_loops: bool = False
    loop_flags: list[str | None] = field(default_factory=list)
    returns_in_loops: bool = False  # a `return` inside a counted loop (needs loopcount.RETURNING)
    # integer expressions of builtins and constants only (the global id), printed once as
    # a `let` at the top of the entry point: {text: (name, type)} (see _invariant)
    hoisted: dict[str, tuple[str, ScalarType]] | None = None
    hoisted_nodes: dict[int, tuple[N.ExprNode, str]] = field(default_factory=dict)  # by id
    invariant: dict[int, tuple[N.ExprNode, int]] = field(default_factory=dict)  # _invariant's
    # the first access printed that is not in range by construction (WgslModule's field)
    unproven: str | None = None
    # the 8/16-bit buffers and workgroup arrays stored into: arrays of atomic<u32> words
    packed_stored: frozenset[str] = frozenset()

    def fresh(self, prefix: str) -> str:
        self.counter += 1
        return f"{prefix}{self.counter}"

    def declare(self, ir_name: str) -> str:
        base = f"v_{mangle(ir_name)}"
        name = base
        while name in self.used_names:
            self.counter += 1
            name = f"{base}_{self.counter}"
        self.used_names.add(name)
        self.scopes[-1][ir_name] = name
        return name

    def lookup(self, ir_name: str) -> str:
        for scope in reversed(self.scopes):
            if ir_name in scope:
                return scope[ir_name]
        raise InvalidProgram(f"variable {ir_name!r} is not declared (the validator catches this)")


# ------------------------------------------------------------------ literals


def _float_bits_literal(ctx: _Ctx, v: float, ty: ScalarType) -> str | None:
    """A runtime-only expression for floats WGSL cannot write (inf, NaN, -0, subnormal)."""
    if ty is T.F32 and 1.1754943508222875e-38 <= abs(v) < math.inf:
        return None  # (a normal f32, most literals: decided at once; NaN fails the test)
    special = math.isinf(v) or math.isnan(v) or (v == 0.0 and math.copysign(1.0, v) < 0)
    f32_sub = v != 0.0 and abs(v) < 1.1754943508222875e-38 and not math.isnan(v)
    if ty is T.F32 and (special or f32_sub):
        bits = struct.unpack("<I", struct.pack("<f", v))[0]
        _helper(ctx, "vy_bits_f32", _BITS_F32)
        return f"vy_bits_f32(0x{bits:08x}u)"
    if ty in (T.F16, T.F64) and special:
        bits = struct.unpack("<I", struct.pack("<f", v))[0]
        _helper(ctx, "vy_bits_f32", _BITS_F32)
        return f"{wgsl_type(ty)}(vy_bits_f32(0x{bits:08x}u))"
    if ty is T.F16 and v != 0.0 and abs(v) < 6.103515625e-05:
        return f"f16({_float_text(v)}f)"
    return None


def _float_text(v: float) -> str:
    s = repr(float(v))
    if "e" not in s and "." not in s:
        s += ".0"
    return s


def literal(ctx: _Ctx, c: N.Const, opaque: bool = False) -> str:
    """WGSL text for a literal; `opaque` hides it from WGSL's constant evaluation."""
    ty, v = c.ty, c.value
    if ty is T.BOOL:
        text = "true" if v else "false"
    elif ty.is_float:
        special = _float_bits_literal(ctx, float(v), ty)
        if special is not None:
            return special  # already a runtime function call
        text = _float_text(float(v)) + _SUFFIX[ty]
    else:
        iv = int(v)
        sfx = _SUFFIX[ty]
        if ty.is_signed and iv == -(1 << (ty.bits - 1)):
            text = f"({iv + 1}{sfx} - 1{sfx})"
        elif iv < 0:
            text = f"({iv}{sfx})"
        else:
            text = f"{iv}{sfx}"
    if opaque:
        return f"{_identity_fn(ctx, ty)}({text})"
    return text


def _identity_fn(ctx: _Ctx, ty: ScalarType) -> str:
    """The identity function on `ty`: its result is a runtime value to WGSL."""
    name = f"vy_id_{wgsl_type(ty)}"
    return _helper(ctx, name, f"fn {name}(x: {wgsl_type(ty)}) -> {wgsl_type(ty)} {{ return x; }}")


def _zero(ty: ScalarType) -> str:
    return "false" if ty is T.BOOL else f"{wgsl_type(ty)}(0)"


def _helper(ctx: _Ctx, name: str, code: str) -> str:
    if name not in ctx.helpers:
        ctx.helpers[name] = code
    return name


# ------------------------------------------------------------------ float fences
#
# Vulkan lets a driver optimise float code as if no operand were NaN, inf or -0 unless the
# SPIR-V asks for SignedZeroInfNanPreserve, and lets it contract a*b+c into an fma unless
# an operation is NoContraction; naga emits neither. Mesa's NIR (lavapipe) then folds
# x*0 -> 0, x-x -> 0, (a-b)+b -> a, !(a<b) -> a>=b, and NVIDIA's compiler contracts.
# Every such rewrite matches a float operation whose operand is another float operation,
# the same value twice, or a constant. So every float operand goes through a *fence*: its
# bits plus a uniform that is 0 at run time (an integer operation: no float pattern can
# look through it; an add, not an XOR, because two XORs with one value cancel and would
# expose the value again), with a different uniform per operand position (so `x - x`
# becomes two different values), and every float comparison's bool goes through one too.
# f16 arithmetic is done in f32 on fenced operands and rounded once to f16 (exact: f32
# has more than 2*11+2 bits, so the double rounding is innocuous for + - * / sqrt). In
# flush mode (f32 subnormals flushed, docs/IR.md) the fence also turns a subnormal input
# into a zero of its sign and `_rounded` flushes each f32 result, so the outcome is the
# same whether or not the driver itself flushes; except that on a device whose own f32
# add, sub, mul and fma compute flush mode (probed: native_flush.py) those four get plain
# fences and no flush of their result, as outside flush mode.
# Outside flush mode (and for those four on such a device), f32 add, mul, sub and native
# fma fence only what a rewrite could match (fences.py says which operands and why: not an
# opaque value, not a constant no rewrite matches, not a stored value its invocation never
# reads back); the rest fence every operand. Those plain fences are written in place
# (_plain_fenced); the flushing and f64 ones are helper functions.


def _compute_type(ty: ScalarType) -> ScalarType:
    """The type float arithmetic of `ty` is evaluated in (f16 in f32, then rounded once)."""
    return T.F32 if ty is T.F16 else ty


_FENCES: dict[tuple[ScalarType, int, bool, bool], tuple[str, str]] = {}  # (name, code) by kind


def _fence_fn(ctx: _Ctx, ty: ScalarType, k: int, flushing: bool | None = None) -> str:
    """The fence helper with uniform `k`; for f32 `flushing` (default: in flush mode) also
    reads a subnormal as a zero of its sign."""
    key = (ty, k, ctx.flush if flushing is None else flushing, ty is T.F64 and ctx.wide_ok)
    got = _FENCES.get(key)
    if got is None:
        got = _FENCES[key] = _fence_code(*key)
    return _helper(ctx, *got)


def _fence_code(ty: ScalarType, k: int, flushing: bool, wide: bool) -> tuple[str, str]:
    z = f"{U_VAR}.{ZERO_FIELDS[k]}"
    name = f"vy_fence{k}_{wgsl_type(ty)}" + ("_ftz" if ty is T.F32 and flushing else "")
    if ty is T.F32:
        if flushing:
            body = (
                f"    let b = bitcast<u32>(x) + {z};\n"
                "    return bitcast<f32>(select(b, b & 0x80000000u, (b & 0x7f800000u) == 0u));"
                "  // subnormal -> signed 0\n"
            )
        else:
            body = f"    return bitcast<f32>(bitcast<u32>(x) + {z});\n"
    elif wide:  # f64 with i64 on the device: the same integer add of a uniform zero (a
        # select(x, -x, z != 0) lets a compiler split it into two branches, each free to
        # contract a*b + c into an fma)
        body = f"    return bitcast<f64>(bitcast<u64>(x) + u64({z}));\n"
    else:  # f64: -x differs from x in its bits even for constants, so nothing folds
        body = f"    return select(x, -x, {z} != 0u);\n"
    t = wgsl_type(ty)
    return name, f"fn {name}(x: {t}) -> {t} {{\n{body}}}"


def _fence_f16(ctx: _Ctx, k: int) -> str:
    """An f16 value as an opaque f32, through its f16 bits: NVIDIA's compiler drops the
    rounding of f32(f16(x)) (so of every f16 operation done in f32) unless the bits are
    observed. (naga has no bitcast between vec2<f16> and u32; pack2x16float is one.)"""
    z = f"{U_VAR}.{ZERO_FIELDS[k]}"
    name = f"vy_fence{k}_f16"
    return _helper(
        ctx, name,
        f"fn {name}(x: f16) -> f32 {{\n"
        f"    return unpack2x16float(pack2x16float(vec2<f32>(f32(x), 0.0f)) + {z}).x;\n}}",
    )


#: the uniform 0 of fences that make a value opaque where it is bound or stored (fences.py)
_DEF_FENCE = 2


def _bare(ctx: _Ctx, e: N.ExprNode, other: N.ExprNode) -> bool:
    """Whether f32 operand `e` of an add / mul (or sub's left operand), beside `other`,
    may go unfenced (fences.py)."""
    return ctx.minimal and (ctx.flow.kinds(e) == OPAQUE or inert_constant(e, other))


def _plain_fenced(k: int, text: str) -> str:
    """f32 `text` behind the fence with uniform `k` that never flushes (the minimal
    spelling's, fences.py: outside flush mode, or where the device's own arithmetic
    flushes, native_flush.py), spelled in place: NVIDIA's compiler takes longer over a
    call of the helper than over its three operations written out."""
    if text == "0.0f":  # +0's bits are 0: the uniform's own bits are the fenced value
        return f"bitcast<f32>({U_VAR}.{ZERO_FIELDS[k]})"
    return f"bitcast<f32>(bitcast<u32>({text}) + {U_VAR}.{ZERO_FIELDS[k]})"


def _left_to_device(ctx: _Ctx, op: str, ty: ScalarType) -> bool:
    """Whether f32 `op`'s flush-mode result is the device's own (no explicit flush)."""
    return ctx.native_flush and ty is T.F32 and op in ("add", "sub", "mul")


def _fenced(ctx: _Ctx, ty: ScalarType, text: str, k: int) -> str:
    """Float operand `text` of type `ty` as an opaque value of its compute type."""
    if ty is T.F16:
        return f"{_fence_f16(ctx, k)}({text})"
    if ty is T.F32 and not ctx.flush:
        return _plain_fenced(k, text)
    return f"{_fence_fn(ctx, ty, k)}({text})"


def _rounded(ctx: _Ctx, ty: ScalarType, text: str) -> str:
    """A compute-type result `text` as a value of `ty` (f16: rounded once; f32 in flush
    mode: a subnormal result becomes a zero of its sign)."""
    if ty is T.F16:
        return f"f16({text})"
    if ty is T.F32 and ctx.flush:
        return f"{_ftz(ctx)}({text})"
    return text


def _ftz(ctx: _Ctx) -> str:
    """The name of flush mode's result rule (declared once): a subnormal f32 is a signed 0."""
    return _helper(
        ctx, "vy_ftz",
        "fn vy_ftz(x: f32) -> f32 {  // flush mode: a subnormal result is a signed 0\n"
        "    let b = bitcast<u32>(x);\n"
        "    return bitcast<f32>(select(b, b & 0x80000000u, (b & 0x7f800000u) == 0u));\n}",
    )


#: flush mode's tininess rules a narrowing to f32 spells itself, with the f64 magnitude below
#: which the result is tiny: 'after rounding', below the midpoint of FLT_MIN and the largest
#: 24-bit value under it (FLT_MIN - 2^-151; the tie rounds to FLT_MIN, which is even);
#: 'before rounding', below FLT_MIN. (A driver's own f64 -> f32 conversion keeps f64's
#: subnormal handling: NVIDIA's gives FLT_MIN for a band-B value, tests/test_flush_mode.py.)
_TINY_BELOW = {
    F.TININESS_AFTER_ROUNDING: "1.1754943157898259e-38lf",  # 2^-126 - 2^-151, exact
    F.TININESS_BEFORE_ROUNDING: "1.1754943508222875e-38lf",  # 2^-126, exact
}


def _narrowed_f32(ctx: _Ctx, x: str) -> str:
    """The f64 `x` rounded to f32 in flush mode under the instance's tininess rule: a zero
    of x's sign where the rule calls the result tiny, else the rounded value (vy_ftz: a
    subnormal one is tiny under every rule)."""
    below = _TINY_BELOW[ctx.tininess]
    name = _helper(
        ctx, "vy_narrow_ftz",
        "fn vy_narrow_ftz(x: f64) -> f32 {  // flush mode's tininess rule on a narrowing\n"
        f"    let r = {_ftz(ctx)}(f32(x));\n"
        f"    return select(r, bitcast<f32>(bitcast<u32>(r) & 0x80000000u), abs(x) < {below});\n}}",
    )
    return f"{name}({x})"


def _fence_bool(ctx: _Ctx, text: str) -> str:
    """The bool of a float comparison, hidden (NIR rewrites !(a < b) to a >= b, wrong for NaN)."""
    name = _helper(
        ctx, "vy_fence_bool",
        f"fn vy_fence_bool(c: bool) -> bool {{ return (select(0u, 1u, c) ^ {U_VAR}.{ZERO_FIELD}) != 0u; }}",
    )
    return f"{name}({text})"


def _flt(ty: ScalarType, v: float) -> str:
    """A plain literal of float type `ty` (for finite, WGSL-writable values only)."""
    return _float_text(v) + _SUFFIX[ty]


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


# ------------------------------------------------------------------ expressions


_INDEX_TYPES = frozenset({T.U32, T.I32})
_NEVER_HOISTED = (N.Load, N.Subgroup, N.Call)
_NEVER_HOISTED_CLASSES = frozenset({N.Load, N.RawLoad, N.Subgroup, N.Call})  # (the same, exactly)


def _invariant(ctx: _Ctx, e: N.ExprNode) -> int:
    """2: an integer operation of builtins and constants, at least one builtin (the same
    value wherever the invocation computes it); 1: a builtin or constant; 0: neither.
    Memoised by node in ctx.invariant (a fold of its own, without the generic one's
    per-node overhead: expr asks this of every operation it prints)."""
    t = type(e)
    if t is N.Builtin or t is N.Const:
        return 1
    if e.ty not in _INDEX_TYPES or t in _NEVER_HOISTED_CLASSES:
        return 0  # (decided by the node alone: not memoised)
    got = ctx.invariant.get(id(e))
    if got is not None:
        return got[1]
    kids = children(e)
    r = 0
    if kids and not isinstance(e, _NEVER_HOISTED):
        r = 2
        for k in kids:
            if not _invariant(ctx, k):
                r = 0
                break
    ctx.invariant[id(e)] = (e, r)
    return r


def _hoisted(ctx: _Ctx, e: N.ExprNode) -> str:
    """`e` (invariant, see _invariant) as a `let` of the entry point, one per spelling:
    the driver gets the global id's arithmetic once instead of at each access."""
    assert ctx.hoisted is not None
    known = ctx.hoisted_nodes.get(id(e))  # (a shared node, the global id: printed once)
    if known is not None:
        return known[1]
    saved, ctx.hoisted = ctx.hoisted, None
    try:
        text = expr(ctx, e)
    finally:
        ctx.hoisted = saved
    got = saved.get(text)
    if got is None:
        got = saved[text] = (f"vy_x{len(saved)}", e.ty)
    ctx.hoisted_nodes[id(e)] = (e, got[0])
    return got[0]


def _var(ctx: _Ctx, e: N.Var, opaque: bool) -> str:
    return ctx.lookup(e.name)


def _param(ctx: _Ctx, e: N.Param, opaque: bool) -> str:
    idx = [p.name for p in ctx.program.params].index(e.name)
    ref = f"{U_VAR}.p_{mangle(ctx.program.params[idx].name)}"
    return f"f16({ref})" if e.ty is T.F16 else ref


def _builtin(ctx: _Ctx, e: N.Builtin, opaque: bool) -> str:
    if e.name == "local_index":
        return "vy_lidx"
    if e.name == "subgroup_size":
        return "vy_sgsize"
    if e.name == "subgroup_lane":
        return "(vy_lidx & (vy_sgsize - 1u))"
    return f"{_BUILTIN_VAR[e.name]}.{_AXES[e.axis]}"


def _length(ctx: _Ctx, e: N.Length, opaque: bool) -> str:
    if e.buffer in ctx.arrays:  # (a literal)
        n = f"{ctx.arrays[e.buffer].count}u"
        return f"{_identity_fn(ctx, T.U32)}({n})" if opaque else n
    return f"{U_VAR}.n_{ctx.buffer_slot[e.buffer]}"


# the expressions without operands but a Const, by their exact class (none derives from
# them): never hoisted (_invariant gives a builtin 1, the others 0)
_LEAVES: dict[type, Callable[[_Ctx, Any, bool], str]] = {
    N.Var: _var, N.Param: _param, N.Builtin: _builtin, N.Length: _length,
}


def expr(ctx: _Ctx, e: N.ExprNode, opaque: bool = False) -> str:
    t = type(e)
    if t is N.Const:
        return literal(ctx, e, opaque)  # type: ignore[arg-type]
    leaf = _LEAVES.get(t)
    if leaf is not None:
        return leaf(ctx, e, opaque)
    if ctx.hoisted is not None and _invariant(ctx, e) == 2:
        return _hoisted(ctx, e)
    kids = children(e)
    # An operator over literals only would be folded by WGSL's constant evaluator, which
    # rejects overflow, division by zero and a constant index past a fixed-size array (even
    # under an index test that never runs it); hiding its literals makes it a runtime value.
    # (Float operands are fenced by the operators themselves, see _fence_fn.)
    hide = bool(kids)
    for k in kids:
        tk = type(k)
        if not (tk is N.Const or (tk is N.Length and k.buffer in ctx.arrays)):  # type: ignore[union-attr]
            hide = False
            break
    n = len(kids)  # (no list comprehension: a frame of its own per node)
    if n == 1:
        sub = [expr(ctx, kids[0], hide)]
    elif n == 2:
        sub = [expr(ctx, kids[0], hide), expr(ctx, kids[1], hide)]
    else:
        sub = [expr(ctx, k, hide) for k in kids]
    # by exact class first (no class derives from these but those named with them),
    # the isinstance chain below for anything else
    if t is N.Binary:
        return _binary(ctx, e, sub[0], sub[1])  # type: ignore[arg-type]
    if t is N.RawLoad or t is N.Load:
        return _raw_load(ctx, e, sub[0])  # type: ignore[arg-type]
    if t is N.Guarded:
        return _guarded_load(ctx, e, sub[0], sub[1])  # type: ignore[arg-type]
    if isinstance(e, N.Load):
        return _raw_load(ctx, e, sub[0])
    if isinstance(e, N.Unary):
        return _unary(ctx, e, sub[0])
    if isinstance(e, N.Binary):
        return _binary(ctx, e, sub[0], sub[1])
    if isinstance(e, N.Call):
        return _call(ctx, e, sub)
    if isinstance(e, N.Guarded):  # a guarded load (STRAIGHT_TRAITS): see _guarded_load
        return _guarded_load(ctx, e, sub[0], sub[1])
    if isinstance(e, N.Select):
        return f"select({sub[2]}, {sub[1]}, {sub[0]})"
    if isinstance(e, N.Cast):
        return _cast(ctx, e.a.ty, e.ty, sub[0])
    if isinstance(e, N.Bitcast):
        if e.a.ty == e.ty:
            return sub[0]
        if e.ty.is_narrow:  # u8 <-> i8, u16 <-> i16: the same bits, wrapped (a cast)
            return _cast(ctx, e.a.ty, e.ty, sub[0])
        return f"bitcast<{wgsl_type(e.ty)}>({sub[0]})"
    if isinstance(e, N.Native):
        return _native(ctx, e, sub)
    if isinstance(e, N.Table):
        return _table(ctx, e, sub[0])
    if isinstance(e, N.Invoke):
        return f"{_function(ctx, e.fn)}({', '.join(sub)})"
    if isinstance(e, N.Subgroup):
        return _subgroup(ctx, e, sub)
    raise InvalidProgram(f"unknown expression {type(e).__name__}")


def _function(ctx: _Ctx, fn: N.Function) -> str:
    """The module `fn` of the core's function `fn` (vyre.lower.maths' definitions), printed
    once however often it is called: its body in a scope and fence flow of its own (the
    parameters as values the compiler may see, so they are fenced as such). lavapipe
    builds a pipeline with three calls of one `fn` in 0.55-0.6x the time of the same
    code written three times (docs/perf-notes.md)."""
    name = f"vy_fn_{mangle(fn.name)}"
    if name in ctx.helpers:
        return name
    ctx.helpers[name] = ""  # (reserved: printed before the helpers its body adds)
    scopes, flow, hoisted = ctx.scopes, ctx.flow, ctx.hoisted
    ctx.scopes, ctx.flow, ctx.hoisted = [{}], FenceFlow(), None
    try:
        params = []
        for p, pt in fn.params:
            ctx.flow.declare(p, VISIBLE)
            params.append(f"{ctx.declare(p)}: {wgsl_type(pt)}")
        body = [line for st in fn.body for line in _stmt(ctx, st, "    ")]
        result = expr(ctx, fn.result)  # (in the body's scope: it reads the body's locals)
    finally:
        ctx.scopes, ctx.flow, ctx.hoisted = scopes, flow, hoisted
    t = wgsl_type(fn.ty)
    ctx.helpers[name] = "\n".join(
        [f"fn {name}({', '.join(params)}) -> {t} {{", *body, f"    return {result};", "}"])
    return name


def _table(ctx: _Ctx, e: N.Table, index: str) -> str:
    """The core's constant table `e` (vyre.lower.maths) read at `index`, as a tree of
    selects on the index's bits: a module `const` array read at a runtime index is copied
    into every invocation's private memory by lavapipe (log's f16 map ran 3x slower)."""
    vals = [_float_text(float(v)) + _SUFFIX[e.ty] if e.ty.is_float
            else f"{int(v)}{_SUFFIX[e.ty]}" for v in e.values]
    bits = max(1, (len(vals) - 1).bit_length())
    vals += [vals[-1]] * ((1 << bits) - len(vals))  # (never read: the index is in range)
    for j in range(bits):
        bit = f"((({index}) >> {j}u) & 1u) != 0u"
        vals = [f"select({vals[2 * m]}, {vals[2 * m + 1]}, {bit})" for m in range(len(vals) // 2)]
    return vals[0]


# ------------------------------------------------------------------ subgroups
#
# docs/IR.md ("Subgroups") fixes the order of every reduction and scan; WGSL's own
# subgroupAdd / subgroupInclusiveAdd leave it to the driver, so they are spelled here with
# shuffles, step by step, combining with the IR's own operators (fenced floats, exact
# min / max). The steps are unrolled up to the largest subgroup size Vulkan allows (128);
# a step is skipped where the pipeline's size (the subgroup_size builtin, read at run
# time) is smaller, so the code is right for whatever size the driver picks.

_SG_STEPS = (1, 2, 4, 8, 16, 32, 64)


def _sg_combine(ctx: _Ctx, combine: N.SubgroupCombine, ty: ScalarType, a: str, b: str) -> str:
    node = N.Binary(op=combine, a=N.Var(name="a", ty=ty), b=N.Var(name="b", ty=ty), ty=ty)
    return _binary(ctx, node, a, b)


def _subgroup(ctx: _Ctx, e: N.Subgroup, sub: list[str]) -> str:
    if e.op in ("shuffle", "broadcast"):
        return f"subgroupShuffle({sub[0]}, {sub[1]} & (vy_sgsize - 1u))"
    t = wgsl_type(e.ty)
    assert e.combine is not None
    name = f"vy_sg_{e.op}_{e.combine}_{t}"
    if name not in ctx.helpers:
        comb = _sg_combine(ctx, e.combine, e.ty, "o", "v")
        lines = [f"fn {name}(x: {t}, lane: u32, size: u32) -> {t} {{", "    var v = x;"]
        if e.op == "reduce":  # descending butterfly: lane l combines with lane l ^ d
            lines.insert(1, "    // docs/IR.md: x[l] op x[l ^ d] for d = S/2 .. 1")
            for d in reversed(_SG_STEPS):
                lines.append(f"    if ({d}u < size) {{ let o = subgroupShuffleXor(v, {d}u); "
                             f"v = {comb}; }}")
        else:  # Hillis-Steele: lane l >= d becomes x[l - d] op x[l], d = 1 .. S/2
            lines.insert(1, "    // docs/IR.md: x[l - d] op x[l] for lanes l >= d, d = 1 .. S/2")
            for d in _SG_STEPS:
                lines.append(
                    f"    if ({d}u < size) {{ let o = subgroupShuffle(v, (lane - {d}u) & "
                    f"(size - 1u)); v = select(v, {comb}, lane >= {d}u); }}"
                )
            if e.op == "exclusive_scan":
                ident = literal(ctx, N.Const(ty=e.ty, value=sg_identity(e.combine, e.ty)))
                lines.append("    let o = subgroupShuffle(v, (lane - 1u) & (size - 1u));")
                lines.append(f"    v = select(o, {ident}, lane == 0u);")
        lines += ["    return v;", "}"]
        _helper(ctx, name, "\n".join(lines))
    return f"{name}({sub[0]}, vy_lidx & (vy_sgsize - 1u), vy_sgsize)"




def _unlowered(what: str) -> InvalidProgram:
    return InvalidProgram(f"{what} reached the WGSL printer without vyre.lower (generate "
                          "lowers every Program first)")


def _f32_to_64(ctx: _Ctx, ty: ScalarType) -> str:
    """An in-range f32 truncated to u64 / i64 through two 32-bit halves: NVIDIA's Vulkan
    driver converts f32 to u64 wrong from 2^32 up (u64(4294967296.0) came back 0xffffffff,
    an H100 fuzz case). Both halves are exact: t * 2^-32 is a power-of-two scaling of an
    integer below 2^64, and t - hi * 2^32 is a multiple of ulp(t) below 2^32."""
    u = _helper(
        ctx, "vy_f2u64",
        "fn vy_f2u64(x: f32) -> u64 {  // 0 <= x < 2^64\n"
        "    let t = trunc(x);\n"
        "    let hi = floor(t * 2.3283064365386963e-10f);\n"
        "    let lo = t - hi * 4294967296.0f;\n"
        "    return (u64(u32(hi)) << 32u) | u64(u32(lo));\n}",
    )
    if ty is T.U64:
        return u
    return _helper(
        ctx, "vy_f2i64",
        "fn vy_f2i64(x: f32) -> i64 {  // -2^63 <= x < 2^63 (-(-2^63) wraps back to itself)\n"
        f"    let m = bitcast<i64>({u}(abs(x)));\n"
        "    return select(m, -m, x < 0.0f);\n}",
    )


def _native(ctx: _Ctx, e: N.Native, args: list[str]) -> str:
    """The core's in-domain operations (vyre.lower guarantees the domain)."""
    if e.op == "f2i":  # an in-range float: WGSL's truncating conversion is exact
        if e.args[0].ty is T.F32 and e.ty.bits == 64:
            return f"{_f32_to_64(ctx, e.ty)}({args[0]})"
        return f"{wgsl_type(e.ty)}({args[0]})"
    a, b = args
    if e.op == "rem" and e.ty.is_signed:
        # NVIDIA's Vulkan driver gets signed % wrong: a - (a / b) * b (exact in-domain)
        t = wgsl_type(e.ty)
        name = _helper(ctx, f"vy_srem_{t}",
                       f"fn vy_srem_{t}(a: {t}, b: {t}) -> {t} {{ return a - (a / b) * b; }}"
                       "  // NVIDIA Vulkan: signed % is wrong")
        return f"{name}({a}, {b})"
    sym = {"div": "/", "rem": "%", "shl": "<<", "shr": ">>"}[e.op]
    return f"({a} {sym} {b})"


def _sext64(ctx: _Ctx) -> str:
    """i32 -> i64 sign extension spelled from bits: lavapipe (Mesa NIR/LLVM) folds
    `i64(x) < 0` of a widened i32 to false, so abs(i64(x)) returned x for negative x."""
    return _helper(
        ctx, "vy_sext_i64",
        "fn vy_sext_i64(x: i32) -> i64 {  // lavapipe folds i64(x) < 0 wrongly\n"
        "    return bitcast<i64>(u64(bitcast<u32>(x)) | select(0lu, 0xffffffff00000000lu, x < 0i));\n}",
    )


def _unary(ctx: _Ctx, e: N.Unary, a: str) -> str:
    if e.op == "neg":
        if e.ty is T.F32:  # a sign-bit flip: IEEE negate, never flushed, nothing to fold
            # the uniform 0 added to the bits keeps the driver from seeing a float negate
            # (NVIDIA's compiler turned the bare sign flip into an fneg that flushes
            # subnormals in flush mode)
            return f"bitcast<f32>((bitcast<u32>({a}) + {U_VAR}.{ZERO_FIELD}) ^ 0x80000000u)"
        if e.ty is T.F16:
            return f"f16(bitcast<f32>(bitcast<u32>({_fence_f16(ctx, 0)}({a})) ^ 0x80000000u))"
        if e.ty.is_float:
            return f"(-{_fenced(ctx, e.ty, a, 0)})"
        return f"(-{a})"  # runtime negation wraps for ints (MIN -> MIN)
    if e.op == "bit_not":
        return f"(~{a})"
    return f"(!{a})"


_ARITH_SYM = {"add": "+", "sub": "-", "mul": "*", "div": "/"}
_CMP_SYM = {"eq": "==", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}


def _float_binary(
    ctx: _Ctx, op: str, ty: ScalarType, a: str, b: str, bare: tuple[bool, bool] = (False, False)
) -> str:
    """`a op b`; `bare`: which operands go unfenced (only what fences.py allows)."""
    if _left_to_device(ctx, op, ty):
        fa = a if bare[0] else _plain_fenced(0, a)
        fb = b if bare[1] else _plain_fenced(1, b)
        return f"({fa} {_ARITH_SYM[op]} {fb})"
    fa = a if bare[0] else _fenced(ctx, ty, a, 0)
    fb = b if bare[1] else _fenced(ctx, ty, b, 1)
    ct = _compute_type(ty)
    if op == "div":
        return _rounded(ctx, ty, _div_text(ctx, ct, fa, fb))
    if op in _ARITH_SYM:
        return _rounded(ctx, ty, f"({fa} {_ARITH_SYM[op]} {fb})")
    if op == "rem":
        raise _unlowered(f"rem on {ty}")
    if op in ("min", "max"):  # returns one of its (already flushed) operands: no rounding
        r = f"{_float_minmax(ctx, op, ct)}({fa}, {fb})"
        return f"f16({r})" if ty is T.F16 else r
    if op == "ne":
        return _fence_bool(ctx, f"!({fa} == {fb})")  # IEEE: NaN != x (WGSL != may be ordered)
    return _fence_bool(ctx, f"({fa} {_CMP_SYM[op]} {fb})")


def _binary(ctx: _Ctx, e: N.Binary, a: str, b: str) -> str:
    op, ty = e.op, e.a.ty
    if ty.is_float:
        bare = (False, False)
        if ty is T.F32 and op in ("add", "mul"):
            bare = (_bare(ctx, e.a, e.b), _bare(ctx, e.b, e.a))
        elif ty is T.F32 and op == "sub":  # a - b is a + (-b) to NIR: (-x) + x folds
            bare = (_bare(ctx, e.a, e.b), False)
        return _float_binary(ctx, op, ty, a, b, bare)
    if op in ("div", "rem", "shl", "shr"):
        raise _unlowered(f"{op} on {ty}")
    if op in ("min", "max"):
        return f"{op}({a}, {b})"
    return f"({a} {_SIMPLE_BIN[op]} {b})"


# GLSL.std.450 (what naga lowers these to) defines them for 16- and 32-bit floats only;
# NVIDIA returns garbage for f64 (exp2(0.0) -> 0) or crashes compiling them. Those with an
# exact f64 definition (vyre.lower.maths) never reach the printer.
NO_F64 = frozenset(op.name for op in ops.CALL_OPS
                   if not op.wgsl_f64 and "f64" not in op.exact_types)
F64_DEFINED = tuple(sorted(op.name for op in ops.CALL_OPS if "f64" in op.exact_types))
# results that are one of the (flushed) operands or integral: never a new subnormal
_NO_ROUNDING = frozenset({"min", "max", "clamp", "floor", "ceil", "trunc", "round"})


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


# Functions without a WGSL builtin of the IR's semantics: a helper of the compute type
# (f32 for f16, see _compute_type) that takes the fenced arguments, for every adapter.
_FN_HOOKS: dict[str, Callable[[_Ctx, ScalarType], str]] = {
    "approx_asin": _asin,
    "approx_atan2": _atan2_f32,
}


def _call(ctx: _Ctx, e: N.Call, args: list[str]) -> str:
    fn, ty = e.fn, e.ty
    if ty is T.F64 and fn in NO_F64:
        raise UnsupportedFeature(
            f"f64 {fn}", "wgpu",
            f"WGSL/SPIR-V has no f64 {fn} (GLSL.std.450 transcendental functions are 16/32-bit "
            "only); compute it in f32 (cast) or use the cuda or reference backend",
        )
    rec = ops.CALLS[fn]
    if rec.signature is not None:  # dot4_i8 / dot4_u8: the product sum never overflows,
        # the + acc is WGSL's wrapping runtime integer addition (literals come hidden)
        return f"({rec.wgsl}({args[0]}, {args[1]}) + {args[2]})"
    if not ty.is_float:
        if fn == "abs":
            raise _unlowered(f"abs on {ty}")
        if fn == "clamp":
            x, lo, hi = args
            return f"min(max({x}, {lo}), {hi})"
        raise InvalidProgram(f"{fn} on {ty}: not an integer function")
    ct = _compute_type(ty)
    if fn == "abs":  # a sign-bit clear: never flushed, nothing to fold
        if ty is T.F16:
            return f"f16({_float_abs(ctx, T.F32)}({_fence_f16(ctx, 0)}({args[0]})))"
        return f"{_float_abs(ctx, ty)}({args[0]})"
    if fn == "fma" and ty is T.F32 and ctx.fma_fused and ctx.minimal:
        return _fma_minimal(ctx, e, args)
    if fn in ("trunc", "round") and ty is T.F64 and ctx.wide_ok:  # (it fences its own
        # float operations; x is read as bits)
        return f"{_integral_f64(ctx, fn)}({args[0]})"
    fa = [_fenced(ctx, ty, a, k) for k, a in enumerate(args)]
    if fn == "clamp":
        mx = _float_minmax(ctx, "max", ct)
        mn = _float_minmax(ctx, "min", ct)
        inner = _fence_fn(ctx, ct, 0)
        r = f"{mn}({inner}({mx}({fa[0]}, {fa[1]})), {fa[2]})"
    elif fn == "fma" and ty is T.F16:
        return f"{_fma_f16(ctx)}({', '.join(fa)})"
    elif fn == "fma" and ty is T.F32 and not ctx.fma_fused:
        if not ctx.wide_ok:
            raise UnsupportedFeature(
                "f32 fma", "wgpu",
                "this adapter's fma rounds twice (capabilities().details['fma_rounds_once'] "
                "is False) and it lacks the i64/f64 support vyre's exact fma needs; write "
                "a * b + c (two roundings) or use another backend",
            )
        r = f"{_fma_f32(ctx)}({', '.join(fa)})"
    elif fn == "fma" and ty is T.F64:
        r = f"{_fma_f64(ctx)}({', '.join(fa)})"
    elif fn == "sqrt" and ct is T.F32 and ctx.exact_sqrt:
        r = f"{_exact_sqrt_f32(ctx)}({fa[0]})"
    elif fn == "sqrt" and ct is T.F64 and ctx.exact_sqrt:
        r = f"{_exact_sqrt_f64(ctx)}({fa[0]})"
    elif fn in _FN_HOOKS:
        r = f"{_FN_HOOKS[fn](ctx, ct)}({', '.join(fa)})"
    elif fn in ("approx_sin", "approx_cos") and ct is T.F32 and ctx.wide_ok:
        r = f"{_sincos_f32(ctx, fn.removeprefix('approx_'))}({fa[0]})"
    elif fn == "approx_tan" and ct is T.F32:
        r = f"{_tan_f32(ctx)}({fa[0]})"
    elif fn in _DIRECT_FNS:
        r = f"{_DIRECT_FNS[fn]}({', '.join(fa)})"
    else:
        raise InvalidProgram(f"unknown function {fn}")
    if fn in _NO_ROUNDING:
        return f"f16({r})" if ty is T.F16 else r
    return _rounded(ctx, ty, r)


def _fma_minimal(ctx: _Ctx, e: N.Call, args: list[str]) -> str:
    """A native single-rounding f32 fma fenced as fences.fma_plan says."""
    plan = fma_plan(*(ctx.flow.kinds(x) for x in e.args))
    a, b, c = args
    if plan.mult_fence is not None:
        a, b = _plain_fenced(plan.mult_fence, a), _plain_fenced(plan.mult_fence, b)
    if plan.addend_fence:
        c = _plain_fenced(_DEF_FENCE, c)
    return f"fma({a}, {b}, {c})"


def _cast(ctx: _Ctx, src: ScalarType, dst: ScalarType, a: str) -> str:
    if src == dst:
        return a
    if dst.is_narrow and src is not T.BOOL and not src.is_float:
        # int -> narrow: the low bits (through u32, which keeps them), wrapped to the type
        return packed.narrowed(dst, _cast(ctx, src.promoted, T.U32, a))
    if src.is_narrow:  # held in its 32-bit integer, in range: that is its value
        return _cast(ctx, src.promoted, dst, a)
    d = wgsl_type(dst)
    if dst is T.BOOL:
        if src.is_float:  # NaN -> true; flush mode: a subnormal is 0
            ct = _compute_type(src)
            zero = _flt(ct, 0.0)
            return _fence_bool(ctx, f"!({_fenced(ctx, src, a, 0)} == {zero})")
        return f"({a} != {_zero(src)})"
    if src is T.BOOL:
        return f"select({_zero(dst)}, {d}(1), {a})"
    if src.is_float and dst.is_int:
        raise _unlowered(f"cast {src} -> {dst}")
    if src.is_float and dst.is_float:
        if src is T.F16:  # widening from f16 is exact (fenced: the f16 rounding must stay)
            return f"{d}({_fence_f16(ctx, 0)}({a}))"  # (an f32)
        if dst is T.F32 and ctx.flush and ctx.tininess in _TINY_BELOW:
            return _narrowed_f32(ctx, _fenced(ctx, src, a, 0))
        conv = f"{d}({_fenced(ctx, src, a, 0)})"
        return _rounded(ctx, dst, conv) if dst is T.F32 else conv
    if src.is_float or dst.is_float:
        return f"{d}({a})"
    # int -> int: wrap (low bits; sign-extend a signed source when widening)
    if src.bits == dst.bits:
        return f"bitcast<{d}>({a})"
    if dst.bits > src.bits:  # 32 -> 64
        wide = "i64" if src.is_signed else "u64"
        inner = f"{_sext64(ctx)}({a})" if src.is_signed else f"{wide}({a})"
        return inner if wide == d else f"bitcast<{d}>({inner})"
    # 64 -> 32: the low bits, in the source's signedness, then reinterpret
    narrow = "i32" if src.is_signed else "u32"
    inner = f"{narrow}({a})"
    return inner if narrow == d else f"bitcast<{d}>({inner})"


# ------------------------------------------------------------------ memory access


def _storage_ref(ctx: _Ctx, name: str) -> tuple[str, ScalarType]:
    """(WGSL variable, element type) of a buffer or workgroup array."""
    if name in ctx.arrays:
        return f"w_{mangle(name)}", ctx.arrays[name].ty
    slot = ctx.buffer_slot[name]
    return f"b_{mangle(name)}", ctx.program.buffers[slot].ty


def _index(ctx: _Ctx, index: N.ExprNode) -> str:
    """A store's or atomic's index; a literal one hidden from naga, which rejects a constant
    index it thinks is too large even under the index test that never runs it (as `expr`
    does for a load's)."""
    return expr(ctx, index, isinstance(index, N.Const))


def _raw_ref(ctx: _Ctx, node: N.Load | N.Store, index: str) -> str:
    """`var[index]` of a raw access of the core (vyre.lower made sure it is in range)."""
    if not isinstance(node, (N.RawLoad, N.RawStore)):
        raise _unlowered(f"a bounds-checked {node.kind} of {node.buffer!r}")
    return f"{_storage_ref(ctx, node.buffer)[0]}[{index}]"


def _vec_arrays(ctx: _Ctx) -> frozenset[str]:
    return frozenset() if ctx.vec is None else ctx.vec.arrays


def _lane_fn(ctx: _Ctx, name: str, store: bool) -> str:
    """The helper that reads (writes) element i of vec4 workgroup array `name`. In range
    by construction where i is (a raw access's index, i < count, count a multiple of 4:
    i >> 2 < count / 4, and i & 3 < 4); called from a guarded select, that select marks
    the module unproven (_guarded_load)."""
    arr, ty = _storage_ref(ctx, name)
    t = wgsl_type(ty)
    fn = f"vy_{'st' if store else 'ld'}_{arr}"
    code = (f"fn {fn}(i: u32, v: {t}) {{ {arr}[i >> 2u][i & 3u] = v; }}" if store
            else f"fn {fn}(i: u32) -> {t} {{ return {arr}[i >> 2u][i & 3u]; }}")
    return _helper(ctx, fn, code)


def _raw_load(ctx: _Ctx, e: N.Load, index: str) -> str:
    if e.buffer in _vec_arrays(ctx):
        _raw_ref(ctx, e, index)  # (refuses an unlowered access)
        return f"{_lane_fn(ctx, e.buffer, False)}({index})"
    if e.ty.is_narrow:  # packed words (packed.py)
        _raw_ref(ctx, e, index)
        var = _storage_ref(ctx, e.buffer)[0]
        name, code = packed.load_fn(var, e.ty, e.buffer in ctx.packed_stored)
        return f"{_helper(ctx, name, code)}({index})"
    ref = _raw_ref(ctx, e, index)
    if e.buffer not in ctx.atomic:
        return ref
    val = f"atomicLoad(&{ref})"
    return f"bitcast<f32>({val})" if e.buffer in ctx.wg_f32_atomic else val


def _raw_store(ctx: _Ctx, s: N.Store, index: str, value: str) -> str:
    if s.buffer in _vec_arrays(ctx):
        _raw_ref(ctx, s, index)
        return f"{_lane_fn(ctx, s.buffer, True)}({index}, {value});"
    if s.value.ty.is_narrow:  # into packed atomic words, the neighbours kept (packed.py)
        _raw_ref(ctx, s, index)
        name, code = packed.store_fn(_storage_ref(ctx, s.buffer)[0], s.value.ty)
        return f"{_helper(ctx, name, code)}({index}, {value});"
    ref = _raw_ref(ctx, s, index)
    if s.buffer in ctx.wg_f32_atomic:
        return f"atomicStore(&{ref}, bitcast<u32>({value}));"
    if s.buffer in ctx.atomic:
        return f"atomicStore(&{ref}, {value});"
    return f"{ref} = {value};"


_ATOMIC_FN = {
    "add": "atomicAdd", "min": "atomicMin", "max": "atomicMax", "and": "atomicAnd",
    "or": "atomicOr", "xor": "atomicXor", "exchange": "atomicExchange",
}


# ------------------------------------------------------------------ statements


def _block(ctx: _Ctx, body: tuple[N.StmtNode, ...], ind: str) -> list[str]:
    ctx.scopes.append({})
    ctx.flow.enter_scope()
    out: list[str] = []
    i = 0
    while i < len(body):
        run = None if ctx.vec is None else ctx.vec.run_at(body, i)
        if run is not None:
            out.extend(_vec_run(ctx, run, body[i:i + LANES], ind))
            i += LANES
        else:
            out.extend(_stmt(ctx, body[i], ind))
            i += 1
    ctx.flow.exit_scope()
    ctx.scopes.pop()
    return out


_LANE = "xyzw"


def _vec_run(ctx: _Ctx, run: Run, stmts: tuple[N.StmtNode, ...], ind: str) -> list[str]:
    """Four statements accessing elements base + c + l of a vec4 workgroup array as one
    vec4 load / store (vectors.py says why that is their own result); each value and each
    target goes through the fence flow as its own statement would."""
    arr, ty = _storage_ref(ctx, run.array)
    # In range by construction: each statement of a run is a raw access, so lane 0's index
    # base + c < count, and base + c is a multiple of 4 (count too): (base + c) >> 2, which
    # both spellings compute (split: base and c multiples of 4, no wrap), is < count / 4.
    if run.split:  # base + c never wraps: the constant part stays an immediate offset
        quad = f"({expr(ctx, run.base)} >> 2u)" + (f" + {run.quad}u" if run.quad else "")
    else:
        first = stmts[0]
        index = first.index if isinstance(first, N.Store) else first.value.index  # type: ignore[union-attr]
        quad = f"({_index(ctx, index)}) >> 2u"
    if run.op == "store":
        values = [_stored_value(ctx, s) for s in stmts]  # type: ignore[arg-type]
        return [f"{ind}{arr}[{quad}] = vec4<{wgsl_type(ty)}>({', '.join(values)});"]
    q = ctx.fresh("vy_q")
    out = [f"{ind}let {q}: vec4<{wgsl_type(ty)}> = {arr}[{quad}];"]
    for lane, s in enumerate(stmts):
        assert isinstance(s, (N.Let, N.Assign))
        kinds = ctx.flow.bound_kinds(s.value)
        if isinstance(s, N.Let):
            ctx.flow.declare(s.name, kinds)
            out.append(f"{ind}var {ctx.declare(s.name)}: {wgsl_type(ty)} = {q}.{_LANE[lane]};")
        else:
            ctx.flow.assign(s.name, kinds)
            out.append(f"{ind}{ctx.lookup(s.name)} = {q}.{_LANE[lane]};")
    return out


def _bound_value(ctx: _Ctx, value: N.ExprNode) -> str:
    """A Let / Assign value: a float constant is fenced once here (fences.py)."""
    text = expr(ctx, value)
    if ctx.minimal and isinstance(value, N.Const) and value.ty is T.F32:
        return _plain_fenced(_DEF_FENCE, text)
    return text


def _guarded_load(ctx: _Ctx, e: N.Guarded, cond: str, raw: str) -> str:
    """A load behind its index test as WGSL's eager `select`: the raw read runs even where
    the test fails, which WebGPU allows (an out-of-range read returns some value of the
    binding or 0, never a fault), and its value is then discarded. The 0 is fenced like a
    bound constant, so the select stays opaque (fences.py). The one access this printer
    prints out of range on purpose: the module keeps naga's bounds checks (without them an
    out-of-range read is undefined behaviour: workgroup memory has no robust access, nor
    has storage on a driver without robustBufferAccess)."""
    if ctx.unproven is None:
        read = e.a.buffer if isinstance(e.a, N.Load) else type(e.a).__name__
        ctx.unproven = f"the eager select load of {read!r}"
    return f"select({_bound_value(ctx, e.b)}, {raw}, {cond})"


def _stored_value(ctx: _Ctx, s: N.Store) -> str:
    """A stored value: fenced unless opaque, so a load the driver forwards it to is opaque;
    bare where the invocation never reads the buffer again (fences.reloaded_stores)."""
    value = s.value
    text = expr(ctx, value)
    if (ctx.minimal and value.ty is T.F32 and ctx.flow.kinds(value) != OPAQUE
            and id(s) in ctx.reloaded):
        return _plain_fenced(_DEF_FENCE, text)
    return text


def _stmt(ctx: _Ctx, s: N.StmtNode, ind: str) -> list[str]:
    nxt = ind + "    "
    if isinstance(s, N.Let):
        value = _bound_value(ctx, s.value)
        ctx.flow.declare(s.name, ctx.flow.bound_kinds(s.value))
        name = ctx.declare(s.name)
        return [f"{ind}var {name}: {wgsl_type(s.value.ty)} = {value};"]
    if isinstance(s, N.Assign):
        value = _bound_value(ctx, s.value)
        ctx.flow.assign(s.name, ctx.flow.bound_kinds(s.value))
        return [f"{ind}{ctx.lookup(s.name)} = {value};"]
    if isinstance(s, N.Store):
        return [f"{ind}{_raw_store(ctx, s, _index(ctx, s.index), _stored_value(ctx, s))}"]
    if isinstance(s, N.If):
        out = [f"{ind}if ({expr(ctx, s.cond)}) {{"]
        other = ctx.flow.copy()
        out += _block(ctx, s.then, nxt)
        then_flow, ctx.flow = ctx.flow, other
        if s.orelse:
            out.append(f"{ind}}} else {{")
            out += _block(ctx, s.orelse, nxt)
        ctx.flow.join(then_flow)
        out.append(f"{ind}}}")
        return out
    if isinstance(s, N.While):
        if ctx.count_loops:
            return _counted_while(ctx, s, ind)
        head = loop_head(ctx.flow, s)
        ctx.flow = head.copy()
        out = [f"{ind}loop {{", f"{nxt}if (!({expr(ctx, s.cond)})) {{ break; }}"]
        out += _block(ctx, s.body, nxt)
        ctx.flow = head  # the loop exits at its head
        out.append(f"{ind}}}")
        return out
    if isinstance(s, N.For):
        return _for(ctx, s, ind)
    if isinstance(s, N.Break):
        if ctx.count_loops:  # leave through the loop's one exit (loopcount.py)
            return [f"{ind}{ctx.loop_flags[-1]} = true; continue;"]
        return [f"{ind}break;"]
    if isinstance(s, N.Continue):
        return [f"{ind}continue;"]
    if isinstance(s, N.Return):
        if ctx.count_loops and ctx.loop_flags:
            ctx.returns_in_loops = True
            return [f"{ind}{loopcount.RETURNING} = true; {ctx.loop_flags[-1]} = true; continue;"]
        return [f"{ind}return;"]
    if isinstance(s, N.Barrier):
        if ctx.storage_barrier:
            return [f"{ind}storageBarrier(); workgroupBarrier();"]
        return [f"{ind}workgroupBarrier();"]
    if isinstance(s, N.Atomic):
        return _atomic(ctx, s, ind)
    raise InvalidProgram(f"unknown statement {type(s).__name__}")


def _for(ctx: _Ctx, s: N.For, ind: str) -> list[str]:
    """start/end once; var = start, start+1, ... < end (vyre.lower leaves only step 1,
    whose increment never overflows: it < hi <= MAX)."""
    if s.step != 1:
        raise _unlowered(f"a for loop with step {s.step}")
    t = wgsl_type(s.ty)
    sfx = _SUFFIX[s.ty]
    k = ctx.fresh("")
    lo, hi, it = f"vy_lo{k}", f"vy_hi{k}", f"vy_it{k}"
    nxt, inner = ind + "    ", ind + "        "
    counted = ctx.count_loops
    flag = f"vy_brk{k}" if counted and loopcount.leaves_by_jump(s.body) else None
    out = [
        f"{ind}{{",
        f"{nxt}let {lo}: {t} = {expr(ctx, s.start)};",
        f"{nxt}let {hi}: {t} = {expr(ctx, s.end)};",
        f"{nxt}var {it}: {t} = {lo};",
    ]
    if flag is not None:
        out.append(f"{nxt}var {flag} = false;")
    if counted:
        enter = "" if flag is None else f" {loopcount.enter()}"
        out.append(f"{nxt}if ({lo} < {hi}) {{{enter} loop {{  {loopcount.COUNTED}")
        ctx.loop_flags.append(flag)
    else:
        out.append(f"{nxt}if ({lo} < {hi}) {{ loop {{")
    head = loop_head(ctx.flow, s)
    ctx.flow = head.copy()
    ctx.scopes.append({})
    ctx.flow.enter_scope()
    ctx.flow.declare(s.var, VISIBLE)
    var = ctx.declare(s.var)
    out.append(f"{inner}let {var}: {t} = {it};")
    out += _block(ctx, s.body, inner)
    ctx.flow.exit_scope()
    ctx.scopes.pop()
    ctx.flow = head  # the loop exits at its head
    step = f"{inner}    {it} = {it} + 1{sfx};"
    if not counted:
        return [*out, f"{inner}continuing {{", step, f"{inner}    break if !({it} < {hi});",
                f"{inner}}}", f"{nxt}}} }}", f"{ind}}}"]
    ctx.loop_flags.pop()
    if flag is None:  # its only exit ends the count: a cut one stopped short of hi
        short = f"{it} < {hi} + {t}({U_VAR}.{ZERO_FIELD})"
        return [*out, f"{inner}continuing {{", step, f"{inner}    break if !({it} < {hi});",
                f"{inner}}}", f"{nxt}}} {loopcount.count_cut(short)} }}", f"{ind}}}"]
    end = f"vy_end{k}"
    out += [
        f"{inner}continuing {{", step, f"{inner}    let {end} = {flag} || !({it} < {hi});",
        f"{inner}    {loopcount.leave(end)}", f"{inner}    break if {end};", f"{inner}}}",
        f"{nxt}}} }}",
        *_after_counted_loop(ctx, s.body, nxt),
        f"{ind}}}",
    ]
    return out


def _counted_while(ctx: _Ctx, s: N.While, ind: str) -> list[str]:
    """A While on an adapter with a loop limit (loopcount.py): one exit, counted. Without
    a break or return of its own it exits at its head, as uncounted; with one, every way
    out sets its flag and leaves in the continuing block. Either way n iterations make
    n + 1 passes (measured: tests/test_wgpu_loop_budget.py)."""
    nxt = ind + "    "
    k = ctx.fresh("")
    flag = f"vy_brk{k}" if loopcount.leaves_by_jump(s.body) else None
    head = loop_head(ctx.flow, s)
    ctx.flow = head.copy()
    cond = expr(ctx, s.cond)
    out = [] if flag is None else [f"{ind}var {flag} = false;"]
    out += [f"{ind}{loopcount.enter()}", f"{ind}loop {{  {loopcount.COUNTED}"]
    if flag is None:
        end = f"vy_end{k}"
        out += [f"{nxt}let {end} = !({cond});", f"{nxt}{loopcount.leave(end)}",
                f"{nxt}if ({end}) {{ break; }}"]
    else:
        out.append(f"{nxt}if (!({cond})) {{ {flag} = true; continue; }}")
    ctx.loop_flags.append(flag)
    out += _block(ctx, s.body, nxt)
    ctx.loop_flags.pop()
    ctx.flow = head  # the loop exits at its head
    if flag is not None:
        out += [f"{nxt}continuing {{", f"{nxt}    {loopcount.leave(flag)}",
                f"{nxt}    break if {flag};", f"{nxt}}}"]
    out.append(f"{ind}}}")
    return out + _after_counted_loop(ctx, s.body, ind)


def _after_counted_loop(ctx: _Ctx, body: tuple[N.StmtNode, ...], ind: str) -> list[str]:
    """After a counted loop a `return` inside it left: leave the enclosing loop the same
    way (through its one exit), or return (loopcount.py: returns never leave a loop)."""
    if not loopcount.returns(body):
        return []
    then = f"{ctx.loop_flags[-1]} = true; continue;" if ctx.loop_flags else "return;"
    return [f"{ind}if ({loopcount.RETURNING}) {{ {then} }}"]


def _atomic_fn(ctx: _Ctx, s: N.Atomic) -> str:
    """One helper per (op, buffer) of the core's raw atomics (vyre.lower made sure the
    index is in range): the index is a function parameter, so naga never sees a constant
    index (it folds constants and rejects one out of range)."""
    if not isinstance(s, N.RawAtomic):
        raise _unlowered(f"a bounds-checked atomic of {s.buffer!r}")
    var, ty = _storage_ref(ctx, s.buffer)
    t = wgsl_type(ty)
    fn = f"vy_atomic_{s.op}_{var}"
    ptr = f"&{var}[i]"
    if s.buffer in ctx.wg_f32_atomic:
        return _wg_f32_atomic_fn(ctx, s, fn, ptr)
    if s.op == "compare_exchange":
        retry = _helper_loop(
            ctx, "    ", [f"let r = atomicCompareExchangeWeak({ptr}, c, v);", "old = r.old_value;"],
            "r.exchanged || r.old_value != c", [],
            "the weak form may fail spuriously: retry until decided")
        body = f"    var old: {t};\n{retry}    return old;\n"
        sig = f"fn {fn}(i: u32, v: {t}, c: {t}) -> {t} {{\n"
    else:
        body = f"    return {_ATOMIC_FN[s.op]}({ptr}, v);\n"
        sig = f"fn {fn}(i: u32, v: {t}) -> {t} {{\n"
    return _helper(ctx, fn, sig + body + "}")


def _wg_f32_atomic_fn(ctx: _Ctx, s: N.Atomic, fn: str, ptr: str) -> str:
    """An f32 atomic on a workgroup array (naga has no workgroup atomic<f32>): the bits live
    in an atomic<u32>; add is a compare-exchange loop around the IR's f32 addition."""
    if s.op == "exchange":
        body = f"    return bitcast<f32>(atomicExchange({ptr}, bitcast<u32>(v)));\n"
    elif s.op == "add":
        total = _float_binary(ctx, "add", T.F32, "bitcast<f32>(old)", "v")
        retry = _helper_loop(
            ctx, "    ", [f"let r = atomicCompareExchangeWeak({ptr}, old, bitcast<u32>({total}));"],
            "r.exchanged", ["old = r.old_value;"])
        body = f"    var old = atomicLoad({ptr});\n{retry}    return bitcast<f32>(old);\n"
    else:
        raise UnsupportedFeature(
            f"f32 atomic {s.op}", "wgpu", "only f32 atomic add (and exchange) exist in the IR"
        )
    return _helper(ctx, fn, f"fn {fn}(i: u32, v: f32) -> f32 {{\n{body}}}")


def _atomic(ctx: _Ctx, s: N.Atomic, ind: str) -> list[str]:
    fn = _atomic_fn(ctx, s)
    args = [_index(ctx, s.index), expr(ctx, s.value)]
    if s.comparand is not None:
        args.append(expr(ctx, s.comparand))
    call = f"{fn}({', '.join(args)})"
    if s.result is not None:
        _, ty = _storage_ref(ctx, s.buffer)
        ctx.flow.declare(s.result, VISIBLE)
        res = ctx.declare(s.result)
        return [f"{ind}var {res}: {wgsl_type(ty)} = {call};"]
    return [f"{ind}{call};"]


# ------------------------------------------------------------------ module


# Mesa's llvmpipe ends every loop once 65535 passes have run in a SIMD group, silently
# (loopcount.py). Where the probe found such a limit, every loop of the module is counted
# and an invocation that ends inside a loop flags LOOP_LIMIT_FLAG in the status buffer (the
# runtime then raises DispatchError). A module with a loop that is not counted (none is
# generated now; a safety net for new helper loops) ends with this sentinel instead: a
# loop that must iterate twice (its trip count is a uniform the compiler cannot know);
# once the budget is spent the driver ends it after one pass and the invocation flags it.
# It cannot tell a cut loop from a spent budget, so it raises for both (never silent).
# (vy_status[0] is in range by construction: the runtime binds 16 bytes, 4 words.)
LOOP_LIMIT_FLAG = 1
#: passes of the driver's budget the sentinel itself uses (only where it is emitted)
LOOP_SENTINEL_ITERATIONS = 2
_LOOP_SENTINEL = (
    "fn vy_loop_sentinel() {\n"
    "    var n = 0u;\n"
    f"    loop {{ n = n + 1u; if (n >= {LOOP_SENTINEL_ITERATIONS}u + {U_VAR}.{ZERO_FIELD}) "
    "{ break; } }\n"
    f"    if (n < {LOOP_SENTINEL_ITERATIONS}u) {{ atomicOr(&vy_status[0], {LOOP_LIMIT_FLAG}u); }}\n}}"
)
_MAIN_PARAMS = (
    ("vy_gid", "global_invocation_id", "vec3<u32>"),
    ("vy_lid", "local_invocation_id", "vec3<u32>"),
    ("vy_wid", "workgroup_id", "vec3<u32>"),
    ("vy_nwg", "num_workgroups", "vec3<u32>"),
    ("vy_lidx", "local_invocation_index", "u32"),
)
# (no leading \b: a pattern starting with a literal is searched for that literal, 20 times
# faster; _builtins_read checks the word boundary before it)
_BUILTIN_NAME = re.compile(r"vy_(?:gid|lid|wid|nwg|lidx|sgsize)\b")
# only where the program uses subgroups (the device then has wgpu's "subgroup" feature).
# The lane is local_index mod size (docs/IR.md; the adapter probe checks the driver agrees):
# naga refuses @builtin(subgroup_invocation_id) in multi-dimensional workgroups.
_SUBGROUP_PARAMS = (("vy_sgsize", "subgroup_size", "u32"),)


def _builtins_read(code: str) -> set[str]:
    """The names of `_MAIN_PARAMS` / `_SUBGROUP_PARAMS` that `code` reads, as whole words
    (no name holds a `v`, so no match can hide another one starting inside it)."""
    read: set[str] = set()
    for m in _BUILTIN_NAME.finditer(code):
        i = m.start()
        if i == 0 or not (code[i - 1].isalnum() or code[i - 1] == "_"):  # re's \w
            read.add(m.group())
    return read


def generate(
    program: N.Program,
    read_write_slots: frozenset[int] = frozenset(),
    allowed_types: frozenset[ScalarType] | None = None,
    fma_fused: bool = True,
    flush_subnormals: bool = False,
    native_flush: bool = False,
    exact_div: bool = False,
    exact_sqrt: bool = False,
    loop_limited: bool = False,
    options: WgpuOptions = DEFAULT_OPTIONS,
    flush_tininess: str = F.TININESS_SUBNORMAL_RESULT,
) -> WgslModule:
    """WGSL for `program`. Slots in `read_write_slots` are declared read_write even if the
    program only reads them (aliasing with a writable slot). `allowed_types`: the scalar
    types the device supports (None: all; bool, i32, u32 and f32 always).
    `flush_subnormals`: generate docs/IR.md's flush
    mode for f32 (for a device whose arithmetic flushes f32 subnormals); `native_flush`:
    the device's own f32 add, sub, mul and fma compute that mode (native_flush.py), so they
    are spelled as outside it; `flush_tininess`: the mode's tininess rule (the device's,
    measured), which narrowing casts spell. `exact_div` /
    `exact_sqrt`: f32 division / sqrt by vyre's exact method (the driver's is not correctly
    rounded). `loop_limited`: the driver silently ends long loops; count every loop
    (loopcount.py) and flag a cut one in a status buffer. `options`: the instance's test and
    measurement switches (options.py): `bad_base`, the exact fast paths start from a
    deliberately worse estimate, to test their correction; `all_fences`, fence every f32
    operand instead of only those fences.py requires; `storage_barriers`, every Barrier also
    a storageBarrier, instead of only where barriers.py finds one observable; `vectors`,
    runs of four adjacent workgroup-array accesses as one vec4 (vectors.py), False keeps
    every access scalar."""
    bad_base, all_fences = options.bad_base, options.all_fences
    storage_barriers, vectors = options.storage_barriers, options.vectors
    validate(program)  # every printer refuses a bad Program the same way: InvalidProgram
    user_hash = program.content_hash  # (the user's Program: cached, and what caches key on)
    # the types and subgroup use of the user's Program (cached, found by the feature checks
    # before this): the lowering adds no subgroup operation and no type beyond u32 / i32 /
    # f32 / bool, which every device has, except f64 for the functions' exact definitions
    # (vyre.lower.maths, checked below), so the lowered Program is not walked again
    used, subgroups = types_used(program), uses_subgroups(program)
    # (and which statements it has: the lowering adds no loop, atomic or barrier either)
    looped = has_any(program, (N.For, N.While))
    atomics = has_any(program, (N.Atomic, N.RawAtomic))
    barriers = has_any(program, (N.Barrier,))
    if allowed_types is not None:
        for missing in sorted(used - allowed_types):
            raise UnsupportedFeature(
                missing.feature or str(missing), "wgpu",
                f"this device/naga cannot emit {missing} in WGSL",
            )
        if T.F64 not in allowed_types:
            exact_fns = lowered_calls(program)
            if exact_fns:  # (their exact definitions evaluate in f64: vyre.lower.maths)
                fn = exact_fns[0]
                raise UnsupportedFeature(
                    f"exact {fn}", "wgpu",
                    f"vyre's exact {', '.join(exact_fns)} evaluate in f64 and this adapter "
                    f"has no shader-f64; call vyre.approx.{fn} (the device's own {fn}, "
                    "backend-dependent within docs/IR.md's bound) or use the cuda or "
                    "reference backend",
                )
    program = lower(program, TRAITS if looped else STRAIGHT_TRAITS)
    atomic = atomic_buffers(program) if atomics else frozenset()
    ctx = _Ctx(
        program=program,
        atomic=atomic,
        buffer_slot={b.name: i for i, b in enumerate(program.buffers)},
        arrays={a.name: a for a in program.workgroup_arrays},
        wide_ok=allowed_types is None or {T.I64, T.U64, T.F64} <= allowed_types,
        fma_fused=fma_fused,
        flush=flush_subnormals,
        tininess=flush_tininess,
        native_flush=flush_subnormals and native_flush and not all_fences,
        exact_div=exact_div,
        exact_sqrt=exact_sqrt,
        bad_base=bad_base,
        minimal=not (all_fences or (flush_subnormals and not native_flush)),
        reloaded=reloaded_stores(program.body),
        storage_barrier=storage_barriers or (
            barriers and needs_storage_barrier(program, read_write_slots)),
        wg_f32_atomic=frozenset(
            a.name for a in program.workgroup_arrays if a.name in atomic and a.ty is T.F32
        ),
        # (no runs, as without workgroup arrays: none, so nothing asks it per statement)
        vec=plan_vectors(program) if vectors and program.workgroup_arrays else None,
        count_loops=loop_limited,
        hoisted={},
        packed_stored=frozenset(s.buffer for s in walk_stmts(program.body)
                                if isinstance(s, N.Store) and s.value.ty.is_narrow),
    )
    if ctx.vec is not None and not ctx.vec.runs:
        ctx.vec = None
    ctx.scopes.append({})
    mangled_params = tuple(mangle(p.name) for p in program.params)
    layout = layout_for(program, mangled_params)
    body = _block(ctx, program.body, "    ")
    assert ctx.hoisted is not None
    body[:0] = [f"    let {name}: {wgsl_type(ty)} = {text};"
                for text, (name, ty) in ctx.hoisted.items()]

    decls: list[str] = []
    decls.append(layout.struct_source())
    decls.append(f"@group(0) @binding(0) var<uniform> {U_VAR}: VyUniforms;")
    access: list[str] = []
    for i, b in enumerate(program.buffers):
        acc = "read_write" if (b.writable or i in read_write_slots) else "read"
        access.append(acc)
        t = "u32" if b.ty.is_narrow else wgsl_type(b.ty)  # (narrow: packed words)
        elem = f"atomic<{t}>" if b.name in atomic or b.name in ctx.packed_stored else t
        decls.append(
            f"@group(0) @binding({i + 1}) var<storage, {acc}> b_{mangle(b.name)}: array<{elem}>;"
            f"  // {b.name!r}, {b.access}"
        )
    for a in program.workgroup_arrays:
        t = wgsl_type(a.ty)
        elem = f"atomic<{t}>" if a.name in atomic else t
        count = a.count
        if a.name in ctx.wg_f32_atomic:  # naga has no workgroup atomic<f32>: bits in a u32
            elem = "atomic<u32>"
        if a.name in _vec_arrays(ctx):  # elements i..i+3 (i a multiple of 4) as one vec4
            elem, count = f"vec4<{t}>", a.count // LANES
        if a.ty.is_narrow:  # packed u32 words (packed.py)
            elem = "atomic<u32>" if a.name in ctx.packed_stored else "u32"
            count = packed.words(a.ty, a.count)
        decls.append(f"var<workgroup> w_{mangle(a.name)}: array<{elem}, {count}>;  // {a.name!r}")
    code = "\n".join([*body, *ctx.helpers.values()])
    has_loop = "loop {" in code or "for (" in code
    status = len(program.buffers) + 1 if loop_limited and has_loop else None
    counted = status is not None and loopcount.all_counted(code)
    if status is not None:  # (the sentinel's fallback keeps the counted loops' counting)
        decls.append(
            f"@group(0) @binding({status}) var<storage, read_write> vy_status: array<atomic<u32>>;"
        )
        decls.append(loopcount.DECLARATION)
    if ctx.returns_in_loops:
        body = [f"    var {loopcount.RETURNING} = false;", *body]

    x, y, z = program.workgroup_size
    # only the builtins the code reads (a smaller entry point for the driver)
    read = _builtins_read(code)
    params = tuple(p for p in _MAIN_PARAMS + (_SUBGROUP_PARAMS if subgroups else ())
                   if p[0] in read)
    head = [f"// vyre program {program.name!r} ({user_hash[:16]})"]
    if T.F16 in used:
        head.append("enable f16;")
    entry = [
        f"@compute @workgroup_size({x}, {y}, {z})",
        "fn main(",
        *[f"    @builtin({b}) {n}: {t}," for n, b, t in params],
        ") {",
    ]
    if status is None:
        entry += [*body, "}"]
    else:  # the program as a function (its `return`s end it), then the loop check
        cut = f"atomicOr(&vy_status[0], {LOOP_LIMIT_FLAG}u);"
        entry += [
            f"    vy_program({', '.join(n for n, _, _ in params)});",
            f"    {loopcount.check(cut)}" if counted else "    vy_loop_sentinel();",
            "}",
            "",
            *([] if counted else [_LOOP_SENTINEL, ""]),
            f"fn vy_program({', '.join(f'{n}: {t}' for n, _, t in params)}) {{",
            *body,
            "}",
        ]
    src = "\n".join(
        [*head, "", *decls, "", *[ctx.helpers[k] for k in ctx.helpers], "", *entry, ""]
    )
    return WgslModule(
        source=src, layout=layout, storage_access=tuple(access), status_binding=status,
        unproven_access=ctx.unproven,
    )
