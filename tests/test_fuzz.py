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

import os
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given

import vyre
from vyre.backend import BaseBackend
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


def test_fuzz_failure_is_shrunk_and_saved(tmp_path: Path) -> None:
    """A backend that disagrees is caught, and the case lands in the save directory."""

    class Wrong(BaseBackend):
        """Delegates to a reference instance but flips the low bit of every output."""

        kind = "reference"

        def __init__(self) -> None:
            super().__init__("wrong")
            self.inner = vyre.get_backend("reference")

        def capabilities(self) -> vyre.Capabilities:
            return self.inner.capabilities()

        def dispatch(self, program, inputs, config):  # type: ignore[no-untyped-def]
            out = self.inner.dispatch(program, inputs, config)
            return {k: (v.view(np.uint8) ^ 1).view(v.dtype) for k, v in out.items()}

    ref = vyre.get_backend("reference")
    with pytest.raises(AssertionError, match="shrunk case is saved"):
        fuzz.fuzz_backends(ref, [Wrong()], max_examples=20, save_dir=tmp_path)
    saved = list(os.scandir(tmp_path))
    assert len(saved) == 1
    case = fuzz.load_case(saved[0].path)
    # Shrinking leaves a small program.
    assert len(case.program.body) <= 4
    assert "wrong" in case.note
