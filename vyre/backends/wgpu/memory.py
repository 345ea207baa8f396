"""The WGSL printer's memory accesses: loads, stores, vec4 runs and barriers.

Every access is a raw one of the lowered core (vyre.lower put the index tests around it);
each array index this module prints is in range by construction, as its comments say
(WgslModule.unproven_access), except the eager select of a guarded load. Must never touch
a device.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from vyre.ir import nodes as N
from vyre.ir.types import ScalarType
from vyre.lower import mangle

from . import packed
from .fences import OPAQUE
from .float_fences import _DEF_FENCE, _plain_fenced
from .spelling import T, _helper, wgsl_type
from .vectors import Run

if TYPE_CHECKING:
    from .state import WgslState as _Ctx

# Array accesses the printer makes itself, audited for modules without naga's bounds checks
# (WgslModule.unproven_access): each is in range by construction, as its comment says
# (_raw_ref, atomics._atomic_fn, _lane_fn, _vec_run, packed.py, maths.py's vy_inv_pio4,
# render.py's vy_status), except the eager select of a guarded load (_guarded_load), which
# marks its module unproven. Uniforms are struct fields; subgroup shuffles index no array.


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
    return ctx.expr(index, isinstance(index, N.Const))


def _raw_ref(ctx: _Ctx, node: N.Load | N.Store, index: str) -> str:
    """`var[index]` of a raw access of the core (vyre.lower made sure it is in range)."""
    if not isinstance(node, (N.RawLoad, N.RawStore)):
        raise ctx.unlowered(f"a bounds-checked {node.kind} of {node.buffer!r}")
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
        quad = f"({ctx.expr(run.base)} >> 2u)" + (f" + {run.quad}u" if run.quad else "")
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
    text = ctx.expr(value)
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
    text = ctx.expr(value)
    if (ctx.minimal and value.ty is T.F32 and ctx.flow.kinds(value) != OPAQUE
            and id(s) in ctx.reloaded):
        return _plain_fenced(_DEF_FENCE, text)
    return text


def _barrier(ctx: _Ctx, s: N.Barrier, d: int) -> list[str]:
    if ctx.storage_barrier:
        return [f"{ctx.indent(d)}storageBarrier(); workgroupBarrier();"]
    return [f"{ctx.indent(d)}workgroupBarrier();"]
