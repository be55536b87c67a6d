"""conf/measure.py (make measure), with stand-ins for the timing program, the GPU tests and
compute-sanitizer (no GPU needed)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import synth

SCRIPT = synth.REPO / "conf" / "measure.py"
#: The step registry's chapters as the stand-ins know them: id -> gtest prefix.
CHAPTERS = {"elementwise": "Elementwise", "transpose": "Transpose", "sgemm": "Sgemm"}


def setup(tmp_path: Path, gpu: bool = True, tests_exit: int = 0, sanitizer: bool = True,
          sanitizer_exit: int = 0, bench_exit: int = 0) -> tuple[dict, list[str]]:
    build = tmp_path / "build"
    calls = tmp_path / "calls.log"
    # The timing program's stand-in writes its --out file: the chapters it was given, after the --merge-from file's.
    synth.stub_executable(build / "bench" / "stepwise_bench", f"""echo "bench $@" >> {calls}
if [ "$1" = --probe ]; then {synth.probe_answer(gpu, "cudaGetDeviceCount: no CUDA-capable device")}; fi
base=""; chapters=""
while [ $# -gt 0 ]; do
  case "$1" in --out) out=$2;; --merge-from) base=$2;; --chapter) chapters="$chapters $2";; esac; shift
done
[ {bench_exit} = 0 ] || exit {bench_exit}
{{ [ -z "$base" ] || cat "$base"; echo "measured:$chapters"; }} > "$out.new" && mv "$out.new" "$out"
""")
    synth.stub_executable(build / "tests" / "stepwise_gpu_tests", f"""echo "tests $@" >> {calls}
echo '{{}}' > "${{1#--gtest_output=json:}}"
exit {tests_exit}
""")
    synth.write_json(build / "registry.json", {"schema": 1, "chapters": [
        {"id": c, "gtest_prefix": prefix} for c, prefix in CHAPTERS.items()]})
    bindir = tmp_path / "bin"
    bindir.mkdir()
    if sanitizer:
        synth.stub_executable(bindir / "compute-sanitizer",
                              f"""echo "sanitizer $@ under=$STEPWISE_UNDER_SANITIZER" >> {calls}
