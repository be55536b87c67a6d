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
from stepwise_docs.data import DataError, Dataset, load_datasets

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
    # every metric but those added after the fixture was written (ncu.LATE_METRICS; it has the
    # DRAM write one)
    assert set(launches[2].metrics) == set(ncu.METRICS) - set(ncu.LATE_METRICS) | {"dram__bytes_write.sum"}
    assert launches[0].block == (256, 1, 1)


def test_sums_over_all_launches_of_a_step(dataset, csv_path):
    naive = counts_of(dataset, csv_path)["01_naive"]
    assert naive.value("launches") == 2
    assert naive.value("ld_requests") == 8192 + 32
    assert naive.value("ld_sectors") == 32768 + 128
    assert naive.value("sectors_per_request") == pytest.approx(4.0)
    assert naive.value("st_sectors") == 32768 + 128
    assert naive.value("bank_conflicts") == 15  # loads and stores
    assert naive.value("instructions") == 101000
    assert naive.value("dram_read_bytes") == 4194304 + 4096
    assert naive.value("dram_write_bytes") == 4194304 + 2048
    assert naive.value("dram_bytes") == 4194304 + 4096 + 4194304 + 2048  # read + written
    # instruction-weighted: (32 x 100000 + 16 x 1000) / 101000 active threads, over 32
    assert naive.value("warp_efficiency") == pytest.approx((32 * 100000 + 16 * 1000) / 101000 / 32)
    assert naive.value("instructions_per_warp") == pytest.approx(101000 / (8192 + 32))
    assert ncu.format_field(naive, "warp_efficiency") == "99.5 %"
    assert ncu.format_field(naive, "ld_requests") == "8,224"
    assert ncu.format_field(naive, "sectors_per_request") == "4.00"
    assert ncu.format_field(naive, "instructions_per_warp") == "12.28"
    assert ncu.format_field(naive, "dram_read_bytes") == "4.00 MiB"
    assert ncu.format_field(naive, "dram_bytes") == "8.01 MiB"


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

assert_error = synth.assert_one_line_message  # one line, every needle in it


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


def test_a_file_without_the_late_write_metric_parses_but_its_fields_fail(dataset, csv_path):
    """Files recorded before dram__bytes_write.sum was profiled: every other field still reads."""
    old = edited(csv_path, lambda lines: [line for line in lines if "dram__bytes_write" not in line])
    counts = counts_of(dataset, old)["01_naive"]
    assert counts.value("dram_read_bytes") == 4194304 + 4096
    assert counts.value("ld_requests") == 8192 + 32
    for name in ("dram_bytes", "dram_write_bytes"):
        with pytest.raises(ncu.NcuError) as exc:
            counts.value(name)
        assert_error(exc, old.name, "launch 0", "has no dram__bytes_write.sum", "re-run make profile")


def test_the_profiler_asks_for_the_write_metric():
    assert "dram__bytes_write.sum" in ncu.METRICS and "dram__bytes_read.sum" in ncu.METRICS
    assert set(ncu.LATE_METRICS) <= set(ncu.METRICS)


def test_same_gpu_needs_slug_and_chapter_but_not_the_session(csv_path):
    gpu = {"slug": "fixture-gpu"}
    assert ncu.same_gpu(csv_path, gpu, "demo")
    assert not ncu.same_gpu(csv_path, gpu, "gemm")
    assert not ncu.same_gpu(csv_path, {"slug": "fixture"}, "demo")
    assert not ncu.same_gpu(csv_path, {}, "demo")


def test_step_without_launches(dataset, csv_path):
    bad = edited(csv_path, lambda lines: [line for line in lines if not line.startswith('"2"')])
    with pytest.raises(ncu.NcuError) as exc:
        counts_of(dataset, bad)
    assert_error(exc, bad.name, "no kernel launch of demo step(s) 02_vector")


@pytest.mark.parametrize("old, new, needles", [
    pytest.param('"byte","4,096"', '"Kbyte","4.10"', ["'Kbyte'", "--print-units base"], id="scaled_unit"),
    pytest.param('"inst","25,000"', '"inst","n/a"',
                 ["smsp__inst_executed.sum of launch 2", "not a number: 'n/a'"], id="value_not_a_number"),
    pytest.param('"Grid Size"', '"Grid"', ["not an ncu --csv header", "'Grid Size'"], id="missing_column"),
])
def test_bad_unit_value_or_header(csv_path, old, new, needles):
    bad = edited(csv_path, lambda lines: [line.replace(old, new) for line in lines])
    with pytest.raises(ncu.NcuError) as exc:
        ncu.load_csv(bad)
    assert_error(exc, bad.name, *needles)


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


