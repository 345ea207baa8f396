"""Host cost of dispatch_with_device_buffers on one backend, for comparing launch paths:

    python scripts/launch_timing.py [wgpu|reference|cuda]

Four cases over resident buffers: a bound dispatch re-launched; the same call unbound
(served by the launch cache); unbound with 8 param values cycled; unbound with a new param
value every call (a cache miss each time). Each figure is the calling thread's CPU time
per call (time.thread_time_ns, so a loaded machine and the driver's own threads blur it
less than wall time), the minimum over rounds. The result is checked before it is printed.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable

import numpy as np

import vyre
from vyre import DispatchConfig, ProgramBuilder, u32


def program() -> vyre.Program:
    b = ProgramBuilder("inc", workgroup_size=(64, 1, 1))
    x = b.buffer("x", u32)
    y = b.buffer("y", u32, "write")
    k = b.param("k", u32)
    i = b.global_id(0)
    with b.if_(i < x.length()):
        y[i] = x[i] + k
    return b.build()


def per_call_ns(fn: Callable[[], object], n: int = 400, rounds: int = 5) -> float:
    out = []
    for _ in range(rounds):
        t0 = time.thread_time_ns()
        for _ in range(n):
            fn()
        out.append((time.thread_time_ns() - t0) / n)
    return min(out)


def main(name: str) -> None:
    be = vyre.get_backend(name)
    p = program()
    x, y = be.allocate_device_buffer(4096), be.allocate_device_buffer(4096)
    be.write(x, np.arange(1024, dtype=np.uint32))
    cfg = DispatchConfig(grid=16, params={"k": 3})
    bound = be.bind(p, [x], [y], cfg)
    d = be.dispatch_with_device_buffers
    cycled = [DispatchConfig(grid=16, params={"k": i}) for i in range(8)]
    fresh = [DispatchConfig(grid=16, params={"k": i}) for i in range(4000)]
    step = [0]

    def cycle() -> None:
        step[0] += 1
        d(p, [x], [y], cycled[step[0] & 7])

    def new_param() -> None:
        step[0] += 1
        d(p, [x], [y], fresh[step[0] % len(fresh)])

    res = {}
    for label, fn, n in (("bound", lambda: d(bound), 400),
                         ("unbound", lambda: d(p, [x], [y], cfg), 400),
                         ("unbound, 8 params cycled", cycle, 400),
                         ("unbound, new param each call", new_param, 200)):
        res[label] = per_call_ns(fn, n)
        be.synchronize()
    got = be.read(y, dtype=np.uint32)
    k = fresh[step[0] % len(fresh)].params["k"]
    assert got[5] == 5 + k, (got[:8], k)
    for label, ns in res.items():
        print(f"{name:9s} {label:32s} {ns / 1000:8.1f} us")
    be.close()


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "wgpu")
