# Stepwise CUDA: the front door. `make` or `make help` lists the targets.
#
# Each recipe runs as one bash script (.ONESHELL) with -e -u -o pipefail; commands worth
# seeing are echoed with a leading "+" by the `run` helper below.

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.ONESHELL:
.DEFAULT_GOAL := help
.DELETE_ON_ERROR:

# ---- knobs (override on the command line: make docs MEASURE=no BUILD_DIR=out) ------------
BUILD_DIR        ?= build
MEASURE          ?= auto
CUDA_ARCH        ?=
RACECHECK_FILTER ?= -*RaceDemonstration*:DynamicParallelism*:TensorCoreGemmCublas*
BOOTSTRAP        ?= yes
SKIP_BUILD       ?= no
COMMIT           ?=
PORT             ?= 8000

# The CUDA toolkit's usual home, after whatever PATH already has (so CMake finds nvcc and
# `make measure` finds compute-sanitizer on a stock install).
ifneq ($(wildcard /usr/local/cuda/bin),)
export PATH := $(PATH):/usr/local/cuda/bin
endif

PY         := .venv/bin/python
# Recipes call make through this, not $(MAKE) directly: GNU make runs any recipe naming $(MAKE)
# even under `make -n`, and with .ONESHELL that would be the whole recipe.
SUBMAKE     = $(MAKE) --no-print-directory
BENCH      := $(BUILD_DIR)/bench/stepwise_bench
GPU_TESTS  := $(BUILD_DIR)/tests/stepwise_gpu_tests
REGISTRY   := $(BUILD_DIR)/registry.json
REPORTS    := $(BUILD_DIR)/test-reports
FRESH      := $(BUILD_DIR)/measurements
RECORDED   := docs/measurements
SITE_FILE  := $(BUILD_DIR)/site-dir.txt
CMAKE_CONFIGURE := cmake -S . -B "$(BUILD_DIR)" -G Ninja -DCMAKE_BUILD_TYPE=Release \
                   $(if $(CUDA_ARCH),-DCMAKE_CUDA_ARCHITECTURES=$(CUDA_ARCH))

# Shell helpers every recipe starts with.
#   run CMD...  echo "+ CMD" to stderr, then run it
#   die MSG     print MSG to stderr and fail
#   probe       run the timing program's --probe; sets probe_ok (0/1) and probe_msg (one line)
PRELUDE = run() { printf '+ %s\n' "$$*" >&2; "$$@"; }; \
          die() { printf '%s\n' "$$*" >&2; exit 1; }; \
          probe() { local out; probe_ok=1; out=$$("$(BENCH)" --probe 2>&1) || probe_ok=0; \
                    probe_msg=$$(printf '%s\n' "$$out" | sed '/^[[:space:]]*$$/d' | tail -n 1 \
                      | sed -e 's/^stepwise_bench: //' -e 's/^no usable CUDA GPU (\(.*\))$$/\1/'); \
                    [ -n "$$probe_msg" ] || probe_msg="stepwise_bench --probe printed nothing"; }

ifeq ($(filter auto yes no,$(MEASURE)),)
$(error MEASURE must be auto, yes or no (not '$(MEASURE)'))
endif

.PHONY: help bootstrap configure build test measure profile docs check-site serve clean distclean

