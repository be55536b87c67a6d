"""The per-chapter bar chart (matplotlib, Agg backend, no Sphinx here)."""
from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path
from typing import Any

from .data import Chapter
from .fmt import baseline_label, flop_rate_unit, format_flop_rate, format_time

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
        "gpu": chapter.dataset.gpu.get("name", ""),
        "n": n,
        "problem": chapter.problem(n),
        "steps": [s["id"] for s in steps],
        "series": series,
        "ceiling": chapter.share_of,
        "ceiling_title": ceiling_title,
    }


def alt_text(data: dict) -> str:
    """A text version of the chart for screen readers and broken images."""
    on = f" on {data['gpu']}" if data.get("gpu") else ""
    parts = [f"Bar chart, logarithmic time axis: median time per step of chapter "
             f"{data['chapter']} ({_problem(data)}){on}."]
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


def _problem(data: dict) -> str:
    """The size a plot is drawn at, in words: its registry problem text (``16384 x 8192 LayerNorm fp32``; never the
    key that stands for a shaped size), else ``n = N``."""
    return data.get("problem") or f"n = {data['n']}"


#: Bump when the drawing changes, so that images cached under the doctrees are redrawn.
STYLE_VERSION = 4


def image_name(data: dict) -> str:
    key = json.dumps({"data": data, "style": STYLE_VERSION}, sort_keys=True)
    digest = hashlib.sha256(key.encode()).hexdigest()[:12]
    return f"stepwise-{data['chapter']}-{data['n']}-{digest}.png"


# ---------------------------------------------------------------------------
# Layout: every text inside the figure, none over another
# ---------------------------------------------------------------------------

def _pyplot():
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def figure_texts(fig) -> list[tuple[str, Any]]:
    """The texts of a drawn figure that must be read whole, with their boxes in display units: the figure's title,
    each panel's title, axis labels and annotations, and the legends (each as one box)."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    out: list[tuple[str, Any]] = []

    def add(what: str, artist) -> None:
        if artist is not None and artist.get_visible() and (not hasattr(artist, "get_text") or artist.get_text()):
            out.append((what, artist.get_window_extent(renderer)))

    suptitle = getattr(fig, "_suptitle", None)
    add(f"figure title {suptitle.get_text()!r}" if suptitle is not None else "", suptitle)
    for i, ax in enumerate(fig.axes):
        for name, text in (("title", ax.title), ("x label", ax.xaxis.label), ("y label", ax.yaxis.label)):
            add(f"panel {i + 1} {name} {text.get_text()!r}", text)
        for text in ax.texts:  # notes on the data (a point's step number, the L2 line's label)
            add(f"panel {i + 1} note {text.get_text()!r}", text)
        add(f"panel {i + 1} legend", ax.get_legend())
    for i, legend in enumerate(fig.legends):
        add(f"legend {i + 1}", legend)
    return out


def layout_problems(fig) -> list[str]:
    """What a reader would not read whole in a drawn figure: a text or legend of :func:`figure_texts` that reaches
    outside the figure (clipped in the image), or two that overlap. Empty: every text stands clear."""
    texts = figure_texts(fig)
    frame = fig.bbox
    problems = [f"{what} reaches outside the figure" for what, box in texts
                if box.x0 < frame.x0 - 1 or box.y0 < frame.y0 - 1 or box.x1 > frame.x1 + 1 or box.y1 > frame.y1 + 1]
    for i, (what, box) in enumerate(texts):
        for other, other_box in texts[i + 1:]:
            if " note " in what and " note " in other:
                continue  # labels of neighbouring points may touch: each still names its point
            if (min(box.x1, other_box.x1) - max(box.x0, other_box.x0) > 1
                    and min(box.y1, other_box.y1) - max(box.y0, other_box.y0) > 1):
                problems.append(f"{what} overlaps {other}")
    return problems


def _wrapped(text: str, fig, fontsize: float) -> str:
    """``text`` with each of its lines wrapped at spaces to what the figure's width holds at ``fontsize`` (an
    average character taken as 0.6 of the size), so that a long problem text stays inside the image."""
    import textwrap

    columns = max(20, int(fig.get_figwidth() * 72 / (0.6 * fontsize)))
    return "\n".join(textwrap.fill(line, columns) for line in text.split("\n"))


def _legend_below(fig, handles: list, labels: list[str], max_columns: int, fontsize: float):
    """The figure's legend, under its panels (constrained layout makes room for it), in as many columns, up to
    ``max_columns``, as fit the figure's width."""
    for columns in range(max(1, min(max_columns, len(labels))), 0, -1):
        legend = fig.legend(handles, labels, fontsize=fontsize, loc="outside lower center", ncol=columns,
                            frameon=False)
        fig.canvas.draw()
        if legend.get_window_extent(fig.canvas.get_renderer()).width <= fig.bbox.width or columns == 1:
            return legend
        legend.remove()
    return None  # pragma: no cover - the loop returns at one column


