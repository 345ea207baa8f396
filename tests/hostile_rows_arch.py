"""Hostile rows for the shared `stream` loop (vyre.host_path.stream_chunks, which every backend
and RemoteBackend run): a bad chunk or a bad per-chunk config is a vyre error naming the fix,
and the chunks already uploaded are freed (Ctx checks that no buffer is left behind).
Loaded by tests/test_hostile.py (rows: id, call(ctx), class, phrases)."""

from __future__ import annotations

from typing import Any

import numpy as np
from common_programs import saxpy

from vyre import DispatchConfig
from vyre.errors import InvalidDispatch

_Z = np.zeros(64, np.float32)
_CFG = DispatchConfig(grid=(1, 1, 1), params={"a": 1.0})


def _stream(chunks: list[Any], config: Any = _CFG) -> Any:
    def row(c: Any) -> Any:
        return list(c.b.stream(saxpy(), chunks, config))
    return row


ROWS: list[tuple[str, Any, type[Exception], tuple[str, ...]]] = [
    ("stream_second_chunk_lacks_a_buffer",
     _stream([{"x": _Z, "y": _Z}, {"x": _Z}]),
     InvalidDispatch, ("'y'", "needs")),
    ("stream_config_function_returns_junk",
     _stream([{"x": _Z, "y": _Z}, {"x": _Z, "y": _Z}], lambda i, data: {"grid": 1}),
     InvalidDispatch, ("DispatchConfig",)),
    ("stream_chunks_not_iterable",
     _stream(5),  # type: ignore[arg-type]
     InvalidDispatch, ("chunk",)),
]
