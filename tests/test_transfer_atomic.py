"""vyre.transfer is all or nothing: when the destination's write fails (a full device), the
buffer it allocated there is freed before the error is raised, never left behind."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import vyre
from vyre.errors import OutOfDeviceMemory


@pytest.mark.parametrize("name", [a.name for a in vyre.available_backends() if a.available])
def test_a_failed_transfer_leaves_no_buffer_on_the_destination(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with vyre.get_backend("reference") as src, vyre.get_backend(name) as dst:
        buf = src.allocate_device_buffer(64, label="data")
        src.write(buf, np.arange(16, dtype=np.uint32))

        def full(*args: Any, **kw: Any) -> None:
            raise OutOfDeviceMemory(dst.id, 64, "the device filled up during the copy")

        monkeypatch.setattr(dst, "write", full)
        with pytest.raises(OutOfDeviceMemory, match="filled up"):
            vyre.transfer(buf, dst)
        assert dst.live_buffers() == []
        monkeypatch.undo()
        moved = vyre.transfer(buf, dst)  # and the same transfer works once the device has room
        assert np.array_equal(dst.read(moved, dtype=np.uint32), np.arange(16, dtype=np.uint32))
        assert len(dst.live_buffers()) == 1
