"""Several GPUs, size sweeps and the front page's results table (FIXTURE data only).

The fixture project has two FIXTURE GPUs: measurements/fixture-gpu.json ("FIXTURE GPU (not a
measurement)", L2 48 MiB) and more-measurements/fixture-gpu-b.json ("FIXTURE GPU B", every time
halved, L2 32 MiB), both made by fixtures/make_fixtures.py. The tests that show two GPUs copy the
second one beside the first. The demo chapter has a ``sweep`` (01_naive and the empty launch also at
2^18 and 2^24, footprint 4 B x n) and a ``headline``; the gemm chapter a headline and no sweep.

FIXTURE numbers used below (batch timing, n = 2^20): 01_naive 100 us, 02_vector 20 us (share 50 %),
lib_scale 12.5 us; the gemm chapter at 512: 03_autotuned at 0.9 of the FMA ceiling, cublas_sgemm at
0.95 and cublas_sgemm_tf32 at 2.5.
"""
from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import synth
from stepwise_docs import fmt, plot, sweep
from stepwise_docs.data import DataError, Dataset, load_datasets

N = 1048576
SMALL, LARGE = 262144, 16777216
A, B = "fixture-gpu", synth.FIXTURE_GPU_B_SLUG
HAVE_DOXYGEN = shutil.which("doxygen") is not None
needs_doxygen = pytest.mark.skipif(not HAVE_DOXYGEN, reason="doxygen is not installed")


def with_b(project: Path) -> Path:
    """The second FIXTURE GPU's file beside the first."""
    return Path(shutil.copy(project / "more-measurements" / "fixture-gpu-b.json", project / "measurements"))


def load(project: Path, measurements: Path | None = None, **kwargs):
    return load_datasets(project / "registry.json", measurements or project / "measurements", project,
                         **kwargs)


def edit(path: Path, change) -> None:
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))


def demo_of(data: dict) -> dict:
    return next(c for c in data["chapters"] if c["id"] == "demo")


# -- the fixture files ------------------------------------------------------------------------

def test_second_fixture_file_is_current_and_labelled():
    """If this fails, run: .venv/bin/python tests/docs/fixtures/make_fixtures.py"""
    data = synth.fixture_measurement_b()
    assert data["gpu"]["name"] == synth.FIXTURE_GPU_B and data["gpu"]["slug"] == B
    assert "FIXTURE" in data["run"]["command"]
    ds = Dataset(synth.fixture_registry(), data, synth.FIXTURE_PROJECT)
    assert ds.problems() == []


# -- one dataset per GPU ------------------------------------------------------------------------

def test_recorded_directory_gives_one_dataset_per_gpu(project):
    with_b(project)
    datasets = load(project)
    assert [d.slug for d in datasets] == [A, B]  # no H200 here: the first by slug is the reference
    assert datasets.reference.slug == A and all(d.source == "recorded" for d in datasets)
    assert datasets.problems() == []
    assert [p.name for p in datasets.paths()] == ["fixture-gpu.json", "fixture-gpu-b.json"]


def test_reference_gpu_is_the_configured_one_then_the_others_by_slug(project):
    with_b(project)
    assert [d.slug for d in load(project, reference_gpu=B)] == [B, A]
    assert [d.slug for d in load(project, reference_gpu="nvidia-h200")] == [A, B]  # absent: by slug
    one = load(project, project / "measurements" / "fixture-gpu-b.json")
    assert [d.slug for d in one] == [B]


def test_fresh_comes_first_and_replaces_the_recorded_file_of_its_gpu(project, tmp_path):
    with_b(project)
    edit(project / "measurements" / "fixture-gpu-b.json", lambda d: d["run"].update(commit="rec0rded"))
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    shutil.copy(project / "more-measurements" / "fixture-gpu-b.json", fresh)
    datasets = load(project, fresh, source="fresh", recorded=project / "measurements", reference_gpu=A)
    assert [(d.slug, d.source) for d in datasets] == [(B, "fresh"), (A, "recorded")]
    assert datasets.reference.run["commit"] == "f1xtur2"  # the fresh file, not the recorded one of B
    assert datasets.paths()[0].parent == fresh
    # without --recorded: the fresh file alone; an empty recorded folder adds nothing
    assert [d.slug for d in load(project, fresh, source="fresh")] == [B]
    empty = tmp_path / "empty"
    empty.mkdir()
    assert [d.slug for d in load(project, fresh, source="fresh", recorded=empty)] == [B]
    # make docs without a GPU passes the recorded folder as both: each file once
    both = load(project, recorded=project / "measurements")
    assert [(d.slug, d.source) for d in both] == [(A, "recorded"), (B, "recorded")]


