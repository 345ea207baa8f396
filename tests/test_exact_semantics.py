"""Exactness holes that real drivers opened (issue 13), checked on every backend against
the reference, bit for bit (the sign of zero included):

- f32 / f16 division and sqrt correctly rounded over the whole range: x / x at the limits,
  33 / 33 (so i32(a / b) is 1), subnormal and overflowing quotients, random pairs;
  float rem by its step-by-step definition.
- pow(+-0, y) and sin / tan of -0 keep C99 Annex F's signs.
- f64 and f32 trunc / round / floor / ceil / rem on the input classes lavapipe's f64 trunc
  and round got wrong on a host without AVX-512 (zero results' signs, fractions from 2^24
  up, ties and values just off a half, quotients from 2^24 up), against NumPy.
- Long loops: exact, or a DispatchError naming the adapter's loop limit (never truncated).
- f32 atomic add on a workgroup array.
- Indirect grids over the per-dimension limit: exact, or a DispatchError naming the limit.
"""

from __future__ import annotations

import numpy as np
import pytest

import vyre
from vyre import DispatchConfig, IndirectGrid, ProgramBuilder, ScalarType
from vyre.backend import BaseBackend
from vyre.backends.wgpu.divsqrt import div_cases, random_f32, sqrt_cases
from vyre.builder import ceil, floor, pow_, round_, sin, tan, trunc
from vyre.errors import DispatchError
from vyre.tools.testing import (
    EXACT,
    assert_agree,
    div_sqrt_inputs,
    div_sqrt_program,
    reference_for,
)

F32, F16, I32, U32 = ScalarType.F32, ScalarType.F16, ScalarType.I32, ScalarType.U32


def _need(be: BaseBackend, ty: ScalarType) -> None:
    if ty.feature and not be.supports(ty.feature):
        pytest.skip(f"{be.id} does not report feature {ty.feature!r}")


def _same_bits(got: np.ndarray, exp: np.ndarray, what: str) -> None:
    """Equal under the IR's rules, and zeros of the same sign."""
    assert_agree(got, exp, EXACT, what)
    zero = (got == 0) & (exp == 0)
    bad = np.flatnonzero(zero & (np.signbit(got) != np.signbit(exp)))
    assert bad.size == 0, f"{what}: sign of zero differs at {bad[:8]}"


def _run(be: BaseBackend, ref: BaseBackend, prog: vyre.Program, inputs: dict, cfg: DispatchConfig
         ) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    want = reference_for(be, ref).dispatch(prog, inputs, cfg)
    return be.dispatch(prog, inputs, cfg), want


def _div_sqrt(be: BaseBackend, ref: BaseBackend, x: np.ndarray, y: np.ndarray
              ) -> dict[str, np.ndarray]:
    """q = x / y, sqrt(x), x % y and i32(x / y) on `be`, asserted equal to the reference
    bit for bit; `be`'s results."""
    inputs, cfg = div_sqrt_inputs(x, y)
    got, want = _run(be, ref, div_sqrt_program(F16 if x.dtype == np.float16 else F32), inputs, cfg)
    for name in ("q", "r", "m", "t"):
        _same_bits(got[name], want[name], f"{x.dtype} {name} on {be.id}")
    return got


def _div_inputs(n_random: int) -> tuple[np.ndarray, np.ndarray]:
    a, b = div_cases()
    rng = np.random.default_rng(1913)
    x = np.concatenate([a, random_f32(rng, n_random), sqrt_cases()])
    y = np.concatenate([b, random_f32(rng, n_random), np.resize(b, sqrt_cases().size)])
    return x.astype(np.float32), y.astype(np.float32)


def test_f32_division_sqrt_rem_bit_identical(backend: BaseBackend, reference: BaseBackend) -> None:
    """Hard cases plus 2^16 random pairs over the whole exponent range (on the H100's
    Vulkan driver this exercises vyre's exact division / sqrt, chosen by the probe)."""
    _div_sqrt(backend, reference, *_div_inputs(1 << 16))


