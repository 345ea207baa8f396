"""Shadow runs: a sample of a backend's dispatches also runs on a second backend (the
reference, or another GPU backend) and the outputs are compared bit for bit.

`Shadow(backend, against="reference", rate=0.01)` (or `every=100`) is used like the
backend (every other attribute is the backend's own). On the first difference it writes a
replay file (vyre.tools.replay; into `replay_dir`, default $VYRE_REPLAY_DIR, else the
temporary directory) and raises ShadowDifference naming it, or, with
`on_difference="log"`, logs a warning on the `vyre.shadow` logger and goes on
(`differences` keeps them). Every way to dispatch is sampled, each counting as one
dispatch:

- `dispatch` (host arrays): the shadow reruns it from a copy of the inputs;
- `dispatch_with_device_buffers` and `dispatch_async` (a Program, or a bound dispatch from
  `bind`): a sampled one reads its buffers back before it (a host sync) and its outputs
  after it (dispatch_async: in `wait()`, which raises or logs the difference);
- `pipeline(steps)`: a Pipeline whose sampled `run` reads every buffer of its steps first,
  runs, and reruns the whole run on the shadow (the same steps, repeat and reads, from
  the same contents), comparing the reads; a difference writes a pipeline replay file
  (vyre.tools.replay_pipeline, `vyre replay FILE`).

The shadow backend runs a kernel's vyre.print / vyre.assert_ statements stripped (they
never change a buffer), so its output is printed once and a failed assert raised once, by
the shadowed backend. This module must never change what the shadowed backend computes.
"""

from __future__ import annotations

import logging
import random
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from vyre.backend import Pending
from vyre.binding import BoundDispatch
from vyre.buffer import DeviceBuffer
from vyre.config import DispatchConfig, Timing
from vyre.debug.instrument import without_debug
from vyre.errors import BackendError, DispatchError
from vyre.interface import Backend, PendingWork, RecordedPipeline
from vyre.ir.nodes import Program
from vyre.pipeline import PipelineResult, ReadRange, Step
from vyre.replay_file import replay_dir, save_dispatch

from .replay import compare_bits
from .replay_pipeline import describe_pipeline, run_recorded, write_pipeline_file

LOG = logging.getLogger("vyre.shadow")


class ShadowDifference(DispatchError):
    """A shadowed dispatch gave other bits than the same dispatch on the shadow backend."""


class Shadow:
    """`backend` with a sample of its dispatches rerun on `against` and compared."""

    def __init__(self, backend: Backend, against: str | Backend = "reference", *,
                 rate: float | None = None, every: int | None = None,
                 on_difference: str = "raise", replay_dir: str | Path | None = None,
                 seed: int | None = None) -> None:
        if (rate is None) == (every is None):
            raise BackendError("Shadow: give exactly one of rate= (a fraction of dispatches, "
                               "0..1) or every= (every Nth dispatch)")
        if rate is not None and not 0.0 <= rate <= 1.0:
            raise BackendError(f"Shadow: rate={rate!r} is not a fraction; use 0..1 "
                               "(0.01: one dispatch in a hundred)")
        if every is not None and (isinstance(every, bool) or not isinstance(every, int)
                                  or every < 1):
            raise BackendError(f"Shadow: every={every!r}; use a positive int (every=100: "
                               "each hundredth dispatch)")
        if on_difference not in ("raise", "log"):
            raise BackendError(f"Shadow: on_difference={on_difference!r}; use 'raise' or "
                               "'log'")
        self.backend = backend
        self.against: Backend
        if isinstance(against, str):
            from vyre.registry import get_backend

            self.against, self._owns = get_backend(against), True
        else:
            self.against, self._owns = against, False
        self.rate, self.every, self.on_difference = rate, every, on_difference
        self.replay_dir = Path(replay_dir) if replay_dir is not None else None
        self._rng = random.Random(seed)
        self.dispatches = 0
        self.shadowed = 0
        self.differences: list[tuple[str, Path]] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.backend, name)

    def close(self) -> None:
        if self._owns:
            self.against.close()
        self.backend.close()

    def _sampled(self) -> bool:
        self.dispatches += 1
        if self.every is not None:
            return self.dispatches % self.every == 0
        assert self.rate is not None
        return self.rate > 0 and self._rng.random() < self.rate

    # ------------------------------------------------------------ dispatch
    def dispatch(self, program: Program, inputs: Mapping[str, Any] | Any,
                 config: DispatchConfig) -> dict[str, np.ndarray]:
        if not self._sampled():
            return self.backend.dispatch(program, inputs, config)
        host = _host_copy(program, inputs)
        got = self.backend.dispatch(program, host, config)
        self._compare(program, host, config, got)
        return got

    def dispatch_with_device_buffers(self, program: Program | BoundDispatch, inputs: Any = (),
                                     outputs: Any = (),
                                     config: DispatchConfig | None = None) -> Any:
        if not self._sampled():
            return self.backend.dispatch_with_device_buffers(program, inputs, outputs, config)
        finish = self._resident(program, inputs, outputs, config)
        timing = self.backend.dispatch_with_device_buffers(program, inputs, outputs, config)
        finish()
        return timing

    def dispatch_async(self, program: Program | BoundDispatch, inputs: Any = (),
                       outputs: Any = (), config: DispatchConfig | None = None) -> PendingWork:
        if not self._sampled():
            return self.backend.dispatch_async(program, inputs, outputs, config)
        finish = self._resident(program, inputs, outputs, config)
        inner = self.backend.dispatch_async(program, inputs, outputs, config)

        def wait() -> Timing:
            timing = inner.wait()
            finish()
            return timing

        return Pending(inner.is_ready, wait)

    def pipeline(self, steps: Sequence[Step | BoundDispatch]) -> ShadowPipeline:
        """`backend.pipeline(steps)` whose runs are sampled (each run counts as one
        dispatch) and rerun on the shadow backend."""
        steps = tuple(steps)
        return ShadowPipeline(self, steps, self.backend.pipeline(steps))

    def _resident(self, program: Program | BoundDispatch, inputs: Any, outputs: Any,
                  config: DispatchConfig | None) -> Callable[[], None]:
        """Read a sampled resident dispatch's buffers now; the returned call (once it is
        done) reads its outputs and compares them with the shadow's run."""
        named: dict[str, DeviceBuffer]
        if isinstance(program, BoundDispatch):
            bound = program
            named = dict(zip((d.name for d in bound.program.buffers), bound.buffers))
            program, config = bound.program, bound.config
        else:
            named = _named(program, inputs, outputs)
        cfg = config if config is not None else DispatchConfig()
        order = [d for d in program.buffers if d.name in named]
        before = self.backend.read_many(
            [ReadRange(named[d.name], 0, None, d.ty.numpy) for d in order])
        host = {d.name: a.copy() for d, a in zip(order, before)}
        outs = [d for d in program.outputs if d.name in named]

        def finish() -> None:
            after = self.backend.read_many(
                [ReadRange(named[d.name], 0, None, d.ty.numpy) for d in outs])
            self._compare(program, host, cfg, {d.name: a for d, a in zip(outs, after)})

        return finish

    def _compare(self, program: Program, host: dict[str, np.ndarray], config: DispatchConfig,
                 got: Mapping[str, np.ndarray]) -> None:
        self.shadowed += 1
        want = self.against.dispatch(without_debug(program), host, config)
        diffs = compare_bits(got, want)
        if not diffs:
            return
        path = save_dispatch(
            self._folder() / f"shadow-{program.name}-{program.content_hash[:12]}-"
                             f"{self.dispatches}.zip",
            program, host, config, outputs=dict(got), backend=self.backend,
            note=f"shadow run on {self.against.id} differs: " + "; ".join(diffs))
        self._differ(f"{program.name!r}", diffs, path)

    def _folder(self) -> Path:
        return self.replay_dir or replay_dir() or Path(tempfile.gettempdir())

    def _differ(self, what: str, diffs: list[str], path: Path) -> None:
        msg = (f"shadow run: {what} on {self.backend.id} and on {self.against.id} "
               f"differ: {'; '.join(diffs)[:1500]}\nreplay file: {path} (vyre replay {path} "
               f"--against {self.against.kind}; vyre check {path} looks for races)")
        self.differences.append((msg, path))
        if self.on_difference == "raise":
            raise ShadowDifference(msg)
        LOG.warning(msg)


