"""The WGSL printer's compact spellings (smaller shaders for the driver's compiler, the
wgpu cold compile of issue 17), read off the public generate() output, each program also
run on every backend against the reference:
- the entry point declares only the builtins the code reads;
- an integer expression of builtins and constants (the global id) is printed once, as a
  `let` at the top of the entry point;
- a load whose index nothing proves in range is an eager `select` in a Program without
  loops, and a local set under an `if` in one with loops (render.py STRAIGHT_TRAITS).
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from vyre.backends.reference.runtime import ReferenceBackend
from vyre.backends.wgpu.render import generate
from vyre.builder import ProgramBuilder
from vyre.config import DispatchConfig
from vyre.ir import nodes as N
from vyre.ir.types import ScalarType
from vyre.tools.testing import EXACT, assert_agree

f32, u32 = ScalarType.F32, ScalarType.U32
WG = 64


def _locals() -> N.Program:
    k = ProgramBuilder("locals", workgroup_size=WG)
    x = k.buffer("x", f32)
    y = k.buffer("y", f32, "read_write")
    i = k.global_linear_id()
    with k.if_(i < y.length()):
        loaded = k.let(x[i] * 2.0, name="loaded")
        const = k.let(1.5, name="const")
        acc = k.let(y[i], name="acc")
        acc.set(acc + loaded + const)
        y[i] = acc
    return k.build()


def _local_index_only() -> N.Program:
    k = ProgramBuilder("lidx", workgroup_size=WG)
    y = k.buffer("y", u32, "read_write")
    li = k.local_index()
    with k.if_(li < y.length()):
        y[li] = y[li] + li
    return k.build()


def test_entry_point_declares_only_the_builtins_read() -> None:
    src = generate(_locals()).source
    assert re.findall(r"@builtin\((\w+)\)", src) == ["global_invocation_id", "num_workgroups"]
    src = generate(_local_index_only()).source
    assert re.findall(r"@builtin\((\w+)\)", src) == ["local_invocation_index"]


def test_global_id_is_printed_once() -> None:
    src = generate(_locals()).source
    gid = "(vy_gid.x + (vy_gid.y * (vy_nwg.x * 64u)))"
    assert src.count(gid) == 1 and f"let vy_x0: u32 = {gid};" in src
    assert "vy_gid" not in src.split(f"let vy_x0: u32 = {gid};")[1]


def _with_loop() -> N.Program:
    k = ProgramBuilder("looped", workgroup_size=WG)
    x = k.buffer("x", f32)
    y = k.buffer("y", f32, "read_write")
    i = k.global_linear_id()
    with k.if_(i < y.length()):
        acc = k.let(0.0, name="acc")
        with k.for_range(0, 3) as j:
            acc.set(acc + x[i + j])
        y[i] = acc
    return k.build()


def test_guarded_loads_are_selects_only_without_loops() -> None:
    straight = generate(_locals()).source
    assert "select(bitcast<f32>(vy_u.vy_zero2), b_x[vy_x0], (vy_x0 < vy_u.n_0))" in straight
    assert straight.count("if (") == 1  # only the program's own test
    looped = generate(_with_loop()).source
    assert "select(" not in looped
    assert re.search(r"if \(\(\(vy_x0 \+ v_j\w*\) < vy_u\.n_0\)\) \{\n\s*v_lw\w* = b_x\[", looped)


_REF = ReferenceBackend()


def teardown_module() -> None:
    _REF.close()


def test_compact_programs_agree_on_every_backend(backend: Any) -> None:
    rng = np.random.default_rng(3)
    for p, inputs, n in (
        (_locals(), {"x": rng.standard_normal(70).astype(np.float32),
                     "y": rng.standard_normal(90).astype(np.float32)}, 100),
        # one workgroup: local indices repeat across workgroups
        (_local_index_only(), {"y": rng.integers(0, 99, 40).astype(np.uint32)}, WG),
        (_with_loop(), {"x": rng.standard_normal(70).astype(np.float32),
                        "y": rng.standard_normal(90).astype(np.float32)}, 100),
    ):
        cfg = DispatchConfig.for_elements(n, WG)
        want = _REF.dispatch(p, inputs, cfg)
        got = backend.dispatch(p, inputs, cfg)
        for buf, w in want.items():
            assert_agree(got[buf], w, EXACT, f"{backend.id} {p.name} {buf}")
