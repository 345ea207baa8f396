"""One-file replay of a dispatch: save it anywhere, rerun it on any backend, compare bits.

A replay file is a zip holding `dispatch.json` (format, vyre version, the Program in the
wire format `vyre.to_json`, grid, params, the backend it ran on, a note) and one `.npy`
per buffer under `inputs/` (the contents before the dispatch) and, when known, `outputs/`
(the writable buffers after it). `save_dispatch` writes one, `record_dispatch` runs a
dispatch and saves it with its outputs, `load_dispatch` reads one (refusing another vyre
version, naming both), `replay` reruns it and compares bit for bit with the saved outputs
or with another backend's; `vyre replay FILE` and `vyre check FILE` are the CLI.

With $VYRE_REPLAY_DIR set, a host-path dispatch failing with DispatchError, a fuzzing
disagreement and a conformance failure each write one there (`save_on_request`) and say
where. This module must never change how a dispatch runs.
"""

from __future__ import annotations

import io
import json
import time
import warnings
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from vyre.backend import BaseBackend
from vyre.backends.reference.checked import CheckWarning
from vyre.config import DispatchConfig
from vyre.ir.nodes import Program
from vyre.ir.serialize import from_json
from vyre.replay_file import (
    ENV_REPLAY_DIR,
    FORMAT,
    FORMAT_VERSION,
    MANIFEST,
    ReplayError,
    describe_backend,
    save_dispatch,
    save_on_request,
    vyre_version,
)


@dataclass
class SavedDispatch:
    """A dispatch as a replay file holds it."""

    program: Program
    inputs: dict[str, np.ndarray]
    grid: tuple[int, int, int]
    params: dict[str, bool | int | float] = field(default_factory=dict)
    outputs: dict[str, np.ndarray] | None = None
    backend: dict[str, Any] = field(default_factory=dict)
    vyre_version: str = ""
    note: str = ""

    @property
    def config(self) -> DispatchConfig:
        return DispatchConfig(grid=self.grid, params=self.params)


def record_dispatch(path: str | Path, backend: BaseBackend, program: Program,
                    inputs: Mapping[str, Any], config: DispatchConfig,
                    note: str = "") -> dict[str, np.ndarray]:
    """`backend.dispatch(program, inputs, config)`, saved with its outputs; returns them."""
    before = {k: np.array(v, copy=True) for k, v in inputs.items() if not isinstance(v, int)}
    counts = {k: v for k, v in inputs.items() if isinstance(v, int)}
    outs = backend.dispatch(program, dict(inputs), config)
    for d in program.buffers:
        if d.name in counts:
            before[d.name] = np.zeros(counts[d.name], dtype=d.ty.numpy)
    save_dispatch(path, program, before, config, outputs=outs, backend=backend, note=note)
    return outs


def load_dispatch(path: str | Path) -> SavedDispatch:
    """Read a replay file (refusing another format or vyre version, naming both)."""
    p = Path(path)
    try:
        with zipfile.ZipFile(p) as z:
            doc = json.loads(z.read(MANIFEST))
            if doc.get("format") != FORMAT:
                raise ReplayError(f"{p}: not a vyre replay file (format {doc.get('format')!r})"
                                  "; write one with vyre.tools.replay.save_dispatch or "
                                  f"${ENV_REPLAY_DIR}")
            here = vyre_version()
            if doc.get("vyre_version") != here or doc.get("version") != FORMAT_VERSION:
                raise ReplayError(
                    f"{p} was saved by vyre {doc.get('vyre_version')} (replay format "
                    f"{doc.get('version')}); this is vyre {here} (format {FORMAT_VERSION}): "
                    f"replay it with vyre {doc.get('vyre_version')}, or save it again here")
            arrays = {n[len("inputs/"):-4]: np.load(io.BytesIO(z.read(n)), allow_pickle=False)
                      for n in z.namelist() if n.startswith("inputs/")}
            outs = {n[len("outputs/"):-4]: np.load(io.BytesIO(z.read(n)), allow_pickle=False)
                    for n in z.namelist() if n.startswith("outputs/")}
    except FileNotFoundError:
        raise ReplayError(f"{p}: no such replay file; check the path") from None
    except (zipfile.BadZipFile, KeyError, ValueError) as exc:
        raise ReplayError(f"{p}: not a readable vyre replay file ({exc}); it may be "
                          "truncated: save it again") from None
    program = from_json(json.dumps(doc["program"], allow_nan=True))
    return SavedDispatch(
        program=program, inputs=arrays, grid=tuple(int(g) for g in doc["grid"]),  # type: ignore[arg-type]
        params=dict(doc.get("params") or {}),
        outputs=outs if doc.get("outputs") is not None else None,
        backend=dict(doc.get("backend") or {}), vyre_version=doc["vyre_version"],
        note=str(doc.get("note", "")))


