"""Turning measured rows into the text the pages show (no Sphinx here).

Every number comes from a measurement file row; what this module adds is
arithmetic on those numbers (speedups are ratios of two medians of the same
run, same size and same timing) and units.
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

from .data import Chapter, Dataset

DASH = "\u2014"  # em dash: "no value"
EN_DASH = "\u2013"  # ranges
TIMES = "\u00d7"
MICRO = "\u00b5"


# ---------------------------------------------------------------------------
# Numbers and units
# ---------------------------------------------------------------------------

def sig(x: float, digits: int = 3) -> str:
    """``x`` with ``digits`` significant digits, without exponent for ordinary sizes."""
    if x == 0 or not math.isfinite(x):
        return f"{x:g}"
    magnitude = math.floor(math.log10(abs(x)))
    decimals = max(digits - 1 - magnitude, 0)
    return f"{x:,.{decimals}f}"


def plain(x: float) -> str:
    """A reading such as a clock or a temperature: an integer if it is one, else as given."""
    return str(int(x)) if float(x).is_integer() else f"{x:g}"


def time_unit(ms: float) -> tuple[str, float]:
    """The unit a time of ``ms`` milliseconds reads best in, and the factor from ms."""
    if ms >= 1000.0:
        return "s", 1e-3
    if ms >= 1.0:
        return "ms", 1.0
    if ms >= 1e-3:
        return f"{MICRO}s", 1e3
    return "ns", 1e6


def format_time(ms: float, unit: tuple[str, float] | None = None) -> str:
    """``0.1354`` -> ``"135 µs"``; ``1.12`` -> ``"1.12 ms"``."""
    name, factor = unit or time_unit(ms)
    return f"{sig(ms * factor)} {name}"


def format_spread(min_ms: float, max_ms: float, median_ms: float) -> str:
    """min–max in the median's unit: ``"134–139 µs"``."""
    name, factor = time_unit(median_ms)
    return f"{sig(min_ms * factor)}{EN_DASH}{sig(max_ms * factor)} {name}"


def _dash_for_none(formatter: Callable[..., str]) -> Callable[..., str]:
    """``formatter``, with a first argument of None (no value) shown as :data:`DASH`."""
    @functools.wraps(formatter)
    def format_or_dash(value: Any, *args: Any, **kwargs: Any) -> str:
        return DASH if value is None else formatter(value, *args, **kwargs)
    return format_or_dash


@_dash_for_none
def format_rate(value: float, unit: str) -> str:
    return f"{sig(value)} {unit}"


#: A FLOP rate of this many GFLOP/s or more reads in TFLOP/s; so do all the rates of its table or plot.
TFLOPS_FROM_GFLOPS = 1000.0


def flop_rate_unit(gflops: Iterable[float | None]) -> tuple[str, float]:
    """The one unit the FLOP rates of a table or plot read in, and its factor from GFLOP/s: TFLOP/s (0.001) where
    any of them is :data:`TFLOPS_FROM_GFLOPS` or more, else GFLOP/s (1). None (no value) is left out."""
    known = [abs(v) for v in gflops if v is not None]
    if known and max(known) >= TFLOPS_FROM_GFLOPS:
        return "TFLOP/s", 1e-3
    return "GFLOP/s", 1.0


def format_flop_rate(gflops: float | None, unit: tuple[str, float] | None = None, with_unit: bool = True) -> str:
    """A FLOP rate given in GFLOP/s, in ``unit`` (default: the one its own magnitude calls for, see
    :func:`flop_rate_unit`): ``787489.0`` -> ``"787 TFLOP/s"``, ``498.0`` -> ``"498 GFLOP/s"``; a dash for None."""
    if gflops is None:
        return DASH
    name, factor = unit or flop_rate_unit([gflops])
    return f"{sig(gflops * factor)} {name}" if with_unit else sig(gflops * factor)


@_dash_for_none
def format_speedup(ratio: float) -> str:
    return f"{sig(ratio)}{TIMES}"


@_dash_for_none
def format_share(fraction: float) -> str:
    """A share of the ceiling, given as a fraction: ``0.623`` -> ``"62.3 %"``."""
    return f"{sig(100.0 * fraction)} %"


@_dash_for_none
def format_bytes(n: int) -> str:
    """Bytes in binary units as the article counts them (16 MB = 16 MiB)."""
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{sig(n / size)} {unit}"
    return f"{n} B"


def format_ulp(accuracy: dict) -> str:
    ulp = accuracy.get("max_ulp")
    if ulp is not None:
        return f"{sig(ulp) if ulp != int(ulp) else int(ulp)} ulp"
    rel = accuracy.get("max_rel")
    if rel is not None:
        return f"rel {format_rel(rel)}"
    return DASH


@_dash_for_none
def format_rel(rel: float) -> str:
    if rel == 0:
        return "0"
    return f"{rel:.2e}".replace("e-0", "e-").replace("e+0", "e+")


