"""The `vyre` command line: `vyre probe`, `vyre demo`, `vyre bench` (in vyre.tools.bench),
`vyre certify` (in vyre.tools.certify), `vyre replay` and `vyre check`.

`probe` reports every registered backend (available or not, with the reason; device,
features and limits) as tables or JSON. `demo` runs the demo cases from
`vyre.programs.demo` on each available backend and on the reference, checks every result
against the reference with the case's tolerance and prints a case x backend table; it exits
1 if anything disagrees or fails.

This module must never import a backend package directly (backends come from
`vyre.registry`), never hide a failure behind a zero exit status, and never treat an
unavailable backend as a passing one. Table formatting lives in `vyre.tools.report`.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TextIO

import numpy as np

from vyre import __version__, registry
from vyre import features as F
from vyre.errors import UnsupportedFeature
from vyre.interface import Backend
from vyre.ir.compare import Tolerance, mismatches

from .probe import MAX_REPEAT as MAX_REPEAT
from .probe import probe_report as probe_report
from .probe import repeat_error as repeat_error
from .report import format_kv, format_ms, format_table

REFERENCE = "reference"

# Exit statuses.
EXIT_OK = 0
EXIT_FAILED = 1  # a disagreement, an error while running, a backend that failed to start
EXIT_USAGE = 2  # bad arguments, or something the command needs is missing
def _print_probe(report: list[dict[str, Any]], out: TextIO) -> None:
    n_ok = sum(1 for e in report if e["available"])
    print(
        f"vyre {__version__}: {len(report)} backend(s) registered, {n_ok} available",
        file=out,
    )
    if not report:
        print(
            "No backend is registered under the entry-point group "
            f"{registry.GROUP!r}; is vyre installed (pip install -e .)?",
            file=out,
        )
        return
    rows = []
    for e in report:
        caps = e["capabilities"] or {}
        rows.append(
            [
                e["name"],
                "yes" if e["available"] else "no",
                caps.get("backend", "-"),
                caps.get("device", "-"),
                ", ".join(e["devices"]) or "-",
            ]
        )
    print("", file=out)
    print(format_table(["backend", "available", "instance", "device", "devices"], rows), file=out)

    missing = [e for e in report if not e["available"]]
    if missing:
        print("\nUnavailable:", file=out)
        for e in missing:
            print(f"  {e['name']}: {e['reason'] or 'no reason given'}", file=out)

    live = [e for e in report if e["capabilities"]]
    if not live:
        return
    names = [e["capabilities"]["backend"] for e in live]
    reported = set().union(*(e["capabilities"]["features"] for e in live))
    feats = sorted(F.ALL_FEATURES | reported)
    print("\nFeatures:", file=out)
    print(
        format_table(
            ["feature", *names],
            [[f, *("yes" if f in e["capabilities"]["features"] else "-" for e in live)]
             for f in feats],
            indent="  ",
        ),
        file=out,
    )
    keys = list(F.LIMIT_KEYS) + sorted(
        set().union(*(e["capabilities"]["limits"] for e in live)) - set(F.LIMIT_KEYS)
    )
    print("\nLimits:", file=out)
    print(
        format_table(
            ["limit", *names],
            [[k, *(e["capabilities"]["limits"].get(k) for e in live)] for k in keys],
            align=["l", *("r" for _ in live)],
            indent="  ",
        ),
        file=out,
    )
    for e in live:
        details = {**e["details"], **e["capabilities"]["details"]}
        if details:
            print(f"\nDetails of {e['capabilities']['backend']}:", file=out)
            print(format_kv({k: details[k] for k in sorted(details)}, indent="  "), file=out)


def cmd_probe(args: argparse.Namespace, out: TextIO) -> int:
    report = probe_report()
    if args.json:
        doc = {"vyre_version": __version__, "backends": report}
        print(json.dumps(doc, indent=2, sort_keys=True, default=str), file=out)
    else:
        _print_probe(report, out)
    return EXIT_OK


# ----------------------------------------------------------------------------- demo


class DemoCaseLike(Protocol):
    """What `vyre.programs.demo.demo_cases()` yields (its DemoCase dataclass)."""

    @property
    def name(self) -> str: ...
    @property
    def run(self) -> Callable[[Backend], dict[str, np.ndarray]]: ...
    @property
    def tolerance(self) -> Callable[[str], Tolerance]: ...


@dataclass
class Outcome:
    """One case on one backend."""

    status: str  # "ref", "ok", "FAIL", "ERROR", "n/a" (unsupported), "no ref"
    ms: float | None = None
    detail: str = ""
    outputs: dict[str, np.ndarray] = field(default_factory=dict)

    @property
    def failed(self) -> bool:
        return self.status in ("FAIL", "ERROR")

    def cell(self) -> str:
        return self.status if self.ms is None else f"{self.status} {format_ms(self.ms)}"


def _load_demo_cases() -> list[DemoCaseLike]:
    from vyre.programs.demo import demo_cases  # lazy: the CLI must start without programs

    return list(demo_cases())


def _run_case(case: DemoCaseLike, backend: Backend, repeat: int) -> Outcome:
    """Run `case` on `backend`; time = best of `repeat` runs, outputs from the first."""
    outputs: dict[str, np.ndarray] | None = None
    best: float | None = None
    try:
        for _ in range(max(1, repeat)):
            t0 = time.perf_counter()
            got = case.run(backend)
            ms = (time.perf_counter() - t0) * 1e3
            best = ms if best is None else min(best, ms)
            if outputs is None:
                outputs = {k: np.asarray(v) for k, v in got.items()}
    except UnsupportedFeature as exc:
        return Outcome("n/a", None, str(exc))
    except Exception as exc:
        return Outcome("ERROR", None, f"{type(exc).__name__}: {exc}")
    return Outcome("ok", best, "", outputs or {})


def _describe_mismatch(got: np.ndarray, exp: np.ndarray, bad: np.ndarray, tol: Tolerance) -> str:
    g = got.reshape(-1)
    e = exp.reshape(-1)
    shown = ", ".join(f"[{i}] got {g[i]!r} expected {e[i]!r}" for i in bad[:4])
    more = "" if bad.size <= 4 else ", ..."
    return f"{bad.size} of {e.size} elements disagree ({tol}): {shown}{more}"


def compare(
    got: Mapping[str, np.ndarray], expected: Mapping[str, np.ndarray], tol: Tolerance
) -> list[str]:
    """Problems found comparing one backend's outputs with the reference's (empty if none)."""
    problems = []
    if set(got) != set(expected):
        problems.append(
            f"outputs differ: got {sorted(got)}, the reference gave {sorted(expected)}"
        )
    for name in sorted(set(got) & set(expected)):
        try:
            bad = mismatches(got[name], expected[name], tol)
        except AssertionError as exc:  # shape or dtype differ
            problems.append(f"{name!r}: {exc}")
            continue
        if bad.size:
            problems.append(
                f"{name!r}: {_describe_mismatch(got[name], expected[name], bad, tol)}"
            )
    return problems


def _availability_lines(avail: Sequence[registry.Availability]) -> str:
    if not avail:
        return "  (none registered)"
    rows = [[a.name, "yes" if a.available else "no", ", ".join(a.devices) or "-"] for a in avail]
    text = format_table(["backend", "available", "devices"], rows, indent="  ")
    missing = [f"  {a.name}: {a.reason or 'no reason given'}" for a in avail if not a.available]
    return text + ("\n\nUnavailable:\n" + "\n".join(missing) if missing else "")


def cmd_demo(args: argparse.Namespace, out: TextIO) -> int:
    bad = repeat_error(args.repeat)
    if bad:
        print(bad, file=out)
        return EXIT_USAGE
    avail = registry.available_backends()
    by_name = {a.name: a for a in avail}
    print(f"vyre {__version__} demo", file=out)
    print("\nBackends found:", file=out)
    print(_availability_lines(avail), file=out)

    if REFERENCE not in by_name or not by_name[REFERENCE].available:
        why = by_name[REFERENCE].reason if REFERENCE in by_name else "it is not registered"
        print(f"\nerror: the reference backend is needed as the oracle: {why}", file=out)
        return EXIT_USAGE

    if args.backend:
        specs: list[str] = []
        for spec in args.backend:
            name, _ = registry.parse_spec(spec)
            if name not in by_name:
                print(
                    f"\nerror: no backend named {name!r} is registered; known: {sorted(by_name)}",
                    file=out,
                )
                return EXIT_USAGE
            if not by_name[name].available:
                print(
                    f"\nerror: backend {name!r} was asked for but is unavailable here: "
                    f"{by_name[name].reason}",
                    file=out,
                )
                return EXIT_USAGE
            if spec not in specs:
                specs.append(spec)
    else:
        specs = [a.name for a in avail if a.available]
    others = [s for s in specs if s != REFERENCE]

    try:
        cases = _load_demo_cases()
    except ImportError as exc:
        print(f"\nerror: the demo programs could not be loaded: {exc!r}", file=out)
        return EXIT_USAGE
    if not cases:
        print("\nerror: vyre.programs.demo.demo_cases() returned no cases", file=out)
        return EXIT_FAILED

    failures: list[str] = []
    instances: dict[str, Backend] = {}
    columns: list[str] = []
    try:
        for spec in [REFERENCE, *others]:
            try:
                instances[spec] = registry.get_backend(spec)
                columns.append(spec)
            except Exception as exc:
                failures.append(f"backend {spec}: could not be created: {exc!r}")
        if REFERENCE not in instances:
            print(f"\nerror: {failures[0]}", file=out)
            return EXIT_FAILED

        ids = {spec: instances[spec].id for spec in columns}
        timing = (
            "times include compilation (use --repeat N for the best of N runs)"
            if args.repeat <= 1
            else f"times: best of {args.repeat} runs"
        )
        print(
            f"\nRunning {len(cases)} case(s) on {', '.join(ids[c] for c in columns)}"
            f" ({timing})\n",
            file=out,
        )
        rows = []
        for case in cases:
            ref = _run_case(case, instances[REFERENCE], args.repeat)
            if ref.status == "ok":
                ref.status = "ref"
            else:
                failures.append(f"{case.name} on {ids[REFERENCE]}: {ref.status}: {ref.detail}")
            row: list[str] = [case.name, ref.cell()]
            for spec in columns[1:]:
                b = instances[spec]
                if ref.status != "ref":
                    row.append("no ref")
                    continue
                res = _run_case(case, b, args.repeat)
                if res.status == "ok":
                    problems = compare(res.outputs, ref.outputs, case.tolerance(b.kind))
                    if problems:
                        res.status = "FAIL"
                        failures.extend(f"{case.name} on {b.id}: {p}" for p in problems)
                elif res.failed:
                    failures.append(f"{case.name} on {b.id}: {res.status}: {res.detail}")
                row.append(res.cell())
            rows.append(row)
        print(format_table(["case", *(ids[c] for c in columns)], rows), file=out)
    finally:
        for inst in instances.values():
            try:
                inst.close()
            except Exception as exc:  # report, but a close failure must not mask results
                failures.append(f"closing {inst.id} failed: {exc!r}")

    if failures:
        print(f"\n{len(failures)} problem(s):", file=out)
        for f in failures:
            print(f"  - {f}", file=out)
        return EXIT_FAILED
    checked = len(columns) - 1
    if checked:
        print(
            f"\nAll {len(cases)} case(s) agree with the reference on {checked} backend(s).",
            file=out,
        )
    else:
        print(
            f"\nAll {len(cases)} case(s) ran on the reference; no other backend is available "
            "to check (see `vyre probe`).",
            file=out,
        )
    return EXIT_OK


# ----------------------------------------------------------------------------- main


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="vyre",
        description="vyre: one Program IR, dispatched on CUDA, WebGPU or the NumPy reference.",
    )
    parser.add_argument("--version", action="version", version=f"vyre {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    p = sub.add_parser(
        "probe",
        help="report every registered backend: available or not (and why), device, "
        "features, limits",
    )
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.set_defaults(func=cmd_probe)

    d = sub.add_parser(
        "demo",
        help="run the demo programs on each available backend and check them against "
        "the reference",
    )
    d.add_argument(
        "--backend",
        action="append",
        metavar="NAME",
        help="a backend to check (repeatable; e.g. wgpu, cuda:1); default: every available one",
    )
    d.add_argument(
        "--repeat", type=int, default=1, metavar="N",
        help="run each case N times and report the best time (default 1)",
    )
    d.set_defaults(func=cmd_demo)

    from .bench.command import add_arguments as bench_arguments
    from .bench.command import cmd_bench

    bb = sub.add_parser(
        "bench",
        help="benchmark every available backend against the libraries you would use "
        "instead (CuPy, PyTorch, raw cuda-bindings, raw wgpu-py, NumPy); table, JSON, PNG",
    )
    bench_arguments(bb)
    bb.set_defaults(func=cmd_bench)

    from .certify import add_arguments as certify_arguments
    from .certify import cmd_certify

    cf = sub.add_parser(
        "certify",
        help="certify one adapter and driver: the conformance suite, the exact functions and "
        "the real-kernel suite, every disagreement reported; prints and saves the certificate",
    )
    certify_arguments(cf)
    cf.set_defaults(func=cmd_certify)

    from . import replay_cli

    rp = sub.add_parser("replay", help="rerun a saved dispatch (a replay file) and compare "
                        "its outputs bit for bit with the saved ones or another backend's")
    replay_cli.add_replay_arguments(rp)
    rp.set_defaults(func=replay_cli.cmd_replay)
    ck = sub.add_parser("check", help="run a saved dispatch on the reference in checked "
                        "mode: races, uninitialised reads, out-of-bounds, divergent barriers")
    replay_cli.add_check_arguments(ck)
    ck.set_defaults(func=replay_cli.cmd_check)
    return parser


def main(argv: Sequence[str] | None = None, out: TextIO | None = None) -> int:
    """Entry point of the `vyre` console script; returns the exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    func: Callable[[argparse.Namespace, TextIO], int] = args.func
    return func(args, out if out is not None else sys.stdout)


if __name__ == "__main__":
    sys.exit(main())
