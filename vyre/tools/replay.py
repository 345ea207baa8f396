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
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from vyre.backends.reference.checked import CheckWarning
from vyre.config import DispatchConfig
from vyre.errors import DispatchError
from vyre.interface import Backend
from vyre.ir.nodes import Program
from vyre.ir.serialize import from_json
from vyre.replay_file import (
    ENV_REPLAY_DIR,
    FORMAT,
    FORMAT_VERSION,
    MANIFEST,
    PIPELINE_MANIFEST,
    ReplayError,
    describe_backend,
    refuse_other_version,
    rerunning,
    save_dispatch,
    save_on_request,
    vyre_version,
)

T = TypeVar("T")


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


def record_dispatch(path: str | Path, backend: Backend, program: Program,
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


def file_kind(path: str | Path) -> str:
    """"dispatch" (save_dispatch) or "pipeline" (vyre.tools.replay_pipeline) for a replay
    file, by the manifest it holds; ReplayError if it is neither."""
    p = Path(path)
    try:
        with zipfile.ZipFile(p) as z:
            names = set(z.namelist())
    except FileNotFoundError:
        raise ReplayError(f"{p}: no such replay file; check the path") from None
    except (zipfile.BadZipFile, OSError) as exc:
        raise ReplayError(f"{p}: not a readable vyre replay file ({exc}); it may be "
                          "truncated: save it again") from None
    if MANIFEST in names:
        return "dispatch"
    if PIPELINE_MANIFEST in names:
        return "pipeline"
    raise ReplayError(f"{p}: not a vyre replay file (it holds neither {MANIFEST} nor "
                      f"{PIPELINE_MANIFEST}); write one with vyre.tools.replay.save_dispatch, "
                      f"record_pipeline or ${ENV_REPLAY_DIR}")


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
            refuse_other_version(p, doc, "save it again here")
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
    """What a replay ran on, what it compared with, every buffer that differs and (with
    the checked mode) the findings."""

    backend: str
    compared_with: str
    outputs: dict[str, np.ndarray]
    differences: list[str]
    seconds: float
    findings: str = ""  # the checked mode's report ("" without --check, or when clean)

    @property
    def ok(self) -> bool:
        return not self.differences and not self.findings

    def __str__(self) -> str:
        head = (f"replayed on {self.backend} in {self.seconds:.3f}s, compared bit for bit "
                f"with {self.compared_with}: ")
        if self.differences:
            head += f"{len(self.differences)} buffer(s) differ\n" + "\n".join(
                f"  - {d}" for d in self.differences)
        else:
            head += "identical"
        return f"{head}\n{self.findings}" if self.findings else head


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
            shown = ", ".join(f"[{i}] {_pair(g[i], w[i], gb[i], wb[i])}" for i in bad[:5])
            out.append(f"{name}: {bad.size} of {w.size} elements differ: {shown}")
    return out


def _pair(got: Any, want: Any, got_bits: Any, want_bits: Any) -> str:
    """'got vs want' as their shortest text (2608.0 vs 6112.0), with the bits in hex where
    the texts are alike (two NaNs)."""
    a, b = str(got), str(want)
    if a == b:
        width = 2 * np.asarray(got_bits).itemsize
        a, b = f"{a} (0x{int(got_bits):0{width}x})", f"{b} (0x{int(want_bits):0{width}x})"
    return f"{a} vs {b}"


def backend_for(spec: str | Backend | None, saved_on: Mapping[str, Any],
                check: bool) -> tuple[Backend, bool]:
    """The backend a replay runs on: `spec`, else the kind the file was saved from (the
    reference with `check`); and whether we made it and must close it."""
    if spec is None:
        spec = "reference" if check else str(saved_on.get("kind") or "reference")
    return _backend(spec, check)


def collect_findings(run: Callable[[], T], check: bool) -> tuple[T, str]:
    """`run()` (a replay's rerun: a failure it reproduces is not saved again), with `check`
    the checked mode's warnings (every dispatch's, a pipeline's too) collected instead of
    shown: its result and the findings' text ("" if none)."""
    if not check:
        with rerunning():
            return run(), ""
    with warnings.catch_warnings(record=True) as caught, rerunning():
        warnings.simplefilter("always", CheckWarning)
        out = run()
    found = []
    for w in caught:
        if issubclass(w.category, CheckWarning):
            found.append(str(w.message))
        else:  # (someone else's warning: shown as it would have been)
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    return out, "\n".join(found)


def failed_rerun(backend: Backend, exc: DispatchError, seconds: float) -> ReplayResult:
    """The result of a rerun that raised DispatchError (nothing to compare: the error is
    what the file reproduces)."""
    return ReplayResult(backend.id, "nothing (the rerun raised)", {}, [], seconds,
                        f"the rerun raised {type(exc).__name__}: {exc}")


def _backend(spec: str | Backend, check: bool = False) -> tuple[Backend, bool]:
    """(instance, whether we made it and must close it)."""
    if not isinstance(spec, str):
        return spec, False
    from vyre.registry import get_backend

    if check:
        if spec.split(":")[0] != "reference":
            raise ReplayError(f"--check runs the reference backend's checked mode, not "
                              f"{spec!r}; drop --backend or pass --backend reference")
        return get_backend(spec, check="warn"), True
    return get_backend(spec), True


def replay(source: str | Path | SavedDispatch, backend: str | Backend | None = None,
           against: str | Backend | None = None, check: bool = False) -> ReplayResult:
    """Rerun a saved dispatch on `backend` (default: the kind it was saved from, the
    reference with `check`) and compare bit for bit with `against`'s results when given,
    else with the saved outputs, else with the reference's. With `check`, the reference
    runs in checked mode and its report is the result's `findings`."""
    saved = source if isinstance(source, SavedDispatch) else load_dispatch(source)
    be, close = backend_for(backend, saved.backend, check)
    closers = [be] if close else []
    try:
        t0 = time.perf_counter()
        try:
            got, findings = collect_findings(
                lambda: be.dispatch(saved.program, saved.inputs, saved.config), check)
        except DispatchError as exc:  # reproduced: a failed vyre.assert_, a device fault
            return failed_rerun(be, exc, time.perf_counter() - t0)
        seconds = time.perf_counter() - t0
        if against is None and saved.outputs is not None:
            want, what = saved.outputs, (
                f"the saved outputs (from {saved.backend.get('id', 'an unnamed backend')})")
        else:
            other, close_other = _backend(against or "reference")
            if close_other:
                closers.append(other)
            want, what = other.dispatch(saved.program, saved.inputs, saved.config), other.id
        return ReplayResult(be.id, what, got, compare_bits(got, want), seconds, findings)
    finally:
        for b in closers:
            b.close()


__all__ = ["ENV_REPLAY_DIR", "FORMAT_VERSION", "ReplayError", "ReplayResult", "SavedDispatch",
           "backend_for", "collect_findings", "compare_bits", "describe_backend", "failed_rerun",
           "file_kind", "load_dispatch", "record_dispatch", "replay", "save_dispatch",
           "save_on_request", "vyre_version"]
