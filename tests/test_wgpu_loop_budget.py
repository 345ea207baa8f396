"""The wgpu backend's loop budget (docs/IR.md, "Loop limit"; vyre/backends/wgpu/loopcount.py).

Mesa's llvmpipe ends every loop silently once 65,535 passes have run in a SIMD group of
invocations. vyre counts the loops each invocation is in and raises DispatchError exactly
when the driver ended a loop an invocation was still in: a budget spent by loops that no
invocation runs (llvmpipe's padding lanes, which read 0 from every buffer) changes no
result and must raise nothing; a loop really cut must always raise, never pass silently.
Adapters without a limit (NVIDIA) get none of this code.

Results are compared with the reference. Skips with the probe's reason without a WebGPU
adapter; the tests that need a driver limit skip with a reason on an adapter without one.
"""

from __future__ import annotations

import numpy as np
import pytest

import vyre
from vyre import DispatchConfig, ProgramBuilder, ScalarType
from vyre.backend import BaseBackend
from vyre.backends.wgpu import loopcount
from vyre.backends.wgpu import render as wgsl
from vyre.builder import pow_
from vyre.errors import DispatchError
from vyre.tools.testing import EXACT, assert_agree

pytestmark = pytest.mark.wgpu

U32, F32 = ScalarType.U32, ScalarType.F32


@pytest.fixture
def wg(backends: dict[str, BaseBackend]) -> BaseBackend:
    """The session's wgpu instance (tests/conftest.py); a refusal leaves it usable."""
    if "wgpu" not in backends:
        why = {a.name: a.reason for a in vyre.available_backends()}.get("wgpu")
        pytest.skip(f"wgpu backend unavailable: {why}")
    return backends["wgpu"]


@pytest.fixture
def ref(reference: BaseBackend) -> BaseBackend:
    return reference


def _limit(wg: BaseBackend) -> int:
    limit = wg.capabilities().details["loop_iteration_limit"]
    if limit is None:
        pytest.skip(f"{wg.id} reports no loop limit: no loop is ever cut there")
    return int(limit)


def _agree(wg: BaseBackend, ref: BaseBackend, prog: vyre.Program, inputs: dict[str, object],
           cfg: DispatchConfig) -> None:
    want = ref.dispatch(prog, inputs, cfg)
    got = wg.dispatch(prog, inputs, cfg)
    for name, exp in want.items():
        assert_agree(got[name], exp, EXACT, f"{prog.name}.{name} on {wg.id}")


def _refused(wg: BaseBackend, limit: int, prog: vyre.Program, inputs: dict[str, object],
             cfg: DispatchConfig) -> None:
    with pytest.raises(DispatchError, match=f"{limit} loop iterations") as info:
        wg.dispatch(prog, inputs, cfg)
    assert repr(prog.name) in str(info.value) and "split the work" in str(info.value).lower()


def _guarded_long_loop(size: tuple[int, int, int], after: bool) -> vyre.Program:
    """A 65,534-pass loop under an If taken where x is 0 (then, with `after`, a loop of `m`
    passes that every invocation runs): the fuzzer's false alarm, reduced."""
    k = ProgramBuilder("guarded_long_loop", workgroup_size=size)
    m = k.param("m", U32)
    x = k.buffer("x", U32)
    o = k.buffer("o", U32, "write")
    g = k.let(k.global_linear_id())
    c = k.let(k.lit(0, U32))
    with k.if_(x[g] == 0), k.for_range(0, 65_534):
        k.assign(c, c + 1)
    if after:
        with k.for_range(0, m):
            k.assign(c, c + 3)
    o[g] = c
    return k.build()


@pytest.mark.parametrize("size", [(4, 4, 4), (3, 1, 1), (8, 1, 1)], ids=str)
def test_never_taken_long_loop_passes(wg: BaseBackend, ref: BaseBackend,
                                      size: tuple[int, int, int]) -> None:
    """No invocation takes the If (x is never 0), so nothing is cut: the exact results.
    (llvmpipe pads an x size that is not a multiple of its SIMD width with lanes that read
    0 and so run the loop, spending the budget: that alone must not raise.)"""
    n = 2 * int(np.prod(size))  # two workgroups
    inputs = {"x": np.arange(1, n + 1, dtype=np.uint32), "o": n}
    _agree(wg, ref, _guarded_long_loop(size, after=False), inputs,
           DispatchConfig(grid=2, params={"m": 0}))


