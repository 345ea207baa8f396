"""The buffer-length rule of docs/IR.md, on every backend: a bound buffer holds a whole
number of elements; one that does not is refused with a message that says what to bind.
(Re-dispatch params by type and bit pattern: tests/test_redispatch.py.)"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from vyre import DispatchConfig, ProgramBuilder, ScalarType
from vyre.backend import BaseBackend
from vyre.errors import InvalidDispatch

ST = ScalarType


def _upload(b: BaseBackend, data: np.ndarray) -> Any:
    buf = b.allocate_device_buffer(data.nbytes)
    b.write(buf, data)
    return buf


def test_a_buffer_of_partial_elements_is_refused_naming_the_fix(backend: BaseBackend) -> None:
    """docs/IR.md: a bound buffer holds a whole number of elements; 10 bytes bound as u32
    is refused (not silently read as 2 elements), and the message says what to bind."""
    k = ProgramBuilder("copy_u32", workgroup_size=4)
    src = k.buffer("src", ST.U32)
    dst = k.buffer("dst", ST.U32, "write")
    i = k.global_linear_id()
    with k.if_(i < dst.length()):
        dst[i] = src[i]
    prog = k.build()
    b10 = backend.allocate_device_buffer(10)
    bo = _upload(backend, np.zeros(2, np.uint32))
    try:
        with pytest.raises(InvalidDispatch, match=r"'src'.*10 bytes.*multiple of 4 bytes"):
            backend.dispatch_with_device_buffers(prog, {"src": b10}, {"dst": bo},
                                                 DispatchConfig(grid=1))
        b8 = _upload(backend, np.array([7, 9], np.uint32))
        backend.dispatch_with_device_buffers(prog, {"src": b8}, {"dst": bo},
                                             DispatchConfig(grid=1))
        assert backend.read(bo, dtype=np.uint32).tolist() == [7, 9]
        backend.free(b8)
    finally:
        backend.free(b10)
        backend.free(bo)
