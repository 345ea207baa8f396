"""Which f32 operands the WGSL printer fences (vyre/backends/wgpu/fences.py), and that the
fences it leaves out change no result.

- The rule itself (no device): every operand a known driver rewrite could match is fenced:
  constants, float-operation results, sub's right operand, an fma addend that comes from
  an fma of the same multiplicand class (or from a loop of one link), a non-opaque stored
  value; flush mode and VYRE_WGPU_FENCES=all fence everything as before.
- On lavapipe (Mesa NIR + LLVM), with the native fma path forced on (lavapipe's fma rounds
  twice, so vyre normally emulates it there): the fewer fences give the same bits as
  fencing every operand, for shapes NIR is known to rewrite (fma(x, c2, fma(x, c1, d)) is
  factored into fma(x, c1 + c2, d) when nothing hides the shared x), and for the library
  matmul on special values.
- Random Programs from the fuzz generator: the same bits with fewer fences as with all.
- The add / mul / sub rule runs on lavapipe in the normal path and is compared with the
  reference (the conformance table and the fuzz check cover it broadly).
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Iterator

import numpy as np
import pytest

from vyre import DispatchConfig, ProgramBuilder, ScalarType
from vyre.backend import BaseBackend
from vyre.backends.wgpu import fences
from vyre.backends.wgpu.options import WgpuOptions
from vyre.backends.wgpu.render import generate
from vyre.builder import fma
from vyre.ir import nodes as N
from vyre.programs.matmul import matmul_host, matmul_program
from vyre.tools import fuzz
from vyre.tools.testing import check_against_reference

F32, U32 = ScalarType.F32, ScalarType.U32
OPQ, VIS = fences.OPAQUE, fences.VISIBLE


def _fence_calls(src: str, suffix: str = "") -> int:
    """f32 fences in the entry point: the plain ones spelled in place (`fence(k, x)`),
    or with suffix "_ftz" calls of the helpers that also flush."""
    body = src[src.index("@compute"):]
    if suffix:
        return len(re.findall(rf"vy_fence\d_f32{suffix}\(", body))
    return len(re.findall(r"bitcast<f32>\((bitcast<u32>\(|vy_u\.vy_zero)", body))


def fence(k: int, x: str) -> str:
    """The plain f32 fence with uniform k, as the printer spells it in place."""
    if x == "0.0f":
        return f"bitcast<f32>(vy_u.vy_zero{k or ''})"
    return f"bitcast<f32>(bitcast<u32>({x}) + vy_u.vy_zero{k or ''})"


# ------------------------------------------------------------------ the rule


def test_fma_plan_classes() -> None:
    raw, p0 = frozenset({"fma:raw"}), frozenset({"fma:0"})
    assert fences.fma_plan(OPQ, OPQ, OPQ) == fences.FmaPlan("raw", None, False)
    # the addend came from a bare-multiplicand fma: this one's multiplicands are fenced
    assert fences.fma_plan(OPQ, OPQ, raw) == fences.FmaPlan("0", 0, False)
    assert fences.fma_plan(OPQ, OPQ, p0) == fences.FmaPlan("raw", None, False)
    assert fences.fma_plan(OPQ, OPQ, raw | p0) == fences.FmaPlan("1", 1, False)
    # every class taken (a one-link loop): the addend is fenced instead
    assert fences.fma_plan(OPQ, OPQ, fences.TOP - {"v"}) == fences.FmaPlan("raw", None, True)
    # a constant or float operation: fenced, whatever the multiplicands
    assert fences.fma_plan(OPQ, OPQ, VIS).addend_fence
    assert fences.fma_plan(VIS, OPQ, OPQ) == fences.FmaPlan("0", 0, False)


def _one_output(body: object) -> N.Program:
    k = ProgramBuilder("fence_rule", 1)
    x = k.buffer("x", F32)
    out = k.buffer("out", F32, "write")
    body(k, x, out)  # type: ignore[operator]
    return k.build()


def test_constants_sub_and_float_op_operands_are_fenced() -> None:
    def body(k: ProgramBuilder, x: object, out: object) -> None:
        a = k.let(x[0], name="a")  # type: ignore[index]
        b = k.let(x[1], name="b")  # type: ignore[index]
        out[0] = a * 0.0  # type: ignore[index]
        out[1] = a - b  # type: ignore[index]
        out[2] = a * b + b  # type: ignore[index]
        out[3] = a * b  # type: ignore[index]

    src = generate(_one_output(body)).source
    assert f"(v_a * {fence(1, '0.0f')})" in src  # a constant
    assert f"(v_a - {fence(1, 'v_b')})" in src  # sub's right operand, always
    assert f"({fence(0, '(v_a * v_b)')} + v_b)" in src  # a product feeding an add
    assert "(v_a * v_b)" in src  # two loads: nothing a rewrite could match


def test_inert_constants_and_stores_never_read_back_go_bare() -> None:
    k = ProgramBuilder("fence_rule", 1)
    x = k.buffer("x", F32)
    t = k.buffer("t", F32, "read_write")
    out = k.buffer("out", F32, "write")
    a = k.let(x[0], name="a")
    out[0] = a * 3.0  # no rewrite matches a constant that is not 0, +-1, 2^k or special
    out[1] = a * 0.5  # a power of two: fenced
    out[2] = a + 1e-40  # a subnormal: fenced
    out[3] = 3.0 * a
    t[0] = a * a  # read back below: a driver could forward it into the add
    out[4] = t[0] + a
    with k.for_range(0, 4):
        out[5] = t[1] + a  # read at the top of the loop ...
        t[1] = a * a  # ... so this store is read back on the next pass
    src = generate(k.build()).source
    body = src[src.index("@compute"):]
    assert "(v_a * 3.0f)" in body and "(3.0f * v_a)" in body
    assert f"(v_a * {fence(1, '0.5f')})" in body
    assert f"(v_a + {fence(1, 'vy_bits_f32(0x000116c2u)')})" in body  # (its bits)
    # the stores to `out` are never read back: stored bare; those to `t` fenced
    assert "b_out[vy_id_u32(0u)] = (v_a * 3.0f);" in body
    assert body.count(f"= {fence(2, '(v_a * v_a)')};") == 2


def test_fma_chain_alternates_and_a_one_link_loop_fences_its_addend() -> None:
    def body(k: ProgramBuilder, x: object, out: object) -> None:
        a, b, c = (k.let(x[i], name=n) for i, n in enumerate("abc"))  # type: ignore[index]
        acc = k.let(0.0, name="acc")
        acc.set(fma(a, b, acc))
        acc.set(fma(a, c, acc))  # shares `a` with the fma it adds to
        with k.for_range(0, 4):
            acc.set(fma(b, c, acc))  # one link around the loop: same class each time
        out[0] = acc  # type: ignore[index]

    src = generate(_one_output(body)).source
    assert f"var v_acc: f32 = {fence(2, '0.0f')};" in src  # the constant, fenced once
    assert "v_acc = fma(v_a, v_b, v_acc);" in src
    assert f"v_acc = fma({fence(0, 'v_a')}, {fence(0, 'v_c')}, v_acc);" in src
    assert f"v_acc = fma(v_b, v_c, {fence(2, 'v_acc')});" in src


def test_matmul_fences_only_what_a_rewrite_could_match() -> None:
    prog = matmul_program()
    every = generate(prog, options=WgpuOptions(all_fences=True)).source
    few = generate(prog).source
    assert _fence_calls(every) == 1536  # every operand of all 512 fmas
    # odd K steps fence their 16 loaded values (shared by 64 fmas), stores and constants
    assert _fence_calls(few) < _fence_calls(every) // 2
    fmas = re.findall(r"v_acc\w* = fma\((.*)\);", few)
    assert len(fmas) == 512 and not any("vy_zero2" in f for f in fmas)  # addends bare
    # flush mode spelled by vyre keeps every fence, each one flushing its operand, and
    # flushes every result
    explicit = generate(prog, flush_subnormals=True).source
    assert _fence_calls(explicit, "_ftz") == 1536 and _fence_calls(explicit) == 0
    assert len(re.findall(r"= vy_ftz\(fma\(", explicit)) == 512
    # on a device whose own fma flushes (native_flush.py) the fmas are spelled as outside
    # flush mode: the same plain fences, no flush of operands or results
    native = generate(prog, flush_subnormals=True, native_flush=True).source
    assert native == few
    assert "vy_ftz" not in native and _fence_calls(native, "_ftz") == 0


# ------------------------------------------------------------------ on a device


@pytest.fixture(scope="module")
def native_fma_pair() -> Iterator[tuple[BaseBackend, BaseBackend]]:
    """Two lavapipe backends emitting the native fma path: fewest fences, every fence."""
    from vyre.backends.wgpu import PROVIDER

    avail = PROVIDER.probe()
    if not avail.available:
        pytest.skip(f"wgpu backend unavailable: {avail.reason}")
    pair = (PROVIDER.create(), PROVIDER.create())
    for b, every in zip(pair, (False, True), strict=True):
        b._device.info = dataclasses.replace(b._device.info, fma_fused=True)
        b.options = WgpuOptions(all_fences=every)
    yield pair
    for b in pair:
        b.close()


def _factoring_program() -> N.Program:
    """fma(x, c2, fma(x, c1, d)) per element: NIR factors it to fma(x, c1 + c2, d) when the
    shared x is visible in both."""
    k = ProgramBuilder("fma_factoring", 64)
    x, c1, c2, d = (k.buffer(n, F32) for n in ("x", "c1", "c2", "d"))
    out = k.buffer("out", F32, "write")
    i = k.let(k.global_linear_id())
    with k.if_(i < x.length()):
        xi = k.let(x[i])
        acc = k.let(fma(xi, c1[i], d[i]))
        acc.set(fma(xi, c2[i], acc))
        with k.for_range(0, 3):
            acc.set(fma(xi, xi, acc))  # a one-link loop with a loop-invariant x
        out[i] = fma(xi, c1[i], 0.0)  # a -0 product plus +0 is +0, not -0
        out[i + x.length()] = acc
    return k.build()


def test_fewer_fences_same_bits_on_native_fma(
    native_fma_pair: tuple[BaseBackend, BaseBackend],
) -> None:
    n = 4096
    rng = np.random.default_rng(7)
    data = {name: rng.standard_normal(n).astype(np.float32) for name in ("x", "c1", "c2", "d")}
    data["c1"][:64] = 0.0
    data["x"][:32] = -1.0
    prog = _factoring_program()
    cfg = DispatchConfig(grid=n // 64)
    outs = [b.dispatch(prog, {**data, "out": 2 * n}, cfg)["out"].view(np.uint32)
            for b in native_fma_pair]
    assert np.array_equal(outs[0], outs[1])
    # and the fewer-fence program kept the IEEE +0 of fma(-1, 0, +0)
    assert (outs[0][:32] == 0).all()


def test_matmul_same_bits_on_native_fma(
    native_fma_pair: tuple[BaseBackend, BaseBackend],
) -> None:
    rng = np.random.default_rng(3)
    a = rng.standard_normal((70, 45)).astype(np.float32)
    b = rng.standard_normal((45, 33)).astype(np.float32)
    a[0, :] = -1.0
    b[:, 0] = 0.0  # -1 * 0: -0 products onto the +0 start
    a[1, 3], a[2, 4], b[5, 6] = np.inf, np.nan, -np.inf
    a[3, :] = 1e-40  # subnormal
    outs = [matmul_host(be, a, b, block=32, per_thread=4, block_k=8).view(np.uint32)
            for be in native_fma_pair]
    assert np.array_equal(outs[0], outs[1])


def test_fuzzed_programs_same_bits_with_fewer_fences(
    native_fma_pair: tuple[BaseBackend, BaseBackend],
) -> None:
    """Random Programs (vyre.tools.fuzz's generator), every-fence spelling as the oracle."""
    every, fewest = native_fma_pair[1], native_fma_pair[0]
    # (no long loops: both sides would hit lavapipe's loop budget and refuse alike)
    opts = dataclasses.replace(fuzz.options_for([every, fewest]), long_loops=0.0)
    n = int(os.environ.get("VYRE_FUZZ_EXAMPLES", "40"))
    assert fuzz.fuzz_backends(every, [fewest], max_examples=n, options=opts,
                              use_database=False) > 0


@pytest.mark.wgpu
def test_bare_operands_match_the_reference(reference: BaseBackend) -> None:
    from vyre.backends.wgpu import PROVIDER

    avail = PROVIDER.probe()
    if not avail.available:
        pytest.skip(f"wgpu backend unavailable: {avail.reason}")
    k = ProgramBuilder("bare_ops", 64)
    x, y = k.buffer("x", F32), k.buffer("y", F32)
    t = k.buffer("t", F32, "read_write")
    out = k.buffer("out", F32, "write")
    i = k.let(k.global_linear_id())
    n = x.length()
    with k.if_(i < n):
        a = k.let(x[i])
        b = k.let(y[i])
        out[i] = a + b
        out[i + n] = a * b
        out[i + 2 * n] = a - a  # inf - inf is NaN, not 0
        out[i + 3 * n] = (a - b) + b  # not a
        out[i + 4 * n] = a * b + a
        out[i + 5 * n] = a * 3.0 + b  # a bare constant, the product fenced
        out[i + 6 * n] = b - a * 3.0
        t[i] = a * b  # read back: fenced, or a driver contracts the add below
        out[i + 7 * n] = t[i] + a
    vals = np.array([np.inf, -np.inf, np.nan, -0.0, 0.0, 1e-40, 3.5, -2.0], np.float32)
    xs = np.repeat(vals, 8)
    ys = np.tile(vals, 8)
    wg = PROVIDER.create()
    try:
        check_against_reference(
            k.build(), {"x": xs, "y": ys, "t": np.zeros(64, np.float32), "out": 8 * 64}, DispatchConfig(grid=1), [wg],
            reference
        )
    finally:
        wg.close()
