"""conf/measure.py (make measure), with stand-ins for the timing program, the GPU tests and
compute-sanitizer (no GPU needed)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import synth

SCRIPT = synth.REPO / "conf" / "measure.py"


def setup(tmp_path: Path, gpu: bool = True, tests_exit: int = 0, sanitizer: bool = True,
          sanitizer_exit: int = 0) -> tuple[dict, list[str]]:
    build = tmp_path / "build"
    calls = tmp_path / "calls.log"
    probe = ("echo 'FIXTURE GPU (compute capability 9.0, 132 SMs)'; exit 0" if gpu else
             "echo 'stepwise_bench: no usable CUDA GPU (cudaGetDeviceCount: no CUDA-capable device)' >&2; exit 1")
    synth.stub_executable(build / "bench" / "stepwise_bench", f"""echo "bench $@" >> {calls}
if [ "$1" = --probe ]; then {probe}; fi
while [ $# -gt 0 ]; do [ "$1" = --out-dir ] && out=$2; shift; done
echo '{{}}' > "$out/fixture-gpu.json"
""")
    synth.stub_executable(build / "tests" / "stepwise_gpu_tests", f"""echo "tests $@" >> {calls}
echo '{{}}' > "${{1#--gtest_output=json:}}"
exit {tests_exit}
""")
    bindir = tmp_path / "bin"
    bindir.mkdir()
    if sanitizer:
        synth.stub_executable(bindir / "compute-sanitizer",
                              f"""echo "sanitizer $@ under=$STEPWISE_UNDER_SANITIZER" >> {calls}
echo '========= ERROR SUMMARY: {sanitizer_exit} errors'
exit {sanitizer_exit}
""")
    env = dict(os.environ, PATH=f"{bindir}:/usr/bin:/bin", STEPWISE_CUDA_HOME=str(tmp_path / "no-cuda"))
    args = [sys.executable, str(SCRIPT), "--build-dir", str(build), "--out-dir", str(build / "measurements")]
    return env, args


def run(tmp_path, env, args, *extra):
    return subprocess.run(args + list(extra), env=env, cwd=tmp_path, capture_output=True, text=True, timeout=60)


def calls(tmp_path: Path) -> list[str]:
    return (tmp_path / "calls.log").read_text().splitlines()


def test_tests_then_timing_then_sanitizers_and_the_file_written(tmp_path):
    env, args = setup(tmp_path)
    old = tmp_path / "build" / "measurements" / "old-gpu.json"
    old.parent.mkdir(parents=True)
    old.write_text("{}")
    proc = run(tmp_path, env, args, "--commit", "abc1234", "--racecheck-filter=-*Race*")
    assert proc.returncode == 0, proc.stderr
    assert "GPU: FIXTURE GPU (compute capability 9.0, 132 SMs)" in proc.stdout
    log = calls(tmp_path)
    report = tmp_path / "build" / "test-reports" / "gpu_tests.json"
    assert log[1] == f"tests --gtest_output=json:{report}"
    assert log[2].startswith(f"bench --gtest-report {report} --out-dir ") and log[2].endswith("--commit abc1234")
    assert log[3].startswith("sanitizer --tool memcheck --error-exitcode 1 ") and log[3].endswith("under=1")
    assert log[4].startswith("sanitizer --tool racecheck") and "--gtest_filter=-*Race*" in log[4]
    assert not old.exists()  # only this run's file stays
    assert f"Measurement: {tmp_path / 'build' / 'measurements' / 'fixture-gpu.json'}" in proc.stdout
    assert "memcheck: clean" in proc.stdout and "racecheck: clean" in proc.stdout
    assert "+ " in proc.stderr and "FAILED" not in proc.stderr


def test_no_gpu_stops_at_once_with_the_probes_reason(tmp_path):
    env, args = setup(tmp_path, gpu=False)
    proc = run(tmp_path, env, args)
    assert proc.returncode == 2
    assert proc.stderr.strip() == ("make measure: no usable CUDA GPU "
                                   "(cudaGetDeviceCount: no CUDA-capable device)")
    assert calls(tmp_path) == ["bench --probe"]


def test_a_failed_stage_does_not_stop_the_others_and_each_is_named(tmp_path):
    env, args = setup(tmp_path, tests_exit=1, sanitizer_exit=1)
    proc = run(tmp_path, env, args, "--commit", "abc1234")
    assert proc.returncode == 1
    failed = [line for line in proc.stderr.splitlines() if "FAILED" in line]
    reports = tmp_path / "build" / "test-reports"
    assert failed == ["make measure: FAILED: GPU tests",
                      f"make measure: FAILED: memcheck ({reports / 'memcheck.log'})",
                      f"make measure: FAILED: racecheck ({reports / 'racecheck.log'})"]
    assert "ERROR SUMMARY: 1 errors" in proc.stdout  # the failed log's last lines
    assert "Measurement: " in proc.stdout  # the timing ran all the same


def test_without_compute_sanitizer_the_sanitizers_are_said_not_run(tmp_path):
    env, args = setup(tmp_path, sanitizer=False)
    proc = run(tmp_path, env, args, "--commit", "abc1234")
    assert proc.returncode == 0, proc.stderr
    assert "memcheck and racecheck NOT run" in proc.stdout


def test_a_commit_that_is_no_hash_is_a_usage_error(tmp_path):
    env, args = setup(tmp_path)
    proc = run(tmp_path, env, args, "--commit", "HEAD~1")
    assert proc.returncode == 2
    assert "COMMIT must be a commit hash" in proc.stderr
    assert not (tmp_path / "calls.log").exists()


def test_outside_a_git_checkout_the_commit_is_unknown(tmp_path):
    env, args = setup(tmp_path)
    env["GIT_CEILING_DIRECTORIES"] = str(tmp_path.parent)
    proc = run(tmp_path, env, args)
    assert proc.returncode == 0, proc.stderr
    timing = [c for c in calls(tmp_path) if c.startswith("bench --gtest-report")]
    assert timing[0].endswith("--commit unknown")


def test_a_missing_binary_is_named(tmp_path):
    env, args = setup(tmp_path)
    (tmp_path / "build" / "tests" / "stepwise_gpu_tests").unlink()
    proc = run(tmp_path, env, args)
    assert proc.returncode == 2
    assert "the build did not produce" in proc.stderr and "stepwise_gpu_tests" in proc.stderr