def test_the_recorded_files_parse_against_the_real_registry():
    """Each committed CSV (docs/measurements/logs) matches the registry as its GPU's recorded file stands (a second
    GPU's without the steps added since it measured the chapter), if the build made a registry."""
    registry = synth.REPO / "build" / "registry.json"
    csvs = sorted((synth.REPO / "docs" / "measurements" / "logs").glob("*-ncu.csv"))
    if not registry.is_file() or not csvs:
        pytest.skip("no build/registry.json or no recorded Nsight Compute file")
    datasets = load_datasets(registry, synth.REPO / "docs" / "measurements", synth.REPO)
    for path in csvs:
        dataset = next(d for d in datasets if path.name.startswith(f"{d.slug}-"))
        chapter_id = path.name[len(dataset.slug) + 1:].removesuffix("-ncu.csv")
        if chapter_id not in dataset.chapters:
            continue
        chapter = dataset.chapter(chapter_id)
        counts = ncu.step_counts(chapter, ncu.load_csv(path), path)
        added = [s["id"] for s in chapter.added_steps()]
        assert [c.step["id"] for c in counts] == [s["id"] for s in chapter.steps if s["id"] not in added], path.name
        assert all(c.value("launches") >= 1 for c in counts)
        assert not added or dataset.is_second_gpu



# -- branch targets, achieved occupancy, block shapes (synthetic CSV text) -------------------

HEADER = ["ID", "Process ID", "Process Name", "Host Name", "Kernel Name", "Context", "Stream",
          "Block Size", "Grid Size", "Device", "CC", "Section Name", "Metric Name", "Metric Unit",
          "Metric Value"]
#: Units as ncu --print-units base prints them (CUDA 13.0's ncu on an H100: "branches" and "%").
UNITS = {"dram__bytes_read.sum": "byte", "dram__bytes_write.sum": "byte",
         "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum": "sector",
         "l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum": "sector", "smsp__inst_executed.sum": "inst",
         "smsp__sass_branch_targets.sum": "branches",
         "smsp__sass_branch_targets_threads_divergent.sum": "branches",
         "smsp__sass_branch_targets_threads_uniform.sum": "branches",
         "sm__warps_active.avg.pct_of_peak_sustained_active": "%", "gpu__time_duration.sum": "ns"}
NEW_METRICS = ("smsp__sass_branch_targets.sum", "smsp__sass_branch_targets_threads_divergent.sum",
               "smsp__sass_branch_targets_threads_uniform.sum",
               "sm__warps_active.avg.pct_of_peak_sustained_active")
OCC = "sm__warps_active.avg.pct_of_peak_sustained_active"


def launch_rows(launch_id: int, kernel: str, block: str, grid: str, values: dict[str, str],
                leave_out: tuple[str, ...] = ()) -> list[str]:
    """The CSV rows of one FIXTURE launch: every metric of ncu.METRICS ("0" unless in ``values``), but the
    launch's duration where ``values`` has none (a file profiled before durations were)."""
    rows = []
    for metric in sorted(ncu.METRICS):
        if metric in leave_out or (metric == ncu.DURATION and metric not in values):
            continue
        cells = [str(launch_id), "1", "fixture_tests", "127.0.0.1", kernel, "1", "7", block, grid, "0",
                 "9.0", "Command line profiler metrics", metric, UNITS.get(metric, ""),
                 values.get(metric, "0")]
        rows.append(",".join(f'"{c}"' for c in cells) + "\n")
    return rows


def write_csv(tmp_path: Path, rows: list[str], name: str = "fixture-gpu-x-ncu.csv") -> Path:
    path = tmp_path / name
    path.write_text("==FIXTURE== synthetic, made-up numbers\n" + ",".join(f'"{h}"' for h in HEADER)
                    + "\n" + "".join(rows), encoding="utf-8")
    return path


def one_chapter(chapter_id: str, steps: list[dict], root: Path):
    """A Chapter of a registry made of ``steps`` (no measurement file)."""
    return Dataset(synth.registry_for(steps, chapter_id), None, root).chapter(chapter_id)


DIV_KERNEL = "void stepwise::divergence::interleaved_branch::branch_kernel(const float *, float *, int)"


