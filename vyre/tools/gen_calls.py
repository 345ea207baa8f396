"""Generate the kernel's functions from the op registry: one typed builder function per
`CallOp` of vyre.ir.ops.CALL_OPS, named `py_name`, with its `params` and `doc`, into

- vyre/builder/calls.py: the registry's functions (vyre.sqrt, vyre.hypot, ...), which
  vyre.builder and vyre re-export through its `__all__`;
- vyre/builder/calls_approx.py: the `approx_` ones (vyre.approx.exp, ...), re-exported by
  vyre.approx.

    python -m vyre.tools.gen_calls           # exit 1, naming the stale files, if any is
    python -m vyre.tools.gen_calls --write   # rewrite them from vyre/ir/ops.py

The files are checked in (so that type checkers and editors see every signature) and
tests/test_gen_calls.py fails while one differs from what this prints. A function that
vyre/builder/functions.py writes by hand (a special signature: the packed dot products'
default accumulator) is left out. Every generated function is `_fn(name, *args)`: its
operands coerced to one type (or to the record's `signature`), errors naming the user's
line as for the hand-written ones; one operand is a `Value`, several are `Any` (a Python
number beside a kernel value takes its type).
"""

from __future__ import annotations

import argparse
import inspect
import sys
import textwrap
from pathlib import Path

from vyre.builder import functions
from vyre.ir import ops

_BUILDER = Path(__file__).resolve().parent.parent / "builder"
COMMAND = "python -m vyre.tools.gen_calls --write"

_EXACT_HEAD = '''"""The kernel's functions of the op registry (vyre.sqrt, vyre.exp, vyre.hypot, ...): one
per record of vyre.ir.ops.CALL_OPS but the `approx_` ones (calls_approx.py) and those that
vyre/builder/functions.py writes by hand, each building the IR call of its function over
kernel values and literals, typed by the IR's rules (functions.py: `_fn`).

Generated from vyre/ir/ops.py by `{command}`: do not edit
(the record's `doc` and `params` say what each function's docstring and parameters are).
"""
'''

_APPROX_HEAD = '''"""The backends' own fast float functions (vyre.approx.exp, ...): one per `approx_`
record of vyre.ir.ops.CALL_OPS, each building the IR call of its function
(vyre/builder/functions.py: `_fn`); vyre/approx.py says what they give.

Generated from vyre/ir/ops.py by `{command}`: do not edit.
"""
'''


def _hand_written() -> frozenset[str]:
    """The functions vyre/builder/functions.py defines (a registry function of one of these
    names keeps that hand-written helper)."""
    return frozenset(name for name, obj in vars(functions).items()
                     if inspect.isfunction(obj) and obj.__module__ == functions.__name__)


def _function(op: ops.CallOp) -> str:
    assert op.doc, f"{op.name}: its CallOp needs a doc (the builder function's docstring)"
    assert '"""' not in op.doc and "\\" not in op.doc, op.name
    ty = "Value" if op.arity == 1 else "Any"
    params = ", ".join(f"{p}: {ty}" for p in op.param_names)
    doc = textwrap.fill(f'"""{op.doc}"""', width=92, initial_indent="    ",
                        subsequent_indent="    ", break_on_hyphens=False)
    return (f"def {op.py_name}({params}) -> Value:\n{doc}\n"
            f'    return _fn("{op.name}", {", ".join(op.param_names)})\n')


def _module(head: str, records: list[ops.CallOp]) -> str:
    names = sorted(op.py_name for op in records)
    assert len(set(names)) == len(names), f"two functions share a name: {names}"
    uses_any = any(op.arity > 1 for op in records)
    imports = ["from __future__ import annotations", ""]
    if uses_any:
        imports += ["from typing import Any", ""]
    imports += ["from .functions import _fn", "from .values import Value"]
    body = "\n\n".join(_function(op) for op in records)
    listing = "\n".join(f'    "{n}",' for n in names)
    return (head.format(command=COMMAND) + "\n" + "\n".join(imports) + "\n\n\n" + body
            + f"\n\n__all__ = [\n{listing}\n]\n")


def exact_module() -> str:
    """vyre/builder/calls.py's text: a function per record not `approx_` and not written by
    hand, in registry order."""
    hand = _hand_written()
    return _module(_EXACT_HEAD, [op for op in ops.CALL_OPS if not op.name.startswith("approx_")
                                 and op.py_name not in hand])


def approx_module() -> str:
    """vyre/builder/calls_approx.py's text."""
    return _module(_APPROX_HEAD, [op for op in ops.CALL_OPS if op.name.startswith("approx_")])


def targets() -> dict[Path, str]:
    """Each generated file and the text it must hold."""
    return {_BUILDER / "calls.py": exact_module(), _BUILDER / "calls_approx.py": approx_module()}


def stale() -> dict[Path, str]:
    """The generated files that differ from what the registry gives now, and the text
    each must hold."""
    return {p: text for p, text in targets().items()
            if not p.exists() or p.read_text(encoding="utf-8") != text}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--write", action="store_true", help="rewrite the stale files")
    args = p.parse_args(argv)
    old = stale()
    if args.write:
        for path, text in old.items():
            path.write_text(text, encoding="utf-8")
            print(f"wrote {path}")
        return 0
    for path in old:
        print(f"{path} is stale: run `{COMMAND}`", file=sys.stderr)
    return 1 if old else 0


if __name__ == "__main__":
    sys.exit(main())
