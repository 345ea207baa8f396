"""sin, cos and tan are one exact definition (vyre.lower.maths): correctly rounded, the
same bits on every backend, in IEEE and flush mode.

Checked against tests/function_oracle.py (decimal and exact rationals, not vyre's code):
every f16 input on each backend; for f32 specials, subnormals, the worst case of the
reduction by pi/2 and floats next to multiples of pi/2 up to FLT_MAX, arguments whose
result lies near the middle of two f32, and a few thousand random bit patterns; the slow
(double-double) path alone, by forcing every input onto it. NumPy's f64 function decides
the oracle's value except where it lies within 2^-40 of a rounding boundary (NumPy is
within a few 2^-52), where the decimal evaluation does.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import vyre
from vyre import DispatchConfig, ScalarType
from vyre.backend import BaseBackend
from vyre.builder import ProgramBuilder

sys.path.insert(0, str(Path(__file__).resolve().parent))
import function_oracle

T = ScalarType
FNS = ("sin", "cos", "tan")
_NP = {"sin": np.sin, "cos": np.cos, "tan": np.tan}
_INT = {np.float32: np.uint32, np.float16: np.uint16}

# |x| within 2^-22 ulp of an f32 midpoint (found by a search of random f32 with NumPy's
# f64 sin): exercise the rounding test of the fast path
_SIN_NEAR_MIDPOINT = (
    0x6EE42FC9, 0x448F03F9, 0x6CE79904, 0x4E096D33, 0x50475532, 0x3C85C22F, 0x67A8ECF0,
    0x3EB00D62, 0x7BCEBCDD, 0x60C7295D, 0x3BC30FE8, 0x42459DF8, 0x439774AF, 0x7C5D6B82,
    0x726FD58E, 0x65127213, 0x45E38B6E, 0x3D0650EA, 0x39E89767, 0x3F48DCEA)


def _f32_sample() -> np.ndarray:
    f32 = np.float32
    specials = [0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 0.5, np.pi / 4, np.pi / 2,
                np.pi, 2 * np.pi, 3.4028235e38, -3.4028235e38, 1.17549435e-38, 1e-45, -1e-45,
                2.0**-12, 2.0**-13, 8192.0, 2.0**24, 2.0**63]
    bits = [0x3F490FDB, 0x3F490FDA, 0x6F79BE45, 0xEF79BE45, 0x007FFFFF, 0x80400000,
            *_SIN_NEAR_MIDPOINT]
    rng = np.random.default_rng(32)
    # the f32 next to k pi/2 for k up to 2^128, and their neighbours
    k = np.concatenate([np.arange(1, 200), 2.0 ** rng.uniform(8, 127, 300)])
    near = (np.floor(k) * (np.pi / 2)).astype(f32)
    near = np.concatenate([near, np.nextafter(near, f32(np.inf)),
                           np.nextafter(near, f32(0))])
    rand = rng.integers(0, 2**32, 3000, dtype=np.uint64).astype(np.uint32).view(f32)
    small = (rng.uniform(-4, 4, 1000)).astype(f32)
    return np.concatenate([np.array(specials, f32), np.array(bits, np.uint32).view(f32),
                           near, -near, rand, small])


F32_SAMPLE = _f32_sample()
F16_ALL = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(np.float16)


def oracle(fn: str, xs: np.ndarray) -> np.ndarray:
    """fn correctly rounded to xs.dtype: NumPy's f64 value rounded once where it is
    clearly on one side of a rounding boundary, the decimal oracle everywhere else."""
    dt = xs.dtype.type
    with np.errstate(all="ignore"):
        y = _NP[fn](xs.astype(np.float64))
        out = y.astype(dt)
        up = np.nextafter(out, dt(np.inf)).astype(np.float64)
        down = np.nextafter(out, dt(-np.inf)).astype(np.float64)
        o = out.astype(np.float64)
        gap = np.minimum(np.abs(y - (o + up) / 2), np.abs(y - (o + down) / 2))
        unsure = ~(gap > np.abs(y) * 2.0**-40) | ~np.isfinite(xs) | (y == 0)
    for i in np.flatnonzero(unsure):
        out[i] = function_oracle.correctly_rounded(fn, dt, float(xs[i]))
    return out


def _program(fn: str, ty: ScalarType, tag: str = "") -> vyre.Program:
    k = ProgramBuilder(f"exact_{fn}_{ty}{tag}", workgroup_size=64)
    x = k.buffer("x", ty)
    y = k.buffer("y", ty, "write")
    i = k.global_linear_id()
    with k.if_(i < y.length()):
        y[i] = getattr(vyre, fn)(x[i])
    return k.build()


def _run(be: BaseBackend, program: vyre.Program, xs: np.ndarray) -> np.ndarray:
    out = be.dispatch(program, {"x": xs, "y": np.zeros_like(xs)},
                      DispatchConfig.for_elements(len(xs), 64))
    return np.asarray(out["y"])


def _assert_same(xs: np.ndarray, got: np.ndarray, want: np.ndarray, what: str) -> None:
    it = _INT[xs.dtype.type]
    nan = np.isnan(got) & np.isnan(want)
    bad = ~(nan | (got.view(it) == want.view(it)))
    assert not bad.any(), (
        f"{what}: {int(bad.sum())} of {len(xs)} differ, e.g. x = "
        f"{[hex(int(v)) for v in xs[bad][:5].view(it)]}: got "
        f"{[hex(int(v)) for v in got[bad][:5].view(it)]}, want "
        f"{[hex(int(v)) for v in want[bad][:5].view(it)]}")


@pytest.fixture(scope="module")
def oracles() -> dict[tuple[str, str], np.ndarray]:
    return {}


def _want(cache: dict[tuple[str, str], np.ndarray], fn: str, xs: np.ndarray) -> np.ndarray:
    key = (fn, str(xs.dtype))
    if key not in cache:
        cache[key] = oracle(fn, xs)
    return cache[key]


@pytest.mark.parametrize("fn", FNS)
def test_f16_every_input(backend: BaseBackend, fn: str,
                         oracles: dict[tuple[str, str], np.ndarray]) -> None:
    got = _run(backend, _program(fn, T.F16), F16_ALL)
    _assert_same(F16_ALL, got, _want(oracles, fn, F16_ALL), f"{backend.kind} f16 {fn}")


@pytest.mark.parametrize("fn", FNS)
def test_f32_sample(backend: BaseBackend, fn: str,
                    oracles: dict[tuple[str, str], np.ndarray]) -> None:
    got = _run(backend, _program(fn, T.F32), F32_SAMPLE)
    _assert_same(F32_SAMPLE, got, _want(oracles, fn, F32_SAMPLE), f"{backend.kind} f32 {fn}")


@pytest.fixture
def slow_path_everywhere(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The fast paths' error bound set to 2^-8: nearly every f32 takes the slow path."""
    from vyre.lower.maths import sincos, tan

    monkeypatch.setattr(sincos, "FAST_ERR", 2.0**-8)
    monkeypatch.setattr(tan, "FAST_ERR", 2.0**-8)
    yield


