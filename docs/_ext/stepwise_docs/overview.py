"""Sweeps and the front page: time and rate against problem size for any chapter, and the table of
every chapter's headline per GPU."""
from __future__ import annotations

from pathlib import Path

from docutils import nodes
from docutils.parsers.rst import directives
from sphinx import addnodes
from sphinx.util import logging

from . import fmt, reruns
from . import sweep as sweep_data
from .common import _Base, _cell, _ids, _table, provenance_node, stepwise_chapterref, tooltip
from .data import Chapter, DataError, Dataset
from .plot import render_sweep, sweep_alt_text

logger = logging.getLogger(__name__)


# ---------------------------------------------------------------------------
# Time and rate against problem size (any chapter)
# ---------------------------------------------------------------------------

def _footprint_text(chapter: Chapter) -> str:
    """``4 B × n`` or ``12 B × n²``: the problem's bytes at size n (``sweep.footprint``)."""
    fp = chapter.sweep["footprint"]
    power = fp["power"]
    superscripts = {1: "", 2: "\u00b2", 3: "\u00b3"}
    exponent = superscripts.get(power) if float(power).is_integer() else None
    n = "n" + (exponent if exponent is not None else f"^{fmt.plain(power)}")
    return f"{fmt.plain(fp['bytes_per_n'])} B \u00d7 {n}"


