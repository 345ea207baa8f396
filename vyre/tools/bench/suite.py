"""Running the `vyre bench` suite: one device group per vyre backend (vyre plus the peers on
that device), every selected workload, in one process, on one set of data per group.

Produces the report document (a JSON-ready dict: machine, settings, every Result, copy
bandwidth per device, vyre-vs-best-peer comparisons). This module orchestrates; it must
never format tables (report.py), draw (plot.py) or time anything itself (runner.py).
"""

from __future__ import annotations

import os
import platform
import sys
import time
from dataclasses import dataclass, field
from functools import partial
from typing import Any, TextIO

import numpy as np

from vyre import __version__, registry

from . import workloads as W
from .peers import Peer, peers_for
from .runner import OK, Entry, Progress, Result, measure_together
from .vyre_impl import CacheDir, VyreImpl

SCHEMA = "vyre-bench/1"
#: vyre is called out where it is slower than the best peer by more than this fraction.
SLOWER_THRESHOLD = 0.10
#: Why the reference backend is never called out against NumPy.
REFERENCE_NOTE = ("the reference backend interprets the IR with exact semantics (it is the "
                  "oracle, not a fast path); NumPy figures are context, not a target")


@dataclass
class Options:
    backends: list[str] = field(default_factory=list)  # specs; empty: every available
    workloads: list[str] = field(default_factory=lambda: list(W.WORKLOADS))
    quick: bool = False
    peers: bool = True
    repeat: int | None = None  # overrides the repetitions of the bandwidth / compute figures
    functions: list[str] | None = None  # the transcendental workload's (None: all)


@dataclass
class Group:
    """vyre on one backend and the peers on the same device."""

    spec: str
    impl: VyreImpl
    peers: list[Peer]
    missing_peers: dict[str, str]
    sizes: W.Sizes
    device: str
    kind: str

    @property
    def key(self) -> str:
        return "cpu" if self.kind == "reference" else self.impl.backend.id


def machine_description(probe: list[dict[str, Any]]) -> dict[str, Any]:
    """Host, Python, library versions and the `vyre probe --json` backend report."""
    libs: dict[str, str | None] = {"numpy": np.__version__}
    for mod in ("wgpu", "cupy", "torch", "cuda.bindings"):
        m = sys.modules.get(mod)
        libs[mod] = getattr(m, "__version__", None) if m is not None else None
    return {
        "host": platform.node(),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "processor": platform.processor() or None,
        "cpu_count": os.cpu_count(),
        "python": sys.version.split()[0],
        "vyre_version": __version__,
        "libraries": libs,
        "probe": {"vyre_version": __version__, "backends": probe},
    }


def _sizes_for(kind: str, opts: Options, caps_limits: dict[str, int]) -> W.Sizes:
    base = W.REFERENCE if kind == "reference" else (W.QUICK if opts.quick else W.FULL)
    if opts.repeat is not None:
        from dataclasses import replace

        base = replace(base, repeat=opts.repeat, dispatch_repeat=opts.repeat,
                       compile_repeat=opts.repeat)
    limit = caps_limits.get("max_storage_binding_bytes") or caps_limits.get(
        "max_allocation_bytes")
    return base.capped(limit)


def open_groups(specs: list[str], opts: Options) -> tuple[list[Group], list[str]]:
    """Instances for each backend spec; (groups, problems creating them)."""
    groups: list[Group] = []
    problems: list[str] = []
    for spec in specs:
        try:
            backend = registry.get_backend(spec)
        except Exception as exc:
            problems.append(f"backend {spec}: could not be created: {exc}")
            continue
        caps = backend.capabilities()
        peers, missing = peers_for(backend.kind, caps.device, opts.peers,
                                   getattr(backend, "device", None))
        groups.append(Group(spec, VyreImpl(backend, spec), peers, missing,
                            _sizes_for(backend.kind, opts, dict(caps.limits)), caps.device,
                            backend.kind))
    return groups, problems


def _metrics(opts: Options) -> list[str]:
    fns = opts.functions
    if fns is None and opts.quick:  # (a smoke test: one function of each arity)
        fns = list(W.QUICK_FUNCTIONS)
    return [m for w in W.WORKLOADS if w in opts.workloads for m in W.METRICS_OF[w]
            if fns is None or not m.startswith("transcendental.") or m.split(".")[1] in fns]


