"""Measured tables and plots: a chapter's timings per step, the kernels' resources, accuracy, the run's
clocks, and one number in the prose (the ``stepwise-number`` role)."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from docutils import nodes
from docutils.parsers.rst import directives
from sphinx.util.docutils import SphinxRole

from . import fmt, resources
from .common import (_Base, _cell, _env_chapters_used, _fmt_cell, _step_cell, _table, datasets_of,
                     provenance_node, stepwise_stepref, tooltip)
from .data import Chapter, DataError, Dataset, RunGroup
from .plot import alt_text, plot_data, render


def measurement_table(chapter: Chapter, timing: dict, n: int, problem: str,
                      multiple_sizes: bool) -> nodes.table:
    rows = fmt.step_rows(chapter, timing["id"], n) + fmt.reference_rows(chapter, timing["id"], n)
    cols = fmt.used_columns(rows, chapter)
    for row in rows:
        rates = fmt.rates_left_out(row, cols) if row.kind != "step" else ""
        if rates:  # a ceiling's GB/s in a table of FLOP rates (the copy beside a GEMM)
            row.title += f" ({rates})"
    header = ["step"] + [label for _key, label in cols]
    body = [[_step_cell(chapter, r)] + [_fmt_cell(r.cells[k]) for k, _l in cols] for r in rows]
    row_classes = [r.classes for r in rows]
    title = timing["label"] + (f" ({problem})" if multiple_sizes else "")
    return _table(header, body, ["stepwise-data", "stepwise-measurements",
                                 f"stepwise-timing-{timing['id']}"],
                  title, row_classes)


def _legend(chapter: Chapter) -> nodes.paragraph:
    ceiling = next((c["title"] for c in chapter.ceilings if c["id"] == chapter.share_of),
                   chapter.share_of)
    marks = [r for r in (chapter.measured or {}).get("ceilings", []) if r["id"] == chapter.share_of]
    if marks and all(r.get("gbps") is None for r in marks):
        text = (f"Speedups are ratios of medians from the same run. Share of ceiling: the median "
                f"time of the ceiling \u201c{ceiling}\u201d over the step\u2019s, same size (both do "
                "the same work; 100 % = as fast as the ceiling).")
    else:
        text = (f"Speedups are ratios of medians from the same run. Share of ceiling: the "
                f"step\u2019s GB/s over the GB/s of the ceiling \u201c{ceiling}\u201d (where both "
                "count the same bytes, the ceiling\u2019s time over the step\u2019s; 100 % = as fast "
                "as the ceiling).")
    for baseline in chapter.baselines:
        label = fmt.baseline_label(chapter, baseline["id"])
        text += (f" vs {label}: the median time of {baseline['title']} ({baseline['id']}) over "
                 f"the step\u2019s, same run, size and timing (above 1\u00d7: faster than {label}).")
    text += (" \u201c\u2260 op\u201d marks a step that does not compute the same function as "
             "the original for every input.")
    return nodes.paragraph("", text, classes=["stepwise-legend"])


def resources_table(dataset: Dataset, chapter: Chapter, steps: list[dict], with_steps: bool,
                    title: str | None) -> nodes.table:
    """One row per kernel of the given steps: block, registers, memory, occupancy (see resources.py)."""
    header = (["step"] if with_steps else []) + [
        "kernel", "block", "registers / thread", "static shared / block", "local / thread",
        "blocks / SM", "theoretical occupancy", "limited by"]
    body, classes = [], []
    for step in steps:
        for row in resources.kernel_rows(dataset, chapter, step):
            cells = []
            if with_steps:
                ref = stepwise_stepref("", "", nodes.literal("", step["id"]), chapter=chapter.id,
                                       step=step["id"], reftitle=step["title"])
                cells.append(_cell(nodes.paragraph("", "", ref)))
            name = nodes.paragraph("", "", nodes.literal("", row.name))
            for note in row.notes:
                name += nodes.inline("", "\u26a0 " + note, classes=["stepwise-warning"])
            if row.missing:
                name += nodes.inline("", "\u26a0 no compiled counts: rebuild with make",
                                     classes=["stepwise-warning"])
            cells.append(_cell(name))
            cells += [_cell(row.block, ["stepwise-num"]), _cell(row.registers, ["stepwise-num"]),
                      _cell(row.shared, ["stepwise-num"]),
                      _cell(row.local, ["stepwise-num"] + (["stepwise-attention"] if row.spills else [])),
                      _cell(row.blocks_per_sm, ["stepwise-num"]), _cell(row.occupancy, ["stepwise-num"]),
                      _cell(row.limited_by)]
            body.append(cells)
            classes.append(["stepwise-missing"] if row.missing else [])
    return _table(header, body, ["stepwise-data", "stepwise-resources"], title, classes)


class ProvenanceDirective(_Base):
    """One line per GPU: where and when its numbers were taken."""

    required_arguments = 0
    optional_arguments = 1

    def run(self) -> list[nodes.Node]:
        if not self.arguments:
            return [provenance_node(dataset) for dataset in self.datasets]
        chapter_id = self.chapter(self.arguments[0]).id
        return [provenance_node(dataset, dataset.chapter(chapter_id)) for dataset in self.datasets]


class TableDirective(_Base):
    """Per GPU, one table per size and timing, each followed by the GPU's provenance line."""

    required_arguments = 1
    option_spec = {"timing": directives.unchanged_required, "n": directives.positive_int}

    def run(self) -> list[nodes.Node]:
        reference = self.chapter(self.arguments[0])
        timings, sizes = self.timings(reference), self.sizes(reference)

        def tables(dataset: Dataset, chapter: Chapter) -> list[nodes.Node]:
            out: list[nodes.Node] = []
            for n, problem in sizes:
                for timing in timings:
                    out.append(measurement_table(chapter, timing, n, problem, len(chapter.sizes()) > 1))
                    out.append(provenance_node(dataset, chapter))
            return out

        out = nodes.container(classes=["stepwise-table-block"])
        out.extend(self.per_gpu(tables, reference.id))
        out += _legend(reference)
        return [out]