@pytest.fixture
def divergence(tmp_path):
    return one_chapter("divergence", [
        synth.step_entry("01_interleaved_branch", "stepwise::divergence::interleaved_branch",
                   [("branch_kernel", [256, 1, 1])])], tmp_path)


def test_branch_targets_uniformity_and_achieved_occupancy(tmp_path, divergence):
    rows = launch_rows(0, DIV_KERNEL, "(256, 1, 1)", "(4096, 1, 1)", {
        "smsp__sass_branch_targets.sum": "65,536",
        "smsp__sass_branch_targets_threads_divergent.sum": "32,768",
        "smsp__sass_branch_targets_threads_uniform.sum": "32,768", OCC: "87.79"})
    rows += launch_rows(1, DIV_KERNEL, "(256, 1, 1)", "(1024, 1, 1)", {
        "smsp__sass_branch_targets.sum": "8,192",
        "smsp__sass_branch_targets_threads_divergent.sum": "0",
        "smsp__sass_branch_targets_threads_uniform.sum": "8,192", OCC: "50"})
    path = write_csv(tmp_path, rows)
    launches = ncu.load_csv(path)
    assert launches[0].metrics[OCC] == 87.79 and launches[1].block == (256, 1, 1)
    counts = ncu.step_counts(divergence, launches, path)[0]
    assert counts.value("branch_targets") == 65536 + 8192
    assert counts.value("divergent_branches") == 32768
    assert counts.value("branch_uniformity") == pytest.approx((32768 + 8192) / (65536 + 8192))
    # the launches' mean weighted by their warps: 32,768 and 8,192 warps
    assert counts.value("achieved_occupancy") == pytest.approx((0.8779 * 32768 + 0.5 * 8192) / 40960)
    assert ncu.format_field(counts, "branch_targets") == "73,728"
    assert ncu.format_field(counts, "divergent_branches") == "32,768"
    assert ncu.format_field(counts, "branch_uniformity") == "55.6 %"
    assert ncu.format_field(counts, "achieved_occupancy") == "80.2 %"
    first = ncu.step_counts(divergence, launches, path, first_only=True)[0]
    assert ncu.format_field(first, "branch_uniformity") == "50.0 %"
    assert ncu.format_field(first, "achieved_occupancy") == "87.8 %"
    for name in ("branch_targets", "divergent_branches", "branch_uniformity", "achieved_occupancy"):
        assert name in ncu.FIELDS


def test_no_branches_is_a_dash(tmp_path, divergence):
    path = write_csv(tmp_path, launch_rows(0, DIV_KERNEL, "(256, 1, 1)", "(4, 1, 1)", {OCC: "12.5"}))
    counts = ncu.step_counts(divergence, ncu.load_csv(path), path)[0]
    assert math.isnan(counts.value("branch_uniformity"))
    assert ncu.format_field(counts, "branch_uniformity") == "\u2014"
    assert ncu.format_field(counts, "divergent_branches") == "0"
    assert ncu.format_field(counts, "achieved_occupancy") == "12.5 %"


def test_the_new_metrics_are_late_and_asked_for():
    for metric in NEW_METRICS:
        assert metric in ncu.METRICS and metric in ncu.LATE_METRICS
    assert {"branches", "%"} <= ncu.BASE_UNITS


@pytest.mark.parametrize("name, metric", [
    ("branch_targets", "smsp__sass_branch_targets.sum"),
    ("divergent_branches", "smsp__sass_branch_targets_threads_divergent.sum"),
    ("branch_uniformity", "smsp__sass_branch_targets.sum"),
    ("achieved_occupancy", OCC),
])
def test_a_file_recorded_before_the_new_metrics_fails_only_their_fields(tmp_path, divergence, name, metric):
    path = write_csv(tmp_path, launch_rows(0, DIV_KERNEL, "(256, 1, 1)", "(4, 1, 1)",
                                           {"smsp__inst_executed.sum": "100"}, leave_out=NEW_METRICS))
    counts = ncu.step_counts(divergence, ncu.load_csv(path), path)[0]
    assert counts.value("instructions") == 100  # the older fields still read
    with pytest.raises(ncu.NcuError) as exc:
        ncu.format_field(counts, name)
    assert_error(exc, path.name, "launch 0", f"has no {metric}", "re-run make profile")


