"""The WGSL printer's vec4 workgroup arrays (vyre/backends/wgpu/vectors.py), and the lean
barriers (vyre/backends/wgpu/barriers.py, helper wgscan's) the matmul relies on: which
spelling is emitted, and that it changes no bit.

- Without a device: the library matmul's tiles are `array<vec4<f32>>`, its 16 scalar tile
  reads per K step are 4 vec4 reads (A's with the constant offset split out, which needs
  Ranges to bound the lowered division), B's staging one vec4 store, and no barrier has
  storageBarrier(); the measurement knobs give back the old spelling. Runs that must not
  merge stay scalar: unaligned, base with one trailing zero bit, store values that read the
  array, an assign target the base reads. The barrier rule keeps storageBarrier() wherever
  a buffer access could conflict across a barrier.
- On lavapipe (and any wgpu device): the matmul (tiles, edge shapes where tiles are
  partial, the run spelled without the split offset) returns the bits of the reference in
  the device's float mode (matmul_reference's where the device keeps subnormals); hand-written programs with
  vec4 arrays, mixed scalar accesses and unmerged runs agree with the reference backend.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import numpy as np
import pytest

from vyre import DispatchConfig, ProgramBuilder, ScalarType
from vyre.backend import BaseBackend
from vyre.backends.wgpu import vectors
from vyre.backends.wgpu.barriers import needs_storage_barrier
from vyre.backends.wgpu.options import WgpuOptions
from vyre.backends.wgpu.render import TRAITS, generate
from vyre.ir import nodes as N
from vyre.lower import lower
from vyre.programs.matmul import (
    Tiles,
    matmul_config,
    matmul_host,
    matmul_program,
    matmul_reference,
)
from vyre.tools.testing import check_against_reference, reference_for

F32, U32, I32 = ScalarType.F32, ScalarType.U32, ScalarType.I32
WG = 64


def _vec_reads(src: str) -> int:
    return len(re.findall(r"let vy_q\d+: vec4<", src))


def _vec_stores(src: str) -> int:
    return len(re.findall(r"\] = vec4<", src))


# ------------------------------------------------------------------ the spelling


@pytest.mark.parametrize("tiles", [Tiles(), Tiles(64, 4, 16), Tiles((64, 128), (4, 8), 8),
                                   Tiles(128, 8, 16, False)])
def test_matmul_tiles_are_read_as_vec4(tiles: Tiles) -> None:
    (bm, bn), (pm, pn) = [(v, v) if isinstance(v, int) else v
                          for v in (tiles.block, tiles.per_thread)]
    src = generate(matmul_program(*tiles)).source
    k2 = 2 * tiles.block_k
    assert f"var<workgroup> w_tile_1a: array<vec4<f32>, {k2 * bm // 4}>;" in src
    assert f"var<workgroup> w_tile_1b: array<vec4<f32>, {k2 * bn // 4}>;" in src
    # per k: pm / 4 reads of A and pn / 4 of B, each four adjacent elements; none scalar
    assert _vec_reads(src) == tiles.block_k * (pm + pn) // 4
    assert "vy_ld_w_tile" not in src
    # the constant part of each read is a vec4 offset of its own (Ranges bounds t / side)
    assert re.search(r"w_tile_1a\[\(\(v_cur_1a \+ v_ta\) >> 2u\) \+ \d+u\]", src)
    # B's staging (a row of adjacent elements): one vec4 store per stage; A's is transposed
    assert _vec_stores(src) == 2 * (bn * tiles.block_k // (bm // pm * (bn // pn))) // 4
    assert "vy_st_w_tile_1a(" in src
    assert "storageBarrier" not in src and "workgroupBarrier();" in src
    # every staged value is a load or the named edge 0: stored unfenced (fences.py), so
    # NVIDIA's compiler has nothing that waits for the prefetch before the arithmetic
    staging = [ln for ln in src.splitlines() if "vy_st_w_tile_1a(" in ln or "] = vec4<" in ln]
    assert staging and not any("vy_fence" in ln for ln in staging if "fn " not in ln)


def test_rolled_matmul_reads_vec4_in_its_step_loop() -> None:
    src = generate(matmul_program(128, 8, 8, True, False)).source
    assert _vec_reads(src) == 4  # one K step's A and B reads, in the IR loop over steps
    assert len(src.splitlines()) < len(generate(matmul_program()).source.splitlines())


def test_measurement_knobs_give_the_old_spelling() -> None:
    src = generate(matmul_program(),
                   options=WgpuOptions(vectors=False, storage_barriers=True)).source
    assert "array<f32, 2048>" in src and "vec4" not in src
    assert src.count("storageBarrier(); workgroupBarrier();") == 2


def _staged(name: str, offset: int, stride: int, ty: ScalarType = F32,
            mix: bool = False) -> N.Program:
    """Each invocation stages x[4i .. 4i+3] into arr[4i .. 4i+3] (one aligned store run),
    (and the 8 past them), then reads arr[stride*i + offset + l], l = 0..3, back into
    out[4i + l]. `mix`: two scalar reads of arr too."""
    k = ProgramBuilder(name, WG)
    x = k.buffer("x", ty)
    out = k.buffer("out", ty, "write", count=5 * WG)
    arr = k.shared("arr", ty, 4 * WG + 8)
    i = k.let(k.local_index() & (WG - 1), name="i")
    vals = [k.let(x[i * 4 + e], name=f"v{e}") for e in range(4)]
    for e in range(4):
        arr[i * 4 + e] = vals[e]
    with k.if_(i < 8):  # every element is written before it is read (docs/IR.md)
        arr[4 * WG + i] = vals[1]
    k.barrier()
    got = [k.let(arr[i * stride + (offset + e)], name=f"g{e}") for e in range(4)]
    for e in range(4):
        out[i * 4 + e] = got[e]
    if mix:
        out[4 * WG + i] = arr[(i * 5) & (4 * WG - 1)] + arr[4 * WG + (i & 7)]
    return k.build()


@pytest.mark.parametrize(("offset", "stride", "reads"), [
    (0, 4, 1),  # aligned: one vec4 read
    (4, 4, 1),  # aligned at a constant offset
    (1, 4, 0),  # base + 1 .. base + 4: not aligned, four scalar reads
    (2, 4, 0),
    (0, 2, 0),  # base 2i: one trailing zero bit only, not provably aligned
])
def test_runs_merge_only_when_provably_aligned(offset: int, stride: int, reads: int) -> None:
    src = generate(_staged("runs", offset, stride)).source
    assert _vec_reads(src) == reads
    assert _vec_stores(src) == 1  # the staging run is aligned in every case
    if not reads:  # the array is vec4 (the store run) and these reads are per element
        assert src.count("vy_ld_w_arr(") == 4 + 1  # 4 calls + the helper itself


def test_store_values_reading_the_array_are_not_merged() -> None:
    k = ProgramBuilder("self_read", WG)
    out = k.buffer("out", F32, "write")
    arr = k.shared("arr", F32, 8 * WG)
    i = k.let(k.local_index() & (WG - 1), name="i")
    for e in range(4):  # an aligned run, but value e reads what store e - 1 wrote
        arr[i * 4 + e] = arr[i * 4 + (e + 3) % 4] + 1.0
    k.barrier()
    out[i] = arr[i * 4]
    src = generate(k.build()).source
    assert _vec_stores(src) == 0 and "vec4" not in src


@pytest.mark.parametrize("assign", [True, False])
def test_an_assign_target_the_base_reads_ends_the_run(assign: bool) -> None:
    k = ProgramBuilder("target_in_base", WG)
    x = k.buffer("x", U32)
    out = k.buffer("out", U32, "write")
    arr = k.shared("arr", U32, 4 * WG)
    i = k.let(k.local_index() & (WG - 1), name="i")
    j = k.let(i * 4, name="j")
    vals = [k.let(x[i * 4 + e], name=f"v{e}") for e in range(4)]
    for e in range(4):
        arr[i * 4 + e] = vals[e]
    k.barrier()
    if assign:  # lane 0 assigns j, which the later lanes' index reads: no run
        for e in range(4):
            j.set(arr[(j & (4 * WG - 4)) + e])
        out[i] = j
    else:  # the same loads into four fresh lets: one run
        got = [k.let(arr[(j & (4 * WG - 4)) + e], name=f"g{e}") for e in range(4)]
        out[i] = got[0] + got[1] + got[2] + got[3]
    plan = vectors.plan_vectors(lower(k.build(), TRAITS))
    assert sorted(r.op for r in plan.runs.values()) == (
        ["store"] if assign else ["load", "store"])


def test_alignment_and_constant_split() -> None:
    k = ProgramBuilder("align", WG)
    out = k.buffer("out", U32, "write")
    t = k.let(k.local_index(), name="t")
    a = k.let((t & 7) * 12, name="a")  # 12 = 4 * 3: two trailing zero bits
    b = k.let(t << 3, name="b")
    c = k.let(t * 4 + 2, name="c")
    out[t] = a + b + c
    prog = k.build()
    al = vectors.Alignment(prog)
    env = {s.name: s for s in prog.body if isinstance(s, N.Let)}

    def var(n: str) -> N.Var:
        return N.Var(name=n, ty=U32)

    assert [al.zeros(var(n)) for n in "abct"] == [2, 3, 1, 0]
    assert al.zeros(N.Const(value=0, ty=U32)) == 32
    assert al.zeros(N.Const(value=48, ty=U32)) == 4
    base, cst = vectors.split_const(env["c"].value)
    assert cst == 2 and isinstance(base, N.Binary) and base.op == "mul"
    assert vectors.split_const(N.Const(value=5, ty=U32)) == (None, 5)


# ------------------------------------------------------------------ barriers


def test_barrier_rule() -> None:
    """barriers.py (helper wgscan's rule, tested fully on its branch): the cases the
    library matmul and these tests rely on."""
    def prog(store_first: bool, read_back: bool, in_loop: bool) -> N.Program:
        k = ProgramBuilder("barriers", WG)
        x = k.buffer("x", F32)
        out = k.buffer("out", F32, "read_write" if read_back else "write")
        arr = k.shared("arr", F32, WG)
        i = k.let(k.local_index() & (WG - 1), name="i")
        if store_first:
            out[i] = 1.0
        if in_loop:
            with k.for_range(0, 2):
                out[i] = x[i]
                k.barrier()
        arr[i] = x[i]
        k.barrier()
        v = arr[(i + 1) & (WG - 1)]
        out[i] = v + out[i] if read_back else v
        return k.build()

    assert not needs_storage_barrier(prog(False, False, False))
    assert needs_storage_barrier(prog(False, False, False), frozenset({0}))  # x aliases out
    assert needs_storage_barrier(prog(True, False, False))
    assert not needs_storage_barrier(prog(False, True, False))  # out only after the barrier
    assert needs_storage_barrier(prog(False, False, True))
    assert "storageBarrier" in generate(prog(True, False, False)).source
    assert "storageBarrier" not in generate(prog(False, False, False)).source


# ------------------------------------------------------------------ on lavapipe


@pytest.fixture(scope="module")
def wgpu(backends: dict[str, BaseBackend]) -> BaseBackend:
    if "wgpu" not in backends:
        pytest.skip("the wgpu backend is not available here (no Vulkan adapter)")
    return backends["wgpu"]


def _bits(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a, dtype=np.float32).view(np.uint32)


@pytest.mark.wgpu
@pytest.mark.parametrize("shape", [(1, 1, 1), (5, 7, 3), (67, 45, 33), (129, 130, 17),
                                   (3, 300, 2), (64, 1, 64)])
@pytest.mark.parametrize("tiles", [Tiles(), Tiles(64, 4, 16), Tiles((64, 128), (4, 8), 8),
                                   Tiles(128, 8, 8, True, False), Tiles(64, 4, 16, False, False)])
def test_matmul_vec4_gives_the_reference_bits(wgpu: BaseBackend, reference: BaseBackend,
                                               shape: tuple[int, int, int],
                                               tiles: Tiles) -> None:
    m, kd, n = shape
    rng = np.random.default_rng(m * 131 + kd * 7 + n)
    a = rng.standard_normal((m, kd)).astype(np.float32)
    b = rng.standard_normal((kd, n)).astype(np.float32)
    b[0, 0], a[-1, -1] = -0.0, 3e-39  # a signed zero and a subnormal in the chain
    if not tiles.unroll:  # (matmul_host has no unroll knob: the program, dispatched)
        ref = reference_for(wgpu, reference)
        prog = matmul_program(*tiles)
        cfg = matmul_config(m, n, kd, tiles.block, tiles.per_thread, tiles.block_k)
        inputs = {"a": a.reshape(-1), "b": b.reshape(-1), "c": m * n}
        got = wgpu.dispatch(prog, inputs, cfg)["c"]
        assert np.array_equal(_bits(got), _bits(ref.dispatch(prog, inputs, cfg)["c"]))
        if ref is reference:
            assert np.array_equal(_bits(got), _bits(matmul_reference(a, b).reshape(-1)))
        return
    kw = {"block": tiles.block, "per_thread": tiles.per_thread, "block_k": tiles.block_k,
          "split": tiles.split}
    got = matmul_host(wgpu, a, b, **kw)
    # the reference in the device's float mode (a device that flushes f32 subnormals, like
    # NVIDIA's Vulkan driver, runs docs/IR.md's flush mode: with K = 1 a subnormal product
    # is the result and flushes to 0)
    ref = reference_for(wgpu, reference)
    assert np.array_equal(_bits(got), _bits(matmul_host(ref, a, b, **kw)))
    if ref is reference:  # no flushing: also matmul_reference's NumPy bits
        assert np.array_equal(_bits(got), _bits(matmul_reference(a, b)))


class _NoRanges:
    """Ranges that know nothing: every run is spelled from its whole lane-0 index."""

    def __init__(self, program: N.Program) -> None:
        del program

    def of(self, e: N.ExprNode) -> None:
        return None


@pytest.fixture
def no_ranges(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(vectors, "Ranges", _NoRanges)
    yield


@pytest.mark.wgpu
def test_matmul_unsplit_run_spelling(no_ranges: None, reference: BaseBackend) -> None:
    from vyre.backends.wgpu import PROVIDER

    src = generate(matmul_program(64, 4, 16)).source
    assert re.search(r"w_tile_1a\[\(\(v_cur_1a \+ \(v_ta \+ 0u\)\)\) >> 2u\]", src)
    avail = PROVIDER.probe()
    if not avail.available:
        pytest.skip(f"wgpu backend unavailable: {avail.reason}")
    b = PROVIDER.create()  # its own instance: nothing compiled before the patch
    try:
        rng = np.random.default_rng(5)
        a = rng.standard_normal((70, 37)).astype(np.float32)
        bm = rng.standard_normal((37, 66)).astype(np.float32)
        got = matmul_host(b, a, bm, block=64, per_thread=4, block_k=16)
        want = matmul_host(reference_for(b, reference), a, bm, block=64, per_thread=4,
                           block_k=16)
        assert np.array_equal(_bits(got), _bits(want))
    finally:
        b.close()


@pytest.mark.wgpu
@pytest.mark.parametrize(("offset", "stride", "ty", "mix"), [
    (0, 4, F32, False), (4, 4, F32, True), (1, 4, F32, True), (0, 2, F32, False),
    (0, 4, U32, True), (3, 4, I32, False),
])
def test_staged_programs_match_the_reference(wgpu: BaseBackend, reference: BaseBackend,
                                             offset: int, stride: int, ty: ScalarType,
                                             mix: bool) -> None:
    prog = _staged(f"staged_{offset}_{stride}_{ty}", offset, stride, ty, mix)
    rng = np.random.default_rng(offset + 7 * stride)
    if ty is F32:
        x = rng.standard_normal(4 * WG).astype(np.float32)
    else:
        x = rng.integers(-(2**31), 2**31, 4 * WG).astype(ty.numpy)
    got = check_against_reference(prog, {"x": x}, DispatchConfig(grid=1), [wgpu], reference)
    assert got[wgpu.id]["out"].size >= 4 * WG


def test_ranges_bound_the_lowered_division_and_shift() -> None:
    from vyre.lower.ranges import Ranges

    k = ProgramBuilder("ranges_native", 256)
    out = k.buffer("out", U32, "write")
    t = k.let(k.local_index() & 255, name="t")
    q = k.let(t // 16, name="q")  # lowered to the target's own division (Native)
    r = k.let(t % 16, name="r")
    out[t] = q + r
    prog = lower(k.build(), TRAITS)
    kinds = {s.name: type(s.value).__name__ for s in prog.body if isinstance(s, N.Let)}
    ranges = Ranges(prog)
    assert ranges.of(N.Var(name="q", ty=U32)) == (0, 15), kinds
    assert ranges.of(N.Var(name="r", ty=U32)) == (0, 15), kinds
