"""sin, cos, tan, asin, acos and atan2 are one exact definition (vyre.lower.maths): correctly
rounded, the same bits on every backend, in IEEE and flush mode.

Checked against vyre/tools/function_oracle.py (decimal and exact rationals, not vyre's code):
every f16 input on each backend (atan2: every pair of a grid of specials and 60,000
random pairs); for f32 specials, subnormals, the worst case of the reduction by pi/2 and
floats next to multiples of pi/2 up to FLT_MAX, arguments whose result lies near the
middle of two f32, [-1, 1] and its ends for asin and acos, every pair of special operands, ratios
near the table's points and huge or tiny ratios for atan2, and a few thousand random bit
patterns; the slow (double-double) path alone, by forcing every input onto it.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

import vyre
from vyre import DispatchConfig, ScalarType
from vyre.backend import BaseBackend
from vyre.builder import ProgramBuilder
from vyre.tools import function_oracle
from vyre.tools.testing import flushed_types

T = ScalarType
FNS = ("sin", "cos", "tan", "asin", "acos")
_INT = {np.float32: np.uint32, np.float16: np.uint16}
_SCALAR = {np.float32: T.F32, np.float16: T.F16}

# sin(x) within 2^-22 ulp of an f32 midpoint (found by a search of 2^28 random f32 with
# NumPy's f64 sin): they exercise the rounding test of the fast path
_SIN_NEAR_MIDPOINT = (
    0x6EE42FC9, 0x448F03F9, 0x6CE79904, 0x4E096D33, 0x50475532, 0x3C85C22F, 0x67A8ECF0,
    0x3EB00D62, 0x7BCEBCDD, 0x60C7295D, 0x3BC30FE8, 0x42459DF8, 0x439774AF, 0x7C5D6B82,
    0x726FD58E, 0x65127213, 0x45E38B6E, 0x3D0650EA, 0x39E89767, 0x3F48DCEA)
# the same for cos
_COS_NEAR_MIDPOINT = (
    0x6BA11B42, 0x764FE77F, 0x7377A82F, 0x3F46459D, 0x59443C0A, 0x64D15E3B, 0x72CFC61D,
    0x6C092DAE, 0x4500B329, 0x741B2833, 0x3DA4D031, 0x3AB22B21, 0x428A5291, 0x39800001)


def _f32_sample() -> np.ndarray:
    f32 = np.float32
    specials = [0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 0.5, np.pi / 4, np.pi / 2,
                np.pi, 2 * np.pi, 3.4028235e38, -3.4028235e38, 1.17549435e-38, 1e-45, -1e-45,
                2.0**-12, 2.0**-13, 8192.0, 2.0**24, 2.0**63]
    bits = [0x3F490FDB, 0x3F490FDA, 0x6F79BE45, 0xEF79BE45, 0x437CE5F1, 0x48FFFFFF, 0x49000000,
            0x49000001, 0x007FFFFF, 0x80400000,
            *_SIN_NEAR_MIDPOINT, *_COS_NEAR_MIDPOINT]
    rng = np.random.default_rng(32)
    # the f32 next to k pi/2 for k up to 2^128, and their neighbours
    k = np.concatenate([np.arange(1, 200), 2.0 ** rng.uniform(8, 127, 300)])
    near = (np.floor(k) * (np.pi / 2)).astype(f32)
    near = np.concatenate([near, np.nextafter(near, f32(np.inf)),
                           np.nextafter(near, f32(0))])
    rand = rng.integers(0, 2**32, 3000, dtype=np.uint64).astype(np.uint32).view(f32)
    small = (rng.uniform(-4, 4, 1000)).astype(f32)
    near_one = 1 - 2.0 ** -rng.uniform(1, 24, 200)  # (asin's and acos's steep ends)
    unit = np.concatenate([rng.uniform(-1, 1, 1000), near_one, -near_one,
                           np.nextafter(f32(1), f32(0)) * np.array([1, -1])]).astype(f32)
    return np.concatenate([np.array(specials, f32), np.array(bits, np.uint32).view(f32),
                           near, -near, rand, small, unit])


def _pairs(dt: type, n: int) -> tuple[np.ndarray, np.ndarray]:
    """atan2 operands: every pair of specials, then random bit patterns, ratios next to
    i/16 and huge / tiny ratios."""
    it = _INT[dt]
    info = np.finfo(dt)
    sp = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 3.0, -0.25, info.max,
                   -info.max, info.tiny, info.smallest_subnormal, -info.smallest_subnormal],
                  dt)
    rng = np.random.default_rng(16)
    ry = rng.integers(0, 1 << (8 * np.dtype(dt).itemsize), n, dtype=np.uint64)
    rx = rng.integers(0, 1 << (8 * np.dtype(dt).itemsize), n, dtype=np.uint64)
    xs = rng.uniform(-3, 3, n // 4).astype(dt)
    ratio = (rng.integers(0, 33, n // 4) / 16 * (1 + rng.uniform(-2**-10, 2**-10, n // 4)))
    return (np.concatenate([np.repeat(sp, len(sp)), ry.astype(it).view(dt),
                            (xs * ratio).astype(dt)]),
            np.concatenate([np.tile(sp, len(sp)), rx.astype(it).view(dt), xs]))


F32_SAMPLE = _f32_sample()
F32_PAIRS = _pairs(np.float32, 4000)
F16_PAIRS = _pairs(np.float16, 60000)
F16_ALL = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(np.float16)


def oracle(fn: str, *xs: np.ndarray) -> np.ndarray:
    """fn correctly rounded to the arguments' type (function_oracle.fast_oracle)."""
    return function_oracle.fast_oracle(fn, xs[0].dtype.type, *xs)


