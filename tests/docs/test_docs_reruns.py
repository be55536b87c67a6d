"""Reruns of a recorded commit and the front page's headline ratio (stepwise_docs.reruns), and the SM clock line of a
row that ran below the boost clock (fmt.below_boost). FIXTURE data only.

FIXTURE numbers used below (the demo chapter's headline: batch timing, n = 2^20): 02_vector 20 us, lib_scale 12.5 us,
so lib_scale's time over the final step's is 0.625 in the recording; the FIXTURE GPU's boost clock
(gpu.limits.max_sm_clock_mhz) is 1000 MHz. A rerun is the FIXTURE file again with lib_scale's times scaled, gzipped
under measurements/logs/.
"""
from __future__ import annotations

import gzip
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import synth
from stepwise_docs import fmt, reruns
from stepwise_docs.data import DataError, Dataset

N = 1048576
COMMIT = "0123456789abcdef0123456789abcdef01234567"
needs_doxygen = pytest.mark.skipif(shutil.which("doxygen") is None, reason="doxygen is not installed")


def row_of(data: dict, row_id: str, kind: str = "baselines", chapter: str = "demo", n: int = N,
           timing: str = "batch") -> dict:
    ch = next(c for c in data["chapters"] if c["id"] == chapter)
    return next(r for r in ch[kind] if r["id"] == row_id and r["n"] == n and r["timing"] == timing)


def of_commit(data: dict, commit: str = COMMIT) -> dict:
    """The FIXTURE file with every chapter's run of one clean commit."""
    for chapter in data["chapters"]:
        chapter["run"].update(commit=commit, dirty=False)
    return data


def record(project: Path, change=None) -> dict:
    """The recorded FIXTURE file, of COMMIT (and ``change``d), written back; returns it."""
    data = of_commit(synth.fixture_measurement())
    if change:
        change(data)
    synth.write_json(project / "measurements" / "fixture-gpu.json", data)
    return data


def rerun(project: Path, factor: float, name: str = f"fixture-gpu-rerun-{COMMIT[:7]}.json.gz", change=None) -> Path:
    """A rerun of the recorded FIXTURE file whose lib_scale takes ``factor`` times as long (its ratio over the final
    step's ``factor`` times the recording's), ``change``d, gzipped under measurements/logs/ as ``name``."""
    data = of_commit(synth.fixture_measurement())
    row = row_of(data, "lib_scale")
    for key in ("median_ms", "min_ms", "max_ms"):
        row[key] *= factor
    if change:
        change(data)
    path = project / "measurements" / "logs" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(path, "wt", encoding="utf-8") as f:
        json.dump(data, f)
    return path


def load(project: Path) -> Dataset:
    return Dataset.load(project / "registry.json", project / "measurements", project)


def checked(project: Path) -> list[reruns.Rerun | None]:
    ds = load(project)
    chapter = ds.chapter("demo")
    return reruns.compare(fmt.headline(chapter), reruns.find_rerun(ds, chapter))


# -- which files are reruns of a chapter -----------------------------------------------------------

def test_without_a_rerun_the_recording_alone(project):
    record(project)
    ds = load(project)
    chapter = ds.chapter("demo")
    assert reruns.rerun_files(ds, chapter) == [] and reruns.find_rerun(ds, chapter) is None
    assert reruns.compare(fmt.headline(chapter), None) == [None]


def test_a_rerun_within_two_percent_agrees(project):
    record(project)
    path = rerun(project, 1.008)
    ds = load(project)
    found = reruns.find_rerun(ds, ds.chapter("demo"))
    assert found is not None and found.dataset.measurement_path == path and found.id == "demo"
    [check] = checked(project)
    assert check.recorded == pytest.approx(0.625) and check.again == pytest.approx(0.63)
    assert check.apart == pytest.approx(1 - 1 / 1.008) and not check.level
    assert check.explanation() == (
        f"lib_scale\u2019s median time over 02_vector\u2019s is 0.6250\u00d7 in the recording and 0.6300\u00d7 in a "
        f"rerun of the same commit {COMMIT[:12]} ({path.name}), 0.79 % apart: within 2.0 %, the recording\u2019s "
        "ratio is shown")


