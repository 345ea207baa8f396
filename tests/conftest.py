"""Shared fixtures: `backends` (every available backend instance, by name, closed at the end
of the session), `reference` (the oracle's instance among them) and `backend` (each
registered backend in turn: reference, wgpu, cuda, then any other installed through the
`vyre.backends` entry point; skipped, with the reason, where one is not available), and
`be` (a new instance of each available backend for one test, closed after it), and
`nvrtc_cache` (one CUDA compile cache for the session, in a temporary directory).

`pytest --backend NAME` (or VYRE_TEST_BACKEND=NAME) runs the `backend` tests on that one
backend only: how an out-of-tree backend runs the conformance suite (README, "Writing a
backend").

Hypothesis's pool of "local constants" is pinned here for the session (pytest_configure):
a test's examples must not depend on what ran before it (`_pin_hypothesis_constants`)."""

from __future__ import annotations

import os
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import vyre
from vyre.backend import BaseBackend
from vyre.registry import providers

BUILT_IN = ("reference", "wgpu", "cuda")


def _pin_hypothesis_constants() -> None:
    """Hypothesis (6.131 on) draws about one value in twenty from a pool of the literals of
    every "local" module in sys.modules (any outside the standard library and site-packages,
    test files left out), and grows that pool whenever a new module has been imported. So a
    test's examples, derandomized or not, depended on what earlier tests in the process had
    imported: tests/test_distributed.py's import of vyre.distributed changed the examples of
    test_lowering_keeps_fuzz_cases from the 9th on (3 s alone, minutes after it), and a
    pytest-xdist worker's earlier tests did the same. The pool is pinned to the literals of
    every module of the vyre package, read from their sources whether imported or not, so it
    is the same for every test whatever ran before it. Hypothesis's pool is internal:
    where it moved, this fails the session rather than silently letting examples drift."""
    from hypothesis.internal.conjecture import providers as hypothesis_providers
    from hypothesis.internal.constants_ast import Constants, constants_from_module
    from hypothesis.internal.floats import float_to_int
    from sortedcontainers import SortedSet  # Hypothesis's own dependency

    if not hasattr(hypothesis_providers, "_get_local_constants"):
        if hasattr(hypothesis_providers.HypothesisProvider, "_maybe_draw_constant"):
            raise RuntimeError(
                "this Hypothesis draws local constants but has no "
                "providers._get_local_constants: update tests/conftest.py's "
                "_pin_hypothesis_constants, or test examples depend on earlier tests' imports")
        return  # a Hypothesis before local constants: nothing to pin
    pool: list[Constants] = []  # built at the first draw that wants a constant, then kept

    def vyre_constants() -> Constants:
        if not pool:
            # sorted sets, as Hypothesis keeps them: a draw indexes the pool in this order
            literals = Constants(integers=SortedSet(), floats=SortedSet(key=float_to_int),
                                 bytes=SortedSet(), strings=SortedSet())
            for path in sorted(Path(vyre.__file__).resolve().parent.rglob("*.py")):
                source = types.ModuleType("vyre_source")  # only its __file__ is read
                source.__file__ = str(path)
                literals |= constants_from_module(source)
            pool.append(literals)
        return pool[0]

    hypothesis_providers._get_local_constants = vyre_constants
    # each draw's allowed constants, as cached from the pool before
    hypothesis_providers.CONSTANTS_CACHE.cache.clear()


def pytest_configure(config: pytest.Config) -> None:
    _pin_hypothesis_constants()


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--backend", default=None,
                     help="run the per-backend tests on this registered backend only")


def registered_backends() -> list[str]:
    """Every backend the `backend` fixture runs on: the built-in ones, then the rest."""
    return [*BUILT_IN, *sorted(set(providers()) - set(BUILT_IN))]


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


@pytest.fixture(params=registered_backends())
def backend(request: Any, backends: dict[str, BaseBackend]) -> BaseBackend:
    chosen = request.config.getoption("--backend") or os.environ.get("VYRE_TEST_BACKEND")
    if chosen and request.param != chosen:
        pytest.skip(f"only backend {chosen!r} was asked for (--backend / VYRE_TEST_BACKEND)")
    if request.param not in backends:
        why = {a.name: a.reason for a in vyre.available_backends()}.get(
            request.param, "it is not registered (no `vyre.backends` entry point)")
        pytest.skip(f"backend {request.param!r} is not available here: {why}")
    return backends[request.param]


@pytest.fixture
def wgpu_in_flush_mode(monkeypatch: pytest.MonkeyPatch) -> Iterator[BaseBackend]:
    """A wgpu backend forced into flush mode (VYRE_WGPU_FLUSH_SUBNORMALS=1, docs/IR.md),
    closed after the test; skipped, saying why, where wgpu is not available."""
    from vyre.backends.wgpu import PROVIDER

    avail = PROVIDER.probe()
    if not avail.available:
        pytest.skip(f"wgpu backend unavailable: {avail.reason}")
    monkeypatch.setenv("VYRE_WGPU_FLUSH_SUBNORMALS", "1")
    forced = PROVIDER.create()
    try:
        yield forced
    finally:
        forced.close()


@pytest.fixture(params=[a.name for a in vyre.available_backends() if a.available])
def be(request: Any) -> Iterator[BaseBackend]:
    """A new instance of each available backend for one test, closed after it (for tests
    that close, break or fill an instance; a module may define its own `be`)."""
    b = vyre.get_backend(request.param)
    yield b
    b.close()


@pytest.fixture(scope="session")
def nvrtc_cache(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """One vyre.backends.cuda.DiskCache in a temporary directory for the whole session: a
    CUDA C source that several tests compile for the same arch with the same options
    (the conformance programs: coarsened or not, which is often the same source, with and
    without the speed options) goes through NVRTC once; the others read its cubin. Under
    pytest-xdist the workers of one run share it (the folder above each worker's own
    temporary folder; the cache is safe for concurrent processes: test_concurrency)."""
    from vyre.backends.cuda import DiskCache

    if os.environ.get("PYTEST_XDIST_WORKER"):
        shared = tmp_path_factory.getbasetemp().parent / "nvrtc-cache"
        shared.mkdir(exist_ok=True)
        return DiskCache(shared)
    return DiskCache(tmp_path_factory.mktemp("nvrtc-cache"))
