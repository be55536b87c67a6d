# Stepwise CUDA: the front door. `make` or `make help` lists the targets.
#
# Each recipe runs as one bash script (.ONESHELL) with -e -u -o pipefail. The stages are programs in conf/ (build.py,
# measure.py, profile.py, docs.py, check.py, built_site.py), each tested in tests/docs/; the GPU machine's python3
# runs them where there is no .venv.

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.ONESHELL:
.DEFAULT_GOAL := help
.DELETE_ON_ERROR:

# ---- knobs (override on the command line: make docs MEASURE=no BUILD_DIR=out) ------------
BUILD_DIR        ?= build
MEASURE          ?= auto
CUDA_ARCH        ?=
RACECHECK_FILTER ?=
BOOTSTRAP        ?= yes
SKIP_BUILD       ?= no
COMMIT           ?=
CHAPTERS         ?=
RECORD           ?= no
PORT             ?= 8000

# The CUDA toolkit's usual home, after whatever PATH already has (so CMake finds nvcc and
# `make measure` finds compute-sanitizer on a stock install).
ifneq ($(wildcard /usr/local/cuda/bin),)
export PATH := $(PATH):/usr/local/cuda/bin
endif

PY         := .venv/bin/python
PYTHON     := $(if $(wildcard $(PY)),$(PY),python3)
REGISTRY   := $(BUILD_DIR)/registry.json
FRESH      := $(BUILD_DIR)/measurements
RECORDED   ?= docs/measurements

ifeq ($(filter auto yes no,$(MEASURE)),)
$(error MEASURE must be auto, yes or no (not '$(MEASURE)'))
endif
ifeq ($(filter yes no,$(RECORD)),)
$(error RECORD must be yes or no (not '$(RECORD)'))
endif
PROFILE_OUT := $(if $(filter yes,$(RECORD)),$(RECORDED)/logs,$(FRESH)/logs)
MAYBE_BUILD := $(if $(filter yes,$(SKIP_BUILD)),,build)

.PHONY: help bootstrap configure build test measure profile docs check-site serve clean distclean

define HELP_TEXT
Stepwise CUDA — make targets

  make docs        build, then (GPU present) test + time on this GPU, and render the site;
                   without a GPU render the recorded numbers in docs/measurements/. Prints "Site: ...".
  make test        build, ctest, the docs tooling's pytest, the strict docs build and a headless-browser
                   check of the built site; prints a PASS/FAIL summary (what CI runs: .ci/run)
  make measure     build, then on a usable GPU: GPU tests, the timing program, compute-sanitizer
                   memcheck/racecheck -> $(FRESH)/<gpu-slug>.json (CHAPTERS=...: only those, merged
                   into that file or the recorded one; RECORD=yes: into $(RECORDED)/<gpu-slug>.json)
  make profile     on a GPU: the Nsight Compute counts and racecheck reports the chapters argue from
                   (conf/profile.py) -> $(FRESH)/logs/ (RECORD=yes: $(RECORDED)/logs/)
  make serve       serve the last built site at http://127.0.0.1:$(PORT)/
  make check-site  run only the headless-browser check on the last built site
  make build       bootstrap, configure (first time), compile everything, write $(REGISTRY)
  make configure   bootstrap, then (re)run CMake into $(BUILD_DIR)
  make bootstrap   install missing Debian packages and the .venv (conf/bootstrap.sh)
  make clean       remove $(BUILD_DIR)
  make distclean   remove $(BUILD_DIR) and .venv
  make help        this list

