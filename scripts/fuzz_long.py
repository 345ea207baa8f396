#!/usr/bin/env python3
"""Long differential-fuzzing runs (e.g. on the H100 machine): many more examples than CI.

    .venv/bin/python scripts/fuzz_long.py --examples 20000 --minutes 60
    .venv/bin/python scripts/fuzz_long.py --backends cuda --types i32,u32,f32

Runs vyre.tools.fuzz against every available backend (or those named), batch after batch with
fresh random seeds, until the example count or the time budget is spent. Every shrunk
disagreement is saved to tests/regressions/ (or --save-dir) and fuzzing goes on, so one run
collects several distinct failures. Exit status: 0 if every backend agreed, 1 otherwise.
It must never change a backend, loosen a tolerance, or delete a saved case.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from pathlib import Path

import vyre
from vyre.ir.types import ScalarType
from vyre.tools import fuzz


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--examples", type=int, default=5000, help="total examples per backend")
    ap.add_argument("--batch", type=int, default=500, help="examples per Hypothesis run")
    ap.add_argument("--minutes", type=float, default=0, help="time budget (0: none)")
    ap.add_argument("--backends", default="", help="comma-separated names (default: all)")
    ap.add_argument("--types", default="", help="restrict value types, e.g. i32,u32,f32")
    ap.add_argument("--long-loops", type=float, default=None,
                    help="chance of a long loop per top-level statement (default: the "
                         "generator's; each costs the reference seconds)")
    ap.add_argument("--save-dir", default=str(fuzz.regressions_dir()))
    args = ap.parse_args(argv)

    ref, others, skipped = fuzz.available_instances()
    if args.backends:
        wanted = set(args.backends.split(","))
        others = [b for b in others if b.kind in wanted or b.id in wanted]
    for name, why in skipped.items():
        print(f"[fuzz] {name}: unavailable ({why})", flush=True)
    targets = others or [vyre.get_backend("reference")]
    deadline = time.monotonic() + args.minutes * 60 if args.minutes else None
    failures = 0
    # Round-robin, one batch per backend in turn, so a time budget is shared by every backend
    # instead of being spent on the first one.
    opts = {}
    for b in targets:
        o = fuzz.options_for([ref, b])
        if args.types:
            o = dataclasses.replace(
                o, types=frozenset(ScalarType(t) for t in args.types.split(",")))
        if args.long_loops is not None:
            o = dataclasses.replace(o, long_loops=args.long_loops)
        opts[b.id] = o
    done = dict.fromkeys(opts, 0)
    spent = dict.fromkeys(opts, 0.0)
    while (deadline is None or time.monotonic() < deadline) and any(
            d < args.examples for d in done.values()):
        for b in targets:
            if done[b.id] >= args.examples or (deadline is not None
                                               and time.monotonic() >= deadline):
                continue
            n = min(args.batch, args.examples - done[b.id])
            t0 = time.monotonic()
            try:
                done[b.id] += fuzz.fuzz_backends(ref, [b], max_examples=n, options=opts[b.id],
                                                 save_dir=Path(args.save_dir), use_database=False)
            except AssertionError as exc:
                failures += 1
                done[b.id] += n
                print(f"[fuzz] {b.id}: {str(exc)[:1500]}", flush=True)
            spent[b.id] += time.monotonic() - t0
            print(f"[fuzz] {b.id}: {done[b.id]} examples, {spent[b.id]:.0f}s", flush=True)
    for b in targets:
        b.close()
    ref.close()
    print(f"[fuzz] done: {failures} failing batch(es)", flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
