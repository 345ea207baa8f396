"""Every backend is the four parts of vyre/parts.py behind the BaseBackend facade, with the
same names everywhere: each built-in backend and the out-of-tree example hands the facade a
Device, an Allocator, a Compiler and a Queue of its own, and its BaseBackend subclass holds
no hook of its own (a private method beside `__init__` would be a hook outside the parts).
The parts carry the work: a dispatch on each backend goes through its queue's `launch`,
which the facade binds once for the hot path."""

from __future__ import annotations

import ast
import importlib
import importlib.util
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from vyre import DispatchConfig, ProgramBuilder, u32
from vyre.backend import BaseBackend
from vyre.parts import Allocator, Compiler, Device, Queue, hooks_of, is_hook

ROOT = Path(__file__).resolve().parents[1]
FACADES = [*sorted((ROOT / "vyre" / "backends").glob("*/runtime.py")),
           ROOT / "examples" / "numpy_backend" / "vyre_numpy_backend" / "__init__.py"]


def _facade_classes(path: Path) -> list[ast.ClassDef]:
    tree = ast.parse(path.read_text())
    return [n for n in tree.body if isinstance(n, ast.ClassDef)
            and any(isinstance(b, ast.Name) and b.id == "BaseBackend" for b in n.bases)]


@pytest.mark.parametrize("path", FACADES, ids=lambda p: str(p.relative_to(ROOT)))
def test_a_backend_class_holds_no_hook_of_its_own(path: Path) -> None:
    classes = _facade_classes(path)
    assert len(classes) == 1, f"{path}: one BaseBackend subclass, found {len(classes)}"
    private = [f.name for f in classes[0].body
               if isinstance(f, ast.FunctionDef) and f.name.startswith("_")
               and f.name != "__init__"]
    assert private == [], (f"{classes[0].name} defines {private}: device behaviour belongs "
                           "in its parts (vyre/parts.py), not in the facade")