def test_two_files_of_one_gpu_are_an_error_naming_both(project):
    shutil.copy(project / "measurements" / "fixture-gpu.json", project / "measurements" / "zz-copy.json")
    with pytest.raises(DataError) as exc:
        load(project)
    synth.assert_one_line_message(exc, "fixture-gpu.json", "zz-copy.json", "'fixture-gpu'")


def test_each_gpus_problems_name_its_file(project):
    path = with_b(project)

    def stale_and_missing(data):
        demo = demo_of(data)
        for row in demo["steps"]:
            if row["id"] == "02_vector":
                row["source_sha256"] = "0" * 64
        demo["steps"] = [r for r in demo["steps"] if not (r["id"] == "01_naive" and r["n"] == LARGE
                                                          and r["timing"] == "batch")]
    edit(path, stale_and_missing)
    # B as the reference GPU: its missing and its stale rows are problems
    problems = load(project, reference_gpu=B).problems()
    assert [(p.kind, p.step) for p in problems] == [("missing", "01_naive"), ("stale", "02_vector")]
    assert all("fixture-gpu-b.json" in str(p) for p in problems)
    assert f"n={LARGE} timing=batch" in str(problems[0]) and "FIXTURE GPU B" in str(problems[1])
    # B as a second GPU: its missing rows only (its stale ones are shown as of their commit)
    assert [(p.kind, p.step, "fixture-gpu-b.json" in str(p)) for p in load(project).problems()] == [
        ("missing", "01_naive", True)]


def test_a_problem_of_the_sources_is_listed_once_for_all_gpus(project):
    with_b(project)
    snippet = project / "snippets" / "demo" / "02_vector.cuh"
    snippet.write_bytes(snippet.read_bytes() + b" ")
    kinds = [(p.kind, "fixture-gpu-b.json" in str(p)) for p in load(project).problems()]
    assert kinds == [("stale", False), ("registry_stale", False)]  # B, a second GPU, shows its rows as of
    kinds = [(p.kind, "fixture-gpu-b.json" in str(p)) for p in load(project, reference_gpu=B).problems()]
    assert kinds == [("stale", True), ("registry_stale", False)]  # and with B the reference GPU, A does


# -- sizes and the sweep ------------------------------------------------------------------------

def test_main_sizes_and_sweep_sizes(project):
    chapter = load(project).reference.chapter("demo")
    assert chapter.sizes() == [(N, "1024 x 1024 float (fixture)")]  # tables, plots, roles
    assert chapter.sweep_sizes() == [SMALL, LARGE]
    assert [n for n, _p in chapter.all_sizes()] == [N, SMALL, LARGE]
    assert chapter.problem(LARGE) == "4096 x 4096 float (fixture)"
    assert chapter.expected_sizes("01_naive") == [N, SMALL, LARGE]
    assert chapter.expected_sizes("02_vector") == [N]
    assert chapter.expected_sizes("empty_launch") == [N, SMALL, LARGE]
    assert chapter.expected_sizes("inplace_read_write") == [N]
    gemm = load(project).reference.chapter("gemm")  # no sweep: every size is a main size
    assert gemm.sizes() == gemm.all_sizes() and gemm.sweep_sizes() == []


@pytest.mark.parametrize("row_id, kind", [("01_naive", "step"), ("empty_launch", "ceiling")])
def test_missing_sweep_rows_are_problems(project, row_id, kind):
    edit(project / "measurements" / "fixture-gpu.json", lambda d: demo_of(d).update(
        steps=[r for r in demo_of(d)["steps"] if not (r["id"] == row_id and r["n"] == SMALL)],
        ceilings=[r for r in demo_of(d)["ceilings"] if not (r["id"] == row_id and r["n"] == SMALL)]))
    problems = load(project).problems()
    assert [(p.kind, p.step) for p in problems] == [("missing", row_id)]
    assert f"n={SMALL} timing=batch, n={SMALL} timing=single_cold" in str(problems[0])
    assert (kind == "ceiling") == ("(ceiling)" in str(problems[0]))


