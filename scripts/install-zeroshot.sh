#!/usr/bin/env bash
# Install the pinned reference product (Zeroshot, PyPI wheel) into a private venv; the
# differential tests run its `zeroshot` binary as an oracle.
#
# Usage: scripts/install-zeroshot.sh [VENV]
#   VENV defaults to <repo>/.tools/zeroshot-<version>.
# Idempotent: when the venv already holds the pinned version and its binary answers
# `--version`, it only prints the binary's path. Needs python3 (>= 3.11, the wheel's floor)
# with venv and pip, and access to the Python package index; nothing else is downloaded.
# Prints `zeroshot=<path to the binary>` as its last line.
set -euo pipefail

ZEROSHOT_PACKAGE="the-open-engine-zeroshot"
ZEROSHOT_VERSION="10.19.1.post1"
# What `zeroshot --version` prints for the pinned wheel.
ZEROSHOT_BINARY_VERSION="zeroshot 10.19.1"

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="${1:-$repo_root/.tools/zeroshot-$ZEROSHOT_VERSION}"

# The binary inside an installed venv, or nothing.
installed_binary() {
  [[ -x "$venv/bin/python" ]] || return 0
  "$venv/bin/python" -c 'from zeroshot._binary import resolve_binary; print(resolve_binary())' \
    2>/dev/null || true
}

is_current() {
  local binary
  binary="$(installed_binary)"
  [[ -n "$binary" && -x "$binary" ]] || return 1
  [[ "$("$binary" --version 2>/dev/null)" == "$ZEROSHOT_BINARY_VERSION" ]]
}

# A Python the wheel supports, with venv (Debian ships venv separately: installed through
# apt-get when missing, as scripts/postgres.sh does for its server).
require_python() {
  command -v python3 >/dev/null || { echo "install-zeroshot: python3 is required" >&2; exit 1; }
  if ! python3 -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
    echo "install-zeroshot: python3 >= 3.11 is required (the wheel's floor); found $(python3 --version 2>&1)" >&2
    exit 1
  fi
  if ! python3 -c 'import ensurepip, venv' 2>/dev/null; then
    if ! command -v apt-get >/dev/null; then
      echo "install-zeroshot: python3 lacks venv/ensurepip and apt-get is unavailable" >&2
      exit 1
    fi
    echo "install-zeroshot: installing Debian's python3-venv" >&2
    export DEBIAN_FRONTEND=noninteractive
    if ! apt-get install -y -q python3-venv >/dev/null; then
      apt-get update -q >/dev/null
      apt-get install -y -q python3-venv >/dev/null
    fi
  fi
}

if ! is_current; then
  require_python
  echo "install-zeroshot: installing $ZEROSHOT_PACKAGE==$ZEROSHOT_VERSION into $venv" >&2
  rm -rf "$venv"
  mkdir -p "$(dirname "$venv")"
  python3 -m venv "$venv"
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps \
    --only-binary=:all: "$ZEROSHOT_PACKAGE==$ZEROSHOT_VERSION"
  if ! is_current; then
    echo "install-zeroshot: the installed binary does not report $ZEROSHOT_BINARY_VERSION" >&2
    exit 1
  fi
else
  echo "install-zeroshot: $ZEROSHOT_PACKAGE==$ZEROSHOT_VERSION already present in $venv" >&2
fi

echo "zeroshot=$(installed_binary)"
