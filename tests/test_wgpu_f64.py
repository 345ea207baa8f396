"""f64 on wgpu wherever the adapter has shader-f64 (issue 32 item 5): the arithmetic is
exact per docs/IR.md, bit for bit with the reference (lavapipe's own f64 fma rounds twice,
so vyre's integer fma runs; NVIDIA's f64 division and sqrt are not correctly rounded, so
vyre's integer division and sqrt run there, forced here with VYRE_WGPU_DIV_SQRT=exact);
the f64 transcendental functions WGSL lacks raise UnsupportedFeature naming the function."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest

import vyre
from vyre import DispatchConfig, ProgramBuilder, ScalarType, UnsupportedFeature
from vyre.backend import BaseBackend
from vyre.builder import call_fn, ceil, cos, exp, floor, fma, log, round_, sin, sqrt, trunc
from vyre.tools.conformance import CASES, check_case, unsupported_reason
from vyre.tools.testing import assert_agree, reference_for

F64, F32, I64, U32 = ScalarType.F64, ScalarType.F32, ScalarType.I64, ScalarType.U32
N = 1 << 14

OPS: dict[str, Callable[[Any, Any, Any], Any]] = {
    "add": lambda x, y, z: x + y, "sub": lambda x, y, z: x - y,
    "mul": lambda x, y, z: x * y, "div": lambda x, y, z: x / y,
    "rem": lambda x, y, z: x % y, "mul_add": lambda x, y, z: x * y + z,  # no contraction
    "sqrt": lambda x, y, z: sqrt(abs(x)), "fma": lambda x, y, z: fma(x, y, z),
    "floor": lambda x, y, z: floor(x), "ceil": lambda x, y, z: ceil(x),
    "trunc": lambda x, y, z: trunc(x), "round": lambda x, y, z: round_(x),
    "to_f32": lambda x, y, z: x.cast(F32).cast(F64),
    "to_i64": lambda x, y, z: x.cast(I64).cast(F64),
    "literal": lambda x, y, z: x * 0.1 + 1e-310,  # f64 literals by their bits
    "lt": lambda x, y, z: (x < y).cast(F64),
}


@pytest.fixture(scope="module", params=["driver", "exact-div-sqrt"])
def wgpu64(request: pytest.FixtureRequest) -> Iterator[BaseBackend]:
    from vyre.backends.wgpu import PROVIDER

    avail = PROVIDER.probe()
    if not avail.available:
        pytest.skip(f"wgpu backend unavailable: {avail.reason}")
    with pytest.MonkeyPatch.context() as mp:
        if request.param == "exact-div-sqrt":
            mp.setenv("VYRE_WGPU_DIV_SQRT", "exact")
        be = PROVIDER.create()
    if not be.supports("f64"):
        be.close()
        pytest.skip("this adapter has no shader-f64")
    yield be
    be.close()


def _data() -> dict[str, np.ndarray]:
    """Random bit patterns (every exponent, subnormals, specials), every pair of edge
    values, tiny products (subnormal fma results) and products that c cancels."""
    rng = np.random.default_rng(7)
    a, b, c = (rng.integers(0, 2**64, N, dtype=np.uint64).view(np.float64) for _ in range(3))
    edges = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 5e-324, -5e-324,
                      2.2250738585072014e-308, 2.225073858507201e-308, 1.7976931348623157e308,
                      1.0, -1.0, 3.0, 0.1, 1e-300, 1e300, 1.5 * 2.0**-1022], np.float64)
    k = len(edges) ** 2
    a[:k], b[:k] = np.repeat(edges, len(edges)), np.tile(edges, len(edges))
    m = slice(2000, 6000)
    a[m] = rng.standard_normal(4000) * np.exp2(rng.integers(-1074, -1000, 4000))
    b[m] = rng.standard_normal(4000) * np.exp2(rng.integers(-60, 60, 4000))
    c[2000:4000] = -a[2000:4000] * b[2000:4000]
    return {"x": a, "y": b, "z": c}


def _program(name: str, fn: Callable[[Any, Any, Any], Any]) -> vyre.Program:
    k = ProgramBuilder(f"f64_{name}", workgroup_size=64)
    x, y, z = k.buffer("x", F64), k.buffer("y", F64), k.buffer("z", F64)
    o = k.buffer("o", F64, "write")
    i = k.global_id()
    o[i] = fn(x[i], y[i], z[i])
    return k.build()


@pytest.mark.parametrize("op", list(OPS))
def test_f64_arithmetic_is_bit_identical_to_reference(op: str, wgpu64: BaseBackend,
                                                      reference: BaseBackend) -> None:
    prog = _program(op, OPS[op])
    data = {**_data(), "o": N}
    cfg = DispatchConfig(grid=(N // 64, 1, 1))
    # (in the wgpu device's flush mode: NVIDIA's Vulkan driver flushes f32, so an f64 -> f32
    # cast of a value below f32's smallest normal is a zero there, docs/IR.md)
    want = reference_for(wgpu64, reference).dispatch(prog, data, cfg)["o"]
    got = wgpu64.dispatch(prog, data, cfg)["o"]
    same = (want.view(np.uint64) == got.view(np.uint64)) | (np.isnan(want) & np.isnan(got))
    bad = np.nonzero(~same)[0]
    assert not bad.size, [(data["x"][j], data["y"][j], want[j], got[j]) for j in bad[:4]]


def test_exact_paths_are_the_ones_that_ran(wgpu64: BaseBackend) -> None:
    """fma is vyre's integer one everywhere (Vulkan lets an f64 fma round twice); division
    and sqrt are where the driver's are not correctly rounded."""
    src = wgpu64.source(_program("fma_div_sqrt", lambda x, y, z: fma(x, y, z) / sqrt(z)))
    assert "vy_fn_exact_1fma_1f64(" in src  # (vyre.lower.fma's definition)
    exact = wgpu64.capabilities().details["f32_div_sqrt"] == "div exact (vyre), sqrt exact (vyre)"
    # (vyre.lower.divsqrt's definitions, printed as WGSL functions)
    assert ("vy_fn_exact_1div_1f64(" in src) == exact
    assert ("vy_fn_exact_1sqrt_1f64(" in src) == exact


