"""The conformance suite: every case of vyre.tools.conformance on every registered backend
(the `backend` fixture of conftest.py: reference, wgpu, cuda and any installed through the
`vyre.backends` entry point, or only the one named by `pytest --backend NAME`), each output
compared with the reference under docs/IR.md's rules. A backend that lacks a feature a case
needs is skipped with that reason; nothing else is."""

from __future__ import annotations

import pytest

from vyre.backend import BaseBackend
from vyre.tools.conformance import CASES, check_case, unsupported_reason


@pytest.mark.parametrize("name", sorted(CASES))
def test_agrees_with_reference(name: str, backend: BaseBackend, reference: BaseBackend) -> None:
    case = CASES[name]
    why = unsupported_reason(case, backend)
    if why is not None:
        pytest.skip(why)
    check_case(case, backend, reference)
