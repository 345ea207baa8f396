"""The library programs rewritten with `@vyre.kernel` (elementwise saxpy / axpby / fill /
iota / gather / scatter, the 2-D stencil) give bit-identical results to their former
builder versions (tests/programs_builder.py) on every backend, for every element type the
backend supports."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from vyre import DispatchConfig, ScalarType, f16, f32, f64, i32, i64, u32
from vyre.backend import BaseBackend
from vyre.ir.nodes import Program
from vyre.programs import elementwise as E
from vyre.programs import stencil as S
from vyre.tools.testing import random_array

sys.path.insert(0, str(Path(__file__).resolve().parent))
import programs_builder as B

N = 1000
WG = 64


def _inputs(prog: Program, rng: np.random.Generator) -> dict[str, object]:
    out: dict[str, object] = {}
    for d in prog.buffers:
        if d.name == "index":
            out[d.name] = rng.permutation(N).astype(np.uint32)
        elif d.access == "write":
            out[d.name] = N
        else:
            out[d.name] = random_array(rng, d.ty, N)
    return out


def _params(prog: Program, rng: np.random.Generator) -> dict[str, object]:
    vals: dict[str, object] = {"n": N - 3}
    for p in prog.params:
        if p.name != "n":
            vals[p.name] = random_array(rng, p.ty, 1)[0].item()
    return vals


def _same_run(backend: BaseBackend, new: Program, old: Program, params: dict[str, object],
              inputs: dict[str, object], cfg: DispatchConfig) -> None:
    assert [(d.name, d.ty, d.access) for d in new.buffers] == \
        [(d.name, d.ty, d.access) for d in old.buffers]
    assert [(p.name, p.ty) for p in new.params] == [(p.name, p.ty) for p in old.params]
    got = backend.dispatch(new, inputs, cfg)
    want = backend.dispatch(old, inputs, cfg)
    assert got.keys() == want.keys()
    for k in got:
        assert got[k].tobytes() == want[k].tobytes(), k


@pytest.mark.parametrize("ty", [f32, i32, u32, f16, f64, i64], ids=str)
@pytest.mark.parametrize("name", ["saxpy", "axpby", "fill", "iota", "gather", "scatter"])
def test_elementwise_rewrite_is_bit_identical(backend: BaseBackend, name: str,
                                              ty: ScalarType) -> None:
    new: Program = getattr(E, name)(ty, WG)
    old: Program = getattr(B, name)(ty, WG)
    if ty.feature and not backend.supports(ty.feature):
        pytest.skip(f"{backend.id} does not report {ty.feature!r} (vyre probe says why)")
    rng = np.random.default_rng(11)
    params = _params(new, rng)
    cfg = DispatchConfig.for_elements(N, WG, params=params)
    _same_run(backend, new, old, params, _inputs(new, rng), cfg)


@pytest.mark.parametrize("boundary", ["clamp", "zero"])
def test_stencil_rewrite_is_bit_identical(backend: BaseBackend, boundary: str) -> None:
    h, w, tile = 23, 41, 8
    new, old = S.stencil_program(boundary, tile), B.stencil(boundary, tile)
    assert new.workgroup_size == old.workgroup_size
    u = np.random.default_rng(12).standard_normal((h, w)).astype(np.float32)
    cfg = DispatchConfig.for_shape((w, h), (tile, tile), params={
        "H": h, "W": w, **dict(zip(("wc", "wn", "ws", "ww", "we"), S.BLUR))})
    _same_run(backend, new, old, {}, {"u": u, "out": h * w}, cfg)
