"""IR -> WGSL code generation, honouring docs/IR.md exactly where WGSL differs.

Where WGSL's own rule differs from the IR's (NaN in min/max, constant folding of
overflowing literals, float accuracy), the generated code spells the IR's rule out with
small helper functions that are emitted only when used; integer division, shifts, abs,
float->int casts and out-of-bounds access arrive lowered by vyre.lower (memory accesses
as raw ones behind the IR's index tests, against the element counts passed in the
uniform block: the code never relies on robust buffer access or `arrayLength` for a value;
a guarded load's read runs where its test fails, which WebGPU defines, and is discarded).
`generate` lowers the Program, prints its body with printer.py's WgslPrinter and builds
the module around it here: the declarations, the helpers, the entry point and the loop
check.

This module is pure: Program in, source text out. It must never touch a device, and it
must never decide which features a device has (the caller passes what may be emitted).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from vyre import features as F
from vyre.errors import UnsupportedFeature
from vyre.ir import nodes as N
from vyre.ir.analysis import atomic_buffers, has_any, types_used, uses_subgroups, walk_stmts
from vyre.ir.types import ScalarType
from vyre.ir.validate import validate
from vyre.lower import Traits, lower, mangle
from vyre.lower.maths import lowered_calls

from . import loopcount, packed
from .barriers import needs_storage_barrier
from .expressions import EXACT_F64, NO_F64
from .fences import reloaded_stores
from .memory import _vec_arrays
from .options import DEFAULT_OPTIONS, WgpuOptions
from .printer import WgslPrinter
from .spelling import U_VAR, T, wgsl_type
from .uniforms import ZERO_FIELD, UniformLayout, layout_for
from .vectors import LANES, plan_vectors

__all__ = ["EXACT_F64", "LOOP_LIMIT_FLAG", "LOOP_SENTINEL_ITERATIONS", "NO_F64", "STRAIGHT_TRAITS", "TRAITS",
           "WgslModule", "generate", "wgsl_type"]

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
# the traits of each (looped, wide, fused fma, native div, native sqrt): made once, as
# dataclasses.replace costs a few us a compile (Traits is frozen, so sharing one is safe)
_TRAITS_OF: dict[tuple[bool, bool, bool, bool, bool], Traits] = {}


def _traits(looped: bool, wide: bool, fused_fma: bool, float_div: bool,
            float_sqrt: bool) -> Traits:
    """The lowering's traits for a program (`looped`: it has a loop) on a device."""
    key = (looped, wide, fused_fma, float_div, float_sqrt)
    t = _TRAITS_OF.get(key)
    if t is None:
        t = _TRAITS_OF[key] = replace(TRAITS if looped else STRAIGHT_TRAITS, wide=wide,
                                      fused_fma=fused_fma, float_div=float_div,
                                      float_sqrt=float_sqrt)
    return t


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
    `exact_sqrt`: division / sqrt by vyre's exact method (the driver's is not correctly
    rounded; vyre.lower.divsqrt's definitions).
    `loop_limited`: the driver silently ends long loops; count every loop
    (loopcount.py) and flag a cut one in a status buffer. `options`: the instance's
    measurement switches (options.py): `all_fences`, fence every f32
    operand instead of only those fences.py requires; `storage_barriers`, every Barrier also
    a storageBarrier, instead of only where barriers.py finds one observable; `vectors`,
    runs of four adjacent workgroup-array accesses as one vec4 (vectors.py), False keeps
    every access scalar."""
    all_fences = options.all_fences
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
    wide_ok = allowed_types is None or {T.I64, T.U64, T.F64} <= allowed_types
    program = lower(program, _traits(looped, wide_ok, fma_fused, not exact_div,
                                     not exact_sqrt))
    atomic = atomic_buffers(program) if atomics else frozenset()
    ctx = WgslPrinter(
        program=program,
        atomic=atomic,
        buffer_slot={b.name: i for i, b in enumerate(program.buffers)},
        arrays={a.name: a for a in program.workgroup_arrays},
        wide_ok=wide_ok,
        fma_fused=fma_fused,
        flush=flush_subnormals,
        tininess=flush_tininess,
        native_flush=flush_subnormals and native_flush and not all_fences,
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
    body = ctx.block_lines(program.body, 1)
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