class PlotDirective(_Base):
    """Per GPU, one bar chart per size."""

    required_arguments = 1
    option_spec = {"n": directives.positive_int}

    def run(self) -> list[nodes.Node]:
        reference = self.chapter(self.arguments[0])
        sizes = self.sizes(reference)

        def figures(dataset: Dataset, chapter: Chapter) -> list[nodes.Node]:
            out: list[nodes.Node] = []
            for n, problem in sizes:
                data = plot_data(chapter, n)
                series = "; ".join(f"{t['id']}: {t['label']}" for t in chapter.timings)
                dotted = "".join(f"; dotted line: {b['id']} (library baseline)"
                                 for b in chapter.baselines)
                out.append(self.figure(
                    render(data, self.plot_dir), alt_text(data),
                    f"Median time per step ({problem}), log scale; bars span min\u2013max; "
                    f"dashed lines: {chapter.share_of}{dotted}. Series \u2014 {series}.", dataset, chapter))
            return out

        return self.per_gpu(figures, reference.id)


class ResourcesDirective(_Base):
    """``stepwise-resources CHAPTER``: every step's kernels, their resources and occupancy."""

    required_arguments = 1

    def run(self) -> list[nodes.Node]:
        chapter = self.chapter(self.arguments[0])
        out = nodes.container(classes=["stepwise-table-block"])
        out += resources_table(self.dataset, chapter, chapter.steps, True,
                               f"Registers, memory and theoretical occupancy of every kernel "
                               f"({resources.compiled_by(self.dataset)})")
        out += nodes.paragraph("", resources.legend(self.dataset), classes=["stepwise-legend"])
        return [out]


