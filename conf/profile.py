#!/usr/bin/env python3
"""Take the profiler evidence the chapters argue from (``make profile``).

For every chapter of the step registry that has a ``profile`` entry:

* Nsight Compute counts of its kernels: ``ncu --clock-control none`` (the clocks
  are left as they are) over the chapter's profiling test, which runs every step
  once, with the metrics the docs read (``stepwise_docs.ncu.METRICS``: among them DRAM bytes
  read and written, ``dram__bytes_read.sum`` and ``dram__bytes_write.sum``, the roofline's), written
  as ``OUT_DIR/<gpu-slug>-<chapter>-ncu.csv``;
* compute-sanitizer's racecheck report of its race demonstration test, if it has
  one: ``OUT_DIR/<gpu-slug>-<chapter>-race-demonstration.log``.

The file names start with the GPU's slug, as the measurement files do, so that a
page can say which GPU the counts come from. A file is written whole or not at
all. Needs a GPU, ``ncu`` and ``compute-sanitizer`` (on PATH or in
/usr/local/cuda/bin); only the standard library and the docs tooling's
``ncu.py``, so it runs with any Python 3.9+ (no virtualenv on a GPU machine).

Usage::

    profile.py --registry build/registry.json --gpu-tests build/tests/stepwise_gpu_tests \\
               --out-dir build/measurements/logs [--chapter ID ...] [--bench build/bench/stepwise_bench]

With ``--bench``, the timing program's ``--probe`` is asked first, and without a usable GPU the
script stops with its one-line reason.

Exit status: 0 when every file was written, 1 when a tool failed, 2 for a usage
error or no usable GPU; each problem is one line on stderr.
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

import conf  # noqa: F401  (conf/conf.py, beside this file, puts docs/_ext on the path)
from measure import probe  # conf/measure.py, beside this file: the one GPU probe
from stepwise_docs.ncu import METRICS  # the one list of metrics the pages read

PROG = "profile.py"
#: Where the CUDA toolkit's tools are looked for after PATH (STEPWISE_CUDA_BIN overrides it, for the tests).
CUDA_BIN = Path(os.environ.get("STEPWISE_CUDA_BIN", "/usr/local/cuda/bin"))


class ProfileError(Exception):
    def __init__(self, message: str, status: int = 1):
        super().__init__(message)
        self.status = status


def slugify(name: str) -> str:
    """As the timing program names measurement files: ``NVIDIA H100 80GB HBM3`` -> ``nvidia-h100-80gb-hbm3``."""
    slug = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")
    return slug or "unknown-gpu"


def find_tool(name: str) -> str:
    found = shutil.which(name)
    if found:
        return found
    candidate = CUDA_BIN / name
    if candidate.is_file() and os.access(candidate, os.X_OK):
        return str(candidate)
    raise ProfileError(f"{name} not found (PATH, {CUDA_BIN}); it comes with the CUDA toolkit")


def gpu_name() -> str:
    smi = shutil.which("nvidia-smi")
    if smi is None:
        raise ProfileError("nvidia-smi not found: no NVIDIA driver, so no GPU to profile")
    proc = subprocess.run([smi, "--query-gpu=name", "--format=csv,noheader"], capture_output=True, text=True)
    names = [line.strip() for line in proc.stdout.splitlines() if line.strip()]
    if proc.returncode != 0 or not names:
        raise ProfileError(f"nvidia-smi could not name a GPU (exit {proc.returncode}): "
                           f"{(proc.stderr or proc.stdout).strip()[:200]}")
    return names[0]


def profiled_chapters(registry_path: Path, wanted: list[str]) -> list[dict]:
    try:
        registry = json.loads(registry_path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise ProfileError(f"cannot read the step registry {registry_path}: {exc}") from None
    chapters = {c["id"]: c for c in registry.get("chapters", [])}
    unknown = [c for c in wanted if c not in chapters]
    if unknown:
        raise ProfileError(f"unknown chapter {unknown[0]!r} (the registry has {', '.join(chapters)})", 2)
    selected = [chapters[c] for c in wanted] if wanted else list(chapters.values())
    with_profile = [c for c in selected if c.get("profile")]
    if wanted and len(with_profile) < len(selected):
        missing = [c["id"] for c in selected if not c.get("profile")]
        raise ProfileError(f"chapter {missing[0]!r} takes no profile (its registry entry has none)", 2)
    return with_profile


def write_whole(path: Path, text: str) -> None:
    partial = path.with_name(path.name + ".partial")
    partial.write_text(text, encoding="utf-8")
    partial.replace(path)


def ncu_counts(ncu: str, gpu_tests: Path, chapter: dict, out: Path) -> None:
    profile = chapter["profile"]
    cmd = [ncu, "--clock-control", "none", "--csv", "--print-units", "base", "--kernel-name-base", "demangled",
           "-k", profile["ncu_kernels"], "--metrics", ",".join(METRICS), str(gpu_tests),
           f"--gtest_filter={profile['ncu_tests']}"]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    rows = [line for line in proc.stdout.splitlines(keepends=True) if line.startswith('"')]
    if proc.returncode != 0:
        raise ProfileError(f"ncu failed (exit {proc.returncode}) on {chapter['id']}'s {profile['ncu_tests']}: "
                           f"{(proc.stderr.strip().splitlines() or [''])[-1][:200]}")
    if len(rows) < 2:
        raise ProfileError(f"ncu profiled no kernel matching {profile['ncu_kernels']} in {chapter['id']}'s "
                           f"{profile['ncu_tests']}")
    write_whole(out, "".join(rows))


def race_report(sanitizer: str, gpu_tests: Path, chapter: dict, out: Path) -> None:
    tests = chapter["profile"]["race_demonstration_tests"]
    # racecheck reports the race and the test still passes: the status is the test's, not the report's.
    proc = subprocess.run([sanitizer, "--tool", "racecheck", str(gpu_tests), f"--gtest_filter={tests}"],
                          capture_output=True, text=True)
    text = proc.stdout + proc.stderr
    if proc.returncode != 0 or "RACECHECK SUMMARY" not in text:
        raise ProfileError(f"compute-sanitizer racecheck failed (exit {proc.returncode}) on {chapter['id']}'s "
                           f"{tests}")
    write_whole(out, text)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__.splitlines()[0])
    parser.add_argument("--registry", type=Path, required=True, help="the step registry (build/registry.json)")
    parser.add_argument("--gpu-tests", type=Path, required=True, help="the GPU test binary")
    parser.add_argument("--out-dir", type=Path, required=True, help="where the CSV and log files go")
    parser.add_argument("--chapter", action="append", default=[], help="only this chapter (repeatable)")
    parser.add_argument("--bench", type=Path, help="the timing program: first ask it whether a GPU is usable")
    args = parser.parse_args(argv)
    try:
        if args.bench is not None:
            gpu = probe(args.bench)
            if not gpu.usable:
                raise ProfileError(f"no usable CUDA GPU ({gpu.message})", status=2)
        chapters = profiled_chapters(args.registry, args.chapter)
        if not args.gpu_tests.is_file():
            raise ProfileError(f"no GPU test binary at {args.gpu_tests} (build first)")
        slug = slugify(gpu_name())
        ncu = find_tool("ncu") if any(c["profile"].get("ncu_tests") for c in chapters) else ""
        sanitizer = (find_tool("compute-sanitizer")
                     if any(c["profile"].get("race_demonstration_tests") for c in chapters) else "")
        args.out_dir.mkdir(parents=True, exist_ok=True)
        written = []
        for chapter in chapters:
            profile = chapter["profile"]
            if profile.get("ncu_tests"):
                out = args.out_dir / f"{slug}-{chapter['id']}-ncu.csv"
                ncu_counts(ncu, args.gpu_tests, chapter, out)
                written.append(out)
            if profile.get("race_demonstration_tests"):
                out = args.out_dir / f"{slug}-{chapter['id']}-race-demonstration.log"
                race_report(sanitizer, args.gpu_tests, chapter, out)
                written.append(out)
    except ProfileError as exc:
        print(f"{PROG}: {exc}", file=sys.stderr)
        return exc.status
    for path in written:
        print(f"Profile: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
