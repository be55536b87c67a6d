"""The per-chapter bar chart (matplotlib, Agg backend, no Sphinx here)."""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

from .data import Chapter
from .fmt import format_time

PALETTE = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b"]


def plot_data(chapter: Chapter, n: int) -> dict:
    """What the plot shows, as plain data (also the key of the image's file name)."""
    steps = [s for s in chapter.steps if any(size["n"] == n for size in s["sizes"])]
    series = []
    for timing in chapter.timings:
        values = []
        for step in steps:
            row = chapter.step_row(step["id"], n, timing["id"])
            values.append(None if row is None else
                          [row["median_ms"], row["min_ms"], row["max_ms"]])
        ceiling = chapter.ceiling_row(chapter.share_of, n, timing["id"])
        series.append({
            "timing": timing["id"],
            "label": timing["label"],
            "values": values,
            "ceiling_ms": None if ceiling is None else ceiling["median_ms"],
        })
    ceiling_title = next((c["title"] for c in chapter.ceilings if c["id"] == chapter.share_of),
                         chapter.share_of)
    return {
        "chapter": chapter.id,
        "n": n,
        "steps": [s["id"] for s in steps],
        "series": series,
        "ceiling": chapter.share_of,
        "ceiling_title": ceiling_title,
    }


def alt_text(data: dict) -> str:
    """A text version of the chart for screen readers and broken images."""
    parts = [f"Bar chart, logarithmic time axis: median time per step of chapter "
             f"{data['chapter']} (n = {data['n']})."]
    for s in data["series"]:
        vals = ", ".join(
            f"{step} {format_time(v[0]) if v else 'not measured'}"
            for step, v in zip(data["steps"], s["values"])
        )
        ceiling = (f"; ceiling {data['ceiling']} {format_time(s['ceiling_ms'])}"
                   if s["ceiling_ms"] else "")
        parts.append(f"Timing {s['timing']}: {vals}{ceiling}.")
    return " ".join(parts)


def image_name(data: dict) -> str:
    digest = hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:12]
    return f"stepwise-{data['chapter']}-{data['n']}-{digest}.png"


def render(data: dict, out_dir: Path) -> Path:
    """Write the PNG (once per distinct data) and return its path."""
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / image_name(data)
    if path.exists():
        return path

    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter

    steps = data["steps"]
    k = len(data["series"])
    width = 0.8 / max(k, 1)
    fig, ax = plt.subplots(figsize=(max(7.0, 1.0 * len(steps) + 3.5), 4.4), dpi=120)
    for i, s in enumerate(data["series"]):
        color = PALETTE[i % len(PALETTE)]
        xs, meds, lo, hi = [], [], [], []
        for j, v in enumerate(s["values"]):
            if v is None:
                continue
            xs.append(j - 0.4 + width * (i + 0.5))
            meds.append(v[0])
            lo.append(v[0] - v[1])
            hi.append(v[2] - v[0])
        ax.bar(xs, meds, width=width * 0.92, color=color, alpha=0.85,
               label=f"{s['timing']} (median; min\u2013max)", yerr=[lo, hi], capsize=3,
               ecolor="#333333", error_kw={"lw": 1})
        if s["ceiling_ms"]:
            ax.axhline(s["ceiling_ms"], color=color, linestyle="--", linewidth=1.2,
                       label=f"{data['ceiling']} ({s['timing']})")
    ax.set_yscale("log")
    ax.yaxis.set_major_formatter(FuncFormatter(lambda y, _pos: format_time(y)))
    ax.set_xticks(range(len(steps)))
    ax.set_xticklabels(steps, rotation=30, ha="right", fontsize=8)
    ax.set_ylabel("median time per launch (log scale)")
    ax.set_title(f"{data['chapter']}: median time per step, n = {data['n']}", fontsize=10)
    ax.grid(axis="y", which="both", alpha=0.3)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)
    fig.tight_layout()
    tmp = path.with_suffix(".tmp.png")
    fig.savefig(tmp, format="png")
    plt.close(fig)
    tmp.replace(path)
    return path
