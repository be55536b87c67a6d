#!/usr/bin/env python3
"""Build the Stepwise CUDA site: Doxygen XML, then Sphinx HTML.

This is the one command ``make docs`` runs (with the project virtualenv's
Python). It

1. checks its inputs: the step registry (``stepwise_bench --list --json``) and
   the measurement files, one per GPU (each validated against
   conf/measurement.schema.json): ``--measurements`` is a file or a directory
   (every ``*.json`` in it); with ``--recorded DIR`` (``make docs`` passes
   docs/measurements/ with fresh measurements) the recorded files of the GPUs
   the first ones do not cover are added, labelled recorded. Two files of one
   GPU (``gpu.slug``) in one directory are an error. Under ``--strict`` also
   that every step has measurements in every file, current ones (source
   hashes match) in all but a second GPU's (a recorded GPU other than the
   reference one, whose rows of a step changed since are shown as of their
   commit);
2. runs ``doxygen conf/Doxyfile`` from the repository root with
   STEPWISE_DOXYGEN_OUT=<build>/doxygen;
3. runs ``sphinx-build -c conf docs <build>/docs/html`` (``-W --keep-going``
   under ``--strict``), handing the settings to conf/conf.py through
   environment variables (STEPWISE_REGISTRY, STEPWISE_MEASUREMENTS,
   STEPWISE_RECORDED, STEPWISE_SOURCE, STEPWISE_STRICT, STEPWISE_DOXYGEN_XML,
   STEPWISE_REPO_ROOT, and STEPWISE_REFERENCE_GPU with ``--reference-gpu``);
4. prints ``Site: /absolute/path/index.html`` as its last line.

Any failure prints one line to stderr that names the file or tool, and the
exit status is non-zero (1 for a problem with an input, 2 for a usage error,
3 for a failed tool).
"""
from __future__ import annotations

import argparse
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

CONF_DIR = Path(__file__).resolve().parent
DEFAULT_ROOT = CONF_DIR.parent
PROG = "build_docs.py"


class BuildError(Exception):
    def __init__(self, message: str, status: int = 1):
        super().__init__(message)
        self.status = status


def _fail(message: str, status: int) -> int:
    print(f"{PROG}: error: {message}", file=sys.stderr)
    return status


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one line, not usage + error
        self.exit(2, f"{PROG}: error: {message} (see --help)\n")


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = _Parser(
        prog=PROG,
        description="Build the Stepwise CUDA site (Doxygen XML, then Sphinx HTML).",
    )
    parser.add_argument("--build-dir", type=Path, default=Path("build"),
                        help="where doxygen/ and docs/html/ go (default: build)")
    parser.add_argument("--registry", type=Path, default=None,
                        help="the step registry JSON, from `stepwise_bench --list --json` "
                             "(default: BUILD_DIR/registry.json)")
    parser.add_argument("--measurements", type=Path, default=None,
                        help="a measurement JSON file, or a directory of them, one per GPU "
                             "(default: docs/measurements/)")
    parser.add_argument("--recorded", type=Path, default=None,
                        help="a directory of recorded measurement files (docs/measurements/): those "
                             "of GPUs that --measurements does not cover are shown too, as recorded")
    parser.add_argument("--reference-gpu", "--primary-gpu", dest="reference_gpu", default=None, metavar="SLUG",
                        help="the reference GPU (gpu.slug): the one whose recorded numbers the prose cites "
                             "when none is fresh and whose recorded file must be current (default: "
                             "stepwise_docs.data.REFERENCE_GPU); the other recorded GPUs' numbers of a step "
                             "changed since are shown as of their commit")
    parser.add_argument("--source", choices=("fresh", "recorded"), default=None,
                        help="what the pages say about the numbers: measured in this build "
                             "(fresh) or recorded (default: recorded)")
    parser.add_argument("--strict", action="store_true",
                        help="fail on any missing measurement, any stale one but a second GPU's, and "
                             "on any Sphinx warning")
    parser.add_argument("--root", type=Path, default=DEFAULT_ROOT,
                        help="repository root holding snippets/ and docs/ (default: the parent "
                             "of conf/)")
    parser.add_argument("--verbose", action="store_true", help="let doxygen and Sphinx talk")
    return parser.parse_args(argv)


def check_inputs(registry: Path, measurements: Path, root: Path, source: str, strict: bool,
                 recorded: Path | None = None, reference_gpu: str | None = None):
    """Load and check the inputs the way the Sphinx extension will; returns the datasets
    (the reference one first)."""
    try:
        import conf  # noqa: F401  (conf/conf.py, beside this file, puts docs/_ext on the path)
        from stepwise_docs.data import REFERENCE_GPU, DataError, load_datasets
    except ImportError as exc:  # e.g. run with a Python without jsonschema
        raise BuildError(f"cannot import the docs tooling ({exc}); run with the project "
                         f"virtualenv, e.g. .venv/bin/python conf/build_docs.py", 3) from None
    try:
        import jsonschema  # noqa: F401
    except ImportError:
        raise BuildError(f"jsonschema is not installed for {sys.executable}; run with the "
                         "project virtualenv (.venv/bin/python)", 3) from None
    try:
        datasets = load_datasets(registry, measurements, root, source,
                                 CONF_DIR / "measurement.schema.json", recorded,
                                 reference_gpu or REFERENCE_GPU)
    except DataError as exc:
        raise BuildError(str(exc)) from None
    if strict:
        problems = datasets.problems()
        if problems:
            more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
            raise BuildError(f"{problems[0]}{more}")
    return datasets


