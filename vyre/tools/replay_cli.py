"""`vyre replay FILE [--backend B] [--against B2] [--check]` and `vyre check FILE`: the
command-line side of vyre.tools.replay and vyre.tools.replay_pipeline (a FILE is a saved
dispatch or a recorded pipeline, told apart by its manifest; exit 0: identical / no
finding, 1: a difference or a finding, 2: the file or a backend could not be used, the
message says why)."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from functools import partial
from typing import TextIO

from vyre.errors import BackendError
from vyre.interface import Backend

from .replay import SavedDispatch, collect_findings, file_kind, load_dispatch, replay

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


def add_replay_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", help="a replay file: a dispatch (vyre.tools.replay.save_dispatch, "
                   "$VYRE_REPLAY_DIR) or a recorded pipeline (vyre.tools.replay_pipeline)")
    p.add_argument("--backend", metavar="NAME", help="the backend to rerun on (default: the "
                   "kind the file was saved from; the reference with --check)")
    p.add_argument("--against", metavar="NAME", help="compare with this backend's results "
                   "instead of the saved outputs")
    p.add_argument("--check", action="store_true", help="rerun on the reference in checked "
                   "mode and list its findings (races, uninitialised reads, ...)")


def cmd_replay(args: argparse.Namespace, out: TextIO) -> int:
    from .replay_pipeline import replay_pipeline

    try:
        rerun = replay_pipeline if file_kind(args.file) == "pipeline" else replay
        result = rerun(args.file, backend=args.backend, against=args.against,
                       check=args.check)
    except BackendError as exc:
        print(f"vyre replay: {exc}", file=out)
        return EXIT_USAGE
    print(result, file=out)
    return EXIT_OK if result.ok else EXIT_FAILED


def _dispatch_saved(backend: Backend, saved: SavedDispatch) -> object:
    return backend.dispatch(saved.program, saved.inputs, saved.config)


def add_check_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", help="a replay file (a dispatch or a recorded pipeline) to run "
                   "on the reference in checked mode")


def cmd_check(args: argparse.Namespace, out: TextIO) -> int:
    from vyre.backends.reference import ReferenceBackend

    from .replay_pipeline import load_recorded, run_recorded

    try:
        if file_kind(args.file) == "pipeline":
            doc, bufs, _ = load_recorded(args.file)
            what = f"the pipeline of {len(doc['steps'])} step(s) in {args.file}"
            run: Callable[[Backend], object] = partial(run_recorded, doc=doc, bufs=bufs)
        else:
            saved = load_dispatch(args.file)
            what = f"program {saved.program.name!r}"
            run = partial(_dispatch_saved, saved=saved)
        be = ReferenceBackend(check="warn")
    except BackendError as exc:
        print(f"vyre check: {exc}", file=out)
        return EXIT_USAGE
    try:
        _, findings = collect_findings(lambda: run(be), check=True)
    except BackendError as exc:
        print(f"vyre check: running {what} failed: {exc}", file=out)
        return EXIT_FAILED
    finally:
        be.close()
    if not findings:
        print(f"checked mode: {what}: no race, uninitialised read, out-of-bounds access or "
              "divergent barrier", file=out)
        return EXIT_OK
    print(findings, file=out)
    return EXIT_FAILED


__all__ = ["add_check_arguments", "add_replay_arguments", "cmd_check", "cmd_replay"]
