#!/usr/bin/env bash
# Install the pinned Claude Code, Codex, GitHub Copilot and pi CLIs into a repo-local npm prefix.
#
# Usage: scripts/install-agent-clis.sh [PREFIX]
#   PREFIX defaults to $TRELLIS_AGENT_CLI_PREFIX, else <repo>/.tools/npm.
# Idempotent: when all pinned versions are already installed under PREFIX it
# does nothing but print where the binaries are. Needs node + npm and access to
# the npm registry; nothing else is downloaded.
set -euo pipefail

CLAUDE_CODE_VERSION="2.1.328"
CODEX_VERSION="0.169.0"
COPILOT_VERSION="1.0.102"
PI_VERSION="0.73.1"
# `copilot --version` must not look for (or download) a newer release.
export COPILOT_AUTO_UPDATE=false

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
prefix="${1:-${TRELLIS_AGENT_CLI_PREFIX:-$repo_root/.tools/npm}}"

for tool in node npm; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "install-agent-clis: '$tool' is required but not on PATH" >&2
    exit 1
  fi
done

# Prints the version recorded in an installed package's package.json, or nothing.
installed_version() {
  local manifest="$prefix/lib/node_modules/$1/package.json"
  if [[ -f "$manifest" ]]; then
    node -e 'process.stdout.write(String(require(process.argv[1]).version || ""))' "$manifest"
  fi
}

# True when the package is at its pinned version and its binary actually runs.
is_current() {
  local package="$1" want="$2" bin="$3"
  [[ "$(installed_version "$package")" == "$want" ]] || return 1
  [[ -x "$prefix/bin/$bin" ]] || return 1
  "$prefix/bin/$bin" --version >/dev/null 2>&1
}

wanted=()
is_current "@anthropic-ai/claude-code" "$CLAUDE_CODE_VERSION" claude \
  || wanted+=("@anthropic-ai/claude-code@$CLAUDE_CODE_VERSION")
is_current "@openai/codex" "$CODEX_VERSION" codex \
  || wanted+=("@openai/codex@$CODEX_VERSION")
is_current "@github/copilot" "$COPILOT_VERSION" copilot \
  || wanted+=("@github/copilot@$COPILOT_VERSION")
is_current "@mariozechner/pi-coding-agent" "$PI_VERSION" pi \
  || wanted+=("@mariozechner/pi-coding-agent@$PI_VERSION")

if ((${#wanted[@]} > 0)); then
  mkdir -p "$prefix"
  echo "install-agent-clis: installing ${wanted[*]} into $prefix" >&2
  # --global with an explicit prefix gives the usual bin/ + lib/node_modules layout
  # without touching the system npm prefix. Postinstall scripts must run: Claude
  # Code links its platform-native binary there.
  # Install scripts and optional dependencies are forced on in case a user or CI npmrc disables
  # them: Claude Code's postinstall links its platform binary from an optional dependency.
  npm install --global --prefix "$prefix" --ignore-scripts=false --include=optional \
    --no-audit --no-fund --loglevel=error "${wanted[@]}"
else
  echo "install-agent-clis: pinned versions already present in $prefix" >&2
fi

for bin in claude codex copilot pi; do
  if ! version="$("$prefix/bin/$bin" --version 2>&1)"; then
    echo "install-agent-clis: $prefix/bin/$bin does not run: $version" >&2
    exit 1
  fi
done

echo "claude=$prefix/bin/claude ($("$prefix/bin/claude" --version 2>&1 | head -n1))"
echo "codex=$prefix/bin/codex ($("$prefix/bin/codex" --version 2>&1 | head -n1))"
echo "copilot=$prefix/bin/copilot ($("$prefix/bin/copilot" --version 2>&1 | head -n1))"
echo "pi=$prefix/bin/pi ($("$prefix/bin/pi" --version 2>&1 | head -n1))"