class SweepDirective(_Base):
    """``stepwise-sweep CHAPTER``: median time and rate against n, per GPU and timing.

    Rows: the chapter's ``sweep.rows`` (steps, baselines and ceilings); without a ``sweep``, every
    step and baseline. Options: ``:timing:`` one timing (default: each); ``:steps: ID ...`` and
    ``:baselines: ID ...`` replace the steps or the baselines of those rows; ``:rows: ID ...`` names
    every row (any kind). Sizes: every size the rows are measured at (main and sweep). Each figure
    has two panels (time, rate; log axes, n in powers of two) and, where the registry gives the
    problem's footprint, a vertical line where the data fills the GPU's L2 cache; under it the
    numbers as two tables (rate, median time; rows n) and the GPU's provenance line.

    With a ``sweep.axis``: the sweep's own sizes against ``shape[shape_index]``, the axis named by
    its ``label`` (in the panels, the caption and the tables' first column), and no L2 line.
    """

    required_arguments = 1
    option_spec = {"timing": directives.unchanged_required, "steps": directives.unchanged_required,
                   "baselines": directives.unchanged_required, "rows": directives.unchanged_required}

    def run(self) -> list[nodes.Node]:
        reference = self.chapter(self.arguments[0])
        timings = self.timings(reference)
        selection = {key: _ids(self.options[key]) if key in self.options else None
                     for key in ("rows", "steps", "baselines")}
        try:
            ids = sweep_data.select_rows(reference, **selection)
        except DataError as exc:
            raise self.error(f"{self.name}: {exc}") from None

        def figures(dataset: Dataset, chapter: Chapter) -> list[nodes.Node]:
            out: list[nodes.Node] = []
            for timing in timings:
                try:
                    data = sweep_data.sweep(chapter, timing["id"], **selection)
                except DataError as exc:
                    raise self.error(f"{self.name}: {exc}") from None
                out += self._one(chapter, timing, data)
            return out

        out = nodes.container(classes=["stepwise-table-block", "stepwise-sweep"])
        out.extend(self.per_gpu(figures, reference.id, [i for i in ids if reference.kind_of(i) == "steps"]))
        numbers = ", ".join(f"{sweep_data.step_number(i)} = {i}" for i in ids
                            if reference.kind_of(i) == "steps")
        out += nodes.paragraph("", (
            f"Cells: the row\u2019s rate (its FLOP rate, in the unit the table\u2019s title names, or GB/s, from its "
            "median time) or its median time, "
            f"empty where the row is not measured at that size. Columns: steps by number ({numbers}), "
            "then the baselines and ceilings."), classes=["stepwise-legend"])
        return [out]

    def _one(self, chapter: Chapter, timing: dict, data: dict) -> list[nodes.Node]:
        unit, tid = data["unit"], timing["id"]
        axis = data.get("axis_label")
        if axis is not None:
            caption = self._axis_caption(data, timing)
        else:
            caption = self._n_caption(chapter, data, timing)
        out: list[nodes.Node] = [self.figure(render_sweep(data, self.plot_dir), sweep_alt_text(data),
                                             caption, chapter.dataset, chapter)]
        for key, title, text in (
                ("values", f"{unit} by {axis or 'size'} ({tid})", lambda v: fmt.sig(v)),
                ("times", f"Median time by {axis or 'size'} ({tid})", lambda v: fmt.format_time(v))):
            series = [s for s in data["series"] if any(v is not None for v in s[key])]
            header = [axis or "n"] + [s["number"] for s in series]
            body = []
            for i, n in enumerate(data["sizes"]):
                number = str(n) if n < 10000 else f"{n:,}"
                if axis is not None:  # the place on the axis, its problem on hover
                    first = _cell(nodes.paragraph("", "", tooltip(number, data["problems"][i])), ["stepwise-num"])
                else:
                    first = _cell(number, ["stepwise-num"])
                row = [first]
                for s in series:
                    value = s[key][i]
                    row.append(_cell("" if value is None else text(value), ["stepwise-num"]))
                body.append(row)
            classes = [["stepwise-beyond-l2"] if data["l2_n"] is not None and n > data["l2_n"] else []
                       for n in data["sizes"]]
            out.append(_table(header, body, ["stepwise-data", "stepwise-sweep-table"], title, classes))
        out.append(provenance_node(chapter.dataset, chapter))
        return out

    @staticmethod
    def _axis_caption(data: dict, timing: dict) -> str:
        """The caption of a sweep along ``sweep.axis``: what is on the axis, which problems, and their data
        (the L2 cache only where that differs between them: along such an axis it is usually constant)."""
        axis, problems = data["axis_label"], data["problems"]
        span = problems[0] if len(problems) == 1 else f"from {problems[0]} to {problems[-1]}"
        caption = (
            f"Median time (left) and {data['unit']} (right) against {axis}, all axes logarithmic (the "
            f"horizontal one in powers of two), one point per problem of the chapter\u2019s sweep ({span}). "
            f"Timing {timing['id']}: {timing['label']}. Solid lines: steps (dotted: not the same operation); "
            "thick dashed: library baselines; thin dashed grey: ceilings; a line stops where the row is not "
            "measured.")
        known = [b for b in data["bytes"] if b is not None]
        if known and len(known) == len(data["bytes"]) and len(set(known)) == 1:
            caption += (f" Every problem drawn moves the same {fmt.format_bytes(known[0])} of data: only its "
                        f"shape changes along the axis.")
        elif known and data["l2_bytes"]:
            caption += (f" The problems move from {fmt.format_bytes(min(known))} to "
                        f"{fmt.format_bytes(max(known))} of data; the L2 cache of {data['gpu']} holds "
                        f"{fmt.format_bytes(data['l2_bytes'])}.")
        return caption

    @staticmethod
    def _n_caption(chapter: Chapter, data: dict, timing: dict) -> str:
        """The caption of a sweep against n: the launch overhead at small n and the L2 line."""
        unit, tid = data["unit"], timing["id"]
        caption = (
            f"Median time (left) and {unit} (right) against n, all axes logarithmic (n in powers of "
            f"two). Timing {tid}: {timing['label']}. Solid lines: steps (dotted: not the same "
            "operation); thick dashed: library baselines; thin dashed grey: ceilings; a line stops "
            "where the row is not measured. Where the time stops falling with n it has reached the "
            "launch overhead, the few microseconds any launch costs whatever its work: there the "
            "rate falls with n, and the launch, not memory or arithmetic, sets the time.")
        if data["l2_n"] is not None:
            caption += (
                f" The vertical line is at n \u2248 {data['l2_n']:,.0f}, where the problem\u2019s data "
                f"({_footprint_text(chapter)}) fills the L2 cache of {data['gpu']} "
                f"({fmt.format_bytes(data['l2_bytes'])}): to its left the data fits in L2, so a "
                "timing with a warm L2 reads it from the cache, faster than DRAM allows (one that "
                "flushes L2 still reads it from DRAM once); to its right every pass goes to DRAM.")
        elif data["l2_n_any"] is not None:
            side = "below" if data["l2_n_any"] > data["sizes"][-1] else "above"
            caption += (
                f" The problem\u2019s data ({_footprint_text(chapter)}) fills the L2 cache of "
                f"{data['gpu']} ({fmt.format_bytes(data['l2_bytes'])}) at n \u2248 "
                f"{data['l2_n_any']:,.0f}, outside the sizes drawn: every size here is {side} it.")
        return caption


