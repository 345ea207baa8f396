"""The shared lowering (vyre.lower) checked on the CPU: for every fuzz case, every saved
regression and every combination of target traits, the reference backend gives the same
bits for the lowered Program as for the Program itself. The reference evaluates the
lowered core's `Native` nodes with an assertion of their domain, so a lowering that ever
asks a target for a division by zero, an oversized shift or an out-of-range conversion
fails here, on any machine, before it could misbehave on a GPU.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from vyre import DispatchConfig
from vyre.backends.reference.backend import ReferenceBackend
from vyre.backends.reference.plan import Plan
from vyre.builder import ProgramBuilder, clamp, select, sqrt
from vyre.errors import InvalidProgram
from vyre.ir import nodes as N
from vyre.ir.types import ScalarType as T
from vyre.ir.validate import validate
from vyre.lower import NOTHING_NATIVE, Traits, all_traits, lower
from vyre.tools import fuzz

TRAITS = all_traits()
CASES = sorted(fuzz.regressions_dir().glob("*.json"))


class LoweredReference(ReferenceBackend):
    """The reference backend running `lower(P, traits)` instead of P (P is validated first,
    as for every backend; the lowered core itself is internal and never validated)."""

    def __init__(self, traits: Traits) -> None:
        super().__init__(f"reference-lowered-{abs(hash(traits))}")
        self.traits = traits

    def _compile(self, program: N.Program, key: Any) -> Plan:
        return Plan.prepare(lower(program, self.traits))


_REF = ReferenceBackend()
_LOWERED = {t: LoweredReference(t) for t in TRAITS}


def _same(case: fuzz.FuzzCase, traits: Traits, want: dict[str, np.ndarray] | None = None) -> None:
    if want is None:
        want = _REF.dispatch(case.program, case.inputs, case.config)
    got = _LOWERED[traits].dispatch(case.program, case.inputs, case.config)
    for name, w in want.items():
        assert got[name].tobytes() == w.tobytes(), (
            f"{case.program.name}: {name} differs after lower(P, {traits}):\n"
            f"got      {got[name]!r}\nexpected {w!r}")


def _every_traits(case: fuzz.FuzzCase) -> None:
    """`case` under every traits combination; combinations that lower the Program to the
    same core (traits it does not touch) run that core once."""
    want = _REF.dispatch(case.program, case.inputs, case.config)
    seen: set[str] = set()
    for t in TRAITS:
        core = lower(case.program, t).canonical_json
        if core not in seen:
            seen.add(core)
            _same(case, t, want)


@pytest.mark.parametrize("path", CASES, ids=[p.stem for p in CASES])
def test_lowering_keeps_every_regression(path: Path) -> None:
    _every_traits(fuzz.load_case(path))


_EVERY_TYPE = fuzz.GenOptions(
    types=frozenset({T.I32, T.U32, T.F32, T.F16, T.F64, T.I64, T.U64}),
    atomic_types=frozenset({T.I32, T.U32, T.I64, T.U64}))


@fuzz.fuzz_settings(max_examples=80)
@given(fuzz.cases(_EVERY_TYPE), st.sampled_from(TRAITS))
def test_lowering_keeps_fuzz_cases(case: fuzz.FuzzCase, traits: Traits) -> None:
    _same(case, traits)


def _edge_program() -> N.Program:
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


def edge_case() -> fuzz.FuzzCase:
    p = _edge_program()
    return fuzz.FuzzCase(p, {"a": EDGE_A, "b": EDGE_B, "f": EDGE_F, "h": EDGE_H,
                             "lp": np.zeros(8, np.uint32)},
                         (8, 1, 1))


def test_lowering_edges() -> None:
    _every_traits(edge_case())


def test_edges_agree_on_every_backend(backend: Any) -> None:
    """The same edge program on each backend (wgpu: abs(i64(x)) once returned -5)."""
    case = edge_case()
    missing = case.program.required_features - backend.capabilities().features
    if missing:
        pytest.skip(f"{backend.id} lacks {sorted(missing)}")
    want = _REF.dispatch(case.program, case.inputs, case.config)
    got = backend.dispatch(case.program, case.inputs, case.config)
    for name, w in want.items():
        assert got[name].tobytes() == w.tobytes(), f"{backend.id} {name}: {got[name]} != {w}"


def test_lowered_core_is_refused_by_the_validator() -> None:
    k = ProgramBuilder("shift", workgroup_size=1)
    a = k.buffer("a", T.U32, "read_write", count=2)
    a[0] = a[0] << a[1]  # lowered without new locals: a masked native shift
    lowered = lower(k.build(), NOTHING_NATIVE)
    assert any(isinstance(e, N.Native) for e in _all_exprs(lowered))
    with pytest.raises(InvalidProgram, match="internal node of the lowered core"):
        validate(lowered)
    # the locals the lowering adds are named so no user name can collide with them
    with pytest.raises(InvalidProgram, match="not a valid name"):
        validate(lower(_edge_program(), NOTHING_NATIVE))


def test_native_outside_its_domain_is_caught_by_the_reference() -> None:
    k = ProgramBuilder("bad_native", workgroup_size=1)
    o = k.buffer("o", T.I32, "write", count=1)
    k.store(o, 0, 1)
    p = k.build()
    (st_,) = [s for s in p.body if isinstance(s, N.Store)]
    bad = N.Native(op="div", args=(N.Const(ty=T.I32, value=1), N.Const(ty=T.I32, value=0)),
                   ty=T.I32)
    broken = p.model_copy(update={"body": (st_.model_copy(update={"value": bad}),)})

    class Identity(LoweredReference):
        def _compile(self, program: N.Program, key: Any) -> Plan:
            return Plan.prepare(broken)

    with pytest.raises(AssertionError, match="outside its domain"):
        Identity(NOTHING_NATIVE).dispatch(p, {}, DispatchConfig(grid=(1, 1, 1)))


def _all_exprs(p: N.Program) -> list[N.ExprNode]:
    from vyre.ir.analysis import walk_all_exprs

    return list(walk_all_exprs(p))


def test_printers_refuse_a_bad_program_the_same_way() -> None:
    """A Program the validator refuses fails in both printers with the same InvalidProgram
    (not a TypeError / KeyError from deep inside one of them)."""
    from vyre.backends.cuda.codegen import generate as cuda_generate
    from vyre.backends.wgpu.wgsl import generate as wgsl_generate

    k = ProgramBuilder("bad", workgroup_size=1)
    o = k.buffer("o", T.U32, "write", count=1)
    o[0] = 1
    good = k.build()
    (st_,) = good.body
    undeclared = N.Var(name="nowhere", ty=T.U32)
    bad = good.model_copy(update={"body": (st_.model_copy(update={"value": undeclared}),)})
    errors = []
    for gen in (cuda_generate, wgsl_generate):
        with pytest.raises(InvalidProgram) as info:
            gen(bad)
        errors.append(str(info.value))
    assert errors[0] == errors[1] and "nowhere" in errors[0]
