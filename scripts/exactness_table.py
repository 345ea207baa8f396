#!/usr/bin/env python3
"""The exactness table of an H100 (or any) run: per suite and backend, cases run and
disagreements with the reference.

    python3 scripts/exactness_table.py --junit out/exactness.xml --fuzz-log out/fuzz.log

Reads a pytest JUnit XML file (the conformance, regression and real-kernel tests, run with
`--junitxml`) and the log of `scripts/fuzz_long.py`. A test case belongs to the backend
named in its parameter id (`[...-wgpu]`, `[cuda]`, ...) and to a suite by its file; a
failed or erroring case counts as a disagreement. It only reads and prints: it must never
run a backend, and never count a skipped case as agreeing.
"""

from __future__ import annotations

import argparse
import re
import sys
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path

BACKENDS = ("cuda", "wgpu", "reference")
# suite name -> file-name fragments of its tests
SUITES = {
    "conformance": ("conformance", "semantics", "regressions", "exactness"),
    "real kernels": ("realkernel",),
}


def _suite(classname: str, file: str) -> str | None:
    where = f"{file} {classname}".lower()
    for suite, frags in SUITES.items():
        if any(f in where for f in frags):
            return suite
    return None


def _backend(name: str, where: str) -> str | None:
    """From the parameter id, else from a backend-specific test file's name."""
    m = re.search(r"\[(.*)\]$", name)
    tokens = re.split(r"[-_:,\s]", m.group(1).lower()) if m else []
    for b in BACKENDS:
        if b in tokens:
            return b
    for b in BACKENDS:
        if f"test_{b}_" in where.lower() or f"test_{b}." in where.lower():
            return b
    return None


def junit_rows(path: Path) -> dict[tuple[str, str], Counter[str]]:
    rows: dict[tuple[str, str], Counter[str]] = {}
    for case in ET.parse(path).getroot().iter("testcase"):
        suite = _suite(case.get("classname", ""), case.get("file", ""))
        backend = _backend(case.get("name", ""),
                           f"{case.get('file', '')} {case.get('classname', '')}")
        if suite is None or backend is None:
            continue
        c = rows.setdefault((suite, backend), Counter())
        if case.find("skipped") is not None:
            c["skipped"] += 1
        elif case.find("failure") is not None or case.find("error") is not None:
            c["run"] += 1
            c["disagree"] += 1
        else:
            c["run"] += 1
    return rows


def fuzz_rows(path: Path) -> dict[tuple[str, str], Counter[str]]:
    """From fuzz_long's log: '[fuzz] <id>: N examples, Ts' and one line per failing batch."""
    rows: dict[tuple[str, str], Counter[str]] = {}
    examples: dict[str, int] = {}
    failing: Counter[str] = Counter()
    for line in path.read_text(errors="replace").splitlines():
        m = re.match(r"\[fuzz\] (\S+): (\d+) examples", line)
        if m:
            examples[m.group(1)] = int(m.group(2))
            continue
        m = re.match(r"\[fuzz\] (\S+): (?!unavailable)(.+)", line)
        if m and not m.group(1).startswith("done"):
            failing[m.group(1)] += 1
    for bid, n in examples.items():
        kind = bid.split(":")[0]
        rows[("fuzz (random programs)", kind)] = Counter(run=n, disagree=failing[bid])
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--junit", action="append", default=[], type=Path)
    ap.add_argument("--fuzz-log", action="append", default=[], type=Path)
    args = ap.parse_args(argv)
    rows: dict[tuple[str, str], Counter[str]] = {}
    for p in args.junit:
        if p.exists():
            for k, v in junit_rows(p).items():
                rows.setdefault(k, Counter()).update(v)
    for p in args.fuzz_log:
        if p.exists():
            for k, v in fuzz_rows(p).items():
                rows.setdefault(k, Counter()).update(v)
    print(f"{'suite':<24} {'backend':<10} {'cases':>7} {'disagree':>9} {'skipped':>8}")
    bad = 0
    for (suite, backend), c in sorted(rows.items()):
        print(f"{suite:<24} {backend:<10} {c['run']:>7} {c['disagree']:>9} {c['skipped']:>8}")
        bad += c["disagree"]
    if not rows:
        print("(nothing to count: no JUnit file or fuzz log given or found)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