def _titles(fig) -> str:
    """The figure's titles, the figure's own first, joined by `` | ``: written into the image's metadata (Title), so
    that what a plot is titled can be read without looking at it."""
    titles = [getattr(fig, "_suptitle", None)] + [ax.title for ax in fig.axes]
    return " | ".join(t.get_text() for t in titles if t is not None and t.get_text())


def _save(fig, path: Path) -> Path:
    plt = _pyplot()
    tmp = path.with_suffix(".tmp.png")
    fig.savefig(tmp, format="png", metadata={"Title": _titles(fig)})
    plt.close(fig)
    tmp.replace(path)
    return path


# ---------------------------------------------------------------------------
# The bar chart of a chapter's steps at one size (stepwise-plot)
# ---------------------------------------------------------------------------

def bar_figure(data: dict):
    """The bar chart of :func:`plot_data`, drawn (not saved): median time per step, one bar per timing, min-max
    error bars, the ceiling dashed and each library baseline dotted, the legend under the axes."""
    plt = _pyplot()
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    steps = data["steps"]
    k = len(data["series"])
    width = 0.8 / max(k, 1)
    # Wide enough for the step names, narrow enough that the text stays legible when the
    # browser scales the image to the page's width.
    fig, ax = plt.subplots(figsize=(min(max(7.0, 0.6 * len(steps) + 3.0), 11.0), 5.6), dpi=120,
                           layout="constrained")
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
            named = b["label"] if b["label"] == b["id"] else f"{b['label']}: {b['id']}"
            ax.axhline(b["median_ms"], color=BASELINE_COLORS[(i + b_index) % len(BASELINE_COLORS)],
                       linestyle=":", linewidth=1.8, label=f"baseline {named} ({s['timing']})")
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
    on = f" on {data['gpu']}" if data.get("gpu") else ""
    ax.set_title(_wrapped(f"{data['chapter']}: median time per step{on}\n{_problem(data)}", fig, 10), fontsize=10)
    ax.grid(axis="y", which="both", alpha=0.3)
    handles, labels = ax.get_legend_handles_labels()
    _legend_below(fig, handles, labels, 3, 8)
    return fig


def render(data: dict, out_dir: Path) -> Path:
    """Write the PNG of :func:`bar_figure` (once per distinct data) and return its path."""
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / image_name(data)
    if path.exists():
        return path
    return _save(bar_figure(data), path)


# ---------------------------------------------------------------------------
# The sweep over sizes and the roofline (stepwise-sweep, stepwise-roofline)
# ---------------------------------------------------------------------------

def kind_image_name(kind: str, data: dict) -> str:
    """``stepwise-<kind>-<chapter>-<digest>.png`` (distinct from the bar charts' names)."""
    key = json.dumps({"kind": kind, "data": data, "style": STYLE_VERSION}, sort_keys=True)
    digest = hashlib.sha256(key.encode()).hexdigest()[:12]
    return f"stepwise-{kind}-{data['chapter']}-{digest}.png"


def _rate_text(value: float, unit: str) -> str:
    from .fmt import sig

    return f"{sig(value)} {unit}"


def _axis_name(data: dict) -> str:
    """What a sweep is drawn against: ``n``, or its ``axis_label`` (a sweep with ``sweep.axis``)."""
    return data.get("axis_label") or "n"


def axis_name_parts(data: dict) -> tuple[str, str]:
    """What a sweep is drawn against, as the panels name it and the rest for the figure's title: ``sequence length
    (16 heads of 128, 16k tokens: batch x seq)`` -> ``("sequence length", "16 heads of 128, 16k tokens: batch x
    seq")``; ``n`` -> ``("n", "")``."""
    name = _axis_name(data)
    head, paren, rest = name.partition(" (")
    if paren and rest.endswith(")") and head.strip():
        return head.strip(), rest[:-1].strip()
    return name, ""


