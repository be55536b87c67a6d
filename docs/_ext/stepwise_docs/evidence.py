"""The profilers' evidence: Nsight Compute counts (a table per chapter and one count in the prose) and
what the compiler made of the kernels (SASS instruction counts)."""
from __future__ import annotations

from pathlib import Path

from docutils import nodes
from docutils.parsers.rst import directives
from sphinx.util.docutils import SphinxRole

from . import ncu, resources, sass
from .common import _Base, _cell, _env_chapters_used, _table, dataset_of, gpu_block, stepwise_stepref, tooltip
from .data import Chapter, DataError, Dataset


# ---------------------------------------------------------------------------
# Nsight Compute counts
# ---------------------------------------------------------------------------

_NCU_CACHE: dict[tuple[str, int, int], list] = {}


def _ncu_launches(path: Path) -> list:
    """The launches of a CSV file, parsed once per content (keyed by path, size and mtime); a
    missing file is the NcuError ncu.load_csv gives it."""
    if not path.is_file():
        return ncu.load_csv(path)
    stat = path.stat()
    key = (str(path), stat.st_size, stat.st_mtime_ns)
    if key not in _NCU_CACHE:
        _NCU_CACHE[key] = ncu.load_csv(path)
    return _NCU_CACHE[key]


def ncu_provenance(dataset: Dataset, csv_path: Path, chapter_id: str) -> str:
    """Where the counts come from; the GPU and commit only where the file name allows the claim."""
    name = csv_path.name
    if dataset.measurements is not None and ncu.same_session(csv_path, dataset.gpu,
                                                             dataset.source, chapter_id):
        run = dataset.chapter(chapter_id).run or dataset.run
        dirty = " (dirty)" if run.get("dirty") else ""
        return (f"Nsight Compute counts, {dataset.gpu['name']}, recorded with the measurements "
                f"(commit {run.get('commit', 'unknown')}{dirty}) by make profile; file {name}.")
    return (f"Nsight Compute counts from {name}, recorded with the sources. "
            "They were not taken in the run whose measurements this page shows, and the file "
            "does not record the GPU\u2019s name or the commit.")


NCU_COLUMNS = [
    ("launches", "launches"),
    ("ld_requests", "global load requests"),
    ("ld_sectors", "global load sectors"),
    ("sectors_per_request", "sectors per request"),
    ("st_sectors", "global store sectors"),
    ("st_requests", "global store requests"),
    ("st_sectors_per_request", "store sectors per request"),
    ("warp_efficiency", "warp execution efficiency"),
    ("bank_conflicts", "shared bank conflicts (ld+st)"),
    ("instructions", "warp instructions executed"),
    ("instructions_per_warp", "instructions per warp"),
    ("dram_bytes", "DRAM read + written"),
]
#: Column headers of the fields that are not in the default columns.
NCU_EXTRA_COLUMNS = [
    ("dram_read_bytes", "DRAM read"),
    ("dram_write_bytes", "DRAM written"),
    ("branch_targets", "branch targets"),
    ("divergent_branches", "divergent branch targets"),
    ("branch_uniformity", "branch uniformity"),
    ("achieved_occupancy", "achieved occupancy"),
    ("tensor_active", "tensor pipe active"),
    ("dram_throughput", "DRAM throughput"),
    ("wgmma_bank_conflicts", "bank conflicts (wgmma)"),
    ("xu_instructions", "XU (MUFU) instructions"),
    ("xu_share", "XU share of instructions"),
]


