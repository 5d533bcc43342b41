# Fake Claude Code: `--print --output-format stream-json` events.
session="sess-$n"
prev=""
for arg in "$@"; do
  [ "$prev" = "--resume" ] && session=$arg
  prev=$arg
done
emit '{"type":"system","subtype":"init","session_id":"'"$session"'","model":"fake-claude","cwd":"'"$PWD"'","tools":["Bash","Write"]}'
emit '{"type":"assistant","message":{"id":"msg_'"$n"'","role":"assistant","content":[{"type":"text","text":"Working on turn '"$n"'."}]},"session_id":"'"$session"'"}'
emit '{"type":"assistant","message":{"id":"msg_'"$n"'","role":"assistant","content":[{"type":"tool_use","id":"t1","name":"Write","input":{"file_path":"out.txt","content":"x"}}]},"session_id":"'"$session"'"}'
usage='"usage":{"input_tokens":100,"output_tokens":20,"cache_read_input_tokens":5,"cache_creation_input_tokens":3},"total_cost_usd":0.25'
result() {
  emit '{"type":"result","subtype":"success","is_error":'"$1"',"num_turns":2,"result":'"$2"',"structured_output":'"$3"',"session_id":"'"$session"'",'"$usage"'}'
}
case "$mode" in
  reply) result false '""' "$reply" ;;
  text) result false "\"$reply_text\"" null ;;
  bad) result false '"{\"response\":{\"wrong\":true}}"' '{"response":{"wrong":true}}' ;;
  refuse) result false '""' '{"refusal":"no access to the repository"}' ;;
  fail) result true '"API Error: 529 overloaded (scripted)"' null; exit 1 ;;
  flood)
    # Ten ~900 KiB events (more than 8 MiB in all), one 2 MiB event, then the reply.
    big=$(head -c 921600 /dev/zero | tr '\0' 'a')
    for i in 1 2 3 4 5 6 7 8 9 10; do
      emit '{"type":"assistant","message":{"content":[{"type":"text","text":"'"$big"'"}]},"session_id":"'"$session"'"}'
    done
    huge=$(head -c 2097152 /dev/zero | tr '\0' 'b')
    emit '{"type":"user","message":{"content":[{"type":"tool_result","content":"'"$huge"'"}]},"session_id":"'"$session"'"}'
    result false '""' "$reply" ;;
  lost)
    emit '{"type":"result","subtype":"error_during_execution","is_error":true,"num_turns":0,"errors":["No conversation found with session ID: '"$session"'"],"session_id":"'"$session"'"}'
    exit 1 ;;
  crash) kill -9 $$ ;;
  hang) exec sleep 30 ;;
  echoenv)
    echo "stderr sees key $ANTHROPIC_API_KEY and canary $CANARY_TOKEN" >&2
    emit '{"type":"assistant","message":{"content":[{"type":"text","text":"I can see '"$ANTHROPIC_API_KEY"' and '"$CANARY_TOKEN"'"}]},"session_id":"'"$session"'"}'
    result false '""' "$reply" ;;
esac
