#!/usr/bin/env python3
"""Writes the hand-made exactness regression cases (issue 13) into tests/regressions/.

    .venv/bin/python scripts/exactness_cases.py [--dir tests/regressions]

Each case is a small Program plus exact inputs, saved with `vyre.tools.fuzz.save_case` under a
descriptive name; tests/test_regressions.py replays every one on every backend and compares
it with the reference exactly (approximate functions within their documented ulp bound,
zero signs included). The cases are the ones real drivers got wrong: x/x at +-FLT_MAX, an
exact quotient cast to i32, float rem step by step, abs(i64(x)), pow/sin/tan at +-0, and
loops past Mesa's 65,535-iteration budget. Rerunning it rewrites the same files; it must
never overwrite a case it did not make.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np

from vyre import ProgramBuilder
from vyre.builder import Value, abs_, pow_, sin, sqrt, tan, tanh
from vyre.ir.types import ScalarType
from vyre.tools.fuzz import FuzzCase, regressions_dir, save_case

ST = ScalarType
F32_MAX = float(np.finfo(np.float32).max)
TINY = float(np.finfo(np.float32).tiny)
SUB = float(np.finfo(np.float32).smallest_subnormal)


def elementwise(name: str, ins: dict[str, np.ndarray], outs: dict[str, ScalarType],
                body: Callable[[ProgramBuilder, dict[str, Value], Value], dict[str, Value]],
                note: str) -> FuzzCase:
    """out_k[i] = body(in[i]) for every i < n (one invocation per element)."""
    n = len(next(iter(ins.values())))
    k = ProgramBuilder(name, workgroup_size=64)
    bufs = {nm: k.buffer(nm, ST.from_numpy(a.dtype)) for nm, a in ins.items()}
    obufs = {nm: k.buffer(nm, ty, "write") for nm, ty in outs.items()}
    i = k.global_linear_id()
    with k.if_(i < k.lit(n, ST.U32)):
        vals = body(k, {nm: b[i] for nm, b in bufs.items()}, i)
        for nm, v in vals.items():
            obufs[nm][i] = v
    inputs = dict(ins)
    for nm, ty in outs.items():
        inputs[nm] = np.zeros(n, dtype=ty.numpy)
    return FuzzCase(k.build(), inputs, ((n + 63) // 64, 1, 1), note=note)


def f32(xs: list[float]) -> np.ndarray:
    return np.array(xs, dtype=np.float32)


def div_self_at_the_limits() -> FuzzCase:
    x = f32([F32_MAX, -F32_MAX, 2.0**127, 3e38, 1e38, TINY, SUB, -SUB, 1.0, 33.0, 1e-30,
             7.0, float("inf"), 0.0, float("nan"), 16777215.0])
    return elementwise(
        "div_self_at_the_limits", {"x": x}, {"q": ST.F32, "qi": ST.I32},
        lambda k, v, i: {"q": v["x"] / v["x"], "qi": (v["x"] / v["x"]).cast(ST.I32)},
        "x / x must be exactly 1 for every finite nonzero x (NVIDIA Vulkan gave 0.0 at "
        "+-FLT_MAX), and i32(x / x) exactly 1")


def exact_quotient_to_i32() -> FuzzCase:
    rng = np.random.default_rng(13)
    b = rng.integers(1, 1000, 200)
    q = rng.integers(1, 1000, 200)
    b[:4] = [33, 33, 3, 49]
    q[:4] = [1, 3, 33, 1]
    a = (b * q).astype(np.float32)
    return elementwise(
        "exact_quotient_to_i32", {"a": a, "b": b.astype(np.float32)},
        {"q": ST.F32, "qi": ST.I32},
        lambda k, v, i: {"q": v["a"] / v["b"], "qi": (v["a"] / v["b"]).cast(ST.I32)},
        "a / b where the quotient is an exact integer (33 / 33): i32(a / b) must be the "
        "integer (NVIDIA Vulkan gave 33/33 = 0.99999994, so i32 gave 0)")


def float_rem_step_by_step() -> FuzzCase:
    rng = np.random.default_rng(7)
    n = 512
    b = np.ldexp(rng.uniform(1, 2, n), rng.integers(-20, 21, n)).astype(np.float32)
    q = np.ldexp(rng.uniform(1, 2, n), rng.integers(0, 40, n)).astype(np.float32)
    a = (b.astype(np.float64) * np.trunc(q)).astype(np.float32)
    a[: n // 4] = (b[: n // 4] * rng.integers(1, 5000, n // 4)).astype(np.float32)
    a[:8] = f32([33.0, 1024.0 * 3, 2.0 * 5, 1e30, -1e30, 3.0 * 1e7, -2.0 * 7, 6.0])
    b[:8] = f32([33.0, 1024.0, 2.0, 3.0, 7.0, 3.0, 2.0, 3.0])
    sign = np.where(rng.random(n) < 0.5, -1.0, 1.0).astype(np.float32)
    return elementwise(
        "float_rem_step_by_step", {"a": a * sign, "b": b}, {"r": ST.F32, "q": ST.F32},
        lambda k, v, i: {"r": v["a"] % v["b"], "q": v["a"] / v["b"]},
        "float rem is a - b * trunc(a / b) in f32, step by step (docs/IR.md); with a correctly "
        "rounded division an exact multiple gives 0.0 (NVIDIA Vulkan gave -2.0 and -1024.0)")


def sqrt_over_the_exponent_range() -> FuzzCase:
    rng = np.random.default_rng(3)
    x = np.ldexp(rng.uniform(1, 2, 256), rng.integers(-149, 128, 256)).astype(np.float32)
    x[:8] = f32([F32_MAX, TINY, SUB, 4.0, 2.0, 0.0, -0.0, 1e-40])
    return elementwise(
        "sqrt_over_the_exponent_range", {"x": x}, {"r": ST.F32},
        lambda k, v, i: {"r": sqrt(v["x"])},
        "sqrt is correctly rounded over the whole exponent range, subnormals included "
        "(NVIDIA Vulkan: 1 ulp off in 17% of 2^20 random inputs)")


def abs_of_i64_cast() -> FuzzCase:
    x = np.array([-5, 5, 0, -1, -(2**31), 2**31 - 1, -123456789, 7], dtype=np.int32)
    f = f32([-5.5, 9.3e18, -9.3e18, float("inf"), float("-inf"), float("nan"), 2.0**63,
             -(2.0**63)])

    def body(k: ProgramBuilder, v: dict[str, Value], i: Value) -> dict[str, Value]:
        wide = v["x"].cast(ST.I64)
        return {"a": abs_(wide), "w": v["f"].cast(ST.I64), "u": v["f"].cast(ST.U64),
                "back": abs_(wide).cast(ST.F32)}

    return elementwise(
        "abs_of_i64_cast", {"x": x, "f": f},
        {"a": ST.I64, "w": ST.I64, "u": ST.U64, "back": ST.F32}, body,
        "abs(i64(x)) for x = -5 must be 5 (wgpu/lavapipe gave -5); f32 -> i64/u64 casts "
        "saturate at the limits, NaN -> 0")


def pow_at_signed_zero() -> FuzzCase:
    ys = [-1.0, -2.0, -3.0, -0.5, float("-inf"), 1.0, 3.0, 2.0, 0.5, float("inf"), -7.0, 5.0]
    x = f32([0.0] * len(ys) + [-0.0] * len(ys))
    y = f32(ys + ys)
    return elementwise(
        "pow_at_signed_zero", {"x": x, "y": y}, {"p": ST.F32, "inv": ST.F32},
        lambda k, v, i: {"p": pow_(v["x"], v["y"]), "inv": 1.0 / pow_(v["x"], v["y"])},
        "C99 Annex F: pow(+-0, y < 0) = +-inf (wgpu gave 0), pow(-0, odd y > 0) = -0 "
        "(inv = 1 / pow shows the sign of a zero result)")


def sin_tan_at_signed_zero() -> FuzzCase:
    x = f32([0.0, -0.0, -1e-30, 1e-30, -SUB, SUB])
    return elementwise(
        "sin_tan_at_signed_zero", {"x": x},
        {"s": ST.F32, "t": ST.F32, "th": ST.F32, "inv_s": ST.F32, "inv_t": ST.F32},
        lambda k, v, i: {"s": sin(v["x"]), "t": tan(v["x"]), "th": tanh(v["x"]),
                         "inv_s": 1.0 / sin(v["x"]), "inv_t": 1.0 / tan(v["x"])},
        "sin(-0) = tan(-0) = -0 (wgpu lost the sign; 1 / result shows it)")


def counting_loop(name: str, n: int, note: str) -> FuzzCase:
    k = ProgramBuilder(name, workgroup_size=4)
    out = k.buffer("count", ST.U32, "write")
    end = k.param("n", ST.U32)
    c = k.let(k.lit(0, ST.U32))
    with k.for_range(0, end):
        k.assign(c, c + 1)
    out[k.global_linear_id()] = c
    return FuzzCase(k.build(), {"count": np.zeros(4, np.uint32)}, (1, 1, 1), {"n": n},
                    note=note)


def nested_loops() -> FuzzCase:
    k = ProgramBuilder("nested_loops_100x1000", workgroup_size=4)
    out = k.buffer("count", ST.U32, "write")
    c = k.let(k.lit(0, ST.U32))
    with k.for_range(0, k.lit(100, ST.U32)), k.for_range(0, k.lit(1000, ST.U32)):
        k.assign(c, c + 1)
    out[k.global_linear_id()] = c
    return FuzzCase(k.build(), {"count": np.zeros(4, np.uint32)}, (1, 1, 1),
                    note="100 x 1000 nested iterations must count 100,000 (lavapipe gave "
                    "65,405), or raise the documented loop-limit DispatchError")


def cases() -> list[FuzzCase]:
    return [
        div_self_at_the_limits(), exact_quotient_to_i32(), float_rem_step_by_step(),
        sqrt_over_the_exponent_range(), abs_of_i64_cast(), pow_at_signed_zero(),
        sin_tan_at_signed_zero(),
        counting_loop("for_loop_70000", 70000,
                      "a for loop of 70,000 iterations must count 70,000 (lavapipe stopped "
                      "at 65,535 silently), or raise the documented loop-limit DispatchError"),
        nested_loops(),
    ]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dir", default=str(regressions_dir()))
    args = ap.parse_args(argv)
    for case in cases():
        path = save_case(case, Path(args.dir), name=case.program.name)
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