def test_division_edge_values(backend: BaseBackend, reference: BaseBackend) -> None:
    """The values measured wrong on NVIDIA's Vulkan driver, with their IEEE answers."""
    big = np.float32(3.4028235e38)
    x = np.array([big, -big, 33.0, 99.0, 1e-45, 1.0, 3.0, 6.0, 1.0], np.float32)
    y = np.array([big, big, 33.0, 33.0, 1e-45, 3.0, 3.0, 3.0, 1e-45], np.float32)
    got = _div_sqrt(backend, reference, x, y)
    assert got["q"][0] == 1.0 and got["q"][1] == -1.0 and got["q"][2] == 1.0
    assert got["q"][3] == np.float32(3.0) and list(got["t"][:4]) == [1, -1, 1, 3]
    assert got["m"][7] == 0.0 and got["m"][2] == 0.0


def test_f16_division_sqrt(backend: BaseBackend, reference: BaseBackend) -> None:
    _need(backend, F16)
    rng = np.random.default_rng(16)
    bits = rng.integers(0, 0x7C00, size=1 << 14, dtype=np.uint16)  # finite, both signs below
    x = (bits | (rng.integers(0, 2, bits.size, dtype=np.uint16) << 15)).view(np.float16)
    y = np.roll(x, 7)
    specials = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 65504, -65504, 6e-8, 33, 1],
                        np.float16)
    sa, sb = np.meshgrid(specials, specials)
    x = np.concatenate([x, sa.ravel()])
    y = np.concatenate([y, sb.ravel()])
    _div_sqrt(backend, reference, x, y)


def test_pow_sin_tan_signed_zero(backend: BaseBackend, reference: BaseBackend) -> None:
    """C99 Annex F: pow(+-0, y < 0) = +-inf for odd integer y (the sign of the zero), +inf
    otherwise; pow(-0, odd y > 0) = -0; sin(-0) = tan(-0) = -0."""
    k = ProgramBuilder("pow_zero_signs", workgroup_size=16)
    xb, yb = k.buffer("x", F32), k.buffer("y", F32)
    o = k.buffer("o", F32, "write")
    s = k.buffer("s", F32, "write")
    i = k.global_linear_id()
    with k.if_(i < xb.length()):
        o[i] = pow_(xb[i], yb[i])
        s[i] = sin(xb[i])
        s[i + xb.length()] = tan(xb[i])
    prog = k.build()
    x = np.array([0.0, -0.0, 0.0, -0.0, -0.0, -0.0, 0.0, -0.0, -0.0, -0.0], np.float32)
    y = np.array([-1.0, -1.0, -2.0, -2.0, -0.5, 3.0, 3.0, 2.0, -np.inf, np.inf], np.float32)
    got, want = _run(backend, reference, prog, {"x": x, "y": y, "o": x.size, "s": 2 * x.size},
                     DispatchConfig(grid=1))
    inf = np.inf
    expected = np.array([inf, -inf, inf, inf, inf, -0.0, 0.0, 0.0, inf, 0.0], np.float32)
    _same_bits(got["o"], expected, f"pow on {backend.id}")
    _same_bits(got["o"], want["o"], f"pow vs reference on {backend.id}")
    assert np.all(np.signbit(got["s"]) == np.signbit(np.concatenate([x, x])))
    _same_bits(got["s"], want["s"], f"sin/tan on {backend.id}")


_ROUNDINGS = {"trunc": (trunc, np.trunc), "round": (round_, np.rint),  # rint: half to even
              "floor": (floor, np.floor), "ceil": (ceil, np.ceil)}
