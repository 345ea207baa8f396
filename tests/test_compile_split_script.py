"""scripts/wgpu_compile_split.py (the wgpu cold-compile split docs/perf-notes.md cites) runs
every section, and each of its spelling edits still changes vyre's WGSL here (the script
leaves out an edit that does not, with a note: a printer change must not leave the pricing
of a feature silently measuring the unchanged source)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from vyre.backend import BaseBackend

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "wgpu_compile_split.py"


def test_every_section_runs_and_every_edit_changes_the_source(
        backends: dict[str, BaseBackend], tmp_path: Path) -> None:
    if "wgpu" not in backends:
        pytest.skip("needs a wgpu adapter (lavapipe in CI)")
    out = tmp_path / "split.json"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])}
    res = subprocess.run([sys.executable, str(SCRIPT), "--stages", "--spellings",
                          "--rounds", "1", "--json", str(out)],
                         env=env, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stdout + res.stderr
    rows = json.loads(out.read_text())
    sys.path.insert(0, str(SCRIPT.parent))
    try:
        import wgpu_compile_split as split
    finally:
        sys.path.remove(str(SCRIPT.parent))
    expected = {split.RAW, "vyre compile(), cold, end to end",
                "driver: vyre's WGSL as generated", "driver: trivial shader (fixed cost)",
                "stage: content hash (CPU)", "stage: generate = lower + WGSL (CPU)",
                "stage: create_compute_pipeline",
                *(f"driver: {name}" for name in split.EDITS)}
    assert expected <= rows.keys(), (sorted(expected - rows.keys()), res.stderr)
    assert all(r["median_ms"] > 0 for r in rows.values()), rows
