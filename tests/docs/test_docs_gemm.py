"""The SGEMM chapter's evidence (stepwise_docs.gemm): tilings, gpu.limits, the SC'10 bounds, the sweep,
the roofline and the autotuning rows. FIXTURE data only: the fixture project's gemm chapter
(tests/docs/fixtures/project, made by make_fixtures.py from synth's GEMM_* tables).

FIXTURE numbers used below: 100 SMs x 128 lanes x 1000 MHz = 1.28e13 FMA/s (25,600 GFLOP/s computed);
the copy moves 2,000 GB/s; the FMA ceiling is 20,000 x n / (n + 64) GFLOP/s.
"""
from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

import synth
from stepwise_docs import fmt, gemm, ncu, plot, sweep
from stepwise_docs.data import Dataset
from stepwise_docs.inputs import DataError, Tiling, load_measurements, load_registry

T = "single_cold"
CSV_NAME = "fixture-gpu-gemm-ncu.csv"


def load(project: Path) -> Dataset:
    return Dataset.load(project / "registry.json", project / "measurements", project)


def edit_measurement(project: Path, edit) -> Dataset:
    path = project / "measurements" / "fixture-gpu.json"
    data = json.loads(path.read_text())
    edit(data)
    path.write_text(json.dumps(data))
    return load(project)


def gemm_of(data: dict) -> dict:
    return next(c for c in data["chapters"] if c["id"] == "gemm")


@pytest.fixture
def ds(project) -> Dataset:
    return load(project)


def dram_of(ds: Dataset, path: Path) -> dict[str, float]:
    chapter = ds.chapter("gemm")
    return {c.step["id"]: c.value("dram_bytes") for c in ncu.step_counts(chapter, ncu.load_csv(path), path)}


# -- the registry's tiling and the measurement file's new fields ---------------------------

def test_tiling_is_loaded_and_exposed(ds):
    chapter = ds.chapter("gemm")
    assert chapter.tiling("03_autotuned") == Tiling(128, 128, 16, 64, 32, 8, 8, 256, 3)
    assert chapter.tiling("01_naive").block_k == 0
    assert ds.chapter("demo").tiling("01_naive") is None  # optional: other chapters have none
    assert chapter.tiling("03_autotuned").as_dict()["stages"] == 3


@pytest.mark.parametrize("edit, needle", [
    (lambda t: t.pop("stages"), "stages"),
    (lambda t: t.update(block_m=-1), "-1"),
    (lambda t: t.update(block_k="16"), "'16'"),
])
def test_a_bad_tiling_is_rejected(project, edit, needle):
    registry = json.loads((project / "registry.json").read_text())
    edit(registry["chapters"][1]["steps"][0]["tiling"])
    path = synth.write_json(project / "registry.json", registry)
    with pytest.raises(DataError) as exc:
        load_registry(path)
    assert "is not a step registry" in str(exc.value) and needle in str(exc.value)


def test_limits_and_autotune_are_optional():
    data = synth.fixture_measurement()
    del data["gpu"]["limits"]
    for chapter in data["chapters"]:
        chapter.pop("autotune", None)
    ds = Dataset(synth.fixture_registry(), data, synth.FIXTURE_PROJECT)
    assert ds.limits is None and ds.chapter("gemm").autotune == []


@pytest.mark.parametrize("edit, needle", [
    (lambda d: gemm_of(d)["autotune"][0]["config"].pop("stages"), "stages"),
    (lambda d: gemm_of(d)["autotune"][0]["config"].update(cluster_m=0), "cluster_m"),
    (lambda d: gemm_of(d)["autotune"][0].update(used_by="gemm step"), "used_by"),
    (lambda d: gemm_of(d)["autotune"][0].pop("chosen"), "chosen"),
    (lambda d: gemm_of(d)["autotune"][0].update(resources=[]), "resources"),
    (lambda d: d["gpu"]["limits"].pop("shared_memory_banks"), "shared_memory_banks"),
    (lambda d: d["gpu"]["limits"].update(registers_per_sm=0), "/gpu/limits/registers_per_sm"),
])
def test_schema_checks_the_new_fields(project, edit, needle):
    data = synth.fixture_measurement()
    edit(data)
    path = synth.write_json(project / "measurements" / "fixture-gpu.json", data)
    with pytest.raises(DataError) as exc:
        load_measurements(path)
    assert "does not match" in str(exc.value) and needle in str(exc.value)