def test_a_sweep_row_is_expected_at_the_sweep_sizes_without_listing_them(project):
    """A reference of sweep.rows whose registry entry lists no sizes (or only the main ones)
    is still expected at the sweep's sizes."""
    registry = synth.fixture_registry()
    demo = registry["chapters"][0]
    demo["sweep"]["rows"].append("lib_scale")
    del demo["baselines"][0]["sizes"]
    synth.write_json(project / "registry.json", registry)
    chapter = load(project).reference.chapter("demo")
    assert chapter.expected_sizes("lib_scale") == [N, SMALL, LARGE]
    assert [(p.step, p.kind) for p in load(project).problems()] == [("lib_scale", "missing")]


def test_registry_headline_and_sweep_must_name_what_exists(project):
    for change, needle in [
        (lambda c: c["sweep"]["rows"].append("nope"), "sweep.rows names 'nope'"),
        (lambda c: c["headline"].update(final="09_x"), "headline.final '09_x' is not one of its steps"),
        (lambda c: c["headline"].update(timing="warm"), "headline.timing 'warm'"),
        (lambda c: c["headline"].update(n=7), "headline.first '01_naive' is not measured at headline.n = 7"),
        (lambda c: c["headline"].update(baseline="nope"), "headline.baseline 'nope' is not one of its baselines"),
        (lambda c: c["baselines"][0].update(sizes=[c["headline"]["n"] + 1]),
         "headline.baseline 'lib_scale' is not measured at headline.n"),
    ]:
        registry = synth.fixture_registry()
        registry["chapters"][0]["headline"]["baseline"] = "lib_scale"  # named, and measured at headline.n
        change(registry["chapters"][0])
        synth.write_json(project / "registry.json", registry)
        with pytest.raises(DataError, match=re.escape(needle)):
            load(project)


def test_sweep_data_per_gpu_with_the_l2_line(project):
    with_b(project)
    first, second = load(project)
    data = sweep.sweep(first.chapter("demo"), "batch")
    assert data["sizes"] == [SMALL, N, LARGE] and data["unit"] == "GB/s"
    assert [(s["id"], s["kind"]) for s in data["series"]] == [("01_naive", "step"), ("empty_launch", "ceiling")]
    naive, launch = data["series"]
    assert naive["times"] == [0.025, 0.1, 1.6] and launch["values"] == [None, None, None]
    assert data["l2_bytes"] == 50331648 and data["l2_n"] == pytest.approx(50331648 / 4)
    assert data["gpu"] == synth.FIXTURE_GPU
    other = sweep.sweep(second.chapter("demo"), "batch")
    assert other["l2_n"] == pytest.approx(33554432 / 4) and other["series"][0]["times"][1] == 0.05
    assert "fills the L2 cache (32.0 MiB) at n = 8.389e+06" in plot.sweep_alt_text(other)


def test_the_l2_line_follows_the_footprint_and_stays_in_range(project):
    registry = synth.fixture_registry()
    registry["chapters"][0]["sweep"]["footprint"] = {"bytes_per_n": 12, "power": 2}
    synth.write_json(project / "registry.json", registry)
    chapter = load(project).reference.chapter("demo")
    assert chapter.l2_size(50331648) == pytest.approx((50331648 / 12) ** 0.5)
    assert chapter.footprint_bytes(2048) == 12 * 2048 ** 2
    data = sweep.sweep(chapter, "batch")  # the L2 size, 2048 here, is below every size drawn
    assert data["l2_n"] is None and data["l2_n_any"] == pytest.approx(2048)
    gemm = sweep.sweep(load(project).reference.chapter("gemm"), "single_cold")
    assert gemm["l2_n"] is None and gemm["l2_n_any"] is None  # no footprint


