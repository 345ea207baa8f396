"""`vyre certify` (vyre.tools.certify): one adapter's certificate, printed and saved as JSON,
from the conformance suite, the exact functions against the correctly rounded oracle and
the real-kernel suite against gcc's shipped outputs; run here on small selections of each
(the reference, lavapipe, lavapipe forced into flush mode). A disagreement fails it, an
unknown or unavailable backend is a clear usage error."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import vyre
from vyre import registry
from vyre.interface import Availability
from vyre.tools import certify as C
from vyre.tools import function_check
from vyre.tools.cli import main
from vyre.tools.realkernels import suite

QUICK = ["--sample", "48", "--functions", "exp,pow", "--cases", "ir_int_i32,ir_float_f32",
         "--kernels", "lavamd,float_histogram"]


def _certify(tmp_path: Path, *args: str) -> tuple[int, str, dict[str, Any]]:
    out = io.StringIO()
    path = tmp_path / "certificate.json"
    rc = main(["certify", *args, "--out", str(path)], out=out)
    doc = json.loads(path.read_text()) if path.exists() else {}
    return rc, out.getvalue(), doc


def _wgpu_available() -> None:
    avail = {a.name: a for a in vyre.available_backends()}
    if "wgpu" not in avail or not avail["wgpu"].available:
        pytest.skip(f"wgpu is not available here: {avail.get('wgpu')}")


def test_reference_certificate_is_printed_and_saved(tmp_path: Path) -> None:
    rc, text, doc = _certify(tmp_path, "--backend", "reference", *QUICK)
    assert rc == 0, text
    assert doc["vyre_version"] == vyre.__version__ and doc["backend"] == "reference"
    assert doc["verdict"] == "keeps the promise" and doc["disagreements"] == 0
    assert doc["cases_run"]["conformance"] == 2 and doc["cases_run"]["kernels"] == 2
    assert doc["cases_run"]["functions"] == doc["parts"]["functions"]["run"] > 2 * 48
    assert set(doc["parts"]["functions"]["details"]["functions"]) == {"exp", "pow"}
    assert doc["parts"]["kernels"]["details"]["outputs_compared"] > 0
    for needle in ("certificate: reference", "flush mode:    none", "keeps the promise",
                   "saved: ", "compared with the outputs gcc computed"):
        assert needle in text, needle


def test_wgpu_certificate_names_the_adapter_and_driver(tmp_path: Path) -> None:
    _wgpu_available()
    rc, text, doc = _certify(tmp_path, "--backend", "wgpu", *QUICK)
    assert rc == 0, text
    caps_device = doc["adapter"]
    assert doc["backend"].startswith("wgpu") and caps_device and caps_device in text
    assert doc["driver"] != "not reported" and doc["driver"] in text
    assert doc["verdict"] == "keeps the promise"


def test_flush_mode_certificate(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """wgpu forced into flush mode (NVIDIA's Vulkan driver's): the certificate says so,
    Black-Scholes' subnormal call price is compared with the IR's flush-mode value, and
    the functions' flushed arguments and tiny results with the reference in that mode."""
    _wgpu_available()
    monkeypatch.setenv("VYRE_WGPU_FLUSH_SUBNORMALS", "1")
    rc, text, doc = _certify(tmp_path, "--backend", "wgpu", "--parts", "functions,kernels",
                             "--functions", "exp", "--sample", "64",
                             "--kernels", "blackscholes")
    assert rc == 0, text
    assert "f32" in doc["flushes_subnormals"] and "f32 subnormals flush" in text
    (note,) = doc["parts"]["kernels"]["details"]["flush_mode"]
    assert note.startswith("blackscholes: 1 outputs differ from gcc's IEEE bits")
    assert doc["parts"]["functions"]["details"]["functions"]["exp"]["disagreements"] == 0


