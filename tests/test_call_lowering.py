"""How a call of an exact function is lowered and spelled, beyond its bits (which
test_exact_functions.py checks): which arguments keep the `opaque` guard against a
driver's compile-time evaluation (vyre/lower/maths/runtime.py), the slow path outlined
as a cold Function (Builder.outlined) so the common path is inlined at every call even
in a coarsened kernel, and the lockstep printer computing a bounds-masked total value
for every invocation (CudaOptions.speculate). The results stay the reference's on wgpu
(lavapipe here) and CUDA for each argument form."""

from __future__ import annotations

import re

import numpy as np
import pytest

import vyre
from vyre import ScalarType
from vyre.backend import BaseBackend
from vyre.backends.cuda.options import CudaOptions
from vyre.backends.cuda.render import TRAITS, generate
from vyre.builder import ProgramBuilder, call_fn
from vyre.ir import nodes as N
from vyre.ir.analysis import walk_all_exprs
from vyre.lower import lower

f32 = ScalarType.F32


def _program(arg: str) -> N.Program:
    """y[i] = exp(<arg>) for one argument form."""
    k = ProgramBuilder(f"call_{arg}", workgroup_size=256)
    x = k.buffer("x", f32)
    y = k.buffer("y", f32, "write")
    i = k.let(k.global_linear_id())
    with k.if_(i < y.length()):
        if arg == "load":
            y[i] = call_fn("exp", x[i])
        elif arg == "affine":
            y[i] = call_fn("exp", x[i] * 0.5 + 1.0)
        elif arg == "chained":
            v = k.let(x[i])
            with k.for_range(0, 3):
                k.assign(v, call_fn("exp", -v))
            y[i] = v
        elif arg == "constant":
            y[i] = call_fn("exp", k.lit(1.5, f32))
        elif arg == "absorbed":
            y[i] = call_fn("exp", x[i] * 0.0)
        elif arg == "cancelled":
            y[i] = call_fn("exp", x[i] - x[i])
        elif arg == "loop_var":
            acc = k.let(k.lit(0.0, f32))
            with k.for_range(0, 3) as j:
                k.assign(acc, acc + call_fn("exp", j.cast(f32)))
            y[i] = acc
        else:
            raise AssertionError(arg)
    return k.build()


def _guarded_calls(program: N.Program) -> tuple[int, int]:
    """(calls of a definition, those whose argument is the opaque select) in the program
    lowered for CUDA."""
    calls = guarded = 0
    for e in walk_all_exprs(lower(program, TRAITS)):
        if isinstance(e, N.Invoke) and e.fn.name.startswith("exp_"):
            calls += 1
            a = e.args[0]
            guarded += isinstance(a, N.Select) and isinstance(a.cond, N.Binary) and \
                isinstance(a.cond.a, N.Builtin) and a.cond.a.name == "num_workgroups"
    return calls, guarded


@pytest.mark.parametrize("arg", ["load", "affine", "chained"])
def test_runtime_arguments_are_not_guarded(arg: str) -> None:
    calls, guarded = _guarded_calls(_program(arg))
    assert calls >= 1 and guarded == 0


@pytest.mark.parametrize("arg", ["constant", "absorbed", "cancelled", "loop_var"])
def test_arguments_that_may_be_constant_stay_guarded(arg: str) -> None:
    calls, guarded = _guarded_calls(_program(arg))
    assert calls >= 1 and guarded == calls


@pytest.mark.parametrize("arg", ["load", "affine", "chained", "constant", "absorbed",
                                 "cancelled", "loop_var"])
def test_each_argument_form_gives_the_reference_bits(arg: str, backend: BaseBackend,
                                                     reference: BaseBackend) -> None:
    prog = _program(arg)
    x = np.random.default_rng(3).uniform(-20, 20, 1000).astype(np.float32)
    x[:4] = [0.0, -0.0, 88.5, -104.0]
    cfg = vyre.DispatchConfig.for_elements(x.size, 256)
    ref = np.asarray(reference.dispatch(prog, {"x": x, "y": x.size}, cfg)["y"])
    got = np.asarray(backend.dispatch(prog, {"x": x, "y": x.size}, cfg)["y"])
    np.testing.assert_array_equal(got.view(np.uint32), ref.view(np.uint32))