def test_autotune_rows_are_checked_like_other_rows(project):
    data = synth.fixture_measurement()
    gemm_of(data)["autotune"].append(dict(gemm_of(data)["autotune"][1]))
    path = synth.write_json(project / "measurements" / "fixture-gpu.json", data)
    with pytest.raises(DataError, match="a second autotuning row for bm128_bn128_bk16"):
        load_measurements(path)
    gemm_of(data)["autotune"].pop()
    gemm_of(data)["autotune"][0]["timing"] = "batch"
    synth.write_json(path, data)
    with pytest.raises(DataError, match=r"autotune/0: timing 'batch' is not one of"):
        load_measurements(path)


def test_the_recorded_file_without_limits_still_loads():
    files = sorted((synth.REPO / "docs" / "measurements").glob("*.json"))
    if not files:
        pytest.skip("no recorded measurement file")
    for path in files:
        load_measurements(path)  # gpu.limits and autotune are optional


# -- the SC'10 bounds ------------------------------------------------------------------------

def test_limits_give_the_computed_fma_rate(ds):
    limits = gemm.limits_of(ds)
    assert limits.fma_rate == pytest.approx(100 * 128 * 1000e6)
    assert limits.peak_gflops == pytest.approx(25600.0)
    assert limits.shared_bytes_per_clock == 128


def test_bounds_for_every_tiled_step(ds):
    chapter = ds.chapter("gemm")
    assert gemm.default_n(chapter, T) == chapter.headline["n"] == 512  # the fixture's headline size
    headline, chapter.headline = chapter.headline, None
    n = gemm.default_n(chapter, T)
    chapter.headline = headline
    assert n == 1000  # without a headline: the largest n with a device_copy row
    b = gemm.tile_bounds(ds, chapter, n, T)
    assert b.bandwidth == pytest.approx(2000e9)
    assert b.min_square_tile == pytest.approx(2 * 1.28e13 * 4 / 2000e9)  # 51.2
    assert b.max_thread_tile_sum == pytest.approx(0.25)
    by = {s.step["id"]: s for s in b.steps}
    assert list(by) == ["01_naive", "02_register_blocking", "03_autotuned", "04_tf32"]
    naive, blocked, tuned, tf32 = by.values()
    # DRAM: 1.28e13 x 4 x (1/32 + 1/32) = 3.2 TB/s > 2 TB/s; 128 x 128 needs 0.8 TB/s
    assert naive.dram.value == pytest.approx(3.2e12) and naive.dram.holds is False
    assert tuned.dram.value == pytest.approx(0.8e12) and tuned.dram.holds
    # shared memory per thread: 128 x 4 x (1/4 + 1/4) = 256 B > 128; 8 x 8 gives exactly 128
    assert blocked.shared_thread.value == pytest.approx(256) and blocked.shared_thread.holds is False
    assert tuned.shared_thread.value == pytest.approx(128) and tuned.shared_thread.holds
    assert not naive.shared_thread.applies and "no shared memory" in naive.shared_thread.why_not
    # the warp form: 128 x 4 x (1/64 + 1/32) = 24 B per clock
    assert tuned.shared_warp.value == pytest.approx(24) and not blocked.shared_warp.applies
    # shared memory: (128 + 128) x 16 x 4 B x 3 stages = 48 KiB, 4 per SM's 228 KiB
    assert tuned.shared_block.value == 49152 and tuned.shared_blocks_per_sm == 233472 // 49152
    # registers: 8 + 8 + 64 = 80 per thread, 20480 per block
    assert tuned.registers_thread.value == 80 and tuned.registers_block.value == 80 * 256
    assert not tf32.registers_thread.applies and tf32.shared_warp.holds
    assert tuned.compiled_registers == 128


