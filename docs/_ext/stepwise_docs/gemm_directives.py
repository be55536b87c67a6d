"""The Sphinx side of :mod:`.gemm`: three directives, registered by :func:`.sphinx_ext.setup`.

They read the reference GPU's dataset only (see :class:`.data.Datasets`): the bounds, the roofline
and the autotuning sweep argue from one GPU. (``stepwise-sweep``, once here, is generic now and
lives in :mod:`.overview`.)

``stepwise-tile-bounds CHAPTER`` (options ``:n:``, ``:steps: ID ...``, ``:timing:``)
    The SC'10 register-blocking bounds worked out for this GPU (``gpu.limits`` and the device
    copy's measured GB/s at n; default n the chapter's headline size, or the largest n with a ``device_copy`` row), one
    table row per step with a tiling (block_m > 0).
``stepwise-roofline CHAPTER NCU_FILE`` (options ``:n:``, ``:timing:``, ``:steps:``)
    Each step's FLOPs per DRAM byte (read + written, from the Nsight Compute file, path relative
    to the page, which must be from the measurement file's GPU) against its GFLOP/s at n, under
    the measured copy, the measured FMA ceiling and the computed FMA peak; and a table.
    ``:steps:``: a space-separated subset of the chapter's step ids (default: every step).
``stepwise-autotune CHAPTER`` (options ``:n:``, ``:timing:``)
    The chapter's ``autotune`` rows, fastest first, the chosen one marked with its step.

Every problem (missing limits, ceiling rows or autotuning rows, a CSV from another GPU, no chosen
or several chosen configurations, an unvalidated one) is a directive error: fatal in strict builds.
"""
from __future__ import annotations

from pathlib import Path

from docutils import nodes
from docutils.parsers.rst import directives

from . import fmt, gemm, ncu
from .data import Chapter, DataError
from .fmt import DASH, TIMES, format_bytes, sig
from .plot import render_roofline, roofline_alt_text
from .common import _Base, _cell, _ids, _table, gpu_block, provenance_node, stepwise_stepref, tooltip
from .evidence import _ncu_launches, ncu_provenance

HOLDS, VIOLATED = "\u2713", "\u2717"


class _GemmBase(_Base):
    #: ``:n:`` (the size; each directive has its default) and ``:timing:`` (default: the chapter's first).
    option_spec = {"n": directives.positive_int, "timing": directives.unchanged_required}

    def fail(self, exc: Exception):
        return self.error(f"{self.name}: {exc}")

    def timing_id(self, chapter: Chapter) -> str:
        timing = self.options.get("timing", chapter.timings[0]["id"])
        try:
            chapter.timing(timing)
        except DataError as exc:
            raise self.fail(exc) from None
        return timing

    def step_link(self, chapter: Chapter, step: dict, text: str | None = None) -> nodes.Node:
        return stepwise_stepref("", "", nodes.literal("", text or step["id"]), chapter=chapter.id,
                                step=step["id"], reftitle=step["title"])


def _gbps(bytes_per_second: float) -> str:
    return f"{sig(bytes_per_second / 1e9)} GB/s"


def _gflops(value: float, unit: tuple[str, float] | None = None) -> str:
    """A FLOP rate given in GFLOP/s, in ``unit`` or the one its magnitude calls for (:func:`.fmt.format_flop_rate`)."""
    return fmt.format_flop_rate(value, unit)


# ---------------------------------------------------------------------------
# stepwise-tile-bounds
# ---------------------------------------------------------------------------

def _value_text(value: float, unit: str) -> str:
    if unit == "Bps":
        return _gbps(value)
    if unit == "Bpc":
        return f"{sig(value)} B/clock"
    if unit == "bytes":
        return format_bytes(int(value))
    return f"{int(value):,}"


def _check_cell(check: gemm.Check, unit: str, extra: str = "") -> nodes.entry:
    if not check.applies:
        return _cell(nodes.paragraph("", "", tooltip(DASH, f"does not apply: {check.why_not}")),
                     ["stepwise-num"])
    assert check.value is not None
    value = _value_text(check.value, unit)
    mark = HOLDS if check.holds else VIOLATED
    verdict = "holds" if check.holds else "violated"
    relation = "\u2264" if check.holds else ">"
    explanation = (f"{check.formula} = {value} {relation} "
                   f"{_value_text(check.limit, unit)}: {verdict}{extra}")
    return _cell(nodes.paragraph("", "", tooltip(f"{value} {mark}", explanation)),
                 ["stepwise-num", f"stepwise-bound-{verdict}"])


