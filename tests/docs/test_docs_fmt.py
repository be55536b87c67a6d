"""Table arithmetic, units and the provenance line (stepwise_docs.fmt)."""
from __future__ import annotations

import pytest

import synth
from stepwise_docs import fmt
from stepwise_docs.data import DataError, Dataset

N = 1048576


@pytest.fixture
def dataset(project) -> Dataset:
    return Dataset.load(project / "registry.json", project / "measurements", project)


# -- units -------------------------------------------------------------------------------

@pytest.mark.parametrize("ms, text", [
    (1.12, "1.12 ms"),
    (0.1354, "135 \u00b5s"),
    (0.0082, "8.20 \u00b5s"),
    (0.0039, "3.90 \u00b5s"),
    (12.5, "12.5 ms"),
    (1500.0, "1.50 s"),
    (0.0000005, "0.500 ns"),
    (0.00025, "250 ns"),
])
def test_format_time_units(ms, text):
    assert fmt.format_time(ms) == text


def test_spread_uses_the_medians_unit():
    # min is below 1 ms, median and max above: all in ms.
    assert fmt.format_spread(0.95, 1.3, 1.1) == "0.950\u20131.30 ms"
    assert fmt.format_spread(0.134, 0.139, 0.135) == "134\u2013139 \u00b5s"


def test_rates_speedups_shares():
    assert fmt.format_rate(2497.3, "GB/s") == "2,497 GB/s"
    assert fmt.format_rate(None, "GB/s") == fmt.DASH
    assert fmt.format_speedup(4.2149) == "4.21\u00d7"
    assert fmt.format_speedup(0.957) == "0.957\u00d7"
    assert fmt.format_share(0.623) == "62.3 %"
    assert fmt.format_share(1.0) == "100 %"
    assert fmt.format_share(0.05) == "5.00 %"
    assert fmt.format_bytes(33554432) == "32.0 MiB"
    assert fmt.format_rel(2.5e-1) == "2.50e-1"
    assert fmt.format_rel(0) == "0"


def test_tests_text_and_loudness():
    assert fmt.format_tests({"passed": 7, "failed": 0, "skipped": 0}) == ("7/7 passed on this GPU", False)
    text, loud = fmt.format_tests({"passed": 5, "failed": 2, "skipped": 0})
    assert text == "2 of 7 FAILED on this GPU" and loud
    text, loud = fmt.format_tests({"passed": 6, "failed": 0, "skipped": 1})
    assert text == "6/7 passed on this GPU (1 skipped)" and loud
    assert fmt.format_tests({"passed": 0, "failed": 0, "skipped": 0}) == ("no tests ran", True)


# -- table rows --------------------------------------------------------------------------

def test_step_rows_speedups_and_share(dataset):
    chapter = dataset.chapter("demo")
    rows = fmt.step_rows(chapter, "batch", N)
    assert [r.id for r in rows] == ["01_naive", "02_vector"]
    first, second = rows
    # FIXTURE medians: 0.1 ms and 0.02 ms; ceiling 0.01 ms.
    assert first.cells["median"].text == "100 \u00b5s"
    assert first.cells["median"].sub == "90.0\u2013120 \u00b5s"
    assert first.cells["vs_prev"].text == fmt.DASH and first.cells["vs_first"].text == fmt.DASH
    assert second.cells["vs_prev"].text == "5.00\u00d7"
    assert second.cells["vs_first"].text == "5.00\u00d7"
    assert first.cells["share"].text == "10.0 %" and second.cells["share"].text == "50.0 %"
    assert first.cells["gbps"].text == "83.9"
    assert second.badges == ["beyond the sources"]
    assert "\u2260 op" in second.cells["accuracy"].text  # same_operation false
    assert "\u2260 op" not in first.cells["accuracy"].text
    assert first.cells["tests"].text == "7/7 passed" and first.cells["tests"].sub == "on this GPU"


