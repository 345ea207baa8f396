"""Program IR -> CUDA C source (one `extern "C"` kernel per Program).

`generate` validates the Program and lowers it with vyre.lower (integer division and
remainder, shifts, integer abs, float -> int casts, float rem, f16 arithmetic and the
bounds checks of loads / stores / atomics arrive as the core: C operators on in-domain
operands, f16 in f32, raw memory accesses behind the IR's own index tests, against the
element counts passed as kernel arguments). This printer spells the core and keeps what
is C's own business: integer arithmetic in unsigned types (wrapping, no C undefined
behaviour), float min/max as fminf/fmaxf (IEEE minNum/maxNum), round as
rintf (half to even), For loops whose increment never overflows; a run of statements
loading consecutive elements (x_l = buf[base + c + l]) is one vector load where aligned
and in bounds, else the same guarded scalar loads. f16 values are kept as
their 16-bit pattern and converted with PTX `cvt` (no cuda_fp16.h needed: the NVRTC wheel
ships no headers). Helpers of the prelude are emitted only when the kernel uses them.

Kernel arguments, in this order: one pointer per buffer (declaration order), one u32
element count per buffer, then the params (declaration order). `KernelSignature` describes
that layout for the launcher.

This module must never talk to NVRTC or the driver, and never emits fast-math constructs.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from vyre.ir import nodes as N
from vyre.ir.analysis import uses_subgroups
from vyre.ir.validate import validate
from vyre.lower import Traits, lower
from vyre.subgroups import check_fits

from .lockstep import LockstepPrinter
from .options import DEFAULT_OPTIONS, CudaOptions
from .prelude import PRELUDE_SLOT, prelude
from .printer import CudaPrinter
from .spelling import ARG_SIZE, CTYPE, STRUCT_CODE, SUBGROUP_SIZE, ScalarType, mangle

__all__ = ["KERNEL_NAME", "STRUCT_CODE", "SUBGROUP_SIZE", "Generated", "KernelSignature",
           "coarsening_allowed", "generate", "lockstep_allowed", "pack_params"]

KERNEL_NAME = "vyre_main"
# C's own integer division, shifts, abs, float -> int casts and memory accesses differ
# from the IR's (or are undefined) outside their domain: vyre.lower rewrites all of them
# into the core, where only in-domain `Native` operations and in-range raw accesses reach
# this printer. C's `?:` evaluates only the operand it chooses: guarded loads stay
# expressions (which the lockstep vectoriser merges into vector loads). Float division and
# sqrt are correctly rounded (nvrtc.py: --prec-div, --prec-sqrt), fma rounds once.
TRAITS = Traits(guarded_expr=True, in_place=True, float_div=True, float_sqrt=True,
                fused_fma=True, fused_fma_f16_f64=True, indexed_tables=True)
# the lockstep body evaluates values, conditions and hoisted loads of every invocation
# ahead of the conditions around them: each access keeps its own index test there
LOCKSTEP_TRAITS = Traits(guarded_expr=True, float_div=True, float_sqrt=True, fused_fma=True,
                         fused_fma_f16_f64=True, indexed_tables=True)

@dataclass(frozen=True)
class KernelSignature:
    """The kernel's argument list: buffer pointers, u32 counts, then params."""

    buffers: tuple[ScalarType, ...]
    params: tuple[ScalarType, ...]
    grid_x: bool = False  # a trailing u32: the dispatch's workgroup count along x (merged)
    # indirect grids: trailing (grid pointer, status pointer, u32 per-dimension limit)
    indirect: bool = False

    def layout(self) -> tuple[list[int], int]:
        """(offset of each argument in a packed, naturally aligned block, block size)."""
        offsets: list[int] = []
        pos = 0
        sizes = [8] * len(self.buffers) + [4] * len(self.buffers)
        sizes += [ARG_SIZE[t] for t in self.params]
        sizes += [4] if self.grid_x else []
        sizes += [8, 8, 4] if self.indirect else []
        for s in sizes:
            pos = (pos + s - 1) // s * s
            offsets.append(pos)
            pos += s
        return offsets, max(pos, 8)


@dataclass(frozen=True)
class Generated:
    source: str
    signature: KernelSignature
    block: tuple[int, int, int]
    merge: int = 1  # workgroups per CUDA block along x: launch ceil(grid.x / merge) blocks


