"""CUDA-specific checks of the conformance table (vyre.tools.conformance).

CI (no GPU): each case is lowered to CUDA C and compiled by NVRTC to an sm_90 cubin (never
PTX) at every coarsening factor. GPU (`-m gpu`): each case runs at every coarsening factor
and must agree with the reference. The table itself runs on every backend, CUDA included,
in tests/test_conformance.py.
"""

from __future__ import annotations

from typing import Any

import pytest

import vyre
from vyre.tools.conformance import CASES, check_case

ARCH = "sm_90"


# ------------------------------------------------------------------ CI: NVRTC, no GPU


@pytest.mark.parametrize("coarsen", [1, 4, 8])
@pytest.mark.parametrize("name", sorted(CASES))
def test_compiles_to_cubin(name: str, coarsen: int, nvrtc_cache: Any) -> None:
    from vyre.backends.cuda import compile_program

    case = CASES[name]
    compiled = compile_program(case.program, ARCH, nvrtc_cache, coarsen=coarsen)
    assert compiled.cubin[:4] == b"\x7fELF", "NVRTC must produce a cubin (ELF), never PTX"
    assert "vyre_main" in compiled.source


# ------------------------------------------------------------------ GPU


def _cuda_or_skip() -> Any:
    avail = {a.name: a for a in vyre.available_backends()}
    a = avail.get("cuda")
    if a is None or not a.available:
        pytest.skip(f"no CUDA here: {a.reason if a else 'backend not registered'}")
    return vyre.get_backend("cuda")


@pytest.fixture(scope="module", params=[1, 4, 8], ids=["coarsen1", "coarsen4", "coarsen8"])
def cuda_backend(request: Any) -> Any:
    _cuda_or_skip()
    from vyre.backends.cuda.runtime import CudaBackend

    b = CudaBackend(0, coarsen=request.param)
    b.coarsen_min_invocations = 0  # coarsen even these small grids
    yield b
    b.close()


@pytest.fixture(scope="module")
def reference_backend() -> Any:
    try:
        r = vyre.get_backend("reference")
    except vyre.BackendError as exc:
        pytest.skip(f"reference backend unavailable: {exc}")
    yield r
    r.close()


@pytest.mark.gpu
@pytest.mark.parametrize("name", sorted(CASES))
def test_agrees_with_reference_at_every_coarsening(name: str, cuda_backend: Any,
                                                  reference_backend: Any) -> None:
    """The conformance table (tests/test_conformance.py runs it at the default coarsening)
    with every invocation-coarsening factor forced on, even for these small grids."""
    check_case(CASES[name], cuda_backend, reference_backend)
