"""What the compiler made of a chapter's kernels, from the build's SASS report (no Sphinx here).

The build writes one JSON file per chapter that asks for it (``sass`` in its registry entry) with
:mod:`.sass_report`, which reads an object file with ``cuobjdump -sass`` and counts each kernel's
instructions; that script's docstring
shows the file: ``tool``, ``arch``, ``object`` and ``functions``, each function with its
``mangled`` and demangled ``name``, ``arch``, ``counts`` (``instructions``, ``bra``, ...,
``mufu`` and ``mma`` by variant) and a short ``listing``.

(``arch`` of a function is optional; the file's ``arch`` is used where it is missing; so is
``mma``, the tensor cores' instructions by variant, absent from reports made before it was counted.)
Loading is strict, because the counts are printed as evidence: a missing file, bad JSON or a
missing key is a :class:`SassError` that names the file.

Functions are matched to a step's registry kernels as Nsight Compute's launches are
(:func:`.ncu.kernel_scope`): the scope of the function's name must be the end of the step's
``namespace`` (anonymous namespaces are skipped) and its unqualified name, template
arguments included, the registry kernel's ``name`` (``branch_kernel``,
``sum_matrix_kernel<32, 16>``; spaces do not count). Where a kernel was compiled for several
architectures, the measuring GPU's is preferred.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from .data import Chapter, DataError, _display
from .inputs import read_input
from .ncu import kernel_scope

REQUIRED_KEYS = ("tool", "arch", "object", "functions")
FUNCTION_KEYS = ("mangled", "name", "counts", "listing")
COUNT_KEYS = ("instructions", "bra", "bssy", "bsync", "warpsync", "exit", "predicated", "mufu")
#: How to make the file, for error messages.
HOW_TO_MAKE = ("built by cmake --build build where the chapter's registry entry sets sass; see "
               "docs/_ext/stepwise_docs/sass_report.py")


class SassError(DataError):
    """A problem with a SASS report file; one line that names the file."""


@dataclass
class SassFunction:
    """One function of the report."""

    mangled: str
    name: str
    arch: str
    counts: dict
    listing: list[str] = field(default_factory=list)

    @property
    def scope(self) -> list[str]:
        """Its namespaces, anonymous ones left out: ``a::(anonymous namespace)::k`` -> ``["a"]``."""
        return [p for p in kernel_scope(self.name) if p != "{anonymous}"]

    @property
    def unqualified(self) -> str:
        """The name after the last ``::`` outside template arguments (``a::k<b::C<1> >`` ->
        ``k<b::C<1> >``)."""
        depth, start = 0, 0
        text = self.name
        for i, ch in enumerate(text):
            if ch == "<":
                depth += 1
            elif ch == ">":
                depth = max(depth - 1, 0)
            elif ch == ":" and depth == 0 and text[i:i + 2] == "::":
                start = i + 2
        return text[start:]


@dataclass
class SassReport:
    """A chapter's SASS report."""

    path: Path
    tool: str
    arch: str
    object: str
    functions: list[SassFunction]


def _compact(name: str) -> str:
    return "".join(name.split())


def load(path: Path) -> SassReport:
    """The report at ``path``; every problem is a SassError naming the file."""
    path = Path(path)
    where = f"SASS report {_display(path)}"
    text = read_input(path, where, SassError, how_to_make=HOW_TO_MAKE)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise SassError(f"{where} is not valid JSON: {exc.msg} at line {exc.lineno} "
                        f"column {exc.colno} ({HOW_TO_MAKE})") from None
    if not isinstance(data, dict):
        raise SassError(f"{where} is not a JSON object ({HOW_TO_MAKE})")
    missing = [k for k in REQUIRED_KEYS if k not in data]
    if missing:
        raise SassError(f"{where} has no {missing[0]!r} ({HOW_TO_MAKE})")
    for key in ("tool", "arch", "object"):
        if not isinstance(data[key], str) or not data[key]:
            raise SassError(f"{where}: {key!r} is not a non-empty string")
    if not isinstance(data["functions"], list) or not data["functions"]:
        raise SassError(f"{where}: 'functions' is not a non-empty list")
    functions = []
    for i, entry in enumerate(data["functions"]):
        at = f"{where}: functions[{i}]"
        if not isinstance(entry, dict):
            raise SassError(f"{at} is not an object")
        missing = [k for k in FUNCTION_KEYS if k not in entry]
        if missing:
            raise SassError(f"{at} has no {missing[0]!r}")
        counts = entry["counts"]
        if not isinstance(counts, dict):
            raise SassError(f"{at}: 'counts' is not an object")
        missing = [k for k in COUNT_KEYS if k not in counts]
        if missing:
            raise SassError(f"{at} ({entry['name']}): 'counts' has no {missing[0]!r}")
        for key in COUNT_KEYS[:-1]:
            if not isinstance(counts[key], int) or isinstance(counts[key], bool) or counts[key] < 0:
                raise SassError(f"{at} ({entry['name']}): counts.{key} is not a count: {counts[key]!r}")
        counts.setdefault("mma", {})
        for key in ("mufu", "mma"):
            by_variant = counts[key]
            if not isinstance(by_variant, dict) or not all(
                    isinstance(k, str) and isinstance(v, int) and not isinstance(v, bool) and v >= 0
                    for k, v in by_variant.items()):
                raise SassError(f"{at} ({entry['name']}): counts.{key} is not an object of counts")
        listing = entry["listing"]
        if not isinstance(listing, list) or not all(isinstance(line, str) for line in listing):
            raise SassError(f"{at} ({entry['name']}): 'listing' is not a list of strings")
        if not isinstance(entry["name"], str) or not isinstance(entry["mangled"], str):
            raise SassError(f"{at}: 'name' and 'mangled' must be strings")
        functions.append(SassFunction(entry["mangled"], entry["name"], entry.get("arch") or data["arch"],
                                      counts, list(listing)))
    return SassReport(path, data["tool"], data["arch"], data["object"], functions)


def functions_of(report: SassReport, kernel: dict, step: dict, arch: str | None = None) -> list[SassFunction]:
    """The report's functions of one registry kernel of ``step`` (preferred architecture first)."""
    namespace = [p for p in step["namespace"].split("::") if p]
    wanted = _compact(kernel["name"])
    found = []
    for function in report.functions:
        scope = function.scope
        if not scope or namespace[-len(scope):] != scope:
            continue
        if _compact(function.unqualified) != wanted:
            continue
        found.append(function)
    found.sort(key=lambda f: f.arch != arch)
    return found


def step_functions(report: SassReport, chapter: Chapter, step: dict,
                   arch: str | None = None) -> list[tuple[dict, SassFunction]]:
    """(registry kernel, function) for every kernel of ``step``; a kernel without one is a SassError."""
    where = f"SASS report {_display(report.path)}"
    kernels = step.get("kernels") or []
    if not kernels:
        raise SassError(f"{where}: step {chapter.id}/{step['id']} lists no kernels in the registry")
    out = []
    for kernel in kernels:
        found = functions_of(report, kernel, step, arch)
        if not found:
            raise SassError(f"{where} has no function {step['namespace']}::{kernel['name']} "
                            f"(step {chapter.id}/{step['id']}; {HOW_TO_MAKE})")
        out.append((kernel, found[0]))
    return out

