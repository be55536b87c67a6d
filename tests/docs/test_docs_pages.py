"""The real pages (docs/*.md) build under -W with the real snippets.

No GPU and no C++ build: the registry is made from the snippet files and the numbers
are FIXTURE numbers written to tmp_path (never to docs/measurements). If the lead's
build has produced build/registry.json, its chapter list is used instead, so the pages
are also checked against the real registry.
"""
from __future__ import annotations

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
    return synth.registry_for(steps)


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("pages")
    registry = _registry()
    synth.write_json(tmp / "registry.json", registry)
    synth.write_json(tmp / "measurements" / "fixture.json",
                     synth.measurement_for(registry, synth.REPO))
    proc = subprocess.run(
        [sys.executable, str(synth.BUILD_DOCS), "--build-dir", str(tmp / "build"),
         "--registry", str(tmp / "registry.json"), "--measurements", str(tmp / "measurements"),
         "--strict"],
        capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    index = Path(proc.stdout.strip().splitlines()[-1].removeprefix("Site: "))
    assert index.is_file()
    return index.parent


def _text(path: Path) -> str:
    return " ".join(re.sub(r"<[^>]+>", " ", path.read_text(encoding="utf-8")).split())


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


def test_no_number_is_written_by_hand_in_the_chapter():
    """Times, rates and shares in docs/elementwise.md come from roles, except the article's."""
    text = (synth.REPO / "docs" / "elementwise.md").read_text(encoding="utf-8")
    # the article author's figures, quoted as such, and the definition of the share column
    allowed = {"1.12 ms", "0.23 ms", "0.24 ms", "100 %"}
    found = set(re.findall(r"\b\d+(?:\.\d+)?\s*(?:ms|us|\u00b5s|ns|GB/s|GFLOP/s|%)", text))
    assert found <= allowed, found - allowed


def test_site_needs_no_network(site):
    """No page loads a script or stylesheet from another host (MathJax from a CDN, say)."""
    for page in site.glob("*.html"):
        html = page.read_text(encoding="utf-8")
        assert not re.search(r'<(?:script|link)[^>]+(?:src|href)="(?:https?:)?//', html), page.name


def test_recorded_measurements_are_valid():
    """Every committed file in docs/measurements/ matches the schema and names existing files.

    (Whether its hashes still match the sources is the strict docs build's job: make test.)
    """
    from stepwise_docs.data import load_measurements

    files = sorted((synth.REPO / "docs" / "measurements").glob("*.json"))
    if not files:
        pytest.skip("no recorded measurement in docs/measurements/ yet")
    for path in files:
        data = load_measurements(path)
        assert data["gpu"]["name"] != synth.FIXTURE_GPU, f"{path} is a fixture"
        for chapter in data["chapters"]:
            for row in chapter["steps"]:
                assert (synth.REPO / row["file"]).is_file(), f"{path}: {row['file']} is gone"