def sweep_alt_text(data: dict) -> str:
    on = f" on {data['gpu']}" if data.get("gpu") else ""
    x = _axis_name(data)
    parts = [f"Line chart, logarithmic axes: {data['unit']} against {x} (log2) for chapter "
             f"{data['chapter']}, timing {data['timing']}{on}, beside the median time against {x}."]
    for s in data["series"]:
        points = ", ".join(f"{x} = {n}: {_rate_text(v, data['unit'])}"
                           for n, v in zip(data["sizes"], s["values"]) if v is not None)
        if not points:
            points = ", ".join(f"{x} = {n}: {format_time(t)}"
                               for n, t in zip(data["sizes"], s.get("times", [])) if t is not None)
        parts.append(f"{s['kind'].capitalize()} {s['id']}: {points or 'not measured'}.")
    if data.get("l2_n"):
        parts.append(f"The data fills the L2 cache ({_l2_text(data['l2_bytes'])}) at n = "
                     f"{data['l2_n']:.4g}.")
    return " ".join(parts)


def _l2_text(l2_bytes: int) -> str:
    from .fmt import format_bytes

    return format_bytes(l2_bytes)


def _is_power_of_two(n: int) -> bool:
    return n > 0 and not n & (n - 1)


def off_grid_sizes(sizes: list[int]) -> list[int]:
    """The sizes that are odd neighbours of a measured power of two: not one themselves, and within a fifth of an
    octave of one that is measured (1000 and 4095 beside 1024 and 4096, 8191 x 8193 beside 8192 x 8192). A sweep
    draws them as points of their own, not joined to the line through the others (a line through 4095, 4096 and
    4097 would be a zig-zag that says nothing about size), and leaves their ticks unlabelled so that labels never
    collide."""
    return [n for n in sizes if not _is_power_of_two(n) and any(
        m != n and _is_power_of_two(m) and abs(math.log2(n / m)) < 0.2 for m in sizes)]


def _size_axis(ax, sizes: list[int], name: str = "n") -> None:
    """log2 n (or the axis ``name``); every size a tick, labelled but for the :func:`off_grid_sizes`."""
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullFormatter, NullLocator

    ax.set_xscale("log", base=2)
    crowded = off_grid_sizes(sizes)
    labelled = [n for n in sizes if n not in crowded]
    if len(labelled) > 9:  # many sizes: label every other one, left to right
        crowded += labelled[1::2]
        labelled = labelled[0::2]
    ax.xaxis.set_major_locator(FixedLocator(labelled))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _p: _n_text(x)))
    ax.xaxis.set_minor_locator(FixedLocator(sorted(crowded)) if crowded else NullLocator())
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_xlabel(f"{name} (log\u2082 scale)")


def _n_text(x: float) -> str:
    """An n as a tick label: 2^k (mathtext) for powers of two from 2^14, else the number."""
    n = int(round(x))
    if n >= 1 << 14 and not n & (n - 1):
        return f"$2^{{{n.bit_length() - 1}}}$"
    return f"{n}"


