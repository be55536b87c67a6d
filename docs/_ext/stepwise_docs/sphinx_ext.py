"""The Sphinx side of stepwise_docs: its configuration, the checks made once per build, the step links'
resolution and ``setup``. The directives and roles live by what they draw: :mod:`.tables` (measured tables
and plots, one number), :mod:`.steps` (a step's section), :mod:`.evidence` (Nsight Compute, SASS),
:mod:`.overview` (sweeps, the front page) and :mod:`.gemm_directives` (the GEMM chapters' own), on
:mod:`.common`."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from docutils import nodes
from sphinx.application import Sphinx
from sphinx.errors import ConfigError, ExtensionError
from sphinx.util import logging

from . import collapsible, gemm_directives
from .common import (_env_chapters_used, _env_steps, dataset_of, stepwise_anchor, stepwise_chapterref,
                     stepwise_stepref)
from .data import DEFAULT_SCHEMA, REFERENCE_GPU, DataError, load_datasets
from .evidence import NcuDirective, NcuNumberRole, SassDirective
from .overview import (ChapterListDirective, SummaryDirective, SummaryLineDirective, SweepDirective,
                       resolve_chapter_lists, stepwise_chapter_list)
from .pytorch import PytorchDirective
from .steps import StepDirective
from .tables import (AccuracyDirective, NumberRole, PlotDirective, ProvenanceDirective, ResourcesDirective,
                     RunDirective, TableDirective, TimingsDirective)

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
                                 cfg.stepwise_reference_gpu or REFERENCE_GPU)
    except DataError as exc:
        raise ExtensionError(str(exc), modname="stepwise_docs") from None
    app.stepwise_datasets = datasets  # type: ignore[attr-defined]
    app.stepwise_dataset = datasets.reference  # type: ignore[attr-defined]

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
# setup
# ---------------------------------------------------------------------------

#: The extension's configuration values (conf/conf.py sets them from the environment) and their defaults.
_CONFIG_VALUES = {
    "stepwise_registry": "", "stepwise_measurements": "", "stepwise_source": "recorded",
    "stepwise_strict": False, "stepwise_repo_root": "", "stepwise_measurement_schema": "",
    "stepwise_sass_dir": "", "stepwise_recorded": "", "stepwise_reference_gpu": REFERENCE_GPU,
}
#: The directives of this module's pages (the SGEMM chapter's are in gemm_directives).
_DIRECTIVES = {
    "stepwise-provenance": ProvenanceDirective, "stepwise-table": TableDirective,
    "stepwise-plot": PlotDirective, "stepwise-step": StepDirective, "stepwise-timings": TimingsDirective,
    "stepwise-resources": ResourcesDirective, "stepwise-accuracy": AccuracyDirective,
    "stepwise-run": RunDirective, "stepwise-ncu": NcuDirective, "stepwise-sass": SassDirective,
    "stepwise-sweep": SweepDirective, "stepwise-summary": SummaryDirective,
    "stepwise-summary-line": SummaryLineDirective, "stepwise-pytorch": PytorchDirective,
    "stepwise-chapter-list": ChapterListDirective,
}


def setup(app: Sphinx) -> dict:
    for name, default in _CONFIG_VALUES.items():
        app.add_config_value(name, default, "env", [bool, str] if isinstance(default, bool) else [str])

    app.add_node(stepwise_stepref)
    app.add_node(stepwise_chapterref)
    app.add_node(stepwise_anchor)
    app.add_node(stepwise_chapter_list)
    for name, directive in _DIRECTIVES.items():
        app.add_directive(name, directive)
    gemm_directives.setup(app)
    collapsible.setup(app)
    app.add_role("stepwise-number", NumberRole())
    app.add_role("stepwise-ncu-number", NcuNumberRole())

    app.connect("builder-inited", _on_builder_inited)
    app.connect("env-purge-doc", _purge)
    app.connect("env-merge-info", _merge)
    app.connect("env-check-consistency", _check_consistency)
    app.connect("doctree-read", _find_anchors)
    app.connect("doctree-resolved", _resolve_refs)
    app.connect("doctree-resolved", resolve_chapter_lists)
    app.add_css_file("stepwise.css")
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True,
            "env_version": 1}
