# Shared prologue of the fake agent CLIs. The test prepends `STATE=<dir>`; this records the
# invocation (argv, stdin, environment) as turn N and picks line N of $STATE/turns as the mode.
n=$(( $(cat "$STATE/count" 2>/dev/null || echo 0) + 1 ))
echo "$n" > "$STATE/count"
: > "$STATE/argv.$n"
for arg in "$@"; do printf '%s\n' "$arg" >> "$STATE/argv.$n"; done
cat > "$STATE/stdin.$n"
env | sort > "$STATE/env.$n"
pwd > "$STATE/cwd.$n"
mode=$(sed -n "${n}p" "$STATE/turns" 2>/dev/null)
[ -n "$mode" ] || mode=reply
reply_file="$STATE/reply"
[ -f "$STATE/reply.$n" ] && reply_file="$STATE/reply.$n"
reply=$(cat "$reply_file" 2>/dev/null)
# The reply as the body of a JSON string, for CLIs that print the answer as text.
reply_text=$(printf '%s' "$reply" | sed 's/\\/\\\\/g; s/"/\\"/g')
emit() { printf '%s\n' "$1"; }
case "$mode" in
  # A transcript a real CLI printed (scripts/capture-cli-failures.sh), replayed byte for byte.
  replay:*)
    r=${mode#replay:}
    cat "$r.stdout"; cat "$r.stderr" >&2; exit "$(cat "$r.code")" ;;
  silent) exec sleep 30 ;;
  exit3) echo "fatal: cannot start (scripted)" >&2; exit 3 ;;
esac