def test_sweep_rows_options(project):
    chapter = load(project).reference.chapter("demo")
    assert sweep.select_rows(chapter) == ["01_naive", "empty_launch"]
    assert sweep.select_rows(chapter, steps=["02_vector"]) == ["02_vector", "empty_launch"]
    assert sweep.select_rows(chapter, baselines=["lib_scale"]) == ["01_naive", "lib_scale", "empty_launch"]
    assert sweep.select_rows(chapter, rows=["lib_scale", "02_vector"]) == ["lib_scale", "02_vector"]
    with pytest.raises(DataError, match="no step, ceiling or baseline 'nope'"):
        sweep.select_rows(chapter, rows=["nope"])
    gemm = load(project).reference.chapter("gemm")  # without sweep.rows: every step and baseline
    assert sweep.select_rows(gemm) == ["01_naive", "02_register_blocking", "03_autotuned", "04_tf32",
                                       "cublas_sgemm", "cublas_sgemm_tf32"]


def test_sweep_plot_has_two_panels_and_a_content_hashed_name(project, tmp_path):
    chapter = load(project).reference.chapter("demo")
    data = sweep.sweep(chapter, "batch")
    path = plot.render_sweep(data, tmp_path)
    assert path.name.startswith("stepwise-sweep-demo-") and path.read_bytes()[:4] == b"\x89PNG"
    assert plot.render_sweep(data, tmp_path) == path
    assert plot.render_sweep(sweep.sweep(chapter, "single_cold"), tmp_path) != path


# -- the front page's numbers ---------------------------------------------------------------------

def test_headline_values(project):
    with_b(project)
    first, second = load(project)
    h = fmt.headline(first.chapter("demo"))
    assert (h.n, h.timing, h.problem) == (N, "batch", "1024 x 1024 float (fixture)")
    assert h.first["median_ms"] == 0.1 and h.final["median_ms"] == 0.02
    assert h.speedup == pytest.approx(5.0) and h.share == pytest.approx(0.5)
    assert h.vs() == [("lib_scale", "lib_scale", pytest.approx(0.0125 / 0.02))]
    g = fmt.headline(first.chapter("gemm"))
    # Only the chapter's first baseline, the library doing the same operation: not cuBLAS in TF32.
    assert [(bid, label) for bid, label, _v in g.vs()] == [("cublas_sgemm", "cuBLAS")]
    assert g.vs()[0][2] == pytest.approx(0.9 / 0.95) and g.share == pytest.approx(0.9)
    other = fmt.headline(second.chapter("demo"))  # every time halved: the same ratios
    assert other.final["median_ms"] == 0.01 and other.speedup == pytest.approx(5.0)


def test_headline_sets_the_baseline_it_names_beside_the_final_step(project):
    """A chapter whose first baseline is not the one to set beside the final step names another (the
    tensor-core GEMM names cuBLASLt's best, whose speed a rerun reproduces)."""
    registry = synth.fixture_registry()
    registry["chapters"][1]["headline"]["baseline"] = "cublas_sgemm_tf32"
    synth.write_json(project / "registry.json", registry)
    g = fmt.headline(load(project).reference.chapter("gemm"))
    assert [(bid, label) for bid, label, _v in g.vs()] == [("cublas_sgemm_tf32", "cuBLAS tf32")]
    row = g.chapter.baseline_row("cublas_sgemm_tf32", g.n, g.timing)
    assert g.vs()[0][2] == pytest.approx(row["median_ms"] / g.final["median_ms"])
    assert row["median_ms"] != g.chapter.baseline_row("cublas_sgemm", g.n, g.timing)["median_ms"]


def test_headline_without_a_row_or_a_headline(project):
    edit(project / "measurements" / "fixture-gpu.json", lambda d: demo_of(d).update(
        steps=[r for r in demo_of(d)["steps"] if r["id"] != "02_vector"]))
    h = fmt.headline(load(project).reference.chapter("demo"))
    assert h.final is None and h.speedup is None and h.share is None and h.vs()[0][2] is None
    registry = synth.fixture_registry()
    del registry["chapters"][1]["headline"]
    synth.write_json(project / "registry.json", registry)
    assert fmt.headline(load(project).reference.chapter("gemm")) is None


