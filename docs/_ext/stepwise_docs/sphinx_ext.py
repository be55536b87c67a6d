"""The Sphinx side of stepwise_docs: config, checks, directives, role."""
from __future__ import annotations

import difflib
import os
from pathlib import Path
from typing import Any

from docutils import nodes
from docutils.parsers.rst import directives
from docutils.statemachine import StringList
from sphinx import addnodes
from sphinx.application import Sphinx
from sphinx.errors import ConfigError, ExtensionError
from sphinx.util import logging
from sphinx.util.docutils import SphinxDirective, SphinxRole

from . import fmt, ncu, resources, sass
from . import sweep as sweep_data
from .data import DEFAULT_PRIMARY_GPU, DEFAULT_SCHEMA, Chapter, DataError, Dataset, Datasets, load_datasets
from .plot import alt_text, plot_data, render, render_sweep, sweep_alt_text

logger = logging.getLogger(__name__)

STATIC_DIR = Path(__file__).parent / "static"


# ---------------------------------------------------------------------------
# Loading and checking, once per build
# ---------------------------------------------------------------------------

def _as_bool(value: Any) -> bool:
    if isinstance(value, str):
        return value.strip().lower() in ("1", "true", "yes", "on")
    return bool(value)


def _load(app: Sphinx) -> None:
    cfg = app.config
    if not cfg.stepwise_registry:
        raise ConfigError(
            "stepwise_docs: stepwise_registry is not set (conf/conf.py reads it from "
            "STEPWISE_REGISTRY; conf/build_docs.py sets it)"
        )
    if not cfg.stepwise_measurements:
        raise ConfigError(
            "stepwise_docs: stepwise_measurements is not set (conf/conf.py reads it from "
            "STEPWISE_MEASUREMENTS; conf/build_docs.py sets it)"
        )
    if cfg.stepwise_source not in ("fresh", "recorded"):
        raise ConfigError(
            f"stepwise_docs: stepwise_source must be 'fresh' or 'recorded', not "
            f"{cfg.stepwise_source!r}"
        )
    repo_root = Path(cfg.stepwise_repo_root or app.confdir.parent)
    schema = Path(cfg.stepwise_measurement_schema or DEFAULT_SCHEMA)
    try:
        datasets = load_datasets(Path(cfg.stepwise_registry), Path(cfg.stepwise_measurements),
                                 repo_root, cfg.stepwise_source, schema,
                                 Path(cfg.stepwise_recorded) if cfg.stepwise_recorded else None,
                                 cfg.stepwise_primary_gpu or DEFAULT_PRIMARY_GPU)
    except DataError as exc:
        raise ExtensionError(str(exc), modname="stepwise_docs") from None
    app.stepwise_datasets = datasets  # type: ignore[attr-defined]
    app.stepwise_dataset = datasets.primary  # type: ignore[attr-defined]

    problems = datasets.problems()
    if _as_bool(cfg.stepwise_strict) and problems:
        more = f"\n(and {len(problems) - 1} more)\n" if len(problems) > 1 else ""
        listing = "\n".join(f"  {p}" for p in problems[1:])
        raise ExtensionError(f"{problems[0]}{more}{listing}", modname="stepwise_docs")
    for problem in problems:
        logger.warning(str(problem), type="stepwise", subtype=problem.kind)


def _on_builder_inited(app: Sphinx) -> None:
    _load(app)
    app.config.html_static_path.append(str(STATIC_DIR))


def dataset_of(env) -> Dataset:
    """The primary dataset: the one the prose, the code and the SGEMM evidence cite."""
    return env.app.stepwise_dataset


def datasets_of(env) -> Datasets:
    """Every GPU's dataset, the primary one first (the tables and plots show each)."""
    return env.app.stepwise_datasets


# ---------------------------------------------------------------------------
# Step anchors (the table links each step to its section)
# ---------------------------------------------------------------------------

class stepwise_stepref(nodes.Inline, nodes.TextElement):
    """A link to a step's section; resolved once every document has been read."""


class stepwise_chapterref(nodes.Inline, nodes.TextElement):
    """A link to the page that holds a chapter's step sections; resolved like stepwise_stepref."""


class stepwise_anchor(nodes.Invisible, nodes.Element):
    """Where a step section is; replaced once the document is read (see _find_anchors)."""


def _find_anchors(app: Sphinx, doctree: nodes.document) -> None:
    """Point each step's link at the section that holds its stepwise-step directive.

    Done after parsing so that it works the same for MyST and reStructuredText.
    """
    steps = _env_steps(app.env)
    for marker in list(doctree.findall(stepwise_anchor)):
        key = (marker["chapter"], marker["step"])
        section = marker.parent
        while section is not None and not isinstance(section, nodes.section):
            section = section.parent
        if section is not None and section["ids"]:
            title = section[0].astext() if isinstance(section[0], nodes.title) else key[1]
            steps[key] = (app.env.docname, section["ids"][0], title)
            marker.parent.remove(marker)
        else:
            target = nodes.target("", "", ids=[marker["fallback"]])
            marker.replace_self(target)


def _env_steps(env) -> dict:
    if not hasattr(env, "stepwise_steps"):
        env.stepwise_steps = {}
    return env.stepwise_steps


def _env_chapters_used(env) -> dict:
    if not hasattr(env, "stepwise_chapters_used"):
        env.stepwise_chapters_used = {}
    return env.stepwise_chapters_used


def _purge(app, env, docname) -> None:
    steps = _env_steps(env)
    for key in [k for k, v in steps.items() if v[0] == docname]:
        del steps[key]
    used = _env_chapters_used(env)
    used.pop(docname, None)


def _merge(app, env, docnames, other) -> None:
    steps = _env_steps(env)
    for key, value in _env_steps(other).items():
        if value[0] in docnames:
            steps[key] = value
    used = _env_chapters_used(env)
    for docname, chapters in _env_chapters_used(other).items():
        if docname in docnames:
            used[docname] = chapters


def _check_consistency(app, env) -> None:
    """Every step of every registry chapter must have a section on some page.

    A chapter none of whose steps has a section has no page at all: one warning names the
    chapter and its steps. Otherwise each step without a section is named. (Warnings are
    fatal in the strict build, which runs Sphinx with -W.)
    """
    dataset = dataset_of(env)
    steps = _env_steps(env)
    for chapter_id, chapter in dataset.chapters.items():
        missing = [s for s in chapter.steps if (chapter_id, s["id"]) not in steps]
        if not missing:
            continue
        if len(missing) == len(chapter.steps):
            logger.warning(
                f"stepwise: chapter {chapter_id!r} ({chapter.title}) is in the step registry but "
                f"no page has a `stepwise-step` section for any of its steps "
                f"({', '.join(s['id'] for s in missing)}); write docs/{chapter_id}.md with one "
                f"`stepwise-step {chapter_id} STEP` per step and add it to the index's toctree",
                type="stepwise", subtype="no_page",
            )
            continue
        for step in missing:
            logger.warning(
                f"stepwise: step {chapter_id}/{step['id']} ({step['file']}) is in the step "
                "registry but no page has a `stepwise-step` section for it",
                type="stepwise", subtype="no_section",
            )


def _resolve_refs(app: Sphinx, doctree: nodes.document, fromdocname: str) -> None:
    steps = _env_steps(app.env)
    pages = {}
    for (chapter_id, _step), (docname, _anchor, _title) in steps.items():
        pages.setdefault(chapter_id, docname)
    for node in list(doctree.findall(stepwise_chapterref)):
        children = [c.deepcopy() for c in node.children]
        docname = pages.get(node["chapter"])
        if docname is None:
            node.replace_self(nodes.inline("", "", *children))
            continue
        ref = nodes.reference("", "", *children, internal=True, reftitle=node.get("reftitle", ""))
        ref["refuri"] = app.builder.get_relative_uri(fromdocname, docname)
        node.replace_self(ref)
    for node in list(doctree.findall(stepwise_stepref)):
        key = (node["chapter"], node["step"])
        children = [c.deepcopy() for c in node.children]
        if key not in steps:
            node.replace_self(nodes.inline("", "", *children))
            continue
        docname, anchor, _title = steps[key]
        ref = nodes.reference("", "", *children, internal=True)
        if node.get("reftitle"):
            ref["reftitle"] = node["reftitle"]
        ref["refuri"] = app.builder.get_relative_uri(fromdocname, docname) + "#" + anchor
        node.replace_self(ref)


