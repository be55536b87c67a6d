#!/usr/bin/env python3
"""The resources of relocatable kernels as the device link leaves them.

With relocatable device code (-rdc) ptxas compiles each kernel before the calls it makes
into other objects (the device runtime's launch functions, for dynamic parallelism) are
resolved; the device link (nvlink) then sets each kernel's final registers and stack from
its call graph, and that is what the GPU runs with: ptxas's report of the compile may say
24 registers and no stack where the linked kernel has 32 registers or a 16-byte stack.

This script runs a device link of the given objects once per architecture of the compile
report, with ``-Xnvlink=--verbose`` (its output is thrown away: the build links the library
itself), and writes the compile report again with each entry function's registers,
barriers, stack frame and static shared memory replaced by nvlink's, in ptxas's format, so
that ``stepwise_bench --list --json --ptxas-report FILE`` reads it like any other report.
Spill stores and loads stay the compile's: they are decided when the kernel's own code is
compiled, and nvlink does not print them. A kernel of the report that nvlink does not list
is an error. The file is written whole or not at all.

Usage::

    nvlink_report.py --nvcc NVCC --compile-report FILE --out FILE -- OBJECT_OR_LIBRARY...

Exit status: 0 when the report was written; 1 when the link failed or a kernel is missing
(one line on stderr); 2 for a usage error. stdlib only: it runs at build time.
"""
from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

PROG = "nvlink_report.py"
ENTRY_RE = re.compile(r"ptxas info\s*: Compiling entry function '([^']+)' for '([^']+)'")
PROPERTIES_RE = re.compile(r"ptxas info\s*: Function properties for (\S+)")
FRAME_RE = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
NVLINK_PROPERTIES_RE = re.compile(r"nvlink info\s*: Function properties for '([^']+)':")
NVLINK_USED_RE = re.compile(r"nvlink info\s*: used (\d+) registers, used (\d+) barriers, (\d+) stack, "
                            r"(\d+) bytes smem")


class ReportError(Exception):
    pass


def compile_entries(text: str) -> list[dict]:
    """The entry functions of a ptxas report: symbol, arch and spill stores and loads."""
    entries: list[dict] = []
    frames: dict[str, tuple[int, int]] = {}
    properties_of = ""
    for line in text.splitlines():
        if m := ENTRY_RE.search(line):
            entries.append({"symbol": m.group(1), "arch": m.group(2)})
        elif m := PROPERTIES_RE.search(line):
            properties_of = m.group(1)
        elif m := FRAME_RE.search(line):
            frames[properties_of] = (int(m.group(2)), int(m.group(3)))
    for entry in entries:
        if entry["symbol"] not in frames:
            raise ReportError(f"the compile report has no stack frame line for {entry['symbol']}")
        entry["spill_stores"], entry["spill_loads"] = frames[entry["symbol"]]
    if not entries:
        raise ReportError("the compile report lists no entry function")
    return entries


def linked_resources(text: str) -> dict[str, dict]:
    """symbol -> registers, barriers, stack and smem, from nvlink's verbose output."""
    out: dict[str, dict] = {}
    symbol = None
    for line in text.splitlines():
        if m := NVLINK_PROPERTIES_RE.search(line):
            symbol = m.group(1)
        elif (m := NVLINK_USED_RE.search(line)) and symbol is not None:
            registers, barriers, stack, smem = (int(g) for g in m.groups())
            out[symbol] = {"registers": registers, "barriers": barriers, "stack": stack, "smem": smem}
            symbol = None
    return out


def merged_report(entries: list[dict], linked_by_arch: dict[str, dict[str, dict]]) -> str:
    lines = []
    for entry in entries:
        linked = linked_by_arch[entry["arch"]].get(entry["symbol"])
        if linked is None:
            raise ReportError(f"nvlink's report of the {entry['arch']} link lists no {entry['symbol']}")
        lines += [
            f"ptxas info    : Compiling entry function '{entry['symbol']}' for '{entry['arch']}'",
            f"ptxas info    : Function properties for {entry['symbol']}",
            f"    {linked['stack']} bytes stack frame, {entry['spill_stores']} bytes spill stores, "
            f"{entry['spill_loads']} bytes spill loads",
            f"ptxas info    : Used {linked['registers']} registers, used {linked['barriers']} barriers, "
            f"{linked['smem']} bytes smem",
        ]
    return "\n".join(lines) + "\n"


def device_link(nvcc: str, arch: str, inputs: list[str]) -> str:
    with tempfile.TemporaryDirectory(prefix="nvlink_report.") as tmp:
        cmd = [nvcc, f"-arch={arch}", "-dlink", *inputs, "-Xnvlink=--verbose", "-o", str(Path(tmp) / "dlink.o")]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
        except OSError as exc:
            raise ReportError(f"cannot run {nvcc}: {exc.strerror or exc}") from None
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or [""])[-1]
        raise ReportError(f"the device link for {arch} failed (exit {proc.returncode}): {last[:200]}")
    return proc.stdout + proc.stderr


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__.splitlines()[0])
    parser.add_argument("--nvcc", required=True, help="the nvcc that links")
    parser.add_argument("--compile-report", type=Path, required=True,
                        help="ptxas's report of the relocatable objects (conf/ptxas_report.py)")
    parser.add_argument("--out", type=Path, required=True, help="the report to write")
    parser.add_argument("inputs", nargs="+", help="the relocatable objects and libraries (cudadevrt)")
    args = parser.parse_args(argv)
    partial = args.out.with_name(args.out.name + ".partial")
    try:
        entries = compile_entries(args.compile_report.read_text(encoding="utf-8"))
        archs = sorted({e["arch"] for e in entries})
        linked = {arch: linked_resources(device_link(args.nvcc, arch, args.inputs)) for arch in archs}
        text = merged_report(entries, linked)
        args.out.parent.mkdir(parents=True, exist_ok=True)
        partial.write_text(text, encoding="utf-8")
        os.replace(partial, args.out)
    except (ReportError, OSError) as exc:
        message = str(exc) if isinstance(exc, ReportError) else f"{exc.filename or ''}: {exc.strerror or exc}"
        print(f"{PROG}: {message}", file=sys.stderr)
        partial.unlink(missing_ok=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