echo '========= ERROR SUMMARY: {sanitizer_exit} errors'
exit {sanitizer_exit}
""")
    env = dict(os.environ, PATH=f"{bindir}:/usr/bin:/bin", STEPWISE_CUDA_HOME=str(tmp_path / "no-cuda"))
    args = [sys.executable, str(SCRIPT), "--build-dir", str(build), "--out-dir", str(build / "measurements"),
            "--recorded", str(tmp_path / "recorded")]
    return env, args


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


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
    assert "Chapters: all" in proc.stdout
    log = calls(tmp_path)
    report = tmp_path / "build" / "test-reports" / "gpu_tests.json"
    out = tmp_path / "build" / "measurements" / "fixture-gpu.json"
    assert log[0] == "bench --probe --json"
    assert log[1] == f"tests --gtest_output=json:{report}"
    assert log[2] == f"bench --gtest-report {report} --out {out} --commit abc1234"  # no chapter, no merge
    assert log[3].startswith("sanitizer --tool memcheck --error-exitcode 1 ") and log[3].endswith("under=memcheck")
    assert log[4].startswith("sanitizer --tool racecheck") and "--gtest_filter=-*Race*" in log[4]
    assert not old.exists()  # only this run's file stays
    assert f"Measurement: {out}" in proc.stdout
    assert "memcheck: clean" in proc.stdout and "racecheck: clean" in proc.stdout
    assert "+ " in proc.stderr and "FAILED" not in proc.stderr
    for stage in ("GPU tests", "timing", "memcheck", "racecheck"):
        assert f"==> make measure: {stage}" in proc.stdout
    stage_times = [line for line in proc.stdout.splitlines() if line.startswith("make measure: stage times: ")]
    assert len(stage_times) == 1 and stage_times[0].endswith("s in all"), proc.stdout


def test_chapters_run_their_tests_and_sanitizers_only_and_merge_into_the_recorded_file(tmp_path):
    env, args = setup(tmp_path)
    recorded = write(tmp_path / "recorded" / "fixture-gpu.json", "recorded\n")
    proc = run(tmp_path, env, args, "--commit", "abc1234", "--chapters", "sgemm transpose",
               "--racecheck-filter=-*Race*:DynamicParallelism*")
    assert proc.returncode == 0, proc.stderr
    assert "Chapters: transpose, sgemm" in proc.stdout  # the guide's order
    log = calls(tmp_path)
    assert log[1].endswith("--gtest_filter=Transpose*:Sgemm*")
    out = tmp_path / "build" / "measurements" / "fixture-gpu.json"
    assert log[2].endswith(f"--out {out} --commit abc1234 --chapter transpose --chapter sgemm "
                           f"--merge-from {recorded}")
    assert "--gtest_filter=Transpose*:Sgemm* " in log[3]  # memcheck: the chapters' tests
    assert "--gtest_filter=Transpose*:Sgemm*-*Race*:DynamicParallelism* " in log[4]  # racecheck: less the filter's
    assert out.read_text() == 'recorded\nmeasured: transpose sgemm\n'
    assert recorded.read_text() == "recorded\n"  # the recorded file is not touched
    assert f"Merging into {recorded}" in proc.stdout


def test_racecheck_leaves_out_what_the_registry_says_unless_a_filter_is_given(tmp_path):
    env, args = setup(tmp_path)
    registry = tmp_path / "build" / "registry.json"
    chapters = [{"id": c, "gtest_prefix": prefix, "racecheck_exclude": []} for c, prefix in CHAPTERS.items()]
    chapters[0]["racecheck_exclude"] = [{"tests": "ElementwiseRace*", "reason": "races on purpose"}]
    chapters[2]["racecheck_exclude"] = [{"tests": "SgemmCublas*", "reason": "not our kernels"}]
    synth.write_json(registry, {"schema": 1, "chapters": chapters})
    assert run(tmp_path, env, args).returncode == 0
    assert "--gtest_filter=-ElementwiseRace*:SgemmCublas* " in calls(tmp_path)[-1]
    assert run(tmp_path, env, args, "--chapters", "transpose").returncode == 0
    assert "--gtest_filter=Transpose*-ElementwiseRace*:SgemmCublas* " in calls(tmp_path)[-1]
    assert run(tmp_path, env, args, "--racecheck-filter=-Other*").returncode == 0
    assert "--gtest_filter=-Other* " in calls(tmp_path)[-1]


def test_chapters_merge_into_this_gpus_fresh_file_where_there_is_one(tmp_path):
    env, args = setup(tmp_path)
    write(tmp_path / "recorded" / "fixture-gpu.json", "recorded\n")
    assert run(tmp_path, env, args, "--chapters", "transpose").returncode == 0
    proc = run(tmp_path, env, args, "--chapters", "sgemm")
    assert proc.returncode == 0, proc.stderr
    out = tmp_path / "build" / "measurements" / "fixture-gpu.json"
    assert f"--merge-from {out}" in calls(tmp_path)[-3]
    assert out.read_text() == 'recorded\nmeasured: transpose\nmeasured: sgemm\n'


def test_record_merges_into_the_recorded_file_and_keeps_the_sanitizer_logs(tmp_path):
    env, args = setup(tmp_path)
    recorded = write(tmp_path / "recorded" / "fixture-gpu.json", "recorded\n")
    proc = run(tmp_path, env, args, "--chapters", "transpose", "--record")
    assert proc.returncode == 0, proc.stderr
    assert f"--out {recorded} " in calls(tmp_path)[2] and f"--merge-from {recorded}" in calls(tmp_path)[2]
    assert recorded.read_text() == 'recorded\nmeasured: transpose\n'
    assert not (tmp_path / "build" / "measurements" / "fixture-gpu.json").exists()
    for tool in ("memcheck", "racecheck"):
        kept = tmp_path / "recorded" / "logs" / f"fixture-gpu-{tool}-transpose.log"
        assert "ERROR SUMMARY: 0 errors" in kept.read_text()
        assert f"Log: {kept}" in proc.stdout


def test_without_chapters_nothing_is_merged_even_with_a_recorded_file(tmp_path):
    env, args = setup(tmp_path)
    write(tmp_path / "recorded" / "fixture-gpu.json", "recorded\n")
    proc = run(tmp_path, env, args, "--record")
    assert proc.returncode == 0, proc.stderr
    assert "--merge-from" not in calls(tmp_path)[2]
    assert (tmp_path / "recorded" / "fixture-gpu.json").read_text() == "measured:\n"
    assert (tmp_path / "recorded" / "logs" / "fixture-gpu-memcheck.log").is_file()


def test_an_unknown_chapter_is_one_line_that_lists_the_chapters(tmp_path):
    env, args = setup(tmp_path)
    proc = run(tmp_path, env, args, "--chapters", "transpose,softmax")
    assert proc.returncode == 2
    assert proc.stderr.strip() == ("make measure: unknown chapter 'softmax' (the chapters: elementwise, transpose, "
                                   "sgemm)")
    assert not (tmp_path / "calls.log").exists()


def test_with_chapters_the_racecheck_filter_may_only_leave_tests_out(tmp_path):
    env, args = setup(tmp_path)
    proc = run(tmp_path, env, args, "--chapters", "transpose", "--racecheck-filter=Sgemm*")
    assert proc.returncode == 2
    assert "RACECHECK_FILTER must be only patterns to leave out (-A:B), not 'Sgemm*'" in proc.stderr


def test_no_gpu_stops_at_once_with_the_probes_reason(tmp_path):
    env, args = setup(tmp_path, gpu=False)
    proc = run(tmp_path, env, args)
    assert proc.returncode == 2
    assert proc.stderr.strip() == ("make measure: no usable CUDA GPU "
                                   "(cudaGetDeviceCount: no CUDA-capable device)")
    assert calls(tmp_path) == ["bench --probe --json"]


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


def test_a_timing_program_that_writes_nothing_leaves_no_earlier_file_passed_off_as_new(tmp_path):
    env, args = setup(tmp_path, bench_exit=1)
    write(tmp_path / "build" / "measurements" / "fixture-gpu.json", "earlier\n")
    proc = run(tmp_path, env, args, "--chapters", "transpose")
    assert proc.returncode == 1
    assert "make measure: FAILED: timing program" in proc.stderr
    assert "make measure: FAILED: no measurement file written" in proc.stderr
    assert "Measurement: " not in proc.stdout


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


def test_cudnn_is_found_in_a_pythons_wheel_where_the_toolkit_has_none(tmp_path, monkeypatch):
    sys.path.insert(0, str(synth.REPO / "conf"))
    import measure
    monkeypatch.delenv("STEPWISE_CUDNN_LIBRARY", raising=False)
    site = tmp_path / "site"
    library = write(site / "nvidia" / "cudnn" / "lib" / "libcudnn.so.9", "")
    python = tmp_path / "python3"
    synth.stub_executable(python, f"echo /nowhere; echo {site}")
    path, where = measure.cudnn_library(tmp_path / "no-cuda", str(python))
    assert path == library and "nvidia-cudnn-cu13" in where
    toolkit = write(tmp_path / "cuda" / "lib64" / "libcudnn.so.9", "")
    assert measure.cudnn_library(tmp_path / "cuda", str(python)) == (None, str(toolkit))
    assert measure.cudnn_library(tmp_path / "no-cuda", str(tmp_path / "missing-python"))[0] is None
    monkeypatch.setenv("STEPWISE_CUDNN_LIBRARY", "/x/libcudnn.so.9")
    assert measure.cudnn_library(tmp_path / "cuda", str(python)) == (None, "STEPWISE_CUDNN_LIBRARY=/x/libcudnn.so.9")


def with_pytorch_chapters(tmp_path: Path, python_exit: int) -> tuple[dict, list[str]]:
    """The stand-ins, a registry with a chapter that has PyTorch rows too, and a python3 that logs its arguments."""
    env, args = setup(tmp_path)
    synth.write_json(tmp_path / "build" / "registry.json", {"schema": 1, "chapters": [
        {"id": c, "gtest_prefix": prefix} for c, prefix in CHAPTERS.items()] + [
        {"id": "softmax", "gtest_prefix": "Softmax", "pytorch": [{"id": "pytorch_softmax", "sizes": []}]}]})
    synth.stub_executable(tmp_path / "bin" / "python3", f"""echo "python3 $@" >> {tmp_path / "calls.log"}
