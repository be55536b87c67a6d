"""A matrix product's evidence beyond its timings (no Sphinx here), for any chapter whose registry asks for it
(steps with a ``tiling``, Nsight Compute counts, autotuning rows): the SGEMM chapter's today.

* :func:`tile_bounds`: the register-blocking bounds of "Fast implementation of DGEMM on Fermi
  GPU" (SC'10), as the chapter's source quotes them, worked out for fp32 on the GPU of the
  measurement file (``gpu.limits`` and the measured device copy) for every step that has a
  ``tiling`` in the registry;
* :func:`roofline`: each step's FLOPs per DRAM byte (Nsight Compute) against its GFLOP/s,
  under the memory roof (the measured copy) and the compute roofs (the chapter's measured ceiling,
  its ``share_of``, and the computed FMA peak);
* :func:`autotune_rows`: the chapter's autotuning sweep, fastest first.

Every number comes from the measurement file, the registry or the Nsight Compute file;
the only constants are the size of an fp32 word and the 2 FLOPs of an FMA. A problem with
the inputs is a :class:`DataError` whose one-line message names the file and field.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from .data import Chapter, DataError, Dataset
from .inputs import TILING_FIELDS, Tiling, _display
from .fmt import DASH, ratio
from .sweep import step_number

#: Bytes of an fp32 word (the DW of the SC'10 bounds).
DW = 4
#: The ceiling every chapter names its device-to-device copy by: the memory's roof and the bandwidth of the
#: bounds. The compute roof is the chapter's own ``share_of`` ceiling.
COPY_CEILING = "device_copy"

LIMIT_FIELDS = ("max_sm_clock_mhz", "fp32_lanes_per_sm", "registers_per_sm", "max_registers_per_thread",
                "shared_memory_per_sm_bytes", "shared_memory_per_block_optin_bytes", "max_threads_per_sm",
                "shared_memory_banks", "shared_memory_bank_bytes")


def _file(dataset: Dataset) -> str:
    return _display(dataset.measurement_path) if dataset.measurement_path else "the measurement file"


# ---------------------------------------------------------------------------
# The GPU
# ---------------------------------------------------------------------------

@dataclass(frozen=True)
class Limits:
    """The measurement file's ``gpu.limits`` and ``gpu.sm_count``."""

    gpu: str
    sm_count: int
    max_sm_clock_mhz: float
    fp32_lanes_per_sm: int
    registers_per_sm: int
    max_registers_per_thread: int
    shared_memory_per_sm_bytes: int
    shared_memory_per_block_optin_bytes: int
    max_threads_per_sm: int
    shared_memory_banks: int
    shared_memory_bank_bytes: int

    @property
    def fma_rate(self) -> float:
        """FMAs per second, computed: SMs x fp32 lanes per SM x the highest SM clock."""
        return self.sm_count * self.fp32_lanes_per_sm * self.max_sm_clock_mhz * 1e6

    @property
    def peak_gflops(self) -> float:
        """The computed fp32 peak in GFLOP/s (2 FLOPs per FMA); not measured."""
        return 2.0 * self.fma_rate / 1e9

    @property
    def shared_bytes_per_clock(self) -> int:
        """What shared memory delivers per clock per SM: banks x bytes per bank."""
        return self.shared_memory_banks * self.shared_memory_bank_bytes


def limits_of(dataset: Dataset) -> Limits:
    """The GPU's limits; a file without them (or with a null the bounds need) is a DataError."""
    if dataset.measurements is None:
        raise DataError("no measurement file: the GPU's limits come from one")
    limits = dataset.limits
    if not limits:
        raise DataError(f"measurement file {_file(dataset)} has no gpu.limits (written by the timing "
                        "program since the SGEMM chapter); re-run make measure")
    for name in LIMIT_FIELDS:
        if limits.get(name) is None:
            raise DataError(f"measurement file {_file(dataset)}: gpu.limits.{name} is "
                            f"{'null' if name in limits else 'missing'} (the timing program did not "
                            f"know it for compute capability {dataset.gpu.get('compute_capability')})")
    return Limits(dataset.gpu["name"], dataset.gpu["sm_count"], **{k: limits[k] for k in LIMIT_FIELDS})


