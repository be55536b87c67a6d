"""conf/build_docs.py end to end: CLI errors, and strict builds of a FIXTURE project.

The integration tests build tests/docs/fixtures/project (copied to tmp_path) with the
real conf/conf.py, conf/Doxyfile and the stepwise_docs extension.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import synth

PY = sys.executable
HAVE_DOXYGEN = shutil.which("doxygen") is not None
needs_doxygen = pytest.mark.skipif(not HAVE_DOXYGEN, reason="doxygen is not installed")


def build_docs(*args: str, env: dict | None = None, cwd: Path | None = None):
    return subprocess.run([PY, str(synth.BUILD_DOCS), *args], capture_output=True, text=True,
                          env=env, cwd=cwd, timeout=300)


def project_args(project: Path, *extra: str) -> list[str]:
    return ["--root", str(project), "--build-dir", str(project / "build"),
            "--registry", str(project / "registry.json"),
            "--measurements", str(project / "measurements"), *extra]


def assert_one_line_error(proc, *needles: str):
    assert proc.returncode != 0, proc.stdout + proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, proc.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]
    assert "Traceback" not in proc.stderr
    assert "Site:" not in proc.stdout


# -- CLI errors: one line on stderr, non-zero --------------------------------------------

def test_missing_registry(project):
    os.remove(project / "registry.json")
    proc = build_docs(*project_args(project))
    assert_one_line_error(proc, "step registry", "registry.json", "does not exist")


def test_missing_measurement_file(project):
    args = project_args(project)
    args[args.index("--measurements") + 1] = str(project / "nope.json")
    proc = build_docs(*args)
    assert_one_line_error(proc, "nope.json", "does not exist")


def test_empty_measurement_directory(project):
    shutil.rmtree(project / "measurements")
    (project / "measurements").mkdir()
    proc = build_docs(*project_args(project))
    assert_one_line_error(proc, "no measurement files", "measurements", "make measure")


def test_corrupt_measurement_file(project):
    (project / "measurements" / "fixture-gpu.json").write_text("{ not json")
    proc = build_docs(*project_args(project))
    assert_one_line_error(proc, "fixture-gpu.json", "not valid JSON")


def test_schema_mismatch(project):
    data = synth.fixture_measurement()
    data["schema"] = 2
    synth.write_json(project / "measurements" / "fixture-gpu.json", data)
    proc = build_docs(*project_args(project))
    assert_one_line_error(proc, "fixture-gpu.json", "measurement.schema.json", "/schema")


def test_bad_option_is_one_line(project):
    proc = build_docs(*project_args(project, "--source", "cached"))
    assert_one_line_error(proc, "--source", "invalid choice")
    assert proc.returncode == 2


def test_missing_doxygen(project, tmp_path):
    # A PATH without doxygen (the Python we run is given by absolute path).
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    env = dict(os.environ, PATH=str(empty))
    proc = build_docs(*project_args(project), env=env)
    assert_one_line_error(proc, "doxygen not found")


def test_stale_snippet_fails_strict_before_building(project):
    snippet = project / "snippets" / "demo" / "02_vector.cuh"
    snippet.write_bytes(snippet.read_bytes().replace(b"float4 loads", b"float4 Loads", 1))
    proc = build_docs(*project_args(project, "--strict"))
    assert_one_line_error(proc, "stale measurement: demo/02_vector",
                          "snippets/demo/02_vector.cuh changed", "make measure")


def test_help():
    proc = build_docs("--help")
    assert proc.returncode == 0
    for option in ("--build-dir", "--registry", "--measurements", "--source", "--strict"):
        assert option in proc.stdout


# -- building the FIXTURE project --------------------------------------------------------

@needs_doxygen
def test_strict_build_passes_and_renders_everything(project):
    proc = build_docs(*project_args(project, "--strict"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    last = proc.stdout.strip().splitlines()[-1]
    assert last.startswith("Site: ")
    index = Path(last.removeprefix("Site: "))
    assert index.is_absolute() and index.is_file()
    assert index == project / "build" / "docs" / "html" / "index.html"
    html = index.read_text(encoding="utf-8")
    html_text = re.sub(r"<[^>]+>", "", html)

    # tables, with the CSS class the browser check looks for, and provenance under each
    assert html.count('class="stepwise-data stepwise-measurements') == 3  # 2 timings + :timing:
    assert html_text.count("Measured on FIXTURE GPU (not a measurement)") >= 8
    assert "recorded measurements, not re-measured in this build" in html_text
    # the plot: a PNG in _images, alt text, provenance in its caption
    images = list((index.parent / "_images").glob("stepwise-demo-*.png"))
    assert len(images) == 1 and images[0].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert re.search(r'<img alt="Bar chart, logarithmic time axis[^"]*"[^>]*class="stepwise-plot', html)
    # step sections: source, download, diff, Breathe's launcher docs, marks
    assert "snippets/demo/01_naive.cuh" in html_text
    downloads = sorted(p.name for p in (index.parent / "_downloads").rglob("*.cuh"))
    assert downloads == ["01_naive.cuh", "02_vector.cuh"]
    assert "What changed since 01_naive" in html_text
    assert "+++ snippets/demo/02_vector.cuh" in html_text
    assert 'id="_CPPv4N8stepwise4demo5naive6updateEPfi12cudaStream_t"' in html
    assert "Doubles n floats in place (fixture launcher)." in " ".join(html_text.split())
    assert "Beyond the article" in html_text and "Not the same operation" in html_text
    # the table links each step to its section
    assert 'href="#one-float-per-thread"' in html and 'id="one-float-per-thread"' in html
    # single numbers from the role, with the right arithmetic
    assert "The second step is 5.00\u00d7 faster" in " ".join(html_text.split())
    assert "7/7 passed" in html_text
    assert "stale" not in html_text.lower()


@needs_doxygen
def test_strict_build_fails_naming_step_and_file_after_one_byte(project):
    assert build_docs(*project_args(project, "--strict")).returncode == 0
    snippet = project / "snippets" / "demo" / "01_naive.cuh"
    data = bytearray(snippet.read_bytes())
    data[-2] = ord("x") if data[-2] != ord("x") else ord("y")  # one byte, in the final comment
    snippet.write_bytes(bytes(data))
    proc = build_docs(*project_args(project, "--strict"))
    assert proc.returncode != 0
    assert "stale measurement: demo/01_naive" in proc.stderr
    assert "snippets/demo/01_naive.cuh" in proc.stderr


@needs_doxygen
def test_extension_itself_fails_strict_on_stale(project):
    """The Sphinx extension stops a strict build on its own (without build_docs.py's pre-check)."""
    assert build_docs(*project_args(project)).returncode == 0  # doxygen XML for Breathe
    snippet = project / "snippets" / "demo" / "02_vector.cuh"
    snippet.write_bytes(snippet.read_bytes() + b"//\n")
    env = dict(os.environ,
               STEPWISE_REGISTRY=str(project / "registry.json"),
               STEPWISE_MEASUREMENTS=str(project / "measurements"),
               STEPWISE_STRICT="1", STEPWISE_REPO_ROOT=str(project),
               STEPWISE_DOXYGEN_XML=str(project / "build" / "doxygen" / "xml"))
    proc = subprocess.run([PY, "-m", "sphinx", "-E", "-W", "-q", "-b", "html",
                           "-c", str(synth.REPO / "conf"), str(project / "docs"),
                           str(project / "out")], capture_output=True, text=True, env=env,
                          timeout=300)
    assert proc.returncode != 0
    assert "stale measurement: demo/02_vector (snippets/demo/02_vector.cuh changed" in proc.stderr


@needs_doxygen
def test_non_strict_build_shows_stale_step(project):
    snippet = project / "snippets" / "demo" / "02_vector.cuh"
    snippet.write_bytes(snippet.read_bytes() + b"//\n")
    proc = build_docs(*project_args(project, "--source", "fresh"))
    assert proc.returncode == 0, proc.stderr
    assert "stale measurement: demo/02_vector" in proc.stderr  # a warning, not fatal
    html = (project / "build" / "docs" / "html" / "index.html").read_text(encoding="utf-8")
    text = " ".join(re.sub(r"<[^>]+>", "", html).split())
    assert "stale: source changed since measured" in text  # in the table rows
    assert "Stale: source changed since measured" in text  # the step's admonition
    assert 'class="stepwise-stale' in html or "stepwise-stale" in html
    assert "measured in this build" in text and "not re-measured" not in text


@needs_doxygen
def test_unknown_chapter_in_a_page_fails(project):
    page = project / "docs" / "index.md"
    page.write_text(page.read_text() + "\n```{stepwise-table} transpose\n```\n")
    proc = build_docs(*project_args(project, "--strict"))
    assert proc.returncode != 0
    assert "unknown chapter 'transpose'" in proc.stderr


@needs_doxygen
def test_registry_step_without_section_fails_strict(project):
    page = project / "docs" / "index.md"
    text = page.read_text()
    page.write_text(text[:text.index("## Four floats per thread")])
    proc = build_docs(*project_args(project, "--strict"))
    assert proc.returncode != 0
    assert "demo/02_vector" in proc.stderr and "stepwise-step" in proc.stderr


@needs_doxygen
def test_doxygen_warning_fails_the_build(project):
    snippet = project / "snippets" / "demo" / "01_naive.cuh"
    snippet.write_text(snippet.read_text().replace("/// @param n number of elements",
                                                   "/// @param count number of elements"))
    proc = build_docs(*project_args(project))
    assert proc.returncode != 0
    assert proc.stderr.strip().splitlines()[-1].startswith("build_docs.py: error: doxygen failed")