# ---------------------------------------------------------------------------
# The front page's table: every chapter's headline, per GPU
# ---------------------------------------------------------------------------

SUMMARY_COLUMNS = ["first step", "final step", "speed\u00adup", "share of ceiling", "vs library"]


def _table_group(table: nodes.table, width: int) -> tuple[nodes.tgroup, nodes.thead]:
    """The column group of ``width`` equal columns, added to ``table``, and its (empty) header."""
    group = nodes.tgroup(cols=width)
    table += group
    for _ in range(width):
        group += nodes.colspec(colwidth=1)
    thead = nodes.thead()
    group += thead
    return group, thead


def _mark_as_of(cells: list[nodes.entry], chapter: Chapter) -> None:
    """One GPU's cells of a chapter's row in the results table, where that GPU is a second GPU that measured the
    chapter before a step of it changed: each gets the class ``stepwise-as-of``, and the first a line ``as of
    <commit>`` whose tooltip is the as-of note (:func:`.fmt.as_of_note`). Nothing otherwise."""
    note = fmt.as_of_note(chapter)
    if not note:
        return
    for cell in cells:
        cell["classes"].append("stepwise-as-of")
    label = f"as of {fmt.short_commit(chapter.run.get('commit', 'unknown'))[:7]}"  # the note names it in full
    cells[0] += nodes.paragraph("", "", tooltip(label, note, ["stepwise-as-of-label"]), classes=["stepwise-sub"])


def _timing_node(chapter: Chapter, timing_id: str) -> nodes.abbreviation:
    """A headline's timing in a few words (:func:`.fmt.timing_name`), its id and registry label on hover."""
    timing = chapter.timing(timing_id)
    return tooltip(fmt.timing_name(timing), f"{timing_id}: {timing['label']}")


def _chapter_link(chapter: Chapter) -> nodes.Node:
    return stepwise_chapterref("", "", nodes.Text(fmt.short_title(chapter.title)), chapter=chapter.id,
                               reftitle=chapter.title)