def test_a_rerun_more_than_two_percent_apart_gives_the_range_and_says_what_differs(project):
    def clocked(median: float, config: str):
        def change(data):
            row_of(data, "lib_scale").update(sm_clock_mhz={"median": median, "min": median - 20, "max": 1000.0},
                                             config=config)
        return change

    record(project, clocked(1000.0, "FIXTURE algorithm 1"))
    rerun(project, 1.03, change=clocked(905.0, "FIXTURE algorithm 2"))
    [check] = checked(project)
    # both put the library ahead, clear of 1x: not level, the range of the two
    assert check.disagree and not check.level and check.again == pytest.approx(0.625 * 1.03)
    assert check.range_text() == "0.625\u20130.644\u00d7"
    text = check.explanation()
    assert text.startswith("lib_scale\u2019s median time over 02_vector\u2019s is 0.6250\u00d7 in the "
                           "recording and 0.6438\u00d7 in a rerun of the same commit")
    assert "2.9 % apart, more than the 2.0 %" in text and "the range is shown" in text
    for part in ("lib_scale\u2019s median SM clock 1,000 MHz / 905 MHz",
                 "02_vector\u2019s median SM clock not read / not read",
                 "lib_scale\u2019s configuration \u201cFIXTURE algorithm 1\u201d / \u201cFIXTURE algorithm 2\u201d",
                 "lib_scale\u2019s spread (slowest sample over fastest) 1.08 / 1.08",
                 "02_vector\u2019s spread (slowest sample over fastest) 1.32 / 1.32"):
        assert part in text, text
    assert "library" not in text  # the same library in both runs


@pytest.mark.parametrize("factor, level", [
    (1.55, False),  # 0.625x and 0.969x: both put the library ahead by more than 2 %
    (1.58, True),   # 0.9875x: within 2 % of 1x, the two runs do not say which is faster
    (1.7, True),    # 1.0625x: on the other side of 1x
])
def test_two_runs_that_disagree_are_level_unless_both_leave_the_final_step_behind(project, factor, level):
    record(project)
    rerun(project, factor)
    [check] = checked(project)
    assert check.disagree and check.level == level
    assert check.explanation().startswith("level: ") == level


@pytest.mark.parametrize("factor, kind, text", [
    (None, "ratio", "0.625\u00d7"),             # no rerun kept: the recording's ratio
    (1.008, "ratio", "0.625\u00d7"),            # within 2 %: the recording's ratio
    (1.03, "range", "0.625\u20130.644\u00d7"),  # apart, both behind: the range
    (1.58, "level", "level"),                  # apart, one within 2 % of 1x: level
])
def test_the_ratio_reads_alike_wherever_it_is_said(project, factor, kind, text):
    # The front page's cells, its summary sentence and the README take their words from reruns.ratio_text().
    record(project)
    if factor is not None:
        rerun(project, factor)
    [check] = checked(project)
    assert reruns.ratio_text(0.625, check) == (kind, text)


@pytest.mark.parametrize("name, change", [
    # another commit in the name, or too short a prefix to name one
    ("fixture-gpu-rerun-fedcba9.json.gz", None),
    (f"fixture-gpu-rerun-{COMMIT[:6]}.json.gz", None),
    # a rerun of another chapter, or of another GPU's slug in its name
    (f"fixture-gpu-gemm-rerun-{COMMIT[:7]}.json.gz", None),
    (f"fixture-gpu-b-rerun-{COMMIT[:7]}.json.gz", None),
    # named as this GPU's, but the file is of another GPU
    (f"fixture-gpu-rerun-{COMMIT[:7]}.json.gz", lambda d: d["gpu"].update(slug="fixture-gpu-b")),
    # named as this commit's, but the chapter in it was measured from another
    (f"fixture-gpu-rerun-{COMMIT[:7]}.json.gz", lambda d: of_commit(d, "fedcba9876543210")),
    # the final step of another source
    (f"fixture-gpu-rerun-{COMMIT[:7]}.json.gz",
     lambda d: [r.update(source_sha256="0" * 64) for r in d["chapters"][0]["steps"] if r["id"] == "02_vector"]),
    # not a rerun's name
    (f"fixture-gpu-demo-trial-{COMMIT[:7]}.json.gz", None),
    (f"fixture-gpu-demo-rerun-{COMMIT[:7]}.json", None),
])
def test_what_is_not_a_rerun_of_the_chapter(project, name, change):
    record(project)
    rerun(project, 1.5, name, change)
    assert checked(project) == [None]


