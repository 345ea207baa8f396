"""`vyre bench`'s transcendental workload: per exact function a memory-bound map and a
compute-bound chain, vyre's exact function against the peers' own (CUDA's accurate
functions, torch / CuPy, WGSL's builtins), every output checked: vyre's bit for bit, the
peers' within their bounds."""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
import pytest

from vyre.tools import cli
from vyre.tools.bench import peers
from vyre.tools.bench import workloads as W
from vyre.tools.bench.functions import FUNCTIONS, check_chain, check_map
from vyre.tools.bench.vyre_impl import chain_program, map_program


def test_the_workload_runs_and_checks_on_the_reference(tmp_path: Path) -> None:
    buf = io.StringIO()
    rc = cli.main(["bench", "--quick", "--backend", "reference", "--workloads",
                   "transcendental", "--functions", "exp,atan2", "--repeat", "2", "--out",
                   str(tmp_path)], out=buf)
    assert rc == 0, buf.getvalue()
    doc = json.loads((tmp_path / "bench.json").read_text())
    vy = {r["metric"]: r for r in doc["results"] if r["is_vyre"]}
    assert set(vy) == {f"transcendental.{f}.{k}" for f in ("exp", "atan2")
                       for k in ("map", "chain")}
    assert all(r["status"] == "ok" and r["check"] == "passed" for r in vy.values()), vy
    assert vy["transcendental.exp.chain"]["unit"] == "Gexp/s"


def test_every_function_has_a_map_and_a_chain() -> None:
    assert W.METRICS_OF["transcendental"] == tuple(
        f"transcendental.{f}.{k}" for f in FUNCTIONS for k in ("map", "chain"))
    assert set(FUNCTIONS) == {"exp", "exp2", "log", "log2", "tanh", "sin", "cos", "tan",
                              "asin", "pow", "hypot", "atan2"}


def test_an_unknown_function_is_refused() -> None:
    buf = io.StringIO()
    rc = cli.main(["bench", "--backend", "reference", "--workloads", "transcendental",
                   "--functions", "exp,erf"], out=buf)
    assert rc != 0 and "unknown function(s) ['erf']" in buf.getvalue()


@pytest.mark.parametrize("name", ["exp", "pow"])
def test_the_checks_hold_vyre_to_the_bit_and_peers_to_their_bound(name: str) -> None:
    fn = FUNCTIONS[name]
    data = W.Data(W.QUICK)
    args, want, unsure = data.fn_map(fn)
    assert check_map(fn, args, want, unsure, want.copy(), exact=True) is None
    off = want.copy()
    j = int(np.flatnonzero(~unsure & np.isfinite(want) & (np.abs(want) > 1))[0])
    off[j] = np.nextafter(off[j], np.float32(np.inf))
    assert "0 ulp allowed" in (check_map(fn, args, want, unsure, off, exact=True) or "")
    assert check_map(fn, args, want, unsure, off, exact=False) is None  # within a peer's
    off[j] = np.float32(off[j] * np.float32(1.01))
    assert check_map(fn, args, want, unsure, off, exact=False) is not None
    assert check_map(fn, args, want, unsure, off, exact=False, vulkan=True) is not None
    x0, chain = data.fn_chain(fn)
    assert check_chain(fn, x0, chain, chain.copy(), exact=True) is None
    bad = chain.copy()
    bad[0] = np.float32(bad[0] * np.float32(1.01))
    assert check_chain(fn, x0, chain, bad, exact=True) is not None


def test_vyre_programs_call_the_exact_function() -> None:
    from vyre.ir import nodes as N
    from vyre.ir.analysis import walk_all_exprs

    for fn in FUNCTIONS.values():
        for prog in (map_program(fn), chain_program(fn)):
            fns = {e.fn for e in walk_all_exprs(prog) if isinstance(e, N.Call)}
            assert fns == {fn.name}, fns


def test_the_raw_cuda_kernels_compile() -> None:
    """The peer's hand-written kernels of CUDA's accurate functions (NVRTC works without a
    GPU, as in CI)."""
    from vyre.backends.cuda import compile_source

    for fn in ("exp", "pow", "atan2"):
        assert compile_source(peers.cuda_function_source(FUNCTIONS[fn]), "sm_90")


def test_quick_runs_one_function_of_each_arity_unless_told() -> None:
    from vyre.tools.bench.suite import Options, _metrics

    quick = [m for m in _metrics(Options(workloads=["transcendental"], quick=True))]
    assert quick == [f"transcendental.{f}.{k}" for f in W.QUICK_FUNCTIONS
                     for k in ("map", "chain")]
    told = _metrics(Options(workloads=["transcendental"], quick=True, functions=["log"]))
    assert told == ["transcendental.log.map", "transcendental.log.chain"]
    assert len(_metrics(Options(workloads=["transcendental"]))) == 2 * len(FUNCTIONS)
