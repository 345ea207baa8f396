"""The real-kernel suite: kernels of two published benchmark suites (Rodinia and PolyBench/C)
ported with vyre's public builder (vyre/tools/realkernels/), each bit-identical on every
available backend to the same computation compiled by gcc at IEEE settings (outputs shipped
in vyre/tools/realkernels/data/, so no compiler is needed here). Where gcc is present, a fresh
compile must reproduce the shipped outputs."""

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
from vyre.tools.realkernels.common import DATA_DIR
from vyre.tools.realkernels.compare import compare
from vyre.tools.realkernels.suite import KERNELS, POLYBENCH, RODINIA, SOURCES

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
    need = {f for make in KERNELS[name].programs for f in make().required_features}
    missing = sorted(need - backend.capabilities().features)
    if missing:
        pytest.skip(f"{backend.id} does not report {missing}, which {name} needs")


@pytest.mark.parametrize("name", list(KERNELS))
def test_kernel_is_bit_identical_to_gcc(name: str, backend: BaseBackend) -> None:
    _skip_without_features(name, backend)
    kernel = KERNELS[name]
    result = compare(kernel.port(backend), kernel.expected())
    assert result.compared > 0
    assert result.disagreements == 0, (
        f"{name} on {backend.capabilities().backend} ({backend.capabilities().device}): "
        f"{result.disagreements} of {result.compared} outputs differ from gcc; first: "
        f"{result.first}"
    )


@pytest.mark.parametrize("name", list(KERNELS))
def test_kernel_is_bit_identical_to_gcc_in_nvidias_wgpu_modes(
    name: str, forced_wgpu: BaseBackend
) -> None:
    """The same on wgpu with vyre's exact division and sqrt, and in flush mode (no kernel's
    data comes near a subnormal, so flushing changes nothing)."""
    _skip_without_features(name, forced_wgpu)
    result = compare(KERNELS[name].port(forced_wgpu), KERNELS[name].expected())
    assert result.compared > 0
    assert result.disagreements == 0, (
        f"{name} on {forced_wgpu.capabilities().details['f32_div_sqrt']}, flush "
        f"{forced_wgpu.capabilities().details.get('flushes_subnormals')}: "
        f"{result.disagreements} of {result.compared} outputs differ from gcc; first: "
        f"{result.first}"
    )


def test_suite_has_ten_kernels_of_each_source_and_small_data() -> None:
    for suite in (RODINIA, POLYBENCH):
        assert sum(k.suite == suite for k in KERNELS.values()) >= 10, suite
    assert {k.suite for k in KERNELS.values()} == {RODINIA, POLYBENCH}
    total = sum((DATA_DIR / f"{n}.bin").stat().st_size for n in KERNELS)
    assert total < 1 << 20


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
    proc = subprocess.run([sys.executable, "-m", "vyre.tools.realkernels.make_expected",
                           "--check"], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr
