"""Conformance by topic with the IR's exact semantics (docs/IR.md), on every registered
backend (conftest's `backend` fixture, `--backend NAME` for one), checked against the
reference backend and, for the edge cases, against values computed here. First written for
wgpu (hence the file and fixture names); only test_f64_transcendental_is_refused_not_wrong
is wgpu's own. Skips with the probe's reason where a backend is not available (never
silently).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import pytest

import vyre
from vyre import DispatchConfig, ProgramBuilder, ScalarType
from vyre.backend import BaseBackend
from vyre.builder import (
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
from vyre.ir.nodes import Program
from vyre.tools.testing import assert_agree, check_against_reference, random_array, tolerance_for

pytestmark = pytest.mark.wgpu

I32, U32, F32 = ScalarType.I32, ScalarType.U32, ScalarType.F32
F16, F64, I64, U64 = ScalarType.F16, ScalarType.F64, ScalarType.I64, ScalarType.U64
CORE = (I32, U32, F32)
N_ELEMS = 300


@pytest.fixture
def wg(backend: BaseBackend) -> BaseBackend:
    """The backend under test: each registered backend in turn."""
    return backend


@pytest.fixture
def ref(reference: BaseBackend) -> BaseBackend:
    return reference


@pytest.fixture(scope="module")
def wgpu_backend(backends: dict[str, BaseBackend]) -> BaseBackend:
    if "wgpu" not in backends:
        why = {a.name: a.reason for a in vyre.available_backends()}.get("wgpu", "not registered")
        pytest.skip(f"wgpu backend unavailable: {why}")
    return backends["wgpu"]


def agree(
    wg: BaseBackend,
    ref: BaseBackend | None,
    program: Program,
    inputs: Mapping[str, Any],
    config: DispatchConfig,
    expected: Mapping[str, Any] | None = None,
) -> dict[str, np.ndarray]:
    """The backend's outputs, checked against the reference backend and `expected` (if
    given) under the backend's comparison rules."""
    if ref is not None:
        got = check_against_reference(program, inputs, config, [wg], ref)[wg.id]
    else:
        got = wg.dispatch(program, inputs, config)
    for name, e in (expected or {}).items():
        assert_agree(got[name], np.asarray(e, dtype=got[name].dtype),
                     tolerance_for(program, wg.kind), name)
    return got


def need(wg: BaseBackend, *types: ScalarType) -> None:
    for t in types:
        if t.feature and not wg.supports(t.feature):
            pytest.skip(f"{wg.id} does not report feature {t.feature!r}")


def elementwise(
    name: str, in_types: tuple[ScalarType, ...], out_ty: ScalarType,
    body: Callable[..., Any], wgs: int = 64,
) -> Program:
    k = ProgramBuilder(name, workgroup_size=wgs)
    ins = [k.buffer(f"in{j}", t) for j, t in enumerate(in_types)]
    out = k.buffer("out", out_ty, "write")
    i = k.global_linear_id()
    with k.if_(i < out.length()):
        out[i] = body(*[b[i] for b in ins])
    return k.build()


def run_elementwise(wg: BaseBackend, ref: BaseBackend | None, prog: Program,
                    in_types: tuple[ScalarType, ...], seed: int,
                    expected: Callable[..., Any] | None = None) -> None:
    rng = np.random.default_rng(seed)
    ins = {f"in{j}": random_array(rng, t, N_ELEMS) for j, t in enumerate(in_types)}
    ins["out"] = N_ELEMS  # type: ignore[assignment]
    cfg = DispatchConfig.for_elements(N_ELEMS, 64)
    exp = None
    if expected is not None:
        with np.errstate(all="ignore"):
            exp = {"out": expected(*[ins[f"in{j}"] for j in range(len(in_types))])}
    agree(wg, ref, prog, ins, cfg, exp)


# ------------------------------------------------------------------ binary operators

BIN_OPS: dict[str, Callable[[Any, Any], Any]] = {
    "add": lambda a, b: a + b,
    "sub": lambda a, b: a - b,
    "mul": lambda a, b: a * b,
    "div": lambda a, b: a / b,
    "rem": lambda a, b: a % b,
    "min": lambda a, b: min_(a, b),
    "max": lambda a, b: max_(a, b),
}
INT_OPS: dict[str, Callable[[Any, Any], Any]] = {
    "and": lambda a, b: a & b,
    "or": lambda a, b: a | b,
    "xor": lambda a, b: a ^ b,
}
CMP_OPS: dict[str, Callable[[Any, Any], Any]] = {
    "eq": lambda a, b: a == b, "ne": lambda a, b: a != b, "lt": lambda a, b: a < b,
    "le": lambda a, b: a <= b, "gt": lambda a, b: a > b, "ge": lambda a, b: a >= b,
}