# ---------------------------------------------------------------------------
# Helpers building nodes
# ---------------------------------------------------------------------------

def tooltip(text: str, explanation: str, classes: list[str] | None = None) -> nodes.abbreviation:
    """Text with a hover explanation (``<abbr title=...>`` in HTML)."""
    return nodes.abbreviation("", text, explanation=explanation,
                              classes=["stepwise-tip"] + (classes or []))


def provenance_node(dataset: Dataset) -> nodes.paragraph:
    return nodes.paragraph("", fmt.provenance(dataset), classes=["stepwise-provenance"])


def gpu_block(dataset: Dataset) -> nodes.container:
    """The block of one GPU's tables or plots: headed with the GPU's name (class
    ``stepwise-gpu``; the page's other GPUs follow in blocks of their own)."""
    block = nodes.container(classes=["stepwise-gpu"] + ([f"stepwise-gpu-{dataset.slug}"]
                                                        if dataset.slug else []))
    block += nodes.rubric("", dataset.gpu_name, classes=["stepwise-gpu-heading"])
    return block


def _cell(content: Any, classes: list[str] | None = None) -> nodes.entry:
    entry = nodes.entry(classes=classes or [])
    if isinstance(content, nodes.Node):
        entry += content
    else:
        entry += nodes.paragraph("", str(content))
    return entry


def _table(header: list[str], body: list[list[nodes.entry]], classes: list[str],
           title: str | None = None, row_classes: list[list[str]] | None = None) -> nodes.table:
    table = nodes.table(classes=classes)
    if title:
        table += nodes.title("", title)
    group = nodes.tgroup(cols=len(header))
    table += group
    for _ in header:
        group += nodes.colspec(colwidth=1)
    thead = nodes.thead()
    group += thead
    hrow = nodes.row()
    for h in header:
        hrow += _cell(h)
    thead += hrow
    tbody = nodes.tbody()
    group += tbody
    for i, cells in enumerate(body):
        row = nodes.row(classes=(row_classes[i] if row_classes else []))
        for c in cells:
            row += c
        tbody += row
    return table


def _fmt_cell(cell: fmt.Cell) -> nodes.entry:
    para = nodes.paragraph("", cell.text)
    if cell.title:
        para = nodes.paragraph("", "", tooltip(cell.text, cell.title))
    entry = _cell(para, cell.classes)
    if cell.sub:
        entry += nodes.paragraph("", cell.sub, classes=["stepwise-sub"])
    return entry


def _step_cell(chapter: Chapter, row: fmt.Row) -> nodes.entry:
    para = nodes.paragraph()
    if row.kind == "step":
        ref = stepwise_stepref("", "", nodes.literal("", row.id), chapter=chapter.id, step=row.id,
                               reftitle=row.title)
        para += ref
    else:
        para += nodes.inline("", f"{row.kind}: ", classes=["stepwise-kind"])
        para += nodes.literal("", row.id)
        para += nodes.inline("", " " + row.title, classes=["stepwise-step-title"])
    for badge in row.badges:
        para += nodes.inline("", badge, classes=["stepwise-badge"])
    for note in row.notes:
        para += nodes.inline("", "\u26a0 " + note, classes=["stepwise-warning"])
    return _cell(para)


def measurement_table(chapter: Chapter, timing: dict, n: int, problem: str,
                      multiple_sizes: bool) -> nodes.table:
    rows = fmt.step_rows(chapter, timing["id"], n) + fmt.reference_rows(chapter, timing["id"], n)
    cols = fmt.used_columns(rows, chapter)
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


# ---------------------------------------------------------------------------
# Directives
# ---------------------------------------------------------------------------

class _Base(SphinxDirective):
    has_content = False
    final_argument_whitespace = False

    @property
    def dataset(self) -> Dataset:
        """The primary dataset (see :class:`.data.Datasets`)."""
        return dataset_of(self.env)

    @property
    def datasets(self) -> list[Dataset]:
        """Every GPU's dataset, primary first."""
        return list(datasets_of(self.env))

    def chapter(self, chapter_id: str, dataset: Dataset | None = None) -> Chapter:
        """The chapter in ``dataset`` (default: the primary one)."""
        try:
            chapter = (dataset or self.dataset).chapter(chapter_id)
        except DataError as exc:
            raise self.error(f"{self.name}: {exc}") from None
        _env_chapters_used(self.env).setdefault(self.env.docname, set()).add(chapter.id)
        for path in self._dependencies(chapter):
            self.env.note_dependency(path)
        return chapter

    def _dependencies(self, chapter: Chapter) -> list[str]:
        deps = []
        cfg = self.config
        deps.append(str(Path(cfg.stepwise_registry).resolve()))
        deps += [str(Path(path).resolve()) for path in datasets_of(self.env).paths()]
        return deps

    def per_gpu(self, render, chapter_id: str | None = None) -> list[nodes.Node]:
        """The one loop over the GPUs: for every dataset, primary first, a :func:`gpu_block` with
        what ``render(dataset, chapter)`` returns (``chapter`` is None without ``chapter_id``)."""
        out: list[nodes.Node] = []
        for dataset in self.datasets:
            chapter = self.chapter(chapter_id, dataset) if chapter_id else None
            block = gpu_block(dataset)
            if chapter is not None and chapter.pending:
                block += not_measured_node(dataset, chapter)
            else:
                block.extend(render(dataset, chapter))
            out.append(block)
        return out

    @property
    def plot_dir(self) -> Path:
        return Path(self.env.app.doctreedir) / "stepwise_plots"

    def figure(self, path: Path, alt: str, caption: str, dataset: Dataset | None = None) -> nodes.figure:
        """An image of the plot directory, its caption, and the dataset's provenance under it."""
        docdir = (Path(self.env.srcdir) / self.env.docname).parent
        uri = os.path.relpath(path, docdir).replace(os.sep, "/")
        figure = nodes.figure(classes=["stepwise-plot"])
        figure += nodes.image(uri=uri, alt=alt, classes=["stepwise-plot"])
        figure += nodes.caption("", caption)
        legend = nodes.legend()
        legend += provenance_node(dataset or self.dataset)
        figure += legend
        return figure

    def ncu_files(self, named: Path, chapter_id: str) -> list[tuple[Dataset | None, Path]]:
        """A page's Nsight Compute file and its siblings of the build's other GPUs, primary first.

        Where the file's name starts with a GPU's slug and the chapter (``<slug>-<chapter>-``, as
        make profile names it), every other GPU's file beside it (its slug in that place) that
        exists, each with its dataset, and the named file itself (existing or not); else the
        named file alone, with no dataset.
        """
        owner = next((d for d in self.datasets if ncu.same_gpu(named, d.gpu, chapter_id)), None)
        if owner is None:
            return [(None, named)]
        out: list[tuple[Dataset | None, Path]] = []
        for dataset in self.datasets:
            path = named if dataset is owner else named.with_name(
                dataset.slug + named.name[len(owner.slug):])
            if dataset is owner or path.is_file():
                out.append((dataset, path))
        return out

    def timings(self, chapter: Chapter) -> list[dict]:
        """The chapter's timings, or the one of the option ``:timing:``."""
        if "timing" not in self.options:
            return chapter.timings
        try:
            return [chapter.timing(self.options["timing"])]
        except DataError as exc:
            raise self.error(f"{self.name}: {exc}") from None

    def sizes(self, chapter: Chapter) -> list[tuple[int, str]]:
        """The chapter's main sizes, or the one of the option ``:n:`` (main or sweep size)."""
        sizes = chapter.sizes()
        if "n" in self.options:
            wanted = self.options["n"]
            sizes = [s for s in chapter.all_sizes() if s[0] == wanted]
            if not sizes:
                raise self.error(f"{self.name}: chapter {chapter.id!r} has no size n={wanted}")
        return sizes


