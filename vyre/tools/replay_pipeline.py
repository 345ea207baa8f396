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
from pathlib import Path
from typing import Any

import numpy as np

from vyre.backend import BaseBackend
from vyre.buffer import BufferBase
from vyre.config import DispatchConfig, IndirectGrid
from vyre.ir.serialize import from_json, to_json
from vyre.pipeline import ReadRange, Step

from .replay import FORMAT_VERSION, ReplayError, ReplayResult, compare_bits, describe_backend

PIPELINE_FORMAT = "vyre.replay-pipeline"
MANIFEST = "pipeline.json"


def _vyre_version() -> str:
    import vyre

    return str(vyre.__version__)


def _npy(a: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, np.ascontiguousarray(a), allow_pickle=False)
    return buf.getvalue()


def _as_map(arg: Any, decls: Sequence[Any]) -> dict[str, BufferBase]:
    if isinstance(arg, Mapping):
        return dict(arg)
    return {d.name: b for d, b in zip(decls, arg)}


def record_pipeline(path: str | Path, backend: BaseBackend, steps: Sequence[Step],
                    repeat: int = 1, read: Sequence[ReadRange] = ()) -> list[np.ndarray]:
    """Run the pipeline on `backend` and save it (with the buffers' contents before the run
    and the reads after it) as one file; returns the reads."""
    buffers: list[BufferBase] = []
    index: dict[int, int] = {}

    def number(b: BufferBase) -> int:
        if id(b) not in index:
            index[id(b)] = len(buffers)
            buffers.append(b)
        return index[id(b)]

    step_docs = []
    for s in steps:
        if isinstance(s.config.grid, IndirectGrid):
            raise ReplayError("a pipeline step with an indirect grid cannot be saved for "
                              "replay; give it DispatchConfig(grid=(x, y, z))")
        ins = {k: number(b) for k, b in _as_map(s.inputs, s.program.inputs).items()}
        outs = {k: number(b) for k, b in _as_map(s.outputs, s.program.outputs).items()}
        step_docs.append({"program": json.loads(to_json(s.program)), "inputs": ins,
                          "outputs": outs, "grid": list(s.config.grid),
                          "params": dict(s.config.params), "index_param": s.index_param})
    for r in read:
        number(r.buffer)
    before = backend.read_many([ReadRange(b, 0, None, np.uint8) for b in buffers])
    result = backend.pipeline(list(steps)).run(repeat, list(read))
    doc = {
        "format": PIPELINE_FORMAT, "version": FORMAT_VERSION, "vyre_version": _vyre_version(),
        "backend": describe_backend(backend), "repeat": repeat, "steps": step_docs,
        "reads": [{"buffer": index[id(r.buffer)], "offset": r.offset, "length": r.length,
                   "dtype": None if r.dtype is None else np.dtype(r.dtype).str}
                  for r in read],
    }
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    tmp = p.with_name(p.name + ".partial")
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr(MANIFEST, json.dumps(doc, indent=1, allow_nan=True))
        for i, raw in enumerate(before):
            z.writestr(f"buffers/{i}.npy", _npy(raw))
        for i, got in enumerate(result.reads):
            z.writestr(f"reads/{i}.npy", _npy(got))
    tmp.replace(p)
    return list(result.reads)


def _load(path: Path) -> tuple[dict[str, Any], list[np.ndarray], list[np.ndarray]]:
    try:
        with zipfile.ZipFile(path) as z:
            doc = json.loads(z.read(MANIFEST))
            if doc.get("vyre_version") != _vyre_version() or doc.get("version") != FORMAT_VERSION:
                raise ReplayError(
                    f"{path} was saved by vyre {doc.get('vyre_version')} (replay format "
                    f"{doc.get('version')}); this is vyre {_vyre_version()} (format "
                    f"{FORMAT_VERSION}): replay it with vyre {doc.get('vyre_version')}, or "
                    "record it again here")
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


def _run_on(backend: BaseBackend, doc: dict[str, Any],
            bufs: Sequence[np.ndarray]) -> list[np.ndarray]:
    dev = [backend.allocate_device_buffer(max(1, b.nbytes)) for b in bufs]
    try:
        backend.write_many([(d, b, 0) for d, b in zip(dev, bufs) if b.nbytes])
        steps = []
        for s in doc["steps"]:
            program = from_json(json.dumps(s["program"], allow_nan=True))
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


def replay_pipeline(path: str | Path, backend: str | BaseBackend = "reference",
                    against: str | BaseBackend | None = None) -> ReplayResult:
    """Rerun a recorded pipeline on `backend` and compare its reads bit for bit with the
    saved ones, or with `against`'s when given."""
    from vyre.registry import get_backend

    doc, bufs, saved = _load(Path(path))
    made: list[BaseBackend] = []
    try:
        be = backend if isinstance(backend, BaseBackend) else get_backend(backend)
        if be is not backend:
            made.append(be)
        t0 = time.perf_counter()
        got = _run_on(be, doc, bufs)
        seconds = time.perf_counter() - t0
        if against is None:
            want, what = saved, f"the saved reads (from {doc['backend'].get('id')})"
        else:
            other = against if isinstance(against, BaseBackend) else get_backend(against)
            if other is not against:
                made.append(other)
            want, what = _run_on(other, doc, bufs), other.id
        diffs = compare_bits({f"read {i}": g for i, g in enumerate(got)},
                             {f"read {i}": w for i, w in enumerate(want)})
        return ReplayResult(be.id, what, {f"read {i}": g for i, g in enumerate(got)}, diffs,
                            seconds)
    finally:
        for b in made:
            b.close()


__all__ = ["record_pipeline", "replay_pipeline"]