def _reps(metric: str, s: W.Sizes) -> tuple[int, int]:
    if metric.startswith("dispatch"):
        return (1, s.dispatch_repeat)
    if metric.startswith("compile"):
        # two warm-up compiles (of other new programs, for compile.cold) keep the process's
        # one-time costs, such as the first use of a code path, out of the samples
        return (min(2, s.warmup), s.compile_repeat)
    if metric.startswith("cpp"):
        return (1, max(1, min(s.repeat, 5)))
    return (s.warmup, s.repeat)


def run_suite(opts: Options, probe: list[dict[str, Any]], specs: list[str],
              progress_stream: TextIO | None = None) -> dict[str, Any]:
    """Run everything and return the report document."""
    t_start = time.perf_counter()
    metrics = _metrics(opts)
    results: list[Result] = []
    sources: dict[str, dict[str, str]] = {}
    groups_doc: list[dict[str, Any]] = []
    with CacheDir():
        groups, problems = open_groups(specs, opts)
        total = sum(len(metrics) * (1 + len(g.peers)) for g in groups)
        progress = Progress(total, progress_stream)
        try:
            for g in groups:
                data = W.Data(g.sizes)
                for name in metrics:
                    metric = W.metric(name, g.sizes)
                    warm, rep = _reps(name, g.sizes)
                    impls: list[VyreImpl | Peer] = [g.impl, *g.peers]
                    progress.step(f"{name} on {', '.join(i.name for i in impls)} ({g.key})",
                                  len(impls))
                    results.extend(measure_together(
                        metric, g.key,
                        [Entry(i.name, i.is_vyre, partial(i.case, name, data)) for i in impls],
                        warm, rep, 0.0 if name.startswith("compile") else g.sizes.warmup_s))
                sources[g.impl.backend.id] = dict(g.impl.sources)
                groups_doc.append({
                    "group": g.key, "backend": g.impl.backend.id, "kind": g.kind,
                    "device": g.device, "vyre": g.impl.name,
                    "peers": [p.name for p in g.peers], "missing_peers": g.missing_peers,
                    "sizes": {k: v for k, v in vars(g.sizes).items()},
                    "device_timers": g.impl.device_timers,
                })
        finally:
            progress.finish()
            for g in groups:
                for p in g.peers:
                    try:
                        p.close()
                    except Exception as exc:
                        problems.append(f"closing peer {p.name} failed: {exc!r}")
                try:
                    g.impl.backend.close()
                except Exception as exc:
                    problems.append(f"closing {g.impl.backend.id} failed: {exc!r}")
    doc: dict[str, Any] = {
        "schema": SCHEMA,
        "vyre_version": __version__,
        "created_unix": time.time(),
        "duration_s": time.perf_counter() - t_start,
        "settings": {"quick": opts.quick, "peers": opts.peers, "workloads": list(opts.workloads),
                     "backends": specs, "repeat_override": opts.repeat,
                     "slower_threshold": SLOWER_THRESHOLD},
        "machine": machine_description(probe),
        "groups": groups_doc,
        "results": [r.as_dict() for r in results],
        "problems": problems,
    }
    annotate(doc)
    doc["sources"] = sources
    return doc