def _example() -> Any:
    path = FACADES[-1]
    spec = importlib.util.spec_from_file_location("_vyre_numpy_backend_for_parts", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod.NumpyBackend()


def _cuda_on_the_standin() -> Iterator[Any]:
    sys.path.insert(0, str(ROOT / "tests"))
    import cuda_standin

    with tempfile.TemporaryDirectory() as tmp, cuda_standin.installed(), \
            cuda_standin.backend(tmp) as b:
        yield b


def _inc() -> Any:
    k = ProgramBuilder("inc", workgroup_size=(64, 1, 1))
    y = k.buffer("y", u32, "read_write")
    i = k.global_id(0)
    with k.if_(i < y.length()):
        y[i] = y[i] + 1
    return k.build()


@pytest.mark.parametrize("which", ["reference", "example", "cuda stand-in", "wgpu"])
def test_each_backend_is_the_four_parts(which: str, backends: dict[str, BaseBackend]) -> None:
    gen = _cuda_on_the_standin() if which == "cuda stand-in" else None
    if gen is not None:
        b = next(gen)
    elif which == "example":
        b = _example()
    elif which not in backends:
        pytest.skip(f"{which} is not available here")
    else:
        b = backends[which]  # (the session's instance: left open, its buffer freed)
    try:
        assert isinstance(b, BaseBackend)
        parts = (b._device, b._memory, b._compiler, b._queue)
        for part, kind in zip(parts, (Device, Allocator, Compiler, Queue)):
            assert isinstance(part, kind) and part.backend is b
        assert type(b._memory) is not Allocator and type(b._queue) is not Queue
        assert type(b._compiler) is not Compiler
        assert b._launch_record == b._queue.launch  # the hot path's one call
        asked = b.compile_stats.hits + b.compile_stats.misses
        y = b.allocate_device_buffer(256)
        try:
            b.write(y, np.arange(64, dtype=np.uint32))
            bound = b.bind(_inc(), [], [y], DispatchConfig.for_elements(64, 64))
            for _ in range(3):
                b.dispatch_with_device_buffers(bound)
            if gen is None:  # (the stand-in runs no kernel)
                assert np.array_equal(b.read(y, dtype=np.uint32), np.arange(64) + 3)
            assert b.compile_stats.hits + b.compile_stats.misses == asked + 1  # (prepared once)
        finally:
            y.free()
    finally:
        if gen is not None:
            gen.close()
        elif which == "example":
            b.close()


PARTS = (Device, Allocator, Compiler, Queue)


@pytest.mark.parametrize("part", PARTS, ids=lambda p: p.__name__)
def test_every_hook_is_marked_and_says_so(part: type) -> None:
    """A part's hooks are exactly its methods marked @hook, and each one's docstring says
    it is a hook (required or optional); the rest are the core's."""
    marked = set(hooks_of(part))
    assert marked, f"{part.__name__} has no hooks"
    for name, member in vars(part).items():
        if name.startswith("__") or not callable(getattr(member, "fget", member)):
            continue
        doc = (getattr(member, "fget", member).__doc__ or "").lstrip()
        assert doc.startswith("Hook (") == (name in marked), (
            f"{part.__name__}.{name}: a hook is marked @hook and its docstring begins "
            f"'Hook (required ...)' or 'Hook (optional ...)', and only a hook")


@pytest.mark.parametrize("part", PARTS, ids=lambda p: p.__name__)
def test_a_part_that_redefines_a_core_method_is_refused(part: type) -> None:
    """Overriding a hook is how a backend is written; redefining anything else of a part
    (what the core calls, some of it bound once for the hot path) is refused at once."""
    core = sorted(name for name, member in vars(part).items()
                  if not name.startswith("__") and callable(getattr(member, "fget", member))
                  and not is_hook(member))
    hook = hooks_of(part)[0]
    type(f"Good{part.__name__}", (part,), {hook: lambda self, *a: None})  # a hook: fine
    for name in core:
        with pytest.raises(TypeError, match=f"redefines {name} of vyre.parts.{part.__name__}"):
            type(f"Bad{part.__name__}", (part,), {name: lambda self, *a: None})
    if part is Device:  # (the device's open check is bound once by every facade)
        assert core and "check_open" in core


@pytest.mark.parametrize("which", ["reference", "example", "cuda stand-in", "wgpu"])
def test_backend_parts_override_only_hooks(which: str) -> None:
    """Every built-in backend's parts, and the example's, override hooks and nothing else
    of vyre.parts (their class was made, so Part.__init_subclass__ let them through; this
    names what each overrides, so that a backend overriding no hook at all fails too)."""
    modules = {
        "reference": ["vyre.backends.reference.runtime"],
        "wgpu": [f"vyre.backends.wgpu.{m}" for m in ("device", "allocator", "compiler", "queue")],
        "cuda stand-in": [f"vyre.backends.cuda.{m}"
                          for m in ("device", "allocator", "compiler", "queue")],
    }
    if which == "example":
        classes = [type(p) for p in _parts_of(_example()) if type(p) not in PARTS]
    else:
        try:
            mods = [importlib.import_module(m) for m in modules[which]]
        except ImportError as exc:  # (wgpu-py or cuda-python not installed here)
            pytest.skip(f"{which}: {exc}")
        classes = [c for m in mods for c in vars(m).values()
                   if isinstance(c, type) and issubclass(c, PARTS) and c not in PARTS
                   and c.__module__ == m.__name__]
    kinds = {base for c in classes for base in PARTS if issubclass(c, base)}
    # (the example's device is vyre's plain Device: a CPU needs no device of its own)
    assert kinds == (set(PARTS) - {Device} if which == "example" else set(PARTS))
    for c in classes:
        base = next(b for b in PARTS if issubclass(c, b))
        over = {n for n in vars(c) if n in vars(base) and not n.startswith("__")}
        assert over <= set(hooks_of(base)), (c, over - set(hooks_of(base)))
        assert over or base is Device, f"{c.__qualname__} overrides no hook of {base.__name__}"


def _parts_of(b: BaseBackend) -> tuple[Any, ...]:
    try:
        return (b._device, b._memory, b._compiler, b._queue)
    finally:
        b.close()
