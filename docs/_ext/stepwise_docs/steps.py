"""A step's section: its code, what changed since the previous step (a diff), its API, numbers and
kernels (the ``stepwise-step`` directive)."""
from __future__ import annotations

import difflib
import os
from pathlib import Path

from docutils import nodes
from docutils.parsers.rst import directives
from docutils.statemachine import StringList
from sphinx import addnodes

from . import collapsible, fmt, resources
from .common import (_Base, _cell, _env_steps, _fmt_cell, _table, provenance_node, stepwise_anchor,
                     stepwise_stepref, tooltip)
from .data import Chapter, DataError
from .tables import resources_table


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
                                 chapter.id, [step["id"]]))
        out.append(self._resources(chapter, step))
        prev = chapter.previous_step(step["id"])
        if prev is not None and prev["file"] == step["file"]:
            # Steps that are launches of one source (block shapes of one template): the source is
            # shown once, at the first step of the run.
            out.append(self._same_source(chapter, prev, step))
        else:
            # The diff is the step's change and stays in view; the whole file is one click away (open at the
            # first step, which has no diff).
            changed = None
            if prev is not None:
                diff_nodes, changed = self._diff(prev, step)
                out.extend(diff_nodes)
            out.extend(self._source(step, path, prev, changed))
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
        """Warnings of one GPU's numbers for the step: stale, or not measured. A second GPU's stale step has
        no warning here: its block starts with the as-of note (:meth:`_Base.per_gpu`, given this step)."""
        out: list[nodes.Node] = []
        state = chapter.states[step["id"]]
        if state.stale and not chapter.dataset.is_second_gpu:
            warn = nodes.warning()
            warn += nodes.paragraph(
                "", f"Stale: source changed since measured ({state.stale_reason} "
                f"{chapter.measured_where()}). The numbers below are for the old source; "
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
                by_timing.setdefault(t, []).append(chapter.size_text(n))
            pairs = "; ".join(f"timing {t} at {', '.join(ns)}" for t, ns in by_timing.items())
            warn += nodes.paragraph(
                "", f"Not measured: the measurement file of {chapter.dataset.gpu_name} has no row "
                f"for this step ({pairs}).")
            out.append(warn)
        return out

    def _summary(self, chapter: Chapter, step: dict) -> nodes.container:
        """One GPU's numbers for the step, at the chapter's main sizes (the sweep's are in its own
        table), then its tests and accuracy and the GPU's provenance line."""
        box = nodes.container(classes=["stepwise-step-summary"])
        main = {n for n, _problem in chapter.sizes()}
        once: dict[int, dict] = {}
        for size in step["sizes"]:
            once.setdefault(size["n"], size)
        sizes = list(once.values())
        sizes = [size for size in sizes if size["n"] in main] or sizes
        multi = len(sizes) > 1
        # One unit for the FLOP rates of the whole table, whatever the size of each row.
        flop_unit = fmt.flop_rate_unit((chapter.step_row(step["id"], size["n"], timing["id"]) or {}).get("gflops")
                                       for size in sizes for timing in chapter.timings)
        header = ["timing", "median time (min\u2013max)", "GB/s", flop_unit[0], "vs previous",
                  "vs first", "share of ceiling"]
        keys = ["median", "gbps", "gflops", "vs_prev", "vs_first", "share"]
        for baseline in chapter.baselines:
            header.append(f"vs {fmt.baseline_label(chapter, baseline['id'])}")
            keys.append(fmt.baseline_column(baseline["id"]))
        body, classes, found = [], [], []
        for size in sizes:
            for timing in chapter.timings:
                rows = fmt.step_rows(chapter, timing["id"], size["n"], flop_unit)
                row = next(r for r in rows if r.id == step["id"])
                found.append(chapter.step_row(step["id"], size["n"], timing["id"]))
                label = timing["id"] + (f", {size.get('problem', size['n'])}" if multi else "")
                tip = tooltip(label, timing["label"])
                body.append([_cell(nodes.paragraph("", "", tip))] +
                            [_fmt_cell(row.cells[k]) for k in keys])
                classes.append(row.classes)
        # _table leaves out the columns without a value (GB/s or the FLOP rate; vs previous of a first step).
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
        box += provenance_node(chapter.dataset, chapter)
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

    def _source(self, step: dict, path: Path, prev: dict | None = None,
                changed: tuple[int, int] | None = None) -> list[nodes.Node]:
        """The whole step in a collapsed block under one line (its lines, and what changed over ``prev``: the
        lines ``changed`` added and removed), open where there is no previous step; the download link under it."""
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
            collapsible.details(source_summary(step, text, prev, changed),
                                [self._literal(text, "cuda", step["file"], True, str(path))],
                                ["stepwise-source"], open_=prev is None),
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

    def _diff(self, prev: dict, step: dict) -> tuple[list[nodes.Node], tuple[int, int] | None]:
        """The unified diff of ``prev``'s file and ``step``'s under its rubric, and the lines it adds and removes
        (None where the previous file is missing: no diff)."""
        repo = self.dataset.repo_root
        prev_path = repo / prev["file"]
        if not prev_path.is_file():
            return [], None
        self.env.note_dependency(str(prev_path.resolve()))
        old = prev_path.read_text(encoding="utf-8").splitlines(keepends=True)
        new = (repo / step["file"]).read_text(encoding="utf-8").splitlines(keepends=True)
        lines = list(difflib.unified_diff(old, new, fromfile=prev["file"], tofile=step["file"]))
        diff = "".join(lines) or "(no change)\n"
        return [
            nodes.rubric("", f"What changed since {prev['id']}", classes=["stepwise-rubric"]),
            self._literal(diff, "diff", f"diff {prev['file']} {step['file']}", False,
                          str(repo / step["file"])),
        ], diff_counts(lines)

    def _api(self, step: dict) -> list[nodes.Node]:
        xml = self.config.breathe_projects.get(self.config.breathe_default_project) \
            if getattr(self.config, "breathe_projects", None) else None
        if not xml:
            return []
        index = Path(xml) / "index.xml"
        if index.is_file():
            self.env.note_dependency(str(index.resolve()))
        from breathe.directives.function import DoxygenFunctionDirective

        # A launcher named with template arguments (sum_matrix<32, 16>) is documented as the template; a
        # step with several launchers (layer_norm and rms_norm) names them separated by commas.
        launchers = [part.split("<", 1)[0].strip() for part in launcher_names(step["launcher"])]
        box = nodes.container(classes=["stepwise-api"])
        box += nodes.rubric("", "Launcher" if len(launchers) == 1 else "Launchers", classes=["stepwise-rubric"])
        for launcher in launchers:
            directive = DoxygenFunctionDirective(
                "doxygenfunction", [f"{step['namespace']}::{launcher}"], {}, StringList(), self.lineno,
                self.content_offset, self.block_text, self.state, self.state_machine)
            box.extend(keep_out_of_contents(directive.run()))
        return [box]


def keep_out_of_contents(api: list[nodes.Node]) -> list[nodes.Node]:
    """Breathe's documentation of a launcher, its object descriptions marked as Sphinx's ``:no-contents-entry:``
    option marks them: every step documents a launcher of the same name (``update``, ``attention``), and as entries
    of the page's contents they would list that one name under every step section of the sidebar."""
    for node in api:
        for desc in node.findall(addnodes.desc):
            desc["no-contents-entry"] = desc["nocontentsentry"] = True
    return api


def launcher_names(text: str) -> list[str]:
    """The launchers a registry's ``launcher`` names: one, or several separated by commas outside template
    arguments (``layer_norm, rms_norm``; ``sum_matrix<32, 16>`` is one)."""
    names, depth, current = [], 0, ""
    for ch in text:
        depth += (ch == "<") - (ch == ">")
        if ch == "," and depth == 0:
            names.append(current.strip())
            current = ""
        else:
            current += ch
    names.append(current.strip())
    return [n for n in names if n]


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


def diff_counts(unified_diff_lines: list[str]) -> tuple[int, int]:
    """The lines a unified diff adds and removes (its ``+``/``-`` lines, not the ``+++``/``---`` headers)."""
    added = sum(1 for line in unified_diff_lines if line.startswith("+") and not line.startswith("+++"))
    removed = sum(1 for line in unified_diff_lines if line.startswith("-") and not line.startswith("---"))
    return added, removed


def source_summary(step: dict, text: str, prev: dict | None, changed: tuple[int, int] | None) -> str:
    """The one line over a step's collapsed source: ``Full source: 12_two_loaders.cuh, 1,218 lines (+85 -52 over
    11_split_columns)``."""
    name = step["file"].rsplit("/", 1)[-1]
    lines = len(text.splitlines())
    over = f" (+{changed[0]:,} \u2212{changed[1]:,} over {prev['id']})" if prev is not None and changed else ""
    return f"Full source: {name}, {lines:,} line{'' if lines == 1 else 's'}{over}"