def test_speedup_vs_previous_differs_from_vs_first(project):
    reg = synth.fixture_registry()
    third = dict(reg["chapters"][0]["steps"][1], id="03_third", title="FIXTURE third")
    reg["chapters"][0]["steps"].append(third)
    synth.write_json(project / "registry.json", reg)
    data = synth.fixture_measurement()
    rows = data["chapters"][0]["steps"]
    for r in [r for r in rows if r["id"] == "02_vector"]:
        rows.append(dict(r, id="03_third", median_ms=r["median_ms"] / 2))
    synth.write_json(project / "measurements" / "fixture-gpu.json", data)
    chapter = Dataset.load(project / "registry.json", project / "measurements", project).chapter("demo")
    third_row = fmt.step_rows(chapter, "batch", N)[2]
    assert third_row.cells["vs_prev"].text == "2.00\u00d7"
    assert third_row.cells["vs_first"].text == "10.0\u00d7"


def test_failed_tests_and_not_validated_are_loud(project):
    data = synth.fixture_measurement()
    for r in data["chapters"][0]["steps"]:
        if r["id"] == "01_naive":
            r["tests"] = {"passed": 5, "failed": 2, "skipped": 0}
            r["validated"] = False
    synth.write_json(project / "measurements" / "fixture-gpu.json", data)
    chapter = Dataset.load(project / "registry.json", project / "measurements", project).chapter("demo")
    row = fmt.step_rows(chapter, "batch", N)[0]
    assert "stepwise-failed" in row.classes
    assert "stepwise-fail" in row.cells["tests"].classes
    assert row.cells["tests"].text == "2 of 7 FAILED"
    assert "NOT VALIDATED" in row.cells["accuracy"].text


def test_missing_and_stale_rows_are_marked(project):
    data = synth.fixture_measurement()
    data["chapters"][0]["steps"] = [r for r in data["chapters"][0]["steps"]
                                    if not (r["id"] == "01_naive" and r["timing"] == "batch")]
    synth.write_json(project / "measurements" / "fixture-gpu.json", data)
    snippet = project / "snippets" / "demo" / "02_vector.cuh"
    snippet.write_text(snippet.read_text() + "\n")
    chapter = Dataset.load(project / "registry.json", project / "measurements", project).chapter("demo")
    first, second = fmt.step_rows(chapter, "batch", N)
    assert "stepwise-missing" in first.classes and first.cells["median"].text == fmt.DASH
    assert second.cells["vs_prev"].text == fmt.DASH  # no previous row to compare with
    assert "stepwise-stale" in second.classes
    assert "stale: source changed since measured" in second.notes


def test_reference_rows(dataset):
    rows = fmt.reference_rows(dataset.chapter("demo"), "batch", N)
    assert [(r.kind, r.id) for r in rows] == [
        ("ceiling", "inplace_read_write"), ("ceiling", "empty_launch"), ("baseline", "lib_scale")]
    mark, empty, lib = rows
    assert mark.cells["share"].text == "100 % (the mark)"
    assert empty.cells["share"].text == fmt.DASH and empty.cells["gbps"].text == fmt.DASH
    assert lib.cells["share"].text == "80.0 %"  # 0.01 / 0.0125
    cols = [k for k, _ in fmt.used_columns(fmt.step_rows(dataset.chapter("demo"), "batch", N) + rows)]
    assert "gbps" in cols and "gflops" not in cols  # no row has GFLOP/s


@pytest.mark.parametrize("row, timing, texts", [
    ("02_vector", "batch", {"speedup_first": "5.00\u00d7", "second_application_max_rel": "2.50e-1",
                            "speedup_over:01_naive": "5.00\u00d7", "time_over:01_naive": "0.200\u00d7",
                            "vs_baseline": "0.625\u00d7", "time_vs_baseline": "1.60\u00d7"}),
    ("02_vector", "single_cold", {"median": "40.0 \u00b5s", "speedup_over:lib_scale": "0.500\u00d7"}),
    ("01_naive", "batch", {"speedup_prev": fmt.DASH, "bytes": "8.00 MiB", "tests": "7/7 passed on this GPU"}),
    ("empty_launch", "batch", {"median": "4.00 \u00b5s"}),
    ("lib_scale", "batch", {"share": "80.0 %", "time_over:inplace_read_write": "1.25\u00d7"}),
])
def test_single_values(dataset, row, timing, texts):
    """Each field of a row at one timing, alone or against other rows (``speedup_over:01_naive``)."""
    for field, text in texts.items():
        assert fmt.single_value(dataset.chapter("demo"), row, field, timing, N) == text, field


