"""deriche (PolyBench/C 4.2.1 medley/deriche/deriche.c): one invocation computes the
filter's coefficients from alpha with vyre's exact exp and pow, in the original's operand
order; then one invocation per row runs the causal recursion (y1, j ascending) and the
anticausal one (y2, j descending), one invocation per element sums them, and the same
along each column (i ascending, then descending) reads the row result. Each recursion
keeps the original's sum order ((a*x + a*xm1) + b1*ym1) + b2*ym2. C: c/deriche.c (its
expf and powf correctly rounded by c/crmath.h, as vyre's are)."""

from __future__ import annotations

from functools import cache

import numpy as np

from vyre import ProgramBuilder, f32, i32
from vyre.builder import exp, pow_
from vyre.interface import Backend
from vyre.ir.nodes import Program

from .common import F, groups, resident

ARGS = {"w": 64, "h": 64}  # MINI_DATASET
LARGE_ARGS = {"w": 720, "h": 480}  # MEDIUM_DATASET
WG = 64
ALPHA = F(0.25)  # *alpha = 0.25 (a double literal stored in float)
K, A1, A2, A3, A4, B1, B2 = range(7)  # the slots of the coefficient buffer


@cache
def coefficients_program() -> Program:
    k = ProgramBuilder("polybench_deriche_coefficients", 1)
    alpha = k.param("alpha", f32)
    c = k.buffer("coeffs", f32, "write")
    kk = k.let((1.0 - exp(-alpha)) * (1.0 - exp(-alpha))
               / (1.0 + 2.0 * alpha * exp(-alpha) - exp(2.0 * alpha)))
    c[K] = kk
    c[A1] = kk
    c[A2] = kk * exp(-alpha) * (alpha - 1.0)
    c[A3] = kk * exp(-alpha) * (alpha + 1.0)
    c[A4] = -kk * exp(-2.0 * alpha)
    c[B1] = pow_(2.0, -alpha)
    c[B2] = -exp(-2.0 * alpha)
    return k.build()


@cache
def recursion_program() -> Program:
    """Along `lines` lines of `length` elements (element m of line l at l * line_stride +
    m * step): y1 by the causal recursion over src, y2 by the anticausal one."""
    k = ProgramBuilder("polybench_deriche_recursion", WG)
    src, c = k.buffer("src", f32), k.buffer("coeffs", f32)
    y1, y2 = k.buffer("y1", f32, "write"), k.buffer("y2", f32, "write")
    lines, length = k.param("lines", i32), k.param("length", i32)
    line_stride, step = k.param("line_stride", i32), k.param("step", i32)
    line = k.let(k.global_id(0).cast(i32))
    with k.if_(line < lines):
        a1, a2, a3, a4 = (k.let(c[s]) for s in (A1, A2, A3, A4))
        b1, b2 = k.let(c[B1]), k.let(c[B2])
        base = k.let(line * line_stride)
        xm1, ym1, ym2 = k.let(0.0), k.let(0.0), k.let(0.0)
        with k.for_range(0, length, ty=i32) as m:
            at = k.let(base + m * step)
            y = k.let(a1 * src[at] + a2 * xm1 + b1 * ym1 + b2 * ym2)
            y1[at] = y
            xm1.set(src[at])
            ym2.set(ym1)
            ym1.set(y)
        xp1, xp2, yp1, yp2 = k.let(0.0), k.let(0.0), k.let(0.0), k.let(0.0)
        with k.for_range(0, length, ty=i32) as t:  # m = length - 1 down to 0
            at = k.let(base + (length - 1 - t) * step)
            y = k.let(a3 * xp1 + a4 * xp2 + b1 * yp1 + b2 * yp2)
            y2[at] = y
            xp2.set(xp1)
            xp1.set(src[at])
            yp2.set(yp1)
            yp1.set(y)
    return k.build()


@cache
def sum_program() -> Program:
    k = ProgramBuilder("polybench_deriche_sum", WG)
    y1, y2 = k.buffer("y1", f32), k.buffer("y2", f32)
    out = k.buffer("img_out", f32, "write")
    n = k.param("n", i32)
    i = k.let(k.global_id(0).cast(i32))
    with k.if_(i < n):
        out[i] = 1.0 * (y1[i] + y2[i])  # c1 = c2 = 1
    return k.build()


def run(backend: Backend, w: int, h: int) -> list[np.ndarray]:
    i, j = np.indices((w, h))
    img_in = ((313 * i + 991 * j) % 65536).astype(F) / F(65535.0)
    n = w * h
    with resident(backend) as dev:
        src = dev.put(img_in, "imgIn")
        coeffs = dev.put(np.zeros(7, F), "coeffs")
        y1, y2 = dev.put(np.zeros(n, F), "y1"), dev.put(np.zeros(n, F), "y2")
        img_out = dev.put(np.zeros(n, F), "imgOut")
        dev.run(coefficients_program(), {}, {"coeffs": coeffs}, 1, {"alpha": ALPHA})
        for source, lines, length, line_stride, step in ((src, w, h, h, 1),
                                                         (img_out, h, w, 1, h)):
            dev.run(recursion_program(), {"src": source, "coeffs": coeffs},
                    {"y1": y1, "y2": y2}, groups(lines, WG),
                    {"lines": lines, "length": length, "line_stride": line_stride,
                     "step": step})
            dev.run(sum_program(), {"y1": y1, "y2": y2}, {"img_out": img_out},
                    groups(n, WG), {"n": n})
        return [dev.get(coeffs, np.float32, 7), dev.get(img_out, np.float32, n)]
