"""`vyre bench`: the command end to end in --quick mode (JSON schema, every figure present
and checked, progress bar, chart or the reason it was skipped), argument errors, and the
rule that a failed check is reported as such and never as a number.

These tests never assert on speed: only that figures exist, are positive and passed their
checks.
"""

from __future__ import annotations

import importlib.util
import io
import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from vyre import registry
from vyre.tools import cli
from vyre.tools.bench import workloads as W
from vyre.tools.bench.report import text_report
from vyre.tools.bench.runner import (
    ERROR,
    FAILED,
    OK,
    Entry,
    Metric,
    TimedCase,
    measure,
    measure_together,
)
from vyre.tools.bench.suite import SCHEMA, annotate, failures

ROOT = Path(__file__).resolve().parents[1]
RESULT_KEYS = {"metric", "unit", "better", "group", "implementation", "is_vyre", "status",
               "value", "timer", "median_s", "samples_s", "warmup", "repeat", "check",
               "detail", "size", "extra"}


def _available() -> list[str]:
    return [a.name for a in registry.available_backends() if a.available]


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """`vyre bench --quick` once, in a subprocess, on every available backend."""
    out = tmp_path_factory.mktemp("bench")
    proc = subprocess.run(
        [sys.executable, "-m", "vyre.tools.cli", "bench", "--quick", "--out", str(out)],
        capture_output=True, text=True, timeout=300, cwd=ROOT,
    )
    doc = json.loads((out / "bench.json").read_text()) if (out / "bench.json").exists() else {}
    return {"proc": proc, "out": out, "doc": doc}


def test_quick_exits_zero_and_prints_tables(quick_run: dict[str, Any]) -> None:
    proc = quick_run["proc"]
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "vyre vs best peer" in proc.stdout
    assert "Problems:" not in proc.stdout
    # the progress bar goes to stderr and ends complete
    assert "[" + "#" * 28 + "]" in proc.stderr
    assert "done" in proc.stderr


def test_quick_json_schema(quick_run: dict[str, Any]) -> None:
    doc = quick_run["doc"]
    assert doc["schema"] == SCHEMA
    assert doc["settings"]["quick"] is True
    assert doc["duration_s"] > 0
    probe = doc["machine"]["probe"]["backends"]
    assert {b["name"] for b in probe} >= {"reference"}
    assert doc["machine"]["python"] and doc["machine"]["libraries"]["numpy"]
    # one group per available backend; "backend" is the instance id (e.g. "cuda:0")
    assert sorted(g["kind"] for g in doc["groups"]) == sorted(_available())
    for g in doc["groups"]:
        assert g["backend"].split(":")[0] == g["kind"]
    for r in doc["results"]:
        assert set(r) == RESULT_KEYS, sorted(set(r) ^ RESULT_KEYS)
    assert doc["problems"] == []
    assert doc["artifacts"]["json"].endswith("bench.json")


def test_every_vyre_figure_is_present_and_checked(quick_run: dict[str, Any]) -> None:
    doc = quick_run["doc"]
    from vyre.tools.bench.suite import Options, _metrics

    # (every workload's figures; --quick: the transcendental ones of W.QUICK_FUNCTIONS)
    all_metrics = _metrics(Options(quick=True))
    assert all_metrics == [m for w in W.WORKLOADS for m in W.METRICS_OF[w]
                           if not m.startswith("transcendental.")
                           or m.split(".")[1] in W.QUICK_FUNCTIONS]
    for g in doc["groups"]:
        mine = {r["metric"]: r for r in doc["results"]
                if r["group"] == g["group"] and r["is_vyre"]}
        assert list(mine) == all_metrics
        for r in mine.values():
            if r["status"] == "n/a":  # allowed only with a reason (e.g. no disk cache)
                assert r["detail"] and r["value"] is None, r
                continue
            assert r["status"] == OK, r
            assert r["check"] == "passed"
            assert isinstance(r["value"], float) and math.isfinite(r["value"])
            assert r["value"] > 0
            assert len(r["samples_s"]) == r["repeat"] >= 1
            assert r["timer"] in ("device", "wall")
        # the figures every backend must produce
        for metric in ("dispatch.launch", "dispatch.roundtrip", "dispatch.readback",
                       "cpp.resident", "cpp.host",
                       "copy", "to_host", "saxpy", "sum", "scan", "matmul", "matmul_i8", "compile.cold",
                       "compile.warm_memory"):
            assert mine[metric]["status"] == OK, (g["group"], metric, mine[metric])


