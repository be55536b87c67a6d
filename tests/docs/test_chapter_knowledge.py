"""A chapter's knowledge lives in its chapter: no code outside a chapter's own places names chapter ids.

A chapter is its folders, ``snippets/<id>/``, ``bench/<id>/`` and ``tests/<id>/``, its page ``docs/<id>.md``
and its id in STEPWISE_CHAPTERS (the top-level CMakeLists.txt: the registry line). What the rest of the project
needs to know of a chapter it reads from the step registry (``stepwise_bench --list --json``, which the chapters'
C++ fills: its PyTorch rows, its racecheck exclusions, whether the build counts its SASS, ...) or finds in the
chapter's folder (``bench/<id>/chapter.cmake``).

Every other file git tracks is read, and code that names a chapter id (those of build/registry.json, or without a
build of STEPWISE_CHAPTERS) fails this test: in Python, C++ and CUDA a string literal that is an id or names a
chapter's namespace (``stepwise::<id>::``, in code too), folder (``snippets/<id>/``, ``bench/<id>/``,
``tests/<id>/``, ``<id>/<file>`` as an include), page (``<id>.md``, ``<id>.html``) or test suites (a gtest
filter of its prefix, ``TensorCoreGemmCublas*``); in CMake files, the Makefile and shell scripts an id as a
word, or such a filter, outside comments and quoted text. Prose may name chapters: Markdown,
comments, docstrings, CMake's messages, the Makefile's help text. :data:`ALLOWED` lists, each with its reason,
the files that may name them still; :data:`ALSO_A_WORD` the ids that are also the name of something else.
"""
from __future__ import annotations

import ast
import fnmatch
import io
import json
import re
import subprocess
import tokenize
from pathlib import Path

import pytest

import synth

#: Files that may name chapter ids in code, and why.
ALLOWED = {
    "docs/measurements/*": "the measurement files, their logs and PyTorch's rows: what each chapter measured",
    "tests/docs/fixtures/*": "FIXTURE data: captured tool output of real kernels, a made-up project",
    "tests/core/command_line_test.cpp": "sample command lines (--chapter ID)",
    "tests/core/measurement_file_test.cpp": "made-up measurement files that borrow chapter ids",
    "tests/core/resources_test.cpp": "the compiler's report of real kernels, as sample input",
    "tests/docs/synth.py": "made-up registries and measurement files that borrow chapter ids",
    "tests/docs/test_measure_script.py": "made-up registries that borrow chapter ids",
    "tests/docs/test_profile_script.py": "made-up registries that borrow chapter ids",
    "tests/docs/test_docs_script.py": "sample CHAPTERS= values",
    "tests/docs/test_docs_data.py": "an unknown chapter's error message, with a real id",
    "tests/docs/test_docs_sass.py": "a captured cuobjdump listing of real kernels and reports made from it",
    "tests/docs/test_docs_ncu.py": "Nsight Compute's names of real kernels, as sample input",
    "tests/docs/test_docs_pages.py": "the built site's real pages: the figures each chapter's prose may type",
    "tests/docs/test_docs_plots.py": "the real chapters' plots: SGEMM's sweep without a registry sweep, the GEMM's rates",
    "tests/browser/test_check_site.py": "a made-up site whose page borrows a chapter's file name",
    "tests/docs/test_chapter_knowledge.py": "this test: its examples of what counts as naming a chapter",
}
#: Ids that are also the name of something else, which code may name: id -> what.
ALSO_A_WORD = {"occupancy": "a kernel's theoretical occupancy, a field of the registry and the measurement files"}

CODE_SUFFIXES = (".py", ".cpp", ".hpp", ".cu", ".cuh", ".h", ".js")
WORD_FILES = ("CMakeLists.txt", "Makefile")
WORD_SUFFIXES = (".cmake", ".sh")


def chapter_ids() -> list[str]:
    registry = synth.REPO / "build" / "registry.json"
    if registry.is_file():
        return [c["id"] for c in json.loads(registry.read_text(encoding="utf-8"))["chapters"]]
    cmake = (synth.REPO / "CMakeLists.txt").read_text(encoding="utf-8")
    return re.search(r"set\(STEPWISE_CHAPTERS\s+([^)]*)\)", cmake).group(1).split()


