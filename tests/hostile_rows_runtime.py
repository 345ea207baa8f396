"""Hostile-table rows for the runtime, config and CLI layer (see tests/test_hostile.py)."""

from __future__ import annotations

from typing import Any

import numpy as np

from vyre.errors import InvalidDispatch

ROWS: list[Any] = [
    # a config's params cannot change behind the launch caches' back
    ("cfg params set", lambda c: c.cfg.params.__setitem__("a", 5.0), InvalidDispatch,
     ("cannot be changed", "model_copy")),
    ("cfg params clear", lambda c: c.cfg.params.clear(), InvalidDispatch,
     ("cannot be changed", "new config")),
    ("cfg params update garbage", lambda c: c.cfg.params.update(a="x"), InvalidDispatch,
     ("cannot be changed",)),
    ("cfg params del", lambda c: c.cfg.params.__delitem__("a"), InvalidDispatch,
     ("cannot be changed",)),
    ("cfg set grid", lambda c: setattr(c.cfg, "grid", (2, 1, 1)), InvalidDispatch,
     ("cannot be changed", "model_copy")),
    ("cfg model_copy garbage params",
     lambda c: c.cfg.model_copy(update={"params": {"a": "x"}}), InvalidDispatch,
     ("not a number",)),
    # big-endian host arrays: refused everywhere (dispatch always did), never byte-swapped
    ("write big-endian", lambda c: c.b.write(c.live, np.array([1, 2], ">u4")), InvalidDispatch,
     ("big-endian", "astype('<u4')")),
    ("write_many big-endian", lambda c: c.b.write_many([(c.live, np.array([1.0], ">f4"))]),
     InvalidDispatch, ("big-endian", "astype('<f4')")),
    ("write big-endian memoryview",
     lambda c: c.b.write(c.live, memoryview(np.array([1, 2], ">u4"))), InvalidDispatch,
     ("big-endian", "little-endian")),
    ("dispatch big-endian", lambda c: c.disp(x=np.zeros(4, ">f4")), InvalidDispatch,
     ("dtype >f4", "astype(np.float32)")),
    ("read dtype big-endian", lambda c: c.b.read(c.live, dtype=">u4"), InvalidDispatch,
     ("big-endian", "dtype='<u4'")),
    ("read_many dtype big-endian", lambda c: c.b.read_many([(c.live, 0, None, ">i4")]),
     InvalidDispatch, ("big-endian", "dtype='<i4'")),
    ("read_into big-endian", lambda c: c.b.read_into(c.live, np.zeros(4, ">u4")),
     InvalidDispatch, ("big-endian", "np.empty(n, '<u4')")),
]

