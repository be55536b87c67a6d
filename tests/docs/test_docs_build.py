"""conf/build_docs.py end to end: CLI errors, and strict builds of a FIXTURE project.

The integration tests build tests/docs/fixtures/project (copied to tmp_path) with the
real conf/conf.py, conf/Doxyfile and the stepwise_docs extension.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import synth

PY = sys.executable
HAVE_DOXYGEN = shutil.which("doxygen") is not None
needs_doxygen = pytest.mark.skipif(not HAVE_DOXYGEN, reason="doxygen is not installed")


def build_docs(*args: str, env: dict | None = None, cwd: Path | None = None):
    return subprocess.run([PY, str(synth.BUILD_DOCS), *args], capture_output=True, text=True,
                          env=env, cwd=cwd, timeout=300)


def project_args(project: Path, *extra: str) -> list[str]:
    return ["--root", str(project), "--build-dir", str(project / "build"),
            "--registry", str(project / "registry.json"),
            "--measurements", str(project / "measurements"), *extra]


def assert_one_line_error(proc, *needles: str):
    assert proc.returncode != 0, proc.stdout + proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, proc.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]
    assert "Traceback" not in proc.stderr
    assert "Site:" not in proc.stdout


# -- CLI errors: one line on stderr, non-zero --------------------------------------------

def test_missing_registry(project):
    os.remove(project / "registry.json")
    proc = build_docs(*project_args(project))
    assert_one_line_error(proc, "step registry", "registry.json", "does not exist")


def test_missing_measurement_file(project):
    args = project_args(project)
    args[args.index("--measurements") + 1] = str(project / "nope.json")
    proc = build_docs(*args)
    assert_one_line_error(proc, "nope.json", "does not exist")


def test_empty_measurement_directory(project):
    shutil.rmtree(project / "measurements")
    (project / "measurements").mkdir()
    proc = build_docs(*project_args(project))
    assert_one_line_error(proc, "no measurement files", "measurements", "make measure")


def test_corrupt_measurement_file(project):
    (project / "measurements" / "fixture-gpu.json").write_text("{ not json")
    proc = build_docs(*project_args(project))
    assert_one_line_error(proc, "fixture-gpu.json", "not valid JSON")


def test_schema_mismatch(project):
    data = synth.fixture_measurement()
    data["schema"] = 3
    synth.write_json(project / "measurements" / "fixture-gpu.json", data)
    proc = build_docs(*project_args(project))
    assert_one_line_error(proc, "fixture-gpu.json", "measurement.schema.json", "/schema")


def test_a_schema_1_file_is_refused_with_the_command_that_upgrades_it(project):
    data = synth.fixture_measurement()
    data["schema"] = 1
    synth.write_json(project / "measurements" / "fixture-gpu.json", data)
    proc = build_docs(*project_args(project))
    assert_one_line_error(proc, "fixture-gpu.json", "schema 1", "stepwise_bench --upgrade", "no number changes")


def test_a_chapter_without_its_run_is_a_schema_error(project):
    data = synth.fixture_measurement()
    del data["chapters"][0]["run"]
    synth.write_json(project / "measurements" / "fixture-gpu.json", data)
    proc = build_docs(*project_args(project))
    assert_one_line_error(proc, "fixture-gpu.json", "/chapters/0", "'run' is a required property")


def test_bad_option_is_one_line(project):
    proc = build_docs(*project_args(project, "--source", "cached"))
    assert_one_line_error(proc, "--source", "invalid choice")
    assert proc.returncode == 2


def test_missing_doxygen(project, tmp_path):
    # A PATH without doxygen (the Python we run is given by absolute path).
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    env = dict(os.environ, PATH=str(empty))
    proc = build_docs(*project_args(project), env=env)
    assert_one_line_error(proc, "doxygen not found")


def test_stale_snippet_fails_strict_before_building(project):
    snippet = project / "snippets" / "demo" / "02_vector.cuh"
    snippet.write_bytes(snippet.read_bytes().replace(b"float4 loads", b"float4 Loads", 1))
    proc = build_docs(*project_args(project, "--strict"))
    assert_one_line_error(proc, "stale measurement: demo/02_vector",
                          "snippets/demo/02_vector.cuh changed", "make measure")


def test_help():
    proc = build_docs("--help")
    assert proc.returncode == 0
    for option in ("--build-dir", "--registry", "--measurements", "--source", "--strict"):
        assert option in proc.stdout


# -- building the FIXTURE project --------------------------------------------------------

@needs_doxygen
def test_strict_build_passes_and_renders_everything(project):
    proc = build_docs(*project_args(project, "--strict"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    last = proc.stdout.strip().splitlines()[-1]
    assert last.startswith("Site: ")
    index = Path(last.removeprefix("Site: "))
    assert index.is_absolute() and index.is_file()
    assert index == project / "build" / "docs" / "html" / "index.html"
    html = index.read_text(encoding="utf-8")
    html_text = re.sub(r"<[^>]+>", "", html)

    # tables, with the CSS class the browser check looks for, and provenance under each
    assert html.count('class="stepwise-data stepwise-measurements') == 3  # 2 timings + :timing:
    assert html_text.count("Measured on FIXTURE GPU (not a measurement)") >= 8
    assert "recorded measurements, not re-measured in this build" in html_text
    # the plot: a PNG in _images, alt text, provenance in its caption
    images = list((index.parent / "_images").glob("stepwise-demo-*.png"))
    assert len(images) == 1 and images[0].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert re.search(r'<img alt="Bar chart, logarithmic time axis[^"]*"[^>]*class="stepwise-plot', html)
    # step sections: source, download, diff, Breathe's launcher docs, marks
    assert "snippets/demo/01_naive.cuh" in html_text
    downloads = sorted(p.name for p in (index.parent / "_downloads").rglob("*.cuh"))
    assert downloads == ["01_naive.cuh", "01_naive.cuh", "02_register_blocking.cuh", "02_vector.cuh",
                         "03_autotuned.cuh", "04_tf32.cuh"]  # the demo's steps and the gemm page's
    assert "What changed since 01_naive" in html_text
    assert "+++ snippets/demo/02_vector.cuh" in html_text
    assert 'id="_CPPv4N8stepwise4demo5naive6updateEPfi12cudaStream_t"' in html
    assert "Doubles n floats in place (fixture launcher)." in " ".join(html_text.split())
    assert "Beyond the article" in html_text and "Not the same operation" in html_text
    # the table links each step to its section
    assert 'href="#one-float-per-thread"' in html and 'id="one-float-per-thread"' in html
    # single numbers from the role, with the right arithmetic
    assert "The second step is 5.00\u00d7 faster" in " ".join(html_text.split())
    assert "7/7 passed" in html_text
    assert "stale" not in html_text.lower()


@needs_doxygen
def test_strict_build_fails_naming_step_and_file_after_one_byte(project):
    assert build_docs(*project_args(project, "--strict")).returncode == 0
    snippet = project / "snippets" / "demo" / "01_naive.cuh"
    data = bytearray(snippet.read_bytes())
    data[-2] = ord("x") if data[-2] != ord("x") else ord("y")  # one byte, in the final comment
    snippet.write_bytes(bytes(data))
    proc = build_docs(*project_args(project, "--strict"))
    assert proc.returncode != 0
    assert "stale measurement: demo/01_naive" in proc.stderr
    assert "snippets/demo/01_naive.cuh" in proc.stderr


@needs_doxygen
def test_extension_itself_fails_strict_on_stale(project):
    """The Sphinx extension stops a strict build on its own (without build_docs.py's pre-check)."""
    assert build_docs(*project_args(project)).returncode == 0  # doxygen XML for Breathe
    snippet = project / "snippets" / "demo" / "02_vector.cuh"
    snippet.write_bytes(snippet.read_bytes() + b"//\n")
    env = dict(os.environ,
               STEPWISE_REGISTRY=str(project / "registry.json"),
               STEPWISE_MEASUREMENTS=str(project / "measurements"),
               STEPWISE_STRICT="1", STEPWISE_REPO_ROOT=str(project),
               STEPWISE_DOXYGEN_XML=str(project / "build" / "doxygen" / "xml"))
    proc = subprocess.run([PY, "-m", "sphinx", "-E", "-W", "-q", "-b", "html",
                           "-c", str(synth.REPO / "conf"), str(project / "docs"),
                           str(project / "out")], capture_output=True, text=True, env=env,
                          timeout=300)
    assert proc.returncode != 0
    assert "stale measurement: demo/02_vector (snippets/demo/02_vector.cuh changed" in proc.stderr


@needs_doxygen
def test_non_strict_build_shows_stale_step(project):
    snippet = project / "snippets" / "demo" / "02_vector.cuh"
    snippet.write_bytes(snippet.read_bytes() + b"//\n")
    proc = build_docs(*project_args(project, "--source", "fresh"))
    assert proc.returncode == 0, proc.stderr
    assert "stale measurement: demo/02_vector" in proc.stderr  # a warning, not fatal
    html, text = synth.built_page(project, gap="")
    assert "stale: source changed since measured" in text  # in the table rows
    assert "Stale: source changed since measured" in text  # the step's admonition
    assert 'class="stepwise-stale' in html or "stepwise-stale" in html
    assert "measured in this build" in text and "not re-measured" not in text


def _merged(project: Path) -> None:
    """The FIXTURE file as `make measure CHAPTERS=demo` leaves it: demo from a later run, gemm kept from its own."""
    data = synth.set_chapter_run(synth.fixture_measurement(), "demo", commit="c0ffee1", dirty=False, seed=2,
                                 date="2000-02-03T04:05:06Z",
                                 command="stepwise_bench --out /root/out/rec/fixture-gpu.json --chapter demo "
                                         "--merge-from gpu-build/fixture-gpu.json")
    synth.write_json(project / "measurements" / "fixture-gpu.json", data)


@needs_doxygen
def test_a_merged_file_names_each_chapters_own_run_on_its_pages(project):
    _merged(project)
    proc = build_docs(*project_args(project, "--strict"))
    assert proc.returncode == 0, proc.stderr
    _html, index = synth.built_page(project)
    assert "2000-02-03 04:05 UTC, commit c0ffee1 \u2014 recorded" in index  # the demo chapter's own run
    # stepwise-run without a chapter
    assert "The 2 runs this GPU\u2019s chapters were measured in, and the stopping rule they share" in index
    # two columns, what the runs share once (the GPU, the stopping rule), then each run's own rows
    run = next(t for t in synth.html_tables(_html) if "stepwise-run" in t.classes)
    assert {len(row) for row in run.rows} == {2}
    assert [row[0] for row in run.rows].count("minimum samples") == 1
    headings = [row[0] for row in run.rows if row[0] == row[1]]  # a heading spans both columns
    assert headings == ["the same in every run", "Run of 2000-01-01 00:00 UTC", "Run of 2000-02-03 04:05 UTC"]
    # the command without the measuring machine's folders
    assert "stepwise_bench --out fixture-gpu.json --chapter demo --merge-from fixture-gpu.json" in index
    assert "/root/" not in _html and "gpu-build/" not in _html
    _html, gemm = synth.built_page(project, "gemm.html")
    assert "2000-01-01 00:00 UTC, commit f1xture (dirty) \u2014 recorded" in gemm
    assert "c0ffee1" not in gemm


def test_a_step_changed_after_a_merge_is_stale_in_its_own_chapter_only(project):
    _merged(project)
    snippet = next((project / "snippets" / "gemm").glob("*.cuh"))
    snippet.write_bytes(snippet.read_bytes() + b"//\n")
    proc = build_docs(*project_args(project, "--strict"))
    assert proc.returncode != 0
    stale = [line for line in proc.stderr.splitlines() if "stale measurement" in line]
    assert stale and all("gemm/" in line and "commit f1xture (dirty)" in line and "CHAPTERS=gemm" in line
                         for line in stale), proc.stderr
    assert "demo/" not in "".join(stale)


def _without_ncu_table(text: str) -> str:
    """The page without its ``stepwise-ncu`` directive (its numbers' role stays)."""
    start = text.index("```{stepwise-ncu}")
    end = text.index("```", text.index("\n", start)) + 3
    return text[:start] + text[end:]


@needs_doxygen
@pytest.mark.parametrize("edit, needles", [
    pytest.param(lambda t: t + "\n```{stepwise-table} transpose\n```\n", ["unknown chapter 'transpose'"],
                 id="unknown_chapter"),
    pytest.param(lambda t: t[:t.index("## Four floats per thread")], ["demo/02_vector", "stepwise-step"],
                 id="registry_step_without_section"),
    pytest.param(_without_ncu_table, ["no `stepwise-ncu demo FILE` directive before it"],
                 id="ncu_number_without_a_table"),
])
def test_page_problems_fail_strict(project, edit, needles):
    page = project / "docs" / "index.md"
    page.write_text(edit(page.read_text()))
    proc = build_docs(*project_args(project, "--strict"))
    assert proc.returncode != 0
    for needle in needles:
        assert needle in proc.stderr


@needs_doxygen
def test_doxygen_warning_fails_the_build(project):
    snippet = project / "snippets" / "demo" / "01_naive.cuh"
    snippet.write_text(snippet.read_text().replace("/// @param n number of elements",
                                                   "/// @param count number of elements"))
    proc = build_docs(*project_args(project))
    assert proc.returncode != 0
    assert proc.stderr.strip().splitlines()[-1].startswith("build_docs.py: error: doxygen failed")


# -- several sizes, a library baseline, Nsight Compute counts, chapters without a page ------

def _two_size_project(project: Path) -> tuple[int, int]:
    """Rewrite the FIXTURE project: the demo steps at two sizes, a CUB-named baseline."""
    small, large = 1048576, 4194304
    reg = synth.fixture_registry()
    chapter = reg["chapters"][0]
    chapter["baselines"] = [{"id": "cub_fixture_sum", "title": "FIXTURE baseline: a library call"}]
    for step in chapter["steps"]:
        step["sizes"] = [{"n": small, "problem": "2^20 float (fixture)"},
                         {"n": large, "problem": "2^22 float (fixture)"}]
    synth.write_json(project / "registry.json", reg)
    synth.write_json(project / "measurements" / "fixture-gpu.json",
                     synth.measurement_for(reg, project))
    return small, large


@needs_doxygen
def test_two_sizes_each_table_and_plot_with_the_baseline(project):
    small, large = _two_size_project(project)
    page = project / "docs" / "index.md"
    page.write_text(page.read_text() + f"""
## Sizes

```{{stepwise-table}} demo
:n: {large}
:timing: batch
```

The second step at the large size: {{stepwise-number}}`demo/02_vector/vs_baseline#{large}` as
fast as the library, {{stepwise-number}}`demo/02_vector/time_vs_baseline@single_cold#{large}` its
time cold.
""")
    proc = build_docs(*project_args(project, "--strict"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    html, text = synth.built_page(project)
    # stepwise-table without :n: shows both sizes (x 2 timings), with :timing: twice more, and
    # the :n: one: 2 x 2 + 2 x 1 + 1
    assert html.count('class="stepwise-data stepwise-measurements') == 7
    assert text.count("(2^22 float (fixture))") >= 4 and "(2^20 float (fixture))" in text
    assert "vs CUB" in text and "1\u00d7 (itself)" in text
    assert "dotted line: cub_fixture_sum (library baseline)" in text
    # one plot per size, each with the baseline's line in its data
    images = sorted((project / "build" / "docs" / "html" / "_images").glob("stepwise-demo-*.png"))
    assert {p.name.split("-")[2] for p in images} == {str(small), str(large)}
    alts = re.findall(r'<img alt="(Bar chart[^"]*)"', html)
    assert len(alts) == 2 and all(a.count("baseline cub_fixture_sum") == 2 for a in alts)
    # synth's FIXTURE medians: steps 0.1/(i+1) x scale ms, the baseline 0.01 x scale ms
    assert "0.200\u00d7 as fast as the library" in text
    assert "5.00\u00d7 its time cold" in text


@needs_doxygen
def test_the_step_summary_shows_every_size_and_the_baseline(project):
    small, large = _two_size_project(project)
    proc = build_docs(*project_args(project, "--strict"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    html = (project / "build" / "docs" / "html" / "index.html").read_text(encoding="utf-8")
    summaries = re.findall(r'stepwise-step-table.*?</table>', html, re.S)
    assert len(summaries) == 2
    for table in summaries:
        cells = synth.html_text(table)
        assert "vs CUB" in cells
        assert "batch, 2^20 float (fixture)" in cells and "single_cold, 2^22 float (fixture)" in cells


@needs_doxygen
def test_registry_chapter_without_a_page_fails_strict(project):
    reg = synth.fixture_registry()
    extra = json.loads(json.dumps(reg["chapters"][0]))
    extra["id"], extra["title"] = "orphan", "FIXTURE chapter nobody wrote"
    reg["chapters"].append(extra)
    synth.write_json(project / "registry.json", reg)
    synth.write_json(project / "measurements" / "fixture-gpu.json",
                     synth.measurement_for(reg, project))
    proc = build_docs(*project_args(project, "--strict"))
    assert proc.returncode != 0
    assert "chapter 'orphan'" in proc.stderr
    assert "01_naive, 02_vector" in proc.stderr and "stepwise-step" in proc.stderr
    # without --strict it is a warning, and the site is built
    proc = build_docs(*project_args(project))
    assert proc.returncode == 0, proc.stderr
    assert "chapter 'orphan'" in proc.stderr


@needs_doxygen
def test_ncu_table_and_numbers(project):
    proc = build_docs(*project_args(project, "--strict"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    html, text = synth.built_page(project)
    assert html.count('class="stepwise-data stepwise-ncu') == 1
    assert "Nsight Compute counts per step (sums over all launches of one call)" in text
    # FIXTURE counts: naive has two launches, (32 x 100000 + 16 x 1000) / 101000 / 32 active
    assert "The first step\u2019s FIXTURE counts: 99.5 % warp execution efficiency over 2 launches" in text
    assert "100 % in its first" in text
    assert "8,224" in text and "12.28" in text
    # the file's name starts with the fixture run's GPU slug and chapter: the run is claimed
    assert ("Nsight Compute counts, FIXTURE GPU (not a measurement), recorded with the "
            "measurements (commit f1xture (dirty)) by make profile; file fixture-gpu-demo-ncu.csv.") in text
    # each step of the table links to its section
    assert re.search(r'stepwise-ncu.*?href="#one-float-per-thread"', html, re.S)


@needs_doxygen
def test_ncu_counts_of_another_run_are_not_claimed(project):
    logs = project / "measurements" / "logs"
    (logs / "fixture-gpu-demo-ncu.csv").rename(logs / "elsewhere-demo-ncu.csv")
    page = project / "docs" / "index.md"
    page.write_text(page.read_text().replace("fixture-gpu-demo-ncu.csv", "elsewhere-demo-ncu.csv"))
    proc = build_docs(*project_args(project, "--strict"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    _html, text = synth.built_page(project)
    assert "Nsight Compute counts from elsewhere-demo-ncu.csv" in text
    assert "were not taken in the run whose measurements this page shows" in text
    assert "same session" not in text


@needs_doxygen
@pytest.mark.parametrize("edit, needle", [
    (lambda t: t.replace("void naive::", "void mystery::"), "not one of chapter 'demo'"),
    (lambda t: "\n".join(l for l in t.splitlines() if "dram__bytes" not in l) + "\n",
     "has no dram__bytes_read.sum"),
    (None, "does not exist"),
])
def test_ncu_problems_fail_strict(project, edit, needle):
    csv_file = project / "measurements" / "logs" / "fixture-gpu-demo-ncu.csv"
    if edit is None:
        csv_file.unlink()
    else:
        csv_file.write_text(edit(csv_file.read_text()))
    proc = build_docs(*project_args(project, "--strict"))
    assert proc.returncode != 0
    assert needle in proc.stderr and "fixture-gpu-demo-ncu.csv" in proc.stderr


@needs_doxygen
def test_ncu_options(project):
    page = project / "docs" / "index.md"
    page.write_text(page.read_text() + """
```{stepwise-ncu} demo ../measurements/logs/fixture-gpu-demo-ncu.csv
:launches: first
:steps: 02_vector
:columns: ld_requests warp_efficiency
:caption: FIXTURE subset
```
""")
    proc = build_docs(*project_args(project, "--strict"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    html = (project / "build" / "docs" / "html" / "index.html").read_text(encoding="utf-8")
    table = html[html.index("FIXTURE subset"):]
    table = table[:table.index("</table>")]
    cells = synth.html_text(table)
    assert "02_vector" in cells and "01_naive" not in cells
    assert "global load requests" in cells and "warp execution efficiency" in cells
    assert "DRAM read" not in cells and "2,048" in cells
    page.write_text(page.read_text().replace(":columns: ld_requests warp_efficiency",
                                             ":columns: ld_requests colour"))
    proc = build_docs(*project_args(project, "--strict"))
    assert proc.returncode != 0 and "unknown column 'colour'" in proc.stderr


# -- registers, memory and occupancy of every kernel --------------------------------------

@needs_doxygen
def test_resources_table_and_step_sections_show_every_kernel(project):
    proc = build_docs(*project_args(project, "--strict"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    html, text = synth.built_page(project, gap="")
    # the chapter's table (one row per kernel) and one table in each of the two step sections
    assert html.count('class="stepwise-data stepwise-resources') == 3
    assert "Registers, memory and theoretical occupancy of every kernel (FIXTURE nvcc, sm_90)" in text
    assert "registers / thread" in text and "theoretical occupancy" in text and "limited by" in text
    assert "100 % warps" in text  # occupancy and its limiter, from the FIXTURE counts
    assert "32 B" in text  # 02_vector's FIXTURE stack frame
    assert "Compiled by FIXTURE nvcc, sm_90" in text
    assert "in the measured binary" not in text  # the FIXTURE run reported the same counts


@needs_doxygen
def test_a_measured_binary_with_other_counts_is_shown(project):
    path = project / "measurements" / "fixture-gpu.json"
    data = json.loads(path.read_text())
    for row in data["chapters"][0]["steps"]:
        if row["id"] == "01_naive":
            row["resources"][0]["registers"] = 12
    path.write_text(json.dumps(data))
    proc = build_docs(*project_args(project, "--strict"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    html, text = synth.built_page(project, gap="")
    assert "registers: 12 in the measured binary on FIXTURE GPU (not a measurement)" in text


def test_a_kernel_without_compiled_counts_fails_strict(project):
    path = project / "registry.json"
    registry = json.loads(path.read_text())
    del registry["chapters"][0]["steps"][1]["kernels"][0]["compiled"]
    path.write_text(json.dumps(registry))
    proc = build_docs(*project_args(project, "--strict"))
    assert_one_line_error(proc, "no compiled resources: demo/02_vector", "scale_kernel", "build with make")


def test_a_registry_without_kernels_is_rejected(project):
    path = project / "registry.json"
    registry = json.loads(path.read_text())
    del registry["chapters"][0]["steps"][0]["kernels"]
    path.write_text(json.dumps(registry))
    proc = build_docs(*project_args(project, "--strict"))
    assert_one_line_error(proc, "is not a step registry", "kernels")


# -- the SGEMM chapter's directives (the FIXTURE gemm chapter, docs/gemm.md) ------------------

@needs_doxygen
def test_gemm_page_shows_bounds_sweep_roofline_and_autotuning(project):
    proc = build_docs(*project_args(project, "--strict"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    html, text = synth.built_page(project, "gemm.html")
    images = project / "build" / "docs" / "html" / "_images"
    # the bounds: this (FIXTURE) GPU's numbers, the fp32 factor, one row per tiled step
    # FLOP rates from 1,000 GFLOP/s read in TFLOP/s
    assert "12.8 \u00d7 10\u00b9\u00b2 FMAs per second, 25.6 TFLOP/s. That rate is computed, not measured" in text
    assert "measured 2,000 GB/s at n = 1000" in text and "bm = bn \u2265" in text and "= 51.2 on this GPU" in text
    assert "for fp32 the factor is 1" in text
    bounds = html[html.index('stepwise-data stepwise-bounds'):]
    bounds = synth.html_text(bounds[:bounds.index("</table>")])
    assert "3,200 GB/s \u2717" in bounds and "800 GB/s \u2713" in bounds  # naive violates, 128 x 128 holds
    assert "256 B/clock \u2717" in bounds and "128 B/clock \u2713" in bounds and "24.0 B/clock \u2713" in bounds
    assert "48.0 KiB \u2713" in bounds and "80 \u2713" in bounds and "20,480 \u2713" in bounds
    assert "32 \u00d7 32 " in bounds and "128 \u00d7 128 \u00d7 16" in bounds
    assert "FMA rate \u00d7 4 B \u00d7 (1/32 + 1/32) = 3,200 GB/s &gt; 2,000 GB/s: violated" in html
    # the sweep: an image and a table with an empty cell where a step was not measured
    assert len(list(images.glob("stepwise-sweep-gemm-*.png"))) == 1
    assert re.search(r'<img alt="Line chart, logarithmic axes: TFLOP/s against n', html)
    assert "TFLOP/s by size (single_cold)" in text and "n 01 02 03 04 cublas_sgemm cublas_sgemm_tf32" in text
    assert "1000 0.376 17.9 47.0" in text
    # the roofline: image, table, roofs labelled measured and computed, the TF32 step apart
    assert len(list(images.glob("stepwise-roofline-gemm-*.png"))) == 1
    assert "computed FMA peak 25.6 TFLOP/s" in html
    assert "01_naive 1.33 0.356 2.65 13.4 % memory" in text
    assert "03_autotuned 64.0 16.0 17.8 90.0 % compute" in text
    assert "04_tf32 64.0 35.6 \u2014 \u2014 \u2260 op" in text
    assert "recorded with the measurements" in text  # the CSV is the fixture run's GPU's
    # the autotuning table: fastest first, the chosen row linked to its step, vs the first baseline
    assert "Autotuning sweep on FIXTURE GPU (not a measurement), n = 512 (single_cold), fastest first" in text
    assert re.search(r"bm128_bn128_bk16_wm64_wn32_tm8_tn8_s3_mb2 chosen: step 03_autotuned 128 \u00d7 128 "
                     r"\u00d7 16 64 \u00d7 32 8 \u00d7 8 256 3 2 16\.0 16\.8 \u00b5s 0\.947\u00d7 128 25\.0 %", text)
    assert text.index("_s3_mb2 chosen") < text.index("_s4_mb2") < text.index("bk32_wm64")
    assert re.search(r'stepwise-autotune-table.*?href="#autotuned"', html, re.S)
    # numbers from the role, the accuracy table's tolerance and the table's marks
    assert "ran at 16.0 TFLOP/s ( 16.0 TFLOP/s ), the library at 16.9 TFLOP/s : 0.947\u00d7" in text
    assert "90.0 % of the FMA ceiling; the TF32 library 2.63\u00d7 the fp32 one" in text
    assert "tolerance (relative)" in text and "rel 1.00e-3 \u2260 op" in text


def _roofline_steps(project: Path, steps: str) -> None:
    page = project / "docs" / "gemm.md"
    page.write_text(page.read_text().replace("fixture-gpu-gemm-ncu.csv\n:n: 512\n",
                                             f"fixture-gpu-gemm-ncu.csv\n:n: 512\n:steps: {steps}\n"))


@needs_doxygen
def test_gemm_roofline_shows_only_the_steps_asked_for(project):
    _roofline_steps(project, "01_naive 03_autotuned")
    proc = build_docs(*project_args(project, "--strict"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    _html, text = synth.built_page(project, "gemm.html")
    assert "01_naive 1.33 0.356 2.65 13.4 % memory" in text
    assert "03_autotuned 64.0 16.0 17.8 90.0 % compute" in text
    assert "04_tf32 64.0" not in text


def _edit_fixture_measurement(project: Path, edit) -> None:
    path = project / "measurements" / "fixture-gpu.json"
    data = json.loads(path.read_text())
    edit(data, next(c for c in data["chapters"] if c["id"] == "gemm"))
    path.write_text(json.dumps(data))


def _without_write_metric(project: Path) -> None:
    csv_file = project / "measurements" / "logs" / "fixture-gpu-gemm-ncu.csv"
    csv_file.write_text("".join(line for line in csv_file.read_text().splitlines(keepends=True)
                                if "dram__bytes_write" not in line))


def _csv_of_another_gpu(project: Path) -> None:
    logs = project / "measurements" / "logs"
    (logs / "fixture-gpu-gemm-ncu.csv").rename(logs / "other-gpu-gemm-ncu.csv")
    page = project / "docs" / "gemm.md"
    page.write_text(page.read_text().replace("fixture-gpu-gemm-ncu.csv", "other-gpu-gemm-ncu.csv"))


@needs_doxygen
@pytest.mark.parametrize("edit, needles", [
    (lambda p: _edit_fixture_measurement(p, lambda d, g: d["gpu"].pop("limits")),
     ["stepwise-tile-bounds", "has no gpu.limits"]),
    (lambda p: _edit_fixture_measurement(p, lambda d, g: g["autotune"][1].update(chosen=True)),
     ["stepwise-autotune", "2 autotuning rows at n=512 are chosen"]),
    (lambda p: _edit_fixture_measurement(p, lambda d, g: g["autotune"][0].update(validated=False)),
     ["stepwise-autotune", "was not validated"]),
    (lambda p: _edit_fixture_measurement(p, lambda d, g: g.pop("autotune")),
     ["stepwise-autotune", "has no autotuning rows"]),
    (lambda p: _edit_fixture_measurement(
        p, lambda d, g: [r.update(gflops=None) for r in g["ceilings"] if r["id"] == "fma_peak"]),
     ["stepwise-roofline", "gemm/fma_peak n=512 timing=single_cold has no gflops"]),
    (_without_write_metric, ["stepwise-roofline", "has no dram__bytes_write.sum", "re-run make profile"]),
    (_csv_of_another_gpu, ["stepwise-roofline", "other-gpu-gemm-ncu.csv is not from the measurement file",
                           "fixture-gpu-gemm-"]),
    (lambda p: _roofline_steps(p, "01_naive 99_nothing"), ["stepwise-roofline", "99_nothing"]),
])
def test_gemm_directive_problems_fail_strict(project, edit, needles):
    edit(project)
    proc = build_docs(*project_args(project, "--strict"))
    assert proc.returncode != 0
    for needle in needles:
        assert needle in proc.stderr, proc.stderr


@needs_doxygen
def test_gemm_directive_options(project):
    page = project / "docs" / "gemm.md"
    page.write_text(page.read_text() + """
## Options

```{stepwise-tile-bounds} gemm
:n: 512
:steps: 03_autotuned
```

```{stepwise-sweep} gemm
:steps: 01_naive 03_autotuned
:baselines: cublas_sgemm
```
""")
    proc = build_docs(*project_args(project, "--strict"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    html, text = synth.built_page(project, "gemm.html")
    assert "The SC\u201910 bounds for FIXTURE GPU (not a measurement), n = 512" in text
    assert "n 01 03 cublas_sgemm 128" in text
    assert len(list((project / "build" / "docs" / "html" / "_images").glob("stepwise-sweep-gemm-*.png"))) == 2
    page.write_text(page.read_text().replace(":baselines: cublas_sgemm", ":baselines: mkl_sgemm"))
    proc = build_docs(*project_args(project, "--strict"))
    assert proc.returncode != 0 and "stepwise-sweep: chapter 'gemm' has no baseline 'mkl_sgemm'" in proc.stderr


# -- the list of pages: the site's contents from the step registry ------------------------------------------------

def _paged_project(project: Path, demo_summary: str | None = "the `demo` sums, made up") -> None:
    """The FIXTURE project with the demo chapter on its own page (docs/demo.md, front matter ``summary``), the gemm
    chapter's page without ``orphan`` and with a summary, and a front page that lists them by stepwise-chapter-list."""
    docs = project / "docs"
    front = f'---\nsummary: "{demo_summary}"\n---\n\n' if demo_summary is not None else ""
    (docs / "demo.md").write_text(front + (docs / "index.md").read_text())
    gemm = docs / "gemm.md"
    gemm.write_text(gemm.read_text().replace("orphan: true", 'summary: "the FIXTURE products"'))
    (docs / "notes.md").write_text('---\nsummary: "how the FIXTURE is measured"\n---\n\n# Notes\n\nFIXTURE notes.\n')
    (docs / "index.md").write_text("# FIXTURE front page\n\n## The pages\n\n```{stepwise-chapter-list}\nnotes\n```\n")


@needs_doxygen
def test_chapter_list_names_the_registrys_chapters_in_order(project):
    """The pages in the directive's body first, then every registry chapter in its order, each linked with its
    title and its front matter's summary (backquotes as code); the sidebar's contents are the same pages."""
    _paged_project(project)
    proc = build_docs(*project_args(project, "--strict"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    html, _text = synth.built_page(project)
    listed = html[html.index('<ul class="stepwise-chapter-list'):]
    listed = listed[:listed.index("</ul>")]
    assert re.findall(r'href="([^"]+)\.html"', listed) == ["notes", "demo", "gemm"]
    text = synth.html_text(listed, "")
    assert "Notes: how the FIXTURE is measured" in text, text
    assert "FIXTURE gemm chapter for tests/docs: the FIXTURE products" in text, text
    assert "<code" in listed and "demo</span></code> sums" in listed.replace('<span class="pre">', ""), listed
    sidebar = html[html.index('class="sidebar-tree"'):]
    assert re.findall(r'toctree-l1[^>]*><a class="reference internal" href="([^"]+)\.html"', sidebar) == [
        "notes", "demo", "gemm"]
    demo, _ = synth.built_page(project, "demo.html")
    assert "summary" not in synth.html_text(demo[demo.index("<article"):demo.index("</article>")])


@needs_doxygen
@pytest.mark.parametrize("edit, needle", [
    pytest.param(lambda p: _paged_project(p, demo_summary=None), "docs/demo.md has no 'summary'", id="no_summary"),
    pytest.param(lambda p: (_paged_project(p), (p / "docs" / "gemm.md").rename(p / "docs" / "other.md")),
                 "no page docs/gemm.md", id="chapter_without_page"),
])
def test_chapter_list_problems_fail_strict(project, edit, needle):
    edit(project)
    proc = build_docs(*project_args(project, "--strict"))
    assert proc.returncode != 0
    assert needle in proc.stderr, proc.stderr
