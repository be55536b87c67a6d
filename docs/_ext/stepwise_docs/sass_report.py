#!/usr/bin/env python3
"""Count what the compiler made of a CUDA object's kernels: a SASS report, read with cuobjdump.

The build runs this on the timing program's library after compiling it: it runs
``cuobjdump -sass FILE``, splits the listing into functions (each starts with a line
``Function : <mangled name>``, under an ``arch = sm_90`` header; cuobjdump runs nvdisasm, found
on PATH or, for the PyPI wheels of conf/requirements.txt, beside cuobjdump), demangles the names with
``c++filt`` where it is on PATH (else keeps the mangled ones), keeps the functions whose
demangled name starts with ``--namespace`` (for example ``stepwise::divergence::``) and
writes, per function:

* counts of its instructions: ``instructions`` (every SASS instruction but the NOP padding),
  ``bra``, ``bssy``, ``bsync``, ``warpsync``, ``exit`` (by opcode, whatever the modifiers:
  ``BRA.U`` is a BRA), ``predicated`` (instructions under a guard predicate such as ``@P0``,
  ``@!P1`` or ``@UP0``; ``@PT``, always true, is no guard), ``mufu``, the special-function
  unit's instructions by variant (``{"MUFU.SIN": 256, "MUFU.COS": 256}``), and ``mma``, the
  tensor cores' instructions by variant (``{"HMMA.16816.F32.BF16": 64}`` for ``mma.sync``,
  ``{"HGMMA.64x256x16.F32.BF16": 4}`` for Hopper's ``wgmma``);
* a short listing: every BRA, BSSY, BSYNC, WARPSYNC and MUFU instruction with its address,
  without cuobjdump's ``/* 0x... */`` encoding comments. A run of more than three MUFU
  instructions of one variant with no other listed instruction between them (an unrolled loop
  of ``__sinf``) is shortened to its first one, a line ``... (N more MUFU.SIN)`` and its last
  one; the counts count every one.

The JSON file (written whole or not at all)::

    {"tool": "cuobjdump 13.0.85", "arch": "sm_90", "object": "divergence_steps.cu.o",
     "functions": [{"mangled": "_ZN8stepwise10divergence18interleaved_branch13branch_kernelEPKfPfi",
                    "name": "stepwise::divergence::interleaved_branch::branch_kernel",
                    "arch": "sm_90",
                    "counts": {"instructions": 1043, "bra": 3, "bssy": 1, "bsync": 1,
                               "warpsync": 0, "exit": 2, "predicated": 2,
                               "mufu": {"MUFU.COS": 256, "MUFU.SIN": 256}, "mma": {}},
                    "listing": ["/*00d0*/       BSSY B0, 0x8130 ;", "..."]}]}

``name`` is the demangled name without return type and parameters (template arguments kept:
``stepwise::occupancy::sum_matrix_2d::sum_matrix_kernel<32, 16>``); functions are sorted by
name, then architecture; ``arch`` at the top is the architectures of the functions kept,
joined with ", " if there are several. A function that two embedded objects hold for the same
architecture (a static kernel of a header included twice) is kept once if both are the same
code, else it is an error. The pages read the file with docs/_ext/stepwise_docs/sass.py.

Usage::

    sass_report.py --cuobjdump PATH --object FILE --out FILE.json [--namespace PREFIX]
    sass_report.py --cuobjdump PATH --object FILE --registry registry.json --out-dir DIR

The second form (the build's) writes ``DIR/<id>.json`` for each chapter of the step registry whose
entry has ``"sass": true``, of its namespace ``stepwise::<id>::``, from one cuobjdump run; removes
the reports of other chapters from DIR, and lists the chapters written in ``DIR/chapters.txt``.

Exit status: 0 when the files were written; 1 when cuobjdump failed or no function matched
(one line on stderr, and no file); 2 for a usage error. stdlib only, Python 3.9+: it runs at
build time like conf/ptxas_report.py (as a script, from this folder: it imports nothing of its
package, which imports it).
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

PROG = "sass_report.py"
USAGE = ("sass_report.py --cuobjdump PATH --object FILE (--out FILE.json [--namespace PREFIX] | "
         "--registry registry.json --out-dir DIR)")

#: Opcodes counted one by one (by the opcode before its first ".").
COUNTED = ("BRA", "BSSY", "BSYNC", "WARPSYNC", "EXIT")
#: The tensor cores' opcodes, counted by variant: Volta-to-Ampere warp MMAs, Hopper's warpgroup MMAs.
TENSOR_OPCODES = ("HMMA", "IMMA", "DMMA", "BMMA", "HGMMA", "IGMMA", "QGMMA", "BGMMA")
#: Opcodes whose instructions the listing keeps.
LISTED = ("BRA", "BSSY", "BSYNC", "WARPSYNC", "MUFU")
#: A run of more MUFU instructions of one variant than this is shortened in the listing.
RUN_KEPT = 3

FUNCTION_RE = re.compile(r"^\s*Function\s*:\s*(\S+)\s*$")
ARCH_RE = re.compile(r"^\s*(?:arch\s*=|code for)\s*(sm_\w+)\s*$")
INSTRUCTION_RE = re.compile(r"^\s*/\*([0-9a-fA-F]+)\*/\s*(.*)$")
GUARD_RE = re.compile(r"^(@!?U?P(?:T|\d+))\s+(.*)$")
COMMENT_RE = re.compile(r"/\*.*?\*/")


class ReportError(Exception):
    def __init__(self, message: str, status: int = 1):
        super().__init__(message)
        self.status = status


# ---------------------------------------------------------------------------
# The listing
# ---------------------------------------------------------------------------

def parse_instruction(line: str) -> tuple[str, str, str] | None:
    """``(address, guard, text)`` of a SASS instruction line, else None.

    ``        /*0100*/               @P0 BRA 0x4120 ;     /* 0x0000... */`` ->
    ``("0100", "@P0", "BRA 0x4120 ;")``. Lines holding only an encoding comment are not
    instructions.
    """
    match = INSTRUCTION_RE.match(line)
    if not match:
        return None
    text = COMMENT_RE.sub("", match.group(2)).strip()
    text = text.strip("{}").strip()  # dual-issue braces of old architectures
    if not text:
        return None
    guard = ""
    guarded = GUARD_RE.match(text)
    if guarded:
        guard, text = guarded.group(1), guarded.group(2).strip()
    return match.group(1), guard, text


def opcode_of(text: str) -> str:
    """``"MUFU.SIN R5, R4 ;"`` -> ``"MUFU.SIN"``."""
    return text.split()[0].rstrip(";") if text.split() else ""


def split_functions(listing: str) -> list[dict]:
    """Every function of a ``cuobjdump -sass`` listing: mangled name, architecture, instructions.

    Each instruction is ``(address, guard, text)``. A function ends at the next function, at
    cuobjdump's ``..........`` line, at the next ``Fatbin`` section or at the next ``member``
    of an archive (a static library lists each object file's code after such a line).
    """
    functions: list[dict] = []
    current: dict | None = None
    arch = ""
    for line in listing.splitlines():
        stripped = line.strip()
        if stripped.startswith(("Fatbin ", "..........", "member ")):  # "member": of an archive
            current = None
            continue
        arch_match = ARCH_RE.match(line)
        if arch_match:
            arch = arch_match.group(1)
            continue
        function = FUNCTION_RE.match(line)
        if function:
            current = {"mangled": function.group(1), "arch": arch, "instructions": []}
            functions.append(current)
            continue
        if current is None:
            continue
        instruction = parse_instruction(line)
        if instruction is not None:
            current["instructions"].append(instruction)
    return functions


def count(instructions: list[tuple[str, str, str]]) -> dict:
    """The counts of one function's instructions (see the module's docstring)."""
    counts = {"instructions": 0, **{op.lower(): 0 for op in COUNTED}, "predicated": 0, "mufu": {}, "mma": {}}
    for _address, guard, text in instructions:
        opcode = opcode_of(text)
        base = opcode.split(".")[0]
        if base == "NOP":
            continue
        counts["instructions"] += 1
        if base in COUNTED:
            counts[base.lower()] += 1
        if guard and guard != "@PT":
            counts["predicated"] += 1
        if base == "MUFU":
            counts["mufu"][opcode] = counts["mufu"].get(opcode, 0) + 1
        if base in TENSOR_OPCODES:
            counts["mma"][opcode] = counts["mma"].get(opcode, 0) + 1
    counts["mufu"] = dict(sorted(counts["mufu"].items()))
    counts["mma"] = dict(sorted(counts["mma"].items()))
    return counts


def _line(address: str, guard: str, text: str) -> str:
    return f"/*{address}*/ {guard:>5} {text}"


def short_listing(instructions: list[tuple[str, str, str]]) -> list[str]:
    """The listed instructions (BRA, BSSY, BSYNC, WARPSYNC, MUFU), long MUFU runs shortened."""
    kept = [i for i in instructions if opcode_of(i[2]).split(".")[0] in LISTED]
    out: list[str] = []
    i = 0
    while i < len(kept):
        opcode = opcode_of(kept[i][2])
        j = i
        if opcode.startswith("MUFU"):
            while j + 1 < len(kept) and opcode_of(kept[j + 1][2]) == opcode:
                j += 1
        run = j - i + 1
        if run > RUN_KEPT:
            out.append(_line(*kept[i]))
            out.append(f"{'':>14}... ({run - 2} more {opcode})")
            out.append(_line(*kept[j]))
        else:
            out.extend(_line(*k) for k in kept[i:j + 1])
        i = j + 1
    return out


def plain_name(demangled: str) -> str:
    """The qualified name without return type and parameters, template arguments kept.

    ``void a::b::k<32, 16>(float const*, int)`` -> ``a::b::k<32, 16>``; ``a::(anonymous
    namespace)::k(int)`` -> ``a::(anonymous namespace)::k``. A mangled name stays as it is.
    """
    anon = "(anonymous namespace)"
    text = demangled.replace(anon, "\x00")
    end = next((i for i, ch in outside_template_arguments(text) if ch == "("), len(text))
    head = text[:end].strip()
    # after the return type: the last space outside template arguments
    start = max((i + 1 for i, ch in outside_template_arguments(head) if ch == " "), default=0)
    return head[start:].replace("\x00", anon)


def outside_template_arguments(text: str) -> list[tuple[int, str]]:
    """The characters of ``text`` outside ``<...>`` (the brackets themselves left out), with their indices.
    docs/_ext/stepwise_docs/ncu.py reads Nsight Compute's kernel names with it too."""
    depth = 0
    out = []
    for i, ch in enumerate(text):
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth = max(depth - 1, 0)
        elif depth == 0:
            out.append((i, ch))
    return out


