"""What every directive of stepwise_docs builds on: the datasets of the build, the step-link nodes,
node helpers (tooltips, provenance lines, GPU blocks, tables) and the directives' base class."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from docutils import nodes
from sphinx.util.docutils import SphinxDirective

from . import fmt, ncu
from .data import Chapter, DataError, Dataset, Datasets


def dataset_of(env) -> Dataset:
    """The reference dataset: the one the prose, the code and the SGEMM evidence cite."""
    return env.app.stepwise_dataset


def datasets_of(env) -> Datasets:
    """Every GPU's dataset, the reference one first (the tables and plots show each)."""
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


def _env_steps(env) -> dict:
    if not hasattr(env, "stepwise_steps"):
        env.stepwise_steps = {}
    return env.stepwise_steps


def _env_chapters_used(env) -> dict:
    if not hasattr(env, "stepwise_chapters_used"):
        env.stepwise_chapters_used = {}
    return env.stepwise_chapters_used


# ---------------------------------------------------------------------------
# Helpers building nodes
# ---------------------------------------------------------------------------

def tooltip(text: str, explanation: str, classes: list[str] | None = None) -> nodes.abbreviation:
    """Text with a hover explanation (``<abbr title=...>`` in HTML)."""
    return nodes.abbreviation("", text, explanation=explanation,
                              classes=["stepwise-tip"] + (classes or []))


def provenance_node(dataset: Dataset, chapter: Chapter | None = None) -> nodes.paragraph:
    """Where and when ``chapter``'s numbers were measured (its own run), or the whole file's (see fmt.provenance)."""
    return nodes.paragraph("", fmt.provenance(dataset, chapter), classes=["stepwise-provenance"])


def gpu_block(dataset: Dataset, chapter: Chapter | None = None,
              shown_steps: list[str] | None = None) -> nodes.container:
    """The block of one GPU's tables or plots: headed with the GPU's name (class
    ``stepwise-gpu``; the page's other GPUs follow in blocks of their own). With the ``chapter`` whose
    numbers it shows, a second GPU's block of a chapter with stale rows starts with the as-of note
    (:func:`as_of_node`), where one of ``shown_steps`` (default: every step) is stale."""
    block = nodes.container(classes=["stepwise-gpu"] + ([f"stepwise-gpu-{dataset.slug}"]
                                                        if dataset.slug else []))
    block += nodes.rubric("", dataset.gpu_name, classes=["stepwise-gpu-heading"])
    if chapter is not None:
        shown = [s["id"] for s in chapter.steps] if shown_steps is None else shown_steps
        if any(chapter.states[step_id].stale for step_id in shown):
            block.extend(as_of_node(chapter))
    return block


def as_of_node(chapter: Chapter) -> list[nodes.Node]:
    """The as-of note of a second GPU's chapter with stale rows (:func:`.fmt.as_of_note`, its commands set as
    code), as a note of class ``stepwise-as-of``; nothing where the note is empty."""
    text = fmt.as_of_note(chapter)
    if not text:
        return []
    para = nodes.paragraph()
    for i, part in enumerate(text.split("`")):
        if part:
            para += nodes.literal("", part) if i % 2 else nodes.Text(part)
    note = nodes.note(classes=["stepwise-as-of"])
    note += para
    return [note]


def _ids(text: str) -> list[str]:
    """The ids of a directive option: separated by spaces or commas."""
    return text.replace(",", " ").split()


def _cell(content: Any, classes: list[str] | None = None) -> nodes.entry:
    entry = nodes.entry(classes=classes or [])
    if isinstance(content, nodes.Node):
        entry += content
    else:
        entry += nodes.paragraph("", str(content))
    return entry


def is_empty_cell(entry: nodes.entry) -> bool:
    """Whether a table cell shows no value: nothing, or the dash that stands for none (:data:`.fmt.DASH`)."""
    return entry.astext().strip() in ("", fmt.DASH)


def columns_with_values(body: list[list[nodes.entry]]) -> list[int]:
    """The indexes of the columns to show: the first (what each row is), and every other that has a value in some row
    (:func:`is_empty_cell`). Without rows, every column."""
    width = max((len(cells) for cells in body), default=0)
    if not body:
        return []
    return [i for i in range(width)
            if i == 0 or any(i < len(cells) and not is_empty_cell(cells[i]) for cells in body)]


