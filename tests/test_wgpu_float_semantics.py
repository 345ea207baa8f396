"""Float semantics of the wgpu backend that a Vulkan driver is allowed to break, and that
the WGSL generator therefore enforces itself (docs/IR.md, "Float arithmetic", "Subnormals and flush mode").

- No NaN/inf/-0-unsafe rewriting (x * 0 -> 0, x - x -> 0, (0 - x) + x -> 0, x == x ->
  true, !(a < b) -> a >= b, -(a - b) -> b - a): Mesa's NIR does these without
  SignedZeroInfNanPreserve, which naga never emits.
- f16 arithmetic rounds every operation to f16 (no wider intermediates, no contraction),
  and f16 transcendentals meet the IR's tolerance (computed in f32, rounded once).
- Flush mode: a device that flushes f32 subnormals reports it and is compared with the
  reference in the same mode, exactly; VYRE_WGPU_FLUSH_SUBNORMALS=1 forces the mode.

Expected values are computed here with NumPy in the operand type, independently of the
reference backend, and every result is also checked against the reference. Skips with the
probe's reason when no WebGPU adapter exists (never silently).
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

import vyre
from vyre import DispatchConfig, ProgramBuilder, ScalarType
from vyre.backend import BaseBackend
from vyre.builder import atan2, cos, exp, exp2, log, log2, pow_, select, sin, tan, tanh
from vyre.tools.testing import (
    EXACT,
    assert_agree,
    check_against_reference,
    div_sqrt_inputs,
    div_sqrt_program,
    flushed_types,
    reference_for,
)

pytestmark = pytest.mark.wgpu

F32, F16, U32 = ScalarType.F32, ScalarType.F16, ScalarType.U32


def _wgpu() -> BaseBackend:
    from vyre.backends.wgpu import PROVIDER

    avail = PROVIDER.probe()
    if not avail.available:
        pytest.skip(f"wgpu backend unavailable: {avail.reason}")
    return PROVIDER.create()


@pytest.fixture(scope="module")
def wg() -> Iterator[BaseBackend]:
    b = _wgpu()
    yield b
    b.close()


@pytest.fixture(scope="module")
def ref() -> Iterator[BaseBackend]:
    r = vyre.get_backend("reference")
    yield r
    r.close()


def _need(wg: BaseBackend, ty: ScalarType) -> None:
    if ty.feature and not wg.supports(ty.feature):
        pytest.skip(f"{wg.id} does not report feature {ty.feature!r}")


SPECIALS = [np.inf, -np.inf, np.nan, 0.0, -0.0, 1.5, -3.0, 1000.0]


@pytest.mark.parametrize("ty", [F32, F16], ids=str)
def test_no_nan_or_inf_unsafe_rewrites(wg: BaseBackend, ref: BaseBackend, ty: ScalarType) -> None:
    _need(wg, ty)
    k = ProgramBuilder(f"nan_safe_{ty}", workgroup_size=8)
    x = k.buffer("x", ty)
    o = k.buffer("o", ty, "write", count=6 * len(SPECIALS))
    ob = k.buffer("ob", U32, "write", count=3 * len(SPECIALS))
    n = len(SPECIALS)
    i = k.global_linear_id()
    with k.if_(i < x.length()):
        v = k.let(x[i])
        zero = k.lit(0.0, ty)
        o[i] = v * (zero - zero)  # inf * 0 = NaN
        o[i + n] = v - v  # inf - inf = NaN
        o[i + 2 * n] = (zero - v) + v  # no reassociation to 0
        o[i + 3 * n] = v * 0.0  # x * 0 is not folded
        o[i + 4 * n] = k.lit(1.0, ty) / -(v - v)  # -(+0) = -0: 1 / -0 = -inf
        o[i + 5 * n] = k.lit(1.0, ty) / (v + 0.0)  # -0 + 0 = +0
        ob[i] = select(v == v, k.lit(1, U32), k.lit(0, U32))  # NaN == NaN is false
        ob[i + n] = select(~(v < 1.0), k.lit(1, U32), k.lit(0, U32))  # !(NaN < 1) is true
        ob[i + 2 * n] = select(v != v, k.lit(1, U32), k.lit(0, U32))
    prog = k.build()
    xs = np.array(SPECIALS, dtype=ty.numpy)
    got = check_against_reference(prog, {"x": xs}, DispatchConfig(grid=1), [wg], ref)[wg.id]
    one = ty.numpy.type(1)
    with np.errstate(all="ignore"):
        exp_o = np.concatenate([
            xs * (ty.numpy.type(0) - ty.numpy.type(0)), xs - xs, (ty.numpy.type(0) - xs) + xs,
            xs * ty.numpy.type(0), one / -(xs - xs), one / (xs + ty.numpy.type(0)),
        ]).astype(ty.numpy)
        exp_b = np.concatenate([xs == xs, ~(xs < 1), xs != xs]).astype(np.uint32)
    assert_agree(got["o"], exp_o, EXACT, f"{ty} arithmetic")
    assert_agree(got["ob"], exp_b, EXACT, f"{ty} comparisons")
    # -0 == +0 under the comparison rules, so the sign of zero is checked through 1/x above
    assert np.isneginf(got["o"][4 * n + 3]) and np.isposinf(got["o"][5 * n + 4])


def test_f16_rounds_every_operation(wg: BaseBackend, ref: BaseBackend) -> None:
    """(2048 + 1) + 1 is 2048 in f16 (ties to even each time), and a*a - 1 is not fused."""
    _need(wg, F16)
    k = ProgramBuilder("f16_steps", workgroup_size=1)
    x = k.buffer("x", F16)
    o = k.buffer("o", F16, "write", count=3)
    o[0] = (x[0] + 1.0) + 1.0
    a = k.let(x[1])
    o[1] = a * a - 1.0
    o[2] = (x[2] * x[2]) * 0.5  # 300 * 300 overflows f16 (inf), even if f32 would not
    prog = k.build()
    xs = np.array([2048, 1 + 3 * 2.0**-10, 300], dtype=np.float16)
    got = check_against_reference(prog, {"x": xs}, DispatchConfig(grid=1), [wg], ref)[wg.id]
    h = np.float16
    with np.errstate(over="ignore"):
        expected = np.array(
            [(xs[0] + h(1)) + h(1), xs[1] * xs[1] - h(1), (xs[2] * xs[2]) * h(0.5)], np.float16
        )
    assert expected[1] != np.float16(float(xs[1]) ** 2 - 1)  # the fused value differs
    assert_agree(got["o"], expected, EXACT, "f16 steps")


F16_FNS = {
    "exp": lambda v, w: exp(v), "exp2": lambda v, w: exp2(v), "log": lambda v, w: log(v),
    "log2": lambda v, w: log2(v), "sin": lambda v, w: sin(v), "cos": lambda v, w: cos(v),
    "tan": lambda v, w: tan(v), "tanh": lambda v, w: tanh(v), "pow": pow_,
    "atan2": atan2,
}


@pytest.mark.parametrize("fn", sorted(F16_FNS))
def test_f16_transcendentals_within_tolerance(
    wg: BaseBackend, ref: BaseBackend, fn: str
) -> None:
    """Every f16 in [-12, 12) (and specials): the IR's 4 ulp (the driver's f16 exp alone is
    5 ulp off at 9.4; vyre computes them in f32 and rounds once)."""
    _need(wg, F16)
    k = ProgramBuilder(f"f16_{fn}", workgroup_size=64)
    x = k.buffer("x", F16)
    y = k.buffer("y", F16)
    o = k.buffer("o", F16, "write")
    i = k.global_linear_id()
    with k.if_(i < x.length()):
        o[i] = F16_FNS[fn](x[i], y[i])
    prog = k.build()
    xs = np.arange(-12, 12, 2.0**-5, dtype=np.float16)
    xs = np.concatenate([xs, np.array([np.inf, -np.inf, np.nan, -0.0, 9.4], np.float16)])
    ys = np.resize(np.array([2.0, -1.5, 0.5, 3.0, -0.0, 7.0], np.float16), xs.size)
    check_against_reference(
        prog, {"x": xs, "y": ys, "o": xs.size}, DispatchConfig(grid=-(-xs.size // 64)), [wg], ref
    )


# ------------------------------------------------------------------ flush mode

TINY = float(np.finfo(np.float32).tiny)  # smallest normal f32
SUBS = np.array([1e-45, -1e-45, TINY, -TINY, 1e-40, 1.0, -0.0, 3.0], dtype=np.float32)


def _flush_program() -> vyre.Program:
    k = ProgramBuilder("flush_mode", workgroup_size=8)
    x = k.buffer("x", F32)
    o = k.buffer("o", F32, "write", count=5 * SUBS.size)
    ob = k.buffer("ob", U32, "write", count=SUBS.size)
    n = SUBS.size
    i = k.global_linear_id()
    with k.if_(i < x.length()):
        v = k.let(x[i])
        o[i] = v * 1.0  # a subnormal operand
        o[i + n] = v * 0.5  # TINY * 0.5: a subnormal result
        o[i + 2 * n] = v  # a move: never flushed
        o[i + 3 * n] = -v  # a sign-bit operation: never flushed
        o[i + 4 * n] = k.lit(1.0, F32) / (v + 0.0)  # 1 / (flushed -1e-45) = -inf
        ob[i] = (v != 0.0).cast(U32)  # a comparison flushes its operands
    return k.build()


def _flushed(a: np.ndarray) -> np.ndarray:
    sub = (a != 0) & (np.abs(a) < TINY)
    return np.where(sub, np.copysign(np.float32(0), a), a).astype(np.float32)


def test_flush_mode_is_reported_and_compared_exactly(
    wg: BaseBackend, ref: BaseBackend, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VYRE_WGPU_FLUSH_SUBNORMALS", "1")
    ftz = _wgpu()
    try:
        assert flushed_types(ftz) == {F32}
        mode_ref = reference_for(ftz, ref)
        assert mode_ref is not ref and flushed_types(mode_ref) == {F32}
        prog = _flush_program()
        got = check_against_reference(prog, {"x": SUBS}, DispatchConfig(grid=1), [ftz], ref)
        f = _flushed(SUBS)
        with np.errstate(divide="ignore"):
            expected = np.concatenate(
                [f, _flushed(f * np.float32(0.5)), SUBS, -SUBS, np.float32(1) / (f + np.float32(0))]
            ).astype(np.float32)
        assert_agree(got[ftz.id]["o"], expected, EXACT, "flush mode")
        assert_agree(got[ftz.id]["ob"], (f != 0).astype(np.uint32), EXACT, "flush mode bools")
        # the mode matters: IEEE keeps these subnormals
        ieee = ref.dispatch(prog, {"x": SUBS}, DispatchConfig(grid=1))
        assert ieee["o"][0] == np.float32(1e-45) and got[ftz.id]["o"][0] == 0.0
        assert np.signbit(got[ftz.id]["o"][1])  # -1e-45 flushes to -0
    finally:
        ftz.close()


def test_default_mode_matches_what_the_device_does(wg: BaseBackend, ref: BaseBackend) -> None:
    """Without the override the mode is measured: IEEE devices keep subnormals, and either
    way the results equal the reference in the reported mode."""
    prog = _flush_program()
    got = check_against_reference(prog, {"x": SUBS}, DispatchConfig(grid=1), [wg], ref)[wg.id]
    if F32 in flushed_types(wg):
        assert got["o"][0] == 0.0
    else:
        assert got["o"][0] == np.float32(1e-45) and got["o"][SUBS.size + 2] != 0.0


def test_f64_is_reported_where_the_adapter_has_it(wg: BaseBackend) -> None:
    """f64 runs wherever the adapter has shader-f64; only the f64 transcendentals WGSL
    lacks (and NVIDIA's driver computed wrongly or crashed compiling) are refused, by name
    (tests/test_wgpu_f64.py)."""
    has = "shader-f64" in wg.capabilities().details["wgpu_features"]
    assert ("f64" in wg.capabilities().features) == has
    refused = wg.capabilities().details["refused_calls"].get("f64", ())
    assert ("approx_exp" in refused) == has and "exp" not in refused  # (exp: vyre's own)


# ------------------------------------------------------------------ division and sqrt


def _random_pairs(n: int) -> tuple[np.ndarray, np.ndarray]:
    """The probe's hard cases plus `n` random pairs with uniformly random bits (every
    exponent, subnormals included) and `n` pairs within 2^+-20 of each other."""
    from vyre.backends.wgpu.divsqrt import div_cases, random_f32, sqrt_cases

    rng = np.random.default_rng(20)
    a, b = div_cases()
    s = sqrt_cases()
    near = rng.standard_normal(n).astype(np.float32)
    xs = np.concatenate([a, random_f32(rng, n), near, s])
    ys = np.concatenate([b, random_f32(rng, n), near * np.float32(2.0) ** rng.integers(-20, 21, n)
                         .astype(np.float32), np.resize(b, s.size)])
    return xs.astype(np.float32), ys.astype(np.float32)


def _check_div_sqrt(be: BaseBackend, xs: np.ndarray, ys: np.ndarray) -> None:
    """Bit-identical to NumPy's IEEE f32 (in the backend's flush mode) and the reference."""
    from vyre.backends.wgpu.divsqrt import expected_div, expected_sqrt, flushed, same_bits

    flush = F32 in flushed_types(be)
    n = xs.size
    got = be.dispatch(div_sqrt_program(F32), *div_sqrt_inputs(xs, ys))
    for name, want in (("q", expected_div(xs, ys, flush)), ("r", expected_sqrt(xs, flush))):
        if not same_bits(got[name], want, flush):
            g = flushed(got[name]) if flush else got[name]
            differ = (g.view(np.uint32) != want.view(np.uint32)) & ~(np.isnan(g) & np.isnan(want))
            bad = np.flatnonzero(differ)
            shown = [(xs[i], ys[i], got[name][i], want[i]) for i in bad[:6]]
            raise AssertionError(f"{name}: {bad.size} of {n} differ: {shown}")


# the WGSL functions of vyre.lower.divsqrt's definitions (mangled names), and their forms
# with the f64 fast path
_EXACT_FNS = ("vy_fn_exact_1div_1f32", "vy_fn_exact_1sqrt_1f32")


def _fast_fns(be: BaseBackend) -> tuple[str, str]:
    """The exact division's and sqrt's fast-path functions this adapter's source names:
    division in f32 alone where its fma rounds once, else (as sqrt) in f64."""
    d = be.capabilities().details
    div = "_1fused(" if d["fma_rounds_once"] else "_1wide("
    return (f"{_EXACT_FNS[0]}{div}", f"{_EXACT_FNS[1]}_1wide(")


@pytest.mark.parametrize("flush", [False, True], ids=["ieee", "flush"])
def test_exact_division_and_sqrt_forced(
    monkeypatch: pytest.MonkeyPatch, ref: BaseBackend, flush: bool
) -> None:
    """vyre's exact division and sqrt (what the probe picks on NVIDIA's Vulkan driver),
    forced on this adapter: bit-identical on 2 x 2^16 random pairs over the whole exponent
    range plus the hard cases (x / x at the limits, 33 / 33, subnormal and overflowing
    quotients, +-0, inf, NaN), rem and f16 included, in both f32 modes. (The fast path's
    correction of bad estimates: tests/test_exact_divsqrt.py, on the reference.)"""
    monkeypatch.setenv("VYRE_WGPU_DIV_SQRT", "exact")
    if flush:
        monkeypatch.setenv("VYRE_WGPU_FLUSH_SUBNORMALS", "1")
    be = _wgpu()
    try:
        src = be.source(div_sqrt_program(F32))  # type: ignore[attr-defined]
        assert all(f in src for f in _EXACT_FNS)
        details = be.capabilities().details
        wide = bool(details["f64_arithmetic"])
        div_fn, sqrt_fn = _fast_fns(be)  # the fast paths are there
        assert (div_fn in src) == (wide or details["fma_rounds_once"])
        assert (sqrt_fn in src) == wide
        assert be.capabilities().details["f32_div_sqrt"] == "div exact (vyre), sqrt exact (vyre)"
        xs, ys = _random_pairs(1 << 16)
        _check_div_sqrt(be, xs, ys)
        check_against_reference(  # rem (step by step through the exact division) too
            div_sqrt_program(F32), *div_sqrt_inputs(xs, ys), [be], ref, EXACT,
        )
        if be.supports("f16"):
            rng = np.random.default_rng(21)  # f16 from random bits: every f16 exponent
            h = rng.integers(0, 1 << 16, 4096, dtype=np.uint32).astype(np.uint16).view(np.float16)
            g = np.roll(h, 1)
            check_against_reference(
                div_sqrt_program(F16), *div_sqrt_inputs(h, g), [be], ref, EXACT,
            )
    finally:
        be.close()


@pytest.mark.parametrize("flush", [False, True], ids=["ieee", "flush"])
def test_exact_sqrt_of_a_value_computed_from_params_only(
    monkeypatch: pytest.MonkeyPatch, ref: BaseBackend, flush: bool
) -> None:
    """vyre's exact sqrt of a uniform value, as in PolyBench's correlation (data / (sqrt(
    float_n) * stddev[j]), float_n a param): lavapipe's compiler looks for branches on values
    computed from uniforms only by walking their operands without memoising, and a branch on
    the digit-by-digit root's 26-step chain made that walk exponential (the shader never
    finished compiling). Exact on both sides of the f64 fast path's range, subnormal too."""
    monkeypatch.setenv("VYRE_WGPU_DIV_SQRT", "exact")
    if flush:
        monkeypatch.setenv("VYRE_WGPU_FLUSH_SUBNORMALS", "1")
    k = ProgramBuilder("sqrt_of_params", 1)
    x = k.buffer("x", F32)
    out = k.buffer("out", F32, "write")
    p, q = k.param("p", F32), k.param("q", F32)
    root = k.let(vyre.sqrt(p))
    out[0] = root
    out[1] = x[0] / (vyre.sqrt(p + q) * x[1])
    prog = k.build()
    be = _wgpu()
    try:
        assert _EXACT_FNS[1] in be.source(prog)
        for pv in (5.0, 0.5, 2.0**-100, 3e30, 1e-40, 0.0):
            cfg = DispatchConfig(grid=1, params={"p": pv, "q": 1.25})
            inputs = {"x": np.array([3.0, 7.0], np.float32), "out": 2}
            check_against_reference(prog, inputs, cfg, [be], ref, EXACT)
    finally:
        be.close()


