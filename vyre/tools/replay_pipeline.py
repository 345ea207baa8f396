"""A recorded pipeline as one replay file: record it on one backend (CUDA, say), rerun it on
another (wgpu, the reference) and compare the reads bit for bit.

`record_pipeline(path, backend, steps, repeat, read)` reads every buffer the steps use
(their contents before the run), runs `backend.pipeline(steps).run(repeat, read)` and saves
the programs (wire format), each step's buffers (as numbers into the saved buffers), grid,
params and index_param, the reads and their results, the backend and the vyre version, in
the zip format of vyre.tools.replay (`pipeline.json` + .npy). `replay_pipeline(path,
backend)` uploads the buffers to `backend`, runs the same pipeline and compares the reads
with the saved ones (or with `against`'s). This module must never change a run.
"""

from __future__ import annotations

import io
import json
import time
import zipfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from vyre.binding import BoundDispatch
from vyre.buffer import BufferBase
from vyre.config import DispatchConfig, IndirectGrid
from vyre.debug.instrument import without_debug
from vyre.errors import DispatchError
from vyre.interface import Backend
from vyre.ir.serialize import from_json, to_json
from vyre.pipeline import ReadRange, Step, as_read_range
from vyre.replay_file import PIPELINE_MANIFEST, refuse_other_version, vyre_version
from vyre.replay_file import npy_bytes as _npy

from .replay import (
    FORMAT_VERSION,
    ReplayError,
    ReplayResult,
    backend_for,
    collect_findings,
    compare_bits,
    describe_backend,
    failed_rerun,
)

PIPELINE_FORMAT = "vyre.replay-pipeline"
MANIFEST = PIPELINE_MANIFEST


def _as_map(arg: Any, decls: Sequence[Any]) -> dict[str, BufferBase]:
    if isinstance(arg, Mapping):
        return dict(arg)
    return {d.name: b for d, b in zip(decls, arg)}


def _as_step(s: Step | BoundDispatch) -> Step:
    """A bound dispatch as the Step it was bound from (buffers by declaration)."""
    if isinstance(s, Step):
        return s
    named = dict(zip((d.name for d in s.program.buffers), s.buffers))
    return Step(s.program, {d.name: named[d.name] for d in s.program.inputs},
                {d.name: named[d.name] for d in s.program.outputs}, s.config)


@dataclass
class PipelineRecord:
    """A pipeline's description for a replay file: its steps (programs in the wire format,
    buffers as numbers into `buffers`), repeat and reads; the buffers themselves are read
    by the caller (their contents before the run)."""

    steps: list[dict[str, Any]]
    reads: list[dict[str, Any]]
    buffers: list[BufferBase]
    repeat: int

    def manifest(self, backend: Backend) -> dict[str, Any]:
        return {"format": PIPELINE_FORMAT, "version": FORMAT_VERSION,
                "vyre_version": vyre_version(), "backend": describe_backend(backend),
                "repeat": self.repeat, "steps": self.steps, "reads": self.reads}

    def before(self, backend: Backend) -> list[np.ndarray]:
        """Every buffer's bytes now (before the run)."""
        return backend.read_many([ReadRange(b, 0, None, np.uint8) for b in self.buffers])


def describe_pipeline(steps: Sequence[Step | BoundDispatch], repeat: int = 1,
                      read: Sequence[Any] = ()) -> PipelineRecord:
    """What a replay file says of a pipeline run (its reads: ReadRanges or buffers, as
    Pipeline.run takes them)."""
    buffers: list[BufferBase] = []
    index: dict[int, int] = {}

    def number(b: BufferBase) -> int:
        if id(b) not in index:
            index[id(b)] = len(buffers)
            buffers.append(b)
        return index[id(b)]

    step_docs = []
    for s in map(_as_step, steps):
        if isinstance(s.config.grid, IndirectGrid):
            raise ReplayError("a pipeline step with an indirect grid cannot be saved for "
                              "replay; give it DispatchConfig(grid=(x, y, z))")
        ins = {k: number(b) for k, b in _as_map(s.inputs, s.program.inputs).items()}
        outs = {k: number(b) for k, b in _as_map(s.outputs, s.program.outputs).items()}
        step_docs.append({"program": json.loads(to_json(s.program)), "inputs": ins,
                          "outputs": outs, "grid": list(s.config.grid),
                          "params": dict(s.config.params), "index_param": s.index_param})
    reads = [{"buffer": number(r.buffer), "offset": r.offset, "length": r.length,
              "dtype": None if r.dtype is None else np.dtype(r.dtype).str}
             for r in map(as_read_range, read)]
    return PipelineRecord(step_docs, reads, buffers, repeat)


