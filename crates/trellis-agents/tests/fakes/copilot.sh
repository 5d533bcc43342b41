# Fake GitHub Copilot CLI (prompt mode, `--output-format json`); usage goes to the
# --usage-output-file as the running total of the session.
session="copilot-sess-$n"
usage_file=""
prev=""
for arg in "$@"; do
  case "$arg" in --resume=*) session=${arg#--resume=} ;; esac
  [ "$prev" = "--usage-output-file" ] && usage_file=$arg
  prev=$arg
done
total=$(( $(cat "$STATE/total.$session" 2>/dev/null || echo 0) + 1 ))
echo "$total" > "$STATE/total.$session"
emit '{"type":"user.message","data":{"content":"(prompt)"},"id":"u'"$n"'"}'
emit '{"type":"assistant.message_delta","data":{"deltaContent":"x"},"ephemeral":true}'
message() { emit '{"type":"assistant.message","data":{"content":"'"$1"'","toolRequests":[]}}'; }
finish() {
  if [ -n "$usage_file" ]; then
    printf '{"modelMetrics":{"fake":{"requests":{"count":%d,"cost":0},"usage":{"inputTokens":%d,"outputTokens":%d,"cacheReadTokens":0,"cacheWriteTokens":0}}}}\n' \
      "$total" $((total * 100)) $((total * 10)) > "$usage_file"
  fi
  emit '{"type":"result","sessionId":"'"$session"'","exitCode":'"$1"',"usage":{"premiumRequests":0}}'
}
emit '{"type":"assistant.message","data":{"content":"","toolRequests":[{"toolCallId":"c1","name":"bash","arguments":{"command":"ls"}}]}}'
case "$mode" in
  reply) message "$reply_text"; finish 0 ;;
  bad) message 'not json at all'; finish 0 ;;
  refuse) message '{\"response\":null,\"refusal\":\"no access to the repository\"}'; finish 0 ;;
  fail)
    emit '{"type":"session.error","data":{"errorType":"query","message":"400 bad things (scripted)","statusCode":400}}'
    finish 1; exit 1 ;;
  crash) kill -9 $$ ;;
  hang) exec sleep 30 ;;
  echoenv)
    echo "stderr sees key $COPILOT_PROVIDER_API_KEY and canary $CANARY_TOKEN" >&2
    message "I can see $COPILOT_PROVIDER_API_KEY and $CANARY_TOKEN"
    message "$reply_text"; finish 0 ;;
esac
