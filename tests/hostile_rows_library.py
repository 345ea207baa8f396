"""Hostile-input rows for the program library (vyre.programs), loaded by tests/test_hostile.py:
each wrong argument is a LibraryArgumentError (a vyre.BackendError) naming the fix, on every
backend, with no buffer left behind and the backend still working afterwards."""

from __future__ import annotations

from typing import Any

import numpy as np

from vyre.programs import LibraryArgumentError
from vyre.programs import histogram as H
from vyre.programs import matmul as M
from vyre.programs import radix_sort as RS
from vyre.programs import scan as S
from vyre.programs import stencil as ST

L = LibraryArgumentError
u = np.zeros(8, np.uint32)

ROWS: list[Any] = [
    ("library histogram 0 bins", lambda c: H.histogram_host(c.b, u, 0), L,
     ("nbins must be an int in 1..16777216", "in parts")),
    ("library histogram 2^24+1 bins", lambda c: H.histogram_host(c.b, u, (1 << 24) + 1), L,
     ("nbins must be an int",)),
    ("library histogram float bins", lambda c: H.histogram_host(c.b, u, 300.0), L,
     ("got 300.0",)),
    ("library histogram f64 data", lambda c: H.histogram_host(c.b, u.astype(np.float64), 4), L,
     ("element types", "convert")),
    ("library matmul f64", lambda c: M.matmul_host(c.b, np.zeros((2, 2)), np.zeros((2, 2))), L,
     ("float32", ".astype(np.float32)")),
    ("library matmul shapes", lambda c: M.matmul_host(c.b, np.zeros((2, 3), np.float32),
                                                      np.zeros((2, 3), np.float32)), L,
     ("inner dimensions differ", "transpose")),
    ("library scan in place", lambda c: S.plan_scan(c.b, c.live, c.live, 4, H.u32, True), L,
     ("distinct buffers", "second buffer")),
    ("library sort values shape", lambda c: RS.radix_sort_host(c.b, u, u[:3]), L,
     ("keys' shape", "np.arange")),
    ("library stencil 1-D", lambda c: ST.stencil_host(c.b, np.zeros(4, np.float32)), L,
     ("2-D float32", "reshape")),
]