def write_pipeline_file(path: str | Path, doc: Mapping[str, Any],
                        before: Sequence[np.ndarray], reads: Sequence[np.ndarray]) -> Path:
    """One pipeline replay file: the manifest, the buffers before the run, the reads."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    tmp = p.with_name(p.name + ".partial")
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr(MANIFEST, json.dumps(dict(doc), indent=1, allow_nan=True))
        for i, raw in enumerate(before):
            z.writestr(f"buffers/{i}.npy", _npy(raw))
        for i, got in enumerate(reads):
            z.writestr(f"reads/{i}.npy", _npy(got))
    tmp.replace(p)  # never a half-written file under the real name
    return p


def record_pipeline(path: str | Path, backend: Backend,
                    steps: Sequence[Step | BoundDispatch], repeat: int = 1,
                    read: Sequence[Any] = ()) -> list[np.ndarray]:
    """Run the pipeline on `backend` and save it (with the buffers' contents before the run
    and the reads after it) as one file; returns the reads."""
    rec = describe_pipeline(steps, repeat, read)
    before = rec.before(backend)
    result = backend.pipeline(list(steps)).run(repeat, list(read))
    write_pipeline_file(path, rec.manifest(backend), before, result.reads)
    return list(result.reads)


def load_recorded(path: str | Path) -> tuple[dict[str, Any], list[np.ndarray], list[np.ndarray]]:
    """A recorded pipeline's manifest, buffers (before the run) and saved reads."""
    path = Path(path)
    try:
        with zipfile.ZipFile(path) as z:
            doc = json.loads(z.read(MANIFEST))
            if doc.get("format") != PIPELINE_FORMAT:
                raise ReplayError(f"{path}: not a vyre pipeline replay file (format "
                                  f"{doc.get('format')!r}); record one with record_pipeline")
            refuse_other_version(path, doc, "record it again here")
            bufs = [np.load(io.BytesIO(z.read(f"buffers/{i}.npy")), allow_pickle=False)
                    for i in range(sum(1 for n in z.namelist() if n.startswith("buffers/")))]
            reads = [np.load(io.BytesIO(z.read(f"reads/{i}.npy")), allow_pickle=False)
                     for i in range(len(doc["reads"]))]
    except FileNotFoundError:
        raise ReplayError(f"{path}: no such pipeline replay file; check the path") from None
    except (zipfile.BadZipFile, KeyError, ValueError) as exc:
        raise ReplayError(f"{path}: not a readable pipeline replay file ({exc}); record it "
                          "again") from None
    return doc, bufs, reads


def run_recorded(backend: Backend, doc: Mapping[str, Any], bufs: Sequence[np.ndarray],
                 quiet: bool = False) -> list[np.ndarray]:
    """Run a recorded pipeline (`doc`, the buffers' bytes before it) on `backend`; its
    reads. `quiet`: the steps without their vyre.print / vyre.assert_ (a shadow run)."""
    dev = [backend.allocate_device_buffer(max(1, b.nbytes)) for b in bufs]
    try:
        backend.write_many([(d, b, 0) for d, b in zip(dev, bufs) if b.nbytes])
        steps = []
        for s in doc["steps"]:
            program = from_json(json.dumps(s["program"], allow_nan=True))
            if quiet:
                program = without_debug(program)
            steps.append(Step(program, {k: dev[i] for k, i in s["inputs"].items()},
                              {k: dev[i] for k, i in s["outputs"].items()},
                              DispatchConfig(grid=tuple(s["grid"]), params=s["params"]),
                              s.get("index_param")))
        reads = [ReadRange(dev[r["buffer"]], r["offset"], r["length"],
                           None if r["dtype"] is None else np.dtype(r["dtype"]))
                 for r in doc["reads"]]
        return list(backend.pipeline(steps).run(int(doc["repeat"]), reads).reads)
    finally:
        for d in dev:
            backend.free(d)


def replay_pipeline(path: str | Path, backend: str | Backend | None = None,
                    against: str | Backend | None = None,
                    check: bool = False) -> ReplayResult:
    """Rerun a recorded pipeline on `backend` (default: the kind it was recorded on, the
    reference with `check`) and compare its reads bit for bit with the saved ones, or with
    `against`'s when given. With `check`, the reference runs every step in checked mode and
    the findings are the result's `findings`."""
    from vyre.registry import get_backend

    doc, bufs, saved = load_recorded(path)
    be, close = backend_for(backend, doc.get("backend") or {}, check)
    made = [be] if close else []
    try:
        t0 = time.perf_counter()
        try:
            got, findings = collect_findings(lambda: run_recorded(be, doc, bufs), check)
        except DispatchError as exc:  # reproduced: a failed vyre.assert_, a device fault
            return failed_rerun(be, exc, time.perf_counter() - t0)
        seconds = time.perf_counter() - t0
        if against is None:
            want, what = saved, f"the saved reads (from {doc['backend'].get('id')})"
        else:
            other = get_backend(against) if isinstance(against, str) else against
            if other is not against:
                made.append(other)
            want, what = run_recorded(other, doc, bufs), other.id
        diffs = compare_bits({f"read {i}": g for i, g in enumerate(got)},
                             {f"read {i}": w for i, w in enumerate(want)})
        return ReplayResult(be.id, what, {f"read {i}": g for i, g in enumerate(got)}, diffs,
                            seconds, findings)
    finally:
        for b in made:
            b.close()


__all__ = ["PipelineRecord", "describe_pipeline", "load_recorded", "record_pipeline", "replay_pipeline",
           "run_recorded", "write_pipeline_file"]
