"""The real-kernel suite: kernels of published benchmark suites (Rodinia, PolyBench/C, the
CUDA Samples) and a float histogram, ported with vyre's public builder
(vyre/tools/realkernels/), each bit-identical on every available backend to the same
computation compiled by gcc at IEEE settings (outputs shipped in
vyre/tools/realkernels/data/, so no compiler is needed here), the exact functions (exp, log,
pow) against C's correctly rounded by c/crmath.h. Where gcc is present, a fresh compile must
reproduce the shipped outputs. In flush mode an output whose computation meets a subnormal
may differ from gcc's IEEE bits; it must then be the IR's flush-mode value (the reference
in that mode), and the differing outputs must be subnormal in gcc's."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from vyre.backend import BaseBackend
from vyre.tools.realkernels.check import FLUSH_REFERENCE, GCC, check_kernel, missing_features
from vyre.tools.realkernels.common import DATA_DIR
from vyre.tools.realkernels.compare import compare
from vyre.tools.realkernels.suite import (
    CUDA_SAMPLES,
    KERNELS,
    POLYBENCH,
    RODINIA,
    SOURCES,
    THIS_SUITE,
)
from vyre.tools.testing import flushed_types

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "vyre" / "tools" / "realkernels" / "README.md"

#: lavapipe's own division and sqrt are correctly rounded and it keeps subnormals, so the
#: `backend` fixture's wgpu never runs what NVIDIA's Vulkan driver gets: vyre's exact
#: division and sqrt, and flush mode (docs/IR.md); these force them (read as a device opens)
FORCED_WGPU = {"exact-div-sqrt": {"VYRE_WGPU_DIV_SQRT": "exact"},
               "flush": {"VYRE_WGPU_FLUSH_SUBNORMALS": "1"}}


@pytest.fixture(scope="module", params=list(FORCED_WGPU))
def forced_wgpu(request: pytest.FixtureRequest) -> Iterator[BaseBackend]:
    from vyre.backends.wgpu import PROVIDER

    avail = PROVIDER.probe()
    if not avail.available:
        pytest.skip(f"wgpu backend unavailable: {avail.reason}")
    with pytest.MonkeyPatch.context() as mp:
        for key, value in FORCED_WGPU[request.param].items():
            mp.setenv(key, value)
        be = PROVIDER.create()
    details = be.capabilities().details
    if request.param == "flush":
        assert "f32" in details["flushes_subnormals"], details["flushes_subnormals"]
    else:
        assert details["f32_div_sqrt"] == "div exact (vyre), sqrt exact (vyre)", details
    yield be
    be.close()


def _skip_without_features(name: str, backend: BaseBackend) -> None:
    """Skip (saying why) where `backend` lacks a feature the port's programs need (f64)."""
    missing = missing_features(KERNELS[name], backend)
    if missing:
        pytest.skip(f"{backend.id} does not report {missing}, which {name} needs")


def _assert_bit_identical(name: str, backend: BaseBackend, reference: BaseBackend) -> None:
    """gcc's bits; in flush mode, where they differ, the reference's in that mode, and
    only at outputs gcc computed as subnormals."""
    res = check_kernel(KERNELS[name], backend, reference=reference)
    caps = backend.capabilities()
    where = (f"{name} on {caps.backend} ({caps.device}; {caps.details.get('f32_div_sqrt')}, "
             f"flush {caps.details.get('flushes_subnormals')})")
    assert res.comparison.compared > 0
    assert res.comparison.disagreements == 0, (
        f"{where}: {res.comparison.disagreements} of {res.comparison.compared} outputs differ "
        f"from {res.against}; first: {res.comparison.first}")
    if res.against == FLUSH_REFERENCE:
        got = KERNELS[name].port(backend)
        tiny = np.finfo(np.float32).tiny
        for g, w in zip(got, KERNELS[name].expected()):
            bits = np.uint64 if w.dtype.itemsize == 8 else np.uint32
            differ = g.view(bits) != w.view(bits)
            subnormal = (w != 0) & (np.abs(w) < tiny)
            assert (subnormal | ~differ).all(), (
                f"{where}: flush mode changed outputs gcc computed as normal floats: "
                f"{w[differ & ~subnormal][:4]} became {g[differ & ~subnormal][:4]}")
    else:
        assert res.against == GCC and res.flush_explained == 0


@pytest.mark.parametrize("name", list(KERNELS))
def test_kernel_is_bit_identical_to_gcc(name: str, backend: BaseBackend,
                                        reference: BaseBackend) -> None:
    _skip_without_features(name, backend)
    _assert_bit_identical(name, backend, reference)


