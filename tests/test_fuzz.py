"""Differential fuzzing (vyre.tools.fuzz): random valid Programs on every available backend must
agree with the reference under the IR's comparison rules.

Each backend gets `VYRE_FUZZ_EXAMPLES` examples (default 40, the "ci" profile; no deadline).
A disagreement is shrunk by Hypothesis and saved as tests/regressions/fuzz_<hash>.json, which
tests/test_regressions.py replays on every backend from then on. Without any other backend,
the reference is checked against a second reference instance (determinism) and every case's
wire-format round trip. This file must never compare a backend with itself only, or loosen
the tolerance of vyre.tools.testing.tolerance_for.
"""

from __future__ import annotations

import functools
import math
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, given, settings

import vyre
import vyre.builder
from vyre import ProgramBuilder
from vyre.backend import BaseBackend
from vyre.errors import DispatchError
from vyre.ir import nodes as N
from vyre.ir.analysis import walk_all_exprs, walk_stmts
from vyre.ir.types import NARROW_INTS
from vyre.ir.types import ScalarType as ST
from vyre.ir.validate import validate
from vyre.tools import fuzz

SAVE = os.environ.get("VYRE_FUZZ_SAVE", "1") != "0"


def _others() -> list[str]:
    return [a.name for a in vyre.available_backends() if a.available and a.name != "reference"]


@pytest.fixture(scope="module")
def reference() -> Iterator[BaseBackend]:
    b = vyre.get_backend("reference")
    yield b
    b.close()


@pytest.mark.parametrize("name", _others() or ["reference"])
def test_backend_agrees_with_reference(name: str, reference: BaseBackend) -> None:
    other = vyre.get_backend(name)
    try:
        n = fuzz.fuzz_backends(
            reference, [other], save_dir=fuzz.regressions_dir() if SAVE else None
        )
        assert n > 0
        assert other.live_buffers() == [], "dispatch leaked device buffers"
    finally:
        other.close()


@pytest.mark.parametrize("name", _others() or ["reference"])
def test_operator_sweep_agrees_with_reference(name: str, reference: BaseBackend) -> None:
    """The generator's operator sweep (every operator, function, cast and bitcast on every
    type both backends run, over every pair of edge values) agrees with the reference."""
    other = vyre.get_backend(name)
    try:
        @fuzz.fuzz_settings(max_examples=3)
        @given(fuzz.operator_cases(fuzz.options_for([reference, other])))
        def one(case: fuzz.FuzzCase) -> None:
            bad = fuzz.check_case(case, reference, [other])
            assert not bad, "; ".join(str(b) for b in bad)

        one()
    finally:
        other.close()


@fuzz.fuzz_settings(max_examples=25)
@given(fuzz.cases(fuzz.GenOptions()))
def test_generated_programs_are_valid_and_round_trip(case: fuzz.FuzzCase) -> None:
    validate(case.program)
    again = fuzz.case_from_json(fuzz.case_to_json(case))
    assert again.program == case.program
    assert again.program.content_hash == case.program.content_hash
    assert again.grid == case.grid
    # Compared through repr so a NaN parameter (NaN != NaN) still has to round-trip as NaN.
    assert {k: repr(v) for k, v in again.params.items()} == {
        k: repr(v) for k, v in case.params.items()
    }
    for k, v in case.inputs.items():
        assert again.inputs[k].dtype == v.dtype
        assert again.inputs[k].tobytes() == v.tobytes()


class Altered(BaseBackend):
    """Delegates to a reference instance, then alters its results (`alter`) or raises
    (`fail`); reports `limits` on top of the reference's."""

    kind = "reference"

    def __init__(self, name: str = "altered",
                 alter: Callable[[np.ndarray], np.ndarray] = lambda v: v,
                 fail: Exception | None = None, limits: dict[str, int] | None = None) -> None:
        super().__init__(name)
        self.inner = vyre.get_backend("reference")
        self.alter, self.fail, self.extra = alter, fail, limits or {}

    def capabilities(self) -> vyre.Capabilities:
        caps = self.inner.capabilities()
        return caps.model_copy(update={"limits": {**caps.limits, **self.extra}})

    def dispatch(self, program, inputs, config):  # type: ignore[no-untyped-def]
        if self.fail is not None:
            raise self.fail
        return {k: self.alter(v) for k, v in self.inner.dispatch(program, inputs, config).items()}


def test_fuzz_failure_is_shrunk_and_saved(tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """A backend that disagrees is caught, and the case lands in the save directory; with
    $VYRE_REPLAY_DIR set, also as a replay file that reruns the disagreement anywhere."""
    from vyre.tools import replay

    monkeypatch.setenv(replay.ENV_REPLAY_DIR, str(tmp_path / "replay"))
    wrong = Altered("wrong", alter=lambda v: (v.view(np.uint8) ^ 1).view(v.dtype))
    ref = vyre.get_backend("reference")
    with pytest.raises(AssertionError, match="shrunk case is saved") as info:
        fuzz.fuzz_backends(ref, [wrong], max_examples=20, save_dir=tmp_path / "cases",
                           options=fuzz.GenOptions(long_loops=0.0))  # shrinks in seconds
    saved = list(os.scandir(tmp_path / "cases"))
    assert len(saved) == 1
    case = fuzz.load_case(saved[0].path)
    # Shrinking leaves a small program.
    assert len(case.program.body) <= 4
    assert "wrong" in case.note
    (path,) = (tmp_path / "replay").glob("*.zip")
    assert f"replay file: {path}" in str(info.value)
    assert replay.replay(path, backend=ref).ok  # the case itself is sound
    again = replay.replay(path, backend=wrong, against=ref)
    assert not again.ok and "differ" in str(again)


def _elementwise(fn: Callable[[Any], Any], xs: list[float]) -> fuzz.FuzzCase:
    k = ProgramBuilder("elementwise", workgroup_size=8)
    x, out = k.buffer("x", ST.F32), k.buffer("out", ST.F32, "write")
    i = k.global_linear_id()
    with k.if_(i < x.length()):
        out[i] = fn(x[i])
    return fuzz.FuzzCase(k.build(), {"x": np.array(xs, np.float32),
                                     "out": np.zeros(len(xs), np.float32)}, (1, 1, 1))


def _ulp_up(v: np.ndarray) -> np.ndarray:
    return np.nextafter(v, np.inf).astype(v.dtype) if v.dtype.kind == "f" else v


def test_division_is_compared_exactly_even_on_wgpu() -> None:
    """docs/IR.md names only the approximate functions: one ulp off in x / 3 is a
    disagreement for every backend kind (wgpu included), and so is a lost zero sign."""
    ref = vyre.get_backend("reference")
    case = _elementwise(lambda x: x / 3.0, [1.0, 2.0, 10.0])
    for kind in ("wgpu", "cuda", "reference"):
        off = Altered("one_ulp", alter=_ulp_up)
        off.kind = kind
        bad = fuzz.run_case(case, ref, [off])
        assert bad and "exact" in bad[0].message, kind
    signs = _elementwise(lambda x: x * 1.0, [-0.0, 0.0])
    flipped = Altered("zero_sign", alter=lambda v: np.abs(v) if v.dtype.kind == "f" else v)
    assert fuzz.run_case(signs, ref, [flipped])
    # Approximate functions (the backends' own, vyre.approx) keep their documented bound,
    # in their own buffers only.
    near = _elementwise(lambda x: vyre.approx.sin(x), [0.5, 1.0])
    assert fuzz.approximate_buffers(near.program) == {"out"}
    assert fuzz.run_case(near, ref, [Altered("sin_ulp", alter=_ulp_up)]) == []
    # ... but within that bound the sign of zero is still compared: sin(-0) = -0
    assert fuzz.run_case(_elementwise(lambda x: vyre.approx.sin(x), [-0.0, 0.0]), ref,
                         [flipped])
    # f32 sin has one exact definition (vyre.lower.maths): one ulp off is a disagreement
    exact_sin = _elementwise(lambda x: vyre.builder.sin(x), [0.5, 1.0])
    assert fuzz.approximate_buffers(exact_sin.program) == frozenset()
    assert fuzz.run_case(exact_sin, ref, [Altered("sin_ulp", alter=_ulp_up)])


def _count_loop(n: int, group: int = 2, runners: int = 2) -> fuzz.FuzzCase:
    """n loop passes in each of the first `runners` invocations of one workgroup of `group`."""
    k = ProgramBuilder("count_loop", workgroup_size=group)
    out = k.buffer("count", ST.U32, "write")
    c = k.let(k.lit(0, ST.U32))
    with k.if_(k.global_linear_id() < runners), k.for_range(0, k.param("n", ST.U32)):
        k.assign(c, c + 1)
    with k.if_(k.global_linear_id() == 0):
        k.return_()
    out[k.global_linear_id()] = c
    return fuzz.FuzzCase(k.build(), {"count": np.zeros(group, np.uint32)}, (1, 1, 1), {"n": n})


def test_loop_limit_refusal_is_accepted_only_past_the_limit() -> None:
    """A DispatchError naming the adapter's loop limit (capabilities().limits
    ["loop_iterations_per_invocation"]) is the documented outcome only when the reference
    shows an invocation really runs more iterations; otherwise it is a disagreement."""
    ref = vyre.get_backend("reference")
    key = fuzz.LOOP_LIMIT_KEYS[0]
    limited = Altered("limited", fail=DispatchError("a loop ran past this adapter's limit of "
                                                    "1,000 iterations per invocation"),
                      limits={key: 1000})
    assert fuzz.loop_limit(limited) == 1000
    assert fuzz.max_loop_iterations(_count_loop(1001), ref) == 1001
    assert fuzz.run_case(_count_loop(1001, runners=1), ref, [limited]) == []
    bad = fuzz.run_case(_count_loop(1000, runners=1), ref, [limited])
    assert bad and "within the limit of 1000" in bad[0].message
    # llvmpipe shares its budget among the invocations it runs together (docs/IR.md): the
    # refusal is also accepted where a workgroup's invocations together pass the limit
    assert fuzz.loop_passes(_count_loop(600, group=4, runners=2), ref) == (600, 1200)
    assert fuzz.run_case(_count_loop(600, group=4, runners=2), ref, [limited]) == []
    bad = fuzz.run_case(_count_loop(600, group=4, runners=1), ref, [limited])
    assert bad and "no workgroup more than 600 together" in bad[0].message
    other = Altered("other_error", fail=DispatchError("device lost"), limits={key: 1000})
    assert fuzz.run_case(_count_loop(5000), ref, [other])
    unlimited = Altered("no_limit", fail=DispatchError("limit of 1000"))
    assert fuzz.run_case(_count_loop(5000), ref, [unlimited])
    truncated = Altered("truncated", alter=lambda v: np.minimum(v, 1000).astype(v.dtype))
    assert fuzz.run_case(_count_loop(5000), ref, [truncated])  # silent truncation is caught


def _exprs(case: fuzz.FuzzCase) -> list[Any]:
    return list(walk_all_exprs(case.program))


def _stores(ty: ST, c: fuzz.FuzzCase) -> bool:
    return any(isinstance(s, N.Store) and s.value.ty is ty for s in walk_stmts(c.program.body))


def _float_div(e: Any) -> bool:
    return isinstance(e, N.Binary) and e.op in ("div", "rem") and e.ty.is_float


def test_generator_draws_the_classes_real_drivers_got_wrong(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 13: x/x, exact quotients cast to ints, float rem, sqrt, division feeding more
    arithmetic, long (and nested) loops, i64 casts, approximate functions at +-0, inputs at
    the exponent limits (and, issue 31, 8/16-bit loads and stores): each drawn within a few hundred cases (generated, not run).

    Hypothesis mixes literals collected from every local module in sys.modules (tests
    included) into its draws, so which cases a derandomized run draws would change with
    any module anywhere; here it draws from the generator's own choices only."""
    from hypothesis.internal.conjecture import providers

    monkeypatch.setattr(providers, "_get_local_constants", providers.Constants)
    providers.CONSTANTS_CACHE.cache.clear()
    f32 = np.finfo(np.float32)
    wanted: dict[str, Callable[[fuzz.FuzzCase], bool]] = {
        "x / x": lambda c: any(_float_div(e) and e.a == e.b for e in _exprs(c)),
        "an exact quotient cast to an int": lambda c: any(
            isinstance(e, N.Cast) and e.ty.is_int and _float_div(e.a)
            and isinstance(e.a.a, N.Cast) for e in _exprs(c)),
        "a division feeding more arithmetic": lambda c: any(
            isinstance(e, N.Binary) and e.op in ("add", "mul", "sub") and e.ty.is_float
            and (_float_div(e.a) or _float_div(e.b)) for e in _exprs(c)),
        "sqrt": lambda c: any(isinstance(e, N.Call) and e.fn == "sqrt" for e in _exprs(c)),
        "abs(i64(x))": lambda c: any(
            isinstance(e, N.Call) and e.fn == "abs" and e.ty is ST.I64
            and isinstance(e.args[0], N.Cast) for e in _exprs(c)),
        "pow/sin/tan at -0": lambda c: any(
            isinstance(e, N.Call) and e.fn in ("pow", "sin", "tan")
            and any(isinstance(a, N.Const) and a.value == 0.0
                    and math.copysign(1.0, a.value) < 0 for a in e.args) for e in _exprs(c)),
        "f32 inputs at both exponent limits": lambda c: any(
            v.dtype == np.float32 and bool(np.any(np.abs(v) == f32.max))
            and bool(np.any((v != 0) & (np.abs(v) < f32.tiny))) for v in c.inputs.values()),
        "a for loop past 65,535 iterations": lambda c: any(
            isinstance(s, N.For) and isinstance(s.end, N.Const) and s.end.value >= 65536
            for s in walk_stmts(c.program.body)),
        "long nested loops": lambda c: any(
            isinstance(s, N.For) and any(isinstance(t, N.For) for t in s.body)
            and isinstance(s.end, N.Const) and s.end.value >= 66
            for s in walk_stmts(c.program.body)),
        "a long while loop": lambda c: any(
            isinstance(s, N.While) and isinstance(s.cond, N.Binary)
            and isinstance(s.cond.b, N.Const) and s.cond.b.value >= 65536
            for s in walk_stmts(c.program.body)),
        "an 8/16-bit load, cast": lambda c: any(
            isinstance(e, N.Cast) and e.a.ty.is_narrow for e in _exprs(c)),
        **{f"a store of a {t}": functools.partial(_stores, t) for t in NARROW_INTS},
    }
    seen: set[str] = set()

    @settings(max_examples=600, derandomize=True, database=None, deadline=None,
              phases=[Phase.generate], suppress_health_check=list(HealthCheck))
    @given(fuzz.cases(fuzz.GenOptions(types=fuzz.ALL_TYPES, long_loops=0.3)))
    def draw(case: fuzz.FuzzCase) -> None:
        seen.update(k for k, pred in wanted.items() if k not in seen and pred(case))

    draw()
    assert seen == set(wanted), f"the generator never drew: {sorted(set(wanted) - seen)}"
