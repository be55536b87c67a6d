"""The reference GPU and second GPUs (FIXTURE data only).

The reference GPU (stepwise_docs.data.REFERENCE_GPU, the H200) is the one the prose cites and whose recorded file
must be current. Every other recorded GPU is a second GPU: where a step changed after it recorded the chapter, its
rows stay, marked stale, and every place that shows them says where they stand (fmt.as_of_note), and the strict
build passes. The same staleness on the reference GPU (or in a fresh file) fails it; a chapter a second GPU lacks
entirely still needs pending.toml.

The fixture project has no H200: its reference GPU is the first by slug, FIXTURE GPU (fixture-gpu); FIXTURE GPU B
(fixture-gpu-b, copied beside it) is the second GPU, recorded at commit f1xtur2 on 2000-01-02.
"""
from __future__ import annotations

import re
import runpy
import shutil
from pathlib import Path

import pytest

import synth
from stepwise_docs import fmt
from stepwise_docs.data import REFERENCE_GPU, Dataset, Datasets
from stepwise_docs.inputs import DataError, measurement_files
from test_docs_gpus import B, N, build_docs, cite_b, demo_of, edit, load, needs_doxygen, page, with_b

A = "fixture-gpu"

#: The note of FIXTURE GPU B's demo chapter once step 02_vector changed after B recorded it.
NOTE_B = ("FIXTURE GPU B (not a measurement): measured at commit f1xtur2 (2000-01-02), before step 02_vector "
          "changed; not re-measured. The step's source then: `git show f1xtur2:snippets/demo/02_vector.cuh`.")


def changed_after(path: Path, *steps: str, dirty: bool = False) -> Path:
    """The measurement file ``path`` as if ``steps`` of the demo chapter had changed after it was recorded (their
    rows' source hashes are of an older source), its demo run of a clean tree unless ``dirty``."""
    def change(data: dict) -> None:
        demo = demo_of(data)
        demo["run"]["dirty"] = dirty
        for row in demo["steps"]:
            if row["id"] in steps:
                row["source_sha256"] = "0" * 64
    edit(path, change)
    return path


def note_after_heading(html: str) -> list[tuple[str, bool]]:
    """Each per-GPU block of a page, in page order: its GPU and whether the as-of note opens it."""
    return [(gpu, bool(note)) for gpu, note in re.findall(
        r'<p class="[^"]*stepwise-gpu-heading[^"]*">([^<]*)</p>\s*(<div class="[^"]*stepwise-as-of)?', html)]


def pending(project: Path, text: str) -> None:
    (project / "measurements" / "pending.toml").write_text(text, encoding="utf-8")


# -- which dataset is which -----------------------------------------------------------------------

def test_the_reference_gpu_is_the_h200_by_default_and_leads_the_recorded_files(project):
    assert REFERENCE_GPU == "nvidia-h200"
    reference = synth.fixture_measurement()
    for slug, name in (("nvidia-h200", "FIXTURE H200 (not a measurement)"),
                       ("nvidia-h100-80gb-hbm3", "FIXTURE H100 (not a measurement)")):
        synth.write_json(project / "measurements" / f"{slug}.json", synth.second_gpu(reference, name, slug))
    with_b(project)
    datasets = load(project)
    assert [d.slug for d in datasets] == ["nvidia-h200", A, B, "nvidia-h100-80gb-hbm3"]
    assert [(d.is_reference, d.is_second_gpu) for d in datasets] == [(True, False)] + [(False, True)] * 3
    # the real recorded files: the H200's first, the H100 a second GPU
    real = [Dataset({"chapters": []}, data, synth.REPO, path)
            for path, data in measurement_files(synth.REPO / "docs" / "measurements", synth.SCHEMA)]
    recorded = Datasets(real)
    assert recorded.reference.slug == "nvidia-h200" and recorded.reference.is_reference
    assert "nvidia-h100-80gb-hbm3" in [d.slug for d in recorded if d.is_second_gpu]


@pytest.mark.parametrize("environment, expected", [
    ({}, REFERENCE_GPU),
    ({"STEPWISE_REFERENCE_GPU": B}, B),
    ({"STEPWISE_PRIMARY_GPU": B}, B),  # its former name
])
def test_conf_py_takes_the_reference_gpu_from_data_py_or_the_environment(monkeypatch, environment, expected):
    for name in ("STEPWISE_REFERENCE_GPU", "STEPWISE_PRIMARY_GPU"):
        monkeypatch.delenv(name, raising=False)
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    assert runpy.run_path(str(synth.REPO / "conf" / "conf.py"))["stepwise_reference_gpu"] == expected