@pytest.mark.parametrize("row, field, timing, n, error, match", [
    ("01_naive", "colour", "batch", N, DataError, "unknown field"),
    ("01_naive", "median", "warm", N, DataError, "no timing 'warm'"),
    ("empty_launch", "max_ulp", "batch", N, DataError, "steps only"),
    ("lib_scale", "max_rel", "batch", N, DataError, "steps only"),  # a baseline without accuracy fields
    ("01_naive", "median", "batch", 7, LookupError, None),
    # against other rows
    ("02_vector", "speedup_over:nope", "batch", N, DataError, "no step, ceiling or baseline 'nope'"),
    ("02_vector", "time_over:", "batch", N, DataError, "unknown field"),
    ("02_vector", "faster_than:01_naive", "batch", N, DataError, "unknown field"),
    ("02_vector", "speedup_over:01_naive", "batch", 7, LookupError, None),
])
def test_single_value_errors(dataset, row, field, timing, n, error, match):
    with pytest.raises(error, match=match):
        fmt.single_value(dataset.chapter("demo"), row, field, timing, n)


def test_field_description_names_the_other_row():
    assert fmt.field_description("speedup_over:01_naive").endswith(", 01_naive")


def test_a_baseline_validated_like_the_steps_has_a_max_rel(project):
    data = synth.fixture_measurement()
    for row in data["chapters"][0]["baselines"]:
        row["validated"] = True
        row["validation"] = "FIXTURE"
        row["accuracy"] = {"max_rel": 1.5e-3}
    synth.write_json(project / "measurements" / "fixture-gpu.json", data)
    ch = Dataset.load(project / "registry.json", project / "measurements", project).chapter("demo")
    assert fmt.single_value(ch, "lib_scale", "max_rel", "batch", N) == "1.50e-3"


def test_a_rows_sm_clock_is_shown_where_it_was_read(project):
    data = synth.fixture_measurement()
    chapter = data["chapters"][0]
    chapter["timings"][0]["throttle_threshold"] = 0.0  # a timing that keeps every sample (schema-valid)
    row = next(r for r in chapter["steps"] if r["id"] == "02_vector" and r["timing"] == "batch")
    row["sm_clock_mhz"] = {"median": 1755.0, "min": 1650.0, "max": 1980.0}
    synth.write_json(project / "measurements" / "fixture-gpu.json", data)
    ch = Dataset.load(project / "registry.json", project / "measurements", project).chapter("demo")
    assert fmt.single_value(ch, "02_vector", "clock", "batch", N) == "1,755 MHz"
    assert fmt.single_value(ch, "01_naive", "clock", "batch", N) == fmt.DASH  # a file without clocks
    cell = next(r for r in fmt.step_rows(ch, "batch", N) if r.id == "02_vector").cells["median"]
    assert "SM clock 1,755 MHz (median; 1,650\u20131,980 MHz)" in cell.title


# -- provenance --------------------------------------------------------------------------

def test_provenance_recorded(dataset):
    assert fmt.provenance(dataset) == (
        "Measured on FIXTURE GPU (not a measurement) (cc 9.0, 100 SMs, driver FIXTURE-DRIVER, "
        "CUDA 13.0), 2000-01-01 00:00 UTC, commit f1xture (dirty) \u2014 recorded measurements, "
        "not re-measured in this build")


