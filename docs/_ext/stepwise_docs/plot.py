"""The per-chapter bar chart (matplotlib, Agg backend, no Sphinx here)."""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

from .data import Chapter
from .fmt import baseline_label, format_time

PALETTE = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b"]
BASELINE_COLORS = ["#111111", "#8c564b", "#e377c2"]


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
        baselines = []
        for baseline in chapter.baselines:
            row = chapter.baseline_row(baseline["id"], n, timing["id"])
            if row is not None:
                baselines.append({"id": baseline["id"],
                                  "label": baseline_label(chapter, baseline["id"]),
                                  "median_ms": row["median_ms"]})
        series.append({
            "timing": timing["id"],
            "label": timing["label"],
            "values": values,
            "ceiling_ms": None if ceiling is None else ceiling["median_ms"],
            "baselines": baselines,
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
        baselines = "".join(f"; baseline {b['id']} {format_time(b['median_ms'])}"
                            for b in s.get("baselines", []))
        parts.append(f"Timing {s['timing']}: {vals}{ceiling}{baselines}.")
    return " ".join(parts)


#: Bump when the drawing changes, so that images cached under the doctrees are redrawn.
STYLE_VERSION = 2


def image_name(data: dict) -> str:
    key = json.dumps({"data": data, "style": STYLE_VERSION}, sort_keys=True)
    digest = hashlib.sha256(key.encode()).hexdigest()[:12]
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
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    steps = data["steps"]
    k = len(data["series"])
    width = 0.8 / max(k, 1)
    # Wide enough for the step names, narrow enough that the text stays legible when the
    # browser scales the image to the page's width; the legend goes under the axes.
    fig, ax = plt.subplots(figsize=(min(max(7.0, 0.6 * len(steps) + 3.0), 11.0), 5.2), dpi=120)
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
                       label=f"ceiling {data['ceiling']} ({s['timing']})")
        for b_index, b in enumerate(s.get("baselines", [])):
            ax.axhline(b["median_ms"], color=BASELINE_COLORS[(i + b_index) % len(BASELINE_COLORS)],
                       linestyle=":", linewidth=1.8,
                       label=f"baseline {b['label']}: {b['id']} ({s['timing']})")
    ax.set_yscale("log")
    # Labelled ticks at 1, 1.5, 2, 3, 5 and 7 times each power of ten, so that an axis
    # spanning less than a decade still has a few, all in time units.
    ax.yaxis.set_major_locator(LogLocator(base=10.0, subs=(1.0, 1.5, 2.0, 3.0, 5.0, 7.0)))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda y, _pos: format_time(y)))
    ax.yaxis.set_minor_formatter(NullFormatter())
    ax.tick_params(axis="y", labelsize=8)
    ax.set_xticks(range(len(steps)))
    ax.set_xticklabels(steps, rotation=35, ha="right", fontsize=8)
    ax.set_ylabel("median time (log scale)")
    ax.set_title(f"{data['chapter']}: median time per step, n = {data['n']}", fontsize=10)
    ax.grid(axis="y", which="both", alpha=0.3)
    handles, labels = ax.get_legend_handles_labels()
    fig.legend(handles, labels, fontsize=8, loc="lower center", ncol=min(len(labels), 3),
               frameon=False)
    fig.tight_layout(rect=(0.0, 0.07 + 0.035 * ((len(labels) - 1) // 3), 1.0, 1.0))
    tmp = path.with_suffix(".tmp.png")
    fig.savefig(tmp, format="png")
    plt.close(fig)
    tmp.replace(path)
    return path