def _declarations(source: str) -> dict[str, str]:
    return dict((m.group(2), m.group(1)) for m in re.finditer(
        r"__device__ (__noinline__|__forceinline__) float (vy_fn_\w+)\(", source))


def test_the_slow_path_is_cold_and_the_common_path_inlined_when_coarsened() -> None:
    src = generate(_program("load"), coarsen=4).source
    decls = _declarations(src)
    assert decls == {"vy_fn_exp_1f32_2e_slow": "__noinline__", "vy_fn_exp_1f32": "__forceinline__"}
    # declared before the function that calls it
    assert src.index("vy_fn_exp_1f32_2e_slow(float") < src.index("vy_fn_exp_1f32(float")


def test_a_large_definition_called_often_stays_one_function() -> None:
    k = ProgramBuilder("pow_map", workgroup_size=256)
    x, y = k.buffer("x", f32), k.buffer("y", f32, "write")
    i = k.let(k.global_linear_id())
    with k.if_(i < y.length()):
        y[i] = call_fn("pow", x[i], x[i] + 1.0)
    decls = _declarations(generate(k.build(), coarsen=4).source)
    assert list(decls.values()) == ["__noinline__"]


def _lockstep_calls(src: str) -> list[str]:
    """The kernel's lines that call exp's definition (one per coarsened invocation)."""
    return [ln.strip() for ln in src.splitlines()
            if "= vy_fn_exp_1f32(" in ln and "__device__" not in ln]


def test_lockstep_speculates_only_under_a_bounds_test() -> None:
    on = _lockstep_calls(generate(_program("load"), coarsen=4).source)
    assert len(on) == 4 and all(not ln.startswith("if (") for ln in on), on
    off = _lockstep_calls(generate(_program("load"), coarsen=4,
                                   options=CudaOptions(speculate=False)).source)
    assert len(off) == 4 and all(ln.startswith("if (vy_m") for ln in off), off
    # a data-dependent test keeps its mask: the call runs only where it holds
    k = ProgramBuilder("rare_exp", workgroup_size=256)
    x, y = k.buffer("x", f32), k.buffer("y", f32, "write")
    i = k.let(k.global_linear_id())
    with k.if_(i < y.length()):
        v = k.let(x[i])
        with k.if_(v > 50.0):
            y[i] = call_fn("exp", v)
    rare = _lockstep_calls(generate(k.build(), coarsen=4).source)
    assert len(rare) == 4 and all(ln.startswith("if (vy_m") for ln in rare), rare


def test_speculate_option_is_checked() -> None:
    with pytest.raises(vyre.errors.InvalidDispatch, match="speculate"):
        CudaOptions(speculate=1)  # type: ignore[arg-type]


def test_cuda_coarsens_kernels_with_exact_calls_further_unless_told(
        backends: dict[str, BaseBackend]) -> None:
    if "cuda" not in backends:
        pytest.skip("the CUDA backend is not available here (no GPU)")
    from vyre.backends.cuda import CudaBackend
    from vyre.backends.cuda.runtime import DEFAULT_CALLS_COARSEN, DEFAULT_COARSEN

    n = 1 << 20
    copy = ProgramBuilder("copy_map", workgroup_size=256)
    x, y = copy.buffer("x", f32), copy.buffer("y", f32, "write")
    i = copy.let(copy.global_linear_id())
    with copy.if_(i < y.length()):
        y[i] = x[i] + 1.0

    def factor(be: BaseBackend, prog: N.Program) -> int:
        xb, yb = (be.allocate_device_buffer(4 * n, label=s) for s in "xy")
        try:
            bound = be.bind(prog, {"x": xb}, {"y": yb}, vyre.DispatchConfig.for_elements(n, 256))
            # the compile key: (arch, restrict, coarsen, indirect)
            return int(be._compiler.specialisation(bound)[2])
        finally:
            be.free(xb)
            be.free(yb)

    cuda = backends["cuda"]
    assert factor(cuda, _program("load")) == DEFAULT_CALLS_COARSEN
    assert factor(cuda, copy.build()) == DEFAULT_COARSEN
    assert factor(cuda, _program("chained")) == DEFAULT_COARSEN  # a loop: latency-bound
    told = CudaBackend(0, coarsen=2)
    try:
        assert factor(told, _program("load")) == factor(told, copy.build()) == 2
    finally:
        told.close()