def tracked_files() -> list[str]:
    try:
        proc = subprocess.run(["git", "ls-files"], cwd=synth.REPO, capture_output=True, text=True, timeout=60)
    except OSError:
        proc = None
    if proc is None or proc.returncode != 0:
        pytest.skip("not a git checkout: no list of tracked files")
    return proc.stdout.splitlines()


def own_places(chapter: str) -> tuple[str, ...]:
    return (f"snippets/{chapter}/", f"bench/{chapter}/", f"tests/{chapter}/", f"docs/{chapter}.md")


def python_strings(text: str) -> list[tuple[int, str]]:
    """The string literals of Python code, but docstrings (f-strings: their text parts)."""
    out = []
    tokens = list(tokenize.generate_tokens(io.StringIO(text).readline))
    statement_start = {tokenize.INDENT, tokenize.DEDENT, tokenize.NEWLINE, tokenize.NL}
    for i, token in enumerate(tokens):
        if token.type == tokenize.STRING:
            before = tokens[i - 1].type if i else tokenize.NEWLINE
            after = tokens[i + 1].type if i + 1 < len(tokens) else tokenize.NEWLINE
            if before in statement_start and after in (tokenize.NEWLINE, tokenize.ENDMARKER):
                continue  # a docstring, or a string on its own: prose
            try:
                value = ast.literal_eval(token.string)
            except (ValueError, SyntaxError):  # an f-string
                value = token.string
            out.append((token.start[0], value if isinstance(value, str) else repr(value)))
        elif token.type == getattr(tokenize, "FSTRING_MIDDLE", -1):
            out.append((token.start[0], token.string))
    return out


def c_strings(text: str, ids: list[str]) -> list[tuple[int, str]]:
    """The string literals of C++ and CUDA code outside comments, and its chapter namespaces."""
    text = re.sub(r"/\*.*?\*/", lambda m: "\n" * m.group(0).count("\n"), text, flags=re.S)
    out = []
    names = re.compile(rf"stepwise::(?:{'|'.join(ids)})\b")
    for number, line in enumerate(text.splitlines(), 1):
        strings = list(re.finditer(r'"((?:[^"\\]|\\.)*)"', line))
        code = line
        for m in reversed(strings):
            code = code[:m.start()] + '""' + code[m.end():]
        if "//" in code:  # a comment: drop it, and the strings after it
            cut = code.index("//")
            code = code[:cut]
            strings = [m for m in strings if m.start() < cut]
        out += [(number, m.group(1)) for m in strings]
        out += [(number, m.group(0)) for m in names.finditer(code)]
    return out


def words(text: str, ids: list[str], registry_line: bool) -> list[tuple[int, str]]:
    """Chapter ids as words in CMake, make and shell code: outside comments, quoted text and the Makefile's
    define blocks (its help text); in the top-level CMakeLists.txt, outside STEPWISE_CHAPTERS."""
    out = []
    word = re.compile(rf"(?<![\w./-])(?:{'|'.join(ids)})(?![\w-])")
    in_block = False
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if stripped.startswith("define ") or (registry_line and stripped.startswith("set(STEPWISE_CHAPTERS")):
            in_block = True
        if in_block:
            in_block = not (stripped.startswith("endef") or (registry_line and stripped.endswith(")")))
            continue
        code = re.sub(r'"(?:[^"\\]|\\.)*"', '""', line.split("#")[0])
        out += [(number, m.group(0)) for m in word.finditer(code)]
        out += [(number, m.group(1)) for m in re.finditer(r"/((?:" + "|".join(ids) + r"))/", line.split("#")[0])]
        out += [(number, m.group(0).strip("-:= ")) for m in suite_filter(ids).finditer(code)]
    return out


def suite_filter(ids: list[str]) -> re.Pattern:
    """A gtest filter of a chapter's suites: its prefix (the id in CamelCase, as ChapterBase's gtest_prefix)."""
    prefixes = "|".join("".join(word.capitalize() for word in i.split("_")) for i in ids)
    return re.compile(rf"(?:^|[-:*=\s])(?:{prefixes})(?:[A-Z]\w*)?(?:\*|\.\*)")