def _ceiling(dataset: Dataset, chapter: Chapter, ceiling_id: str, n: int, timing: str,
             rate: str) -> dict:
    """A ceiling row with its rate (``gbps`` or ``gflops``), or a DataError naming what is missing."""
    if not any(c["id"] == ceiling_id for c in chapter.ceilings):
        raise DataError(f"chapter {chapter.id!r} has no ceiling {ceiling_id!r} in the step registry "
                        f"(it has {', '.join(c['id'] for c in chapter.ceilings) or 'none'})")
    row = chapter.ceiling_row(ceiling_id, n, timing)
    if row is None:
        raise DataError(f"measurement file {_file(dataset)}: chapter {chapter.id!r} has no "
                        f"{ceiling_id} row for n={n} timing={timing}")
    if not row.get(rate):
        raise DataError(f"measurement file {_file(dataset)}: {chapter.id}/{ceiling_id} n={n} "
                        f"timing={timing} has no {rate}")
    return row


def default_n(chapter: Chapter, timing: str) -> int:
    """The size of the chapter's headline (the registry's ``headline.n``) where it is measured, else the largest
    n with a copy row."""
    sizes = [n for n, _p in chapter.sizes()]
    main = (chapter.headline or {}).get("n")
    if main in sizes:
        return main
    copied = [n for n in sizes if chapter.ceiling_row(COPY_CEILING, n, timing) is not None]
    if not copied:
        raise DataError(f"chapter {chapter.id!r} has no {COPY_CEILING} row at any size "
                        f"(timing {timing})")
    return max(copied)


# ---------------------------------------------------------------------------
# The SC'10 bounds
# ---------------------------------------------------------------------------

@dataclass
class Check:
    """One bound for one step: the left side, the limit, whether it holds (None: not applicable)."""

    value: float | None
    limit: float
    holds: bool | None
    formula: str  # the left side with the step's numbers, for a tooltip
    why_not: str = ""  # why the bound does not apply

    @property
    def applies(self) -> bool:
        return self.holds is not None


def _check(value: float, limit: float, formula: str) -> Check:
    # a hair of tolerance so that an exact equality (1/8 + 1/8 = 1/4) computed in floats holds
    return Check(value, limit, value <= limit * (1 + 1e-12), formula)


def _na(limit: float, why: str) -> Check:
    return Check(None, limit, None, "", why)


@dataclass
class StepBounds:
    step: dict
    tiling: Tiling
    dram: Check  # bytes per second DRAM must deliver to feed the FMA units
    shared_thread: Check  # bytes per clock per SM from shared memory, per-thread form
    shared_warp: Check  # the same, warp-level form (operands broadcast within a warp)
    shared_block: Check  # bytes of shared memory per block (the tiles' data, every stage)
    shared_blocks_per_sm: int | None  # blocks whose tiles fit in an SM's shared memory
    registers_thread: Check  # accumulators plus operands per thread
    registers_block: Check  # the same for the whole block
    compiled_registers: int | None  # what the compiler gave the step's first kernel

    @property
    def checks(self) -> list[Check]:
        return [self.dram, self.shared_thread, self.shared_warp, self.shared_block,
                self.registers_thread, self.registers_block]


@dataclass
class TileBounds:
    limits: Limits
    n: int
    timing: str
    copy_row: dict  # the device copy at n: its gbps is the bandwidth
    steps: list[StepBounds] = field(default_factory=list)

    @property
    def bandwidth(self) -> float:
        """Bytes per second: the copy's GB/s as the file states it (bytes read plus written)."""
        return self.copy_row["gbps"] * 1e9

    @property
    def min_square_tile(self) -> float:
        """bm = bn >= 2 x FMA rate x DW / BW (SC'10's form without its factor 1/2 for Fermi's DP)."""
        return 2.0 * self.limits.fma_rate * DW / self.bandwidth

    @property
    def max_thread_tile_sum(self) -> float:
        """(1/tm + 1/tn) <= banks x bank bytes / (fp32 lanes x DW)."""
        return self.limits.shared_bytes_per_clock / (self.limits.fp32_lanes_per_sm * DW)


def _compiled_registers(step: dict) -> int | None:
    for kernel in step.get("kernels", []):
        for compiled in kernel.get("compiled") or []:
            return compiled["registers"]
    return None


