"""The `vyre bench` subcommand: arguments, running the suite, writing the outputs.

Prints the tables to the command's output stream and the progress bar to stderr; writes
bench.json (every number and the machine description), the generated device sources and,
where matplotlib is installed, bench.png into --out. Exits 1 when any check failed or any
implementation raised, 2 for bad arguments. This module must never hide a failed check
behind a zero exit status.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TextIO

from vyre import registry
from vyre.tools.probe import probe_report, repeat_error

from . import workloads as W
from .functions import FUNCTIONS
from .plot import plot
from .report import text_report, write_json, write_sources
from .suite import Options, failures, run_suite

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--quick", action="store_true",
                   help="small sizes and few repetitions (under a minute on a CPU-only "
                        "machine); for smoke tests, not for numbers")
    p.add_argument("--backend", action="append", metavar="NAME",
                   help="a vyre backend to bench (repeatable; e.g. cuda, wgpu, reference, "
                        "cuda:1); default: every available one")
    p.add_argument("--workloads", metavar="LIST",
                   help=f"comma-separated subset of: {','.join(W.WORKLOADS)} (default: all)")
    p.add_argument("--out", metavar="DIR", default="vyre-bench",
                   help="directory for bench.json, bench.png and sources/ (default: "
                        "./vyre-bench)")
    p.add_argument("--no-peers", action="store_true",
                   help="bench vyre only (skip CuPy, PyTorch, raw cuda-bindings, raw wgpu-py, "
                        "NumPy)")
    p.add_argument("--functions", metavar="LIST",
                   help="the transcendental workload's functions, comma-separated, of: "
                        f"{','.join(FUNCTIONS)} (default: all; with --quick: "
                        f"{','.join(W.QUICK_FUNCTIONS)})")
    p.add_argument("--repeat", type=int, metavar="N",
                   help="timed repetitions per figure (default: by workload and mode)")


def _specs(args: argparse.Namespace, out: TextIO) -> list[str] | None:
    avail = {a.name: a for a in registry.available_backends()}
    if not args.backend:
        return [name for name, a in avail.items() if a.available]
    specs: list[str] = []
    for spec in args.backend:
        name, _ = registry.parse_spec(spec)
        if name not in avail:
            print(f"error: no backend named {name!r} is registered; known: {sorted(avail)}",
                  file=out)
            return None
        if not avail[name].available:
            print(f"error: backend {name!r} was asked for but is unavailable here: "
                  f"{avail[name].reason} (see `vyre probe`)", file=out)
            return None
        if spec not in specs:
            specs.append(spec)
    return specs


def _chosen(given: str | None, known: tuple[str, ...], what: str, out: TextIO
            ) -> list[str] | None:
    """The names a comma-separated option (--workloads, --functions) picks, all of `known`
    when not given, or None after an error naming the choices ('' must not mean all)."""
    if given is None:
        return list(known)
    names = [w.strip() for w in given.split(",") if w.strip()]
    unknown = [w for w in names if w not in known]
    if unknown or not names:
        why = f"unknown {what}(s) {unknown}" if unknown else f"--{what}s names none"
        print(f"error: {why}; choose from {','.join(known)} (omit --{what}s for all)",
              file=out)
        return None
    return names


def cmd_bench(args: argparse.Namespace, out: TextIO) -> int:
    known = (*W.WORKLOADS, MULTI_GPU)
    workloads = _chosen(args.workloads, known, "workload", out)
    if workloads is None:
        return EXIT_USAGE
    # multi_gpu spans every CUDA device of the host, not one backend: run on its own after
    # the per-backend suite (vyre.tools.bench.multi_gpu; skipped with the reason on one GPU)
    multi_gpu = MULTI_GPU in workloads
    workloads = [w for w in workloads if w != MULTI_GPU]
    functions = None  # (all; --quick: W.QUICK_FUNCTIONS)
    if args.functions is not None:
        functions = _chosen(args.functions, tuple(FUNCTIONS), "function", out)
        if functions is None:
            return EXIT_USAGE
    refused = repeat_error(args.repeat)
    if refused:
        print(refused, file=out)
        return EXIT_USAGE
    if not args.out.strip():
        print("error: --out is empty; name the directory for the results (default "
              "./vyre-bench)", file=out)
        return EXIT_USAGE
    specs = _specs(args, out)
    if specs is None:
        return EXIT_USAGE
    if not specs:
        print("error: no backend is available (see `vyre probe`)", file=out)
        return EXIT_USAGE
    out_dir = Path(args.out)
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        probe_file = out_dir / ".vyre-bench-write-test"
        probe_file.write_bytes(b"0" * 4096)  # unwritable or full: find out before the run
        probe_file.unlink()
    except OSError as exc:
        print(f"error: cannot write to the output directory {str(out_dir)!r}: {exc}; "
              "choose a writable directory with free space (--out DIR)", file=out)
        return EXIT_USAGE

    if not workloads:  # multi_gpu alone
        return _multi_gpu_only(args, out, out_dir)
    opts = Options(backends=specs, workloads=workloads, quick=args.quick,
                   peers=not args.no_peers, repeat=args.repeat, functions=functions)
    print(f"vyre bench: backends {', '.join(specs)}; workloads {', '.join(workloads)}"
          f"{' (quick)' if args.quick else ''}; progress on stderr", file=out)
    out.flush()
    probe = probe_report()
    doc = run_suite(opts, probe, specs, sys.stderr)
    if multi_gpu:
        from . import multi_gpu as MG

        doc["multi_gpu"] = MG.run(args.quick)

    png = out_dir / "bench.png"
    try:
        source_files = write_sources(doc, out_dir)
        skipped = plot(doc, png)
        doc["artifacts"] = {
            "json": str(out_dir / "bench.json"),
            "png": None if skipped else str(png),
            "png_skipped": skipped,
            "sources": source_files,
        }
        write_json(doc, out_dir / "bench.json")
    except OSError as exc:
        print(text_report(doc), file=out)
        print(f"\nerror: writing the results to {str(out_dir)!r} failed: {exc}; the figures "
              "above are complete. Free space or choose another directory (--out DIR) and "
              "run again", file=out)
        return EXIT_FAILED
    print(text_report(doc), file=out)
    if multi_gpu:
        from . import multi_gpu as MG

        print("\n" + MG.text(doc["multi_gpu"]), file=out)
    print("", file=out)
    print(f"JSON: {out_dir / 'bench.json'}", file=out)
    print(f"Generated sources: {out_dir / 'sources'} ({len(source_files)} files)", file=out)
    if skipped:
        print(f"PNG chart skipped: {skipped}", file=out)
    else:
        print(f"PNG chart: {png}", file=out)
    bad = failures(doc) + [r for r in doc.get("multi_gpu", {}).get("rows", [])
                           if not r["checked"]]
    if bad:
        print(f"\n{len(bad)} figure(s) failed their check or raised; see Problems above.",
              file=out)
        return EXIT_FAILED
    return EXIT_OK


MULTI_GPU = "multi_gpu"


def _multi_gpu_only(args: argparse.Namespace, out: TextIO, out_dir: Path) -> int:
    """`--workloads multi_gpu`: that benchmark alone, its figures in bench.json."""
    from . import multi_gpu as MG

    doc = {"multi_gpu": MG.run(args.quick)}
    write_json(doc, out_dir / "bench.json")
    print(MG.text(doc["multi_gpu"]), file=out)
    print(f"\nJSON: {out_dir / 'bench.json'}", file=out)
    return EXIT_FAILED if any(not r["checked"] for r in doc["multi_gpu"]["rows"]) else EXIT_OK