class TimingsDirective(_Base):
    """The chapter's timings and ceilings, as a definition list."""

    required_arguments = 1

    def run(self) -> list[nodes.Node]:
        chapter = self.chapter(self.arguments[0])
        rows = []
        for t in chapter.timings:
            rows.append([_cell(nodes.paragraph("", "", nodes.literal("", t["id"]))),
                         _cell("timing"), _cell(t["label"])])
        for c in chapter.ceilings:
            mark = " (the 100 % mark of the share column)" if c["id"] == chapter.share_of else ""
            rows.append([_cell(nodes.paragraph("", "", nodes.literal("", c["id"]))),
                         _cell("ceiling"), _cell(c["title"] + mark)])
        for b in chapter.baselines:
            rows.append([_cell(nodes.paragraph("", "", nodes.literal("", b["id"]))),
                         _cell("baseline"), _cell(b["title"])])
        return [_table(["id", "kind", "what it is"], rows, ["stepwise-data", "stepwise-timings"])]


class AccuracyDirective(_Base):
    """Per step: validated, max ulp, max relative error, and the chapter's further accuracy fields.

    A column whose field no row has is left out, so that each chapter shows what its timing program measured
    (:data:`ACCURACY_FIELDS`). The option ``:n:`` picks the problem size (default: the chapter's first).
    """

    required_arguments = 1
    option_spec = {"timing": directives.unchanged_required, "n": directives.positive_int}

    def run(self) -> list[nodes.Node]:
        reference = self.chapter(self.arguments[0])
        timing = self.options.get("timing", reference.timings[0]["id"])
        try:
            reference.timing(timing)
        except DataError as exc:
            raise self.error(f"{self.name}: {exc}") from None
        n, problem = self.sizes(reference)[0]
        return self.per_gpu(lambda dataset, chapter: self._table(chapter, timing, n, problem), reference.id)

    def _table(self, chapter: Chapter, timing: str, n: int, problem: str) -> list[nodes.Node]:
        rows = [(step, chapter.step_row(step["id"], n, timing)) for step in chapter.steps
                if any(size["n"] == n for size in step["sizes"])]
        fields = [(key, label) for key, label in ACCURACY_FIELDS
                  if any(row is not None and row["accuracy"].get(key) is not None for _s, row in rows)]
        body, classes = [], []
        for step, row in rows:
            ref = stepwise_stepref("", "", nodes.literal("", step["id"]),
                                   chapter=chapter.id, step=step["id"])
            first = _cell(nodes.paragraph("", "", ref))
            if row is None:
                body.append([first] + [_cell(fmt.DASH) for _ in range(len(fields) + 2)])
                classes.append(["stepwise-missing"])
                continue
            acc = row["accuracy"]
            same = row["same_operation"] and step.get("same_operation", True)
            verdict = "yes" if row["validated"] else "NO"
            if row.get("validation"):
                verdict = nodes.paragraph("", "", tooltip(verdict, row["validation"]))
            cells = [first, _cell(verdict, [] if row["validated"] else ["stepwise-fail"])]
            for key, _label in fields:
                value = acc.get(key)
                if value is None:
                    text = fmt.DASH
                elif key.endswith("_ulp"):
                    text = fmt.format_ulp({"max_ulp": value})
                else:
                    text = fmt.format_rel(value)
                cells.append(_cell(text, ["stepwise-num"]))
            cells.append(_cell("yes" if same else "\u2260 op", [] if same else ["stepwise-not-same-op"]))
            body.append(cells)
            classes.append(["stepwise-stale"] if chapter.states[step["id"]].stale else [])
        header = ["step", "validated"] + [label for _k, label in fields] + ["same operation"]
        out = nodes.container(classes=["stepwise-table-block"])
        size = f", {problem}" if len(chapter.sizes()) > 1 else ""
        out += _table(header, body, ["stepwise-data", "stepwise-accuracy"],
                      f"Accuracy against the double-precision reference ({timing} run{size})", classes)
        out += provenance_node(chapter.dataset, chapter)
        return [out]


#: The accuracy fields a chapter's rows may carry, and their column headers, in table order.
ACCURACY_FIELDS = [
    ("tolerance_ulp", "tolerance (ulp)"),
    ("max_ulp", "max error (ulp)"),
    ("max_rel", "max relative error"),
    ("tolerance_rel", "tolerance (relative)"),
    ("second_application_max_rel", "max relative error, second application"),
    ("wide_angle_max_ulp", "max error (ulp), angles up to 750 rad"),
]