def test_the_reference_gpus_recorded_file_and_fresh_files_are_never_second_gpus(project, tmp_path):
    with_b(project)
    # fresh files of both GPUs: the reference one first, neither a second GPU
    fresh = load(project, source="fresh")
    assert [(d.slug, d.is_reference, d.is_second_gpu) for d in fresh] == [(A, True, False), (B, False, False)]
    # a fresh file of A beside the recorded file of B, the reference GPU: A leads, B must still be current
    folder = tmp_path / "fresh"
    folder.mkdir()
    shutil.copy(project / "measurements" / "fixture-gpu.json", folder)
    mixed = load(project, folder, source="fresh", recorded=project / "measurements", reference_gpu=B)
    assert [(d.slug, d.source, d.is_reference, d.is_second_gpu) for d in mixed] == [
        (A, "fresh", True, False), (B, "recorded", False, False)]


# -- a step changed after a second GPU recorded it -------------------------------------------------

def test_a_second_gpus_stale_rows_are_no_problem_and_carry_the_note(project):
    changed_after(with_b(project), "02_vector")
    datasets = load(project)
    first, second = datasets
    assert datasets.problems() == []
    demo = second.chapter("demo")
    assert [step["id"] for step, _state in demo.stale_steps()] == ["02_vector"]
    assert fmt.as_of_note(demo) == NOTE_B
    assert fmt.as_of_note(second.chapter("gemm")) == "" and fmt.as_of_note(first.chapter("demo")) == ""
    # the rows stay, marked stale as before
    rows = fmt.step_rows(demo, "batch", N)
    assert [r.id for r in rows if "stepwise-stale" in r.classes] == ["02_vector"]
    assert rows[1].cells["median"].text == "10.0 \u00b5s"


def test_the_note_names_every_changed_step_and_a_tree_with_uncommitted_changes(project):
    changed_after(with_b(project), "01_naive", "02_vector", dirty=True)
    assert fmt.as_of_note(load(project).all[1].chapter("demo")) == (
        "FIXTURE GPU B (not a measurement): measured at commit f1xtur2 (2000-01-02, with uncommitted changes), "
        "before steps 01_naive and 02_vector changed; not re-measured. The steps' sources then: "
        "`git show f1xtur2:snippets/demo/01_naive.cuh`, `git show f1xtur2:snippets/demo/02_vector.cuh`.")


@needs_doxygen
def test_a_step_changed_after_a_second_gpus_recording_renders_as_of_it(project):
    changed_after(with_b(project), "02_vector")
    cite_b(project)  # a number of B's changed step in the prose
    proc = build_docs(project, "--strict")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "fixture-gpu.json (recorded; FIXTURE GPU (not a measurement), reference)" in proc.stdout
    assert f"  demo: {NOTE_B}" in proc.stdout
    html, text = page(project, gap="")
    a, b = synth.FIXTURE_GPU, synth.FIXTURE_GPU_B
    # the blocks of B that show step 02_vector open with the note: the tables (each timing, and :timing:), the
    # plot, the accuracy table and 02_vector's section; not the sweep (01_naive and the empty launch), the run,
    # nor 01_naive's section. A's blocks never.
    assert note_after_heading(html) == [
        (a, False), (b, True), (a, False), (b, True), (a, False), (b, True), (a, False), (b, False),
        (a, False), (b, True), (a, False), (b, False), (a, False),
        (a, False), (b, False), (a, False), (b, True)]
    assert text.count(NOTE_B.replace("`", "").replace("'", "\u2019")) == 5  # the page's apostrophe
    assert '<code class="docutils literal notranslate"><span class="pre">git</span>' in html  # set as code
    # the rows stay, marked stale; the step's "Stale" warning is the note now
    assert 'class="stepwise-stale' in html and "Stale: source changed" not in text
    # the front page: B's cells of the demo chapter, marked, the note as the tooltip of "as of f1xtur2"
    summary = html[html.index('<table class="stepwise-data stepwise-summary stepwise-gpus-2'):]
    summary = summary[:summary.index("</table>")]
    demo_row = summary[summary.index("FIXTURE chapter (not real)"):]
    demo_row = demo_row[:demo_row.index("</tr>")]
    assert demo_row.count("stepwise-as-of") == len(["first", "final", "speedup", "share", "vs library"]) + 1
    assert re.search(r'<abbr class="[^"]*stepwise-as-of-label[^"]*" title="FIXTURE GPU B \(not a measurement\): '
                     r'measured at commit f1xtur2 \(2000-01-02\), before step 02_vector changed;[^"]*">'
                     r'as of f1xtur2</abbr>', demo_row)
    assert summary.count("stepwise-as-of-label") == 1  # not the gemm chapter's, nor A's
    # the number of B's changed step: marked stale, its tooltip ends with the note
    assert re.search(r'stepwise-stale[^"]*" title="median time, demo/02_vector, timing single_cold, '
                     r'n = 1048576; Measured on FIXTURE GPU B[^"]*\. FIXTURE GPU B \(not a measurement\): '
                     r'measured at commit f1xtur2', html)


