"""The Python examples of README.md and docs/*.md run as written (on the reference backend,
and on every other available backend), so the documentation cannot drift from the API.

README.md: the first ```python block is a complete script ending inside `with
vyre.get_backend() as gpu:`; later blocks indented by four spaces continue that block.
docs/*.md: every ```python block runs, in order, in one namespace per file.
Blocks that need a framework (torch; in docs marked ```python cuda) run only where it and
the CUDA backend are present. Each block keeps its line numbers in the file (the script is
padded with blank lines), so an error's file:line points into the document itself.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

import vyre

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
_BLOCK = re.compile(r"```python( cuda)?\n(.*?)```", re.S)
DOCS = sorted(p for p in (ROOT / "docs").glob("*.md") if _BLOCK.search(p.read_text()))


def _blocks(path: Path) -> list[tuple[int, bool, str]]:
    """(first line number, needs cuda + torch, code) of each python block."""
    text = path.read_text()
    return [(text[: m.start(2)].count("\n") + 1, bool(m.group(1)) or "torch" in m.group(2),
             m.group(2)) for m in _BLOCK.finditer(text)]


def _script(path: Path, include_torch: bool, continued: bool) -> str:
    blocks = _blocks(path)
    assert blocks, f"{path.name} has no python examples"
    parts: list[str] = []
    line = 1
    for i, (start, needs_torch, code) in enumerate(blocks):
        if continued and i:
            assert code.startswith("    "), f"README block does not continue the first:\n{code}"
        if needs_torch and not include_torch:
            continue
        parts.append("\n" * (start - line) + code)
        line = start + code.count("\n")
    return "".join(parts)


def _backend_or_skip(name: str, monkeypatch: pytest.MonkeyPatch) -> bool:
    """Select backend `name` (skip, with the reason, if unavailable); True if CUDA + torch."""
    status = {s.name: s for s in vyre.available_backends()}
    if name not in status or not status[name].available:
        reason = status[name].reason if name in status else "not installed"
        pytest.skip(f"backend {name!r} is unavailable here: {reason}")
    monkeypatch.setenv("VYRE_BACKEND", name)
    if name != "cuda":
        return False
    try:
        import torch

        return bool(torch.cuda.is_available())
    except ImportError:
        return False


def _run(path: Path, script: str) -> dict[str, Any]:
    namespace: dict[str, Any] = {"__name__": path.stem}
    exec(compile(script, str(path), "exec"), namespace)
    return namespace


@pytest.mark.parametrize("name", ["reference", "wgpu", "cuda"])
def test_readme_examples_run(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    torch_ok = _backend_or_skip(name, monkeypatch)
    _run(README, _script(README, torch_ok, continued=True))


@pytest.mark.parametrize("doc", DOCS, ids=[d.name for d in DOCS])
@pytest.mark.parametrize("name", ["reference", "wgpu", "cuda"])
def test_docs_examples_run(name: str, doc: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    torch_ok = _backend_or_skip(name, monkeypatch)
    ns = _run(doc, _script(doc, torch_ok, continued=False))
    gpu = ns.get("gpu")
    if isinstance(gpu, vyre.BaseBackend) and not gpu.closed:
        gpu.close()


def test_error_sites_point_into_the_document() -> None:
    """The guide's error example names guide.md and the line of the kernel's statement."""
    guide = ROOT / "docs" / "guide.md"
    lines = guide.read_text().splitlines()
    want = next(n for n, t in enumerate(lines, 1) if t.strip() == "acc += x[j]")
    ns = _run(guide, _script(guide, False, continued=False).split("try:")[0])
    with pytest.raises(vyre.InvalidProgram) as info:
        _ = ns["wrong"].program
    assert str(info.value).startswith(f"{guide}:{want}: ")
    ns["gpu"].close()
