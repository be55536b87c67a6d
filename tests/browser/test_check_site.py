"""Tests of tests/browser/check_site.py: the link/anchor logic without a browser, and the
whole check against tiny generated sites in headless Chromium (skipped without it)."""
from __future__ import annotations

import base64
import os
import shutil
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import check_site  # noqa: E402

# A 1x1 PNG.
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==")


def write(path: Path, text: str | bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


def page(body: str, head: str = "") -> str:
    return f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>t</title>{head}</head><body>{body}</body></html>"


def summary_table(gpus: list[str], rows: int = 1, href: str = "elementwise.html") -> str:
    """A results table as the stepwise-summary directive writes it (docutils' HTML)."""
    groups = "".join(f"<th class='head stepwise-gpu-group' colspan='5'><p>{g}</p></th>" for g in gpus)
    body = "".join(f"<tr><td><p><a class='reference internal' href='{href}'>Element-wise</a></p></td>"
                   "<td><p>2048 x 2048 float</p></td><td><p>batch</p></td>" + "<td>1</td>" * 5 * len(gpus)
                   + "</tr>" for _ in range(rows))
    return (f"<div class='stepwise-summary-block'><table class='docutils stepwise-data stepwise-summary "
            f"stepwise-gpus-{len(gpus)}'>"
            "<thead><tr><th class='head' rowspan='2'>chapter</th>" + groups + "</tr>"
            "<tr><th>first step</th></tr></thead>"
            f"<tbody>{body}</tbody></table></div>")


#: The top of a front page: where to start, within its first screen.
START_HERE = "<p><strong>Start here:</strong> <a href='methodology.html'>Methodology</a></p>"


# ---- pure logic ------------------------------------------------------------------------

def test_scan_html_collects_ids_names_hrefs_and_classes():
    scan = check_site.scan_html(
        page("<h1 id='top' class='a b'>x</h1><a name='old'></a><a href='x.html#y'>l</a><img id='i'/>"))
    assert scan.ids == {"top", "old", "i"}
    assert scan.hrefs == ["x.html#y"]
    assert {"a", "b"} <= scan.classes


def test_has_measurements_needs_the_class_not_the_word():
    assert check_site.has_measurements(page("<table class='docutils stepwise-measurements'></table>"))
    assert not check_site.has_measurements(page("<pre>table.stepwise-measurements</pre>"))


@pytest.mark.parametrize("href,internal", [
    ("chapter.html", True), ("#anchor", True), ("../x.html", True), ("_downloads/a/b.cuh", True),
    ("#", True), ("https://example.org/", False), ("http://x", False), ("mailto:a@b", False),
    ("javascript:void(0)", False), ("//cdn.example.org/x.js", False), ("", False),
])
def test_is_internal(href, internal):
    assert check_site.is_internal(href) is internal


def test_pages_to_check_skips_generated_pages_and_puts_index_first(tmp_path):
    for name in ("index.html", "a.html", "genindex.html", "search.html", "py-modindex.html", "z.html"):
        write(tmp_path / name, page(""))
    write(tmp_path / "sub" / "deep.html", page(""))
    assert [p.name for p in check_site.pages_to_check(tmp_path)] == ["index.html", "a.html", "z.html"]


@pytest.fixture
def site(tmp_path):
    write(tmp_path / "index.html", page("<h1 id='welcome'>Hi</h1>"))
    write(tmp_path / "chapter.html", page("<section id='step-1'><h2 id='why'>Why</h2></section>"))
    write(tmp_path / "sub" / "index.html", page("<p id='deep'>deep</p>"))
    write(tmp_path / "_downloads" / "abc" / "01_step.cuh", "// code\n")
    write(tmp_path / "_sources" / "chapter.md.txt", "# chapter\n")
    return tmp_path


def test_check_links_accepts_good_links(site):
    hrefs = ["chapter.html", "chapter.html#why", "#welcome", "#", "sub/", "sub/index.html#deep",
             "./chapter.html?x=1#step-1", "_downloads/abc/01_step.cuh", "_sources/chapter.md.txt#L1",
             "https://example.org/missing.html", "chapter.html#:~:text=Why", "chapter%2Ehtml#why"]
    assert check_site.check_links(site, site / "index.html", hrefs) == []


def test_check_links_reports_missing_file_missing_anchor_and_escapes(site):
    problems = check_site.check_links(
        site, site / "index.html", ["nope.html", "chapter.html#nope", "#nowhere", "../outside.html"])
    assert len(problems) == 4
    assert "no file nope.html" in problems[0]
    assert "no element with id 'nope' in chapter.html" in problems[1]
    assert "no element with id 'nowhere' in index.html" in problems[2]
    assert "outside the site" in problems[3]


def test_check_links_resolves_relative_to_the_linking_page(site):
    assert check_site.check_links(site, site / "sub" / "index.html", ["../chapter.html#why", "#deep"]) == []
    assert check_site.check_links(site, site / "sub" / "index.html", ["chapter.html"]) != []


def test_check_links_unquotes_fragments(site):
    write(site / "odd.html", page("<p id='a b'>x</p>"))
    assert check_site.check_links(site, site / "index.html", ["odd.html#a%20b"]) == []


def test_check_links_uses_the_given_id_lookup(site):
    calls = []

    def ids_of(path):
        calls.append(path.name)
        return {"only"}

    assert check_site.check_links(site, site / "index.html", ["chapter.html#only"], ids_of=ids_of) == []
    assert calls == ["chapter.html"]


def test_scan_summary_counts_rows_gpus_and_links():
    html = page("<table class='docutils'><tbody><tr><td>other</td></tr></tbody></table>"
                + summary_table(["GPU A", "GPU B"], rows=3))
    scan = check_site.scan_summary(html)
    assert scan.found and scan.body_rows == 3
    assert scan.gpu_groups == ["GPU A", "GPU B"]
    assert scan.hrefs == ["elementwise.html"] * 3
    assert not check_site.scan_summary(page("<table class='stepwise-data'></table>")).found


def test_summary_problems_accepts_a_good_table(site):
    html = page(summary_table(["GPU A", "GPU B"], href="chapter.html"))
    assert check_site.summary_problems(site, site / "index.html", html) == []
    assert check_site.summary_problems(site, site / "index.html", html, min_gpus=2) == []


@pytest.mark.parametrize("html, min_gpus, needle", [
    (page("<p>no table</p>"), 1, "no table.stepwise-summary"),
    (page(summary_table(["GPU A"], rows=0, href="chapter.html")), 1, "has no body row"),
    (page(summary_table(["GPU A"], href="nope.html")), 1, "has no link that resolves (nope.html)"),
    (page(summary_table(["GPU A"], href="https://example.org/")), 1, "no internal link"),
    (page(summary_table(["GPU A"], href="chapter.html")), 2, "shows 1 GPU(s) (GPU A), expected at least 2"),
    (page(summary_table([], href="chapter.html")), 1, "shows 0 GPU(s) (none)"),
])
def test_summary_problems(site, html, min_gpus, needle):
    problems = check_site.summary_problems(site, site / "index.html", html, min_gpus)
    assert problems and any(needle in p for p in problems), problems


def test_contents_problems_name_an_entry_listed_twice():
    assert check_site.contents_problems(["Step 1: one thread", "update()", "Step 2: a block", "update()"]) == [
        "the page's contents list 'update()' 2 times"]
    assert check_site.contents_problems(["Step 1", " Step  2 ", "", ""]) == []


def test_overflow_problems_name_the_table_and_its_widths():
    boxes = [{"caption": "The run and its stopping rule", "scroll_width": 742, "client_width": 742},
             {"caption": "The 6 runs", "scroll_width": 1843, "client_width": 742}]
    assert check_site.overflow_problems(boxes, "run table") == [
        "run table 'The 6 runs' overflows its container: 1843 px wide in 742 px"]


def test_first_screen_problems():
    assert check_site.first_screen_problems({"start_here": 260.0, "methodology": 261.0}) == []
    assert check_site.first_screen_problems({"start_here": 7100.0, "methodology": None}) == [
        'the words "Start here" is 7100 px down index.html, below its first screen (900 px)',
        "index.html has no a link to methodology.html"]


def test_narrow_summary_problems_want_every_gpu_in_a_table_that_fits():
    one_each = [{"text": "Results on GPU A ...", "fits": True}, {"text": "Results on GPU B ...", "fits": True}]
    assert check_site.narrow_summary_problems(["GPU A", "GPU B"], one_each, 390) == []
    wide = [{"text": "GPU A ... GPU B ...", "fits": False}]
    assert check_site.narrow_summary_problems(["GPU A", "GPU B"], wide, 390) == [
        "at 390 px, the results of GPU A are in a table wider than the screen",
        "at 390 px, the results of GPU B are in a table wider than the screen"]
    assert check_site.narrow_summary_problems(["GPU B"], one_each[:1], 390) == [
        "at 390 px, no table of the results shows GPU B"]


class _FakeDriver:
    """Enough of a WebDriver for main() without a browser: every page shows its measurements, the front page where
    to start at its top and every GPU's results whole at a phone's width."""

    def get_log(self, _kind):
        return []

    def get(self, _url):
        pass

    def set_window_size(self, _width, _height):
        pass

    def execute_script(self, script):
        if script == check_site._FIRST_SCREEN_JS:
            return {"start_here": 200.0, "methodology": 200.0}
        if script == check_site._NARROW_SUMMARY_JS:
            return [{"text": "GPU A GPU B NVIDIA H100 80GB HBM3", "fits": True}]
        if script == "return window.innerWidth;":
            return check_site.PHONE_WINDOW[0]
        if script in (check_site._CONTENTS_JS, check_site._RUN_TABLES_JS):
            return []
        if "a[href]" in script and "tables" not in script:
            return []
        return {"tables": 1, "plots": 1, "broken": [], "code": 1, "copy": 1}

    def quit(self):
        pass


@pytest.mark.parametrize("gpus, min_gpus, ok", [(["GPU A"], 1, True), (["GPU A"], 2, False),
                                                 (["GPU A", "GPU B"], 2, True)])
def test_min_gpus_without_browser(tmp_path, capsys, monkeypatch, gpus, min_gpus, ok):
    site = tmp_path / "site"
    write(site / "index.html", page(summary_table(gpus, href="chapter.html")))
    write(site / "chapter.html", page("<p>chapter</p>"))
    monkeypatch.setattr(check_site, "make_driver", lambda *a: _FakeDriver())
    assert check_site.main(["--site", str(site), "--min-gpus", str(min_gpus)]) == (0 if ok else 1)
    out = capsys.readouterr().out
    assert ("PASS index.html" in out) is ok
    if not ok:
        assert f"expected at least {min_gpus} (th.stepwise-gpu-group)" in out


def test_index_without_summary_fails_without_browser(tmp_path, capsys, monkeypatch):
    site = tmp_path / "site"
    write(site / "index.html", page("<p>no numbers</p>"))
    monkeypatch.setattr(check_site, "make_driver", lambda *a: _FakeDriver())
    assert check_site.main(["--site", str(site)]) == 1
    assert "no table.stepwise-summary" in capsys.readouterr().out


def test_is_severe():
    assert check_site.is_severe({"level": "SEVERE", "message": "Uncaught Error"})
    assert not check_site.is_severe({"level": "WARNING", "message": "x"})
    fav = {"level": "SEVERE", "message": "http://127.0.0.1:1/favicon.ico - Failed to load resource: 404"}
    assert check_site.is_severe(fav)
    assert not check_site.is_severe(fav, ignore_favicon=True)


# ---- the whole check in a browser ------------------------------------------------------

needs_browser = pytest.mark.skipif(
    not (shutil.which("/usr/bin/chromium") and shutil.which("/usr/bin/chromedriver")),
    reason="needs Debian's chromium and chromium-driver (/usr/bin/chromium, /usr/bin/chromedriver)")

# Adds the copy button from JavaScript after load, as sphinx-copybutton does.
COPYBUTTON_JS = """<script>document.addEventListener('DOMContentLoaded', () => setTimeout(() => {
  document.querySelectorAll('div.highlight pre').forEach(pre => {
    const b = document.createElement('button'); b.className = 'copybtn'; pre.parentNode.appendChild(b); });
}, 200));</script>"""


def measurement_page(img: str = "_images/plot.png") -> str:
    return page(
        "<h1 id='elementwise'>Element-wise</h1>"
        "<p>Measured on NVIDIA H100, 2026-11-23, commit abc1234.</p>"
        "<table class='docutils stepwise-measurements'><tr><td>1</td></tr></table>"
        f"<figure class='stepwise-plot'><img src='{img}' alt='plot'></figure>"
        "<div class='highlight'><pre>__global__ void k() {}</pre></div>"
        "<a href='index.html#intro'>back</a> <a href='https://example.org/'>out</a>",
        head=COPYBUTTON_JS)


def good_site(root: Path) -> Path:
    write(root / "index.html", page("<article><h1 id='intro'>Stepwise</h1>" + START_HERE
                                    + "<a href='elementwise.html#elementwise'>ch</a>"
                                    + summary_table(["NVIDIA H100 80GB HBM3"]) + "</article>"))
    write(root / "methodology.html", page("<h1>Methodology</h1><a href='index.html'>back</a>"))
    write(root / "elementwise.html", measurement_page())
    write(root / "_images" / "plot.png", PNG)
    write(root / "genindex.html", page("<a href='missing.html'>not checked</a>"))
    return root


@needs_browser
@pytest.mark.parametrize("http", [False, True], ids=["file", "http"])
def test_good_site_passes(tmp_path, capsys, http):
    site = good_site(tmp_path / "site")
    argv = ["--site", str(site), "--min-measurement-pages", "1"] + (["--http"] if http else [])
    assert check_site.main(argv) == 0
    out = capsys.readouterr().out
    assert "PASS index.html" in out
    assert "PASS elementwise.html [measurements]" in out
    assert "genindex" not in out
    assert out.strip().endswith("3 passed, 0 failed")


@needs_browser
def test_broken_site_fails_with_reasons(tmp_path, capsys):
    site = good_site(tmp_path / "site")
    write(site / "broken.html", page("<a href='nowhere.html'>x</a><a href='index.html#no-such-id'>y</a>"
                                     "<script>throw new Error('boom')</script>"))
    write(site / "elementwise.html", measurement_page(img="_images/missing.png"))
    assert check_site.main(["--site", str(site), "--wait", "1"]) == 1
    out = capsys.readouterr().out
    assert "FAIL broken.html" in out
    assert "no file nowhere.html" in out
    assert "no element with id 'no-such-id' in index.html" in out
    assert "boom" in out
    assert "FAIL elementwise.html [measurements]" in out
    assert "plot image did not load: _images/missing.png" in out
    assert out.strip().endswith("2 passed, 2 failed")


@needs_browser
def test_named_measurement_page_must_show_them(tmp_path, capsys):
    site = good_site(tmp_path / "site")
    assert check_site.main(["--site", str(site), "--pages-with-measurements", "index.html,ghost.html", "--wait", "1"]) == 1
    out = capsys.readouterr().out
    assert "FAIL ghost.html: expected to show measurements, but there is no such page" in out
    assert "FAIL index.html [measurements]" in out
    assert "no table.stepwise-measurements" in out


def test_min_measurement_pages_without_browser(tmp_path, capsys, monkeypatch):
    site = tmp_path / "site"
    write(site / "index.html", page("<p>no numbers</p>"))

    class FakeDriver:
        def quit(self):
            pass

    monkeypatch.setattr(check_site, "make_driver", lambda *a: FakeDriver())
    monkeypatch.setattr(check_site, "check_page", lambda *a, **k: [])
    assert check_site.main(["--site", str(site), "--min-measurement-pages", "1"]) == 1
    out = capsys.readouterr().out
    assert "0 page(s) with measurements, expected at least 1" in out
    assert out.strip().endswith("1 passed, 1 failed")


def test_missing_index_fails(tmp_path):
    assert check_site.main(["--site", str(tmp_path)]) == 1


@needs_browser
def test_what_a_reader_could_not_read_fails(tmp_path, capsys):
    """The front page's "Start here" below its first screen and its results wider than a phone; a page whose contents
    list one entry under every step; a run table wider than its column."""
    site = good_site(tmp_path / "site")
    wide = "<table class='stepwise-results' style='min-width: 1000px'><tr><td>NVIDIA H100 80GB HBM3</td></tr></table>"
    write(site / "index.html", page(
        "<article><h1 id='intro'>Stepwise</h1><div style='height: 1500px'></div>" + START_HERE
        + summary_table(["NVIDIA H100 80GB HBM3"]).replace("</table></div>", "</table>" + wide + "</div>")
        .replace("<table class='docutils", "<table style='min-width: 1000px' class='docutils") + "</article>"))
    write(site / "methodology.html", page(
        "<aside class='toc-drawer'><div class='toc-tree'><a href='#s1'>Step 1</a><a href='#a'>update()</a>"
        "<a href='#s2'>Step 2</a><a href='#a'>update()</a></div></aside>"
        "<h2 id='s1'>Step 1</h2><h2 id='s2'>Step 2</h2><span id='a'></span><div style='width: 300px'>"
        "<table class='stepwise-run'><caption>The 6 runs</caption><tr><td style='white-space: nowrap'>"
        + "stepwise_bench --out /root/out/rec/nvidia-h200.json " * 4 + "</td></tr></table></div>"))
    assert check_site.main(["--site", str(site), "--wait", "1"]) == 1
    out = capsys.readouterr().out
    assert 'the words "Start here" is ' in out and "below its first screen (900 px)" in out
    assert "at 390 px, the results of NVIDIA H100 80GB HBM3 are in a table wider than the screen" in out
    assert "FAIL methodology.html" in out and "the page's contents list 'update()' 2 times" in out
    assert "run table 'The 6 runs' overflows its container" in out
