"""Replays every saved fuzz case (tests/regressions/*.json) on every available backend.

A case is a Program in the wire format plus its exact inputs, grid and params (written by
vyre.fuzz.save_case when differential fuzzing found a disagreement). Each must now agree
with the reference under vyre.testing's rules. This file must never skip a case silently:
a case that no longer loads (e.g. after a wire-format change) fails with the reason.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import vyre
from vyre import features as F
from vyre.backend import BaseBackend
from vyre.ir import nodes as IR
from vyre.ir.analysis import walk_all_exprs
from vyre.tools import fuzz

CASES = sorted(fuzz.regressions_dir().glob("*.json"))
BACKENDS = [a.name for a in vyre.available_backends() if a.available]


@pytest.fixture(scope="module")
def expected() -> dict[Path, dict[str, dict[str, np.ndarray]]]:
    """The reference's results per case, computed once for every backend (loops of 70,000
    iterations take the reference seconds)."""
    return {}


@pytest.fixture(scope="module")
def instances() -> Iterator[dict[str, BaseBackend]]:
    made = {name: vyre.get_backend(name) for name in BACKENDS}
    yield made
    for b in made.values():
        b.close()


def test_regressions_directory_exists() -> None:
    assert fuzz.regressions_dir().is_dir()


def _calls(program: Any) -> set[tuple[str, str]]:
    """(type name, function) of every Call in `program`."""
    return {(str(e.ty), e.fn) for e in walk_all_exprs(program) if isinstance(e, IR.Call)}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("path", CASES, ids=[p.stem for p in CASES])
def test_saved_case_agrees(path: Path, backend: str, instances: dict[str, BaseBackend],
                           expected: dict[Path, dict[str, dict[str, np.ndarray]]]) -> None:
    case = fuzz.load_case(path)
    ref = instances["reference"]
    other = instances[backend]
    if backend != "reference":
        missing = sorted(case.program.required_features - other.capabilities().features)
        if missing:
            pytest.skip(f"{backend} lacks {missing}")
        refused = sorted(f"{t} {fn}" for t, fn in F.refused_calls(other.capabilities().details)
                         if (t, fn) in _calls(case.program))
        if refused:  # a probed capability limit the backend states (docs/IR.md)
            pytest.skip(f"{backend} refuses {refused} (capabilities().details['refused_calls'])")
    cached = expected.setdefault(path, {})
    bad = fuzz.check_case(case, ref, [other] if other is not ref else [], cached)
    if other is ref:  # the oracle itself: it must run the case, and deterministically
        again = ref.dispatch(case.program, case.inputs, case.config)
        for k, v in cached[ref.id].items():
            assert v.tobytes() == again[k].tobytes(), f"reference is not deterministic on {k}"
    assert not bad, f"{path.name} (found as: {case.note[:300]}): " + "; ".join(map(str, bad))
