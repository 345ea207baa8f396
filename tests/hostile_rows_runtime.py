"""Hostile-table rows for the runtime, config and CLI layer (see tests/test_hostile.py)."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

import vyre
from vyre.errors import BackendUnavailable, InvalidDispatch


@contextmanager
def _env(name: str, value: str) -> Iterator[None]:
    old = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if old is None:
            del os.environ[name]
        else:
            os.environ[name] = old


def _with_env(name: str, value: str, fn: Callable[[], Any]) -> Any:
    with _env(name, value):
        return fn()

def _disk_cache() -> Any:
    from vyre.backends.cuda import DiskCache

    return DiskCache()


ROWS: list[Any] = [
    # backend specs: a device the backend does not have is refused, never a new "device"
    ("get_backend reference:abc", lambda c: vyre.get_backend("reference:abc"),
     BackendUnavailable, ("one device", "'reference'")),
    ("VYRE_BACKEND reference:abc",
     lambda c: _with_env("VYRE_BACKEND", "reference:abc", vyre.get_backend),
     BackendUnavailable, ("one device", "$VYRE_BACKEND='reference:abc'")),
    ("VYRE_CUDA_COARSEN abc",
     lambda c: _with_env("VYRE_CUDA_COARSEN", "abc", lambda: vyre.get_backend("cuda")),
     BackendUnavailable, ("$VYRE_CUDA_COARSEN='abc'", "from 1")),
    ("VYRE_CUDA_COARSEN 0",
     lambda c: _with_env("VYRE_CUDA_COARSEN", "0", lambda: vyre.get_backend("cuda")),
     BackendUnavailable, ("$VYRE_CUDA_COARSEN=0", "unset")),
    ("VYRE_CACHE_DIR blank", lambda c: _with_env("VYRE_CACHE_DIR", " ", _disk_cache),
     BackendUnavailable, ("$VYRE_CACHE_DIR=' ' is blank", "unset")),
    ("VYRE_BACKEND unknown", lambda c: _with_env("VYRE_BACKEND", "nope", vyre.get_backend),
     BackendUnavailable, ("known", "$VYRE_BACKEND='nope'", "unset")),
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

