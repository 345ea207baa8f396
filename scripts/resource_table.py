#!/usr/bin/env python3
"""Print the growth measured by tests/test_resources.py (VYRE_RESOURCE_REPORT JSON lines) as
a short table: per backend and case, the cycles run, their time, and how much Python memory,
RSS and device resources grew after warm-up. It only reads the file; it never runs work.

    scripts/resource_table.py gpu-check-out/resources.jsonl
"""

from __future__ import annotations

import json
import sys


def kib(n: int | None) -> str:
    return "-" if n is None else f"{n / 1024:+,.0f} KiB"


def main(path: str) -> int:
    with open(path) as f:
        rows = [json.loads(line) for line in f if line.strip()]
    print(f"{'backend':<10} {'device':<28} {'case':<20} {'cycles':>7} {'us/cycle':>9} "
          f"{'python':>11} {'rss':>12}  device growth")
    for r in rows:
        per = 1e6 * r["seconds"] / max(r["cycles"], 1)
        grown = ", ".join(f"{k} {v:+,}" for k, v in r["device_growth"].items()) or "none"
        print(f"{r['backend']:<10} {r['device'][:28]:<28} {r['case']:<20} {r['cycles']:>7} "
              f"{per:>9.0f} {kib(r['python_bytes']):>11} {kib(r['rss_bytes']):>12}  {grown}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
