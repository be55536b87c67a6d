"""Sphinx configuration for Stepwise CUDA.

Run through conf/build_docs.py (``make docs``), which runs Doxygen first and
then ``sphinx-build -c conf docs build/docs/html`` with these environment
variables set:

STEPWISE_REGISTRY       the step registry (``stepwise_bench --list --json``)
STEPWISE_MEASUREMENTS   a measurement file, or a directory of them (one per GPU)
STEPWISE_RECORDED       a directory of recorded measurement files whose GPUs STEPWISE_MEASUREMENTS
                        does not cover are shown too, labelled recorded (make docs passes
                        docs/measurements with fresh measurements; default: none)
STEPWISE_SOURCE         ``fresh`` (measured in this build) or ``recorded``
STEPWISE_REFERENCE_GPU  the reference GPU's slug: the GPU whose numbers the prose cites when none
                        is fresh, and whose recorded file must be current; every other recorded GPU
                        is a second GPU, whose numbers of a step changed since are shown as of their
                        commit (default: stepwise_docs.data.REFERENCE_GPU; absent from the build: the
                        first GPU by slug). STEPWISE_PRIMARY_GPU, its former name, is still read
STEPWISE_STRICT         ``1``: a stale or missing measurement stops the build (but a second GPU's
                        stale rows, shown as of their commit)
STEPWISE_DOXYGEN_XML    Doxygen's XML output directory (read by Breathe)
STEPWISE_REPO_ROOT      the repository the registry's file paths are relative to
                        (default: the parent of this directory)
STEPWISE_SASS_DIR       where the chapters' SASS reports are, ``<chapter>.json``
                        (written by stepwise_docs/sass_report.py at build time; build_docs.py does
                        not set it: the default is the registry's folder + ``/sass``,
                        build/sass/)

Each can also be overridden with ``-D name=value`` (``stepwise_registry``,
``stepwise_measurements``, ``stepwise_recorded``, ``stepwise_source``, ``stepwise_strict``,
``stepwise_repo_root``, ``stepwise_sass_dir``, ``stepwise_reference_gpu``).
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

CONF_DIR = Path(__file__).resolve().parent
REPO_ROOT = CONF_DIR.parent

# Our own extension lives in docs/_ext (relative to this file, not to the cwd). The one place that puts it on
# the path: the scripts beside this file that use it (build_docs.py, profile.py) import this module for it.
EXT_DIR = REPO_ROOT / "docs" / "_ext"
if str(EXT_DIR) not in sys.path:
    sys.path.insert(0, str(EXT_DIR))

from stepwise_docs.data import REFERENCE_GPU  # noqa: E402  (the one place that names the reference GPU)

# -- Project -----------------------------------------------------------------
project = "Stepwise CUDA"
author = "The Stepwise CUDA authors"
copyright = "the Stepwise CUDA authors"
language = "en"

# -- General -----------------------------------------------------------------
extensions = [
    "myst_parser",
    "breathe",
    "sphinx_copybutton",
    "stepwise_docs",
]
source_suffix = {".md": "markdown", ".rst": "restructuredtext"}
root_doc = "index"
exclude_patterns = ["_build", "_ext", "measurements", "**/.ipynb_checkpoints", "README.md"]
templates_path: list[str] = []
pygments_style = "sphinx"
pygments_dark_style = "monokai"
highlight_language = "cuda"
numfig = False

# -- MyST --------------------------------------------------------------------
# No dollarmath: MathJax would be fetched from a CDN, and the site must work offline.
myst_enable_extensions = ["colon_fence", "deflist", "smartquotes"]
myst_heading_anchors = 3

# -- C++ / CUDA: let the C++ domain parse CUDA declarations ------------------
cpp_id_attributes = ["__global__", "__device__", "__host__", "__forceinline__"]
cpp_paren_attributes = ["__launch_bounds__", "__align__"]

# -- Breathe -----------------------------------------------------------------
breathe_projects = {"stepwise": os.environ.get("STEPWISE_DOXYGEN_XML", "")}
breathe_default_project = "stepwise"
breathe_domain_by_extension = {"cu": "cpp", "cuh": "cpp"}
breathe_default_members = ()
breathe_show_include = True
breathe_show_define_initializer = False

# -- stepwise_docs -----------------------------------------------------------
stepwise_registry = os.environ.get("STEPWISE_REGISTRY", "")
stepwise_measurements = os.environ.get("STEPWISE_MEASUREMENTS", "")
stepwise_recorded = os.environ.get("STEPWISE_RECORDED", "")
stepwise_reference_gpu = (os.environ.get("STEPWISE_REFERENCE_GPU") or os.environ.get("STEPWISE_PRIMARY_GPU")
                          or REFERENCE_GPU)
stepwise_source = os.environ.get("STEPWISE_SOURCE", "recorded")
stepwise_strict = os.environ.get("STEPWISE_STRICT", "0") not in ("", "0", "false", "no")
stepwise_repo_root = os.environ.get("STEPWISE_REPO_ROOT", str(REPO_ROOT))
stepwise_measurement_schema = str(CONF_DIR / "measurement.schema.json")
# The build's SASS reports (stepwise_docs/sass_report.py), one <chapter>.json per chapter that asks for one.
stepwise_sass_dir = os.environ.get(
    "STEPWISE_SASS_DIR", str(Path(stepwise_registry).resolve().parent / "sass") if stepwise_registry else "")

# -- sphinx-copybutton -------------------------------------------------------
copybutton_exclude = ".linenos, .gp, .go"

# -- HTML --------------------------------------------------------------------
html_theme = "furo"
html_title = "Stepwise CUDA"
html_static_path: list[str] = []  # stepwise_docs adds its own CSS
html_show_sourcelink = False
html_copy_source = False
html_last_updated_fmt = None
html_theme_options = {
    "navigation_with_keys": True,
}
