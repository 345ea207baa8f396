"""Hostile-input rows for the program library (vyre.programs), loaded by tests/test_hostile.py:
each wrong argument is a LibraryArgumentError (a vyre.BackendError) naming the fix, on every
backend, with no buffer left behind and the backend still working afterwards."""

from __future__ import annotations

from typing import Any

import numpy as np

from vyre.programs import LibraryArgumentError
from vyre.programs import elementwise as E
from vyre.programs import histogram as H
from vyre.programs import matmul as M
from vyre.programs import radix_sort as RS
from vyre.programs import reduce as R
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
    # host data that is not an array, and element types by a name that is none
    ("library histogram of a list", lambda c: H.histogram_host(c.b, [1, 2, 3], 4), L,
     ("takes a NumPy array, got list", "np.asarray")),
    ("library scan of a str", lambda c: S.scan_host(c.b, "abc"), L, ("NumPy array",)),
    ("library sort values list", lambda c: RS.radix_sort_host(c.b, u, list(range(8))), L,
     ("NumPy array, got list",)),
    ("library matmul 1-D", lambda c: M.matmul_host(c.b, np.zeros(4, np.float32),
                                                   np.zeros((4, 2), np.float32)), L,
     ("2-D matrices", "(1, k)")),
    ("library elementwise type name", lambda c: E.fill("f99"), L,
     ("'f99' is not an element type", "vyre.f32")),
    # resident buffers shorter than the call's counts: loads past the end would read 0 and
    # stores do nothing, a silently wrong result (c.live holds 16 bytes)
    ("library histogram src short", lambda c: H.plan_histogram(c.b, c.live, 100, c.live, 4),
     L, ("src holds 4 u32 elements (16 bytes) but the call uses 100", "at least 400 bytes")),
    ("library histogram bins short", lambda c: H.histogram_device(c.b, c.live, 4, c.live, 8),
     L, ("bins holds 4 u32 elements", "uses 8")),
    ("library scan src short", lambda c: S.plan_scan(c.b, c.live, c.freed, 8, H.u32), L,
     ("plan_scan: src holds 4",)),
    ("library compact src short", lambda c: S.plan_compact(c.b, c.live, c.freed, c.live, 8,
                                                           H.u32), L, ("plan_compact: src",)),
    ("library reduce src short", lambda c: R.plan_reduce(c.b, c.live, 8, "sum", H.u32, c.live),
     L, ("plan_reduce: src holds 4",)),
    ("library sort keys short", lambda c: RS.plan_radix_sort(c.b, c.live, 8), L,
     ("plan_radix_sort: keys holds 4",)),
    ("library matmul a short", lambda c: M.matmul_device(c.b, c.live, c.live, c.live, 4, 4, 4),
     L, ("matmul_device: a holds 4 f32 elements", "uses 16")),
    ("library stencil u short", lambda c: ST.iterate_stencil(c.b, c.live, c.freed, 4, 4, 1),
     L, ("iterate_stencil: u holds 4",)),
]