class SummaryDirective(_Base):
    """``stepwise-summary``: one row per registry chapter with a ``headline``, in registry order:
    the chapter (linked to its page), the problem and the timing (in a few words, :func:`.fmt.timing_name`), then
    per GPU (the reference one first) the first and final step's median time (each with its place, ``step 2 of 6``),
    the speedup (``\u2260 op`` where the two steps compute different functions), the final step's share of the
    ceiling and the library baselines' time over the final step's (``level`` where a rerun of the recorded commit
    puts it more than :data:`.reruns.AGREE_WITHIN` from the recording's). Under it one provenance line per GPU and a
    legend. The table has the classes ``stepwise-data stepwise-summary stepwise-gpus-<N>``; each
    GPU's header cell has ``stepwise-gpu-group``; a second GPU's cells of a chapter it measured before a step of
    it changed have ``stepwise-as-of``, under the first an ``as of <commit>`` line (:func:`_mark_as_of`).

    For narrow screens the same numbers again, one table per GPU (class ``stepwise-summary-one-gpu``, captioned
    with the GPU's name; the problem and timing under each chapter's name): the stylesheet shows those in place
    of the wide table below a width at which it no longer fits (``stepwise-summary-wide`` and
    ``stepwise-summary-narrow``).
    """

    required_arguments = 0

    def run(self) -> list[nodes.Node]:
        datasets = self.datasets
        chapters = [c for c in self.dataset.chapters.values() if c.headline]
        for chapter in chapters:
            self.chapter(chapter.id)
        if not chapters:
            logger.warning("stepwise-summary: no chapter of the step registry has a headline (the "
                           "timing program's Chapter::headline), so the results table is empty",
                           location=(self.env.docname, self.lineno), type="stepwise", subtype="no_headline")
            return [nodes.paragraph("", "No chapter has a headline in the step registry.",
                                    classes=["stepwise-legend"])]
        out = nodes.container(classes=["stepwise-table-block", "stepwise-summary-block"])
        wide = nodes.container(classes=["stepwise-summary-wide"])
        wide += self._wide_table(chapters, datasets)
        out += wide
        narrow = nodes.container(classes=["stepwise-summary-narrow"])
        for dataset in datasets:
            narrow += self._one_gpu_table(chapters, dataset)
        out += narrow
        for dataset in datasets:
            out += provenance_node(dataset)
        out += nodes.paragraph("", (
            "First and final step: median times at the problem size and timing shown, with each step\u2019s place "
            "in its chapter (where the first step is not measured at that size, the first that is; where the final "
            "one is not the chapter\u2019s last, hover for why); speedup: the first step\u2019s time over the final "
            "one\u2019s (\u2260 op: one of the two does not compute the same function for every input, hover for "
            "which); share of ceiling: the "
            "final step\u2019s share of what the chapter measures as the GPU\u2019s best for that work; "
            "vs library: the time of the library that the chapter sets beside its final step (the one "
            "named in the cell; its page says why that one) over the final step\u2019s "
            "(above 1\u00d7: faster than the library), \u2014 where the chapter has none; where a rerun of the "
            "commit the chapter was recorded from is kept beside the recording (under logs/), the ratio is the "
            "recording\u2019s where the two lie within "
            f"{fmt.sig(100 * reruns.AGREE_WITHIN, 2)} % of each other, and level where they lie further apart: the "
            "two runs do not say which is faster (hover for both ratios and what differed between the runs), unless "
            "both put the library ahead by more than that: then the range of the two; "
            "samples spread (where no rerun is kept): the library\u2019s or the final step\u2019s median lies more "
            f"than {fmt.sig(100 * fmt.SPREAD_LIMIT, 2)} % above its fastest sample, so a rerun may not give the same "
            "ratio; n/a: not measured on that GPU; needs \u2026: that GPU cannot run the step (hover for why); "
            "as of a commit: that GPU measured the chapter before a step of it changed, and has not measured it "
            "since (hover for which)."),
            classes=["stepwise-legend"])
        return [out]

    def _wide_table(self, chapters: list[Chapter], datasets: list[Dataset]) -> nodes.table:
        """Every GPU side by side: the chapter, problem and timing, then one group of columns per GPU."""
        table = nodes.table(classes=["stepwise-data", "stepwise-summary", f"stepwise-gpus-{len(datasets)}"])
        table += nodes.title("", "Results at a glance: each chapter\u2019s first step against its final one")
        group, thead = _table_group(table, 3 + len(SUMMARY_COLUMNS) * len(datasets))
        top, names = nodes.row(), nodes.row()
        for label in ("chapter", "problem", "timing"):
            top += _cell(label)
            top[-1]["morerows"] = 1
        for dataset in datasets:
            top += _cell(dataset.gpu_name, ["stepwise-gpu-group"] + (
                [f"stepwise-gpu-{dataset.slug}"] if dataset.slug else []))
            top[-1]["morecols"] = len(SUMMARY_COLUMNS) - 1
            for i, label in enumerate(SUMMARY_COLUMNS):
                names += _cell(label, [] if i else ["stepwise-gpu-start"])
        thead += top
        thead += names
        tbody = nodes.tbody()
        group += tbody
        for chapter in chapters:
            h = chapter.headline
            row = nodes.row()
            row += _cell(nodes.paragraph("", "", _chapter_link(chapter)))
            row += _cell(chapter.problem(h["n"]))
            row += _cell(nodes.paragraph("", "", _timing_node(chapter, h["timing"])))
            for dataset in datasets:
                cells = self._cells(fmt.headline(dataset.chapter(chapter.id)))
                cells[0]["classes"].append("stepwise-gpu-start")
                _mark_as_of(cells, dataset.chapter(chapter.id))
                for cell in cells:
                    row += cell
            tbody += row
        return table

    def _one_gpu_table(self, chapters: list[Chapter], dataset: Dataset) -> nodes.table:
        """One GPU's results, for narrow screens: the chapter with its problem and timing under its name, then the
        GPU's columns."""
        table = nodes.table(classes=["stepwise-data", "stepwise-summary-one-gpu"] + (
            [f"stepwise-gpu-{dataset.slug}"] if dataset.slug else []))
        table += nodes.title("", f"Results on {dataset.gpu_name}")
        group, thead = _table_group(table, 1 + len(SUMMARY_COLUMNS))
        names = nodes.row()
        for label in ["chapter"] + SUMMARY_COLUMNS:
            names += _cell(label)
        thead += names
        tbody = nodes.tbody()
        group += tbody
        for chapter in chapters:
            h = chapter.headline
            first = _cell(nodes.paragraph("", "", _chapter_link(chapter)))
            first += nodes.paragraph("", chapter.problem(h["n"]), classes=["stepwise-sub"])
            first += nodes.paragraph("", "", _timing_node(chapter, h["timing"]), classes=["stepwise-sub"])
            row = nodes.row()
            row += first
            cells = self._cells(fmt.headline(dataset.chapter(chapter.id)))
            _mark_as_of(cells, dataset.chapter(chapter.id))
            for cell in cells:
                row += cell
            tbody += row
        return table

    def _cells(self, h: fmt.Headline) -> list[nodes.entry]:
        """One GPU's cells of a chapter's row; n/a (with the rows not measured) where a row is missing."""
        path = h.chapter.dataset.measurement_path
        where = f"in {path.name if path else 'the measurement file'}"

        def na(*rows: tuple[str, dict | None], text: str = "n/a") -> nodes.paragraph:
            missing = [rid for rid, row in rows if row is None]
            why = list(dict.fromkeys(h.chapter.unsupported[rid] for rid in missing if rid in h.chapter.unsupported))
            if why and all(rid in h.chapter.unsupported for rid in missing):  # "needs sm_80: ..."
                return nodes.paragraph("", "", tooltip(why[0].split(":")[0], f"not run: {'; '.join(why)}",
                                                       ["stepwise-warning"]))
            what = ", ".join(f"{h.chapter.id}/{rid} at {h.chapter.size_text(h.n)}, timing {h.timing}"
                             for rid in missing)
            return nodes.paragraph("", "", tooltip(text, f"not measured: {what} {where}",
                                                   ["stepwise-warning"]))

        def timed(row_id: str, row: dict | None, note: str) -> nodes.entry:
            if row is None:
                return _cell(na((row_id, row)), ["stepwise-missing"])
            para = nodes.paragraph("", "", tooltip(
                fmt.format_time(row["median_ms"]), f"{row_id}: median of {row['samples']} samples, "
                f"min\u2013max {fmt.format_spread(row['min_ms'], row['max_ms'], row['median_ms'])}"))
            place, classes = h.step_label(row_id).removeprefix("step "), ["stepwise-summary-label", "stepwise-place"]
            para += tooltip(place, f"{row_id}: {h.step_label(row_id)}" + (f"; {note}" if note else ""), classes)
            return _cell(para, ["stepwise-num"])

        first, final = (h.first_id, h.first), (h.final_id, h.final)
        cells = [timed(*first, h.first_note()), timed(*final, h.final_note())]
        if h.speedup is None:
            cells.append(_cell(na(first, final), ["stepwise-missing"]))
        elif h.like_for_like:
            cells.append(_cell(fmt.format_speedup(h.speedup), ["stepwise-num"]))
        else:  # the two steps compute different functions: say so beside the ratio
            para = nodes.paragraph("", fmt.format_speedup(h.speedup))
            para += tooltip("\u2260 op", h.operation_note(), ["stepwise-summary-label", "stepwise-not-same-op"])
            cells.append(_cell(para, ["stepwise-num"]))
        cells.append(_cell(na(final), ["stepwise-missing"]) if h.final is None
                     else _cell(fmt.format_share(h.share), ["stepwise-num"]))
        if not h.baselines:
            cells.append(_cell(fmt.DASH))
        else:
            entry = nodes.entry(classes=["stepwise-num"])
            for (bid, label, value), (_b, _l, row), spread, again in zip(h.vs(), h.baselines, h.spread(),
                                                                          self._reruns(h)):
                kind, text = (None, None) if value is None else reruns.ratio_text(value, again)
                if value is None:
                    para = na(final, (bid, row))
                elif kind in ("level", "range"):  # two runs of one commit: not which is faster, or not by how much
                    para = nodes.paragraph("", "", tooltip(text, again.explanation(), [f"stepwise-{kind}"]))
                else:
                    para = nodes.paragraph("", "", tooltip(
                        text,
                        f"{bid}\u2019s median time over {h.final_id}\u2019s, same GPU, size and timing "
                        f"(above 1\u00d7: faster than {label})"
                        + ("" if again is None else f"; {again.explanation()}")))
                para += nodes.inline("", " " + label, classes=["stepwise-summary-label"])
                if spread is not None and again is None:  # a rerun of the commit says what a rerun gives
                    spread_id, over = spread
                    para += nodes.inline("", " ")
                    para += tooltip("samples spread", (
                        f"{spread_id}\u2019s median is {fmt.sig(100 * over, 2)} % above its fastest sample: "
                        f"its samples spread in this run, and a rerun may give another ratio (the "
                        f"chapter\u2019s page compares runs)"), ["stepwise-warning", "stepwise-summary-label"])
                entry += para
            cells.append(entry)
        return cells

    def _reruns(self, h: fmt.Headline) -> list[reruns.Rerun | None]:
        """Per baseline of the headline, its ratio in the recording and in a rerun of the chapter's commit kept
        beside it (:func:`.reruns.find_rerun`; None where none is kept). A file named as such a rerun that cannot be
        read is a warning (an error in a strict build), and the cell shows the recording alone."""
        try:
            rerun = reruns.find_rerun(h.chapter.dataset, h.chapter)
        except DataError as exc:
            logger.warning(f"stepwise-summary: {exc}", location=(self.env.docname, self.lineno),
                           type="stepwise", subtype="rerun")
            return [None] * len(h.baselines)
        if rerun is not None:
            self.env.note_dependency(str(Path(rerun.dataset.measurement_path).resolve()))
        return reruns.compare(h, rerun)


