"""Backend discovery through the entry-point group `vyre.backends`.

Each entry point names a provider object with `name`, `probe()` and `create(device)`.
Discovery never imports a backend's device library until it is probed, and a provider that
fails to import is reported as unavailable with the reason, never hidden. This module must
never import a backend package directly.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from importlib import metadata
from typing import Any, Protocol

from .backend import BaseBackend
from .errors import BackendUnavailable
from .interface import Availability as Availability

GROUP = "vyre.backends"
ENV_DEFAULT = "VYRE_BACKEND"
# Preference for the default backend when VYRE_BACKEND is unset: fastest first.
PREFERENCE = ("cuda", "wgpu", "reference")


class Provider(Protocol):
    """What a `vyre.backends` entry point names: `probe()` says whether the backend can run
    here (never failing for a missing device library), `create(device)` makes an instance."""

    name: str

    def probe(self) -> Availability: ...
    def create(self, device: int | str | None = None) -> BaseBackend: ...


def _entry_points() -> dict[str, metadata.EntryPoint]:
    return {ep.name: ep for ep in metadata.entry_points(group=GROUP)}


def providers() -> dict[str, Provider | Exception]:
    """Every registered provider by name (an Exception where its module failed to import)."""
    out: dict[str, Provider | Exception] = {}
    for name, ep in sorted(_entry_points().items()):
        try:
            out[name] = ep.load()
        except Exception as exc:  # a broken third-party backend must not break discovery
            out[name] = exc
    return out


def available_backends() -> list[Availability]:
    """Each known backend with whether it is available here and, if not, why."""
    result = []
    for name, prov in providers().items():
        if isinstance(prov, Exception):
            result.append(
                Availability(name, False, f"its module failed to import: {prov!r}")
            )
            continue
        try:
            result.append(prov.probe())
        except Exception as exc:
            result.append(Availability(name, False, f"probe failed: {exc!r}"))
    return result


def parse_spec(spec: str) -> tuple[str, str | None]:
    name, _, dev = spec.partition(":")
    return name.strip(), (dev.strip() or None)


def default_backend_name() -> str:
    env = os.environ.get(ENV_DEFAULT)
    if env:
        return env
    avail = {a.name: a for a in available_backends()}
    for name in PREFERENCE:
        if name in avail and avail[name].available:
            return name
    for name, a in avail.items():
        if a.available:
            return name
    raise BackendUnavailable("default", "no backend is available; run `vyre probe` to see why")


def _create(spec: str, check: bool | str | Any = None) -> BaseBackend:
    name, dev = parse_spec(spec)
    provs = providers()
    prov = provs.get(name)
    if prov is None:
        raise BackendUnavailable(
            name, f"no backend of that name is registered; known: {sorted(provs)}"
        )
    if isinstance(prov, Exception):
        raise BackendUnavailable(name, f"its module failed to import: {prov!r}")
    if check is None:
        return prov.create(dev)
    if name != "reference":
        raise BackendUnavailable(
            name, "check= (the checked mode) is a setting of the reference backend only; "
            "use get_backend('reference', check=True) to check a program, then run it "
            "on this backend")
    # (the reference provider's create takes check=: asked through it, so that this module
    # never imports a backend)
    create_checked: Callable[..., BaseBackend] = prov.create
    return create_checked(dev, check=check)


def get_backend(spec: str | None = None, *, compile_cache_size: int | None = None,
                check: bool | str | Any = None) -> BaseBackend:
    """Create a backend instance: "wgpu", "cuda", "cuda:1", "reference"; None for the default
    ($VYRE_BACKEND, else the first available of cuda, wgpu, reference).

    `compile_cache_size`: most compiled programs the instance keeps (LRU; default
    $VYRE_COMPILE_CACHE_SIZE, else 512).
    `check`: the reference backend's checked mode (True / "error" / "warn"; races,
    uninitialised reads, out-of-bounds accesses, divergent barriers), reference only."""
    if spec is not None and not isinstance(spec, str):
        raise BackendUnavailable(
            repr(spec)[:40], f"a backend spec is a string such as 'wgpu', 'cuda:1' or "
            f"'reference' (or None for the default), got {type(spec).__name__}; "
            "run `vyre probe` to list the backends here",
        )
    from_env = spec is None and bool(os.environ.get(ENV_DEFAULT))
    spec = spec or default_backend_name()
    try:
        backend = _create(spec, check)
    except BackendUnavailable as exc:
        if not from_env:
            raise
        # the spec came from the environment: say so, or the user looks for it in their code
        raise BackendUnavailable(
            exc.backend, f"{exc.reason} (the backend was chosen by ${ENV_DEFAULT}={spec!r}; "
            f"fix or unset ${ENV_DEFAULT})") from None
    if compile_cache_size is not None:
        try:
            backend.set_compile_cache_limit(compile_cache_size)
        except BaseException:
            backend.close()
            raise
    return backend