def not_measured_node(dataset: Dataset, chapter: Chapter) -> nodes.Node:
    """What a GPU's block shows for a chapter its recorded file has no numbers for yet (``pending.toml``)."""
    run = dataset.run
    note = nodes.note(classes=["stepwise-not-measured"])
    note += nodes.paragraph(
        "", f"Not recorded on {dataset.gpu_name} yet: its measurement file (commit "
        f"{run.get('commit', 'unknown')}, {str(run.get('date', 'an unknown date'))[:10]}) has no numbers for this "
        f"chapter. {chapter.pending}")
    return note


class ProvenanceDirective(_Base):
    """One line per GPU: where and when its numbers were taken."""

    required_arguments = 0
    optional_arguments = 1

    def run(self) -> list[nodes.Node]:
        if self.arguments:
            self.chapter(self.arguments[0])
        return [provenance_node(dataset) for dataset in self.datasets]


class TableDirective(_Base):
    """Per GPU, one table per size and timing, each followed by the GPU's provenance line."""

    required_arguments = 1
    option_spec = {"timing": directives.unchanged_required, "n": directives.positive_int}

    def run(self) -> list[nodes.Node]:
        primary = self.chapter(self.arguments[0])
        timings, sizes = self.timings(primary), self.sizes(primary)

        def tables(dataset: Dataset, chapter: Chapter) -> list[nodes.Node]:
            out: list[nodes.Node] = []
            for n, problem in sizes:
                for timing in timings:
                    out.append(measurement_table(chapter, timing, n, problem, len(chapter.sizes()) > 1))
                    out.append(provenance_node(dataset))
            return out

        out = nodes.container(classes=["stepwise-table-block"])
        out.extend(self.per_gpu(tables, primary.id))
        out += _legend(primary)
        return [out]


class PlotDirective(_Base):
    """Per GPU, one bar chart per size."""

    required_arguments = 1
    option_spec = {"n": directives.positive_int}

    def run(self) -> list[nodes.Node]:
        primary = self.chapter(self.arguments[0])
        sizes = self.sizes(primary)

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
                    f"dashed lines: {chapter.share_of}{dotted}. Series \u2014 {series}.", dataset))
            return out

        return self.per_gpu(figures, primary.id)


class StepDirective(_Base):
    required_arguments = 2
    option_spec = {"no-api": directives.flag}

    def run(self) -> list[nodes.Node]:
        chapter = self.chapter(self.arguments[0])
        try:
            step = chapter.step(self.arguments[1])
        except DataError as exc:
            raise self.error(f"{self.name}: {exc}") from None
        repo = self.dataset.repo_root
        path = repo / step["file"]
        if not path.is_file():
            raise self.error(f"{self.name}: {chapter.id}/{step['id']}: {step['file']} does not exist")
        self.env.note_dependency(str(path.resolve()))

        out: list[nodes.Node] = []
        self._anchor(chapter, step, out)

        # Marks
        if step.get("beyond_article"):
            out.append(self._admonition(
                "Beyond the article",
                "This step is not in the source article; it is ours, added to reach the "
                "ceiling.", ["stepwise-beyond", "note"]))
        if not step.get("same_operation", True):
            out.append(self._admonition(
                "Not the same operation",
                "This step does not compute the same function as the original kernel for every "
                "input; its accuracy column is marked \u2260 op.", ["stepwise-not-op", "caution"]))
        out.extend(self.per_gpu(lambda dataset, ch: self._marks(ch, step) + [self._summary(ch, step)],
                                 chapter.id))
        out.append(self._resources(chapter, step))
        prev = chapter.previous_step(step["id"])
        if prev is not None and prev["file"] == step["file"]:
            # Steps that are launches of one source (block shapes of one template): the source is
            # shown once, at the first step of the run.
            out.append(self._same_source(chapter, prev, step))
        else:
            out.extend(self._source(step, path))
            if prev is not None:
                out.extend(self._diff(prev, step))
        if "no-api" not in self.options:
            out.extend(self._api(step))
        return out

    # -- pieces ----------------------------------------------------------
    def _anchor(self, chapter: Chapter, step: dict, out: list[nodes.Node]) -> str:
        """Register the step; its link target is the enclosing section (see _find_anchors)."""
        steps = _env_steps(self.env)
        key = (chapter.id, step["id"])
        if key in steps:
            other = steps[key][0]
            raise self.error(f"{self.name}: step {chapter.id}/{step['id']} already has a section "
                             f"(in {other})")
        anchor = nodes.make_id(f"stepwise-{chapter.id}-{step['id']}")
        steps[key] = (self.env.docname, anchor, step["title"])
        marker = stepwise_anchor("", chapter=chapter.id, step=step["id"], fallback=anchor)
        self.set_source_info(marker)
        out.append(marker)
        return anchor

    def _admonition(self, title: str, text: str, classes: list[str]) -> nodes.admonition:
        node = nodes.admonition(classes=["stepwise-mark"] + classes)  # furo colours by class
        node += nodes.title("", title)
        node += nodes.paragraph("", text)
        return node

    def _marks(self, chapter: Chapter, step: dict) -> list[nodes.Node]:
        """Warnings of one GPU's numbers for the step: stale, or not measured."""
        out: list[nodes.Node] = []
        state = chapter.states[step["id"]]
        if state.stale:
            warn = nodes.warning()
            warn += nodes.paragraph(
                "", f"Stale: source changed since measured ({state.stale_reason} "
                f"{chapter.dataset.measured_where()}). The numbers below are for the old source; "
                "re-run make measure.")
            out.append(warn)
        if state.unsupported:
            note = nodes.note()
            note += nodes.paragraph(
                "", f"Not run on {chapter.dataset.gpu_name}: {state.unsupported}. Its tests skip there, "
                "and the timing program leaves it out.")
            out.append(note)
        elif state.missing:
            warn = nodes.warning()
            by_timing: dict[str, list[str]] = {}
            for n, t in state.missing:
                by_timing.setdefault(t, []).append(f"{n:,}")
            pairs = "; ".join(f"timing {t} at n = {', '.join(ns)}" for t, ns in by_timing.items())
            warn += nodes.paragraph(
                "", f"Not measured: the measurement file of {chapter.dataset.gpu_name} has no row "
                f"for this step ({pairs}).")
            out.append(warn)
        return out

    def _summary(self, chapter: Chapter, step: dict) -> nodes.container:
        """One GPU's numbers for the step, at the chapter's main sizes (the sweep's are in its own
        table), then its tests and accuracy and the GPU's provenance line."""
        box = nodes.container(classes=["stepwise-step-summary"])
        header = ["timing", "median time (min\u2013max)", "GB/s", "GFLOP/s", "vs previous",
                  "vs first", "share of ceiling"]
        keys = ["median", "gbps", "gflops", "vs_prev", "vs_first", "share"]
        for baseline in chapter.baselines:
            header.append(f"vs {fmt.baseline_label(chapter, baseline['id'])}")
            keys.append(fmt.baseline_column(baseline["id"]))
        body, classes, found = [], [], []
        extra = set(chapter.sweep_sizes())
        sizes = [size for size in step["sizes"] if size["n"] not in extra] or step["sizes"]
        multi = len(sizes) > 1
        for size in sizes:
            for timing in chapter.timings:
                rows = fmt.step_rows(chapter, timing["id"], size["n"])
                row = next(r for r in rows if r.id == step["id"])
                found.append(chapter.step_row(step["id"], size["n"], timing["id"]))
                label = timing["id"] + (f", {size.get('problem', size['n'])}" if multi else "")
                tip = tooltip(label, timing["label"])
                body.append([_cell(nodes.paragraph("", "", tip))] +
                            [_fmt_cell(row.cells[k]) for k in keys])
                classes.append(row.classes)
        # Drop GB/s or GFLOP/s where the step has neither.
        drop = [i for i, k in enumerate(keys) if k in ("gbps", "gflops")
                and all(b[i + 1].astext() == fmt.DASH for b in body)]
        for i in sorted(drop, reverse=True):
            del header[i + 1]
            for b in body:
                del b[i + 1]
        box += _table(header, body, ["stepwise-data", "stepwise-step-table"], None, classes)

        measured = [r for r in found if r is not None]
        if measured:
            r = measured[0]
            tests_text, loud = fmt.format_tests(r["tests"])
            para = nodes.paragraph(classes=["stepwise-step-facts"])
            para += nodes.strong("", "Tests: ")
            para += nodes.inline("", tests_text,
                                 classes=["stepwise-fail"] if r["tests"]["failed"] else
                                 (["stepwise-attention"] if loud else []))
            para += nodes.Text(". Accuracy on the timed buffers: ")
            acc = fmt.format_ulp(r["accuracy"])
            para += nodes.inline("", f"max {acc}" if acc != fmt.DASH else acc)
            if r["accuracy"].get("max_rel") is not None:
                para += nodes.Text(f" (max relative error {fmt.format_rel(r['accuracy']['max_rel'])})")
            if not r["validated"]:
                para += nodes.inline("", " \u2014 NOT VALIDATED: the timed buffers did not match "
                                     "the reference", classes=["stepwise-fail"])
            else:
                para += nodes.Text(", validated against the double-precision reference")
            para += nodes.Text(".")
            box += para
        box += provenance_node(chapter.dataset)
        return box

    def _resources(self, chapter: Chapter, step: dict) -> nodes.container:
        box = nodes.container(classes=["stepwise-step-resources"])
        box += resources_table(self.dataset, chapter, [step], False, None)
        box += nodes.paragraph("", f"Compiled by {resources.compiled_by(self.dataset)}; occupancy at the "
                               "launcher\u2019s block shape (see the chapter\u2019s resources table).",
                               classes=["stepwise-provenance"])
        return box

    def _literal(self, text: str, language: str, caption: str, linenos: bool,
                 source_path: str) -> nodes.container:
        literal = nodes.literal_block(text, text, source=source_path)
        literal["language"] = language
        literal["linenos"] = linenos
        literal["classes"] += ["stepwise-code"]
        self.set_source_info(literal)
        wrapper = nodes.container("", literal_block=True, classes=["literal-block-wrapper"])
        cap = nodes.caption("", "", nodes.literal("", caption))
        self.set_source_info(cap)
        wrapper += cap
        wrapper += literal
        return wrapper

    def _source(self, step: dict, path: Path) -> list[nodes.Node]:
        text = path.read_text(encoding="utf-8")
        docdir = (Path(self.env.srcdir) / self.env.docname).parent
        rel = os.path.relpath(path, docdir).replace(os.sep, "/")
        download = addnodes.download_reference("", "", reftarget=rel, refdoc=self.env.docname,
                                               refexplicit=True, reftype="download",
                                               refdomain="")
        download += nodes.literal("", f"download {path.name}")
        para = nodes.paragraph(classes=["stepwise-download"])
        para += nodes.Text("The whole step, ready to copy (it compiles on its own with the CUDA "
                           "toolkit): ")
        para += download
        return [
            nodes.rubric("", "Source", classes=["stepwise-rubric"]),
            self._literal(text, "cuda", step["file"], True, str(path)),
            para,
        ]

    def _same_source(self, chapter: Chapter, prev: dict, step: dict) -> nodes.paragraph:
        """One paragraph instead of source, download and diff (see :func:`same_source_parts`)."""
        para = nodes.paragraph(classes=["stepwise-same-source"])
        for kind, text in same_source_parts(prev, step):
            if kind == "step":
                para += stepwise_stepref("", "", nodes.literal("", text), chapter=chapter.id,
                                         step=text, reftitle=prev["title"])
            elif kind == "code":
                para += nodes.literal("", text)
            else:
                para += nodes.Text(text)
        return para

    def _diff(self, prev: dict, step: dict) -> list[nodes.Node]:
        repo = self.dataset.repo_root
        prev_path = repo / prev["file"]
        if not prev_path.is_file():
            return []
        self.env.note_dependency(str(prev_path.resolve()))
        old = prev_path.read_text(encoding="utf-8").splitlines(keepends=True)
        new = (repo / step["file"]).read_text(encoding="utf-8").splitlines(keepends=True)
        diff = "".join(difflib.unified_diff(old, new, fromfile=prev["file"], tofile=step["file"]))
        if not diff:
            diff = "(no change)\n"
        return [
            nodes.rubric("", f"What changed since {prev['id']}", classes=["stepwise-rubric"]),
            self._literal(diff, "diff", f"diff {prev['file']} {step['file']}", False,
                          str(repo / step["file"])),
        ]

    def _api(self, step: dict) -> list[nodes.Node]:
        xml = self.config.breathe_projects.get(self.config.breathe_default_project) \
            if getattr(self.config, "breathe_projects", None) else None
        if not xml:
            return []
        index = Path(xml) / "index.xml"
        if index.is_file():
            self.env.note_dependency(str(index.resolve()))
        from breathe.directives.function import DoxygenFunctionDirective

        # A launcher named with template arguments (sum_matrix<32, 16>) is documented as the template.
        launcher = step["launcher"].split("<", 1)[0].strip()
        name = f"{step['namespace']}::{launcher}"
        directive = DoxygenFunctionDirective(
            "doxygenfunction", [name], {}, StringList(), self.lineno, self.content_offset,
            self.block_text, self.state, self.state_machine)
        result = directive.run()
        box = nodes.container(classes=["stepwise-api"])
        box += nodes.rubric("", "Launcher", classes=["stepwise-rubric"])
        box.extend(result)
        return [box]