def test_peer_figures_checked_and_derived_numbers(quick_run: dict[str, Any]) -> None:
    doc = quick_run["doc"]
    peers = [r for r in doc["results"] if not r["is_vyre"]]
    assert any(r["implementation"] == "numpy" and r["status"] == OK for r in peers)
    for r in peers:
        assert r["status"] in (OK, "n/a"), r
        if r["status"] == OK:
            assert r["check"] == "passed" and r["value"] > 0
    for g in doc["groups"]:
        assert doc["copy_bandwidth"][g["group"]]["GBps"] > 0
        sax = next(r for r in doc["results"] if r["group"] == g["group"] and r["is_vyre"]
                   and r["metric"] == "saxpy")
        assert sax["extra"]["fraction_of_copy"] > 0
    assert {c["group"] for c in doc["cpp_ratio"]} == {g["group"] for g in doc["groups"]}
    for c in doc["cpp_ratio"]:
        assert c["host_over_resident"] > 0
    for c in doc["comparisons"]:
        assert c["vyre_speed_vs_best_peer"] > 0
        assert isinstance(c["vyre_slower"], bool)


def test_dispatch_rows_share_the_device_and_time_many_rounds(quick_run: dict[str, Any]
                                                             ) -> None:
    """The raw wgpu peer's dispatch workloads run on vyre's own wgpu device (two devices of
    one GPU differ in submit cost), and a roundtrip / batch repetition does several rounds,
    each checked: the peer's check counts every dispatch it made."""
    doc = quick_run["doc"]
    sizes = W.QUICK
    rows = {(r["metric"], r["implementation"]): r for r in doc["results"]
            if r["group"] == "wgpu" and r["metric"].startswith("dispatch.")}
    if not rows:
        pytest.skip("no wgpu adapter here (the dispatch rows of the wgpu group need one)")
    for metric in ("dispatch.launch", "dispatch.roundtrip", "dispatch.readback",
                   "dispatch.batch100"):
        raw = rows[(metric, "raw wgpu-py")]
        assert raw["status"] == OK and raw["check"] == "passed", raw
        assert raw["extra"]["device"] == "vyre's wgpu device"
    assert rows[("dispatch.roundtrip", "vyre wgpu")]["size"]["rounds"] == sizes.roundtrips
    assert rows[("dispatch.readback", "vyre wgpu")]["size"]["rounds"] == sizes.roundtrips
    assert rows[("dispatch.batch100", "vyre wgpu")]["size"]["rounds"] == sizes.batch_runs
    assert W.dispatch_rounds("roundtrip", sizes) == sizes.roundtrips > 1
    assert W.dispatch_rounds("batch", sizes) == sizes.batch_runs > 1
    assert W.dispatch_rounds("launch", sizes) == 1


def test_chart_written_or_skip_explained(quick_run: dict[str, Any]) -> None:
    doc, out, proc = quick_run["doc"], quick_run["out"], quick_run["proc"]
    if importlib.util.find_spec("matplotlib") is not None:
        png = out / "bench.png"
        assert doc["artifacts"]["png"] == str(png)
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    else:
        assert doc["artifacts"]["png"] is None
        assert "matplotlib" in doc["artifacts"]["png_skipped"]
        assert "PNG chart skipped" in proc.stdout
    assert doc["artifacts"]["sources"], "the generated sources of timed programs are saved"
    for p in doc["artifacts"]["sources"]:
        assert Path(p).read_text().strip()


