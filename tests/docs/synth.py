"""FIXTURE data for tests/docs: a made-up registry and measurement file for any steps.

Nothing here is a measurement. Every GPU name says "FIXTURE GPU (not a
measurement)" and every time is a made-up round number; these files are only
ever written under pytest's tmp_path.
"""
from __future__ import annotations

import copy
import json
import re
import sys
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
FIXTURES = Path(__file__).resolve().parent / "fixtures"
FIXTURE_PROJECT = FIXTURES / "project"
SCHEMA = REPO / "conf" / "measurement.schema.json"
BUILD_DOCS = REPO / "conf" / "build_docs.py"

for p in (REPO / "conf", REPO / "docs" / "_ext"):
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))

from stepwise_docs.source_hash import source_sha256  # noqa: E402


def stub_executable(path: Path, body: str) -> None:
    """A shell script standing in for a program (a GPU tool, make, the timing program) in the tests of the
    scripts in conf/: ``body`` after ``#!/bin/sh``, made executable, its folder made."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(path.stat().st_mode | 0o111)

def probe_answer(gpu: bool, reason: str = "no CUDA-capable device is detected") -> str:
    """The shell lines with which a stand-in timing program answers ``--probe --json``: the FIXTURE GPU (slug
    ``fixture-gpu``), or no usable GPU and ``reason``; to be run where its first argument is ``--probe``."""
    answer = (json.dumps({"usable": True, "name": "FIXTURE GPU", "slug": "fixture-gpu", "compute_capability": "9.0",
                          "sm_count": 132}) if gpu else json.dumps({"usable": False, "reason": reason}))
    return f"echo '{answer}'; exit {0 if gpu else 1}"


def html_text(html: str, gap: str = " ") -> str:
    """The text of some HTML, white space folded; each tag becomes ``gap`` (``""`` joins what a tag splits)."""
    return " ".join(re.sub(r"<[^>]+>", gap, html).split())


def built_page(project: Path, name: str = "index.html", gap: str = " ") -> tuple[str, str]:
    """A page of the site build_docs.py built in ``project``, as HTML and as text (see :func:`html_text`)."""
    html = (project / "build" / "docs" / "html" / name).read_text(encoding="utf-8")
    return html, html_text(html, gap)


@dataclass
class HtmlTable:
    """A table of a built page as a reader sees it: its classes, caption, the texts of its last header row, and
    its body rows as lists of cell texts (a cell spanning columns repeated over them)."""

    classes: list[str]
    caption: str = ""
    header: list[str] = field(default_factory=list)
    rows: list[list[str]] = field(default_factory=list)

    def columns(self) -> list[tuple[str, list[str]]]:
        """(header, the column's body texts) for each column of the body's full rows (those as wide as the widest),
        headed where the last header row is as wide."""
        width = max((len(r) for r in self.rows), default=0)
        full = [r for r in self.rows if len(r) == width]
        header = self.header if len(self.header) == width else [""] * width
        return [(header[i], [r[i] for r in full]) for i in range(width)]


class _TableParser(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tables: list[HtmlTable] = []
        self._open: list[tuple[HtmlTable, list]] = []  # a table and the row being read
        self._section = ""
        self._cell: list[str] | None = None
        self._span = 1
        self._in_caption = False

    def handle_starttag(self, tag: str, attrs) -> None:
        attrs = dict(attrs)
        if tag == "table":
            self._open.append((HtmlTable((attrs.get("class") or "").split()), []))
        elif not self._open:
            return
        elif tag in ("thead", "tbody"):
            self._section = tag
        elif tag == "tr":
            self._open[-1] = (self._open[-1][0], [])
        elif tag in ("td", "th"):
            self._cell, self._span = [], int(attrs.get("colspan") or 1)
        elif tag == "caption":
            self._in_caption, self._cell = True, []

    def handle_endtag(self, tag: str) -> None:
        if not self._open:
            return
        table, row = self._open[-1]
        if tag in ("td", "th") and self._cell is not None and not self._in_caption:
            row.extend([" ".join("".join(self._cell).split())] * self._span)
            self._cell = None
        elif tag == "caption" and self._in_caption:
            table.caption = " ".join("".join(self._cell or []).split()).rstrip("\u00b6").strip()
            self._in_caption, self._cell = False, None
        elif tag == "tr":
            if self._section == "thead":
                table.header = row
            else:
                table.rows.append(row)
        elif tag == "table":
            self.tables.append(self._open.pop()[0])

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)


def html_tables(html: str) -> list[HtmlTable]:
    """Every table of a built page (:class:`HtmlTable`), in the order they close."""
    parser = _TableParser()
    parser.feed(html)
    parser.close()
    return parser.tables


def assert_one_line_message(exc, *needles: str) -> None:
    """The error that ``exc`` (pytest's ExceptionInfo) caught says it on one line, holding every needle."""
    message = str(exc.value)
    assert "\n" not in message, message
    for needle in needles:
        assert needle in message, message


FIXTURE_GPU = "FIXTURE GPU (not a measurement)"
#: The second FIXTURE GPU (fixtures/project/more-measurements/fixture-gpu-b.json, see second_gpu).
FIXTURE_GPU_B = "FIXTURE GPU B (not a measurement)"
FIXTURE_GPU_B_SLUG = "fixture-gpu-b"
FIXTURE_GPU_B_L2 = 33554432  # 32 MiB (the first FIXTURE GPU has 48 MiB)

ELEMENTWISE_TIMINGS = [
    {"id": "batch", "label": "FIXTURE: events around 10 back-to-back launches, per launch; L2 warm",
     "l2": "warm", "launches_per_sample": 10},
    {"id": "single_cold", "label": "FIXTURE: events around one launch; L2 flushed before each sample",
     "l2": "flushed", "launches_per_sample": 1},
]
ELEMENTWISE_CEILINGS = [
    {"id": "inplace_read_write", "title": "FIXTURE: in-place read and write"},
    {"id": "device_copy", "title": "FIXTURE: device-to-device copy"},
    {"id": "empty_launch", "title": "FIXTURE: empty launch"},
]


REDUCTION_TIMINGS = [
    {"id": "single_cold", "label": "FIXTURE: events around one call; L2 flushed before each sample",
     "l2": "flushed", "launches_per_sample": 1},
]
REDUCTION_CEILINGS = [{"id": "device_copy", "title": "FIXTURE: device-to-device copy"}]
REDUCTION_BASELINES = [{"id": "cub_device_reduce_sum", "title": "FIXTURE: a library sum"}]
REDUCTION_SIZES = [{"n": 4194304, "problem": "2^22 int"}, {"n": 268435456, "problem": "2^28 int"}]

#: FIXTURE device limits (gpu.limits) for every FIXTURE measurement file.
FIXTURE_LIMITS = {"max_sm_clock_mhz": 1000, "fp32_lanes_per_sm": 128, "registers_per_sm": 65536,
                  "max_registers_per_thread": 255, "shared_memory_per_sm_bytes": 233472,
                  "shared_memory_per_block_optin_bytes": 232448, "max_threads_per_sm": 2048,
                  "shared_memory_banks": 32, "shared_memory_bank_bytes": 4}
FIXTURE_SM_COUNT = 100

# An SGEMM-like chapter: steps with a "tiling", rows with FLOPs, an FMA ceiling and a copy.
GEMM_TIMINGS = [
    {"id": "single_cold", "label": "FIXTURE: events around one launch; L2 flushed before each sample",
     "l2": "flushed", "launches_per_sample": 1},
]
GEMM_CEILINGS = [{"id": "fma_peak", "title": "FIXTURE: n^3 FMAs in registers"},
                 {"id": "device_copy", "title": "FIXTURE: device-to-device copy of A, B and C"}]
GEMM_BASELINES = [{"id": "cublas_sgemm", "title": "FIXTURE: a library SGEMM, fp32"},
                  {"id": "cublas_sgemm_tf32", "title": "FIXTURE: a library SGEMM, TF32"}]
#: FIXTURE rates at large n: the FMA ceiling (GFLOP/s) and the copy (GB/s, read + written).
GEMM_FMA_GFLOPS = 20000.0
GEMM_COPY_GBPS = 2000.0
#: The FIXTURE gemm chapter of tests/docs/fixtures/project: tiling and sizes of its steps.
GEMM_TILINGS = {
    "01_naive": dict(block_m=32, block_n=32, block_k=0, warp_m=0, warp_n=0, thread_m=1, thread_n=1,
                     threads=1024, stages=0),
    "02_register_blocking": dict(block_m=64, block_n=64, block_k=8, warp_m=0, warp_n=0, thread_m=4,
                                 thread_n=4, threads=256, stages=0),
    "03_autotuned": dict(block_m=128, block_n=128, block_k=16, warp_m=64, warp_n=32, thread_m=8,
                         thread_n=8, threads=256, stages=3),
    "04_tf32": dict(block_m=128, block_n=128, block_k=32, warp_m=64, warp_n=64, thread_m=0, thread_n=0,
                    threads=128, stages=2),
}
GEMM_SIZES = {"01_naive": [128, 256, 512, 1000], "02_register_blocking": [128, 256, 512],
              "03_autotuned": [128, 256, 512], "04_tf32": [128, 256, 512]}
#: FIXTURE DRAM bytes (read, written) per step in the gemm chapter's FIXTURE Nsight Compute file.
GEMM_DRAM = {"01_naive": (201326592, 1048576), "02_register_blocking": (6291456, 1048576),
             "03_autotuned": (3145728, 1048576), "04_tf32": (3145728, 1048576)}
GEMM_PROFILED_N = 512


def snippet_steps(root: Path, chapter: str, launcher: str = "update",
                  sizes: list[dict] | None = None) -> list[dict]:
    """Registry step entries for the snippet files of a chapter (ids from file names)."""
    steps = []
    for path in sorted((root / "snippets" / chapter).glob("[0-9][0-9]_*.cuh")):
        text = path.read_text(encoding="utf-8")
        ns = re.search(r"^namespace\s+(stepwise::[\w:]+)\s*\{", text, re.MULTILINE)
        brief = re.search(r"@brief\s+(.+)", text)
        steps.append({
            "id": path.stem,
            "title": (brief.group(1).strip() if brief else path.stem),
            "file": path.relative_to(root).as_posix(),
            "namespace": ns.group(1) if ns else f"stepwise::{chapter}",
            "launcher": launcher,
            "same_operation": "lookup" not in path.stem,
            "beyond_article": False,
            "sizes": sizes or [{"n": 4194304, "problem": "2048 x 2048 float"}],
            "kernels": [fixture_kernel()],
        })
    return steps


def fixture_kernel(name: str = "update_kernel", registers: int = 16) -> dict:
    """A registry kernel entry with made-up (FIXTURE) compiler counts."""
    return {"name": name, "block": [256, 1, 1], "block_threads": 256, "dynamic_shared_bytes": 0,
            "compiled": [{"arch": "sm_90", "registers": registers, "barriers": 0, "static_shared_bytes": 0,
                          "stack_frame_bytes": 0, "spill_store_bytes": 0, "spill_load_bytes": 0,
                          "occupancy": {"blocks_per_sm": 8, "active_warps": 64, "max_warps": 64,
                                        "fraction": 1.0, "limited_by": ["warps"]}}]}


def step_entry(step_id: str, namespace: str, kernels: list[tuple[str, list[int]]],
               file: str = "snippets/x.cuh", launcher: str = "run") -> dict:
    """A registry step entry (FIXTURE title, one size) with a kernel of each (name, block) of ``kernels``."""
    return {"id": step_id, "title": f"FIXTURE {step_id}", "file": file, "namespace": namespace,
            "launcher": launcher, "same_operation": True, "beyond_article": False,
            "sizes": [{"n": 1024, "problem": "fixture"}],
            "kernels": [{**fixture_kernel(name), "block": block} for name, block in kernels]}


def gemm_steps(root: Path) -> list[dict]:
    """Registry entries of the FIXTURE gemm chapter (snippets/gemm/*.cuh), with tilings."""
    steps = snippet_steps(root, "gemm", "sgemm")
    for step in steps:
        step["tiling"] = dict(GEMM_TILINGS[step["id"]])
        step["sizes"] = [{"n": n, "problem": f"{n}^3 fp32 (fixture)"} for n in GEMM_SIZES[step["id"]]]
        step["same_operation"] = "tf32" not in step["id"]
        step["beyond_article"] = "tf32" in step["id"]
        step["kernels"] = [fixture_kernel("sgemm_kernel", 32 if step["id"] == "01_naive" else 128)]
    return steps


def registry_for(steps: list[dict], chapter: str = "elementwise",
                 timings=ELEMENTWISE_TIMINGS, ceilings=ELEMENTWISE_CEILINGS,
                 baselines=()) -> dict:
    return {"schema": 1, "generator": "stepwise_bench", "chapters": [{
        "id": chapter, "title": f"FIXTURE {chapter}", "share_of": ceilings[0]["id"],
        "timings": list(timings), "ceilings": list(ceilings), "baselines": list(baselines),
        "steps": steps}]}


def _stats(n: int, timing: str, median: float, nbytes: int | None) -> dict:
    return {"n": n, "timing": timing, "samples": 50, "median_ms": median,
            "min_ms": median * 0.95, "max_ms": median * 1.2, "rel_noise": 0.02,
            "throttled_samples": 0, "bytes": nbytes,
            "gbps": nbytes / (median * 1e-3) / 1e9 if nbytes else None,
            "flops": None, "gflops": None}


def is_gemm(chapter: dict) -> bool:
    """An SGEMM-like chapter: its steps carry a tiling, its rows FLOPs."""
    return any("tiling" in s for s in chapter["steps"])


def _gemm_stats(n: int, timing: str, fraction: float) -> dict:
    """FIXTURE timing stats of a row doing 2 n^3 FLOPs at ``fraction`` of the FIXTURE FMA ceiling
    (smaller sizes run a little slower)."""
    flops = 2 * n ** 3
    gflops = GEMM_FMA_GFLOPS * fraction * n / (n + 64)
    median = flops / (gflops * 1e6)
    return {**_stats(n, timing, median, None), "flops": flops, "gflops": gflops}


def _gemm_fraction(chapter: dict, step: dict) -> float:
    """FIXTURE share of the FMA ceiling: a ladder over the fp32 steps, 2x for the others."""
    if not step.get("same_operation", True):
        return 2.0
    fp32 = [s["id"] for s in chapter["steps"] if s.get("same_operation", True)]
    i = fp32.index(step["id"])
    return 0.02 + 0.88 * i / max(len(fp32) - 1, 1)


def _gemm_chosen_step(chapter: dict) -> dict:
    tiled = [s for s in chapter["steps"] if s.get("tiling") and s["tiling"]["block_m"] > 0]
    named = [s for s in tiled if s["id"].endswith("autotuned")]
    if named:
        return named[0]
    return [s for s in tiled if s.get("same_operation", True)][-1]


def config_id(config: dict) -> str:
    return ("bm{block_m}_bn{block_n}_bk{block_k}_wm{warp_m}_wn{warp_n}_tm{thread_m}_tn{thread_n}"
            "_s{stages}_mb{min_blocks}").format(**config)


def gemm_autotune_rows(chapter: dict, timing: str, n: int | None = None) -> list[dict]:
    """FIXTURE autotuning rows: the chosen step's tiling (chosen) and two variants, at `n` (default: its
    largest size, 4096 where it has it)."""
    step = _gemm_chosen_step(chapter)
    sizes = [size["n"] for size in step["sizes"]]
    n = n or (4096 if 4096 in sizes else max(sizes))
    chosen = {**step["tiling"], "min_blocks": 2}
    variants = [(chosen, 1.0, True),
                ({**chosen, "stages": chosen["stages"] + 1}, 0.8, False),
                ({**chosen, "block_k": 2 * chosen["block_k"] or 8}, 0.7, False)]
    rows = []
    for config, factor, is_chosen in variants:
        cid = config_id(config)
        threads = config["threads"]
        rows.append({
            "id": cid, "config": config,
            **_gemm_stats(n, timing, _gemm_fraction(chapter, step) * factor),
            "validated": True, "validation": "FIXTURE: within the FIXTURE tolerance of the FIXTURE reference",
            "accuracy": {"max_rel": 1e-6, "tolerance_rel": 1e-5},
            "resources": [{"kernel": f"sgemm_kernel<{cid}>", "block": [threads, 1, 1], "registers": 128,
                           "static_shared_bytes": 0, "local_bytes": 0,
                           "blocks_per_sm": max(1, 2048 // threads // 4),
                           "occupancy": max(1, 2048 // threads // 4) * threads / 2048}],
            "chosen": is_chosen,
        })
    return rows


def used_by_autotune_rows(chapter: dict, timing: str, n: int) -> list[dict]:
    """FIXTURE autotuning rows of a kernel template whose configurations name the step that picks among them
    (``used_by``: the chapter's last step) rather than matching a step's tiling; the first is chosen."""
    step = chapter["steps"][-1]["id"]
    rows = []
    for index, bn in enumerate((256, 128)):
        config = {"block_m": 128, "block_n": bn, "block_k": 64, "warp_m": 64, "warp_n": bn, "thread_m": 0,
                  "thread_n": 0, "threads": 384, "stages": 4, "cluster_m": 2, "cluster_n": 1, "group_m": 8}
        rows.append({
            "id": f"bn{bn}_s4_c2x1_g8", "config": config, **_gemm_stats(n, timing, 0.9 - 0.1 * index),
            "validated": True, "validation": "FIXTURE: within the FIXTURE tolerance of the FIXTURE reference",
            "accuracy": {"max_rel": 1e-3, "tolerance_rel": 1e-3},
            "resources": [{"kernel": f"gemm_kernel<bn{bn}>", "block": [384, 1, 1], "registers": 168,
                           "static_shared_bytes": 64, "local_bytes": 0, "blocks_per_sm": 1, "occupancy": 0.1875}],
            "chosen": index == 0, "used_by": step,
        })
    return rows


def _gemm_chapter(ch: dict, root: Path) -> dict:
    """A FIXTURE measurement chapter for an SGEMM-like registry chapter."""
    rows_s, rows_c, rows_b = [], [], []
    sizes = list(dict.fromkeys(size["n"] for s in ch["steps"] for size in s["sizes"]))
    for t in ch["timings"]:
        for n in sizes:
            for c in ch["ceilings"]:
                if c["id"] == "device_copy":
                    nbytes = 2 * 3 * 4 * n * n
                    rows_c.append({"id": c["id"], "title": c["title"],
                                   **_stats(n, t["id"], nbytes / (GEMM_COPY_GBPS * 1e6), nbytes)})
                else:
                    rows_c.append({"id": c["id"], "title": c["title"], **_gemm_stats(n, t["id"], 1.0)})
            for b in ch["baselines"]:
                row = {"id": b["id"], "title": b["title"],
                       **_gemm_stats(n, t["id"], 2.5 if "tf32" in b["id"] else 0.95)}
                rows_b.append(row)
        fma = {row["n"]: row for row in rows_c if row["id"] == "fma_peak" and row["timing"] == t["id"]}
        for s in ch["steps"]:
            same = s.get("same_operation", True)
            for size in s["sizes"]:
                stats = _gemm_stats(size["n"], t["id"], _gemm_fraction(ch, s))
                mark = fma.get(size["n"])
                rows_s.append({
                    "id": s["id"], "title": s["title"], **stats,
                    "file": s["file"], "source_sha256": source_sha256(root / s["file"]),
                    "problem": size.get("problem", ""), "same_operation": same,
                    "beyond_article": s.get("beyond_article", False),
                    "share_of_ceiling": mark["median_ms"] / stats["median_ms"] if mark else None,
                    "validated": True,
                    "validation": "FIXTURE: within the FIXTURE tolerance of the FIXTURE reference",
                    "accuracy": {"max_rel": 1e-6 if same else 1e-3,
                                 "tolerance_rel": 1e-5 if same else 4e-3},
                    "tests": {"passed": 3, "failed": 0, "skipped": 0},
                })
    return {"id": ch["id"], "title": ch["title"], "share_of": ch["share_of"], "timings": ch["timings"],
            "ceilings": rows_c, "baselines": rows_b, "steps": rows_s,
            "autotune": [r for t in ch["timings"] for n in _gemm_autotune_sizes(ch)
                         for r in gemm_autotune_rows(ch, t["id"], n)]}


def _gemm_autotune_sizes(chapter: dict) -> list[int]:
    """Where the FIXTURE sweep runs: the chosen step's largest size (4096 where it has it), and 1024 too where
    the step has it (the SGEMM page shows the sweep there as well)."""
    sizes = [size["n"] for size in _gemm_chosen_step(chapter)["sizes"]]
    main = 4096 if 4096 in sizes else max(sizes)
    return [main] + ([1024] if 1024 in sizes and main != 1024 else [])


def ncu_csv(chapter: dict, dram: dict[str, tuple[int, int]]) -> str:
    """A FIXTURE file in the format of ``ncu --csv --print-units base``: one launch per step,
    every metric the docs read, DRAM bytes (read, written) from ``dram``."""
    from stepwise_docs.ncu import METRICS

    header = ["ID", "Process ID", "Process Name", "Host Name", "Kernel Name", "Context", "Stream",
              "Block Size", "Grid Size", "Device", "CC", "Section Name", "Metric Name", "Metric Unit",
              "Metric Value"]
    values = {"smsp__thread_inst_executed_per_inst_executed.ratio": ("", "32"),
              "smsp__inst_executed.sum": ("inst", "1,000,000")}
    lines = ["==FIXTURE== tests/docs fixture in the format of `ncu --csv --print-units base`: "
             "made-up round numbers, not a measurement\n",
             ",".join(f'"{h}"' for h in header) + "\n"]
    for launch, step in enumerate(chapter["steps"]):
        read, written = dram[step["id"]]
        kernel = f"void {step['namespace']}::sgemm_kernel(int, int, int, float, const float *, const float *, float, float *)"
        for metric in sorted(METRICS):
            if metric == "dram__bytes_read.sum":
                unit, value = "byte", f"{read:,}"
            elif metric == "dram__bytes_write.sum":
                unit, value = "byte", f"{written:,}"
            else:
                unit, value = values.get(metric, ("", "1,024"))
            cells = [str(launch), "1", "fixture_tests", "127.0.0.1", kernel, "1", "7", "(256, 1, 1)",
                     "(16, 16, 1)", "0", "9.0", "Command line profiler metrics", metric, unit, value]
            lines.append(",".join(f'"{c}"' for c in cells) + "\n")
    return "".join(lines)


def default_dram(chapter: dict, n: int = 4096) -> dict[str, tuple[int, int]]:
    """FIXTURE DRAM bytes (read, written) for every step of a chapter: A and B read once, C written."""
    return {s["id"]: (2 * 4 * n * n, 4 * n * n) for s in chapter["steps"]}


def row_sizes(chapter: dict, entry: dict) -> list[int]:
    """The sizes the timing program measures a registry row at: a step's sizes, a reference's
    ``sizes`` (absent: every step size but the sweep's, bar its ``main_sizes`` and those a step
    outside the sweep's rows has), and the sweep's sizes for its rows; each once."""
    sweep = chapter.get("sweep") or {}
    extra = sweep.get("sizes", [])
    if "sizes" in entry and entry["sizes"] and isinstance(entry["sizes"][0], dict):
        out = [size["n"] for size in entry["sizes"]]
    elif entry.get("sizes"):
        out = list(entry["sizes"])
    else:
        rows = sweep.get("rows", [s["id"] for s in chapter["steps"]] + [b["id"] for b in chapter["baselines"]])
        main = {size["n"] for s in chapter["steps"] if s["id"] not in rows for size in s["sizes"]}
        main.update(sweep.get("main_sizes", []))
        out = [n for n in dict.fromkeys(size["n"] for s in chapter["steps"] for size in s["sizes"])
               if n not in extra or n in main]
    if entry["id"] in sweep.get("rows", []):
        out += extra
    return list(dict.fromkeys(out))


#: What a chapter's run (schema 2) takes from the run of the timing program, and from the GPU's state in it.
RUN_FIELDS = ("date", "commit", "dirty", "command", "seed", "clock_source", "stopping_rule")
GPU_STATE_FIELDS = ("driver", "cuda_runtime", "cuda_driver", "sm_clock_mhz", "temperature_c")


def with_chapter_runs(measurement: dict, seconds: float = 1.0) -> dict:
    """A FIXTURE measurement as one run of the timing program writes it (schema 2): every chapter carries that run
    (its fields, the GPU's driver and clocks, ``seconds`` and FIXTURE test counts); ``run.measured`` lists them."""
    for chapter in measurement["chapters"]:
        run = {k: v for k, v in measurement["run"].items() if k in RUN_FIELDS}
        run.update({k: copy.deepcopy(measurement["gpu"][k]) for k in GPU_STATE_FIELDS if k in measurement["gpu"]})
        chapter["run"] = {**run, "seconds": seconds, "tests": {"passed": 3, "failed": 0, "skipped": 0}}
    measurement["run"]["measured"] = [c["id"] for c in measurement["chapters"]]
    measurement["schema"] = 2
    return measurement


def set_chapter_run(measurement: dict, chapter_id: str, **fields) -> dict:
    """The FIXTURE measurement with chapter ``chapter_id``'s run changed (``commit``, ``date``, ...): as if a later
    run of that chapter alone had been merged into the file."""
    next(c for c in measurement["chapters"] if c["id"] == chapter_id)["run"].update(fields)
    return measurement


def measurement_for(registry: dict, root: Path, date: str = "2000-01-01T00:00:00Z",
                    commit: str = "f1xture") -> dict:
    """A schema-valid FIXTURE measurement file covering every registry row."""
    chapters = []
    for ch in registry["chapters"]:
        if is_gemm(ch):
            chapters.append(_gemm_chapter(ch, root))
            continue
        rows_s, rows_c, rows_b = [], [], []
        sizes = list(dict.fromkeys(size["n"] for s in ch["steps"] for size in s["sizes"]))
        for t_index, t in enumerate(ch["timings"]):
            scale = 1.0 + t_index
            for ref_kind, entries, out in (("c", ch["ceilings"], rows_c), ("b", ch["baselines"], rows_b)):
                for i, e in enumerate(entries):
                    # every size of the chapter, as the timing program writes them, and the sweep's
                    for n in dict.fromkeys(sizes + row_sizes(ch, e)):
                        nbytes = None if e["id"] == "empty_launch" else 8 * n
                        row = {"id": e["id"], "title": e["title"],
                               **_stats(n, t["id"], 0.01 * scale * (i + 1), nbytes)}
                        if ref_kind == "b":  # a library validated as the steps are (the tensor-core chapter's)
                            row.update(validated=True, validation="FIXTURE", accuracy={"max_rel": 1e-6})
                        out.append(row)
            for i, s in enumerate(ch["steps"]):
                problems = {size["n"]: size.get("problem", "") for size in s["sizes"]}
                for n in row_sizes(ch, s):
                    size = {"n": n, "problem": problems.get(n, f"n = {n}")}
                    median = 0.1 * scale / (i + 1)
                    rows_s.append({
                        "id": s["id"], "title": s["title"],
                        **_stats(size["n"], t["id"], median, 8 * size["n"]),
                        "file": s["file"], "source_sha256": source_sha256(root / s["file"]),
                        "problem": size.get("problem", ""), "same_operation": s.get("same_operation", True),
                        "beyond_article": s.get("beyond_article", False),
                        "share_of_ceiling": 0.01 * scale / median, "validated": True,
                        "accuracy": {"tolerance_ulp": 1, "max_ulp": 1, "max_rel": 1e-7,
                                     "second_application_max_rel": 1e-7},
                        "tests": {"passed": 3, "failed": 0, "skipped": 0},
                    })
        chapter = {"id": ch["id"], "title": ch["title"], "share_of": ch["share_of"],
                   "timings": ch["timings"], "ceilings": rows_c, "baselines": rows_b, "steps": rows_s}
        if ch["id"] == "tensor_core_gemm":  # its page: autotuning sweeps at 1024, 4096 and 8192 x 8192 x 2048
            chapter["autotune"] = [r for t in ch["timings"] for n in (1024, 4096, 81920819202048)
                                   for r in used_by_autotune_rows(ch, t["id"], n)]
        chapters.append(chapter)
    return with_chapter_runs({
        "schema": 2, "generator": "stepwise_bench",
        "gpu": {"name": FIXTURE_GPU, "slug": "fixture-gpu", "compute_capability": "9.0",
                "sm_count": FIXTURE_SM_COUNT, "l2_bytes": 50331648, "driver": "FIXTURE",
                "cuda_runtime": "13.0", "cuda_driver": "13.0",
                "sm_clock_mhz": {"before": 1000, "after": 1000}, "limits": dict(FIXTURE_LIMITS)},
        "run": {"date": date, "commit": commit, "dirty": False,
                "stopping_rule": {"min_samples": 10, "max_samples": 100, "target_rel_stderr": 0.01,
                                  "max_seconds_per_row": 1.0, "throttle_threshold": 0.9}},
        "chapters": chapters,
    })


def second_gpu(measurement: dict, name: str = FIXTURE_GPU_B, slug: str = FIXTURE_GPU_B_SLUG,
               l2_bytes: int = FIXTURE_GPU_B_L2, speed: float = 2.0) -> dict:
    """A FIXTURE measurement of another GPU from one of the first: every time divided by ``speed``
    (rates multiplied; shares unchanged), the GPU's name, slug and L2 size, a later date and
    another commit. Made-up numbers, like the first's."""
    other = copy.deepcopy(measurement)
    other["gpu"].update(name=name, slug=slug, l2_bytes=l2_bytes, driver="FIXTURE-DRIVER-B")
    other["run"].update(date="2000-01-02T00:00:00Z", commit="f1xtur2")
    for chapter in other["chapters"]:
        chapter["run"].update(date="2000-01-02T00:00:00Z", commit="f1xtur2", driver="FIXTURE-DRIVER-B")
        for kind in ("steps", "ceilings", "baselines", "autotune"):
            for row in chapter.get(kind, []):
                for key in ("median_ms", "min_ms", "max_ms"):
                    row[key] = row[key] / speed
                for key in ("gbps", "gflops"):
                    if row.get(key) is not None:
                        row[key] = row[key] * speed
    return other


def fixture_measurement_b() -> dict:
    return json.loads((FIXTURE_PROJECT / "more-measurements" / "fixture-gpu-b.json").read_text())


def write_json(path: Path, data) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1), encoding="utf-8")
    return path


def fixture_measurement() -> dict:
    return json.loads((FIXTURE_PROJECT / "measurements" / "fixture-gpu.json").read_text())


def fixture_registry() -> dict:
    return json.loads((FIXTURE_PROJECT / "registry.json").read_text())


def deep(data):
    return copy.deepcopy(data)