def test_a_scaled_branch_unit_is_rejected(tmp_path):
    rows = [line.replace('"branches","0"', '"Kbranches","0"')
            for line in launch_rows(0, DIV_KERNEL, "(256, 1, 1)", "(4, 1, 1)", {})]
    path = write_csv(tmp_path, rows)
    with pytest.raises(ncu.NcuError) as exc:
        ncu.load_csv(path)
    assert_error(exc, path.name, "'Kbranches'", "--print-units base")


def occupancy_kernel(x: int, y: int) -> str:
    return (f"void stepwise::occupancy::sum_matrix_2d::sum_matrix_kernel<{x}, {y}>"
            "(const float *, const float *, float *, int, int)")


def occupancy_chapter(root: Path, shapes=((32, 32), (32, 16), (16, 16))):
    """Steps that are block shapes of one templated kernel: one file, one namespace."""
    return one_chapter("occupancy", [
        synth.step_entry(f"{i + 1:02d}_block_{x}x{y}", "stepwise::occupancy::sum_matrix_2d",
                   [(f"sum_matrix_kernel<{x}, {y}>", [x, y, 1])],
                   "snippets/occupancy/01_sum_matrix_2d.cuh", f"sum_matrix<{x}, {y}>")
        for i, (x, y) in enumerate(shapes)], root)


def test_steps_of_one_namespace_are_told_apart_by_block_shape(tmp_path):
    chapter = occupancy_chapter(tmp_path)
    rows = []
    for i, (x, y, occ) in enumerate([(32, 16, "90"), (16, 16, "80"), (32, 32, "70")]):
        rows += launch_rows(i, occupancy_kernel(x, y), f"({x}, {y}, 1)", "(128, 256, 1)", {OCC: occ})
    path = write_csv(tmp_path, rows)
    launches = ncu.load_csv(path)
    assert [launch.block for launch in launches] == [(32, 16, 1), (16, 16, 1), (32, 32, 1)]
    counts = {c.step["id"]: c for c in ncu.step_counts(chapter, launches, path)}
    assert list(counts) == ["01_block_32x32", "02_block_32x16", "03_block_16x16"]  # registry order
    assert [c.launches[0].id for c in counts.values()] == [2, 0, 1]
    assert ncu.format_field(counts["02_block_32x16"], "achieved_occupancy") == "90.0 %"
    assert ncu.step_of(chapter, occupancy_kernel(32, 16), (32, 16, 1))["id"] == "02_block_32x16"


def test_a_block_shape_of_no_step_is_an_error(tmp_path):
    chapter = occupancy_chapter(tmp_path)
    path = write_csv(tmp_path, launch_rows(0, occupancy_kernel(8, 8), "(8, 8, 1)", "(1, 1, 1)", {}))
    with pytest.raises(ncu.NcuError) as exc:
        ncu.step_counts(chapter, ncu.load_csv(path), path)
    assert_error(exc, path.name, "launch 0", "matches steps 01_block_32x32, 02_block_32x16, 03_block_16x16",
                 "none of them launch blocks of 8 x 8 x 1")


def test_a_block_shape_of_several_steps_is_an_error(tmp_path):
    chapter = occupancy_chapter(tmp_path, shapes=((32, 16), (32, 16)))
    path = write_csv(tmp_path, launch_rows(0, occupancy_kernel(32, 16), "(32, 16, 1)", "(1, 1, 1)", {}))
    with pytest.raises(ncu.NcuError) as exc:
        ncu.step_counts(chapter, ncu.load_csv(path), path)
    assert_error(exc, path.name, "several of them launch blocks of 32 x 16 x 1")
    with pytest.raises(ncu.NcuError, match="matches steps"):  # no block shape: the old error
        ncu.step_of(chapter, occupancy_kernel(32, 16))