def sweep_figure(data: dict):
    """The sweep of :func:`.sweep.sweep`, drawn (not saved): two panels against n (log2; or the sweep's
    ``axis_label``), the median time and the rate, both log scale. Steps solid lines (dotted where not the same
    operation), baselines thick dashed, ceilings thin dashed grey; the :func:`off_grid_sizes` as unjoined points of
    each row's colour; a vertical line where the problem's data fills the L2 cache. The panels name the axis by its
    first words; the figure's title says the rest."""
    plt = _pyplot()
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    from .fmt import sig

    fig, (ax_t, ax_r) = plt.subplots(1, 2, figsize=(10.0, 5.2), dpi=120, layout="constrained")
    cmap = plt.get_cmap("tab20")
    greys = ["#666666", "#999999", "#bbbbbb"]
    count = {"step": 0, "baseline": 0, "ceiling": 0}
    sizes = data["sizes"]
    apart = set(off_grid_sizes(sizes))
    for s in data["series"]:
        i = count[s["kind"]]
        count[s["kind"]] += 1
        if s["kind"] == "baseline":
            style = dict(color=BASELINE_COLORS[i % len(BASELINE_COLORS)], linestyle="--",
                         linewidth=2.4, marker="s", markersize=4)
            label = f"baseline {s['label']}"
        elif s["kind"] == "ceiling":
            style = dict(color=greys[i % len(greys)], linestyle="--", linewidth=1.0, marker="x",
                         markersize=4)
            label = f"ceiling {s['id']}"
        else:
            # tab20's dark shades first, then its light ones
            style = dict(color=cmap((2 * i) % 20 + (2 * i // 20) % 2),
                         linestyle="-" if s["same_operation"] else ":", linewidth=1.5, marker="o",
                         markersize=3.5)
            label = s["id"] + ("" if s["same_operation"] else " (\u2260 op)")
        for ax, values in ((ax_t, s.get("times", [])), (ax_r, s["values"])):
            points = [(n, v) for n, v in zip(sizes, values) if v is not None]
            line = [(n, v) for n, v in points if n not in apart]
            alone = [(n, v) for n, v in points if n in apart]
            if line:
                ax.plot([n for n, _v in line], [v for _n, v in line], label=label, **style)
            if alone:
                ax.plot([n for n, _v in alone], [v for _n, v in alone], label=None if line else label,
                        **{**style, "linestyle": "none"})
    short, detail = axis_name_parts(data)
    for ax in (ax_t, ax_r):
        _size_axis(ax, sizes, short)
        ax.set_yscale("log")
        ax.yaxis.set_major_locator(LogLocator(base=10.0, subs=(1.0, 2.0, 5.0)))
        ax.yaxis.set_minor_formatter(NullFormatter())
        ax.tick_params(axis="both", labelsize=8.5)
        ax.grid(which="both", alpha=0.3)
        if data.get("l2_n"):
            text = f"data = L2 ({_l2_text(data['l2_bytes'])})"
            ax.axvline(data["l2_n"], color="#6a1b9a", linestyle="-.", linewidth=1.2, label=text)
            span = math.log(sizes[-1] / sizes[0]) or 1.0
            right = math.log(data["l2_n"] / sizes[0]) / span > 0.6
            ax.annotate(text, (data["l2_n"], 1.0), xycoords=("data", "axes fraction"),
                        xytext=(-4 if right else 4, -12), textcoords="offset points",
                        ha="right" if right else "left", fontsize=8, color="#6a1b9a")
    ax_t.yaxis.set_major_formatter(FuncFormatter(lambda y, _pos: format_time(y)))
    ax_r.yaxis.set_major_formatter(FuncFormatter(lambda y, _pos: sig(y)))
    ax_t.set_ylabel("median time (log scale)", fontsize=9)
    ax_r.set_ylabel(f"{data['unit']} (log scale)", fontsize=9)
    ax_t.set_title(f"median time against {short}", fontsize=9.5)
    ax_r.set_title(f"{data['unit']} against {short}", fontsize=9.5)
    on = f" on {data['gpu']}" if data.get("gpu") else ""
    title = f"{data['chapter']} ({data['timing']}){on}"
    fig.suptitle(_wrapped(title + (f"\n{short}: {detail}" if detail else ""), fig, 10.5), fontsize=10.5)
    handles, labels = [], []
    for ax in (ax_t, ax_r):
        for h, l in zip(*ax.get_legend_handles_labels()):
            if l not in labels:
                handles.append(h)
                labels.append(l)
    _legend_below(fig, handles, labels, 4, 8.5)
    return fig


def _render(kind: str, figure, data: dict, out_dir: Path) -> Path:
    """Write the PNG that ``figure(data)`` draws, named for ``kind`` and the data (once per distinct data), and
    return its path."""
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / kind_image_name(kind, data)
    if path.exists():
        return path
    return _save(figure(data), path)


def render_sweep(data: dict, out_dir: Path) -> Path:
    """Write the PNG of :func:`sweep_figure` (once per distinct data) and return its path."""
    return _render("sweep", sweep_figure, data, out_dir)


def roofline_alt_text(data: dict) -> str:
    unit = _roofline_unit(data)
    parts = [f"Roofline, logarithmic axes: {unit[0]} against FLOPs per DRAM byte, chapter "
             f"{data['chapter']}, {_problem(data)}. Memory roof {_rate_text(data['bandwidth_gbps'], 'GB/s')} "
             f"times the intensity; measured FMA ceiling {format_flop_rate(data['fma_ceiling_gflops'], unit)}; "
             f"computed FMA peak {format_flop_rate(data['peak_gflops'], unit)}."]
    for p in data["points"]:
        parts.append(f"Step {p['id']}: {p['intensity']:.3g} FLOP/B, {format_flop_rate(p['gflops'], unit)}"
                     + ("" if p["same_operation"] else " (not the same operation)") + ".")
    return " ".join(parts)


def _roofline_unit(data: dict) -> tuple[str, float]:
    """The one unit of a roofline's FLOP rates (its points, ceiling and peak): see :func:`.fmt.flop_rate_unit`."""
    return flop_rate_unit([p["gflops"] for p in data["points"]] + [data["fma_ceiling_gflops"], data["peak_gflops"]])


def roofline_figure(data: dict):
    """Log-log roofline, drawn (not saved): the memory roof, the measured and the computed compute roofs, one
    labelled point per step (hollow diamonds for steps that are not the same operation); FLOP rates in one unit."""
    plt = _pyplot()

    unit, factor = _roofline_unit(data)
    bw = data["bandwidth_gbps"] * factor  # GB/s x FLOP/B, in the unit of the rates
    ceiling, peak = data["fma_ceiling_gflops"] * factor, data["peak_gflops"] * factor
    xs = [p["intensity"] for p in data["points"]]
    ys = [p["gflops"] * factor for p in data["points"]]
    ridge = ceiling / bw
    x_lo = min(xs + [ridge]) / 4
    x_hi = max(xs + [ridge]) * 4
    fig, ax = plt.subplots(figsize=(8.5, 6.0), dpi=120, layout="constrained")
    grid = [x_lo * (x_hi / x_lo) ** (i / 200) for i in range(201)]
    ax.plot(grid, [min(bw * x, ceiling) for x in grid], color="#1f77b4", linewidth=2.0,
            label=f"roof: measured copy {_rate_text(data['bandwidth_gbps'], 'GB/s')} \u00d7 intensity, "
                  f"measured FMA ceiling {_rate_text(ceiling, unit)}")
    ax.axhline(peak, color="#d62728", linestyle="--", linewidth=1.2,
               label=f"computed FMA peak {_rate_text(peak, unit)} (computed, not measured)")
    ax.plot(grid, [bw * x for x in grid], color="#1f77b4", linewidth=0.8, linestyle=":", alpha=0.6)
    for p, y in zip(data["points"], ys):
        same = p["same_operation"]
        ax.plot([p["intensity"]], [y], marker="o" if same else "D", markersize=6,
                color="#2ca02c" if same else "#9467bd", markerfacecolor="#2ca02c" if same else "none",
                linestyle="none")
        ax.annotate(p["number"], (p["intensity"], y), textcoords="offset points",
                    xytext=(5, 4), fontsize=8)
    ax.plot([], [], marker="o", color="#2ca02c", linestyle="none", label="step (fp32)")
    if not all(p["same_operation"] for p in data["points"]):
        ax.plot([], [], marker="D", color="#9467bd", markerfacecolor="none", linestyle="none",
                label="step, not the same operation (not bound by the fp32 roofs)")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(x_lo, x_hi)
    ax.set_ylim(min(ys + [bw * x_lo]) / 2, max(ys + [peak]) * 2)
    ax.tick_params(axis="both", labelsize=8)
    ax.set_xlabel("arithmetic intensity: FLOPs per DRAM byte (read + written; log scale)")
    ax.set_ylabel(f"{unit} (log scale)")
    ax.set_title(_wrapped(f"{data['chapter']}: roofline at {_problem(data)} ({data['timing']})", fig, 10), fontsize=10)
    ax.grid(which="both", alpha=0.3)
    handles, labels = ax.get_legend_handles_labels()
    _legend_below(fig, handles, labels, 1, 7)
    return fig


def render_roofline(data: dict, out_dir: Path) -> Path:
    """Write the PNG of :func:`roofline_figure` (once per distinct data) and return its path."""
    return _render("roofline", roofline_figure, data, out_dir)
