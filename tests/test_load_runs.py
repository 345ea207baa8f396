"""Runs of loads of consecutive elements (x_l = buf[base + c + l]), which the CUDA printer
reads as one vector when aligned and in bounds: every backend must give the reference's
values for aligned, misaligned, partly and wholly out-of-range runs, and for statement
sequences that look like a run but are not one (a target the base reads, a gap)."""

from __future__ import annotations

import numpy as np
import pytest

from vyre import DispatchConfig, ScalarType
from vyre.backend import BaseBackend
from vyre.builder import ProgramBuilder
from vyre.ir.nodes import Program

ST = ScalarType
N_IN = 45  # not a multiple of 4: the last runs reach past the end
INVOCATIONS = 16


def _runs_program(ty: ScalarType, lanes: int) -> Program:
    """Invocation i reads `lanes` consecutive elements from base i*3 (aligned every 4th
    invocation) and from base i*3 + lanes (a run whose constant offset is not 0); then
    `lanes` u32 loads whose base reads the first one's target (not a run: the later ones
    must see the new value), and two loads with a gap between their offsets."""
    k = ProgramBuilder(f"load_runs_{ty.value}_{lanes}", workgroup_size=INVOCATIONS)
    x = k.buffer("x", ty)
    ix = k.buffer("ix", ST.U32)
    y = k.buffer("y", ty, "write")
    z = k.buffer("z", ST.U32, "write")
    i = k.global_linear_id()
    base = k.let(i * 3)
    first = [k.let(x[base + e]) for e in range(lanes)]
    second = [k.let(x[base + (lanes + e)]) for e in range(lanes)]
    gap = [k.let(x[base + 0]), k.let(x[base + 2])]
    out = [*first, *second, *gap]
    for o, v in enumerate(out):
        y[i * len(out) + o] = v
    chain = [k.let(i, name=f"c{e}") for e in range(lanes)]
    for e in range(lanes):
        chain[e].set(ix[(chain[0] & 15) + e])  # c0 changes after the first load
    for e, v in enumerate(chain):
        z[i * lanes + e] = v
    return k.build()


@pytest.mark.parametrize(("ty", "lanes"),
                         [(ST.F32, 4), (ST.U32, 4), (ST.I32, 2), (ST.F64, 2), (ST.F64, 4)])
def test_load_runs_match_reference(backend: BaseBackend, reference: BaseBackend,
                                   ty: ScalarType, lanes: int) -> None:
    if ty is ST.F64 and not backend.supports("f64"):
        pytest.skip(f"{backend.id} has no f64")
    dtype = {ST.F32: np.float32, ST.U32: np.uint32, ST.I32: np.int32, ST.F64: np.float64}[ty]
    x = (np.arange(N_IN) * 5 + 3).astype(dtype)
    ix = ((np.arange(N_IN) * 7 + 1) % 29).astype(np.uint32)
    prog = _runs_program(ty, lanes)
    inputs = {"x": x, "ix": ix, "y": INVOCATIONS * (2 * lanes + 2), "z": INVOCATIONS * lanes}
    cfg = DispatchConfig(grid=(1, 1, 1))
    got = backend.dispatch(prog, inputs, cfg)
    want = reference.dispatch(prog, inputs, cfg)
    for name in ("y", "z"):
        np.testing.assert_array_equal(got[name], want[name], err_msg=name)
    # the reference's own values: in range read x, past the end read 0
    padded = np.concatenate([x, np.zeros(64, dtype)])
    per = want["y"].reshape(INVOCATIONS, 2 * lanes + 2)
    chain = want["z"].reshape(INVOCATIONS, lanes)
    for inv in range(INVOCATIONS):
        b = inv * 3
        np.testing.assert_array_equal(per[inv, :2 * lanes], padded[b:b + 2 * lanes])
        np.testing.assert_array_equal(per[inv, 2 * lanes:], padded[[b, b + 2]])
        c0 = ix[inv & 15]
        assert list(chain[inv]) == [c0, *(ix[(c0 & 15) + e] for e in range(1, lanes))]
