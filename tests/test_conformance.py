"""The conformance suite: every case of vyre.tools.conformance on every registered backend
(the `backend` fixture of conftest.py: reference, wgpu, cuda and any installed through the
`vyre.backends` entry point, or only the one named by `pytest --backend NAME`), each output
compared with the reference under docs/IR.md's rules, and the reference's outputs with the
values docs/IR.md defines (computed without any backend, vyre.tools.conformance_exact). A
backend that lacks a feature a case needs is skipped with that reason; nothing else is."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from vyre import ScalarType
from vyre.backend import BaseBackend
from vyre.backends.reference import numeric
from vyre.tools.conformance import CASES, check_case, unsupported_reason
from vyre.tools.conformance_exact import atomic_chain


@pytest.mark.parametrize("name", sorted(CASES))
def test_agrees_with_reference(name: str, backend: BaseBackend, reference: BaseBackend) -> None:
    case = CASES[name]
    why = unsupported_reason(case, backend)
    if why is not None:
        pytest.skip(why)
    check_case(case, backend, reference)


@pytest.mark.parametrize(("name", "op"), [("ir_int_i32", "xor"), ("ir_int_u64", "max"),
                                          ("ir_float_f32", "div"), ("builtins", "mul")])
def test_a_wrong_reference_fails_the_table(name: str, op: str, reference: BaseBackend,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """The table checks the reference too, against docs/IR.md's values: one operator made
    wrong in it (the result's lowest bit flipped) fails its case."""
    right = numeric._binary

    def wrong(o: str, a: Any, b: Any, ty: ScalarType, operand_ty: ScalarType) -> Any:
        r = right(o, a, b, ty, operand_ty)
        if o != op:
            return r
        bits = np.asarray(r).view(f"u{np.asarray(r).dtype.itemsize}")
        return (bits ^ np.ones_like(bits)).view(np.asarray(r).dtype)

    monkeypatch.setattr(numeric, "_binary", wrong)
    with pytest.raises(AssertionError, match=r"against docs/IR\.md"):
        check_case(CASES[name], reference, reference)


def test_atomic_chain_accepts_every_order_and_nothing_else() -> None:
    """The invariant for order-dependent atomic results: some lane order explains them."""
    def add(a: int, b: int) -> int:
        return a + b

    assert atomic_chain([0], [0, 0], [1, 2], [0, 1], [3], add) is None  # lane 0 first
    assert atomic_chain([0], [0, 0], [1, 2], [2, 0], [3], add) is None  # lane 1 first
    assert atomic_chain([0], [0, 0], [1, 2], [0, 0], [3], add) is not None  # both saw 0
    assert atomic_chain([0], [0, 0], [1, 2], [0, 1], [4], add) is not None  # wrong final
    assert atomic_chain([0], [0, 5], [1, 2], [0, 0], [1], add) is None  # lane 1 out of range
    assert atomic_chain([0], [0, 5], [1, 2], [0, 7], [1], add) is not None  # ... must read 0
