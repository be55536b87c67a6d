"""The Makefile's help, conf/build.py (make configure, make build) and conf/built_site.py (make serve,
make check-site), with stand-ins for cmake and the project's python (no build needed)."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import synth

BUILD = synth.REPO / "conf" / "build.py"
BUILT_SITE = synth.REPO / "conf" / "built_site.py"


def run(tmp_path: Path, script: Path, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(script), *args], cwd=tmp_path, capture_output=True, text=True,
                          env=env, timeout=60)


# -- make help -------------------------------------------------------------------------------------

def test_make_help_names_every_target_and_variable():
    makefile = (synth.REPO / "Makefile").read_text(encoding="utf-8")
    proc = subprocess.run(["make", "--no-print-directory", "-C", str(synth.REPO), "help"], capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    targets = re.search(r"^\.PHONY: (.+)$", makefile, re.MULTILINE).group(1).split()
    for target in targets:
        assert re.search(rf"^  make {re.escape(target)}\s", proc.stdout, re.MULTILINE), target
    for variable in re.findall(r"^([A-Z_]+)\s+\?=", makefile, re.MULTILINE):
        assert re.search(rf"^  {variable}\s", proc.stdout, re.MULTILINE), variable
    for script in re.findall(r"conf/\w+\.py", makefile):
        assert (synth.REPO / script).is_file(), script


# -- conf/build.py ---------------------------------------------------------------------------------

def build_setup(tmp_path: Path, configured: bool, products: bool = True, cmake_exit: int = 0) -> dict:
    (tmp_path / "CMakeLists.txt").write_text("# FIXTURE\n")
    build = tmp_path / "build"
    build.mkdir()
    if configured:
        (build / "build.ninja").write_text("")
    calls = tmp_path / "calls.log"
    make_products = ('[ "$1" = --build ] && mkdir -p build/bench && printf "#!/bin/sh\\n" > build/bench/stepwise_bench'
                     ' && chmod +x build/bench/stepwise_bench && echo "{}" > build/registry.json'
                     if products else "true")
    synth.stub_executable(tmp_path / "bin" / "cmake", f'echo "cmake $@" >> {calls}\n{make_products}\nexit {cmake_exit}\n')
    return dict(os.environ, PATH=f"{tmp_path / 'bin'}:/usr/bin:/bin")


def calls(tmp_path: Path) -> list[str]:
    return (tmp_path / "calls.log").read_text().splitlines()


def test_build_configures_the_first_time_then_builds_and_names_the_registry(tmp_path):
    env = build_setup(tmp_path, configured=False)
    proc = run(tmp_path, BUILD, "--build-dir", "build", env=env)
    assert proc.returncode == 0, proc.stderr
    assert calls(tmp_path) == ["cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release", "cmake --build build"]
    assert "==> make build" in proc.stdout and "Registry: build/registry.json" in proc.stdout
    assert re.search(r"^make build: \d+ s$", proc.stdout, re.MULTILINE)
    assert "+ cmake --build build" in proc.stderr


def test_build_reconfigures_only_for_an_architecture_and_configure_only_configures(tmp_path):
    env = build_setup(tmp_path, configured=True)
    assert run(tmp_path, BUILD, "--build-dir", "build", env=env).returncode == 0
    assert calls(tmp_path) == ["cmake --build build"]
    assert run(tmp_path, BUILD, "--build-dir", "build", "--cuda-arch", "75;90", env=env).returncode == 0
    assert calls(tmp_path)[1:] == ["cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release "
                                   "-DCMAKE_CUDA_ARCHITECTURES=75;90", "cmake --build build"]
    assert run(tmp_path, BUILD, "--build-dir", "build", "--configure", env=env).returncode == 0
    assert calls(tmp_path)[3:] == ["cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release"]


@pytest.mark.parametrize("products, cmake_exit, needle", [
    (False, 0, "make build: the build did not produce build/bench/stepwise_bench"),
    (True, 1, ""),
])
def test_build_fails_on_a_failed_build_or_a_missing_product(tmp_path, products, cmake_exit, needle):
    env = build_setup(tmp_path, configured=True, products=products, cmake_exit=cmake_exit)
    proc = run(tmp_path, BUILD, "--build-dir", "build", env=env)
    assert proc.returncode == 1 and needle in proc.stderr and "Registry:" not in proc.stdout


def test_build_needs_the_repository_root(tmp_path):
    proc = run(tmp_path, BUILD, "--build-dir", "build")
    assert proc.returncode == 1
    assert proc.stderr.strip() == "make build: there is no CMakeLists.txt at the repository root"


# -- conf/built_site.py ----------------------------------------------------------------------------

def test_check_site_runs_the_browser_check_on_the_recorded_site(tmp_path):
    site = tmp_path / "out" / "html"
    site.mkdir(parents=True)
    (site / "index.html").write_text("<html></html>")
    (tmp_path / "build").mkdir()
    (tmp_path / "build" / "site-dir.txt").write_text(f"{site}\n")
    python = tmp_path / "python"
    synth.stub_executable(python, f'echo "python $@" >> {tmp_path / "calls.log"}\nexit 4\n')
    proc = run(tmp_path, BUILT_SITE, "check", "--build-dir", "build", "--python", str(python))
    assert proc.returncode == 4
    assert calls(tmp_path) == [f"python tests/browser/check_site.py --site {site}"]


@pytest.mark.parametrize("action, prog", [("serve", "make serve"), ("check", "make check-site")])
def test_without_a_built_site_serve_and_check_say_to_run_make_docs(tmp_path, action, prog):
    (tmp_path / "build").mkdir()
    proc = run(tmp_path, BUILT_SITE, action, "--build-dir", "build")
    assert proc.returncode == 1
    assert proc.stderr.strip() == f"{prog}: no built site recorded in build/site-dir.txt (run make docs first)"
    (tmp_path / "build" / "site-dir.txt").write_text(f"{tmp_path / 'gone'}\n")  # a site removed since
    assert run(tmp_path, BUILT_SITE, action, "--build-dir", "build").returncode == 1