def test_division_and_sqrt_on_this_adapter(wg: BaseBackend) -> None:
    """Whatever the probe chose here (the driver's operation where it is correctly rounded,
    vyre's exact one where not): bit-identical on the same cases."""
    details = wg.capabilities().details
    assert isinstance(details["div_correctly_rounded"], bool)
    assert isinstance(details["sqrt_correctly_rounded"], bool)
    xs, ys = _random_pairs(1 << 16)
    _check_div_sqrt(wg, xs, ys)


def test_native_switch_uses_the_drivers_operations(monkeypatch: pytest.MonkeyPatch) -> None:
    """scripts/div_bench.py's baseline: VYRE_WGPU_DIV_SQRT=native emits WGSL's / and sqrt."""
    monkeypatch.setenv("VYRE_WGPU_DIV_SQRT", "native")
    be = _wgpu()
    try:
        src = be.source(div_sqrt_program(F32))  # type: ignore[attr-defined]
        assert not any(f in src for f in _EXACT_FNS) and "sqrt(" in src
    finally:
        be.close()


def test_probes_measure_the_device(wg: BaseBackend) -> None:
    """The fma probe against an independent measurement (fma(1+2^-23, 1-2^-23, -1) is
    -2^-46 rounded once, 0 rounded twice); the loop limit against a loop that asks for
    more iterations than the limit."""
    import struct

    from vyre.backends.wgpu.adapter import _run_probe

    dev = wg.device  # type: ignore[attr-defined]
    code = (
        "@group(0) @binding(0) var<storage, read_write> b: array<f32>;\n"
        "@compute @workgroup_size(1) fn main() { b[3] = fma(b[0], b[1], b[2]); }"
    )
    data = struct.pack("<4f", 1 + 2.0**-23, 1 - 2.0**-23, -1.0, 0.0)
    fused = struct.unpack("<4f", _run_probe(dev, code, data))[3] == -(2.0**-46)
    assert wg.capabilities().details["fma_rounds_once"] is fused
    limit = wg.capabilities().details["loop_iteration_limit"]
    code = (
        "@group(0) @binding(0) var<storage, read_write> b: array<u32>;\n"
        "@compute @workgroup_size(1) fn main() {\n"
        "  var c = 0u;\n  loop { if (c >= b[0]) { break; } c = c + 1u; }\n  b[1] = c;\n}"
    )
    got = struct.unpack("<2I", _run_probe(dev, code, struct.pack("<2I", 100_000, 0)))[1]
    # (the loop budget itself: tests/test_wgpu_loop_budget.py)
    assert (limit is None and got == 100_000) or (limit is not None and got == limit < 100_000)


