//! End-to-end tests of the real `claude` CLI (print mode, stream-json) against the scripted server.

use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};
use trellis_testkit::cli::{AgentClis, ClaudeCommand, CliRun, run_cli};
use trellis_testkit::{Api, Block, Conversation, Hang, ModelServer, Outcome, Script, Turn, Usage};

/// Generous per-run deadline; a healthy run takes well under two seconds.
const RUN_TIMEOUT: Duration = Duration::from_secs(25);

fn reply_schema() -> Value {
    json!({
        "type": "object",
        "properties": {"response": {
            "type": "object",
            "properties": {"summary": {"type": "string"}, "files": {"type": "integer"}},
            "required": ["summary", "files"],
            "additionalProperties": false
        }},
        "required": ["response"],
        "additionalProperties": false
    })
}

async fn run_claude(command: &ClaudeCommand, prompt: &str) -> CliRun {
    let run = run_cli(command.command().unwrap(), prompt, RUN_TIMEOUT)
        .await
        .unwrap();
    assert!(run.succeeded(), "claude failed\n{}", run.describe());
    run
}

fn only(run: &CliRun, kind: &str) -> Value {
    let events = run.events_of_type(kind);
    assert_eq!(
        events.len(),
        1,
        "expected one {kind} event\n{}",
        run.describe()
    );
    events.into_iter().next().unwrap()
}

fn session_of(run: &CliRun) -> String {
    let init = run
        .events_of_type("system")
        .into_iter()
        .find(|e| e["subtype"] == "init")
        .expect("system/init event");
    init["session_id"].as_str().unwrap().to_owned()
}

#[tokio::test]
async fn claude_writes_a_file_returns_structured_output_and_accepts_a_correction() {
    let Some(clis) = AgentClis::for_tests("claude_writes_a_file") else {
        return;
    };
    let first = json!({"response": {"summary": "wrote notes/hello.txt", "files": 0}});
    let corrected = json!({"response": {"summary": "wrote notes/hello.txt", "files": 1}});
    let script = Script::new(vec![
        Conversation::new("writer")
            .on_api(Api::Anthropic)
            .matching("NODE=writer")
            .turn(
                Turn::reply(vec![
                    Block::text("Writing the file."),
                    Block::write_file("notes/hello.txt", "hello from {{workdir}}\n"),
                ])
                .with_usage(Usage {
                    cache_read_tokens: 7,
                    ..Usage::new(100, 20)
                }),
            )
            .turn(
                Turn::reply(vec![Block::structured(first.clone())])
                    .expecting("File created successfully")
                    .with_usage(Usage::new(200, 30)),
            )
            .turn(
                Turn::reply(vec![Block::structured(corrected.clone())])
                    .expecting("was rejected")
                    .with_usage(Usage::new(400, 40)),
            ),
    ]);
    let server = ModelServer::start(script).await.unwrap();
    let workspace = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let mut claude = ClaudeCommand::new(&clis, &server.url(), workspace.path(), home.path());
    claude.json_schema = Some(reply_schema());

    let run = run_claude(&claude, "NODE=writer\nWrite notes/hello.txt, then reply.\n").await;
    let written = std::fs::read_to_string(workspace.path().join("notes/hello.txt")).unwrap();
    assert_eq!(
        written,
        format!("hello from {}\n", workspace.path().display())
    );
    let session = session_of(&run);
    let result = only(&run, "result");
    assert_eq!(result["subtype"], "success", "{result}");
    assert_eq!(result["is_error"], false);
    assert_eq!(result["structured_output"], first);
    assert_eq!(result["session_id"], session.as_str());
    assert_eq!(result["usage"]["input_tokens"], 300);
    assert_eq!(result["usage"]["output_tokens"], 50);
    assert_eq!(result["usage"]["cache_read_input_tokens"], 7);
    // With --include-partial-messages the raw stream deltas are echoed as stream_event lines.
    assert!(
        run.events_of_type("stream_event")
            .iter()
            .any(|e| e["event"]["delta"]["type"] == "input_json_delta")
    );

    let requests = server.model_requests();
    assert_eq!(requests.len(), 2, "{requests:#?}");
    let opening = &requests[0];
    assert!(opening.path.starts_with("/v1/messages"), "{}", opening.path);
    assert_eq!(
        opening.headers.get("x-api-key").map(String::as_str),
        Some(claude.api_key.as_str())
    );
    assert!(opening.headers.contains_key("anthropic-version"));
    assert_eq!(opening.session.as_deref(), Some(session.as_str()));
    assert_eq!(opening.model.as_deref(), Some(claude.model.as_str()));
    assert!(opening.latest_input.contains("Write notes/hello.txt"));
    assert!(opening.offers_tool("Write") && opening.offers_tool("StructuredOutput"));
    assert_eq!(opening.reply_schema, Some(reply_schema()));
    assert_eq!(opening.workdir.as_deref(), workspace.path().to_str());

    // Correction turn in the same session.
    claude.resume = Some(session.clone());
    let correction =
        "Your previous reply was rejected: response.files must be 1. Return corrected JSON.\n";
    let resumed = run_claude(&claude, correction).await;
    let result = only(&resumed, "result");
    assert_eq!(result["structured_output"], corrected);
    assert_eq!(
        session_of(&resumed),
        session,
        "--resume keeps the session id"
    );
    assert_eq!(
        result["usage"]["input_tokens"], 400,
        "usage covers this invocation only"
    );
    let last = server.model_requests().pop().unwrap();
    assert_eq!(last.session.as_deref(), Some(session.as_str()));
    assert!(
        last.user_text.contains("NODE=writer"),
        "history is resent on resume"
    );
    assert!(last.latest_input.contains("was rejected"));
    assert!(server.script_finished(), "{:?}", server.remaining_turns());
    assert!(server.refused().is_empty());
}