def _exact_atomic_cost(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per group and atomics row (hist, scatter): what the order-independent add costs, as
    its time over the relaxed one's (vyre's own, and the fastest order-dependent peer's);
    issue 32's goal is at most 2x."""
    out = []
    for g in sorted({r["group"] for r in results}):
        for row in ("hist", "scatter"):
            rows = [r for r in results if r["group"] == g and r["value"]
                    and r["metric"] in (f"atomics.{row}_exact", f"atomics.{row}_relaxed")]
            exact = next((r for r in rows if r["is_vyre"] and r["metric"].endswith("exact")),
                         None)
            relaxed = [r for r in rows if r["metric"].endswith("relaxed")]
            if exact is None or not relaxed:
                continue
            fastest = max(relaxed, key=lambda r: r["value"])
            own = next((r for r in relaxed if r["is_vyre"]), None)
            out.append({"group": g, "row": row, "exact": exact["implementation"],
                        "exact_Gadd_s": exact["value"],
                        "cost_vs_vyre_relaxed": own["value"] / exact["value"] if own else None,
                        "fastest_relaxed": fastest["implementation"],
                        "cost_vs_fastest_relaxed": fastest["value"] / exact["value"]})
    return out


def _best(rows: list[dict[str, Any]], better: str) -> dict[str, Any] | None:
    ok = [r for r in rows if r["status"] == OK and r["value"] is not None]
    if not ok:
        return None
    return (max if better == "higher" else min)(ok, key=lambda r: r["value"])


def annotate(doc: dict[str, Any]) -> None:
    """Add copy bandwidth per group, fraction-of-copy per bandwidth figure, the front end's
    host/resident ratio and the vyre-vs-best-peer comparisons."""
    results = doc["results"]
    copy_bw: dict[str, dict[str, Any]] = {}
    for g in {r["group"] for r in results}:
        best = _best([r for r in results if r["group"] == g and r["metric"] == "copy"], "higher")
        if best is not None:
            copy_bw[g] = {"GBps": best["value"], "by": best["implementation"]}
    doc["copy_bandwidth"] = copy_bw
    for r in results:
        if r["metric"] in W.BANDWIDTH_METRICS and r["value"] is not None and r["group"] in copy_bw:
            r["extra"]["fraction_of_copy"] = r["value"] / copy_bw[r["group"]]["GBps"]
    ratios = []
    for g in sorted({r["group"] for r in results}):
        vy = {r["metric"]: r for r in results if r["group"] == g and r["is_vyre"]}
        res, host = vy.get("cpp.resident"), vy.get("cpp.host")
        if res and host and res["value"] and host["value"]:
            ratios.append({"group": g, "implementation": res["implementation"],
                           "resident_ms": res["value"], "host_ms": host["value"],
                           "host_over_resident": host["value"] / res["value"]})
    doc["cpp_ratio"] = ratios
    doc["exact_atomic_cost"] = _exact_atomic_cost(results)
    comparisons = []
    for g in sorted({r["group"] for r in results}):
        for m in dict.fromkeys(r["metric"] for r in results if r["group"] == g):
            rows = [r for r in results if r["group"] == g and r["metric"] == m]
            mine: dict[str, Any] | None = next((r for r in rows if r["is_vyre"]), None)
            if mine is None or mine["value"] is None:
                continue
            # A ratio only ever compares figures taken with the same kind of timer.
            peer = _best([r for r in rows if not r["is_vyre"] and r["timer"] == mine["timer"]],
                         rows[0]["better"])
            if peer is None:
                continue
            if rows[0]["better"] == "higher":
                speed = mine["value"] / peer["value"]
            else:
                speed = peer["value"] / mine["value"]
            comparisons.append({
                "group": g, "metric": m, "unit": rows[0]["unit"], "better": rows[0]["better"],
                "vyre": mine["implementation"], "vyre_value": mine["value"],
                "best_peer": peer["implementation"], "peer_value": peer["value"],
                "vyre_speed_vs_best_peer": speed,
                "vyre_slower": speed < 1 - SLOWER_THRESHOLD and g != "cpu",
                "note": REFERENCE_NOTE if g == "cpu" else "",
            })
    doc["comparisons"] = comparisons
    doc["portability"] = portability(doc)


def portability(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """Per physical device and metric: each vyre backend's figure as a share of the best
    vyre backend's figure on that same device (1.0 = the best; higher-is-better metrics
    divide by the best, lower-is-better ones divide the best by the figure). Only figures
    taken with the same kind of timer are compared."""
    device_of = {g["group"]: g["device"] for g in doc["groups"]}
    kind_of = {g["group"]: g["kind"] for g in doc["groups"]}
    mine = [r for r in doc["results"] if r["is_vyre"] and r["status"] == OK
            and r["value"] is not None and kind_of.get(r["group"]) != "reference"]
    out: list[dict[str, Any]] = []
    for device in dict.fromkeys(device_of[r["group"]] for r in mine):
        on_dev = [r for r in mine if device_of[r["group"]] == device]
        if len({r["group"] for r in on_dev}) < 2:
            continue
        for m in dict.fromkeys(r["metric"] for r in on_dev):
            rows = [r for r in on_dev if r["metric"] == m]
            for timer in dict.fromkeys(r["timer"] for r in rows):
                same = [r for r in rows if r["timer"] == timer]
                best = _best(same, same[0]["better"])
                if best is None or len(same) < 2:
                    continue
                for r in same:
                    share = (r["value"] / best["value"] if r["better"] == "higher"
                             else best["value"] / r["value"])
                    out.append({"device": device, "metric": m, "unit": r["unit"],
                                "group": r["group"], "implementation": r["implementation"],
                                "value": r["value"], "best": best["implementation"],
                                "share_of_best": share, "timer": timer})
    return out


def failures(doc: dict[str, Any]) -> list[str]:
    """One line per failed check or error (empty when everything that ran passed)."""
    out = [f"{r['metric']} on {r['implementation']} ({r['group']}): {r['status']}: "
           f"{r['check'] or r['detail']}"
           for r in doc["results"] if r["status"] in ("failed", "error")]
    return out + list(doc.get("problems", []))
