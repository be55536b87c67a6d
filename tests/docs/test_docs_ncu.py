"""Reading Nsight Compute CSV files (stepwise_docs.ncu), with FIXTURE files only.

tests/docs/fixtures/project/measurements/logs/fixture-gpu-demo-ncu.csv holds made-up round
numbers in the format of ``ncu --csv --print-units base``; the error cases are edits of it.
"""
from __future__ import annotations

import math
from pathlib import Path

import pytest

import synth
from stepwise_docs import ncu
from stepwise_docs.data import DataError, Dataset

CSV_NAME = "fixture-gpu-demo-ncu.csv"


@pytest.fixture
def dataset(project) -> Dataset:
    return Dataset.load(project / "registry.json", project / "measurements", project)


@pytest.fixture
def csv_path(project) -> Path:
    return project / "measurements" / "logs" / CSV_NAME


def edited(csv_path: Path, edit) -> Path:
    """The fixture CSV with ``edit(lines) -> lines`` applied, written next to it."""
    lines = csv_path.read_text(encoding="utf-8").splitlines(keepends=True)
    out = csv_path.with_name("edited-" + csv_path.name)
    out.write_text("".join(edit(lines)), encoding="utf-8")
    return out


def counts_of(dataset: Dataset, path: Path, first_only: bool = False) -> dict[str, ncu.StepCounts]:
    chapter = dataset.chapter("demo")
    return {c.step["id"]: c for c in ncu.step_counts(chapter, ncu.load_csv(path), path, first_only)}


# -- good input ---------------------------------------------------------------------------

def test_fixture_file_is_labelled(csv_path):
    assert csv_path.read_text(encoding="utf-8").startswith("==FIXTURE==")


def test_launches_and_metrics(csv_path):
    launches = ncu.load_csv(csv_path)
    assert [launch.id for launch in launches] == [0, 1, 2]
    assert launches[0].threads == 1024 * 256 and launches[1].warps == 4 * 256 // 32
    # thousands separators, and every required metric (the extra sm__cycles one is ignored)
    assert launches[0].metrics["l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum"] == 32768
    assert set(launches[2].metrics) == set(ncu.METRICS)


def test_sums_over_all_launches_of_a_step(dataset, csv_path):
    naive = counts_of(dataset, csv_path)["01_naive"]
    assert naive.value("launches") == 2
    assert naive.value("ld_requests") == 8192 + 32
    assert naive.value("ld_sectors") == 32768 + 128
    assert naive.value("sectors_per_request") == pytest.approx(4.0)
    assert naive.value("st_sectors") == 32768 + 128
    assert naive.value("bank_conflicts") == 15  # loads and stores
    assert naive.value("instructions") == 101000
    assert naive.value("dram_bytes") == 4194304 + 4096
    # instruction-weighted: (32 x 100000 + 16 x 1000) / 101000 active threads, over 32
    assert naive.value("warp_efficiency") == pytest.approx((32 * 100000 + 16 * 1000) / 101000 / 32)
    assert naive.value("instructions_per_warp") == pytest.approx(101000 / (8192 + 32))
    assert ncu.format_field(naive, "warp_efficiency") == "99.5 %"
    assert ncu.format_field(naive, "ld_requests") == "8,224"
    assert ncu.format_field(naive, "sectors_per_request") == "4.00"
    assert ncu.format_field(naive, "instructions_per_warp") == "12.28"
    assert ncu.format_field(naive, "dram_bytes") == "4.00 MiB"


def test_first_launch_only(dataset, csv_path):
    naive = counts_of(dataset, csv_path, first_only=True)["01_naive"]
    assert naive.value("launches") == 1
    assert naive.value("ld_requests") == 8192
    assert ncu.format_field(naive, "warp_efficiency") == "100 %"


def test_full_and_shortened_namespaces_both_match(dataset, csv_path):
    counts = counts_of(dataset, csv_path)
    assert [c.value("launches") for c in counts.values()] == [2, 1]  # registry order
    assert counts["02_vector"].value("ld_requests") == 2048


@pytest.mark.parametrize("name, scope", [
    ("void neighbored_pairs::reduce_kernel<int>(T1 *, T1 *, int)", ["neighbored_pairs"]),
    ("void completely_unrolled::reduce_kernel<256, int>(const T2 *, T2 *, int)", ["completely_unrolled"]),
    ("void a::b::k<(int)256, float>(const T2 *)", ["a", "b"]),
    ("void stepwise::x::(anonymous namespace)::k(int)", ["stepwise", "x", "{anonymous}"]),
    ("reduce_kernel", []),
])
def test_kernel_scope(name, scope):
    assert ncu.kernel_scope(name) == scope


@pytest.mark.parametrize("text, value", [
    ("16,783,616", 16783616.0), ("0", 0.0), ("23.84", 23.84), ("1,234.5", 1234.5), ("1e3", 1000.0),
])
def test_parse_number(text, value):
    assert ncu.parse_number(text) == value


@pytest.mark.parametrize("text", ["n/a", "", "1,23", "12 %", "1.2.3"])
def test_parse_number_rejects(text):
    with pytest.raises(ValueError):
        ncu.parse_number(text)


def test_same_session_needs_slug_chapter_and_recorded_numbers(csv_path):
    gpu = {"slug": "fixture-gpu"}
    assert ncu.same_session(csv_path, gpu, "recorded", "demo")
    assert not ncu.same_session(csv_path, gpu, "fresh", "demo")  # measured in this build
    assert not ncu.same_session(csv_path, gpu, "recorded", "other")
    assert not ncu.same_session(csv_path.with_name("other-demo-ncu.csv"), gpu, "recorded", "demo")
    # a slug that is only a prefix of the file's GPU part does not claim it
    assert not ncu.same_session(csv_path, {"slug": "fixture"}, "recorded", "demo")
    assert not ncu.same_session(csv_path, {}, "recorded", "demo")


