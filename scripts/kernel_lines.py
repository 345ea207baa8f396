"""Count the lines of the six kernels of tests/kernels_six.py, decorated vs builder, next to
the same kernels written for NVIDIA Warp (WARP below: written for this comparison from
Warp's documentation and not run here, Warp is not installed; where Warp has a tile
primitive for the job (reduction, scan, matmul) the Warp version uses it, and its histogram
has no workgroup-memory privatisation, Warp's SIMT kernels having no shared memory).

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


def code_lines(obj: Any) -> int:
    fn = getattr(obj, "fn", obj)  # a vyre.Kernel wraps the function
    src = fn if isinstance(fn, str) else inspect.getsource(fn)
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
    print(f"{'kernel':<12} {'decorated':>9} {'builder':>8} {'Warp':>5}")
    for name, (dec, bld) in K.PAIRS.items():
        decs = dec if isinstance(dec, tuple) else (dec,)
        blds = bld if isinstance(bld, tuple) else (bld,)
        d = sum(code_lines(x) for x in decs)
        b = sum(code_lines(x) for x in blds)
        print(f"{name:<12} {d:>9} {b:>8} {code_lines(WARP[name]):>5}")


if __name__ == "__main__":
    main()
