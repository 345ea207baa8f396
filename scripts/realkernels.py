"""Run the real-kernel suite (vyre/tools/realkernels: Rodinia and PolyBench/C kernels ported with
vyre's builder) on every available backend and print, per kernel and backend, the outputs
compared with the gcc-compiled C and how many disagree bit for bit; on a disagreement, the
first differing index and both values.

    python scripts/realkernels.py [--backend NAME ...] [--kernel NAME ...]
                                  [--suite Rodinia|PolyBench ...] [--json FILE]

Exit status 1 when any output disagrees or a port fails. Needs no C compiler (the C
outputs are shipped in vyre/tools/realkernels/data/).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import vyre  # noqa: E402
from vyre.tools.realkernels.compare import Comparison, compare  # noqa: E402
from vyre.tools.realkernels.suite import KERNELS  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backend", action="append", help="backend name (default: every available)")
    ap.add_argument("--kernel", action="append", choices=sorted(KERNELS), help="default: all")
    ap.add_argument("--suite", action="append", choices=sorted({k.suite for k in KERNELS.values()}),
                    help="only this suite's kernels (default: all)")
    ap.add_argument("--json", type=Path, help="also write the rows as JSON here")
    a = ap.parse_args(argv)
    names = a.backend or [b.name for b in vyre.available_backends() if b.available]
    kernels = a.kernel or [n for n, k in KERNELS.items() if not a.suite or k.suite in a.suite]
    rows: list[dict[str, object]] = []
    failed = False
    print(f"{'kernel':<14} {'suite':<9} {'backend':<10} {'outputs':>8} {'disagree':>9} "
          f"{'seconds':>8}  note")
    for bname in names:
        try:
            opened = vyre.get_backend(bname)
        except Exception as exc:  # an unavailable backend is a row, not a crash
            print(f"{'*':<14} {'*':<9} {bname:<10} {0:>8} {'-':>9} {0:>8.2f}  ERROR {exc}"
                  .splitlines()[0])
            rows.append({"kernel": "*", "backend": bname, "outputs": 0, "disagreements": None,
                         "error": str(exc)})
            failed = True
            continue
        with opened as backend:
            device = backend.capabilities().device
            for kname in kernels:
                t0 = time.perf_counter()
                suite = KERNELS[kname].suite
                row: dict[str, object] = {"kernel": kname, "suite": suite, "backend": bname,
                                          "device": str(device)}
                try:
                    cmp: Comparison = compare(KERNELS[kname].port(backend), KERNELS[kname].expected())
                    note = cmp.first or ""
                    row.update(outputs=cmp.compared, disagreements=cmp.disagreements,
                               first=cmp.first)
                except Exception as exc:  # report and go on: the table is the point
                    note = f"ERROR {type(exc).__name__}: {exc}".splitlines()[0][:200]
                    row.update(outputs=0, disagreements=None, error=note)
                secs = time.perf_counter() - t0
                row["seconds"] = round(secs, 3)
                failed |= row["disagreements"] != 0
                rows.append(row)
                dis = "-" if row["disagreements"] is None else row["disagreements"]
                print(f"{kname:<14} {suite:<9} {bname:<10} {row['outputs']:>8} {dis:>9} "
                      f"{secs:>8.2f}  {note}", flush=True)  # a run cut short still shows rows
    if a.json:
        a.json.write_text(json.dumps(rows, indent=1) + "\n")
    total = sum(int(r["outputs"]) for r in rows)  # type: ignore[call-overload]
    bad = sum(int(r["disagreements"] or 0) for r in rows)  # type: ignore[call-overload]
    print(f"total: {len(rows)} runs, {total} outputs compared, {bad} disagreements"
          + ("" if not failed else "  (FAILED)"))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
