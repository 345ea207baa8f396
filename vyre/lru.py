"""A dict bounded in size that drops its least recently used entry when full.

For caches keyed by values a caller may vary without end (a kernel's build-time constants):
an entry dropped is rebuilt when next asked for, so the cache bounds memory, never results.
This module must never decide what is cached or how it is keyed; its users do.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import TypeVar

K = TypeVar("K")
V = TypeVar("V")


class LruDict(OrderedDict[K, V]):
    """An OrderedDict of at most `limit` entries: a lookup (`d[k]`, `d.get(k)`) marks the
    entry recently used, an insertion beyond `limit` drops the least recently used one.
    Safe to share between threads (each operation is one step under a lock)."""

    def __init__(self, limit: int) -> None:
        if limit < 1:
            raise ValueError(f"an LruDict holds at least 1 entry, got limit={limit}")
        super().__init__()
        self.limit = limit
        self._lock = threading.RLock()

    def __getitem__(self, key: K) -> V:
        with self._lock:
            value = super().__getitem__(key)
            self.move_to_end(key)
            return value

    def get(self, key: K, default: V | None = None) -> V | None:  # type: ignore[override]
        with self._lock:
            if key in self:
                return self[key]
            return default

    def __setitem__(self, key: K, value: V) -> None:
        with self._lock:
            super().__setitem__(key, value)
            self.move_to_end(key)
            while len(self) > self.limit:
                self.popitem(last=False)
