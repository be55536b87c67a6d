"""conf/profile.py, with stand-ins for nvidia-smi, ncu and compute-sanitizer (no GPU needed)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import synth

SCRIPT = synth.REPO / "conf" / "profile.py"

REGISTRY = {"schema": 1, "chapters": [
    {"id": "reduction", "profile": {"ncu_tests": "ReductionProfile.*", "ncu_kernels": "regex:reduce_kernel",
                                    "race_demonstration_tests": "ReductionRaceDemonstration.*"}},
    {"id": "transpose", "profile": {"ncu_tests": "TransposeProfile.*", "ncu_kernels": "regex:transpose_kernel",
                                    "race_demonstration_tests": None}},
    {"id": "twist", "profile": None},
]}


def tool(bindir: Path, name: str, body: str) -> None:
    synth.stub_executable(bindir / name, body)


def setup(tmp_path: Path, ncu_exit: int = 0) -> tuple[dict, list[str]]:
    bindir = tmp_path / "bin"
    bindir.mkdir()
    log = tmp_path / "calls.log"
    tool(bindir, "nvidia-smi", "echo 'FIXTURE GPU 80GB'\n")
    tool(bindir, "ncu", f"""echo "$@" >> {log}
echo '==PROF== Connected'
echo '"ID","Kernel Name","Metric Name","Metric Value"'
echo '"0","void k(int)","smsp__inst_executed.sum","1"'
exit {ncu_exit}
""")
    tool(bindir, "compute-sanitizer", f"""echo "$@" >> {log}
echo '========= RACECHECK SUMMARY: 5 hazards displayed (0 errors, 5 warnings)'
""")
    gpu_tests = tmp_path / "gpu_tests"
    gpu_tests.write_text("")
    registry = tmp_path / "registry.json"
    registry.write_text(json.dumps(REGISTRY))
    env = dict(os.environ, PATH=f"{bindir}:/usr/bin:/bin", STEPWISE_CUDA_BIN=str(tmp_path / "no-cuda"))
    args = [sys.executable, str(SCRIPT), "--registry", str(registry), "--gpu-tests", str(gpu_tests),
            "--out-dir", str(tmp_path / "logs")]
    return env, args


def run(env, args, *extra):
    return subprocess.run(args + list(extra), env=env, capture_output=True, text=True, timeout=60)


def test_every_profiled_chapter_gets_its_files_named_by_gpu_and_chapter(tmp_path):
    env, args = setup(tmp_path)
    proc = run(env, args)
    assert proc.returncode == 0, proc.stderr
    logs = tmp_path / "logs"
    assert sorted(p.name for p in logs.iterdir()) == [
        "fixture-gpu-80gb-reduction-ncu.csv", "fixture-gpu-80gb-reduction-race-demonstration.log",
        "fixture-gpu-80gb-transpose-ncu.csv"]
    csv = (logs / "fixture-gpu-80gb-transpose-ncu.csv").read_text()
    assert csv.startswith('"ID"') and "==PROF==" not in csv  # only the table
    calls = (tmp_path / "calls.log").read_text()
    assert "--clock-control none" in calls and "--print-units base" in calls
    assert "-k regex:transpose_kernel" in calls and "--gtest_filter=TransposeProfile.*" in calls
    assert "l1tex__t_requests_pipe_lsu_mem_global_op_st.sum" in calls  # the metrics the pages read
    assert "dram__bytes_read.sum" in calls and "dram__bytes_write.sum" in calls  # the roofline's bytes
    assert "--tool racecheck" in calls and "--gtest_filter=ReductionRaceDemonstration.*" in calls
    assert proc.stdout.count("Profile: ") == 3


def test_one_chapter(tmp_path):
    env, args = setup(tmp_path)
    proc = run(env, args, "--chapter", "transpose")
    assert proc.returncode == 0, proc.stderr
    assert [p.name for p in (tmp_path / "logs").iterdir()] == ["fixture-gpu-80gb-transpose-ncu.csv"]


def test_unknown_chapter_and_chapter_without_a_profile_are_usage_errors(tmp_path):
    env, args = setup(tmp_path)
    proc = run(env, args, "--chapter", "nope")
    assert proc.returncode == 2 and "unknown chapter 'nope'" in proc.stderr
    proc = run(env, args, "--chapter", "twist")
    assert proc.returncode == 2 and "'twist' takes no profile" in proc.stderr


def test_a_failing_ncu_leaves_no_file(tmp_path):
    env, args = setup(tmp_path, ncu_exit=3)
    proc = run(env, args, "--chapter", "transpose")
    assert proc.returncode == 1
    assert proc.stderr.startswith("profile.py: ncu failed (exit 3)")
    assert len(proc.stderr.strip().splitlines()) == 1
    assert not list((tmp_path / "logs").glob("*.csv"))


def test_missing_tools_are_named(tmp_path):
    env, args = setup(tmp_path)
    (tmp_path / "bin" / "ncu").unlink()
    proc = run(env, args, "--chapter", "transpose")
    assert proc.returncode == 1 and "ncu not found" in proc.stderr
    (tmp_path / "bin" / "nvidia-smi").unlink()
    proc = run(env, args)
    assert proc.returncode == 1 and "nvidia-smi not found" in proc.stderr


def test_without_a_usable_gpu_the_probe_stops_it_first(tmp_path):
    env, args = setup(tmp_path)
    bench = tmp_path / "stepwise_bench"
    tool(tmp_path, "stepwise_bench", synth.probe_answer(gpu=False) + "\n")
    proc = run(env, args, "--bench", str(bench))
    assert proc.returncode == 2
    assert proc.stderr.strip() == "profile.py: no usable CUDA GPU (no CUDA-capable device is detected)"
    assert not (tmp_path / "calls.log").exists() and not (tmp_path / "logs").exists()


def test_with_a_usable_gpu_the_probe_lets_it_profile(tmp_path):
    env, args = setup(tmp_path)
    tool(tmp_path, "stepwise_bench", synth.probe_answer(gpu=True) + "\n")
    proc = run(env, args, "--bench", str(tmp_path / "stepwise_bench"), "--chapter", "transpose")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.count("Profile: ") == 1
