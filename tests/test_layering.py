"""The layering README's "Where things live" describes, held by the code's own imports.

Every `import` and `from ... import` in vyre/ is read with `ast` (those under
`TYPE_CHECKING` and inside functions too: an import is a dependency wherever it is
written). Each module belongs to a floor; a module imports only modules of its own floor or
below, and the backends never import one another. The same graph must have no import
cycle. A new arrow that runs up, or a new cycle, fails here naming the file and line.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "vyre"

#: Floors from the bottom up, by module-name prefix (the longest matching prefix decides).
#: A module may import its own floor and any floor below it, never one above.
FLOORS: dict[str, int] = {
    # 0: leaves every part may use
    "vyre.errors": 0, "vyre.features": 0, "vyre.lru": 0, "vyre.interrupts": 0,
    "vyre.dlpack": 0,
    # 1: the Program IR (nodes, types, validator, wire format, comparison rules)
    "vyre.ir": 1, "vyre.debug.fmt": 1,  # (how print formats a value: the validator checks
    # format strings with it)
    # 2: what is built on the IR alone: the lowering, the builders, configs, host arrays
    "vyre.lower": 2, "vyre.builder": 2, "vyre.config": 2, "vyre.hostarrays": 2,
    "vyre.subgroups": 2, "vyre.shapes": 2,
    "vyre.debug.instrument": 2, "vyre.debug.log": 2,  # (vyre.print / assert_ as IR rewrites)
    # the printer skeleton every backend's printer fills in (IR in, text out)
    "vyre.backends.printer": 2,
    # 3: the runtime core: buffers, the Backend protocol, binding, pipelines, the base class,
    # the kernel decorator, replay files
    "vyre.buffer": 3, "vyre.interface": 3, "vyre.binding": 3, "vyre.pipeline": 3,
    "vyre.backend": 3, "vyre.kernel": 3, "vyre.replay_file": 3, "vyre.debug": 3,
    "vyre.exact_sum_plan": 3, "vyre.kernel_ast": 3, "vyre.kernel_flow": 3, "vyre.kernel_expr": 3,
    "vyre.kernel_lang": 3, "vyre.kernel_signature": 3,
    "vyre.host_path": 3, "vyre.parts": 3, "vyre.compile_cache": 3,
    "vyre.buffer_registry": 3, "vyre.launch_cache": 3, "vyre.launch_path": 3,
    "vyre.host_io": 3,
    # 4: the registry of backends (entry points; it never imports a backend)
    "vyre.registry": 4,
    # 5: the backends, each a floor of its own that no other backend imports
    "vyre.backends": 5,
    # 6: the program library
    "vyre.programs": 6,
    # 7: work over several backends: transfers, device groups
    "vyre.transfers": 7, "vyre.shards": 7, "vyre.group": 7, "vyre.group_sort": 7,
    "vyre.group_combine": 7,
    # 8: backends in other processes (Ray)
    "vyre.distributed": 8,
    # 9: the package's public face
    "vyre": 9,
    # 10: what is not the runtime: the CLI, bench, fuzzer, conformance, test support
    "vyre.tools": 10,
}

#: Imports that run up a floor on purpose, each with its reason.
ALLOWED_UP: dict[tuple[str, str], str] = {
    ("vyre.debug.instrument", "vyre.backends.reference.render"):
        "a failed assert's message shows its condition as the reference printer spells IR "
        "(imported in the function, when a program with asserts is instrumented)",
}


def floor(module: str) -> int:
    parts = module.split(".")
    for n in range(len(parts), 0, -1):
        hit = FLOORS.get(".".join(parts[:n]))
        if hit is not None:
            return hit
    raise AssertionError(f"{module} is on no floor: add it to FLOORS in {__file__}")


def backend_of(module: str) -> str | None:
    """The backend a module is part of: its folder under vyre/backends (a module directly
    there, the printer skeleton, is shared by all and part of none)."""
    parts = module.split(".")
    if len(parts) > 2 and parts[1] == "backends" and (PACKAGE / "backends" / parts[2]).is_dir():
        return parts[2]
    return None


@dataclass(frozen=True)
class Arrow:
    source: str
    target: str
    line: int

    def where(self) -> str:
        path = self.source.replace(".", "/")
        return f"{path}.py:{self.line}: {self.source} imports {self.target}"


def module_name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = list(rel.parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_module(name: str) -> bool:
    path = ROOT.joinpath(*name.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def arrows() -> Iterator[Arrow]:
    """Every import of a vyre module by a vyre module (`from pkg import submodule` counts as
    importing the submodule; `from pkg import name` as importing pkg)."""
    for path in sorted(PACKAGE.rglob("*.py")):
        source = module_name(path)
        package = source if path.name == "__init__.py" else source.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")[: len(package.split(".")) - node.level + 1]
                    mod = ".".join(base + ([node.module] if node.module else []))
                else:
                    mod = node.module or ""
                subs = [f"{mod}.{a.name}" for a in node.names if _is_module(f"{mod}.{a.name}")]
                targets = subs if len(subs) == len(node.names) else [mod, *subs]
            else:
                continue
            for t in targets:
                if t == "vyre" or t.startswith("vyre."):
                    yield Arrow(source, t, node.lineno)


ARROWS = [a for a in arrows() if a.source != a.target]


def test_the_reader_sees_the_imports_it_must() -> None:
    """(The checks below are only as good as this reader: known arrows must be in it.)"""
    seen = {(a.source, a.target) for a in ARROWS}
    assert ("vyre.backend", "vyre.binding") in seen  # a relative import at the top
    assert ("vyre.backends.cuda.allocator", "vyre.backends.cuda.interop") in seen  # from . import
    assert ("vyre.tools.replay", "vyre.registry") in seen  # inside a function
    assert ("vyre.distributed.remote", "vyre.interface") in seen  # under TYPE_CHECKING too
    assert len(seen) > 300


def test_no_import_runs_up_a_floor() -> None:
    up = [a.where() + f" (floor {floor(a.source)} -> {floor(a.target)})" for a in ARROWS
          if floor(a.target) > floor(a.source)
          and (a.source, a.target) not in ALLOWED_UP]
    assert up == [], "\n".join(up)


def test_backends_never_import_one_another() -> None:
    cross = [a.where() for a in ARROWS
             if backend_of(a.source) and backend_of(a.target)
             and backend_of(a.source) != backend_of(a.target)]
    assert cross == [], "\n".join(cross)


def test_lower_imports_only_the_ir() -> None:
    out = [a.where() for a in ARROWS if a.source.startswith("vyre.lower")
           and not a.target.startswith(("vyre.lower", "vyre.ir", "vyre.errors"))]
    assert out == [], "\n".join(out)


def _cycles() -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    graph: dict[str, set[str]] = {}
    for a in ARROWS:
        graph.setdefault(a.source, set()).add(a.target)
        graph.setdefault(a.target, set())
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


#: Cycles still to be broken (each named by its smallest module); none may be added.
KNOWN_CYCLES: set[str] = set()


def test_no_new_import_cycle() -> None:
    found = {c[0]: c for c in _cycles()}
    new = {k: v for k, v in found.items() if k not in KNOWN_CYCLES}
    assert new == {}, "\n".join(" <-> ".join(c) for c in new.values())


def test_every_known_cycle_still_exists() -> None:
    """(A known cycle that is gone must leave KNOWN_CYCLES, so it cannot come back.)"""
    assert KNOWN_CYCLES - {c[0] for c in _cycles()} == set()
