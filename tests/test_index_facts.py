"""Index tests an enclosing condition already proves are dropped (vyre.lower.facts), and
only those: read from the public generate() output of the WGSL and CUDA printers, and
each program run on every backend against the reference with out-of-range data.

`if (i < len(y)) { y[i] = y[i] + 1 }` tests `i < len(y)` once in the generated source
(before: three times); a test of another buffer, of an index whose local is reassigned
in between, or of an index read from memory stays.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from vyre.backends.cuda import generate as cuda_generate
from vyre.backends.reference.runtime import ReferenceBackend
from vyre.backends.wgpu.render import generate as wgsl_generate
from vyre.builder import ProgramBuilder
from vyre.config import DispatchConfig
from vyre.ir import nodes as N
from vyre.ir.types import ScalarType
from vyre.tools.testing import EXACT, assert_agree

u32 = ScalarType.U32
WG = 64
N_ELEMS = 100  # 2 workgroups of 64: invocations 100..127 are past every buffer's end

Build = Callable[[ProgramBuilder, Any, Any, Any], None]  # (builder, x, y, i)


def _program(name: str, body: Build) -> N.Program:
    k = ProgramBuilder(name, workgroup_size=WG)
    x = k.buffer("x", u32)
    y = k.buffer("y", u32, "read_write")
    body(k, x, y, k.global_linear_id())
    return k.build()


def _tests(program: N.Program, buffer: str) -> tuple[int, int]:
    """How often the WGSL and the CUDA source compare against `buffer`'s length."""
    slot = [b.name for b in program.buffers].index(buffer)
    wgsl = wgsl_generate(program).source
    cuda = cuda_generate(program).source
    return (len(re.findall(rf"< vy_u\.n_{slot}\b", wgsl)),
            len(re.findall(rf"< n_{buffer}\b", cuda)))


def then_branch(k: ProgramBuilder, x: Any, y: Any, i: Any) -> None:
    with k.if_(i < y.length()):
        y[i] = y[i] + 1


def reversed_and(k: ProgramBuilder, x: Any, y: Any, i: Any) -> None:
    with k.if_((y.length() > i) & (i != 3)):
        y[i] = y[i] * 3


def else_branch(k: ProgramBuilder, x: Any, y: Any, i: Any) -> None:
    with k.if_(i >= y.length()):
        k.return_()
    with k.else_():
        y[i] = y[i] + 2


def early_exit(k: ProgramBuilder, x: Any, y: Any, i: Any) -> None:
    with k.if_(~(i < y.length())):
        k.return_()
    y[i] = y[i] + 5


def loop_bound(k: ProgramBuilder, x: Any, y: Any, i: Any) -> None:
    with k.if_(i == 0), k.for_range(0, y.length()) as j:
        y[j] = y[j] + j


def other_buffer(k: ProgramBuilder, x: Any, y: Any, i: Any) -> None:  # x is not y: x's test stays
    with k.if_(i < y.length()):
        y[i] = x[i] + 1


def reassigned(k: ProgramBuilder, x: Any, y: Any, i: Any) -> None:  # j changes after the test: the tests stay
    j = k.let(i)
    with k.if_(j < y.length()):
        j.set(j + 7)
        y[j] = y[j] + 1


def loaded_index(k: ProgramBuilder, x: Any, y: Any, i: Any) -> None:  # the index is read from memory: stays
    with k.if_(i < x.length()), k.if_(x[i] < y.length()):
        y[x[i]] = y[x[i]] + 1


def logical_or_then(k: ProgramBuilder, x: Any, y: Any, i: Any) -> None:  # `||` proves nothing in its then block
    with k.if_((i < y.length()) | (i == 120)):
        y[i] = y[i] + 1


# (program body, tests of y's length in WGSL and in CUDA: each printer keeps the user's
# own condition and spells whatever test remains)
CASES: dict[str, tuple[Build, int]] = {
    "then_branch": (then_branch, 1),
    "reversed_and": (reversed_and, 0),  # (the user's test is `len > i`)
    "else_branch": (else_branch, 0),
    "early_exit": (early_exit, 1),
    "loop_bound": (loop_bound, 0),
    "other_buffer": (other_buffer, 1),
    "reassigned": (reassigned, 3),
    "logical_or_then": (logical_or_then, 3),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_proven_index_tests_are_dropped_and_unproven_ones_kept(name: str) -> None:
    body, want = CASES[name]
    assert _tests(_program(name, body), "y") == (want, want)


def test_unproven_tests_of_another_buffer_stay() -> None:
    p = _program("other_buffer", other_buffer)
    assert _tests(p, "x") == (1, 1)  # the load of x[i] under a test of y's length
    p = _program("loaded_index", loaded_index)
    assert _tests(p, "y") == (3, 3)  # the user's and both accesses at y[x[i]]


def _inputs() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(7)
    # x distinct (no two invocations write one y[x[i]]), some past y's end
    return {"x": rng.permutation(120)[:80].astype(np.uint32),
            "y": rng.integers(0, 1000, size=90).astype(np.uint32)}


_REF = ReferenceBackend()


def teardown_module() -> None:
    _REF.close()


@pytest.mark.parametrize("name", [*sorted(CASES), "loaded_index"])
def test_index_fact_programs_agree_on_every_backend(backend: Any, name: str) -> None:
    body = CASES[name][0] if name in CASES else loaded_index
    p = _program(name, body)
    cfg = DispatchConfig.for_elements(N_ELEMS, WG)
    want = _REF.dispatch(p, _inputs(), cfg)
    got = backend.dispatch(p, _inputs(), cfg)
    for buf, w in want.items():
        assert_agree(got[buf], w, EXACT, f"{backend.id} {name} {buf}")


def test_lockstep_cuda_keeps_every_test() -> None:
    """CUDA's lockstep coarsening evaluates the values and loads of all its invocations
    ahead of the conditions around them, so there each access keeps its own index test
    (Traits.in_place is off): the y load under `if (i < len(y))` stays guarded, while the
    one-invocation kernel drops it."""
    k = ProgramBuilder("coarsened_facts", workgroup_size=256)
    y = k.buffer("y", ScalarType.F32, "read_write")
    i = k.global_linear_id()
    with k.if_(i < y.length()):
        y[i] = y[i] * 2.0
    p = k.build()
    plain = cuda_generate(p).source
    lockstep = cuda_generate(p, coarsen=4).source
    assert "lockstep:" in lockstep and "lockstep:" not in plain
    assert "< n_y) ? b_y[" not in plain and len(re.findall(r"< n_y\b", plain)) == 1
    assert lockstep.count("< n_y) ? b_y[") == 4  # each lane's guarded scalar load