@pytest.mark.parametrize("fn", ["approx_sin", "approx_exp"])
def test_f64_transcendental_raises_naming_it(fn: str, wgpu64: BaseBackend) -> None:
    """The backends' own f64 functions (vyre.approx) have no WGSL form."""
    prog = _program(fn, lambda x, y, z: call_fn(fn, x))
    data = {**_data(), "o": N}
    with pytest.raises(UnsupportedFeature, match=f"f64 {fn}"):
        wgpu64.dispatch(prog, data, DispatchConfig(grid=(N // 64, 1, 1)))
    assert wgpu64.live_buffers() == []
    refused = wgpu64.capabilities().details["refused_calls"]["f64"]
    assert fn in refused and "sqrt" not in refused


@pytest.mark.parametrize("fn", [sin, cos])
def test_f64_function_with_a_definition_runs(fn: Callable[[Any], Any], wgpu64: BaseBackend,
                                             reference: BaseBackend) -> None:
    """f64 sin and cos are vyre's definitions (vyre.lower.maths), so wgpu runs them, bit
    for bit with the reference, and neither refuses nor names them as refused."""
    prog = _program(fn.__name__, lambda x, y, z: fn(x * 1e3) + fn(y))
    data = {**_data(), "o": N}
    cfg = DispatchConfig(grid=(N // 64, 1, 1))
    got = wgpu64.dispatch(prog, data, cfg)["o"]
    want = reference_for(wgpu64, reference).dispatch(prog, data, cfg)["o"]
    assert_agree(got, want, what=f"f64 {fn.__name__}")  # bits, any NaN for a NaN (docs/IR.md)
    assert fn.__name__ not in wgpu64.capabilities().details["refused_calls"]["f64"]
    said = wgpu64.capabilities().details["f64_arithmetic"]
    assert fn.__name__ in said.split(" (vyre's definitions)")[0].split("and ")[-1].split(", ")


def test_f64_exp_runs_with_the_reference_s_bits(wgpu64: BaseBackend,
                                                reference: BaseBackend) -> None:
    """f64 exp and log are vyre's definitions (vyre.lower.maths): they run on wgpu and
    give the reference's bits (tests/test_exact_f64.py checks them against the oracle)."""
    prog = _program("exp_log", lambda x, y, z: exp(x) + log(abs(y)))
    data = {**_data(), "o": N}
    cfg = DispatchConfig(grid=(N // 64, 1, 1))
    got, want = wgpu64.dispatch(prog, data, cfg)["o"], reference.dispatch(prog, data, cfg)["o"]
    same = (got.view(np.uint64) == want.view(np.uint64)) | (np.isnan(got) & np.isnan(want))
    assert same.all(), np.flatnonzero(~same)[:8]


def test_probe_says_f64_runs(wgpu64: BaseBackend) -> None:
    d = wgpu64.capabilities().details
    assert d["f64_arithmetic"].startswith("yes")
    assert ("exp, exp2, log, log2, sin, cos, tan, tanh, pow, atan2, asin, acos, hypot "
            "(vyre's definitions)") in d["f64_arithmetic"]
    assert "f64" in wgpu64.capabilities().features


@pytest.mark.parametrize("name", sorted(n for n in CASES if "f64" in n or "64" in n))
def test_f64_conformance_cases(name: str, wgpu64: BaseBackend, reference: BaseBackend) -> None:
    """The conformance suite's f64 cases, also with vyre's exact division and sqrt (what
    NVIDIA's Vulkan driver gets)."""
    case = CASES[name]
    why = unsupported_reason(case, wgpu64)
    if why is not None:
        pytest.skip(why)
    check_case(case, wgpu64, reference)
