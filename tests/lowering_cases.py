"""Programs shared by the lowering tests (tests/test_lowering.py) and the CUDA compile
tests: every rule vyre.lower rewrites, at its edges; and the reference backend running a
lowering (LoweredReference), which the lowering tests compare with the reference."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from vyre.backends.reference.plan import Plan
from vyre.backends.reference.runtime import ReferenceBackend, ReferenceCompiler
from vyre.builder import ProgramBuilder, clamp, max_, min_, select, sqrt
from vyre.ir import nodes as N
from vyre.ir.types import ScalarType as T
from vyre.lower import Traits, lower


class _LoweringCompiler(ReferenceCompiler):
    """Compiles the lowering of P (or the given core) instead of P."""

    def compile(self, program: N.Program, key: Any) -> Plan:
        b = self.backend
        core = lower(program, b.traits) if b.core is None else b.core
        return Plan.prepare(core if b.rewrite is None else b.rewrite(core))


class LoweredReference(ReferenceBackend):
    """The reference backend running `lower(P, traits)` instead of P (P is validated first,
    as for every backend; the lowered core itself is internal and never validated), or
    `core` when given: that lowering, made already (test_lowering._cores), or a hand-made
    core; `rewrite`, when given, changes the core before it runs (a test's stand-in for a
    device whose own operations differ: tests/test_exact_divsqrt.py). `options`: the
    reference's own (flush mode)."""

    compiler_part = _LoweringCompiler

    def __init__(self, traits: Traits, core: N.Program | None = None,
                 rewrite: Callable[[N.Program], N.Program] | None = None,
                 **options: Any) -> None:
        self.traits = traits
        self.core = core
        self.rewrite = rewrite
        super().__init__(f"reference-lowered-{abs(hash(traits))}", **options)


def edge_program() -> N.Program:
    """Every lowered rule at its edges: div/rem by 0 and MIN / -1, shifts by >= the width,
    abs(MIN), abs of a widened i32 (a lavapipe miscompile), float -> int of NaN, +-inf and
    the range ends, including f16 sources; float rem and f16 arithmetic."""
    k = ProgramBuilder("lower_edges", workgroup_size=1)
    a, b = k.buffer("a", T.I32), k.buffer("b", T.I32)
    f = k.buffer("f", T.F32)
    h = k.buffer("h", T.F16)
    oi = k.buffer("oi", T.I32, "write", count=64)
    ou = k.buffer("ou", T.U32, "write", count=32)
    ol = k.buffer("ol", T.I64, "write", count=16)
    of = k.buffer("of", T.F32, "write", count=24)
    oh = k.buffer("oh", T.F16, "write", count=24)
    i = k.global_linear_id()
    with k.if_(i < a.length()):
        x, y = a[i], b[i]
        oi[i * 8] = x / y
        oi[i * 8 + 1] = x % y
        oi[i * 8 + 2] = x << y.cast(T.U32)
        oi[i * 8 + 3] = x >> y.cast(T.U32)
        oi[i * 8 + 4] = abs(x)
        oi[i * 8 + 5] = f[i].cast(T.I32)
        oi[i * 8 + 6] = h[i].cast(T.I32)
        oi[i * 8 + 7] = x / 7 + x % -1 + x / -1
        ou[i * 4] = f[i].cast(T.U32)
        ou[i * 4 + 1] = h[i].cast(T.U32)
        ou[i * 4 + 2] = x.cast(T.U32) / y.cast(T.U32)
        ou[i * 4 + 3] = x.cast(T.U32) % y.cast(T.U32)
        ol[i * 2] = abs(x.cast(T.I64))
        ol[i * 2 + 1] = f[i].cast(T.I64)
        of[i * 3] = f[i] % f[(i + 1) % 8]
        oh[i * 3] = h[i] % h[(i + 3) % 8]
        oh[i * 3 + 1] = h[i] * h[(i + 5) % 8] + h[i] / h[(i + 1) % 8]
        oh[i * 3 + 2] = select(h[i] < h[(i + 2) % 8], sqrt(h[i]), clamp(h[i], -1.0, 2.0))
    # stepped loops near the top of the range (the variable must never wrap) with continue
    lp = k.buffer("lp", T.U32, "read_write", count=8)
    with k.if_(i < 1):
        with k.for_range(x + (2**31 - 17), 2**31 - 1, 3) as v:  # i32 up to MAX
            with k.if_(v == 2**31 - 3):
                k.continue_()
            lp[0] = lp[0] + 1
        with k.for_range(y.cast(T.U32) + 4294967280, 4294967295, 7) as w:  # u32 up to MAX
            lp[1] = lp[1] + w
        with k.for_range(y, x, 2**31 - 1) as z:  # one value at most
            lp[2] = lp[2] + z.cast(T.U32) + 1
        with k.for_range(-(2**31), 2**31 - 1, 2**30 + 5, ty=T.I32) as q:
            lp[3] = lp[3] * 3 + q.cast(T.U32)
    return k.build()