def unprefixed(symbol: str) -> str:
    """The C++ symbol of a kernel of internal linkage in relocatable device code (-rdc), which
    is named ``__nv_static_<n>__<hash>_<...>_<n>_`` followed by its mangled name (as
    bench/core/resources.cpp's demangle reads it); any other symbol as it is."""
    if symbol.startswith("__nv_static_"):
        at = symbol.find("__Z", 12)
        if at != -1:
            return symbol[at + 1:]
    return symbol


def demangle(names: list[str]) -> tuple[dict[str, str], bool]:
    """Mangled -> demangled with ``c++filt`` (one run for all); without it, the names as they are."""
    cxxfilt = shutil.which("c++filt")
    if cxxfilt is None or not names:
        return {n: n for n in names}, cxxfilt is not None
    try:
        proc = subprocess.run([cxxfilt], input="\n".join(unprefixed(n) for n in names) + "\n",
                              capture_output=True, text=True, check=False)
    except OSError:
        return {n: n for n in names}, False
    out = proc.stdout.splitlines()
    if proc.returncode != 0 or len(out) != len(names):
        return {n: n for n in names}, False
    return dict(zip(names, out)), True


def disassembler_env(cuobjdump: str) -> dict[str, str]:
    """The environment for cuobjdump: where it has an ``nvdisasm`` beside it (the PyPI wheels of
    conf/requirements.txt) and NVDISASM_PATH is unset, NVDISASM_PATH names that folder."""
    env = dict(os.environ)
    folder = Path(cuobjdump).resolve().parent
    if "NVDISASM_PATH" not in env and (folder / "nvdisasm").is_file():
        env["NVDISASM_PATH"] = str(folder)
    return env


