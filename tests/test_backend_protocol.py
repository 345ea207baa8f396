"""Every backend satisfies `vyre.Backend`, the named public surface: each member present,
with the protocol's parameters (names, kinds, defaults), on the built-in backends, the
out-of-tree example and `RemoteBackend`; mypy checks the same through the
`_satisfies_backend` assignment beside each class. The checker itself is tested on classes
that drift, so it cannot pass vacuously."""

from __future__ import annotations

import importlib.util
import inspect
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import vyre
from vyre.backend import BaseBackend, Capabilities
from vyre.backends.cuda.runtime import CudaBackend
from vyre.backends.reference.runtime import ReferenceBackend
from vyre.backends.wgpu.runtime import WgpuBackend
from vyre.distributed import transfer as remote_transfer
from vyre.distributed.remote import RemoteBackend
from vyre.interface import Backend
from vyre.tools import replay as R
from vyre.tools.shadow import Shadow

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
from common_programs import saxpy  # noqa: E402

_DATA = object()  # a protocol member that is a plain attribute


def protocol_members(proto: type) -> dict[str, Any]:
    """name -> the protocol's function or property, or _DATA for an annotated attribute."""
    out: dict[str, Any] = {n: _DATA for n in proto.__annotations__}
    for name, value in vars(proto).items():
        if name.startswith("_") and name not in ("__enter__", "__exit__"):
            continue
        if callable(value) or isinstance(value, property):
            out[name] = value
    return out


def _params(fn: Any) -> list[tuple[str, Any, Any]]:
    return [(p.name, p.kind, p.default) for p in inspect.signature(fn).parameters.values()]


def _annotated(cls: type, name: str) -> bool:
    return any(name in vars(k).get("__annotations__", {}) for k in cls.__mro__)


def drift(cls: type, proto: type = Backend) -> list[str]:
    """What `cls` lacks or spells differently from `proto` (empty when it satisfies it)."""
    problems = []
    for name, want in protocol_members(proto).items():
        got = inspect.getattr_static(cls, name, None)
        if want is _DATA or isinstance(want, property):
            if got is None and not _annotated(cls, name):
                problems.append(f"{name}: missing")
            elif callable(got) and not isinstance(got, property):
                problems.append(f"{name}: a method, the protocol has an attribute")
            continue
        if got is None:
            problems.append(f"{name}: missing")
            continue
        if isinstance(got, (property, staticmethod, classmethod)) or not callable(got):
            problems.append(f"{name}: not a plain method ({type(got).__name__})")
            continue
        if _params(got) != _params(want):
            problems.append(f"{name}: signature {inspect.signature(got)} is not the "
                            f"protocol's {inspect.signature(want)}")
    return problems