EDGE_A = np.array([7, -(2**31), -(2**31), 5, -5, 0, 2**31 - 1, -1], np.int32)
EDGE_B = np.array([0, -1, 0, 33, -32, 0, -1, 3], np.int32)
EDGE_F = np.array([np.nan, np.inf, -np.inf, 2.0**31, -(2.0**31), -0.5, 4.3e9, -2.5],
                  np.float32)
EDGE_H = np.array([np.nan, np.inf, -np.inf, 65504, -65504, -0.5, 0.99, 3.5], np.float16)




MEM_A = np.array([1, 0, 3, 6, 2], np.int32)
MEM_F = np.array([1.5, -2.0], np.float32)


def memory_program() -> N.Program:
    """Loads, stores and atomics in and out of range (docs/IR.md: out of range reads 0 and
    does nothing) on buffers and workgroup arrays, in every place the memory rule of
    vyre.lower must handle: nested in an index, in a while condition, in for bounds (step
    1 and stepped), a store index holding a load, constant indices into a workgroup array
    (in range, past it, and one WGSL's constant evaluation could compute: its length), and
    atomics with and without results, and workgroup array indices whose range
    vyre.lower.ranges bounds (in range, never, or only the run knows: wraps, selects,
    signed casts). One workgroup of 4; `a` holds 5 elements, `f` 2."""
    k = ProgramBuilder("lower_memory", workgroup_size=4)
    a, f = k.buffer("a", T.I32), k.buffer("f", T.F32)
    o = k.buffer("o", T.I32, "write", count=40)
    of = k.buffer("of", T.F32, "write", count=4)
    p = k.buffer("p", T.I32, "write", count=8)
    r = k.buffer("r", T.I32, "write", count=16)
    acc = k.buffer("acc", T.U32, "read_write", count=4)
    w = k.shared("w", T.I32, 4)
    wa = k.shared("wa", T.U32, 2)
    t = k.let(k.local_index())
    w[t] = a[t + 2]  # t = 3 reads past a: 0
    w[t + 4] = 7  # past w: nothing
    wa[t] = 0  # t >= 2: nothing
    k.barrier()
    o[t] = w[t] + w[t + 3]
    o[4 + t] = w[w.length()] + w[4] + w[1] + a[t * 0 + 4]
    o[8 + t] = a[(a[t] + 1).cast(T.U32)]
    n = k.let(t)
    with k.while_((a[n] != 0) & (n < 8)):
        n.set(n + 1)
    o[12 + t] = n.cast(T.I32)
    s = k.let(0)
    with k.for_range(a[t], a[t + 2]) as v:
        s.set(s + v)
    with k.for_range(0, a[t + 2], 2) as v2:
        s.set(s * 3 + v2)
    o[16 + t] = s
    o[20 + t] = acc.atomic_add(t + 2, 1).cast(T.I32)  # t >= 2: nothing, old value 0
    o[24 + t] = wa.atomic_add(t, 1 + t).cast(T.I32)
    acc.atomic_compare_exchange(t + 1, 0, 5)
    wa.atomic_max(t + 1, 9)
    k.barrier()
    o[28 + t] = wa[t].cast(T.I32)
    o[t + 38] = (1 + t).cast(T.I32)  # t >= 2: past o, nothing
    p[(a[t] + 4).cast(T.U32)] = (t + 1).cast(T.I32)  # 5, 4, 7, then 10: past p
    of[t] = f[t] * 2.0
    r[t] = w[t - 1] + w[(t + 4294967295) % 4]  # t - 1 wraps at t = 0: read past w, 0
    r[4 + t] = w[t >> 1] + w[min_(t, 9)] + w[max_(t, 2)] + w[(t * 5) / 4]
    r[8 + t] = w[select(t < 2, t, 7)] + w[(t & 1) * 3] + w[k.local_id(1) + 3]
    r[12 + t] = w[(t.cast(T.I32) - 2).cast(T.U32)] + w[(t + 1).cast(T.I32).cast(T.U32)] + w[
        w.length() ^ 1]  # past w, which naga must not see as a constant index
    return k.build()