def format_tests(tests: dict) -> tuple[str, bool]:
    """``"7/7 passed on this GPU"``; the flag says something failed (shown loudly)."""
    passed, failed, skipped = tests["passed"], tests["failed"], tests["skipped"]
    total = passed + failed + skipped
    if total == 0:
        return "no tests ran", True
    if failed:
        text = f"{failed} of {total} FAILED on this GPU"
        if skipped:
            text += f", {skipped} skipped"
        return text, True
    text = f"{passed}/{total} passed on this GPU"
    if skipped:
        text += f" ({skipped} skipped)"
    return text, skipped > 0


# ---------------------------------------------------------------------------
# Provenance
# ---------------------------------------------------------------------------

SOURCE_TEXT = {
    "fresh": "measured in this build",
    "recorded": "recorded measurements, not re-measured in this build",
}


def format_date(iso: str) -> str:
    """``2026-11-23T10:00:00Z`` -> ``2026-11-23 10:00 UTC``."""
    if len(iso) >= 16 and iso[10] == "T":
        return f"{iso[:10]} {iso[11:16]} UTC"
    return iso


def short_commit(commit: str) -> str:
    """A commit as the pages cite it: a full 40-digit hash cut to its first 12 digits, anything else as it is."""
    full = len(commit) == 40 and all(c in "0123456789abcdef" for c in commit)
    return commit[:12] if full else commit


def _run_text(run: dict) -> str:
    """``2026-11-23 10:00 UTC, commit abc1234`` of a chapter's run (``(dirty)`` where the tree had changes)."""
    dirty = " (dirty)" if run.get("dirty") else ""
    return (f"{format_date(run.get('date', 'an unknown date'))}, commit "
            f"{short_commit(run.get('commit', 'unknown'))}{dirty}")


def command_text(command: str) -> str:
    """The command of a run as the pages show it: each path reduced to its file name, since the folders were those
    of the machine that ran it (``--out /root/out/rec/nvidia-h200.json`` -> ``--out nvidia-h200.json``), and a full
    commit hash cut as :func:`short_commit` cuts it. ``--key=/a/b`` keeps its key."""
    def word(token: str) -> str:
        key, equals, value = token.partition("=") if token.startswith("-") else ("", "", token)
        if "/" in value.strip("/"):
            value = value.rstrip("/").rsplit("/", 1)[-1]
        return f"{key}{equals}{short_commit(value)}"

    return " ".join(word(token) for token in command.split())


def _software(run: dict) -> str:
    return f"driver {run.get('driver', 'unknown')}, CUDA {run.get('cuda_runtime', 'unknown')}"


def provenance(dataset: Dataset, chapter: Chapter | None = None) -> str:
    """The one line that says where and when the numbers were measured: those of ``chapter`` (its own run), or
    of the whole file (one run, or the runs its chapters come from, each with its chapters)."""
    if dataset.measurements is None:
        return "No measurements available for this build."
    gpu = dataset.gpu
    where = f"Measured on {gpu['name']} (cc {gpu['compute_capability']}, {gpu['sm_count']} SMs"
    source = f"{DASH} {SOURCE_TEXT[dataset.source]}"
    if chapter is not None and chapter.run:
        return f"{where}, {_software(chapter.run)}), {_run_text(chapter.run)} {source}"
    groups = dataset.runs()
    if len(groups) <= 1:
        run = groups[0].run if groups else dataset.run
        return f"{where}, {_software(run)}), {_run_text(run)} {source}"
    total = sum(len(g.chapters) for g in groups)
    parts = [f"{_run_text(g.run)}, {_software(g.run)} ({', '.join(g.chapters)})" for g in groups]
    return f"{where}), {total} chapters in {len(groups)} runs: {'; '.join(parts)} {source}"


def as_of_note(chapter: Chapter) -> str:
    """What a second GPU's numbers of ``chapter`` are, where steps of it changed after its run measured them
    (:meth:`.data.Chapter.stale_steps`, the state that marks their rows stale) or were added since
    (:meth:`.data.Chapter.added_steps`); empty where none were, and for the reference dataset, a fresh one or the
    reference GPU's file (whose stale or missing rows fail the strict build).

    ``NVIDIA H100 80GB HBM3: measured at commit abc1234 (2026-11-27), before step 12_two_loaders (measured as
    09_ping_pong) changed and step 08_persistent_tile_scheduler was added; not re-measured. The step's source then:
    `git show abc1234:snippets/tensor_core_gemm/09_ping_pong.cuh`.``
    Every changed or added step is named, a step renamed since its run (its ``formerly``) with the id it was
    measured as, and every size added since (:meth:`.data.Chapter.added_sizes`: "and the sizes 8192 × 50257 and
    2048 × 128256 were added"); a command is between backticks (the pages set it as code)."""
    stale = chapter.stale_steps()
    added = [step["id"] for step in chapter.added_steps()]
    shapes = list(dict.fromkeys(" × ".join(map(str, size["shape"])) if size.get("shape") else size["problem"]
                                for size in chapter.added_sizes()))
    if not (stale or added or shapes) or not chapter.dataset.is_second_gpu:
        return ""
    run = chapter.run
    commit = short_commit(run.get("commit", "unknown"))
    dirty = ", with uncommitted changes" if run.get("dirty") else ""
    date = str(run.get("date", "an unknown date"))[:10]

    def steps(ids: list[str]) -> str:
        return f"step {ids[0]}" if len(ids) == 1 else f"steps {_and(ids)}"

    def named(step_id: str) -> str:  # a step renamed since its run: "12_two_loaders (measured as 09_ping_pong)"
        then = chapter.measured_as(step_id)
        return step_id if then == step_id else f"{step_id} (measured as {then})"

    before = []
    if stale:
        before.append(f"{steps([named(step['id']) for step, _state in stale])} changed")
    new = ([steps(added)] if added else []) + ([f"the size{'s' if len(shapes) > 1 else ''} {_and(shapes)}"]
                                                 if shapes else [])
    if new:
        before.append(f"{' and '.join(new)} {'was' if len(added) + len(shapes) == 1 else 'were'} added")
    note = (f"{chapter.dataset.gpu_name}: measured at commit {commit} ({date}{dirty}), before {' and '.join(before)}; "
            "not re-measured.")
    if not stale:
        return note
    # The files the rows were measured from (of a step whose registry entry names another file since: the old one).
    files = list(dict.fromkeys(next(iter(state.rows.values()))["file"] for _step, state in stale))
    whose = "The step's source" if len(stale) == 1 else ("The steps' source" if len(files) == 1 else
                                                         "The steps' sources")
    commands = ", ".join(f"`git show {commit}:{path}`" for path in files)
    return f"{note} {whose} then: {commands}."