def test_a_kernel_printed_without_namespace_is_matched_by_its_name(tmp_path):
    """Nsight Compute (CUDA 13.0, H100) printed the occupancy kernels as
    ``void sum_matrix_kernel<32, 32>(const float *, ...)``: no scope to match."""
    chapter = occupancy_chapter(tmp_path)
    rows = []
    for i, (x, y) in enumerate([(16, 16), (32, 32), (32, 16)]):
        bare = f"void sum_matrix_kernel<{x}, {y}>(const float *, const float *, float *, int, int)"
        rows += launch_rows(i, bare, f"({x}, {y}, 1)", "(128, 256, 1)", {OCC: "50"})
    path = write_csv(tmp_path, rows)
    counts = {c.step["id"]: c for c in ncu.step_counts(chapter, ncu.load_csv(path), path)}
    assert [c.launches[0].id for c in counts.values()] == [1, 2, 0]
    assert ncu.step_of(chapter, "void sum_matrix_kernel<32,16>(int)", (32, 16, 1))["id"] == "02_block_32x16"
    assert ncu.step_of(chapter, "void sum_matrix_kernel<8, 8>(int)", (8, 8, 1)) is None
    other = write_csv(tmp_path, launch_rows(0, "void other_kernel<32, 32>(int)", "(32, 32, 1)",
                                            "(1, 1, 1)", {}))
    with pytest.raises(ncu.NcuError) as exc:
        ncu.step_counts(chapter, ncu.load_csv(other), other)
    assert_error(exc, "launch 0", "'void other_kernel<32, 32>(int)'", "printed without one")


@pytest.mark.parametrize("name, bare", [
    ("void sum_matrix_kernel<32, 16>(const float *, int)", "sum_matrix_kernel<32, 16>"),
    ("void a::b::k<c::D<1>, 2>(int)", "k<c::D<1>, 2>"),
    ("a::(anonymous namespace)::k(int)", "k"),
    ("k", "k"),
])
def test_unqualified_name(name, bare):
    assert ncu.unqualified_name(name) == bare


def test_one_id_two_block_shapes(tmp_path):
    rows = launch_rows(0, occupancy_kernel(32, 16), "(32, 16, 1)", "(2, 1, 1)", {})
    rows[1] = rows[1].replace('"(32, 16, 1)","(2, 1, 1)"', '"(16, 32, 1)","(2, 1, 1)"')
    path = write_csv(tmp_path, rows)
    with pytest.raises(ncu.NcuError) as exc:
        ncu.load_csv(path)
    assert_error(exc, path.name, "launch ID 0 was")


def test_every_field_can_be_a_column():
    """stepwise-ncu's :columns: takes any field of ncu.FIELDS; each needs a column header."""
    from stepwise_docs.evidence import NCU_COLUMNS, NCU_EXTRA_COLUMNS

    labels = dict(NCU_COLUMNS + NCU_EXTRA_COLUMNS)
    assert set(labels) == set(ncu.FIELDS)
    # the fields of the late metrics are not among the default columns: older files lack them
    assert not {"branch_targets", "divergent_branches", "branch_uniformity",
                "achieved_occupancy"} & {key for key, _label in NCU_COLUMNS}


TENSOR = "sm__pipe_tensor_op_hmma_type_hmma_hgmma_qgmma_cycles_active.avg.pct_of_peak_sustained_active"
DRAM_PCT = "dram__throughput.avg.pct_of_peak_sustained_elapsed"
GMMA_CONFLICTS = "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_gmma.sum"
TENSOR_METRICS = (TENSOR, DRAM_PCT, GMMA_CONFLICTS)


def test_tensor_pipe_dram_throughput_and_wgmma_conflicts(tmp_path, divergence):
    rows = launch_rows(0, DIV_KERNEL, "(256, 1, 1)", "(4096, 1, 1)",
                       {TENSOR: "93.59", DRAM_PCT: "29.49", GMMA_CONFLICTS: "12"})
    rows += launch_rows(1, DIV_KERNEL, "(256, 1, 1)", "(1024, 1, 1)",
                        {TENSOR: "50", DRAM_PCT: "10", GMMA_CONFLICTS: "4"})
    path = write_csv(tmp_path, rows)
    counts = ncu.step_counts(divergence, ncu.load_csv(path), path)[0]
    # percentages: the launches' mean weighted by their warps (32,768 and 8,192); conflicts: the sum
    assert counts.value("tensor_active") == pytest.approx((0.9359 * 32768 + 0.5 * 8192) / 40960)
    assert counts.value("dram_throughput") == pytest.approx((0.2949 * 32768 + 0.1 * 8192) / 40960)
    assert counts.value("wgmma_bank_conflicts") == 16
    assert ncu.format_field(counts, "tensor_active") == "84.9 %"
    assert ncu.format_field(counts, "dram_throughput") == "25.6 %"
    assert ncu.format_field(counts, "wgmma_bank_conflicts") == "16"
    for metric in TENSOR_METRICS:
        assert metric in ncu.METRICS and metric in ncu.LATE_METRICS


