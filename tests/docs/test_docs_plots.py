"""The plots read whole: titles in words, no text over another or outside the image, sizes that are odd neighbours of
a power of two not joined into the line (stepwise_docs.plot).

The last tests draw every bar chart and sweep of the real chapters (build/registry.json with the recorded
measurement files in docs/measurements/, where the build has made the registry) and check each figure's layout.
"""
from __future__ import annotations

import re

import pytest

import synth
from stepwise_docs import plot, sweep
from stepwise_docs.data import Dataset, load_datasets

REAL_REGISTRY = synth.REPO / "build" / "registry.json"
RECORDED = synth.REPO / "docs" / "measurements"
#: A number of more than 12 digits in a text meant for readers is a key that stands for a shaped size.
KEY_NUMBER = re.compile(r"\d{13,}")


def _close(fig) -> None:
    import matplotlib.pyplot as plt

    plt.close(fig)


def _sweep_data(sizes: list[int], axis_label: str | None = None) -> dict:
    """Plain sweep data (as :func:`.sweep.sweep` returns it) of one step and one baseline over ``sizes``."""
    data = {"chapter": "gemm", "timing": "single_cold", "metric": "gflops", "unit": "TFLOP/s", "sizes": sizes,
            "gpu": "FIXTURE GPU (not a measurement)", "l2_bytes": 50331648, "l2_n": None, "l2_n_any": None,
            "series": [{"id": "10_ping_pong", "kind": "step", "label": "10_ping_pong", "number": "10",
                        "same_operation": True, "values": [100.0 + i for i in range(len(sizes))],
                        "times": [0.1 * (i + 1) for i in range(len(sizes))]},
                       {"id": "cublas_gemm_bf16", "kind": "baseline", "label": "cuBLAS", "number": "cublas_gemm_bf16",
                        "same_operation": True, "values": [90.0 + i for i in range(len(sizes))],
                        "times": [0.11 * (i + 1) for i in range(len(sizes))]}]}
    if axis_label:
        data.update(axis_label=axis_label, ns=sizes, problems=[f"problem {n}" for n in sizes],
                    bytes=[None] * len(sizes))
    return data


# -- sizes beside a power of two ----------------------------------------------------------------

def test_odd_neighbours_of_a_power_of_two_are_off_the_grid():
    assert plot.off_grid_sizes([512, 768, 1000, 1024, 3072, 4095, 4096, 4097, 8192]) == [1000, 4095, 4097]
    assert plot.off_grid_sizes([16777216, 67108863, 67108864]) == [67108863]  # 8191 x 8193 beside 8192 x 8192
    assert plot.off_grid_sizes([4095, 4097]) == []  # no power of two measured beside them: they are the line
    assert plot.off_grid_sizes([512, 1024, 2048]) == []


def test_a_sweep_draws_odd_neighbours_as_points_of_their_own():
    """No line joins 4095, 4096 and 4097 into a zig-zag: the line goes through the powers of two and the sizes
    between them (3072), the odd neighbours are unjoined markers of the same colour."""
    fig = plot.sweep_figure(_sweep_data([1024, 2048, 3072, 4095, 4096, 4097, 8192]))
    try:
        for ax in fig.axes:
            joined = [list(line.get_xdata()) for line in ax.lines if line.get_linestyle() not in ("None", "none")
                      and len(line.get_xdata()) > 1]
            assert joined and all(4095 not in xs and 4097 not in xs for xs in joined), joined
            assert [1024, 2048, 3072, 4096, 8192] in joined
            apart = [list(line.get_xdata()) for line in ax.lines if line.get_linestyle() in ("None", "none")]
            assert [4095, 4097] in apart
    finally:
        _close(fig)


# -- layout --------------------------------------------------------------------------------------

def test_layout_problems_finds_texts_over_each_other_and_outside():
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(6, 3))
    long = "sequence length (16 heads of 128, 16k tokens: batch x seq) (log\u2082 scale)"
    left.set_xlabel(long)
    right.set_xlabel(long)
    try:
        problems = plot.layout_problems(fig)
        assert any("overlaps" in p for p in problems), problems
        assert any("reaches outside the figure" in p for p in problems), problems
    finally:
        _close(fig)


def test_a_long_axis_label_is_split_between_the_panels_and_the_title():
    data = _sweep_data([512, 1024, 2048, 4096], "sequence length (16 heads of 128, 16k tokens: batch x seq)")
    assert plot.axis_name_parts(data) == ("sequence length", "16 heads of 128, 16k tokens: batch x seq")
    fig = plot.sweep_figure(data)
    try:
        assert plot.layout_problems(fig) == []
        assert [ax.get_xlabel() for ax in fig.axes] == ["sequence length (log\u2082 scale)"] * 2
        assert "16 heads of 128" in fig.get_suptitle()
    finally:
        _close(fig)