# ---------------------------------------------------------------------------
# Table rows
# ---------------------------------------------------------------------------

@dataclass
class Cell:
    text: str
    classes: list[str] = field(default_factory=list)
    title: str = ""  # a tooltip / longer explanation
    sub: str = ""  # a second, smaller line (the spread under a median)
    clock: str = ""  # a third, smaller line: the median SM clock of a row that ran below the boost clock
    clock_title: str = ""  # its tooltip
    unit: str = ""  # the unit of a rate column's number, named in the column's header (GFLOP/s or TFLOP/s)


@dataclass
class Row:
    kind: str  # "step" | "ceiling" | "baseline"
    id: str
    title: str
    cells: dict[str, Cell]
    classes: list[str] = field(default_factory=list)
    badges: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # shown as warnings in the row


COLUMNS = [
    ("median", "median time (min\u2013max)"),
    ("gbps", "GB/s"),
    ("gflops", "GFLOP/s"),
    ("vs_prev", "vs previous"),
    ("vs_first", "vs first"),
    ("share", "share of ceiling"),
    ("accuracy", "max error"),
    ("tests", "tests"),
]


def ratio(numerator_row: dict | None, denominator_row: dict | None) -> float | None:
    """``numerator.median / denominator.median`` (a speedup of the denominator's row)."""
    if numerator_row is None or denominator_row is None:
        return None
    return numerator_row["median_ms"] / denominator_row["median_ms"]


#: A row whose median lies more than this share above its fastest sample has samples that spread
#: (two speeds, or a drift) rather than noise around one speed: a rerun may put its median elsewhere.
SPREAD_LIMIT = 0.06


def median_over_fastest(row: dict) -> float:
    """How far a row's median lies above its fastest sample: ``median / min - 1``."""
    return row["median_ms"] / row["min_ms"] - 1


def share_of_mark(mark_row: dict | None, row: dict | None) -> float | None:
    """A row's share of the ceiling row, as the timing program computes ``share_of_ceiling``.

    The row's GB/s over the ceiling's where both have one (they may count different bytes:
    a reduction reads n items, the copy that is its ceiling reads and writes them), else the
    ceiling's time over the row's.
    """
    if mark_row is None or row is None:
        return None
    if mark_row.get("gbps") and row.get("gbps") is not None:
        return row["gbps"] / mark_row["gbps"]
    return ratio(mark_row, row)


# Library names for the "vs <library>" columns, by the prefix of a baseline's id.
LIBRARIES = {"cub": "CUB", "cublas": "cuBLAS", "cublaslt": "cuBLASLt", "thrust": "Thrust",
             "cufft": "cuFFT", "cusparse": "cuSPARSE", "cutlass": "CUTLASS", "cudnn": "cuDNN"}


def baseline_label(chapter: Chapter, baseline_id: str) -> str:
    """``cub_device_reduce_sum`` -> ``"CUB"``; the id itself where the library is unknown or
    where two baselines of the chapter share the library."""
    def library(bid: str) -> str | None:
        return LIBRARIES.get(bid.split("_", 1)[0].lower())

    name = library(baseline_id)
    if name is None or sum(library(b["id"]) == name for b in chapter.baselines) > 1:
        return baseline_id
    return name


