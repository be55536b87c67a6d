"""conf/doxygen_filter.py: what Doxygen reads of a snippet that returns a reference to an array."""
from __future__ import annotations

import shutil
import subprocess

import pytest

import synth
import build_docs  # conf/ is on sys.path through synth
import doxygen_filter

REPO = synth.REPO


SNIPPET = """//! @file pools.cuh
namespace demo {
constexpr int count = 4;  //!< pools kept

//! @brief Each device's pool.
inline std::atomic<int> (&pools())[count]
{
    static std::atomic<int> all[count];
    return all;
}
}  // namespace demo
"""


def test_a_function_returning_a_reference_to_an_array_takes_the_trailing_return_form():
    out = doxygen_filter.filtered(SNIPPET)
    assert "inline auto pools() -> std::atomic<int> (&)[count]" in out
    assert out.count("\n") == SNIPPET.count("\n"), "line numbers must stay the file's"


def test_everything_else_passes_unchanged():
    for text in ("std::atomic<int>(&all)[count] = pools();\n", "int (*f)(int);\n", "float d[32];\n",
                 "static __global__ void kernel(int (&a)[4]);\n"):
        assert doxygen_filter.filtered(text) == text


def test_every_snippet_keeps_its_lines():
    for path in sorted((REPO / "snippets").glob("*/*.cuh")):
        text = path.read_text(encoding="utf-8")
        assert doxygen_filter.filtered(text).count("\n") == text.count("\n"), path.name


@pytest.mark.skipif(shutil.which("doxygen") is None, reason="no doxygen on PATH")
def test_doxygen_documents_the_filtered_function_without_a_warning(tmp_path):
    (tmp_path / "pools.cuh").write_text(SNIPPET, encoding="utf-8")
    doxyfile = tmp_path / "Doxyfile"
    doxyfile.write_text(
        (REPO / "conf" / "Doxyfile").read_text(encoding="utf-8") + f"\nINPUT = {tmp_path / 'pools.cuh'}\n",
        encoding="utf-8")
    proc = subprocess.run(["doxygen", str(doxyfile)], cwd=REPO, env=build_docs.doxygen_env(tmp_path / "out"),
                          capture_output=True, text=True)
    assert proc.returncode == 0 and "warning" not in proc.stderr and "error" not in proc.stderr, proc.stderr
    xml = (tmp_path / "out" / "xml" / "namespacedemo.xml").read_text(encoding="utf-8")
    assert "() -&gt; std::atomic&lt; int &gt;(&amp;)[count]" in xml