def _example_backend() -> type:
    path = ROOT / "examples" / "numpy_backend" / "vyre_numpy_backend" / "__init__.py"
    spec = importlib.util.spec_from_file_location("_vyre_numpy_backend_for_protocol", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    cls: type = module.NumpyBackend
    return cls


IMPLEMENTATIONS = {
    "reference": ReferenceBackend, "cuda": CudaBackend, "wgpu": WgpuBackend,
    "remote": RemoteBackend, "base": BaseBackend,
}


@pytest.mark.parametrize("name", [*IMPLEMENTATIONS, "example numpy_backend"])
def test_every_backend_class_has_every_member_of_the_protocol(name: str) -> None:
    cls = IMPLEMENTATIONS[name] if name in IMPLEMENTATIONS else _example_backend()
    assert drift(cls) == []


def test_the_protocol_is_the_base_classes_whole_public_surface() -> None:
    """A public method added to BaseBackend without the protocol (or the other way round)
    is drift: RemoteBackend would not be held to it."""
    public = {n for n in dir(BaseBackend) if not n.startswith("_")} | {"id", "compile_stats"}
    assert public == set(protocol_members(Backend)) - {"__enter__", "__exit__"}


def test_the_checker_finds_a_missing_member_a_changed_signature_and_a_property() -> None:
    class Drifted(RemoteBackend):
        def read(self, buffer: Any, offset: int = 0, length: int | None = None,  # type: ignore[override]
                 dtype: Any = np.float32) -> np.ndarray:
            raise AssertionError

        def from_dlpack(self, tensor: Any, stream: Any = "auto",  # type: ignore[override]
                        label: str | None = None) -> Any:
            raise AssertionError

        stream = None  # type: ignore[assignment]
        supports = property(lambda self: True)  # type: ignore[assignment]

    found = drift(Drifted)
    assert [p.split(":")[0] for p in found] == ["supports", "read", "from_dlpack", "stream"]


def test_instances_satisfy_it(reference: BaseBackend) -> None:
    assert isinstance(reference, Backend)
    with vyre.get_backend("reference") as fresh:
        assert isinstance(fresh, Backend)
    caps = Capabilities(backend="reference:0", kind="reference", device="numpy")
    remote = RemoteBackend(None, "a", {"instance": "i", "backend_id": "reference:0",
                                       "kind": "reference", "node_id": "n", "gpu_ids": [],
                                       "pid": 1, "generation": 0, "capabilities": caps})
    for name in ("id", "kind"):
        assert isinstance(getattr(remote, name), str)
    assert vyre.Backend is Backend


def test_a_subclass_overriding_a_hook_from_before_the_parts_is_refused() -> None:
    """A plugin written against the old hooks (`_compile`, `_allocate`, ...) would be
    silently ignored, its backend running the base behaviour; it is refused at class
    creation, naming where each hook went."""
    with pytest.raises(TypeError, match=r"_compile -> Compiler.compile.*vyre.parts"):
        class Old(ReferenceBackend):
            def _compile(self, program: object, key: object) -> None: ...

    with pytest.raises(TypeError, match=r"_allocate -> Allocator.allocate"):
        type("Old", (BaseBackend,), {"_allocate": lambda self, n, label: None})


@pytest.mark.parametrize("transfer", [vyre.transfer, remote_transfer],
                         ids=["vyre.transfer", "vyre.distributed.transfer"])
def test_transfer_refuses_what_is_not_a_backend_by_the_protocol(
        reference: BaseBackend, transfer: Any) -> None:
    """The destination is checked against `Backend` (any implementation, RemoteBackend
    included), not one base class; what is not a backend is refused naming the fix."""
    buf = reference.allocate_device_buffer(16)
    reference.write(buf, np.arange(4, dtype=np.uint32))
    try:
        with pytest.raises(vyre.BackendUnavailable,
                           match="transfer needs a destination backend instance, got dict"):
            transfer(buf, {"id": "reference:0"})
        moved = transfer(buf, reference)
        assert reference.read(moved, dtype=np.uint32).tolist() == [0, 1, 2, 3]
        reference.free(moved)
    finally:
        reference.free(buf)


def test_the_tools_take_any_backend_not_only_the_base_class(tmp_path: Path) -> None:
    """replay and Shadow take a backend instance of any implementation (here a Shadow, a
    Backend that is no BaseBackend) where they once sent everything but a BaseBackend to
    the registry as a name."""
    x = np.arange(64, dtype=np.float32)
    inputs = {"x": x, "y": np.ones(64, np.float32)}
    cfg = vyre.DispatchConfig(grid=(1, 1, 1), params={"a": 2.0})
    with vyre.get_backend("reference") as be, vyre.get_backend("reference") as other:
        want = R.record_dispatch(tmp_path / "d.zip", be, saxpy("saxpy_protocol"), inputs, cfg)
        wrapped = Shadow(other, against=be, every=1)
        res = R.replay(tmp_path / "d.zip", backend=wrapped, against=wrapped)
        assert res.ok and res.compared_with == other.id
        assert res.outputs["y"].tobytes() == want["y"].tobytes() == (2 * x + 1).tobytes()
        assert wrapped.shadowed == 2  # both runs went through the Shadow, on `other`
