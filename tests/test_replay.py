"""One-file replay (vyre.tools.replay, `vyre replay`, `vyre check`, $VYRE_REPLAY_DIR): a
saved dispatch reruns bit for bit, a changed output is named, another vyre version is
refused with both versions named, a failing dispatch writes a file on request, and the
checked mode runs on a saved dispatch."""

from __future__ import annotations

import io
import json
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest

import vyre
import vyre.backends.reference
from vyre import DispatchConfig, ProgramBuilder, f32
from vyre.errors import DispatchError
from vyre.ir.nodes import Program
from vyre.tools import replay as R
from vyre.tools.cli import main

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common_programs import saxpy as shared_saxpy


def saxpy() -> Program:
    return shared_saxpy("saxpy_r")


def racy_reduction() -> Program:
    """A workgroup sum whose barrier inside the halving loop is missing."""
    k = ProgramBuilder("racy_sum", workgroup_size=64)
    x = k.buffer("x", f32)
    out = k.buffer("out", f32, "write")
    t = k.shared("t", f32, 64)
    li = k.local_index()
    t[li] = x[k.global_linear_id()]
    k.barrier()
    s = 32
    while s >= 1:
        with k.if_(li < s):
            t[li] = t[li] + t[li + s]
        s //= 2
    with k.if_(li == 0):
        out[k.workgroup_id(0)] = t[0]
    return k.build()


def _inputs() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(3)
    return {"x": rng.standard_normal(100).astype(np.float32),
            "y": rng.standard_normal(100).astype(np.float32)}


CFG = DispatchConfig(grid=(2, 1, 1), params={"a": 1.5})


def test_recorded_dispatch_replays_bit_for_bit(tmp_path: Path) -> None:
    be = vyre.get_backend("reference")
    try:
        outs = R.record_dispatch(tmp_path / "d.zip", be, saxpy(), _inputs(), CFG)
    finally:
        be.close()
    out = io.StringIO()  # (how long a replay takes is the bench's business, not a test's)
    assert main(["replay", str(tmp_path / "d.zip")], out) == 0
    assert "identical" in out.getvalue() and "saved outputs (from reference)" in out.getvalue()
    saved = R.load_dispatch(tmp_path / "d.zip")
    assert saved.program == saxpy() and saved.grid == (2, 1, 1) and saved.params == {"a": 1.5}
    assert saved.outputs is not None
    assert saved.outputs["y"].tobytes() == outs["y"].tobytes()
    assert saved.inputs["y"].tobytes() == _inputs()["y"].tobytes()  # before, not after
    res = R.replay(tmp_path / "d.zip", backend="reference", against="reference")
    assert res.ok and res.compared_with == "reference"


def test_a_changed_output_is_named_with_its_elements(tmp_path: Path) -> None:
    be = vyre.get_backend("reference")
    try:
        outs = be.dispatch(saxpy(), _inputs(), CFG)
    finally:
        be.close()
    wrong = outs["y"].copy()
    wrong[7] = np.nextafter(wrong[7], np.float32(np.inf))  # one ulp
    R.save_dispatch(tmp_path / "w.zip", saxpy(), _inputs(), CFG, outputs={"y": wrong})
    out = io.StringIO()
    assert main(["replay", str(tmp_path / "w.zip")], out) == 1
    assert "y: 1 of 100 elements differ: [7]" in out.getvalue()


def test_another_vyre_version_is_refused_naming_both(tmp_path: Path) -> None:
    p = R.save_dispatch(tmp_path / "v.zip", saxpy(), _inputs(), CFG)
    with zipfile.ZipFile(p) as z:
        files = {n: z.read(n) for n in z.namelist()}
    doc = json.loads(files[R.MANIFEST])
    doc["vyre_version"] = "0.0.9"
    files[R.MANIFEST] = json.dumps(doc).encode()
    with zipfile.ZipFile(p, "w") as z:
        for n, b in files.items():
            z.writestr(n, b)
    with pytest.raises(R.ReplayError, match=r"saved by vyre 0\.0\.9.*this is vyre "
                       + vyre.__version__.replace(".", r"\.")):
        R.load_dispatch(p)
    out = io.StringIO()
    assert main(["replay", str(p)], out) == 2 and "0.0.9" in out.getvalue()
    (tmp_path / "junk.zip").write_bytes(b"not a zip")
    with pytest.raises(R.ReplayError, match="not a readable vyre replay file"):
        R.load_dispatch(tmp_path / "junk.zip")


