"""The real pages (docs/*.md) build under -W with the real snippets.

No GPU and no C++ build: the registry is made from the snippet files and the numbers
are FIXTURE numbers written to tmp_path (never to docs/measurements). If the lead's
build has produced build/registry.json, its chapter list is used instead, so the pages
are also checked against the real registry.
"""
from __future__ import annotations

import functools
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import synth

pytestmark = pytest.mark.skipif(shutil.which("doxygen") is None, reason="doxygen is not installed")

REAL_REGISTRY = synth.REPO / "build" / "registry.json"


def _registry() -> dict:
    if REAL_REGISTRY.is_file():
        try:
            registry = json.loads(REAL_REGISTRY.read_text())
            if registry.get("chapters"):
                # Hashes of the current sources, in case the build is older than the tree.
                for chapter in registry["chapters"]:
                    for step in chapter["steps"]:
                        step.pop("source_sha256", None)
                return registry
        except (OSError, ValueError):
            pass
    steps = synth.snippet_steps(synth.REPO, "elementwise")
    if not steps:
        pytest.skip("no snippets/elementwise/*.cuh yet")
    registry = synth.registry_for(steps)
    reduction = synth.snippet_steps(synth.REPO, "reduction", "sum", synth.REDUCTION_SIZES)
    if reduction:
        registry["chapters"] += synth.registry_for(
            reduction, "reduction", synth.REDUCTION_TIMINGS, synth.REDUCTION_CEILINGS,
            synth.REDUCTION_BASELINES)["chapters"]
    for chapter in registry["chapters"]:  # the front page's results table (stepwise-summary)
        steps = chapter["steps"]
        chapter["headline"] = {"n": steps[0]["sizes"][0]["n"], "timing": chapter["timings"][0]["id"],
                               "first": steps[0]["id"], "final": steps[-1]["id"]}
    return registry


def _chapter(chapter_id: str) -> dict | None:
    return next((c for c in _registry()["chapters"] if c["id"] == chapter_id), None)


ROOFLINE = re.compile(r"^```\{stepwise-roofline\}\s+(\S+)\s+(\S+)\s*$", re.MULTILINE)
#: A number role that names a GPU: ``{stepwise-number}`CHAPTER/ROW/FIELD...!GPU```.
NUMBER_OF_GPU = re.compile(r"(\{stepwise-number\}`[^`]*)![a-z0-9][a-z0-9-]*`")


