"""Stepwise CUDA's Sphinx extension: measured tables, plots and step sections.

Directives (usable from MyST as ```{stepwise-table} elementwise```):

``stepwise-provenance [CHAPTER]``
    One line: GPU, date, commit, and whether the numbers were measured in
    this build or are recorded ones.
``stepwise-table CHAPTER`` (options ``:timing:``, ``:n:``)
    One table per timing (and problem size): steps, then ceilings and
    baselines, each number from the measurement file.
``stepwise-plot CHAPTER`` (option ``:n:``)
    Median time per step, one series per timing, log scale, min–max error
    bars, a dashed line for the chapter's ceiling.
``stepwise-step CHAPTER STEP``
    A step's summary row, full source, download link, diff against the
    previous step and its launcher's Doxygen documentation (via Breathe).
``stepwise-run`` / ``stepwise-timings CHAPTER`` / ``stepwise-accuracy CHAPTER``
    The run's GPU, clocks and stopping rule; a chapter's timings and
    ceilings; a chapter's accuracy table.

Role: ``{stepwise-number}`CHAPTER/ROW/FIELD[@TIMING][#N]``` (see fmt.FIELDS).

Configuration (conf.py; conf/conf.py fills them from environment variables):
``stepwise_registry``, ``stepwise_measurements``, ``stepwise_source``
(``fresh``/``recorded``), ``stepwise_strict``, ``stepwise_repo_root``,
``stepwise_measurement_schema``.

The Sphinx-specific code lives in :mod:`.sphinx_ext` so that :mod:`.data`
and :mod:`.fmt` can be used (by conf/build_docs.py and tests) without it.
"""
from __future__ import annotations

__version__ = "1.0"


def setup(app):  # pragma: no cover - thin wrapper, exercised by the build tests
    from .sphinx_ext import setup as _setup

    return _setup(app)