def test_failing_dispatch_writes_a_replay_file_on_request(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(R.ENV_REPLAY_DIR, str(tmp_path))
    be = vyre.get_backend("reference", check=True)
    x = np.arange(128, dtype=np.float32)
    try:
        with pytest.raises(DispatchError) as info:
            be.dispatch(racy_reduction(), {"x": x, "out": 2}, DispatchConfig(grid=(2, 1, 1)))
    finally:
        be.close()
    files = list(tmp_path.glob("racy_sum-*.zip"))
    assert len(files) == 1 and f"vyre replay {files[0]}" in str(info.value)
    saved = R.load_dispatch(files[0])
    assert saved.inputs["x"].tobytes() == x.tobytes() and "data race on t[" in saved.note
    out = io.StringIO()
    assert main(["check", str(files[0])], out) == 1
    # (a program read from a file has no source lines: the statement's pseudo-code instead)
    assert "data race on t[" in out.getvalue() and "t[local_index] = " in out.getvalue()
    out = io.StringIO()
    assert main(["replay", str(files[0]), "--check"], out) == 1
    assert "data race" in out.getvalue()


def test_check_on_a_clean_dispatch_and_bad_backend_choice(tmp_path: Path) -> None:
    p = R.save_dispatch(tmp_path / "c.zip", saxpy(), _inputs(), CFG)
    out = io.StringIO()
    assert main(["check", str(p)], out) == 0 and "no race" in out.getvalue()
    out = io.StringIO()
    assert main(["replay", str(p), "--check", "--backend", "wgpu"], out) == 2
    assert "drop --backend" in out.getvalue()


class _OffByOneUlp(vyre.backends.reference.ReferenceBackend):  # type: ignore[name-defined]
    """A backend whose float results are one ulp high: a conformance failure to save."""

    def dispatch(self, program, inputs, config):  # type: ignore[no-untyped-def,override]
        outs = super().dispatch(program, inputs, config)
        with np.errstate(over="ignore"):  # (the case's FLT_MAX becomes inf)
            return {k: (np.nextafter(v, v.dtype.type(np.inf)) if v.dtype.kind == "f" else v)
                    for k, v in outs.items()}


def test_conformance_failure_writes_a_replay_file_on_request(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from vyre.tools.conformance import CASES, check_case

    case = next(c for c in CASES.values() if any(b.ty == f32 and b.access != "read"
                                                 for b in c.program.buffers))
    bad, ref = _OffByOneUlp("wrong"), vyre.get_backend("reference")
    try:
        with pytest.raises(AssertionError) as no_dir:
            check_case(case, bad, ref)
        assert "replay file" not in str(no_dir.value)
        monkeypatch.setenv(R.ENV_REPLAY_DIR, str(tmp_path))
        with pytest.raises(AssertionError, match=r"replay file: .*vyre replay"):
            check_case(case, bad, ref)
        (path,) = tmp_path.glob("*.zip")
        res = R.replay(path, backend=bad, against=ref)
        assert not res.ok and "differ" in str(res)
        assert R.replay(path, backend=ref).ok  # the saved case itself is sound
    finally:
        bad.close()
        ref.close()


def test_check_findings_are_kept_apart_from_differences_for_dispatches_and_pipelines(
        tmp_path: Path) -> None:
    """--check lists the checked mode's findings beside the bit comparison (not as a
    differing buffer); a recorded pipeline is checked step by step by `vyre check` and
    `vyre replay --check` too."""
    from vyre import Step
    from vyre.tools.replay_pipeline import record_pipeline

    x = np.arange(128, dtype=np.float32)
    be = vyre.get_backend("reference")
    try:
        R.record_dispatch(tmp_path / "d.zip", be, racy_reduction(), {"x": x, "out": 2},
                          DispatchConfig(grid=(2, 1, 1)))
        xb, ob = be.allocate_device_buffer(x.nbytes), be.allocate_device_buffer(8)
        be.write(xb, x)
        steps = [Step(saxpy(), [xb], [xb], CFG),
                 Step(racy_reduction(), [xb], [ob], DispatchConfig(grid=(2, 1, 1)))]
        record_pipeline(tmp_path / "p.zip", be, steps, read=[ob])
    finally:
        be.close()
    res = R.replay(tmp_path / "d.zip", check=True)
    assert res.differences == [] and "data race on t[" in res.findings and not res.ok
    assert "identical\nchecked mode: program 'racy_sum'" in str(res)
    for args in (["check"], ["replay", "--check"]):
        out = io.StringIO()
        assert main([args[0], str(tmp_path / "p.zip"), *args[1:]], out) == 1, out.getvalue()
        assert "checked mode: program 'racy_sum'" in out.getvalue()
        assert "saxpy_r" not in out.getvalue()  # (the clean step has no finding)
    out = io.StringIO()
    assert main(["replay", str(tmp_path / "p.zip")], out) == 0, out.getvalue()
