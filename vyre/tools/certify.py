"""`vyre certify`: a certificate for one adapter and driver, so a user knows before a long run
that they keep vyre's promise (one Program, the same bits on every backend).

It runs three parts on one backend and prints and saves (JSON) a short report: the vyre
version, the adapter, its driver, the flush mode, the cases run and every disagreement.

- conformance: every case of vyre.tools.conformance, compared with the reference backend
  (in the adapter's float mode) under docs/IR.md's rules, and the reference with the
  values docs/IR.md defines;
- functions: vyre's exact functions (exp ... atan2) on a sample of f32 arguments (or, with
  --exhaustive, every one; random pairs for pow, hypot, atan2), bit for bit against the
  correctly rounded oracle vyre.tools.function_oracle (Python's decimal, not vyre's code);
  in flush mode, results next to the smallest normal against the reference in that mode;
- kernels: the real-kernel suite (vyre.tools.realkernels: Rodinia, PolyBench/C, CUDA
  Samples ports) bit for bit against the outputs gcc computed, shipped with vyre (no
  compiler is needed); in flush mode, where gcc's IEEE bits differ, the reference in that
  mode.

A part that cannot run a case on this backend (a feature it does not report) lists it as
skipped, with the reason; nothing is skipped silently. This module must never loosen a
comparison, never report a backend it could not open as certified, and never return a
zero exit status for a certificate with a disagreement or an error.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any, TextIO, TypeVar

import numpy as np

from vyre import __version__, registry
from vyre.errors import UnsupportedFeature
from vyre.interface import Backend

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
PARTS = ("conformance", "functions", "kernels")
COMPARED_WITH = {
    "conformance": "the reference backend in the adapter's float mode (docs/IR.md's "
                   "comparison rules), and the reference with docs/IR.md's values",
    "functions": "the correctly rounded oracle vyre.tools.function_oracle (Python's decimal, "
                 "not vyre's code), bit for bit; in flush mode, results next to the smallest "
                 "normal with the reference in that mode",
    "kernels": "the outputs gcc computed (IEEE, correctly rounded expf/logf/powf), shipped "
               "with vyre in vyre/tools/realkernels/data, bit for bit; in flush mode, where "
               "gcc's bits differ, the reference in that mode",
}
SHOWN = 20  # disagreements listed per part in the printed report (all are in the JSON)
T = TypeVar("T")


@dataclass
class Part:
    """One part of the certificate."""

    name: str
    compared_with: str
    run: int = 0  # cases run and compared (functions: arguments)
    skipped: list[str] = field(default_factory=list)  # "case: why"
    disagreements: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    seconds: float = 0.0
    details: dict[str, Any] = field(default_factory=dict)

    def attempt(self, name: str, call: Callable[[], T]) -> T | None:
        """call()'s result, or None with the reason recorded: UnsupportedFeature (a
        documented capability limit) as skipped, any other exception as an error."""
        try:
            return call()
        except UnsupportedFeature as exc:
            self.skipped.append(f"{name}: {_first_line(exc)}")
        except Exception as exc:
            self.errors.append(f"{name}: {type(exc).__name__}: {_first_line(exc)}")
        return None


# --------------------------------------------------------------------------- the parts


def conformance_part(backend: Backend, reference: Backend,
                     names: Sequence[str] | None = None) -> Part:
    from vyre.tools.conformance import CASES, check_case, unsupported_reason

    part = Part("conformance", COMPARED_WITH["conformance"])
    for name in names or sorted(CASES):
        case = CASES[name]
        why = unsupported_reason(case, backend)
        if why is not None:
            part.skipped.append(f"{name}: {why}")
            continue

        outcome = part.attempt(name, partial(_disagreement, check_case, case, backend,
                                             reference))
        if outcome is not None:
            part.run += 1
            if outcome:
                part.disagreements.append(f"{name}: {outcome}")
    return part


def functions_part(backend: Backend, reference: Backend, functions: Sequence[str],
                   sample_size: int, exhaustive: bool, pairs: int, seed: int,
                   workers: int) -> Part:
    from vyre.tools.function_check import check_function

    part = Part("functions", COMPARED_WITH["functions"])
    part.details.update(mode="every f32 argument (pairs: random)" if exhaustive
                        else f"a sample of {sample_size} random arguments after the "
                        "special values", functions={})
    for fn in functions:
        report = part.attempt(fn, partial(
            check_function, backend, fn, exhaustive=exhaustive, sample_size=sample_size,
            pairs=pairs, seed=seed, reference=reference, workers=workers))
        if report is None:
            continue
        part.run += report.checked
        part.details["functions"][fn] = report.as_dict()
        if report.bad:
            part.disagreements.append(report.line())
            part.disagreements.extend(f"  {e}" for e in report.examples[:5])
    return part


def kernels_part(backend: Backend, reference: Backend, names: Sequence[str] | None
                 ) -> Part:
    from vyre.tools.realkernels.check import GCC, check_kernel, missing_features
    from vyre.tools.realkernels.suite import KERNELS

    part = Part("kernels", COMPARED_WITH["kernels"])
    outputs = 0
    for name in names or list(KERNELS):
        kernel = KERNELS[name]
        missing = missing_features(kernel, backend)
        if missing:
            part.skipped.append(f"{name}: {backend.id} does not report {missing}")
            continue
        res = part.attempt(name, partial(check_kernel, kernel, backend, reference=reference))
        if res is None:
            continue
        part.run += 1
        outputs += res.comparison.compared
        if res.against != GCC:
            part.details.setdefault("flush_mode", []).append(
                f"{name}: {res.flush_explained} outputs differ from gcc's IEEE bits; "
                f"compared with {res.against}")
        if res.comparison.disagreements:
            part.disagreements.append(
                f"{name}: {res.comparison.disagreements} of {res.comparison.compared} outputs "
                f"differ from {res.against}; first: {res.comparison.first}")
    part.details["outputs_compared"] = outputs
    return part


def _disagreement(check: Callable[..., None], *args: Any) -> str:
    """"" if check(*args) passes, else the first line of the AssertionError it raised."""
    try:
        check(*args)
    except AssertionError as exc:
        return _first_line(exc)
    return ""


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip() or repr(exc)
    return text.splitlines()[0][:500]


# --------------------------------------------------------------------------- the certificate


def adapter_description(backend: Backend, availability: registry.Availability | None
                        ) -> dict[str, Any]:
    """What the certificate says about the adapter: its name, driver, float modes."""
    caps = backend.capabilities()
    details = {**(availability.details if availability else {}), **caps.details}
    driver = [str(details[k]) for k in ("description", "driver_version", "driver")
              if details.get(k)]
    if details.get("nvrtc_version"):
        driver.append(f"NVRTC {details['nvrtc_version']}")
    kind = [str(details[k]) for k in ("backend_type", "adapter_type", "vendor")
            if details.get(k)]
    return {
        "backend": backend.id,
        "kind": caps.kind,
        "adapter": caps.device,
        "driver": ", ".join(driver) or "not reported",
        "adapter_kind": ", ".join(kind) or "-",
        "flushes_subnormals": list(details.get("flushes_subnormals", [])),
        "flush_tininess": details.get("flush_tininess", "-"),
        "f32_div_sqrt": details.get("f32_div_sqrt", "-"),
        "features": sorted(caps.features),
    }


def certify(backend: Backend, reference: Backend, *, availability: registry.Availability |
            None = None, parts: Sequence[str] = PARTS, functions: Sequence[str] | None = None,
            sample_size: int = 4096, exhaustive: bool = False, pairs: int = 1 << 28,
            seed: int = 2026, workers: int = 1, cases: Sequence[str] | None = None,
            kernels: Sequence[str] | None = None,
            progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Run the parts on `backend` and return the certificate (a JSON-able dict)."""
    from vyre.tools.function_check import FUNCTIONS

    doc: dict[str, Any] = {
        "certificate": "vyre adapter certificate",
        "vyre_version": __version__,
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
        "host": {"python": platform.python_version(), "numpy": np.__version__,
                 "platform": platform.platform()},
        **adapter_description(backend, availability),
        "parts": {},
    }
    runners: dict[str, Callable[[], Part]] = {
        "conformance": lambda: conformance_part(backend, reference, cases),
        "functions": lambda: functions_part(backend, reference, functions or FUNCTIONS,
                                            sample_size, exhaustive, pairs, seed, workers),
        "kernels": lambda: kernels_part(backend, reference, kernels),
    }
    for name in parts:
        if progress is not None:
            progress(name)
        t = time.perf_counter()
        part = runners[name]()
        part.seconds = round(time.perf_counter() - t, 2)
        doc["parts"][name] = asdict(part)
    doc["cases_run"] = {name: p["run"] for name, p in doc["parts"].items()}
    doc["disagreements"] = sum(len([d for d in p["disagreements"] if not d.startswith("  ")])
                               for p in doc["parts"].values())
    doc["errors"] = sum(len(p["errors"]) for p in doc["parts"].values())
    doc["skipped"] = sum(len(p["skipped"]) for p in doc["parts"].values())
    doc["verdict"] = ("keeps the promise" if not doc["disagreements"] and not doc["errors"]
                      else "DISAGREES" if doc["disagreements"] else "ERRORS")
    return doc