def _table(header: list[str], body: list[list[nodes.entry]], classes: list[str],
           title: str | None = None, row_classes: list[list[str]] | None = None,
           keep_empty_columns: bool = False) -> nodes.table:
    """A table of ``header`` and ``body`` (one list of cells per row). A column with no value in any row
    (:func:`columns_with_values`) is left out, unless ``keep_empty_columns``."""
    if body and not keep_empty_columns:
        shown = columns_with_values(body)
        if len(shown) < len(header):
            header = [header[i] for i in shown if i < len(header)]
            body = [[cells[i] for i in shown if i < len(cells)] for cells in body]
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
    if cell.clock:  # the median SM clock of a row that ran below the boost clock (fmt.below_boost)
        entry += nodes.paragraph("", "", tooltip(cell.clock, cell.clock_title),
                                 classes=["stepwise-sub", "stepwise-clock"])
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


# ---------------------------------------------------------------------------
# Directives
# ---------------------------------------------------------------------------

class _Base(SphinxDirective):
    has_content = False
    final_argument_whitespace = False

    @property
    def dataset(self) -> Dataset:
        """The reference dataset (see :class:`.data.Datasets`)."""
        return dataset_of(self.env)

    @property
    def datasets(self) -> list[Dataset]:
        """Every GPU's dataset, the reference one first."""
        return list(datasets_of(self.env))

    def chapter(self, chapter_id: str, dataset: Dataset | None = None) -> Chapter:
        """The chapter in ``dataset`` (default: the reference one)."""
        try:
            chapter = (dataset or self.dataset).chapter(chapter_id)
        except DataError as exc:
            raise self.error(f"{self.name}: {exc}") from None
        _env_chapters_used(self.env).setdefault(self.env.docname, set()).add(chapter.id)
        for path in self._dependencies(chapter):
            self.env.note_dependency(path)
        return chapter

    def steps_option(self, chapter: Chapter) -> list[str] | None:
        """The step ids of the ``:steps:`` option, each checked to be one of ``chapter``'s; None
        without the option."""
        if "steps" not in self.options:
            return None
        wanted = self.options["steps"].split()
        for step_id in wanted:
            try:
                chapter.step(step_id)
            except DataError as exc:
                raise self.error(f"{self.name}: {exc}") from None
        return wanted

    def _dependencies(self, chapter: Chapter) -> list[str]:
        deps = []
        cfg = self.config
        deps.append(str(Path(cfg.stepwise_registry).resolve()))
        deps += [str(Path(path).resolve()) for path in datasets_of(self.env).paths()]
        return deps

    def per_gpu(self, render, chapter_id: str | None = None,
                shown_steps: list[str] | None = None) -> list[nodes.Node]:
        """The one loop over the GPUs: for every dataset, the reference one first, a :func:`gpu_block` with
        what ``render(dataset, chapter)`` returns (``chapter`` is None without ``chapter_id``). A second GPU's
        block of a chapter with stale rows among ``shown_steps`` (default: every step) starts with the as-of
        note; a pending chapter's block says why it has no numbers."""
        out: list[nodes.Node] = []
        for dataset in self.datasets:
            chapter = self.chapter(chapter_id, dataset) if chapter_id else None
            block = gpu_block(dataset, chapter, shown_steps)
            if chapter is not None and chapter.pending:
                block += not_measured_node(dataset, chapter)
            else:
                block.extend(render(dataset, chapter))
            out.append(block)
        return out

    @property
    def plot_dir(self) -> Path:
        return Path(self.env.app.doctreedir) / "stepwise_plots"

    def figure(self, path: Path, alt: str, caption: str, dataset: Dataset | None = None,
               chapter: Chapter | None = None) -> nodes.figure:
        """An image of the plot directory, its caption, and the provenance of the dataset's chapter under it."""
        docdir = (Path(self.env.srcdir) / self.env.docname).parent
        uri = os.path.relpath(path, docdir).replace(os.sep, "/")
        figure = nodes.figure(classes=["stepwise-plot"])
        figure += nodes.image(uri=uri, alt=alt, classes=["stepwise-plot"])
        figure += nodes.caption("", caption)
        legend = nodes.legend()
        legend += provenance_node(dataset or self.dataset, chapter)
        figure += legend
        return figure

    def ncu_files(self, named: Path, chapter_id: str) -> list[tuple[Dataset | None, Path]]:
        """A page's Nsight Compute file and its siblings of the build's other GPUs, the reference one first.

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
        "", f"Not recorded on {dataset.gpu_name} yet: its measurement file (last written by the run of commit "
        f"{run.get('commit', 'unknown')}, {str(run.get('date', 'an unknown date'))[:10]}) has no numbers for this "
        f"chapter. {chapter.pending}")
    return note
