//! Trellis overhead per agent node: one execution of each adapter against a fake CLI that
//! prints a canned transcript with shell builtins only, next to the bare cost of spawning and
//! reading that same fake. The difference is the time Trellis spends outside the agent.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use trellis_agents::prompt::{PromptInput, render_prompt};
use trellis_agents::reply::{RawReply, ReplyVerdict, judge_reply};
use trellis_agents::schema::{SchemaDialect, reply_schema};
use trellis_agents::{
    AgentBinding, AgentHarness, AgentLane, AgentOptions, Binding, ExecutionRequest, Harness,
    HarnessKind, NodeContract, Provider, SecretEnv,
};
use trellis_graph::{JsonPath, NodeName, PayloadType, WorkerOutcome};

/// The events each fake prints; builtins only, so the fake itself costs one shell start.
fn transcript(kind: HarnessKind) -> &'static str {
    match kind {
        HarnessKind::Claude => {
            r#"printf '%s\n' '{"type":"system","subtype":"init","session_id":"s1","model":"m"}' \
  '{"type":"assistant","message":{"content":[{"type":"text","text":"Done."}]},"session_id":"s1"}' \
  '{"type":"result","subtype":"success","is_error":false,"num_turns":1,"result":"","structured_output":{"response":{"count":3}},"session_id":"s1","usage":{"input_tokens":100,"output_tokens":20}}'"#
        }
        HarnessKind::Codex => {
            r#"printf '%s\n' '{"type":"thread.started","thread_id":"t1"}' '{"type":"turn.started"}' \
  '{"type":"item.completed","item":{"type":"agent_message","text":"{\"response\":{\"count\":3,\"note\":null},\"refusal\":null}"}}' \
  '{"type":"turn.completed","usage":{"input_tokens":100,"cached_input_tokens":0,"output_tokens":20}}'"#
        }
        // Copilot runs over a headless JSON-RPC connection, which a one-line shell fake
        // cannot speak; it is measured against the real CLI only (real_clis.rs).
        HarnessKind::Copilot => unreachable!("no shell fake for copilot"),
        HarnessKind::Pi => {
            r#"printf '%s\n' '{"type":"session","version":3,"id":"p1","cwd":"/w"}' \
  '{"type":"message_end","message":{"role":"assistant","content":[{"type":"text","text":"{\"response\":{\"count\":3}}"}],"usage":{"input":100,"output":20,"cacheRead":0,"cacheWrite":0},"stopReason":"stop"}}' \
  '{"type":"agent_end","messages":[]}'"#
        }
    }
}

fn install_fake(dir: &Path, kind: HarnessKind) {
    let program = dir.join("bin").join(kind.as_str());
    std::fs::create_dir_all(dir.join("bin")).unwrap();
    std::fs::write(&program, format!("#!/bin/sh\n{}\n", transcript(kind))).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o755)).unwrap();
}

fn request(dir: &Path) -> ExecutionRequest {
    let output = PayloadType::parse(
        &json!({"kind": "record", "fields": {
            "count": {"type": {"kind": "integer"}, "required": true},
            "note": {"type": {"kind": "string"}, "required": false}
        }}),
        &JsonPath::root(),
    )
    .unwrap();
    ExecutionRequest {
        run_id: "bench".into(),
        node: NodeName::new("code").unwrap(),
        execution: 1,
        node_instance: 1,
        attempt: 1,
        input: json!({"task": "count the files", "paths": ["src", "tests", "docs"]}),
        instructions: Some("Count the files in the given directories.".into()),
        contract: NodeContract {
            output,
            verifier: None,
        },
        binding: Binding::Agent(AgentBinding {
            model: "m".into(),
            effort: None,
            session_scope: Default::default(),
            connections: BTreeMap::from([(
                "gateway".to_owned(),
                vec!["GATEWAY_BASE_URL".to_owned(), "GATEWAY_API_KEY".to_owned()],
            )]),
            idle_timeout_ms: None,
            lane: None,
        }),
        workspace: dir.join("ws"),
        scratch: dir.join("scratch"),
        deadline: Some(Duration::from_secs(30)),
        idle_timeout: Some(Duration::from_secs(30)),
        environment: SecretEnv::new(BTreeMap::from([
            (
                "GATEWAY_BASE_URL".to_owned(),
                "http://127.0.0.1:9/v1".to_owned(),
            ),
            ("GATEWAY_API_KEY".to_owned(), "bench-key-value".to_owned()),
        ])),
        base_env: vec![(
            "PATH".into(),
            format!("{}:/usr/bin:/bin", dir.join("bin").display()),
        )],
    }
}

/// The fake alone: spawn with a cleared environment, write the prompt, read stdout, wait.
async fn fake_alone(program: &Path, cwd: &Path, prompt: &[u8]) {
    let mut child = tokio::process::Command::new(program)
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .current_dir(cwd)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let _ = stdin.write_all(prompt).await;
    drop(stdin);
    let mut out = Vec::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_end(&mut out)
        .await
        .unwrap();
    assert!(child.wait().await.unwrap().success());
    assert!(!out.is_empty());
}

fn agent_node(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let mut group = c.benchmark_group("agent_node");
    group
        .sample_size(50)
        .measurement_time(Duration::from_secs(8));
    for kind in HarnessKind::ALL
        .into_iter()
        .filter(|kind| *kind != HarnessKind::Copilot)
    {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("ws")).unwrap();
        install_fake(dir.path(), kind);
        let harness = AgentHarness::new(
            AgentLane::new(kind, Provider::Gateway).unwrap(),
            AgentOptions::default(),
        );
        let template = request(dir.path());
        group.bench_function(BenchmarkId::new("harness", kind.as_str()), |b| {
            b.iter(|| {
                runtime.block_on(async {
                    let (tx, mut rx) = mpsc::channel(1024);
                    let result = harness
                        .execute(template.clone(), tx, CancellationToken::new())
                        .await;
                    assert!(
                        matches!(result.outcome, WorkerOutcome::Verified { .. }),
                        "{:?}",
                        result.outcome
                    );
                    while rx.try_recv().is_ok() {}
                })
            })
        });
        let program = dir.path().join("bin").join(kind.as_str());
        let prompt = vec![b'x'; 2048];
        group.bench_function(BenchmarkId::new("fake_alone", kind.as_str()), |b| {
            b.iter(|| runtime.block_on(fake_alone(&program, &dir.path().join("ws"), &prompt)))
        });
    }
    group.finish();
}

/// The CPU-only part of a node: prompt, reply schema, and judging the reply.
fn reply_pipeline(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let request = request(dir.path());
    let reply = json!({"response": {"count": 3, "note": null}, "refusal": null});
    c.bench_function("reply_pipeline/prompt_schema_judge", |b| {
        b.iter(|| {
            let prompt = render_prompt(&PromptInput {
                node: request.node.as_str(),
                workspace: &request.workspace,
                instructions: request.instructions.as_deref(),
                input: &request.input,
                contract: &request.contract,
            });
            let schema = reply_schema(&request.contract, SchemaDialect::OpenAiStrict);
            let verdict = judge_reply(
                &request.contract,
                SchemaDialect::OpenAiStrict,
                RawReply::Json(reply.clone()),
            );
            assert!(matches!(verdict, ReplyVerdict::Accepted(_)));
            (prompt.len(), schema.is_object())
        })
    });
}

criterion_group!(benches, agent_node, reply_pipeline);
criterion_main!(benches);
