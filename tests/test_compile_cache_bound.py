"""The in-memory compile cache of a long-lived instance is bounded (LRU): compiling many
distinct programs keeps it at its bound, and an evicted program compiles again and gives
the reference's result. Configurable per instance, by get_backend and by environment."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

import vyre
from vyre import DispatchConfig, ProgramBuilder, f32
from vyre.backend import BaseBackend

LIMIT = 6


def scaled(i: int) -> vyre.Program:
    """A distinct program per i: y = y * (i + 2) + i."""
    k = ProgramBuilder(f"scale{i}", workgroup_size=32)
    y = k.buffer("y", f32, "read_write")
    g = k.global_linear_id()
    with k.if_(g < y.length()):
        y[g] = y[g] * float(i + 2) + float(i)
    return k.build()


def run(b: BaseBackend, i: int) -> np.ndarray:
    y = np.arange(50, dtype=np.float32)
    return b.dispatch(scaled(i), {"y": y}, DispatchConfig.for_elements(50, 32))["y"]


@pytest.mark.parametrize("name", ["reference", "wgpu", "cuda"])
def test_cache_stays_at_its_bound_and_evicted_programs_recompile(
    name: str, reference: BaseBackend
) -> None:
    if name not in {a.name for a in vyre.available_backends() if a.available}:
        pytest.skip(f"backend {name!r} is not available here")
    b = vyre.get_backend(name, compile_cache_size=LIMIT)
    try:
        assert b.compile_cache_limit == LIMIT
        first = run(b, 0)
        np.testing.assert_array_equal(first, run(reference, 0))
        for i in range(1, 4 * LIMIT):
            run(b, i)
            assert b.compile_cache_size() <= LIMIT
        assert b.compile_cache_size() == LIMIT
        assert b.compile_stats.evictions == 4 * LIMIT - LIMIT
        misses = b.compile_stats.misses
        # program 0 was evicted long ago: it compiles again, with the same result
        np.testing.assert_array_equal(run(b, 0), first)
        assert b.compile_stats.misses == misses + 1
        # the most recently used one is still a hit
        hits = b.compile_stats.hits
        run(b, 0)
        assert b.compile_stats.hits > hits and b.compile_stats.misses == misses + 1
        # every program still gives the reference's result after all that eviction
        for i in range(0, 4 * LIMIT, 5):
            np.testing.assert_array_equal(run(b, i), run(reference, i))
        b.set_compile_cache_limit(2)
        assert b.compile_cache_size() == 2
    finally:
        b.close()


def test_bound_dispatch_and_pipeline_survive_eviction(backend: BaseBackend,
                                                      reference: BaseBackend) -> None:
    """Recorded work keeps its compiled objects even after the cache dropped them."""
    old = backend.compile_cache_limit
    backend.set_compile_cache_limit(2)
    try:
        y = np.arange(50, dtype=np.float32)
        buf = backend.allocate_device_buffer(y.nbytes)
        try:
            backend.write(buf, y)
            cfg = DispatchConfig.for_elements(50, 32)
            bound = backend.bind(scaled(100), [], [buf], cfg)
            pipe = backend.pipeline([vyre.Step(scaled(101), [], [buf], cfg)])
            for i in range(200, 206):  # evict both
                backend.compile(scaled(i))
            backend.dispatch_with_device_buffers(bound)
            pipe.run()
            got = backend.read(buf, dtype=np.float32)
        finally:
            backend.free(buf)
        want = reference.dispatch(scaled(101), {"y": reference.dispatch(
            scaled(100), {"y": y}, DispatchConfig.for_elements(50, 32))["y"]},
            DispatchConfig.for_elements(50, 32))["y"]
        np.testing.assert_array_equal(got, want)
    finally:
        backend.set_compile_cache_limit(old)


@pytest.mark.parametrize("bad", [0, -1, 2.5, "8", None, True])
def test_bad_cache_sizes_are_refused(reference: BaseBackend, bad: object) -> None:
    with pytest.raises(vyre.InvalidDispatch, match="compile cache size must be an int >= 1"):
        reference.set_compile_cache_limit(bad)  # type: ignore[arg-type]


def test_env_var_sets_the_bound_and_probe_reports_it() -> None:
    code = (
        "import vyre\n"
        "b = vyre.get_backend('reference'); print(b.compile_cache_limit); b.close()\n"
        "from vyre.tools.cli import probe_report\n"
        "print([e['capabilities']['limits']['compile_cache_programs'] for e in probe_report()"
        " if e['name'] == 'reference'][0])\n"
    )
    env = {**os.environ, "VYRE_COMPILE_CACHE_SIZE": "17"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.split("\n")
    assert lines[0] == "17" and lines[1] == "17"
    env["VYRE_COMPILE_CACHE_SIZE"] = "lots"
    bad = subprocess.run([sys.executable, "-c", "import vyre; vyre.get_backend('reference')"],
                         env=env, capture_output=True, text=True, timeout=120)
    assert bad.returncode != 0 and "VYRE_COMPILE_CACHE_SIZE" in bad.stderr
    assert "InvalidDispatch" in bad.stderr