def test_provenance_fresh_and_clean(project):
    data = synth.fixture_measurement()
    for chapter in data["chapters"]:
        chapter["run"]["dirty"] = False
    synth.write_json(project / "measurements" / "fixture-gpu.json", data)
    ds = Dataset.load(project / "registry.json", project / "measurements", project, source="fresh")
    text = fmt.provenance(ds)
    assert text.endswith("commit f1xture \u2014 measured in this build")
    assert "(dirty)" not in text


def test_provenance_of_a_chapter_names_its_own_run(project):
    data = synth.set_chapter_run(synth.fixture_measurement(), "demo", commit="c0ffee1", dirty=False,
                                 date="2000-02-03T04:05:06Z", driver="FIXTURE-DRIVER-2")
    synth.write_json(project / "measurements" / "fixture-gpu.json", data)
    ds = Dataset.load(project / "registry.json", project / "measurements", project)
    assert fmt.provenance(ds, ds.chapter("demo")) == (
        "Measured on FIXTURE GPU (not a measurement) (cc 9.0, 100 SMs, driver FIXTURE-DRIVER-2, "
        "CUDA 13.0), 2000-02-03 04:05 UTC, commit c0ffee1 \u2014 recorded measurements, "
        "not re-measured in this build")
    assert "commit f1xture (dirty)" in fmt.provenance(ds, ds.chapter("gemm"))


def test_a_full_commit_hash_is_cited_by_its_first_twelve_digits():
    assert fmt.short_commit("12d325067800919d9863e66718bdd02e8d05a8af") == "12d325067800"
    assert fmt.short_commit("f1xture") == "f1xture" and fmt.short_commit("unknown") == "unknown"


def test_provenance_of_a_file_of_several_runs_names_each_with_its_chapters(project):
    data = synth.set_chapter_run(synth.fixture_measurement(), "demo", commit="c0ffee1", seed=2,
                                 date="2000-02-03T04:05:06Z")
    synth.write_json(project / "measurements" / "fixture-gpu.json", data)
    ds = Dataset.load(project / "registry.json", project / "measurements", project)
    assert [(g.run["commit"], g.chapters) for g in ds.runs()] == [("f1xture", ["gemm"]), ("c0ffee1", ["demo"])]
    assert fmt.provenance(ds) == (
        "Measured on FIXTURE GPU (not a measurement) (cc 9.0, 100 SMs), 2 chapters in 2 runs: "
        "2000-01-01 00:00 UTC, commit f1xture (dirty), driver FIXTURE-DRIVER, CUDA 13.0 (gemm); "
        "2000-02-03 04:05 UTC, commit c0ffee1 (dirty), driver FIXTURE-DRIVER, CUDA 13.0 (demo) "
        "\u2014 recorded measurements, not re-measured in this build")


def test_bad_source_is_rejected(project):
    with pytest.raises(DataError, match="fresh.*recorded"):
        Dataset.load(project / "registry.json", project / "measurements", project, source="cached")


# -- library baselines: "vs <library>" columns, shares by rate, role fields ---------------

def test_vs_baseline_cells_and_column(dataset):
    chapter = dataset.chapter("demo")
    first, second = fmt.step_rows(chapter, "batch", N)
    key = fmt.baseline_column("lib_scale")
    # FIXTURE medians: baseline 0.0125 ms, steps 0.1 and 0.02 ms
    assert first.cells[key].text == "0.125\u00d7"
    assert second.cells[key].text == "0.625\u00d7"
    assert "stepwise-beats-baseline" not in second.cells[key].classes
    assert "1.60\u00d7 lib_scale\u2019s time" in second.cells[key].title
    refs = fmt.reference_rows(chapter, "batch", N)
    assert [r.cells[key].text for r in refs] == [fmt.DASH, fmt.DASH, "1\u00d7 (itself)"]
    cols = fmt.used_columns([first, second] + refs, chapter)
    keys = [k for k, _ in cols]
    assert keys.index(key) == keys.index("share") + 1
    assert dict(cols)[key] == "vs lib_scale"  # no known library prefix: the id
    assert key not in [k for k, _ in fmt.used_columns([first, second] + refs)]


