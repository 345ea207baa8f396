"""The demo cases: they run on every available backend and agree with the reference within
each case's stated tolerance (exact for all of them)."""

from __future__ import annotations

import pytest

import vyre
from vyre.backend import BaseBackend
from vyre.programs.demo import demo_cases
from vyre.tools.testing import assert_agree

NAMES = [a.name for a in vyre.available_backends() if a.available and a.name != "reference"]


def test_demo_cases_shape() -> None:
    cases = demo_cases()
    assert len(cases) == 6
    assert len({c.name for c in cases}) == 6
    for c in cases:
        for kind in ("reference", "wgpu", "cuda"):
            assert c.tolerance(kind).exact


def test_demo_on_reference(reference: BaseBackend) -> None:
    """Every case runs on the oracle and gives what NumPy says (determinism: other files)."""
    out = {c.name.split()[0]: c.run(reference) for c in demo_cases()}
    assert all(out.values())
    keys = out["radix"]["keys"]
    assert (keys[1:] >= keys[:-1]).all()
    assert out["histogram"]["bins"].sum() <= 1 << 20
    inc = out["prefix"]["inclusive_u32"]
    assert inc.size == 1 << 20 and (inc[1:] >= inc[:-1]).all()


@pytest.mark.parametrize("name", NAMES)
def test_demo_agrees(name: str, backends: dict[str, BaseBackend],
                     reference: BaseBackend) -> None:
    b = backends[name]
    for c in demo_cases():
        exp = c.run(reference)
        got = c.run(b)
        for out in exp:
            assert_agree(got[out], exp[out], c.tolerance(b.kind), f"{c.name} {out} on {b.id}")