Variables (set on the command line, e.g. make docs MEASURE=no):
  BUILD_DIR         build folder (now: $(BUILD_DIR))
  MEASURE           make docs: auto = measure if a GPU is usable, else recorded; yes = must measure;
                    no = recorded numbers only (now: $(MEASURE))
  CUDA_ARCH         passed as -DCMAKE_CUDA_ARCHITECTURES, e.g. 90 or native (now: $(or $(CUDA_ARCH),unset: CMake picks))
  RACECHECK_FILTER  gtest filter for the racecheck run, in place of the chapters' racecheck_exclude in
                    the registry (races shown on purpose, tests racecheck cannot check) (now: $(or $(RACECHECK_FILTER),unset))
  BOOTSTRAP         no = skip conf/bootstrap.sh, you installed the dependencies yourself (now: $(BOOTSTRAP))
  SKIP_BUILD        make measure: yes = use $(BUILD_DIR) as it is (built on another machine) (now: $(SKIP_BUILD))
  COMMIT            make measure: the commit to name in the measurement file, for a tree copied from a clean
                    checkout of it to a machine whose git does not know it (now: $(or $(COMMIT),unset: git's HEAD))
  CHAPTERS          make measure, docs, profile: only these chapters, e.g. CHAPTERS="sgemm tensor_core_gemm";
                    measured ones replace theirs in this GPU's file, the others are kept (now: $(or $(CHAPTERS),all))
  RECORD            make measure, profile: yes = write into the recorded files and logs, $(RECORDED)/,
                    instead of $(FRESH)/ (now: $(RECORD))
  RECORDED          the recorded measurement files' folder (now: $(RECORDED))
  PORT              make serve's port (now: $(PORT))
endef
export HELP_TEXT

help:
	@printf '%s\n' "$$HELP_TEXT"

bootstrap:
	@if [ "$(BOOTSTRAP)" = no ]; then echo "bootstrap: skipped (BOOTSTRAP=no)"; exit 0; fi
	conf/bootstrap.sh

configure: bootstrap
	$(PYTHON) conf/build.py --build-dir "$(BUILD_DIR)" --cuda-arch "$(CUDA_ARCH)" --configure

build: bootstrap
	$(PYTHON) conf/build.py --build-dir "$(BUILD_DIR)" --cuda-arch "$(CUDA_ARCH)"

measure: $(MAYBE_BUILD)
	$(PYTHON) conf/measure.py --build-dir "$(BUILD_DIR)" --out-dir "$(FRESH)" --commit "$(COMMIT)" \
	  --racecheck-filter='$(RACECHECK_FILTER)' --chapters "$(CHAPTERS)" --recorded "$(RECORDED)" \
	  $(if $(filter yes,$(RECORD)),--record)

profile: $(MAYBE_BUILD)
	# Nsight Compute counts and racecheck reports of the chapters that argue from them; clocks are left alone.
	$(PYTHON) conf/profile.py --bench "$(BUILD_DIR)/bench/stepwise_bench" --registry "$(REGISTRY)" \
	  --gpu-tests "$(BUILD_DIR)/tests/stepwise_gpu_tests" --out-dir "$(PROFILE_OUT)" \
	  $(foreach chapter,$(CHAPTERS),--chapter $(chapter))
	[ "$(RECORD)" = yes ] || echo "  (make profile RECORD=yes writes them into $(RECORDED)/logs/ to record them)"

docs: build
	$(PY) conf/docs.py --build-dir "$(BUILD_DIR)" --measure "$(MEASURE)" --python "$(PY)" --chapters "$(CHAPTERS)"

test: bootstrap
	$(PY) conf/check.py --build-dir "$(BUILD_DIR)" --python "$(PY)"

check-site:
	$(PY) conf/built_site.py check --build-dir "$(BUILD_DIR)" --python "$(PY)"

serve:
	$(PYTHON) conf/built_site.py serve --build-dir "$(BUILD_DIR)" --port "$(PORT)" --python "$(PYTHON)"

clean:
	@case "$(BUILD_DIR)" in ""|/|.|..|./|~) echo "make clean: refusing BUILD_DIR='$(BUILD_DIR)'" >&2; exit 1 ;; esac
	rm -rf -- "$(BUILD_DIR)"
	echo "removed $(BUILD_DIR)"

distclean: clean
	@rm -rf -- .venv
	echo "removed .venv"
