"""The op registry (vyre.ir.ops) is the one place an operation is declared: every call in it
is buildable, exported, validated, evaluated by the reference and spelled by both printers,
and the registry-driven conformance case covers the functions that name samples. The
functions added through the registry alone (asin, hypot) work end to end, through
`@vyre.kernel` too."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import vyre
from vyre import Buffer, Output, f16, f32, f64
from vyre.backend import BaseBackend
from vyre.backends.cuda import render as cuda
from vyre.backends.wgpu import expressions as wgsl_expressions
from vyre.backends.wgpu import render as wgsl
from vyre.builder import BuildError, ProgramBuilder, call_fn
from vyre.ir import nodes as N
from vyre.ir import ops
from vyre.tools import conformance_exact
from vyre.tools.conformance import check_case
from vyre.tools.testing import assert_agree, tolerance_for


def _call_program(op: ops.CallOp, ty: vyre.ScalarType) -> N.Program:
    """out[i] = op(a0[i], ...) in `ty`, or in the op's own types where it fixes them."""
    k = ProgramBuilder(f"call_{op.name}", workgroup_size=64)
    arg_types, ty = op.signature if op.signature else ((ty,) * op.arity, ty)
    bufs = [k.buffer(f"a{j}", t) for j, t in enumerate(arg_types)]
    out = k.buffer("out", ty, "write")
    i = k.let(k.global_id(0))
    with k.if_(i < out.length()):
        out[i] = call_fn(op.name, *(b[i] for b in bufs))
    return k.build()


@pytest.mark.parametrize("op", ops.CALL_OPS, ids=lambda o: o.name)
def test_every_call_is_exported_built_and_printed(op: ops.CallOp) -> None:
    if op.name.startswith("approx_"):  # the backends' own, by name only (vyre.approx)
        helper = getattr(vyre.approx, op.py_name)
        assert helper.__module__ == "vyre.builder.calls_approx"
        assert op.py_name in vyre.approx.__all__
    else:  # generated from the record (vyre.tools.gen_calls), or written by hand
        helper = getattr(vyre, op.py_name)
        assert helper is getattr(vyre.builder, op.py_name)
        assert helper.__module__ in ("vyre.builder.calls", "vyre.builder.functions")
        assert op.py_name in vyre.__all__ and op.py_name in vyre.builder.__all__
    prog = _call_program(op, f32)
    assert isinstance(prog.body, tuple)
    c = cuda.generate(prog).source  # raises on a function a printer cannot spell
    w = wgsl.generate(prog).source
    if op.signature:  # the packed dot products: C's __dp4a on the cast words
        assert f"__dp4a({op.c_f32}(" in c and f"{op.wgsl}(" in w
    elif op.c_f32:
        assert f"{op.c_f32}(" in c
    # WGSL: the builtin, or a hook (some builtins also have adapter-dependent helpers), or
    # an exact definition (vyre.lower.maths) that no printer spells
    assert (op.wgsl or op.name in wgsl_expressions._FN_HOOKS or op.name in ("abs", "clamp")
            or "f32" in op.exact_types)
    if op.name in wgsl_expressions._FN_HOOKS:
        assert f"vy_{op.name}_f32(" in w
    if op.approximate:
        assert op.reference is not None and op.name in N.APPROX_FNS


def test_call_fn_names_the_functions_on_an_unknown_name() -> None:
    k = ProgramBuilder("bad", workgroup_size=64)
    x = k.buffer("x", f32)
    with pytest.raises(BuildError, match=r"unknown function .sinh.*asin"):
        call_fn("sinh", x[0])


def test_validator_takes_arity_and_float_rule_from_the_registry() -> None:
    one = N.Const(ty=f32, value=1.0)
    prog = N.Program(name="p", buffers=(N.BufferDecl(name="o", ty=f32, access="write"),),
                     body=(N.Store(buffer="o", index=N.Const(ty=vyre.u32, value=0),
                                   value=N.Call(fn="hypot", args=(one,), ty=f32)),))
    with pytest.raises(vyre.InvalidProgram, match="call hypot has 1 arguments; it takes 2"):
        vyre.validate(prog)
    ints = prog.model_copy(update={"body": (N.Store(
        buffer="o", index=N.Const(ty=vyre.u32, value=0),
        value=N.Call(fn="asin", args=(N.Const(ty=vyre.i32, value=1),), ty=vyre.i32)),)})
    with pytest.raises(vyre.InvalidProgram, match="call asin needs a float argument"):
        vyre.validate(ints)