def doxygen_env(out: Path) -> dict[str, str]:
    """The environment conf/Doxyfile reads: its output folder, and the input filter of this checkout
    (conf/doxygen_filter.py under this Python), whichever tree doxygen reads."""
    return dict(os.environ, STEPWISE_DOXYGEN_OUT=str(out),
                STEPWISE_DOXYGEN_FILTER=f"{shlex.quote(sys.executable)} "
                                        f"{shlex.quote(str(CONF_DIR / 'doxygen_filter.py'))}")


def run_doxygen(root: Path, out: Path, verbose: bool) -> Path:
    doxygen = shutil.which("doxygen")
    if doxygen is None:
        raise BuildError("doxygen not found on PATH (the API documentation needs it; on Debian: "
                         "apt-get install doxygen, see conf/)", 3)
    doxyfile = CONF_DIR / "Doxyfile"
    if not doxyfile.is_file():
        raise BuildError(f"{doxyfile} does not exist", 3)
    if not (root / "snippets").is_dir():
        raise BuildError(f"{root / 'snippets'} does not exist (doxygen's INPUT)", 1)
    xml = out / "xml"
    if xml.exists():
        shutil.rmtree(xml)  # files of removed steps must not linger
    out.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run([doxygen, str(doxyfile)], cwd=root, env=doxygen_env(out),
                          capture_output=True, text=True)
    if verbose or proc.returncode != 0:
        sys.stderr.write(proc.stdout)
    if proc.stderr:
        sys.stderr.write(proc.stderr)
    if proc.returncode != 0:
        raise BuildError(f"doxygen failed (exit {proc.returncode}) on {doxyfile} with INPUT "
                         f"{root / 'snippets'}; see its messages above", 3)
    if not (xml / "index.xml").is_file():
        raise BuildError(f"doxygen wrote no {xml / 'index.xml'}", 3)
    return xml


def run_sphinx(root: Path, build: Path, env_vars: dict, strict: bool, verbose: bool) -> Path:
    try:
        import sphinx  # noqa: F401
    except ImportError:
        raise BuildError(f"sphinx is not installed for {sys.executable}; install "
                         "conf/requirements.txt into the project virtualenv", 3) from None
    html = build / "docs" / "html"
    doctrees = build / "docs" / "doctrees"
    # -E: always read every page again. Sphinx does not notice a changed measurement
    # file, Doxygen XML or extension by itself, and a page whose warnings failed a
    # strict build must warn again (not be skipped as "unchanged") on the next one.
    cmd = [sys.executable, "-m", "sphinx", "-E", "-b", "html", "-c", str(CONF_DIR),
           "-d", str(doctrees), str(root / "docs"), str(html)]
    if strict:
        cmd += ["-W", "--keep-going"]
    if not verbose:
        cmd.append("-q")
    env = dict(os.environ, **env_vars)
    proc = subprocess.run(cmd, env=env)
    if proc.returncode != 0:
        raise BuildError(f"sphinx-build failed (exit {proc.returncode}) building {root / 'docs'} "
                         f"into {html}; see its messages above", 3)
    index = html / "index.html"
    if not index.is_file():
        raise BuildError(f"sphinx-build wrote no {index}", 3)
    return index


def main(argv: list[str] | None = None) -> int:
    try:
        args = parse_args(sys.argv[1:] if argv is None else argv)
    except SystemExit as exc:  # --help, or a usage error already printed as one line
        return int(exc.code or 0)
    root = args.root.resolve()
    build = args.build_dir.resolve()
    registry = (args.registry or build / "registry.json").resolve()
    measurements = (args.measurements or root / "docs" / "measurements").resolve()
    recorded = args.recorded.resolve() if args.recorded else None
    source = args.source or "recorded"
    try:
        if not registry.is_file():
            raise BuildError(
                f"step registry {registry} does not exist; build the timing program and run "
                "`build/bench/stepwise_bench --list --json > build/registry.json` (make does)")
        datasets = check_inputs(registry, measurements, root, source, args.strict, recorded,
                                args.reference_gpu)
        xml = run_doxygen(root, build / "doxygen", args.verbose)
        env_vars = {
            "STEPWISE_REGISTRY": str(registry),
            "STEPWISE_MEASUREMENTS": str(measurements),
            "STEPWISE_RECORDED": str(recorded) if recorded else "",
            "STEPWISE_SOURCE": source,
            "STEPWISE_STRICT": "1" if args.strict else "0",
            "STEPWISE_DOXYGEN_XML": str(xml),
            "STEPWISE_REPO_ROOT": str(root),
        }
        if args.reference_gpu:
            env_vars["STEPWISE_REFERENCE_GPU"] = args.reference_gpu
        index = run_sphinx(root, build, env_vars, args.strict, args.verbose)
    except BuildError as exc:
        return _fail(str(exc), exc.status)
    from stepwise_docs.fmt import as_of_note  # importable: check_inputs imported stepwise_docs

    for i, dataset in enumerate(datasets):
        role = "reference" if i == 0 else "also shown"
        print(f"Measurements: {dataset.measurement_path} ({dataset.source}; {dataset.gpu_name}, {role})")
        for chapter in dataset.chapters.values():  # a second GPU's chapters of steps changed since
            if note := as_of_note(chapter):
                print(f"  {chapter.id}: {note}")
    print(f"Site: {index}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