@pytest.mark.parametrize("name", list(KERNELS))
def test_kernel_is_bit_identical_to_gcc_in_nvidias_wgpu_modes(
    name: str, forced_wgpu: BaseBackend, reference: BaseBackend
) -> None:
    """The same on wgpu with vyre's exact division and sqrt, and in flush mode (where only
    Black-Scholes meets a subnormal: one call price)."""
    _skip_without_features(name, forced_wgpu)
    _assert_bit_identical(name, forced_wgpu, reference)


def test_flush_mode_changes_only_the_subnormal_call_price(forced_wgpu: BaseBackend,
                                                           reference: BaseBackend) -> None:
    """Black-Scholes' inputs reach the subnormals: in flush mode one result differs from
    gcc's IEEE bits (so the comparison of a flushing backend with gcc is not vacuous), in
    IEEE mode none does."""
    res = check_kernel(KERNELS["blackscholes"], forced_wgpu, reference=reference)
    flush = bool(flushed_types(forced_wgpu))
    assert (res.against, res.flush_explained, res.comparison.disagreements) == (
        (FLUSH_REFERENCE, 1, 0) if flush else (GCC, 0, 0))


def _gpus(backends: dict[str, BaseBackend]) -> list[BaseBackend]:
    return [b for n, b in backends.items() if n == "cuda" or (
        n == "wgpu" and b.capabilities().details.get("adapter_type") != "CPU")]


@pytest.mark.gpu
@pytest.mark.parametrize("name", [n for n, k in KERNELS.items() if k.large_args])
def test_larger_problem_is_bit_identical_on_the_gpu(
        name: str, backends: dict[str, BaseBackend], reference: BaseBackend) -> None:
    """LARGE_ARGS (deriche at MEDIUM, backprop at 65,536 inputs, lavaMD at 10^3 boxes of
    100, 4M options, 4M samples into 256 bins) on CUDA and on wgpu on a GPU adapter,
    against gcc run here (or the recorded SHA-256 without gcc)."""
    gpus = _gpus(backends)
    if not gpus:
        pytest.skip("needs a GPU (CUDA, or wgpu on a GPU adapter): the larger problems "
                    "are too slow on a CPU")
    for gpu in gpus:
        res = check_kernel(KERNELS[name], gpu, large=True, reference=reference)
        assert res.comparison.compared > 0
        assert res.comparison.disagreements == 0, (gpu.id, res)


def test_float_histogram_is_the_same_on_every_run(backend: BaseBackend) -> None:
    """The exact f32 atomic add: three runs, gcc's exact sums rounded once each time
    (relaxed float atomics change with the order the invocations ran in)."""
    kernel = KERNELS["float_histogram"]
    for _ in range(3):
        assert compare(kernel.port(backend), kernel.expected()).disagreements == 0


def test_float_histogram_is_not_a_sequential_float_sum() -> None:
    """The C's exact sums differ from summing each bin in f32 in sample order, in many
    bins: the comparison sees the order independence."""
    from vyre.tools.realkernels.common import F, Lcg

    args = KERNELS["float_histogram"].args
    rng = Lcg(args["seed"])
    x = rng.unit(args["samples"])
    sign = rng.ints(args["samples"], 2)
    w = np.exp(F(-8.0) * x.astype(np.float64)).astype(F)  # (correctly rounded here)
    w = np.where(sign != 0, -w, w)
    seq = np.zeros(args["bins"], F)
    for b, v in zip((x * F(args["bins"])).astype(np.int32), w):
        seq[b] += v
    (want,) = KERNELS["float_histogram"].expected()
    assert (seq.view(np.uint32) != want.view(np.uint32)).sum() > args["bins"] // 4


def test_suite_has_ten_kernels_of_each_source_and_small_data() -> None:
    for suite in (RODINIA, POLYBENCH):
        assert sum(k.suite == suite for k in KERNELS.values()) >= 10, suite
    assert {k.suite for k in KERNELS.values()} == {RODINIA, POLYBENCH, CUDA_SAMPLES, THIS_SUITE}
    total = sum((DATA_DIR / f"{n}.bin").stat().st_size for n in KERNELS)
    assert total < 1 << 20


def test_kernels_with_exact_functions_call_them() -> None:
    """deriche, backprop, lavaMD, Black-Scholes and the histogram call vyre's exact
    functions (exp, log, pow) and the histogram adds with exact f32 atomics."""
    from vyre.ir import nodes as IR
    from vyre.ir.analysis import walk_all_exprs

    def calls(name: str) -> set[str]:
        return {e.fn for make in KERNELS[name].programs for e in walk_all_exprs(make())
                if isinstance(e, IR.Call)}

    assert {"exp", "pow"} <= calls("deriche")
    assert {"exp", "log", "sqrt"} <= calls("blackscholes")
    for name in ("backprop", "lavamd", "float_histogram"):
        assert "exp" in calls(name), name
    assert all(k.large_args for n, k in KERNELS.items()
               if n in ("deriche", "backprop", "lavamd", "blackscholes", "float_histogram"))


