"""The `vyre` command line (probe, demo), its table formatting, and the setup script's
Vulkan check.

The demo is tested with stub cases injected as `vyre.programs.demo` and fake backends
injected through `vyre.registry._entry_points`, so these tests do not depend on any real
backend or on the real demo programs (one test runs those on the reference if present).
"""

from __future__ import annotations

import importlib.util
import io
import json
import subprocess
import sys
import types
from collections.abc import Callable
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from vyre import registry
from vyre.backend import BaseBackend, Capabilities
from vyre.errors import BackendUnavailable, UnsupportedFeature
from vyre.tools import cli
from vyre.tools.report import format_kv, format_ms, format_table
from vyre.tools.testing import EXACT, Tolerance

ROOT = Path(__file__).resolve().parents[1]
FAKE_MODULE = "vyre_test_fake_cli_backends"


# ------------------------------------------------------------------ fakes


class FakeBackend(BaseBackend):
    def __init__(self, instance_id: str, kind: str) -> None:
        super().__init__(instance_id)
        self.kind = kind

    def capabilities(self) -> Capabilities:
        return Capabilities(
            backend=self.id,
            kind=self.kind,
            device=f"fake {self.kind} device",
            features=frozenset({"resident", "f64"} if self.kind == "alpha" else {"resident"}),
            limits={"max_workgroup_invocations": 256, "fake_limit": 7},
            details={"driver": "fake 1.0"},
        )


class FakeProvider:
    def __init__(self, name: str, available: bool = True, reason: str = "") -> None:
        self.name = name
        self.available = available
        self.reason = reason

    def probe(self) -> registry.Availability:
        return registry.Availability(
            self.name, self.available, self.reason, devices=(f"{self.name}:0",)
        )

    def create(self, device: int | str | None = None) -> BaseBackend:
        if not self.available:
            raise BackendUnavailable(self.name, self.reason)
        return FakeBackend(self.name if device is None else f"{self.name}:{device}", self.name)


def install_fakes(monkeypatch: pytest.MonkeyPatch, *providers: FakeProvider) -> None:
    mod = types.ModuleType(FAKE_MODULE)
    eps = {}
    for p in providers:
        setattr(mod, p.name.upper(), p)
        eps[p.name] = metadata.EntryPoint(p.name, f"{FAKE_MODULE}:{p.name.upper()}", registry.GROUP)
    monkeypatch.setitem(sys.modules, FAKE_MODULE, mod)
    monkeypatch.setattr(registry, "_entry_points", lambda: dict(eps))


@pytest.fixture
def fakes(monkeypatch: pytest.MonkeyPatch) -> None:
    """reference, alpha and beta available; gone unavailable."""
    install_fakes(
        monkeypatch,
        FakeProvider("reference"),
        FakeProvider("alpha"),
        FakeProvider("beta"),
        FakeProvider("gone", False, "no gone driver; install gone-driver"),
    )


@dataclass(frozen=True)
class StubCase:
    name: str
    run: Callable[[BaseBackend], dict[str, np.ndarray]]
    tolerance: Callable[[str], Tolerance]


def install_cases(monkeypatch: pytest.MonkeyPatch, cases: list[StubCase]) -> None:
    mod = types.ModuleType("vyre.programs.demo")
    mod.demo_cases = lambda: list(cases)  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "vyre.programs.demo", mod)


def exact(_kind: str) -> Tolerance:
    return EXACT


def iota(_b: BaseBackend) -> dict[str, np.ndarray]:
    return {"y": np.arange(16, dtype=np.uint32)}


def one_ulp_off_on_beta(b: BaseBackend) -> dict[str, np.ndarray]:
    y = np.linspace(1, 2, 8, dtype=np.float32)
    if b.kind == "beta":
        y[3] = np.nextafter(y[3], np.float32(3))
    return {"y": y}