def test_bounds_for_chosen_steps_and_their_problems(project, ds):
    chapter = ds.chapter("gemm")
    b = gemm.tile_bounds(ds, chapter, 512, T, ["03_autotuned"])
    assert [s.step["id"] for s in b.steps] == ["03_autotuned"]
    with pytest.raises(DataError, match="no step '99_x'"):
        gemm.tile_bounds(ds, chapter, 512, T, ["99_x"])
    with pytest.raises(DataError, match="demo/01_naive has no tiling"):
        gemm.tile_bounds(ds, ds.chapter("demo"), 1048576, "batch", ["01_naive"])
    with pytest.raises(DataError, match="chapter 'demo': no step has a tiling with block_m > 0"):
        gemm.tile_bounds(ds, ds.chapter("demo"), 1048576, "batch")
    registry = synth.fixture_registry()
    registry["chapters"][1]["ceilings"] = registry["chapters"][1]["ceilings"][:1]
    no_copy = Dataset(registry, synth.fixture_measurement(), synth.FIXTURE_PROJECT)
    with pytest.raises(DataError, match="chapter 'gemm' has no ceiling 'device_copy'"):
        gemm.tile_bounds(no_copy, no_copy.chapter("gemm"), 512, T)
    with pytest.raises(DataError, match="no device_copy row for n=777"):
        gemm.tile_bounds(ds, chapter, 777, T)


@pytest.mark.parametrize("edit, needle", [
    (lambda d: d["gpu"].pop("limits"), "has no gpu.limits"),
    (lambda d: d["gpu"]["limits"].update(fp32_lanes_per_sm=None), "gpu.limits.fp32_lanes_per_sm is null"),
    (lambda d: d["gpu"]["limits"].update(max_sm_clock_mhz=None), "gpu.limits.max_sm_clock_mhz is null"),
])
def test_bounds_without_limits_fail(project, edit, needle):
    ds = edit_measurement(project, edit)
    with pytest.raises(DataError) as exc:
        gemm.tile_bounds(ds, ds.chapter("gemm"), 512, T)
    assert needle in str(exc.value) and "fixture-gpu.json" in str(exc.value)


# -- the sweep ---------------------------------------------------------------------------------

def test_sweep_in_flops_with_gaps(ds):
    data = sweep.sweep(ds.chapter("gemm"), T)
    assert data["metric"] == "gflops" and data["sizes"] == [128, 256, 512, 1000]
    # some rows pass 1,000 GFLOP/s: every value of the plot and its table in TFLOP/s
    assert data["unit"] == "TFLOP/s"
    series = {s["id"]: s for s in data["series"]}
    assert series["02_register_blocking"]["values"][3] is None  # not measured at 1000
    assert series["01_naive"]["values"][3] == pytest.approx(20000 * 0.02 * 1000 / 1064 / 1000)
    assert series["cublas_sgemm"]["kind"] == "baseline" and not series["04_tf32"]["same_operation"]
    assert series["03_autotuned"]["number"] == "03"


def test_sweep_of_a_chapter_without_flops_is_in_gbps(ds):
    data = sweep.sweep(ds.chapter("demo"), "batch", rows=["02_vector"])
    assert data["metric"] == "gbps" and [s["id"] for s in data["series"]] == ["02_vector"]


def test_sweep_problems(ds):
    with pytest.raises(DataError, match="no baseline 'mkl'"):
        sweep.sweep(ds.chapter("gemm"), T, baselines=["mkl"])
    with pytest.raises(DataError, match="no timing 'warm'"):
        sweep.sweep(ds.chapter("gemm"), "warm")


def test_a_rectangular_problem_is_a_key_cited_by_shape_and_left_out_of_the_sweep(project):
    # The SGEMM chapter's rectangular problems: a registry size with a shape, whose n is a key, not a size.
    key = 512 * 10 ** 12 + 1000 * 10 ** 6 + 128
    path = project / "registry.json"
    registry = json.loads(path.read_text())
    step = next(s for s in gemm_of(registry)["steps"] if s["id"] == "03_autotuned")
    step["sizes"].append({"n": key, "problem": "512 x 1000 x 128", "shape": [512, 1000, 128]})
    path.write_text(json.dumps(registry))
    chapter = load(project).chapter("gemm")
    assert chapter.shape(key) == (512, 1000, 128) and chapter.shape(512) is None
    assert not chapter.is_size(key) and chapter.is_size(512)
    assert chapter.n_of("512x1000x128") == key and chapter.n_of("512") == 512
    with pytest.raises(DataError, match="no size of shape '4x4x4'"):
        chapter.n_of("4x4x4")
    assert (key, "512 x 1000 x 128") in chapter.sizes()  # it has its own tables
    assert key not in sweep.sweep(chapter, T)["sizes"]  # but no place on an axis of n
    with pytest.raises(LookupError):  # not measured yet: the role shows "not measured"
        fmt.single_value(chapter, "03_autotuned", "gflops", T, key)
    registry["chapters"][0]["steps"][0]["sizes"][0]["shape"] = [1]  # [rows, cols] or [M, N, K]
    path.write_text(json.dumps(registry))
    with pytest.raises(DataError, match="is not a step registry"):
        load(project)


