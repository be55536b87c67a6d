#!/usr/bin/env bash
# Installs what the build needs on a Debian 12 machine, and nothing when nothing is missing.
#
#   1. The CUDA toolkit must already be there (nvcc on PATH or in /usr/local/cuda/bin);
#      the bootstrap never installs it.
#   2. The Debian packages listed in conf/debian-packages.txt that are not installed:
#      apt-get update (once), then apt-get install -y --no-install-recommends,
#      as root, or through sudo where there is one.
#   3. The project virtualenv .venv at the repository root, from conf/requirements.txt, and
#      the C++ headers of conf/requirements-headers.txt (pip install --no-deps: their
#      packages' dependencies are not wanted). A stamp file in .venv holds both files' hash,
#      so pip runs again only when either changes; a venv whose Python no longer starts is
#      recreated.
#
# Usage: conf/bootstrap.sh [--system-only | --venv-only] [--check] [-q]
#   --system-only  only steps 1 and 2 (CUDA toolkit and Debian packages)
#   --venv-only    only step 3 (the virtualenv)
#   --check        install nothing; exit 1 naming what is missing
#   -q             print nothing when everything is already in place
# Environment: STEPWISE_PYTHON  the Python that creates .venv (default: python3; >= 3.11)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PACKAGES_FILE="$ROOT/conf/debian-packages.txt"
REQUIREMENTS="$ROOT/conf/requirements.txt"
HEADER_REQUIREMENTS="$ROOT/conf/requirements-headers.txt"
VENV="$ROOT/.venv"
STAMP="$VENV/.stepwise-requirements.sha256"
BASE_PYTHON="${STEPWISE_PYTHON:-python3}"

do_system=1 do_venv=1 check_only=0 quiet=0
for arg in "$@"; do
  case "$arg" in
    --system-only|--apt-only) do_venv=0 ;;
    --venv-only) do_system=0 ;;
    --check) check_only=1 ;;
    -q|--quiet) quiet=1 ;;
    -h|--help) sed -n '2,20p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "bootstrap: unknown option '$arg' (try --help)" >&2; exit 2 ;;
  esac
done

say() { [ "$quiet" = 1 ] || echo "bootstrap: $*"; }
die() { echo "bootstrap: $*" >&2; exit 1; }

# --- 1. CUDA toolkit ---------------------------------------------------------------------
check_cuda() {
  if command -v nvcc >/dev/null 2>&1; then return 0; fi
  if [ -x /usr/local/cuda/bin/nvcc ]; then return 0; fi
  if [ -n "${CUDACXX:-}" ] && [ -x "${CUDACXX}" ]; then return 0; fi
  die "the CUDA toolkit is required (nvcc is neither on PATH nor in /usr/local/cuda/bin) and is not installed by this script: install it from https://developer.nvidia.com/cuda-downloads"
}

# --- 2. Debian packages ------------------------------------------------------------------
wanted_packages() {
  sed -e 's/#.*//' -e 's/[[:space:]]//g' "$PACKAGES_FILE" | grep -v '^$' || true
}

missing_packages() {  # prints the wanted packages dpkg does not list as installed
  local -a wanted
  mapfile -t wanted < <(wanted_packages)
  [ "${#wanted[@]}" -gt 0 ] || return 0
  # One dpkg-query call for all of them; unknown packages print nothing (stderr dropped).
  local installed
  installed="$(dpkg-query -W -f='${Package} ${db:Status-Status}\n' "${wanted[@]}" 2>/dev/null \
               | awk '$2 == "installed" { sub(/:.*/, "", $1); print $1 }' || true)"
  local p
  for p in "${wanted[@]}"; do
    grep -qxF "$p" <<<"$installed" || echo "$p"
  done
}