_TIES = [0, 1, 2, 3, 1000, 1001, 2**23 - 1, 2**23, 2**24 + 1, 2**31, 2**31 + 1, 2**51 - 1]
_NEAR = [0, 1, 2, 7, 2**20, 2**30]
_QUOTIENTS = ([-3.196599712101136e16, 1974014629615873.8, 12770649328890.14, 8.51336337146153e17,
               -5.741788563365982e170, 606205515.1401901, 2.0**40 + 0.5],
              [-62688.5, 33353.0, 158897.75, -212654.25, -3.5985691916990045e160, 3.0, 0.75])
# x by input class (y = 1 for rem, except where given): what lavapipe's f64 trunc / round
# got wrong on a host without AVX-512 (render.py, vy_trunc_f64), both signs throughout
_ROUNDING_CLASSES: dict[str, tuple[list[float], list[float] | None]] = {
    # |x| < 1: a zero of x's sign (trunc(-0.5) was +0), 0.5 to the even 0, -0 % 1 = +0
    "zero_results": ([-0.0, 0.0, -0.3, -0.5, -0.7, -0.99999999, -1e-300, -5e-324, 0.3, 0.5,
                      0.7, 0.99999999, 1e-300], None),
    # 2^24 < |x| < 2^52: trunc and round kept x as it was
    "fractions_above_2^24": ([s * (2.0**k + f) for k in range(24, 52) for f in (0.25, 0.5, 0.75)
                              for s in (1, -1)], None),
    # k + 1/2 goes to the even neighbour (round took every tie toward zero)
    "ties": ([s * (k + 0.5) for k in _TIES for s in (1, -1)], None),
    # just off a half (round added 0.49999997: k + 0.50000001 went down)
    "near_half": ([s * v for k in _NEAR for v in (np.nextafter(k + 0.5, np.inf),
                                                 np.nextafter(k + 0.5, -np.inf), k + 0.50000001)
                   for s in (1, -1)], None),
    # integral from 2^52 up, and the specials: x itself
    "integral_and_special": ([2.0**52, -2.0**52, 2.0**52 + 1, 2.0**53, -(2.0**53 + 2), 1e300,
                              -1.7976931348623157e308, np.inf, -np.inf, np.nan, 1.0, -1.0,
                              16777217.0], None),
    # rem = a - b * trunc(a / b) with a / b above 2^24: it came out 0
    "quotients_above_2^24": _QUOTIENTS,
}


def _rounding_program(ty: ScalarType) -> vyre.Program:
    k = ProgramBuilder(f"rounding_{ty}", workgroup_size=64)
    xb, yb = k.buffer("x", ty), k.buffer("y", ty)
    outs = {name: k.buffer(name, ty, "write") for name in (*_ROUNDINGS, "rem")}
    i = k.global_linear_id()
    with k.if_(i < xb.length()):
        for name, (fn, _) in _ROUNDINGS.items():
            outs[name][i] = fn(xb[i])
        outs["rem"][i] = xb[i] % yb[i]
    return k.build()