def test_probe_command_reports_the_measurements(wg: BaseBackend) -> None:
    import io

    from vyre.tools.cli import main

    out = io.StringIO()
    main(["probe"], out=out)
    text = out.getvalue()
    for key in ("div_correctly_rounded", "sqrt_correctly_rounded", "loop_iteration_limit",
                "fma_rounds_once", "f32_div_sqrt"):
        assert key in text, text


def test_fma_that_rounds_twice_is_emulated_or_refused() -> None:
    """IR fma rounds once: exact in f64 where the driver's rounds twice, and a clear
    UnsupportedFeature (not double-rounded bits) where the device has no f64/i64 either."""
    from vyre.backends.wgpu import render as wgsl
    from vyre.builder import fma
    from vyre.errors import UnsupportedFeature

    k = ProgramBuilder("fma_once", workgroup_size=1)
    x = k.buffer("x", F32)
    o = k.buffer("o", F32, "write", count=1)
    o[0] = fma(x[0], x[1], x[2])
    prog = k.build()
    exact = "vy_fn_exact_1fma_1f32("  # vyre.lower.fma's definition
    assert exact in wgsl.generate(prog, fma_fused=False).source
    assert exact not in wgsl.generate(prog, fma_fused=True).source
    narrow = frozenset({ScalarType.BOOL, ScalarType.I32, U32, F32})
    with pytest.raises(UnsupportedFeature, match="fma_rounds_once"):
        wgsl.generate(prog, allowed_types=narrow, fma_fused=False)