def _pages_root(tmp: Path, registry: dict) -> Path:
    """A root for build_docs.py: a copy of docs/ (the real pages), snippets/ and tests/ linked.

    A roofline needs a Nsight Compute file of the measurement file's GPU, and the numbers here are
    FIXTURE ones: each ``stepwise-roofline CHAPTER FILE`` of a registry chapter is pointed at a
    FIXTURE file for that chapter (synth.ncu_csv) named for the FIXTURE GPU, and each number role
    that names a GPU (``...!nvidia-h200``) at the FIXTURE GPU, the one GPU of this build. Nothing
    is written under the repository.
    """
    root = tmp / "root"
    shutil.copytree(synth.REPO / "docs", root / "docs", ignore=shutil.ignore_patterns("_ext"))
    for name in ("snippets", "tests"):
        (root / name).symlink_to(synth.REPO / name, target_is_directory=True)
    chapters = {c["id"]: c for c in registry["chapters"]}
    for page in (root / "docs").glob("*.md"):
        text = page.read_text(encoding="utf-8")

        def fixture_csv(match: re.Match) -> str:
            chapter = chapters.get(match.group(1))
            if chapter is None:
                return match.group(0)
            rel = f"measurements/logs/fixture-gpu-{chapter['id']}-ncu.csv"
            (page.parent / rel).parent.mkdir(parents=True, exist_ok=True)
            (page.parent / rel).write_text(synth.ncu_csv(chapter, synth.default_dram(chapter)))
            return f"```{{stepwise-roofline}} {chapter['id']} {rel}"

        new = NUMBER_OF_GPU.sub(r"\1!fixture-gpu`", ROOFLINE.sub(fixture_csv, text))
        if new != text:
            page.write_text(new, encoding="utf-8")
    return root


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("pages")
    registry = _registry()
    root = _pages_root(tmp, registry)
    synth.write_json(tmp / "registry.json", registry)
    if (REAL_REGISTRY.parent / "sass").is_dir():  # the build's SASS reports, beside the registry
        shutil.copytree(REAL_REGISTRY.parent / "sass", tmp / "sass")
    synth.write_json(tmp / "measurements" / "fixture.json",
                     synth.measurement_for(registry, root))
    proc = subprocess.run(
        [sys.executable, str(synth.BUILD_DOCS), "--root", str(root), "--build-dir", str(tmp / "build"),
         "--registry", str(tmp / "registry.json"), "--measurements", str(tmp / "measurements"),
         "--strict"],
        capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    index = Path(proc.stdout.strip().splitlines()[-1].removeprefix("Site: "))
    assert index.is_file()
    return index.parent


def _text(path: Path) -> str:
    return synth.html_text(path.read_text(encoding="utf-8"))


def _chapter_page(site: Path, chapter_id: str) -> tuple[str, str]:
    """A chapter's page, as HTML and as text, once it is checked to show every step's file (skips the test
    where the registry has no such chapter)."""
    chapter = _chapter(chapter_id)
    if chapter is None:
        pytest.skip(f"no {chapter_id} chapter in the registry")
    html = (site / f"{chapter_id}.html").read_text(encoding="utf-8")
    for step in chapter["steps"]:
        assert step["file"] in html
    return html, _text(site / f"{chapter_id}.html")


def test_pages_exist(site):
    for page in ("index.html", "methodology.html", "elementwise.html"):
        assert (site / page).is_file()


def test_elementwise_page_shows_every_step(site):
    html = (site / "elementwise.html").read_text(encoding="utf-8")
    assert "stepwise-measurements" in html and "stepwise-plot" in html
    for step in _registry()["chapters"][0]["steps"]:
        assert step["file"] in html
    assert "FIXTURE GPU (not a measurement)" in html
    # the article's own figures are quoted as the author's
    text = _text(site / "elementwise.html")
    assert "1.12 ms" in text and "driver 446.47" in text


def test_methodology_shows_the_stopping_rule_from_the_file(site):
    text = _text(site / "methodology.html")
    assert "The run and its stopping rule" in text
    assert "minimum samples 10" in text and "maximum samples 100" in text  # FIXTURE values
    assert "Measured on FIXTURE GPU" in text
    # no measurement table on the methodology page (the browser check requires a plot there)
    assert "stepwise-measurements" not in (site / "methodology.html").read_text(encoding="utf-8")


def test_reduction_page_shows_every_step_and_the_evidence(site):
    html, text = _chapter_page(site, "reduction")
    # one table and one plot per size, each with the CUB column and line
    assert html.count('class="stepwise-data stepwise-measurements') == 2
    assert "(2^22 int)" in text and "(2^28 int)" in text
    assert len(re.findall(r'<img alt="Bar chart[^"]*baseline cub_device_reduce_sum', html)) == 2
    assert "vs CUB" in text
    # the Nsight Compute counts (the recorded file) and the racecheck log are shown; with
    # FIXTURE measurements the counts are not claimed for this run
    assert html.count('class="stepwise-data stepwise-ncu') == 2
    assert "were not taken in the run whose measurements this page shows" in text
    assert "RACECHECK SUMMARY: 5 hazards displayed" in text
    assert "volatile_last_warp_sum" in text and "__syncwarp" in text
    # the usage example, from the test between its markers
    assert "temp_storage_bytes" in text and "example-begin" not in text
    # Harris's figures, quoted as his
    assert "8.054 ms" in text and "his figures, measured by him on his GPU" in text


def test_sgemm_page_shows_every_step_and_the_evidence(site):
    html, text = _chapter_page(site, "sgemm")
    for css in ("stepwise-bounds", "stepwise-sweep-table", "stepwise-roofline-table",
                "stepwise-autotune-table"):
        assert f'class="stepwise-data {css}' in html, css
    assert "The SC\u201910 bounds for FIXTURE GPU (not a measurement), n = 4096" in text
    assert "for fp32 the factor is 1" in text and "computed, not measured" in text
    assert "chosen: step 11_any_shape_any_size" in text
    assert len(re.findall(r'<img alt="(?:Line chart|Roofline)', html)) == 2


def _article(html: str) -> str:
    """A page's own content (the theme's <article>), without its navigation."""
    return html[html.index("<article"):html.index("</article>")]


def test_index_opens_with_what_it_is_and_where_to_start(site):
    """Under the title: three sentences on what this is, "Start here" with the methodology page and the first
    chapter, the results in a sentence or two, then the table; the chapters listed once, after it."""
    html = _article((site / "index.html").read_text(encoding="utf-8"))
    order = [html.index("Stepwise CUDA is a guide"), html.index("Start here"), html.index('href="methodology.html"'),
             html.index('href="elementwise.html"'), html.index("stepwise-summary-line"),
             html.index('<table class="stepwise-data stepwise-summary')]
    assert order == sorted(order)
    line = synth.html_text(html[html.index("stepwise-summary-line"):html.index("<table")])
    assert re.search(r"final step is level with its library \(within 2 %\) or ahead of it in \d+ of the \d+ "
                     r"chapters measured against one", line), line
    # the chapter list once: no toctree in the page (it is hidden, for the sidebar), one list after the table
    assert "toctree-l1" not in html
    listed = html[html.index('id="the-chapters"'):]
    listed = listed[:listed.index("<section", 1)] if "<section" in listed[1:] else listed
    for chapter in ["methodology"] + [c["id"] for c in _registry()["chapters"]]:
        if (site / f"{chapter}.html").is_file():
            assert listed.count(f'href="{chapter}.html"') == 1, chapter


def test_index_shows_the_results_table(site):
    """One row per chapter with a headline, linked to its page; its timing in words, each step's place."""
    html = (site / "index.html").read_text(encoding="utf-8")
    table = html[html.index('<table class="stepwise-data stepwise-summary'):]
    table = table[:table.index("</table>")]
    chapters = [c for c in _registry()["chapters"] if c.get("headline")]
    assert table.count("<tr") == 2 + len(chapters)
    for chapter in chapters:
        assert f'href="{chapter["id"]}.html"' in table, chapter["id"]
        final = [s["id"] for s in chapter["steps"]].index(chapter["headline"]["final"]) + 1
        assert f">{final} of {len(chapter['steps'])}<" in table, chapter["id"]  # "10 of 12", not "step 10"
    assert "stepwise-gpu-group" in table and "FIXTURE GPU (not a measurement)" in table
    text = synth.html_text(table)
    assert "_" not in text, text  # timings in words ("one cold launch"), not ids ("single_cold")
    # for narrow screens, the same rows in one table per GPU
    narrow = html[html.index('<table class="stepwise-data stepwise-summary-one-gpu'):]
    assert narrow[:narrow.index("</table>")].count("<tr") == 1 + len(chapters)


def test_no_page_lists_a_contents_entry_twice(site):
    """The "on this page" list: each step's launcher (Breathe's entry, the same name in every step) is not in it."""
    for page in sorted(site.glob("*.html")):
        html = page.read_text(encoding="utf-8")
        if '<aside class="toc-drawer' not in html:
            continue
        drawer = html[html.index('<aside class="toc-drawer'):]
        drawer = drawer[:drawer.index("</aside>")]
        entries = [synth.html_text(a) for a in re.findall(r"<a [^>]*>(.*?)</a>", drawer, re.S)]
        twice = sorted({e for e in entries if e and entries.count(e) > 1})
        assert not twice, f"{page.name}: {twice}"


def test_no_table_has_a_column_without_a_value(site):
    """A column whose every cell is empty or a dash (LayerNorm's vs cuDNN RMSNorm; a GEMM's GB/s) is left out."""
    empty = []
    for page in sorted(site.glob("*.html")):
        for table in synth.html_tables(page.read_text(encoding="utf-8")):
            if "stepwise-data" not in table.classes:
                continue
            for i, (header, cells) in enumerate(table.columns()):
                if i and cells and all(c in ("", "\u2014") for c in cells):
                    empty.append(f"{page.name}: {table.caption or table.classes} column {header or i}")
    assert empty == []


FLOP_RATE = re.compile(r"(?<![\d,.])(\d{1,3}(?:,\d{3})*(?:\.\d+)?) (GFLOP/s|TFLOP/s)")


def test_flop_rates_read_in_one_unit_per_table_and_in_tflops_from_a_thousand_gflops(site):
    for page in sorted(site.glob("*.html")):
        html = page.read_text(encoding="utf-8")
        for table in synth.html_tables(html):
            words = " ".join([table.caption] + table.header + [c for row in table.rows for c in row])
            assert not ("GFLOP/s" in words and "TFLOP/s" in words), f"{page.name}: {table.caption or table.classes}"
            for header, cells in table.columns():
                if header == "GFLOP/s":
                    big = [c for c in cells if c.replace(",", "").replace(".", "").isdigit()
                           and float(c.replace(",", "")) >= 1000]
                    assert not big, f"{page.name}: {table.caption}: {big}"
        for value, unit in FLOP_RATE.findall(synth.html_text(html)):
            assert unit == "TFLOP/s" or float(value.replace(",", "")) < 1000, f"{page.name}: {value} {unit}"


#: A number of more than 12 digits: the key that stands for a shaped size, never meant for readers.
KEY_NUMBER = re.compile(r"(?<![\w.])\d{13,}")


def test_no_plot_or_caption_shows_a_key_for_a_size(site):
    """Plot titles (the images' metadata), alt texts, captions and tooltips name a size by its problem."""
    from PIL import Image

    for image in sorted((site / "_images").glob("stepwise-*.png")):
        title = Image.open(image).text.get("Title", "")
        assert title and not KEY_NUMBER.search(title), f"{image.name}: {title!r}"
    for page in sorted(site.glob("*.html")):
        html = page.read_text(encoding="utf-8")
        shown = [synth.html_text(html)] + re.findall(r'(?:alt|title)="([^"]*)"', html)
        found = [KEY_NUMBER.search(text).group(0) for text in shown if KEY_NUMBER.search(text)]
        assert not found, f"{page.name}: {found[:3]}"


def test_no_number_role_is_followed_by_its_unit_again():
    """A rate or a time from a role carries its unit: the prose does not add it ("693 TFLOP/s TFLOP/s")."""
    twice = re.compile(r"\{stepwise-number\}`[^`]*/(?:tflops|gflops|gbps|median)[^`]*`"
                       r"\s+(?:[GT]FLOP/s|GB/s|ms|\u00b5s)\b")
    for page in sorted((synth.REPO / "docs").glob("*.md")):
        found = twice.findall(page.read_text(encoding="utf-8"))
        assert not found, f"{page.name}: {found}"


def test_index_lists_the_reduction_chapter(site):
    if _chapter("reduction") is None:
        pytest.skip("no reduction chapter in the registry")
    html = (site / "index.html").read_text(encoding="utf-8")
    assert 'href="reduction.html"' in html


def test_no_number_is_written_by_hand_in_the_reduction_chapter():
    """Our numbers in docs/reduction.md come from roles; only the sources' figures are typed."""
    text = (synth.REPO / "docs" / "reduction.md").read_text(encoding="utf-8")
    allowed = {
        # Harris's SC07 figures (GeForce 8800 GTX), quoted as his
        "8.054 ms", "3.456 ms", "1.722 ms", "0.965 ms", "0.536 ms", "0.381 ms", "0.268 ms",
        "2.083 GB/s", "4.854 GB/s", "9.741 GB/s", "17.377 GB/s", "31.289 GB/s", "43.996 GB/s",
        "62.671 GB/s",
        # source 003's nvprof figures and times (Tesla K80), quoted as the article's
        "25.01%", "22.49%", "98.04%", "71.95%", "98.14%", "100.00%", "98.24%", "100%",
        "75.65%", "12.76%", "31.936 \u00b5s", "31.711 \u00b5s", "34.720 \u00b5s",
        "39.135 \u00b5s",
        # the definition of the share column
        "100 %",
    }
    found = set(re.findall(r"\b\d+(?:\.\d+)?\s*(?:ms|us|\u00b5s|ns|GB/s|GFLOP/s|%)(?!\w)", text))
    assert found <= allowed, found - allowed
    # every row of Harris's table is labelled as his, next to role-made numbers of ours
    for line in text.splitlines():
        if re.search(r"\b0\.\d{3} ms\b|\b8\.054 ms", line):
            assert "{stepwise-number}" in line, line


def test_no_number_is_written_by_hand_in_the_chapter():
    """Times, rates and shares in docs/elementwise.md come from roles, except the article's."""
    text = (synth.REPO / "docs" / "elementwise.md").read_text(encoding="utf-8")
    # the article author's figures, quoted as such, and the definition of the share column
    allowed = {"1.12 ms", "0.23 ms", "0.24 ms", "100 %"}
    found = set(re.findall(r"\b\d+(?:\.\d+)?\s*(?:ms|us|\u00b5s|ns|GB/s|GFLOP/s|%)(?!\w)", text))
    assert found <= allowed, found - allowed


#: Per page, the figures typed in its prose: the sources' (quoted as theirs, with their GPU),
#: the definition of the share column and the issues' bars; every other number is a role's.
TYPED_FIGURES = {
    "transpose": {"100 %", "90 %"},
    "twist": {"100 %", "90 %", "1620 ms", "120 ms", "19 ms", "15.7 ms", "13.7 ms"},
    "sgemm": {"100 %", "90 %", "71 %"},  # 71 %: Boehm's kernel on an H100, labelled as not ours
    "divergence": {"50.00%", "100.00%"},  # source 003's nvprof on a Tesla K80
    "occupancy": {"50.00%"},  # ditto
    "dynamic_parallelism": {"100 %"},
}


@pytest.mark.parametrize("page", sorted(TYPED_FIGURES))
def test_no_number_is_written_by_hand_in_the_later_chapters(page):
    """Times, rates and shares in the later chapters' pages come from roles, except those listed."""
    text = (synth.REPO / "docs" / f"{page}.md").read_text(encoding="utf-8")
    found = set(re.findall(r"\b\d+(?:\.\d+)?\s*(?:ms|us|\u00b5s|ns|[GT]B/s|[GT]FLOP/s|%)(?!\w)", text))
    assert found <= TYPED_FIGURES[page], found - TYPED_FIGURES[page]


def test_site_needs_no_network(site):
    """No page loads a script or stylesheet from another host (MathJax from a CDN, say)."""
    for page in site.glob("*.html"):
        html = page.read_text(encoding="utf-8")
        assert not re.search(r'<(?:script|link)[^>]+(?:src|href)="(?:https?:)?//', html), page.name


@functools.lru_cache(maxsize=None)
def _in_commit(commit: str, file: str) -> bool:
    """Whether ``file`` exists at ``commit`` of the repository (false where git or the commit is not there); asked
    once per pair, though every size's row names its file."""
    proc = subprocess.run(["git", "-C", str(synth.REPO), "cat-file", "-e", f"{commit}:{file}"],
                          capture_output=True, check=False)
    return proc.returncode == 0


def test_recorded_measurements_are_valid():
    """Every committed file in docs/measurements/ matches the schema and names existing files: each row's file
    exists now or, where the step was renamed or split since (a second GPU's rows, kept as of their commit), at the
    commit its chapter was measured at, whose source the as-of note's `git show` prints.

    (Whether its hashes still match the sources is the strict docs build's job: make test.)
    """
    from stepwise_docs.inputs import load_measurements

    files = sorted((synth.REPO / "docs" / "measurements").glob("*.json"))
    if not files:
        pytest.skip("no recorded measurement in docs/measurements/ yet")
    for path in files:
        data = load_measurements(path)
        assert data["gpu"]["name"] != synth.FIXTURE_GPU, f"{path} is a fixture"
        for chapter in data["chapters"]:
            commit = chapter["run"]["commit"]
            for row in chapter["steps"]:
                assert (synth.REPO / row["file"]).is_file() or _in_commit(commit, row["file"]), \
                    f"{path}: {row['file']} is gone, and not in {commit}"


#: A worklog block, in either fence: its trials and earlier runs may name the commits they were measured at.
WORKLOG_BLOCK = re.compile(r"^(`{3,})\{stepwise-worklog\}.*?^\1\s*$", re.S | re.M)
COMMIT = re.compile(r"\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{7,40}\b")


@pytest.mark.parametrize("page", sorted(p.stem for p in (synth.REPO / "docs").glob("*.md")))
def test_a_pages_story_names_at_most_three_commits(page):
    """Commits belong in provenance lines and worklog blocks; the story outside them names three at most."""
    text = WORKLOG_BLOCK.sub("", (synth.REPO / "docs" / f"{page}.md").read_text(encoding="utf-8"))
    named = sorted(set(COMMIT.findall(text)))
    assert len(named) <= 3, named


@pytest.mark.parametrize("page", sorted(p.stem for p in (synth.REPO / "docs").glob("*.md")))
def test_no_page_speaks_of_how_the_work_was_organized(page):
    """The guide speaks of itself: no sessions, lent machines or tracker issues, worklogs included."""
    text = (synth.REPO / "docs" / f"{page}.md").read_text(encoding="utf-8")
    found = re.findall(r"\bsessions?\b|\blent\b|\bissues? #?\d+\b|\bthe issue (?:that|which)\b", text, re.I)
    assert not found, found