def test_a_step_faster_than_the_baseline_is_marked(project):
    data = synth.fixture_measurement()
    for r in data["chapters"][0]["baselines"]:
        r["median_ms"] = 0.05
    synth.write_json(project / "measurements" / "fixture-gpu.json", data)
    chapter = Dataset.load(project / "registry.json", project / "measurements", project).chapter("demo")
    cell = fmt.step_rows(chapter, "batch", N)[1].cells[fmt.baseline_column("lib_scale")]
    assert cell.text == "2.50\u00d7" and "stepwise-beats-baseline" in cell.classes


def test_baseline_labels():
    from types import SimpleNamespace

    one = SimpleNamespace(baselines=[{"id": "cub_device_reduce_sum"}, {"id": "cublas_sgemm"}])
    assert fmt.baseline_label(one, "cub_device_reduce_sum") == "CUB"
    assert fmt.baseline_label(one, "cublas_sgemm") == "cuBLAS"
    two = SimpleNamespace(baselines=[{"id": "cub_device_reduce_sum"}, {"id": "cub_device_sum_v2"}])
    assert fmt.baseline_label(two, "cub_device_sum_v2") == "cub_device_sum_v2"  # ambiguous
    assert fmt.baseline_label(SimpleNamespace(baselines=[{"id": "mylib_x"}]), "mylib_x") == "mylib_x"


def test_share_of_the_mark_compares_rates_where_bytes_differ():
    # a sum reads n x 4 bytes; its ceiling, a copy, reads and writes them: twice the bytes
    copy = {"median_ms": 2.0, "gbps": 1000.0}
    reads_half_the_bytes_in_half_the_time = {"median_ms": 1.0, "gbps": 1000.0}
    assert fmt.share_of_mark(copy, reads_half_the_bytes_in_half_the_time) == pytest.approx(1.0)
    assert fmt.share_of_mark({"median_ms": 2.0, "gbps": None}, {"median_ms": 1.0, "gbps": 5.0}) == 2.0
    assert fmt.share_of_mark(None, copy) is None


def test_baseline_share_uses_rates(project):
    data = synth.fixture_measurement()
    for r in data["chapters"][0]["baselines"]:
        r["bytes"] //= 2
        r["gbps"] /= 2  # the baseline counts half the bytes in the same time
    synth.write_json(project / "measurements" / "fixture-gpu.json", data)
    chapter = Dataset.load(project / "registry.json", project / "measurements", project).chapter("demo")
    lib = fmt.reference_rows(chapter, "batch", N)[2]
    assert lib.cells["share"].text == "40.0 %"  # not the time ratio, 80 %
    assert fmt.single_value(chapter, "lib_scale", "share", "batch", N) == "40.0 %"


def test_vs_baseline_needs_a_baseline(project):
    reg = synth.fixture_registry()
    reg["chapters"][0]["baselines"] = []
    synth.write_json(project / "registry.json", reg)
    data = synth.fixture_measurement()
    data["chapters"][0]["baselines"] = []
    synth.write_json(project / "measurements" / "fixture-gpu.json", data)
    ch = Dataset.load(project / "registry.json", project / "measurements", project).chapter("demo")
    with pytest.raises(DataError, match="has no baseline"):
        fmt.single_value(ch, "02_vector", "vs_baseline", "batch", N)
    cols = [k for k, _ in fmt.used_columns(fmt.step_rows(ch, "batch", N), ch)]
    assert not any(k.startswith("vs:") for k in cols)


# -- FLOP rates: one unit per table or plot, TFLOP/s from 1,000 GFLOP/s ------------------------