def same_source_parts(prev: dict, step: dict) -> list[tuple[str, str]]:
    """The paragraph of a step whose file is the previous step's, as (kind, text) pieces.

    ``Same source as 01_block_32x32 (snippets/occupancy/01_sum_matrix_2d.cuh); this step launches
    sum_matrix<32, 16> with blocks of 32 × 16 threads.`` Kinds: ``text``, ``step`` (the previous
    step's id, linked to its section) and ``code``. The block is the step's first kernel's.
    """
    parts = [("text", "Same source as "), ("step", prev["id"]), ("text", " ("), ("code", step["file"]),
             ("text", "); this step launches "), ("code", step["launcher"])]
    kernels = step.get("kernels") or []
    if kernels and kernels[0].get("block"):
        parts.append(("text", f" with blocks of {resources.block_text(kernels[0]['block'])} threads"))
    parts.append(("text", "."))
    return parts


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
        primary = self.chapter(self.arguments[0])
        timing = self.options.get("timing", primary.timings[0]["id"])
        try:
            primary.timing(timing)
        except DataError as exc:
            raise self.error(f"{self.name}: {exc}") from None
        n, problem = self.sizes(primary)[0]
        return self.per_gpu(lambda dataset, chapter: self._table(chapter, timing, n, problem), primary.id)

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
        out += provenance_node(chapter.dataset)
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
    """The run: GPU, clocks and temperature before/after, the stopping rule."""

    required_arguments = 0
    optional_arguments = 1

    def run(self) -> list[nodes.Node]:
        chapter_id = self.chapter(self.arguments[0]).id if self.arguments else None
        return self.per_gpu(self._table, chapter_id)

    def _table(self, ds: Dataset, chapter: Chapter | None) -> list[nodes.Node]:
        gpu, run = ds.gpu, ds.run
        rule = run["stopping_rule"]

        def before_after(d: dict | None, unit: str) -> str:
            if not d:
                return "not recorded"
            b = "n/a" if d.get("before") is None else f"{fmt.plain(d['before'])} {unit}"
            a = "n/a" if d.get("after") is None else f"{fmt.plain(d['after'])} {unit}"
            return f"{b} before, {a} after"

        rows = [
            ("GPU", f"{gpu['name']} (compute capability {gpu['compute_capability']}, "
                    f"{gpu['sm_count']} SMs)"),
            ("L2 cache", fmt.format_bytes(gpu["l2_bytes"])),
        ]
        if gpu.get("global_memory_bytes"):
            rows.append(("global memory", fmt.format_bytes(gpu["global_memory_bytes"])))
        rows += [
            ("driver / CUDA", f"driver {gpu['driver']}, CUDA runtime {gpu['cuda_runtime']}, "
                              f"CUDA driver API {gpu['cuda_driver']}"),
            ("SM clock", before_after(gpu.get("sm_clock_mhz"), "MHz")),
            ("temperature", before_after(gpu.get("temperature_c"), "\u00b0C")),
            ("clocks read through", run.get("clock_source", "not recorded")),
            ("date", fmt.format_date(run["date"])),
            ("commit", run["commit"] + (" (uncommitted changes)" if run["dirty"] else "")),
        ]
        if run.get("command"):
            rows.append(("command", nodes.paragraph("", "", nodes.literal("", run["command"]))))
        if run.get("seed") is not None:
            rows.append(("input seed", str(run["seed"])))
        if "warmup_samples" in rule:
            rows.append(("warm-up samples (not kept)",
                         f"{rule['warmup_samples']}, or fewer (at least one) once they have taken half the "
                         "time limit per row"))
        rows += [
            ("minimum samples", str(rule["min_samples"])),
            ("maximum samples", str(rule["max_samples"])),
        ]
        if "target_rel_stderr" in rule:
            rows.append(("target relative standard error of the mean (stdev / mean / \u221asamples)",
                         f"{fmt.sig(100 * rule['target_rel_stderr'], 3)} %"))
        if "target_rel_noise" in rule:
            rows.append(("target relative noise (stdev / mean)",
                         f"{fmt.sig(100 * rule['target_rel_noise'], 3)} %"))
        rows += [
            ("time limit per row", f"{fmt.sig(rule['max_seconds_per_row'], 3)} s"),
            ("throttle threshold", f"a sample is discarded when its SM clock is below "
                                   f"{fmt.sig(100 * rule['throttle_threshold'], 3)} % of the "
                                   "run's highest clock"),
        ]
        for timing in (chapter.measured or {}).get("timings", []) if chapter is not None else []:
            if "throttle_threshold" in timing:  # the chapter's timing has its own rule
                own = timing["throttle_threshold"]
                rows.append((f"throttle threshold of this chapter's timing {timing['id']}",
                             "none: every sample is kept, whatever its SM clock (each row records the clocks "
                             "it ran at)" if own == 0 else
                             f"{fmt.sig(100 * own, 3)} % of the run's highest clock"))
        known = {"min_samples", "max_samples", "target_rel_stderr", "target_rel_noise",
                 "max_seconds_per_row", "throttle_threshold", "warmup_samples"}
        for key in sorted(set(rule) - known):  # anything newer timing programs add
            rows.append((key.replace("_", " "), str(rule[key])))
        body = [[_cell(k), _cell(v)] for k, v in rows]
        out = nodes.container(classes=["stepwise-table-block"])
        out += _table(["", "this run"], body, ["stepwise-data", "stepwise-run"],
                      "The run and its stopping rule")
        out += provenance_node(ds)
        return [out]


