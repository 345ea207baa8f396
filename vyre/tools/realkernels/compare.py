"""Bit-for-bit comparison of a port's outputs with the C driver's: every element's bit
pattern must be equal (so -0.0 differs from +0.0, and a NaN equals only a NaN with the same
bits). This module must never tolerate a difference."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Comparison:
    compared: int
    disagreements: int
    first: str | None  # "output 0 [17]: got 1.5 (0x3fc00000), C 1.25 (0x3fa00000)"


def compare(got: list[np.ndarray], want: list[np.ndarray]) -> Comparison:
    if len(got) != len(want):
        return Comparison(0, max(len(got), len(want)),
                          f"the port returned {len(got)} arrays, the C wrote {len(want)}")
    compared = bad = 0
    first = None
    for k, (g, w) in enumerate(zip(got, want)):
        if g.dtype != w.dtype or g.shape != w.shape:
            bad += max(g.size, w.size)
            first = first or f"output {k}: got {g.dtype}{g.shape}, C {w.dtype}{w.shape}"
            continue
        bits = np.uint64 if g.dtype.itemsize == 8 else np.uint32
        gb, wb = g.view(bits), w.view(bits)
        diff = np.flatnonzero(gb != wb)
        compared += g.size
        bad += diff.size
        if diff.size and first is None:
            i = int(diff[0])
            width = 2 * g.dtype.itemsize
            first = (f"output {k} [{i}]: got {g[i]!r} (0x{int(gb[i]):0{width}x}), "
                     f"C {w[i]!r} (0x{int(wb[i]):0{width}x})")
    return Comparison(compared, bad, first)