def test_flop_rate_unit_by_the_largest_value():
    assert fmt.flop_rate_unit([498.0, 999.9]) == ("GFLOP/s", 1.0)
    assert fmt.flop_rate_unit([498.0, None, 787489.0]) == ("TFLOP/s", 1e-3)  # the small one follows
    assert fmt.flop_rate_unit([1000.0]) == ("TFLOP/s", 1e-3)
    assert fmt.flop_rate_unit([None]) == ("GFLOP/s", 1.0)
    assert fmt.format_flop_rate(787489.0) == "787 TFLOP/s"
    assert fmt.format_flop_rate(498.0) == "498 GFLOP/s"
    assert fmt.format_flop_rate(498.0, ("TFLOP/s", 1e-3)) == "0.498 TFLOP/s"
    assert fmt.format_flop_rate(50459.0, with_unit=False) == "50.5"
    assert fmt.format_flop_rate(None) == fmt.DASH


# -- the front page's words ---------------------------------------------------------------------

@pytest.mark.parametrize("timing, name", [
    ({"id": "single_cold", "l2": "flushed", "launches_per_sample": 1,
      "label": "events around one launch; L2 flushed before each sample"}, "one cold launch"),
    ({"id": "batch", "l2": "warm", "launches_per_sample": 10,
      "label": "events around 10 back-to-back launches, time per launch; L2 warm"}, "10 warm launches"),
    ({"id": "single_cold", "l2": "flushed", "launches_per_sample": 1,
      "label": "events around one call (all its launches); L2 flushed before each sample"}, "one cold call"),
    ({"id": "single_cold", "label": "no fields to go by"}, "single cold"),
])
def test_a_timing_in_a_few_words(timing, name):
    assert fmt.timing_name(timing) == name
    assert "_" not in fmt.timing_name(timing)


def test_a_runs_command_is_shown_without_the_measuring_machines_folders():
    command = ("stepwise_bench --gtest-report gpu-build/test-reports/gpu_tests.json --out /root/out/rec/gpu.json "
               "--commit 12d325067800919d9863e66718bdd02e8d05a8af --chapter sgemm --merge-from=/root/out/rec/gpu.json")
    assert fmt.command_text(command) == ("stepwise_bench --gtest-report gpu_tests.json --out gpu.json "
                                         "--commit 12d325067800 --chapter sgemm --merge-from=gpu.json")
    assert "/" not in fmt.command_text(command)


def test_headline_places_its_steps_and_says_what_is_not_like_for_like(dataset):
    h = fmt.headline(dataset.chapter("demo"))  # 01_naive (the same operation) against 02_vector (not)
    assert h.step_label("02_vector") == "step 2 of 2"
    assert h.first_note() == "" and h.final_note() == ""
    assert not h.like_for_like and h.operation_note().startswith("02_vector is marked \u2260 op")


def test_a_headline_that_skips_steps_says_so(project):
    import json

    def headline_of(first: str, final: str, n: int = 512) -> fmt.Headline:
        gemm["headline"] = {"n": n, "timing": "single_cold", "first": first, "final": final}
        synth.write_json(project / "registry.json", registry)
        return fmt.headline(Dataset.load(project / "registry.json", project / "measurements", project).chapter("gemm"))

    registry = json.loads((project / "registry.json").read_text())
    gemm = next(c for c in registry["chapters"] if c["id"] == "gemm")
    h = headline_of("01_naive", "02_register_blocking")
    assert h.step_label("02_register_blocking") == "step 2 of 4" and h.like_for_like
    assert h.final_note() == "03_autotuned and 04_tf32 come after it (the chapter\u2019s page compares them)"
    h = headline_of("02_register_blocking", "03_autotuned")
    assert h.first_note().endswith("01_naive come first")
    assert h.final_note().startswith("04_tf32 comes after it and does not compute the same function")
    # the first step not measured at the headline's size (the y-twist's one-thread step)
    data = synth.fixture_measurement()
    rows = next(c for c in data["chapters"] if c["id"] == "gemm")["steps"]
    rows[:] = [r for r in rows if not (r["id"] == "01_naive" and r["n"] == 512)]
    synth.write_json(project / "measurements" / "fixture-gpu.json", data)
    h = headline_of("02_register_blocking", "03_autotuned")
    assert h.first_note() == ("01_naive is not measured at 512^3 fp32 (fixture), timing single_cold; this is the first "
                              "step that is")