def tool_version(cuobjdump: str) -> str:
    """``cuobjdump 13.0.85`` from ``cuobjdump --version`` (``cuobjdump`` if it names none)."""
    try:
        proc = subprocess.run([cuobjdump, "--version"], capture_output=True, text=True, check=False)
    except OSError:
        return "cuobjdump"
    text = proc.stdout + proc.stderr
    match = re.search(r"\bV(\d+(?:\.\d+)+)", text) or re.search(r"release (\d+(?:\.\d+)+)", text)
    return f"cuobjdump {match.group(1)}" if match else "cuobjdump"


def report(listing: str, object_name: str, tool: str, prefix: str) -> dict:
    """The report's JSON data from a listing; a ReportError where no function matches."""
    functions = split_functions(listing)
    if not functions:
        raise ReportError(f"cuobjdump -sass listed no function in {object_name} (no device code?)")
    names, demangled = demangle(sorted({f["mangled"] for f in functions}))
    kept: dict[tuple[str, str], dict] = {}
    for function in functions:
        name = plain_name(names[function["mangled"]])
        if not name.startswith(prefix):
            continue
        entry = {"mangled": function["mangled"], "name": name, "arch": function["arch"],
                 "counts": count(function["instructions"]),
                 "listing": short_listing(function["instructions"])}
        key = (function["mangled"], function["arch"])
        if key in kept:
            if kept[key] != entry:
                raise ReportError(f"{object_name} holds {name} for {function['arch']} twice, "
                                  "compiled differently")
            continue
        kept[key] = entry
    if not kept:
        hint = "" if demangled else " (c++filt not found: the names were not demangled)"
        raise ReportError(f"no function of {object_name} is in namespace {prefix!r} "
                          f"({len(functions)} functions){hint}")
    entries = sorted(kept.values(), key=lambda e: (e["name"], e["arch"]))
    archs = list(dict.fromkeys(e["arch"] for e in entries))
    return {"tool": tool, "arch": ", ".join(a for a in archs if a) or "unknown",
            "object": object_name, "functions": entries}


