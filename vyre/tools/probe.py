"""What `vyre probe` and `vyre bench` report about this machine (every registered backend,
its availability and capabilities) and the command-line checks they share (`--repeat`).
Shared by cli.py and bench/command.py, which import it and never each other."""

from __future__ import annotations

from typing import Any

from vyre import registry
from vyre.interface import Backend

# The most runs `--repeat` may ask for (demo and bench): a best-of-N time settles long
# before this, and 10**12 would run for ever.
MAX_REPEAT = 10_000


def repeat_error(repeat: int | None) -> str | None:
    """Why `--repeat N` is refused (None: it is fine, or not given)."""
    if repeat is not None and not 1 <= repeat <= MAX_REPEAT:
        return (f"error: --repeat must be between 1 and {MAX_REPEAT} (the number of timed "
                f"runs), got {repeat}")
    return None


def _caps_dict(backend: Backend) -> dict[str, Any]:
    caps = backend.capabilities()
    return {
        "backend": caps.backend,
        "kind": caps.kind,
        "device": caps.device,
        "features": sorted(caps.features),
        # the compile cache's bound (LRU; $VYRE_COMPILE_CACHE_SIZE) shows with the limits
        "limits": {**caps.limits, "compile_cache_programs": backend.compile_cache_limit},
        "details": dict(caps.details),
    }


def probe_report() -> list[dict[str, Any]]:
    """One entry per registered backend: availability, reason, devices, capabilities.

    An available backend is instantiated (default device) to read its capabilities and closed
    again; if that fails, the entry is marked unavailable with the error as the reason.
    """
    out: list[dict[str, Any]] = []
    for a in registry.available_backends():
        entry: dict[str, Any] = {
            "name": a.name,
            "available": a.available,
            "reason": a.reason,
            "devices": list(a.devices),
            "details": dict(a.details),
            "capabilities": None,
        }
        if a.available:
            try:
                with registry.get_backend(a.name) as backend:
                    entry["capabilities"] = _caps_dict(backend)
            except Exception as exc:
                entry["available"] = False
                entry["reason"] = (
                    f"probe reported it available, but creating an instance failed: {exc!r}"
                )
        out.append(entry)
    return out
