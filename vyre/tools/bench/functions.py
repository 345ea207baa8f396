"""The transcendental workload's functions: for each of vyre's exact functions
(vyre.lower.maths), the inputs of its memory-bound map, the step of its compute-bound
chain, its spellings in the peers (CUDA's accurate function, torch and CuPy, WGSL's
builtin), the bound a peer is checked within, and the f64 oracle both checks use.
This module only describes and checks; it must never time anything.

The chain steps v <- f(a v + b) (two-argument functions: f(a v + b, c), atan2: f(c, a v +
b)) keep v in a bounded range where |d step / dv| < 1, so a peer's per-step error does not
grow along the chain; a and b are exact in f32 and a is 1, -1 or 1/2, so a v + b rounds
once whatever a compiler contracts it to.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

Inputs = Callable[[np.random.Generator, int], tuple[np.ndarray, ...]]

#: Largest error (ulp) of a peer's map (CUDA's accurate functions: CUDA C++ Programming
#: Guide, "Mathematical Functions", single precision; torch and CuPy call them) and of its
#: chain (each step's error, damped).
PEER_CHAIN_ULP = 8
#: A WGSL builtin is only bounded by Vulkan's precision rules (absolute 2^-11 for sin / cos
#: on [-pi, pi], 3 + 2|x| ulp for exp, inherited bounds for the rest; lavapipe's and
#: NVIDIA's are that far off): checked within this relative error, or absolute near 0.
WGSL_REL, WGSL_ABS = 2.0**-8, 2.0**-11


def _uniform(lo: float, hi: float) -> Inputs:
    return lambda rng, n: (rng.uniform(lo, hi, n).astype(np.float32),)


def _log_uniform(lo: float, hi: float) -> Inputs:
    return lambda rng, n: (np.exp2(rng.uniform(lo, hi, n)).astype(np.float32),)


def _pair(a: Inputs, b: Inputs) -> Inputs:
    return lambda rng, n: (a(rng, n)[0], b(rng, n)[0])


def _normal(scale: float) -> Inputs:
    return lambda rng, n: ((rng.standard_normal(n) * scale).astype(np.float32),)


@dataclass(frozen=True)
class Fn:
    """One function of the workload (module docstring)."""

    name: str
    arity: int
    inputs: Inputs  # the map's f32 arguments, n of each
    what: str  # the map's input range, in words
    step: tuple[float, float, float]  # the chain: v <- f(a v + b [, c]): (a, b, c)
    start: tuple[float, float]  # the chain's start values: uniform in this range
    cuda: str  # the CUDA C function (accurate: no fast math)
    wgsl: str  # the WGSL builtin spelling of f({0} [, {1}])
    torch: str  # torch.<name>
    cupy: str  # cupy.<name>
    peer_ulp: int  # the peers' map bound (ulp)
    oracle: Callable[..., np.ndarray]  # the f64 function
    swap: bool = False  # the chain's step is f(c, a v + b)

    def chain_args(self, v: str, fmt: Callable[[float], str]) -> list[str]:
        """The step's arguments as text, for the value `v` and literals spelled by `fmt`."""
        a, b, c = self.step
        arg = v if a == 1.0 else f"-{v}" if a == -1.0 else f"{fmt(a)} * {v}"
        if b:
            arg = f"{arg} + {fmt(b)}"
        if self.arity == 1:
            return [arg]
        return [fmt(c), arg] if self.swap else [arg, fmt(c)]


FUNCTIONS: dict[str, Fn] = {f.name: f for f in (
    Fn("exp", 1, _uniform(-80, 80), "x uniform in [-80, 80]", (-1.0, 0.0, 0.0), (0.0, 1.0),
       "expf", "exp({0})", "exp", "exp", 2, np.exp),
    Fn("exp2", 1, _uniform(-120, 120), "x uniform in [-120, 120]", (-1.0, 0.0, 0.0),
       (0.0, 1.0), "exp2f", "exp2({0})", "exp2", "exp2", 2, np.exp2),
    Fn("log", 1, _log_uniform(-120, 120), "x = 2^u, u uniform in [-120, 120]",
       (1.0, 3.0, 0.0), (0.0, 2.0), "logf", "log({0})", "log", "log", 1, np.log),
    Fn("log2", 1, _log_uniform(-120, 120), "x = 2^u, u uniform in [-120, 120]",
       (1.0, 3.0, 0.0), (0.0, 2.0), "log2f", "log2({0})", "log2", "log2", 1, np.log2),
    Fn("tanh", 1, _uniform(-10, 10), "x uniform in [-10, 10]", (1.0, 0.5, 0.0), (0.0, 1.0),
       "tanhf", "tanh({0})", "tanh", "tanh", 2, np.tanh),
    Fn("sin", 1, _uniform(-100, 100), "x uniform in [-100, 100]", (1.0, 1.0, 0.0),
       (0.0, 1.0), "sinf", "sin({0})", "sin", "sin", 2, np.sin),
    Fn("cos", 1, _uniform(-100, 100), "x uniform in [-100, 100]", (1.0, 0.0, 0.0),
       (0.0, 1.0), "cosf", "cos({0})", "cos", "cos", 2, np.cos),
    Fn("tan", 1, _uniform(-100, 100), "x uniform in [-100, 100]", (0.5, 0.125, 0.0),
       (0.0, 1.0), "tanf", "tan({0})", "tan", "tan", 4, np.tan),
    Fn("asin", 1, _uniform(-1, 1), "x uniform in [-1, 1]", (0.5, 0.25, 0.0), (0.0, 1.0),
       "asinf", "asin({0})", "asin", "arcsin", 4, np.arcsin),
    Fn("pow", 2, _pair(_uniform(0.01, 100), _uniform(-20, 20)),
       "x uniform in [0.01, 100], y in [-20, 20]", (1.0, 1.0, -0.5), (0.0, 2.0), "powf",
       "pow({0}, {1})", "pow", "power", 8, np.power),
    Fn("hypot", 2, _pair(_normal(1e3), _normal(1e3)), "x, y normal, sd 1000",
       (0.5, 0.0, 1.0), (0.0, 2.0), "hypotf", "length(vec2<f32>({0}, {1}))", "hypot", "hypot",
       3, np.hypot),
    Fn("atan2", 2, _pair(_normal(1.0), _normal(1.0)), "y, x standard normal",
       (1.0, 1.0, 1.0), (0.0, 2.0), "atan2f", "atan2({0}, {1})", "atan2", "arctan2", 3,
       np.arctan2, swap=True),
)}