def _program(fn: str, ty: ScalarType, tag: str = "") -> vyre.Program:
    k = ProgramBuilder(f"exact_{fn}_{ty}{tag}", workgroup_size=64)
    xs = [k.buffer(f"x{j}", ty) for j in range(2 if fn == "atan2" else 1)]
    y = k.buffer("y", ty, "write")
    i = k.global_linear_id()
    with k.if_(i < y.length()):
        y[i] = getattr(vyre, fn)(*(x[i] for x in xs))
    return k.build()


def _run(be: BaseBackend, program: vyre.Program, *xs: np.ndarray) -> np.ndarray:
    ins = {f"x{j}": x for j, x in enumerate(xs)}
    out = be.dispatch(program, {**ins, "y": np.zeros_like(xs[0])},
                      DispatchConfig.for_elements(len(xs[0]), 64))
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


def _want(cache: dict[tuple[str, str], np.ndarray], fn: str, *xs: np.ndarray) -> np.ndarray:
    key = (fn, str(xs[0].dtype))
    if key not in cache:
        cache[key] = oracle(fn, *xs)
    return cache[key]


def _flushed(v: np.ndarray) -> np.ndarray:
    """Subnormals as zeros of their sign (flush mode, docs/IR.md)."""
    tiny = np.finfo(v.dtype).tiny
    return np.where(np.abs(v) < tiny, np.copysign(v.dtype.type(0), v), v).astype(v.dtype)


def _want_on(be: BaseBackend, cache: dict[tuple[str, str], np.ndarray], fn: str,
             *xs: np.ndarray) -> np.ndarray:
    """The oracle's results in `be`'s mode: in flush mode of the type, subnormal operands
    read as zeros and tiny results are zeros (none of these results lies within half an
    ulp below the smallest normal, where the tininess rules differ)."""
    if _SCALAR[xs[0].dtype.type] not in flushed_types(be):
        return _want(cache, fn, *xs)
    return _flushed(oracle(fn, *(_flushed(x) for x in xs)))


@pytest.mark.parametrize("fn", FNS)
def test_f16_every_input(backend: BaseBackend, fn: str,
                         oracles: dict[tuple[str, str], np.ndarray]) -> None:
    got = _run(backend, _program(fn, T.F16), F16_ALL)
    _assert_same(F16_ALL, got, _want_on(backend, oracles, fn, F16_ALL),
                 f"{backend.kind} f16 {fn}")


