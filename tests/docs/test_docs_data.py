"""Loading and checking the registry and measurement files (stepwise_docs.inputs, stepwise_docs.data)."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

import synth
from stepwise_docs.data import Dataset
from stepwise_docs.inputs import DataError, load_measurements, load_registry, measurement_files


def load(project: Path) -> Dataset:
    return Dataset.load(project / "registry.json", project / "measurements", project)


# -- the committed fixtures themselves ---------------------------------------------------

def test_fixture_files_are_current_and_labelled():
    """If this fails, run: .venv/bin/python tests/docs/fixtures/make_fixtures.py"""
    data = load_measurements(synth.FIXTURE_PROJECT / "measurements" / "fixture-gpu.json")
    assert data["gpu"]["name"] == synth.FIXTURE_GPU
    ds = load(synth.FIXTURE_PROJECT)
    assert ds.problems() == [], "fixture hashes are stale: run tests/docs/fixtures/make_fixtures.py"


# -- good input --------------------------------------------------------------------------

def test_good_files_load(project):
    ds = load(project)
    assert ds.measurement_path.name == "fixture-gpu.json"
    chapter = ds.chapter("demo")
    assert [s["id"] for s in chapter.steps] == ["01_naive", "02_vector"]
    row = chapter.step_row("02_vector", 1048576, "single_cold")
    assert row["median_ms"] == 0.04
    assert chapter.ceiling_row("inplace_read_write", 1048576, "batch")["median_ms"] == 0.01
    assert chapter.baseline_row("lib_scale", 1048576, "batch")["median_ms"] == 0.0125
    assert all(state.ok for state in chapter.states.values())
    assert ds.problems() == []


# -- corrupt / mismatched measurement files ----------------------------------------------

def test_corrupt_json_names_file_and_position(project):
    bad = project / "measurements" / "fixture-gpu.json"
    bad.write_text('{"schema": 1, "gpu": ')
    with pytest.raises(DataError) as err:
        load_measurements(bad)
    synth.assert_one_line_message(err, "fixture-gpu.json", "not valid JSON", "line 1")


def test_schema_mismatch_names_file_and_first_problem(project):
    data = synth.fixture_measurement()
    data["chapters"][0]["steps"][0]["median_ms"] = -1
    bad = synth.write_json(project / "measurements" / "fixture-gpu.json", data)
    with pytest.raises(DataError) as err:
        load_measurements(bad)
    synth.assert_one_line_message(err, "fixture-gpu.json", "measurement.schema.json", "/chapters/0/steps/0/median_ms")


def test_schema_mismatch_missing_gpu_field(project):
    data = synth.fixture_measurement()
    del data["gpu"]["sm_count"]
    bad = synth.write_json(project / "m.json", data)
    with pytest.raises(DataError, match=r"sm_count"):
        load_measurements(bad)


def test_row_with_unknown_timing_is_rejected(project):
    data = synth.fixture_measurement()
    data["chapters"][0]["steps"][0]["timing"] = "nonexistent"
    bad = synth.write_json(project / "m.json", data)
    with pytest.raises(DataError, match=r"timing 'nonexistent'"):
        load_measurements(bad)


def test_duplicate_row_is_rejected(project):
    data = synth.fixture_measurement()
    steps = data["chapters"][0]["steps"]
    steps.append(dict(steps[0]))
    bad = synth.write_json(project / "m.json", data)
    with pytest.raises(DataError, match=r"second row for 01_naive"):
        load_measurements(bad)


def test_missing_measurement_file(tmp_path):
    with pytest.raises(DataError, match=r"does not exist"):
        measurement_files(tmp_path / "nope.json")


def test_directory_holds_one_file_per_gpu(project):
    synth.write_json(project / "measurements" / "aaa-same-gpu.json", synth.fixture_measurement())
    with pytest.raises(DataError, match=r"aaa-same-gpu\.json and .*fixture-gpu\.json are both for GPU"):
        measurement_files(project / "measurements")


def test_empty_directory_is_an_error(tmp_path):
    with pytest.raises(DataError, match=r"no measurement files.*make measure"):
        measurement_files(tmp_path)


def test_corrupt_file_in_directory_is_named(project):
    (project / "measurements" / "broken.json").write_text("not json")
    with pytest.raises(DataError, match=r"broken\.json is not valid JSON"):
        measurement_files(project / "measurements")


# -- registry ----------------------------------------------------------------------------

def test_registry_missing(tmp_path):
    with pytest.raises(DataError, match=r"step registry .*registry\.json does not exist"):
        load_registry(tmp_path / "registry.json")


def test_registry_wrong_shape(project):
    reg = synth.fixture_registry()
    del reg["chapters"][0]["steps"][0]["file"]
    path = synth.write_json(project / "registry.json", reg)
    with pytest.raises(DataError, match=r"not a step registry: at /chapters/0/steps/0: 'file'"):
        load_registry(path)


def test_registry_duplicate_ids(project):
    reg = synth.fixture_registry()
    reg["chapters"][0]["ceilings"].append({"id": "01_naive", "title": "x"})
    path = synth.write_json(project / "registry.json", reg)
    with pytest.raises(DataError, match=r"uses the id '01_naive' twice"):
        load_registry(path)


# -- registry against measurements -------------------------------------------------------

def test_unknown_chapter(project):
    ds = load(project)
    with pytest.raises(DataError, match=r"unknown chapter 'transpose'.*demo"):
        ds.chapter("transpose")


def test_unknown_step(project):
    with pytest.raises(DataError, match=r"no step '09_x'.*01_naive, 02_vector"):
        load(project).chapter("demo").step("09_x")


def test_missing_step_row(project):
    data = synth.fixture_measurement()
    data["chapters"][0]["steps"] = [r for r in data["chapters"][0]["steps"]
                                    if not (r["id"] == "02_vector" and r["timing"] == "batch")]
    synth.write_json(project / "measurements" / "fixture-gpu.json", data)
    ds = load(project)
    state = ds.chapter("demo").states["02_vector"]
    assert state.missing == [(1048576, "batch")] and not state.stale
    problems = ds.problems()
    assert len(problems) == 1 and problems[0].kind == "missing"
    msg = str(problems[0])
    assert "demo/02_vector" in msg and "snippets/demo/02_vector.cuh" in msg
    assert "timing=batch" in msg and "make measure" in msg


def test_missing_chapter_in_measurements_marks_every_step(project):
    reg = synth.fixture_registry()
    extra = json.loads(json.dumps(reg["chapters"][0]))
    extra["id"] = "other"
    reg["chapters"].append(extra)
    synth.write_json(project / "registry.json", reg)
    kinds = {(p.chapter, p.step, p.kind) for p in load(project).problems()}
    assert ("other", "01_naive", "missing") in kinds and ("other", "02_vector", "missing") in kinds
    assert not any(c == "demo" for c, _, _ in kinds)


def test_missing_ceiling_row(project):
    data = synth.fixture_measurement()
    data["chapters"][0]["ceilings"] = [r for r in data["chapters"][0]["ceilings"]
                                       if r["id"] != "empty_launch"]
    synth.write_json(project / "measurements" / "fixture-gpu.json", data)
    problems = load(project).problems()
    assert [p.step for p in problems] == ["empty_launch"]
    assert "ceiling" in str(problems[0])


def test_a_ceiling_measured_at_some_sizes_is_required_at_those_only(project):
    """A registry reference with ``sizes`` (the dynamic-parallelism chapter's launch costs) needs rows
    at those n only; at one of them, a missing row is still a problem."""
    registry = synth.fixture_registry()
    registry["chapters"][0]["ceilings"][1]["sizes"] = [1048576]
    registry["chapters"][0]["steps"][1]["sizes"].append({"n": 4096, "problem": "64 x 64 float (fixture)"})
    synth.write_json(project / "registry.json", registry)
    data = synth.fixture_measurement()
    for row in list(data["chapters"][0]["steps"]):
        if row["id"] == registry["chapters"][0]["steps"][1]["id"]:
            data["chapters"][0]["steps"].append({**row, "n": 4096})
    inplace = [r for r in data["chapters"][0]["ceilings"] if r["id"] == "inplace_read_write"]
    data["chapters"][0]["ceilings"] += [{**r, "n": 4096} for r in inplace]
    data["chapters"][0]["baselines"] += [{**r, "n": 4096} for r in data["chapters"][0]["baselines"]]
    synth.write_json(project / "measurements" / "fixture-gpu.json", data)
    assert load(project).problems() == []
    data["chapters"][0]["ceilings"] = [r for r in data["chapters"][0]["ceilings"] if r["id"] != "empty_launch"]
    synth.write_json(project / "measurements" / "fixture-gpu.json", data)
    problems = load(project).problems()
    assert [p.step for p in problems] == ["empty_launch"]
    assert "n=1048576" in str(problems[0]) and "n=4096" not in str(problems[0])


def test_stale_hash_after_one_byte(project):
    snippet = project / "snippets" / "demo" / "02_vector.cuh"
    snippet.write_bytes(snippet.read_bytes() + b" ")
    ds = load(project)
    state = ds.chapter("demo").states["02_vector"]
    assert state.stale and not ds.chapter("demo").states["01_naive"].stale
    stale = [p for p in ds.problems() if p.kind == "stale"]
    assert len(stale) == 1
    msg = str(stale[0])
    assert msg.startswith("stale measurement: demo/02_vector (snippets/demo/02_vector.cuh changed")
    assert synth.FIXTURE_GPU in msg and "commit f1xture (dirty)" in msg
    assert msg.endswith("re-run make measure CHAPTERS=demo")
    # The registry (the timing program's build) is now older than the source too.
    assert any(p.kind == "registry_stale" and p.step == "02_vector" for p in ds.problems())


def test_stale_hash_through_an_included_header(project):
    """source_sha256 covers quoted includes: editing the common header makes both steps stale."""
    header = project / "snippets" / "common" / "check.cuh"
    header.write_bytes(header.read_bytes() + b"\n")
    states = load(project).chapter("demo").states
    assert states["01_naive"].stale and states["02_vector"].stale


def test_missing_source_file(project):
    os.remove(project / "snippets" / "demo" / "01_naive.cuh")
    problems = load(project).problems()
    assert problems[0].kind == "no_file" and "snippets/demo/01_naive.cuh" in str(problems[0])


def test_placeholder_registry_hash_is_not_checked(project):
    reg = synth.fixture_registry()
    reg["chapters"][0]["steps"][0]["source_sha256"] = "<64 hex>"
    synth.write_json(project / "registry.json", reg)
    assert load(project).problems() == []
