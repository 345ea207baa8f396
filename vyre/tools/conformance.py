"""The conformance table: semantic cases every backend must agree on with the reference.

Each `Case` is a Program covering a part of docs/IR.md (integer and float arithmetic,
comparisons, casts, bitcasts, control flow, workgroup memory, atomics, builtins, params
and out-of-bounds accesses, vector-shaped access patterns), its host inputs (from a seeded
generator) and its DispatchConfig; most (vyre.tools.conformance_exact) also carry the values
docs/IR.md defines for their outputs, computed without any backend. `check_case` runs one on
a backend and compares every output with the reference under the IR's comparison rules
(vyre.tools.testing), and the reference's outputs with those values. The suite
in tests/test_conformance.py runs the whole table on every registered backend, or on one
named backend (`pytest --backend NAME`, or VYRE_TEST_BACKEND=NAME), which is how an
out-of-tree backend proves itself (README, "Writing a backend").

This module must never loosen a comparison for a backend: a backend that cannot run a case
says so through its capabilities (`unsupported_reason`), never through a tolerance here.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from typing import Any

import numpy as np

from vyre import DispatchConfig, ScalarType
from vyre import features as F
from vyre.builder import (
    ProgramBuilder,
    abs_,
    atan2,
    ceil,
    clamp,
    cos,
    exp,
    exp2,
    floor,
    fma,
    log,
    log2,
    max_,
    min_,
    pow_,
    round_,
    select,
    sin,
    sqrt,
    tan,
    tanh,
    trunc,
)
from vyre.interface import Backend
from vyre.ir import nodes as IR
from vyre.ir.analysis import walk_all_exprs
from vyre.ir.nodes import Call
from vyre.ir.types import NARROW_INTS
from vyre.tools.conformance_case import Case as Case
from vyre.tools.replay import save_on_request
from vyre.tools.testing import assert_agree, random_array, reference_for, tolerance_for

ST = ScalarType
N = 256


def _binary_case(name: str, ty: ScalarType, ops: list[Callable[[Any, Any], Any]],
                 out_ty: ScalarType | None = None, b_ty: ScalarType | None = None) -> Case:
    out_ty = out_ty or ty
    b_ty = b_ty or ty
    k = ProgramBuilder(name, workgroup_size=128)
    a = k.buffer("a", ty)
    b = k.buffer("b", b_ty)
    out = k.buffer("out", out_ty, "write")
    i = k.let(k.global_id(0))
    with k.if_(i < a.length()):
        x = k.let(a[i])
        y = k.let(b[i])
        for j, op in enumerate(ops):
            out[i * len(ops) + j] = op(x, y)
    prog = k.build()

    def inputs(rng: np.random.Generator) -> dict[str, Any]:
        return {"a": random_array(rng, ty, N), "b": random_array(rng, b_ty, N),
                "out": N * len(ops)}

    return Case(name, prog, inputs, DispatchConfig(grid=N // 128))






def _u(f: Callable[[Any], Any]) -> Callable[[Any, Any], Any]:
    return lambda x, y: f(x)


def _float_ops() -> list[Callable[[Any, Any], Any]]:
    return [
        lambda x, y: x + y, lambda x, y: x - y, lambda x, y: x * y, lambda x, y: x / y,
        lambda x, y: x % y, min_, max_, lambda x, y: -x, _u(abs_),
        lambda x, y: sqrt(abs_(x)), _u(floor), _u(ceil), _u(trunc), _u(round_),
        lambda x, y: fma(x, y, x), lambda x, y: clamp(x, min_(y, -y), max_(y, -y)),
        lambda x, y: x * y + x, lambda x, y: select(x < y, x, y), lambda x, y: sqrt(x),
        lambda x, y: round_(x / 7), lambda x, y: x % 3,
    ]


def _approx_ops() -> list[Callable[[Any, Any], Any]]:
    return [*(_u(f) for f in (exp, exp2, log, log2, sin, cos, tan, tanh)),
            lambda x, y: pow_(abs_(x), y / 64), atan2,
            lambda x, y: exp(x / 64), lambda x, y: log(abs_(x))]


def _cast_case(src: ScalarType, to_f64: bool = False) -> Case:
    """Casts from `src` to every other type (without f64, so a backend without it runs
    them), or (`to_f64`) to f64 only."""
    dsts = [ST.F64] if to_f64 else [
        t for t in (ST.I32, ST.U32, ST.F32, ST.F16, ST.F64, ST.I64, ST.U64, *NARROW_INTS)
        if t is not ST.F64 or src is ST.F64]
    k = ProgramBuilder(f"cast_{src}_to_f64" if to_f64 else f"cast_from_{src}",
                       workgroup_size=128)
    a = k.buffer("a", src)
    outs = {d: k.buffer(f"o_{d}", d, "write") for d in dsts}
    ob = k.buffer("o_bool", ST.U32, "write")
    i = k.global_id(0)
    with k.if_(i < a.length()):
        x = k.let(a[i])
        for d, buf in outs.items():
            buf[i] = x.cast(d)
        ob[i] = x.cast(ST.BOOL).cast(ST.U32)
    prog = k.build()

    def inputs(rng: np.random.Generator) -> dict[str, Any]:
        arr = random_array(rng, src, N)
        if src.is_float:  # also values near the saturation limits and exact halves
            with np.errstate(over="ignore"):
                extra = np.array([2.5, -2.5, 3.5, 0.5, -0.5, 2.0**31, -(2.0**31), 2.0**32,
                                  2.0**63, -(2.0**63), 2.0**64, 1e30, -1e30, 65519.0,
                                  65520.0, 4294967040.0, -1.5],
                                 dtype=np.float64).astype(src.numpy)
            arr[-len(extra):] = extra
        d: dict[str, Any] = {"a": arr, "o_bool": N}
        for dt in dsts:
            d[f"o_{dt}"] = N
        return d

    return Case(prog.name, prog, inputs, DispatchConfig(grid=N // 128))




def _narrow_case(src: ScalarType) -> Case:
    """An 8/16-bit source (docs/IR.md "Narrow integers"), in the IR itself (the builder
    promotes every load): Cast of the loaded element to every type (f64 aside, as in
    _cast_case) and to bool, Bitcast to the other signedness, and a store of the element
    as it is, all from elements of a buffer whose length is not a whole number of words."""
    other = {ST.U8: ST.I8, ST.I8: ST.U8, ST.U16: ST.I16, ST.I16: ST.U16}[src]
    dsts = [t for t in (ST.I32, ST.U32, ST.F32, ST.F16, ST.I64, ST.U64, *NARROW_INTS)
            if t is not src]
    u32 = ST.U32
    i = IR.Builtin(name="global_id", axis=0)
    x = IR.Load(buffer="a", index=i, ty=src)
    body = [IR.Store(buffer=f"o_{d}", index=i, value=IR.Cast(a=x, ty=d)) for d in dsts]
    body += [
        IR.Store(buffer="o_bool", index=i,
                 value=IR.Cast(a=IR.Cast(a=x, ty=ST.BOOL), ty=u32)),
        IR.Store(buffer="o_bits", index=i, value=IR.Bitcast(a=x, ty=other)),
        IR.Store(buffer="o_same", index=i, value=x),
    ]
    buffers = [IR.BufferDecl(name="a", ty=src)]
    buffers += [IR.BufferDecl(name=f"o_{d}", ty=d, access="write") for d in dsts]
    buffers += [IR.BufferDecl(name="o_bool", ty=u32, access="write"),
                IR.BufferDecl(name="o_bits", ty=other, access="write"),
                IR.BufferDecl(name="o_same", ty=src, access="write")]
    n = N - 3
    prog = IR.Program(name=f"narrow_from_{src}", workgroup_size=(128, 1, 1),
                      buffers=tuple(buffers), body=tuple(body))

    def inputs(rng: np.random.Generator) -> dict[str, Any]:
        d: dict[str, Any] = {"a": random_array(rng, src, n), "o_bool": n, "o_bits": n,
                             "o_same": n}
        for dt in dsts:
            d[f"o_{dt}"] = n
        return d

    return Case(prog.name, prog, inputs, DispatchConfig(grid=N // 128))


def _control_case() -> Case:
    k = ProgramBuilder("control_flow", workgroup_size=128)
    a = k.buffer("a", ST.I32)
    out = k.buffer("out", ST.I32, "write")
    i = k.global_id(0)
    with k.if_(i >= a.length()):
        k.return_()
    x = k.let(a[i] % 50)
    acc = k.let(k.lit(0, ST.I32))
    # For over i32 with negative start and step 3; continue and break inside
    with k.for_range(x - 20, x + 17, 3, ty=ST.I32) as j:
        with k.if_(j == 0):
            k.continue_()
        acc += j
        with k.if_(acc > 100):
            k.break_()
    # a For whose end is INT_MAX: must not overflow (runs 3 times)
    cnt = k.let(k.lit(0, ST.I32))
    with k.for_range(k.lit(2147483647 - 5, ST.I32), k.lit(2147483647, ST.I32), 2,
                     ty=ST.I32):
        cnt += 1
    # u32 For ending at UINT_MAX with a large step
    ucnt = k.let(k.lit(0, ST.U32))
    with k.for_range(k.lit(4000000000, ST.U32), k.lit(4294967295, ST.U32), 100000000):
        ucnt += 1
    # while with break and continue
    w = k.let(k.lit(0, ST.I32))
    n = k.let(k.lit(0, ST.I32))
    with k.while_(w < 1000):
        w += 1
        with k.if_((w % 3) == 0):
            k.continue_()
        n += w
        with k.if_(n > x * 10):
            k.break_()
    # nested loops
    nest = k.let(k.lit(0, ST.I32))
    with k.for_range(0, 4, ty=ST.I32) as p, k.for_range(0, p, ty=ST.I32) as q:
        nest += p * 10 + q
    with k.if_((x & 1) == 1):
        out[i * 6 + 5] = k.lit(-7, ST.I32)
    with k.else_():
        out[i * 6 + 5] = x
    out[i * 6] = acc
    out[i * 6 + 1] = cnt
    out[i * 6 + 2] = ucnt.bitcast(ST.I32)
    out[i * 6 + 3] = n
    out[i * 6 + 4] = nest
    with k.if_(x > 25):
        k.return_()
    out[i * 6 + 5] = x * 2
    prog = k.build()
    return Case(prog.name, prog, lambda rng: {
        "a": rng.integers(-1000, 1000, N).astype(np.int32), "out": N * 6,
    }, DispatchConfig(grid=N // 128 + 1))






def _builtins_case() -> Case:
    k = ProgramBuilder("builtins", workgroup_size=(4, 2, 2))
    out = k.buffer("out", ST.U32, "write")
    lin = k.let(k.workgroup_linear_id() * 16 + k.local_index())
    vals = [k.global_id(0), k.global_id(1), k.global_id(2), k.local_id(0), k.local_id(1),
            k.local_id(2), k.workgroup_id(0), k.workgroup_id(1), k.workgroup_id(2),
            k.num_workgroups(0), k.num_workgroups(1), k.num_workgroups(2), k.local_index(),
            out.length()]
    for j, v in enumerate(vals):
        out[lin * len(vals) + j] = v
    prog = k.build()
    from vyre.tools.conformance_exact import builtins_expected

    rows = [[*r, 16 * 6 * 14] for r in builtins_expected((2, 3, 1), (4, 2, 2))]
    return Case(prog.name, prog, lambda rng: {"out": 16 * 6 * 14}, DispatchConfig(grid=(2, 3, 1)),
                expected=lambda ins: {"out": np.array(rows, np.uint32).reshape(-1)})






def _float_cases() -> list[Case]:
    out = []
    for ty in (ST.F32, ST.F64, ST.F16):
        out.append(_binary_case(f"float_ops_{ty}", ty, _float_ops()))
        out.append(_binary_case(f"approx_{ty}", ty, _approx_ops()))
    return out


def _vector_case(off: int) -> Case:
    """Accesses at the x invocation id + an invariant: the lockstep code moves them as
    vectors when aligned and in bounds (off=0), else lane by lane (off=3: misaligned);
    tails past every buffer's end, masked lanes, a top-level and a masked let, 8-byte and
    2-byte elements, and a neighbour load (index + 1)."""
    k = ProgramBuilder(f"vector_off{off}", workgroup_size=256)
    x = k.buffer("x", ST.F32)
    d = k.buffer("d", ST.F64)
    h = k.buffer("h", ST.F16, "read_write")
    u = k.buffer("u", ST.U64, "read_write")
    q = k.buffer("q", ST.I32, "read_write")
    y = k.buffer("y", ST.F32, "write")
    y2 = k.buffer("y2", ST.F32, "read_write")
    o = k.param("off", ST.U32)
    i = k.let(k.global_linear_id() + o, name="i")
    with k.if_(i < y.length()):
        y[i] = x[i] * 2.0 + d[i].cast(ST.F32) + x[i + 1]
    h[i] = h[i] + h[i]  # unmasked: lanes past the end store nothing
    u[i] = u[i] * 3 + i.cast(ST.U64)
    q[i] = q[i] - i.cast(ST.I32)
    with k.if_(i % 3 == 0):
        t = k.let(x[i] * 3.0, name="t")
        y2[i] = t + y2[i]
    prog = k.build()
    return Case(prog.name, prog, lambda rng: {
        "x": random_array(rng, ST.F32, 1003), "d": random_array(rng, ST.F64, 1000),
        "h": rng.standard_normal(998).astype(np.float16),
        "u": random_array(rng, ST.U64, 1001), "q": random_array(rng, ST.I32, 1001),
        "y": 1002, "y2": random_array(rng, ST.F32, 997),
    }, DispatchConfig(grid=5, params={"off": off}))


def cases() -> list[Case]:
    from vyre.tools import conformance_exact

    return [
        *conformance_exact.cases(),
        *_float_cases(),
        *(_cast_case(t) for t in (ST.I32, ST.U32, ST.F32, ST.F16, ST.F64, ST.I64, ST.U64)),
        *(_cast_case(t, to_f64=True) for t in (ST.I32, ST.U32, ST.F32, ST.F16, ST.I64, ST.U64)),
        *(_narrow_case(t) for t in NARROW_INTS),
        _control_case(), _builtins_case(), _vector_case(0), _vector_case(3),
    ]


def _all_cases() -> list[Case]:
    from .conformance_subgroup import cases as subgroup_cases

    return [*cases(), *subgroup_cases()]


CASES = {c.name: c for c in _all_cases()}


def inputs_of(case: Case) -> dict[str, Any]:
    """The case's host inputs, the same on every run and every backend."""
    return case.inputs(np.random.default_rng(zlib.crc32(case.name.encode())))