class NcuDirective(_Base):
    """``stepwise-ncu CHAPTER CSVFILE``: Nsight Compute counts per step, from ``ncu --csv``.

    Options: ``:launches: all`` (default: sums over every launch of the step's call) or
    ``first`` (the first launch only: the pass over the input); ``:steps:`` a space-separated
    subset of the chapter's step ids; ``:columns:`` a space-separated subset of the columns
    (field names of :data:`ncu.FIELDS`, default all); ``:caption:`` the table's title.

    Several GPUs: where the file's name starts with a GPU's slug and the chapter
    (``<slug>-<chapter>-...``, as make profile names it), the file of every other GPU of the build
    that lies beside it, with that GPU's slug in its place, is shown too, each under its GPU's
    name (the reference one first); another GPU's missing file is not an error. The
    ``stepwise-ncu-number`` role reads the reference GPU's file (the named one where it has none).
    """

    required_arguments = 2
    option_spec = {
        "launches": lambda arg: directives.choice(arg, ("all", "first")),
        "steps": directives.unchanged_required,
        "columns": directives.unchanged_required,
        "caption": directives.unchanged_required,
    }

    def run(self) -> list[nodes.Node]:
        reference = self.chapter(self.arguments[0])
        rel, named = self.env.relfn2path(self.arguments[1])
        self.env.note_dependency(rel)
        files = self.ncu_files(Path(named), reference.id)
        role_file = next((path for ds, path in files if ds is self.dataset), Path(named))
        self.env.temp_data.setdefault("stepwise_ncu", {})[reference.id] = str(role_file)
        out = nodes.container(classes=["stepwise-table-block"])
        columns = []
        for dataset, path in files:
            self.env.note_dependency(str(path))
            if dataset is None:  # a file of no GPU of this build: as it is, unlabelled
                block, chapter = out, reference
            else:
                block, chapter = gpu_block(dataset), self.chapter(reference.id, dataset)
                out += block
            table, columns = self._table(chapter, path, dataset or self.dataset)
            block.extend(table)
        out += self._legend(columns)
        return [out]

    def _table(self, chapter: Chapter, path: Path, dataset: Dataset) -> tuple[list[nodes.Node], list]:
        """One file's table and provenance line, and the columns shown."""
        first_only = self.options.get("launches", "all") == "first"
        try:
            counts = ncu.step_counts(chapter, _ncu_launches(path), path, first_only)
        except DataError as exc:
            raise self.error(f"{self.name}: {exc}") from None
        wanted = self.steps_option(chapter)
        if wanted is not None:
            counts = [c for c in counts if c.step["id"] in wanted]
        columns = NCU_COLUMNS
        if "columns" in self.options:
            names = self.options["columns"].split()
            unknown = [n for n in names if n not in ncu.FIELDS]
            if unknown:
                raise self.error(f"{self.name}: unknown column {unknown[0]!r} "
                                 f"(known: {', '.join(ncu.FIELDS)})")
            labels = dict(NCU_COLUMNS + NCU_EXTRA_COLUMNS)
            columns = [(n, labels[n]) for n in names]

        try:  # a late metric the file lacks (see ncu.LATE_METRICS) fails here, naming the file
            texts = [[ncu.format_field(c, key) for key, _l in columns] for c in counts]
        except DataError as exc:
            raise self.error(f"{self.name}: {exc}") from None
        body, classes = [], []
        for c, row_texts in zip(counts, texts):
            ref = stepwise_stepref("", "", nodes.literal("", c.step["id"]), chapter=chapter.id,
                                   step=c.step["id"], reftitle=c.step["title"])
            row = [_cell(nodes.paragraph("", "", ref))]
            for (key, _label), text in zip(columns, row_texts):
                para = nodes.paragraph("", text)
                if key in ("dram_bytes", "dram_read_bytes", "dram_write_bytes"):
                    para = nodes.paragraph("", "", tooltip(
                        text, f"{ncu.format_count(c.value(key))} bytes"))
                row.append(_cell(para, ["stepwise-num"]))
            body.append(row)
            classes.append(["stepwise-stale"] if chapter.states[c.step["id"]].stale else [])
        which = ("first launch of each step" if first_only else
                 "sums over all launches of one call")
        title = self.options.get("caption", f"Nsight Compute counts per step ({which})")
        return [_table(["step"] + [label for _k, label in columns], body,
                       ["stepwise-data", "stepwise-ncu"], title, classes),
                nodes.paragraph("", ncu_provenance(dataset, path, chapter.id),
                                classes=["stepwise-provenance"])], columns

    def _legend(self, columns: list) -> nodes.paragraph:
        first_only = self.options.get("launches", "all") == "first"
        legend = {
            ("launches",):
                "Launches: the kernel launches of the step\u2019s call in the file.",
            ("ld_requests", "sectors_per_request"):
                "Requests: warp-level global load instructions as the L1 sees them.",
            ("ld_sectors", "st_sectors", "sectors_per_request", "st_sectors_per_request"):
                "Sectors: the 32-byte pieces of memory the loads (or stores) touched, 4 per "
                "request when 32 lanes read 32 consecutive 4-byte words, 16 for 16-byte vector "
                "loads.",
            ("warp_efficiency",):
                "Warp execution efficiency: the average number of active threads per executed "
                "warp instruction, over 32, weighted by each launch\u2019s instruction count.",
            ("bank_conflicts",):
                "Shared bank conflicts: Nsight Compute\u2019s count of shared-memory bank "
                "conflicts, loads plus stores.",
            ("instructions_per_warp",):
                "Instructions per warp: warp instructions executed over warps launched.",
            ("dram_bytes", "dram_read_bytes", "dram_write_bytes"):
                "DRAM: bytes read from (or written to) device memory; the L2 cache serves the "
                "rest.",
            ("branch_targets", "divergent_branches", "branch_uniformity"):
                "Branch targets: Nsight Compute\u2019s count of the targets of the branch "
                "instructions the warps executed (smsp__sass_branch_targets); divergent: those of "
                "branches that split a warp\u2019s active threads; uniformity: the targets all of "
                "a warp\u2019s active threads took, over all targets (\u2014 where the step "
                "executed no branch).",
            ("achieved_occupancy",):
                "Achieved occupancy: warps active on an SM over the SM\u2019s maximum, averaged "
                "over the cycles it was active, then over the launches weighted by their durations (by their "
                "warps in a file profiled without durations).",
            ("tensor_active",):
                "Tensor pipe active: the cycles the SMs\u2019 tensor cores were busy with HMMA or "
                "HGMMA instructions, over the cycles the SMs were active, averaged as occupancy is.",
            ("dram_throughput",):
                "DRAM throughput: device memory\u2019s traffic as a share of its peak over the "
                "launch\u2019s time.",
            ("wgmma_bank_conflicts",):
                "Bank conflicts (wgmma): shared-memory bank conflicts of the tensor cores\u2019 own "
                "reads of A and B (none where the tiles are swizzled as the descriptors say).",
        }
        text = ("Counts of the first launch only. " if first_only else
                "Counts are sums over the launches. ")
        shown = {k for k, _l in columns}
        text += " ".join(v for keys, v in legend.items() if shown.intersection(keys))
        return nodes.paragraph("", text, classes=["stepwise-legend"])


