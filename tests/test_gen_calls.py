"""The kernel's functions come from the op registry: vyre/builder/calls.py and
calls_approx.py are what `python -m vyre.tools.gen_calls --write` prints from
vyre.ir.ops.CALL_OPS, so a new function is its record (plus its definition and oracle:
vyre/ir/ops.py's docstring) and no edit of vyre.builder, vyre or vyre.approx."""

from __future__ import annotations

import inspect

import pytest

import vyre
from vyre.builder import functions
from vyre.ir import ops
from vyre.tools import gen_calls


def test_generated_files_are_current() -> None:
    stale = gen_calls.stale()
    assert not stale, (f"{[str(p) for p in stale]} differ from the op registry: run "
                       f"`{gen_calls.COMMAND}`")


def test_every_registry_function_is_exported_once() -> None:
    for op in ops.CALL_OPS:
        if op.name.startswith("approx_"):
            assert getattr(vyre.approx, op.py_name).__module__ == "vyre.builder.calls_approx"
            continue
        helper = getattr(vyre.builder, op.py_name)
        assert helper is getattr(vyre, op.py_name), op.name
        hand = inspect.getmodule(helper) is functions
        assert hand != (f"def {op.py_name}(" in gen_calls.exact_module()), op.name
        assert helper.__doc__, op.name
    assert len(vyre.__all__) == len(set(vyre.__all__))
    assert len(vyre.builder.__all__) == len(set(vyre.builder.__all__))


def test_generated_functions_keep_the_public_names_and_signatures() -> None:
    assert [vyre.abs_, vyre.pow_, vyre.round_] == [vyre.builder.abs_, vyre.builder.pow_,
                                                   vyre.builder.round_]
    assert not hasattr(vyre, "abs") and not hasattr(vyre, "pow")
    assert str(inspect.signature(vyre.atan2)) == "(y: 'Any', x: 'Any') -> 'Value'"
    assert str(inspect.signature(vyre.clamp)) == "(x: 'Any', lo: 'Any', hi: 'Any') -> 'Value'"
    assert str(inspect.signature(vyre.sqrt)) == "(x: 'Value') -> 'Value'"
    assert str(inspect.signature(vyre.dot4_i8)) == "(a: 'Any', b: 'Any', acc: 'Any' = 0) -> 'Value'"


def test_a_new_record_is_a_new_function(monkeypatch: pytest.MonkeyPatch) -> None:
    """The dry run of adding a function: one more CallOp, and the generated module has its
    typed, documented function in `__all__` (which vyre and vyre.builder extend theirs by)."""
    new = ops.CallOp("dummy_fn", 2, doc="A function for this test.", params=("p", "q"))
    monkeypatch.setattr(ops, "CALL_OPS", (*ops.CALL_OPS, new))
    text = gen_calls.exact_module()
    assert ('def dummy_fn(p: Any, q: Any) -> Value:\n    """A function for this test."""\n'
            '    return _fn("dummy_fn", p, q)\n') in text
    namespace: dict[str, object] = {"__name__": "vyre.builder._dry_run",
                                    "__package__": "vyre.builder"}
    exec(compile(text, "calls.py", "exec"), namespace)
    assert "dummy_fn" in namespace["__all__"]  # type: ignore[operator]
