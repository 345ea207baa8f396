"""`vyre replay FILE [--backend B] [--against B2] [--check]` and `vyre check FILE`: the
command-line side of vyre.tools.replay (exit 0: identical / no finding, 1: a difference or
a finding, 2: the file or a backend could not be used, the message says why)."""

from __future__ import annotations

import argparse
from typing import TextIO

from vyre.errors import BackendError

from .replay import load_dispatch, replay

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


def add_replay_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", help="a replay file (vyre.tools.replay.save_dispatch, "
                   "$VYRE_REPLAY_DIR)")
    p.add_argument("--backend", metavar="NAME", help="the backend to rerun on (default: the "
                   "kind the file was saved from; the reference with --check)")
    p.add_argument("--against", metavar="NAME", help="compare with this backend's results "
                   "instead of the saved outputs")
    p.add_argument("--check", action="store_true", help="rerun on the reference in checked "
                   "mode and list its findings (races, uninitialised reads, ...)")


def cmd_replay(args: argparse.Namespace, out: TextIO) -> int:
    try:
        result = replay(args.file, backend=args.backend, against=args.against,
                        check=args.check)
    except BackendError as exc:
        print(f"vyre replay: {exc}", file=out)
        return EXIT_USAGE
    print(result, file=out)
    return EXIT_OK if result.ok else EXIT_FAILED


def add_check_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", help="a replay file to run on the reference in checked mode")


def cmd_check(args: argparse.Namespace, out: TextIO) -> int:
    from vyre.backends.reference import ReferenceBackend

    try:
        saved = load_dispatch(args.file)
        be = ReferenceBackend(check="warn")
    except BackendError as exc:
        print(f"vyre check: {exc}", file=out)
        return EXIT_USAGE
    try:
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the report is printed below, once
            be.dispatch(saved.program, saved.inputs, saved.config)
        report = be.last_check_report
    except BackendError as exc:
        print(f"vyre check: running {saved.program.name!r} failed: {exc}", file=out)
        return EXIT_FAILED
    finally:
        be.close()
    if report is None or report.ok:
        print(f"checked mode: program {saved.program.name!r}: no race, uninitialised "
              "read, out-of-bounds access or divergent barrier", file=out)
        return EXIT_OK
    print(report, file=out)
    return EXIT_FAILED


__all__ = ["add_check_arguments", "add_replay_arguments", "cmd_check", "cmd_replay"]