def write_whole(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + f".{os.getpid()}.partial")
    try:
        partial.write_text(text, encoding="utf-8")
        partial.replace(path)
    finally:
        if partial.exists():
            partial.unlink()


# ---------------------------------------------------------------------------
# Command line
# ---------------------------------------------------------------------------

class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one line, not usage + error
        print(f"{PROG}: {message} (usage: {USAGE})", file=sys.stderr)
        sys.exit(2)


def sass_chapters(registry: Path) -> list[str]:
    """The ids of the step registry's chapters whose entry asks for a SASS report (``"sass": true``)."""
    try:
        chapters = json.loads(registry.read_text(encoding="utf-8"))["chapters"]
        return [c["id"] for c in chapters if c.get("sass")]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ReportError(f"cannot read the chapters from the step registry {registry}: {exc}") from None


def main(argv: list[str] | None = None) -> int:
    parser = _Parser(prog=PROG, description=__doc__.splitlines()[0])
    parser.add_argument("--cuobjdump", required=True, help="the cuobjdump to run")
    parser.add_argument("--object", type=Path, required=True,
                        help="a CUDA object file or executable")
    parser.add_argument("--out", type=Path, help="the JSON file to write")
    parser.add_argument("--namespace", default="",
                        help="keep the functions whose demangled name starts with this")
    parser.add_argument("--registry", type=Path, help="the step registry: one report per chapter that asks")
    parser.add_argument("--out-dir", type=Path, help="with --registry: the folder of the reports")
    args = parser.parse_args(argv)
    if (args.out is None) == (args.registry is None) or (args.registry is None) != (args.out_dir is None):
        parser.error("give either --out or both --registry and --out-dir")
    targets: list[Path] = [args.out] if args.out is not None else []
    try:
        if not args.object.is_file():
            raise ReportError(f"no object file {args.object} (build it first)")
        if args.registry is not None:
            outs = {args.out_dir / f"{chapter}.json": f"stepwise::{chapter}::"
                    for chapter in sass_chapters(args.registry)}
        else:
            outs = {args.out: args.namespace}
        targets = list(outs)
        try:
            proc = subprocess.run([args.cuobjdump, "-sass", str(args.object)], capture_output=True,
                                  text=True, check=False, env=disassembler_env(args.cuobjdump))
        except OSError as exc:
            raise ReportError(f"cannot run cuobjdump {args.cuobjdump}: {exc.strerror or exc}") from None
        if proc.returncode != 0:
            last = (proc.stderr.strip().splitlines() or proc.stdout.strip().splitlines() or [""])[-1]
            raise ReportError(f"cuobjdump -sass failed (exit {proc.returncode}) on {args.object}: "
                              f"{last.strip()[:200]}")
        tool = tool_version(args.cuobjdump)
        for out, prefix in outs.items():
            write_whole(out, json.dumps(report(proc.stdout, args.object.name, tool, prefix), indent=1) + "\n")
        if args.registry is not None:
            for old in args.out_dir.glob("*.json"):
                if old not in outs:
                    old.unlink()  # a chapter that no longer asks: its page must not read an old report
            write_whole(args.out_dir / "chapters.txt", "".join(f"{out.stem}\n" for out in outs))
    except (ReportError, OSError) as exc:
        message = str(exc) if isinstance(exc, ReportError) else \
            f"cannot write {exc.filename or args.out}: {exc.strerror or exc}"
        print(f"{PROG}: {message}", file=sys.stderr)
        for out in targets:  # no report of an object that could not be read may stay behind
            try:
                out.unlink()
            except OSError:
                pass
        return exc.status if isinstance(exc, ReportError) else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
