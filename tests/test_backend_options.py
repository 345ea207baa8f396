"""Options, not switches: a backend's debug and measurement toggles are one frozen value per
instance, passed explicitly to its printer and part of its compiled programs' keys; no module
global to patch, and two instances with different options never share a compiled program."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from vyre.errors import InvalidDispatch
from vyre.tools.bench.cuda_tuning import saxpy_program

VECTORISED = "// vectorised:"  # the CUDA printer's note on a vectorised lockstep body


# ---------------------------------------------------------------- CUDA
def test_cuda_printer_takes_its_switches_as_an_argument_not_a_module_global() -> None:
    from vyre.backends.cuda import render
    from vyre.backends.cuda.options import CudaOptions

    p = saxpy_program()
    default = render.generate(p, coarsen=4)
    scalar = render.generate(p, coarsen=4, options=CudaOptions(vectorise=False))
    unmerged = render.generate(p, coarsen=4, options=CudaOptions(merge_threads=0))
    assert VECTORISED in default.source and VECTORISED not in scalar.source
    assert (default.block, unmerged.block) == ((256, 1, 1), (64, 1, 1))
    assert render.generate(p, coarsen=4).source == default.source  # nothing was left set
    for old in ("LOCKSTEP", "VECTORISE", "VECTOR_RUNS", "MERGE_THREADS"):
        assert not hasattr(render, old)


@pytest.mark.parametrize("bad", [{"vectorise": 1}, {"merge_threads": -1},
                                 {"merge_threads": 2048}, {"merge_threads": True}])
def test_cuda_options_refuse_what_is_not_a_setting(bad: dict[str, Any]) -> None:
    from vyre.backends.cuda.options import CudaOptions

    with pytest.raises(InvalidDispatch, match="CudaOptions"):
        CudaOptions(**bad)


@pytest.fixture
def standin() -> Iterator[None]:
    pytest.importorskip("cuda.bindings.driver", reason="cuda-bindings is not installed")
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import cuda_standin

    from vyre.backends.cuda import driver as D

    before = D._driver
    cuda_standin.install(frozenset())
    try:
        yield
    finally:
        D._driver = before


def test_a_cuda_instance_prints_with_its_own_options(
    standin: None, tmp_path: Path
) -> None:
    from vyre.backends.cuda.options import CudaOptions
    from vyre.backends.cuda.runtime import CudaBackend

    p = saxpy_program()
    with CudaBackend(0, cache_dir=str(tmp_path), coarsen=4) as a, \
            CudaBackend(0, cache_dir=str(tmp_path), coarsen=4,
                        options=CudaOptions(lockstep=False)) as b:
        assert a.options == CudaOptions() and b.options == CudaOptions(lockstep=False)
        assert "lockstep" in a.source(p) and "lockstep" not in b.source(p)
        with pytest.raises(InvalidDispatch, match="CudaOptions"):
            CudaBackend(0, options={"lockstep": False})  # type: ignore[arg-type]


# ---------------------------------------------------------------- wgpu
def test_wgpu_switches_are_read_from_the_environment_once_into_options() -> None:
    from vyre.backends.wgpu.options import WgpuOptions

    env = {"VYRE_WGPU_FENCES": "all", "VYRE_WGPU_BARRIERS": "storage",
           "VYRE_WGPU_SHARED": "scalar", "VYRE_WGPU_DIV_SQRT": "exact",
           "VYRE_WGPU_FLUSH_SUBNORMALS": "1", "VYRE_WGPU_NATIVE_FLUSH": "0"}
    assert WgpuOptions.from_env(env) == WgpuOptions(
        force_flush=True, native_flush=False, div_sqrt="exact", all_fences=True,
        storage_barriers=True, vectors=False)
    # (a mode that is no longer one, the old "exact-bad-estimate": the default)
    assert WgpuOptions.from_env({"VYRE_WGPU_DIV_SQRT": "exact-bad-estimate"}) == WgpuOptions()
    assert WgpuOptions.from_env({}) == WgpuOptions()
    with pytest.raises(InvalidDispatch, match="div_sqrt must be one of"):
        WgpuOptions(div_sqrt="fast")


def test_device_info_holds_probed_facts_not_switches() -> None:
    import dataclasses

    from vyre.backends.wgpu.adapter import DeviceInfo

    names = {f.name for f in dataclasses.fields(DeviceInfo)}
    assert not names & {"bad_estimate", "all_fences", "all_barriers", "scalar_shared"}


def test_wgpu_options_are_part_of_the_compile_cache_key(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from vyre.backends.wgpu import PROVIDER
    from vyre.backends.wgpu.options import WgpuOptions
    from vyre.programs.matmul import matmul_program

    avail = PROVIDER.probe()
    if not avail.available:
        pytest.skip(f"wgpu backend unavailable: {avail.reason}")
    monkeypatch.setenv("VYRE_WGPU_FENCES", "all")
    p = matmul_program()
    with PROVIDER.create() as every:
        monkeypatch.delenv("VYRE_WGPU_FENCES")  # read when the instance was made, never again
        assert every.options == WgpuOptions(all_fences=True)
        fenced = every.source(p)
        every.compile(p)
        every.compile(p)
        assert (every.compile_stats.misses, every.compile_stats.hits) == (1, 1)
        every.options = WgpuOptions()
        every.compile(p)  # other options: another compiled program, never the cached one
        assert (every.compile_stats.misses, every.compile_stats.hits) == (2, 1)
        assert every.source(p) != fenced
