"""Timing, checking and progress for `vyre bench`: turns one timed case into one Result.

A `TimedCase` is what an implementation (vyre on a backend, or a peer library) hands the
runner for one workload: `run()` does one timed repetition and returns its seconds (by the
device's own timer where `timer == "device"`, else the host clock around the work and a
wait for it), `check()` inspects the outputs of every run done so far and returns a problem
or None. `measure_together` warms every implementation of a metric up, times them in interleaved
rounds, takes each one's median and checks it; a failed check turns the figure into a
"failed" Result with no number. This module must never decide what a
workload computes, never import a peer library, and never report a number whose check
failed or did not run.
"""

from __future__ import annotations

import statistics
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any, TextIO

from vyre.errors import UnsupportedFeature

# Result.status values.
OK = "ok"
FAILED = "failed"  # ran, but the output was wrong: never a number
ERROR = "error"  # raised while setting up or running
NOT_APPLICABLE = "n/a"  # this implementation cannot do this workload (reason in detail)


class NotApplicable(Exception):
    """An implementation has no way to run a workload (e.g. NumPy has no compile step)."""


@dataclass
class TimedCase:
    """One workload on one implementation, set up and ready to time."""

    run: Callable[[], float]  # one repetition; its duration in seconds
    check: Callable[[], str | None]  # a problem with the outputs so far, or None
    timer: str  # "device" (events / timestamps / Timing.device_ns) or "wall"
    close: Callable[[], None] = lambda: None
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class Metric:
    """What a workload's figure is: a unit, which direction is better, and how a median
    duration (seconds per repetition) becomes the figure."""

    name: str  # e.g. "saxpy", "dispatch.batch100"
    unit: str  # "GB/s", "GFLOP/s", "us", "ms", "x"
    better: str  # "higher" or "lower"
    convert: Callable[[float], float]  # median seconds -> figure
    description: str = ""
    size: dict[str, Any] = field(default_factory=dict)