def test_workloads_and_backend_restrict_the_run(tmp_path: Path) -> None:
    buf = io.StringIO()
    rc = cli.main(["bench", "--quick", "--backend", "reference", "--no-peers",
                   "--workloads", "saxpy,compile", "--repeat", "2", "--out", str(tmp_path)],
                  out=buf)
    assert rc == 0, buf.getvalue()
    doc = json.loads((tmp_path / "bench.json").read_text())
    assert [g["backend"] for g in doc["groups"]] == ["reference"]
    assert {r["metric"] for r in doc["results"]} == {
        "saxpy", "compile.cold", "compile.warm_memory", "compile.warm_disk"}
    assert all(r["is_vyre"] for r in doc["results"])
    sax = next(r for r in doc["results"] if r["metric"] == "saxpy")
    assert sax["repeat"] == 2 and len(sax["samples_s"]) == 2


@pytest.mark.parametrize("argv, needle", [
    (["--workloads", "saxpy,nope"], "unknown workload"),
    (["--backend", "no-such-backend"], "no backend named"),
    (["--repeat", "0"], "--repeat must be between 1 and"),
    (["--repeat", str(10**9)], "--repeat must be between 1 and"),
    (["--workloads", ""], "--workloads names none"),
    (["--workloads", " , "], "--workloads names none"),
    (["--out", ""], "--out is empty"),
    (["--out", "  "], "--out is empty"),
])
def test_bad_arguments_exit_2(tmp_path: Path, argv: list[str], needle: str) -> None:
    buf = io.StringIO()
    rc = cli.main(["bench", "--quick", "--out", str(tmp_path), *argv], out=buf)
    assert rc == 2
    assert needle in buf.getvalue()


def test_failed_check_is_never_a_number() -> None:
    runs = []

    def setup() -> TimedCase:
        def run() -> float:
            runs.append(1)
            return 0.001
        return TimedCase(run, lambda: "element 3 is 7.0, expected 8.0", "wall")

    metric = Metric("saxpy", "GB/s", "higher", lambda t: 12.0 / t)
    r = measure(metric, "cpu", "vyre test", True, setup, warmup=1, repeat=3)
    assert len(runs) == 4
    assert r.status == FAILED and r.value is None and r.median_s is None
    assert "expected 8.0" in r.check
    doc: dict[str, Any] = {
        "vyre_version": "x", "duration_s": 0.1, "problems": [],
        "settings": {"quick": True, "slower_threshold": 0.1},
        "groups": [{"group": "cpu", "device": "CPU", "kind": "reference", "vyre": "vyre test",
                    "peers": [], "missing_peers": {}, "device_timers": False,
                    "sizes": vars(W.QUICK)}],
        "results": [r.as_dict()],
    }
    annotate(doc)
    text = text_report(doc)
    assert "FAILED" in text and "expected 8.0" in text
    assert failures(doc) and "failed" in failures(doc)[0]


def test_raising_case_is_an_error_not_a_crash() -> None:
    def setup() -> TimedCase:
        def run() -> float:
            raise RuntimeError("device lost")
        return TimedCase(run, lambda: None, "wall")

    metric = Metric("copy", "GB/s", "higher", lambda t: 1.0 / t)
    r = measure(metric, "cpu", "vyre test", True, setup, warmup=0, repeat=2)
    assert r.status == "error" and r.value is None
    assert "device lost" in r.detail


def test_implementations_are_timed_in_interleaved_rounds() -> None:
    """Each round runs every implementation once, the order reversed every other round, so
    drift lands on all of them alike; one that raises is an error and the rest go on."""
    calls: list[str] = []

    def case(name: str, fail_at: int | None = None) -> TimedCase:
        def run() -> float:
            calls.append(name)
            if fail_at is not None and calls.count(name) == fail_at:
                raise RuntimeError(f"{name} broke")
            return 0.001 if name == "a" else 0.002
        return TimedCase(run, lambda: None, "wall")

    metric = Metric("copy", "GB/s", "higher", lambda t: 1.0 / t)
    entries = [Entry("a", True, lambda: case("a")), Entry("b", False, lambda: case("b")),
               Entry("c", False, lambda: case("c", fail_at=3))]
    ra, rb, rc = measure_together(metric, "cpu", entries, warmup=1, repeat=4)
    assert calls[:3] == ["a", "b", "c"]  # warm-up round
    assert calls[3:6] == ["a", "b", "c"] and calls[6:8] == ["c", "b"]  # c raised on its 3rd
    assert calls[8:] == ["a", "a", "b", "b", "a"]  # then a, b alternate their order
    assert (ra.status, ra.value, len(ra.samples_s)) == (OK, 1000.0, 4)
    assert (rb.status, rb.value, len(rb.samples_s)) == (OK, 500.0, 4)
    assert rc.status == ERROR and "c broke" in rc.detail and rc.value is None


