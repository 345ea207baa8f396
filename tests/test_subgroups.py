"""Subgroup operations (docs/IR.md, "Subgroups"): the reference's semantics at several
subgroup sizes against a direct model of the IR's definitions, the validator's rules, the
wire format, capability errors, and the library reduce / scan giving the same bits with
and without subgroups on every backend. (Every backend against the reference: the
subgroup cases of the conformance table, tests/test_conformance.py.)"""

from __future__ import annotations

import contextlib
from typing import Any

import numpy as np
import pytest

import vyre
import vyre.programs._common as common
from vyre import f32, i32, u32
from vyre.backends.reference import ReferenceBackend
from vyre.builder import (
    ProgramBuilder,
    subgroup_broadcast,
    subgroup_exclusive_scan,
    subgroup_inclusive_scan,
    subgroup_reduce,
    subgroup_shuffle,
)
from vyre.ir import nodes as N
from vyre.programs.reduce import reduce_host
from vyre.programs.scan import scan_host
from vyre.subgroups import mapping_promised
from vyre.tools.conformance import CASES, inputs_of
from vyre.tools.testing import Tolerance, assert_agree

SIZES = (1, 2, 4, 8, 32, 64)
WG = 128


# ------------------------------------------------------------------ a model of the IR text


def _op(c: str, a: Any, b: Any, dt: Any) -> Any:
    """One IR combine on numpy scalars of `dt` (ints wrap; floats are minNum / maxNum)."""
    if c == "add":  # arrays, not scalars: ints wrap silently
        with np.errstate(over="ignore", invalid="ignore"):
            return dt.type(np.add(np.array(a, dt), np.array(b, dt)))
    if c == "min":
        return np.fmin(a, b) if dt.kind == "f" else min(a, b)
    if c == "max":
        return np.fmax(a, b) if dt.kind == "f" else max(a, b)
    return {"and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor}[c](a, b)


def _tree(c: str, v: list[Any], dt: Any) -> Any:
    """docs/IR.md's reduce order: the lower half combined with the upper half, element by
    element, until one value is left."""
    while len(v) > 1:
        h = len(v) // 2
        v = [_op(c, v[i], v[i + h], dt) for i in range(h)]
    return v[0]


def _hillis_steele(c: str, v: list[Any], dt: Any) -> list[Any]:
    """docs/IR.md's inclusive scan: for d = 1, 2, ..., lane l >= d becomes x[l-d] op x[l]."""
    d = 1
    while d < len(v):
        v = [v[i] if i < d else _op(c, v[i - d], v[i], dt) for i in range(len(v))]
        d *= 2
    return v


def _ident(c: str, dt: Any) -> Any:
    if c in ("add", "or", "xor"):
        return dt.type(0)
    if c == "and":
        return dt.type(-1) if dt == np.int32 else dt.type(0xFFFFFFFF)
    if dt.kind == "f":
        return dt.type(np.inf if c == "min" else -np.inf)
    info = np.iinfo(dt)
    return dt.type(info.max if c == "min" else info.min)


def _program(ty: vyre.ScalarType, combine: str) -> N.Program:
    k = ProgramBuilder(f"sg_model_{ty}_{combine}", workgroup_size=WG)
    a = k.buffer("a", ty)
    out = k.buffer("out", ty, "write")
    i = k.let(k.global_id(0))
    x = k.let(a[i])
    lane = k.let(k.subgroup_lane())
    vals = [subgroup_reduce(x, combine), subgroup_inclusive_scan(x, combine),
            subgroup_exclusive_scan(x, combine), subgroup_shuffle(x, lane * 3 + 5),
            subgroup_broadcast(x, k.workgroup_id(0) + 1), lane.bitcast(ty) if ty.bits == 32
            else lane, k.subgroup_size().bitcast(ty)]
    for j, v in enumerate(vals):
        out[i * len(vals) + j] = v
    return k.build()


def _model(x: np.ndarray, c: str, size: int, groups: int) -> np.ndarray:
    dt = x.dtype
    rows = []
    for g in range(x.size // size):
        v = list(x[g * size:(g + 1) * size])
        red = _tree(c, v, dt)
        inc = _hillis_steele(c, v, dt)
        wgid = (g * size) // WG
        for lane in range(size):
            rows.append([red, inc[lane], inc[lane - 1] if lane else _ident(c, dt),
                         v[(lane * 3 + 5) % size], v[(wgid + 1) % size],
                         np.array(lane, np.uint32).view(dt), np.array(size, np.uint32).view(dt)])
    return np.array(rows, dtype=dt).reshape(-1)


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("ty,combine", [
    (f32, "add"), (f32, "min"), (f32, "max"), (i32, "add"), (i32, "min"), (i32, "and"),
    (u32, "add"), (u32, "max"), (u32, "or"), (u32, "xor"),
])
def test_reference_matches_the_ir_definitions(size: int, ty: vyre.ScalarType,
                                               combine: str) -> None:
    rng = np.random.default_rng(size)
    groups = 2
    n = WG * groups
    if ty is f32:  # wide magnitudes, so the summation order shows in the bits
        x = (rng.standard_normal(n) * 10.0 ** rng.integers(-3, 6, n)).astype(np.float32)
        x[:4] = [np.inf, -0.0, np.nan, 0.0]
    else:
        x = rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32).view(ty.numpy)
    ref = ReferenceBackend(subgroup_size=size)
    got = ref.dispatch(_program(ty, combine), {"a": x, "out": n * 7},
                       vyre.DispatchConfig(grid=groups))["out"]
    want = _model(x, combine, size, groups)
    # docs/IR.md: the sign of a zero from float min / max is open; every other bit is not
    tol = Tolerance(zero_sign=not (ty is f32 and combine in ("min", "max")))
    assert_agree(got, want, tol, f"{ty} {combine} at subgroup size {size}")


def test_float_reduce_order_is_the_tree_not_left_to_right() -> None:
    # 1e8 + 1 - 1e8 ... : left to right and the tree give different f32 bits
    x = np.tile(np.array([1e8, 1.0, -1e8, 1.0], np.float32), WG // 4)
    got = ReferenceBackend(subgroup_size=4).dispatch(
        _program(f32, "add"), {"a": x, "out": WG * 7}, vyre.DispatchConfig(grid=1))["out"]
    assert got[0] == np.float32((1e8 + np.float32(-1e8)) + np.float32(1.0 + 1.0))


def test_reference_subgroup_size_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VYRE_REFERENCE_SUBGROUP_SIZE", "4")
    assert ReferenceBackend().capabilities().details["subgroup_size"] == 4
    monkeypatch.setenv("VYRE_REFERENCE_SUBGROUP_SIZE", "12")
    with pytest.raises(vyre.BackendUnavailable, match="not a subgroup size"):
        ReferenceBackend()


# ------------------------------------------------------------------ validator, wire format


def _in_divergent_if(k: ProgramBuilder, a: Any, out: Any, i: Any) -> None:
    with k.if_(i < a.length()):
        out[i] = subgroup_reduce(a[i])


def _after_divergent_return(k: ProgramBuilder, a: Any, out: Any, i: Any) -> None:
    with k.if_(a[i] == 0):
        k.return_()
    out[i] = subgroup_inclusive_scan(a[i])


def _non_uniform_broadcast(k: ProgramBuilder, a: Any, out: Any, i: Any) -> None:
    out[i] = subgroup_broadcast(a[i], k.subgroup_lane())


@pytest.mark.parametrize("body,message", [
    (_in_divergent_if, "subgroup operation in non-uniform control flow"),
    (_after_divergent_return, "subgroup operation in non-uniform control flow"),
    (_non_uniform_broadcast, "broadcast from a non-uniform lane"),
])
def test_validator_refuses_subgroup_ops_some_lanes_could_miss(body: Any, message: str) -> None:
    k = ProgramBuilder("sg_refused", workgroup_size=64)
    a = k.buffer("a", u32)
    out = k.buffer("out", u32, "write")
    body(k, a, out, k.let(k.global_id(0)))
    with pytest.raises(vyre.InvalidProgram, match=message):
        k.build()


def test_uniform_control_flow_is_accepted_and_types_are_checked() -> None:
    k = ProgramBuilder("sg_uniform", workgroup_size=64)
    a = k.buffer("a", u32)
    out = k.buffer("out", u32, "write")
    n = k.param("n", u32)
    i = k.let(k.global_id(0))
    with k.if_(n > 3), k.for_range(0, n, ty=u32):
        out[i] = subgroup_reduce(a[i], "xor")
    k.build()
    k2 = ProgramBuilder("sg_bad_type", workgroup_size=64)
    d = k2.buffer("d", vyre.f64)
    o2 = k2.buffer("o", vyre.f64, "write")
    o2[k2.global_id(0)] = subgroup_reduce(d[k2.global_id(0)])
    with pytest.raises(vyre.InvalidProgram, match="take i32, u32 or f32"):
        k2.build()
    k3 = ProgramBuilder("sg_bad_combine", workgroup_size=64)
    x = k3.buffer("x", f32)
    o3 = k3.buffer("o", f32, "write")
    o3[k3.global_id(0)] = subgroup_reduce(x[k3.global_id(0)], "xor")
    with pytest.raises(vyre.InvalidProgram, match="bitwise combines need"):
        k3.build()


def test_wire_format_round_trip_and_required_feature() -> None:
    prog = CASES["subgroup_ops_f32"].program
    back = vyre.from_json(vyre.to_json(prog))
    assert back == prog
    assert "subgroup" in prog.required_features


def test_kernel_spelling() -> None:
    @vyre.kernel(workgroup_size=64)
    def k(x: vyre.Buffer[f32], o: vyre.Output[f32]) -> None:
        i = vyre.global_linear_id()
        v = vyre.let(x[i])
        o[i] = vyre.subgroup_reduce(v, "max") + vyre.subgroup_shuffle(
            v, vyre.subgroup_lane() ^ 1) + vyre.subgroup_size().cast(f32)

    x = np.arange(64, dtype=np.float32)
    out = ReferenceBackend(subgroup_size=4).dispatch(k.program, {"x": x, "o": 64},
                                                     vyre.DispatchConfig(grid=1))["o"]
    lanes = np.arange(64)
    np.testing.assert_array_equal(out, (lanes | 3) + (lanes ^ 1) + 4)


# ------------------------------------------------------------------ capability errors


def test_workgroup_not_a_multiple_of_the_subgroup_size_is_refused() -> None:
    k = ProgramBuilder("sg_partial", workgroup_size=48)
    a = k.buffer("a", u32)
    out = k.buffer("out", u32, "write")
    out[k.global_id(0)] = subgroup_reduce(a[k.global_id(0)])
    prog = k.build()
    with pytest.raises(vyre.UnsupportedFeature, match="not a multiple of this backend's "
                       "subgroup size 32"):
        ReferenceBackend(subgroup_size=32).dispatch(prog, {"a": np.zeros(48, np.uint32),
                                                           "out": 48},
                                                    vyre.DispatchConfig(grid=1))
    from vyre.backends.cuda.render import generate

    with pytest.raises(vyre.UnsupportedFeature, match="multiple of"):
        generate(prog)
    # 16 lanes: fits
    ReferenceBackend(subgroup_size=16).dispatch(prog, {"a": np.zeros(48, np.uint32),
                                                       "out": 48}, vyre.DispatchConfig(grid=1))


def test_backend_without_subgroups_says_so(backend: Any) -> None:
    prog = CASES["subgroup_ops_u32"].program
    if backend.supports("subgroup"):
        size = backend.capabilities().details["subgroup_size"]
        assert isinstance(size, int) and size in (1, 2, 4, 8, 16, 32, 64, 128)
        return
    with pytest.raises(vyre.UnsupportedFeature, match="subgroup"):
        backend.dispatch(prog, inputs_of(CASES["subgroup_ops_u32"]),
                         CASES["subgroup_ops_u32"].config)


def test_cuda_codegen_compiles_with_nvrtc() -> None:
    from vyre.backends.cuda import compile_program

    for name in ("subgroup_ops_f32", "subgroup_ops_i32", "subgroup_control"):
        compiled = compile_program(CASES[name].program, "sm_90")
        assert compiled.cubin[:4] == b"\x7fELF"
        assert "__shfl_xor_sync" in compiled.source or "__shfl_up_sync" in compiled.source


# ------------------------------------------------------------------ the library


@pytest.mark.parametrize("n", [1, 1000, 70_001])
def test_library_reduce_and_scan_same_bits_with_and_without_subgroups(backend: Any,
                                                                      n: int) -> None:
    rng = np.random.default_rng(n)
    x = (rng.standard_normal(n) * 10.0 ** rng.integers(-3, 6, n)).astype(np.float32)
    xi = rng.integers(-2**31, 2**31, n).astype(np.int32)
    try:
        common.USE_SUBGROUPS = False
        want = [reduce_host(backend, x, op)[0] for op in ("sum", "min", "max")]
        want_i = reduce_host(backend, xi, "sum")[0]
        want_scan = scan_host(backend, x)
        want_iscan = scan_host(backend, xi, inclusive=False)
        common.USE_SUBGROUPS = True
        got_iscan = scan_host(backend, xi, inclusive=False)
        got = [reduce_host(backend, x, op)[0] for op in ("sum", "min", "max")]
        got_i = reduce_host(backend, xi, "sum")[0]
        got_scan = scan_host(backend, x)
    finally:
        common.USE_SUBGROUPS = True
    assert [g.tobytes() for g in got] == [w.tobytes() for w in want]
    assert got_i == want_i
    assert got_scan.tobytes() == want_scan.tobytes()
    assert got_iscan.tobytes() == want_iscan.tobytes()
    assert got_iscan.tobytes() == np.concatenate([[0], np.cumsum(xi, dtype=np.int32)[:-1]]
                                                 ).astype(np.int32).tobytes()
    if n > 1 and backend.kind == "reference":  # other reference sizes: the same bits again
        for size in (1, 4, 64):
            r = ReferenceBackend(subgroup_size=size)
            assert reduce_host(r, x, "sum")[0].tobytes() == want[0].tobytes()


@pytest.mark.parametrize("size", [1, 4, 16, 32, 128])
def test_integer_scan_with_subgroups_at_every_size(size: int) -> None:
    """Both ways of adding up the subgroup totals: a second subgroup scan (they fit in one
    subgroup: size >= 16 for 256 invocations) and Hillis-Steele in workgroup memory."""
    rng = np.random.default_rng(size)
    x = rng.integers(0, 2**32, 9000, dtype=np.uint64).astype(np.uint32)
    got = scan_host(ReferenceBackend(subgroup_size=size), x)
    assert got.tobytes() == np.cumsum(x, dtype=np.uint32).tobytes()


def test_library_uses_subgroups_where_they_fit() -> None:
    from vyre.programs.reduce import plan_reduce

    r = ReferenceBackend(subgroup_size=8)
    src = r.allocate_device_buffer(4 * 5000)
    out = r.allocate_device_buffer(4)
    plan = plan_reduce(r, src, 5000, "sum", f32, out)
    assert all(s.program.name.endswith("_sg") for s in plan.steps)
    plan = plan_reduce(r, src, 5000, "sum", f32, out, workgroup_size=4, per_thread=4)
    assert not any(s.program.name.endswith("_sg") for s in plan.steps)  # 4 % 8 != 0


def test_subgroup_ops_under_select_and_logical_ops_run_on_every_lane(backend: Any) -> None:
    """A select evaluates both sides and logical and/or never short-circuits (docs/IR.md):
    a subgroup operation inside one still has every lane taking part (C's `?:` and `&&`
    would not: the lowering hoists it into a local)."""
    if not backend.supports("subgroup"):
        pytest.skip(f"{backend.id} does not report 'subgroup' (a documented capability)")
    k = ProgramBuilder("sg_in_select", workgroup_size=64)
    a = k.buffer("a", u32)
    out = k.buffer("out", u32, "write")
    i = k.let(k.global_id(0))
    x = k.let(a[i])
    odd = (x & 1) == 1
    out[i * 2] = vyre.select(odd, subgroup_reduce(x), subgroup_inclusive_scan(x, "max"))
    out[i * 2 + 1] = vyre.select(odd | (subgroup_reduce(x, "or") == 0), x, x + 1)
    prog = k.build()
    from vyre.tools.testing import check_against_reference

    data = np.random.default_rng(3).integers(0, 100, 128).astype(np.uint32)
    check_against_reference(prog, {"a": data, "out": 256}, vyre.DispatchConfig(grid=2),
                            [backend], ReferenceBackend())


@pytest.mark.parametrize("shape", [(8, 4, 2), (16, 2, 2), (32, 2, 1), (4, 4, 4), (2, 8, 4),
                                   (1, 64, 1)], ids=str)
def test_multi_dimensional_workgroups_keep_the_lane_mapping_or_are_refused(
        backend: Any, shape: tuple[int, int, int]) -> None:
    """docs/IR.md's lane l of subgroup s is local_index s*S + l in every workgroup shape.
    Vulkan does not promise it (llvmpipe's subgroups run along x and it pads every row of x
    invocations shorter than them), so wgpu measures each new shape and refuses one that
    breaks the mapping, naming the shape; every other shape must agree with the reference."""
    if not backend.supports("subgroup"):
        pytest.skip(f"{backend.id} does not report 'subgroup' (a documented capability)")
    size = backend.capabilities().details["subgroup_size"]
    k = ProgramBuilder("sg_shape", workgroup_size=shape)
    a = k.buffer("a", u32)
    out = k.buffer("out", u32, "write")
    li = k.let(k.local_index())
    x = k.let(a[li])
    out[li * 3] = subgroup_shuffle(x, li + 1)
    out[li * 3 + 1] = subgroup_reduce(x)
    out[li * 3 + 2] = subgroup_inclusive_scan(x, "max")
    prog = k.build()
    from vyre.tools.testing import check_against_reference

    data = np.random.default_rng(5).integers(0, 1000, 64).astype(np.uint32)
    llvmpipe = "llvmpipe" in backend.capabilities().device
    try:
        check_against_reference(prog, {"a": data, "out": 192}, vyre.DispatchConfig(grid=1),
                                [backend], ReferenceBackend())
    except vyre.UnsupportedFeature as exc:
        assert backend.kind == "wgpu", exc
        assert str(shape) in str(exc) and "lane mapping" in str(exc), exc
        assert shape[0] % size, f"refused a shape whose rows are whole subgroups: {exc}"
        assert not mapping_promised(backend.capabilities().details, shape), exc
        return
    assert not (llvmpipe and shape[0] % size), "llvmpipe pads these rows: it must refuse"


def test_fuzzer_accepts_only_the_documented_shape_refusal() -> None:
    """The fuzzer lets a backend refuse a subgroup Program for its workgroup shape only with
    the documented refusal, and only in a shape the backend does not promise (one outside
    the shapes it reports measuring; a backend that reports none promises every shape)."""
    from vyre.subgroups import SHAPES_DETAIL
    from vyre.tools.fuzz import refuses_subgroup_shape

    class MeasuresShapes(ReferenceBackend):  # reports measured shapes, as wgpu does
        def capabilities(self) -> vyre.Capabilities:
            caps = super().capabilities()
            return caps.model_copy(update={"details": {**caps.details,
                                                       SHAPES_DETAIL: ((8, 4, 2),)}})

    def prog(shape: tuple[int, int, int]) -> N.Program:
        k = ProgramBuilder("sg", workgroup_size=shape)
        out = k.buffer("out", u32, "write")
        out[k.local_index()] = subgroup_reduce(k.local_index())
        return k.build()

    def refusal(shape: tuple[int, int, int]) -> vyre.UnsupportedFeature:
        return vyre.UnsupportedFeature("subgroup", "wgpu", f"workgroups of {shape}, where "
                                       "... (docs/IR.md's lane mapping, measured ...)")

    measures = MeasuresShapes()
    assert refuses_subgroup_shape(refusal((4, 4, 4)), prog((4, 4, 4)), measures)
    assert not refuses_subgroup_shape(refusal((4, 4, 4)), prog((2, 8, 4)), measures)  # another
    assert not refuses_subgroup_shape(refusal((8, 4, 2)), prog((8, 4, 2)), measures)  # measured
    assert not refuses_subgroup_shape(vyre.UnsupportedFeature("f64", "wgpu", "(4, 4, 4) lane "
                                                              "mapping"), prog((4, 4, 4)), measures)
    # a backend that measures no shape keeps the mapping in all of them: no refusal is valid
    assert not refuses_subgroup_shape(refusal((4, 4, 4)), prog((4, 4, 4)), ReferenceBackend())


def test_an_oracle_making_the_shape_refusal_compares_nothing() -> None:
    """The fewer-fences test fuzzes wgpu against wgpu: when the oracle itself refuses a
    shape (documented), there is nothing to compare, and that is not a failure."""
    from vyre.tools.fuzz import FuzzCase, check_case

    wg = vyre.get_backend("wgpu") if "wgpu" in [a.name for a in vyre.available_backends()
                                                if a.available] else None
    if wg is None or not wg.supports("subgroup"):
        pytest.skip("needs a wgpu adapter with subgroups")
    try:
        size = wg.capabilities().details["subgroup_size"]
        shape = (max(1, size // 2), 2, 4)  # rows shorter than a subgroup
        k = ProgramBuilder("sg_oracle", workgroup_size=shape)
        out = k.buffer("out", u32, "write")
        out[k.local_index()] = subgroup_reduce(k.local_index())
        case = FuzzCase(k.build(), {"out": np.zeros(shape[0] * 8, np.uint32)}, (1, 1, 1))
        try:
            wg.dispatch(case.program, case.inputs, vyre.DispatchConfig(grid=1))
        except vyre.UnsupportedFeature:
            assert check_case(case, wg, [wg]) == []  # refused by the oracle: nothing compared
        else:  # this adapter keeps the mapping there: a normal comparison
            assert check_case(case, wg, [wg]) == []
    finally:
        wg.close()


def test_fuzz_generator_draws_subgroup_operations() -> None:
    """The generator produces every subgroup op, in valid Programs whose workgroups are a
    multiple of 32 invocations. It draws until it has seen all five (usually 100 to 250
    draws), up to 2,000: Hypothesis's derandomized draws depend on the constants of every
    module the process has loaded, so a fixed number of draws passed in the whole suite and
    missed an op alone. The rarest op appears in about one draw in 40, so 2,000 draws miss
    one the generator can make with a chance below e^-40, and a generator that lost one
    fails (after all 2,000)."""
    from hypothesis import Phase, find, settings
    from hypothesis.errors import NoSuchExample

    from vyre.ir.analysis import walk_all_exprs
    from vyre.ir.validate import validate
    from vyre.tools import fuzz

    want = {"shuffle", "broadcast", "reduce", "inclusive_scan", "exclusive_scan"}
    seen: set[str] = set()

    def subgroup_ops(case: fuzz.FuzzCase) -> tuple[frozenset[str], int]:
        # a small value to draw: Hypothesis writes out the example that ends the search
        validate(case.program)
        ops = frozenset(e.op for e in walk_all_exprs(case.program) if isinstance(e, N.Subgroup))
        return ops, case.program.invocations_per_workgroup

    def every_op_seen(drawn: tuple[frozenset[str], int]) -> bool:
        ops, invocations = drawn
        assert not ops or invocations % 32 == 0, (sorted(ops), invocations)
        seen.update(ops)
        return seen >= want

    strategy = fuzz.cases(fuzz.GenOptions(subgroup_multiple=32)).map(subgroup_ops)
    with contextlib.suppress(NoSuchExample):  # the assertion below names what is missing
        find(strategy, every_op_seen, settings=settings(
            max_examples=2000, derandomize=True, database=None, deadline=None,
            phases=[Phase.generate]))
    assert seen == want, f"never drawn in 2,000 cases: {sorted(want - seen)}"
    assert fuzz.options_for([ReferenceBackend(subgroup_size=8),
                             ReferenceBackend(subgroup_size=64)]).subgroup_multiple == 64


def test_library_subgroup_programs_compile_with_nvrtc() -> None:
    from vyre.backends.cuda import compile_program
    from vyre.programs.reduce import reduce_program
    from vyre.programs.scan import scan_block_program

    progs = [reduce_program(op, t, 256, 16, True) for op in ("sum", "min", "max")
             for t in (f32, i32, u32)]
    progs += [scan_block_program(t, inc, 256, 16, carry, True) for t in (u32, i32)
              for inc in (True, False) for carry in (True, False)]
    for p in progs:
        assert p.name.endswith("_sg")
        assert compile_program(p, "sm_90").cubin[:4] == b"\x7fELF"