@pytest.mark.parametrize("ty", CORE, ids=str)
@pytest.mark.parametrize("op", sorted(BIN_OPS))
def test_binary_arith(wg: BaseBackend, ref: BaseBackend | None, ty: ScalarType, op: str) -> None:
    prog = elementwise(f"bin_{op}_{ty}", (ty, ty), ty, BIN_OPS[op])
    run_elementwise(wg, ref, prog, (ty, ty), seed=hash((op, str(ty))) & 0xFFFF)


@pytest.mark.parametrize("ty", (I32, U32), ids=str)
@pytest.mark.parametrize("op", sorted(INT_OPS))
def test_bitwise(wg: BaseBackend, ref: BaseBackend | None, ty: ScalarType, op: str) -> None:
    prog = elementwise(f"bit_{op}_{ty}", (ty, ty), ty, INT_OPS[op])
    run_elementwise(wg, ref, prog, (ty, ty), seed=7)


@pytest.mark.parametrize("ty", CORE, ids=str)
@pytest.mark.parametrize("op", sorted(CMP_OPS))
def test_comparisons(wg: BaseBackend, ref: BaseBackend | None, ty: ScalarType, op: str) -> None:
    prog = elementwise(f"cmp_{op}_{ty}", (ty, ty), U32,
                       lambda a, b: CMP_OPS[op](a, b).cast(U32))
    run_elementwise(wg, ref, prog, (ty, ty), seed=11)


@pytest.mark.parametrize("ty", (I32, U32), ids=str)
@pytest.mark.parametrize("op", ["shl", "shr"])
def test_shifts_modulo_width(wg: BaseBackend, ref: BaseBackend | None, ty: ScalarType,
                             op: str) -> None:
    def body(a: Any, b: Any) -> Any:
        return a << b if op == "shl" else a >> b

    prog = elementwise(f"{op}_{ty}", (ty, U32), ty, body)
    a = np.array([1, -8 if ty is I32 else 0xF0000000, 12345, 0x7FFFFFFF] * 4, dtype=ty.numpy)
    b = np.array([0, 1, 31, 32, 33, 63, 64, 100, 7, 255, 1000, 0xFFFFFFFF, 5, 31, 32, 2],
                 dtype=np.uint32)
    m = (b % 32).astype(np.uint32)
    exp = (a.astype(np.int64) << m) if op == "shl" else (a >> m.astype(a.dtype))
    exp = np.asarray(exp).astype(np.uint64).astype(np.uint32).view(ty.numpy) if op == "shl" else exp
    agree(wg, ref, prog, {"in0": a, "in1": b, "out": len(a)}, DispatchConfig(grid=1),
          {"out": exp})


def test_int_division_edges(wg: BaseBackend, ref: BaseBackend | None) -> None:
    mn = np.iinfo(np.int32).min
    a = np.array([7, -7, 7, -7, mn, mn, 5, 0, mn, -1], dtype=np.int32)
    b = np.array([2, 2, -2, -2, -1, 0, 0, 0, 1, mn], dtype=np.int32)
    k = ProgramBuilder("divrem", 16)
    x, y = k.buffer("a", I32), k.buffer("b", I32)
    q, r = k.buffer("q", I32, "write"), k.buffer("r", I32, "write")
    i = k.global_id()
    q[i] = x[i] // y[i]
    r[i] = x[i] % y[i]
    prog = k.build()
    exp_q = np.array([3, -3, -3, 3, mn, 0, 0, 0, mn, 0], dtype=np.int32)
    exp_r = np.array([1, -1, 1, -1, 0, 0, 0, 0, 0, -1], dtype=np.int32)
    agree(wg, ref, prog, {"a": a, "b": b, "q": 10, "r": 10}, DispatchConfig(grid=1),
          {"q": exp_q, "r": exp_r})


