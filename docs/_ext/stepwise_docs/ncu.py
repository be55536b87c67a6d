"""Nsight Compute counts of a chapter's kernels, read from ``ncu --csv`` output (no Sphinx here).

The file is what ``ncu --csv --print-units base --metrics ...`` prints: one row per
(kernel launch, metric), with the columns ``ID`` (launches numbered in order),
``Kernel Name`` (demangled, e.g. ``void neighbored_pairs::reduce_kernel<int>(T1 *, T1 *, int)``),
``Grid Size``, ``Block Size``, ``Metric Name``, ``Metric Unit`` and ``Metric Value``
(with thousands separators: ``16,783,616``).

Parsing is strict, because these numbers are printed on the site as evidence: a missing
file or column, a value that is not a number, a scaled unit (``Kbyte``), a kernel whose
namespace is not one of the chapter's steps, a launch without one of the metrics below, or
a step with no launch at all is a :class:`NcuError` that names the file, line or launch.
(A metric of :data:`LATE_METRICS`, added after files were recorded, may be missing from a
launch; a field that needs it is then the error.)

Kernels are matched to steps by namespace: the scope of the kernel's name
(``neighbored_pairs`` above; Nsight Compute may print it shortened or in full) must be the
end of exactly one registry step's ``namespace`` (``stepwise::reduction::neighbored_pairs``).
Where several steps share the namespace (a chapter whose steps are block shapes of one
templated kernel, such as ``stepwise::occupancy::sum_matrix_2d::sum_matrix_kernel<32, 16>``),
the launch's ``Block Size`` picks the one step whose registry kernels have that block shape.
A kernel printed without namespaces (``void sum_matrix_kernel<32, 16>(const float *, ...)``, as
Nsight Compute 2025 prints some templated kernels) is matched by its name, template arguments
included, against the registry kernels' ``name``.
A step's counts are the sums over all of its launches in the file (the profiled test calls
each step once, so that is one call: the pass over the input and the passes over the block
sums), or over its first launch only (``first_only``): the pass over the input. Ratios
(sectors per request, warp execution efficiency, branch uniformity) are taken of those sums;
the achieved occupancy, a per-launch average, is the mean over the launches weighted by each
launch's warps.

Units: counts are plain numbers, sectors, bytes, instructions or ``branches``; the achieved
occupancy is in ``%`` (``sm__warps_active.avg.pct_of_peak_sustained_active``), which
:meth:`StepCounts.value` returns as a fraction like the other ratios.
"""
from __future__ import annotations

import csv
import io
import itertools
import re
from dataclasses import dataclass, field
from pathlib import Path

from .data import Chapter, DataError, _display
from .inputs import read_input
from .sass_report import outside_template_arguments