# -- the roofline --------------------------------------------------------------------------

def test_roofline_points_roofs_and_binding(ds, project):
    path = project / "measurements" / "logs" / CSV_NAME
    roof = gemm.roofline(ds, ds.chapter("gemm"), dram_of(ds, path), 512, T, CSV_NAME)
    ceiling = 20000 * 512 / 576
    assert roof.fma_ceiling_gflops == pytest.approx(ceiling)
    assert roof.bandwidth_gbps == pytest.approx(2000)
    assert roof.peak_gflops == pytest.approx(25600)
    assert roof.ridge == pytest.approx(ceiling / 2000)
    points = {p.step["id"]: p for p in roof.points}
    naive = points["01_naive"]
    assert naive.intensity == pytest.approx(2 * 512 ** 3 / (201326592 + 1048576))
    assert naive.binds == "memory" and naive.roof == pytest.approx(2000 * naive.intensity)
    tuned = points["03_autotuned"]
    assert tuned.intensity == pytest.approx(64.0) and tuned.binds == "compute"
    assert tuned.share == pytest.approx(0.9)
    assert not points["04_tf32"].same_operation
    assert roof.as_data()["points"][0]["number"] == "01"


def test_roofline_problems(ds, project):
    chapter = ds.chapter("gemm")
    with pytest.raises(DataError, match="moved no DRAM bytes"):
        gemm.roofline(ds, chapter, {"03_autotuned": 0.0}, 512, T, CSV_NAME)
    with pytest.raises(DataError, match="02_register_blocking has no row for n=1000"):
        gemm.roofline(ds, chapter, {"02_register_blocking": 1.0}, 1000, T, CSV_NAME)
    with pytest.raises(DataError, match="no fma_peak row for n=4096"):
        gemm.roofline(ds, chapter, {"01_naive": 1.0}, 4096, T, CSV_NAME)
    with pytest.raises(DataError, match="no launch of chapter 'gemm'"):
        gemm.roofline(ds, chapter, {}, 512, T, CSV_NAME)


# -- the autotuning sweep --------------------------------------------------------------------

def test_autotune_rows_fastest_first_with_the_chosen_step(ds):
    chapter = ds.chapter("gemm")
    assert gemm.autotune_n(chapter, T) == 512
    rows = gemm.autotune_rows(ds, chapter, 512, T)
    assert [r.row["gflops"] for r in rows] == sorted((r.row["gflops"] for r in rows), reverse=True)
    assert rows[0].chosen and rows[0].steps == ["03_autotuned"] and rows[0].id.endswith("_s3_mb2")
    assert not rows[1].chosen and rows[1].steps == []
    # vs the first baseline (cublas_sgemm at 0.95 of the ceiling; the chosen one at 0.9)
    assert rows[0].vs_baseline == pytest.approx(0.9 / 0.95)
    assert rows[0].resource("registers") == 128
    assert gemm.config_text(rows[0].config, "block") == "128 \u00d7 128 \u00d7 16"
    assert gemm.config_text({"block_m": 32, "block_n": 32, "block_k": 0}, "block") == "32 \u00d7 32"
    assert gemm.config_text({"thread_m": 0, "thread_n": 0}, "thread") == fmt.DASH


def _rows(d):
    return gemm_of(d)["autotune"]


