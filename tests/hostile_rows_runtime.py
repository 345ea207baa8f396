"""Hostile-table rows for the runtime, config and CLI layer (see tests/test_hostile.py)."""

from __future__ import annotations

from typing import Any

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
]

