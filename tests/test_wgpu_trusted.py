"""wgpu shader modules without naga's bounds checks (vyre/backends/wgpu/trusted.py).

- Without a device: the printer's verdict (WgslModule.unproven_access) is the lowered
  Program's own fact, a select-form guarded load (a Guarded node), on the library and on
  random Programs under every printer option that changes the spelling; and a source it
  vouches for indexes only the arrays whose accesses render.py audited.
- On lavapipe (and any wgpu device): the capabilities detail says where the checks are
  off; a loop-free Program with a guarded load keeps them, the library matmul does not;
  accesses past the end and at huge u32 indexes of buffers, workgroup arrays (vec4 ones
  too) and atomics give the reference's bits in a module without the checks; the switch
  VYRE_WGPU_BOUNDS_CHECKS=1 and a wgpu-native without the call keep every module checked
  and change no bit.
"""

from __future__ import annotations

import dataclasses
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

import vyre
from vyre import DispatchConfig, ProgramBuilder, ScalarType
from vyre.backend import BaseBackend
from vyre.backends.wgpu import render as wgsl
from vyre.backends.wgpu import trusted
from vyre.backends.wgpu.options import WgpuOptions
from vyre.errors import BackendError
from vyre.ir import nodes as N
from vyre.ir.analysis import has_any, walk_expr, walk_stmts
from vyre.ir.visit import stmt_exprs
from vyre.lower import lower
from vyre.programs import histogram, matmul, radix_sort, scan, stencil
from vyre.programs import reduce as red
from vyre.programs.elementwise import fill, iota, saxpy
from vyre.tools import fuzz
from vyre.tools.bench.vyre_impl import compile_probe_program
from vyre.tools.testing import EXACT, assert_agree, check_against_reference

sys.path.insert(0, str(Path(__file__).resolve().parent))
from lowering_cases import MEM_A, MEM_F, memory_program

U32, F32, I32 = ScalarType.U32, ScalarType.F32, ScalarType.I32
AVAILABLE = {a.name for a in vyre.available_backends() if a.available}
needs_wgpu = pytest.mark.skipif("wgpu" not in AVAILABLE, reason="wgpu is not available here")
PROVEN = "off where the printer proves every array access in range, else on"


# ------------------------------------------------------------------ the printer's verdict


def _library() -> Iterator[N.Program]:
    yield from (matmul.matmul_program(), matmul.matmul_program(64, 4, 16),
                matmul.matmul_program(128, 8, 8, True, False))
    yield from (radix_sort.radix_scatter_program(True), radix_sort.radix8_scatter_program(True),
                radix_sort.radix_count_program())
    yield from (histogram.histogram_program(256, strided=True), histogram.histogram_program(16))
    yield from (scan.scan_block_program(U32, True), red.reduce_program("sum", F32))
    yield from (fill(U32), iota(F32), saxpy(F32), stencil.stencil_program("clamp"))
    yield compile_probe_program(3)
    yield memory_program()


def _has_guarded(p: N.Program) -> bool:
    return any(isinstance(x, N.Guarded) for s in walk_stmts(p.body) for e in stmt_exprs(s)
               for x in walk_expr(e))


_ARRAY_INDEX = re.compile(r"\b([A-Za-z_]\w*)\s*\[")
# render.py's audited array accesses: buffers (b_*) and workgroup arrays (w_*) at a raw
# access's index (or one derived from it: vec4 runs and lanes), the trig reduction table
# and the loop-limit status word
_AUDITED = re.compile(r"b_\w+|w_\w+|vy_inv_pio4|vy_status")


def _check_verdict(p: N.Program, **options: Any) -> None:
    try:
        mod = wgsl.generate(p, **options)
    except BackendError:
        return  # (a Program this spelling cannot print is not compiled at all)
    looped = has_any(p, (N.For, N.While))
    core = lower(p, wgsl.TRAITS if looped else wgsl.STRAIGHT_TRAITS)
    assert (mod.unproven_access is not None) == _has_guarded(core), p.name
    if mod.unproven_access is None:
        code = "\n".join(line.split("//", 1)[0] for line in mod.source.splitlines())
        indexed = {m.group(1) for m in _ARRAY_INDEX.finditer(code)}
        assert all(_AUDITED.fullmatch(a) for a in indexed), (p.name, indexed)
    else:
        assert mod.unproven_access.startswith("the eager select load of ")


