"""CUDA backend without a GPU: NVRTC errors, the disk cache, the provider, the source.

Everything here runs in CI (NVRTC works without a driver).
"""

from __future__ import annotations

import multiprocessing as mp
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import vyre
from vyre import CompileError, ScalarType
from vyre.builder import ProgramBuilder

ST = ScalarType


def _saxpy(name: str = "saxpy") -> vyre.Program:
    k = ProgramBuilder(name, workgroup_size=256)
    x, y = k.buffer("x", ST.F32), k.buffer("y", ST.F32, "read_write")
    a = k.param("a", ST.F32)
    i = k.global_linear_id()
    with k.if_(i < y.length()):
        y[i] = a * x[i] + y[i]
    return k.build()


def test_compile_error_has_source_and_log() -> None:
    from vyre.backends.cuda import compile_source

    src = 'extern "C" __global__ void vyre_main() { this is not C; }'
    with pytest.raises(CompileError) as info:
        compile_source(src, "sm_90")
    assert info.value.source == src
    assert "error" in info.value.log
    assert "sm_90" in str(info.value)


def test_cubin_not_ptx_and_options() -> None:
    from vyre.backends.cuda import compile_program
    from vyre.backends.cuda.nvrtc import BASE_OPTIONS

    c = compile_program(_saxpy(), "sm_90")
    assert c.cubin.startswith(b"\x7fELF")
    assert "--fmad=false" in BASE_OPTIONS
    assert not any("fast-math" in o for o in BASE_OPTIONS)


def test_source_is_readable_and_names_are_mangled() -> None:
    from vyre.backends.cuda import compile_program, generate

    k = ProgramBuilder("weird-names.v1", workgroup_size=32)
    buf = k.buffer("float", ST.U32, "read_write")  # C keywords and builtins as user names
    t = k.param("threadIdx", ST.U32)
    v = k.let(buf[k.global_id(0)], name="int")
    buf[k.global_id(0)] = v + t
    prog = k.build()
    src = generate(prog).source
    assert "b_float" in src and "v_int" in src and "p_threadIdx" in src
    compile_program(prog, "sm_90")


def test_disk_cache_hit_across_fresh_cache_objects(tmp_path: Path) -> None:
    from vyre.backends.cuda import DiskCache, compile_program

    prog = _saxpy()
    first = compile_program(prog, "sm_90", DiskCache(tmp_path))
    assert not first.from_disk
    fresh = DiskCache(tmp_path)
    second = compile_program(prog, "sm_90", fresh)
    assert second.from_disk and second.cubin == first.cubin
    assert fresh.stats.hits == 1
    # another architecture is another entry
    third = compile_program(prog, "sm_80", DiskCache(tmp_path))
    assert not third.from_disk and third.key != first.key


def test_disk_cache_corrupted_entry_is_rebuilt(tmp_path: Path) -> None:
    from vyre.backends.cuda import DiskCache, compile_program

    prog = _saxpy()
    first = compile_program(prog, "sm_90", DiskCache(tmp_path))
    path = DiskCache(tmp_path).path(first.key)
    data = bytearray(path.read_bytes())
    data[-10] ^= 0xFF  # flip bits in the payload
    path.write_bytes(bytes(data))
    cache = DiskCache(tmp_path)
    again = compile_program(prog, "sm_90", cache)
    assert not again.from_disk, "a corrupted entry must never be loaded"
    assert cache.stats.corrupt == 1
    assert again.cubin == first.cubin
    assert compile_program(prog, "sm_90", DiskCache(tmp_path)).from_disk
    # a truncated entry too
    path.write_bytes(path.read_bytes()[:20])
    assert not compile_program(prog, "sm_90", DiskCache(tmp_path)).from_disk


def _compile_in_child(directory: str) -> bytes:
    from vyre.backends.cuda import DiskCache, compile_program

    return compile_program(_saxpy(), "sm_90", DiskCache(directory)).cubin


def test_disk_cache_concurrent_writers(tmp_path: Path) -> None:
    ctx = mp.get_context("spawn")
    with ctx.Pool(4) as pool:
        results = pool.map(_compile_in_child, [str(tmp_path)] * 8)
    assert len(set(results)) == 1
    entries = sorted(p.name for p in tmp_path.iterdir())
    assert len(entries) == 1 and entries[0].endswith(".cubin"), entries
    from vyre.backends.cuda import DiskCache, compile_program

    assert compile_program(_saxpy(), "sm_90", DiskCache(tmp_path)).from_disk