# ---------------------------------------------------------------------------
# Nsight Compute counts
# ---------------------------------------------------------------------------

_NCU_CACHE: dict[tuple[str, int, int], list] = {}


def _ncu_launches(path: Path) -> list:
    """The launches of a CSV file, parsed once per content (keyed by path, size and mtime); a
    missing file is the NcuError ncu.load_csv gives it."""
    if not path.is_file():
        return ncu.load_csv(path)
    stat = path.stat()
    key = (str(path), stat.st_size, stat.st_mtime_ns)
    if key not in _NCU_CACHE:
        _NCU_CACHE[key] = ncu.load_csv(path)
    return _NCU_CACHE[key]


def ncu_provenance(dataset: Dataset, csv_path: Path, chapter_id: str) -> str:
    """Where the counts come from; the GPU and commit only where the file name allows the claim."""
    name = csv_path.name
    if dataset.measurements is not None and ncu.same_session(csv_path, dataset.gpu,
                                                             dataset.source, chapter_id):
        dirty = " (dirty)" if dataset.run.get("dirty") else ""
        return (f"Nsight Compute counts, {dataset.gpu['name']}, recorded with the measurements "
                f"(commit {dataset.run['commit']}{dirty}) by make profile; file {name}.")
    return (f"Nsight Compute counts from {name}, recorded with the sources. "
            "They were not taken in the run whose measurements this page shows, and the file "
            "does not record the GPU\u2019s name or the commit.")


NCU_COLUMNS = [
    ("launches", "launches"),
    ("ld_requests", "global load requests"),
    ("ld_sectors", "global load sectors"),
    ("sectors_per_request", "sectors per request"),
    ("st_sectors", "global store sectors"),
    ("st_requests", "global store requests"),
    ("st_sectors_per_request", "store sectors per request"),
    ("warp_efficiency", "warp execution efficiency"),
    ("bank_conflicts", "shared bank conflicts (ld+st)"),
    ("instructions", "warp instructions executed"),
    ("instructions_per_warp", "instructions per warp"),
    ("dram_bytes", "DRAM read + written"),
]
#: Column headers of the fields that are not in the default columns.
NCU_EXTRA_COLUMNS = [
    ("dram_read_bytes", "DRAM read"),
    ("dram_write_bytes", "DRAM written"),
    ("branch_targets", "branch targets"),
    ("divergent_branches", "divergent branch targets"),
    ("branch_uniformity", "branch uniformity"),
    ("achieved_occupancy", "achieved occupancy"),
    ("tensor_active", "tensor pipe active"),
    ("dram_throughput", "DRAM throughput"),
    ("wgmma_bank_conflicts", "bank conflicts (wgmma)"),
]