#: The metrics every launch must have, and what the site calls them.
METRICS = {
    "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum": "global load requests",
    "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum": "global load sectors",
    "l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum": "global store sectors",
    "l1tex__t_requests_pipe_lsu_mem_global_op_st.sum": "global store requests",
    "smsp__thread_inst_executed_per_inst_executed.ratio": "active threads per warp instruction",
    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum": "shared-memory bank conflicts (loads)",
    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum": "shared-memory bank conflicts (stores)",
    "smsp__inst_executed.sum": "warp instructions executed",
    "dram__bytes_read.sum": "DRAM bytes read",
    "dram__bytes_write.sum": "DRAM bytes written",
    "smsp__sass_branch_targets.sum": "branch targets",
    "smsp__sass_branch_targets_threads_divergent.sum": "divergent branch targets",
    "smsp__sass_branch_targets_threads_uniform.sum": "uniform branch targets",
    "sm__warps_active.avg.pct_of_peak_sustained_active": "achieved occupancy",
    "sm__pipe_tensor_op_hmma_type_hmma_hgmma_qgmma_cycles_active.avg.pct_of_peak_sustained_active":
        "tensor pipe active (HMMA and HGMMA)",
    "dram__throughput.avg.pct_of_peak_sustained_elapsed": "DRAM throughput",
    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_gmma.sum": "shared-memory bank conflicts (wgmma reads)",
    "smsp__inst_executed_pipe_xu.sum": "warp instructions of the XU pipe (MUFU: exponentials, reciprocals)",
    "gpu__time_duration.sum": "the launch's duration",
}
#: A launch's duration: the weight of its percentages in a step's averages.
DURATION = "gpu__time_duration.sum"
#: Metrics added after files were recorded: a launch may lack them, and only a field that needs
#: one fails (naming the file and launch; re-run ``make profile``).
LATE_METRICS = (
    "dram__bytes_write.sum",
    "smsp__sass_branch_targets.sum",
    "smsp__sass_branch_targets_threads_divergent.sum",
    "smsp__sass_branch_targets_threads_uniform.sum",
    "sm__warps_active.avg.pct_of_peak_sustained_active",
    "sm__pipe_tensor_op_hmma_type_hmma_hgmma_qgmma_cycles_active.avg.pct_of_peak_sustained_active",
    "dram__throughput.avg.pct_of_peak_sustained_elapsed",
    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_gmma.sum",
    "smsp__inst_executed_pipe_xu.sum",
    "gpu__time_duration.sum",
)
#: Units accepted as they are; anything else (Kbyte, Msector, ...) means ncu scaled the value.
#: ``branches`` is the unit ncu (CUDA 13.0, on an H100) prints for the branch-target counts,
#: ``%`` that of a ``pct_of_peak`` metric, ``ns`` that of a launch's duration (all with ``--print-units base``).
BASE_UNITS = {"", "byte", "sector", "inst", "request", "warp", "thread", "branches", "%", "ns"}
REQUIRED_COLUMNS = ("ID", "Kernel Name", "Grid Size", "Block Size", "Metric Name", "Metric Value")

#: The fields a step's counts have (the stepwise-ncu-number role and the table use these).
FIELDS = {
    "launches": "kernel launches",
    "ld_requests": "global load requests",
    "ld_sectors": "global load sectors (32 bytes each)",
    "sectors_per_request": "global load sectors per request",
    "st_sectors": "global store sectors (32 bytes each)",
    "st_requests": "global store requests",
    "st_sectors_per_request": "global store sectors per request",
    "warp_efficiency": "warp execution efficiency (average active threads per executed warp "
                       "instruction, over 32)",
    "bank_conflicts": "shared-memory bank conflicts, loads and stores",
    "instructions": "warp instructions executed",
    "instructions_per_warp": "warp instructions executed per warp launched",
    "dram_read_bytes": "DRAM bytes read",
    "dram_write_bytes": "DRAM bytes written",
    "dram_bytes": "DRAM bytes read and written",
    "branch_targets": "branch targets of the branch instructions the warps executed",
    "divergent_branches": "divergent branch targets (of branches that split a warp's active threads)",
    "branch_uniformity": "branch uniformity (uniform branch targets over all branch targets)",
    "achieved_occupancy": "achieved occupancy (active warps per SM over the maximum, averaged over "
                          "the step's launches weighted by their durations)",
    "tensor_active": "tensor pipe active (cycles the SMs' tensor cores ran HMMA or HGMMA over the cycles "
                     "the SMs were active, averaged over the step's launches weighted by their durations)",
    "dram_throughput": "DRAM throughput (share of its peak over the launches' elapsed time, averaged over "
                       "the step's launches weighted by their durations)",
    "wgmma_bank_conflicts": "shared-memory bank conflicts of the tensor cores' wgmma reads",
    "xu_instructions": "warp instructions of the XU pipe (the special-function unit, MUFU: exponentials, "
                       "reciprocals, conversions)",
    "xu_share": "share of the warp instructions executed that went to the XU pipe",
}