def step_bounds(limits: Limits, bandwidth: float, step: dict, t: Tiling) -> StepBounds:
    lanes, smem_clock = limits.fp32_lanes_per_sm, limits.shared_bytes_per_clock
    dram = _check(limits.fma_rate * DW * (1 / t.block_m + 1 / t.block_n), bandwidth,
                  f"FMA rate \u00d7 {DW} B \u00d7 (1/{t.block_m} + 1/{t.block_n})")
    if t.block_k == 0:
        shared_thread = _na(smem_clock, "no shared memory: the operands come from global memory")
        shared_warp = _na(smem_clock, "no shared memory")
    else:
        if t.thread_m and t.thread_n:
            shared_thread = _check(lanes * DW * (1 / t.thread_m + 1 / t.thread_n), smem_clock,
                                   f"{lanes} lanes \u00d7 {DW} B \u00d7 (1/{t.thread_m} + 1/{t.thread_n})")
        else:
            shared_thread = _na(smem_clock, "no thread tile of its own (the tensor cores hold it)")
        if t.warp_m and t.warp_n:
            shared_warp = _check(lanes * DW * (1 / t.warp_m + 1 / t.warp_n), smem_clock,
                                 f"{lanes} lanes \u00d7 {DW} B \u00d7 (1/{t.warp_m} + 1/{t.warp_n})")
        else:
            shared_warp = _na(smem_clock, "no warp tile")
    per_block = (t.block_m + t.block_n) * t.block_k * DW * max(t.stages, 1)
    if per_block:
        shared_block = _check(per_block, limits.shared_memory_per_block_optin_bytes,
                              f"({t.block_m} + {t.block_n}) \u00d7 {t.block_k} \u00d7 {DW} B "
                              f"\u00d7 {max(t.stages, 1)} stage{'s' if max(t.stages, 1) > 1 else ''}")
        blocks = limits.shared_memory_per_sm_bytes // per_block
    else:
        shared_block = _na(limits.shared_memory_per_block_optin_bytes, "no shared memory")
        blocks = None
    if t.thread_m and t.thread_n:
        per_thread = t.thread_m + t.thread_n + t.thread_m * t.thread_n
        formula = f"{t.thread_m} + {t.thread_n} + {t.thread_m} \u00d7 {t.thread_n}"
        registers_thread = _check(per_thread, limits.max_registers_per_thread, formula)
        registers_block = _check(per_thread * t.threads, limits.registers_per_sm,
                                 f"({formula}) \u00d7 {t.threads} threads")
    else:
        registers_thread = _na(limits.max_registers_per_thread, "no thread tile of its own")
        registers_block = _na(limits.registers_per_sm, "no thread tile of its own")
    return StepBounds(step, t, dram, shared_thread, shared_warp, shared_block, blocks,
                      registers_thread, registers_block, _compiled_registers(step))


def tile_bounds(dataset: Dataset, chapter: Chapter, n: int, timing: str,
                step_ids: list[str] | None = None) -> TileBounds:
    """The bounds for every step with a tiling (block_m > 0), or for the listed steps."""
    limits = limits_of(dataset)
    chapter.timing(timing)
    if step_ids is not None:
        steps = [chapter.step(s) for s in step_ids]
        for step in steps:
            if chapter.tiling(step["id"]) is None:
                raise DataError(f"step {chapter.id}/{step['id']} has no tiling in the step registry")
    else:
        steps = [s for s in chapter.steps if (t := chapter.tiling(s["id"])) is not None and t.block_m > 0]
    if not steps:
        raise DataError(f"chapter {chapter.id!r}: no step has a tiling with block_m > 0 in the step "
                        f"registry (the timing program writes one per step: {', '.join(TILING_FIELDS)})")
    out = TileBounds(limits, n, timing, _ceiling(dataset, chapter, COPY_CEILING, n, timing, "gbps"))
    for step in steps:
        t = chapter.tiling(step["id"])
        assert t is not None
        if t.block_m <= 0 or t.block_n <= 0 or t.threads <= 0:
            raise DataError(f"step {chapter.id}/{step['id']}: its tiling needs block_m, block_n and "
                            f"threads above 0 (it has {t.block_m}, {t.block_n}, {t.threads})")
        out.steps.append(step_bounds(limits, out.bandwidth, step, t))
    return out