class NcuDirective(_Base):
    """``stepwise-ncu CHAPTER CSVFILE``: Nsight Compute counts per step, from ``ncu --csv``.

    Options: ``:launches: all`` (default: sums over every launch of the step's call) or
    ``first`` (the first launch only: the pass over the input); ``:steps:`` a space-separated
    subset of the chapter's step ids; ``:columns:`` a space-separated subset of the columns
    (field names of :data:`ncu.FIELDS`, default all); ``:caption:`` the table's title.

    Several GPUs: where the file's name starts with a GPU's slug and the chapter
    (``<slug>-<chapter>-...``, as make profile names it), the file of every other GPU of the build
    that lies beside it, with that GPU's slug in its place, is shown too, each under its GPU's
    name (primary first); another GPU's missing file is not an error. The
    ``stepwise-ncu-number`` role reads the primary GPU's file (the named one where it has none).
    """

    required_arguments = 2
    option_spec = {
        "launches": lambda arg: directives.choice(arg, ("all", "first")),
        "steps": directives.unchanged_required,
        "columns": directives.unchanged_required,
        "caption": directives.unchanged_required,
    }

    def run(self) -> list[nodes.Node]:
        primary = self.chapter(self.arguments[0])
        rel, named = self.env.relfn2path(self.arguments[1])
        self.env.note_dependency(rel)
        files = self.ncu_files(Path(named), primary.id)
        role_file = next((path for ds, path in files if ds is self.dataset), Path(named))
        self.env.temp_data.setdefault("stepwise_ncu", {})[primary.id] = str(role_file)
        out = nodes.container(classes=["stepwise-table-block"])
        columns = []
        for dataset, path in files:
            self.env.note_dependency(str(path))
            if dataset is None:  # a file of no GPU of this build: as it is, unlabelled
                block, chapter = out, primary
            else:
                block, chapter = gpu_block(dataset), self.chapter(primary.id, dataset)
                out += block
            table, columns = self._table(chapter, path, dataset or self.dataset)
            block.extend(table)
        out += self._legend(columns)
        return [out]

    def _table(self, chapter: Chapter, path: Path, dataset: Dataset) -> tuple[list[nodes.Node], list]:
        """One file's table and provenance line, and the columns shown."""
        first_only = self.options.get("launches", "all") == "first"
        try:
            counts = ncu.step_counts(chapter, _ncu_launches(path), path, first_only)
        except DataError as exc:
            raise self.error(f"{self.name}: {exc}") from None
        if "steps" in self.options:
            wanted = self.options["steps"].split()
            for step_id in wanted:
                try:
                    chapter.step(step_id)
                except DataError as exc:
                    raise self.error(f"{self.name}: {exc}") from None
            counts = [c for c in counts if c.step["id"] in wanted]
        columns = NCU_COLUMNS
        if "columns" in self.options:
            names = self.options["columns"].split()
            unknown = [n for n in names if n not in ncu.FIELDS]
            if unknown:
                raise self.error(f"{self.name}: unknown column {unknown[0]!r} "
                                 f"(known: {', '.join(ncu.FIELDS)})")
            labels = dict(NCU_COLUMNS + NCU_EXTRA_COLUMNS)
            columns = [(n, labels[n]) for n in names]

        try:  # a late metric the file lacks (see ncu.LATE_METRICS) fails here, naming the file
            texts = [[ncu.format_field(c, key) for key, _l in columns] for c in counts]
        except DataError as exc:
            raise self.error(f"{self.name}: {exc}") from None
        body, classes = [], []
        for c, row_texts in zip(counts, texts):
            ref = stepwise_stepref("", "", nodes.literal("", c.step["id"]), chapter=chapter.id,
                                   step=c.step["id"], reftitle=c.step["title"])
            row = [_cell(nodes.paragraph("", "", ref))]
            for (key, _label), text in zip(columns, row_texts):
                para = nodes.paragraph("", text)
                if key in ("dram_bytes", "dram_read_bytes", "dram_write_bytes"):
                    para = nodes.paragraph("", "", tooltip(
                        text, f"{ncu.format_count(c.value(key))} bytes"))
                row.append(_cell(para, ["stepwise-num"]))
            body.append(row)
            classes.append(["stepwise-stale"] if chapter.states[c.step["id"]].stale else [])
        which = ("first launch of each step" if first_only else
                 "sums over all launches of one call")
        title = self.options.get("caption", f"Nsight Compute counts per step ({which})")
        return [_table(["step"] + [label for _k, label in columns], body,
                       ["stepwise-data", "stepwise-ncu"], title, classes),
                nodes.paragraph("", ncu_provenance(dataset, path, chapter.id),
                                classes=["stepwise-provenance"])], columns

    def _legend(self, columns: list) -> nodes.paragraph:
        first_only = self.options.get("launches", "all") == "first"
        legend = {
            ("launches",):
                "Launches: the kernel launches of the step\u2019s call in the file.",
            ("ld_requests", "sectors_per_request"):
                "Requests: warp-level global load instructions as the L1 sees them.",
            ("ld_sectors", "st_sectors", "sectors_per_request", "st_sectors_per_request"):
                "Sectors: the 32-byte pieces of memory the loads (or stores) touched, 4 per "
                "request when 32 lanes read 32 consecutive 4-byte words, 16 for 16-byte vector "
                "loads.",
            ("warp_efficiency",):
                "Warp execution efficiency: the average number of active threads per executed "
                "warp instruction, over 32, weighted by each launch\u2019s instruction count.",
            ("bank_conflicts",):
                "Shared bank conflicts: Nsight Compute\u2019s count of shared-memory bank "
                "conflicts, loads plus stores.",
            ("instructions_per_warp",):
                "Instructions per warp: warp instructions executed over warps launched.",
            ("dram_bytes", "dram_read_bytes", "dram_write_bytes"):
                "DRAM: bytes read from (or written to) device memory; the L2 cache serves the "
                "rest.",
            ("branch_targets", "divergent_branches", "branch_uniformity"):
                "Branch targets: Nsight Compute\u2019s count of the targets of the branch "
                "instructions the warps executed (smsp__sass_branch_targets); divergent: those of "
                "branches that split a warp\u2019s active threads; uniformity: the targets all of "
                "a warp\u2019s active threads took, over all targets (\u2014 where the step "
                "executed no branch).",
            ("achieved_occupancy",):
                "Achieved occupancy: warps active on an SM over the SM\u2019s maximum, averaged "
                "over the cycles it was active, then over the launches weighted by their warps.",
            ("tensor_active",):
                "Tensor pipe active: the cycles the SMs\u2019 tensor cores were busy with HMMA or "
                "HGMMA instructions, over the cycles the SMs were active.",
            ("dram_throughput",):
                "DRAM throughput: device memory\u2019s traffic as a share of its peak over the "
                "launch\u2019s time.",
            ("wgmma_bank_conflicts",):
                "Bank conflicts (wgmma): shared-memory bank conflicts of the tensor cores\u2019 own "
                "reads of A and B (none where the tiles are swizzled as the descriptors say).",
        }
        text = ("Counts of the first launch only. " if first_only else
                "Counts are sums over the launches. ")
        shown = {k for k, _l in columns}
        text += " ".join(v for keys, v in legend.items() if shown.intersection(keys))
        return nodes.paragraph("", text, classes=["stepwise-legend"])


class NcuNumberRole(SphinxRole):
    """``{stepwise-ncu-number}`reduction/04_interleaved_pairs/ld_sectors[@first]```.

    Reads the CSV file of the last ``stepwise-ncu`` directive for that chapter earlier on the
    same page; fields are those of :data:`ncu.FIELDS`.
    """

    def run(self) -> tuple[list[nodes.Node], list[nodes.system_message]]:
        text = self.text.strip()
        first_only = text.endswith("@first")
        text = text.removesuffix("@first")
        parts = text.split("/")

        def fail(message: str):
            msg = self.inliner.reporter.error(f"stepwise-ncu-number {self.text!r}: {message}",
                                              line=self.lineno)
            return [nodes.problematic(self.rawtext, self.rawtext)], [msg]

        if len(parts) != 3:
            return fail("expected CHAPTER/STEP/FIELD[@first]")
        chapter_id, step_id, field_name = parts
        if field_name not in ncu.FIELDS:
            return fail(f"unknown field {field_name!r} (known: {', '.join(ncu.FIELDS)})")
        dataset = dataset_of(self.env)
        path = self.env.temp_data.get("stepwise_ncu", {}).get(chapter_id)
        if path is None:
            return fail(f"no `stepwise-ncu {chapter_id} FILE` directive before it on this page")
        try:
            chapter = dataset.chapter(chapter_id)
            chapter.step(step_id)
            counts = ncu.step_counts(chapter, _ncu_launches(Path(path)), Path(path), first_only)
        except DataError as exc:
            return fail(str(exc))
        _env_chapters_used(self.env).setdefault(self.env.docname, set()).add(chapter.id)
        self.env.note_dependency(path)
        count = next(c for c in counts if c.step["id"] == step_id)
        try:
            value = ncu.format_field(count, field_name)
        except DataError as exc:
            return fail(str(exc))
        which = "first launch" if first_only else "all launches of one call"
        where = ncu_provenance(dataset, Path(path), chapter_id)
        node = tooltip(value, f"{ncu.FIELDS[field_name]}, {chapter_id}/{step_id}, {which}; {where}",
                       ["stepwise-number"])
        return [node], []


# ---------------------------------------------------------------------------
# What the compiler made of the kernels (SASS)
# ---------------------------------------------------------------------------

_SASS_CACHE: dict[tuple[str, int, int], sass.SassReport] = {}


def sass_dir(config) -> Path:
    """Where the chapters' SASS reports are: ``stepwise_sass_dir``, else ``<registry's folder>/sass``."""
    if config.stepwise_sass_dir:
        return Path(config.stepwise_sass_dir)
    return Path(config.stepwise_registry).resolve().parent / "sass"


def _sass_report(path: Path) -> sass.SassReport:
    """A report, parsed once per content (keyed by path, size and mtime)."""
    if not path.is_file():
        return sass.load(path)  # the error
    stat = path.stat()
    key = (str(path), stat.st_size, stat.st_mtime_ns)
    if key not in _SASS_CACHE:
        _SASS_CACHE[key] = sass.load(path)
    return _SASS_CACHE[key]