@pytest.mark.parametrize("ty", [f32, f64], ids=str)
def test_registry_case_reference_matches_numpy(reference: BaseBackend,
                                               ty: vyre.ScalarType) -> None:
    case = conformance_exact.registry_case(ty)
    assert case is not None
    names = {op.name for op in ops.CALL_OPS if op.samples}
    assert {"asin", "hypot"} <= names
    check_case(case, reference, reference)  # the reference against the registry's NumPy


@vyre.kernel(workgroup_size=64)
def _asin_hypot(x: Buffer[f32], y: Buffer[f32], out: Output[f32]) -> None:
    i = vyre.global_linear_id()
    with vyre.if_(i < x.length()):
        out[2 * i] = vyre.asin(x[i])
        out[2 * i + 1] = vyre.hypot(x[i], y[i])


def test_kernel_decorator_asin_hypot(backend: BaseBackend, reference: BaseBackend) -> None:
    """Through @vyre.kernel on every backend, against the reference and NumPy's f64
    functions rounded once (docs/IR.md: within 4 ulp)."""
    n = 256
    rng = np.random.default_rng(3)
    x = np.concatenate([[0.0, -0.0, 1.0, -1.0, 1.5, np.nan, np.inf, 0.5],
                        rng.uniform(-1, 1, n - 8)]).astype(np.float32)
    y = np.concatenate([[0.0, 0.0, np.nan, 3e38, 0.0, np.inf, 1.0, 1e-40],
                        rng.standard_normal(n - 8) * 1e3]).astype(np.float32)
    inputs: dict[str, Any] = {"x": x, "y": y, "out": 2 * n}
    prog = _asin_hypot.program
    cfg = _asin_hypot.config(n, prog)
    ref = reference.dispatch(prog, inputs, cfg)
    with np.errstate(invalid="ignore"):
        want = np.empty(2 * n, np.float32)
        want[0::2] = np.arcsin(x.astype(np.float64)).astype(np.float32)
        want[1::2] = np.hypot(x.astype(np.float64), y.astype(np.float64)).astype(np.float32)
    assert_agree(ref["out"], want, tolerance_for(prog, "reference"), "reference")
    assert np.signbit(ref["out"][2])  # asin(-0) = -0
    assert ref["out"][11] == np.inf  # hypot(nan, inf) = inf
    got = backend.dispatch(prog, inputs, cfg)["out"]
    assert_agree(got, ref["out"], tolerance_for(prog, backend.kind), backend.id)


def test_f16_and_f64_forms(reference: BaseBackend) -> None:
    k = ProgramBuilder("wide", workgroup_size=64)
    a = k.buffer("a", f16)
    b = k.buffer("b", f64)
    oa = k.buffer("oa", f16, "write")
    ob = k.buffer("ob", f64, "write")
    with k.if_(k.global_id(0) == 0):
        oa[0] = vyre.hypot(a[0], a[1])
        ob[0] = vyre.asin(b[0])
    prog = k.build()
    got = reference.dispatch(prog, {"a": np.array([3, 4], np.float16),
                                    "b": np.array([0.5]), "oa": 1, "ob": 1},
                             vyre.DispatchConfig(grid=1))
    assert got["oa"][0] == np.float16(5)
    assert got["ob"][0] == np.arcsin(0.5)
    # f16 hypot and f64 asin are their exact definitions (vyre.lower.maths), not C's
    # hypotf and asin
    assert "hypotf(" not in cuda.generate(prog).source
    assert "asin(" not in cuda.generate(prog).source


def test_hypot_of_inf_and_a_signaling_nan_is_inf(backend: BaseBackend) -> None:
    """docs/IR.md: hypot(+-inf, NaN) = +inf for any NaN; NumPy's hypot (libm) gives NaN for
    a signaling one (the operator sweep's f16 edge 0x7c01), GPUs have no signaling NaN."""
    k = ProgramBuilder("h16", workgroup_size=64)
    a = k.buffer("a", f16)
    b = k.buffer("b", f16)
    out = k.buffer("out", f16, "write")
    i = k.let(k.global_id(0))
    with k.if_(i < a.length()):
        out[i] = vyre.hypot(a[i], b[i])
    prog = k.build()
    snan = np.array([0x7C01, 0xFC00, 0x7E00], np.uint16).view(np.float16)
    inputs: dict[str, Any] = {"a": np.array([np.inf, snan[0], -np.inf], np.float16),
                              "b": snan[[0, 1, 2]], "out": 3}
    if not backend.supports(f16.feature or ""):
        pytest.skip(f"{backend.id} has no f16")
    got = backend.dispatch(prog, inputs, vyre.DispatchConfig(grid=1))["out"]
    assert got.tolist() == [np.inf, np.inf, np.inf]