class NcuNumberRole(SphinxRole):
    """``{stepwise-ncu-number}`reduction/04_interleaved_pairs/ld_sectors[@first]```.

    Reads the CSV file of the last ``stepwise-ncu`` directive for that chapter earlier on the
    same page; fields are those of :data:`ncu.FIELDS`.
    """

    def run(self) -> tuple[list[nodes.Node], list[nodes.system_message]]:
        text = self.text.strip()
        first_only = text.endswith("@first")
        text = text.removesuffix("@first")
        parts = text.split("/")

        def fail(message: str):
            msg = self.inliner.reporter.error(f"stepwise-ncu-number {self.text!r}: {message}",
                                              line=self.lineno)
            return [nodes.problematic(self.rawtext, self.rawtext)], [msg]

        if len(parts) != 3:
            return fail("expected CHAPTER/STEP/FIELD[@first]")
        chapter_id, step_id, field_name = parts
        if field_name not in ncu.FIELDS:
            return fail(f"unknown field {field_name!r} (known: {', '.join(ncu.FIELDS)})")
        dataset = dataset_of(self.env)
        path = self.env.temp_data.get("stepwise_ncu", {}).get(chapter_id)
        if path is None:
            return fail(f"no `stepwise-ncu {chapter_id} FILE` directive before it on this page")
        try:
            chapter = dataset.chapter(chapter_id)
            chapter.step(step_id)
            counts = ncu.step_counts(chapter, _ncu_launches(Path(path)), Path(path), first_only)
        except DataError as exc:
            return fail(str(exc))
        _env_chapters_used(self.env).setdefault(self.env.docname, set()).add(chapter.id)
        self.env.note_dependency(path)
        count = next(c for c in counts if c.step["id"] == step_id)
        try:
            value = ncu.format_field(count, field_name)
        except DataError as exc:
            return fail(str(exc))
        which = "first launch" if first_only else "all launches of one call"
        where = ncu_provenance(dataset, Path(path), chapter_id)
        node = tooltip(value, f"{ncu.FIELDS[field_name]}, {chapter_id}/{step_id}, {which}; {where}",
                       ["stepwise-number"])
        return [node], []


