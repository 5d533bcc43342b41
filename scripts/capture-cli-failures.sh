#!/usr/bin/env bash
# Captures what the pinned agent CLIs print when they fail — not signed in, an invalid key, an
# unknown model, a rate limit — by running them against the scripted model server of
# trellis-testkit (loopback only; nothing reaches the internet). The transcripts land in
# crates/trellis-agents/tests/fakes/captured/<cli>-<case>.{stdout,stderr,code}, which the fake
# CLIs of the failure tests replay byte for byte. Re-run after bumping a pinned CLI.
#
# Usage: scripts/capture-cli-failures.sh [MODEL_SERVER_BINARY]
#   needs the CLIs of scripts/install-agent-clis.sh ($TRELLIS_AGENT_CLI_PREFIX, else
#   <repo>/.tools/npm) and a built trellis-model-server (default target/debug/).
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
prefix="${TRELLIS_AGENT_CLI_PREFIX:-$repo_root/.tools/npm}"
server_bin="${1:-$repo_root/target/debug/trellis-model-server}"
out="$repo_root/crates/trellis-agents/tests/fakes/captured"
mkdir -p "$out"
work="$(mktemp -d /tmp/trellis-capture.XXXXXX)"
server_pid=""
cleanup() {
  if [[ -n "$server_pid" ]]; then kill "$server_pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

node_dir="$(dirname "$(command -v node)")"
base_path="$prefix/bin:$node_dir:/usr/local/bin:/usr/bin:/bin"
good_key="sk-capture-valid-key-0000"
bad_key="sk-capture-wrong-key-1111"

# Starts the server for one script (with the one valid key) and sets $url.
serve() {
  if [[ -n "$server_pid" ]]; then kill "$server_pid" 2>/dev/null || true; wait "$server_pid" 2>/dev/null || true; fi
  echo "$1" >"$work/script.json"
  "$server_bin" "$work/script.json" --api-key "$good_key" --quiet >"$work/urls" 2>"$work/server.log" &
  server_pid=$!
  for _ in $(seq 50); do grep -q ANTHROPIC_BASE_URL "$work/urls" 2>/dev/null && break; sleep 0.1; done
  url="$(sed -n 's/^ANTHROPIC_BASE_URL=//p' "$work/urls")"
}

# One error turn, repeated: some CLIs retry a request before they give up.
errors() {
  local turns=""
  for i in $(seq 12); do turns+="${turns:+,}{\"http_error\":$1}"; done
  echo "{\"conversations\":[{\"name\":\"failing\",\"turns\":[$turns]}]}"
}

# Runs one CLI with a fresh home; the case's transcript is written to $out. Temporary paths
# are replaced by /tmp/capture so the files do not change from one capture to the next.
capture() {
  local name="$1"; shift
  local home="$work/home-$name"
  mkdir -p "$home/tmp" "$home/.codex" "$work/ws"
  set +e
  (cd "$work/ws" && echo "Say hello." | timeout 120 env -i PATH="$base_path" HOME="$home" TMPDIR="$home/tmp" \
     LANG=C.UTF-8 CODEX_HOME="$home/.codex" COPILOT_AUTO_UPDATE=false "$@" \
     >"$out/$name.stdout" 2>"$out/$name.stderr")
  echo $? >"$out/$name.code"
  set -e
  sed -i "s#$work#/tmp/capture#g; s#$url#http://127.0.0.1:PORT#g" "$out/$name.stdout" "$out/$name.stderr"
  echo "captured $name (exit $(cat "$out/$name.code"))" >&2
}

claude_args=(--print --input-format text --output-format stream-json --verbose
  --json-schema '{"type":"object"}' --dangerously-skip-permissions)
claude_env=(CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 IS_SANDBOX=1 CLAUDE_CODE_MAX_RETRIES=0)
codex_common=(-c web_search="disabled" -c analytics.enabled=false -c features.plugins=false
  -c sandbox_mode="workspace-write" -c approval_policy="never")
gateway() {
  echo -c model_provider=\"gateway\" -c model_providers.gateway.name=\"Gateway\" \
    -c model_providers.gateway.base_url=\"$url/v1\" -c model_providers.gateway.env_key=\"GATEWAY_API_KEY\" \
    -c model_providers.gateway.wire_api=\"responses\" -c model_providers.gateway.requires_openai_auth=false \
    -c model_providers.gateway.request_max_retries=0 -c model_providers.gateway.stream_max_retries=0
}
copilot_args=(--output-format json --no-auto-update --no-ask-user --disable-builtin-mcps --allow-all)

# Claude Code: no key and no login (no server needed), a wrong key, an unknown model, 429.
serve "$(errors '{"status":404,"error_type":"not_found_error","message":"model: claude-nope-1"}')"
capture claude-not-signed-in env "${claude_env[@]}" "$prefix/bin/claude" "${claude_args[@]}"
capture claude-invalid-key env "${claude_env[@]}" ANTHROPIC_BASE_URL="$url" ANTHROPIC_API_KEY="$bad_key" \
  "$prefix/bin/claude" "${claude_args[@]}"
capture claude-unknown-model env "${claude_env[@]}" ANTHROPIC_BASE_URL="$url" ANTHROPIC_API_KEY="$good_key" \
  "$prefix/bin/claude" "${claude_args[@]}" --model claude-nope-1
serve "$(errors '{"status":429,"message":"Number of request tokens has exceeded your per-minute rate limit"}')"
capture claude-rate-limit env "${claude_env[@]}" ANTHROPIC_BASE_URL="$url" ANTHROPIC_API_KEY="$good_key" \
  "$prefix/bin/claude" "${claude_args[@]}"

# Codex: the built-in OpenAI provider with no credentials (what a user who never ran
# `codex login` gets), a wrong gateway key, an unknown model, 429.
serve "$(errors '{"status":404,"error_type":"model_not_found","message":"The model `gpt-nope-1` does not exist or you do not have access to it."}')"
# shellcheck disable=SC2046
capture codex-not-signed-in "$prefix/bin/codex" exec "${codex_common[@]}" -c openai_base_url=\"$url/v1\" \
  --json --skip-git-repo-check -
# shellcheck disable=SC2046
capture codex-invalid-key env GATEWAY_API_KEY="$bad_key" "$prefix/bin/codex" exec $(gateway) "${codex_common[@]}" \
  --json --model gpt-5.5 --skip-git-repo-check -
# shellcheck disable=SC2046
capture codex-unknown-model env GATEWAY_API_KEY="$good_key" "$prefix/bin/codex" exec $(gateway) "${codex_common[@]}" \
  --json --model gpt-nope-1 --skip-git-repo-check -
serve "$(errors '{"status":429,"message":"Rate limit reached for requests. Please try again later."}')"
# shellcheck disable=SC2046
capture codex-rate-limit env GATEWAY_API_KEY="$good_key" "$prefix/bin/codex" exec $(gateway) "${codex_common[@]}" \
  --json --model gpt-5.5 --skip-git-repo-check -

# Copilot (bring-your-own-key against the server): a wrong key, an unknown model, 429; and
# the GitHub lane with no token and no login.
# The provider variables name the server of the moment: set them after each `serve`.
copilot_gateway() {
  copilot_env=(COPILOT_OFFLINE=true COPILOT_PROVIDER_BASE_URL="$url/v1" COPILOT_PROVIDER_TYPE=openai
    COPILOT_PROVIDER_WIRE_API=responses)
}
serve "$(errors '{"status":404,"error_type":"model_not_found","message":"The model `gpt-nope-1` does not exist or you do not have access to it."}')"
copilot_gateway
capture copilot-not-signed-in "$prefix/bin/copilot" "${copilot_args[@]}"
capture copilot-invalid-key env "${copilot_env[@]}" COPILOT_PROVIDER_API_KEY="$bad_key" \
  "$prefix/bin/copilot" "${copilot_args[@]}" --model gpt-5.5
capture copilot-unknown-model env "${copilot_env[@]}" COPILOT_PROVIDER_API_KEY="$good_key" \
  "$prefix/bin/copilot" "${copilot_args[@]}" --model gpt-nope-1
serve "$(errors '{"status":429,"message":"Rate limit reached for requests. Please try again later."}')"
copilot_gateway
capture copilot-rate-limit env "${copilot_env[@]}" COPILOT_PROVIDER_API_KEY="$good_key" \
  "$prefix/bin/copilot" "${copilot_args[@]}" --model gpt-5.5

# `claude auth status` signed out (what preflight asks).
capture claude-auth-status-signed-out "$prefix/bin/claude" auth status --json
