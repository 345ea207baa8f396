"""Hostile rows for buffer handles, Step / pipeline arguments and vyre.transfer (loaded by
tests/test_hostile.py into its table: each row runs on every backend, must raise the vyre
error with the phrases, leave no buffer behind and the backend working). The Ray-side rows
are in tests/test_distributed_hostile.py (they need a cluster)."""

from __future__ import annotations

import copy
import pickle
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import vyre
from vyre import DispatchConfig, Step
from vyre.errors import BufferOwnershipError, BufferStateError, InvalidDispatch, InvalidProgram

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common_programs import saxpy as shared_saxpy

_saxpy = shared_saxpy


def _edit(buf: Any, name: str, value: Any) -> None:
    setattr(buf, name, value)


def _cfg() -> DispatchConfig:
    return DispatchConfig(params={"a": 1.0})


E = InvalidDispatch
ROWS: list[Any] = [
    # Step and pipeline arguments (were AttributeError / TypeError inside pipeline())
    ("Step config None", lambda c: Step(_saxpy(), [c.live], [c.live], None), E, ("DispatchConfig",)),
    ("Step config dict", lambda c: Step(_saxpy(), [c.live], [c.live], {"grid": 1}), E, ("DispatchConfig",)),
    ("Step program str", lambda c: Step("saxpy", [c.live], [c.live], _cfg()), InvalidProgram, ("vyre Program", "ProgramBuilder")),
    ("Step program None", lambda c: Step(None, [c.live], [c.live], _cfg()), InvalidProgram, ("vyre Program",)),
    ("Step index_param int", lambda c: Step(_saxpy(), [c.live], [c.live], _cfg(), index_param=1), E, ("index_param", "name")),
    ("pipeline None", lambda c: c.b.pipeline(None), E, ("list of vyre.Step",)),
    ("pipeline int", lambda c: c.b.pipeline(5), E, ("list of vyre.Step",)),
    ("pipeline str", lambda c: c.b.pipeline("steps"), E, ("list of vyre.Step",)),
    ("pipeline dict", lambda c: c.b.pipeline({0: None}), E, ("list of vyre.Step",)),
    # buffer handles: never pickled or copied, their fixed fields never edited
    ("pickle buffer", lambda c: pickle.dumps(c.live), BufferOwnershipError, ("read(buffer)", "vyre.transfer")),
    ("copy buffer", lambda c: copy.copy(c.live), BufferOwnershipError, ("copied", "vyre.transfer")),
    ("deepcopy buffer", lambda c: copy.deepcopy(c.live), BufferOwnershipError, ("copied",)),
    ("edit byte_len", lambda c: _edit(c.live, "byte_len", 1 << 20), BufferStateError, ("byte_len is fixed", "allocate_device_buffer")),
    ("edit backend_id", lambda c: _edit(c.live, "backend_id", "x"), BufferStateError, ("fixed",)),
    ("edit owner", lambda c: _edit(c.live, "_owner", None), BufferStateError, ("owner is fixed",)),
    ("edit generation", lambda c: _edit(c.live, "generation", 99), BufferStateError, ("fixed",)),
    ("delete byte_len", lambda c: delattr(c.live, "byte_len"), BufferStateError, ("fixed",)),
    # vyre.transfer between local backends
    ("transfer to str", lambda c: vyre.transfer(c.live, "reference"), vyre.BackendUnavailable, ("get_backend",)),  # type: ignore[arg-type]
    ("transfer str buffer", lambda c: vyre.transfer("buf", c.b), BufferOwnershipError, ("allocate_device_buffer",)),  # type: ignore[arg-type]
    ("transfer host array", lambda c: vyre.transfer(np.zeros(4), c.b), BufferOwnershipError, ("allocate_device_buffer",)),  # type: ignore[arg-type]
    ("transfer label int", lambda c: vyre.transfer(c.live, c.b, label=5), E, ("label must be a str",)),  # type: ignore[arg-type]
]


def _readonly_then_writable(c: Any) -> None:
    """Marking a buffer read-only sticks: a writable mark afterwards is refused (on a
    borrowed read-only buffer, the mark the producer set is never lifted)."""
    buf = c.b.allocate_device_buffer(16, label="marked")
    try:
        buf.readonly = True
        with pytest.raises(BufferStateError, match="read-only"):
            c.b.write(buf, b"1234")
        buf.readonly = False
    finally:
        c.b.free(buf)


ROWS += [
    ("edit readonly", _readonly_then_writable, BufferStateError, ("readonly is fixed",)),
]
ROWS += [
    ("alloc label int", lambda c: c.b.allocate_device_buffer(8, label=5), E, ("label must be a str",)),  # type: ignore[arg-type]
    ("alloc label bytes", lambda c: c.b.allocate_device_buffer(8, label=b"x"), E, ("label must be a str",)),  # type: ignore[arg-type]
]