@pytest.mark.parametrize("edit, needle", [
    (lambda d: gemm_of(d).update(autotune=[]), "has no autotuning rows (autotune) for n=512"),
    (lambda d: _rows(d)[1].update(chosen=True), "2 autotuning rows at n=512 are chosen"),
    (lambda d: _rows(d)[0].update(chosen=False), "0 autotuning rows at n=512 are chosen (none)"),
    (lambda d: _rows(d)[2].update(validated=False, validation="FIXTURE: worst element off"),
     "autotuning row bm128_bn128_bk32_wm64_wn32_tm8_tn8_s3_mb2 n=512 was not validated "
     "(FIXTURE: worst element off)"),
    (lambda d: _rows(d)[0]["config"].update(stages=5), "is the tiling of no step"),
])
def test_autotune_problems(project, edit, needle):
    ds = edit_measurement(project, edit)
    with pytest.raises(DataError) as exc:
        gemm.autotune_rows(ds, ds.chapter("gemm"), 512, T)
    synth.assert_one_line_message(exc, needle, "fixture-gpu.json")


def test_no_autotune_rows_at_all(project):
    ds = edit_measurement(project, lambda d: gemm_of(d).pop("autotune"))
    with pytest.raises(DataError, match="no autotuning rows"):
        gemm.autotune_n(ds.chapter("gemm"), T)


# -- single numbers and tables of a chapter with FLOPs and two baselines ------------------------

def test_single_values_in_flops(ds):
    chapter = ds.chapter("gemm")
    # the FLOP rate in TFLOP/s from 1,000 GFLOP/s
    assert fmt.single_value(chapter, "03_autotuned", "gflops", T, 512) == "16.0 TFLOP/s"
    assert fmt.single_value(chapter, "03_autotuned", "tflops", T, 512) == "16.0 TFLOP/s"
    assert fmt.single_value(chapter, "03_autotuned", "flops", T, 512) == f"{2 * 512 ** 3:,}"
    assert fmt.single_value(chapter, "cublas_sgemm", "gflops", T, 512) == "16.9 TFLOP/s"
    assert fmt.single_value(chapter, "01_naive", "gflops", T, 1000) == "376 GFLOP/s"
    assert fmt.single_value(chapter, "03_autotuned", "vs_baseline", T, 512) == "0.947\u00d7"
    assert fmt.single_value(chapter, "03_autotuned", "share", T, 512) == "90.0 %"
    assert fmt.single_value(chapter, "cublas_sgemm", "share", T, 512) == "95.0 %"
    assert fmt.single_value(chapter, "cublas_sgemm_tf32", "speedup_over:cublas_sgemm", T, 512) == "2.63\u00d7"
    assert fmt.single_value(chapter, "01_naive", "tflops", T, 1000) == "0.376 TFLOP/s"


def test_table_rows_mark_the_tf32_step_and_compare_with_both_baselines(ds):
    chapter = ds.chapter("gemm")
    rows = fmt.step_rows(chapter, T, 512) + fmt.reference_rows(chapter, T, 512)
    cols = [k for k, _l in fmt.used_columns(rows, chapter)]
    assert "gflops" in cols and "vs:cublas_sgemm" in cols and "vs:cublas_sgemm_tf32" in cols
    # no step has GB/s: the column is left out, and the copy's GB/s is set beside its title
    assert "gbps" not in cols
    copy = next(r for r in rows if r.id == "device_copy")
    assert fmt.rates_left_out(copy, fmt.used_columns(rows, chapter)).endswith(" GB/s")
    # one unit for the table's FLOP rates, named in the header: 01_naive's few hundred GFLOP/s read in TFLOP/s
    assert dict(fmt.used_columns(rows, chapter))["gflops"] == "TFLOP/s"
    naive = next(r for r in rows if r.id == "01_naive")
    assert naive.cells["gflops"].unit == "TFLOP/s" and float(naive.cells["gflops"].text) < 1
    tf32 = next(r for r in rows if r.id == "04_tf32")
    assert "\u2260 op" in tf32.cells["accuracy"].text
    assert tf32.cells["vs:cublas_sgemm"].text == "2.11\u00d7"
    # the table at 1000 has only the steps measured there
    assert [r.id for r in fmt.step_rows(chapter, T, 1000)] == ["01_naive"]


# -- the images --------------------------------------------------------------------------------