def run_cli(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    rc = cli.main(list(argv), out=out)
    return rc, out.getvalue()


# ------------------------------------------------------------------ probe


def test_probe_json_parses_and_has_reference() -> None:
    """Through the real entry points, in a fresh process, as a user runs it."""
    proc = subprocess.run(
        [sys.executable, "-m", "vyre.tools.cli", "probe", "--json"],
        capture_output=True, text=True, timeout=120, check=False,
    )
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    by_name = {e["name"]: e for e in doc["backends"]}
    assert {"reference", "wgpu", "cuda"} <= set(by_name)
    for e in doc["backends"]:
        assert isinstance(e["available"], bool)
        assert e["available"] or e["reason"]
    ref = by_name["reference"]
    assert ref["available"], f"the reference backend must always be available: {ref['reason']}"
    assert ref["capabilities"]["kind"] == "reference"
    assert isinstance(ref["capabilities"]["features"], list)


def test_probe_json_with_fakes(fakes: None) -> None:
    rc, text = run_cli("probe", "--json")
    assert rc == 0
    by_name = {e["name"]: e for e in json.loads(text)["backends"]}
    assert set(by_name) == {"reference", "alpha", "beta", "gone"}
    assert by_name["alpha"]["capabilities"]["features"] == ["f64", "resident"]
    assert by_name["alpha"]["capabilities"]["limits"]["max_workgroup_invocations"] == 256
    assert not by_name["gone"]["available"] and "gone-driver" in by_name["gone"]["reason"]
    assert by_name["gone"]["capabilities"] is None


def test_probe_table_shows_available_unavailable_features_limits(fakes: None) -> None:
    rc, text = run_cli("probe")
    assert rc == 0
    assert "4 backend(s) registered, 3 available" in text
    assert "Unavailable:" in text and "gone: no gone driver; install gone-driver" in text
    assert "fake alpha device" in text
    lines = [ln.split() for ln in text.splitlines()]
    header = next(ln for ln in lines if ln and ln[0] == "feature")
    f64 = dict(zip(header[1:], next(ln for ln in lines if ln and ln[0] == "f64")[1:]))
    assert f64 == {"alpha": "yes", "beta": "-", "reference": "-"}
    assert "max_workgroup_invocations" in text and "fake_limit" in text
    assert "driver: fake 1.0" in text


def test_probe_reports_create_failure_as_unavailable(monkeypatch: pytest.MonkeyPatch) -> None:
    class Liar(FakeProvider):
        def create(self, device: int | str | None = None) -> BaseBackend:
            raise RuntimeError("device vanished")

    install_fakes(monkeypatch, FakeProvider("reference"), Liar("liar"))
    rc, text = run_cli("probe", "--json")
    liar = {e["name"]: e for e in json.loads(text)["backends"]}["liar"]
    assert rc == 0 and not liar["available"] and "device vanished" in liar["reason"]


# ------------------------------------------------------------------ demo


def test_demo_all_agree(fakes: None, monkeypatch: pytest.MonkeyPatch) -> None:
    install_cases(monkeypatch, [StubCase("iota", iota, exact)])
    rc, text = run_cli("demo")
    assert rc == 0, text
    assert "Backends found:" in text and "gone-driver" in text
    header = next(ln for ln in text.splitlines() if ln.startswith("case"))
    assert header.split() == ["case", "reference", "alpha", "beta"]
    row = next(ln for ln in text.splitlines() if ln.startswith("iota"))
    assert row.count("ok") == 2 and "ref" in row and "ms" in row
    assert "agree with the reference on 2 backend(s)" in text


def test_demo_planted_disagreement_exits_1(fakes: None, monkeypatch: pytest.MonkeyPatch) -> None:
    install_cases(
        monkeypatch,
        [StubCase("iota", iota, exact), StubCase("float", one_ulp_off_on_beta, exact)],
    )
    rc, text = run_cli("demo")
    assert rc == 1
    row = next(ln for ln in text.splitlines() if ln.startswith("float"))
    cells = row.split()
    assert cells[0] == "float" and "FAIL" in cells and cells.count("ok") == 1
    assert "float on beta: 'y': 1 of 8 elements disagree" in text
    assert "1 problem(s)" in text


def test_demo_uses_the_case_tolerance_per_backend_kind(
    fakes: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[str] = []

    def tol(kind: str) -> Tolerance:
        seen.append(kind)
        return Tolerance(ulps=1) if kind == "beta" else EXACT

    install_cases(monkeypatch, [StubCase("float", one_ulp_off_on_beta, tol)])
    rc, text = run_cli("demo")
    assert rc == 0, text
    assert sorted(seen) == ["alpha", "beta"]


def test_demo_errors_fail_and_unsupported_is_not_a_failure(
    fakes: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    def picky(b: BaseBackend) -> dict[str, np.ndarray]:
        if b.kind == "alpha":
            raise UnsupportedFeature("f64", b.id)
        return iota(b)

    install_cases(monkeypatch, [StubCase("picky", picky, exact)])
    rc, text = run_cli("demo")
    assert rc == 0, text
    assert "n/a" in next(ln for ln in text.splitlines() if ln.startswith("picky"))

    def crashy(b: BaseBackend) -> dict[str, np.ndarray]:
        if b.kind == "beta":
            raise RuntimeError("kernel crashed")
        return iota(b)

    def wrong_shape(b: BaseBackend) -> dict[str, np.ndarray]:
        return {"y": np.zeros(3 if b.kind == "alpha" else 4, dtype=np.int32)}

    install_cases(
        monkeypatch, [StubCase("crashy", crashy, exact), StubCase("shape", wrong_shape, exact)]
    )
    rc, text = run_cli("demo")
    assert rc == 1
    assert "crashy on beta: ERROR: RuntimeError: kernel crashed" in text
    assert "shape on alpha" in text and "shape/dtype differ" in text


def test_demo_reference_error_marks_row(fakes: None, monkeypatch: pytest.MonkeyPatch) -> None:
    def ref_breaks(b: BaseBackend) -> dict[str, np.ndarray]:
        if b.kind == "reference":
            raise RuntimeError("oracle broke")
        return iota(b)

    install_cases(monkeypatch, [StubCase("r", ref_breaks, exact)])
    rc, text = run_cli("demo")
    assert rc == 1
    assert "no ref" in text and "oracle broke" in text


def test_demo_backend_selection(fakes: None, monkeypatch: pytest.MonkeyPatch) -> None:
    install_cases(monkeypatch, [StubCase("iota", iota, exact)])
    rc, text = run_cli("demo", "--backend", "beta", "--repeat", "2")
    assert rc == 0, text
    header = next(ln for ln in text.splitlines() if ln.startswith("case"))
    assert header.split() == ["case", "reference", "beta"]

    rc, text = run_cli("demo", "--backend", "nosuch")
    assert rc == 2 and "nosuch" in text and "alpha" in text  # lists the known names

    rc, text = run_cli("demo", "--backend", "gone")
    assert rc == 2 and "unavailable" in text and "gone-driver" in text


def test_demo_without_reference_is_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    install_fakes(monkeypatch, FakeProvider("alpha"))
    install_cases(monkeypatch, [StubCase("iota", iota, exact)])
    rc, text = run_cli("demo")
    assert rc == 2 and "reference backend is needed" in text


def test_demo_real_cases_on_reference() -> None:
    """The real demo programs (vyre.programs.demo) run on the reference backend."""
    pytest.importorskip("vyre.programs.demo", reason="vyre.programs.demo is not written yet")
    rc, text = run_cli("demo", "--backend", "reference")
    assert rc == 0, text


def test_no_command_prints_help_and_fails(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main([]) == 2
    assert "probe" in capsys.readouterr().err
    with pytest.raises(SystemExit) as info:
        cli.main(["--version"])
    assert info.value.code == 0


# ------------------------------------------------------------------ report


def test_format_table_aligns_columns() -> None:
    lines = format_table(["name", "n"], [["a", 1], ["bbb", 100]]).splitlines()
    assert lines == ["name    n", "----  ---", "a       1", "bbb   100"]  # numbers: right
    lines = format_table(["name", "n"], [["a", 1], ["c", None]]).splitlines()
    assert lines[2:] == ["a     1", "c     -"]  # None is '-'; not all numbers: left
    with pytest.raises(ValueError, match="row 0"):
        format_table(["a", "b"], [["only one"]])


def test_format_helpers() -> None:
    assert format_ms(None) == "-"
    assert format_ms(0.01234) == "0.012 ms"
    assert format_ms(12.345) == "12.35 ms"
    assert format_ms(1234.5) == "1234 ms" or format_ms(1234.5) == "1235 ms"
    assert format_kv({"a": True, "long": 3}) == "a:    yes\nlong: 3"


# ------------------------------------------------------------------ setup's Vulkan check


def _load_check_vulkan() -> Any:
    spec = importlib.util.spec_from_file_location(
        "vyre_test_check_vulkan", ROOT / "scripts" / "check_vulkan.py"
    )
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses look their module up there
    spec.loader.exec_module(mod)
    return mod


def test_vulkan_check_asks_wgpu_first() -> None:
    cv = _load_check_vulkan()
    lavapipe = {"device": "llvmpipe", "backend_type": "Vulkan"}
    gl = {"device": "llvmpipe", "backend_type": "OpenGL"}
    no_icds: Callable[[], list[Path]] = list
    s = cv.check(adapters=lambda: [gl, lavapipe], icds=no_icds)
    assert s.found and s.method == "wgpu" and "llvmpipe (Vulkan)" in s.detail
    s = cv.check(adapters=lambda: [gl], icds=lambda: [Path("/x/lvp_icd.json")])
    assert not s.found and "OpenGL" in s.detail  # an OpenGL-only adapter does not count
    s = cv.check(adapters=lambda: [], icds=no_icds)
    assert not s.found


def test_vulkan_check_falls_back_to_icd_files(tmp_path: Path) -> None:
    cv = _load_check_vulkan()
    d = tmp_path / "icd.d"
    d.mkdir()
    assert cv.icd_files([str(d)], env={}) == []
    assert not cv.check(adapters=lambda: None, icds=lambda: []).found
    (d / "lvp_icd.x86_64.json").write_text("{}")
    (d / "README").write_text("not a manifest")
    extra = tmp_path / "my_icd.json"
    extra.write_text("{}")
    files = cv.icd_files([str(d)], env={"VK_ICD_FILENAMES": str(extra)})
    assert files == [extra, d / "lvp_icd.x86_64.json"]
    s = cv.check(adapters=lambda: None, icds=lambda: files)
    assert s.found and s.method == "icd" and "lvp_icd" in s.detail


# ------------------------------------------------------------------ README


def test_readme_opens_with_the_two_commands() -> None:
    """The README's first block is the two commands, and CI runs the test one.

    The README's Python examples are run by tests/test_readme.py, on every backend.
    """
    import re

    text = (ROOT / "README.md").read_text()
    first = re.search(r"```sh\n(.*?)```", text, re.S)
    assert first and text.index("```") == first.start()
    commands = [ln.split("#")[0].strip() for ln in first.group(1).splitlines()]
    assert commands == ["./scripts/demo.sh", "./scripts/test.sh"]
    ci = (ROOT / ".ci" / "run").read_text()
    assert "./scripts/test.sh" in ci
