"""docs/_ext/stepwise_docs/resources.py: the per-kernel rows the pages show (no Sphinx, no GPU)."""
from __future__ import annotations

import synth
from stepwise_docs import resources
from stepwise_docs.data import Dataset


def dataset(registry: dict, measurement: dict | None = None) -> Dataset:
    return Dataset(registry, measurement, synth.FIXTURE_PROJECT)


def test_block_text():
    assert resources.block_text([32, 8, 1]) == "32 \u00d7 8"
    assert resources.block_text([256, 1, 1]) == "256"
    assert resources.block_text([1, 512, 1]) == "1 \u00d7 512"
    assert resources.block_text([4, 4, 4]) == "4 \u00d7 4 \u00d7 4"


def test_rows_show_the_compiled_counts_and_occupancy():
    ds = dataset(synth.fixture_registry(), synth.fixture_measurement())
    chapter = ds.chapter("demo")
    rows = resources.kernel_rows(ds, chapter, chapter.step("02_vector"))
    assert len(rows) == 1
    row = rows[0]
    assert (row.name, row.block, row.arch, row.registers, row.shared, row.local) == \
        ("scale_kernel", "256", "sm_90", "16", "0", "32 B")
    assert (row.blocks_per_sm, row.occupancy, row.limited_by) == ("8", "100 %", "warps")
    assert not row.notes and not row.missing and not row.spills


def test_spills_and_unknown_architectures_are_said():
    registry = synth.fixture_registry()
    compiled = registry["chapters"][0]["steps"][0]["kernels"][0]["compiled"][0]
    compiled.update(spill_store_bytes=8, spill_load_bytes=12, stack_frame_bytes=24, occupancy=None,
                    arch="sm_999")
    ds = dataset(registry)
    chapter = ds.chapter("demo")
    row = resources.kernel_rows(ds, chapter, chapter.step("01_naive"))[0]
    assert row.spills and row.local == "24 B (spills: 8 B stored, 12 B loaded)"
    assert row.occupancy == "\u2014" and "no limits known for sm_999" in row.limited_by


def test_the_measuring_gpus_architecture_is_preferred():
    registry = synth.fixture_registry()
    kernel = registry["chapters"][0]["steps"][0]["kernels"][0]
    other = dict(kernel["compiled"][0], arch="sm_80", registers=99)
    kernel["compiled"].insert(0, other)
    ds = dataset(registry, synth.fixture_measurement())  # compute capability 9.0
    chapter = ds.chapter("demo")
    assert resources.kernel_rows(ds, chapter, chapter.step("01_naive"))[0].registers == "10"
    ds = dataset(registry)  # no measurement: the first architecture compiled
    chapter = ds.chapter("demo")
    assert resources.kernel_rows(ds, chapter, chapter.step("01_naive"))[0].registers == "99"
    assert resources.compiled_by(ds) == "FIXTURE nvcc, sm_80, sm_90"


def test_differences_from_the_measured_binary_are_noted():
    measurement = synth.fixture_measurement()
    for row in measurement["chapters"][0]["steps"]:
        row["resources"][0].update(local_bytes=64, blocks_per_sm=4)
    ds = dataset(synth.fixture_registry(), measurement)
    chapter = ds.chapter("demo")
    notes = resources.kernel_rows(ds, chapter, chapter.step("01_naive"))[0].notes
    assert notes == ["local bytes: 64 in the measured binary on FIXTURE GPU (not a measurement)",
                     "blocks per SM: 4 in the measured binary on FIXTURE GPU (not a measurement)"]


def test_a_kernel_without_counts_is_a_problem_and_a_missing_row():
    registry = synth.fixture_registry()
    del registry["chapters"][0]["steps"][0]["kernels"][0]["compiled"]
    ds = dataset(registry, synth.fixture_measurement())
    problems = [p for p in ds.problems() if p.kind == "no_resources"]
    assert [(p.chapter, p.step) for p in problems] == [("demo", "01_naive")]
    chapter = ds.chapter("demo")
    assert resources.kernel_rows(ds, chapter, chapter.step("01_naive"))[0].missing
