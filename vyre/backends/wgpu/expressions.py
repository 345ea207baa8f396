"""The WGSL printer's expression spellings: each expression kind of the lowered core.

Where WGSL's own rule differs from the IR's (NaN in min/max, constant folding of
overflowing literals, float accuracy), the spelling calls a helper (maths.py) or fences its
operands (float_fences.py). Integer arithmetic of builtins and constants (the global id) is
hoisted into `let`s of the entry point. Must never touch a device.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from vyre.errors import InvalidProgram, UnsupportedFeature
from vyre.ir import nodes as N
from vyre.ir import ops
from vyre.ir.types import ScalarType
from vyre.ir.visit import children
from vyre.lower import mangle
from vyre.subgroups import identity as sg_identity

from . import packed
from .fences import VISIBLE, FenceFlow, fma_plan
from .float_fences import (
    _DEF_FENCE,
    _TINY_BELOW,
    _bare,
    _compute_type,
    _fence_bool,
    _fence_f16,
    _fence_fn,
    _fenced,
    _left_to_device,
    _narrowed_f32,
    _plain_fenced,
    _rounded,
)
from .maths import (
    _asin,
    _atan2_f32,
    _float_abs,
    _float_minmax,
    _integral_f64,
    _sincos_f32,
    _tan_f32,
)
from .memory import _guarded_load, _raw_load
from .spelling import (
    _AXES,
    _BUILTIN_VAR,
    _DIRECT_FNS,
    _SIMPLE_BIN,
    _SUFFIX,
    U_VAR,
    T,
    _float_text,
    _flt,
    _helper,
    _identity_fn,
    _zero,
    literal,
    wgsl_type,
)
from .uniforms import ZERO_FIELD

if TYPE_CHECKING:
    from .state import WgslState as _Ctx


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
        text = ctx.expr(e)
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


def _intercept(ctx: _Ctx, e: N.ExprNode) -> str | None:
    """An invariant integer expression (see _invariant) as its hoisted `let`."""
    if ctx.hoisted is not None and _invariant(ctx, e) == 2:
        return _hoisted(ctx, e)
    return None


def _opaque_operands(ctx: _Ctx, kids: tuple[N.ExprNode, ...]) -> bool:
    """An operator over literals only would be folded by WGSL's constant evaluator, which
    rejects overflow, division by zero and a constant index past a fixed-size array (even
    under an index test that never runs it); hiding its literals makes it a runtime value.
    (Float operands are fenced by the operators themselves, see _fence_fn.)"""
    if not kids:
        return False
    for k in kids:
        tk = type(k)
        if not (tk is N.Const or (tk is N.Length and k.buffer in ctx.arrays)):  # type: ignore[union-attr]
            return False
    return True


# the expressions without operands but a Const, by their exact class (none derives from
# them): never hoisted (_invariant gives a builtin 1, the others 0)
LEAVES: dict[type, Callable[[_Ctx, Any, bool], str]] = {
    N.Const: literal, N.Var: _var, N.Param: _param, N.Builtin: _builtin, N.Length: _length,
}


# ------------------------------------------------------------------ each kind's spelling


def _on_operands(spell: Callable[..., str]) -> Callable[[_Ctx, Any], str]:
    """The spelling of a kind whose `spell(ctx, e, *operand_texts)` takes its operands' text."""
    def spelled(ctx: _Ctx, e: Any) -> str:
        return spell(ctx, e, *ctx.operands(e))
    return spelled


def _on_operand_list(spell: Callable[[_Ctx, Any, list[str]], str]) -> Callable[[_Ctx, Any], str]:
    """The spelling of a kind whose `spell(ctx, e, operand_texts)` takes them as one list."""
    def spelled(ctx: _Ctx, e: Any) -> str:
        return spell(ctx, e, ctx.operands(e))
    return spelled