def test_really_taken_loops_over_the_budget_raise(wg: BaseBackend, ref: BaseBackend) -> None:
    """The same program where one invocation takes the If: within the budget it is exact;
    a loop after it that needs more than the budget left is cut, and that raises (with the
    clear message); the backend stays usable."""
    limit = _limit(wg)
    prog = _guarded_long_loop((8, 1, 1), after=True)
    x = np.arange(1, 9, dtype=np.uint32)
    x[5] = 0
    inputs = {"x": x, "o": 8}
    _agree(wg, ref, prog, inputs, DispatchConfig(grid=1, params={"m": limit - 65_534}))
    _refused(wg, limit, prog, inputs, DispatchConfig(grid=1, params={"m": limit - 65_533}))
    _agree(wg, ref, prog, inputs, DispatchConfig(grid=1, params={"m": 1}))


def test_budget_spent_by_padding_lanes_still_cuts_real_loops(
    wg: BaseBackend, ref: BaseBackend
) -> None:
    """Workgroup x size 3 (padded on llvmpipe at any SIMD width): the padding lanes run the
    never-taken loop and spend the budget, so a short loop every real invocation runs after
    it is really cut: that must raise, not return short counts."""
    limit = _limit(wg)
    prog = _guarded_long_loop((3, 1, 1), after=True)
    inputs = {"x": np.arange(1, 4, dtype=np.uint32), "o": 3}
    _agree(wg, ref, prog, inputs, DispatchConfig(grid=1, params={"m": 1}))
    _refused(wg, limit, prog, inputs, DispatchConfig(grid=1, params={"m": 100}))