def format_certificate(doc: dict[str, Any], saved: Path | None = None) -> str:
    from .report import format_table

    lines = [
        f"vyre {doc['vyre_version']} certificate: {doc['backend']} ({doc['adapter']})",
        f"  driver:        {doc['driver']} ({doc['adapter_kind']})",
        "  flush mode:    " + (f"{', '.join(doc['flushes_subnormals'])} subnormals flush "
                               f"(tininess: {doc['flush_tininess']})"
                               if doc["flushes_subnormals"] else "none (IEEE subnormals)"),
        f"  f32 div/sqrt:  {doc['f32_div_sqrt']}",
        f"  created:       {doc['created']}",
        "",
    ]
    rows = []
    for name, p in doc["parts"].items():
        run = (f"{p['run']} arguments, {len(p['details'].get('functions', {}))} functions"
               if name == "functions" else
               f"{p['run']} kernels, {p['details'].get('outputs_compared', 0)} outputs"
               if name == "kernels" else f"{p['run']} cases")
        rows.append([name, run, len(p["skipped"]),
                     len([d for d in p["disagreements"] if not d.startswith("  ")]),
                     len(p["errors"]), f"{p['seconds']:.1f}"])
    lines.append(format_table(["part", "run", "skipped", "disagree", "errors", "seconds"],
                              rows, align=["l", "l", "r", "r", "r", "r"]))
    for name, p in doc["parts"].items():
        lines.append(f"\n{name}: compared with {p['compared_with']}.")
        if name == "functions" and p["details"].get("mode"):
            lines.append(f"  ({p['details']['mode']})")
        for title, items in (("DISAGREE", p["disagreements"]), ("ERROR", p["errors"]),
                             ("skipped", p["skipped"]),
                             ("flush mode", p["details"].get("flush_mode", []))):
            for item in items[:SHOWN]:
                lines.append(f"  {title}: {item}")
            if len(items) > SHOWN:
                lines.append(f"  ... {len(items) - SHOWN} more {title} lines in the JSON")
    verdict = doc["verdict"]
    unit = {"conformance": "conformance cases", "functions": "function arguments",
            "kernels": "kernels"}
    ran = ", ".join(f"{n} {unit[p]}" for p, n in doc["cases_run"].items())
    lines.append("")
    if verdict == "keeps the promise":
        lines.append(f"verdict: {doc['backend']} keeps the promise: {ran}; 0 disagreements "
                     f"({doc['skipped']} skipped, each with its reason above)")
    else:
        lines.append(f"verdict: {verdict}: {doc['disagreements']} disagreement(s), "
                     f"{doc['errors']} error(s) on {doc['backend']} in {ran}")
    if saved is not None:
        lines.append(f"saved: {saved}")
    return "\n".join(lines)