_OPTIONS = [{}, {"loop_limited": True}, {"exact_div": True, "exact_sqrt": True},
            {"flush_subnormals": True}, {"options": WgpuOptions(vectors=False)},
            {"fma_fused": False}]


@pytest.mark.parametrize("options", _OPTIONS, ids=lambda o: ",".join(o) or "default")
def test_the_verdict_is_the_lowered_programs_select_loads(options: dict[str, Any]) -> None:
    for p in _library():
        _check_verdict(p, **options)
    # (the library really has both kinds: the test could fail either way)
    verdicts = {wgsl.generate(p, **options).unproven_access is None for p in _library()}
    assert verdicts == {True, False}


@settings(max_examples=150, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(fuzz.programs(fuzz.GenOptions(types=fuzz.ALL_TYPES, atomic_types=frozenset(
    {U32, I32, ScalarType.I64, ScalarType.U64}))))
def test_the_verdict_holds_on_random_programs(p: N.Program) -> None:
    for options in ({}, {"loop_limited": True}):
        _check_verdict(p, **options)


def test_a_guarded_select_marks_the_module_even_in_a_vec4_lane() -> None:
    """A loop-free Program reading a vec4 workgroup array at an index only the run knows:
    the lane helper sits inside the select, so the module is unproven."""
    k = ProgramBuilder("lane_in_select", 16)
    at = k.param("at", U32)
    o = k.buffer("o", U32, "write", count=32)
    w = k.shared("w", U32, 64)
    t = k.let(k.local_index())
    for e in range(4):
        w[t * 4 + e] = t * (e + 1)  # one vec4 store run, in range by t's bounds
    k.barrier()
    o[t] = w[at + t]  # only the run knows the index
    mod = wgsl.generate(k.build())
    assert "array<vec4<u32>, 16>" in mod.source
    assert re.search(r"select\([^\n]*vy_ld_w_w\(", mod.source)
    assert mod.unproven_access == "the eager select load of 'w'"


# ------------------------------------------------------------------ on a device


def _open_wgpu(monkeypatch: pytest.MonkeyPatch, switch: str | None) -> BaseBackend:
    if switch is None:
        monkeypatch.delenv(trusted.ENV_BOUNDS_CHECKS, raising=False)
    else:
        monkeypatch.setenv(trusted.ENV_BOUNDS_CHECKS, switch)
    return vyre.get_backend("wgpu")


@pytest.fixture(scope="module")
def wgpu() -> Iterator[BaseBackend]:
    """A wgpu backend opened without the switch, whatever the environment says."""
    if "wgpu" not in AVAILABLE:
        pytest.skip("wgpu is not available here")
    with pytest.MonkeyPatch.context() as mp:
        b = _open_wgpu(mp, None)
    yield b
    b.close()


def _matmul_case() -> tuple[N.Program, dict[str, Any], DispatchConfig]:
    """A matmul whose tiles are partial at every edge (70 x 33 by 33 x 50)."""
    rng = np.random.default_rng(17)
    a = rng.standard_normal((70, 33)).astype(np.float32)
    b = rng.standard_normal((33, 50)).astype(np.float32)
    t = matmul.Tiles()
    cfg = matmul.matmul_config(70, 50, 33, t.block, t.per_thread, t.block_k)
    return matmul.matmul_program(*t), {"a": a.ravel(), "b": b.ravel(), "c": 70 * 50}, cfg


@needs_wgpu
def test_capabilities_say_where_the_checks_are_off(wgpu: BaseBackend) -> None:
    assert wgpu.capabilities().details["shader_bounds_checks"] == PROVEN


@needs_wgpu
def test_a_select_form_program_keeps_the_checks(wgpu: BaseBackend, reference: BaseBackend,
                                                 ) -> None:
    p = compile_probe_program(11)
    c = wgpu.compile(p)
    assert c.bounds_checks and c.module.unproven_access == "the eager select load of 'x'"
    n = 1000  # past the last whole workgroup: the select's read runs out of range
    x = np.arange(n, dtype=np.float32)
    cfg = DispatchConfig.for_elements(n + 37, p.workgroup_size[0])
    cfg = DispatchConfig(grid=cfg.grid, params={"a": 1.5})
    check_against_reference(p, {"x": x, "y": np.ones(n + 37, np.float32)}, cfg, [wgpu],
                            reference, EXACT)


@needs_wgpu
def test_the_matmul_goes_without_checks_and_keeps_its_bits(wgpu: BaseBackend,
                                                           reference: BaseBackend) -> None:
    p, inputs, cfg = _matmul_case()
    c = wgpu.compile(p)
    assert c.bounds_checks is False and c.module.unproven_access is None
    check_against_reference(p, inputs, cfg, [wgpu], reference, EXACT)


def _wild_program() -> N.Program:
    """Each of 8 invocations takes index j = ix[t] (in range, at the length, one past it,
    2^31 - 1, 2^31, 2^32 - 2, 2^32 - 1) and, in a loop (so the module is trusted), loads,
    stores and runs atomics at j on buffers and workgroup arrays: a u32 array read as vec4
    runs, an atomic u32 and an f32 one (its add emulated by a compare-exchange loop), the
    last also at the huge param `far`. docs/IR.md: out of range reads 0 and does nothing."""
    k = ProgramBuilder("trusted_wild", 8)
    ix, a = k.buffer("ix", U32), k.buffer("a", U32)
    far = k.param("far", U32)
    o = k.buffer("o", U32, "read_write", count=96)
    s = k.buffer("s", U32, "read_write", count=8)
    acc = k.buffer("acc", U32, "read_write", count=4)
    fa = k.buffer("fa", F32, "read_write", count=2)
    w = k.shared("w", U32, 8)
    wa = k.shared("wa", U32, 4)
    wf = k.shared("wf", F32, 4)
    t = k.let(k.local_index())
    j = k.let(ix[t])
    w[t] = t * 3
    wa[t & 3] = 0
    wf[t & 3] = 0.0
    k.barrier()
    with k.for_range(0, 2) as r:
        base = k.let(t * 12)
        o[base] = o[base] + a[j] + a[far]  # (o is read back: its own elements)
        s[j] = t + 100 * r  # stores at j: only 0..7 land (distinct j, so no race)
        w[j] = w[j] + 1 + r
        o[base + 1] = acc.atomic_add(j, 1 + t)
        o[base + 2] = wa.atomic_max(j, t + 5)
        o[base + 3] = wf.atomic_add(j, 1.5).bitcast(U32)
        o[base + 4] = fa.atomic_add(far, 2.0).bitcast(U32)
        o[base + 5] = acc.atomic_compare_exchange(j, 0, 7 + r)
        k.barrier()
        q = k.let((t & 1) * 4)  # in range by its bounds: a vec4 run of w
        got = [k.let(w[q + e]) for e in range(4)]
        o[base + 6] = got[0] + got[1] * 3 + got[2] * 5 + got[3] * 7
        o[base + 7] = w[j] + w[far] + wa[j] + wf[j].bitcast(U32)
        k.barrier()
    o[t * 12 + 8] = s[t]
    return k.build()


_IX = np.array([0, 5, 7, 8, 2**31 - 1, 2**31, 2**32 - 2, 2**32 - 1], np.uint32)


@needs_wgpu
@pytest.mark.parametrize("far", [4, 2**31, 2**32 - 1])
def test_out_of_range_accesses_agree_in_a_module_without_checks(
        wgpu: BaseBackend, reference: BaseBackend, far: int) -> None:
    p = _wild_program()
    c = wgpu.compile(p)
    assert c.bounds_checks is False and "vec4<u32>" in c.source
    inputs = {"ix": _IX, "a": np.arange(1, 7, dtype=np.uint32),
              "o": np.zeros(96, np.uint32), "s": np.zeros(8, np.uint32),
              "acc": np.array([0, 1, 2, 3], np.uint32), "fa": np.zeros(2, np.float32)}
    cfg = DispatchConfig(grid=(1, 1, 1), params={"far": far})
    got = check_against_reference(p, inputs, cfg, [wgpu], reference, EXACT)
    want = got[reference.id]
    # (the reference's reading: a[j] past a's 6 elements is 0, so invocation 2 (j = 7) adds
    # only a[far], twice; stores past s did nothing)
    at_far = 5 if far == 4 else 0
    assert want["o"][2 * 12] == 2 * at_far and want["o"][0] == 2 * (1 + at_far)
    assert want["s"][[0, 5, 7]].tolist() == [100, 101, 102] and want["s"][1] == 0


@needs_wgpu
def test_the_lowering_memory_edges_agree_in_a_module_without_checks(
        wgpu: BaseBackend, reference: BaseBackend) -> None:
    p = memory_program()
    assert wgpu.compile(p).bounds_checks is False
    inputs = {"a": MEM_A, "f": MEM_F, "acc": np.array([0, 7, 0, 2], np.uint32)}
    check_against_reference(p, inputs, DispatchConfig(grid=(1, 1, 1)), [wgpu], reference,
                            EXACT)


def _matmul_bits(b: BaseBackend) -> np.ndarray:
    p, inputs, cfg = _matmul_case()
    return b.dispatch(p, inputs, cfg)["c"]


@needs_wgpu
def test_the_switch_keeps_every_module_checked(wgpu: BaseBackend,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    checked = _open_wgpu(monkeypatch, "1")
    try:
        assert checked.capabilities().details["shader_bounds_checks"] == (
            f"on ({trusted.ENV_BOUNDS_CHECKS}=1)")
        assert checked.compile(_matmul_case()[0]).bounds_checks
        assert checked.compile(_wild_program()).bounds_checks
        assert_agree(_matmul_bits(checked), _matmul_bits(wgpu), EXACT, "matmul C")
    finally:
        checked.close()


@needs_wgpu
def test_without_the_call_every_module_is_checked(wgpu: BaseBackend,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """Another wgpu-native, without wgpuDeviceCreateShaderModuleTrusted: checked modules, the
    same bits (a performance detail only)."""
    monkeypatch.setattr(trusted, "_SYMBOL", "wgpuDeviceCreateShaderModuleNotThere")
    plain = _open_wgpu(monkeypatch, None)
    try:
        assert plain.capabilities().details["shader_bounds_checks"] == (
            "on (this wgpu-native has no wgpuDeviceCreateShaderModuleNotThere)")
        assert plain.compile(_matmul_case()[0]).bounds_checks
        assert_agree(_matmul_bits(plain), _matmul_bits(wgpu), EXACT, "matmul C")
    finally:
        plain.close()


@needs_wgpu
def test_naga_still_rejects_bad_wgsl_in_a_module_without_checks(
        wgpu: BaseBackend, monkeypatch: pytest.MonkeyPatch) -> None:
    """The call without checks reports naga's errors as the ordinary one does."""
    real = wgsl.generate

    def broken(*a: Any, **kw: Any) -> wgsl.WgslModule:
        mod = real(*a, **kw)
        assert mod.unproven_access is None  # (so it goes through the trusted call)
        return dataclasses.replace(mod, source=mod.source.replace("fn main(", "fn main(((", 1))

    k = ProgramBuilder("trusted_but_broken", 4)  # (a Program no other test compiled)
    o = k.buffer("o", U32, "write", count=4)
    with k.for_range(0, 4) as r:
        o[r] = r
    monkeypatch.setattr(wgsl, "generate", broken)
    with pytest.raises(vyre.CompileError) as info:
        wgpu.compile(k.build())
    assert "fn main(((" in info.value.source and info.value.log
    monkeypatch.setattr(wgsl, "generate", real)
    assert wgpu.compile(k.build()).bounds_checks is False


@needs_wgpu
def test_the_ab_script_compares_both_sides() -> None:
    """scripts/wgpu_bounds_checks_ab.py (the H100 measurement) at the quick sizes: the
    sort's programs without checks on the trusted side only (the proven ones: not all),
    none on the checked side, the same bits. (The sort, not the matmul: lavapipe takes
    some 35 s to compile the tuned matmul shader, once per side; the matmul's own
    program is test_the_matmul_goes_without_checks_and_keeps_its_bits's.)"""
    script = Path(__file__).resolve().parents[1] / "scripts" / "wgpu_bounds_checks_ab.py"
    r = subprocess.run([sys.executable, str(script), "--quick", "--workloads", "sort",
                        "--repeat", "2", "--no-cuda"], capture_output=True, text=True,
                       timeout=600, env={**os.environ, trusted.ENV_BOUNDS_CHECKS: "1"})
    assert r.returncode == 0, r.stdout + r.stderr
    row = next(line for line in r.stdout.splitlines() if line.startswith("sort"))
    trusted_side, checked_side, bits = row.split()[5:8]  # "4/5 0/5 same": unchecked/all
    (t_off, t_all), (c_off, c_all) = trusted_side.split("/"), checked_side.split("/")
    assert 0 < int(t_off) < int(t_all) and int(c_off) == 0 and c_all == t_all, r.stdout
    assert bits == "same", r.stdout
    assert f"on ({trusted.ENV_BOUNDS_CHECKS}=1)" in r.stdout and PROVEN in r.stdout
