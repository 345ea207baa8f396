#!/usr/bin/env python3
"""Where a flushing device's f32 results differ from vyre's flush-mode reference, per operation.

    python scripts/flush_probe.py [--backend wgpu] [--n 4096] [--seed 1]

Runs every f32 operator and function on inputs built to land next to FLT_MIN (products,
quotients and fma results whose exact value straddles the smallest normal), on tiny and huge
atan2 pairs, and on the fuzzer's wide-exponent values, then prints for each operation how many
results disagree with `vyre.tools.testing.reference_for(backend)` and a few examples, each with
its exact value's place relative to FLT_MIN ("below, rounds to FLT_MIN" is the tininess-before-
vs-after-rounding question of docs/IR.md's flush mode). A diagnostic: it never changes anything.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from fractions import Fraction

import numpy as np

import vyre
from vyre import ProgramBuilder
from vyre.builder import Value, atan2, cos, exp, exp2, fma, log, log2, pow_, sin, sqrt, tan, tanh
from vyre.config import DispatchConfig
from vyre.ir.types import ScalarType
from vyre.tools.fuzz import fuzz_array
from vyre.tools.testing import mismatches, reference_for, tolerance_for

F32 = ScalarType.F32
TINY = np.float32(np.finfo(np.float32).tiny)

OPS: dict[str, Callable[[Value, Value, Value], Value]] = {
    "add": lambda x, y, z: x + y,
    "sub": lambda x, y, z: x - y,
    "mul": lambda x, y, z: x * y,
    "div": lambda x, y, z: x / y,
    "rem": lambda x, y, z: x % y,
    "sqrt": lambda x, y, z: sqrt(x),
    "fma": lambda x, y, z: fma(x, y, z),
    "cast_f64": lambda x, y, z: (x.cast(ScalarType.F64) * y.cast(ScalarType.F64)).cast(F32),
    "atan2": lambda x, y, z: atan2(x, y),
    "pow": lambda x, y, z: pow_(x, y),
    "exp": lambda x, y, z: exp(x), "exp2": lambda x, y, z: exp2(x),
    "log": lambda x, y, z: log(x), "log2": lambda x, y, z: log2(x),
    "sin": lambda x, y, z: sin(x), "cos": lambda x, y, z: cos(x),
    "tan": lambda x, y, z: tan(x), "tanh": lambda x, y, z: tanh(x),
}


def straddling(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """x, y, z where x*y, x/y and fma(x, y, z) land within a few ulps of +-FLT_MIN."""
    a = (rng.uniform(1.0, 2.0, n) * 2.0 ** rng.integers(-40, 40, n)).astype(np.float32)
    b = (TINY.astype(np.float64) / a.astype(np.float64)).astype(np.float32)
    step = rng.integers(-3, 4, n)
    b = np.array([np.float32(v) for v in b], dtype=np.float32)
    for i in range(n):  # neighbours of b: the product straddles FLT_MIN
        for _ in range(abs(int(step[i]))):
            b[i] = np.nextafter(b[i], np.float32(np.inf if step[i] > 0 else 0))
    sign = np.where(rng.random(n) < 0.5, -1.0, 1.0).astype(np.float32)
    x, y = a * sign, b
    q = np.flatnonzero(rng.random(n) < 0.3)  # quotients: x = FLT_MIN * a (+- ulps), y = a
    a = np.abs(a)
    a[q] = np.maximum(a[q], np.float32(1.0))  # keeps FLT_MIN * a normal
    y[q] = a[q]
    x[q] = (TINY.astype(np.float64) * a[q].astype(np.float64)).astype(np.float32)
    for i in q:
        for _ in range(abs(int(step[i]))):
            x[i] = np.nextafter(x[i], np.float32(np.inf if step[i] > 0 else 0))
    x[q] *= sign[q]
    z = np.where(rng.random(n) < 0.5, TINY, -TINY).astype(np.float32)
    z[rng.random(n) < 0.5] = 0.0
    return x, y, z


def atan_pairs(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    e = rng.choice([-126, -125, -120, -100, -64, 60, 100, 120, 126, 127], n)
    y = (rng.uniform(1.0, 2.0, n) * 2.0 ** e).astype(np.float32)
    with np.errstate(over="ignore"):
        x = (y.astype(np.float64) * rng.choice([1.0, 0.5, 2.0, -1.0, 3.0], n)).astype(np.float32)
    return y * np.where(rng.random(n) < 0.5, -1, 1).astype(np.float32), x


def program(n: int, ops: list[str]) -> object:
    k = ProgramBuilder("flush_probe", workgroup_size=64)
    xs, ys, zs = (k.buffer(nm, F32) for nm in ("x", "y", "z"))
    outs = {nm: k.buffer(f"o_{nm}", F32, "write") for nm in ops}
    i = k.global_linear_id()
    with k.if_(i < k.lit(n, ScalarType.U32)):
        x, y, z = k.let(xs[i]), k.let(ys[i]), k.let(zs[i])
        for nm in ops:
            outs[nm][i] = OPS[nm](x, y, z)
    return k.build()


def place(v: Fraction) -> str:
    """Where |v| lies: the bands in which tininess before rounding, IEEE tininess after
    rounding (unbounded exponent) and 'round to the subnormal grid, then flush' differ."""
    t = Fraction(float(TINY))
    m = abs(v)
    if m == 0:
        return "exact 0"
    if m >= t:
        return ">= FLT_MIN"
    if m >= t * (1 - Fraction(1, 2**25)):
        return "A: [1-2^-25, 1) FLT_MIN"
    if m >= t * (1 - Fraction(1, 2**24)):
        return "B: [1-2^-24, 1-2^-25) FLT_MIN"
    return "C: below, subnormal"


def band_table(op: str, got: np.ndarray, x: np.ndarray, y: np.ndarray, z: np.ndarray) -> None:
    """For every element whose exact result lies just below FLT_MIN: what the device gave."""
    tally: dict[tuple[str, str], int] = {}
    near = np.flatnonzero((np.abs(got) <= TINY) | ~np.isfinite(got))
    for j in near:
        v = exact_value(op, float(x[j]), float(y[j]), float(z[j]))
        if v is None or v == 0:
            continue
        p = place(v)
        if p[0] not in "AB":
            continue
        g = float(got[j])
        kind = "0" if g == 0 else ("FLT_MIN" if abs(g) == float(TINY) else repr(g))
        tally[(p, kind)] = tally.get((p, kind), 0) + 1
    for (p, kind), c in sorted(tally.items()):
        print(f"    band {p:32s} device gave {kind:8s} x{c}")


def exact_value(op: str, x: float, y: float, z: float) -> Fraction | None:
    if not all(np.isfinite([x, y, z])):
        return None
    fx, fy, fz = Fraction(x), Fraction(y), Fraction(z)
    try:
        return {"mul": fx * fy, "cast_f64": fx * fy, "div": fx / fy if y else None,
                "fma": fx * fy + fz, "add": fx + fy, "sub": fx - fy}.get(op)
    except (ZeroDivisionError, ValueError, OverflowError):
        return None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--backend", default="wgpu")
    ap.add_argument("--n", type=int, default=4096)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)
    n = args.n
    backend = vyre.get_backend(args.backend)
    reference = vyre.get_backend("reference")
    ref = reference_for(backend, reference)
    print("backend:", backend.id, "flushes:", backend.capabilities().details.get("flushes_subnormals"))
    x, y, z = straddling(rng, n)
    ay, ax = atan_pairs(rng, n // 4)
    x[: n // 4], y[: n // 4] = ay, ax
    wide = rng.random(n) < 0.25
    x[wide] = fuzz_array(rng, F32, n)[wide]
    y[wide] = fuzz_array(rng, F32, n)[wide]
    z[wide] = fuzz_array(rng, F32, n)[wide]
    ops = [nm for nm in OPS if nm != "cast_f64" or "f64" in backend.capabilities().features]
    prog = program(n, ops)
    inputs = {"x": x, "y": y, "z": z, **{f"o_{nm}": n for nm in ops}}
    cfg = DispatchConfig(grid=-(-n // 64))
    got = backend.dispatch(prog, inputs, cfg)
    want = ref.dispatch(prog, inputs, cfg)
    for nm in ops:
        key = f"o_{nm}"
        tol = tolerance_for(program_of(nm, n), backend.kind)
        bad = mismatches(got[key], want[key], tol)
        places: dict[str, int] = {}
        for j in bad:
            v = exact_value(nm, float(x[j]), float(y[j]), float(z[j]))
            p = place(v) if v is not None else "-"
            places[p] = places.get(p, 0) + 1
        print(f"{nm:9s} {bad.size:5d} of {n} differ  {places}")
        if nm in ("mul", "fma", "div"):
            band_table(nm, got[key], x, y, z)
        for j in bad[:4]:
            print(f"    x={x[j]!r} y={y[j]!r} z={z[j]!r} got={got[key][j]!r} "
                  f"want={want[key][j]!r}")


def program_of(op: str, n: int) -> object:
    """A one-operation program, only to pick that operation's tolerance."""
    k = ProgramBuilder("tol", workgroup_size=64)
    a = k.buffer("a", F32)
    o = k.buffer("o", F32, "write")
    i = k.global_linear_id()
    v = k.let(a[i])
    o[i] = OPS[op](v, v, v)
    del n
    return k.build()


if __name__ == "__main__":
    main()
