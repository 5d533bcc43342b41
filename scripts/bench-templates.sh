#!/usr/bin/env bash
# Wall time of each template's accept path with instant fake agents: the offline example
# workers with their demo pauses removed, the fake GitHub (trellis-fake-github) and a local bare
# repository as the remote. Usage: scripts/bench-templates.sh [TARGET_DIR] [ROUNDS]
# (default target/debug, 3 rounds). Prints one line per template: name, median seconds.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
bin="$(cd "${1:-$root/target/debug}" && pwd)"
rounds="${2:-3}"
work_root="$(mktemp -d)"
trap 'kill "${fake_pid:-0}" 2>/dev/null || true; rm -rf "$work_root"' EXIT
export GH_TOKEN="ghp_bench_token_$$"
export TRELLIS_HOME="$work_root/home"
export TRELLIS_DELIVERY_POLL_MS=50
export GITHUB_SERVER_URL=https://github.com
origin="$work_root/origin.git"
work="$work_root/work"
remote=https://github.com/acme/widgets.git
git init -q --bare "$origin"
mkdir -p "$work/offline"
for file in worker.py review.py plan.json review_worker.py review_plan.json research_worker.py research_plan.json; do
  sed '/time.sleep/d' "$root/examples/offline/$file" > "$work/offline/$file"
done
cd "$work"
git init -q -b main
git config user.name bench && git config user.email bench@example.invalid
printf 'offline/\n' > .gitignore
git add . && git commit -q -m init
git remote add origin "$remote"
git config "url.$origin.insteadOf" "$remote"
git push -q origin main
base="$(git rev-parse HEAD)"
cat > "$work_root/seed.json" <<JSON
[
  {"action": "addRepository", "repository": "acme/widgets", "gitDir": "$origin"},
  {"action": "setBranch", "repository": "acme/widgets", "branch": "feature", "sha": "$base"},
  {"action": "addIssue", "repository": "acme/widgets", "title": "Greeting", "body": "Say hello."},
  {"action": "addPull", "repository": "acme/widgets", "title": "Greeting", "body": "Fixes #1",
   "head": "feature", "base": "main"}
]
JSON
"$bin/trellis-fake-github" --token-env GH_TOKEN --seed "$work_root/seed.json" > "$work_root/fake.out" &
fake_pid=$!
for _ in $(seq 100); do grep -q GITHUB_API_URL "$work_root/fake.out" 2>/dev/null && break; sleep 0.05; done
export "$(grep GITHUB_API_URL "$work_root/fake.out")"

reset() { git reset -q --hard "$base"; git clean -qfd -e offline; }
measure() {
  local name="$1"; shift
  local times=()
  for _ in $(seq "$rounds"); do
    reset
    local start end
    start=$(date +%s.%N)
    "$bin/trellis" run "$@" --json > "$work_root/last.out" 2> "$work_root/last.err" || {
      echo "$name failed:"; cat "$work_root/last.err"; tail -1 "$work_root/last.out"; exit 1; }
    end=$(date +%s.%N)
    times+=("$(echo "$end - $start" | bc)")
  done
  printf '%-28s %s s (median of %s: %s)\n' "$name" \
    "$(printf '%s\n' "${times[@]}" | sort -n | sed -n "$(( (rounds + 1) / 2 ))p")" "$rounds" "${times[*]}"
}
task="Write a friendly greeting to greeting.txt"
measure "software-change (local)" --template software-change --task "$task" --runtime-config offline/plan.json
measure "software-change --push" --template software-change --push --task "$task" --runtime-config offline/plan.json
measure "software-change --pr" --template software-change --pr --task "$task" --runtime-config offline/plan.json
measure "software-change --ship" --template software-change --ship --task "$task" --runtime-config offline/plan.json
measure "issue-review --task-from" --template issue-review --task-from https://github.com/acme/widgets/issues/1 --uniform-runtime-config offline/review_plan.json
measure "pr-review --task-from" --template pr-review --task-from https://github.com/acme/widgets/pull/2 --uniform-runtime-config offline/review_plan.json
printf '{"task": "Does caching help?", "options": {"iterations": 2}}' > "$work_root/research.json"
measure "auto-research (2 iterations)" --template auto-research --input "$work_root/research.json" --uniform-runtime-config offline/research_plan.json
measure "auto-research --push" --template auto-research --push --input "$work_root/research.json" --uniform-runtime-config offline/research_plan.json
printf '{"kind": "command", "command": ["python3", "offline/worker.py"]}' > "$work_root/single.json"
measure "single-worker" --template single-worker --task "$task" --uniform-runtime-config "$work_root/single.json"