def rounded(fn: Fn, args: tuple[np.ndarray, ...]) -> tuple[np.ndarray, np.ndarray]:
    """fn(args) in f64 rounded to f32, and where that rounding cannot be trusted (the f64
    value within 2^-40 of a midpoint: no correctly rounded verdict there)."""
    with np.errstate(all="ignore"):
        w = np.asarray(fn.oracle(*(a.astype(np.float64) for a in args)))
        out = w.astype(np.float32)
        unsure = (w * (1 - 2.0**-40)).astype(np.float32) != (w * (1 + 2.0**-40)).astype(
            np.float32)
    return out, unsure & np.isfinite(w)


def chain(fn: Fn, x0: np.ndarray, steps: int) -> np.ndarray:
    """The chain from `x0`: each step's a v + b in f32 (one rounding) and f in f64
    rounded to f32."""
    a, b, c = (np.float32(t) for t in fn.step)
    v = x0
    cc = np.full_like(x0, c).astype(np.float64)
    with np.errstate(all="ignore"):
        for _ in range(steps):
            u = (a * v + b).astype(np.float32).astype(np.float64)  # (a v exact: a = +-1, 1/2)
            args = (u,) if fn.arity == 1 else (cc, u) if fn.swap else (u, cc)
            v = np.asarray(fn.oracle(*args)).astype(np.float32)
    return v


def ulps(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """|a - b| in f32 ulps, over the sign (a, b finite f32; 0 where both are NaN)."""
    def key(x: np.ndarray) -> np.ndarray:
        i = x.view(np.int32).astype(np.int64)
        return np.where(i < 0, -(i & 0x7FFFFFFF), i)
    d = np.abs(key(a) - key(b))
    return np.where(np.isnan(a) & np.isnan(b), 0, d)


def check_map(fn: Fn, args: tuple[np.ndarray, ...], want: np.ndarray, unsure: np.ndarray,
              got: np.ndarray, exact: bool, vulkan: bool = False) -> str | None:
    """vyre's (`exact`) map bit for bit the correctly rounded values (except where the f64
    check cannot tell), a peer's within its bound (`vulkan`: WGSL's builtin, within
    WGSL_REL / WGSL_ABS)."""
    d = ulps(got, want)
    if exact:
        bad = np.flatnonzero((d > 0) & ~unsure)
        bound = "0 ulp"
    elif vulkan:
        with np.errstate(all="ignore"):
            off = np.abs(got.astype(np.float64) - want.astype(np.float64))
            ok = (off <= np.maximum(WGSL_ABS, WGSL_REL * np.abs(want.astype(np.float64)))) | (
                d == 0)
        bad = np.flatnonzero(~ok)
        bound = f"relative {WGSL_REL:g} (absolute {WGSL_ABS:g})"
    else:
        bad = np.flatnonzero(d > fn.peer_ulp)
        bound = f"{fn.peer_ulp} ulp"
    if bad.size:
        i = int(bad[0])
        call = ", ".join(repr(a[i]) for a in args)
        return (f"{fn.name}({call}) = {got[i]!r}, correctly rounded {want[i]!r} "
                f"({bad.size} such outputs, {bound} allowed)")
    return None


def check_chain(fn: Fn, x0: np.ndarray, want: np.ndarray, got: np.ndarray, exact: bool,
                vulkan: bool = False) -> str | None:
    """vyre's chain within 1 ulp of the f64-rounded chain (a step whose f64 rounding is
    not the correctly rounded one may move it by one), a peer's within PEER_CHAIN_ULP
    (`vulkan`: relative WGSL_REL, absolute WGSL_ABS)."""
    d = ulps(got, want)
    if vulkan and not exact:
        with np.errstate(all="ignore"):
            off = np.abs(got.astype(np.float64) - want.astype(np.float64))
            bad = np.flatnonzero(~(off <= np.maximum(WGSL_ABS, WGSL_REL * np.abs(want))))
        allowed = f"relative {WGSL_REL:g}"
    else:
        n = 1 if exact else PEER_CHAIN_ULP
        bad = np.flatnonzero(d > n)
        allowed = f"{n} ulp"
    if bad.size:
        i = int(bad[0])
        return (f"{fn.name} chain from {x0[i]!r} = {got[i]!r}, expected {want[i]!r} "
                f"({bad.size} outputs more than {allowed} off)")
    return None


__all__ = ["FUNCTIONS", "Fn", "chain", "check_chain", "check_map", "rounded", "ulps"]
