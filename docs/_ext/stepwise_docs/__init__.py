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
``stepwise-step CHAPTER STEP`` (option ``:no-api:``)
    A step's summary row, full source, download link, diff against the
    previous step and its launcher's Doxygen documentation (via Breathe).
    A step whose file is the previous step's (steps that launch one template
    with different block shapes) shows one paragraph instead of source,
    download and diff: "Same source as <previous step> (<file>); this step
    launches <launcher> with blocks of <x> × <y> threads".
``stepwise-resources CHAPTER``
    Every step's kernels: block shape, registers, static shared and local
    memory (from the compiler's report of this build) and the theoretical
    occupancy at that block shape (see :mod:`.resources`). Each step section
    shows its own kernels the same way.
``stepwise-run`` / ``stepwise-timings CHAPTER`` / ``stepwise-accuracy CHAPTER``
    The run's GPU, clocks and stopping rule; a chapter's timings and
    ceilings; a chapter's accuracy table.
``stepwise-ncu CHAPTER CSVFILE`` (options ``:launches: all|first``,
``:steps: ID ...``, ``:caption:``)
    Nsight Compute counts per step from ``ncu --csv`` output (path relative
    to the page): load requests and sectors, store sectors, warp execution
    efficiency, bank conflicts, instructions, DRAM bytes (see :mod:`.ncu`;
    strict parsing, every problem is a build error). Option ``:columns:``
    picks fields of ncu.FIELDS, among them ones not shown by default:
    ``dram_read_bytes``, ``dram_write_bytes``, ``branch_targets``,
    ``divergent_branches``, ``branch_uniformity`` (uniform over all branch
    targets) and ``achieved_occupancy`` (the launches' mean, weighted by
    their warps); a file profiled before a field's metric was (see
    ncu.LATE_METRICS) makes that field a build error: re-run make profile.
``stepwise-sass CHAPTER`` (options ``:steps: ID ...``, ``:listing:``)
    What the compiler made of each step's kernels: SASS instructions, BRA,
    BSSY / BSYNC, predicated instructions and MUFU by variant, from the
    build's ``<stepwise_sass_dir>/<CHAPTER>.json`` (conf/sass_report.py over
    ``cuobjdump -sass``; see :mod:`.sass`); ``:listing:`` adds each step's
    branches, barriers and MUFU instructions as a listing. A missing file or
    a kernel without a function in it is a build error.

``stepwise-tile-bounds CHAPTER`` (options ``:n:``, ``:steps:``, ``:timing:``),
``stepwise-sweep CHAPTER`` (options ``:timing:``, ``:steps:``, ``:baselines:``),
``stepwise-roofline CHAPTER NCU_FILE`` (options ``:n:``, ``:timing:``),
``stepwise-autotune CHAPTER`` (options ``:n:``, ``:timing:``)
    The SGEMM chapter's evidence: the SC'10 register-blocking bounds for this GPU, rate
    against problem size, a roofline from Nsight Compute's DRAM bytes, the autotuning sweep
    (see :mod:`.gemm` and :mod:`.gemm_directives`).

Roles: ``{stepwise-number}`CHAPTER/ROW/FIELD[@TIMING][#N]``` (see fmt.FIELDS;
also ``speedup_over:ROW`` and ``time_over:ROW``), and
``{stepwise-ncu-number}`CHAPTER/STEP/FIELD[@first]``` (see ncu.FIELDS, e.g.
``divergent_branches``, ``branch_uniformity``, ``achieved_occupancy``; reads the
file of the last ``stepwise-ncu`` directive for that chapter on the page).

Strict builds (Sphinx ``-W``) also fail when a registry chapter has no page, or
a step no ``stepwise-step`` section.

Configuration (conf.py; conf/conf.py fills them from environment variables):
``stepwise_registry``, ``stepwise_measurements``, ``stepwise_source``
(``fresh``/``recorded``), ``stepwise_strict``, ``stepwise_repo_root``,
``stepwise_measurement_schema``, ``stepwise_sass_dir`` (STEPWISE_SASS_DIR; default
the registry's folder + ``/sass``).

The Sphinx-specific code lives in :mod:`.sphinx_ext` so that :mod:`.data`
and :mod:`.fmt` can be used (by conf/build_docs.py and tests) without it.
"""
from __future__ import annotations

__version__ = "1.0"


def setup(app):  # pragma: no cover - thin wrapper, exercised by the build tests
    from .sphinx_ext import setup as _setup

    return _setup(app)