@needs_doxygen
def test_the_same_change_on_the_reference_gpu_fails_the_strict_build(project):
    changed_after(with_b(project), "02_vector")
    proc = build_docs(project, "--strict", "--reference-gpu", B)
    assert proc.returncode != 0
    assert "stale measurement: demo/02_vector" in proc.stderr and "fixture-gpu-b.json" in proc.stderr
    # without --strict: marked as before, the step's warning rather than the note
    proc = build_docs(project, "--reference-gpu", B)
    assert proc.returncode == 0, proc.stderr
    _html, text = page(project)
    assert text.count("Stale: source changed since measured") == 1 and "measured at commit f1xtur2" not in text


def test_stale_rows_of_the_reference_gpu_or_a_fresh_file_are_problems(project):
    changed_after(with_b(project), "02_vector")
    assert [(p.kind, p.step) for p in load(project, reference_gpu=B).problems()] == [("stale", "02_vector")]
    assert [(p.kind, p.step) for p in load(project, source="fresh").problems()] == [("stale", "02_vector")]


# -- a step added after a second GPU recorded the chapter ------------------------------------------

def added_after(path: Path, step: str) -> Path:
    """The measurement file ``path`` as if ``step`` of the demo chapter had been added after it was recorded (no
    row of it), its demo run of a clean tree."""
    def change(data: dict) -> None:
        demo = demo_of(data)
        demo["run"]["dirty"] = False
        demo["steps"] = [row for row in demo["steps"] if row["id"] != step]
    edit(path, change)
    return path


def test_a_step_added_after_a_second_gpus_recording_is_no_problem_and_carries_the_note(project):
    added_after(with_b(project), "02_vector")
    datasets = load(project)
    first, second = datasets
    assert datasets.problems() == []
    demo = second.chapter("demo")
    assert [step["id"] for step in demo.added_steps()] == ["02_vector"]
    assert first.chapter("demo").added_steps() == []
    assert fmt.as_of_note(demo) == ("FIXTURE GPU B (not a measurement): measured at commit f1xtur2 (2000-01-02), "
                                    "before step 02_vector was added; not re-measured.")
    # its final step is the last it measured, and the front page's tooltip says why
    assert demo.final_step_id() == "01_naive" and first.chapter("demo").final_step_id() == "02_vector"
    headline = fmt.headline(demo)
    assert headline.final_id == "01_naive" and headline.final is not None
    assert headline.final_note() == "02_vector was added after FIXTURE GPU B (not a measurement) measured the chapter"
    # the same file as the reference GPU's: the step's rows are missing
    assert [(p.kind, p.step) for p in load(project, reference_gpu=B).problems()] == [("missing", "02_vector")]


def test_the_note_names_changed_and_added_steps_together(project):
    changed_after(added_after(with_b(project), "02_vector"), "01_naive")
    assert fmt.as_of_note(load(project).all[1].chapter("demo")) == (
        "FIXTURE GPU B (not a measurement): measured at commit f1xtur2 (2000-01-02), before step 01_naive changed "
        "and step 02_vector was added; not re-measured. The step's source then: "
        "`git show f1xtur2:snippets/demo/01_naive.cuh`.")


# -- a step renamed after a second GPU recorded it (a split or a renumbering) ---------------------------

def measured_as(path: Path, step: str, former: str) -> Path:
    """The measurement file ``path`` as if the demo chapter's ``step`` had been ``former`` (its id and file) when it
    was recorded, its demo run of a clean tree."""
    def change(data: dict) -> None:
        demo = demo_of(data)
        demo["run"]["dirty"] = False
        for row in demo["steps"]:
            if row["id"] == step:
                row["id"] = former
                row["file"] = row["file"].replace(step, former)
    edit(path, change)
    return path


def renamed(project: Path, step: str, *former: str) -> None:
    """The fixture registry with the demo chapter's ``step`` formerly ``former``."""
    def change(data: dict) -> None:
        next(s for s in demo_of(data)["steps"] if s["id"] == step)["formerly"] = list(former)
    edit(project / "registry.json", change)


