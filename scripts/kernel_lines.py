"""Count the lines of the six kernels of tests/kernels_six.py, decorated (before and after
the plain style) and with the builder, next to the same kernels written for NVIDIA Warp (WARP below: written for this comparison from
Warp's documentation and not run here, Warp is not installed; where Warp has a tile
primitive for the job (reduction, scan, matmul) the Warp version uses it, and its histogram
has no workgroup-memory privatisation, Warp's SIMT kernels having no shared memory).

A line counts if it holds code: blank lines, comment-only lines and docstrings do not; a
signature split over several lines counts as written; "tokens" counts Python tokens on
those lines (names, operators, brackets), which shows what the plain style removed within a
line (`with vyre.if_((x < W) & (y < H)):` -> `if x < W and y < H:`). The "before" columns
are the decorated kernels as they were written before `@vyre.kernel` compiled plain Python
(`with vyre.if_`, `vyre.let`, `vyre.select`: tests/kernels_six.py at BEFORE_REV, read from
git; the recorded BEFORE figures where the checkout has no history). Run from the
repository root:
    python scripts/kernel_lines.py

On this tree it prints (docs/guide.md, section 9, quotes it):
    kernel       before  plain tokens before->plain  builder  Warp
    stencil           9      9             198->185       13     9
    reduction        14     14             131->121       17     5
    scan             16     16             166->151       19     5
    lu_solver        10     10             201->187       16    11
    histogram        18     15             192->169       21     5
    matmul           15     15             276->246       19     9
"""

from __future__ import annotations

import importlib.util
import inspect
import io
import subprocess
import sys
import tempfile
import tokenize
from pathlib import Path
from types import ModuleType
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
import kernels_six as K

ROOT = Path(__file__).resolve().parent.parent

# tests/kernels_six.py before the plain style (the commit that rewrote its decorated kernels
# is c02e31d), and what it gives: (lines, tokens) per kernel, for checkouts without history
BEFORE_REV = "c02e31d^"
BEFORE = {"stencil": (9, 198), "reduction": (14, 131), "scan": (16, 166),
          "lu_solver": (10, 201), "histogram": (18, 192), "matmul": (15, 276)}

WARP = {
    "stencil": """
@wp.kernel
def stencil(u: wp.array2d(dtype=float), out: wp.array2d(dtype=float)):
    y, x = wp.tid()
    h, w = u.shape[0], u.shape[1]
    north = u[wp.max(y - 1, 0), x]
    south = u[wp.min(y + 1, h - 1), x]
    west = u[y, wp.max(x - 1, 0)]
    east = u[y, wp.min(x + 1, w - 1)]
    out[y, x] = -4.0 * u[y, x] + north + south + west + east
""",
    "reduction": """
@wp.kernel
def block_sum(x: wp.array(dtype=float), partial: wp.array(dtype=float)):
    i = wp.tid()
    t = wp.tile_load(x, shape=WG, offset=i * WG)
    wp.tile_store(partial, wp.tile_sum(t), offset=i)
""",
    "scan": """
@wp.kernel
def block_scan(x: wp.array(dtype=wp.uint32), y: wp.array(dtype=wp.uint32)):
    i = wp.tid()
    t = wp.tile_load(x, shape=WG, offset=i * WG)
    wp.tile_store(y, wp.tile_scan_inclusive(t), offset=i * WG)
""",
    "lu_solver": """
@wp.kernel
def lu_update(a: wp.array2d(dtype=float), k: int):
    i, j = wp.tid()
    i, j = i + k + 1, j + k + 1
    if i < a.shape[0] and j < a.shape[0]:
        a[i, j] = a[i, j] - (a[i, k] / a[k, k]) * a[k, j]

@wp.kernel
def lu_scale(a: wp.array2d(dtype=float), k: int):
    i = wp.tid() + k + 1
    if i < a.shape[0]:
        a[i, k] = a[i, k] / a[k, k]
""",
    "histogram": """
@wp.kernel
def histogram(src: wp.array(dtype=wp.uint32), bins: wp.array(dtype=wp.uint32), nbins: int):
    v = src[wp.tid()]
    if v < wp.uint32(nbins):
        wp.atomic_add(bins, int(v), wp.uint32(1))
""",
    "matmul": """
@wp.kernel
def matmul(a: wp.array2d(dtype=float), b: wp.array2d(dtype=float), c: wp.array2d(dtype=float)):
    i, j = wp.tid()
    acc = wp.tile_zeros(shape=(T, T), dtype=float)
    for k in range(a.shape[1] // T):
        ta = wp.tile_load(a, shape=(T, T), offset=(i * T, k * T))
        tb = wp.tile_load(b, shape=(T, T), offset=(k * T, j * T))
        wp.tile_matmul(ta, tb, acc)
    wp.tile_store(c, acc, offset=(i * T, j * T))
""",
}


def _code_tokens(obj: Any) -> list[tokenize.TokenInfo]:
    """The tokens of a kernel's source that are code (not comments, blank lines, layout or
    a docstring)."""
    fn = getattr(obj, "fn", obj)  # a vyre.Kernel wraps the function
    src = fn if isinstance(fn, str) else inspect.getsource(fn)
    out = []
    prev = tokenize.INDENT
    for tok in tokenize.generate_tokens(io.StringIO(src).readline):
        if tok.type == tokenize.STRING and prev in (tokenize.INDENT, tokenize.NEWLINE):
            prev = tok.type  # a docstring statement
            continue
        if tok.type not in (tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT,
                            tokenize.DEDENT, tokenize.ENDMARKER):
            out.append(tok)
        prev = tok.type
    return out


def code_lines(obj: Any) -> int:
    lines: set[int] = set()
    for tok in _code_tokens(obj):
        lines.update(range(tok.start[0], tok.end[0] + 1))
    return len(lines)  # getsource includes the decorator line


def _counts(objs: Any) -> tuple[int, int]:
    """(lines, tokens) of one kernel or a tuple of them."""
    objs = objs if isinstance(objs, tuple) else (objs,)
    return (sum(code_lines(x) for x in objs), sum(len(_code_tokens(x)) for x in objs))


def _module_at(rev: str) -> ModuleType | None:
    """tests/kernels_six.py as it was at git revision `rev` (None without git history)."""
    try:
        src = subprocess.run(["git", "show", f"{rev}:tests/kernels_six.py"], cwd=ROOT,
                             capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    path = Path(tempfile.mkdtemp()) / "kernels_six_before.py"
    path.write_text(src)  # a file: inspect.getsource reads the kernels' lines from it
    spec = importlib.util.spec_from_file_location("kernels_six_before", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def before_counts() -> dict[str, tuple[int, int]]:
    old = _module_at(BEFORE_REV)
    if old is None:
        return BEFORE
    return {name: _counts(dec) for name, (dec, _bld) in old.PAIRS.items()}


def main() -> None:
    before = before_counts()
    print(f"{'kernel':<12} {'before':>6} {'plain':>6} {'tokens before->plain':>20} "
          f"{'builder':>8} {'Warp':>5}")
    for name, (dec, bld) in K.PAIRS.items():
        lines, tokens = _counts(dec)
        b_lines, b_tokens = before[name]
        print(f"{name:<12} {b_lines:>6} {lines:>6} {f'{b_tokens}->{tokens}':>20} "
              f"{_counts(bld)[0]:>8} {code_lines(WARP[name]):>5}")


if __name__ == "__main__":
    main()