define HELP_TEXT
Stepwise CUDA — make targets

  make docs        build, then (GPU present) test + time on this GPU, and render the site;
                   without a GPU render the recorded numbers in docs/measurements/. Prints "Site: ...".
  make test        build, ctest, the docs tooling's pytest, the strict docs build and a headless-browser
                   check of the built site; prints a PASS/FAIL summary (what CI runs: .ci/run)
  make measure     build, then on a usable GPU: GPU tests, compute-sanitizer memcheck/racecheck,
                   and the timing program -> $(FRESH)/<gpu-slug>.json
  make profile     on a GPU: the Nsight Compute counts and racecheck reports the chapters argue from
                   (conf/profile.py) -> $(FRESH)/logs/ (copy to $(RECORDED)/logs/)
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
  RACECHECK_FILTER  gtest filter for the racecheck run, to leave out races shown on purpose and dynamic
                    parallelism, which racecheck does not support (memcheck does) (now: $(RACECHECK_FILTER))
  BOOTSTRAP         no = skip conf/bootstrap.sh, you installed the dependencies yourself (now: $(BOOTSTRAP))
  SKIP_BUILD        make measure: yes = use $(BUILD_DIR) as it is (built on another machine) (now: $(SKIP_BUILD))
  COMMIT            make measure: the commit to name in the measurement file, for a tree copied from a clean
                    checkout of it to a machine whose git does not know it (now: $(or $(COMMIT),unset: git's HEAD))
  PORT              make serve's port (now: $(PORT))
endef
export HELP_TEXT

help:
	@printf '%s\n' "$$HELP_TEXT"

bootstrap:
	@if [ "$(BOOTSTRAP)" = no ]; then echo "bootstrap: skipped (BOOTSTRAP=no)"; exit 0; fi
	conf/bootstrap.sh

configure: bootstrap
	@$(PRELUDE)
	[ -f CMakeLists.txt ] || die "make configure: there is no CMakeLists.txt at the repository root"
	run $(CMAKE_CONFIGURE)

build: bootstrap
	@$(PRELUDE)
	[ -f CMakeLists.txt ] || die "make build: there is no CMakeLists.txt at the repository root"
	if [ ! -f "$(BUILD_DIR)/build.ninja" ] || [ -n "$(CUDA_ARCH)" ]; then
	  run $(CMAKE_CONFIGURE)
	fi
	run cmake --build "$(BUILD_DIR)"
	[ -x "$(BENCH)" ] || die "make build: the build did not produce $(BENCH)"
	# The build writes the step registry, with every kernel's compiled resources (bench/CMakeLists.txt).
	[ -f "$(REGISTRY)" ] || die "make build: the build did not write $(REGISTRY)"
	echo "Registry: $(REGISTRY)"

measure: $(if $(filter yes,$(SKIP_BUILD)),,build)
	@$(PRELUDE)
	probe
	[ "$$probe_ok" = 1 ] || die "make measure: no usable CUDA GPU ($$probe_msg)"
	echo "GPU: $$probe_msg"
	[ -x "$(GPU_TESTS)" ] || die "make measure: the build did not produce $(GPU_TESTS)"
	mkdir -p "$(REPORTS)" "$(FRESH)"
	failed=()
	# 1. Correctness on this GPU; the JSON report feeds the per-step test counts.
	rm -f "$(REPORTS)/gpu_tests.json"
	run "$(GPU_TESTS)" --gtest_output=json:$(REPORTS)/gpu_tests.json || failed+=("GPU tests")
	# 2. Timing (before the sanitizers, so that a long sanitizer run cannot hold the numbers back). Only
	#    this run's file stays in $(FRESH).
	dirty=()  # --dirty only where git knows the commit and sees changes to it
	if [ -n "$(COMMIT)" ]; then  # a tree copied from a clean checkout of COMMIT, whose git here does not know it
	  [[ "$(COMMIT)" =~ ^[0-9a-f]{7,40}$$ ]] || die "make measure: COMMIT must be a commit hash (7 to 40 hex digits), not '$(COMMIT)'"
	  commit=$(COMMIT)
	else
	  commit=$$(git rev-parse --verify -q --short=12 HEAD 2>/dev/null || echo unknown)
	  if [ "$$commit" != unknown ] && [ -n "$$(git status --porcelain 2>/dev/null || true)" ]; then dirty=(--dirty); fi
	fi
	rm -f "$(FRESH)"/*.json
	run "$(BENCH)" --gtest-report "$(REPORTS)/gpu_tests.json" --out-dir "$(FRESH)" \
	    --commit "$$commit" "$${dirty[@]}" || failed+=("timing program")
	# 3. compute-sanitizer over the same binary.
	sanitizer=$$(command -v compute-sanitizer || true)
	for c in /usr/local/cuda/bin/compute-sanitizer /usr/local/cuda/compute-sanitizer/compute-sanitizer; do
	  [ -n "$$sanitizer" ] || { [ -x "$$c" ] && sanitizer=$$c; } || true
	done
	if [ -n "$$sanitizer" ]; then
	  export STEPWISE_UNDER_SANITIZER=1  # tests that compare register counts skip themselves (instrumentation)
	  echo "+ $$sanitizer --tool memcheck --error-exitcode 1 $(GPU_TESTS) > $(REPORTS)/memcheck.log 2>&1" >&2
	  if ! "$$sanitizer" --tool memcheck --error-exitcode 1 "$(GPU_TESTS)" > "$(REPORTS)/memcheck.log" 2>&1; then
	    tail -n 25 "$(REPORTS)/memcheck.log"; failed+=("memcheck ($(REPORTS)/memcheck.log)")
	  else echo "memcheck: clean"; fi
	  filter=(); [ -z '$(RACECHECK_FILTER)' ] || filter=(--gtest_filter='$(RACECHECK_FILTER)')
	  echo "+ $$sanitizer --tool racecheck --error-exitcode 1 $(GPU_TESTS) $${filter[*]} > $(REPORTS)/racecheck.log 2>&1" >&2
	  if ! "$$sanitizer" --tool racecheck --error-exitcode 1 "$(GPU_TESTS)" "$${filter[@]}" > "$(REPORTS)/racecheck.log" 2>&1; then
	    tail -n 25 "$(REPORTS)/racecheck.log"; failed+=("racecheck ($(REPORTS)/racecheck.log)")
	  else echo "racecheck: clean"; fi
	else
	  echo "compute-sanitizer not found (PATH, /usr/local/cuda): memcheck and racecheck NOT run"
	fi
	echo
	written=0
	for f in "$(FRESH)"/*.json; do
	  [ -e "$$f" ] || continue
	  written=1
	  echo "Measurement: $$f"
	  echo "  (copy it to $(RECORDED)/ and commit it to record these numbers for readers without a GPU)"
	done
	[ "$$written" = 1 ] || failed+=("no measurement file in $(FRESH)")
	if [ "$${#failed[@]}" -gt 0 ]; then
	  printf 'make measure: FAILED: %s\n' "$${failed[@]}" >&2
	  exit 1
	fi

profile: $(if $(filter yes,$(SKIP_BUILD)),,build)
	@$(PRELUDE)
	probe
	[ "$$probe_ok" = 1 ] || die "make profile: no usable CUDA GPU ($$probe_msg)"
	# Nsight Compute counts and racecheck reports of the chapters that argue from them (conf/profile.py; clocks
	# are left alone). Plain python3: a GPU machine need not have the docs' virtualenv.
	py=python3; [ ! -x "$(PY)" ] || py="$(PY)"
	run "$$py" conf/profile.py --registry "$(REGISTRY)" --gpu-tests "$(GPU_TESTS)" --out-dir "$(FRESH)/logs"
	echo "  (copy them to $(RECORDED)/logs/ with the measurement file to record them)"

docs: build
	@$(PRELUDE)
	[ -f conf/build_docs.py ] || die "make docs: there is no conf/build_docs.py"
	source=recorded
	if [ "$(MEASURE)" != no ]; then
	  probe
	  if [ "$$probe_ok" = 1 ]; then
	    run $(SUBMAKE) measure BOOTSTRAP=no
	    source=fresh
	  elif [ "$(MEASURE)" = yes ]; then
	    die "make docs MEASURE=yes: no usable CUDA GPU ($$probe_msg)"
	  else
	    echo "No usable CUDA GPU ($$probe_msg): rendering the recorded measurements in $(RECORDED)/."
	  fi
	fi
	if [ "$$source" = fresh ]; then args=(--measurements "$(FRESH)" --source fresh)
	else args=(--measurements "$(RECORDED)" --source recorded); fi
	run "$(PY)" conf/build_docs.py --build-dir "$(BUILD_DIR)" --registry "$(REGISTRY)" "$${args[@]}" --recorded "$(RECORDED)" \
	  | tee "$(BUILD_DIR)/docs-build.log"
	site=$$(sed -n 's/^Site: //p' "$(BUILD_DIR)/docs-build.log" | tail -n 1)
	[ -n "$$site" ] && [ -f "$$site" ] || die "make docs: build_docs.py did not print 'Site: <index.html>' naming a file"
	dirname "$$site" > "$(SITE_FILE)"
	echo
	echo "Docs built from $$source measurements."
	echo "Site: $$site   (open it in a browser, or: make serve)"

test: bootstrap
	@$(PRELUDE)
	results=()
	stage() {  # stage NAME CMD...: run CMD, remember PASS/FAIL for the summary
	  local name=$$1; shift
	  echo; echo "==> $$name"
	  if "$$@"; then results+=("PASS  $$name"); else results+=("FAIL  $$name"); fi
	}
	summary() {
	  echo
	  echo "==================== make test: summary ===================="
	  printf '%s\n' "$${results[@]}"
	  npass=$$(printf '%s\n' "$${results[@]}" | grep -c '^PASS' || true)
	  nfail=$$(printf '%s\n' "$${results[@]}" | grep -c '^FAIL' || true)
	  echo "$$npass passed, $$nfail failed"
	  [ "$$nfail" = 0 ]
	}
	# 0. The build: snippets (each also compiled alone), tests, timing program, registry.
	stage "build (cmake --build $(BUILD_DIR); every snippet compiled alone; registry)" \
	  run $(SUBMAKE) build BOOTSTRAP=no
	if [[ "$${results[-1]}" == FAIL* ]]; then
	  results+=("FAIL  ctest, pytest, docs and browser check: not run, the build failed")
	  summary
	fi
	mkdir -p "$(REPORTS)"
	# 1. GoogleTest through CTest (GPU tests skip with a reason where there is no GPU).
	echo; echo "==> ctest"
	if run ctest --test-dir "$(BUILD_DIR)" --output-on-failure 2>&1 | tee "$(REPORTS)/ctest.log"; then verdict=PASS; else verdict=FAIL; fi
	counts=$$(grep -E '^[0-9]+% tests passed' "$(REPORTS)/ctest.log" | tail -n 1 || true)
	skipped=$$(grep -c '\*\*\*Skipped' "$(REPORTS)/ctest.log" || true)
	results+=("$$verdict  ctest: $${counts:-no summary line}$$([ "$$skipped" = 0 ] || echo " ($$skipped skipped)")")
	# 2. Python tests: the docs tooling and the browser check's own logic.
	stage "pytest tests/docs" run "$(PY)" -m pytest -q tests/docs
	stage "pytest tests/browser" run "$(PY)" -m pytest -q tests/browser
	# 3. The strict docs build of what `make docs` would render without measuring:
	#    this build dir's fresh measurement if `make measure` left one, else the recorded ones.
	if compgen -G "$(FRESH)/*.json" > /dev/null; then args=(--measurements "$(FRESH)" --source fresh)
	else args=(--measurements "$(RECORDED)" --source recorded); fi
	strict_docs() {
	  [ -f conf/build_docs.py ] || { echo "there is no conf/build_docs.py" >&2; return 1; }
	  run "$(PY)" conf/build_docs.py --build-dir "$(BUILD_DIR)" --registry "$(REGISTRY)" \
	      "$${args[@]}" --recorded "$(RECORDED)" --strict | tee "$(BUILD_DIR)/docs-build.log" || return 1
	  site=$$(sed -n 's/^Site: //p' "$(BUILD_DIR)/docs-build.log" | tail -n 1)
	  [ -n "$$site" ] && [ -f "$$site" ] || { site=""; echo "build_docs.py did not print 'Site: <index.html>'" >&2; return 1; }
	  dirname "$$site" > "$(SITE_FILE)"
	}
	site=""
	stage "strict docs build ($${args[3]} measurements)" strict_docs
	# 4. The built site in a headless browser; its front page must show every recorded GPU.
	recorded_gpus=$$( (compgen -G "$(RECORDED)/*.json" || true) | wc -l)
	if [ -n "$$site" ]; then
	  stage "browser check of $$(dirname "$$site")" run "$(PY)" tests/browser/check_site.py \
	    --site "$$(dirname "$$site")" --min-measurement-pages 1 --min-gpus "$$(( recorded_gpus > 0 ? recorded_gpus : 1 ))"
	else
	  results+=("FAIL  browser check: not run, no site was built")
	fi
	summary

check-site:
	@$(PRELUDE)
	site=$$(cat "$(SITE_FILE)" 2>/dev/null || true)
	[ -n "$$site" ] && [ -f "$$site/index.html" ] || die "make check-site: no built site recorded in $(SITE_FILE) (run make docs first)"
	run "$(PY)" tests/browser/check_site.py --site "$$site"

serve:
	@$(PRELUDE)
	site=$$(cat "$(SITE_FILE)" 2>/dev/null || true)
	[ -n "$$site" ] && [ -f "$$site/index.html" ] || die "make serve: no built site recorded in $(SITE_FILE) (run make docs first)"
	py=python3; [ ! -x "$(PY)" ] || py="$(PY)"
	echo "Serving $$site at http://127.0.0.1:$(PORT)/ (Ctrl-C stops)"
	exec "$$py" -m http.server --bind 127.0.0.1 --directory "$$site" $(PORT)

clean:
	@case "$(BUILD_DIR)" in ""|/|.|..|./|~) echo "make clean: refusing BUILD_DIR='$(BUILD_DIR)'" >&2; exit 1 ;; esac
	rm -rf -- "$(BUILD_DIR)"
	echo "removed $(BUILD_DIR)"

distclean: clean
	@rm -rf -- .venv
	echo "removed .venv"