def test_the_chapters_own_rerun_comes_before_a_whole_runs(project):
    record(project)
    rerun(project, 1.5)
    own = rerun(project, 1.005, f"fixture-gpu-demo-rerun-{COMMIT[:7]}.json.gz")
    ds = load(project)
    assert [p.name for p in reruns.rerun_files(ds, ds.chapter("demo"))] == [
        own.name, f"fixture-gpu-rerun-{COMMIT[:7]}.json.gz"]
    [check] = checked(project)
    assert check.path == own and not check.level
    # the whole run's file still serves the chapters it has and the chapter's own file does not
    gemm = ds.chapter("gemm")
    assert reruns.find_rerun(ds, gemm).dataset.measurement_path.name == f"fixture-gpu-rerun-{COMMIT[:7]}.json.gz"


def test_a_full_hash_in_the_name_and_a_short_one_in_the_recording(project):
    record(project, lambda d: of_commit(d, COMMIT[:7]))
    rerun(project, 1.0, f"fixture-gpu-rerun-{COMMIT}.json.gz", lambda d: of_commit(d, COMMIT[:12]))
    assert checked(project)[0] is not None


@pytest.mark.parametrize("content, needles", [
    (b"not gzip", ["fixture-gpu-rerun-0123456.json.gz", "cannot be read"]),
    (gzip.compress(b"{ not json"), ["fixture-gpu-rerun-0123456.json.gz", "not valid JSON"]),
    (gzip.compress(json.dumps({"schema": 1}).encode()), ["is of schema 1", "--upgrade"]),
])
def test_a_file_named_as_a_rerun_that_cannot_be_read_is_an_error(project, content, needles):
    record(project)
    path = project / "measurements" / "logs" / f"fixture-gpu-rerun-{COMMIT[:7]}.json.gz"
    path.write_bytes(content)
    with pytest.raises(DataError) as exc:
        checked(project)
    synth.assert_one_line_message(exc, *needles)


# -- the SM clock of a row that ran below the boost clock --------------------------------------------

def clocked_dataset(project: Path, median: float | None, limits: dict | None = None) -> Dataset:
    """The FIXTURE file with 02_vector's batch row at ``median`` MHz (None: no clock read), the GPU's limits updated."""
    def change(data):
        if median is not None:
            row_of(data, "02_vector", "steps")["sm_clock_mhz"] = {"median": median, "min": median - 30, "max": 990.0}
        data["gpu"]["limits"].update(limits or {})
    record(project, change)
    return load(project)


@pytest.mark.parametrize("median, expected", [
    (None, None),  # not read
    (1000.0, None),  # at the boost clock
    (990.0, None),  # 1 % below: not more than 1 %
    (989.0, ("at 989 MHz", "median SM clock over the kept samples (959\u2013990 MHz); the GPU\u2019s boost clock is "
                           "1,000 MHz: this row ran power-capped, a sustained-load figure")),
    (725.4, ("at 725 MHz", "median SM clock over the kept samples (695\u2013990 MHz); the GPU\u2019s boost clock is "
                           "1,000 MHz: this row ran power-capped, a sustained-load figure")),
])
def test_below_boost(project, median, expected):
    chapter = clocked_dataset(project, median).chapter("demo")
    assert fmt.below_boost(chapter.step_row("02_vector", N, "batch"), chapter) == expected
    assert fmt.below_boost(None, chapter) is None


def test_below_the_runs_highest_clock_where_the_file_has_no_boost_clock(project):
    chapter = clocked_dataset(project, 900.0, {"max_sm_clock_mhz": None}).chapter("demo")
    # the highest of the chapter's readings: the row's max (990) and the run's clocks before and after (1000)
    text, title = fmt.below_boost(chapter.step_row("02_vector", N, "batch"), chapter)
    assert text == "at 900 MHz" and "the highest SM clock of this run is 1,000 MHz" in title