#: The fields that are a sum over the step's launches of the metrics named.
SUMMED_FIELDS = {
    "ld_requests": ("l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum",),
    "ld_sectors": ("l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum",),
    "st_sectors": ("l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum",),
    "st_requests": ("l1tex__t_requests_pipe_lsu_mem_global_op_st.sum",),
    "bank_conflicts": ("l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum",
                       "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum"),
    "instructions": ("smsp__inst_executed.sum",),
    "dram_read_bytes": ("dram__bytes_read.sum",),
    "dram_write_bytes": ("dram__bytes_write.sum",),
    "dram_bytes": ("dram__bytes_read.sum", "dram__bytes_write.sum"),
    "branch_targets": ("smsp__sass_branch_targets.sum",),
    "divergent_branches": ("smsp__sass_branch_targets_threads_divergent.sum",),
    "wgmma_bank_conflicts": ("l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_gmma.sum",),
    "xu_instructions": ("smsp__inst_executed_pipe_xu.sum",),
}
#: The fields that are one field over another (NaN where the second is 0).
RATIO_FIELDS = {"sectors_per_request": ("ld_sectors", "ld_requests"),
                "st_sectors_per_request": ("st_sectors", "st_requests"),
                "xu_share": ("xu_instructions", "instructions")}
#: The fields that are a per-launch percentage, averaged over the launches weighted by their durations (by their
#: warps in a file profiled before durations were: a short launch of many warps then weighs more than it should).
LAUNCH_WEIGHTED_FIELDS = {
    "achieved_occupancy": "sm__warps_active.avg.pct_of_peak_sustained_active",
    "tensor_active": "sm__pipe_tensor_op_hmma_type_hmma_hgmma_qgmma_cycles_active.avg.pct_of_peak_sustained_active",
    "dram_throughput": "dram__throughput.avg.pct_of_peak_sustained_elapsed",
}


class NcuError(DataError):
    """A problem with a Nsight Compute CSV file; one line that names the file."""