def short_baseline_label(chapter: Chapter, baseline_id: str) -> str:
    """Like :func:`baseline_label`, but where several baselines share a library, the library and
    what sets the id apart from the others': ``cublas_sgemm`` -> ``"cuBLAS"`` and
    ``cublas_sgemm_tf32`` -> ``"cuBLAS tf32"`` (the id where the library is unknown); a library's
    fastest of several algorithms keeps its ``best``: ``cublaslt_gemm_bf16_best`` -> ``"cuBLASLt best"``."""
    def library(bid: str) -> str | None:
        return LIBRARIES.get(bid.split("_", 1)[0].lower())

    name = library(baseline_id)
    if name is None:
        return baseline_id
    same = [b["id"] for b in chapter.baselines if library(b["id"]) == name]
    if len(same) <= 1:
        return f"{name} best" if baseline_id.endswith("_best") else name
    common = same[0]
    for other in same[1:]:
        while not other.startswith(common):
            common = common[:-1]
    # back to a boundary between words of the ids
    while common and not all(len(i) == len(common) or i[len(common)] == "_" for i in same):
        common = common[:-1]
    rest = baseline_id[len(common):].strip("_").replace("_", " ")
    return f"{name} {rest}" if rest else name


def short_title(title: str) -> str:
    """A chapter's title up to its colon: ``"SGEMM: from one thread ..."`` -> ``"SGEMM"``."""
    head, colon, _rest = title.partition(":")
    return head.strip() if colon and head.strip() else title


def timing_name(timing: dict) -> str:
    """A timing in a few words, for narrow places such as the front page: how many launches one sample times and
    whether the L2 cache was flushed before it (cold) or not (warm), from its registry ``launches_per_sample`` and
    ``l2`` (the ``label`` says the rest). ``single_cold`` -> ``"one cold launch"``, ``batch`` -> ``"10 warm
    launches"``; a timing whose label speaks of a call (a launcher's several launches) -> ``"one cold call"``.
    Without those fields, the id with its underscores as spaces."""
    launches, l2 = timing.get("launches_per_sample"), timing.get("l2")
    if not launches or not l2:
        return timing["id"].replace("_", " ")
    what = "call" if "call" in timing.get("label", "").split(";")[0] else "launch"
    cache = "cold" if l2 == "flushed" else "warm"
    if launches == 1:
        return f"one {cache} {what}"
    return f"{launches} {cache} {what}{'es' if what == 'launch' else 's'}"


def baseline_column(baseline_id: str) -> str:
    """The key of a chapter's "vs <baseline>" column in Row.cells."""
    return f"vs:{baseline_id}"


def format_clock(row: dict) -> str:
    """The median SM clock of a row's kept samples, e.g. ``"1,755 MHz"``; a dash where it was not read."""
    clock = row.get("sm_clock_mhz")
    return DASH if not clock else f"{clock['median']:,.0f} MHz"


def _clock_note(row: dict) -> str:
    clock = row.get("sm_clock_mhz")
    if not clock:
        return ""
    return (f"; SM clock {clock['median']:,.0f} MHz (median; "
            f"{clock['min']:,.0f}{EN_DASH}{clock['max']:,.0f} MHz)")


#: A row whose median SM clock lies more than this share below the GPU's boost clock ran below it for most of its
#: kept samples (power- or heat-capped): its time is one of sustained load, not of the boost clock.
BELOW_BOOST = 0.01


def below_boost(row: dict | None, chapter: Chapter) -> tuple[str, str] | None:
    """Where a row's median SM clock (``sm_clock_mhz.median``, over its kept samples) lies more than BELOW_BOOST
    below the GPU's boost clock (``gpu.limits.max_sm_clock_mhz``; in a file without it, the highest clock of the
    chapter's run and rows), the line shown under the row's median and its tooltip, ``("at 1,725 MHz", "median SM
    clock over the kept samples; ...")``; else None: a row at the boost clock, or one whose clock was not read."""
    clock = (row or {}).get("sm_clock_mhz")
    if not clock:
        return None
    boost, what = (chapter.dataset.limits or {}).get("max_sm_clock_mhz"), "the GPU\u2019s boost clock"
    if not boost:
        readings = [r["sm_clock_mhz"]["max"] for kind in ("steps", "ceilings", "baselines")
                    for r in (chapter.measured or {}).get(kind, []) if r.get("sm_clock_mhz")]
        readings += [v for v in (chapter.run.get("sm_clock_mhz") or {}).values() if v]
        if not readings:
            return None
        boost, what = max(readings), "the highest SM clock of this run"
    if clock["median"] >= boost * (1 - BELOW_BOOST):
        return None
    return (f"at {clock['median']:,.0f} MHz",
            f"median SM clock over the kept samples ({clock['min']:,.0f}{EN_DASH}{clock['max']:,.0f} MHz); "
            f"{what} is {boost:,.0f} MHz: this row ran power-capped, a sustained-load figure")


def table_flop_unit(chapter: Chapter, timing: str, n: int, row_ids: Iterable[str] | None = None) -> tuple[str, float]:
    """The unit of the FLOP rates of a table of one size and timing (:func:`flop_rate_unit` over its rows: the
    steps, ceilings and baselines measured there, or those of ``row_ids``)."""
    kinds = ("steps", "ceilings", "baselines")
    rows = [r for kind in kinds for r in (chapter.measured or {}).get(kind, [])
            if r["n"] == n and r["timing"] == timing and (row_ids is None or r["id"] in row_ids)]
    return flop_rate_unit(r.get("gflops") for r in rows)


