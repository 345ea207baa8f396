"""What every port of the real-kernel suite shares: the deterministic input generator (the
same LCG as c/common.h, so C and NumPy draw identical inputs), resident buffers on one
backend (dispatched one by one or as a pipeline), and the reader of the C drivers' output
files.

This module must never compare results (the tests and scripts/realkernels.py do) and never
need a C compiler.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from vyre import DispatchConfig, Step
from vyre.buffer import DeviceBuffer
from vyre.interface import Backend
from vyre.ir.nodes import Program

HERE = Path(__file__).resolve().parent
C_DIR = HERE / "c"
DATA_DIR = HERE / "data"
F = np.float32


class Lcg:
    """state = state * 1664525 + 1013904223 (mod 2^32), as lcg_next() in c/common.h."""

    def __init__(self, seed: int) -> None:
        self.state = seed & 0xFFFFFFFF

    def u32(self, n: int) -> np.ndarray:
        out = np.empty(n, np.uint32)
        s = self.state
        for i in range(n):
            s = (s * 1664525 + 1013904223) & 0xFFFFFFFF
            out[i] = s
        self.state = s
        return out

    def unit(self, n: int) -> np.ndarray:
        """lcg_unit(): (state >> 8) * 2^-24 as f32, in [0, 1)."""
        return (self.u32(n) >> 8).astype(np.float32) * F(1.0 / 16777216.0)

    def ints(self, n: int, m: int) -> np.ndarray:
        """lcg_int(m): (state >> 8) % m as i32."""
        return ((self.u32(n) >> 8) % np.uint32(m)).astype(np.int32)


def read_output(path: Path) -> list[np.ndarray]:
    """The arrays a C driver wrote: per array a u32 count, a u32 kind (0 f32, 1 i32,
    2 f64), data."""
    raw = path.read_bytes()
    arrays: list[np.ndarray] = []
    at = 0
    while at < len(raw):
        n, kind = np.frombuffer(raw, np.uint32, 2, at)
        at += 8
        dtype = np.dtype({0: np.float32, 1: np.int32, 2: np.float64}[int(kind)])
        arrays.append(np.frombuffer(raw, dtype, int(n), at).copy())
        at += dtype.itemsize * int(n)
    return arrays


def output_bytes(arrays: Sequence[np.ndarray]) -> bytes:
    """`arrays` in the C drivers' output format (read_output's inverse): what a port's
    outputs would be as a C output file, for comparing them with a recorded SHA-256."""
    kinds = {np.dtype(np.float32): 0, np.dtype(np.int32): 1, np.dtype(np.float64): 2}
    parts = []
    for a in arrays:
        parts.append(np.array([a.size, kinds[a.dtype]], np.uint32).tobytes())
        parts.append(np.ascontiguousarray(a).tobytes())
    return b"".join(parts)


class Resident:
    """Buffers on one backend for a multi-pass host driver; all freed on exit."""

    def __init__(self, backend: Backend) -> None:
        self.backend = backend
        self._bufs: list[DeviceBuffer] = []

    def put(self, data: np.ndarray, label: str) -> DeviceBuffer:
        buf = self.backend.allocate_device_buffer(max(data.nbytes, 4), label=label)
        self._bufs.append(buf)
        if data.nbytes:
            self.backend.write(buf, np.ascontiguousarray(data))
        return buf

    def run(
        self,
        program: Program,
        inputs: Mapping[str, DeviceBuffer],
        outputs: Mapping[str, DeviceBuffer],
        grid: int | tuple[int, ...],
        params: Mapping[str, Any] | None = None,
    ) -> None:
        s = self.step(program, inputs, outputs, grid, params)
        self.backend.dispatch_with_device_buffers(s.program, s.inputs, s.outputs, s.config)

    def step(
        self,
        program: Program,
        inputs: Mapping[str, DeviceBuffer],
        outputs: Mapping[str, DeviceBuffer],
        grid: int | tuple[int, ...],
        params: Mapping[str, Any] | None = None,
        index: str | None = None,
    ) -> Step:
        """One step of a pipeline; `index` names the param that counts its rounds."""
        cfg = DispatchConfig(grid=grid, params=dict(params or {}))
        return Step(program, dict(inputs), dict(outputs), cfg, index_param=index)

    def repeat(self, steps: Sequence[Step], rounds: int) -> None:
        """Run `steps` in order, `rounds` times, as one pipeline (one host synchronisation)."""
        self.backend.pipeline(list(steps)).run(repeat=rounds)

    def get(self, buf: DeviceBuffer, dtype: Any, n: int) -> np.ndarray:
        return self.backend.read(buf, 0, n * np.dtype(dtype).itemsize, dtype)

    def free(self) -> None:
        if not self.backend.closed:
            self.backend.synchronize()
            for b in self._bufs:
                self.backend.free(b)
        self._bufs.clear()


@contextmanager
def resident(backend: Backend) -> Iterator[Resident]:
    r = Resident(backend)
    try:
        yield r
    finally:
        r.free()


def groups(n: int, size: int) -> int:
    """Workgroups of `size` covering n items (at least one)."""
    return max(1, -(-n // size))