def test_headline_flags_a_ratio_whose_samples_spread(project):
    """A library row (or the final step's) whose median lies well above its fastest sample, as
    cuBLAS's at 4096^3 in some H100 runs, marks the front page's ratio as one a rerun may not give."""
    h = fmt.headline(load(project).reference.chapter("gemm"))
    assert fmt.median_over_fastest(h.final) == pytest.approx(1 / 0.95 - 1)  # the fixture's ordinary spread
    assert h.spread() == [None]

    def slow_median(data):
        gemm = next(c for c in data["chapters"] if c["id"] == "gemm")
        for row in gemm["baselines"]:
            if row["id"] == "cublas_sgemm" and row["n"] == h.n:
                row["min_ms"] = row["median_ms"] / 1.11  # two speeds: the median 11 % above the fastest
    edit(project / "measurements" / "fixture-gpu.json", slow_median)
    flagged = fmt.headline(load(project).reference.chapter("gemm"))
    assert flagged.spread() == [("cublas_sgemm", pytest.approx(0.11))]
    assert flagged.vs()[0][2] == pytest.approx(h.vs()[0][2])  # the ratio itself is unchanged


def test_short_labels():
    from types import SimpleNamespace

    two = SimpleNamespace(baselines=[{"id": "cublas_sgemm"}, {"id": "cublas_sgemm_tf32"}])
    assert fmt.short_baseline_label(two, "cublas_sgemm") == "cuBLAS"
    assert fmt.short_baseline_label(two, "cublas_sgemm_tf32") == "cuBLAS tf32"
    cut = SimpleNamespace(baselines=[{"id": "cublas_sgemm"}, {"id": "cublas_sgeam"}])
    assert fmt.short_baseline_label(cut, "cublas_sgeam") == "cuBLAS sgeam"
    one = SimpleNamespace(baselines=[{"id": "cub_device_reduce_sum"}])
    assert fmt.short_baseline_label(one, "cub_device_reduce_sum") == "CUB"
    gemm = SimpleNamespace(baselines=[{"id": "cublas_gemm_bf16"}, {"id": "cublaslt_gemm_bf16_best"}])
    assert fmt.short_baseline_label(gemm, "cublaslt_gemm_bf16_best") == "cuBLASLt best"
    assert fmt.short_baseline_label(gemm, "cublas_gemm_bf16") == "cuBLAS"
    assert fmt.short_baseline_label(SimpleNamespace(baselines=[{"id": "lib_x"}]), "lib_x") == "lib_x"
    assert fmt.short_title("SGEMM: from one thread per element to cuBLAS") == "SGEMM"
    assert fmt.short_title("FIXTURE chapter (not real)") == "FIXTURE chapter (not real)"


# -- building the FIXTURE project with two GPUs ---------------------------------------------------

def build_docs(project: Path, *extra: str, measurements: Path | None = None):
    return subprocess.run(
        [sys.executable, str(synth.BUILD_DOCS), "--root", str(project), "--build-dir", str(project / "build"),
         "--registry", str(project / "registry.json"),
         "--measurements", str(measurements or project / "measurements"), *extra],
        capture_output=True, text=True, timeout=300)


page = synth.built_page  # (HTML, text) of a page of the project's site


def gpu_blocks(html: str) -> list[str]:
    """The GPU of each per-GPU block, in page order."""
    return re.findall(r'<p class="[^"]*stepwise-gpu-heading[^"]*">([^<]*)</p>', html)


def cite_b(project: Path, slug: str = B) -> None:
    """A sentence citing the second GPU's number (``!GPU``) on the fixture page."""
    page_md = project / "docs" / "index.md"
    page_md.write_text(page_md.read_text() + f"\nOn the other GPU: "
                       f"{{stepwise-number}}`demo/02_vector/median@single_cold!{slug}` cold.\n")


