"""Timing of the C front end: plain Python vs the resident path vs the host path.

    python -m vyre.programs.cpp_bench --backend cuda --sizes 65536,1048576 --repeat 5

Prints one line per (backend, size): median seconds of each path and whether each result
equals plain Python. This module measures and checks; it must never change how the front
end runs (it only calls CppFrontend's public methods).
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from functools import partial

from vyre.registry import available_backends, get_backend

from .cpp_corpus import generate_c_source
from .cpp_frontend import CppFrontend, FrontendResult, cpp_frontend_python


def _median_time(fn: Callable[[], FrontendResult], repeat: int) -> tuple[float, FrontendResult]:
    times, out = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    assert out is not None
    return statistics.median(times), out


def bench(backend_name: str, sizes: list[int], repeat: int, host_path_max: int) -> list[str]:
    """Run each size on `backend_name`; one formatted line per size."""
    lines = []
    with get_backend(backend_name) as b, CppFrontend(b, capacity=max(sizes)) as fe:
        for size in sizes:
            data = generate_c_source(size, seed=size)
            t_py, exp = _median_time(partial(cpp_frontend_python, data), 1)
            fe.run(data)  # warm: allocation, compilation, recording
            t_res, got = _median_time(partial(fe.run, data), repeat)
            mode, steps = fe.stats.mode, fe.stats.dispatches
            line = (f"{b.id:>12} {size:>10} B  python {t_py:8.4f}s  resident({mode}, "
                    f"{steps} dispatches) {t_res:8.4f}s ok={got == exp}")
            if size <= host_path_max:
                fe.run_host_path(data)
                t_host, got_h = _median_time(partial(fe.run_host_path, data), repeat)
                line += f"  host path {t_host:8.4f}s ok={got_h == exp}"
            lines.append(line)
            print(line, flush=True)
    return lines


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--backend", action="append", help="backend name (repeatable)")
    ap.add_argument("--sizes", default="65536,1048576")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--host-path-max", type=int, default=1 << 22)
    args = ap.parse_args(argv)
    names = args.backend or [a.name for a in available_backends() if a.available]
    sizes = [int(s) for s in args.sizes.split(",")]
    for name in names:
        bench(name, sizes, args.repeat, args.host_path_max)


if __name__ == "__main__":
    main()
