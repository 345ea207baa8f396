"""Every backend is the four parts of vyre/parts.py behind the BaseBackend facade, with the
same names everywhere: each built-in backend and the out-of-tree example hands the facade a
Device, an Allocator, a Compiler and a Queue of its own, and its BaseBackend subclass holds
no hook of its own (a private method beside `__init__` would be a hook outside the parts).
The parts carry the work: a dispatch on each backend goes through its queue's `launch`,
which the facade binds once for the hot path."""

from __future__ import annotations

import ast
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
from vyre.parts import Allocator, Compiler, Device, Queue

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
