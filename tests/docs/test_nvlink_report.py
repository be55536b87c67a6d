"""conf/nvlink_report.py: relocatable kernels' resources after the device link (no GPU, no nvcc)."""
from __future__ import annotations

import stat
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "conf" / "nvlink_report.py"
sys.path.insert(0, str(REPO / "conf"))
import nvlink_report  # noqa: E402

PARENT = "__nv_static_55__aa_dp_cu_7040__ZN8stepwise19dynamic_parallelism1a13parent_kernelEPiPj"
CHILD = "__nv_static_55__aa_dp_cu_7040__ZN8stepwise19dynamic_parallelism1a12child_kernelEPii"

#: As ptxas -v prints it for relocatable code (trimmed).
COMPILE_REPORT = f"""ptxas info    : 47 bytes gmem
ptxas info    : Compiling entry function '{PARENT}' for 'sm_90'
ptxas info    : Function properties for {PARENT}
    0 bytes stack frame, 4 bytes spill stores, 8 bytes spill loads
ptxas info    : Used 24 registers, used 0 barriers
ptxas info    : Compile time = 5.665 ms
ptxas info    : Compiling entry function '{CHILD}' for 'sm_90'
ptxas info    : Function properties for {CHILD}
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 8 registers, used 0 barriers
"""

#: As nvcc -dlink -Xnvlink=--verbose prints it (CUDA 13.0), the device runtime's functions included.
NVLINK_OUTPUT = f"""nvlink info    : 13181 bytes gmem
nvlink info    : Function properties for '__nv_static_52__f4_cuda_device_runtime_cu__Z16memcpy_3d_deviceImLi1ELi1ELi1EEv12MemcpyParamsIT_E':
nvlink info    : used 16 registers, used 1 barriers, 0 stack, 3080 bytes smem, 656 bytes cmem[0], 0 bytes lmem
nvlink info    : Function properties for '{CHILD}':
nvlink info    : used 8 registers, used 0 barriers, 0 stack, 0 bytes smem, 540 bytes cmem[0], 0 bytes lmem
nvlink info    : Function properties for '{PARENT}':
nvlink info    : used 32 registers, used 0 barriers, 16 stack, 0 bytes smem, 544 bytes cmem[0], 0 bytes lmem
"""


def test_the_linked_counts_replace_the_compiled_ones_and_spills_stay():
    entries = nvlink_report.compile_entries(COMPILE_REPORT)
    linked = nvlink_report.linked_resources(NVLINK_OUTPUT)
    assert linked[PARENT] == {"registers": 32, "barriers": 0, "stack": 16, "smem": 0}
    text = nvlink_report.merged_report(entries, {"sm_90": linked})
    assert f"ptxas info    : Compiling entry function '{PARENT}' for 'sm_90'" in text
    assert "    16 bytes stack frame, 4 bytes spill stores, 8 bytes spill loads" in text
    assert "ptxas info    : Used 32 registers, used 0 barriers, 0 bytes smem" in text
    assert "Used 8 registers" in text
    assert text.count("Compiling entry function") == 2  # the device runtime's functions are no entries of ours


def test_a_kernel_nvlink_does_not_list_is_an_error():
    entries = nvlink_report.compile_entries(COMPILE_REPORT)
    linked = nvlink_report.linked_resources(NVLINK_OUTPUT.replace(PARENT, "other"))
    with pytest.raises(nvlink_report.ReportError, match="lists no .*parent_kernel"):
        nvlink_report.merged_report(entries, {"sm_90": linked})


def test_a_report_without_entries_or_frames_is_an_error():
    with pytest.raises(nvlink_report.ReportError, match="no entry function"):
        nvlink_report.compile_entries("ptxas info    : 47 bytes gmem\n")
    without_frame = "\n".join(l for l in COMPILE_REPORT.splitlines() if "stack frame" not in l)
    with pytest.raises(nvlink_report.ReportError, match="no stack frame line"):
        nvlink_report.compile_entries(without_frame)


def _fake_nvcc(tmp_path: Path, output: str, status: int = 0) -> Path:
    fake = tmp_path / "nvcc"
    (tmp_path / "out.txt").write_text(output)
    fake.write_text(f"#!/bin/sh\ncat '{tmp_path / 'out.txt'}' >&2\nexit {status}\n")
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    return fake


def test_script_writes_the_report(tmp_path):
    (tmp_path / "compile.txt").write_text(COMPILE_REPORT)
    out = tmp_path / "linked.txt"
    proc = subprocess.run([sys.executable, str(SCRIPT), "--nvcc", str(_fake_nvcc(tmp_path, NVLINK_OUTPUT)),
                           "--compile-report", str(tmp_path / "compile.txt"), "--out", str(out), "--", "a.o"],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert "Used 32 registers" in out.read_text()


def test_a_failed_link_writes_nothing(tmp_path):
    (tmp_path / "compile.txt").write_text(COMPILE_REPORT)
    out = tmp_path / "linked.txt"
    proc = subprocess.run([sys.executable, str(SCRIPT), "--nvcc", str(_fake_nvcc(tmp_path, "nvlink error: x", 2)),
                           "--compile-report", str(tmp_path / "compile.txt"), "--out", str(out), "--", "a.o"],
                          capture_output=True, text=True)
    assert proc.returncode == 1
    assert "device link for sm_90 failed (exit 2): nvlink error: x" in proc.stderr
    assert not out.exists()