class SassDirective(_Base):
    """``stepwise-sass CHAPTER``: per step's kernel, its SASS instructions as the build compiled them.

    Reads ``<stepwise_sass_dir>/<CHAPTER>.json`` (conf/sass_report.py; see :mod:`.sass`).
    Options: ``:steps:`` a space-separated subset of the chapter's step ids; ``:listing:``
    (flag) each step's short listing (branches, convergence barriers, MUFU) as a literal block.
    A missing file, or a step's kernel the file has no function of, is a build error.
    """

    required_arguments = 1
    option_spec = {"steps": directives.unchanged_required, "listing": directives.flag}

    def run(self) -> list[nodes.Node]:
        chapter = self.chapter(self.arguments[0])
        path = sass_dir(self.config) / f"{chapter.id}.json"
        self.env.note_dependency(str(path.resolve()))
        steps = chapter.steps
        if "steps" in self.options:
            try:
                steps = [chapter.step(step_id) for step_id in self.options["steps"].split()]
            except DataError as exc:
                raise self.error(f"{self.name}: {exc}") from None
        arch = resources.preferred_arch(self.dataset)
        try:
            report = _sass_report(path)
            rows = [(step, kernel, function) for step in steps
                    for kernel, function in sass.step_functions(report, chapter, step, arch)]
        except DataError as exc:
            raise self.error(f"{self.name}: {exc}") from None

        variants = sorted({v for _s, _k, f in rows for v in f.counts["mufu"]})
        mma = sorted({v for _s, _k, f in rows for v in f.counts.get("mma", {})})
        mufu_columns = bool(variants) or not mma  # a chapter of tensor-core kernels need not show MUFU
        warpsync = any(f.counts["warpsync"] for _s, _k, f in rows)
        header = ["step", "kernel", "instructions", "BRA", "BSSY / BSYNC", "predicated"]
        header += ["WARPSYNC"] if warpsync else []
        header += (variants or ["MUFU"]) if mufu_columns else []
        header += mma
        body, classes = [], []
        for step, kernel, function in rows:
            c = function.counts
            ref = stepwise_stepref("", "", nodes.literal("", step["id"]), chapter=chapter.id,
                                   step=step["id"], reftitle=step["title"])
            name = nodes.paragraph("", "", tooltip(kernel["name"], function.name))
            cells = [_cell(nodes.paragraph("", "", ref)), _cell(name)]
            numbers = [f"{c['instructions']:,}", f"{c['bra']:,}", f"{c['bssy']:,} / {c['bsync']:,}",
                       f"{c['predicated']:,}"]
            numbers += [f"{c['warpsync']:,}"] if warpsync else []
            if mufu_columns:
                numbers += [f"{c['mufu'].get(v, 0):,}" for v in variants] if variants else ["0"]
            numbers += [f"{c.get('mma', {}).get(v, 0):,}" for v in mma]
            cells += [_cell(text, ["stepwise-num"]) for text in numbers]
            body.append(cells)
            classes.append(["stepwise-stale"] if chapter.states[step["id"]].stale else [])
        archs = ", ".join(dict.fromkeys(f.arch for _s, _k, f in rows))
        compiler = self.dataset.registry.get("compiled_by", {}).get("compiler", "an unrecorded compiler")
        title = (f"SASS instructions of each step\u2019s kernels, compiled by {compiler} for {archs}, "
                 f"read with cuobjdump -sass at build time ({report.tool}, {report.object})")
        out = nodes.container(classes=["stepwise-table-block"])
        out += _table(header, body, ["stepwise-data", "stepwise-sass"], title, classes)
        legend = (
            "Counts of the compiled code, each instruction once however often it runs (Nsight "
            "Compute counts what ran). Instructions: every SASS instruction of the kernel but the "
            "NOP padding. BRA: branch instructions, the branch-to-itself after the last EXIT "
            "included. BSSY / BSYNC: the convergence barrier a divergent region starts and ends "
            "with, where the warp\u2019s threads meet again. Predicated: instructions under a "
            "guard predicate (@P0, @!P1): the warp issues them, and only its threads whose "
            "predicate holds execute them. "
            + ("WARPSYNC: explicit warp synchronisations. " if warpsync else "")
            + ("MUFU: the special function unit\u2019s instructions by variant (__sinf is "
               "MUFU.SIN, __cosf MUFU.COS). " if mufu_columns else "")
            + ("HMMA, HGMMA: the tensor cores\u2019 instructions by shape and types: HMMA is a warp\u2019s "
               "mma.sync (and what WMMA compiles to), HGMMA a warpgroup\u2019s wgmma, Hopper\u2019s; "
               "each is one instruction in the code, however many times its loop runs it." if mma else ""))
        out += nodes.paragraph("", legend, classes=["stepwise-legend"])
        if "listing" in self.options:
            for step, kernel, function in rows:
                text = "\n".join(function.listing) + "\n" if function.listing else "(none)\n"
                literal = nodes.literal_block(text, text)
                literal["language"] = "text"
                literal["classes"] += ["stepwise-code", "stepwise-sass-listing"]
                self.set_source_info(literal)
                wrapper = nodes.container("", literal_block=True, classes=["literal-block-wrapper"])
                cap = nodes.caption("", "", nodes.literal("", f"{step['id']}: {function.name} "
                                                              f"({function.arch})"))
                self.set_source_info(cap)
                wrapper += cap
                wrapper += literal
                out += wrapper
            out += nodes.paragraph(
                "", "Listings: each branch, convergence barrier and MUFU instruction with its "
                "address; a run of more than three MUFU instructions of one variant is shortened "
                "to its first and last.", classes=["stepwise-legend"])
        return [out]


# ---------------------------------------------------------------------------
# Time and rate against problem size (any chapter)
# ---------------------------------------------------------------------------