class TileBoundsDirective(_GemmBase):
    required_arguments = 1
    option_spec = {**_GemmBase.option_spec, "steps": directives.unchanged_required}

    def run(self) -> list[nodes.Node]:
        chapter = self.chapter(self.arguments[0])
        timing = self.timing_id(chapter)
        try:
            n = self.options.get("n") or gemm.default_n(chapter, timing)
            wanted = _ids(self.options["steps"]) if "steps" in self.options else None
            bounds = gemm.tile_bounds(self.dataset, chapter, n, timing, wanted)
        except DataError as exc:
            raise self.fail(exc) from None
        lim = bounds.limits
        out = nodes.container(classes=["stepwise-table-block", "stepwise-tile-bounds"])
        out += self._explanation(bounds)
        header = ["step", "block tile", "warp tile", "thread tile", "threads", "stages",
                  f"DRAM bytes/s to feed the FMAs (\u2264 {_gbps(bounds.bandwidth)})",
                  f"shared memory per clock, per-thread form (\u2264 {lim.shared_bytes_per_clock} B)",
                  f"shared memory per clock, warp form (\u2264 {lim.shared_bytes_per_clock} B)",
                  f"shared memory per block (\u2264 {format_bytes(lim.shared_memory_per_block_optin_bytes)})",
                  f"registers per thread (\u2264 {lim.max_registers_per_thread})",
                  f"registers per block (\u2264 {lim.registers_per_sm:,} per SM)"]
        body, classes = [], []
        for b in bounds.steps:
            t = b.tiling
            config = t.as_dict()
            blocks = ("" if b.shared_blocks_per_sm is None else
                      f"; {b.shared_blocks_per_sm} such blocks fit in an SM\u2019s "
                      f"{format_bytes(lim.shared_memory_per_sm_bytes)}")
            compiled = ("" if b.compiled_registers is None else
                        f"; the compiler gave the kernel {b.compiled_registers}")
            body.append([
                _cell(nodes.paragraph("", "", self.step_link(chapter, b.step))),
                _cell(gemm.config_text(config, "block"), ["stepwise-num"]),
                _cell(gemm.config_text(config, "warp"), ["stepwise-num"]),
                _cell(gemm.config_text(config, "thread"), ["stepwise-num"]),
                _cell(str(t.threads), ["stepwise-num"]),
                _cell(str(t.stages) if t.stages else DASH, ["stepwise-num"]),
                _check_cell(b.dram, "Bps"),
                _check_cell(b.shared_thread, "Bpc"),
                _check_cell(b.shared_warp, "Bpc"),
                _check_cell(b.shared_block, "bytes", blocks),
                _check_cell(b.registers_thread, "count", compiled),
                _check_cell(b.registers_block, "count"),
            ])
            classes.append(["stepwise-stale"] if chapter.states[b.step["id"]].stale else [])
        out += _table(header, body, ["stepwise-data", "stepwise-bounds"],
                      f"The SC\u201910 bounds for {lim.gpu}, {chapter.size_text(n)}",
                      classes)
        out += nodes.paragraph("", (
            f"{HOLDS}: the bound holds; {VIOLATED}: it is violated; {DASH}: it does not apply (no "
            "shared memory, no warp tile, or no thread tile of the step\u2019s own). Hover a cell for "
            "its arithmetic. Shared memory per block counts the tiles\u2019 data only "
            "((bm + bn) \u00d7 bk floats per stage), without the padding some layouts add."),
            classes=["stepwise-legend"])
        out += provenance_node(self.dataset, chapter)
        return [out]

    def _explanation(self, b: gemm.TileBounds) -> nodes.paragraph:
        lim = b.limits
        copy = b.copy_row
        tile = b.min_square_tile
        text = (
            f"On {lim.gpu}: {lim.sm_count} SMs \u00d7 {lim.fp32_lanes_per_sm} fp32 FMA lanes per SM "
            f"\u00d7 {fmt.plain(lim.max_sm_clock_mhz)} MHz (the highest SM clock) = "
            f"{sig(lim.fma_rate / 1e12)} \u00d7 10\u00b9\u00b2 FMAs per second, "
            f"{_gflops(lim.peak_gflops)}. That rate is computed, not measured: the lanes per SM come "
            "from a table by compute capability, and under a sustained load the clock drops below "
            f"its maximum. The bandwidth is the device-to-device copy\u2019s measured "
            f"{_gbps(b.bandwidth)} at n = {b.n} ({b.timing}): its bytes read plus its bytes written "
            f"({format_bytes(copy['bytes'])}) over its median time, so the rate at which DRAM moves "
            "bytes in both directions together. "
            f"A block that computes a bm \u00d7 bn tile of C reads bm + bn floats for bm \u00d7 bn "
            "FMAs per step of k, so feeding the FMA units from DRAM needs FMA rate \u00d7 4 B "
            "\u00d7 (1/bm + 1/bn) \u2264 bandwidth; for a square tile, bm = bn \u2265 2 \u00d7 FMA "
            f"rate \u00d7 4 B / bandwidth = {sig(tile)} on this GPU. (SC\u201910\u2019s form for "
            "DGEMM on Fermi carries a factor \u00bd, because Fermi ran double-precision FMAs at half "
            "its single-precision rate; for fp32 the factor is 1.) "
            f"Shared memory delivers {lim.shared_memory_banks} banks \u00d7 "
            f"{lim.shared_memory_bank_bytes} B = {lim.shared_bytes_per_clock} B per clock per SM. A "
            "thread with a tm \u00d7 tn tile reads tm + tn floats from it for tm \u00d7 tn FMAs, so "
            f"{lim.fp32_lanes_per_sm} lanes need {lim.fp32_lanes_per_sm} \u00d7 4 B \u00d7 "
            f"(1/tm + 1/tn) per clock: 1/tm + 1/tn \u2264 {sig(b.max_thread_tile_sum)} (without "
            "broadcast). A warp with a warp_m \u00d7 warp_n tile reads warp_m + warp_n floats per "
            "step of k for warp_m \u00d7 warp_n FMAs when its lanes share operands by broadcast: "
            f"{lim.fp32_lanes_per_sm} \u00d7 4 B \u00d7 (1/warp_m + 1/warp_n) per clock. "
            "From above, the tiles of A and B, (bm + bn) \u00d7 bk floats per stage, must fit in "
            f"the {format_bytes(lim.shared_memory_per_block_optin_bytes)} of shared memory a block "
            f"may use ({format_bytes(lim.shared_memory_per_sm_bytes)} per SM), and a thread\u2019s "
            "tm \u00d7 tn accumulators plus the tm + tn values it multiplies must fit in its "
            f"{lim.max_registers_per_thread} registers, and those of the whole block in the SM\u2019s "
            f"{lim.registers_per_sm:,}."
        )
        return nodes.paragraph("", text, classes=["stepwise-bounds-text"])


