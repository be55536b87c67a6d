"""The README: short, the chapters table and copying a step in its first half, and its chapters table the one
conf/readme_chapters.py makes from the step registry and the reference GPU's recorded file (no number typed)."""
from __future__ import annotations

import subprocess
import sys

import pytest

import synth

README = synth.REPO / "README.md"
SCRIPT = synth.REPO / "conf" / "readme_chapters.py"
REGISTRY = synth.REPO / "build" / "registry.json"

sys.path.insert(0, str(SCRIPT.parent))
import readme_chapters  # noqa: E402


def test_the_readme_is_short_and_starts_where_a_newcomer_starts():
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 150, f"README.md has {len(lines)} lines; the rest belongs in CONTRIBUTING.md"
    half = len(lines) // 2 + 1
    for heading in ("## The chapters", "## Copying a snippet"):
        assert heading in lines[:half], f"{heading!r} is not in the README's first half"
    assert readme_chapters.BEGIN in lines[:half]
    text = "\n".join(lines)
    assert "CONTRIBUTING.md" in text and (synth.REPO / "CONTRIBUTING.md").is_file()


def test_the_table_is_replaced_between_its_markers_and_only_there():
    readme = f"# T\n\nbefore\n{readme_chapters.BEGIN}\nold\n{readme_chapters.END}\nafter\n"
    new = f"{readme_chapters.BEGIN}\nnew\n{readme_chapters.END}"
    assert readme_chapters.replaced(readme, new) == f"# T\n\nbefore\n{new}\nafter\n"
    with pytest.raises(ValueError, match="marker"):
        readme_chapters.replaced("# T\n", new)


def test_the_readme_s_chapters_table_is_the_recorded_one():
    if not REGISTRY.is_file():
        pytest.skip("no build/registry.json: make build writes the step registry this table comes from")
    proc = subprocess.run([sys.executable, str(SCRIPT), "--registry", str(REGISTRY), "--check", str(README)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_a_stale_table_is_one_line_with_the_command_that_writes_it(tmp_path):
    if not REGISTRY.is_file():
        pytest.skip("no build/registry.json: make build writes the step registry this table comes from")
    stale = tmp_path / "README.md"
    stale.write_text(README.read_text(encoding="utf-8").replace("| 17 |", "| 18 |"), encoding="utf-8")
    proc = subprocess.run([sys.executable, str(SCRIPT), "--registry", str(REGISTRY), "--check", str(stale)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "--write" in lines[0], proc.stderr
