"""Sizes keyed by a matrix shape (``shape: [rows, cols]``) and a sweep along one dimension of them (``sweep.axis``).

The FIXTURE demo chapter turned into a softmax-like one: its main size 1024 x 1024 in float and in bf16 (two n of one
shape), and a sweep over the row length at a fixed total of elements (4096 x 256 to 64 x 16384) whose family holds the
main float size too. Made-up numbers (synth), as everywhere in these tests.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

import synth
from stepwise_docs import sweep
from stepwise_docs.data import Dataset
from stepwise_docs.inputs import DataError, load_registry
from test_docs_build import build_docs, needs_doxygen, project_args

MAIN, BF16 = 1048576, 1048577
#: The sweep's family, n (an opaque key) -> [rows, cols], in the (unsorted) order the registry lists it.
FAMILY = {256004096: [256, 4096], MAIN: [1024, 1024], 64016384: [64, 16384], 4096000256: [4096, 256]}
AXIS = {"label": "row length (columns)", "shape_index": 1}
T = "batch"


def size(n: int, shape: list[int], dtype: str = "float") -> dict:
    return {"n": n, "problem": f"FIXTURE {shape[0]} x {shape[1]} {dtype}", "shape": shape}


def axis_registry() -> dict:
    """The FIXTURE registry with its demo chapter as described above: 01_naive is the sweep's row (its sizes the
    main ones, then the family, the main float size again, as the timing program appends a sweep), 02_vector is
    measured at the main sizes only; the launch floor at every size, the other references at the main ones."""
    reg = synth.fixture_registry()
    demo = reg["chapters"][0]
    main = [size(MAIN, [1024, 1024]), size(BF16, [1024, 1024], "bf16")]
    naive, vector = demo["steps"]
    naive["sizes"] = main + [size(n, shape) for n, shape in FAMILY.items()]
    vector["sizes"] = list(main)
    demo["sweep"] = {"sizes": list(FAMILY), "rows": ["01_naive", "empty_launch"],
                     "footprint": {"bytes_per_n": 4, "power": 1}, "axis": dict(AXIS)}
    for ref in demo["ceilings"] + demo["baselines"]:
        ref["sizes"] = [MAIN, BF16] + ([n for n in FAMILY if n != MAIN] if ref["id"] == "empty_launch" else [])
    return reg


def write_axis_project(project: Path, reg: dict | None = None) -> Dataset:
    """Write the registry and its FIXTURE measurement (every reference at its own sizes only, every row at the
    family's sizes moving the main size's bytes, as a sweep at a fixed total does) into ``project``; its dataset."""
    reg = reg or axis_registry()
    measurement = synth.measurement_for(reg, project)
    demo = reg["chapters"][0]
    for kind in ("ceilings", "baselines"):
        sizes = {e["id"]: synth.row_sizes(demo, e) for e in demo[kind]}
        measurement["chapters"][0][kind] = [r for r in measurement["chapters"][0][kind] if r["n"] in sizes[r["id"]]]
    for kind in ("steps", "ceilings", "baselines"):
        for row in measurement["chapters"][0][kind]:
            if row["n"] in FAMILY and row["bytes"] is not None:
                row["bytes"] = 8 * MAIN
                row["gbps"] = row["bytes"] / (row["median_ms"] * 1e-3) / 1e9
    synth.write_json(project / "registry.json", reg)
    synth.write_json(project / "measurements" / "fixture-gpu.json", measurement)
    return Dataset.load(project / "registry.json", project / "measurements", project)


@pytest.fixture
def chapter(project):
    return write_axis_project(project).chapter("demo")


# -- sizes with a shape ------------------------------------------------------------------

def test_a_size_with_a_shape_is_a_key_and_a_cubic_gemm_size_is_not(chapter):
    assert chapter.shape(MAIN) == (1024, 1024) and chapter.shape(64016384) == (64, 16384)
    assert not any(chapter.is_size(n) for n in (MAIN, BF16, *FAMILY))
    gemm = chapter.dataset.chapter("gemm")  # its cubic sizes carry no shape
    assert gemm.shape(512) is None and all(gemm.is_size(n) for n, _p in gemm.sizes())


def test_the_main_sizes_keep_one_the_sweep_also_draws(chapter):
    assert chapter.sizes() == [(MAIN, "FIXTURE 1024 x 1024 float"), (BF16, "FIXTURE 1024 x 1024 bf16")]
    assert [n for n, _p in chapter.all_sizes()] == [MAIN, BF16, 256004096, 64016384, 4096000256]
    assert chapter.expected_sizes("01_naive") == [MAIN, BF16, *[n for n in FAMILY if n != MAIN]]
    assert chapter.expected_sizes("inplace_read_write") == [MAIN, BF16]
    assert chapter.dataset.problems() == []


def test_a_main_size_of_the_family_that_only_the_sweeps_rows_have_is_main_where_the_sweep_says_so(project):
    reg = axis_registry()
    demo = reg["chapters"][0]
    demo["steps"][1]["sizes"] = [size(BF16, [1024, 1024], "bf16")]  # now only the sweep's rows have MAIN
    for ref in demo["ceilings"] + demo["baselines"]:
        ref["sizes"] = [n for n in ref["sizes"] if n != MAIN] or [BF16]
    demo["headline"]["n"] = BF16
    chapter = write_axis_project(project, reg).chapter("demo")
    assert [n for n, _p in chapter.sizes()] == [BF16]  # nothing says MAIN is more than a point of the sweep
    demo["sweep"]["main_sizes"] = [MAIN]
    chapter = write_axis_project(project, reg).chapter("demo")
    assert [n for n, _p in chapter.sizes()] == [MAIN, BF16]
    assert sweep.sweep(chapter, T)["ns"] == [4096000256, MAIN, 256004096, 64016384]
    assert chapter.dataset.problems() == []


def test_a_footprint_of_0_bytes_is_unknown(project):
    reg = synth.fixture_registry()  # the demo chapter's sweep against n, without an L2 line
    reg["chapters"][0]["sweep"]["footprint"]["bytes_per_n"] = 0
    synth.write_json(project / "registry.json", reg)
    chapter = Dataset.load(project / "registry.json", project / "measurements", project).chapter("demo")
    data = sweep.sweep(chapter, T)
    assert chapter.footprint_bytes(1024) is None and data["l2_n"] is None and data["l2_n_any"] is None
    assert chapter.dataset.problems() == []


def test_n_of_a_matrix_shape_and_its_problems_last_word(chapter):
    assert chapter.n_of("1024x1024/bf16") == BF16
    assert chapter.n_of("1024x1024/FLOAT") == MAIN  # any case
    assert chapter.n_of("4096x256") == 4096000256  # one size of that shape: no word needed
    assert chapter.n_of("64x16384/float") == 64016384
    assert chapter.n_of(str(MAIN)) == MAIN
    gemm = chapter.dataset.chapter("gemm")  # the GEMM forms as before
    assert gemm.n_of("512") == 512


def test_n_of_with_several_words_takes_the_size_whose_problem_has_each(chapter):
    # Where a chapter's problems share a shape and a type (LayerNorm and RMSNorm, each in fp32 and bf16).
    assert chapter.n_of("1024x1024/fixture/bf16") == BF16
    assert chapter.n_of("1024x1024/FLOAT/fixture") == MAIN  # any order, any case
    with pytest.raises(DataError, match="more than one size"):
        chapter.n_of("1024x1024/fixture/1024")
    with pytest.raises(DataError, match="no size"):
        chapter.n_of("1024x1024/fixture/fp16")


@pytest.mark.parametrize("text, needles", [
    ("1024x1024", ["'1024x1024' is ambiguous", "2 sizes", "'FIXTURE 1024 x 1024 float'",
                   "'FIXTURE 1024 x 1024 bf16'", "1024x1024/WORD"]),
    ("1024x1024/fp16", ["no size of shape '1024x1024' has a problem ending in 'fp16'",
                        "'FIXTURE 1024 x 1024 float', 'FIXTURE 1024 x 1024 bf16'"]),
    ("256x4096/bf16", ["no size of shape '256x4096'", "'FIXTURE 256 x 4096 float'"]),
    ("8x8", ["has no size of shape '8x8'"]),
    ("8x8/bf16", ["has no size of shape '8x8'"]),
    ("1024xten", ["expected N, MxNxK or RxC"]),
])
def test_n_of_problems_name_the_candidates(chapter, text, needles):
    with pytest.raises(DataError) as err:
        chapter.n_of(text)
    synth.assert_one_line_message(err, *needles)


# -- the sweep along an axis --------------------------------------------------------------

def test_a_sweep_with_an_axis_draws_its_family_by_place_on_the_axis(chapter):
    data = sweep.sweep(chapter, T)
    assert data["axis_label"] == "row length (columns)"
    assert data["sizes"] == [256, 1024, 4096, 16384]  # the x: shape[1], ascending
    assert data["ns"] == [4096000256, MAIN, 256004096, 64016384]  # the family only: not the bf16 main size
    assert data["problems"] == ["FIXTURE 4096 x 256 float", "FIXTURE 1024 x 1024 float",
                                "FIXTURE 256 x 4096 float", "FIXTURE 64 x 16384 float"]
    assert data["bytes"] == [8 * MAIN] * 4
    assert data["l2_n"] is None and data["l2_n_any"] is None  # the footprint is the same along the axis
    assert [s["id"] for s in data["series"]] == ["01_naive", "empty_launch"]
    naive = data["series"][0]
    assert naive["times"] == [chapter.step_row("01_naive", n, T)["median_ms"] for n in data["ns"]]
    assert data["metric"] == "gbps" and all(v is not None for v in naive["values"])


def test_a_row_measured_at_some_of_the_familys_sizes_has_gaps(chapter):
    data = sweep.sweep(chapter, T, rows=["01_naive", "02_vector", "inplace_read_write"])
    series = {s["id"]: s for s in data["series"]}
    for row_id in ("02_vector", "inplace_read_write"):  # measured at the main sizes only
        assert [v is not None for v in series[row_id]["times"]] == [False, True, False, False]


def test_a_sweep_without_an_axis_keeps_its_data(project):
    ds = Dataset.load(project / "registry.json", project / "measurements", project)
    data = sweep.sweep(ds.chapter("demo"), T)
    assert set(data) == {"chapter", "timing", "metric", "unit", "sizes", "series", "gpu", "l2_bytes", "l2_n",
                         "l2_n_any"}
    assert data["sizes"] == [262144, 1048576, 16777216] and data["l2_n"] is not None


def _edit(reg: dict, what: str) -> dict:
    demo = reg["chapters"][0]
    if what == "no shape":
        del demo["steps"][0]["sizes"][-1]["shape"]
    elif what == "index":
        demo["sweep"]["axis"]["shape_index"] = 2
    elif what == "same x":
        demo["steps"][0]["sizes"][-1]["shape"] = [16, 16384]
    elif what == "no sizes":
        demo["sweep"]["sizes"] = []
    elif what == "no label":
        del demo["sweep"]["axis"]["label"]
    elif what == "stray main size":
        demo["sweep"]["main_sizes"] = [BF16]
    return reg


@pytest.mark.parametrize("what, needles", [
    ("no shape", ["chapter 'demo'", "size n=4096000256 has no shape in any step's sizes"]),
    ("index", ["against shape[2]", "size n=256004096 has the shape [256, 4096]"]),
    ("same x", ["sizes n=64016384 and n=4096000256 both have shape[1] = 16384"]),
    ("no sizes", ["sweep.axis needs the sizes to draw"]),
    ("no label", ["is not a step registry", "label"]),
    ("stray main size", ["chapter 'demo'", f"sweep.main_sizes names n={BF16}, which is not one of sweep.sizes"]),
])
def test_a_registry_whose_axis_cannot_be_drawn_is_refused(tmp_path, what, needles):
    path = synth.write_json(tmp_path / "registry.json", _edit(axis_registry(), what))
    with pytest.raises(DataError) as err:
        load_registry(path)
    synth.assert_one_line_message(err, *needles)


# -- the page -----------------------------------------------------------------------------

@needs_doxygen
def test_the_page_draws_the_sweep_against_its_axis(project):
    write_axis_project(project)
    page = project / "docs" / "index.md"
    page.write_text(page.read_text() + """