@pytest.mark.parametrize("fn", FNS)
def test_f32_sample(backend: BaseBackend, fn: str,
                    oracles: dict[tuple[str, str], np.ndarray]) -> None:
    got = _run(backend, _program(fn, T.F32), F32_SAMPLE)
    _assert_same(F32_SAMPLE, got, _want_on(backend, oracles, fn, F32_SAMPLE),
                 f"{backend.kind} f32 {fn}")


@pytest.mark.parametrize("dt", [np.float32, np.float16])
def test_atan2_pairs(backend: BaseBackend, dt: type,
                     oracles: dict[tuple[str, str], np.ndarray]) -> None:
    ys, xs = F32_PAIRS if dt is np.float32 else F16_PAIRS
    got = _run(backend, _program("atan2", T.F32 if dt is np.float32 else T.F16), ys, xs)
    _assert_same(ys, got, _want_on(backend, oracles, "atan2", ys, xs),
                 f"{backend.kind} atan2 {dt}")


@pytest.fixture
def slow_path_everywhere(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The fast paths' error bound set to 2^-8: nearly every f32 takes the slow path (and
    sincos32's f32 path, the reference's, hands every argument to the f64 one)."""
    from vyre.lower.maths import atan, sincos, sincos32, tan

    for module in (sincos, tan, atan):
        monkeypatch.setattr(module, "FAST_ERR", 2.0**-8)
    monkeypatch.setattr(sincos32, "_E_ABS", 1.0)
    yield


@pytest.mark.parametrize("fn", FNS)
def test_f32_slow_path_alone(reference: BaseBackend, fn: str, slow_path_everywhere: None,
                             oracles: dict[tuple[str, str], np.ndarray]) -> None:
    got = _run(reference, _program(fn, T.F32, "_slow"), F32_SAMPLE)
    _assert_same(F32_SAMPLE, got, _want(oracles, fn, F32_SAMPLE), f"slow path f32 {fn}")


def test_f32_atan2_slow_path_alone(reference: BaseBackend, slow_path_everywhere: None,
                                  oracles: dict[tuple[str, str], np.ndarray]) -> None:
    ys, xs = F32_PAIRS
    got = _run(reference, _program("atan2", T.F32, "_slow"), ys, xs)
    _assert_same(ys, got, _want(oracles, "atan2", ys, xs), "slow path f32 atan2")


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
    _assert_same(F32_SAMPLE, got, _flushed(oracle(fn, _flushed(F32_SAMPLE))),
                 f"flush mode f32 {fn}")


def test_cuda_source_spells_no_libm_and_compiles() -> None:
    """CUDA prints the lowering, not sinf / cosf / ... , and NVRTC compiles it."""
    cuda: Any = pytest.importorskip("vyre.backends.cuda")
    for fn in (*FNS, "atan2"):
        for ty in (T.F32, T.F16):
            src = cuda.generate(_program(fn, ty)).source
            assert f"{fn}f(" not in src and f" {fn}(" not in src, (fn, ty)
    try:
        for fn, ty in (("tan", T.F32), ("atan2", T.F32), ("sin", T.F16), ("asin", T.F16)):
            cuda.compile_program(_program(fn, ty), "sm_90")
    except vyre.BackendError as e:  # no NVRTC here
        pytest.skip(f"NVRTC is not usable here: {e}")


def test_atan2_flush_mode() -> None:
    """Flush mode: subnormal operands read as zeros of their sign, tiny results are
    zeros of their sign."""
    from vyre.backends.reference import ReferenceBackend

    ys, xs = F32_PAIRS
    ref = ReferenceBackend("reference[flush f32]", flush_subnormals=frozenset({T.F32}),
                           flush_tininess="after rounding")
    try:
        got = _run(ref, _program("atan2", T.F32), ys, xs)
    finally:
        ref.close()
    _assert_same(ys, got, _flushed(oracle("atan2", _flushed(ys), _flushed(xs))),
                 "flush mode f32 atan2")
