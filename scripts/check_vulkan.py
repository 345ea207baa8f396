"""Is there a native GPU API adapter (Vulkan; Metal or D3D12 elsewhere) for the wgpu backend?

Used by scripts/setup.sh to decide whether to install Mesa's Vulkan driver (lavapipe).
Asks wgpu for its adapters when wgpu is importable (the real question: an OpenGL-only
adapter does not count); otherwise looks for Vulkan ICD manifests on disk. Prints one line
saying what it found and exits 0 if an adapter is there, 1 if not.

This script must never install anything, need root, or import vyre: it only looks.
"""

from __future__ import annotations

import glob
import os
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ICD_DIRS: tuple[str, ...] = (
    "/usr/share/vulkan/icd.d",
    "/usr/local/share/vulkan/icd.d",
    "/etc/vulkan/icd.d",
)
# wgpu adapter backend types that count as a native adapter (not OpenGL, not "Empty").
NATIVE_BACKENDS = frozenset({"Vulkan", "Metal", "D3D12"})


@dataclass(frozen=True)
class VulkanStatus:
    found: bool
    method: str  # "wgpu" (asked wgpu for adapters) or "icd" (looked for ICD manifests)
    detail: str


def icd_files(
    dirs: Sequence[str] = ICD_DIRS, env: dict[str, str] | None = None
) -> list[Path]:
    """Vulkan ICD manifests: the standard directories plus VK_ICD_FILENAMES / VK_DRIVER_FILES."""
    env = dict(os.environ) if env is None else env
    found: list[Path] = []
    for var in ("VK_DRIVER_FILES", "VK_ICD_FILENAMES"):
        for item in filter(None, env.get(var, "").split(os.pathsep)):
            p = Path(item)
            if p.is_file():
                found.append(p)
            elif p.is_dir():
                found.extend(sorted(p.glob("*.json")))
    for d in dirs:
        found.extend(Path(f) for f in sorted(glob.glob(os.path.join(d, "*.json"))))
    return found


def wgpu_adapters() -> list[dict[str, Any]] | None:
    """Info dicts of every adapter wgpu can see, or None if wgpu is not importable."""
    try:
        import wgpu
    except Exception:
        return None
    try:
        adapters = wgpu.gpu.enumerate_adapters_sync()
    except Exception as exc:
        return [{"backend_type": "error", "device": repr(exc)}]
    return [dict(a.info) for a in adapters]


def _describe(info: dict[str, Any]) -> str:
    return f"{info.get('device') or info.get('description') or '?'} ({info.get('backend_type', '?')})"


def check(
    adapters: Callable[[], list[dict[str, Any]] | None] = wgpu_adapters,
    icds: Callable[[], Iterable[Path]] = icd_files,
) -> VulkanStatus:
    """Whether a native adapter is present, and how we know."""
    infos = adapters()
    if infos is not None:
        native = [i for i in infos if i.get("backend_type") in NATIVE_BACKENDS]
        if native:
            return VulkanStatus(True, "wgpu", "adapter: " + "; ".join(map(_describe, native)))
        others = "; ".join(map(_describe, infos)) or "none"
        return VulkanStatus(
            False, "wgpu", f"wgpu found no Vulkan/Metal/D3D12 adapter (adapters: {others})"
        )
    files = list(icds())
    if files:
        return VulkanStatus(True, "icd", "Vulkan ICD: " + ", ".join(str(f) for f in files))
    return VulkanStatus(
        False, "icd", f"no Vulkan ICD manifest in {', '.join(ICD_DIRS)} (wgpu not installed)"
    )


def main(argv: Sequence[str] | None = None) -> int:
    status = check()
    print(status.detail)
    return 0 if status.found else 1


if __name__ == "__main__":
    sys.exit(main())
