"""Writing a replay file: one dispatch (its Program, every buffer's contents before it, the
grid and params, the backend it ran on) saved to a zip that `vyre replay FILE` reruns
anywhere (vyre.tools.replay reads and reruns it).

It is here, below vyre.backend, because `BaseBackend.dispatch` saves a failed dispatch
when $VYRE_REPLAY_DIR is set (`save_on_request`); the tools build on it. This module must
never run a dispatch or raise from `save_on_request` (the caller is reporting a failure
already).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import threading
import time
import zipfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from .config import DispatchConfig, IndirectGrid
from .errors import BackendError
from .ir.nodes import Program
from .ir.serialize import to_json

VERSION = "0.1.0"  # vyre's version (vyre.__version__), written into every replay file
FORMAT = "vyre.replay"
FORMAT_VERSION = 1
ENV_REPLAY_DIR = "VYRE_REPLAY_DIR"
MANIFEST = "dispatch.json"
PIPELINE_MANIFEST = "pipeline.json"  # a recorded pipeline's (vyre.tools.replay_pipeline)


class Backend(Protocol):
    """What a replay file records of the backend a dispatch ran on (typed by what is used:
    importing vyre.interface here would close an import cycle through vyre.debug)."""

    @property
    def id(self) -> str: ...

    @property
    def kind(self) -> str: ...

    def capabilities(self) -> Any: ...


class ReplayError(BackendError):
    """A replay file could not be written, read or rerun as asked."""


def vyre_version() -> str:
    return VERSION


def refuse_other_version(path: Path, doc: Mapping[str, Any], again: str) -> None:
    """ReplayError naming both versions when `doc` (a replay file's manifest) was written
    by another vyre version or replay format than this one; `again` says how to remake it."""
    if doc.get("vyre_version") != VERSION or doc.get("version") != FORMAT_VERSION:
        raise ReplayError(
            f"{path} was saved by vyre {doc.get('vyre_version')} (replay format "
            f"{doc.get('version')}); this is vyre {VERSION} (format {FORMAT_VERSION}): "
            f"replay it with vyre {doc.get('vyre_version')}, or {again}")


def describe_backend(backend: Backend) -> dict[str, Any]:
    """What a replay file says about the backend a dispatch ran on (JSON-safe)."""
    caps = backend.capabilities()
    details = json.loads(json.dumps(caps.details, default=str))
    return {"id": backend.id, "kind": backend.kind, "device": caps.device, "details": details}


def npy_bytes(a: np.ndarray) -> bytes:
    """`a` as the bytes of a .npy file (no pickles)."""
    buf = io.BytesIO()
    np.save(buf, np.ascontiguousarray(a), allow_pickle=False)
    return buf.getvalue()


def save_dispatch(
    path: str | Path, program: Program, inputs: Mapping[str, Any], config: DispatchConfig,
    *, outputs: Mapping[str, np.ndarray] | None = None, backend: Backend | None = None,
    note: str = "",
) -> Path:
    """Write one replay file; `inputs` maps every buffer to its contents before the
    dispatch (a write-only buffer may be omitted: zeros of its output's size, or of its
    declared count, are replayed). Returns the path."""
    if isinstance(config.grid, IndirectGrid):
        raise ReplayError("a dispatch with an indirect grid cannot be saved for replay (the "
                          "grid lives in a device buffer); read the three counts and save "
                          "it with DispatchConfig(grid=(x, y, z))")
    arrays: dict[str, np.ndarray] = {}
    for d in program.buffers:
        given = inputs.get(d.name)
        if isinstance(given, int) and not isinstance(given, bool):  # a write-only count
            arrays[d.name] = np.zeros(given, dtype=d.ty.numpy)
        elif d.name in inputs:
            arrays[d.name] = np.asarray(inputs[d.name], dtype=d.ty.numpy).reshape(-1)
        elif outputs is not None and d.name in outputs:
            arrays[d.name] = np.zeros(np.asarray(outputs[d.name]).size, dtype=d.ty.numpy)
        elif d.count is not None:
            arrays[d.name] = np.zeros(d.count, dtype=d.ty.numpy)
        else:
            raise ReplayError(f"save_dispatch: no contents for buffer {d.name!r}; pass every "
                              "buffer's contents before the dispatch in inputs")
    doc = {
        "format": FORMAT, "version": FORMAT_VERSION, "vyre_version": vyre_version(),
        "program": json.loads(to_json(program)), "grid": list(config.grid),
        "params": dict(config.params), "note": note,
        "backend": describe_backend(backend) if backend is not None else {},
        "outputs": sorted(outputs) if outputs is not None else None,
    }
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    tmp = p.with_name(p.name + ".partial")
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr(MANIFEST, json.dumps(doc, indent=1, allow_nan=True))
        for name, a in arrays.items():
            z.writestr(f"inputs/{name}.npy", npy_bytes(a))
        for name, a in (outputs or {}).items():
            z.writestr(f"outputs/{name}.npy", npy_bytes(np.asarray(a)))
    tmp.replace(p)  # never a half-written file under the real name
    return p


_rerun = threading.local()  # .on: this thread is rerunning a replay file (never re-saved)


def replay_dir() -> Path | None:
    """$VYRE_REPLAY_DIR (None when unset, or while this thread reruns a replay file)."""
    if getattr(_rerun, "on", False):
        return None
    raw = os.environ.get(ENV_REPLAY_DIR, "").strip()
    return Path(raw) if raw else None


@contextlib.contextmanager
def rerunning() -> Iterator[None]:
    """A replay's rerun: a failure it reproduces is not saved as yet another file."""
    before = getattr(_rerun, "on", False)
    _rerun.on = True
    try:
        yield
    finally:
        _rerun.on = before


def save_on_request(program: Program, inputs: Mapping[str, Any], config: DispatchConfig,
                    backend: Backend | None, note: str) -> Path | None:
    """With $VYRE_REPLAY_DIR set, save the dispatch there as
    `<program>-<hash>-<time>.zip` and return the path; else None. Never raises: the caller
    is already reporting a failure, which a failed save must not hide."""
    d = replay_dir()
    if d is None:
        return None
    name = f"{program.name}-{program.content_hash[:12]}-{time.time_ns()}.zip"
    try:
        return save_dispatch(d / name, program, inputs, config, backend=backend, note=note)
    except Exception:
        return None


def save_failure_on_request(program: Program, inputs: Mapping[str, Any],
                            config: DispatchConfig, backend: Backend | None,
                            exc: BaseException) -> None:
    """With $VYRE_REPLAY_DIR set, save the failed dispatch there (`inputs`: every buffer
    before it) and add the file's path to `exc`'s message; else nothing. An error that
    names its file already (a failed assert saved where it was read) is left as it is."""
    if getattr(exc, "replay_file", None) is not None:
        return
    path = save_on_request(program, inputs, config, backend, f"{type(exc).__name__}: {exc}")
    if path is not None:
        exc.replay_file = path  # type: ignore[attr-defined]
        where = f"replay file: {path} (rerun it anywhere: vyre replay {path})"
        if len(exc.args) == 1 and isinstance(exc.args[0], str):
            exc.args = (f"{exc.args[0]}\n{where}",)
        else:
            exc.add_note(where)
