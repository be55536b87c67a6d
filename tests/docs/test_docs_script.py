"""conf/docs.py (make docs): fresh numbers where a GPU is usable, else the recorded ones, with stand-ins
for the timing program's probe, make and the project's python."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import synth

SCRIPT = synth.REPO / "conf" / "docs.py"


def setup(tmp_path: Path, gpu: bool, measure_exit: int = 0) -> tuple[dict, list[str]]:
    calls = tmp_path / "calls.log"
    synth.stub_executable(tmp_path / "build" / "bench" / "stepwise_bench",
                          f'echo "bench $@" >> {calls}\n{synth.probe_answer(gpu)}\n')
    synth.stub_executable(tmp_path / "bin" / "make", f'echo "make $@" >> {calls}\nexit {measure_exit}\n')
    synth.stub_executable(tmp_path / "python", f"""echo "python $@" >> {calls}
mkdir -p "$PWD/out/html"; touch "$PWD/out/html/index.html"; echo "Site: $PWD/out/html/index.html"
""")
    env = dict(os.environ, PATH=f"{tmp_path / 'bin'}:/usr/bin:/bin")
    return env, [sys.executable, str(SCRIPT), "--build-dir", "build", "--python", str(tmp_path / "python")]


def run(tmp_path, env, args, *extra):
    return subprocess.run(args + list(extra), env=env, cwd=tmp_path, capture_output=True, text=True, timeout=60)


def calls(tmp_path: Path) -> list[str]:
    return (tmp_path / "calls.log").read_text().splitlines()


def test_without_a_gpu_the_recorded_numbers_and_why(tmp_path):
    env, args = setup(tmp_path, gpu=False)
    proc = run(tmp_path, env, args)
    assert proc.returncode == 0, proc.stderr
    assert ("No usable CUDA GPU (no CUDA-capable device is detected): rendering the recorded measurements "
            "in docs/measurements/.") in proc.stdout
    assert proc.stdout.splitlines()[-2:] == [
        "Docs built from recorded measurements.",
        f"Site: {tmp_path / 'out' / 'html' / 'index.html'}   (open it in a browser, or: make serve)"]
    build_docs = calls(tmp_path)[-1]
    assert "--measurements docs/measurements --source recorded" in build_docs and "--strict" not in build_docs
    assert (tmp_path / "build" / "site-dir.txt").read_text() == f"{tmp_path / 'out' / 'html'}\n"


def test_with_a_gpu_it_measures_and_renders_the_fresh_numbers(tmp_path):
    env, args = setup(tmp_path, gpu=True)
    proc = run(tmp_path, env, args)
    assert proc.returncode == 0, proc.stderr
    assert calls(tmp_path)[:2] == ["bench --probe --json", "make --no-print-directory measure BOOTSTRAP=no CHAPTERS="]
    assert "--measurements build/measurements --source fresh" in calls(tmp_path)[-1]
    assert "Docs built from fresh measurements." in proc.stdout
    assert "==> make docs: measure" in proc.stdout and "==> make docs: render" in proc.stdout
    assert "make docs: stage times: measure " in proc.stdout


def test_chapters_are_measured_alone_and_named_when_there_is_no_gpu(tmp_path):
    env, args = setup(tmp_path, gpu=True)
    proc = run(tmp_path, env, args, "--chapters", " transpose sgemm ")
    assert proc.returncode == 0, proc.stderr
    assert calls(tmp_path)[1] == "make --no-print-directory measure BOOTSTRAP=no CHAPTERS=transpose sgemm"
    assert "==> make docs: measure (transpose sgemm)" in proc.stdout
    env, args = setup(tmp_path / "no-gpu", gpu=False)
    proc = run(tmp_path / "no-gpu", env, args, "--chapters", "transpose")
    assert proc.returncode == 0, proc.stderr
    assert "(CHAPTERS=transpose is for measuring: not used)" in proc.stdout


def test_a_failed_measurement_fails_and_renders_nothing(tmp_path):
    env, args = setup(tmp_path, gpu=True, measure_exit=1)
    proc = run(tmp_path, env, args)
    assert proc.returncode == 1
    assert not any("build_docs" in c for c in calls(tmp_path))


def test_measure_yes_without_a_gpu_fails_with_the_reason(tmp_path):
    env, args = setup(tmp_path, gpu=False)
    proc = run(tmp_path, env, args, "--measure", "yes")
    assert proc.returncode == 1
    assert proc.stderr.strip() == "make docs MEASURE=yes: no usable CUDA GPU (no CUDA-capable device is detected)"


def test_measure_no_renders_the_recorded_numbers_without_probing(tmp_path):
    env, args = setup(tmp_path, gpu=True)
    proc = run(tmp_path, env, args, "--measure", "no")
    assert proc.returncode == 0, proc.stderr
    assert [c.split()[0] for c in calls(tmp_path)] == ["python"]
    assert "Docs built from recorded measurements." in proc.stdout


def test_a_build_without_the_timing_program_is_a_gpu_that_is_not_usable(tmp_path):
    env, args = setup(tmp_path, gpu=True)
    (tmp_path / "build" / "bench" / "stepwise_bench").unlink()
    proc = run(tmp_path, env, args)
    assert proc.returncode == 0, proc.stderr
    assert "No usable CUDA GPU (cannot run build/bench/stepwise_bench" in proc.stdout