def _guarded_node(ctx: _Ctx, e: N.Guarded) -> str:
    """A guarded load (STRAIGHT_TRAITS): see _guarded_load."""
    cond, raw, _ = ctx.operands(e)
    return _guarded_load(ctx, e, cond, raw)


def _select_node(ctx: _Ctx, e: N.Select) -> str:
    cond, a, b = ctx.operands(e)
    return f"select({b}, {a}, {cond})"


def _cast_node(ctx: _Ctx, e: N.Cast) -> str:
    return _cast(ctx, e.a.ty, e.ty, ctx.operands(e)[0])


def _bitcast_node(ctx: _Ctx, e: N.Bitcast) -> str:
    a = ctx.operands(e)[0]
    if e.a.ty == e.ty:
        return a
    if e.ty.is_narrow:  # u8 <-> i8, u16 <-> i16: the same bits, wrapped (a cast)
        return _cast(ctx, e.a.ty, e.ty, a)
    return f"bitcast<{wgsl_type(e.ty)}>({a})"


def _invoke_node(ctx: _Ctx, e: N.Invoke) -> str:
    args = ctx.operands(e)
    return f"{_function(ctx, e.fn)}({', '.join(args)})"


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

        def write() -> None:
            for st in fn.body:
                ctx.stmt(st, 1)

        body = ctx.capture(write)
        result = ctx.expr(fn.result)  # (in the body's scope: it reads the body's locals)
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
    if e.op == "approx_sqrt":  # an estimate (vyre.lower.divsqrt corrects it)
        return f"sqrt({args[0]})"
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
    sym = {"div": "/", "approx_div": "/", "rem": "%", "shl": "<<", "shr": ">>"}[e.op]
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
    if op in _ARITH_SYM:  # (division arrives lowered where the driver's is not exact)
        return _rounded(ctx, ty, f"({fa} {_ARITH_SYM[op]} {fb})")
    if op == "rem":
        raise ctx.unlowered(f"rem on {ty}")
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
        raise ctx.unlowered(f"{op} on {ty}")
    if op in ("min", "max"):
        return f"{op}({a}, {b})"
    return f"({a} {_SIMPLE_BIN[op]} {b})"


# GLSL.std.450 (what naga lowers these to) defines them for 16- and 32-bit floats only;


# NVIDIA returns garbage for f64 (exp2(0.0) -> 0) or crashes compiling them.
# the functions with an exact f64 definition (vyre.lower.maths) never reach the printer
EXACT_F64 = tuple(op.name for op in ops.CALL_OPS if "f64" in op.exact_types)
NO_F64 = frozenset(op.name for op in ops.CALL_OPS
                   if not op.wgsl_f64 and op.name not in EXACT_F64)
# results that are one of the (flushed) operands or integral: never a new subnormal
_NO_ROUNDING = frozenset({"min", "max", "clamp", "floor", "ceil", "trunc", "round"})


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
            raise ctx.unlowered(f"abs on {ty}")
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
    elif fn == "fma" and ty is T.F32 and not ctx.fma_fused:  # (lowered where wide_ok:
        # vyre.lower.fma)
        raise UnsupportedFeature(
            "f32 fma", "wgpu",
            "this adapter's fma rounds twice (capabilities().details['fma_rounds_once'] "
            "is False) and it lacks the i64/f64 support vyre's exact fma needs; write "
            "a * b + c (two roundings) or use another backend",
        )
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
        raise ctx.unlowered(f"cast {src} -> {dst}")
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


EXPRESSIONS: dict[type, Callable[[_Ctx, Any], str]] = {
    N.Binary: _on_operands(_binary), N.Load: _on_operands(_raw_load),
    N.Guarded: _guarded_node, N.Unary: _on_operands(_unary), N.Call: _on_operand_list(_call),
    N.Select: _select_node, N.Cast: _cast_node, N.Bitcast: _bitcast_node,
    N.Native: _on_operand_list(_native), N.Table: _on_operands(_table),
    N.Invoke: _invoke_node, N.Subgroup: _on_operand_list(_subgroup),
}