## Shapes

The second step in bf16: {stepwise-number}`demo/02_vector/median#1024x1024/bf16`, in float
{stepwise-number}`demo/02_vector/median#1024x1024/float`; the first at 64 x 16384:
{stepwise-number}`demo/01_naive/gbps#64x16384`.
""")
    proc = build_docs(*project_args(project, "--strict"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    html, text = synth.built_page(project)
    sweep_html = re.search(r'class="[^"]*stepwise-sweep .*?stepwise-legend', html, re.S).group(0)
    sweep_text = synth.html_text(sweep_html)
    assert ("Median time (left) and GB/s (right) against row length (columns), all axes logarithmic (the "
            "horizontal one in powers of two), one point per problem of the chapter\u2019s sweep (from FIXTURE "
            "4096 x 256 float to FIXTURE 64 x 16384 float)") in sweep_text
    assert "Every problem drawn moves the same 8.00 MiB of data" in sweep_text
    assert "L2 cache" not in sweep_text and "vertical line" not in sweep_text
    assert "GB/s by row length (columns) (batch)" in sweep_text
    assert "row length (columns) 01 256" in sweep_text  # the rates' header (the floor has none), the first place
    assert "row length (columns) 01 empty_launch 256" in sweep_text  # the times' header
    assert "16,384" in sweep_text and f"{MAIN:,}" not in sweep_text
    assert 'title="FIXTURE 64 x 16384 float"' in sweep_html  # each place's problem on hover
    alts = re.findall(r'<img alt="(Line chart[^"]*)"', html)
    assert len(alts) == 2 and all("against row length (columns) (log2)" in a for a in alts)
    images = project / "build" / "docs" / "html" / "_images"
    assert len(list(images.glob("stepwise-sweep-demo-*.png"))) == 2
    # the step sections show the main sizes, each once, not the family's others
    summaries = synth.html_text(" ".join(re.findall(r'stepwise-step-table.*?</table>', html, re.S)))
    assert summaries.count("batch, FIXTURE 1024 x 1024 bf16") == 2
    assert summaries.count("batch, FIXTURE 1024 x 1024 float") == 2
    assert "4096 x 256" not in summaries