class RunDirective(_Base):
    """The run: GPU, clocks and temperature before/after, the stopping rule. With a chapter, the run that measured
    it; without, every run the GPU's chapters were measured in. Two columns, whatever the number of runs: what
    every run shares (the GPU, the stopping rule, ...) once, then each run's own rows under its heading
    (:func:`run_sections`)."""

    required_arguments = 0
    optional_arguments = 1

    def run(self) -> list[nodes.Node]:
        chapter_id = self.chapter(self.arguments[0]).id if self.arguments else None
        return self.per_gpu(self._table, chapter_id)

    def _table(self, ds: Dataset, chapter: Chapter | None) -> list[nodes.Node]:
        if chapter is not None and not chapter.run:
            return [nodes.paragraph("", f"No run of chapter {chapter.id} on {ds.gpu_name}: its measurement file "
                                        "has no numbers for it.", classes=["stepwise-warning"])]
        if chapter is not None:
            runs = [("this run", _run_rows(ds, chapter.run, [chapter]))]
        else:
            groups = ds.runs() or [RunGroup(ds.run, list(ds.chapters))]
            runs = [(f"Run of {fmt.format_date(g.run.get('date', ''))}",
                     _run_rows(ds, g.run, [ds.chapter(c) for c in g.chapters], all_chapters=len(groups) == 1))
                    for g in groups]
        out = nodes.container(classes=["stepwise-table-block"])
        if len(runs) == 1:
            title, rows = runs[0]
            out += _table(["", title], [[_cell(label), _cell(value)] for label, value in rows.items()],
                          ["stepwise-data", "stepwise-run"], "The run and its stopping rule")
        else:
            sections = run_sections(runs)
            shared = dict(sections[0][1]) if sections[0][0] == SHARED_BY_EVERY_RUN else {}
            out += _sections_table(sections, ["stepwise-data", "stepwise-run"],
                                   f"The {len(runs)} runs this GPU's chapters were measured in, and "
                                   + ("the stopping rule they share" if "minimum samples" in shared else
                                      "their stopping rules"))
        out += provenance_node(ds, chapter)
        return [out]


def _text_of(value: Any) -> str:
    return value.astext() if isinstance(value, nodes.Node) else str(value)


#: The heading of the rows a run table's runs share.
SHARED_BY_EVERY_RUN = "the same in every run"


def run_sections(runs: list[tuple[str, dict[str, Any]]]) -> list[tuple[str, list[tuple[str, Any]]]]:
    """Several runs' rows (each a heading and its rows, label -> text or node) as sections of one two-column table:
    first :data:`SHARED_BY_EVERY_RUN`, the rows whose value is the same in every run (the GPU, the stopping rule where the runs
    share it), then each run under its heading with the rest of its rows. A label some run lacks is that run's own."""
    first = runs[0][1]
    shared = [label for label in first
              if all(label in rows and _text_of(rows[label]) == _text_of(first[label]) for _t, rows in runs)]
    sections = [(SHARED_BY_EVERY_RUN, [(label, first[label]) for label in shared])] if shared else []
    for title, rows in runs:
        sections.append((title, [(label, value) for label, value in rows.items() if label not in shared]))
    return sections


def _sections_table(sections: list[tuple[str, list[tuple[str, Any]]]], classes: list[str], title: str) -> nodes.table:
    """A two-column table (label, value) of sections, each opened by a row that spans both columns with its heading
    (class ``stepwise-section``)."""
    table = nodes.table(classes=classes)
    table += nodes.title("", title)
    group = nodes.tgroup(cols=2)
    table += group
    for _ in range(2):
        group += nodes.colspec(colwidth=1)
    tbody = nodes.tbody()
    group += tbody
    for heading, rows in sections:
        row = nodes.row(classes=["stepwise-section"])
        entry = _cell(nodes.paragraph("", "", nodes.strong("", heading)))
        entry["morecols"] = 1
        row += entry
        tbody += row
        for label, value in rows:
            row = nodes.row()
            row += _cell(label)
            row += _cell(value)
            tbody += row
    return table