class ShadowPipeline:
    """A Pipeline of a Shadow: a sampled `run` is rerun on the shadow backend and its reads
    compared bit for bit (every other attribute is the Pipeline's own)."""

    def __init__(self, shadow: Shadow, steps: tuple[Step | BoundDispatch, ...],
                 pipeline: RecordedPipeline) -> None:
        self.shadow = shadow
        self.pipeline = pipeline
        self._steps = steps

    def __getattr__(self, name: str) -> Any:
        return getattr(self.pipeline, name)

    def run(self, repeat: int = 1, read: Sequence[Any] = ()) -> PipelineResult:
        sh = self.shadow
        if not sh._sampled():
            return self.pipeline.run(repeat, read)
        read = list(read)
        rec = describe_pipeline(self._steps, repeat, read)
        before = rec.before(sh.backend)
        result = self.pipeline.run(repeat, read)
        sh.shadowed += 1
        doc = rec.manifest(sh.backend)
        want = run_recorded(sh.against, doc, before, quiet=True)
        name = lambda i: f"read {i}"  # noqa: E731
        diffs = compare_bits({name(i): g for i, g in enumerate(result.reads)},
                             {name(i): w for i, w in enumerate(want)})
        if diffs:
            first = self._steps[0].program
            path = write_pipeline_file(
                sh._folder() / f"shadow-pipeline-{first.name}-{first.content_hash[:12]}-"
                               f"{sh.dispatches}.zip", doc, before, result.reads)
            sh._differ(f"a pipeline run of {len(self._steps)} step(s) from {first.name!r}",
                       diffs, path)
        return result


def _host_copy(program: Program, inputs: Mapping[str, Any] | Any) -> dict[str, Any]:
    """The inputs as a name -> host value mapping the dispatch cannot change under us."""
    if not isinstance(inputs, Mapping):
        inputs = {d.name: v for d, v in zip(program.buffers, inputs)}
    return {k: (v if isinstance(v, int) else np.array(v, copy=True)) for k, v in inputs.items()}


def _named(program: Program, inputs: Any, outputs: Any) -> dict[str, DeviceBuffer]:
    out: dict[str, DeviceBuffer] = {}
    for group, decls in ((inputs, program.inputs), (outputs, program.outputs)):
        if isinstance(group, Mapping):
            out.update(group)
        else:
            out.update({d.name: b for d, b in zip(decls, group)})
    return out


__all__ = ["Shadow", "ShadowDifference", "ShadowPipeline"]
