"""The optional PNG chart of `vyre bench`: ratios, one panel per device, never raw figures
of different units or devices on one axis.

One panel per vyre backend (its device group): one bar per workload, vyre's figure over the
best peer's on the same device with the same kind of timer (1.0 = parity, higher = vyre
faster). Where several vyre backends ran on one physical device, one more panel per device
shows each backend's share of the best backend on that device (the portability table).

Needs matplotlib (`pip install 'vyre[plot]'`); without it `plot` returns the reason it was
skipped instead of raising. This module only draws ratios already in the report document;
it must never run, time or check anything, and never draw a figure whose check failed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


def _panels(doc: dict[str, Any]) -> list[tuple[str, list[tuple[str, float]]]]:
    """(title, [(bar label, ratio)]) per panel."""
    panels: list[tuple[str, list[tuple[str, float]]]] = []
    device_of = {g["group"]: g["device"] for g in doc["groups"]}
    for g in dict.fromkeys(c["group"] for c in doc["comparisons"]):
        bars = [(c["metric"], float(c["vyre_speed_vs_best_peer"]))
                for c in doc["comparisons"] if c["group"] == g]
        vy = next(c["vyre"] for c in doc["comparisons"] if c["group"] == g)
        panels.append((f"{vy} / best peer\n{device_of.get(g, g)}", bars))
    port = doc.get("portability", [])
    for device in dict.fromkeys(r["device"] for r in port):
        bars = [(f"{r['metric']}\n{r['implementation']}", float(r["share_of_best"]))
                for r in port if r["device"] == device]
        panels.append((f"portability: backend / best backend\n{device}", bars))
    return panels


def plot(doc: dict[str, Any], path: Path) -> str | None:
    """Draw the chart to `path`; returns None on success, else why it was skipped."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:
        return (f"matplotlib is not installed ({exc}); pip install 'vyre[plot]' to get "
                "the PNG chart")
    panels = [p for p in _panels(doc) if p[1]]
    if not panels:
        return "no ratio could be formed (no figure passed its check next to a peer's)"
    cols = min(3, len(panels))
    rows = -(-len(panels) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(5.5 * cols, 0.35 * max(
        len(b) for _, b in panels) * rows + 1.6 * rows), squeeze=False)
    for ax, (title, bars) in zip(axes.flat, panels):
        labels = [b[0] for b in bars]
        vals = [b[1] for b in bars]
        colors = ["tab:green" if v >= 0.9 else ("tab:orange" if v >= 0.5 else "tab:red")
                  for v in vals]
        ax.barh(range(len(vals)), vals, color=colors)
        ax.axvline(1.0, color="black", linewidth=0.8)
        ax.set_yticks(range(len(vals)))
        ax.set_yticklabels(labels, fontsize=7)
        ax.invert_yaxis()
        ax.set_title(title, fontsize=9)
        ax.set_xlabel("ratio (1.0 = parity; higher is better for vyre)", fontsize=7)
        for i, v in enumerate(vals):
            ax.text(v, i, f" {v:.2f}", va="center", fontsize=6)
        ax.tick_params(axis="x", labelsize=7)
    for ax in list(axes.flat)[len(panels):]:
        ax.axis("off")
    mode = "quick" if doc["settings"]["quick"] else "full"
    fig.suptitle(f"vyre {doc['vyre_version']} bench ({mode}): ratios per device")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return None