def _time_cells(row: dict | None, chapter: Chapter | None = None,
                flop_unit: tuple[str, float] = ("GFLOP/s", 1.0)) -> dict[str, Cell]:
    if row is None:
        return {"median": Cell(DASH), "spread": Cell(DASH), "gbps": Cell(DASH),
                "gflops": Cell(DASH, unit=flop_unit[0])}
    clock, clock_title = (below_boost(row, chapter) if chapter is not None else None) or ("", "")
    return {
        "median": Cell(format_time(row["median_ms"]), ["stepwise-num"],
                       f"median of {row['samples']} samples; relative noise "
                       f"{sig(100 * row['rel_noise'], 2)} %; "
                       f"{row['throttled_samples']} throttled samples discarded{_clock_note(row)}",
                       sub=format_spread(row["min_ms"], row["max_ms"], row["median_ms"]),
                       clock=clock, clock_title=clock_title),
        "spread": Cell(format_spread(row["min_ms"], row["max_ms"], row["median_ms"]), ["stepwise-num"]),
        "gbps": Cell(format_rate(row["gbps"], "GB/s").removesuffix(" GB/s") if row["gbps"] is not None
                     else DASH, ["stepwise-num"]),
        "gflops": Cell(format_flop_rate(row["gflops"], flop_unit, with_unit=False), ["stepwise-num"],
                       unit=flop_unit[0]),
    }


def step_rows(chapter: Chapter, timing: str, n: int, flop_unit: tuple[str, float] | None = None) -> list[Row]:
    """The step rows of one table (one timing, one size), registry order; FLOP rates in ``flop_unit`` (default: the
    table's, :func:`table_flop_unit`)."""
    flop_unit = flop_unit or table_flop_unit(chapter, timing, n)
    rows: list[Row] = []
    steps = [s for s in chapter.steps if any(size["n"] == n for size in s["sizes"])]
    first = chapter.step_row(steps[0]["id"], n, timing) if steps else None
    prev: dict | None = None
    for index, step in enumerate(steps):
        row = chapter.step_row(step["id"], n, timing)
        state = chapter.states[step["id"]]
        cells = _time_cells(row, chapter, flop_unit)
        classes: list[str] = []
        notes: list[str] = []
        badges: list[str] = []
        if step.get("beyond_article"):
            badges.append("beyond the sources")
        if row is None:
            classes.append("stepwise-missing")
            notes.append(f"not run: {state.unsupported}" if state.unsupported else
                         "missing: not measured in this file")
            for key in ("vs_prev", "vs_first", "share", "accuracy", "tests"):
                cells[key] = Cell(DASH)
            for baseline in chapter.baselines:
                cells[baseline_column(baseline["id"])] = Cell(DASH)
        else:
            cells["vs_prev"] = Cell(format_speedup(ratio(prev, row)) if index else DASH, ["stepwise-num"])
            cells["vs_first"] = Cell(format_speedup(ratio(first, row)) if index else DASH,
                                     ["stepwise-num"])
            cells["share"] = Cell(format_share(row["share_of_ceiling"]), ["stepwise-num"])
            for baseline in chapter.baselines:
                cells[baseline_column(baseline["id"])] = _vs_baseline_cell(
                    chapter, baseline, row, chapter.baseline_row(baseline["id"], n, timing))
            acc = format_ulp(row["accuracy"])
            acc_classes = ["stepwise-num"]
            acc_title = f"max relative error {format_rel(row['accuracy'].get('max_rel'))}"
            if not row["same_operation"] or not step.get("same_operation", True):
                acc += " \u2260 op"
                acc_classes.append("stepwise-not-same-op")
                acc_title += "; not the same mathematical operation as the original kernel"
            if not row["validated"]:
                acc += " NOT VALIDATED"
                acc_classes.append("stepwise-fail")
                acc_title += "; the timed buffers did not match the reference"
            cells["accuracy"] = Cell(acc, acc_classes, acc_title)
            tests_text, loud = format_tests(row["tests"])
            head, _, tail = tests_text.partition(" on this GPU")
            cells["tests"] = Cell(head + tail, ["stepwise-tests"] + (
                ["stepwise-fail"] if row["tests"]["failed"] else
                (["stepwise-attention"] if loud else [])),
                sub="on this GPU" if _ else "")
            if row["tests"]["failed"] or not row["validated"]:
                classes.append("stepwise-failed")
        if state.stale:
            classes.append("stepwise-stale")
            notes.append("stale: source changed since measured")
        rows.append(Row("step", step["id"], step["title"], cells, classes, badges, notes))
        prev = row
    return rows


def _vs_baseline_cell(chapter: Chapter, baseline: dict, row: dict, base_row: dict | None) -> Cell:
    """The baseline's median over the row's: above 1x the row is faster than the library."""
    value = ratio(base_row, row)
    if value is None:
        return Cell(DASH, title=f"{baseline['id']} was not measured at this size and timing")
    label = baseline_label(chapter, baseline["id"])
    classes = ["stepwise-num"] + (["stepwise-beats-baseline"] if value >= 1.0 else [])
    return Cell(format_speedup(value), classes,
                f"{label}’s median time over this row’s, same run, size and timing "
                f"(above 1×: faster than {label}); this row takes "
                f"{sig(1.0 / value)}× {label}’s time")