# ---------------------------------------------------------------------------
# The front page's line over the table: the results in one sentence or two
# ---------------------------------------------------------------------------

def standing(ratio: float, rerun: reruns.Rerun | None = None) -> str:
    """Where a final step stands against its library, from the library's time over the step's: ``level`` where
    the ratio lies within :data:`.reruns.AGREE_WITHIN` of 1 (two runs of one commit differ by as much) or a rerun of
    the recorded commit puts it apart from the recording's (:attr:`.reruns.Rerun.level`), else ``ahead`` (above
    1) or ``behind``."""
    if rerun is not None and rerun.level:
        return "level"
    if 1 / (1 + reruns.AGREE_WITHIN) <= ratio <= 1 + reruns.AGREE_WITHIN:
        return "level"
    return "ahead" if ratio > 1 else "behind"


def summary_sentences(headlines: list[fmt.Headline], reruns_of: dict[str, list[reruns.Rerun | None]],
                      gpu: str) -> str:
    """The front page's results in two sentences, from the headlines of one GPU's chapters (and the reruns of their
    recorded commits, by chapter id): in how many of the chapters measured against a library the final step is level
    with it or ahead of it (:func:`standing`), naming those behind, and the range of the final steps' speedups over
    the first where both compute the same function (:attr:`.fmt.Headline.like_for_like`)."""
    standings: dict[str, list[str]] = {"ahead": [], "level": [], "behind": []}
    for h in headlines:
        for (_bid, label, value), again in zip(h.vs()[:1], reruns_of.get(h.chapter.id, [None])[:1]):
            if value is not None:
                kind, text = reruns.ratio_text(value, again)
                ratio = again.range_text() if kind == "level" else text  # the standing says "level"
                standings[standing(value, again)].append(f"{fmt.short_title(h.chapter.title)} ({ratio} {label})")
    compared = sum(len(v) for v in standings.values())
    parts = []
    if compared:
        good = len(standings["ahead"]) + len(standings["level"])
        text = (f"On the {gpu} (the reference GPU), the final step is level with its library (within "
                f"{fmt.plain(100 * reruns.AGREE_WITHIN)} %) or ahead of it in {good} of the {compared} chapters "
                "measured against one")
        if standings["behind"]:
            text += f"; it is behind in {'; '.join(standings['behind'])}"
        parts.append(text + ".")
    speedups = [h.speedup for h in headlines if h.speedup is not None and h.like_for_like]
    if speedups:
        unlike = [fmt.short_title(h.chapter.title) for h in headlines if h.speedup is not None and not h.like_for_like]
        text = (f"Final steps run {fmt.format_speedup(min(speedups))} to {fmt.format_speedup(max(speedups))} "
                "as fast as first steps")
        if unlike:
            text += (" (in the one chapter where both compute the same function)" if len(speedups) == 1 else
                     f" (in the {len(speedups)} chapters where both compute the same function)")
        parts.append(text + ".")
    return " ".join(parts) or f"No chapter\u2019s headline is measured on {gpu}."


