"""The engine's size figures (issue 29, item 6): lines per backend and per core module, the
largest files and classes of the engine (vyre/ without vyre/tools), from the source alone.
Run from the repository root (or name another checkout):

    python scripts/engine_sizes.py [ROOT]

Lines are physical lines (blank and comment lines included, as `wc -l` counts them); a
class's lines run from its `class` line to its last line.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path


def lines(path: Path) -> int:
    return len(path.read_text().splitlines())


def main(root: Path) -> None:
    pkg = root / "vyre"
    engine = sorted(p for p in pkg.rglob("*.py") if "tools" not in p.relative_to(pkg).parts)
    files = sorted(((lines(p), str(p.relative_to(root))) for p in engine), reverse=True)
    classes = []
    for p in engine:
        for node in ast.walk(ast.parse(p.read_text())):
            if isinstance(node, ast.ClassDef) and node.end_lineno is not None:
                classes.append((node.end_lineno - node.lineno + 1,
                                f"{p.relative_to(root)}:{node.name}"))
    classes.sort(reverse=True)
    print("largest engine files: " + ", ".join(f"{f} {n}" for n, f in files[:8]))
    print("largest engine classes: " + ", ".join(f"{c} {n}" for n, c in classes[:8]))
    print("backends (lines, files):")
    for d in sorted((pkg / "backends").iterdir()):
        if d.is_dir() and (d / "__init__.py").exists():
            fs = sorted(d.glob("*.py"))
            print(f"  {d.name}: {sum(lines(f) for f in fs)} in {len(fs)} files "
                  f"(largest {max(fs, key=lines).name} {max(lines(f) for f in fs)})")
    example = root / "examples" / "numpy_backend" / "vyre_numpy_backend"
    if example.is_dir():
        print(f"  examples/numpy_backend: {sum(lines(f) for f in example.glob('*.py'))}")
    core = sorted(pkg.glob("*.py"), key=lines, reverse=True)
    print("core modules (vyre/*.py): " + ", ".join(f"{p.name} {lines(p)}" for p in core))
    subs = [d for d in sorted(pkg.iterdir()) if d.is_dir() and (d / "__init__.py").exists()]
    print("packages: " + ", ".join(
        f"{d.name}/ {sum(lines(f) for f in d.rglob('*.py'))}" for d in subs))


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else ".").resolve())