# ---------------------------------------------------------------------------
# The roofline
# ---------------------------------------------------------------------------

@dataclass
class RooflinePoint:
    step: dict
    number: str
    flops: int
    dram_bytes: float
    gflops: float
    same_operation: bool
    roof: float  # GFLOP/s: min(memory roof at this intensity, measured FMA ceiling)
    binds: str  # "memory" | "compute"

    @property
    def intensity(self) -> float:
        return self.flops / self.dram_bytes

    @property
    def share(self) -> float:
        return self.gflops / self.roof


@dataclass
class Roofline:
    chapter: str
    n: int
    timing: str
    limits: Limits
    fma_ceiling_gflops: float  # measured
    bandwidth_gbps: float  # the measured copy's, bytes read plus written
    points: list[RooflinePoint]
    problem: str = ""  # size n in words (the registry's problem text)

    @property
    def peak_gflops(self) -> float:
        return self.limits.peak_gflops

    @property
    def ridge(self) -> float:
        """The intensity where the memory roof meets the measured FMA ceiling (FLOP per byte)."""
        return self.fma_ceiling_gflops / self.bandwidth_gbps

    def as_data(self) -> dict:
        """Plain data for the plot (and its cache key)."""
        return {"chapter": self.chapter, "n": self.n, "problem": self.problem or f"n = {self.n}", "timing": self.timing,
                "peak_gflops": self.peak_gflops, "fma_ceiling_gflops": self.fma_ceiling_gflops,
                "bandwidth_gbps": self.bandwidth_gbps,
                "points": [{"number": p.number, "id": p.step["id"], "intensity": p.intensity,
                            "gflops": p.gflops, "same_operation": p.same_operation}
                           for p in self.points]}


def roofline(dataset: Dataset, chapter: Chapter, dram_bytes: dict[str, float], n: int,
             timing: str, csv_name: str) -> Roofline:
    """Every step of ``dram_bytes`` (step id -> DRAM bytes read and written, Nsight Compute) placed
    under the roofs at size n."""
    limits = limits_of(dataset)
    chapter.timing(timing)
    fma = _ceiling(dataset, chapter, chapter.share_of, n, timing, "gflops")  # the compute roof
    copy = _ceiling(dataset, chapter, COPY_CEILING, n, timing, "gbps")
    points = []
    for step in chapter.steps:
        if step["id"] not in dram_bytes:
            continue
        row = chapter.step_row(step["id"], n, timing)
        if row is None:
            raise DataError(f"measurement file {_file(dataset)}: {chapter.id}/{step['id']} has no row "
                            f"for n={n} timing={timing}, the size of the roofline")
        if not row.get("flops") or not row.get("gflops"):
            raise DataError(f"measurement file {_file(dataset)}: {chapter.id}/{step['id']} n={n} "
                            f"timing={timing} has no flops or gflops")
        moved = dram_bytes[step["id"]]
        if not moved or moved <= 0 or math.isnan(moved):
            raise DataError(f"Nsight Compute file {csv_name}: {chapter.id}/{step['id']} moved no DRAM "
                            "bytes, so it has no arithmetic intensity")
        intensity = row["flops"] / moved
        memory_roof = copy["gbps"] * intensity
        roof = min(memory_roof, fma["gflops"])
        same = bool(row["same_operation"]) and step.get("same_operation", True)
        points.append(RooflinePoint(step, step_number(step["id"]), row["flops"], moved, row["gflops"],
                                    same, roof, "memory" if memory_roof < fma["gflops"] else "compute"))
    if not points:
        raise DataError(f"Nsight Compute file {csv_name} has no launch of chapter {chapter.id!r}")
    return Roofline(chapter.id, n, timing, limits, fma["gflops"], copy["gbps"], points, chapter.problem(n))


# ---------------------------------------------------------------------------
# The autotuning sweep
# ---------------------------------------------------------------------------

CONFIG_FIELDS = TILING_FIELDS + ("min_blocks",)
#: Fields of a clustered kernel's configuration (the tensor-core chapter's): its cluster of tiles, and the cluster
#: rows per group of its tile order.
CLUSTER_FIELDS = ("cluster_m", "cluster_n", "group_m")