def reference_rows(chapter: Chapter, timing: str, n: int, flop_unit: tuple[str, float] | None = None) -> list[Row]:
    """Ceiling rows, then baseline rows, for one table; FLOP rates as in :func:`step_rows`."""
    flop_unit = flop_unit or table_flop_unit(chapter, timing, n)
    out: list[Row] = []
    mark = chapter.ceiling_row(chapter.share_of, n, timing)
    for kind, entries in (("ceiling", chapter.ceilings), ("baseline", chapter.baselines)):
        for entry in entries:
            row = (chapter.ceiling_row if kind == "ceiling" else chapter.baseline_row)(
                entry["id"], n, timing)
            if row is None and n not in chapter.expected_sizes(entry["id"]):
                continue  # a reference of another problem (cuDNN's RMSNorm in a LayerNorm table)
            cells = _time_cells(row, chapter, flop_unit)
            for key in ("vs_prev", "vs_first", "accuracy", "tests"):
                cells[key] = Cell(DASH)
            for baseline in chapter.baselines:
                own = kind == "baseline" and baseline["id"] == entry["id"] and row is not None
                cells[baseline_column(baseline["id"])] = Cell(
                    "1× (itself)" if own else DASH, ["stepwise-num"] if own else [])
            if kind == "ceiling" and entry["id"] == chapter.share_of:
                cells["share"] = Cell("100 % (the mark)" if row else DASH, ["stepwise-num"])
            elif kind == "baseline":
                cells["share"] = Cell(format_share(share_of_mark(mark, row)), ["stepwise-num"])
            else:
                cells["share"] = Cell(DASH)
            notes = [] if row else [f"not run: {chapter.unsupported[entry['id']]}"
                                    if entry["id"] in chapter.unsupported else "missing: not measured in this file"]
            out.append(Row(kind, entry["id"], entry["title"], cells,
                           [f"stepwise-{kind}"] + ([] if row else ["stepwise-missing"]), [], notes))
    return out


RATE_COLUMNS = ("gbps", "gflops")


def used_columns(rows: list[Row], chapter: Chapter | None = None) -> list[tuple[str, str]]:
    """The table's columns: GB/s and the FLOP rate only where a step row has a value (where the table has step rows;
    else where any row has), the latter headed with its unit (:func:`table_flop_unit`); with a chapter, one
    "vs <library>" column per baseline after the share of the ceiling, where a step row has a value in it. A
    reference row's rate in a column left out is set beside its title (:func:`rates_left_out`)."""
    counted = [r for r in rows if r.kind == "step"] or rows

    def has_value(key: str) -> bool:
        return any(key in r.cells and r.cells[key].text != DASH for r in counted)

    cols = []
    for key, label in COLUMNS:
        if key in RATE_COLUMNS and not has_value(key):
            continue
        if key == "gflops":
            label = next((r.cells[key].unit for r in rows if r.cells[key].unit), label)
        cols.append((key, label))
        if key == "share" and chapter is not None:
            cols += [(baseline_column(b["id"]), f"vs {baseline_label(chapter, b['id'])}")
                     for b in chapter.baselines if has_value(baseline_column(b["id"]))]
    return cols


def rates_left_out(row: Row, cols: list[tuple[str, str]]) -> str:
    """A reference row's rates in the columns :func:`used_columns` left out (no step has one), as they read beside its
    title: ``"3,964 GB/s"``; empty where it has none."""
    shown = {key for key, _label in cols}
    units = {"gbps": "GB/s", "gflops": row.cells["gflops"].unit or "GFLOP/s"}
    return ", ".join(f"{row.cells[key].text} {units[key]}" for key in RATE_COLUMNS
                     if key not in shown and row.cells[key].text != DASH)


# ---------------------------------------------------------------------------
# Single values (the stepwise-number role)
# ---------------------------------------------------------------------------

FIELDS = {
    "median": "median time",
    "min": "fastest sample",
    "max": "slowest sample",
    "spread": "min\u2013max",
    "gbps": "GB/s",
    "gflops": "FLOP rate (in GFLOP/s below a thousand, else in TFLOP/s)",
    "tflops": "TFLOP/s",
    "flops": "floating-point operations per launch",
    "bytes": "bytes moved per launch",
    "samples": "samples",
    "rel_noise": "relative noise",
    "throttled": "throttled samples discarded",
    "clock": "median SM clock during the kept samples",
    "share": "share of the ceiling",
    "speedup_prev": "speedup over the previous step",
    "speedup_first": "speedup over the first step",
    "max_ulp": "max error in ulp",
    "max_rel": "max relative error",
    "second_application_max_rel": "max relative error after a second application",
    "wide_angle_max_ulp": "max error in ulp with angles up to 750 radians",
    "tests": "tests",
    "vs_baseline": "the chapter's first library baseline's median time over this row's "
                   "(above 1x: faster than the library)",
    "time_vs_baseline": "this row's median time as a multiple of the chapter's first library "
                        "baseline's (below 1x: faster than the library)",
}
#: Fields that name another row of the same chapter: ``speedup_over:ROW`` is ROW's median time
#: over this row's; ``time_over:ROW`` is this row's median time over ROW's.
ROW_FIELDS = {
    "speedup_over": "speedup over another row (its median time over this row's)",
    "time_over": "this row's median time as a multiple of another row's",
}


