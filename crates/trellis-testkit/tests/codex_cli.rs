//! End-to-end tests of the real `codex exec --json` CLI against the scripted server.

use std::time::Duration;

use serde_json::{Value, json};
use trellis_testkit::cli::{AgentClis, CliRun, CodexCommand, run_cli};
use trellis_testkit::{Api, Block, Conversation, ModelServer, Outcome, Script, Turn, Usage};

/// Generous per-run deadline; a healthy run takes well under two seconds.
const RUN_TIMEOUT: Duration = Duration::from_secs(25);

/// A strict-dialect schema (every property required, closed objects), as Codex needs.
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

async fn run_codex(command: &CodexCommand, prompt: &str) -> CliRun {
    let run = run_cli(command.command().unwrap(), prompt, RUN_TIMEOUT)
        .await
        .unwrap();
    assert!(run.succeeded(), "codex failed\n{}", run.describe());
    run
}

fn thread_of(run: &CliRun) -> String {
    let started = run.events_of_type("thread.started");
    assert_eq!(started.len(), 1, "{}", run.describe());
    started[0]["thread_id"].as_str().unwrap().to_owned()
}

/// The text of the last completed `agent_message` item: the turn's answer.
fn final_answer(run: &CliRun) -> String {
    run.events_of_type("item.completed")
        .into_iter()
        .rfind(|e| e["item"]["type"] == "agent_message")
        .and_then(|e| e["item"]["text"].as_str().map(str::to_owned))
        .unwrap_or_else(|| panic!("no agent_message\n{}", run.describe()))
}

fn turn_usage(run: &CliRun) -> Value {
    let completed = run.events_of_type("turn.completed");
    assert_eq!(completed.len(), 1, "{}", run.describe());
    assert!(run.events_of_type("turn.failed").is_empty());
    completed[0]["usage"].clone()
}

#[tokio::test]
async fn codex_writes_a_file_answers_with_json_and_resumes_for_a_correction() {
    let Some(clis) = AgentClis::for_tests("codex_writes_a_file") else {
        return;
    };
    let malformed = "{\"response\": {\"summary\": \"wrote notes/hello.txt\"";
    let corrected = json!({"response": {"summary": "wrote notes/hello.txt", "files": 2}});
    let script = Script::new(vec![
        Conversation::new("writer")
            .on_api(Api::Openai)
            .matching("NODE=writer")
            .turn(
                Turn::reply(vec![
                    Block::write_file("notes/hello.txt", "hello\nfrom codex\n"),
                    Block::shell("printf second > notes/second.txt"),
                ])
                .with_usage(Usage {
                    cache_read_tokens: 40,
                    ..Usage::new(100, 20)
                }),
            )
            .turn(
                Turn::reply(vec![Block::text(malformed)])
                    .expecting("Success. Updated the following files")
                    .with_usage(Usage {
                        reasoning_tokens: 3,
                        ..Usage::new(200, 30)
                    }),
            )
            .turn(
                Turn::reply(vec![Block::structured(corrected.clone())])
                    .expecting("was rejected")
                    .with_usage(Usage::new(1000, 7)),
            ),
    ]);
    let server = ModelServer::start(script).await.unwrap();
    let workspace = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let schema_file = home.path().join("response-schema.json");
    std::fs::write(&schema_file, reply_schema().to_string()).unwrap();
    let mut codex = CodexCommand::new(
        &clis,
        &server.openai_base_url(),
        workspace.path(),
        home.path(),
    );
    codex.output_schema = Some(schema_file);

    let run = run_codex(&codex, "NODE=writer\nWrite notes/hello.txt, then reply.\n").await;
    let notes = workspace.path().join("notes");
    assert_eq!(
        std::fs::read_to_string(notes.join("hello.txt")).unwrap(),
        "hello\nfrom codex\n"
    );
    assert_eq!(
        std::fs::read_to_string(notes.join("second.txt")).unwrap(),
        "second"
    );
    assert_eq!(final_answer(&run), malformed);
    let usage = turn_usage(&run);
    assert_eq!(usage["input_tokens"], 300);
    assert_eq!(usage["cached_input_tokens"], 40);
    assert_eq!(usage["output_tokens"], 50);
    assert_eq!(usage["reasoning_output_tokens"], 3);
    let thread = thread_of(&run);
    let items: Vec<String> = run
        .events_of_type("item.completed")
        .iter()
        .map(|e| e["item"]["type"].as_str().unwrap_or_default().to_owned())
        .collect();
    assert_eq!(
        items,
        ["file_change", "command_execution", "agent_message"],
        "{}",
        run.describe()
    );

    let requests = server.model_requests();
    assert_eq!(requests.len(), 2, "{requests:#?}");
    let opening = &requests[0];
    assert_eq!(opening.path, "/v1/responses");
    assert_eq!(
        opening.headers.get("authorization").map(String::as_str),
        Some(format!("Bearer {}", codex.api_key).as_str())
    );
    assert_eq!(opening.session.as_deref(), Some(thread.as_str()));
    assert_eq!(opening.model.as_deref(), Some(codex.model.as_str()));
    assert!(opening.latest_input.contains("Write notes/hello.txt"));
    assert!(opening.offers_tool("apply_patch") && opening.offers_tool("exec_command"));
    assert_eq!(opening.reply_schema, Some(reply_schema()));
    assert_eq!(opening.workdir.as_deref(), workspace.path().to_str());
    assert!(
        requests[1]
            .latest_input
            .contains("Success. Updated the following files")
    );
    assert!(
        requests[1]
            .latest_input
            .contains("Process exited with code 0")
    );

    // Correction turn on the same thread.
    codex.resume = Some(thread.clone());
    let resumed = run_codex(
        &codex,
        "Your previous reply was rejected: it is not valid JSON. Return corrected JSON.\n",
    )
    .await;
    assert_eq!(thread_of(&resumed), thread, "resume keeps the thread id");
    let answer: Value = serde_json::from_str(&final_answer(&resumed)).unwrap();
    assert_eq!(answer, corrected);
    // turn.completed usage after a resume is the thread's running total, not this turn's.
    let usage = turn_usage(&resumed);
    assert_eq!(usage["input_tokens"], 1300);
    assert_eq!(usage["output_tokens"], 57);
    let last = server.model_requests().pop().unwrap();
    assert_eq!(last.session.as_deref(), Some(thread.as_str()));
    assert!(
        last.user_text.contains("NODE=writer"),
        "history is resent on resume"
    );
    assert!(last.latest_input.contains("was rejected"));
    assert_eq!(last.reply_schema, Some(reply_schema()));
    assert!(server.script_finished(), "{:?}", server.remaining_turns());
    assert!(server.refused().is_empty());
}