@needs_doxygen
def test_two_gpus_every_table_and_plot_per_gpu(project):
    with_b(project)
    cite_b(project)
    proc = build_docs(project, "--strict")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "fixture-gpu-b.json (recorded; FIXTURE GPU B (not a measurement), also shown)" in proc.stdout
    html, text = page(project)
    # every table twice (2 timings + :timing:, per GPU), each followed by its GPU's provenance
    assert html.count('class="stepwise-data stepwise-measurements') == 6
    assert text.count("Measured on FIXTURE GPU B (not a measurement)") >= 8
    a, b = synth.FIXTURE_GPU, synth.FIXTURE_GPU_B
    blocks = gpu_blocks(html)
    # table, table :timing:, plot, sweep, accuracy, run, ncu (only the named file's GPU), each
    # step's summary -- every time the reference first
    assert blocks == [a, b] * 6 + [a] + [a, b] * 2
    # the bar charts and the sweep (2 timings) per GPU, each image naming its GPU
    images = project / "build" / "docs" / "html" / "_images"
    assert len(list(images.glob("stepwise-demo-*.png"))) == 2
    assert len(list(images.glob("stepwise-sweep-demo-*.png"))) == 4
    assert len(re.findall(r'<img alt="Bar chart[^"]*on FIXTURE GPU B', html)) == 1
    # the L2 line at each GPU's n: 48 MiB / 4 B and 32 MiB / 4 B
    assert text.count("The vertical line is at n \u2248 12,582,912") == 2
    assert text.count("The vertical line is at n \u2248 8,388,608") == 2
    assert "fills the L2 cache of FIXTURE GPU B (not a measurement) (32.0 MiB)" in text
    assert html.count('class="stepwise-data stepwise-sweep-table') == 8  # rate and time, x2 x2
    assert "Median time by size (batch) ¶ n 01 empty_launch 262,144 25.0 \u00b5s 4.00 \u00b5s" in text
    # the step sections: one summary per GPU; the code once
    assert html.count('<table class="stepwise-data stepwise-step-table') == 4
    assert html.count("What changed since 01_naive") == 1
    # the prose reads the reference GPU (A: 40 us cold; B would be 20 us), and says so
    assert "The second step is 5.00\u00d7 faster than the first (batch), 40.0 \u00b5s cold" in text
    assert re.search(r'title="median time, demo/02_vector, timing single_cold, n = 1048576; Measured on '
                     r'FIXTURE GPU \(not a measurement\)', html)
    # ... or the GPU it names
    assert "On the other GPU: 20.0 \u00b5s cold" in text
    assert re.search(r'title="median time, demo/02_vector, timing single_cold, n = 1048576; Measured on '
                     r'FIXTURE GPU B \(not a measurement\)', html)
    # the results table: one column group per GPU, the reference first
    summary = html[html.index('<table class="stepwise-data stepwise-summary stepwise-gpus-2'):]
    summary = summary[:summary.index("</table>")]
    assert re.findall(r'stepwise-gpu-group[^>]*><p>([^<]*)<', summary) == [a, b]
    cells = synth.html_text(summary)
    # the timing in words, each step's place in its chapter; 02_vector is not the same operation as 01_naive
    assert ("FIXTURE chapter (not real) 1024 x 1024 float (fixture) 10 warm launches 100 \u00b5s 1 of 2 20.0 \u00b5s "
            "2 of 2 5.00\u00d7 \u2260 op 50.0 % 0.625\u00d7 lib_scale 50.0 \u00b5s 1 of 2 10.0 \u00b5s 2 of 2 "
            "5.00\u00d7 \u2260 op 50.0 % 0.625\u00d7 lib_scale") in cells
    # vs library: the chapter's first baseline only (cuBLAS in TF32 is another operation)
    assert ("one cold launch 755 \u00b5s 1 of 4 16.8 \u00b5s 3 of 4 45.0\u00d7 90.0 % 0.947\u00d7 cuBLAS "
            "377 \u00b5s 1 of 4 8.39 \u00b5s 3 of 4") in cells
    # the final step is not the chapter's last: hover for why
    assert ("03_autotuned: step 3 of 4; 04_tf32 comes after it and does not compute the same function (\u2260 op)"
            in summary)
    assert "tf32" not in cells
    assert 'href="gemm.html"' in summary
    # stepwise-provenance: one line per GPU
    assert re.search(r'<p class="stepwise-provenance">Measured on FIXTURE GPU \(not.*?</p>\s*'
                     r'<p class="stepwise-provenance">Measured on FIXTURE GPU B', html, re.S)


@needs_doxygen
def test_a_number_of_a_gpu_the_build_lacks_fails(project):
    cite_b(project, "nvidia-h200")
    proc = build_docs(project, "--strict")
    assert proc.returncode != 0
    assert "this build has no measurement file of GPU 'nvidia-h200' (it has fixture-gpu)" in proc.stderr