install_packages() {
  [ -f "$PACKAGES_FILE" ] || die "missing $PACKAGES_FILE"
  if ! command -v dpkg-query >/dev/null 2>&1; then
    die "cannot check packages (no dpkg-query: not a Debian-like system); install the equivalents of: $(wanted_packages | tr '\n' ' ')and run make with BOOTSTRAP=no"
  fi
  local -a missing
  mapfile -t missing < <(missing_packages)
  if [ "${#missing[@]}" -eq 0 ]; then
    say "Debian packages: all $(wanted_packages | wc -l) present"
    return 0
  fi
  local hint="apt-get install -y --no-install-recommends ${missing[*]}"
  if [ "$check_only" = 1 ]; then
    die "missing Debian packages: ${missing[*]} (install with: sudo $hint)"
  fi
  local -a sudo=()
  if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1; then
      if [ -t 0 ]; then sudo=(sudo); else sudo=(sudo -n); fi
    else
      die "missing Debian packages: ${missing[*]} — not root and no sudo; as root run: apt-get update && $hint"
    fi
  fi
  command -v apt-get >/dev/null 2>&1 \
    || die "missing Debian packages: ${missing[*]} — no apt-get here; install them with your package manager"
  say "installing Debian packages: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  if ! "${sudo[@]}" apt-get update -qq </dev/null \
     || ! "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" </dev/null; then
    die "could not install Debian packages: ${missing[*]} — run as root: apt-get update && $hint"
  fi
  mapfile -t missing < <(missing_packages)
  [ "${#missing[@]}" -eq 0 ] \
    || die "still missing after apt-get install: ${missing[*]} — run as root: apt-get update && apt-get install ${missing[*]}"
}

# --- 3. The virtualenv -------------------------------------------------------------------
requirements_hash() {
  # Both requirements files' bytes and the venv's Python version: any changing means reinstall.
  { cat "$REQUIREMENTS" "$HEADER_REQUIREMENTS"; "$VENV/bin/python" -c 'import sys; print(sys.version)'; } \
    | sha256sum | cut -d' ' -f1
}

venv_works() {
  [ -x "$VENV/bin/python" ] && "$VENV/bin/python" -c 'import sys, pip' >/dev/null 2>&1
}

setup_venv() {
  [ -f "$REQUIREMENTS" ] || die "missing $REQUIREMENTS"
  [ -f "$HEADER_REQUIREMENTS" ] || die "missing $HEADER_REQUIREMENTS"
  if venv_works && [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$(requirements_hash)" ]; then
    say ".venv: up to date with conf/requirements.txt and conf/requirements-headers.txt"
    return 0
  fi
  if [ "$check_only" = 1 ]; then
    die ".venv is missing, broken or older than conf/requirements*.txt (run conf/bootstrap.sh --venv-only)"
  fi
  if [ -e "$VENV" ] && ! venv_works; then
    say ".venv is broken (its Python does not start): recreating it"
    rm -rf "$VENV"
  fi
  if [ ! -e "$VENV" ]; then
    command -v "$BASE_PYTHON" >/dev/null 2>&1 \
      || die "no '$BASE_PYTHON' to create .venv with (install python3 and python3-venv, or set STEPWISE_PYTHON)"
    "$BASE_PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 11))' \
      || die "'$BASE_PYTHON' is $("$BASE_PYTHON" -V 2>&1); Sphinx 8.2 needs Python >= 3.11 (set STEPWISE_PYTHON)"
    say "creating .venv with $("$BASE_PYTHON" -V 2>&1)"
    if ! "$BASE_PYTHON" -m venv "$VENV"; then
      rm -rf "$VENV"
      die "'$BASE_PYTHON -m venv' failed (on Debian: apt-get install python3-venv)"
    fi
  fi
  say "installing conf/requirements.txt into .venv"
  rm -f "$STAMP"
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --no-input -r "$REQUIREMENTS" \
    || die "pip install -r conf/requirements.txt into .venv failed (see the messages above)"
  say "installing conf/requirements-headers.txt into .venv (--no-deps: C++ headers only)"
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --no-input --no-deps -r "$HEADER_REQUIREMENTS" \
    || die "pip install --no-deps -r conf/requirements-headers.txt into .venv failed (see the messages above)"
  requirements_hash >"$STAMP"
  say ".venv ready"
}

if [ "$do_system" = 1 ]; then
  check_cuda
  install_packages
fi
if [ "$do_venv" = 1 ]; then
  setup_venv
fi
