"""Chapters a recorded GPU's file has no numbers for yet (pending.toml), steps a GPU cannot run (a measurement's
``unsupported`` list), and what a step needs (the registry's ``needs``): stepwise_docs.data."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

import synth
from stepwise_docs.data import DataError, Dataset, load_datasets, load_registry


def load(project: Path) -> Dataset:
    return Dataset.load(project / "registry.json", project / "measurements", project)


def with_second_chapter(project: Path) -> None:
    """The registry gains a chapter 'other' (a copy of 'demo') that the fixture's measurement file lacks."""
    reg = synth.fixture_registry()
    extra = json.loads(json.dumps(reg["chapters"][0]))
    extra["id"] = "other"
    reg["chapters"].append(extra)
    synth.write_json(project / "registry.json", reg)


def pending(project: Path, text: str) -> None:
    (project / "measurements" / "pending.toml").write_text(text, encoding="utf-8")


def test_a_pending_chapter_is_not_missing_and_says_why(project):
    with_second_chapter(project)
    slug = load(project).slug
    pending(project, f'[{slug}]\nother = "its run stopped: FIXTURE reason"\n')
    ds = load(project)
    assert ds.problems() == []
    assert ds.chapter("other").pending == "its run stopped: FIXTURE reason"
    assert ds.chapter("demo").pending == ""


def test_a_chapter_missing_without_a_pending_entry_is_still_missing(project):
    with_second_chapter(project)
    pending(project, '[another-gpu]\nother = "a different GPU"\n')
    kinds = {(p.chapter, p.step, p.kind) for p in load(project).problems()}
    assert ("other", "01_naive", "missing") in kinds and ("other", "02_vector", "missing") in kinds


@pytest.mark.parametrize("chapter_id, needle", [
    ("demo", "it has"),  # the file has numbers for it: the entry is no longer true
    ("no_such_chapter", "the step registry has no such chapter"),
])
def test_an_untrue_pending_entry_is_a_problem(project, chapter_id, needle):
    slug = load(project).slug
    pending(project, f'[{slug}]\n{chapter_id} = "FIXTURE"\n')
    problems = [p for p in load(project).problems() if p.kind == "pending"]
    assert len(problems) == 1
    message = str(problems[0])
    assert "pending.toml" in message and chapter_id in message and needle in message and slug in message


@pytest.mark.parametrize("text, needle", [
    ("[gpu\n", "cannot be read"),
    ('[gpu]\nchapter = ""\n', "non-empty strings"),
    ('gpu = "not a table"\n', "must map chapter ids"),
])
def test_a_bad_pending_file_is_an_error_that_names_it(project, text, needle):
    pending(project, text)
    with pytest.raises(DataError) as err:
        load(project)
    assert "pending.toml" in str(err.value) and needle in str(err.value)


def test_a_fresh_measurement_ignores_the_recorded_files_pending_entries(project, tmp_path):
    """pending.toml speaks of the recorded files: a fresh file of the same GPU is checked as any other."""
    with_second_chapter(project)
    slug = load(project).slug
    pending(project, f'[{slug}]\nother = "FIXTURE"\n')
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    (fresh / "fixture-gpu.json").write_text((project / "measurements" / "fixture-gpu.json").read_text())
    datasets = load_datasets(project / "registry.json", fresh, project, "fresh", recorded=project / "measurements")
    kinds = {(p.chapter, p.kind) for p in datasets.problems()}
    assert ("other", "missing") in kinds and ("other", "pending") not in kinds


def without_02_vector(project: Path, unsupported: str) -> None:
    """The fixture's file without step 02_vector's rows, listing ``unsupported`` as a step this GPU cannot run."""
    data = synth.fixture_measurement()
    chapter = data["chapters"][0]
    chapter["steps"] = [r for r in chapter["steps"] if r["id"] != "02_vector"]
    chapter["unsupported"] = [{"id": unsupported, "reason": "needs sm_90a: FIXTURE"}]
    synth.write_json(project / "measurements" / "fixture-gpu.json", data)


def test_an_unsupported_step_is_not_missing_and_keeps_its_reason(project):
    without_02_vector(project, "02_vector")
    ds = load(project)
    assert ds.problems() == []
    state = ds.chapter("demo").states["02_vector"]
    assert state.unsupported == "needs sm_90a: FIXTURE" and state.missing


def test_a_step_missing_without_being_unsupported_is_still_missing(project):
    without_02_vector(project, "01_naive")
    kinds = {(p.step, p.kind) for p in load(project).problems()}
    assert ("02_vector", "missing") in kinds


def test_the_registry_may_say_what_a_step_needs(project):
    reg = synth.fixture_registry()
    reg["chapters"][0]["steps"][1]["needs"] = "sm_90a"
    synth.write_json(project / "registry.json", reg)
    assert load_registry(project / "registry.json")["chapters"][0]["steps"][1]["needs"] == "sm_90a"
    reg["chapters"][0]["steps"][1]["needs"] = ""
    synth.write_json(project / "registry.json", reg)
    with pytest.raises(DataError):
        load_registry(project / "registry.json")
