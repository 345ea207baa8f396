"""Shadow runs: a sample of a backend's dispatches also runs on a second backend (the
reference, or another GPU backend) and the outputs are compared bit for bit.

`Shadow(backend, against="reference", rate=0.01)` (or `every=100`) is used like the
backend (every other attribute is the backend's own). On the first difference it writes a
replay file (vyre.tools.replay; into `replay_dir`, default $VYRE_REPLAY_DIR, else the
temporary directory) and raises ShadowDifference naming it, or, with
`on_difference="log"`, logs a warning on the `vyre.shadow` logger and goes on
(`differences` keeps them). The host path (`dispatch`) and resident dispatches
(`dispatch_with_device_buffers`, whose buffers are read back before and after a sampled
dispatch: a sampled dispatch waits for the device) are covered. This module must never
change what the shadowed backend computes.
"""

from __future__ import annotations

import logging
import random
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from vyre.backend import BaseBackend
from vyre.buffer import BufferBase
from vyre.config import DispatchConfig
from vyre.errors import BackendError, DispatchError
from vyre.ir.nodes import Program
from vyre.pipeline import ReadRange
from vyre.replay_file import replay_dir, save_dispatch

from .replay import compare_bits

LOG = logging.getLogger("vyre.shadow")


class ShadowDifference(DispatchError):
    """A shadowed dispatch gave other bits than the same dispatch on the shadow backend."""


class Shadow:
    """`backend` with a sample of its dispatches rerun on `against` and compared."""

    def __init__(self, backend: BaseBackend, against: str | BaseBackend = "reference", *,
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
        if isinstance(against, BaseBackend):
            self.against, self._owns = against, False
        else:
            from vyre.registry import get_backend

            self.against, self._owns = get_backend(against), True
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

    def dispatch_with_device_buffers(self, program: Program, inputs: Any, outputs: Any,
                                     config: DispatchConfig) -> Any:
        if not self._sampled():
            return self.backend.dispatch_with_device_buffers(program, inputs, outputs, config)
        named = _named(program, inputs, outputs)
        order = [d for d in program.buffers if d.name in named]
        before = self.backend.read_many(
            [ReadRange(named[d.name], 0, None, d.ty.numpy) for d in order])
        host = {d.name: a.copy() for d, a in zip(order, before)}
        timing = self.backend.dispatch_with_device_buffers(program, inputs, outputs, config)
        outs = [d for d in program.outputs if d.name in named]
        after = self.backend.read_many(
            [ReadRange(named[d.name], 0, None, d.ty.numpy) for d in outs])
        self._compare(program, host, config, {d.name: a for d, a in zip(outs, after)})
        return timing

    def _compare(self, program: Program, host: dict[str, np.ndarray], config: DispatchConfig,
                 got: Mapping[str, np.ndarray]) -> None:
        self.shadowed += 1
        want = self.against.dispatch(program, host, config)
        diffs = compare_bits(got, want)
        if not diffs:
            return
        folder = self.replay_dir or replay_dir() or Path(tempfile.gettempdir())
        path = save_dispatch(
            folder / f"shadow-{program.name}-{program.content_hash[:12]}-{self.dispatches}.zip",
            program, host, config, outputs=dict(got), backend=self.backend,
            note=f"shadow run on {self.against.id} differs: " + "; ".join(diffs))
        msg = (f"shadow run: {program.name!r} on {self.backend.id} and on {self.against.id} "
               f"differ: {'; '.join(diffs)[:1500]}\nreplay file: {path} (vyre replay {path} "
               f"--against {self.against.kind}; vyre check {path} looks for races)")
        self.differences.append((msg, path))
        if self.on_difference == "raise":
            raise ShadowDifference(msg)
        LOG.warning(msg)


def _host_copy(program: Program, inputs: Mapping[str, Any] | Any) -> dict[str, Any]:
    """The inputs as a name -> host value mapping the dispatch cannot change under us."""
    if not isinstance(inputs, Mapping):
        inputs = {d.name: v for d, v in zip(program.buffers, inputs)}
    return {k: (v if isinstance(v, int) else np.array(v, copy=True)) for k, v in inputs.items()}


def _named(program: Program, inputs: Any, outputs: Any) -> dict[str, BufferBase]:
    out: dict[str, BufferBase] = {}
    for group, decls in ((inputs, program.inputs), (outputs, program.outputs)):
        if isinstance(group, Mapping):
            out.update(group)
        else:
            out.update({d.name: b for d, b in zip(decls, group)})
    return out


__all__ = ["Shadow", "ShadowDifference"]
