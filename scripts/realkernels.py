"""Run the real-kernel suite (vyre/tools/realkernels: Rodinia, PolyBench/C and CUDA Samples
kernels ported with vyre's builder) on every available backend and print, per kernel and
backend, the outputs compared with the gcc-compiled C and how many disagree bit for bit; on
a disagreement, the first differing index and both values.

    python scripts/realkernels.py [--backend NAME ...] [--kernel NAME ...]
                                  [--suite Rodinia|PolyBench|... ...] [--large] [--json FILE]

--large runs the kernels that have a larger problem (LARGE_ARGS: deriche at MEDIUM,
backprop at 65,536 inputs, lavaMD at 10^3 boxes of 100, Black-Scholes at 4M options, the
float histogram at 4M samples) at that size: meant for a GPU (the reference would take
hours). Exit status 1 when any output disagrees or a port fails. Needs no C compiler (the
C outputs are shipped in vyre/tools/realkernels/data/; at the larger size, their SHA-256:
with gcc present the C is run here and compared element by element).
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
from vyre.tools.realkernels.check import GCC, check_kernel, missing_features  # noqa: E402
from vyre.tools.realkernels.suite import KERNELS  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backend", action="append", help="backend name (default: every available)")
    ap.add_argument("--kernel", action="append", choices=sorted(KERNELS), help="default: all")
    ap.add_argument("--suite", action="append", choices=sorted({k.suite for k in KERNELS.values()}),
                    help="only this suite's kernels (default: all)")
    ap.add_argument("--large", action="store_true",
                    help="the larger problems (LARGE_ARGS) of the kernels that have one")
    ap.add_argument("--json", type=Path, help="also write the rows as JSON here")
    a = ap.parse_args(argv)
    names = a.backend or [b.name for b in vyre.available_backends() if b.available]
    kernels = a.kernel or [n for n, k in KERNELS.items() if not a.suite or k.suite in a.suite]
    if a.large:
        without = [n for n in kernels if KERNELS[n].large_args is None]
        if a.kernel and without:
            ap.error(f"{without} have no larger problem (LARGE_ARGS)")
        kernels = [n for n in kernels if n not in without]
    rows: list[dict[str, object]] = []
    failed = False
    reference = vyre.get_backend("reference")  # the IR's flush mode, for a flushing backend
    print(f"{'kernel':<16} {'suite':<12} {'backend':<10} {'outputs':>8} {'disagree':>9} "
          f"{'seconds':>8}  note")
    for bname in names:
        try:
            opened = vyre.get_backend(bname)
        except Exception as exc:  # an unavailable backend is a row, not a crash
            print(f"{'*':<16} {'*':<12} {bname:<10} {0:>8} {'-':>9} {0:>8.2f}  ERROR {exc}"
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
                missing = missing_features(KERNELS[kname], backend)
                try:
                    if missing:  # a documented capability limit, reported as such
                        note = f"skipped: {bname} does not report {missing}"
                        row.update(outputs=0, disagreements=0, skipped=note)
                    else:
                        res = check_kernel(KERNELS[kname], backend, a.large, reference)
                        cmp = res.comparison
                        note = cmp.first or ""
                        if res.against != GCC:
                            note = (f"{res.flush_explained} outputs differ from gcc's IEEE "
                                    f"bits; compared with {res.against} {note}")
                        row.update(outputs=cmp.compared, disagreements=cmp.disagreements,
                                   first=cmp.first, against=res.against)
                except Exception as exc:  # report and go on: the table is the point
                    note = f"ERROR {type(exc).__name__}: {exc}".splitlines()[0][:200]
                    row.update(outputs=0, disagreements=None, error=note)
                secs = time.perf_counter() - t0
                row["seconds"] = round(secs, 3)
                failed |= row["disagreements"] != 0
                rows.append(row)
                dis = "-" if row["disagreements"] is None else row["disagreements"]
                print(f"{kname:<16} {suite:<12} {bname:<10} {row['outputs']:>8} {dis:>9} "
                      f"{secs:>8.2f}  {note}", flush=True)  # a run cut short still shows rows
    reference.close()
    if a.json:
        a.json.write_text(json.dumps(rows, indent=1) + "\n")
    total = sum(int(r["outputs"]) for r in rows)  # type: ignore[call-overload]
    bad = sum(int(r["disagreements"] or 0) for r in rows)  # type: ignore[call-overload]
    print(f"total: {len(rows)} runs, {total} outputs compared, {bad} disagreements"
          + ("" if not failed else "  (FAILED)"))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