def _result(group: str, impl: str, metric: str, value: float, timer: str, is_vyre: bool,
            better: str = "higher") -> dict[str, Any]:
    return {"group": group, "implementation": impl, "metric": metric, "value": value,
            "timer": timer, "is_vyre": is_vyre, "status": "ok", "better": better,
            "unit": "GB/s" if better == "higher" else "us", "extra": {}}


def test_ratios_compare_same_timers_and_portability_is_per_device() -> None:
    from vyre.tools.bench import report, suite

    doc: dict[str, Any] = {
        "groups": [
            {"group": "cuda:0", "device": "GPU X", "kind": "cuda"},
            {"group": "wgpu", "device": "GPU X", "kind": "wgpu"},
            {"group": "cpu", "device": "cpu", "kind": "reference"},
        ],
        "results": [
            _result("cuda:0", "vyre cuda:0", "saxpy", 100.0, "device", True),
            _result("cuda:0", "torch", "saxpy", 50.0, "device", False),
            _result("cuda:0", "raw", "saxpy", 400.0, "wall", False),  # other timer: ignored
            _result("wgpu", "vyre wgpu", "saxpy", 80.0, "device", True),
            _result("wgpu", "raw wgpu-py", "copy", 9.0, "wall", False),
            _result("wgpu", "vyre wgpu", "copy", 1.0, "device", True),  # no same-timer peer
            _result("cuda:0", "vyre cuda:0", "launch", 4.0, "wall", True, "lower"),
            _result("wgpu", "vyre wgpu", "launch", 40.0, "wall", True, "lower"),
        ],
    }
    suite.annotate(doc)
    comps = {(c["group"], c["metric"]): c for c in doc["comparisons"]}
    assert comps[("cuda:0", "saxpy")]["best_peer"] == "torch"
    assert comps[("cuda:0", "saxpy")]["vyre_speed_vs_best_peer"] == 2.0
    assert ("wgpu", "copy") not in comps
    port = {(r["implementation"], r["metric"]): r["share_of_best"] for r in doc["portability"]}
    assert port == {("vyre cuda:0", "saxpy"): 1.0, ("vyre wgpu", "saxpy"): 0.8,
                    ("vyre cuda:0", "launch"): 1.0, ("vyre wgpu", "launch"): 0.1}
    text = report.portability_table(doc)
    assert "portability on GPU X" in text and "0.80" in text and "0.10" in text


def test_cuda_tuning_says_when_there_is_no_cuda() -> None:
    """The CUDA tuning experiments (python -m vyre.tools.bench.cuda_tuning) refuse cleanly
    without a GPU; on one, scripts/gpu_check.sh cuda-tuning runs them."""
    import subprocess
    import sys

    import vyre

    if any(a.name == "cuda" and a.available for a in vyre.available_backends()):
        pytest.skip("CUDA is available: scripts/gpu_check.sh cuda-tuning runs the experiments")
    res = subprocess.run([sys.executable, "-m", "vyre.tools.bench.cuda_tuning", "--quick"],
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 1 and "CUDA unavailable" in res.stdout, res.stdout + res.stderr


def test_multi_gpu_workload_runs_alone_or_says_why_not(tmp_path: Any) -> None:
    """`--workloads multi_gpu`: the several-GPU benchmark (skipped, with the reason, on
    fewer than two CUDA devices; its figures checked otherwise)."""
    from contextlib import redirect_stdout

    buf = io.StringIO()
    with redirect_stdout(buf):
        rc = cli.main(["bench", "--workloads", "multi_gpu", "--out", str(tmp_path)])
    text = buf.getvalue()
    assert "multi_gpu" in text and (tmp_path / "bench.json").exists()
    assert rc == 0 and ("skipped:" in text or "speedup over 1 GPU" in text), text