@dataclass
class AutotuneRow:
    row: dict
    config: dict
    vs_baseline: float | None  # the baseline's median over this row's (above 1: faster)
    steps: list[str]  # the step that uses this configuration (its used_by, else see _steps_with), or none

    @property
    def id(self) -> str:
        return self.row["id"]

    @property
    def chosen(self) -> bool:
        return bool(self.row["chosen"])

    def resource(self, key: str):
        return self.row["resources"][0].get(key)


def _steps_with(chapter: Chapter, config: dict) -> list[str]:
    """The step that uses this configuration: the last step in registry order whose tiling it is,
    preferring steps that compute the same operation (an earlier step may share the tiling of the
    autotuned one, and the autotuned step comes after it); empty if none."""
    matches = [s for s in chapter.steps
               if (t := chapter.tiling(s["id"])) is not None
               and all(t.as_dict()[k] == config[k] for k in TILING_FIELDS)]
    same = [s for s in matches if s.get("same_operation", True)]
    return [s["id"] for s in (same or matches)[-1:]]


def autotune_n(chapter: Chapter, timing: str) -> int:
    """The size of the chapter's autotuning rows (the largest, if there are several; a rectangular
    problem's key is no size)."""
    sizes = {r["n"] for r in chapter.autotune if r["timing"] == timing and chapter.is_size(r["n"])}
    if not sizes:
        raise DataError(f"chapter {chapter.id!r} has no autotuning rows (autotune) for timing {timing} "
                        "in the measurement file; re-run make measure")
    return max(sizes)


def autotune_rows(dataset: Dataset, chapter: Chapter, n: int, timing: str) -> list[AutotuneRow]:
    """The autotuning rows at n, fastest first; a DataError if there are none, if not exactly one is
    chosen, if the chosen one is no step's tiling, or if any row was not validated."""
    chapter.timing(timing)
    rows = chapter.autotune_rows(n, timing)
    where = f"measurement file {_file(dataset)}: chapter {chapter.id!r}"
    if not rows:
        raise DataError(f"{where} has no autotuning rows (autotune) for n={n} timing={timing}")
    chosen = [r["id"] for r in rows if r["chosen"]]
    if len(chosen) != 1:
        raise DataError(f"{where}: {len(chosen)} autotuning rows at n={n} are chosen "
                        f"({', '.join(chosen) or 'none'}); exactly one must be, the configuration "
                        "the autotuned step uses")
    failed = [r for r in rows if not r["validated"]]
    if failed:
        raise DataError(f"{where}: autotuning row {failed[0]['id']} n={n} was not validated "
                        f"({failed[0]['validation']})")
    base = chapter.baselines[0]["id"] if chapter.baselines else None
    base_row = chapter.baseline_row(base, n, timing) if base else None
    out = []
    for r in rows:
        config = r["config"]
        # used_by names the step as the run knew it: a step renamed since is found by its former id (formerly).
        if r.get("used_by"):
            steps = [chapter.step(chapter.current_id(r["used_by"]))["id"]]
        else:
            steps = _steps_with(chapter, config)
        out.append(AutotuneRow(r, config, ratio(base_row, r), steps))
    pick = next(a for a in out if a.chosen)
    if not pick.steps:
        raise DataError(f"{where}: the chosen autotuning row {pick.id} is the tiling of no step in the "
                        "step registry (its config must equal the autotuned step's tiling, or the row "
                        "name its step in used_by)")
    out.sort(key=lambda a: (-(a.row.get("gflops") or 0.0), a.row["median_ms"]))
    return out


def config_text(config: dict, prefix: str) -> str:
    """``"128 × 128 × 16"`` for the block tile (``"32 × 32"`` without shared memory: block_k 0);
    a dash where the level does not apply."""
    if prefix == "block":
        dims = [config["block_m"], config["block_n"]] + ([config["block_k"]] if config["block_k"] else [])
    else:
        dims = [config[f"{prefix}_m"], config[f"{prefix}_n"]]
    return DASH if not any(dims) else " \u00d7 ".join(str(d) for d in dims)
