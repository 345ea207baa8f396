"""The README's Python examples run as written (on the reference backend, and on every
other available backend), so the documentation cannot drift from the API.

The first ```python block is a complete script ending inside `with vyre.get_backend() as
gpu:`; later blocks indented by four spaces continue that block. Blocks that need a
framework (torch) run only where it and the CUDA backend are present, and say so otherwise.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import vyre

README = Path(__file__).resolve().parent.parent / "README.md"
_BLOCK = re.compile(r"```python\n(.*?)```", re.S)


def _script(include_torch: bool) -> str:
    blocks = _BLOCK.findall(README.read_text())
    assert blocks, "README has no python examples"
    parts = [blocks[0]]
    for b in blocks[1:]:
        assert b.startswith("    "), f"README block does not continue the first one:\n{b}"
        if "torch" in b and not include_torch:
            continue
        parts.append(b)
    return "\n".join(parts)


@pytest.mark.parametrize("name", ["reference", "wgpu", "cuda"])
def test_readme_examples_run(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    status = {s.name: s for s in vyre.available_backends()}
    if name not in status or not status[name].available:
        reason = status[name].reason if name in status else "not installed"
        pytest.skip(f"backend {name!r} is unavailable here: {reason}")
    monkeypatch.setenv("VYRE_BACKEND", name)
    torch_ok = False
    if name == "cuda":
        try:
            import torch

            torch_ok = bool(torch.cuda.is_available())
        except ImportError:
            torch_ok = False
    exec(compile(_script(torch_ok), str(README), "exec"), {"__name__": "readme"})