exit {python_exit}
""")
    return env, args


def test_pytorch_rows_are_taken_after_the_timing_where_the_run_measures_their_chapters(tmp_path):
    env, args = with_pytorch_chapters(tmp_path, 0)
    proc = run(tmp_path, env, args, "--commit", "abc1234")
    assert proc.returncode == 0, proc.stderr
    log = calls(tmp_path)
    timing = next(i for i, line in enumerate(log) if line.startswith("bench --gtest-report"))
    script = synth.REPO / "conf" / "pytorch_baselines.py"
    out = tmp_path / "build" / "measurements" / "pytorch" / "fixture-gpu.json"
    assert log[timing + 1] == (f"python3 {script} --registry {tmp_path / 'build' / 'registry.json'} "
                               f"--gpu-slug fixture-gpu --commit abc1234 --out {out}")
    assert log[timing + 2].startswith("sanitizer --tool memcheck")
    # Chapters without PyTorch rows take none.
    (tmp_path / "calls.log").unlink()
    proc = run(tmp_path, env, args, "--commit", "abc1234", "--chapters", "transpose")
    assert proc.returncode == 0 and not any(line.startswith(f"python3 {script}") for line in calls(tmp_path))


def test_a_python_without_pytorch_leaves_its_rows_out_and_a_failed_script_fails_the_run(tmp_path):
    env, args = with_pytorch_chapters(tmp_path, 3)
    proc = run(tmp_path, env, args, "--commit", "abc1234", "--chapters", "softmax")
    assert proc.returncode == 0, proc.stderr
    assert "PyTorch baselines: not measured" in proc.stdout
    again = tmp_path / "again"
    again.mkdir()
    env, args = with_pytorch_chapters(again, 2)
    proc = run(again, env, args, "--commit", "abc1234", "--chapters", "softmax")
    assert proc.returncode == 1 and "FAILED: PyTorch baselines" in proc.stderr