def _kernel(gen: CudaPrinter) -> str:
    """The kernel: its signature, each invocation's ids, then the body `gen` prints."""
    p = gen.p
    wx, wy, wz = p.workgroup_size
    k = gen.coarsen
    bx = wx // k  # CUDA threads along x; each runs `k` IR invocations
    restrict = " __restrict__" if gen.restrict else ""
    args: list[str] = []
    for b in p.buffers:
        const = "const " if b.access == "read" else ""
        args.append(f"{const}{CTYPE[b.ty]}*{restrict} {mangle('b', b.name)}")
    args += [f"const unsigned {mangle('n', b.name)}" for b in p.buffers]
    args += [f"const {CTYPE[q.ty]} {mangle('p', q.name)}" for q in p.params]
    m = gen.merge
    if m > 1:
        args.append("const unsigned vy_gridx")
    if gen.indirect:
        args += ["const unsigned* __restrict__ vy_grid", "volatile unsigned* vy_status",
                 "const unsigned vy_limit"]
    head = [
        f"// vyre program {p.name!r}, workgroup size ({wx}, {wy}, {wz})",
        "// generated by vyre.backends.cuda.render; arguments: buffer pointers,",
        "// u32 element counts, params (declaration order)",
    ]
    if k > 1:
        head.append(f"// coarsened: each CUDA thread runs {k} invocations of its workgroup "
                    f"(local_id.x = threadIdx.x + j * {bx}); no barriers in this program")
    head += [
        PRELUDE_SLOT,
        f'extern "C" __global__ void __launch_bounds__({bx * m * wy * wz}) {KERNEL_NAME}(',
        "    " + (",\n    ".join(args) if args else "void") + ") {",
    ]
    for a in p.workgroup_arrays:
        # 16-byte aligned so NVCC can merge runs of aligned scalar loads into 128-bit ones
        head.append(f"  __shared__ __align__(16) {CTYPE[a.ty]} {mangle('s', a.name)}"
                    f"[{a.count}];")
    dims = ((wx, "x"), (wy, "y"), (wz, "z"))
    if gen.indirect:
        return _indirect_kernel(gen, head)
    per_j: list[str] = []
    for i, (w, ax) in enumerate(dims):
        lid = f"  const unsigned vy_lid{i} = threadIdx.{ax};"
        gid = f"  const unsigned vy_gid{i} = vy_wid{i} * {w}u + vy_lid{i};"
        if i == 0 and m > 1:  # block b runs workgroups b*m .. b*m+m-1 (those < grid.x)
            head += [
                f"  // merged: {m} workgroups of {bx} threads per CUDA block",
                f"  const unsigned vy_wid0 = blockIdx.x * {m}u + threadIdx.x / {bx}u;",
                "  const unsigned vy_nwg0 = vy_gridx;",
                f"  const unsigned vy_tx = threadIdx.x % {bx}u;",
                "  if (vy_wid0 >= vy_nwg0) return;  // past the grid: no barriers here",
            ]
        else:
            head.append(f"  const unsigned vy_wid{i} = blockIdx.{ax};")
            head.append(f"  const unsigned vy_nwg{i} = gridDim.{ax};")
        if i == 0 and k > 1:
            per_j += [f"  const unsigned vy_lid0 = threadIdx.x + vy_j * {bx}u;", gid]
        else:
            head += [lid, gid]
    lidx = f"  const unsigned vy_lidx = vy_lid0 + vy_lid1 * {wx}u + vy_lid2 * {wx * wy}u;"
    if k == 1:
        head.append(lidx)
        gen.block(p.body, 1)
        return "\n".join([*head, *gen.lines, "}", ""])
    per_j.append(lidx)
    if isinstance(gen, LockstepPrinter):  # (generate's choice: lockstep_allowed)
        return gen.kernel_lines(head, k)
    gen.block(p.body, 3)
    loop = [
        "#pragma unroll",
        f"  for (unsigned vy_j = 0; vy_j < {k}u; ++vy_j) {{",
        *("  " + line for line in per_j),
        "    {",
        *gen.lines,
        "    }",
        "    vy_next: ;  // an invocation's `return` jumps here",
        "  }",
    ]
    return "\n".join([*head, *loop, "}", ""])


