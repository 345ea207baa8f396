"""`vyre bench`'s transcendental workload: a memory-bound exp map and a compute-bound exp
chain, vyre's exact exp against the peers' own (CUDA's accurate expf, torch / CuPy, WGSL's
builtin), every output checked: vyre's bit for bit, the peers' within their bounds."""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np

from vyre.tools import cli
from vyre.tools.bench import peers
from vyre.tools.bench import workloads as W
from vyre.tools.bench.vyre_impl import exp_chain_program, exp_map_program


def test_the_workload_runs_and_checks_on_the_reference(tmp_path: Path) -> None:
    buf = io.StringIO()
    rc = cli.main(["bench", "--quick", "--backend", "reference", "--workloads",
                   "transcendental", "--repeat", "2", "--out", str(tmp_path)], out=buf)
    assert rc == 0, buf.getvalue()
    doc = json.loads((tmp_path / "bench.json").read_text())
    vy = {r["metric"]: r for r in doc["results"] if r["is_vyre"]}
    assert set(vy) == {"transcendental.map", "transcendental.chain"}
    assert all(r["status"] == "ok" and r["check"] == "passed" for r in vy.values()), vy
    assert vy["transcendental.chain"]["unit"] == "Gexp/s"


def _data() -> W.Data:
    return W.Data(W.QUICK)


def test_the_checks_hold_vyre_to_the_bit_and_peers_to_their_bound() -> None:
    data = _data()
    want, unsure = data.exp_expected
    assert W.check_exp_map(want.copy(), data, exact=True) is None
    off = want.copy()
    j = int(np.flatnonzero(~unsure)[0])
    off[j] = np.nextafter(off[j], np.float32(np.inf))
    assert "0 ulp allowed" in (W.check_exp_map(off, data, exact=True) or "")
    assert W.check_exp_map(off, data, exact=False) is None  # 1 ulp: a peer's accurate exp
    off[j] = np.float32(off[j] * np.float32(1.001))
    assert W.check_exp_map(off, data, exact=False) is not None
    chain = data.chain_expected
    assert W.check_exp_chain(chain.copy(), data, exact=True) is None
    bad = chain.copy()
    bad[0] = np.float32(bad[0] * np.float32(1.01))
    assert W.check_exp_chain(bad, data, exact=True) is not None


def test_vyre_programs_use_the_exact_exp() -> None:
    from vyre.ir import nodes as N
    from vyre.ir.analysis import walk_all_exprs

    for prog in (exp_map_program(), exp_chain_program()):
        fns = {e.fn for e in walk_all_exprs(prog) if isinstance(e, N.Call)}
        assert fns == {"exp"}, fns


def test_the_raw_cuda_kernels_compile() -> None:
    """The peer's hand-written expf kernels (NVRTC works without a GPU, as in CI)."""
    from vyre.backends.cuda import compile_source

    assert compile_source(peers.CUDA_EXP, "sm_90")
