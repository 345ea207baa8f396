"""The plug, proven: the out-of-tree backend in examples/numpy_backend is installed into a
temporary directory the way an installer does it (its package plus a .dist-info holding the
entry points declared in its own pyproject.toml; no pip, no network), found by
vyre.get_backend through the `vyre.backends` entry point in a fresh process, and passes the
whole conformance suite (tests/test_conformance.py, --backend numpy)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "numpy_backend"


def install(example: Path, target: Path) -> None:
    """Copy the example's packages into `target` with the metadata importlib.metadata reads
    (METADATA, entry_points.txt), from the example's own pyproject.toml."""
    meta = tomllib.loads((example / "pyproject.toml").read_text())
    project = meta["project"]
    for pkg in meta["tool"]["setuptools"]["packages"]:
        shutil.copytree(example / pkg, target / pkg)
    dist = target / f"{project['name'].replace('-', '_')}-{project['version']}.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {project['name']}\nVersion: {project['version']}\n")
    lines = []
    for group, eps in project["entry-points"].items():
        lines.append(f"[{group}]")
        lines += [f"{name} = {ref}" for name, ref in eps.items()]
    (dist / "entry_points.txt").write_text("\n".join(lines) + "\n")


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    target = tmp_path_factory.mktemp("site")
    install(EXAMPLE, target)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(target), env.get("PYTHONPATH", "")])
    return env


def test_the_entry_point_finds_it(installed: dict[str, str]) -> None:
    code = ("import vyre, numpy as np; b = vyre.get_backend('numpy'); "
            "print(type(b).__module__, [a.name for a in vyre.available_backends()])")
    res = subprocess.run([sys.executable, "-c", code], env=installed, capture_output=True,
                         text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    assert res.stdout.startswith("vyre_numpy_backend ") and "'numpy'" in res.stdout


def test_it_passes_the_conformance_suite(installed: dict[str, str]) -> None:
    suite = [str(ROOT / "tests" / "test_conformance.py")]
    res = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rs", *suite,
         "--backend", "numpy"],
        env=installed, capture_output=True, text=True, timeout=900, cwd=ROOT)
    assert res.returncode == 0, res.stdout[-4000:] + res.stderr[-2000:]
    # every case ran on it and passed; the only skips are the other backends (not asked
    # for), never a case the example could not run
    skips = [line for line in res.stdout.splitlines() if line.startswith("SKIPPED")]
    assert all("only backend 'numpy' was asked for" in s for s in skips), "\n".join(skips)
    from vyre.tools.conformance import CASES

    passed = int(re.search(r"(\d+) passed", res.stdout).group(1))  # type: ignore[union-attr]
    assert passed > len(CASES), res.stdout[-2000:]