def _before_after(d: dict | None, unit: str) -> str:
    if not d:
        return "not recorded"
    b = "n/a" if d.get("before") is None else f"{fmt.plain(d['before'])} {unit}"
    a = "n/a" if d.get("after") is None else f"{fmt.plain(d['after'])} {unit}"
    return f"{b} before, {a} after"


def _run_rows(ds: Dataset, run: dict, chapters: list[Chapter], all_chapters: bool = False) -> dict[str, Any]:
    """The rows of a run's column, label -> text or node: the GPU, the run's software, clocks and commit, what it
    measured of ``chapters`` (their time and GPU tests), its stopping rule."""
    gpu, rule = ds.gpu, run["stopping_rule"]
    one = len(chapters) == 1
    rows: dict[str, Any] = {
        "GPU": f"{gpu['name']} (compute capability {gpu['compute_capability']}, {gpu['sm_count']} SMs)",
        "L2 cache": fmt.format_bytes(gpu["l2_bytes"]),
    }
    if gpu.get("global_memory_bytes"):
        rows["global memory"] = fmt.format_bytes(gpu["global_memory_bytes"])
    if not one:
        rows["chapters"] = "all" if all_chapters else ", ".join(c.id for c in chapters)
    rows["driver / CUDA"] = (f"driver {run.get('driver', 'not recorded')}, CUDA runtime "
                             f"{run.get('cuda_runtime', 'not recorded')}, CUDA driver API "
                             f"{run.get('cuda_driver', 'not recorded')}")
    rows["SM clock" + (" (this chapter)" if one else "")] = _before_after(run.get("sm_clock_mhz"), "MHz")
    rows["temperature" + (" (this chapter)" if one else "")] = _before_after(run.get("temperature_c"), "\u00b0C")
    rows["clocks read through"] = run.get("clock_source", "not recorded")
    rows["date" + (" (this chapter's start)" if one else " (its first chapter's start)")] = \
        fmt.format_date(run["date"])
    rows["commit"] = run["commit"] + (" (uncommitted changes)" if run["dirty"] else "")
    seconds = [c.run["seconds"] for c in chapters if "seconds" in c.run]
    if seconds:
        rows["time the timing program spent" + (" on it" if one else " on them")] = f"{sum(seconds):.0f} s"
    tests = [c.run["tests"] for c in chapters if "tests" in c.run]
    if tests:
        counts = {k: sum(t[k] for t in tests) for k in ("passed", "failed", "skipped")}
        rows["GPU tests of " + ("this chapter" if one else "these chapters") + ", same run"] = (
            f"{counts['passed']} passed, {counts['failed']} failed, {counts['skipped']} skipped")
    if run.get("upgraded_from_schema") == 1:
        rows["recorded as"] = ("schema 1: one run for the whole file; its chapters keep that run, with no GPU "
                               "test counts of their own")
    if run.get("command"):  # its paths reduced to file names: the folders were the measuring machine's
        rows["command"] = nodes.paragraph("", "", nodes.literal("", fmt.command_text(run["command"])))
    if run.get("seed") is not None:
        rows["input seed"] = str(run["seed"])
    if "warmup_samples" in rule:
        rows["warm-up samples (not kept)"] = (f"{rule['warmup_samples']}, or fewer (at least one) once they have "
                                              "taken half the time limit per row")
    rows["minimum samples"] = str(rule["min_samples"])
    rows["maximum samples"] = str(rule["max_samples"])
    if "target_rel_stderr" in rule:
        rows["target relative standard error of the mean (stdev / mean / \u221asamples)"] = \
            f"{fmt.sig(100 * rule['target_rel_stderr'], 3)} %"
    if "target_rel_noise" in rule:
        rows["target relative noise (stdev / mean)"] = f"{fmt.sig(100 * rule['target_rel_noise'], 3)} %"
    rows["time limit per row"] = f"{fmt.sig(rule['max_seconds_per_row'], 3)} s"
    rows["throttle threshold"] = (f"a sample is discarded when its SM clock is below "
                                  f"{fmt.sig(100 * rule['throttle_threshold'], 3)} % of the run's highest clock")
    for timing in (chapters[0].measured or {}).get("timings", []) if one else []:
        if "throttle_threshold" in timing:  # the chapter's timing has its own rule
            own = timing["throttle_threshold"]
            rows[f"throttle threshold of this chapter's timing {timing['id']}"] = (
                "none: every sample is kept, whatever its SM clock (each row records the clocks it ran at)"
                if own == 0 else f"{fmt.sig(100 * own, 3)} % of the run's highest clock")
    known = {"min_samples", "max_samples", "target_rel_stderr", "target_rel_noise",
             "max_seconds_per_row", "throttle_threshold", "warmup_samples"}
    for key in sorted(set(rule) - known):  # anything newer timing programs add
        rows[key.replace("_", " ")] = str(rule[key])
    return rows