def test_plots_are_pngs_named_by_kind(ds, project, tmp_path):
    data = sweep.sweep(ds.chapter("gemm"), T)
    path = plot.render_sweep(data, tmp_path)
    assert path.name.startswith("stepwise-sweep-gemm-") and path.read_bytes()[:4] == b"\x89PNG"
    assert "Step 02_register_blocking: n = 128" in plot.sweep_alt_text(data)
    csv = project / "measurements" / "logs" / CSV_NAME
    roof = gemm.roofline(ds, ds.chapter("gemm"), dram_of(ds, csv), 512, T, CSV_NAME).as_data()
    path = plot.render_roofline(roof, tmp_path)
    assert path.name.startswith("stepwise-roofline-gemm-") and path.read_bytes()[:4] == b"\x89PNG"
    assert "computed FMA peak 25.6 TFLOP/s" in plot.roofline_alt_text(roof)
    assert plot.render_roofline(roof, tmp_path) == path  # drawn once per data


# -- synth makes FIXTURE data for any SGEMM-like registry ---------------------------------------

def test_synth_covers_an_sgemm_like_registry(project):
    registry = synth.fixture_registry()
    data = synth.measurement_for(registry, project)
    assert data["gpu"]["name"] == synth.FIXTURE_GPU and data["gpu"]["limits"] == synth.FIXTURE_LIMITS
    path = synth.write_json(project / "measurements" / "fixture-gpu.json", data)
    load_measurements(path)
    ds = load(project)
    assert ds.problems() == []
    chosen = [r for r in ds.chapter("gemm").autotune if r["chosen"]]
    assert len(chosen) == 1 and chosen[0]["config"]["block_m"] == 128
    assert all(r["flops"] == 2 * r["n"] ** 3 and r["bytes"] is None for r in gemm_of(data)["steps"])
    assert not math.isnan(sum(r["gflops"] for r in gemm_of(data)["steps"]))


def test_the_chosen_row_names_the_last_step_with_its_tiling(project):
    """An earlier step may share the autotuned step's tiling; a ≠ op step never takes the mark."""
    registry = synth.fixture_registry()
    steps = registry["chapters"][1]["steps"]
    steps[1]["tiling"] = dict(steps[2]["tiling"])  # 02 tiles like 03
    steps[3]["tiling"] = dict(steps[2]["tiling"])  # and so does the TF32 step, after it
    ds = Dataset(registry, synth.fixture_measurement(), synth.FIXTURE_PROJECT)
    rows = gemm.autotune_rows(ds, ds.chapter("gemm"), 512, T)
    assert rows[0].chosen and rows[0].steps == ["03_autotuned"]


def test_a_row_that_names_its_step_needs_no_matching_tiling(project):
    """A kernel template whose configurations are not a step's tiling (the tensor-core chapter's, with clusters)
    names the step that picks among them (used_by); its extra fields are kept."""
    data = synth.fixture_measurement()
    chosen_step = synth.fixture_registry()["chapters"][-1]["steps"][-1]["id"]
    for row in gemm_of(data)["autotune"]:
        # block_k + 1: the tiling of no step, so only used_by can name the step
        row["config"] = {**row["config"], "block_k": row["config"]["block_k"] + 1, "cluster_m": 2, "cluster_n": 1,
                         "group_m": 8}
        row["config"].pop("min_blocks")
        row["used_by"] = chosen_step
    synth.write_json(project / "measurements" / "fixture-gpu.json", data)
    ds = Dataset.load(project / "registry.json", project / "measurements", project)
    out = gemm.autotune_rows(ds, ds.chapter("gemm"), 512, T)
    assert all(a.steps == [chosen_step] for a in out)
    assert all(a.config["cluster_m"] == 2 and "min_blocks" not in a.config for a in out)


def test_a_row_that_names_its_step_by_a_former_id_is_that_steps(project):
    """A run's used_by names the step as the run knew it: where the step was renamed since (a split or a
    renumbering, its registry entry's ``formerly``), the row is the renamed step's."""
    registry = synth.fixture_registry()
    gemm_steps = next(c for c in registry["chapters"] if c["id"] == "gemm")["steps"]
    step = next(s for s in gemm_steps if s["id"] == "03_autotuned")
    step["formerly"] = ["02_autotuned"]
    data = synth.fixture_measurement()
    for row in gemm_of(data)["autotune"]:
        row["config"] = {**row["config"], "block_k": row["config"]["block_k"] + 1}  # no step's tiling
        row["used_by"] = "02_autotuned"
    ds = Dataset(registry, data, synth.FIXTURE_PROJECT)
    out = gemm.autotune_rows(ds, ds.chapter("gemm"), 512, T)
    assert all(a.steps == ["03_autotuned"] for a in out)
