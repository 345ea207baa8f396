"""Shared fixtures: `backends` (every available backend instance, by name, closed at the end
of the session), `reference` (the oracle's instance among them) and `backend` (each of
reference, wgpu and cuda in turn; skipped, with the reason, where one is not available)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

import vyre
from vyre.backend import BaseBackend


@pytest.fixture(scope="session")
def backends() -> Iterator[dict[str, BaseBackend]]:
    made: dict[str, BaseBackend] = {}
    for a in vyre.available_backends():
        if a.available:
            made[a.name] = vyre.get_backend(a.name)
    yield made
    for b in made.values():
        b.close()


@pytest.fixture(scope="session")
def reference(backends: dict[str, BaseBackend]) -> BaseBackend:
    if "reference" not in backends:
        pytest.skip("the reference backend is not available")
    return backends["reference"]


@pytest.fixture(params=["reference", "wgpu", "cuda"])
def backend(request: Any, backends: dict[str, BaseBackend]) -> BaseBackend:
    if request.param not in backends:
        pytest.skip(f"backend {request.param!r} is not available here")
    return backends[request.param]