class SummaryLineDirective(SummaryDirective):
    """``stepwise-summary-line``: the results of the reference GPU in two sentences over the front page's table
    (:func:`summary_sentences`), computed from the measurement file as the table's are (so that no number of it is
    typed), with the same reruns."""

    required_arguments = 0

    def run(self) -> list[nodes.Node]:
        headlines, reruns_of = [], {}
        for chapter in self.dataset.chapters.values():
            if not chapter.headline or chapter.pending:
                continue
            h = fmt.headline(self.chapter(chapter.id))
            headlines.append(h)
            reruns_of[chapter.id] = self._reruns(h)
        return [nodes.paragraph("", summary_sentences(headlines, reruns_of, self.dataset.gpu_name),
                                classes=["stepwise-summary-line"])]



# ---------------------------------------------------------------------------
# The chapters: the site's contents and the front page's list, from the registry
# ---------------------------------------------------------------------------

class stepwise_chapter_list(nodes.General, nodes.Element):
    """Where the list of pages goes (``docnames``); replaced once every page's title and summary are known."""


#: The front-matter field of a page that says in a line what the page is about (the list's text after its link).
SUMMARY_FIELD = "summary"


class ChapterListDirective(_Base):
    """``stepwise-chapter-list``: the site's table of contents and the front page's list of its pages. The pages
    named in the directive's body (one docname a line: the methodology) come first, then every chapter of the step
    registry in the registry's order, each at its page ``<id>``: a chapter added to the registry is listed here
    without any page naming its id. A hidden toctree gives the sidebar the same pages; the list gives each page's
    title, linked, and the one line of its front matter's ``summary`` field."""

    has_content = True

    def run(self) -> list[nodes.Node]:
        docnames = [line.strip() for line in self.content if line.strip()]
        docnames += [c for c in self.dataset.chapters if c not in docnames]
        self.env.note_dependency(self.config.stepwise_registry)
        found = [d for d in docnames if d in self.env.found_docs]
        for missing in (d for d in docnames if d not in self.env.found_docs):
            logger.warning(f"stepwise-chapter-list: no page docs/{missing}.md for '{missing}' (a page named in the "
                           "directive or a chapter of the step registry)",
                           location=(self.env.docname, self.lineno), type="stepwise", subtype="no_page")
        toctree = addnodes.toctree()
        for key, value in dict(parent=self.env.docname, entries=[(None, d) for d in found], includefiles=found,
                               maxdepth=-1, caption="Chapters", glob=False, hidden=True, includehidden=False,
                               numbered=0, titlesonly=False, rawentries=[]).items():
            toctree[key] = value
        self.set_source_info(toctree)
        wrapper = nodes.compound(classes=["toctree-wrapper"])
        wrapper += toctree
        listed = stepwise_chapter_list(docnames=found)
        self.set_source_info(listed)
        return [wrapper, listed]


