"""The reference backend's checked mode (get_backend("reference", check=...), $VYRE_CHECK):
a table of small programs with one planted defect each (races in storage and workgroup
memory, missing barriers in a reduction and a scan, off-by-ones past a buffer, uninitialised
tiles, atomics mixed with plain accesses), each of which must be found, on the right buffer,
with results bit-identical to the unchecked run; correct programs (reductions with their
barriers, a histogram, saxpy) must give no report; the error names the fix and the user's
source line; a divergent barrier (which the validator already rejects) is caught by the
interpreter's own check."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest

import vyre
from vyre import DispatchConfig, ProgramBuilder, f32, i32, u32
from vyre.backends.reference import ReferenceBackend
from vyre.backends.reference.checked import CheckReport, CheckSetting, CheckWarning
from vyre.errors import BackendError, BackendUnavailable, DispatchError
from vyre.ir.nodes import Program

WG = 64


@dataclass(frozen=True)
class Case:
    id: str
    build: Callable[[], Program]
    inputs: Callable[[], dict[str, Any]]
    groups: int
    kind: str | None  # None: a correct program, no finding
    buffer: str = ""


def _x(n: int = WG * 2) -> dict[str, Any]:
    return {"x": np.arange(n, dtype=np.float32) + 1, "y": np.zeros(n, dtype=np.float32)}


def _io(name: str, fn: Callable[[ProgramBuilder, Any, Any, Any, Any], None],
        shared: int = 0, wg: int = WG) -> Callable[[], Program]:
    """A program with x (read), y (read_write), li = local_index, i = global linear id,
    and (if `shared`) a workgroup array t of `shared` f32."""
    def build() -> Program:
        k = ProgramBuilder(name, workgroup_size=wg)
        x = k.buffer("x", f32)
        y = k.buffer("y", f32, "read_write")
        t = k.shared("t", f32, shared) if shared else None
        fn(k, x, y, t, (k.local_index(), k.global_linear_id()))
        return k.build()
    return build


# ------------------------------------------------------------------ planted defects

def ww_global_one_wg(k, x, y, t, ids):  # type: ignore[no-untyped-def]
    li, _ = ids
    y[0] = li.cast(f32)


def ww_global_across_wgs(k, x, y, t, ids):  # type: ignore[no-untyped-def]
    li, _ = ids
    y[li] = k.workgroup_id(0).cast(f32)


def rw_global_neighbour(k, x, y, t, ids):  # type: ignore[no-untyped-def]
    _, i = ids
    with k.if_(i + 1 < y.length()):
        y[i] = y[i + 1] + 1.0


def rw_global_across_wgs_despite_barrier(k, x, y, t, ids):  # type: ignore[no-untyped-def]
    li, i = ids
    y[i] = x[i]
    k.barrier()  # orders nothing between workgroups
    with k.if_(k.workgroup_id(0) == 1):
        y[i] = y[li] * 2.0


def ww_global_in_loop(k, x, y, t, ids):  # type: ignore[no-untyped-def]
    li, _ = ids
    with k.for_range(0, 4) as j:
        y[j] = li.cast(f32)


def rw_global_in_branches(k, x, y, t, ids):  # type: ignore[no-untyped-def]
    li, i = ids
    with k.if_(li == 0):
        y[0] = 1.0
    with k.else_():
        y[i] = y[0]


def ww_shared(k, x, y, t, ids):  # type: ignore[no-untyped-def]
    li, i = ids
    t[0] = li.cast(f32)
    k.barrier()
    y[i] = t[0]


def rw_shared_no_barrier(k, x, y, t, ids):  # type: ignore[no-untyped-def]
    li, i = ids
    t[li] = x[i]
    y[i] = t[(li + 1) % WG]


def transpose_tile_no_barrier(k, x, y, t, ids):  # type: ignore[no-untyped-def]
    li, i = ids
    t[li] = x[i]
    y[i] = t[WG - 1 - li]


def reduction_no_barrier_in_loop(k, x, y, t, ids):  # type: ignore[no-untyped-def]
    li, i = ids
    t[li] = x[i]
    k.barrier()
    s = WG // 2
    while s >= 1:
        with k.if_(li < s):
            t[li] = t[li] + t[li + s]
        s //= 2  # (the barrier that belongs here is missing)
    with k.if_(li == 0):
        y[k.workgroup_id(0)] = t[0]


def reduction_no_barrier_after_load(k, x, y, t, ids):  # type: ignore[no-untyped-def]
    li, i = ids
    t[li] = x[i]
    s = WG // 2
    while s >= 1:
        with k.if_(li < s):
            t[li] = t[li] + t[li + s]
        k.barrier()
        s //= 2
    with k.if_(li == 0):
        y[k.workgroup_id(0)] = t[0]


def scan_no_barrier(k, x, y, t, ids):  # type: ignore[no-untyped-def]
    li, i = ids
    t[li] = x[i]
    k.barrier()
    d = 1
    while d < WG:
        v = k.let(t[li])
        with k.if_(li >= d):
            k.assign(v, v + t[li - d])
        t[li] = v  # (a barrier between the reads above and this write is missing)
        k.barrier()
        d *= 2
    y[i] = t[li]


def uninitialised_tile(k, x, y, t, ids):  # type: ignore[no-untyped-def]
    li, i = ids
    y[i] = t[li]


def half_initialised_tile(k, x, y, t, ids):  # type: ignore[no-untyped-def]
    li, i = ids
    with k.if_(li < WG // 2):
        t[li] = x[i]
    k.barrier()
    y[i] = t[li]


def uninitialised_shared_counters(k, x, y, t, ids):  # type: ignore[no-untyped-def]
    li, i = ids
    k.atomic("add", t, li % 4, 1.0)  # never zeroed first
    k.barrier()
    with k.if_(li < 4):
        y[i] = t[li]


def read_past_end(k, x, y, t, ids):  # type: ignore[no-untyped-def]
    _, i = ids
    with k.if_(i < y.length()):
        y[i] = x[i + 1]  # off by one: the last invocation reads x[n]


def store_past_end(k, x, y, t, ids):  # type: ignore[no-untyped-def]
    _, i = ids
    with k.if_(i <= y.length()):  # <= : one past
        y[i] = x[i % x.length()]


def unguarded_grid_tail(k, x, y, t, ids):  # type: ignore[no-untyped-def]
    _, i = ids
    y[i] = x[i] * 2.0  # the grid is rounded up past the data


def shared_past_end(k, x, y, t, ids):  # type: ignore[no-untyped-def]
    li, i = ids
    t[li + 1] = x[i]  # t has WG elements: lane WG-1 writes t[WG]
    k.barrier()
    with k.if_(li < WG - 1):
        y[i] = t[li + 1]


def atomic_then_plain_read(k, x, y, t, ids):  # type: ignore[no-untyped-def]
    li, _ = ids
    k.atomic("add", y, 0, 1.0, relaxed=True)  # (an exact add refuses plain access outright)
    with k.if_(li == 5):
        y[1] = y[0]


def atomic_and_plain_store(k, x, y, t, ids):  # type: ignore[no-untyped-def]
    li, _ = ids
    with k.if_(k.workgroup_id(0) == 0):
        k.atomic("add", y, li % 2, 1.0, relaxed=True)
    with k.else_(), k.if_(li == 0):
        y[0] = 0.0


def shared_atomic_mixed(k, x, y, t, ids):  # type: ignore[no-untyped-def]
    li, i = ids
    with k.if_(li == 0):
        t[0] = 0.0
    k.barrier()
    k.atomic("add", t, 0, 1.0, relaxed=True)
    with k.if_(li == 3):
        y[i] = t[0]  # read while others still add


# ------------------------------------------------------------------ correct programs

def ok_saxpy(k, x, y, t, ids):  # type: ignore[no-untyped-def]
    _, i = ids
    with k.if_(i < y.length()):
        y[i] = 2.0 * x[i] + y[i]


def ok_reduction(k, x, y, t, ids):  # type: ignore[no-untyped-def]
    li, i = ids
    t[li] = x[i]
    k.barrier()
    s = WG // 2
    while s >= 1:
        with k.if_(li < s):
            t[li] = t[li] + t[li + s]
        k.barrier()
        s //= 2
    with k.if_(li == 0):
        y[k.workgroup_id(0)] = t[0]


def ok_scan(k, x, y, t, ids):  # type: ignore[no-untyped-def]
    li, i = ids
    t[li] = x[i]
    k.barrier()
    d = 1
    while d < WG:
        v = k.let(t[li])
        with k.if_(li >= d):
            k.assign(v, v + t[li - d])
        k.barrier()
        t[li] = v
        k.barrier()
        d *= 2
    y[i] = t[li]


def ok_histogram(k, x, y, t, ids):  # type: ignore[no-untyped-def]
    li, _ = ids
    with k.if_(li < 8):
        t[li] = 0.0
    k.barrier()
    k.atomic("add", t, li % 8, 1.0)
    k.barrier()
    with k.if_(li < 8):
        k.atomic("add", y, li, t[li])


def ok_global_atomics_only(k, x, y, t, ids):  # type: ignore[no-untyped-def]
    _, i = ids
    k.atomic("add", y, i % 3, x[i])


def ok_barrier_orders_global_in_one_wg(k, x, y, t, ids):  # type: ignore[no-untyped-def]
    li, i = ids
    y[i] = x[i]
    k.barrier()
    with k.if_(li == 0):  # reads what lane WG-1 of its own workgroup wrote
        y[i] = y[i + (WG - 1)] + 1.0


def ok_same_value_flag(k, x, y, t, ids):  # type: ignore[no-untyped-def]
    _, i = ids
    with k.if_(x[i] > 3.0):
        y[0] = 1.0  # many invocations, one value: every order gives the same bits


def flag_read_while_set(k, x, y, t, ids):  # type: ignore[no-untyped-def]
    li, i = ids
    with k.if_(x[i] > 3.0):
        y[0] = 1.0
    with k.if_(li == 1):
        y[1] = y[0]  # may see the flag or not


def ok_select_masked_load(k, x, y, t, ids):  # type: ignore[no-untyped-def]
    _, i = ids
    v = k.let(vyre.select(i < x.length(), x[i], 0.0))  # the IR's masked load: no finding
    with k.if_(i < y.length()):
        y[i] = v


CASES = [
    Case("ww_global_one_wg", _io("a", ww_global_one_wg), _x, 1, "race", "y"),
    Case("ww_global_across_wgs", _io("b", ww_global_across_wgs), _x, 2, "race", "y"),
    Case("rw_global_neighbour", _io("c", rw_global_neighbour), _x, 2, "race", "y"),
    Case("rw_global_across_wgs_despite_barrier",
         _io("d", rw_global_across_wgs_despite_barrier), _x, 2, "race", "y"),
    Case("ww_global_in_loop", _io("e", ww_global_in_loop), _x, 1, "race", "y"),
    Case("rw_global_in_branches", _io("f", rw_global_in_branches), _x, 1, "race", "y"),
    Case("ww_shared", _io("g", ww_shared, WG), _x, 2, "race", "t"),
    Case("rw_shared_no_barrier", _io("h", rw_shared_no_barrier, WG), _x, 2, "race", "t"),
    Case("transpose_tile_no_barrier", _io("i", transpose_tile_no_barrier, WG), _x, 1,
         "race", "t"),
    Case("reduction_no_barrier_in_loop", _io("j", reduction_no_barrier_in_loop, WG), _x, 2,
         "race", "t"),
    Case("reduction_no_barrier_after_load", _io("k", reduction_no_barrier_after_load, WG),
         _x, 2, "race", "t"),
    Case("scan_no_barrier", _io("l", scan_no_barrier, WG), _x, 1, "race", "t"),
    Case("uninitialised_tile", _io("m", uninitialised_tile, WG), _x, 1,
         "uninitialised-read", "t"),
    Case("half_initialised_tile", _io("n", half_initialised_tile, WG), _x, 2,
         "uninitialised-read", "t"),
    Case("uninitialised_shared_counters", _io("o", uninitialised_shared_counters, 4), _x, 1,
         "uninitialised-read", "t"),
    Case("read_past_end", _io("p", read_past_end), _x, 2, "out-of-bounds", "x"),
    Case("store_past_end", _io("q", store_past_end), lambda: _x(WG * 2 - 1), 2,
         "out-of-bounds", "y"),
    Case("unguarded_grid_tail", _io("r", unguarded_grid_tail), lambda: _x(100), 2,
         "out-of-bounds", "y"),
    Case("shared_past_end", _io("s", shared_past_end, WG), _x, 1, "out-of-bounds", "t"),
    Case("atomic_then_plain_read", _io("u", atomic_then_plain_read), _x, 1, "atomic-race", "y"),
    Case("atomic_and_plain_store", _io("v", atomic_and_plain_store), _x, 2, "atomic-race", "y"),
    Case("shared_atomic_mixed", _io("w", shared_atomic_mixed, 1), _x, 1, "atomic-race", "t"),
    Case("flag_read_while_set", _io("x", flag_read_while_set), _x, 1, "race", "y"),
    Case("ok_same_value_flag", _io("ok7", ok_same_value_flag), _x, 2, None),
    Case("ok_select_masked_load", _io("ok8", ok_select_masked_load), lambda: _x(100), 2, None),
    Case("ok_saxpy", _io("ok1", ok_saxpy), _x, 2, None),
    Case("ok_reduction", _io("ok2", ok_reduction, WG), _x, 2, None),
    Case("ok_scan", _io("ok3", ok_scan, WG), _x, 2, None),
    Case("ok_histogram", _io("ok4", ok_histogram, 8), _x, 2, None),
    Case("ok_global_atomics_only", _io("ok5", ok_global_atomics_only), _x, 2, None),
    Case("ok_barrier_orders_global_in_one_wg", _io("ok6", ok_barrier_orders_global_in_one_wg),
         _x, 2, None),
]


def _run(be: vyre.BaseBackend, case: Case) -> dict[str, np.ndarray]:
    return be.dispatch(case.build(), case.inputs(), DispatchConfig(grid=(case.groups, 1, 1)))


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_planted_defect_is_found_and_results_do_not_change(case: Case) -> None:
    plain = vyre.get_backend("reference")
    checked = vyre.get_backend("reference", check="warn")
    try:
        want = _run(plain, case)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            got = _run(checked, case)
        for name in want:
            assert got[name].tobytes() == want[name].tobytes(), name
        report = checked.last_check_report
        assert isinstance(report, CheckReport)
        if case.kind is None:
            assert report.ok, str(report)
            assert not caught
            return
        found = report.of(case.kind)
        assert found, f"expected {case.kind}, got {report}"
        if case.buffer == "t":  # elements of a workgroup array count from 0 in each
            assert all(0 <= f.element <= (WG if case.kind == "out-of-bounds" else WG - 1)
                       for f in found), str(report)
        assert {f.buffer for f in found} == {case.buffer}
        # other kinds of finding would be noise in these one-defect programs
        assert set(report.counts) == {case.kind}, str(report)
        assert [w for w in caught if issubclass(w.category, CheckWarning)]
    finally:
        plain.close()
        checked.close()


def test_error_names_the_element_the_invocations_the_source_line_and_the_fix() -> None:
    case = CASES[0]
    be = vyre.get_backend("reference", check=True)
    try:
        with pytest.raises(DispatchError) as info:
            _run(be, case)
    finally:
        be.close()
    msg = str(info.value)
    assert "data race on y[0]" in msg
    assert "wg (0,0,0) lane 0" in msg and "wg (0,0,0) lane 63" in msg
    assert "test_checked_mode.py:" in msg  # the line of `y[0] = li.cast(f32)`
    assert "vyre.barrier()" in msg  # the fix


def test_bounds_setting_warns_while_races_stay_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    bounds_case = next(c for c in CASES if c.id == "read_past_end")
    be = vyre.get_backend("reference", check=CheckSetting(mode="error", bounds="warn"))
    try:
        with pytest.warns(CheckWarning, match="access past the end of x"):
            _run(be, bounds_case)
        with pytest.raises(DispatchError, match="data race"):
            _run(be, CASES[0])
    finally:
        be.close()
    monkeypatch.setenv("VYRE_CHECK", "1")
    monkeypatch.setenv("VYRE_CHECK_BOUNDS", "off")
    env_be = vyre.get_backend("reference")
    try:
        _run(env_be, bounds_case)  # bounds off: no error, no warning
        assert env_be.last_check_report is not None
        with pytest.raises(DispatchError):
            _run(env_be, CASES[0])
    finally:
        env_be.close()


def test_bad_settings_are_refused_with_the_choices() -> None:
    with pytest.raises(BackendError, match="'loud' is not a check setting"):
        vyre.get_backend("reference", check="loud")
    with pytest.raises(BackendUnavailable, match="reference backend only"):
        vyre.get_backend("wgpu", check=True)


def test_divergent_barrier_and_subgroup_operation_are_reported() -> None:
    """The validator rejects both; the interpreter's own check is the net behind it (a
    program built without the validator, run through the checked executor directly)."""
    from vyre.backends.reference.checked import execute_checked
    from vyre.backends.reference.plan import Launch, Plan
    from vyre.ir import nodes as N

    li = N.Builtin(name="local_index", axis=0, ty=vyre.u32)
    half = N.Binary(op="lt", a=li, b=N.Const(value=16, ty=vyre.u32), ty=vyre.bool_)
    sg = N.Subgroup(op="reduce", value=li, combine="add", ty=vyre.u32)
    prog = N.Program(name="div", workgroup_size=(64, 1, 1), buffers=(
        N.BufferDecl(name="y", ty=vyre.u32, access="read_write"),), params=(),
        workgroup_arrays=(), body=(N.If(cond=half, then=(
            N.Barrier(), N.Store(buffer="y", index=li, value=sg)), orelse=()),))

    class Mem:
        array = np.zeros(64 * 4, dtype=np.uint8)

    launch = Launch(Plan.prepare(prog), (64,), {}, (1, 1, 1), False, None)
    report = execute_checked(launch, [Mem()])
    assert set(report.counts) == {"divergent-barrier", "divergent-subgroup"}
    assert "wg (0,0,0) lane 16 does not" in str(report)


def test_checked_mode_works_for_device_buffers() -> None:
    case = CASES[0]
    be = vyre.get_backend("reference", check=True)
    try:
        prog = case.build()
        xb = be.allocate_device_buffer(WG * 4)
        yb = be.allocate_device_buffer(WG * 4)
        with pytest.raises(DispatchError, match="data race"):
            be.dispatch_with_device_buffers(prog, {"x": xb}, {"y": yb},
                                            DispatchConfig(grid=(1, 1, 1)))
        be.free(xb)
        be.free(yb)
    finally:
        be.close()


def test_reference_backend_constructor_takes_the_setting() -> None:
    be = ReferenceBackend(check="warn")
    try:
        assert be.capabilities().details["check"] == "warn"
        assert be.check.bounds == "warn"
    finally:
        be.close()
    assert u32 and i32  # (dtypes used by the table's builders)


def test_fuzz_corpus_gives_the_same_bits_checked_and_no_race() -> None:
    """The saved fuzz cases (tests/regressions) run checked with bit-identical results and
    no finding (their accesses past the end are on purpose). The two loop-budget cases
    (65,000+ iterations per invocation, seconds here) run with the whole corpus under
    VYRE_CHECK=1 VYRE_CHECK_BOUNDS=off pytest tests/test_regressions.py instead."""
    from pathlib import Path

    from vyre.tools.fuzz import load_case

    long_loops = {"for_loop_70000.json", "nested_loops_100x1000.json"}
    files = [f for f in sorted((Path(__file__).parent / "regressions").glob("*.json"))
             if f.name not in long_loops]
    assert files
    plain = vyre.get_backend("reference")
    checked = vyre.get_backend("reference", check=CheckSetting(mode="error", bounds="off"))
    try:
        for f in files:
            case = load_case(f)
            want = plain.dispatch(case.program, case.inputs, case.config)
            got = checked.dispatch(case.program, case.inputs, case.config)
            assert checked.last_check_report is not None and checked.last_check_report.ok
            for name in want:
                assert got[name].tobytes() == want[name].tobytes(), (f.name, name)
    finally:
        plain.close()
        checked.close()
