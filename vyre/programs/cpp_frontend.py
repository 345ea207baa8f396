"""A C-preprocessor-style front end over a byte buffer, on resident device buffers.

The workload that motivates resident buffers: many small dispatches over the same device
buffers, one upload, one readback. The output must equal `cpp_frontend_python(data)` byte
for byte. This module drives stages (cpp_kernels, cpp_scan) on a backend; it must never
compute results on the host (apart from unpacking the final readback) and never route the
resident path through host copies.

Rules (phase by phase, each over the previous phase's output)
-------------------------------------------------------------
(a) Splice. Remove every backslash immediately followed by LF, and every backslash
    immediately followed by CR LF (the three bytes go). One pass over the input: pairs are
    found in the original bytes, and a pair formed by the removal is not removed again
    ("\\\\\\n\\n" -> "\\\\\\n"). A CR not between a backslash and an LF is an ordinary byte.
(b) Comments and literals, scanned left to right over the spliced bytes:
    - '"' or "'" outside a comment starts a string or char literal. Inside a literal a
      backslash escapes the next byte (so '\\'' and "\\"" do not end it); the literal ends
      at its matching unescaped quote (included), or just before an LF, which always ends
      a literal, even after a backslash (the LF is not part of it); or at end of input.
    - "/*" outside literals starts a block comment, which ends after the first "*/" whose
      '*' is not the opener's ('/*/' does not close); unterminated: it runs to the end.
    - "//" outside literals starts a line comment running up to, not including, the next
      LF (a CR before the LF belongs to the comment), or to the end of input.
    - Every comment, block or line, is replaced by exactly one space (C11 5.1.1.2 phase
      3); LFs inside a block comment go with it. Comment markers inside literals and in
      comments are ordinary bytes. Not handled: trigraphs, C++ raw strings R"(...)".
(c) Classes, one per output byte: 0 space (' ', \\t, \\r, \\v, \\f, and comment spaces),
    1 identifier (A-Z a-z _ and every byte >= 0x80), 2 digit, 3 punctuation (any other
    printable ASCII byte), 4 literal (every byte of a string/char literal, quotes
    included), 5 newline (LF; never inside a literal), 6 other (remaining control bytes).
(d) Token starts, 1 per output byte that starts a token, else 0: a token is a maximal run
    of class 1/2 bytes (identifiers and numbers: "x1", "0x1F", "10u" are one token each;
    "1.5" is three), a single class 3 or 6 byte (every punctuation byte is its own token:
    "->" is two), or one whole literal (its opening quote is the start; a prefix such as
    L in L"x" is a separate identifier token). Spaces and newlines start nothing.

Stages on the device (one u32 word per byte unless stated)
---------------------------------------------------------
 1 splice_flags     src (a u8 buffer: the input's bytes as they are) -> keep[i] in {0, 1}
 2 scan(add)        keep -> exclusive offsets, total m1            (passes per level)
 3 splice_scatter   spliced[pos[i]] = src byte i where kept
 4 lex_delta        delta[i] = byte i's DFA transition function, 8 states x 4 bits
 5 scan(compose)    delta -> prefix functions; state before byte i = prefix[i](NORMAL)
 6 strip_flags      keep[i], info[i] = byte | class << 8 | literal_start << 16
 7 scan(add)        keep -> offsets, total m2
 8 strip_scatter    stripped[pos[i]] = info[i] where kept
 9 finalize         token starts; text, classes, starts as u8 buffers (a byte each)
A scan of n words takes one block-scan pass per level (blocks of workgroup_size * items)
and one add-down pass per level below the top: 3 passes up to 1M bytes, 5 up to 1G.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from vyre.binding import BoundDispatch
from vyre.buffer import DeviceBuffer
from vyre.config import MAX_GRID_DIM, DispatchConfig
from vyre.errors import UnsupportedFeature
from vyre.interface import Backend, RecordedPipeline
from vyre.ir.nodes import Program
from vyre.pipeline import ReadRange

from . import cpp_kernels as K
from ._common import LibraryArgumentError
from .cpp_python import FrontendResult, cpp_frontend_python
from .cpp_scan import level_lengths, scan_passes, sums_name

__all__ = ["CppFrontend", "FrontendResult", "RunStats", "cpp_frontend_python"]


@dataclass(frozen=True)
class _Stage:
    program: Program
    binds: Mapping[str, str]  # declared buffer name -> logical buffer name
    params: Mapping[str, int]
    workgroups: int


@dataclass
class RunStats:
    """What the last run did: dispatches issued, host transfers, and how."""

    mode: str = ""  # "pipeline", "dispatch" (resident, one by one) or "host"
    dispatches: int = 0
    uploads: int = 0
    readbacks: int = 0
    extra: dict[str, Any] = field(default_factory=dict)


class CppFrontend:
    """Runs the front end on `backend`, keeping its buffers resident between inputs.

    Buffers are allocated for `capacity` bytes on first use and reused for every input up
    to that size; a larger input reallocates them (to the next power of two). Stage
    programs are built for `workgroup_size` invocations, and scan blocks cover
    `workgroup_size * items_per_thread` words. `use_pipeline=False` issues the stages with
    dispatch_with_device_buffers instead of one recorded pipeline (the backend's pipeline
    is also skipped automatically where it raises UnsupportedFeature). `max_grid_x` folds
    grids into y earlier than the backend requires (tests use it to exercise folding).
    """

    def __init__(
        self,
        backend: Backend,
        capacity: int = 1 << 16,
        workgroup_size: int = 256,
        items_per_thread: int = 4,
        use_pipeline: bool = True,
        max_grid_x: int | None = None,
    ) -> None:
        if workgroup_size < 1 or workgroup_size & (workgroup_size - 1):
            raise LibraryArgumentError(f"workgroup_size must be a power of two (e.g. 64, 128, 256), got "
                                       f"{workgroup_size}")
        if items_per_thread < 1:
            raise LibraryArgumentError(f"items_per_thread must be at least 1 (default 4), got "
                                       f"{items_per_thread}")
        self.backend = backend
        self.capacity = max(4, int(capacity))
        self.wg = workgroup_size
        self.items = items_per_thread
        self.use_pipeline = use_pipeline
        self.max_grid_x = max_grid_x  # fold grids into y past this many workgroups
        self.stats = RunStats()
        self._buffers: dict[str, DeviceBuffer] = {}
        self._allocated_for = 0
        self._recorded: OrderedDict[int, RecordedPipeline | list[BoundDispatch]] = OrderedDict()

    # ------------------------------------------------------------ plan
    def stages(self, n: int) -> list[_Stage]:
        """The dispatches for an input of n >= 1 bytes, in order."""
        wg, items = self.wg, self.items
        groups = -(-n // wg)
        p = {"n": n}

        def scan(op: str, data: str, total: str) -> list[_Stage]:
            return [
                _Stage(s.program, {"data": s.data, "sums": s.sums}, {"n": s.n}, s.workgroups)
                for s in scan_passes(op, data, total, n, wg, items)
            ]

        return [
            _Stage(K.splice_flags_program(wg), {"src": "src", "keep": "keep"}, p, groups),
            *scan("add", "keep", "m1"),
            _Stage(K.splice_scatter_program(wg),
                   {"src": "src", "pos": "keep", "m1": "m1", "spliced": "spliced"}, p, groups),
            _Stage(K.lex_delta_program(wg),
                   {"spliced": "spliced", "m1": "m1", "delta": "delta"}, p, groups),
            *scan("compose", "delta", "scratch"),
            _Stage(K.strip_flags_program(wg),
                   {"spliced": "spliced", "prefix": "delta", "m1": "m1", "keep": "keep",
                    "info": "info"}, p, groups),
            *scan("add", "keep", "m2"),
            _Stage(K.strip_scatter_program(wg),
                   {"pos": "keep", "m2": "m2", "info": "info", "stripped": "spliced"},
                   p, groups),
            _Stage(K.finalize_program(wg),
                   {"stripped": "spliced", "m2": "m2", "text": "text", "classes": "classes",
                    "bounds": "bounds"}, p, groups),
        ]

    def buffer_sizes(self, n: int) -> dict[str, int]:
        """Element count of every logical buffer for an input of n bytes (u8 elements for
        `BYTE_BUFFERS`, u32 for the rest)."""
        sizes = {"src": n, "text": n, "classes": n,
                 "bounds": n, "keep": n, "spliced": n, "delta": n, "info": n,
                 "m1": 1, "m2": 1, "scratch": 1}
        for level, length in enumerate(level_lengths(n, self.wg * self.items)[1:], 1):
            sizes[sums_name(level)] = length
        return {k: max(1, v) for k, v in sizes.items()}

    def _config(self, stage: _Stage) -> DispatchConfig:
        limit = self.backend.capabilities().limits.get("max_workgroups_per_dimension")
        per_dim = min(MAX_GRID_DIM, limit) if limit else MAX_GRID_DIM
        if self.max_grid_x:
            per_dim = min(per_dim, self.max_grid_x)
        return DispatchConfig.for_elements(
            stage.workgroups * self.wg, self.wg, max_per_dim=per_dim,
            params=dict(stage.params), label=stage.program.name,
        )

    # ------------------------------------------------------------ resident buffers
    def _ensure_capacity(self, n: int) -> None:
        if self._buffers and n <= self._allocated_for:
            return
        if n > self.capacity:
            self.capacity = 1 << (n - 1).bit_length()
        self._free_buffers()
        for name, count in self.buffer_sizes(self.capacity).items():
            self._buffers[name] = self.backend.allocate_device_buffer(
                count * _element_bytes(name), label=f"cpp_{name}"
            )
        self._allocated_for = self.capacity

    def _free_buffers(self) -> None:
        for b in self._buffers.values():
            self.backend.free(b)
        self._buffers.clear()
        self._recorded.clear()

    def close(self) -> None:
        """Free the resident buffers (the backend stays open)."""
        self._free_buffers()

    def __enter__(self) -> CppFrontend:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _bind(self, stage: _Stage) -> tuple[dict[str, DeviceBuffer], dict[str, DeviceBuffer]]:
        ins = {d.name: self._buffers[stage.binds[d.name]] for d in stage.program.inputs}
        outs = {d.name: self._buffers[stage.binds[d.name]] for d in stage.program.outputs}
        return ins, outs

    def _record(self, n: int) -> RecordedPipeline | list[BoundDispatch]:
        hit = self._recorded.get(n)
        if hit is not None:
            self._recorded.move_to_end(n)
            return hit
        steps = self.stages(n)
        rec: RecordedPipeline | list[BoundDispatch] | None = None
        if self.use_pipeline:
            from vyre.pipeline import Step

            try:
                rec = self.backend.pipeline(
                    [Step(s.program, *self._bind(s), self._config(s)) for s in steps]
                )
            except UnsupportedFeature:
                self.use_pipeline = False
        if rec is None:
            rec = [self.backend.bind(s.program, *self._bind(s), self._config(s)) for s in steps]
        self._recorded[n] = rec
        while len(self._recorded) > 8:
            self._recorded.popitem(last=False)
        return rec

    # ------------------------------------------------------------ runs
    def run(self, data: bytes) -> FrontendResult:
        """Resident path: one upload, every stage on the device, one batched readback."""
        data = bytes(data)
        n = len(data)
        if n == 0:
            self.stats = RunStats(mode="empty")
            return FrontendResult(b"", b"", b"")
        self._ensure_capacity(n)
        self.backend.write(self._buffers["src"], np.frombuffer(data, np.uint8))
        rec = self._record(n)
        reads = [ReadRange(self._buffers["m2"], 0, 4, np.uint32)] + [
            ReadRange(self._buffers[name], 0, n, np.uint8)
            for name in ("text", "classes", "bounds")
        ]
        if not isinstance(rec, list):
            try:
                out = rec.run(1, reads).reads
                mode = "pipeline"
            except UnsupportedFeature:
                self.use_pipeline = False
                self._recorded.clear()
                return self.run(data)
        else:
            for bound in rec:
                self.backend.dispatch_with_device_buffers(bound)
            out = self.backend.read_many(reads)
            mode = "dispatch"
        steps = len(rec) if isinstance(rec, list) else len(rec.steps)
        self.stats = RunStats(mode=mode, dispatches=steps, uploads=1, readbacks=1)
        return _unpack(out[0], out[1], out[2], out[3])

    def run_host_path(self, data: bytes) -> FrontendResult:
        """The same stages, each through backend.dispatch (a host round trip per stage)."""
        data = bytes(data)
        n = len(data)
        if n == 0:
            self.stats = RunStats(mode="empty")
            return FrontendResult(b"", b"", b"")
        arrays = {k: np.zeros(v, dtype=np.uint8 if k in BYTE_BUFFERS else np.uint32)
                  for k, v in self.buffer_sizes(n).items()}
        arrays["src"] = np.frombuffer(data, np.uint8)
        stages = self.stages(n)
        for s in stages:
            given = {d.name: arrays[s.binds[d.name]] for d in s.program.buffers}
            res = self.backend.dispatch(s.program, given, self._config(s))
            for d in s.program.outputs:
                arrays[s.binds[d.name]] = np.asarray(res[d.name], dtype=d.ty.numpy)
        self.stats = RunStats(mode="host", dispatches=len(stages), uploads=len(stages),
                              readbacks=len(stages))
        return _unpack(arrays["m2"], arrays["text"], arrays["classes"], arrays["bounds"])


BYTE_BUFFERS = frozenset({"src", "text", "classes", "bounds"})
"""The front end's u8 buffers: its input and its three outputs, a byte per element."""


def _element_bytes(name: str) -> int:
    return 1 if name in BYTE_BUFFERS else 4


def _unpack(m2: np.ndarray, text: np.ndarray, classes: np.ndarray,
            bounds: np.ndarray) -> FrontendResult:
    m = int(np.asarray(m2).view(np.uint32)[0])
    return FrontendResult(
        bytes(np.asarray(text)[:m]), bytes(np.asarray(classes)[:m]),
        bytes(np.asarray(bounds)[:m]),
    )