def test_nan_is_shown_as_a_dash(dataset, csv_path):
    data = edited(csv_path, lambda lines: [
        line.replace('"l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum","","2,048"',
                     '"l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum","","0"') for line in lines])
    vector = counts_of(dataset, data)["02_vector"]
    assert math.isnan(vector.value("sectors_per_request"))
    assert ncu.format_field(vector, "sectors_per_request") == "\u2014"


# -- strict parsing: every problem is a one-line error that names the file -----------------

def assert_error(exc: pytest.ExceptionInfo, *needles: str):
    message = str(exc.value)
    assert "\n" not in message
    for needle in needles:
        assert needle in message, message


def test_missing_file(tmp_path):
    with pytest.raises(DataError) as exc:
        ncu.load_csv(tmp_path / "nope.csv")
    assert_error(exc, "Nsight Compute file", "nope.csv", "does not exist")


def test_unknown_kernel_namespace(dataset, csv_path):
    bad = edited(csv_path, lambda lines: [line.replace("void naive::", "void mystery::")
                                          for line in lines])
    with pytest.raises(ncu.NcuError) as exc:
        counts_of(dataset, bad)
    assert_error(exc, bad.name, "launch 0", "mystery::scale_kernel",
                 "not one of chapter 'demo'", "stepwise::demo::naive")


def test_missing_metric(csv_path):
    bad = edited(csv_path, lambda lines: [line for line in lines
                                          if not (line.startswith('"2"') and "dram__bytes" in line)])
    with pytest.raises(ncu.NcuError) as exc:
        ncu.load_csv(bad)
    assert_error(exc, bad.name, "launch 2", "has no dram__bytes_read.sum", "--metrics")


def test_step_without_launches(dataset, csv_path):
    bad = edited(csv_path, lambda lines: [line for line in lines if not line.startswith('"2"')])
    with pytest.raises(ncu.NcuError) as exc:
        counts_of(dataset, bad)
    assert_error(exc, bad.name, "no kernel launch of demo step(s) 02_vector")


def test_scaled_unit(csv_path):
    bad = edited(csv_path, lambda lines: [line.replace('"byte","4,096"', '"Kbyte","4.10"')
                                          for line in lines])
    with pytest.raises(ncu.NcuError) as exc:
        ncu.load_csv(bad)
    assert_error(exc, bad.name, "'Kbyte'", "--print-units base")


def test_value_that_is_not_a_number(csv_path):
    bad = edited(csv_path, lambda lines: [line.replace('"inst","25,000"', '"inst","n/a"')
                                          for line in lines])
    with pytest.raises(ncu.NcuError) as exc:
        ncu.load_csv(bad)
    assert_error(exc, bad.name, "smsp__inst_executed.sum of launch 2", "not a number: 'n/a'")


def test_missing_column(csv_path):
    bad = edited(csv_path, lambda lines: [line.replace('"Grid Size"', '"Grid"') for line in lines])
    with pytest.raises(ncu.NcuError) as exc:
        ncu.load_csv(bad)
    assert_error(exc, bad.name, "not an ncu --csv header", "'Grid Size'")


def test_not_a_csv_at_all(tmp_path):
    path = tmp_path / "empty.csv"
    path.write_text("==PROF== nothing profiled\n")
    with pytest.raises(ncu.NcuError) as exc:
        ncu.load_csv(path)
    assert_error(exc, "empty.csv", "no CSV header")


def test_one_id_two_kernels(csv_path):
    def edit(lines):
        out, done = [], False
        for line in lines:
            if line.startswith('"1"') and not done:
                line, done = line.replace("naive::scale_kernel", "naive::other_kernel"), True
            out.append(line)
        return out
    bad = edited(csv_path, edit)
    with pytest.raises(ncu.NcuError) as exc:
        ncu.load_csv(bad)
    assert_error(exc, bad.name, "launch ID 1 was")


def test_ragged_row(csv_path):
    bad = edited(csv_path, lambda lines: lines + ['"3","1"\n'])
    with pytest.raises(ncu.NcuError) as exc:
        ncu.load_csv(bad)
    assert_error(exc, bad.name, "has 2 fields")


def test_unknown_field(dataset, csv_path):
    counts = counts_of(dataset, csv_path)["01_naive"]
    with pytest.raises(ncu.NcuError, match="unknown Nsight Compute field"):
        counts.value("colour")


def test_the_recorded_file_parses_against_the_real_registry():
    """The committed CSV (docs/measurements/logs) matches the registry, if the build made one."""
    registry = synth.REPO / "build" / "registry.json"
    csvs = sorted((synth.REPO / "docs" / "measurements" / "logs").glob("*-ncu.csv"))
    if not registry.is_file() or not csvs:
        pytest.skip("no build/registry.json or no recorded Nsight Compute file")
    ds = Dataset.load(registry, synth.REPO / "docs" / "measurements", synth.REPO)
    for path in csvs:
        chapter_id = path.stem.removesuffix("-ncu").rsplit("-", 1)[-1]
        if chapter_id not in ds.chapters:
            continue
        counts = ncu.step_counts(ds.chapter(chapter_id), ncu.load_csv(path), path)
        assert [c.step["id"] for c in counts] == [s["id"] for s in ds.chapter(chapter_id).steps]
        assert all(c.value("launches") >= 1 for c in counts)
