"""Hard cases for f32 division and sqrt, and their IEEE results (NumPy, on the host).

The adapter probe runs the driver's own division and sqrt over these and compares bit for
bit, to decide whether the WGSL generator may use them or must emit vyre's exact versions
(vyre/lower/divsqrt.py, chosen through the lowering's Traits); the tests use the same cases. The cases cover what
drivers are known to get wrong: `x / x` at the limits of the range (a driver computing
a * (1/b) gives 0 for FLT_MAX / FLT_MAX), small integer quotients (33 / 33), subnormal
and overflowing quotients, ±0, inf, NaN, and random pairs over the whole exponent range.
This module must never touch a device.
"""

from __future__ import annotations

import numpy as np

TINY = np.float32(np.finfo(np.float32).tiny)
_SPECIALS = np.array(
    [0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 3.0, 33.0, 1e-45, -1e-45,
     float(TINY), 3.4028235e38, -3.4028235e38, 1.1754942e-38, 0.5],
    dtype=np.float32,
)


def random_f32(rng: np.random.Generator, n: int, finite: bool = True) -> np.ndarray:
    """`n` floats with uniformly random bits: every exponent (subnormals included) equally."""
    bits = rng.integers(0, 1 << 32, size=n, dtype=np.uint64).astype(np.uint32)
    if finite:  # exponent 255 (inf/NaN) -> 254
        top = (bits & np.uint32(0x7F800000)) == np.uint32(0x7F800000)
        bits[top] &= np.uint32(0xFF7FFFFF)
    return bits.view(np.float32)


def div_cases(n_random: int = 4096, seed: int = 13) -> tuple[np.ndarray, np.ndarray]:
    """(a, b) pairs: specials x specials, x / x, small integer quotients, subnormal and
    overflowing quotients, random pairs over the whole range and within 2^+-20."""
    rng = np.random.default_rng(seed)
    sa, sb = np.meshgrid(_SPECIALS, _SPECIALS)
    r = random_f32(rng, n_random)
    ints = np.arange(1, 65, dtype=np.float32)
    ia, ib = np.meshgrid(ints, ints)
    sub_num = np.array([float(TINY), 1e-38, 3e-39, 1e-45, 3e-45, 1.5e-44, 2.0**-126 * 3],
                       dtype=np.float32)
    sub_den = np.array([3.0, 2.0, 7.0, 1.5, 0.75, 1024.0, 3.4e10, 1.0000001], dtype=np.float32)
    na, nb = np.meshgrid(sub_num, sub_den)
    big = np.array([3.4028235e38, 3e38, 1e38], dtype=np.float32)
    small = np.array([0.5, 0.9999999, 1e-10, 0.25, 1.0000001], dtype=np.float32)
    ga, gb = np.meshgrid(big, small)
    near = (rng.standard_normal((2, n_random)) * 2.0 ** rng.integers(-20, 21, (2, n_random)))
    a = np.concatenate([sa.ravel(), r, ia.ravel(), na.ravel(), np.ones(na.size),
                        ga.ravel(), near[0].astype(np.float32)]).astype(np.float32)
    b = np.concatenate([sb.ravel(), r, ib.ravel(), nb.ravel(), na.ravel(),
                        gb.ravel(), near[1].astype(np.float32)]).astype(np.float32)
    # and random pairs (a fresh draw, so most are not x / x)
    a = np.concatenate([a, random_f32(rng, n_random)])
    b = np.concatenate([b, random_f32(rng, n_random)])
    return a, b


def sqrt_cases(n_random: int = 4096, seed: int = 14) -> np.ndarray:
    """Specials, subnormals, exact squares, values next to squares, random over the range."""
    rng = np.random.default_rng(seed)
    r = np.abs(random_f32(rng, n_random))
    s = np.abs(random_f32(rng, 256)) % np.float32(1e19)
    sq = (s.astype(np.float64) ** 2).astype(np.float32)
    nxt = np.nextafter(sq, np.float32(np.inf))
    prv = np.nextafter(sq, np.float32(0))
    subs = (np.arange(1, 257, dtype=np.uint32) * np.uint32(0x7FFF)).view(np.float32)
    return np.concatenate([_SPECIALS, r, sq, nxt, prv, subs]).astype(np.float32)


def flushed(x: np.ndarray) -> np.ndarray:
    """Subnormals replaced by a zero of their sign (docs/IR.md flush mode)."""
    sub = (x != 0) & (np.abs(x) < TINY)
    return np.where(sub, np.copysign(np.float32(0), x), x).astype(np.float32)


def expected_div(a: np.ndarray, b: np.ndarray, flush: bool = False) -> np.ndarray:
    with np.errstate(all="ignore"):
        if flush:
            return flushed(flushed(a) / flushed(b))
        return (a / b).astype(np.float32)


def expected_sqrt(x: np.ndarray, flush: bool = False) -> np.ndarray:
    with np.errstate(all="ignore"):
        if flush:
            return flushed(np.sqrt(flushed(x)))
        return np.sqrt(x).astype(np.float32)


def same_bits(got: np.ndarray, expected: np.ndarray, flush: bool = False) -> bool:
    """Bit-identical (any NaN matches any NaN; ±0 must match); in flush mode the result is
    compared after flushing, as the generated code flushes every f32 result."""
    got = flushed(got) if flush else got.astype(np.float32)
    nan = np.isnan(got) & np.isnan(expected)
    return bool(np.all(nan | (got.view(np.uint32) == expected.view(np.uint32))))
