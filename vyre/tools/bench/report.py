"""The `vyre bench` report as text (one table per device) and as a JSON file.

Formatting only: takes the report document made by suite.py. It must never run or time
anything, and never show a number for a figure whose check failed (those cells say
FAILED / error, with the reason listed under the table).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from vyre.tools.report import format_table

from . import workloads as W


def fmt_value(value: float, unit: str) -> str:
    if unit in ("GB/s", "GFLOP/s"):
        return f"{value:,.0f}" if value >= 100 else f"{value:.3g}"
    if value >= 1000:
        return f"{value:,.0f}"
    if value >= 100:
        return f"{value:.0f}"
    if value >= 10:
        return f"{value:.1f}"
    return f"{value:.3g}"


def _cell(r: dict[str, Any] | None) -> str:
    if r is None:
        return "-"
    if r["status"] == "ok" and r["value"] is not None:
        text = fmt_value(r["value"], r["unit"])
        frac = r["extra"].get("fraction_of_copy")
        if frac is not None:
            text += f" ({frac:.0%})"
        if r.get("timer") == "wall" and r["unit"] in ("GB/s", "GFLOP/s", "Mkeys/s"):
            text += "w"
        return text
    return {"failed": "FAILED", "error": "error", "n/a": "n/a"}.get(r["status"], r["status"])


def group_table(doc: dict[str, Any], group: dict[str, Any]) -> str:
    key = group["group"]
    rows_of = [r for r in doc["results"] if r["group"] == key]
    impls = list(dict.fromkeys([group["vyre"], *group["peers"]]))
    comps = {c["metric"]: c for c in doc["comparisons"] if c["group"] == key}
    rows = []
    for metric in dict.fromkeys(r["metric"] for r in rows_of):
        cells = {r["implementation"]: r for r in rows_of if r["metric"] == metric}
        first = next(iter(cells.values()))
        unit = first["unit"]
        c = comps.get(metric)
        if c is None:
            verdict = "-"
        else:
            flag = "  << slower" if c["vyre_slower"] else (" (oracle)" if c.get("note") else "")
            verdict = f"{c['vyre_speed_vs_best_peer']:.2f}x {c['best_peer']}{flag}"
        rows.append([metric, unit, *(_cell(cells.get(i)) for i in impls), verdict])
    headers = ["metric", "unit", *impls, "vyre vs best peer"]
    return format_table(headers, rows, align=["l", "l", *("r" for _ in impls), "l"])


def text_report(doc: dict[str, Any], out_dir: Path | None = None) -> str:
    lines: list[str] = []
    settings = doc["settings"]
    mode = "quick" if settings["quick"] else "full"
    lines.append(f"vyre {doc['vyre_version']} bench ({mode}, {doc['duration_s']:.1f} s)")
    for g in doc["groups"]:
        cb = doc["copy_bandwidth"].get(g["group"])
        bw = (f"copy bandwidth {cb['GBps']:,.0f} GB/s ({cb['by']})" if cb
              else "copy bandwidth not measured")
        sz = g["sizes"]
        lines.append("")
        lines.append(f"== {g['group']}: {g['device']} ({g['kind']}; {bw})")
        lines.append(f"   sizes: {sz['stream']:,} f32 streamed, matmul {sz['matmul']}^3, "
                     f"C source {sz['cpp_bytes']:,} B, {sz['small']} u32 per small dispatch;"
                     f" vyre timed by {'device timers' if g['device_timers'] else 'host clock'}")
        lines.append(group_table(doc, g))
        if g["missing_peers"]:
            for name, why in g["missing_peers"].items():
                lines.append(f"   peer {name} not run: {why}")
    port = portability_table(doc)
    if port:
        lines.append("")
        lines.append(port)
    lines.append("")
    lines.append("Figures: median of repeated runs after warm-up; each counted only after its "
                 "output passed its check. (NN%) = share of the device's copy bandwidth; "
                 "'w' = host-clock timing (no device timer on that side).")
    for r in doc["cpp_ratio"]:
        ratio = r["host_over_resident"]
        verdict = (f"{ratio:.1f}x faster" if ratio >= 1
                   else f"{1 / ratio:.1f}x slower (nothing to save where the device is the host)")
        lines.append(f"C front end on {r['implementation']}: resident {r['resident_ms']:.3g} ms,"
                     f" host path {r['host_ms']:.3g} ms: resident is {verdict}")
    for r in doc.get("exact_atomic_cost", ()):
        own = r["cost_vs_vyre_relaxed"]
        lines.append(
            f"Exact f32 atomics ({r['row']}) on {r['exact']}: {r['exact_Gadd_s']:.3g} Gadd/s, "
            + (f"{own:.2f}x the time of vyre's relaxed atomic, " if own is not None else "")
            + f"{r['cost_vs_fastest_relaxed']:.2f}x that of the fastest relaxed one "
            f"({r['fastest_relaxed']}); goal: at most 2x")
    if any(c.get("note") for c in doc["comparisons"]):
        notes = dict.fromkeys(f"{c['group']}: {c['note']}" for c in doc["comparisons"]
                              if c.get("note"))
        lines.extend(f"Note on {n}." for n in notes)
    slow = [c for c in doc["comparisons"] if c["vyre_slower"]]
    if slow:
        lines.append("")
        lines.append(f"vyre slower than the best peer by more than "
                     f"{settings['slower_threshold']:.0%}:")
        for c in slow:
            lines.append(f"  {c['metric']} on {c['group']}: {c['vyre']} "
                         f"{fmt_value(c['vyre_value'], c['unit'])} vs {c['best_peer']} "
                         f"{fmt_value(c['peer_value'], c['unit'])} {c['unit']} "
                         f"({c['vyre_speed_vs_best_peer']:.2f}x)")
    bad = [r for r in doc["results"] if r["status"] in ("failed", "error")]
    if bad or doc["problems"]:
        lines.append("")
        lines.append("Problems:")
        for r in bad:
            lines.append(f"  {r['metric']} on {r['implementation']} ({r['group']}): "
                         f"{r['status']}: {r['check'] or r['detail']}")
        for p in doc["problems"]:
            lines.append(f"  {p}")
    na = sorted({(r["implementation"], r["metric"], r["detail"]) for r in doc["results"]
                 if r["status"] == "n/a"})
    if na:
        lines.append("")
        lines.append("Not applicable:")
        by_reason: dict[tuple[str, str], list[str]] = {}
        for impl, metric, why in na:
            by_reason.setdefault((impl, why), []).append(metric)
        for (impl, why), metrics in by_reason.items():
            lines.append(f"  {impl}: {', '.join(metrics)}: {why}")
    return "\n".join(lines)


def portability_table(doc: dict[str, Any]) -> str:
    """Per device that more than one vyre backend ran on: each backend's figure as a share
    of the best backend's on that device (1.00 = the best)."""
    rows_all = doc.get("portability", [])
    parts: list[str] = []
    for device in dict.fromkeys(r["device"] for r in rows_all):
        on_dev = [r for r in rows_all if r["device"] == device]
        impls = list(dict.fromkeys(r["implementation"] for r in on_dev))
        rows = []
        for metric in dict.fromkeys(r["metric"] for r in on_dev):
            cells = {r["implementation"]: r for r in on_dev if r["metric"] == metric}
            unit = next(iter(cells.values()))["unit"]
            rows.append([metric, unit, *(
                f"{cells[i]['share_of_best']:.2f} ({fmt_value(cells[i]['value'], unit)})"
                if i in cells else "-" for i in impls)])
        parts.append(f"== portability on {device}: each vyre backend / the best vyre backend "
                     "on this device (figure)")
        parts.append(format_table(["metric", "unit", *impls], rows,
                                  align=["l", "l", *("r" for _ in impls)]))
    return "\n".join(parts)


def write_json(doc: dict[str, Any], path: Path) -> None:
    path.write_text(json.dumps(doc, indent=2, sort_keys=False, default=str) + "\n")


def write_sources(doc: dict[str, Any], out_dir: Path) -> list[str]:
    """The generated device source of every vyre program timed, for inspection."""
    written = []
    for backend_id, progs in doc.get("sources", {}).items():
        d = out_dir / "sources"  # flat: <backend>__<program>.<ext>
        d.mkdir(parents=True, exist_ok=True)
        ext = ".cu" if backend_id.startswith("cuda") else (
            ".wgsl" if backend_id.startswith("wgpu") else ".txt")
        for name, src in progs.items():
            p = d / f"{backend_id.replace(':', '_')}__{name}{ext}"
            p.write_text(src)
            written.append(str(p))
    return written


__all__ = ["W", "fmt_value", "group_table", "portability_table", "text_report", "write_json",
           "write_sources"]