#[tokio::test]
async fn codex_runs_two_nodes_concurrently_on_one_server() {
    let Some(clis) = AgentClis::for_tests("codex_runs_two_nodes") else {
        return;
    };
    let mut conversations = Vec::new();
    for node in ["left", "right"] {
        conversations.push(
            Conversation::new(node)
                .matching(format!("NODE={node}"))
                .turn(
                    Turn::reply(vec![Block::write_file(format!("{node}.txt"), node)])
                        .with_delay_ms(50),
                )
                .turn(
                    Turn::reply(vec![Block::structured(json!({"node": node}))])
                        .with_usage(Usage::new(1, 1)),
                ),
        );
    }
    let server = ModelServer::start(Script::new(conversations))
        .await
        .unwrap();
    let workspace = tempfile::tempdir().unwrap();
    let mut runs = Vec::new();
    let mut homes = Vec::new();
    for node in ["right", "left"] {
        let home = tempfile::tempdir().unwrap();
        let codex = CodexCommand::new(
            &clis,
            &server.openai_base_url(),
            workspace.path(),
            home.path(),
        );
        homes.push(home);
        runs.push(tokio::spawn(async move {
            let run = run_codex(&codex, &format!("NODE={node}\n")).await;
            (node, final_answer(&run), run.describe())
        }));
    }
    for run in runs {
        let (node, answer, described) = run.await.unwrap();
        assert_eq!(
            serde_json::from_str::<Value>(&answer).unwrap(),
            json!({"node": node})
        );
        // On a miss, show Codex's events and what it told the model the patch did.
        let written = std::fs::read_to_string(workspace.path().join(format!("{node}.txt")))
            .unwrap_or_else(|error| {
                panic!(
                    "{node}.txt: {error}\n{described}\npatch results: {:?}",
                    server.requests_for(node)
                )
            });
        assert_eq!(
            written,
            format!("{node}\n"),
            "apply_patch stores whole lines"
        );
    }
    assert_eq!(server.requests_for("left").len(), 2);
    assert_eq!(server.requests_for("right").len(), 2);
    assert!(
        server
            .model_requests()
            .iter()
            .all(|r| r.outcome == Outcome::Replied)
    );
}