@needs_doxygen
def test_the_configured_reference_gpu_leads_and_feeds_the_prose(project):
    with_b(project)
    proc = build_docs(project, "--strict", "--reference-gpu", B)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    html, text = page(project)
    assert gpu_blocks(html)[:2] == [synth.FIXTURE_GPU_B, synth.FIXTURE_GPU]
    assert "20.0 \u00b5s cold" in text  # the role reads FIXTURE GPU B now


@needs_doxygen
def test_fresh_and_recorded_gpus_together(project, tmp_path):
    """make docs on a GPU: its fresh file first; the recorded files of the other GPUs beside it, and
    not the recorded file of its own GPU."""
    recorded_b = with_b(project)
    edit(recorded_b, lambda d: d["run"].update(commit="0ldrec0"))
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    shutil.copy(project / "more-measurements" / "fixture-gpu-b.json", fresh)
    proc = build_docs(project, "--strict", "--source", "fresh", "--recorded", str(project / "measurements"),
                      measurements=fresh)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    html, text = page(project)
    assert gpu_blocks(html)[:2] == [synth.FIXTURE_GPU_B, synth.FIXTURE_GPU]
    assert "commit f1xtur2 (dirty) \u2014 measured in this build" in text
    assert "commit f1xture (dirty) \u2014 recorded measurements, not re-measured in this build" in text
    assert "0ldrec0" not in text
    assert "20.0 \u00b5s cold" in text  # the fresh GPU is the reference one
    # the roofline pairs a GPU's counts with its times: the page names FIXTURE GPU's counts, and
    # the fresh GPU has none, so it is FIXTURE GPU's roofline, under its name ...
    html, text = page(project, "gemm.html")
    roofline = html[html.index("stepwise-roofline"):]
    assert gpu_blocks(roofline)[0] == synth.FIXTURE_GPU
    assert "Autotuning sweep on FIXTURE GPU B (not a measurement)" in text  # the reference's
    # ... until the fresh GPU's own counts lie beside them
    logs = project / "measurements" / "logs"
    shutil.copy(logs / "fixture-gpu-gemm-ncu.csv", logs / f"{B}-gemm-ncu.csv")
    proc = build_docs(project, "--strict", "--source", "fresh", "--recorded", str(project / "measurements"),
                      measurements=fresh)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    html, text = page(project, "gemm.html")
    assert gpu_blocks(html[html.index("stepwise-roofline"):])[0] == synth.FIXTURE_GPU_B


@needs_doxygen
@pytest.mark.parametrize("change, needles", [
    (lambda d: demo_of(d).update(ceilings=[r for r in demo_of(d)["ceilings"]
                                           if not (r["id"] == "empty_launch" and r["n"] == LARGE)]),
     ["missing measurement: demo/empty_launch (ceiling)", f"n={LARGE}", "fixture-gpu-b.json"]),
])
def test_strict_build_fails_on_the_second_gpus_missing_rows(project, change, needles):
    """A second GPU's missing rows fail as the reference GPU's do (its stale ones do not: see
    test_docs_second_gpu.py)."""
    edit(with_b(project), change)
    proc = build_docs(project, "--strict")
    assert proc.returncode != 0
    for needle in needles:
        assert needle in proc.stderr, proc.stderr


@needs_doxygen
def test_non_strict_marks_one_gpu_stale_and_missing(project):
    def change(d):
        demo = demo_of(d)
        for row in demo["steps"]:
            if row["id"] == "02_vector":
                row["source_sha256"] = "0" * 64
        demo["steps"] = [r for r in demo["steps"] if not (r["id"] == "01_naive" and r["n"] == N)]
    edit(with_b(project), change)
    registry = synth.fixture_registry()
    del registry["chapters"][1]["headline"]  # a chapter without a headline is not in the table
    synth.write_json(project / "registry.json", registry)
    proc = build_docs(project, "--reference-gpu", B)  # the reference GPU's stale rows: a warning in each step
    assert proc.returncode == 0, proc.stderr
    assert "fixture-gpu-b.json" in proc.stderr  # the warnings name the file
    html, text = page(project)
    assert "Stale: source changed since measured (snippets/demo/02_vector.cuh changed since it was " \
           "measured on FIXTURE GPU B (not a measurement)" in text
    assert text.count("Stale: source changed since measured") == 1  # FIXTURE GPU A's are current
    assert "Not measured: the measurement file of FIXTURE GPU B (not a measurement) has no row" in text
    summary = html[html.index('stepwise-summary stepwise-gpus-2'):]
    summary = summary[:summary.index("</table>")]
    assert summary.count("<tr") == 3  # two header rows, the demo chapter: gemm has no headline
    assert ('title="not measured: demo/01_naive at n = 1048576, timing batch in fixture-gpu-b.json">n/a'
            in summary)
    assert summary.count(">n/a<") == 2  # B's first step and B's speedup; A's row is complete
    assert "gemm" not in summary