def test_cache_dir_override(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from vyre.backends.cuda.nvrtc import default_cache_dir

    monkeypatch.setenv("VYRE_CACHE_DIR", str(tmp_path))
    assert default_cache_dir() == tmp_path / "cuda"
    monkeypatch.delenv("VYRE_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "x"))
    assert default_cache_dir() == tmp_path / "x" / "vyre" / "cuda"


def test_import_does_not_load_the_driver() -> None:
    code = (
        "import sys, vyre, vyre.backends.cuda as c; "
        "assert 'cuda.bindings.driver' not in sys.modules, 'driver imported'; "
        "a = {x.name: x for x in vyre.available_backends()}['cuda']; "
        "print(a.available, a.reason)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr


def test_provider_reports_reason_when_unavailable() -> None:
    from vyre.backends.cuda import PROVIDER

    a = PROVIDER.probe()
    if a.available:
        assert a.devices, "an available CUDA must list its devices"
        return
    assert a.reason, "an unavailable backend must say why"
    with pytest.raises(vyre.BackendUnavailable) as info:
        vyre.get_backend("cuda")
    assert info.value.reason == a.reason or info.value.reason
    # and the other backends still work
    ref = vyre.get_backend("reference")
    try:
        out = ref.dispatch(_saxpy(), {"x": np.ones(4, np.float32), "y": np.ones(4, np.float32)},
                           vyre.DispatchConfig(grid=1, params={"a": 2.0}))
        assert out["y"].tolist() == [3.0] * 4
    finally:
        ref.close()


def test_kernel_argument_layout() -> None:
    from vyre.backends.cuda.render import KernelSignature

    sig = KernelSignature(buffers=(ST.F32, ST.U64), params=(ST.F16, ST.F64, ST.I32))
    offsets, size = sig.layout()
    # two pointers, two u32 counts, then f16 (2), f64 (8-aligned), i32
    assert offsets == [0, 8, 16, 20, 24, 32, 40]
    assert size == 44


def test_coarsening_rules() -> None:
    from vyre.backends.cuda.render import coarsening_allowed, generate, lockstep_allowed

    saxpy = _saxpy()
    assert coarsening_allowed(saxpy, 4) and lockstep_allowed(saxpy)
    src = generate(saxpy, coarsen=4).source
    assert "lockstep: 4 invocations" in src
    # 64 threads per workgroup after coarsening; 4 workgroups share one 256-thread block,
    # and the real grid.x is a trailing kernel argument
    g = generate(saxpy, coarsen=4)
    assert "__launch_bounds__(256)" in src and "merged: 4 workgroups of 64 threads" in src
    assert (g.block, g.merge, g.signature.grid_x) == ((256, 1, 1), 4, True)
    assert g.signature.layout() == ([0, 8, 16, 20, 24, 28], 32)
    assert generate(saxpy).merge == 1 and not generate(saxpy).signature.grid_x

    k = ProgramBuilder("with_barrier", workgroup_size=256)
    y = k.buffer("y", ST.U32, "read_write")
    y[k.global_id(0)] = 1
    k.barrier()
    assert not coarsening_allowed(k.build(), 4)

    k = ProgramBuilder("small_group", workgroup_size=64)
    y = k.buffer("y", ST.U32, "read_write")
    y[k.global_id(0)] = 1
    assert not coarsening_allowed(k.build(), 4)  # 16-thread blocks would waste warps

    k = ProgramBuilder("with_loop_and_return", workgroup_size=256)
    y = k.buffer("y", ST.U32, "read_write")
    i = k.global_id(0)
    with k.if_(i >= y.length()):
        k.return_()
    with k.for_range(0, 4):
        y[i] = y[i] + 1
    prog = k.build()
    assert coarsening_allowed(prog, 4) and not lockstep_allowed(prog)
    src = generate(prog, coarsen=4).source
    assert "goto vy_next;" in src and "vy_next: ;" in src and "return;" not in src.split(
        "end of prelude")[1]


def test_semantic_helpers_are_used() -> None:
    from vyre.backends.cuda.render import generate

    k = ProgramBuilder("helpers", workgroup_size=64)
    a = k.buffer("a", ST.I32)
    f = k.buffer("f", ST.F32)
    o = k.buffer("o", ST.I32, "write")
    i = k.global_id(0)
    o[i] = (a[i] // a[i + 1]) + (a[i] % 3) + (a[i] << a[i]) + f[i].cast(ST.I32)
    full = generate(k.build()).source
    head, src = full.split("end of prelude")
    # the memory, integer and cast rules arrive lowered (vyre.lower): raw accesses behind
    # the IR's index tests, C operators on safe operands
    assert "((vy_gid0 < n_a) ? b_a[vy_gid0] : 0)" in src and "if ((vy_gid0 < n_o)) {" in src
    assert " / " in src and " % " in src and "& 31u" in src and "2147483648.0f" in src
    assert "(unsigned)" in src  # signed arithmetic is done in unsigned types
    # only the helpers this kernel uses are compiled (cold compile time)
    assert "vy_imin" not in head and "vy_f2h" not in head and "vy_frem" not in head


_ALL_TYPES = frozenset({ST.I32, ST.U32, ST.F32, ST.F16, ST.F64, ST.I64, ST.U64})


def test_random_programs_compile() -> None:
    """Differential-fuzz programs of every type compile with NVRTC (CI: no GPU)."""
    from hypothesis import given

    from vyre.backends.cuda import compile_program
    from vyre.tools import fuzz

    opts = fuzz.GenOptions(types=_ALL_TYPES, atomic_types=frozenset({ST.I32, ST.U32, ST.I64,
                                                                      ST.U64}))

    @fuzz.fuzz_settings(30, use_database=False)
    @given(fuzz.cases(opts))
    def check(case: fuzz.FuzzCase) -> None:
        for coarsen in (1, 4):
            compile_program(case.program, "sm_90", coarsen=coarsen)

    check()


def test_operator_sweep_compiles() -> None:
    """The fuzz generator's operator sweep over every type (every operator, function, cast
    and bitcast) compiles with NVRTC, coarsened or not (CI: no GPU)."""
    from hypothesis import given

    from vyre.backends.cuda import compile_program
    from vyre.tools import fuzz

    @fuzz.fuzz_settings(1, use_database=False)
    @given(fuzz.operator_cases(fuzz.GenOptions(types=_ALL_TYPES)))
    def check(case: fuzz.FuzzCase) -> None:
        for coarsen in (1, 4):
            assert compile_program(case.program, "sm_90", coarsen=coarsen).cubin[:4] == b"\x7fELF"

    check()


def test_saved_regression_programs_compile() -> None:
    from vyre.backends.cuda import compile_program
    from vyre.tools import fuzz

    paths = sorted(fuzz.regressions_dir().glob("*.json"))
    for path in paths:
        case = fuzz.load_case(path)
        for coarsen in (1, 4):
            compile_program(case.program, "sm_90", coarsen=coarsen)


def _ptx(source: str) -> str:
    """PTX for compute_90 (inspection only: the backend itself always loads cubins)."""
    from cuda.bindings import nvrtc as nv

    from vyre.backends.cuda.nvrtc import BASE_OPTIONS

    opts = [b"--gpu-architecture=compute_90", *(o.encode() for o in BASE_OPTIONS)]
    _e, prog = nv.nvrtcCreateProgram(source.encode(), b"v.cu", 0, [], [])
    try:
        (res,) = nv.nvrtcCompileProgram(prog, len(opts), opts)
        assert int(res) == 0, res
        _err, size = nv.nvrtcGetPTXSize(prog)
        buf = b" " * size
        nv.nvrtcGetPTX(prog, buf)
        return buf.decode(errors="replace")
    finally:
        nv.nvrtcDestroyProgram(prog)


@pytest.mark.parametrize("coarsen", [4, 8])
def test_lockstep_saxpy_moves_16_byte_vectors(coarsen: int) -> None:
    """Unit-stride accesses in a coarsened straight-line body become 128-bit loads and
    stores (with a lane-by-lane bounds-checked path for tails and misaligned starts)."""
    from vyre.backends.cuda.render import generate

    src = generate(_saxpy(), coarsen=coarsen).source
    assert "vectorised" in src and "vy_vok<float, 4>" in src
    ptx = _ptx(src)
    groups = coarsen // 4
    assert ptx.count("ld.global.nc.v4.f32") == groups  # x (read-only)
    assert ptx.count("ld.global.v4.f32") == groups  # y
    assert ptx.count("st.global.v4.f32") == groups
    # each invocation still has its bounds-checked scalar path
    assert " < n_x) ? b_x[" in src and " < n_y)) b_y[vy_si" in src


def test_vectorisation_only_for_unit_stride() -> None:
    from vyre.backends.cuda.render import generate

    k = ProgramBuilder("strided", workgroup_size=256)
    x = k.buffer("x", ST.F32)
    y = k.buffer("y", ST.F32, "write")
    i = k.global_linear_id()
    y[i * 2] = x[i * 2]  # stride 2: no vectors, consecutive threads keep consecutive ids
    src = generate(k.build(), coarsen=4).source
    assert "vy_vok<" not in src.split("end of prelude")[1]
    assert "vy_lid0_1 = vy_tx + 64u;" in src

    k = ProgramBuilder("masked_let", workgroup_size=256)
    x = k.buffer("x", ST.F32)
    y = k.buffer("y", ST.F32, "write")
    i = k.global_linear_id()
    with k.if_(i < 100):
        j = k.let(i, name="j")  # masked: lanes with the mask off hold 0, not i
        y[j] = x[i]
    src = generate(k.build(), coarsen=4).source
    body = src.split("end of prelude")[1]
    assert "vy_vok<float, 4>(b_x" in body  # x[i] is unit stride
    assert "vy_vok<float, 4>(b_y" not in body  # y[j]: j's stride is unknown, lane by lane


def test_lowered_edge_program_compiles() -> None:
    """The lowering's edge program (tests/test_lowering.py) through the CUDA printer and
    NVRTC, plain, coarsened and as a lockstep body: every Native spelling compiles."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from lowering_cases import edge_program, memory_program

    from vyre.backends.cuda import compile_program

    compile_program(edge_program(), "sm_90")
    compile_program(memory_program(), "sm_90")
    k = ProgramBuilder("lockstep_lowered", workgroup_size=256)
    a, b = k.buffer("a", ST.I32), k.buffer("o", ST.I32, "write")
    f = k.buffer("f", ST.F16)
    c = k.buffer("c", ST.U32, "read_write")
    i = k.global_linear_id()
    with k.if_(i < a.length()):
        b[i] = a[i] / a[i + 1] + (a[i] >> a[i + 2].cast(ST.U32)) + abs(a[i]) + f[i].cast(ST.I32)
        old = c.atomic_add(i + 1, 1)  # guarded atomics with results, lane by lane
        b[(a[i] & 255).cast(ST.U32)] = old.cast(ST.I32)  # a store index holding a load
    compile_program(k.build(), "sm_90", coarsen=4)


def test_matmul_reads_whole_runs_as_vectors() -> None:
    """The library matmul's staged loads of A and B (runs wholly inside the matrix) become
    128-bit global loads, in the prologue and in the K loop; the unsplit kernel (every
    element tested) has none. Each vector keeps its bounds-checked scalar fallback."""
    from vyre.backends.cuda.render import generate
    from vyre.programs.matmul import matmul_program

    src = generate(matmul_program()).source
    assert src.count("vy_vok<float, 4>(b_a") == 2 and src.count("vy_vok<float, 4>(b_b") == 2
    assert _ptx(src).count("ld.global.nc.v4.f32") == 4
    unsplit = generate(matmul_program(split=False)).source
    assert "ld.global.nc.v4.f32" not in _ptx(unsplit)


def test_load_runs_only_where_the_statements_are_one() -> None:
    """A run is consecutive offsets of one base and buffer; a statement whose target the
    base reads ends it (the later loads must see the new value), and so does a gap."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from test_load_runs import _runs_program

    from vyre.backends.cuda import compile_program

    body = compile_program(_runs_program(ST.F32, 4), "sm_90").source.split("end of prelude")[1]
    assert body.count("vy_vok<float, 4>(b_x") == 2  # offsets 0..3 and 4..7
    assert "v_first_13 = vy_pk.v[3]" in body and "v_second_13 = vy_pk.v[3]" in body
    assert "v_gap = vy_pk" not in body and "v_gap_11 = vy_pk" not in body  # offsets 0, 2
    assert "v_c0 = vy_pk" not in body and "v_c1 = vy_pk" not in body
    assert body.count("vy_vok<unsigned, 2>(b_ix") == 1  # c2, c3 after c0 is set
    assert "v_c2 = vy_pk.v[0]; v_c3 = vy_pk.v[1];" in body
    # a vector is at most 16 bytes: four f64 loads are two runs of two
    f64 = compile_program(_runs_program(ST.F64, 4), "sm_90").source
    assert f64.count("vy_vok<double, 2>(b_x") == 4 and "vy_vok<double, 4>" not in f64


@pytest.mark.parametrize(("block", "per", "bk"), [((128, 256), (8, 16), 16),
                                                  ((128, 128), (8, 16), 16)])
def test_largest_matmul_sweep_tiles_compile(block: tuple[int, int], per: tuple[int, int],
                                            bk: int) -> None:
    """The sweep's (vyre.tools.bench.cuda_tuning) largest tiles fit sm_90: 48 KiB of static
    workgroup memory, up to 255 registers."""
    from vyre.backends.cuda import compile_program
    from vyre.programs.matmul import matmul_program
    from vyre.tools.bench.cuda_tuning import MATMUL_VARIANTS

    assert (block, per, bk, True, True) in MATMUL_VARIANTS
    assert compile_program(matmul_program(block, per, bk), "sm_90").cubin[:4] == b"\x7fELF"


def test_speed_options_leave_the_cubin_unchanged(nvrtc_cache: Any) -> None:
    """compile_options() adds only options that make NVRTC faster (-minimal): every
    conformance program, plain and coarsened, and matmul compile to the same cubin bytes
    with them as with BASE_OPTIONS alone. (Through the session's compile cache: a program
    that is not coarsened has one source for both, and test_cuda_conformance compiles
    the same sources with compile_options().)"""
    from vyre.backends.cuda import generate
    from vyre.backends.cuda.nvrtc import BASE_OPTIONS, cache_key, compile_options, compile_source
    from vyre.programs.matmul import matmul_program
    from vyre.tools import conformance

    extra = compile_options()[len(BASE_OPTIONS):]
    assert compile_options()[:len(BASE_OPTIONS)] == BASE_OPTIONS
    if not extra:
        pytest.skip("this NVRTC predates -minimal: there is nothing to compare")

    def cubin(src: str, options: tuple[str, ...]) -> bytes:
        key = cache_key(src, "sm_90", options)
        got = nvrtc_cache.get(key)
        if got is None:
            got = compile_source(src, "sm_90", options)
            nvrtc_cache.put(key, got)
        return got

    programs = [c.program for c in conformance.cases()] + [matmul_program()]
    for prog in programs:
        for coarsen in (1, 4):
            src = generate(prog, coarsen=coarsen).source
            assert cubin(src, BASE_OPTIONS + extra) == cubin(src, BASE_OPTIONS), \
                (prog.name, coarsen)


def test_a_float_table_holds_any_value_as_a_constant_initializer() -> None:
    """A core table (vyre.lower.maths) is a `__device__` array, whose initializer must be
    constant: its entries are bits, so -0, subnormals, infinities, NaN and values only f64
    holds (rounded to nearest f32: 1e-50 -> 0, 1e39 -> inf) all compile, and read back as
    those floats."""
    from vyre.backends.cuda.nvrtc import compile_options, compile_source
    from vyre.backends.cuda.printer import CudaPrinter
    from vyre.ir import nodes as N

    f32, f64 = ScalarType.F32, ScalarType.F64
    odd = (-0.0, 1e-45, float("inf"), -float("inf"), float("nan"), 1e-50, -1e-50, 1e39)
    printer = CudaPrinter(_saxpy(), restrict=True)
    zero = N.Const(ty=ScalarType.U32, value=0)
    reads = [printer.table_read(N.Table(values=odd, index=zero, ty=ty)) for ty in (f32, f64)]
    assert reads == ["__uint_as_float(vy_tab0[0u])",
                     "__longlong_as_double((long long)vy_tab1[0u])"]
    decls = printer.table_decls()
    assert ("{0x80000000u, 0x00000001u, 0x7f800000u, 0xff800000u, 0x7fc00000u, 0x00000000u, "
            "0x80000000u, 0x7f800000u}") in decls
    assert "0x7ff0000000000000ull, 0xfff0000000000000ull" in decls
    src = (decls + 'extern "C" __global__ void k(float* y, double* z) {\n'
           f"  y[0] = {reads[0]}; z[0] = {reads[1]};\n}}\n")
    assert compile_source(src, "sm_90", compile_options(), name="tables.cu")