def names_a_chapter(text: str, ids: list[str]) -> bool:
    alternatives = "|".join(i for i in ids)
    return bool(re.fullmatch(alternatives, text) and text not in ALSO_A_WORD
                or suite_filter(ids).search(text)
                or re.search(rf"stepwise::(?:{alternatives})\b", text)
                or re.search(rf"(?:^|[^\w])(?:snippets|bench|tests)/(?:{alternatives})/", text)
                or re.search(rf"^(?:{alternatives})/\w", text)
                or re.search(rf"(?:^|[^\w-])(?:{alternatives})\.(?:md|html)\b", text))


def offences(path: str, text: str, ids: list[str]) -> list[str]:
    name = Path(path).name
    if path.endswith(CODE_SUFFIXES):
        found = python_strings(text) if path.endswith(".py") else c_strings(text, ids)
        return [f"{path}:{line}: {value[:80]!r}" for line, value in found if names_a_chapter(value, ids)]
    if name in WORD_FILES or path.endswith(WORD_SUFFIXES) or path == ".ci/run":
        return [f"{path}:{line}: {value!r}" for line, value in words(text, ids, path == "CMakeLists.txt")
                if value not in ALSO_A_WORD]
    return []  # prose and data


def test_no_file_outside_a_chapter_names_chapter_ids():
    ids = chapter_ids()
    assert ids, "no chapter ids"
    found = []
    for path in tracked_files():
        if any(path.startswith(own_places(chapter)) for chapter in ids) \
                or any(fnmatch.fnmatch(path, pattern) for pattern in ALLOWED):
            continue
        file = synth.REPO / path
        if not file.is_file():
            continue
        try:
            text = file.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        found += offences(path, text, ids)
    assert not found, ("code outside a chapter's folders names chapter ids (read it from the step registry, or "
                       "keep it in the chapter's folder):\n" + "\n".join(found))


def test_allowed_files_exist_and_still_need_it():
    ids = chapter_ids()
    tracked = tracked_files()
    for pattern in ALLOWED:
        matching = [p for p in tracked if fnmatch.fnmatch(p, pattern)]
        assert matching, f"ALLOWED names {pattern}, which matches no tracked file"
        if "*" not in pattern:
            text = (synth.REPO / pattern).read_text(encoding="utf-8")
            assert offences(pattern, text, ids), f"{pattern} names no chapter id now: take it off ALLOWED"


@pytest.mark.parametrize("path, text, bad", [
    ("conf/x.py", 'CHAPTERS = ("softmax", "attention")\n', 2),
    ("conf/x.py", '"""The softmax chapter\'s rows."""\nx = 1  # softmax\n', 0),
    ("conf/x.py", 'p = f"snippets/{c}/x.cuh"\nq = "docs/sgemm.md"\n', 1),
    ("bench/core/x.cpp", '// the softmax chapter\nconst char* s = "softmax";  // "sgemm"\n', 1),
    ("bench/core/x.hpp", 'using stepwise::reduction::Step;\n#include "sgemm/sgemm_reference.hpp"\n', 2),
    ("bench/core/x.cpp", 'j["occupancy"] = 1;\n', 0),
    ("Makefile", 'define HELP\n  e.g. CHAPTERS="sgemm"\nendef\nX := sgemm\n# sgemm\n', 1),
    ("Makefile", 'FILTER ?= -*RaceDemonstration*:TensorCoreGemmCublas*\n', 1),
    ("conf/x.py", 'FILTER = "-Sgemm*:ReductionRaceDemonstration.*"\nx = "Sgemm is fast"\n', 1),
    ("bench/CMakeLists.txt", 'set(x "${D}/tensor_core_gemm/y.cu")\nmessage(STATUS "the softmax baseline")\n', 1),
    ("CMakeLists.txt", 'set(STEPWISE_CHAPTERS\n  softmax sgemm\n  attention)\nforeach(c IN ITEMS sgemm)\n', 1),
])
def test_what_counts_as_naming_a_chapter(path, text, bad):
    ids = ["softmax", "attention", "sgemm", "reduction", "tensor_core_gemm", "occupancy"]
    assert len(offences(path, text, ids)) == bad, offences(path, text, ids)
