"""Device buffers of the reference backend: host memory, because its device is the CPU.

A ReferenceBuffer owns one zero-initialised NumPy uint8 array (aligned, so typed views are
cheap). This module must never interpret the bytes (Programs do that through their
declarations) nor accept memory it did not allocate.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from vyre.buffer import BufferBase

if TYPE_CHECKING:
    from vyre.backend import BaseBackend


class ReferenceBuffer(BufferBase):
    """`byte_len` bytes of host memory owned by one ReferenceBackend instance."""

    def __init__(self, owner: BaseBackend, byte_len: int, label: str | None) -> None:
        super().__init__(owner, byte_len, label)
        self.array: np.ndarray = np.zeros(byte_len, dtype=np.uint8)

    def release(self) -> None:
        self.array = np.zeros(0, dtype=np.uint8)