@dataclass
class ReplayResult:
    """What a replay ran on, what it compared with, and every buffer that differs."""

    backend: str
    compared_with: str
    outputs: dict[str, np.ndarray]
    differences: list[str]
    seconds: float

    @property
    def ok(self) -> bool:
        return not self.differences

    def __str__(self) -> str:
        head = (f"replayed on {self.backend} in {self.seconds:.3f}s, compared bit for bit "
                f"with {self.compared_with}: ")
        if self.ok:
            return head + "identical"
        return head + f"{len(self.differences)} buffer(s) differ\n" + "\n".join(
            f"  - {d}" for d in self.differences)


def compare_bits(got: Mapping[str, np.ndarray], want: Mapping[str, np.ndarray]) -> list[str]:
    """One line per buffer of `want` whose bits differ in `got` (first elements named)."""
    out: list[str] = []
    for name, w in want.items():
        g = got.get(name)
        if g is None:
            out.append(f"{name}: missing from the replay's results")
            continue
        w, g = np.asarray(w), np.asarray(g)
        if g.shape != w.shape or g.dtype != w.dtype:
            out.append(f"{name}: {g.dtype}{list(g.shape)} instead of {w.dtype}{list(w.shape)}")
            continue
        wb = w.view(f"u{w.dtype.itemsize}") if w.dtype.itemsize in (1, 2, 4, 8) else w
        gb = g.view(wb.dtype)
        bad = np.flatnonzero(wb != gb)
        if bad.size:
            shown = ", ".join(f"[{i}] {g[i]!r} vs {w[i]!r}" for i in bad[:5])
            out.append(f"{name}: {bad.size} of {w.size} elements differ: {shown}")
    return out


def _backend(spec: str | BaseBackend, check: bool = False) -> tuple[BaseBackend, bool]:
    """(instance, whether we made it and must close it)."""
    if isinstance(spec, BaseBackend):
        return spec, False
    from vyre.registry import get_backend

    if check:
        if spec.split(":")[0] != "reference":
            raise ReplayError(f"--check runs the reference backend's checked mode, not "
                              f"{spec!r}; drop --backend or pass --backend reference")
        return get_backend(spec, check="warn"), True
    return get_backend(spec), True


def replay(source: str | Path | SavedDispatch, backend: str | BaseBackend | None = None,
           against: str | BaseBackend | None = None, check: bool = False) -> ReplayResult:
    """Rerun a saved dispatch on `backend` (default: the kind it was saved from, the
    reference with `check`) and compare bit for bit with `against`'s results when given,
    else with the saved outputs, else with the reference's. With `check`, the reference
    runs in checked mode and its report is among the differences."""
    saved = source if isinstance(source, SavedDispatch) else load_dispatch(source)
    spec = backend or ("reference" if check else saved.backend.get("kind") or "reference")
    be, close = _backend(spec, check)
    closers = [be] if close else []
    try:
        t0 = time.perf_counter()
        with warnings.catch_warnings():
            if check:  # the report goes into the result instead
                warnings.simplefilter("ignore", CheckWarning)
            got = be.dispatch(saved.program, saved.inputs, saved.config)
        seconds = time.perf_counter() - t0
        diffs: list[str] = []
        report = getattr(be, "last_check_report", None)
        if check and report is not None and not report.ok:
            diffs.append(str(report))
        if against is None and saved.outputs is not None:
            want, what = saved.outputs, (
                f"the saved outputs (from {saved.backend.get('id', 'an unnamed backend')})")
        else:
            other, close_other = _backend(against or "reference")
            if close_other:
                closers.append(other)
            want, what = other.dispatch(saved.program, saved.inputs, saved.config), other.id
        diffs.extend(compare_bits(got, want))
        return ReplayResult(be.id, what, got, diffs, seconds)
    finally:
        for b in closers:
            b.close()


__all__ = ["ENV_REPLAY_DIR", "ReplayError", "ReplayResult", "SavedDispatch", "compare_bits",
           "describe_backend", "load_dispatch", "record_dispatch", "replay", "save_dispatch",
           "save_on_request"]
