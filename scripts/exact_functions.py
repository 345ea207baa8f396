"""Check vyre's exact float functions (vyre.lower.maths) against a correctly rounded oracle:
every one of the 2^32 f32 arguments of each one-argument function, and random pairs (plus a
grid of special values) for the two-argument ones, on one backend.

    python scripts/exact_functions.py --backend cuda                 # all, every argument
    python scripts/exact_functions.py --backend wgpu --functions exp,log --chunk-bits 22
    python scripts/exact_functions.py --backend cuda --functions pow --pairs 268435456
    python scripts/exact_functions.py --backend reference --start 0x3f800000 --stop 0x3f810000
    python scripts/exact_functions.py --backend cuda --type f64 --pairs 16777216  # 2^24 each

f64 (`--type f64`: the functions with an exact f64 definition) cannot be exhausted: each
function gets `--pairs` random arguments after the special values, half random bit
patterns and half over the range of finite nonzero results (function_check.random_f64);
the oracle there is NumPy's long double where that decides, decimal elsewhere.

The oracle (vyre/tools/function_oracle.py) is not vyre's code: NumPy's f64 function rounded
once where that decides the rounding, Python's decimal at 70 digits where it cannot. It
prints, per function, the mismatches (argument, result, correctly rounded value) and the
maximum error in ulp, and exits 1 if any result differs. On a backend in flush mode, a
result next to the smallest normal is compared with the IR's flush-mode value (the
reference in that mode). The checking lives in vyre/tools/function_check.py (`vyre certify
--exhaustive` runs the same); to add a function: its name in ONE_ARG or TWO_ARGS there and
its oracle in vyre/tools/function_oracle.py (FUNCTIONS, _NUMPY).
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import vyre
from vyre import ScalarType
from vyre.tools.function_check import FUNCTIONS, ONE_ARG, Report, check_function, f64_functions


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--backend", default="cuda")
    p.add_argument("--type", choices=("f32", "f64"), default="f32")
    p.add_argument("--functions", default=None, help="default: all of the type's")
    p.add_argument("--chunk-bits", type=int, default=24, help="arguments per dispatch: 2^k")
    p.add_argument("--start", type=lambda s: int(s, 0), default=0, help="first f32 bits")
    p.add_argument("--stop", type=lambda s: int(s, 0), default=1 << 32, help="end of the bits")
    p.add_argument("--pairs", type=int, default=1 << 28,
                   help="random pairs per 2-arg function (f64: arguments per function)")
    p.add_argument("--seed", type=int, default=2026)
    p.add_argument("--show", type=int, default=20, help="mismatches printed per function")
    p.add_argument("--workers", type=int, default=max(1, (os.cpu_count() or 2) - 1),
                   help="threads checking results against the oracle")
    p.add_argument("-v", "--verbose", action="store_true")
    a = p.parse_args(argv)
    chunk = 1 << a.chunk_bits
    f64 = a.type == "f64"
    known = f64_functions() if f64 else FUNCTIONS
    fns = [f for f in (a.functions or ",".join(known)).split(",") if f]
    unknown = sorted(set(fns) - set(known))
    if unknown:
        p.error(f"unknown functions {unknown}; these are checked for {a.type}: {list(known)}")
    failed = False
    with vyre.get_backend(a.backend) as backend, vyre.get_backend("reference") as reference:
        print(f"backend {backend.id}; flush mode: "
              f"{backend.capabilities().details.get('flushes_subnormals', [])}", flush=True)
        for fn in fns:
            t = time.perf_counter()
            count = (-(-(a.stop - a.start) // chunk) if fn in ONE_ARG and not f64
                     else 1 - (-a.pairs // chunk))

            def progress(done: int, size: int, report: Report, fn: str = fn,
                         count: int = count) -> None:
                if a.verbose:
                    print(f"  {fn} chunk {done}/{count}: {size} arguments, {report.bad} "
                          "differ so far", flush=True)

            report = check_function(backend, fn, exhaustive=True, chunk=chunk, start=a.start,
                                    stop=a.stop, pairs=a.pairs, seed=a.seed,
                                    reference=reference, workers=a.workers, show=a.show,
                                    progress=progress,
                                    ty=ScalarType.F64 if f64 else ScalarType.F32)
            print(f"{report.line()} ({time.perf_counter() - t:.0f} s)", flush=True)
            for line in report.examples:
                print("   ", line)
            failed |= report.bad > 0
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