# ---------------------------------------------------------------------------
# stepwise-roofline
# ---------------------------------------------------------------------------

class RooflineDirective(_GemmBase):
    required_arguments = 2
    option_spec = {**_GemmBase.option_spec, "steps": directives.unchanged_required}

    def run(self) -> list[nodes.Node]:
        reference = self.chapter(self.arguments[0])
        timing = self.timing_id(reference)
        rel, path_text = self.env.relfn2path(self.arguments[1])
        self.env.note_dependency(rel)
        # The reference GPU's file where there is one beside the named file; else the named file's
        # own GPU (the roofline pairs counts and times of one GPU).
        files = self.ncu_files(Path(path_text), reference.id)
        dataset, path = next(((d, p) for d, p in files if d is not None and p.is_file()), files[0])
        dataset = dataset or self.dataset
        chapter = self.chapter(reference.id, dataset)
        self.env.note_dependency(str(path))
        gpu = dataset.gpu
        if dataset.measurements is not None and not ncu.same_gpu(path, gpu, chapter.id):
            raise self.error(
                f"{self.name}: Nsight Compute file {self.arguments[1]} is not from the measurement "
                f"file\u2019s GPU, {gpu.get('name')}: its name must start with "
                f"\u2018{gpu.get('slug')}-{chapter.id}-\u2019, as make profile names it on that GPU")
        try:
            launches = _ncu_launches(path) if path.is_file() else ncu.load_csv(path)
            counts = ncu.step_counts(chapter, launches, path)
            wanted = self.steps_option(chapter)
            dram = {c.step["id"]: c.value("dram_bytes") for c in counts
                    if wanted is None or c.step["id"] in wanted}
            n = self.options.get("n") or gemm.default_n(chapter, timing)
            roof = gemm.roofline(dataset, chapter, dram, n, timing, path.name)
        except DataError as exc:
            raise self.fail(exc) from None
        self.env.temp_data.setdefault("stepwise_ncu", {})[chapter.id] = str(path)
        data = roof.as_data()
        image = render_roofline(data, self.plot_dir)
        out = nodes.container(classes=["stepwise-table-block", "stepwise-roofline"])
        box = out
        if files[0][0] is not None:  # a file of one of the build's GPUs: under its name (a second GPU's as of)
            box = gpu_block(dataset, chapter)
            out += box
        unit = fmt.flop_rate_unit([p.gflops for p in roof.points] + [roof.fma_ceiling_gflops, roof.peak_gflops])
        box += self.figure(image, roofline_alt_text(data), (
            f"Roofline at {chapter.size_text(n)} ({timing}), both axes logarithmic. Solid: the memory roof, the "
            f"device copy\u2019s measured {sig(roof.bandwidth_gbps)} GB/s (bytes read plus written "
            "over its time) times the intensity, up to the measured FMA ceiling "
            f"({chapter.share_of}, {_gflops(roof.fma_ceiling_gflops, unit)}; they meet at "
            f"{sig(roof.ridge)} FLOP/B). Dashed: the computed FMA peak, "
            f"{_gflops(roof.peak_gflops, unit)} (SMs \u00d7 fp32 lanes per SM \u00d7 the highest clock "
            "\u00d7 2; computed, not measured). Points: steps, by number; the intensity is the "
            "step\u2019s FLOPs over the DRAM bytes Nsight Compute counted for it (read + written)."),
            dataset, chapter)
        header = ["step", "FLOP per DRAM byte", unit[0], f"roof at that intensity ({unit[0]})", "share of the roof",
                  "bound by"]
        body, classes = [], []
        for p in roof.points:
            cells = [_cell(nodes.paragraph("", "", self.step_link(chapter, p.step))),
                     _cell(nodes.paragraph("", "", tooltip(
                         sig(p.intensity), f"{p.flops:,} FLOPs / {ncu.format_count(p.dram_bytes)} "
                                           "DRAM bytes read and written")), ["stepwise-num"]),
                     _cell(fmt.format_flop_rate(p.gflops, unit, with_unit=False), ["stepwise-num"])]
            if p.same_operation:
                cells += [_cell(fmt.format_flop_rate(p.roof, unit, with_unit=False), ["stepwise-num"]),
                          _cell(fmt.format_share(p.share), ["stepwise-num"]),
                          _cell("memory (the copy\u2019s GB/s)" if p.binds == "memory" else
                                "compute (the measured FMA ceiling)")]
            else:
                cells += [_cell(DASH), _cell(DASH),
                          _cell("\u2260 op: not fp32 FMAs, the fp32 roofs do not bound it",
                                ["stepwise-not-same-op"])]
            body.append(cells)
            classes.append(["stepwise-stale"] if chapter.states[p.step["id"]].stale else [])
        box += _table(header, body, ["stepwise-data", "stepwise-roofline-table"],
                      f"Roofline, {chapter.size_text(n)} ({timing})", classes)
        box += nodes.paragraph("", (
            "Roof at that intensity: the lower of the memory roof (the copy\u2019s GB/s times the "
            f"intensity) and the measured FMA ceiling; share of the roof: the step\u2019s {unit[0]} over "
            "it. A step marked \u2260 op does not compute in fp32 (TF32 tensor cores) and is drawn "
            "as a hollow diamond."), classes=["stepwise-legend"])
        box += nodes.paragraph("", ncu_provenance(dataset, path, chapter.id),
                               classes=["stepwise-provenance"])
        box += provenance_node(dataset, chapter)
        return [out]


