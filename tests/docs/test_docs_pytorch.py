"""PyTorch's rows beside a chapter's final step (stepwise_docs.pytorch): where the file lies, what it must
hold, and how its rows meet the measurement file's. The FIXTURE project's demo chapter stands in."""
from __future__ import annotations

import json
import re
from pathlib import Path
from types import SimpleNamespace

import pytest

import synth
from stepwise_docs import pytorch
from stepwise_docs.data import DataError, load_datasets

N = 1048576  # the FIXTURE demo chapter's main size (fixtures/make_fixtures.py)


def reference(project: Path):
    return load_datasets(project / "registry.json", project / "measurements", project).reference


def pytorch_file(project: Path, **change) -> Path:
    row = {"chapter": "demo", "id": "pytorch_scale", "call": "torch.mul(x, 2)", "n": N,
           "problem": "1024 x 1024 float (fixture)", "median_ms": 0.04, "min_ms": 0.039, "max_ms": 0.05,
           "samples": 60, "max_error_over_max_reference": 0.0, "validated": True}
    data = {"schema": 1, "generator": "conf/pytorch_baselines.py", "gpu": {"name": synth.FIXTURE_GPU,
            "slug": "fixture-gpu"}, "torch": "FIXTURE 0.0", "cuda": "13.0", "cudnn": 91900,
            "date": "2026-11-28T13:00:00Z", "commit": "abc1234def", "timing": "FIXTURE timing",
            "rows": [row, {**row, "chapter": "gemm"}]}
    for key, value in change.items():
        (row if key in row else data)[key] = value
    path = project / "measurements" / "pytorch" / "fixture-gpu.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))
    return path


def test_the_file_lies_beside_the_measurement_file_and_its_rows_meet_the_final_steps(project):
    ds = reference(project)
    path = pytorch.path_of(ds)
    assert path == project / "measurements" / "pytorch" / "fixture-gpu.json" and not path.is_file()
    pytorch_file(project)
    data = pytorch.load(path, ds.slug)
    chapter = ds.chapter("demo")
    (row, final, cudnn), = pytorch.rows_of(chapter, data)  # the gemm chapter's row is not the demo's
    assert row["id"] == "pytorch_scale" and cudnn is None
    assert final == chapter.step_row(chapter.steps[-1]["id"], N, chapter.headline["timing"])
    text = pytorch.provenance(data, chapter)
    assert "PyTorch FIXTURE 0.0 (CUDA 13.0, cuDNN 91900)" in text and "commit abc1234" in text
    # cuDNN is named beside the final step only in a chapter that has a library row.
    assert ("cuDNN's times" in text) == bool(chapter.baselines)
    assert pytorch.beside(chapter) == ("the final step and cuDNN" if chapter.baselines else "the final step")
    without_library = SimpleNamespace(baselines=[])  # a chapter such as cross-entropy's
    assert pytorch.beside(without_library) == "the final step"
    assert "The final step's times are" in pytorch.provenance(data, without_library)


@pytest.mark.parametrize("change, needle", [
    ({"schema": 2}, "schema 2"),
    ({"gpu": {"slug": "other-gpu"}}, "its GPU is 'other-gpu'"),
    ({"median_ms": "fast"}, "rows[0].median_ms is missing or not a float"),
    ({"validated": 1}, "rows[0].validated is missing or not a bool"),
    ({"min_ms": 0.06}, "times out of order"),
    ({"rows": "none"}, "rows is missing or not a list"),
])
def test_a_bad_file_is_one_clear_error(project, change, needle):
    path = pytorch_file(project, **change)
    with pytest.raises(DataError, match=re.escape(needle)):
        pytorch.load(path, "fixture-gpu")


def test_a_row_at_a_size_the_final_step_lacks_is_an_error(project):
    path = pytorch_file(project, n=7)
    ds = reference(project)
    with pytest.raises(DataError, match="not a size of demo/"):
        pytorch.rows_of(ds.chapter("demo"), pytorch.load(path, ds.slug))


def test_not_json_is_an_error(project):
    path = pytorch_file(project)
    path.write_text("{")
    with pytest.raises(DataError, match="not a readable JSON file"):
        pytorch.load(path, "fixture-gpu")


def test_recorded_pytorch_files_are_valid_and_of_recorded_gpus():
    """Every committed PyTorch file loads, names a GPU with a recorded measurement file, and, where the
    build's step registry is there, times sizes of its chapters' final steps."""
    folder = synth.REPO / "docs" / "measurements" / pytorch.FOLDER
    files = sorted(folder.glob("*.json"))
    if not files:
        pytest.skip("no recorded PyTorch file yet")
    registry_path = synth.REPO / "build" / "registry.json"
    datasets = (load_datasets(registry_path, synth.REPO / "docs" / "measurements", synth.REPO)
                if registry_path.is_file() else None)
    for path in files:
        assert (folder.parent / path.name).is_file(), f"{path}: no measurement file of its GPU"
        data = pytorch.load(path, path.stem)
        if datasets is not None:
            ds = next(d for d in datasets if d.slug == path.stem)
            for chapter_id in sorted({row["chapter"] for row in data["rows"]}):
                assert pytorch.rows_of(ds.chapter(chapter_id), data)