@dataclass
class Result:
    """One figure (or the reason there is none) for one metric on one implementation."""

    metric: str
    unit: str
    better: str
    group: str  # the device the figure belongs to, e.g. "cuda:0", "wgpu", "cpu"
    implementation: str  # e.g. "vyre cuda:0", "cupy", "raw wgpu-py", "numpy"
    is_vyre: bool
    status: str
    value: float | None = None
    timer: str | None = None
    median_s: float | None = None
    samples_s: list[float] = field(default_factory=list)
    warmup: int = 0
    repeat: int = 0
    check: str = ""  # what was checked ("passed") or what was wrong
    detail: str = ""
    size: dict[str, Any] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _describe_exc(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    first = text.splitlines()[0] if text else ""
    return f"{type(exc).__name__}: {first[:300]}"


@dataclass
class Entry:
    """One implementation to time for a metric: its name and how to set its case up."""

    implementation: str
    is_vyre: bool
    setup: Callable[[], TimedCase]


def measure(
    metric: Metric,
    group: str,
    implementation: str,
    is_vyre: bool,
    setup: Callable[[], TimedCase],
    warmup: int,
    repeat: int,
    warmup_s: float = 0.0,
) -> Result:
    """`measure_together` for one implementation."""
    return measure_together(metric, group, [Entry(implementation, is_vyre, setup)], warmup,
                            repeat, warmup_s)[0]


def measure_together(
    metric: Metric,
    group: str,
    entries: list[Entry],
    warmup: int,
    repeat: int,
    warmup_s: float = 0.0,
) -> list[Result]:
    """Set every implementation up, warm each up (`warmup` runs, and more until `warmup_s`
    seconds have passed, so clocks and caches settle), then time `repeat` rounds in which
    each runs once, the order reversed every other round; check each and return one Result
    per entry, in order. Interleaving puts clock, power-state and thermal drift on every
    implementation alike instead of on whichever ran last. Never raises for a failure of an
    implementation: that becomes its "error" / "failed" Result and the others go on."""
    bases: list[dict[str, Any]] = [
        dict(metric=metric.name, unit=metric.unit, better=metric.better, group=group,
             implementation=e.implementation, is_vyre=e.is_vyre, size=dict(metric.size))
        for e in entries]
    results: list[Result | None] = [None] * len(entries)
    cases: dict[int, TimedCase] = {}
    for i, e in enumerate(entries):
        try:
            cases[i] = e.setup()
        except (NotApplicable, UnsupportedFeature) as exc:
            results[i] = Result(status=NOT_APPLICABLE, detail=str(exc), **bases[i])
        except Exception as exc:
            results[i] = _error("setup", exc, None, bases[i])
    samples: dict[int, list[float]] = {i: [] for i in cases}
    warmed = dict.fromkeys(cases, 0)

    def run(i: int, sink: list[float] | None) -> None:
        if i not in cases or results[i] is not None:
            return
        try:
            dt = float(cases[i].run())
        except Exception as exc:
            results[i] = _error("run", exc, cases[i].timer, bases[i])
            return
        if sink is None:
            warmed[i] += 1
        else:
            sink.append(dt)

    order = list(cases)
    t_warm = time.perf_counter()
    for _ in range(warmup):
        for i in order:
            run(i, None)
    while warmup_s > 0 and time.perf_counter() - t_warm < warmup_s and any(
            results[i] is None for i in order):
        for i in order:
            run(i, None)
    for r in range(repeat):
        for i in (order if r % 2 == 0 else order[::-1]):
            run(i, samples[i])
    for i in order:
        problem: str | None = None
        if results[i] is None:
            try:
                problem = cases[i].check()
            except Exception as exc:
                results[i] = _error("check", exc, cases[i].timer, bases[i])
        try:
            cases[i].close()
        except Exception as exc:  # a close failure is reported, never hidden
            cases[i].extra["close_error"] = _describe_exc(exc)
        if results[i] is None:
            results[i] = _figure(metric, cases[i], samples[i], warmed[i], repeat, problem,
                                 bases[i])
    return [r for r in results if r is not None]


def _error(stage: str, exc: BaseException, timer: str | None, base: dict[str, Any]) -> Result:
    """The Result of an implementation that raised in `stage` (call inside the except)."""
    return Result(status=ERROR, timer=timer, detail=f"{stage}: {_describe_exc(exc)}",
                  extra={"traceback": traceback.format_exc()[-2000:]}, **base)


def _figure(metric: Metric, case: TimedCase, samples: list[float], warmed: int, repeat: int,
            problem: str | None, base: dict[str, Any]) -> Result:
    result = Result(status=OK, timer=case.timer, samples_s=samples, warmup=warmed,
                    repeat=repeat, extra=dict(case.extra), **base)
    if problem is not None:
        result.status = FAILED
        result.check = problem
        return result
    med = statistics.median(samples)
    result.median_s = med
    result.check = "passed"
    if med <= 0:
        result.status = ERROR
        result.detail = f"the timer reported {med} s per run; no figure can be derived"
        return result
    result.value = float(metric.convert(med))
    return result


class Progress:
    """A plain-text progress bar on stderr: one rewritten line on a terminal, one line per
    step elsewhere (logs, CI)."""

    def __init__(self, total: int, stream: TextIO | None = None, width: int = 28) -> None:
        self.total = max(1, total)
        self.done = 0
        self.stream = stream if stream is not None else sys.stderr
        self.width = width
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.t0 = time.perf_counter()
        self._last_len = 0

    def step(self, label: str, count: int = 1) -> None:
        """Announce the `count` steps about to run (the bar shows those finished so far)."""
        filled = int(self.width * self.done / self.total)
        bar = "#" * filled + "." * (self.width - filled)
        elapsed = time.perf_counter() - self.t0
        line = f"[{bar}] {self.done}/{self.total} {elapsed:5.1f}s {label}"
        if self.tty:
            pad = max(0, self._last_len - len(line))
            self.stream.write("\r" + line + " " * pad)
            self._last_len = len(line)
        else:
            self.stream.write(line + "\n")
        self.stream.flush()
        self.done += count

    def finish(self) -> None:
        self.done = self.total
        elapsed = time.perf_counter() - self.t0
        line = f"[{'#' * self.width}] {self.total}/{self.total} {elapsed:5.1f}s done"
        if self.tty:
            pad = max(0, self._last_len - len(line))
            self.stream.write("\r" + line + " " * pad + "\n")
        else:
            self.stream.write(line + "\n")
        self.stream.flush()


def wall_rounds(fn: Callable[[], Any], sync: Callable[[], Any] | None, rounds: int = 1
                ) -> float:
    """Seconds by the host clock for `rounds` times `fn()` then `sync()` (the wait for the
    device; None where fn waits itself): one repetition of a dispatch-overhead workload
    (workloads.dispatch_rounds)."""
    t0 = time.perf_counter_ns()
    for _ in range(rounds):
        fn()
        if sync is not None:
            sync()
    return (time.perf_counter_ns() - t0) / 1e9


def wall(fn: Callable[[], Any]) -> float:
    """Seconds `fn` takes by the host clock (fn must include its own wait for the device)."""
    t0 = time.perf_counter_ns()
    fn()
    return (time.perf_counter_ns() - t0) / 1e9
