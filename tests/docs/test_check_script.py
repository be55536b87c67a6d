"""conf/check.py (make test): its stages, continuing past failures, and the summary CI reads, with
stand-ins for make, ctest and the project's python (no build needed)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import synth

SCRIPT = synth.REPO / "conf" / "check.py"


def setup(tmp_path: Path, make_exit=0, ctest_exit=0, docs_tests_exit=0, docs_build_exit=0,
          recorded_gpus=2, fresh=False) -> tuple[dict, list[str]]:
    calls = tmp_path / "calls.log"
    bindir = tmp_path / "bin"
    synth.stub_executable(bindir / "make", f'echo "make $@" >> {calls}\nexit {make_exit}\n')
    synth.stub_executable(bindir / "ctest", f"""echo "ctest $@" >> {calls}
echo '  5/7 Test  #5: Gpu.Thing ...***Skipped   0.01 sec'
echo '  6/7 Test  #6: Gpu.Other ...***Skipped   0.01 sec'
echo '100% tests passed, 0 tests failed out of 7'
exit {ctest_exit}
""")
    synth.stub_executable(tmp_path / "python", f"""echo "python $@" >> {calls}
case "$*" in
  *"pytest -q tests/docs"*) exit {docs_tests_exit} ;;
  *build_docs.py*) mkdir -p "$PWD/out/html"; touch "$PWD/out/html/index.html"
                   echo "Site: $PWD/out/html/index.html"; exit {docs_build_exit} ;;
esac
exit 0
""")
    recorded = tmp_path / "docs" / "measurements"
    recorded.mkdir(parents=True)
    for i in range(recorded_gpus):
        (recorded / f"gpu-{i}.json").write_text("{}")
    (tmp_path / "build").mkdir()
    if fresh:
        (tmp_path / "build" / "measurements").mkdir()
        (tmp_path / "build" / "measurements" / "this-gpu.json").write_text("{}")
    env = dict(os.environ, PATH=f"{bindir}:/usr/bin:/bin")
    return env, [sys.executable, str(SCRIPT), "--build-dir", "build", "--python", str(tmp_path / "python")]


def run(tmp_path, env, args):
    return subprocess.run(args, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=60)


def summary(proc) -> list[str]:
    return proc.stdout.split("==================== make test: summary ====================\n", 1)[1].splitlines()


def test_every_stage_passes_and_the_summary_ends_with_the_counts(tmp_path):
    env, args = setup(tmp_path)
    proc = run(tmp_path, env, args)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert summary(proc) == [
        "PASS  build (cmake --build build; every snippet compiled alone; registry)",
        "PASS  ctest: 100% tests passed, 0 tests failed out of 7 (2 skipped)",
        "PASS  pytest tests/docs",
        "PASS  pytest tests/browser",
        "PASS  strict docs build (recorded measurements)",
        f"PASS  browser check of {tmp_path / 'out' / 'html'}",
        "6 passed, 0 failed",
    ]
    calls = (tmp_path / "calls.log").read_text().splitlines()
    assert calls[0] == "make --no-print-directory build BOOTSTRAP=no"
    assert calls[1] == "ctest --test-dir build --output-on-failure"
    build_docs = next(c for c in calls if "build_docs.py" in c)
    assert "--measurements docs/measurements --source recorded" in build_docs and build_docs.endswith("--strict")
    assert calls[-1].endswith(f"--site {tmp_path / 'out' / 'html'} --min-measurement-pages 1 --min-gpus 2")
    assert (tmp_path / "build" / "site-dir.txt").read_text() == f"{tmp_path / 'out' / 'html'}\n"
    assert (tmp_path / "build" / "test-reports" / "ctest.log").read_text().count("***Skipped") == 2
    assert "==> ctest" in proc.stdout and "+ ctest --test-dir build" in proc.stderr


def test_a_failed_build_runs_nothing_else(tmp_path):
    env, args = setup(tmp_path, make_exit=2)
    proc = run(tmp_path, env, args)
    assert proc.returncode == 1
    assert summary(proc)[1:] == ["FAIL  ctest, pytest, docs and browser check: not run, the build failed",
                                 "0 passed, 2 failed"]
    assert (tmp_path / "calls.log").read_text().splitlines() == ["make --no-print-directory build BOOTSTRAP=no"]


def test_failures_are_counted_and_the_stages_after_them_still_run(tmp_path):
    env, args = setup(tmp_path, ctest_exit=8, docs_tests_exit=1)
    proc = run(tmp_path, env, args)
    assert proc.returncode == 1
    lines = summary(proc)
    assert lines[1].startswith("FAIL  ctest: ") and lines[2] == "FAIL  pytest tests/docs"
    assert lines[-1] == "4 passed, 2 failed"


def test_without_a_site_the_browser_check_is_said_not_run(tmp_path):
    env, args = setup(tmp_path, docs_build_exit=1)
    proc = run(tmp_path, env, args)
    assert proc.returncode == 1
    assert summary(proc)[-3:] == ["FAIL  strict docs build (recorded measurements)",
                                  "FAIL  browser check: not run, no site was built", "4 passed, 2 failed"]
    assert not (tmp_path / "build" / "site-dir.txt").exists()


def test_a_fresh_measurement_is_what_the_strict_build_checks(tmp_path):
    env, args = setup(tmp_path, fresh=True, recorded_gpus=0)
    proc = run(tmp_path, env, args)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    build_docs = next(c for c in (tmp_path / "calls.log").read_text().splitlines() if "build_docs.py" in c)
    assert "--measurements build/measurements --source fresh" in build_docs
    assert "PASS  strict docs build (fresh measurements)" in summary(proc)
    assert (tmp_path / "calls.log").read_text().splitlines()[-1].endswith("--min-gpus 1")  # at least one GPU
