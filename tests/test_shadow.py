"""Shadow runs (vyre.tools.shadow): a sample of a backend's dispatches rerun on a second
backend and compared bit for bit; a difference raises (or logs) naming a replay file that
reproduces it; the sampling is what was asked; bad settings are refused with the fix."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pytest

import vyre
from vyre import DispatchConfig, ProgramBuilder, f32
from vyre.backends.reference import ReferenceBackend
from vyre.backends.reference.runtime import ReferenceQueue
from vyre.errors import BackendError
from vyre.ir.nodes import Program
from vyre.tools import replay as R
from vyre.tools.shadow import Shadow, ShadowDifference


def scale() -> Program:
    k = ProgramBuilder("scale_s", workgroup_size=64)
    x = k.buffer("x", f32)
    y = k.buffer("y", f32, "write")
    i = k.global_linear_id()
    with k.if_(i < y.length()):
        y[i] = x[i] * 3.0
    return k.build()


class _OneUlpHighQueue(ReferenceQueue):
    def run(self, launch, buffers):  # type: ignore[no-untyped-def]
        ns = super().run(launch, buffers)
        for decl, buf, n in zip(launch.plan.program.buffers, buffers, launch.counts):
            if decl.access != "read" and decl.ty == f32:
                v = buf.array[: n * 4].view(np.float32)
                v[:] = np.nextafter(v, np.float32(np.inf))
        return ns


class _OneUlpHigh(ReferenceBackend):
    """Float outputs one ulp high, on the host path and the resident path alike."""

    queue_part = _OneUlpHighQueue


X = np.arange(100, dtype=np.float32)
CFG = DispatchConfig(grid=(2, 1, 1))


def step_add() -> Program:
    """A time-stepped kernel: y = y * 0.5 + t (t: the pipeline round, index_param)."""
    from vyre import u32

    k = ProgramBuilder("step_add", workgroup_size=64)
    y = k.buffer("y", f32, "read_write")
    t = k.param("t", u32)
    i = k.global_linear_id()
    with k.if_(i < y.length()):
        y[i] = y[i] * 0.5 + t.cast(f32)
    return k.build()


def stepped(rounds: int) -> np.ndarray:
    """X after `rounds` rounds of step_add, in f32 as the kernel computes it."""
    want = X.copy()
    for r in range(rounds):
        want = want * np.float32(0.5) + np.float32(r)
    return want


def test_a_difference_raises_with_a_replay_file_that_reproduces_it(tmp_path: Path) -> None:
    sh = Shadow(_OneUlpHigh("wrong"), every=1, replay_dir=tmp_path)
    try:
        with pytest.raises(ShadowDifference, match=r"y: 100 of 100 elements differ") as info:
            sh.dispatch(scale(), {"x": X, "y": 100}, CFG)
    finally:
        sh.close()
    (path,) = tmp_path.glob("shadow-scale_s-*.zip")
    assert f"vyre replay {path}" in str(info.value)
    again = R.replay(path, backend="reference")  # the saved outputs are the wrong ones
    assert not again.ok and "y: 100 of 100 elements differ" in str(again)


def test_resident_dispatches_are_shadowed_and_log_mode_goes_on(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    wrong = _OneUlpHigh("wrong")
    sh = Shadow(wrong, every=2, on_difference="log", replay_dir=tmp_path)
    try:
        xb, yb = wrong.allocate_device_buffer(400), wrong.allocate_device_buffer(400)
        wrong.write(xb, X)
        with caplog.at_level(logging.WARNING, logger="vyre.shadow"):
            for _ in range(4):
                sh.dispatch_with_device_buffers(scale(), {"x": xb}, {"y": yb}, CFG)
        assert (sh.dispatches, sh.shadowed, len(sh.differences)) == (4, 2, 2)
        assert "differ" in caplog.text and len(list(tmp_path.glob("*.zip"))) == 2
        got = wrong.read_many([vyre.ReadRange(yb, 0, None, np.float32)])[0]
        assert got.tobytes() == np.nextafter(X * 3, np.float32(np.inf)).tobytes()  # unchanged
        wrong.free(xb)
        wrong.free(yb)
    finally:
        sh.close()


def test_equal_backends_and_the_sampling_rate() -> None:
    sh = Shadow(vyre.get_backend("reference"), rate=0.25, seed=1)
    try:
        for _ in range(200):
            out = sh.dispatch(scale(), {"x": X, "y": 100}, CFG)
        assert out["y"].tobytes() == (X * 3).tobytes()
        assert sh.dispatches == 200 and 30 <= sh.shadowed <= 70 and not sh.differences
    finally:
        sh.close()
    off = Shadow(vyre.get_backend("reference"), rate=0.0)
    try:
        off.dispatch(scale(), {"x": X, "y": 100}, CFG)
        assert off.shadowed == 0
    finally:
        off.close()


@pytest.mark.parametrize("kwargs, phrase", [
    ({}, "exactly one of rate="), ({"rate": 0.1, "every": 3}, "exactly one of rate="),
    ({"rate": 2.0}, "use 0..1"), ({"every": 0}, "positive int"),
    ({"every": 1, "on_difference": "ignore"}, "'raise' or 'log'"),
])
def test_bad_settings_are_refused(kwargs: dict, phrase: str) -> None:  # type: ignore[type-arg]
    be = vyre.get_backend("reference")
    try:
        with pytest.raises(BackendError, match=phrase.replace("(", r"\(")):
            Shadow(be, **kwargs)
    finally:
        be.close()


def test_recorded_pipeline_replays_on_another_backend(tmp_path: Path) -> None:
    """A time-stepped pipeline (index_param) recorded on one backend instance reruns from
    its file on another (here two references; on a GPU host: record on cuda, replay on
    wgpu) with the same bits, and a changed read is named."""
    from vyre import Step
    from vyre.tools.replay_pipeline import record_pipeline, replay_pipeline

    prog = step_add()
    src = ReferenceBackend("source")
    try:
        yb = src.allocate_device_buffer(400)
        src.write(yb, X)
        reads = record_pipeline(tmp_path / "p.zip", src,
                                [Step(prog, {}, {"y": yb}, CFG, index_param="t")], repeat=5,
                                read=[vyre.ReadRange(yb, 0, None, np.float32)])
        src.free(yb)
    finally:
        src.close()
    assert reads[0].tobytes() == stepped(5).tobytes()
    res = replay_pipeline(tmp_path / "p.zip", "reference")
    assert res.ok, str(res)
    assert "saved reads (from source)" in res.compared_with
    wrong = _OneUlpHigh("wrong")
    try:
        diffs = replay_pipeline(tmp_path / "p.zip", wrong).differences
    finally:
        wrong.close()
    assert diffs[0].startswith("read 0: 100 of 100 elements differ")


def _resident(be: vyre.Backend) -> tuple[vyre.DeviceBuffer, vyre.DeviceBuffer]:
    xb, yb = be.allocate_device_buffer(400), be.allocate_device_buffer(400)
    be.write(xb, X)
    return xb, yb


def test_every_dispatch_path_is_sampled_and_compared(tmp_path: Path) -> None:
    """dispatch_async (compared at wait), a bound dispatch and a pipeline run are shadowed
    like dispatch and dispatch_with_device_buffers; a pipeline's difference writes a
    pipeline replay file that `vyre replay` reruns."""
    import io

    from vyre import Step
    from vyre.tools.cli import main

    wrong = _OneUlpHigh("wrong")
    sh = Shadow(wrong, every=1, replay_dir=tmp_path)
    try:
        xb, yb = _resident(wrong)
        pending = sh.dispatch_async(scale(), [xb], [yb], CFG)
        with pytest.raises(ShadowDifference, match="y: 100 of 100 elements differ"):
            pending.wait()
        bound = sh.bind(scale(), [xb], [yb], CFG)
        with pytest.raises(ShadowDifference, match="y: 100 of 100 elements differ"):
            sh.dispatch_with_device_buffers(bound)
        pipe = sh.pipeline([Step(scale(), [xb], [yb], CFG), bound])
        with pytest.raises(ShadowDifference, match=r"a pipeline run of 2 step\(s\).*"
                                                   r"read 0: 100 of 100 elements differ"):
            pipe.run(read=[yb])
        assert (sh.dispatches, sh.shadowed) == (3, 3)
        (path,) = tmp_path.glob("shadow-pipeline-scale_s-*.zip")
        out = io.StringIO()
        assert main(["replay", str(path), "--backend", "reference"], out) == 1, out.getvalue()
        assert "read 0: 100 of 100 elements differ" in out.getvalue()
        wrong.free(xb)
        wrong.free(yb)
    finally:
        sh.close()


def test_a_debug_kernel_prints_and_fails_once(capsys: pytest.CaptureFixture[str]) -> None:
    """The shadow reruns a kernel without its vyre.print / vyre.assert_: the output is
    printed once, a failed assert raised once, by the shadowed backend."""
    k = ProgramBuilder("printed_s", workgroup_size=4)
    x, y = k.buffer("x", f32), k.buffer("y", f32, "write")
    i = k.global_linear_id()
    with k.if_(i < y.length()):
        k.print("i={} x={}", i, x[i])
        k.assert_(x[i] < 2.0, "big at {}", i)
        y[i] = x[i] * 3.0
    prog = k.build()
    sh = Shadow(vyre.get_backend("reference"), every=1)
    try:
        out = sh.dispatch(prog, {"x": X[:2], "y": 2}, DispatchConfig(grid=(1, 1, 1)))
        assert out["y"].tobytes() == (X[:2] * 3).tobytes() and sh.shadowed == 1
        assert capsys.readouterr().out.splitlines() == ["i=0 x=0.0", "i=1 x=1.0"]
        with pytest.raises(vyre.DispatchError, match="big at 2") as info:
            sh.dispatch(prog, {"x": X[:4], "y": 4}, DispatchConfig(grid=(1, 1, 1)))
        assert not isinstance(info.value, ShadowDifference)
        assert len(capsys.readouterr().out.splitlines()) == 4
    finally:
        sh.close()


def test_a_backend_and_its_reference_shadow_agree_on_every_path(
        backend: vyre.Backend, tmp_path: Path) -> None:
    """On every backend (wgpu on lavapipe here, cuda on a GPU host): dispatch, resident,
    async, bound and pipeline runs shadowed on the reference give no difference."""
    from vyre import Step

    sh = Shadow(backend, against=ReferenceBackend("shadow"), every=1, replay_dir=tmp_path)
    xb, yb = _resident(backend)
    try:
        assert sh.dispatch(scale(), {"x": X, "y": 100}, CFG)["y"].tobytes() == \
            (X * 3).tobytes()
        sh.dispatch_with_device_buffers(scale(), [xb], [yb], CFG)
        sh.dispatch_async(scale(), [xb], [yb], CFG).wait()
        bound = backend.bind(scale(), [xb], [yb], CFG)
        sh.dispatch_with_device_buffers(bound)
        res = sh.pipeline([Step(scale(), [xb], [yb], CFG), bound]).run(read=[yb])
        assert res.reads[0].tobytes() == (X * 3).tobytes()
        assert (sh.shadowed, sh.differences) == (5, []) and not list(tmp_path.iterdir())
    finally:
        backend.free(xb)
        backend.free(yb)
        sh.against.close()


def test_a_pipeline_recorded_on_a_backend_replays_on_the_reference(
        backend: vyre.Backend, tmp_path: Path) -> None:
    """Record on one backend, replay on the others from the file (on a GPU host: record on
    cuda, replay on wgpu and the reference), by the API and by `vyre replay` / `vyre
    check`: the same bits."""
    import io

    from vyre import Step
    from vyre.tools.cli import main
    from vyre.tools.replay_pipeline import record_pipeline, replay_pipeline

    yb = backend.allocate_device_buffer(400)
    try:
        backend.write(yb, X)
        reads = record_pipeline(tmp_path / "p.zip", backend,
                                [Step(step_add(), {}, {"y": yb}, CFG, index_param="t")],
                                repeat=3, read=[yb])
    finally:
        backend.free(yb)
    assert reads[0].tobytes() == stepped(3).tobytes()
    others = [a.name for a in vyre.available_backends()
              if a.available and a.name in ("reference", "wgpu") and a.name != backend.kind]
    assert others
    for other in others:
        res = replay_pipeline(tmp_path / "p.zip", other)
        assert res.ok and f"saved reads (from {backend.id})" in res.compared_with, str(res)
    for args in (["replay", "--backend", others[0]], ["check"]):
        out = io.StringIO()
        assert main([args[0], str(tmp_path / "p.zip"), *args[1:]], out) == 0, out.getvalue()
