"""blackscholes (CUDA Samples, Samples/5_Domain_Specific/BlackScholes): one invocation per
option evaluates BlackScholesBodyGPU (sqrt, vyre's exact log and exp) and cndGPU for d1
and d2 (the polynomial in Horner form and exp(-d^2 / 2)) in the sample's operand order,
writing the call and the put price. C: c/blackscholes.c (the intrinsics' accurate forms,
logf and expf correctly rounded by c/crmath.h)."""

from __future__ import annotations

from functools import cache
from typing import Any

import numpy as np

from vyre import ProgramBuilder, f32, i32
from vyre.builder import abs_, exp, log, select, sqrt
from vyre.interface import Backend
from vyre.ir.nodes import Program

from .common import F, Lcg, groups, resident

ARGS = {"options": 1024, "seed": 5347}
LARGE_ARGS = {"options": 4000000, "seed": 5347}  # OPT_N
WG = 128
RISKFREE, VOLATILITY = F(0.02), F(0.30)
A1, A2, A3, A4, A5 = 0.31938153, -0.356563782, 1.781477937, -1.821255978, 1.330274429
RSQRT2PI = 0.39894228040143267793994605993438  # (each rounds to the same float as C's)


def _cnd(d: Any) -> Any:
    """cndGPU(d)."""
    kk = 1.0 / (1.0 + 0.2316419 * abs_(d))
    c = RSQRT2PI * exp(-0.5 * d * d) * (kk * (A1 + kk * (A2 + kk * (A3 + kk * (A4 + kk * A5)))))
    return select(d > 0.0, 1.0 - c, c)


@cache
def program() -> Program:
    k = ProgramBuilder("cuda_samples_blackscholes", WG)
    s_buf, x_buf, t_buf = k.buffer("S", f32), k.buffer("X", f32), k.buffer("T", f32)
    call, put = k.buffer("call", f32, "write"), k.buffer("put", f32, "write")
    n = k.param("options", i32)
    r, v = k.param("riskfree", f32), k.param("volatility", f32)
    i = k.let(k.global_id(0).cast(i32))
    with k.if_(i < n):
        s, x, t = k.let(s_buf[i]), k.let(x_buf[i]), k.let(t_buf[i])
        sqrt_t = k.let(sqrt(t))
        d1 = k.let((log(s / x) + (r + 0.5 * v * v) * t) / (v * sqrt_t))
        d2 = k.let(d1 - v * sqrt_t)
        cndd1, cndd2 = k.let(_cnd(d1)), k.let(_cnd(d2))
        exp_rt = k.let(exp(-r * t))
        call[i] = s * cndd1 - x * exp_rt * cndd2
        put[i] = x * exp_rt * (1.0 - cndd2) - s * (1.0 - cndd1)
    return k.build()


def run(backend: Backend, options: int, seed: int) -> list[np.ndarray]:
    t = Lcg(seed).unit(3 * options).reshape(options, 3)  # RandFloat(): (1 - t) low + t high

    def rand_float(col: int, low: float, high: float) -> np.ndarray:
        u = t[:, col]
        out: np.ndarray = (F(1.0) - u) * F(low) + u * F(high)
        return out

    s, x, years = rand_float(0, 5.0, 30.0), rand_float(1, 1.0, 100.0), rand_float(2, 0.25, 10.0)
    with resident(backend) as dev:
        ins = {"S": dev.put(s, "S"), "X": dev.put(x, "X"), "T": dev.put(years, "T")}
        call = dev.put(np.zeros(options, F), "call")
        put = dev.put(np.zeros(options, F), "put")
        dev.run(program(), ins, {"call": call, "put": put}, groups(options, WG),
                {"options": options, "riskfree": RISKFREE, "volatility": VOLATILITY})
        return [dev.get(call, np.float32, options), dev.get(put, np.float32, options)]