def test_a_second_gpus_rows_of_a_renamed_step_are_that_steps_as_of_their_commit(project):
    measured_as(with_b(project), "02_vector", "02_vectorized")
    # without the registry's word, the rows under the old id are nobody's: the step reads as added since
    assert [step["id"] for step in load(project).all[1].chapter("demo").added_steps()] == ["02_vector"]
    renamed(project, "02_vector", "02_older_name", "02_vectorized")
    datasets = load(project)
    assert datasets.problems() == []
    demo = datasets.all[1].chapter("demo")
    assert demo.added_steps() == [] and demo.states["02_vector"].rows
    assert demo.measured_as("02_vector") == "02_vectorized" and demo.measured_as("01_naive") == "01_naive"
    assert [step["id"] for step, _state in demo.stale_steps()] == ["02_vector"]  # from another file
    assert fmt.as_of_note(demo) == (
        "FIXTURE GPU B (not a measurement): measured at commit f1xtur2 (2000-01-02), before step 02_vector "
        "(measured as 02_vectorized) changed; not re-measured. The step's source then: "
        "`git show f1xtur2:snippets/demo/02_vectorized.cuh`.")
    rows = fmt.step_rows(demo, "batch", N)
    assert [r.id for r in rows if "stepwise-stale" in r.classes] == ["02_vector"]
    assert rows[1].cells["median"].text == "10.0 \u00b5s"


@pytest.mark.parametrize("formerly, message", [
    ({"02_vector": ["01_naive"]}, "step '02_vector' was formerly '01_naive', which is an id of the chapter now"),
    ({"01_naive": ["00_old"], "02_vector": ["00_old"]}, "steps '01_naive' and '02_vector' were both formerly '00_old'"),
])
def test_a_former_id_names_one_step_that_no_longer_has_it(project, formerly, message):
    for step, former in formerly.items():
        renamed(project, step, *former)
    with pytest.raises(DataError, match=re.escape(message)):
        load(project)


# -- a chapter a second GPU lacks entirely ---------------------------------------------------------

def without_gemm(path: Path) -> Path:
    """The measurement file ``path`` without the gemm chapter."""
    def change(data: dict) -> None:
        data["chapters"] = [c for c in data["chapters"] if c["id"] != "gemm"]
        data["run"]["measured"] = [c for c in data["run"]["measured"] if c != "gemm"]
    edit(path, change)
    return path


def test_a_second_gpu_lacking_a_chapter_still_needs_a_pending_entry(project):
    without_gemm(with_b(project))
    problems = load(project).problems()
    assert problems and {(p.kind, p.chapter) for p in problems} == {("missing", "gemm")}
    assert all("fixture-gpu-b.json" in str(p) for p in problems)
    pending(project, f'[{B}]\ngemm = "FIXTURE: not recorded on B yet"\n')
    assert load(project).problems() == []


@needs_doxygen
def test_a_second_gpu_lacking_a_chapter_fails_strict_without_a_pending_entry(project):
    without_gemm(with_b(project))
    proc = build_docs(project, "--strict")
    assert proc.returncode != 0
    assert "missing measurement: gemm/" in proc.stderr and "fixture-gpu-b.json" in proc.stderr
    pending(project, f'[{B}]\ngemm = "FIXTURE: not recorded on B yet"\n')
    proc = build_docs(project, "--strict")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    _html, text = page(project, "gemm.html")
    assert f"Not recorded on {synth.FIXTURE_GPU_B} yet" in text and "FIXTURE: not recorded on B yet" in text


# -- a size added after a second GPU recorded the chapter --------------------------------------------

def size_added(project: Path) -> None:
    """The fixture registry with a size added to every step of the demo chapter, which no file has rows at."""
    def change(data: dict) -> None:
        for step in demo_of(data)["steps"]:
            step["sizes"].append({"n": 999 * 1001, "problem": "999 x 1001 float", "shape": [999, 1001]})
    edit(project / "registry.json", change)


def test_a_size_added_after_a_second_gpus_recording_is_no_problem_there_and_carries_the_note(project):
    edit(with_b(project), lambda data: demo_of(data)["run"].update(dirty=False))  # recorded from a clean tree
    size_added(project)
    reference, second = load(project).all
    demo = second.chapter("demo")
    assert [size["n"] for size in demo.added_sizes()] == [999 * 1001]
    assert second.problems() == []
    assert fmt.as_of_note(demo) == ("FIXTURE GPU B (not a measurement): measured at commit f1xtur2 (2000-01-02), "
                                    "before the size 999 × 1001 was added; not re-measured.")
    # the reference GPU's file must have it: its rows there are missing
    assert reference.chapter("demo").added_sizes() == []
    missing = [(p.kind, p.step) for p in reference.problems()]
    assert ("missing", "01_naive") in missing and ("missing", "02_vector") in missing