# ---------------------------------------------------------------------------
# What the compiler made of the kernels (SASS)
# ---------------------------------------------------------------------------

_SASS_CACHE: dict[tuple[str, int, int], sass.SassReport] = {}


def sass_dir(config) -> Path:
    """Where the chapters' SASS reports are: ``stepwise_sass_dir``, else ``<registry's folder>/sass``."""
    if config.stepwise_sass_dir:
        return Path(config.stepwise_sass_dir)
    return Path(config.stepwise_registry).resolve().parent / "sass"


def _sass_report(path: Path) -> sass.SassReport:
    """A report, parsed once per content (keyed by path, size and mtime)."""
    if not path.is_file():
        return sass.load(path)  # the error
    stat = path.stat()
    key = (str(path), stat.st_size, stat.st_mtime_ns)
    if key not in _SASS_CACHE:
        _SASS_CACHE[key] = sass.load(path)
    return _SASS_CACHE[key]


class SassDirective(_Base):
    """``stepwise-sass CHAPTER``: per step's kernel, its SASS instructions as the build compiled them.

    Reads ``<stepwise_sass_dir>/<CHAPTER>.json`` (:mod:`.sass_report`; see :mod:`.sass`).
    Options: ``:steps:`` a space-separated subset of the chapter's step ids; ``:listing:``
    (flag) each step's short listing (branches, convergence barriers, MUFU) as a literal block.
    A missing file, or a step's kernel the file has no function of, is a build error.
    """

    required_arguments = 1
    option_spec = {"steps": directives.unchanged_required, "listing": directives.flag}

    def run(self) -> list[nodes.Node]:
        chapter = self.chapter(self.arguments[0])
        path = sass_dir(self.config) / f"{chapter.id}.json"
        self.env.note_dependency(str(path.resolve()))
        steps = chapter.steps
        if "steps" in self.options:
            try:
                steps = [chapter.step(step_id) for step_id in self.options["steps"].split()]
            except DataError as exc:
                raise self.error(f"{self.name}: {exc}") from None
        arch = resources.preferred_arch(self.dataset)
        try:
            report = _sass_report(path)
            rows = [(step, kernel, function) for step in steps
                    for kernel, function in sass.step_functions(report, chapter, step, arch)]
        except DataError as exc:
            raise self.error(f"{self.name}: {exc}") from None

        variants = sorted({v for _s, _k, f in rows for v in f.counts["mufu"]})
        mma = sorted({v for _s, _k, f in rows for v in f.counts.get("mma", {})})
        mufu_columns = bool(variants) or not mma  # a chapter of tensor-core kernels need not show MUFU
        warpsync = any(f.counts["warpsync"] for _s, _k, f in rows)
        header = ["step", "kernel", "instructions", "BRA", "BSSY / BSYNC", "predicated"]
        header += ["WARPSYNC"] if warpsync else []
        header += (variants or ["MUFU"]) if mufu_columns else []
        header += mma
        body, classes = [], []
        for step, kernel, function in rows:
            c = function.counts
            ref = stepwise_stepref("", "", nodes.literal("", step["id"]), chapter=chapter.id,
                                   step=step["id"], reftitle=step["title"])
            name = nodes.paragraph("", "", tooltip(kernel["name"], function.name))
            cells = [_cell(nodes.paragraph("", "", ref)), _cell(name)]
            numbers = [f"{c['instructions']:,}", f"{c['bra']:,}", f"{c['bssy']:,} / {c['bsync']:,}",
                       f"{c['predicated']:,}"]
            numbers += [f"{c['warpsync']:,}"] if warpsync else []
            if mufu_columns:
                numbers += [f"{c['mufu'].get(v, 0):,}" for v in variants] if variants else ["0"]
            numbers += [f"{c.get('mma', {}).get(v, 0):,}" for v in mma]
            cells += [_cell(text, ["stepwise-num"]) for text in numbers]
            body.append(cells)
            classes.append(["stepwise-stale"] if chapter.states[step["id"]].stale else [])
        archs = ", ".join(dict.fromkeys(f.arch for _s, _k, f in rows))
        compiler = self.dataset.registry.get("compiled_by", {}).get("compiler", "an unrecorded compiler")
        title = (f"SASS instructions of each step\u2019s kernels, compiled by {compiler} for {archs}, "
                 f"read with cuobjdump -sass at build time ({report.tool}, {report.object})")
        out = nodes.container(classes=["stepwise-table-block"])
        out += _table(header, body, ["stepwise-data", "stepwise-sass"], title, classes)
        legend = (
            "Counts of the compiled code, each instruction once however often it runs (Nsight "
            "Compute counts what ran). Instructions: every SASS instruction of the kernel but the "
            "NOP padding. BRA: branch instructions, the branch-to-itself after the last EXIT "
            "included. BSSY / BSYNC: the convergence barrier a divergent region starts and ends "
            "with, where the warp\u2019s threads meet again. Predicated: instructions under a "
            "guard predicate (@P0, @!P1): the warp issues them, and only its threads whose "
            "predicate holds execute them. "
            + ("WARPSYNC: explicit warp synchronisations. " if warpsync else "")
            + ("MUFU: the special function unit\u2019s instructions by variant (__sinf is "
               "MUFU.SIN, __cosf MUFU.COS). " if mufu_columns else "")
            + ("HMMA, HGMMA: the tensor cores\u2019 instructions by shape and types: HMMA is a warp\u2019s "
               "mma.sync (and what WMMA compiles to), HGMMA a warpgroup\u2019s wgmma, Hopper\u2019s; "
               "each is one instruction in the code, however many times its loop runs it." if mma else ""))
        out += nodes.paragraph("", legend, classes=["stepwise-legend"])
        if "listing" in self.options:
            for step, kernel, function in rows:
                text = "\n".join(function.listing) + "\n" if function.listing else "(none)\n"
                literal = nodes.literal_block(text, text)
                literal["language"] = "text"
                literal["classes"] += ["stepwise-code", "stepwise-sass-listing"]
                self.set_source_info(literal)
                wrapper = nodes.container("", literal_block=True, classes=["literal-block-wrapper"])
                cap = nodes.caption("", "", nodes.literal("", f"{step['id']}: {function.name} "
                                                              f"({function.arch})"))
                self.set_source_info(cap)
                wrapper += cap
                wrapper += literal
                out += wrapper
            out += nodes.paragraph(
                "", "Listings: each branch, convergence barrier and MUFU instruction with its "
                "address; a run of more than three MUFU instructions of one variant is shortened "
                "to its first and last.", classes=["stepwise-legend"])
        return [out]