#[tokio::test]
async fn claude_enforces_the_structured_output_tool_after_a_text_reply() {
    let Some(clis) = AgentClis::for_tests("claude_enforces_structured_output") else {
        return;
    };
    let value = json!({"response": {"summary": "ok", "files": 0}});
    let script = Script::new(vec![
        Conversation::new("talker")
            .turn(
                Turn::reply(vec![Block::text("{\"summary\": \"ok\"")])
                    .with_usage(Usage::new(10, 5)),
            )
            .turn(
                Turn::reply(vec![Block::structured(
                    json!({"response": {"summary": "ok"}}),
                )])
                .expecting("StructuredOutput"),
            )
            .turn(Turn::reply(vec![Block::structured(value.clone())]).expecting("does not match")),
    ]);
    let server = ModelServer::start(script).await.unwrap();
    let workspace = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let mut claude = ClaudeCommand::new(&clis, &server.url(), workspace.path(), home.path());
    claude.json_schema = Some(reply_schema());
    let run = run_claude(&claude, "Reply.\n").await;
    assert_eq!(only(&run, "result")["structured_output"], value);
    let requests = server.model_requests();
    assert_eq!(requests.len(), 3);
    // The CLI itself nudged the model, then validated the tool input against the schema.
    assert!(
        requests[1]
            .latest_input
            .contains("[structured-output-enforce]"),
        "{}",
        requests[1].latest_input
    );
    assert!(
        requests[2]
            .latest_input
            .contains("Output does not match required schema")
    );
}

#[tokio::test]
async fn claude_hanging_model_is_cut_off_by_the_deadline() {
    let Some(clis) = AgentClis::for_tests("claude_hanging_model") else {
        return;
    };
    let script = Script::new(vec![
        Conversation::new("stuck").turn(Turn::hang(Hang::MidStream)),
    ]);
    let server = ModelServer::start(script).await.unwrap();
    let workspace = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let claude = ClaudeCommand::new(&clis, &server.url(), workspace.path(), home.path());
    let run = run_cli(
        claude.command().unwrap(),
        "Say hi.\n",
        // Long enough for the CLI to start and reach the model on a loaded machine (node's
        // start-up alone took over 3 s at load 15); the model then hangs until the deadline.
        Duration::from_secs(10),
    )
    .await
    .unwrap();
    assert!(run.timed_out, "{}", run.describe());
    assert!(run.elapsed < Duration::from_secs(20));
    assert!(run.events_of_type("result").is_empty());
    let requests = server.model_requests();
    assert_eq!(requests.len(), 1, "{}", run.describe());
    assert_eq!(requests[0].outcome, Outcome::Hung);
    assert_no_process_left(home.path());
}

/// No process may still run with this private home in its environment.
fn assert_no_process_left(home: &Path) {
    let needle = format!("HOME={}", home.display());
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        if let Ok(environ) = std::fs::read(entry.path().join("environ")) {
            let found = environ
                .split(|b| *b == 0)
                .any(|var| var == needle.as_bytes());
            assert!(!found, "process {:?} survived", entry.file_name());
        }
    }
}