def _summary_nodes(text: str) -> list[nodes.Node]:
    """A summary's text, with `code` in backquotes as literals."""
    parts = text.split("`")
    return [nodes.literal(p, p) if i % 2 else nodes.Text(p) for i, p in enumerate(parts) if p]


def resolve_chapter_lists(app, doctree: nodes.document, fromdocname: str) -> None:
    """Replaces each ``stepwise_chapter_list`` by its list: each page's title, linked, and its summary."""
    env = app.env
    for node in list(doctree.findall(stepwise_chapter_list)):
        items = nodes.bullet_list(classes=["stepwise-chapter-list"])
        for docname in node["docnames"]:
            summary = env.metadata.get(docname, {}).get(SUMMARY_FIELD, "")
            if not summary:
                logger.warning(f"stepwise-chapter-list: docs/{docname}.md has no '{SUMMARY_FIELD}' in its front "
                               f"matter (a line of what the page is about, for the list of pages)",
                               location=node, type="stepwise", subtype="no_summary")
            title = env.titles[docname].astext() if docname in env.titles else docname
            ref = nodes.reference("", title, internal=True,
                                  refuri=app.builder.get_relative_uri(fromdocname, docname))
            para = nodes.paragraph("", "", ref)
            if summary:
                para += nodes.Text(": ")
                para.extend(_summary_nodes(str(summary)))
            items += nodes.list_item("", para)
        node.replace_self(items)
