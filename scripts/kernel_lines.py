"""Count the lines of the six kernels of tests/kernels_six.py, decorated vs builder.

A line counts if it holds code: blank lines, comment-only lines and docstrings do not; a
signature split over several lines counts as written. Run from the repository root:
    python scripts/kernel_lines.py
"""

from __future__ import annotations

import inspect
import io
import sys
import tokenize
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
import kernels_six as K


def code_lines(obj: Any) -> int:
    fn = getattr(obj, "fn", obj)  # a vyre.Kernel wraps the function
    src = inspect.getsource(fn)
    lines: set[int] = set()
    prev = tokenize.INDENT
    for tok in tokenize.generate_tokens(io.StringIO(src).readline):
        if tok.type == tokenize.STRING and prev in (tokenize.INDENT, tokenize.NEWLINE):
            prev = tok.type  # a docstring statement
            continue
        if tok.type not in (tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT,
                            tokenize.DEDENT, tokenize.ENDMARKER):
            lines.update(range(tok.start[0], tok.end[0] + 1))
        prev = tok.type
    return len(lines)  # getsource includes the decorator line


def main() -> None:
    print(f"{'kernel':<12} {'decorated':>9} {'builder':>8}")
    for name, (dec, bld) in K.PAIRS.items():
        decs = dec if isinstance(dec, tuple) else (dec,)
        blds = bld if isinstance(bld, tuple) else (bld,)
        d = sum(code_lines(x) for x in decs)
        b = sum(code_lines(x) for x in blds)
        print(f"{name:<12} {d:>9} {b:>8}")


if __name__ == "__main__":
    main()