# ---------------------------------------------------------------------------
# stepwise-autotune
# ---------------------------------------------------------------------------

class AutotuneDirective(_GemmBase):
    required_arguments = 1

    def run(self) -> list[nodes.Node]:
        chapter = self.chapter(self.arguments[0])
        timing = self.timing_id(chapter)
        try:
            n = self.options.get("n") or gemm.autotune_n(chapter, timing)
            rows = gemm.autotune_rows(self.dataset, chapter, n, timing)
        except DataError as exc:
            raise self.fail(exc) from None
        base = chapter.baselines[0] if chapter.baselines else None
        label = fmt.baseline_label(chapter, base["id"]) if base else ""
        # Columns a configuration has: SGEMM's a minimum of blocks per SM, the tensor-core chapter's clusters.
        with_min_blocks = any("min_blocks" in a.config for a in rows)
        with_clusters = any(all(k in a.config for k in gemm.CLUSTER_FIELDS) for a in rows)
        header = ["configuration", "block tile", "warp tile", "thread tile", "threads", "stages"]
        header += ["min blocks / SM"] if with_min_blocks else []
        header += ["cluster", "group"] if with_clusters else []
        flop_unit = fmt.flop_rate_unit(a.row.get("gflops") for a in rows)
        header += [flop_unit[0], "median time"]
        header += [f"vs {label}"] if base else []
        header += ["registers / thread", "theoretical occupancy", "validated"]
        body, classes = [], []
        for a in rows:
            r, c = a.row, a.config
            name = nodes.paragraph("", "", nodes.literal("", a.id))
            if a.chosen:
                name += nodes.inline("", " chosen: ", classes=["stepwise-badge"])
                for i, step_id in enumerate(a.steps):
                    if i:
                        name += nodes.Text(", ")
                    name += self.step_link(chapter, chapter.step(step_id), f"step {step_id}")
            cells = [_cell(name),
                     _cell(gemm.config_text(c, "block"), ["stepwise-num"]),
                     _cell(gemm.config_text(c, "warp"), ["stepwise-num"]),
                     _cell(gemm.config_text(c, "thread"), ["stepwise-num"]),
                     _cell(str(c["threads"]), ["stepwise-num"]),
                     _cell(str(c["stages"]) if c["stages"] else DASH, ["stepwise-num"])]
            if with_min_blocks:
                cells.append(_cell(str(c["min_blocks"]) if c.get("min_blocks") else DASH, ["stepwise-num"]))
            if with_clusters:
                cells += [_cell(f"{c['cluster_m']} {TIMES} {c['cluster_n']}" if "cluster_m" in c else DASH,
                                ["stepwise-num"]),
                          _cell(str(c["group_m"]) if "group_m" in c else DASH, ["stepwise-num"])]
            cells += [_cell(fmt.format_flop_rate(r.get("gflops"), flop_unit, with_unit=False), ["stepwise-num"]),
                     _cell(nodes.paragraph("", "", tooltip(
                         fmt.format_time(r["median_ms"]),
                         f"median of {r['samples']} samples, min\u2013max "
                         f"{fmt.format_spread(r['min_ms'], r['max_ms'], r['median_ms'])}")),
                         ["stepwise-num"])]
            if base:
                cells.append(_cell(fmt.format_speedup(a.vs_baseline), ["stepwise-num"]))
            occupancy = a.resource("occupancy")
            cells += [_cell(str(a.resource("registers")), ["stepwise-num"]),
                      _cell(DASH if occupancy is None else
                            f"{sig(100 * occupancy)} % ({a.resource('blocks_per_sm')} blocks / SM)",
                            ["stepwise-num"]),
                      _cell(nodes.paragraph("", "", tooltip("yes", r["validation"])))]
            body.append(cells)
            classes.append(["stepwise-chosen"] if a.chosen else [])
        out = nodes.container(classes=["stepwise-table-block", "stepwise-autotune"])
        out += _table(header, body, ["stepwise-data", "stepwise-autotune-table"],
                      f"Autotuning sweep on {self.dataset.gpu['name']}, {chapter.size_text(n)} ({timing}), fastest "
                      "first", classes)
        legend = (f"Every configuration was timed in the same run as the chapter\u2019s steps and "
                  "validated on the buffers it was timed on (hover \u201cyes\u201d for what it was "
                  "compared with). Tiles: block bm \u00d7 bn \u00d7 bk, warp (a warpgroup\u2019s, for "
                  "wgmma kernels), thread. ")
        if with_min_blocks:
            legend += "Min blocks / SM: the kernel\u2019s __launch_bounds__. "
        if with_clusters:
            legend += ("Cluster: the tiles of C a cluster of blocks computes, along M \u00d7 along N (two "
                       "blocks share one operand\u2019s tile through TMA multicast); group: the cluster rows "
                       "visited together in the tile order. ")
        legend += ("Registers and occupancy: what the CUDA runtime reported for the kernel on the "
                   "measuring GPU.")
        if base:
            legend += (f" vs {label}: the median time of {base['id']} at the same size and timing "
                       f"over the configuration\u2019s (above 1{TIMES}: faster than {label}).")
        out += nodes.paragraph("", legend, classes=["stepwise-legend"])
        out += provenance_node(self.dataset, chapter)
        return [out]


def setup(app) -> None:
    app.add_directive("stepwise-tile-bounds", TileBoundsDirective)
    app.add_directive("stepwise-roofline", RooflineDirective)
    app.add_directive("stepwise-autotune", AutotuneDirective)