def field_description(field_name: str) -> str:
    head, _, other = field_name.partition(":")
    if other and head in ROW_FIELDS:
        return f"{ROW_FIELDS[head]}, {other}"
    return FIELDS[field_name]


def single_value(chapter: Chapter, row_id: str, field_name: str, timing: str, n: int) -> str:
    """One number, formatted; raises DataError/KeyError/LookupError on bad input."""
    from .data import DataError

    head, _, other_id = field_name.partition(":")
    if other_id and head in ROW_FIELDS:
        pass
    elif field_name not in FIELDS:
        raise DataError(f"unknown field {field_name!r} (known: {', '.join(FIELDS)}, "
                        f"{', '.join(k + ':ROW' for k in ROW_FIELDS)})")
    chapter.timing(timing)
    kind, row = chapter.any_row(row_id, n, timing)
    if row is None:
        raise LookupError(f"{chapter.id}/{row_id}: no row for n={n} timing={timing}")
    if field_name in ("vs_baseline", "time_vs_baseline"):
        if not chapter.baselines:
            raise DataError(f"field {field_name!r}: chapter {chapter.id!r} has no baseline")
        head, other_id = ("speedup_over" if field_name == "vs_baseline" else "time_over",
                          chapter.baselines[0]["id"])
    if other_id:
        _other_kind, other = chapter.any_row(other_id, n, timing)
        if other is None:
            raise LookupError(f"{chapter.id}/{other_id}: no row for n={n} timing={timing}")
        return format_speedup(ratio(other, row) if head == "speedup_over" else ratio(row, other))
    if field_name == "median":
        return format_time(row["median_ms"])
    if field_name == "min":
        return format_time(row["min_ms"])
    if field_name == "max":
        return format_time(row["max_ms"])
    if field_name == "spread":
        return format_spread(row["min_ms"], row["max_ms"], row["median_ms"])
    if field_name == "gbps":
        return format_rate(row["gbps"], "GB/s")
    if field_name == "gflops":
        return format_flop_rate(row["gflops"])
    if field_name == "tflops":
        return format_rate(None if row["gflops"] is None else row["gflops"] / 1e3, "TFLOP/s")
    if field_name == "flops":
        return DASH if row["flops"] is None else f"{row['flops']:,}"
    if field_name == "bytes":
        return format_bytes(row["bytes"])
    if field_name == "samples":
        return str(row["samples"])
    if field_name == "rel_noise":
        return f"{sig(100 * row['rel_noise'], 2)} %"
    if field_name == "throttled":
        return str(row["throttled_samples"])
    if field_name == "clock":
        return format_clock(row)
    if kind != "steps":
        if field_name == "share" and kind == "baselines":
            return format_share(share_of_mark(chapter.ceiling_row(chapter.share_of, n, timing), row))
        if field_name == "max_rel" and kind == "baselines" and "accuracy" in row:  # a library validated as a step
            return format_rel(row["accuracy"].get("max_rel"))
        raise DataError(f"field {field_name!r} applies to steps only, and {row_id!r} is a "
                        f"{kind[:-1]}")
    if field_name == "share":
        return format_share(row["share_of_ceiling"])
    if field_name in ("speedup_prev", "speedup_first"):
        prev = chapter.previous_step(row_id)
        if prev is None:
            return DASH
        other_id = prev["id"] if field_name == "speedup_prev" else chapter.steps[0]["id"]
        other = chapter.step_row(other_id, n, timing)
        if other is None:
            raise LookupError(f"{chapter.id}/{other_id}: no row for n={n} timing={timing}")
        return format_speedup(ratio(other, row))
    if field_name == "max_ulp":
        value = row["accuracy"].get("max_ulp")
        return DASH if value is None else format_ulp({"max_ulp": value})
    if field_name in ("max_rel", "second_application_max_rel"):
        return format_rel(row["accuracy"].get(field_name))
    if field_name == "wide_angle_max_ulp":
        value = row["accuracy"].get(field_name)
        return DASH if value is None else format_ulp({"max_ulp": value})
    if field_name == "tests":
        return format_tests(row["tests"])[0]
    raise AssertionError(field_name)  # pragma: no cover


# ---------------------------------------------------------------------------
# The front page's row of a chapter (stepwise-summary)
# ---------------------------------------------------------------------------