def test_a_bar_chart_with_many_long_legend_entries_keeps_its_legend_inside(project):
    ds = Dataset.load(project / "registry.json", project / "measurements", project)
    data = plot.plot_data(ds.chapter("demo"), 1048576)
    for series in data["series"]:  # two libraries of one name, as LayerNorm's cuDNN graphs are shown
        series["baselines"] = [{"id": f"cudnn_layer_norm_variant_{i}", "label": f"cudnn_layer_norm_variant_{i}",
                                "median_ms": 0.01 * (i + 1)} for i in range(3)]
    fig = plot.bar_figure(data)
    try:
        assert plot.layout_problems(fig) == []
    finally:
        _close(fig)


def test_a_keyed_size_is_titled_by_its_problem(project, tmp_path):
    """A size whose n is a key (a shape) is titled with its problem text, and the image's metadata holds the title."""
    from PIL import Image

    ds = Dataset.load(project / "registry.json", project / "measurements", project)
    data = plot.plot_data(ds.chapter("demo"), 1048576)
    key = 14000163840008192
    data.update(n=key, problem="16384 x 8192 LayerNorm fp32")
    path = plot.render(data, tmp_path)
    title = Image.open(path).text["Title"]
    assert "16384 x 8192 LayerNorm fp32" in title and not KEY_NUMBER.search(title)
    assert "16384 x 8192 LayerNorm fp32" in plot.alt_text(data) and str(key) not in plot.alt_text(data)


# -- every plot of the real chapters -------------------------------------------------------------

@pytest.fixture(scope="module")
def real_datasets():
    if not REAL_REGISTRY.is_file() or not list(RECORDED.glob("*.json")):
        pytest.skip("no build/registry.json (make build) or no recorded measurement file")
    return list(load_datasets(REAL_REGISTRY, RECORDED, synth.REPO))


def _figures(datasets) -> list[tuple[str, object]]:
    """(what, a function drawing it) for the plots of the real chapters whose texts are the longest: of the GPU with
    the longest name, per chapter the bar charts at the size with the longest problem text and at the size with the
    most rows in its legend and on its axis, and every sweep. (Drawing every plot of every GPU takes minutes; the
    others have the same texts, or shorter ones.)"""
    dataset = max(datasets, key=lambda d: len(d.gpu_name))
    out = []
    for chapter in dataset.chapters.values():
        if chapter.measured is None:
            continue

        def rows_at(n: int, c=chapter) -> int:
            data = plot.plot_data(c, n)
            return len(data["steps"]) + sum(len(s["baselines"]) for s in data["series"])

        sizes = [n for n, _problem in chapter.sizes()]
        for n in dict.fromkeys([max(sizes, key=lambda n: len(chapter.problem(n))), max(sizes, key=rows_at)]):
            out.append((f"{dataset.slug} {chapter.id} bars {chapter.problem(n)}",
                        lambda c=chapter, n=n: plot.bar_figure(plot.plot_data(c, n))))
        if chapter.sweep or chapter.id == "sgemm":
            for timing in chapter.timings:
                out.append((f"{dataset.slug} {chapter.id} sweep {timing['id']}",
                            lambda c=chapter, t=timing["id"]: plot.sweep_figure(sweep.sweep(c, t))))
    return out


def test_every_plot_of_the_real_chapters_reads_whole(real_datasets):
    """No title, axis label or legend of any real plot overlaps another or reaches outside the image, and no title
    shows a key for a size."""
    problems = []
    for what, draw in _figures(real_datasets):
        fig = draw()
        try:
            problems += [f"{what}: {p}" for p in plot.layout_problems(fig)]
            titles = plot._titles(fig)
            if KEY_NUMBER.search(titles):
                problems.append(f"{what}: a key in the title {titles!r}")
        finally:
            _close(fig)
    assert problems == []


def test_the_sweeps_of_the_real_chapters_name_one_flop_unit(real_datasets):
    """A GEMM's rates, hundreds of thousands of GFLOP/s, read in TFLOP/s."""
    chapter = next(d for d in real_datasets).chapter("tensor_core_gemm")
    data = sweep.sweep(chapter, chapter.timings[0]["id"])
    assert data["unit"] == "TFLOP/s"
    assert max(v for s in data["series"] for v in s["values"] if v is not None) < 5000