# --------------------------------------------------------------------------- the command


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--backend", metavar="NAME", required=True,
                   help="the adapter to certify, as vyre.get_backend takes it (wgpu, cuda:1, "
                        "reference)")
    p.add_argument("--parts", default=",".join(PARTS),
                   help=f"which parts to run (default {','.join(PARTS)})")
    p.add_argument("--functions", metavar="LIST", help="exact functions to check (default all)")
    p.add_argument("--sample", type=int, default=4096, metavar="N",
                   help="random f32 arguments per function (default 4096), after the specials")
    p.add_argument("--exhaustive", action="store_true",
                   help="every f32 argument of the one-argument functions and --pairs random "
                        "pairs of the others (hours: meant for a GPU)")
    p.add_argument("--pairs", type=int, default=1 << 28, metavar="N",
                   help="random pairs per two-argument function with --exhaustive (2^28)")
    p.add_argument("--cases", metavar="LIST", help="conformance cases (default all)")
    p.add_argument("--kernels", metavar="LIST", help="real kernels (default all)")
    p.add_argument("--seed", type=int, default=2026)
    p.add_argument("--workers", type=int, default=max(1, (os.cpu_count() or 2) - 1),
                   help="threads checking function results against the oracle")
    p.add_argument("--out", type=Path, metavar="FILE",
                   help="where to save the certificate (JSON; default "
                        "vyre-certificate-<backend>-<time>.json here)")
    p.add_argument("--json", action="store_true", help="print the certificate as JSON")