def _ids(text: str) -> list[str]:
    return text.replace(",", " ").split()


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
    """

    required_arguments = 1
    option_spec = {"timing": directives.unchanged_required, "steps": directives.unchanged_required,
                   "baselines": directives.unchanged_required, "rows": directives.unchanged_required}

    def run(self) -> list[nodes.Node]:
        primary = self.chapter(self.arguments[0])
        timings = self.timings(primary)
        selection = {key: _ids(self.options[key]) if key in self.options else None
                     for key in ("rows", "steps", "baselines")}
        try:
            ids = sweep_data.select_rows(primary, **selection)
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
        out.extend(self.per_gpu(figures, primary.id))
        numbers = ", ".join(f"{sweep_data.step_number(i)} = {i}" for i in ids
                            if primary.kind_of(i) == "steps")
        out += nodes.paragraph("", (
            f"Cells: the row\u2019s rate (GFLOP/s or GB/s, from its median time) or its median time, "
            f"empty where the row is not measured at that size. Columns: steps by number ({numbers}), "
            "then the baselines and ceilings."), classes=["stepwise-legend"])
        return [out]

    def _one(self, chapter: Chapter, timing: dict, data: dict) -> list[nodes.Node]:
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
        out: list[nodes.Node] = [self.figure(render_sweep(data, self.plot_dir), sweep_alt_text(data),
                                             caption, chapter.dataset)]
        for key, title, text in (
                ("values", f"{unit} by size ({tid})", lambda v: fmt.sig(v)),
                ("times", f"Median time by size ({tid})", lambda v: fmt.format_time(v))):
            series = [s for s in data["series"] if any(v is not None for v in s[key])]
            header = ["n"] + [s["number"] for s in series]
            body = []
            for i, n in enumerate(data["sizes"]):
                row = [_cell(str(n) if n < 10000 else f"{n:,}", ["stepwise-num"])]
                for s in series:
                    value = s[key][i]
                    row.append(_cell("" if value is None else text(value), ["stepwise-num"]))
                body.append(row)
            classes = [["stepwise-beyond-l2"] if data["l2_n"] is not None and n > data["l2_n"] else []
                       for n in data["sizes"]]
            out.append(_table(header, body, ["stepwise-data", "stepwise-sweep-table"], title, classes))
        out.append(provenance_node(chapter.dataset))
        return out


# ---------------------------------------------------------------------------
# The front page's table: every chapter's headline, per GPU
# ---------------------------------------------------------------------------

SUMMARY_COLUMNS = ["first step", "final step", "speed\u00adup", "share of ceiling", "vs library"]


def _breakable(text: str) -> list[nodes.Node]:
    """Text that may wrap after its underscores (``single_cold``), for narrow columns."""
    out: list[nodes.Node] = []
    for i, part in enumerate(text.split("_")):
        if i:
            out += [nodes.Text("_"), nodes.raw("", "<wbr>", format="html")]
        out.append(nodes.Text(part))
    return out


class SummaryDirective(_Base):
    """``stepwise-summary``: one row per registry chapter with a ``headline``, in registry order:
    the chapter (linked to its page), the problem and the timing, then per GPU (primary first) the
    first and final step's median time, the speedup, the final step's share of the ceiling and
    the library baselines' time over the final step's. Under it one provenance line per GPU and a
    legend. The table has the classes ``stepwise-data stepwise-summary stepwise-gpus-<N>``; each
    GPU's header cell has ``stepwise-gpu-group``.
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
        table = nodes.table(classes=["stepwise-data", "stepwise-summary", f"stepwise-gpus-{len(datasets)}"])
        table += nodes.title("", "Results at a glance: each chapter\u2019s first step against its final one")
        width = 3 + len(SUMMARY_COLUMNS) * len(datasets)
        group = nodes.tgroup(cols=width)
        table += group
        for _ in range(width):
            group += nodes.colspec(colwidth=1)
        thead = nodes.thead()
        group += thead
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
            link = stepwise_chapterref("", "", nodes.Text(fmt.short_title(chapter.title)),
                                       chapter=chapter.id, reftitle=chapter.title)
            row += _cell(nodes.paragraph("", "", link))
            row += _cell(chapter.problem(h["n"]))
            timing = nodes.abbreviation("", "", *_breakable(h["timing"]),
                                        explanation=chapter.timing(h["timing"])["label"],
                                        classes=["stepwise-tip"])
            row += _cell(nodes.paragraph("", "", timing))
            for dataset in datasets:
                cells = self._cells(fmt.headline(dataset.chapter(chapter.id)))
                cells[0]["classes"].append("stepwise-gpu-start")
                for cell in cells:
                    row += cell
            tbody += row
        out = nodes.container(classes=["stepwise-table-block", "stepwise-summary-block"])
        out += table
        for dataset in datasets:
            out += provenance_node(dataset)
        out += nodes.paragraph("", (
            "First and final step: median times at the problem size and timing shown, with the "
            "steps\u2019 numbers (where the first step is not measured at that size, the first that "
            "is); speedup: the first step\u2019s time over the final one\u2019s; share of ceiling: the "
            "final step\u2019s share of what the chapter measures as the GPU\u2019s best for that work; "
            "vs library: the chapter\u2019s library baseline\u2019s time over the final step\u2019s "
            "(above 1\u00d7: faster than the library), \u2014 where the chapter has none; n/a: not "
            "measured on that GPU; needs \u2026: that GPU cannot run the step (hover for why)."),
            classes=["stepwise-legend"])
        return [out]

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
            what = ", ".join(f"{h.chapter.id}/{rid} n={h.n} timing={h.timing}" for rid in missing)
            return nodes.paragraph("", "", tooltip(text, f"not measured: {what} {where}",
                                                   ["stepwise-warning"]))

        def timed(row_id: str, row: dict | None) -> nodes.entry:
            if row is None:
                return _cell(na((row_id, row)), ["stepwise-missing"])
            para = nodes.paragraph("", "", tooltip(
                fmt.format_time(row["median_ms"]), f"{row_id}: median of {row['samples']} samples, "
                f"min\u2013max {fmt.format_spread(row['min_ms'], row['max_ms'], row['median_ms'])}"))
            para += nodes.inline("", f" step {int(row_id.split('_', 1)[0])}", classes=["stepwise-summary-label"])
            return _cell(para, ["stepwise-num"])

        first, final = (h.first_id, h.first), (h.final_id, h.final)
        cells = [timed(*first), timed(*final)]
        cells.append(_cell(na(first, final), ["stepwise-missing"]) if h.speedup is None
                     else _cell(fmt.format_speedup(h.speedup), ["stepwise-num"]))
        cells.append(_cell(na(final), ["stepwise-missing"]) if h.final is None
                     else _cell(fmt.format_share(h.share), ["stepwise-num"]))
        if not h.baselines:
            cells.append(_cell(fmt.DASH))
        else:
            entry = nodes.entry(classes=["stepwise-num"])
            for (bid, label, value), (_b, _l, row) in zip(h.vs(), h.baselines):
                if value is None:
                    para = na(final, (bid, row))
                else:
                    para = nodes.paragraph("", "", tooltip(
                        fmt.format_speedup(value),
                        f"{bid}\u2019s median time over {h.final_id}\u2019s, same GPU, size and timing "
                        f"(above 1\u00d7: faster than {label})"))
                para += nodes.inline("", " " + label, classes=["stepwise-summary-label"])
                entry += para
            cells.append(entry)
        return cells


# ---------------------------------------------------------------------------
# Role: one number
# ---------------------------------------------------------------------------

class NumberRole(SphinxRole):
    """``{stepwise-number}`elementwise/04_lookup_table/second_application_max_rel@batch```.

    ``CHAPTER/ROW/FIELD[@TIMING][#N][!GPU]``: the primary GPU's number, or with ``!GPU`` (a GPU
    slug, e.g. ``!nvidia-h200``) that GPU's; a GPU the build has no measurement file of is an error.
    ``#N`` is a size, or ``#MxNxK`` a rectangular problem (a registry size with that ``shape``).
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
        dataset = datasets.primary if slug is None else next(
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
        if state is not None and state.stale:
            classes.append("stepwise-stale")
        node = tooltip(value, f"{fmt.field_description(field_name)}, {chapter_id}/{row_id}, "
                              f"timing {timing}, n = {n}; {fmt.provenance(dataset)}", classes)
        return [node], []


# ---------------------------------------------------------------------------
# setup
# ---------------------------------------------------------------------------

def setup(app: Sphinx) -> dict:
    app.add_config_value("stepwise_registry", "", "env", [str])
    app.add_config_value("stepwise_measurements", "", "env", [str])
    app.add_config_value("stepwise_source", "recorded", "env", [str])
    app.add_config_value("stepwise_strict", False, "env", [bool, str])
    app.add_config_value("stepwise_repo_root", "", "env", [str])
    app.add_config_value("stepwise_measurement_schema", "", "env", [str])
    app.add_config_value("stepwise_sass_dir", "", "env", [str])
    app.add_config_value("stepwise_recorded", "", "env", [str])
    app.add_config_value("stepwise_primary_gpu", DEFAULT_PRIMARY_GPU, "env", [str])

    app.add_node(stepwise_stepref)
    app.add_node(stepwise_chapterref)
    app.add_node(stepwise_anchor)
    app.add_directive("stepwise-provenance", ProvenanceDirective)
    app.add_directive("stepwise-table", TableDirective)
    app.add_directive("stepwise-plot", PlotDirective)
    app.add_directive("stepwise-step", StepDirective)
    app.add_directive("stepwise-timings", TimingsDirective)
    app.add_directive("stepwise-resources", ResourcesDirective)
    app.add_directive("stepwise-accuracy", AccuracyDirective)
    app.add_directive("stepwise-run", RunDirective)
    app.add_directive("stepwise-ncu", NcuDirective)
    app.add_directive("stepwise-sass", SassDirective)
    app.add_directive("stepwise-sweep", SweepDirective)
    app.add_directive("stepwise-summary", SummaryDirective)
    from . import gemm_directives  # imports this module: registered here, not at import time

    gemm_directives.setup(app)
    app.add_role("stepwise-number", NumberRole())
    app.add_role("stepwise-ncu-number", NcuNumberRole())

    app.connect("builder-inited", _on_builder_inited)
    app.connect("env-purge-doc", _purge)
    app.connect("env-merge-info", _merge)
    app.connect("env-check-consistency", _check_consistency)
    app.connect("doctree-read", _find_anchors)
    app.connect("doctree-resolved", _resolve_refs)
    app.add_css_file("stepwise.css")
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True,
            "env_version": 1}