def unsupported_reason(case: Case, backend: Backend) -> str | None:
    """Why `backend` cannot run `case` by its own report (a missing feature), or None."""
    missing = sorted(f for f in case.program.required_features
                     if not backend.supports(f))
    if missing:
        return (f"{backend.id} does not report {missing}, which {case.name!r} needs "
                "(a documented capability limit)")
    refused = F.refused_calls(backend.capabilities().details)
    calls = sorted({f"{e.ty} {e.fn}" for e in walk_all_exprs(case.program)
                    if isinstance(e, Call) and (e.ty.value, e.fn) in refused})
    if calls:
        return (f"{backend.id} refuses {calls} (capabilities().details['refused_calls']), "
                f"which {case.name!r} calls (a documented capability limit)")
    return None


def check_case(case: Case, backend: Backend, reference: Backend) -> None:
    """Run `case` on `backend` and assert every output agrees with the reference (in the
    backend's float mode) under the IR's comparison rules, except the order-dependent ones,
    which must satisfy the case's invariant; and the reference's outputs agree with the
    values docs/IR.md defines (`Case.expected`), so a wrong reference fails too."""
    inputs = inputs_of(case)
    program, config = case.program, case.config
    try:
        tol = tolerance_for(program, backend.kind)
        ref = reference_for(backend, reference)
        want = ref.dispatch(program, inputs, config)
        got = want if backend is ref else backend.dispatch(program, inputs, config)
        for name, e in want.items():
            if name not in case.order_dependent:
                assert_agree(got[name], e, tol, f"{case.name} on {backend.id}, buffer {name!r}")
        if case.expected is not None:
            ieee = want if ref is reference else reference.dispatch(program, inputs, config)
            for name, e in case.expected(inputs).items():
                assert_agree(ieee[name], np.asarray(e, dtype=ieee[name].dtype),
                             tolerance_for(program, reference.kind),
                             f"{case.name} on {reference.id} against docs/IR.md, buffer {name!r}")
        if case.invariant is not None:
            for b, out in ((backend, got), (ref, want)):
                why = case.invariant(inputs, out)
                assert why is None, f"{case.name} on {b.id}: {why}"
    except AssertionError as exc:
        # with $VYRE_REPLAY_DIR set, the failing dispatch as one file to rerun anywhere
        path = save_on_request(program, inputs, config, backend, str(exc)[:2000])
        if path is None:
            raise
        raise AssertionError(f"{exc}\nreplay file: {path} (vyre replay {path})") from None


__all__ = ["CASES", "Case", "check_case", "inputs_of", "unsupported_reason"]
