"""Stepwise CUDA's Sphinx extension: measured tables, plots and step sections.

Several GPUs: a build has one dataset per measurement file, one file per GPU (see
:class:`.data.Datasets`). One of them is the *reference*: the fresh one if any, else the recorded
one of the reference GPU (``stepwise_reference_gpu``, default :data:`.data.REFERENCE_GPU`), else
the first by GPU slug. The prose (both roles), the step sections' code and API, and the SGEMM
evidence (tile bounds, roofline, autotuning) cite the reference one. The tables and plots below
marked *per GPU* are drawn once per dataset, the reference one first, then by slug, each block
headed with the GPU's name (class ``stepwise-gpu``) and followed by that GPU's provenance line.

Every other recorded GPU is a *second GPU*. Where a step changed after a second GPU measured its
chapter, that GPU's rows stay, marked stale (class ``stepwise-stale``), and are shown as of their
commit: the one note of :func:`.fmt.as_of_note` ("<GPU>: measured at commit abc1234 (date), before
step 09_x changed; not re-measured. The step's source then: `git show abc1234:<file>`.") opens
that GPU's block of the chapter (class ``stepwise-as-of``; in a step section, where the step is
one of them), marks its cells in the results table (``as of abc1234``, the note as tooltip) and
ends the tooltip of a number of such a step.

Directives (usable from MyST as ```{stepwise-table} elementwise```):

``stepwise-summary``
    The front page's results table: one row per registry chapter with a
    ``headline`` (registry order), its title linked to its page, the problem
    and the timing in a few words ("one cold launch"); per GPU a group of
    columns: the first and final step's median time, each with its place in
    the chapter ("10 of 12"; hover for the steps it leaves out and why), the
    speedup ("≠ op" beside it where one of the two steps computes another
    function), the final step's share of the ceiling, and
    per library baseline its time over the final step's ("0.947× cuBLAS";
    "level" where a rerun of the chapter's recorded commit, kept under
    ``logs/``, puts it more than 2 % from the recording's, see :mod:`.reruns`;
    — without a baseline; n/a where not measured). Classes
    ``stepwise-summary stepwise-gpus-<N>``; each GPU's header cell
    ``stepwise-gpu-group``. Under it one provenance line per GPU. For narrow
    screens the same numbers as one table per GPU (``stepwise-summary-one-gpu``),
    which the stylesheet shows in place of the wide one.
``stepwise-summary-line``
    The reference GPU's results in two sentences, for the top of the front
    page: in how many of the chapters measured against a library the final
    step is level with it (within 2 %) or ahead, which are behind, and the
    range of the final steps' speedups over the first where both compute
    the same function.
``stepwise-chapter-list``
    The site's contents and the front page's list of its pages: the pages
    named in its body (one docname a line), then every chapter of the step
    registry in the registry's order at its page ``<id>``, each its title,
    linked, and the ``summary`` of its front matter; a hidden toctree gives
    the sidebar the same pages. A page missing, or one without a summary,
    is a warning.
``stepwise-provenance [CHAPTER]``
    One line per GPU: GPU, date, commit, and whether the numbers were
    measured in this build or are recorded ones.
``stepwise-table CHAPTER`` (options ``:timing:``, ``:n:``) -- per GPU
    One table per timing and problem size (the chapter's main sizes; ``:n:``
    picks one size, main or sweep): steps, then ceilings and baselines, each
    number from the measurement file; under a median that ran more than 1 %
    below the boost clock, its median SM clock (:func:`.fmt.below_boost`).
    A chapter with library baselines gets
    one "vs <library>" column per baseline (the library's median time over
    the step's, same run).
``stepwise-plot CHAPTER`` (option ``:n:``) -- per GPU
    Median time per step, one figure per problem size, one series per
    timing, log scale, min–max error bars, a dashed line for the chapter's
    ceiling and a dotted one per library baseline.
``stepwise-sweep CHAPTER`` (options ``:timing:``, ``:steps: ID ...``, ``:baselines: ID ...``,
``:rows: ID ...``) -- per GPU and timing
    Median time and rate (GFLOP/s, else GB/s) against n, two panels, log
    axes (n in powers of two): the registry's ``sweep.rows`` (steps solid,
    baselines thick dashed, ceilings thin dashed grey) over every size they
    are measured at; without a ``sweep``, every step and baseline over every
    size. ``:steps:``/``:baselines:`` replace those of the rows, ``:rows:``
    names all of them. A vertical line where the problem's data
    (``sweep.footprint``) fills the GPU's L2 cache (``gpu.l2_bytes``); the
    numbers as two tables (rate, median time; rows n). With ``sweep.axis``:
    the sweep's own sizes against ``shape[shape_index]``, named by its
    ``label``, without the L2 line. See :mod:`.sweep`.
``stepwise-step CHAPTER STEP`` (option ``:no-api:``)
    A step's summary (per GPU: its numbers at the chapter's main sizes, its
    tests and accuracy, stale or missing marks), full source, download link,
    diff against the previous step and its launcher's Doxygen documentation
    (via Breathe; not an entry of the page's contents, where every step's
    launcher of the same name would repeat).
    A step whose file is the previous step's (steps that launch one template
    with different block shapes) shows one paragraph instead of source,
    download and diff: "Same source as <previous step> (<file>); this step
    launches <launcher> with blocks of <x> × <y> threads".
``stepwise-resources CHAPTER``
    Every step's kernels: block shape, registers, static shared and local
    memory (from the compiler's report of this build) and the theoretical
    occupancy at that block shape (see :mod:`.resources`). Each step section
    shows its own kernels the same way.
``stepwise-run`` (per GPU) / ``stepwise-timings CHAPTER`` / ``stepwise-accuracy CHAPTER`` (per GPU)
    The run's GPU, clocks and stopping rule in two columns (of several runs:
    what they share once, then each run's own rows; the command with its
    paths reduced to file names); a chapter's timings and
    ceilings (from the registry, the same for every GPU: shown once); a
    chapter's accuracy table.

Every table leaves out a column with no value in any of its rows (the GB/s
of a GEMM's steps: a ceiling's rate is then set beside its title), and the
FLOP rates of a table, plot or number read in one unit: TFLOP/s where any is
1,000 GFLOP/s or more, else GFLOP/s (:func:`.fmt.flop_rate_unit`). Plots are
titled with the size's problem text (never the key that stands for a shape),
and a size that is an odd neighbour of a measured power of two (4095 beside
4096) is drawn as a point of its own, not joined into the line.
``stepwise-ncu CHAPTER CSVFILE`` (options ``:launches: all|first``,
``:steps: ID ...``, ``:caption:``)
    Nsight Compute counts per step from ``ncu --csv`` output (path relative
    to the page): load requests and sectors, store sectors, warp execution
    efficiency, bank conflicts, instructions, DRAM bytes (see :mod:`.ncu`;
    strict parsing, every problem is a build error). Option ``:columns:``
    picks fields of ncu.FIELDS, among them ones not shown by default:
    ``dram_read_bytes``, ``dram_write_bytes``, ``branch_targets``,
    ``divergent_branches``, ``branch_uniformity`` (uniform over all branch
    targets), ``achieved_occupancy``, ``tensor_active`` (the tensor pipe's
    busy cycles, HMMA and HGMMA) and ``dram_throughput`` (each the launches'
    mean, weighted by their durations, or by their warps in a file profiled
    without durations) and ``wgmma_bank_conflicts``; a file profiled before a field's metric was (see
    ncu.LATE_METRICS) makes that field a build error: re-run make profile.
    Where the file's name starts with a GPU's slug and the chapter
    (``<slug>-<chapter>-...``), the other GPUs' files beside it (their slug
    in its place) are shown too, each under its GPU's name; a missing one is
    not an error.
``stepwise-sass CHAPTER`` (options ``:steps: ID ...``, ``:listing:``)
    What the compiler made of each step's kernels: SASS instructions, BRA,
    BSSY / BSYNC, predicated instructions, MUFU by variant and the tensor
    cores' instructions (HMMA, HGMMA) by variant, from the
    build's ``<stepwise_sass_dir>/<CHAPTER>.json`` (:mod:`.sass_report` over
    ``cuobjdump -sass``; see :mod:`.sass`); ``:listing:`` adds each step's
    branches, barriers and MUFU instructions as a listing. A missing file or
    a kernel without a function in it is a build error.

``stepwise-tile-bounds CHAPTER`` (options ``:n:``, ``:steps:``, ``:timing:``),
``stepwise-roofline CHAPTER NCU_FILE`` (options ``:n:``, ``:timing:``),
``stepwise-autotune CHAPTER`` (options ``:n:``, ``:timing:``)
    The SGEMM chapter's evidence, on the reference GPU: the SC'10 register-blocking bounds
    for it, a roofline from Nsight Compute's DRAM bytes (the reference GPU's file beside the
    named one where there is one, else the named file with its own GPU's times), the
    autotuning sweep (see :mod:`.gemm` and :mod:`.gemm_directives`).

Roles (the reference GPU's numbers; the tooltip names it):
``{stepwise-number}`CHAPTER/ROW/FIELD[@TIMING][#N]``` (see fmt.FIELDS;
also ``speedup_over:ROW`` and ``time_over:ROW``; N defaults to the chapter's first
main size; ``#MxNxK`` or ``#RxC`` names a problem by its registry ``shape`` (a
rectangular GEMM, a matrix), whose n is a key that the plots against n leave out;
where sizes share a shape (fp32 and bf16), ``#RxC/WORD`` the one whose problem text
ends in WORD, e.g. ``#16384x8192/bf16``, or with several words the one that has each,
e.g. ``#16384x8192/layernorm/bf16``; an unknown or ambiguous shape is an error), and
``{stepwise-ncu-number}`CHAPTER/STEP/FIELD[@first]``` (see ncu.FIELDS, e.g.
``divergent_branches``, ``branch_uniformity``, ``achieved_occupancy``; reads the
reference GPU's file of the last ``stepwise-ncu`` directive for that chapter on the
page, or the named file where the reference GPU has none).

Registry fields the pages read beyond the steps (all optional): a chapter's
``headline`` (``n``, ``timing``, ``first``, ``final``: its row in
``stepwise-summary``) and ``sweep`` (``sizes``: extra sizes measured only for
``rows``, steps, ceilings or baselines; ``footprint``: ``bytes_per_n`` and
``power``, the problem's bytes at size n; ``axis``: ``label`` and ``shape_index``,
to draw the sweep's ``sizes``, each a size with a ``shape``, against
``shape[shape_index]`` instead of n, with no L2 line; ``main_sizes``: those of its
``sizes`` that are main sizes too). A size's ``shape`` (``[M, N, K]`` or
``[rows, cols]``) makes its n a key. ``Chapter.sizes()`` are the main sizes (every
step size but the sweep's, bar its ``main_sizes`` and those a step outside
``sweep.rows`` is measured at), ``Chapter.all_sizes()`` all of them.

Strict builds (Sphinx ``-W``) also fail when a registry chapter has no page, or
a step no ``stepwise-step`` section, on every GPU's missing rows and on the
stale rows of all but second GPUs (each message names its measurement file; a
second GPU's stale rows are shown as of their commit). Not missing: a step the GPU cannot
run (the file's ``unsupported`` list: its sections say why), and a chapter a
recorded file has no numbers for where ``pending.toml`` beside the recorded
files says why (every per-GPU block of that chapter shows the reason; an
entry that is no longer true fails the build).

Configuration (conf.py; conf/conf.py fills them from environment variables):
``stepwise_registry``, ``stepwise_measurements`` (a file or a directory: every
``*.json`` is one GPU's; two of one GPU are an error), ``stepwise_recorded`` (a
directory of recorded files, added for the GPUs ``stepwise_measurements`` does not
cover), ``stepwise_source`` (``fresh``/``recorded``, of ``stepwise_measurements``),
``stepwise_reference_gpu`` (default :data:`.data.REFERENCE_GPU`), ``stepwise_strict``,
``stepwise_repo_root``, ``stepwise_measurement_schema``, ``stepwise_sass_dir``
(STEPWISE_SASS_DIR; default the registry's folder + ``/sass``).

The Sphinx-specific code lives apart, so that :mod:`.data` and :mod:`.fmt` can be
used (by conf/build_docs.py and tests) without it, in modules by what they draw:
:mod:`.tables` (measured tables and plots, resources, accuracy, the run, the
``stepwise-number`` role), :mod:`.steps` (a step's section), :mod:`.evidence`
(Nsight Compute and SASS), :mod:`.overview` (sweeps and the front page) and
:mod:`.gemm_directives` (the GEMM chapters' bounds, roofline and autotuning), on
:mod:`.common` (the directives' base class and node helpers); :mod:`.sphinx_ext`
holds the configuration, the checks once per build and ``setup``.
"""
from __future__ import annotations

__version__ = "1.0"


def setup(app):  # pragma: no cover - thin wrapper, exercised by the build tests
    from .sphinx_ext import setup as _setup

    return _setup(app)