@pytest.mark.parametrize("cls", list(_ROUNDING_CLASSES))
@pytest.mark.parametrize("ty", [ScalarType.F64, F32], ids=str)
def test_rounding_and_rem_by_input_class(backend: BaseBackend, reference: BaseBackend,
                                         ty: ScalarType, cls: str) -> None:
    """floor, ceil, trunc, round (half to even) and rem (a - b * trunc(a / b), step by step)
    against NumPy's and the reference's bits, zeros' signs included (f32: the same values,
    rounded to f32; none is subnormal there, so flush mode cannot change them)."""
    _need(backend, ty)
    xs, ys = _ROUNDING_CLASSES[cls]
    with np.errstate(over="ignore"):
        x = np.array(xs, np.float64).astype(ty.numpy)
        y = np.ones_like(x) if ys is None else np.array(ys, np.float64).astype(ty.numpy)
    n = x.size
    got, want = _run(backend, reference, _rounding_program(ty),
                     {"x": x, "y": y, **dict.fromkeys((*_ROUNDINGS, "rem"), n)},
                     DispatchConfig(grid=-(-n // 64)))
    with np.errstate(invalid="ignore", over="ignore"):
        expected = {name: np_fn(x) for name, (_, np_fn) in _ROUNDINGS.items()}
        expected["rem"] = x - y * np.trunc(x / y)
    wrong = []  # (every operation's verdict: one wrong operation does not hide another)
    for name, e in expected.items():
        for on, out in ((backend.id, got[name]), ("the reference", want[name])):
            try:
                _same_bits(out, e, f"{ty} {name} of {cls} on {on}")
            except AssertionError as exc:
                wrong.append(str(exc).splitlines()[0])
    assert not wrong, "\n".join(wrong)


def _loop_limit(be: BaseBackend) -> int | None:
    return be.capabilities().details.get("loop_iteration_limit")


def _counting_program(nested: bool) -> vyre.Program:
    k = ProgramBuilder("long_loop", workgroup_size=1)
    n = k.param("n", U32)
    o = k.buffer("o", U32, "write", count=1)
    c = k.let(k.lit(0, U32))
    if nested:
        with k.for_range(0, 100), k.for_range(0, n):
            k.assign(c, c + 1)
    else:
        j = k.let(k.lit(0, U32))
        with k.while_(j < n):
            k.assign(j, j + 1)
            k.assign(c, c + 1)
    o[0] = c
    return k.build()


@pytest.mark.parametrize("nested,n", [(False, 70_000), (True, 1000)], ids=["while", "nested"])
def test_long_loops_are_exact_or_refused(
    backend: BaseBackend, nested: bool, n: int
) -> None:
    """70,000 iterations in one invocation (lavapipe silently stops at 65,535): the exact
    count, or a DispatchError naming the adapter's limit; the backend stays usable."""
    prog = _counting_program(nested)
    cfg = DispatchConfig(grid=1, params={"n": n})
    total = 100 * n if nested else n
    limit = _loop_limit(backend)
    if limit is None:
        assert backend.dispatch(prog, {"o": 1}, cfg)["o"][0] == total
        return
    assert limit < total
    with pytest.raises(DispatchError, match=f"{limit} loop iterations"):
        backend.dispatch(prog, {"o": 1}, cfg)
    ok = DispatchConfig(grid=1, params={"n": 600 if nested else 60_000})
    assert backend.dispatch(prog, {"o": 1}, ok)["o"][0] == 60_000


def test_loop_limit_is_exactly_what_programs_may_use(backend: BaseBackend) -> None:
    """The reported limit is the boundary, in loop passes (docs/IR.md: each For iteration,
    each evaluation of a While's condition): a While of limit - 1 iterations (limit condition
    checks) runs exactly, one more is refused (the fuzzer's acceptance rule relies on it)."""
    limit = _loop_limit(backend)
    if limit is None:
        pytest.skip(f"{backend.id} reports no loop limit (the exact count is tested above)")
    prog = _counting_program(False)
    at = DispatchConfig(grid=1, params={"n": limit - 1})
    assert backend.dispatch(prog, {"o": 1}, at)["o"][0] == limit - 1
    with pytest.raises(DispatchError, match=f"{limit} loop iterations"):
        backend.dispatch(prog, {"o": 1}, DispatchConfig(grid=1, params={"n": limit}))


def test_long_loop_refused_before_any_result_is_seen(backend: BaseBackend) -> None:
    """Async dispatch (wait), plain reads, synchronize and pipelines all check first."""
    limit = _loop_limit(backend)
    if limit is None:
        pytest.skip(f"{backend.id} reports no loop limit (the exact count is tested above)")
    prog = _counting_program(False)
    out = backend.allocate_device_buffer(4)
    bad = DispatchConfig(grid=1, params={"n": limit + 10})
    try:
        pending = backend.dispatch_async(prog, [], [out], bad)
        with pytest.raises(DispatchError, match="loop"):
            pending.wait()
        backend.dispatch_async(prog, [], [out], bad)
        with pytest.raises(DispatchError, match="loop"):
            backend.read(out, dtype=np.uint32)
        backend.dispatch_async(prog, [], [out], bad)
        with pytest.raises(DispatchError, match="loop"):
            backend.synchronize()
        pipe = backend.pipeline([vyre.Step(prog, [], [out], bad)])
        with pytest.raises(DispatchError, match="loop"):
            pipe.run(read=[vyre.ReadRange(out, 0, None, np.uint32)])
        backend.dispatch_with_device_buffers(prog, [], [out], DispatchConfig(grid=1, params={"n": 5}))
        assert backend.read(out, dtype=np.uint32)[0] == 5
    finally:
        out.free()


def test_workgroup_f32_atomic_add(backend: BaseBackend, reference: BaseBackend) -> None:
    """Sums of small integers in f32 (exact in any order) through a workgroup array."""
    if not backend.supports("atomic_float"):
        pytest.skip(f"{backend.id} does not report feature 'atomic_float'")
    k = ProgramBuilder("wg_f32_atomic", workgroup_size=64)
    x = k.buffer("x", F32)
    o = k.buffer("o", F32, "write")
    acc = k.shared("acc", F32, 4)
    lid = k.local_id(0)
    with k.if_(lid < 4):
        acc[lid] = 0.0
    k.barrier()
    acc.atomic_add(lid % 4, x[k.global_linear_id()])
    k.barrier()
    with k.if_(lid < 4):
        o[k.workgroup_id(0) * 4 + lid] = acc[lid]
    prog = k.build()
    xs = np.random.default_rng(6).integers(-50, 50, 64 * 8).astype(np.float32)
    got, want = _run(backend, reference, prog, {"x": xs, "o": 32}, DispatchConfig(grid=8))
    _same_bits(got["o"], want["o"], f"workgroup f32 atomics on {backend.id}")
    assert np.array_equal(got["o"], xs.reshape(8, 16, 4).sum(axis=1).ravel())


def test_indirect_grid_over_the_dimension_limit(backend: BaseBackend) -> None:
    """65,536 workgroups in x from the device: all run, or DispatchError naming the limit."""
    if not backend.supports("indirect_dispatch"):
        pytest.skip(f"{backend.id} does not report feature 'indirect_dispatch'")
    k = ProgramBuilder("count_groups", workgroup_size=1)
    o = k.buffer("o", U32, "read_write", count=1)
    o.atomic_add(0, 1)
    prog = k.build()
    groups = 65_536
    out = backend.allocate_device_buffer(4)
    grid = backend.allocate_device_buffer(12)
    try:
        backend.write(out, np.zeros(1, np.uint32))
        backend.write(grid, np.array([groups, 1, 1], np.uint32))
        cfg = DispatchConfig(grid=IndirectGrid(buffer=grid))
        limit = backend.capabilities().limits.get("max_workgroups_per_dimension", groups)
        try:  # refused when enqueued (the reference) or when waited for (wgpu)
            backend.dispatch_with_device_buffers(prog, [], [out], cfg)
            ran = backend.read(out, dtype=np.uint32)[0]
        except DispatchError as exc:  # refused: only over a limit, and it says so
            assert limit < groups and f"{groups} workgroups" in str(exc), exc
            assert f"limit of {limit}" in str(exc), exc
        else:
            assert ran == groups, f"{backend.id} ran {ran} of {groups} workgroups silently"
        backend.write(grid, np.array([3, 1, 1], np.uint32))  # within the limit: runs
        backend.write(out, np.zeros(1, np.uint32))
        backend.dispatch_with_device_buffers(prog, [], [out], cfg)
        assert backend.read(out, dtype=np.uint32)[0] == 3
    finally:
        out.free()
        grid.free()
