"""gemver (PolyBench/C 4.2.1 linear-algebra/blas/gemver/gemver.c): its four loop nests as
four dispatches: one invocation per A[i][j] (the rank-2 update), one per x[i] (the j loop
over column i of A), one per x[i] adding z[i], one per w[i] (the j loop over row i).
C: c/gemver.c."""

from __future__ import annotations

from functools import cache

import numpy as np

from vyre import ProgramBuilder, f32, i32
from vyre.interface import Backend
from vyre.ir.nodes import Program

from .common import F, groups, resident

ARGS = {"n": 120}
WG = 64
TILE = 8
ALPHA, BETA = F(1.5), F(1.2)  # *alpha = 1.5; *beta = 1.2 (double literals stored in float)


@cache
def update_program() -> Program:
    k = ProgramBuilder("polybench_gemver_update", (TILE, TILE))
    u1, v1, u2, v2 = (k.buffer(x, f32) for x in ("u1", "v1", "u2", "v2"))
    a = k.buffer("A", f32, "read_write")
    n = k.param("n", i32)
    j, i = k.let(k.global_id(0).cast(i32)), k.let(k.global_id(1).cast(i32))
    with k.if_((i < n) & (j < n)):
        a[i * n + j] = a[i * n + j] + u1[i] * v1[j] + u2[i] * v2[j]
    return k.build()


@cache
def x_program() -> Program:
    k = ProgramBuilder("polybench_gemver_x", WG)
    a, y = k.buffer("A", f32), k.buffer("y", f32)
    x = k.buffer("x", f32, "read_write")
    n, beta = k.param("n", i32), k.param("beta", f32)
    i = k.let(k.global_id(0).cast(i32))
    with k.if_(i < n):
        xi = k.let(x[i])
        with k.for_range(0, n) as j:
            xi.set(xi + beta * a[j * n + i] * y[j])
        x[i] = xi
    return k.build()


@cache
def add_z_program() -> Program:
    k = ProgramBuilder("polybench_gemver_add_z", WG)
    z = k.buffer("z", f32)
    x = k.buffer("x", f32, "read_write")
    n = k.param("n", i32)
    i = k.let(k.global_id(0).cast(i32))
    with k.if_(i < n):
        x[i] = x[i] + z[i]
    return k.build()


@cache
def w_program() -> Program:
    k = ProgramBuilder("polybench_gemver_w", WG)
    a, x = k.buffer("A", f32), k.buffer("x", f32)
    w = k.buffer("w", f32, "read_write")
    n, alpha = k.param("n", i32), k.param("alpha", f32)
    i = k.let(k.global_id(0).cast(i32))
    with k.if_(i < n):
        wi = k.let(w[i])
        with k.for_range(0, n) as j:
            wi.set(wi + alpha * a[i * n + j] * x[j])
        w[i] = wi
    return k.build()


def run(backend: Backend, n: int) -> list[np.ndarray]:
    fn = F(n)
    q = (np.arange(1, n + 1, dtype=F) / fn).astype(np.float64)  # (i+1)/fn, a float quotient
    vec = {"u1": np.arange(n, dtype=F), "u2": (q / 2.0).astype(F), "v1": (q / 4.0).astype(F),
           "v2": (q / 6.0).astype(F), "y": (q / 8.0).astype(F), "z": (q / 9.0).astype(F)}
    i, j = np.indices((n, n))
    a0 = (i * j % n).astype(F) / F(n)  # (DATA_TYPE) (i*j % n) / n
    with resident(backend) as dev:
        b = {name: dev.put(v, name) for name, v in vec.items()}
        a = dev.put(a0, "A")
        x, w = dev.put(np.zeros(n, F), "x"), dev.put(np.zeros(n, F), "w")
        g = groups(n, WG)
        dev.run(update_program(), {k: b[k] for k in ("u1", "v1", "u2", "v2")}, {"A": a},
                (groups(n, TILE), groups(n, TILE)), {"n": n})
        dev.run(x_program(), {"A": a, "y": b["y"]}, {"x": x}, g, {"n": n, "beta": BETA})
        dev.run(add_z_program(), {"z": b["z"]}, {"x": x}, g, {"n": n})
        dev.run(w_program(), {"A": a, "x": x}, {"w": w}, g, {"n": n, "alpha": ALPHA})
        return [dev.get(w, np.float32, n), dev.get(a, np.float32, n * n),
                dev.get(x, np.float32, n)]