def test_a_disagreement_fails_the_certificate(tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """A wrong expected output (one bit of gcc's histogram flipped) and a wrong oracle
    value are reported as disagreements, and the exit status is 1."""
    right_expected = suite.Kernel.expected

    def flipped(self: suite.Kernel) -> list[np.ndarray]:
        arrays = right_expected(self)
        arrays[0].view(np.uint32)[3] ^= 1
        return arrays

    right_oracle = function_check.fast_oracle

    def wrong_oracle(fn: str, dtype: type, *args: np.ndarray) -> np.ndarray:
        out = right_oracle(fn, dtype, *args).copy()
        out[0] = 2.0  # exp(0), the sample's first argument, is 1
        return out

    monkeypatch.setattr(suite.Kernel, "expected", flipped)
    monkeypatch.setattr(function_check, "fast_oracle", wrong_oracle)
    rc, text, doc = _certify(tmp_path, "--backend", "reference", "--parts",
                             "functions,kernels", "--functions", "exp", "--sample", "16",
                             "--kernels", "float_histogram")
    assert rc == 1, text
    assert doc["verdict"] == "DISAGREES" and doc["disagreements"] == 2
    assert any(d.startswith("float_histogram: 1 of 64 outputs differ from gcc")
               for d in doc["parts"]["kernels"]["disagreements"])
    assert "exp: " in doc["parts"]["functions"]["disagreements"][0]
    assert "DISAGREE: float_histogram" in text and "verdict: DISAGREES" in text


def test_an_unknown_or_unavailable_backend_is_a_usage_error(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rc, text, doc = _certify(tmp_path, "--backend", "nosuch")
    assert rc == 2 and doc == {}
    assert "error: no backend named 'nosuch' is registered; known: [" in text
    real = registry.available_backends

    def wgpu_gone() -> list[Availability]:
        return [Availability("wgpu", False, "no Vulkan adapter (a test's)") if a.name == "wgpu"
                else a for a in real()]

    monkeypatch.setattr(registry, "available_backends", wgpu_gone)
    rc, text, doc = _certify(tmp_path, "--backend", "wgpu")
    assert rc == 2 and doc == {}
    assert "error: backend 'wgpu' is not available here: no Vulkan adapter (a test's)" in text


@pytest.mark.parametrize(("flag", "value", "message"), [
    ("--functions", "exp,erf", "unknown functions ['erf']"),
    ("--kernels", "nn,doom", "unknown kernels ['doom']"),
    ("--cases", "nope", "unknown conformance cases ['nope']"),
    ("--parts", "kernels,vibes", "unknown parts ['vibes']"),
    ("--sample", "0", "--sample must be at least 1"),
])
def test_bad_selections_are_usage_errors(tmp_path: Path, flag: str, value: str,
                                         message: str) -> None:
    rc, text, doc = _certify(tmp_path, "--backend", "reference", flag, value)
    assert rc == 2 and doc == {} and message in text, text


def test_format_lists_every_part_and_the_skips() -> None:
    """A skipped case is shown with its reason (nothing is skipped silently)."""
    part = C.Part("kernels", C.COMPARED_WITH["kernels"], run=1,
                  skipped=["trisolv_f64: x does not report ['f64']"],
                  details={"outputs_compared": 5})
    doc = {"vyre_version": "0", "backend": "x", "adapter": "a", "driver": "d",
           "adapter_kind": "k", "flushes_subnormals": [], "flush_tininess": "-",
           "f32_div_sqrt": "-", "created": "now", "parts": {"kernels": C.asdict(part)},
           "cases_run": {"kernels": 1}, "disagreements": 0, "errors": 0, "skipped": 1,
           "verdict": "keeps the promise"}
    text = C.format_certificate(doc)
    assert "skipped: trisolv_f64: x does not report ['f64']" in text
    assert "1 kernels, 5 outputs" in text and "1 skipped" in text


def test_a_backend_that_computes_nothing_is_not_certified(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """CUDA on the stand-in driver (every call succeeds, nothing runs: reads are zeros),
    through NVRTC's real compile of the exact functions: the certificate names the driver
    and NVRTC, and fails."""
    pytest.importorskip("cuda.bindings.driver", reason="cuda-bindings is not installed")
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import cuda_standin

    from vyre.backends.cuda import nvrtc_version

    try:
        nvrtc_version()
    except Exception as exc:
        pytest.skip(f"NVRTC is not available here: {exc}")
    monkeypatch.setenv("VYRE_CACHE_DIR", str(tmp_path / "cache"))
    with cuda_standin.installed():
        rc, text, doc = _certify(tmp_path, "--backend", "cuda", "--functions", "exp",
                                 "--sample", "16", "--cases", "ir_int_i32",
                                 "--kernels", "float_histogram")
    assert rc == 1, text
    assert doc["backend"].startswith("cuda") and "NVRTC" in doc["driver"]
    assert doc["verdict"] == "DISAGREES" and doc["disagreements"] == 3, doc["parts"]


def test_function_check_in_flush_mode_uses_the_irs_flush_values(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """exp on wgpu forced into flush mode, over the arguments whose result is subnormal:
    every result differs from the IEEE oracle (they flush to zero) and every one is the
    IR's flush-mode value (the reference in that mode), so nothing disagrees; the same
    arguments on the reference in IEEE mode match the oracle itself."""
    _wgpu_available()
    from vyre.backends.wgpu import PROVIDER

    args = [np.linspace(-103.9, -87.4, 300).astype(np.float32)]
    with vyre.get_backend("reference") as ref:
        ieee = function_check.check(ref, "exp", [args], function_check.Report("exp"))
        assert (ieee.checked, ieee.bad, ieee.flush_explained) == (300, 0, 0)
        monkeypatch.setenv("VYRE_WGPU_FLUSH_SUBNORMALS", "1")
        with PROVIDER.create() as flushing:
            with pytest.raises(ValueError, match="needs the reference backend"):
                function_check.check(flushing, "exp", [args], function_check.Report("exp"))
            rep = function_check.check(flushing, "exp", [args], function_check.Report("exp"),
                                       reference=ref)
    assert (rep.checked, rep.bad) == (300, 0)
    assert rep.flush_explained > 250, rep.line()  # (the few above 2^-126 stay as they are)