def test_the_tables_median_cell_carries_the_clock_line(project):
    chapter = clocked_dataset(project, 900.0).chapter("demo")
    cells = {r.id: r.cells["median"] for r in fmt.step_rows(chapter, "batch", N)}
    assert (cells["02_vector"].clock, cells["01_naive"].clock) == ("at 900 MHz", "")
    assert "boost clock is 1,000 MHz" in cells["02_vector"].clock_title
    assert cells["02_vector"].sub == "19.0\u201325.0 \u00b5s"  # the spread stays the second line
    refs = {r.id: r.cells["median"] for r in fmt.reference_rows(chapter, "batch", N)}
    assert refs["lib_scale"].clock == ""


# -- the front page, built ----------------------------------------------------------------------------

def build_docs(project: Path, *extra: str):
    return subprocess.run(
        [sys.executable, str(synth.BUILD_DOCS), "--root", str(project), "--build-dir", str(project / "build"),
         "--registry", str(project / "registry.json"), "--measurements", str(project / "measurements"), *extra],
        capture_output=True, text=True, timeout=300)


@needs_doxygen
def test_the_front_page_says_level_and_why_and_the_tables_the_clock(project):
    def change(data):
        row_of(data, "lib_scale")["sm_clock_mhz"] = {"median": 1000.0, "min": 990.0, "max": 1000.0}
        row_of(data, "02_vector", "steps")["sm_clock_mhz"] = {"median": 905.0, "min": 880.0, "max": 1000.0}
    record(project, change)
    # demo's ratio 0.625x and 0.9875x in the rerun (level: within 2 % of 1x); gemm's the same in both runs
    path = rerun(project, 1.58, change=lambda d: row_of(d, "lib_scale").update(
        sm_clock_mhz={"median": 930.0, "min": 900.0, "max": 1000.0}))
    proc = build_docs(project, "--strict")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    html, _text = synth.built_page(project)
    summary = html[html.index('<table class="stepwise-data stepwise-summary'):]
    summary = summary[:summary.index("</table>")]
    level = re.search(r'<abbr class="stepwise-tip stepwise-level" title="([^"]*)">level</abbr>', summary)
    assert level, summary
    assert level.group(1).startswith(
        "level: lib_scale\u2019s median time over 02_vector\u2019s is 0.6250\u00d7 in the recording and "
        f"0.9875\u00d7 in a rerun of the same commit {COMMIT[:12]} ({path.name}), 37 % apart")
    assert ("lib_scale\u2019s median SM clock 1,000 MHz / 930 MHz; 02_vector\u2019s median SM clock 905 MHz / "
            "not read") in level.group(1)
    assert "0.625\u00d7" not in synth.html_text(summary)  # no ratio that names a winner
    # gemm's ratio: the recording's, and what the rerun gave
    assert re.search(r'title="cublas_sgemm\u2019s median time over 03_autotuned\u2019s, same GPU, size and timing '
                     r'\(above 1\u00d7: faster than cuBLAS\); cublas_sgemm\u2019s median time over 03_autotuned\u2019s '
                     r'is 0\.9474\u00d7 in the recording and 0\.9474\u00d7 in a rerun of the same commit [^"]*within '
                     r'2\.0 %[^"]*">0\.947\u00d7</abbr>', summary), summary
    assert "within 2.0 % of each other, and level where they lie further apart" in html  # the legend
    # the tables: 02_vector's median, batch, with its clock under it; no other row has one
    clock = ('<p class="stepwise-sub stepwise-clock"><abbr class="stepwise-tip" title="median SM clock over the kept '
             'samples (880\u20131,000 MHz); the GPU\u2019s boost clock is 1,000 MHz: this row ran power-capped, a '
             'sustained-load figure">at 905 MHz</abbr></p>')
    assert clock in html
    assert html.count("stepwise-clock") == 2  # in the batch table and in the step's summary
    assert "at 1,000 MHz" not in html
