"""The WGSL printer's atomics: one helper function per (operation, buffer).

The index is the helper's parameter, so naga never sees a constant index; f32 atomics on
workgroup arrays are compare-exchange loops over the bits (naga has no workgroup
atomic<f32>). Must never touch a device.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from vyre.errors import UnsupportedFeature
from vyre.ir import nodes as N

from .expressions import _float_binary
from .fences import VISIBLE
from .maths import _helper_loop
from .memory import _index, _storage_ref
from .spelling import T, _helper, wgsl_type

if TYPE_CHECKING:
    from .state import WgslState as _Ctx


_ATOMIC_FN = {
    "add": "atomicAdd", "min": "atomicMin", "max": "atomicMax", "and": "atomicAnd",
    "or": "atomicOr", "xor": "atomicXor", "exchange": "atomicExchange",
}


def _atomic_fn(ctx: _Ctx, s: N.Atomic) -> str:
    """One helper per (op, buffer) of the core's raw atomics (vyre.lower made sure the
    index is in range): the index is a function parameter, so naga never sees a constant
    index (it folds constants and rejects one out of range)."""
    if not isinstance(s, N.RawAtomic):
        raise ctx.unlowered(f"a bounds-checked atomic of {s.buffer!r}")
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


def _atomic(ctx: _Ctx, s: N.Atomic, d: int) -> list[str]:
    ind = ctx.indent(d)
    fn = _atomic_fn(ctx, s)
    args = [_index(ctx, s.index), ctx.expr(s.value)]
    if s.comparand is not None:
        args.append(ctx.expr(s.comparand))
    call = f"{fn}({', '.join(args)})"
    if s.result is not None:
        _, ty = _storage_ref(ctx, s.buffer)
        ctx.flow.declare(s.result, VISIBLE)
        res = ctx.declare(s.result)
        return [f"{ind}var {res}: {wgsl_type(ty)} = {call};"]
    return [f"{ind}{call};"]
