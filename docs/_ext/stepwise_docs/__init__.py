"""Stepwise CUDA's Sphinx extension: measured tables, plots and step sections.

Directives (usable from MyST as ```{stepwise-table} elementwise```):

``stepwise-provenance [CHAPTER]``
    One line: GPU, date, commit, and whether the numbers were measured in
    this build or are recorded ones.
``stepwise-table CHAPTER`` (options ``:timing:``, ``:n:``)
    One table per timing and problem size (``:n:`` picks one size): steps,
    then ceilings and baselines, each number from the measurement file. A
    chapter with library baselines gets one "vs <library>" column per
    baseline (the library's median time over the step's, same run).
``stepwise-plot CHAPTER`` (option ``:n:``)
    Median time per step, one figure per problem size, one series per
    timing, log scale, min–max error bars, a dashed line for the chapter's
    ceiling and a dotted one per library baseline.
``stepwise-step CHAPTER STEP``
    A step's summary row, full source, download link, diff against the
    previous step and its launcher's Doxygen documentation (via Breathe).
``stepwise-run`` / ``stepwise-timings CHAPTER`` / ``stepwise-accuracy CHAPTER``
    The run's GPU, clocks and stopping rule; a chapter's timings and
    ceilings; a chapter's accuracy table.
``stepwise-ncu CHAPTER CSVFILE`` (options ``:launches: all|first``,
``:steps: ID ...``, ``:caption:``)
    Nsight Compute counts per step from ``ncu --csv`` output (path relative
    to the page): load requests and sectors, store sectors, warp execution
    efficiency, bank conflicts, instructions, DRAM bytes (see :mod:`.ncu`;
    strict parsing, every problem is a build error).

Roles: ``{stepwise-number}`CHAPTER/ROW/FIELD[@TIMING][#N]``` (see fmt.FIELDS;
also ``speedup_over:ROW`` and ``time_over:ROW``), and
``{stepwise-ncu-number}`CHAPTER/STEP/FIELD[@first]``` (see ncu.FIELDS; reads the
file of the last ``stepwise-ncu`` directive for that chapter on the page).

Strict builds (Sphinx ``-W``) also fail when a registry chapter has no page, or
a step no ``stepwise-step`` section.

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