@dataclass
class Launch:
    """One kernel launch of the file and its metrics."""

    id: int
    kernel: str
    threads: int  # grid size x block size
    line: int  # first line of the file that mentions it
    metrics: dict[str, float] = field(default_factory=dict)
    file: str = ""  # the file it was read from, for messages
    block: tuple[int, int, int] = (0, 0, 0)  # the launch's block shape (x, y, z), from "Block Size"

    def metric(self, name: str) -> float:
        """One metric; a late metric the file lacks is a NcuError that names the file and launch."""
        if name not in self.metrics:
            raise NcuError(f"Nsight Compute file {self.file or '(unknown)'}: launch {self.id} "
                           f"({self.kernel}, line {self.line}) has no {name}: the file was recorded "
                           "before it was profiled; re-run make profile")
        return self.metrics[name]

    @property
    def warps(self) -> int:
        return -(-self.threads // 32)


@dataclass
class StepCounts:
    """What Nsight Compute counted for one step (summed over the launches used)."""

    step: dict
    launches: list[Launch]

    def total(self, metric: str) -> float:
        return sum(launch.metric(metric) for launch in self.launches)

    def value(self, name: str) -> float:
        if name == "launches":
            return len(self.launches)
        if name in SUMMED_FIELDS:
            return sum(self.total(metric) for metric in SUMMED_FIELDS[name])
        if name in RATIO_FIELDS:
            numerator, denominator = (self.value(part) for part in RATIO_FIELDS[name])
            return numerator / denominator if denominator else float("nan")
        if name in LAUNCH_WEIGHTED_FIELDS:  # a per-launch average
            return self._launch_weighted(LAUNCH_WEIGHTED_FIELDS[name])
        if name == "warp_efficiency":
            # Instruction-weighted: the average number of active threads over every warp
            # instruction the step's launches executed, as a fraction of 32.
            inst = self.total("smsp__inst_executed.sum")
            if not inst:
                return float("nan")
            threads = sum(launch.metrics["smsp__thread_inst_executed_per_inst_executed.ratio"]
                          * launch.metrics["smsp__inst_executed.sum"] for launch in self.launches)
            return threads / inst / 32.0
        if name == "instructions_per_warp":
            warps = sum(launch.warps for launch in self.launches)
            return self.value("instructions") / warps if warps else float("nan")
        if name == "branch_uniformity":
            targets = self.value("branch_targets")
            uniform = self.total("smsp__sass_branch_targets_threads_uniform.sum")
            return uniform / targets if targets else float("nan")
        raise NcuError(f"unknown Nsight Compute field {name!r} (known: {', '.join(FIELDS)})")

    @property
    def weighted_by_duration(self) -> bool:
        """Whether the per-launch averages weigh each launch by its duration (every launch has one), else by its
        warps."""
        return all(DURATION in launch.metrics for launch in self.launches)

    def _launch_weighted(self, percent_metric: str) -> float:
        """A per-launch percentage as a fraction: the mean over the launches weighted by their durations, or by
        their warps where the file has no durations."""
        weights = ([launch.metrics[DURATION] for launch in self.launches] if self.weighted_by_duration
                   else [launch.warps for launch in self.launches])
        total = sum(weights)
        if not total:
            return float("nan")
        return sum(launch.metric(percent_metric) * w for launch, w in zip(self.launches, weights)) / total / 100.0


# ---------------------------------------------------------------------------
# Reading the file
# ---------------------------------------------------------------------------

def parse_number(text: str) -> float:
    """``"16,783,616"`` -> 16783616.0, ``"23.84"`` -> 23.84; anything else raises ValueError."""
    cleaned = text.strip()
    if re.fullmatch(r"[0-9]{1,3}(,[0-9]{3})+(\.[0-9]+)?", cleaned):
        cleaned = cleaned.replace(",", "")
    if not re.fullmatch(r"-?[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?", cleaned):
        raise ValueError(f"not a number: {text!r}")
    return float(cleaned)


def _shape(text: str) -> tuple[int, int, int]:
    """``"(32, 16, 1)"`` -> ``(32, 16, 1)``."""
    parts = re.fullmatch(r"\(\s*(\d+)\s*,\s*(\d+)\s*,\s*(\d+)\s*\)", text.strip())
    if not parts:
        raise ValueError(f"not a (x, y, z) size: {text!r}")
    x, y, z = (int(p) for p in parts.groups())
    return x, y, z


def _dims(text: str) -> int:
    """``"(256, 1, 1)"`` -> 256."""
    x, y, z = _shape(text)
    return x * y * z


def load_csv(path: Path) -> list[Launch]:
    """Every launch of a ``ncu --csv`` file, in ID order, each with every metric of :data:`METRICS`."""
    path = Path(path)
    where = f"Nsight Compute file {_display(path)}"
    text = read_input(path, where, NcuError, encoding="utf-8-sig")
    lines = text.splitlines(keepends=True)
    # ncu prints its own "==PROF==" / "==WARNING==" lines before the table unless they were
    # sent to a log file; nothing else may precede the header.
    skip = 0
    while skip < len(lines) and lines[skip].startswith("=="):
        skip += 1
    if skip == len(lines) or not lines[skip].strip():
        raise NcuError(f"{where} has no CSV header (expected the output of ncu --csv)")
    reader = csv.reader(io.StringIO("".join(lines[skip:])))
    header = next(reader)
    missing = [c for c in REQUIRED_COLUMNS if c not in header]
    if missing:
        raise NcuError(f"{where}: line {skip + 1} is not an ncu --csv header: no column "
                       f"{', '.join(repr(c) for c in missing)}")
    col = {name: header.index(name) for name in header}
    unit_col = col.get("Metric Unit")
    launches: dict[int, Launch] = {}
    for offset, row in enumerate(reader):
        line = skip + 2 + offset
        if not row or all(not cell.strip() for cell in row):
            continue
        if len(row) != len(header):
            raise NcuError(f"{where}: line {line} has {len(row)} fields, the header {len(header)}")
        try:
            launch_id = int(row[col["ID"]])
            block = _shape(row[col["Block Size"]])
            threads = _dims(row[col["Grid Size"]]) * block[0] * block[1] * block[2]
        except ValueError as exc:
            raise NcuError(f"{where}: line {line}: {exc}") from None
        kernel = row[col["Kernel Name"]]
        launch = launches.get(launch_id)
        if launch is None:
            launch = launches[launch_id] = Launch(launch_id, kernel, threads, line, file=_display(path),
                                                  block=block)
        elif launch.kernel != kernel or launch.threads != threads or launch.block != block:
            raise NcuError(f"{where}: line {line}: launch ID {launch_id} was {launch.kernel!r} "
                           f"on line {launch.line}, here {kernel!r}")
        metric = row[col["Metric Name"]]
        if metric not in METRICS:
            continue  # other metrics may be in the file; only these are shown
        unit = row[unit_col].strip() if unit_col is not None else ""
        if unit not in BASE_UNITS:
            raise NcuError(f"{where}: line {line}: {metric} is in {unit!r}, a scaled unit; "
                           "profile with ncu --print-units base")
        try:
            value = parse_number(row[col["Metric Value"]])
        except ValueError as exc:
            raise NcuError(f"{where}: line {line}: {metric} of launch {launch_id}: {exc}") from None
        if metric in launch.metrics and launch.metrics[metric] != value:
            raise NcuError(f"{where}: line {line}: launch {launch_id} has two values for {metric}")
        launch.metrics[metric] = value
    if not launches:
        raise NcuError(f"{where} holds no kernel launches")
    for launch in launches.values():
        absent = [m for m in METRICS if m not in launch.metrics and m not in LATE_METRICS]
        if absent:
            raise NcuError(f"{where}: launch {launch.id} ({launch.kernel}, line {launch.line}) "
                           f"has no {absent[0]}" + (f" (and {len(absent) - 1} more metrics)"
                                                    if len(absent) > 1 else "")
                           + "; profile with --metrics " + ",".join(METRICS))
    return [launches[i] for i in sorted(launches)]


# ---------------------------------------------------------------------------
# Kernels to steps
# ---------------------------------------------------------------------------

def kernel_scope(name: str) -> list[str]:
    """The namespaces of a demangled kernel name: ``void a::b::k<int>(int *)`` -> ``["a", "b"]``."""
    text = name.replace("(anonymous namespace)", "{anonymous}")
    # drop template arguments and everything from the parameter list on
    kept = "".join(ch for _i, ch in itertools.takewhile(lambda c: c[1] != "(", outside_template_arguments(text)))
    qualified = kept.strip().split()[-1] if kept.strip() else ""
    parts = qualified.split("::")
    return [p for p in parts[:-1] if p]


def unqualified_name(name: str) -> str:
    """A demangled kernel name without return type, scope and parameters, template arguments
    kept: ``void a::k<32, 16>(const float *)`` -> ``k<32, 16>``."""
    start, end = 0, len(name)
    for i, ch in outside_template_arguments(name):
        if ch == "(" and not name.startswith("(anonymous namespace)", i):
            end = i
            break
        if ch == " " or (ch == ":" and name[i:i + 2] == "::"):
            start = i + (2 if ch == ":" else 1)
    return name[start:end].strip()


def _compact(name: str) -> str:
    return "".join(name.split())


def _block_text(block) -> str:
    return " x ".join(str(d) for d in block)


def step_of(chapter: Chapter, kernel: str, block: tuple[int, int, int] | None = None) -> dict | None:
    """The one step of ``chapter`` whose namespace ends with the kernel's scope (None: none).

    Where several steps' namespaces match (steps that are block shapes of one templated kernel),
    ``block``, the launch's block shape, keeps the steps one of whose registry kernels has that
    ``block``; still several, or none, is a NcuError. A name printed without namespaces (Nsight
    Compute does so for some templated kernels) is matched by its unqualified name, template
    arguments included, against the registry kernels' names instead.
    """
    scope = kernel_scope(kernel)
    if scope:
        found = [s for s in chapter.steps if s["namespace"].split("::")[-len(scope):] == scope]
    else:
        # Nsight Compute prints some templated kernels without their namespaces
        # ("void sum_matrix_kernel<32, 32>(const float *, ...)"): match the name itself, template
        # arguments included, against the registry kernels' names.
        wanted = _compact(unqualified_name(kernel))
        found = [s for s in chapter.steps
                 if any(_compact(k.get("name", "")) == wanted for k in s.get("kernels", []))]
    if len(found) > 1 and block is not None:
        shaped = [s for s in found
                  if any(list(k.get("block", [])) == list(block) for k in s.get("kernels", []))]
        if len(shaped) == 1:
            return shaped[0]
        which = "several" if shaped else "none"
        raise NcuError(f"kernel {kernel!r} matches steps {', '.join(s['id'] for s in found)} "
                       f"of chapter {chapter.id!r}, and {which} of them launch blocks of "
                       f"{_block_text(block)} threads (the registry's kernels' block shapes)")
    if len(found) > 1:
        raise NcuError(f"kernel {kernel!r} matches steps {', '.join(s['id'] for s in found)} "
                       f"of chapter {chapter.id!r}")
    return found[0] if found else None


def step_counts(chapter: Chapter, launches: list[Launch], path: Path,
                first_only: bool = False) -> list[StepCounts]:
    """Per registry step, in registry order, the launches that belong to it; on a second GPU, without the steps
    added after it measured the chapter (:meth:`.data.Chapter.added_steps`) where its file has none of theirs."""
    where = f"Nsight Compute file {_display(Path(path))}"
    by_step: dict[str, list[Launch]] = {s["id"]: [] for s in chapter.steps}
    for launch in launches:
        try:
            step = step_of(chapter, launch.kernel, launch.block)
        except NcuError as exc:
            raise NcuError(f"{where}: launch {launch.id} (line {launch.line}): {exc}") from None
        if step is None:
            namespaces = ", ".join(s["namespace"] for s in chapter.steps)
            raise NcuError(f"{where}: launch {launch.id} (line {launch.line}) runs "
                           f"{launch.kernel!r}, whose namespace (or, printed without one, whose name) "
                           f"is not one of chapter {chapter.id!r}'s steps ({namespaces})")
        by_step[step["id"]].append(launch)
    # A second GPU profiled the chapter as of its commit: the steps added since have no launch in its file.
    added = [s["id"] for s in chapter.added_steps() if not by_step[s["id"]]]
    empty = [s["id"] for s in chapter.steps if not by_step[s["id"]] and s["id"] not in added]
    if empty:
        raise NcuError(f"{where} has no kernel launch of {chapter.id} step(s) {', '.join(empty)}")
    return [StepCounts(s, by_step[s["id"]][:1] if first_only else by_step[s["id"]])
            for s in chapter.steps if s["id"] not in added]


def same_gpu(csv_path: Path, gpu: dict, chapter_id: str) -> bool:
    """Whether the file's name says it was profiled on the measurement file's GPU:
    ``<slug>-<chapter>-...``, as ``make profile`` names it (the CSV itself does not name the GPU)."""
    slug = gpu.get("slug", "")
    return bool(slug) and Path(csv_path).name.startswith(f"{slug}-{chapter_id}-")


def same_session(csv_path: Path, gpu: dict, source: str, chapter_id: str) -> bool:
    """Whether the page may say the counts come from the measurement file's GPU and session.

    Only for recorded measurements, and only where the CSV's file name is the measurement
    file's GPU slug, then the chapter: ``<slug>-<chapter>-...`` (for example
    ``nvidia-h100-80gb-hbm3-reduction-ncu.csv``), as the recorded logs beside the measurement
    files are named. Fresh measurements were taken in this build, and the recorded counts
    were not.
    """
    slug = gpu.get("slug", "")
    return (bool(slug) and source == "recorded"
            and Path(csv_path).name.startswith(f"{slug}-{chapter_id}-"))


# ---------------------------------------------------------------------------
# Formatting
# ---------------------------------------------------------------------------

def format_count(value: float) -> str:
    """An integer count with thousands separators: ``4177920`` -> ``"4,177,920"``."""
    if value != value:  # NaN
        return "\u2014"
    if float(value).is_integer():
        return f"{int(value):,}"
    return f"{value:,.2f}"


def format_field(counts: StepCounts, name: str) -> str:
    from .fmt import format_bytes, sig

    value = counts.value(name)
    if value != value:
        return "\u2014"
    if name in ("sectors_per_request", "st_sectors_per_request"):
        return sig(value)
    if name == "instructions_per_warp":
        return sig(value, 4)
    if name in ("warp_efficiency", "branch_uniformity", "achieved_occupancy", "tensor_active", "dram_throughput",
                "xu_share"):
        return f"{sig(100.0 * value)} %"
    if name in ("dram_bytes", "dram_read_bytes", "dram_write_bytes"):
        return format_bytes(int(value))
    return format_count(value)