def test_percentages_weigh_each_launch_by_its_duration_where_the_file_has_durations(tmp_path, divergence):
    # A long launch of few warps beside a short one of many: weighted by warps, the short one would dominate.
    rows = launch_rows(0, DIV_KERNEL, "(256, 1, 1)", "(64, 1, 1)",
                       {TENSOR: "20", OCC: "12.5", ncu.DURATION: "9,000,000"})
    rows += launch_rows(1, DIV_KERNEL, "(256, 1, 1)", "(65536, 1, 1)",
                        {TENSOR: "0", OCC: "80", ncu.DURATION: "1,000,000"})
    path = write_csv(tmp_path, rows)
    counts = ncu.step_counts(divergence, ncu.load_csv(path), path)[0]
    assert counts.weighted_by_duration
    assert counts.value("tensor_active") == pytest.approx(0.2 * 0.9)
    assert counts.value("achieved_occupancy") == pytest.approx(0.125 * 0.9 + 0.8 * 0.1)
    assert ncu.format_field(counts, "tensor_active") == "18.0 %"
    # a file without durations: by warps, 2,048 and 2,097,152
    rows = launch_rows(0, DIV_KERNEL, "(256, 1, 1)", "(64, 1, 1)", {TENSOR: "20"})
    rows += launch_rows(1, DIV_KERNEL, "(256, 1, 1)", "(65536, 1, 1)", {TENSOR: "0"})
    path = write_csv(tmp_path, rows, "fixture-gpu-y-ncu.csv")
    counts = ncu.step_counts(divergence, ncu.load_csv(path), path)[0]
    assert not counts.weighted_by_duration
    assert counts.value("tensor_active") == pytest.approx(0.2 * 2048 / (2048 + 2097152))
    assert ncu.DURATION in ncu.METRICS and ncu.DURATION in ncu.LATE_METRICS


XU = "smsp__inst_executed_pipe_xu.sum"


def test_xu_instructions_and_their_share_of_all(tmp_path, divergence):
    rows = launch_rows(0, DIV_KERNEL, "(256, 1, 1)", "(4096, 1, 1)", {XU: "300", "smsp__inst_executed.sum": "1000"})
    rows += launch_rows(1, DIV_KERNEL, "(256, 1, 1)", "(1024, 1, 1)", {XU: "100", "smsp__inst_executed.sum": "3000"})
    path = write_csv(tmp_path, rows)
    counts = ncu.step_counts(divergence, ncu.load_csv(path), path)[0]
    # both summed over the launches, then divided: 400 of 4000
    assert counts.value("xu_instructions") == 400
    assert counts.value("xu_share") == pytest.approx(0.1)
    assert ncu.format_field(counts, "xu_instructions") == "400"
    assert ncu.format_field(counts, "xu_share") == "10.0 %"
    assert XU in ncu.METRICS and XU in ncu.LATE_METRICS


def test_a_file_recorded_before_the_xu_metric_fails_only_its_fields(tmp_path, divergence):
    path = write_csv(tmp_path, launch_rows(0, DIV_KERNEL, "(256, 1, 1)", "(4, 1, 1)",
                                           {"smsp__inst_executed.sum": "100"}, leave_out=(XU,)))
    counts = ncu.step_counts(divergence, ncu.load_csv(path), path)[0]
    assert counts.value("instructions") == 100
    for name in ("xu_instructions", "xu_share"):
        with pytest.raises(ncu.NcuError) as exc:
            ncu.format_field(counts, name)
        assert_error(exc, path.name, "launch 0", f"has no {XU}", "re-run make profile")


@pytest.mark.parametrize("name, metric", [
    ("tensor_active", TENSOR), ("dram_throughput", DRAM_PCT), ("wgmma_bank_conflicts", GMMA_CONFLICTS)])
def test_a_file_recorded_before_the_tensor_metrics_fails_only_their_fields(tmp_path, divergence, name, metric):
    path = write_csv(tmp_path, launch_rows(0, DIV_KERNEL, "(256, 1, 1)", "(4, 1, 1)",
                                           {"smsp__inst_executed.sum": "100"}, leave_out=TENSOR_METRICS))
    counts = ncu.step_counts(divergence, ncu.load_csv(path), path)[0]
    assert counts.value("instructions") == 100
    with pytest.raises(ncu.NcuError) as exc:
        ncu.format_field(counts, name)
    assert_error(exc, path.name, "launch 0", f"has no {metric}", "re-run make profile")