@needs_doxygen
def test_ncu_counts_of_every_gpu_beside_the_named_file(project):
    logs = project / "measurements" / "logs"
    with_b(project)
    proc = build_docs(project, "--strict")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    html, _text = page(project)
    assert html.count('class="stepwise-data stepwise-ncu') == 1  # no file of FIXTURE GPU B: not an error
    shutil.copy(logs / "fixture-gpu-demo-ncu.csv", logs / f"{B}-demo-ncu.csv")
    proc = build_docs(project, "--strict")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    html, text = page(project)
    assert html.count('class="stepwise-data stepwise-ncu') == 2
    assert gpu_blocks(html)[12:14] == [synth.FIXTURE_GPU, synth.FIXTURE_GPU_B]
    assert (f"Nsight Compute counts, {synth.FIXTURE_GPU_B}, recorded with the measurements (commit "
            f"f1xtur2 (dirty)) by make profile; file {B}-demo-ncu.csv.") in text
    assert "The first step\u2019s FIXTURE counts: 99.5 % warp execution efficiency" in text


@needs_doxygen
def test_one_gpu_pages_look_as_before_with_a_heading(project):
    proc = build_docs(project, "--strict")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    html, text = page(project)
    assert set(gpu_blocks(html)) == {synth.FIXTURE_GPU}
    assert "stepwise-summary stepwise-gpus-1" in html
    assert synth.FIXTURE_GPU_B not in text
    # the main size only in tables and step sections; the sweep's sizes in the sweep only
    assert "(512 x 512 float (fixture))" not in text and "262,144" in text
    summaries = re.findall(r'stepwise-step-table.*?</table>', html, re.S)
    assert all("262144" not in s and "16777216" not in s for s in summaries)


@needs_doxygen
def test_a_gpu_without_what_the_last_gemm_steps_need_says_so_everywhere(project):
    """GPU B as a T4 (7.5): the gemm chapter's autotuned and TF32 steps need sm_80, as SGEMM 9 to 12 do; the
    timing program leaves them (and the autotuning sweep of the autotuned step's kernel) out and lists them
    under ``unsupported``. The strict build passes, and every place that would show them says why."""
    reason = "needs sm_80: compute capability 8.0 or higher and this code built for it (this GPU: 7.5)"
    unsupported = ["03_autotuned", "04_tf32"]

    def change(d):
        d["gpu"]["compute_capability"] = "7.5"
        gemm = next(c for c in d["chapters"] if c["id"] == "gemm")
        gemm["steps"] = [r for r in gemm["steps"] if r["id"] not in unsupported]
        gemm["autotune"] = []
        gemm["unsupported"] = [{"id": step, "reason": reason} for step in unsupported]
    edit(with_b(project), change)
    proc = build_docs(project, "--strict")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    html, text = page(project, "gemm.html")
    for step in unsupported:
        assert f"Not run on {synth.FIXTURE_GPU_B}: {reason}" in text, step
    assert text.count(f"Not run on {synth.FIXTURE_GPU_B}: {reason}") == len(unsupported)
    assert f"Not run on {synth.FIXTURE_GPU}" not in text  # GPU A runs everything
    html, text = page(project)
    summary = html[html.index('stepwise-summary stepwise-gpus-2'):]
    summary = summary[:summary.index("</table>")]
    assert f'title="not run: {reason}">needs sm_80<' in summary  # B's final gemm step and what compares it
    assert summary.count(">needs sm_80<") == 4  # final step, speedup, share, vs library