def test_unsigned_division_by_zero(wg: BaseBackend, ref: BaseBackend | None) -> None:
    prog = elementwise("udiv", (U32, U32), U32, lambda a, b: (a // b) + (a % b) * 1000)
    a = np.array([10, 0xFFFFFFFF, 5, 17], dtype=np.uint32)
    b = np.array([3, 0, 0, 5], dtype=np.uint32)
    agree(wg, ref, prog, {"in0": a, "in1": b, "out": 4}, DispatchConfig(grid=1),
          {"out": np.array([3 + 1000, 0, 0, 3 + 2000], dtype=np.uint32)})


def test_constant_folding_cannot_break_compile(wg: BaseBackend, ref: BaseBackend | None) -> None:
    """Literal-only overflow / division by zero would be a WGSL const-eval error."""
    k = ProgramBuilder("consts", 1)
    out = k.buffer("out", I32, "write")
    fo = k.buffer("fo", F32, "write")
    mx = k.lit(2147483647, I32)
    out[0] = mx + 1
    out[1] = k.lit(5, I32) // 0
    out[2] = k.lit(-2147483648, I32) // -1
    out[3] = -k.lit(-2147483648, I32)
    out[4] = k.lit(1, I32) << k.lit(40, U32)
    out[5] = abs_(k.lit(-2147483648, I32))
    fo[0] = k.lit(1.0, F32) / 0.0
    fo[1] = k.lit(float("inf"), F32)
    fo[2] = k.lit(float("nan"), F32)
    fo[3] = k.lit(-0.0, F32)
    fo[4] = k.lit(1e-45, F32)
    fo[5] = k.lit(3.0e38, F32) * 10.0
    prog = k.build()
    mn = -(2**31)
    got = agree(wg, ref, prog, {"out": 6, "fo": 6}, DispatchConfig(grid=1),
                {"out": [mn, 0, mn, mn, 256, mn],
                 "fo": np.array([np.inf, np.inf, np.nan, -0.0, 1e-45, np.inf], np.float32)})
    assert np.signbit(got["fo"][3])


def test_float_min_max_nan(wg: BaseBackend, ref: BaseBackend | None) -> None:
    nan = np.float32(np.nan)
    a = np.array([nan, 1.0, nan, -0.0, 2.0, -np.inf], dtype=np.float32)
    b = np.array([1.0, nan, nan, 0.0, 3.0, np.inf], dtype=np.float32)
    k = ProgramBuilder("minmax", 8)
    x, y = k.buffer("a", F32), k.buffer("b", F32)
    lo, hi = k.buffer("lo", F32, "write"), k.buffer("hi", F32, "write")
    i = k.global_id()
    with k.if_(i < x.length()):
        lo[i] = min_(x[i], y[i])
        hi[i] = max_(x[i], y[i])
    agree(wg, ref, k.build(), {"a": a, "b": b, "lo": 6, "hi": 6}, DispatchConfig(grid=1),
          {"lo": [1.0, 1.0, nan, 0.0, 2.0, -np.inf], "hi": [1.0, 1.0, nan, 0.0, 3.0, np.inf]})


def test_float_rem(wg: BaseBackend, ref: BaseBackend | None) -> None:
    a = np.array([5.5, -5.5, 5.5, 1.0, np.inf, 3.0, 7.0], dtype=np.float32)
    b = np.array([2.0, 2.0, -2.0, 0.0, 2.0, np.inf, 0.5], dtype=np.float32)
    prog = elementwise("frem", (F32, F32), F32, lambda x, y: x % y, wgs=8)
    with np.errstate(all="ignore"):
        exp = a - b * np.trunc(a / b)
    agree(wg, ref, prog, {"in0": a, "in1": b, "out": len(a)}, DispatchConfig(grid=1),
          {"out": exp.astype(np.float32)})


# ------------------------------------------------------------------ unary, calls


@pytest.mark.parametrize("ty", (I32, F32), ids=str)
def test_neg_abs(wg: BaseBackend, ref: BaseBackend | None, ty: ScalarType) -> None:
    prog = elementwise(f"negabs_{ty}", (ty,), ty, lambda a: abs_(-a) - a)
    run_elementwise(wg, ref, prog, (ty,), seed=3)


def test_bit_not_and_logic(wg: BaseBackend, ref: BaseBackend | None) -> None:
    prog = elementwise("logic", (U32, U32), U32,
                       lambda a, b: select(~((a > b) & (a != 0)) | (b == 5), ~a, a ^ b))
    run_elementwise(wg, ref, prog, (U32, U32), seed=5)


EXACT_FNS = {"sqrt": sqrt, "floor": floor, "ceil": ceil, "trunc": trunc, "round": round_,
             "abs": abs_}
APPROX = {"exp": exp, "exp2": exp2, "log": log, "log2": log2, "sin": sin, "cos": cos,
          "tan": tan, "tanh": tanh}


@pytest.mark.parametrize("fn", sorted(EXACT_FNS) + sorted(APPROX))
def test_float_calls(wg: BaseBackend, ref: BaseBackend | None, fn: str) -> None:
    f = {**EXACT_FNS, **APPROX}[fn]
    prog = elementwise(f"call_{fn}", (F32,), F32, f)
    rng = np.random.default_rng(17)
    if fn in ("sin", "cos", "tan"):  # Vulkan's sin/cos precision is absolute on [-pi, pi]
        x = rng.uniform(-3.1, 3.1, N_ELEMS).astype(np.float32)
    elif fn in ("exp", "exp2"):
        x = rng.uniform(-20, 20, N_ELEMS).astype(np.float32)
    elif fn == "tanh":
        x = np.concatenate([rng.uniform(-5, 5, N_ELEMS - 4), [50.0, -50.0, 100.0, 0.0]])
        x = x.astype(np.float32)
    else:
        x = random_array(rng, F32, N_ELEMS)
        if fn in ("log", "log2"):
            x = np.abs(x) + np.float32(1e-3)
    agree(wg, ref, prog, {"in0": x, "out": N_ELEMS}, DispatchConfig.for_elements(N_ELEMS, 64))


def test_round_half_even(wg: BaseBackend, ref: BaseBackend | None) -> None:
    x = np.array([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 2.4999998, 3.5], dtype=np.float32)
    prog = elementwise("round", (F32,), F32, round_, wgs=8)
    agree(wg, ref, prog, {"in0": x, "out": len(x)}, DispatchConfig(grid=1),
          {"out": np.round(x)})


def test_pow_atan2_fma_clamp(wg: BaseBackend, ref: BaseBackend | None) -> None:
    k = ProgramBuilder("calls2", 64)
    a, b, c = k.buffer("a", F32), k.buffer("b", F32), k.buffer("c", F32)
    o1, o2 = k.buffer("o1", F32, "write"), k.buffer("o2", F32, "write")
    o3, o4 = k.buffer("o3", F32, "write"), k.buffer("o4", F32, "write")
    i = k.global_id()
    with k.if_(i < a.length()):
        o1[i] = pow_(a[i], b[i])
        o2[i] = atan2(a[i], b[i])
        o3[i] = fma(a[i], b[i], c[i])
        o4[i] = clamp(a[i], b[i], c[i])
    prog = k.build()
    rng = np.random.default_rng(23)
    n = 128
    av = rng.uniform(-4, 4, n).astype(np.float32)
    bv = np.round(rng.uniform(-4, 4, n)).astype(np.float32)
    bv[::3] = rng.uniform(-3, 3, len(bv[::3])).astype(np.float32)
    cv = rng.uniform(-4, 4, n).astype(np.float32)
    cv[:4] = [np.nan, 1.0, np.nan, 0.0]
    with np.errstate(all="ignore"):
        exp = {"o1": np.power(av, bv), "o3": (av.astype(np.float64) * bv + cv).astype(np.float32)}
    agree(wg, ref, prog, {"a": av, "b": bv, "c": cv, "o1": n, "o2": n, "o3": n, "o4": n},
          DispatchConfig(grid=2), exp)


# ------------------------------------------------------------------ casts and bitcasts


def _cast_types(wg: BaseBackend) -> list[ScalarType]:
    return [t for t in (I32, U32, F32, F16, F64, I64, U64) if not t.feature or wg.supports(t.feature)]


ALL_NUM = (I32, U32, F32, F16, F64, I64, U64)


@pytest.mark.parametrize("src", ALL_NUM, ids=str)
@pytest.mark.parametrize("dst", ALL_NUM, ids=str)
def test_casts(wg: BaseBackend, ref: BaseBackend | None, src: ScalarType, dst: ScalarType) -> None:
    need(wg, src, dst)
    prog = elementwise(f"cast_{src}_{dst}", (src,), dst, lambda a: a.cast(dst))
    rng = np.random.default_rng(29)
    x = random_array(rng, src, N_ELEMS)
    if src.is_float and dst.is_int:
        info = np.iinfo(dst.numpy)
        edge = np.array([np.nan, np.inf, -np.inf, 0.5, -0.5, -0.99, 1e30, -1e30,
                         float(info.max), float(info.min), 2.0**31, -(2.0**31), 2.0**32,
                         -1.0, 65504.0, -65504.0], dtype=np.float64)
        x[: len(edge)] = edge.astype(src.numpy)
    agree(wg, ref, prog, {"in0": x, "out": N_ELEMS}, DispatchConfig.for_elements(N_ELEMS, 64))


def test_bool_casts(wg: BaseBackend, ref: BaseBackend | None) -> None:
    prog = elementwise("boolcast", (F32,), I32,
                       lambda a: a.cast(ScalarType.BOOL).cast(I32) + (a > 0.0).cast(I32) * 10)
    x = np.array([0.0, -0.0, np.nan, 1.0, -2.0, np.inf], dtype=np.float32)
    agree(wg, ref, prog, {"in0": x, "out": len(x)}, DispatchConfig(grid=1),
          {"out": [0, 0, 1, 11, 1, 11]})


@pytest.mark.parametrize(("src", "dst"), [(I32, F32), (F32, U32), (U32, I32), (F32, I32)],
                         ids=str)
def test_bitcasts(wg: BaseBackend, ref: BaseBackend | None, src: ScalarType,
                  dst: ScalarType) -> None:
    prog = elementwise(f"bitcast_{src}_{dst}", (src,), dst, lambda a: a.bitcast(dst))
    rng = np.random.default_rng(31)
    x = random_array(rng, src, N_ELEMS)
    if dst is F32:  # bit patterns of NaNs compare as NaN; avoid signalling-NaN quieting
        x = x & np.array(0x7F7FFFFF, dtype=src.numpy)
    agree(wg, ref, prog, {"in0": x, "out": N_ELEMS}, DispatchConfig.for_elements(N_ELEMS, 64),
          {"out": x.view(dst.numpy)})


# ------------------------------------------------------------------ wide / narrow types


@pytest.mark.parametrize("ty", (F16, F64, I64, U64), ids=str)
def test_optional_type_arith(wg: BaseBackend, ref: BaseBackend | None, ty: ScalarType) -> None:
    need(wg, ty)
    for op in ("add", "mul", "div", "min", "rem"):
        prog = elementwise(f"opt_{op}_{ty}", (ty, ty), ty, BIN_OPS[op])
        run_elementwise(wg, ref, prog, (ty, ty), seed=41)


def test_optional_type_params(wg: BaseBackend, ref: BaseBackend | None) -> None:
    types = [t for t in (F16, F64, I64, U64, I32, F32) if not t.feature or wg.supports(t.feature)]
    k = ProgramBuilder("params_mixed", 1)
    outs = {}
    params = {}
    values = {F16: 1.5, F64: 2.0**60 + 0.5, I64: -(2**40) - 3, U64: 2**63 + 5, I32: -7, F32: 0.25}
    for t in types:
        p = k.param(f"p_{t}", t)
        o = k.buffer(f"o_{t}", t, "write")
        o[0] = p
        outs[f"o_{t}"] = 1
        params[f"p_{t}"] = values[t]
    prog = k.build()
    exp = {f"o_{t}": np.array([values[t]], dtype=t.numpy) for t in types}
    agree(wg, ref, prog, outs, DispatchConfig(grid=1, params=params), exp)


# ------------------------------------------------------------------ memory


def test_out_of_bounds_loads_stores_atomics(wg: BaseBackend, ref: BaseBackend | None) -> None:
    k = ProgramBuilder("oob", 16)
    src = k.buffer("src", I32)
    dst = k.buffer("dst", I32, "read_write")
    acc = k.buffer("acc", U32, "read_write")
    old = k.buffer("old", U32, "write")
    i = k.global_id()
    dst[i + 4] = src[i + 8] + 1  # loads past src read 0, stores past dst are dropped
    o = acc.atomic_add(i * 2, 1)  # half of these are out of range
    old[i] = o + 100
    prog = k.build()
    s = np.arange(1, 13, dtype=np.int32)
    d = np.full(10, -5, dtype=np.int32)
    exp_d = d.copy()
    for j in range(16):
        if j + 4 < 10:
            exp_d[j + 4] = (s[j + 8] if j + 8 < 12 else 0) + 1
    exp_acc = np.zeros(8, dtype=np.uint32)
    exp_acc[:8] = [1 if 2 * j < 8 else 0 for j in range(8)]
    exp_acc = np.array([1, 0, 1, 0, 1, 0, 1, 0], dtype=np.uint32)
    agree(wg, ref, prog, {"src": s, "dst": d, "acc": np.zeros(8, np.uint32), "old": 16},
          DispatchConfig(grid=1),
          {"dst": exp_d, "acc": exp_acc, "old": np.array([100] * 16, dtype=np.uint32)})


def test_length_and_declared_count(wg: BaseBackend, ref: BaseBackend | None) -> None:
    k = ProgramBuilder("lengths", 1)
    a = k.buffer("a", F32)
    w = k.shared("w", U32, 33)
    o = k.buffer("o", U32, "write", count=2)
    o[0] = a.length()
    o[1] = w.length()
    agree(wg, ref, k.build(), {"a": np.zeros(77, np.float32)}, DispatchConfig(grid=1),
          {"o": [77, 33]})


def test_zero_length_buffer(wg: BaseBackend, ref: BaseBackend | None) -> None:
    k = ProgramBuilder("empty", 4)
    a = k.buffer("a", U32)
    o = k.buffer("o", U32, "write")
    i = k.global_id()
    o[i] = a[i] + a.length() + 1
    agree(wg, ref, k.build(), {"a": np.zeros(0, np.uint32), "o": 4}, DispatchConfig(grid=1),
          {"o": [1, 1, 1, 1]})


def test_f16_buffers_odd_length(wg: BaseBackend, ref: BaseBackend | None) -> None:
    need(wg, F16)
    prog = elementwise("f16_odd", (F16,), F16, lambda a: a * 2.0 + 1.0, wgs=4)
    x = np.array([1.0, -2.5, 65504.0, np.nan, 0.1], dtype=np.float16)
    agree(wg, ref, prog, {"in0": x, "out": 5}, DispatchConfig(grid=2))


# ------------------------------------------------------------------ control flow


def test_for_loop_never_overflows(wg: BaseBackend, ref: BaseBackend | None) -> None:
    k = ProgramBuilder("for_edges", 1)
    o = k.buffer("o", U32, "write", count=4)
    c0 = k.let(0, U32)
    with k.for_range(k.lit(2147483640, I32), k.lit(2147483647, I32), step=3):
        c0 += 1  # 2147483640, 43, 46: three iterations, no wrap
    c1 = k.let(0, U32)
    with k.for_range(k.lit(4294967290, U32), k.lit(4294967295, U32), step=4):
        c1 += 1
    c2 = k.let(0, U32)
    with k.for_range(k.lit(-2147483648, I32), k.lit(-2147483640, I32), step=1000000):
        c2 += 1
    c3 = k.let(0, U32)
    with k.for_range(k.lit(10, U32), k.lit(5, U32)):
        c3 += 1
    o[0], o[1], o[2], o[3] = c0, c1, c2, c3
    agree(wg, ref, k.build(), {}, DispatchConfig(grid=1), {"o": [3, 2, 1, 0]})


def test_loops_break_continue_return(wg: BaseBackend, ref: BaseBackend | None) -> None:
    k = ProgramBuilder("loops", 32)
    o = k.buffer("o", U32, "write")
    i = k.global_id()
    total = k.let(0, U32)
    with k.for_range(0, 20, ty=U32) as j:
        with k.if_(j == i % 7):
            k.continue_()
        with k.if_(j > i % 13 + 3):
            k.break_()
        total += j
    n = k.let(i, U32)
    with k.while_(n > 1):
        with k.if_(n % 2 == 0):
            n.set(n // 2)
        with k.else_():
            n.set(n * 3 + 1)
        total += 1
    with k.if_(i == 5):
        k.return_()
    o[i] = total
    prog = k.build()
    exp = np.zeros(32, np.uint32)
    for t in range(32):
        tot = 0
        for j in range(20):
            if j == t % 7:
                continue
            if j > t % 13 + 3:
                break
            tot += j
        m = t
        while m > 1:
            m = m // 2 if m % 2 == 0 else m * 3 + 1
            tot += 1
        exp[t] = 0 if t == 5 else tot
    agree(wg, ref, prog, {"o": 32}, DispatchConfig(grid=1), {"o": exp})


def test_builtins(wg: BaseBackend, ref: BaseBackend | None) -> None:
    k = ProgramBuilder("builtins", (4, 2, 2))
    o = k.buffer("o", U32, "write")
    flat = k.global_id(0) + k.global_id(1) * 12 + k.global_id(2) * 12 * 4
    base = flat * 8
    vals = [k.local_id(0), k.local_id(1), k.local_id(2), k.local_index(),
            k.workgroup_id(0), k.workgroup_id(2), k.num_workgroups(0), k.num_workgroups(2)]
    for j, v in enumerate(vals):
        o[base + j] = v
    agree(wg, ref, k.build(), {"o": 12 * 4 * 6 * 8}, DispatchConfig(grid=(3, 2, 3)))


# ------------------------------------------------------------------ barriers, workgroup memory


def test_barrier_reverse_in_workgroup(wg: BaseBackend, ref: BaseBackend | None) -> None:
    k = ProgramBuilder("reverse", 64)
    a = k.buffer("a", F32)
    o = k.buffer("o", F32, "write")
    w = k.shared("tile", F32, 64)
    li = k.local_index()
    g = k.workgroup_id() * 64 + li
    w[li] = a[g]
    k.barrier()
    o[g] = w[63 - li]
    x = np.arange(256, dtype=np.float32)
    exp = x.reshape(4, 64)[:, ::-1].reshape(-1)
    agree(wg, ref, k.build(), {"a": x, "o": 256}, DispatchConfig(grid=4), {"o": exp})


def test_barrier_in_uniform_loop_reduction(wg: BaseBackend, ref: BaseBackend | None) -> None:
    k = ProgramBuilder("reduce", 64)
    a = k.buffer("a", U32)
    o = k.buffer("o", U32, "write")
    w = k.shared("s", U32, 64)
    li = k.local_index()
    w[li] = a[k.workgroup_id() * 64 + li]
    k.barrier()
    stride = k.let(32, U32)
    with k.while_(stride > 0):
        with k.if_(li < stride):
            w[li] = w[li] + w[li + stride]
        k.barrier()
        stride.set(stride // 2)
    with k.if_(li == 0):
        o[k.workgroup_id()] = w[0]
    x = np.arange(64 * 5, dtype=np.uint32) * 3
    agree(wg, ref, k.build(), {"a": x, "o": 5}, DispatchConfig(grid=5),
          {"o": x.reshape(5, 64).sum(1).astype(np.uint32)})


# ------------------------------------------------------------------ atomics


@pytest.mark.parametrize("op", ["add", "min", "max", "and", "or", "xor"])
@pytest.mark.parametrize("ty", (I32, U32), ids=str)
def test_atomic_rmw(wg: BaseBackend, ref: BaseBackend | None, op: str, ty: ScalarType) -> None:
    k = ProgramBuilder(f"atomic_{op}_{ty}", 64)
    a = k.buffer("a", ty)
    acc = k.buffer("acc", ty, "read_write")
    i = k.global_id()
    with k.if_(i < a.length()):
        getattr(acc, f"atomic_{op}")(i % 4, a[i])
    rng = np.random.default_rng(43)
    x = random_array(rng, ty, 500)
    init = np.array([0, 1, -1 if ty is I32 else 0xFFFFFFFF, 12345], dtype=ty.numpy)
    agree(wg, ref, k.build(), {"a": x, "acc": init}, DispatchConfig(grid=8))


def test_atomic_histogram_and_old_values(wg: BaseBackend, ref: BaseBackend | None) -> None:
    k = ProgramBuilder("hist", 64)
    a = k.buffer("a", U32)
    h = k.buffer("h", U32, "read_write")
    tickets = k.buffer("tickets", U32, "write")
    i = k.global_id()
    with k.if_(i < a.length()):
        h.atomic_add(a[i] % 16, 1)
        tickets[i] = h.atomic_add(16, 1)
    x = np.random.default_rng(1).integers(0, 1000, 1000).astype(np.uint32)
    got = wg.dispatch(k.build(), {"a": x, "h": np.zeros(17, np.uint32), "tickets": 1000},
                      DispatchConfig(grid=16))
    assert np.array_equal(got["h"][:16], np.bincount(x % 16, minlength=16))
    assert got["h"][16] == 1000
    assert np.array_equal(np.sort(got["tickets"]), np.arange(1000, dtype=np.uint32))


def test_atomic_exchange_compare_exchange(wg: BaseBackend, ref: BaseBackend | None) -> None:
    k = ProgramBuilder("cas", 64)
    lock = k.buffer("lock", U32, "read_write")
    winners = k.buffer("winners", U32, "read_write")
    i = k.global_id()
    old = lock.atomic_compare_exchange(0, 0, i + 1)  # exactly one invocation wins
    with k.if_(old == 0):
        winners.atomic_add(0, 1)
    lock.atomic_exchange(1, 7)
    got = wg.dispatch(k.build(), {"lock": np.zeros(2, np.uint32),
                                  "winners": np.zeros(1, np.uint32)}, DispatchConfig(grid=4))
    assert got["winners"][0] == 1
    assert 1 <= got["lock"][0] <= 256 and got["lock"][1] == 7


def test_workgroup_atomics_and_atomic_loads(wg: BaseBackend, ref: BaseBackend | None) -> None:
    k = ProgramBuilder("wg_atomic", 64)
    o = k.buffer("o", U32, "write")
    s = k.shared("count", U32, 1)
    li = k.local_index()
    with k.if_(li == 0):
        s[0] = 0
    k.barrier()
    s.atomic_add(0, li)
    k.barrier()
    with k.if_(li == 0):
        o[k.workgroup_id()] = s[0]
    agree(wg, ref, k.build(), {"o": 3}, DispatchConfig(grid=3), {"o": [2016] * 3})


def test_atomic_float_add(wg: BaseBackend, ref: BaseBackend | None) -> None:
    if not wg.supports("atomic_float"):
        pytest.skip(f"{wg.id} does not report atomic_float")
    k = ProgramBuilder("fadd", 64)
    acc = k.buffer("acc", F32, "read_write")
    acc.atomic_add(0, 0.5)
    got = wg.dispatch(k.build(), {"acc": np.zeros(1, np.float32)}, DispatchConfig(grid=4))
    assert got["acc"][0] == 128.0


@pytest.mark.parametrize("ty", (F32, F16, F64), ids=str)
def test_no_contraction_of_mul_add(wg: BaseBackend, ref: BaseBackend | None,
                                   ty: ScalarType) -> None:
    """a*b + c must round twice (IR: no contraction into fma)."""
    need(wg, ty)
    prog = elementwise(f"muladd_{ty}", (ty, ty, ty), ty, lambda a, b, c: a * b - c)
    rng = np.random.default_rng(5)
    a = rng.standard_normal(4096).astype(ty.numpy)
    b = rng.standard_normal(4096).astype(ty.numpy)
    c = rng.standard_normal(4096).astype(ty.numpy)
    exp = (a * b).astype(ty.numpy) - c
    agree(wg, ref, prog, {"in0": a, "in1": b, "in2": c, "out": 4096},
          DispatchConfig.for_elements(4096, 64), {"out": exp})


def test_atan2_special_cases_and_accuracy(wg: BaseBackend, ref: BaseBackend | None) -> None:
    prog = elementwise("atan2", (F32, F32), F32, lambda y, x: atan2(y, x))
    sp = [0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, np.nan, 1e-30, -1e30, 3.0]
    yy, xx = np.meshgrid(np.array(sp, np.float32), np.array(sp, np.float32))
    rng = np.random.default_rng(9)
    y = np.concatenate([yy.ravel(), rng.standard_normal(2000).astype(np.float32) * 10])
    x = np.concatenate([xx.ravel(), rng.standard_normal(2000).astype(np.float32) * 10])
    agree(wg, ref, prog, {"in0": y.astype(np.float32), "in1": x.astype(np.float32),
                          "out": len(y)}, DispatchConfig.for_elements(len(y), 64),
          {"out": np.arctan2(y, x)})


def test_tan_accuracy_wide_range(wg: BaseBackend, ref: BaseBackend | None) -> None:
    prog = elementwise("tan_wide", (F32,), F32, tan)
    rng = np.random.default_rng(77)
    x = np.concatenate([rng.uniform(-1.6, 1.6, 3000), rng.uniform(-100, 100, 3000),
                        np.pi / 2 + rng.uniform(-1e-3, 1e-3, 500), [0.0, -0.0, 1e-5, 8000.0]])
    x = x.astype(np.float32)
    agree(wg, ref, prog, {"in0": x, "out": len(x)}, DispatchConfig.for_elements(len(x), 64),
          {"out": np.tan(x)})


@pytest.mark.parametrize("fn", ["sin", "cos"])
def test_sin_cos_wide_range(wg: BaseBackend, ref: BaseBackend | None, fn: str) -> None:
    prog = elementwise(f"{fn}_wide", (F32,), F32, {"sin": sin, "cos": cos}[fn])
    rng = np.random.default_rng(78)
    x = np.concatenate([
        rng.uniform(-7, 7, 3000), rng.uniform(-1e4, 1e4, 2000),
        10.0 ** rng.uniform(4, 38, 2000) * rng.choice([-1, 1], 2000),
        np.pi * np.arange(-20, 20) / 2, [0.0, -0.0, 1e-30, 2.0**31, 1e10, -1e10, 3.4e38,
                                         15225262.0, np.inf, -np.inf, np.nan]])
    x = x.astype(np.float32)
    agree(wg, ref, prog, {"in0": x, "out": len(x)}, DispatchConfig.for_elements(len(x), 64),
          {"out": getattr(np, fn)(x)})


def test_f64_transcendental_is_refused_not_wrong(wgpu_backend: BaseBackend) -> None:
    """WGSL has no f64 exp/log/sin/...: 'f64' is not reported, and the generator refuses
    such calls rather than emitting what drivers compute wrongly (or crash on)."""
    from vyre.backends.wgpu import render as wgsl

    assert not wgpu_backend.supports("f64")
    with pytest.raises(vyre.UnsupportedFeature, match="f64 exp2"):
        wgsl.generate(elementwise("exp2_f64", (F64,), F64, exp2))
    assert "sqrt(" in wgsl.generate(elementwise("sqrt_f64", (F64,), F64, sqrt)).source