def test_invocations_of_a_group_share_the_budget(wg: BaseBackend, ref: BaseBackend) -> None:
    """Two neighbouring invocations, each in its own loop of n passes: the group spends 2n,
    so 2n over the budget cuts the second loop (raise) although neither runs n > limit."""
    limit = _limit(wg)
    k = ProgramBuilder("shared_budget", workgroup_size=8)
    n = k.param("n", U32)
    o = k.buffer("o", U32, "write")
    lane = k.let(k.local_index())
    c = k.let(k.lit(0, U32))
    with k.if_(lane == 0), k.for_range(0, n):
        k.assign(c, c + 1)
    with k.if_(lane == 1), k.for_range(0, n):
        k.assign(c, c + 2)
    o[lane] = c
    prog = k.build()
    _agree(wg, ref, prog, {"o": 8}, DispatchConfig(grid=1, params={"n": limit // 2 - 10}))
    _refused(wg, limit, prog, {"o": 8}, DispatchConfig(grid=1, params={"n": limit // 2 + 10}))


def _left_early(kind: str, name: str = "left_by") -> vyre.Program:
    """A loop of n passes left by break (For, While) or return (from two loops deep) at
    pass s."""
    k = ProgramBuilder(f"{name}_{kind}", workgroup_size=1)
    n = k.param("n", U32)
    s = k.param("s", U32)
    o = k.buffer("o", U32, "write", count=2)
    c = k.let(k.lit(0, U32))
    o[1] = 7
    if kind == "for":
        with k.for_range(0, n) as i:
            with k.if_(i == s):
                k.break_()
            k.assign(c, c + 1)
    elif kind == "while":
        j = k.let(k.lit(0, U32))
        with k.while_(j < n):
            with k.if_(j == s):
                k.break_()
            k.assign(j, j + 1)
            k.assign(c, c + 1)
    else:
        with k.for_range(0, 2), k.for_range(0, n) as i:
            with k.if_(i == s):
                o[0] = c
                k.return_()
            k.assign(c, c + 1)
    o[0] = c
    o[1] = 9
    return k.build()


@pytest.mark.parametrize("kind", ["for", "while", "return"])
def test_loops_left_by_break_or_return_are_counted(
    wg: BaseBackend, ref: BaseBackend, kind: str
) -> None:
    """Left within the budget: exact (the count balances on those exits too); left only
    past it: the loop was cut first, which raises."""
    limit = _limit(wg)
    prog = _left_early(kind)
    ok = DispatchConfig(grid=1, params={"n": limit + 5000, "s": limit - 5000})
    _agree(wg, ref, prog, {"o": 2}, ok)
    _refused(wg, limit, prog, {"o": 2},
             DispatchConfig(grid=1, params={"n": limit + 5000, "s": limit + 1000}))


def _every_loop_kind() -> vyre.Program:
    k = ProgramBuilder("every_loop_kind", workgroup_size=4)
    n = k.param("n", U32)
    u = k.buffer("u", U32, "read_write")
    f = k.buffer("f", F32, "read_write")
    w = k.shared("w", F32, 4)
    i = k.local_index()
    w[i] = k.lit(0.0, F32)
    k.barrier()
    with k.for_range(0, n) as j:
        w.atomic_add(0, f[i])
        u.atomic_compare_exchange(i, j, j + 1)
        with k.if_(j == 7):
            k.break_()
    j2 = k.let(k.lit(0, U32))
    with k.while_(j2 < n):
        k.assign(j2, j2 + 1)
    k.barrier()
    f[i] = pow_(f[i], k.lit(1.5, F32)) + w[0]
    u[i] = u[i] + j2
    return k.build()


def test_only_adapters_with_a_limit_count_loops() -> None:
    """No overhead without a limit, nor for programs without loops; with one, every loop of
    the module (the helpers' retry loops included) is counted and checked at the end, and
    a module with a loop that is not counted falls back to the sentinel (never silent)."""
    prog = _every_loop_kind()
    k = ProgramBuilder("straight", workgroup_size=1)
    o = k.buffer("o", U32, "write", count=1)
    o[0] = 1
    straight = k.build()
    plain = wgsl.generate(prog, loop_limited=False)
    assert loopcount.OPEN not in plain.source and plain.status_binding is None
    assert wgsl.generate(straight, loop_limited=True).status_binding is None
    counted = wgsl.generate(prog, loop_limited=True)
    assert counted.status_binding == 3
    assert loopcount.all_counted(counted.source) and "vy_loop_sentinel" not in counted.source
    assert counted.source.count(loopcount.COUNTED) >= 4  # for, while, two retry loops
    assert f"if ({loopcount.OPEN} != 0u)" in counted.source
    assert not loopcount.all_counted("fn f() {\n  loop { break; }\n}")
    assert not loopcount.all_counted("for (var i = 0; i < 3; i++) {}")


def test_uncounted_loop_falls_back_to_the_sentinel(
    wg: BaseBackend, ref: BaseBackend, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A module with a loop that is not counted ends with the sentinel instead, which
    raises once the budget is spent (never silent); the module still compiles and runs."""
    monkeypatch.setattr(loopcount, "all_counted", lambda code: False)
    prog = _left_early("for", name="sentinel_fallback")  # (not compiled before: its own hash)
    mod = wgsl.generate(prog, loop_limited=True)
    assert "vy_loop_sentinel();" in mod.source and f"if ({loopcount.OPEN} != 0u)" not in mod.source
    limit = _limit(wg)
    _agree(wg, ref, prog, {"o": 2}, DispatchConfig(grid=1, params={"n": 100, "s": 50}))
    _refused(wg, limit, prog, {"o": 2},
             DispatchConfig(grid=1, params={"n": limit + 10, "s": limit + 5}))


def test_counted_helpers_run_exactly(wg: BaseBackend, ref: BaseBackend) -> None:
    """The counted forms of every loop kind compile and agree with the reference."""
    prog = _every_loop_kind()
    for feature in prog.required_features:
        if not wg.supports(feature):
            pytest.skip(f"{wg.id} does not report feature {feature!r}")
    inputs = {"u": np.array([0, 5, 2, 9], np.uint32),
              "f": np.array([1.5, 2.0, 0.25, 3.0], np.float32)}
    _agree(wg, ref, prog, inputs, DispatchConfig(grid=1, params={"n": 12}))


def test_the_limit_is_the_boundary_with_a_break_too(wg: BaseBackend, ref: BaseBackend) -> None:
    """A While of n iterations makes n + 1 passes with or without a break of its own (here
    never taken; docs/IR.md): limit - 1 iterations run exactly, limit are refused."""
    limit = _limit(wg)
    prog = _left_early("while")
    _agree(wg, ref, prog, {"o": 2}, DispatchConfig(grid=1, params={"n": limit - 1, "s": 2 * limit}))
    _refused(wg, limit, prog, {"o": 2}, DispatchConfig(grid=1, params={"n": limit, "s": 2 * limit}))