@dataclass
class Headline:
    """A chapter's ``headline`` on one GPU: its first and final step at one size and timing."""

    chapter: Chapter
    n: int
    timing: str
    first_id: str
    final_id: str
    first: dict | None  # the measured rows (None: not measured)
    final: dict | None
    #: the chapter's library baseline, the one its headline names or else the first it lists (the one
    #: that computes what its steps do: SGEMM's second, cuBLAS in TF32, is another operation), as
    #: (id, label, its row at the same n and timing or None); empty for a chapter without one
    baselines: list[tuple[str, str, dict | None]] = field(default_factory=list)

    @property
    def problem(self) -> str:
        return self.chapter.problem(self.n)

    def position(self, step_id: str) -> int:
        """A step's place in its chapter, from 1 (registry order)."""
        return [s["id"] for s in self.chapter.steps].index(step_id) + 1

    def step_label(self, step_id: str) -> str:
        """``step 10 of 12``: where the headline's first or final step stands among the chapter's steps."""
        return f"step {self.position(step_id)} of {len(self.chapter.steps)}"

    def first_note(self) -> str:
        """Why the headline's first step is not the chapter's first, where it is not: the steps before it that have no
        row at the headline's size and timing (``01_one_thread is not measured at 2^26 float4 vertices ...``), else
        that the chapter names a later one. Empty where it is the first."""
        before = self.chapter.steps[:self.position(self.first_id) - 1]
        if not before:
            return ""
        unmeasured = [s["id"] for s in before if self.chapter.step_row(s["id"], self.n, self.timing) is None]
        where = f"{self.problem}, timing {self.timing}"
        if len(unmeasured) == len(before):
            return (f"{_and(unmeasured)} {'is' if len(unmeasured) == 1 else 'are'} not measured at {where}; this "
                    "is the first step that is")
        return f"the chapter compares from this step on at {where}; {_and([s['id'] for s in before])} come first"

    def final_note(self) -> str:
        """What follows the headline's final step, where it is not the chapter's last: the later steps, and where none
        of them computes the same function as the first, that they do not (TF32 after fp32 SGEMM), or that they were
        added after a second GPU measured the chapter. Empty where it is the last."""
        after = self.chapter.steps[self.position(self.final_id):]
        if not after:
            return ""
        ids = _and([s["id"] for s in after])
        added = self.chapter.added_steps()
        if all(s in added for s in after):
            return (f"{ids} {'was' if len(after) == 1 else 'were'} added after "
                    f"{self.chapter.dataset.gpu_name} measured the chapter")
        if not any(s.get("same_operation", True) for s in after):
            return (f"{ids} {'comes' if len(after) == 1 else 'come'} after it and "
                    f"{'does' if len(after) == 1 else 'do'} not compute the same function (\u2260 op): "
                    "the chapter\u2019s page compares them")
        return f"{ids} {'comes' if len(after) == 1 else 'come'} after it (the chapter\u2019s page compares them)"

    @property
    def like_for_like(self) -> bool:
        """Whether the first and final step compute the same function (the registry's ``same_operation`` of both is
        the same): where one does not, their speedup compares different operations."""
        same = [self.chapter.step(i).get("same_operation", True) for i in (self.first_id, self.final_id)]
        return same[0] == same[1]

    def operation_note(self) -> str:
        """Why the speedup is not like for like, where it is not (:attr:`like_for_like`); else empty."""
        if self.like_for_like:
            return ""
        odd = next(i for i in (self.first_id, self.final_id) if not self.chapter.step(i).get("same_operation", True))
        return (f"{odd} is marked \u2260 op, it does not compute the chapter\u2019s function for every input, and "
                f"{self.first_id if odd == self.final_id else self.final_id} is not: the speedup compares different "
                "operations")

    @property
    def speedup(self) -> float | None:
        """The first step's median time over the final step's."""
        return ratio(self.first, self.final)

    @property
    def share(self) -> float | None:
        """The final step's share of the chapter's ceiling (its ``share_of_ceiling``)."""
        return None if self.final is None else self.final.get("share_of_ceiling")

    def vs(self) -> list[tuple[str, str, float | None]]:
        """Per baseline: (id, label, its median time over the final step's; above 1: faster)."""
        return [(bid, label, ratio(row, self.final)) for bid, label, row in self.baselines]

    def spread(self) -> list[tuple[str, float] | None]:
        """Per baseline: the row (its id, how far its median lies above its fastest sample) of the
        two that the ratio divides, the baseline's or the final step's, whose samples spread most,
        where that is more than SPREAD_LIMIT; else None (or where a row is missing)."""
        out: list[tuple[str, float] | None] = []
        for bid, _label, row in self.baselines:
            if row is None or self.final is None:
                out.append(None)
                continue
            worst = max(((bid, median_over_fastest(row)), (self.final_id, median_over_fastest(self.final))),
                        key=lambda pair: pair[1])
            out.append(worst if worst[1] > SPREAD_LIMIT else None)
        return out


def _and(items: list[str]) -> str:
    """``a``, ``a and b``, ``a, b and c``."""
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} and {items[-1]}"


def headline(chapter: Chapter) -> Headline | None:
    """The chapter's headline numbers on its dataset's GPU, or None where it has no ``headline``."""
    h = chapter.headline
    if not h:
        return None
    n, timing = h["n"], h["timing"]
    ids = [h["baseline"]] if "baseline" in h else [b["id"] for b in chapter.baselines[:1]]
    final = chapter.final_step_id()  # on a second GPU kept as of its commit, the last step it measured
    return Headline(chapter, n, timing, h["first"], final,
                    chapter.step_row(h["first"], n, timing), chapter.step_row(final, n, timing),
                    [(bid, short_baseline_label(chapter, bid), chapter.baseline_row(bid, n, timing)) for bid in ids])
