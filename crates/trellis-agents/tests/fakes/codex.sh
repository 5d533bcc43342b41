# Fake Codex: `codex exec --json` events; usage is the running total of the thread.
thread="thread-$n"
prev=""; last=""; before_last=""
for arg in "$@"; do
  if [ "$prev" = "--output-schema" ]; then cp "$arg" "$STATE/schema.$n" || exit 9; fi
  prev=$arg; before_last=$last; last=$arg
done
[ "$2" = "resume" ] && thread=$before_last
total=$(( $(cat "$STATE/total.$thread" 2>/dev/null || echo 0) + 1 ))
echo "$total" > "$STATE/total.$thread"
usage='{"input_tokens":'$((total * 100))',"cached_input_tokens":'$((total * 20))',"cache_write_input_tokens":0,"output_tokens":'$((total * 10))',"reasoning_output_tokens":0}'
emit '{"type":"thread.started","thread_id":"'"$thread"'"}'
emit '{"type":"turn.started"}'
emit '{"type":"item.completed","item":{"id":"item_0","type":"command_execution","command":"/bin/bash -lc ls","aggregated_output":"","exit_code":0,"status":"completed"}}'
message() { emit '{"type":"item.completed","item":{"id":"item_1","type":"agent_message","text":"'"$1"'"}}'; }
finish() { emit '{"type":"turn.completed","usage":'"$usage"'}'; }
case "$mode" in
  reply) message "$reply_text"; finish ;;
  bad) message 'not json at all'; finish ;;
  refuse) message '{\"response\":null,\"refusal\":\"no access to the repository\"}'; finish ;;
  fail)
    emit '{"type":"error","message":"unexpected status 400 (scripted)"}'
    emit '{"type":"turn.failed","error":{"message":"unexpected status 400 (scripted)"}}'
    exit 1 ;;
  crash) kill -9 $$ ;;
  hang) exec sleep 30 ;;
  echoenv)
    echo "stderr sees key $GATEWAY_API_KEY and canary $CANARY_TOKEN" >&2
    message "I can see $GATEWAY_API_KEY and $CANARY_TOKEN"
    message "$reply_text"; finish ;;
esac