def _indirect_kernel(gen: CudaPrinter, head: list[str]) -> str:
    """An indirect grid: the workgroup counts are read on the device from `vy_grid`
    (three u32), and the launch's fixed number of blocks (enough to fill the device)
    runs the virtual workgroups 0, 1, ... of that grid in turn, each block taking every
    gridDim.x-th one (x fastest, as the IR numbers them). Over the per-dimension limit
    nothing runs: block 0 records the count in `vy_status` (page-locked host memory)
    and the runtime raises DispatchError at its next check. An invocation's `return`
    ends its part of the current workgroup (goto vy_next); the validator guarantees no
    barrier follows a non-uniform return, so the barrier after each workgroup (which
    also keeps the next one's workgroup-memory writes after this one's reads) is the
    only one the returned invocations meet."""
    wx, wy, _ = gen.p.workgroup_size
    head += [
        "  const unsigned vy_nwg0 = vy_grid[0], vy_nwg1 = vy_grid[1], vy_nwg2 = vy_grid[2];",
        "  const unsigned vy_most = max(vy_nwg0, max(vy_nwg1, vy_nwg2));",
        "  if (vy_most > vy_limit) {  // nothing runs; the host raises DispatchError",
        "    if (blockIdx.x == 0 && threadIdx.x == 0 && threadIdx.y == 0 && "
        "threadIdx.z == 0) {",
        "      vy_status[1] = vy_most;",
        "      __threadfence_system();",
        "      vy_status[0] = 1u;",
        "    }",
        "    return;",
        "  }",
        "  const unsigned long long vy_groups = "
        "(unsigned long long)vy_nwg0 * vy_nwg1 * vy_nwg2;",
        "  const unsigned vy_lid0 = threadIdx.x;",
        "  const unsigned vy_lid1 = threadIdx.y;",
        "  const unsigned vy_lid2 = threadIdx.z;",
        f"  const unsigned vy_lidx = vy_lid0 + vy_lid1 * {wx}u + vy_lid2 * {wx * wy}u;",
        "  for (unsigned long long vy_v = blockIdx.x; vy_v < vy_groups; "
        "vy_v += gridDim.x) {",
        "    const unsigned vy_wid0 = (unsigned)(vy_v % vy_nwg0);",
        "    const unsigned vy_wid1 = (unsigned)((vy_v / vy_nwg0) % vy_nwg1);",
        "    const unsigned vy_wid2 = (unsigned)(vy_v / ((unsigned long long)vy_nwg0 * "
        "vy_nwg1));",
    ]
    for i, (w, _ax) in enumerate(zip(gen.p.workgroup_size, "xyz")):
        head.append(f"    const unsigned vy_gid{i} = vy_wid{i} * {w}u + vy_lid{i};")
    gen.block(gen.p.body, 3)
    tail = [
        "    }",
        "    vy_next: ;  // an invocation's `return` ends its part of this workgroup",
        "    __syncthreads();",
        "  }",
    ]
    return "\n".join([*head, "    {", *gen.lines, *tail, "}", ""])


def lockstep_allowed(program: N.Program) -> bool:
    """Bodies of let / assign / store / if / atomic only (see lockstep.py)."""
    from vyre.ir.analysis import walk_stmts

    ok = (N.Let, N.Assign, N.Store, N.If, N.Atomic)
    return all(isinstance(s, ok) for s in walk_stmts(program.body))


def coarsening_allowed(program: N.Program, factor: int) -> bool:
    """Whether each CUDA thread may run `factor` invocations of a workgroup in sequence.

    Only without barriers and workgroup arrays (invocations never wait for each other), and
    when the workgroup's x size splits into warps-sized thread groups.
    """
    if factor <= 1 or uses_subgroups(program):  # a warp's lanes must be invocations
        return False
    wx = program.workgroup_size[0]
    if program.workgroup_arrays or wx % factor or (wx // factor) % 32:
        return False
    from vyre.ir.analysis import walk_stmts

    return not any(isinstance(s, N.Barrier) for s in walk_stmts(program.body))


def generate(program: N.Program, restrict: bool = True, coarsen: int = 1,
             options: CudaOptions = DEFAULT_OPTIONS, indirect: bool = False) -> Generated:
    """CUDA C for `program`. `restrict=False` when buffer slots alias one buffer;
    `coarsen=k` runs k invocations per CUDA thread where `coarsening_allowed`; `options`:
    the printer's switches (options.py); `indirect=True`: the grid is read on the device
    (see _indirect_kernel)."""
    validate(program)  # every printer refuses a bad Program the same way: InvalidProgram
    check_fits(program, SUBGROUP_SIZE, "cuda")
    written, program = program, lower(program, TRAITS)
    # a function's exact definition (vyre.lower.maths) is one __device__ function however
    # many invocations call it, so coarsening copies calls, not its hundreds of operations
    # (H200, 2^26-element maps with k = 4: exp 1,698 -> 2,220 GB/s, log 1,678 -> 1,869;
    # sin, pow and the chains unchanged; docs/perf-notes.md "Session 26")
    k = coarsen if coarsening_allowed(program, coarsen) and not indirect else 1
    wx, wy, wz = program.workgroup_size
    bx = wx // k
    merge = 1
    if k > 1 and options.lockstep and lockstep_allowed(program):  # (same for either lowering)
        program = lower(written, LOCKSTEP_TRAITS)
        if wy == wz == 1 and bx < options.merge_threads:
            merge = options.merge_threads // bx
    lockstep = k > 1 and options.lockstep and lockstep_allowed(program)
    printer = LockstepPrinter if lockstep else CudaPrinter
    gen = printer(program, restrict, k, merge, options, indirect)
    src = _kernel(gen)
    fns = gen.function_decls()
    src = src.replace(PRELUDE_SLOT, prelude(src + fns) + gen.table_decls() + fns, 1)
    sig = KernelSignature(
        buffers=tuple(b.ty for b in program.buffers),
        params=tuple(q.ty for q in program.params),
        grid_x=merge > 1,
        indirect=indirect,
    )
    return Generated(source=src, signature=sig, block=(bx * merge, wy, wz), merge=merge)


def pack_params(sig: KernelSignature, values: tuple[bool | int | float, ...]) -> list[bytes]:
    """Each param's bytes (little-endian, its C type)."""
    out = []
    for ty, v in zip(sig.params, values):
        out.append(struct.pack(STRUCT_CODE[ty], v))
    return out