@pytest.mark.parametrize("fn", FNS)
def test_f32_slow_path_alone(reference: BaseBackend, fn: str, slow_path_everywhere: None,
                             oracles: dict[tuple[str, str], np.ndarray]) -> None:
    got = _run(reference, _program(fn, T.F32, "_slow"), F32_SAMPLE)
    _assert_same(F32_SAMPLE, got, _want(oracles, fn, F32_SAMPLE), f"slow path f32 {fn}")


@pytest.mark.parametrize("fn", FNS)
def test_flush_mode(fn: str, oracles: dict[tuple[str, str], np.ndarray]) -> None:
    """In flush mode (docs/IR.md) a subnormal argument reads as a zero of its sign, and
    every other result is the IEEE one (none of these results is tiny)."""
    from vyre.backends.reference import ReferenceBackend

    ref = ReferenceBackend("reference[flush f32]", flush_subnormals=frozenset({T.F32}),
                           flush_tininess="after rounding")
    try:
        got = _run(ref, _program(fn, T.F32), F32_SAMPLE)
    finally:
        ref.close()
    sub = (F32_SAMPLE != 0) & (np.abs(F32_SAMPLE) < np.finfo(np.float32).tiny)
    zeros = np.copysign(np.float32(0), F32_SAMPLE).astype(np.float32)
    want = np.where(sub, oracle(fn, zeros), _want(oracles, fn, F32_SAMPLE))
    _assert_same(F32_SAMPLE, got, want.astype(np.float32), f"flush mode f32 {fn}")


def test_cuda_source_spells_no_libm_and_compiles() -> None:
    """CUDA prints the lowering, not sinf / cosf / tanf, and NVRTC compiles it."""
    cuda: Any = pytest.importorskip("vyre.backends.cuda")
    for fn in FNS:
        for ty in (T.F32, T.F16):
            src = cuda.generate(_program(fn, ty)).source
            assert f"{fn}f(" not in src and f" {fn}(" not in src, (fn, ty)
    try:
        cuda.compile_program(_program("tan", T.F32), "sm_90")
    except vyre.BackendError as e:  # no NVRTC here
        pytest.skip(f"NVRTC is not usable here: {e}")