def _names(given: str | None, known: Sequence[str], what: str) -> list[str] | str | None:
    """The comma-separated `given` names, or an error message naming the unknown ones."""
    if not given:
        return None
    names = [n for n in given.split(",") if n]
    unknown = [n for n in names if n not in known]
    if unknown:
        return f"unknown {what} {unknown}; the {what} are {sorted(known)}"
    return names


def cmd_certify(args: argparse.Namespace, out: TextIO) -> int:
    from vyre.tools.conformance import CASES
    from vyre.tools.function_check import FUNCTIONS
    from vyre.tools.realkernels.suite import KERNELS

    avail = {a.name: a for a in registry.available_backends()}
    name, _ = registry.parse_spec(args.backend)
    problem = None
    if name not in avail:
        problem = f"no backend named {name!r} is registered; known: {sorted(avail)}"
    elif not avail[name].available:
        problem = (f"backend {name!r} is not available here: {avail[name].reason} "
                   "(`vyre probe` lists the backends and why)")
    elif "reference" not in avail or not avail["reference"].available:
        problem = "the reference backend, which the certificate compares with, is not available"
    parts = [p for p in args.parts.split(",") if p]
    if problem is None and (bad := sorted(set(parts) - set(PARTS))):
        problem = f"unknown parts {bad}; the parts are {list(PARTS)}"
    if problem is None and args.sample < 1:
        problem = f"--sample must be at least 1, got {args.sample}"
    chosen = {k: _names(v, known, what) for k, v, known, what in (
        ("functions", args.functions, FUNCTIONS, "functions"),
        ("cases", args.cases, sorted(CASES), "conformance cases"),
        ("kernels", args.kernels, list(KERNELS), "kernels"))}
    problem = problem or next((v for v in chosen.values() if isinstance(v, str)), None)
    if problem is not None:
        print(f"error: {problem}", file=out)
        return EXIT_USAGE
    try:
        backend = registry.get_backend(args.backend)
    except Exception as exc:
        print(f"error: backend {args.backend!r} could not be opened: {_first_line(exc)}",
              file=out)
        return EXIT_USAGE
    try:
        with registry.get_backend("reference") as reference:
            print(f"certifying {backend.id} ({backend.capabilities().device}): "
                  f"{', '.join(parts)}", file=out, flush=True)
            doc = certify(backend, reference, availability=avail[name], parts=parts,
                          sample_size=args.sample, exhaustive=args.exhaustive,
                          pairs=args.pairs, seed=args.seed, workers=args.workers,
                          progress=lambda p: print(f"  running {p} ...", file=out, flush=True),
                          **{k: v for k, v in chosen.items() if not isinstance(v, str)})
    finally:
        backend.close()
    path = args.out or Path(f"vyre-certificate-{re.sub(r'[^A-Za-z0-9_.-]+', '_', doc['backend'])}"
                            f"-{doc['created'][:19].replace(':', '')}.json")
    path.write_text(json.dumps(doc, indent=1) + "\n")
    if args.json:
        print(json.dumps(doc, indent=1), file=out)
    else:
        print(format_certificate(doc, path), file=out)
    return EXIT_OK if doc["verdict"] == "keeps the promise" else EXIT_FAILED


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="vyre certify", description=__doc__.splitlines()[0])
    add_arguments(p)
    return cmd_certify(p.parse_args(argv), sys.stdout)


if __name__ == "__main__":
    sys.exit(main())
