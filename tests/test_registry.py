"""Backend discovery: every registered backend is reported, broken ones with the reason.

Fake providers are installed by monkeypatching `vyre.registry._entry_points` with real
`importlib.metadata.EntryPoint` objects, so loading goes through the same code path as for
installed backends.
"""

from __future__ import annotations

import sys
import types
from importlib import metadata

import pytest

from vyre import registry
from vyre.backend import BaseBackend, Capabilities
from vyre.errors import BackendUnavailable

FAKE_MODULE = "vyre_test_fake_registry_backends"


class FakeBackend(BaseBackend):
    def __init__(self, instance_id: str, kind: str) -> None:
        super().__init__(instance_id)
        self.kind = kind

    def capabilities(self) -> Capabilities:
        return Capabilities(backend=self.id, kind=self.kind, device=f"fake {self.kind} device")


class FakeProvider:
    def __init__(
        self, name: str, available: bool = True, reason: str = "", probe_error: bool = False
    ) -> None:
        self.name = name
        self.available = available
        self.reason = reason
        self.probe_error = probe_error

    def probe(self) -> registry.Availability:
        if self.probe_error:
            raise RuntimeError(f"{self.name} probe exploded")
        return registry.Availability(self.name, self.available, self.reason)

    def create(self, device: int | str | None = None) -> BaseBackend:
        if not self.available:
            raise BackendUnavailable(self.name, self.reason)
        return FakeBackend(self.name if device is None else f"{self.name}:{device}", self.name)


@pytest.fixture
def fake_registry(monkeypatch: pytest.MonkeyPatch) -> dict[str, metadata.EntryPoint]:
    """Registered: reference, alpha (available), gone (unavailable), flaky (probe raises),
    broken (its module does not exist)."""
    mod = types.ModuleType(FAKE_MODULE)
    provs = {
        "reference": FakeProvider("reference"),
        "alpha": FakeProvider("alpha"),
        "gone": FakeProvider("gone", False, "no driver for gone; install gone-driver"),
        "flaky": FakeProvider("flaky", probe_error=True),
    }
    for name, p in provs.items():
        setattr(mod, name.upper(), p)
    monkeypatch.setitem(sys.modules, FAKE_MODULE, mod)
    eps = {
        name: metadata.EntryPoint(name, f"{FAKE_MODULE}:{name.upper()}", registry.GROUP)
        for name in provs
    }
    eps["broken"] = metadata.EntryPoint(
        "broken", "vyre_test_no_such_backend_module:PROVIDER", registry.GROUP
    )
    monkeypatch.setattr(registry, "_entry_points", lambda: dict(eps))
    monkeypatch.delenv(registry.ENV_DEFAULT, raising=False)
    return eps


def test_installed_backends_are_all_reported() -> None:
    """The backends this repo registers appear, each with available and, if not, a reason."""
    report = {a.name: a for a in registry.available_backends()}
    assert {"reference", "wgpu", "cuda"} <= set(report)
    for a in report.values():
        assert isinstance(a.available, bool)
        if not a.available:
            assert a.reason, f"{a.name} is unavailable without a reason"


def test_every_registered_backend_is_reported(fake_registry: dict[str, object]) -> None:
    report = {a.name: a for a in registry.available_backends()}
    assert set(report) == set(fake_registry)
    assert report["reference"].available and report["alpha"].available
    assert not report["gone"].available
    assert "install gone-driver" in report["gone"].reason
    assert not report["flaky"].available
    assert "probe failed" in report["flaky"].reason and "exploded" in report["flaky"].reason


def test_provider_that_fails_to_import_is_unavailable_with_reason(
    fake_registry: dict[str, object],
) -> None:
    broken = {a.name: a for a in registry.available_backends()}["broken"]
    assert not broken.available
    assert "failed to import" in broken.reason
    assert "vyre_test_no_such_backend_module" in broken.reason
    with pytest.raises(BackendUnavailable, match="failed to import"):
        registry.get_backend("broken")


def test_get_backend_unknown_name_lists_known_names(fake_registry: dict[str, object]) -> None:
    with pytest.raises(BackendUnavailable) as info:
        registry.get_backend("nosuch")
    msg = str(info.value)
    assert "nosuch" in msg
    for name in ("alpha", "broken", "gone", "reference"):
        assert name in msg


def test_get_backend_creates_named_instance_and_device(fake_registry: dict[str, object]) -> None:
    with registry.get_backend("alpha") as b:
        assert b.id == "alpha" and b.capabilities().kind == "alpha"
    with registry.get_backend("alpha:1") as b:
        assert b.id == "alpha:1"
    with pytest.raises(BackendUnavailable, match="gone-driver"):
        registry.get_backend("gone")


def test_vyre_backend_env_chooses_default(
    fake_registry: dict[str, object], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Without the variable: the first available in PREFERENCE order (only reference here).
    assert registry.default_backend_name() == "reference"
    monkeypatch.setenv(registry.ENV_DEFAULT, "alpha")
    assert registry.default_backend_name() == "alpha"
    with registry.get_backend() as b:
        assert b.id == "alpha"
    monkeypatch.setenv(registry.ENV_DEFAULT, "nosuch")
    with pytest.raises(BackendUnavailable, match="known"):
        registry.get_backend()


def test_no_available_backend_says_how_to_find_out(monkeypatch: pytest.MonkeyPatch) -> None:
    mod = types.ModuleType(FAKE_MODULE)
    mod.GONE = FakeProvider("gone", False, "nothing here")  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, FAKE_MODULE, mod)
    ep = metadata.EntryPoint("gone", f"{FAKE_MODULE}:GONE", registry.GROUP)
    monkeypatch.setattr(registry, "_entry_points", lambda: {"gone": ep})
    monkeypatch.delenv(registry.ENV_DEFAULT, raising=False)
    with pytest.raises(BackendUnavailable, match="vyre probe"):
        registry.get_backend()