def test_readme_lists_every_kernel_with_its_source() -> None:
    """The README's tables (one per suite) name each kernel and the file its C follows."""
    rows = {line.split("|")[1].strip(): line for line in README.read_text().splitlines()
            if line.startswith("| ") and not line.startswith("| kernel")}
    for name, (suite, source) in SOURCES.items():
        assert name in rows, f"{name} ({suite}) has no row in {README.name}"
        assert source in rows[name], f"{name}: the README does not name {source}"


def test_shipped_outputs_match_the_manifest() -> None:
    manifest = json.loads((DATA_DIR / "manifest.json").read_text())
    for name, kernel in KERNELS.items():
        entry = manifest[name]
        data = (DATA_DIR / f"{name}.bin").read_bytes()
        assert hashlib.sha256(data).hexdigest() == entry["sha256"], name
        assert entry["args"] == kernel.args, f"{name}: arguments changed; rerun make_expected.py"
        assert (entry["suite"], entry["source"]) == (kernel.suite, kernel.source), name


def test_comparison_sees_one_ulp_and_the_sign_of_zero() -> None:
    want = [np.array([1.0, 0.0, np.nan], np.float32), np.array([3], np.int32)]
    assert compare([w.copy() for w in want], want).disagreements == 0
    one_ulp = np.nextafter(np.float32(1.0), np.float32(2.0))
    got = [np.array([one_ulp, -0.0, np.nan], np.float32), np.array([3], np.int32)]
    res = compare(got, want)
    assert res.disagreements == 2 and res.first is not None and "[0]" in res.first
    assert compare(want[:1], want).disagreements == 2


def test_every_program_compiles_for_cuda() -> None:
    """NVRTC needs no GPU: the CUDA source of every port is compiled here too."""
    try:
        from vyre.backends.cuda import compile_program
    except Exception as exc:  # cuda-python missing
        pytest.skip(f"the CUDA code generator cannot be loaded here: {exc}")
    try:
        compile_program(KERNELS["hotspot"].programs[0](), "sm_90")
    except Exception as exc:
        if "nvrtc" not in str(exc).lower() and "NVRTC" not in type(exc).__name__:
            raise
        pytest.skip(f"NVRTC is not available here: {exc}")
    for kernel in KERNELS.values():
        for make in kernel.programs:
            assert compile_program(make(), "sm_90").cubin.startswith(b"\x7fELF")


def test_the_data_show_a_change_of_operand_order(monkeypatch: pytest.MonkeyPatch) -> None:
    """A port that sums PolyBench gemm's alpha * (A[i][k] * B[k][j]) instead of its
    (alpha * A[i][k]) * B[k][j] disagrees with gcc in many elements: the inputs are rich
    enough for the bit-for-bit comparison to see operand order."""
    from vyre.backends.reference import ReferenceBackend
    from vyre.tools.realkernels import gemm

    monkeypatch.setattr(gemm, "program", lambda: gemm.build(alpha_last=True))
    with ReferenceBackend() as ref:
        result = compare(gemm.run(ref, **gemm.ARGS), KERNELS["gemm"].expected())
    assert result.disagreements > result.compared // 10, result


@pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc is not installed here")
def test_fresh_gcc_compile_reproduces_the_shipped_outputs() -> None:
    proc = subprocess.run([sys.executable, "-m", "vyre.tools.realkernels.make_expected", "--check"],
                          capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_larger_problem_without_gcc_compares_the_recorded_sha256(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, reference: BaseBackend) -> None:
    """Where there is no gcc, a larger problem's outputs are compared by the SHA-256 that
    make_expected.py --large recorded (here: the histogram's small problem recorded as if
    it were its large one): equal bits pass, one flipped bit is a disagreement."""
    import dataclasses

    from vyre.tools.realkernels import check, make_expected
    from vyre.tools.realkernels.common import output_bytes

    kernel = dataclasses.replace(KERNELS["float_histogram"],
                                 large_args=KERNELS["float_histogram"].args)
    want = kernel.expected()
    monkeypatch.setattr(make_expected, "compiler", lambda: None)
    monkeypatch.setattr(check, "DATA_DIR", tmp_path)
    for flip, disagreements in ((False, 0), (True, 1)):
        data = bytearray(output_bytes(want))
        data[-1] ^= int(flip)
        (tmp_path / "manifest.json").write_text(json.dumps({kernel.name: {"large": {
            "args": kernel.args, "sha256": hashlib.sha256(data).hexdigest()}}}))
        res = check.check_kernel(kernel, reference, large=True)
        assert res.comparison.disagreements == disagreements, res
        assert res.comparison.compared == want[0].size
    (tmp_path / "manifest.json").write_text("{}")
    with pytest.raises(ValueError, match="no C output is recorded for LARGE_ARGS"):
        check.check_kernel(kernel, reference, large=True)
