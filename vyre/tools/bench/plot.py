"""The optional PNG chart of `vyre bench`: vyre vs peers per workload, one panel per metric.

Needs matplotlib (`pip install 'vyre[plot]'`); without it `plot` returns the reason it was
skipped instead of raising. This module only draws figures already in the report document;
it must never run, time or check anything, and never draw a figure whose check failed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


def plot(doc: dict[str, Any], path: Path) -> str | None:
    """Draw the chart to `path`; returns None on success, else why it was skipped."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:
        return (f"matplotlib is not installed ({exc}); pip install 'vyre[plot]' to get "
                "the PNG chart")
    ok = [r for r in doc["results"] if r["status"] == "ok" and r["value"] is not None]
    metrics = list(dict.fromkeys(r["metric"] for r in ok))
    if not metrics:
        return "no figure passed its check, so there is nothing to draw"
    cols = 4
    rows = -(-len(metrics) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, 3.2 * rows), squeeze=False)
    for ax, metric in zip(axes.flat, metrics):
        rs = [r for r in ok if r["metric"] == metric]
        labels = [f"{r['implementation']}\n[{r['group']}]" for r in rs]
        colors = ["tab:orange" if r["is_vyre"] else "tab:blue" for r in rs]
        ax.barh(range(len(rs)), [r["value"] for r in rs], color=colors)
        ax.set_yticks(range(len(rs)))
        ax.set_yticklabels(labels, fontsize=7)
        ax.invert_yaxis()
        unit = rs[0]["unit"]
        better = "higher" if rs[0]["better"] == "higher" else "lower"
        ax.set_title(f"{metric} ({unit}, {better} is better)", fontsize=9)
        if rs[0]["better"] == "lower" and min(r["value"] for r in rs) > 0:
            ax.set_xscale("log")
        ax.tick_params(axis="x", labelsize=7)
    for ax in list(axes.flat)[len(metrics):]:
        ax.axis("off")
    mode = "quick" if doc["settings"]["quick"] else "full"
    fig.suptitle(f"vyre {doc['vyre_version']} bench ({mode}): vyre (orange) vs peers (blue)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return None