# ---------------------------------------------------------------------------
# Role: one number
# ---------------------------------------------------------------------------

class NumberRole(SphinxRole):
    """``{stepwise-number}`elementwise/04_lookup_table/second_application_max_rel@batch```.

    ``CHAPTER/ROW/FIELD[@TIMING][#N][!GPU]``: the reference GPU's number, or with ``!GPU`` (a GPU
    slug, e.g. ``!nvidia-h200``) that GPU's; a GPU the build has no measurement file of is an error.
    ``#N`` is a size, ``#MxNxK`` or ``#RxC`` a problem by its registry ``shape`` (``#RxC/WORD``
    where several sizes share it: the one whose problem text ends in WORD, e.g. ``#16384x8192/bf16``).
    """

    def run(self) -> tuple[list[nodes.Node], list[nodes.system_message]]:
        text = self.text.strip()
        slug = None
        if "!" in text:
            text, slug = text.rsplit("!", 1)
        n_text = None
        if "#" in text:
            text, n_text = text.rsplit("#", 1)
        timing = None
        if "@" in text:
            text, timing = text.rsplit("@", 1)
        parts = text.split("/")
        if len(parts) != 3:
            msg = self.inliner.reporter.error(
                f"stepwise-number: expected CHAPTER/ROW/FIELD[@TIMING][#N][!GPU], got {self.text!r}",
                line=self.lineno)
            return [nodes.problematic(self.rawtext, self.rawtext)], [msg]
        chapter_id, row_id, field_name = parts
        datasets = datasets_of(self.env)
        dataset = datasets.reference if slug is None else next(
            (d for d in datasets if d.slug == slug), None)
        if dataset is None:
            msg = self.inliner.reporter.error(
                f"stepwise-number {self.text!r}: this build has no measurement file of GPU {slug!r} "
                f"(it has {', '.join(d.slug for d in datasets)})", line=self.lineno)
            return [nodes.problematic(self.rawtext, self.rawtext)], [msg]
        try:
            chapter = dataset.chapter(chapter_id)
            timing = timing or chapter.timings[0]["id"]
            n = chapter.n_of(n_text) if n_text else chapter.sizes()[0][0]
            value = fmt.single_value(chapter, row_id, field_name, timing, n)
        except (DataError, ValueError) as exc:
            msg = self.inliner.reporter.error(f"stepwise-number {self.text!r}: {exc}",
                                              line=self.lineno)
            return [nodes.problematic(self.rawtext, self.rawtext)], [msg]
        except LookupError as exc:
            # A missing row: already reported at builder-inited (fatal in strict mode).
            return [tooltip("n/a (not measured)", str(exc), ["stepwise-warning"])], []
        _env_chapters_used(self.env).setdefault(self.env.docname, set()).add(chapter.id)
        if dataset.measurement_path:
            self.env.note_dependency(str(Path(dataset.measurement_path).resolve()))
        classes = ["stepwise-number"]
        state = chapter.states.get(row_id)
        as_of = ""
        if state is not None and state.stale:
            classes.append("stepwise-stale")
            note = fmt.as_of_note(chapter)  # a second GPU's number, as of its commit
            as_of = f". {note}" if note else ""
        node = tooltip(value, f"{fmt.field_description(field_name)}, {chapter_id}/{row_id}, "
                              f"timing {timing}, {chapter.size_text(n)}; {fmt.provenance(dataset, chapter)}{as_of}",
                       classes)
        return [node], []
