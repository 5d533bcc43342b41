//! The real `claude`, `codex`, `copilot` and `pi` CLIs driven through the adapters on the gateway
//! lane, against the scripted loopback model server: a step node that writes a file and
//! returns its output, and a verifier whose first reply is malformed and corrected.
//!
//! Skipped (with a note) when the pinned CLIs are not installed, except under `CI`.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use serde_json::{Value, json};
use tempfile::TempDir;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use trellis_agents::schema::{SchemaDialect, reply_schema};
use trellis_agents::{
    AgentBinding, AgentHarness, AgentLane, AgentOptions, Binding, ExecutionRequest,
    ExecutionResult, Harness, HarnessEvent, HarnessKind, LogStream, NodeContract, Provider,
    SecretEnv, TokenUsage,
};
use trellis_graph::{GraphNode, JsonPath, NodeName, PayloadType, WorkerOutcome};
use trellis_testkit::cli::{AgentClis, DEFAULT_CLAUDE_MODEL, DEFAULT_CODEX_MODEL};
use trellis_testkit::{Api, Block, Conversation, Hang, ModelServer, Script, Turn, Usage};

const KEY: &str = "trellis-real-cli-gateway-key";

/// The installed CLIs, with Copilot and pi checked too; `None` (after a note) to skip.
fn clis(test: &str, kind: HarnessKind) -> Option<AgentClis> {
    let clis = AgentClis::for_tests(test)?;
    let program = kind.program_name();
    if !clis.prefix.join("bin").join(program).is_file() {
        let why = format!("{program} not installed; run scripts/install-agent-clis.sh");
        if std::env::var_os("CI").is_some() {
            panic!("{test}: agent CLIs are required in CI: {why}");
        }
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), "{test}: skipped: {why}");
        return None;
    }
    Some(clis)
}

fn api(kind: HarnessKind) -> Api {
    match kind {
        HarnessKind::Claude => Api::Anthropic,
        _ => Api::Openai,
    }
}

fn dialect(kind: HarnessKind) -> SchemaDialect {
    match kind {
        HarnessKind::Claude | HarnessKind::Pi => SchemaDialect::Standard,
        _ => SchemaDialect::OpenAiStrict,
    }
}

fn model(kind: HarnessKind) -> &'static str {
    match kind {
        HarnessKind::Claude => DEFAULT_CLAUDE_MODEL,
        _ => DEFAULT_CODEX_MODEL,
    }
}

fn step_contract() -> NodeContract {
    NodeContract {
        output: PayloadType::parse(
            &json!({"kind": "record", "fields": {
                "count": {"type": {"kind": "integer"}, "required": true},
                "note": {"type": {"kind": "string"}, "required": false}
            }}),
            &JsonPath::root(),
        )
        .unwrap(),
        verifier: None,
    }
}

fn verifier_contract() -> NodeContract {
    let node = GraphNode::parse(
        &json!({"kind":"verifier","name":"review","worker":"w@1","input":{"kind":"null"},
            "output":{"kind":"boolean"},"inputBindings":[],"writeBindings":[],"attempts":1,
            "signals":{"verdict":["accepted","rejected"]},"diagnostic":{"kind":"string"}}),
        &JsonPath::root(),
    )
    .unwrap();
    NodeContract::of(&node).unwrap()
}

/// A workspace, a scratch area and the harness for one CLI on the gateway lane.
struct Lab {
    kind: HarnessKind,
    clis: AgentClis,
    server: ModelServer,
    root: TempDir,
    harness: AgentHarness,
}

impl Lab {
    async fn start(kind: HarnessKind, clis: AgentClis, script: Script) -> Lab {
        let server = ModelServer::start(script).await.unwrap();
        let root = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(root.path().join("ws")).unwrap();
        let harness = AgentHarness::new(
            AgentLane::new(kind, Provider::Gateway).unwrap(),
            AgentOptions {
                program: None,
                session_root: Some(root.path().join("sessions")),
            },
        );
        Lab {
            kind,
            clis,
            server,
            root,
            harness,
        }
    }

    fn workspace(&self) -> PathBuf {
        self.root.path().join("ws")
    }

    fn request(&self, node: &str, contract: NodeContract) -> ExecutionRequest {
        let base_url = match self.kind {
            HarnessKind::Claude => self.server.url(),
            _ => self.server.openai_base_url(),
        };
        ExecutionRequest {
            run_id: "real-run".into(),
            node: NodeName::new(node).unwrap(),
            execution: 1,
            node_instance: 1,
            attempt: 1,
            input: json!({"file": "result.txt"}),
            instructions: Some("Write result.txt, then report how many lines it has.".into()),
            contract,
            binding: Binding::Agent(AgentBinding {
                model: model(self.kind).into(),
                effort: None,
                session_scope: Default::default(),
                connections: BTreeMap::from([(
                    "gateway".to_owned(),
                    vec!["GATEWAY_BASE_URL".to_owned(), "GATEWAY_API_KEY".to_owned()],
                )]),
                idle_timeout_ms: None,
                lane: None,
            }),
            workspace: self.workspace(),
            scratch: self.root.path().join(format!("scratch-{node}")),
            deadline: Some(Duration::from_secs(90)),
            idle_timeout: Some(Duration::from_secs(60)),
            environment: SecretEnv::new(BTreeMap::from([
                ("GATEWAY_BASE_URL".to_owned(), base_url),
                ("GATEWAY_API_KEY".to_owned(), KEY.to_owned()),
            ])),
            base_env: vec![(
                "PATH".into(),
                self.clis.search_path().to_string_lossy().into_owned(),
            )],
        }
    }

    async fn run(&self, request: ExecutionRequest) -> (ExecutionResult, Vec<HarnessEvent>) {
        let (tx, mut rx) = mpsc::channel(8192);
        let result = self
            .harness
            .execute(request, tx, CancellationToken::new())
            .await;
        let mut events = Vec::new();
        while let Ok(event) = rx.try_recv() {
            events.push(event);
        }
        (result, events)
    }

    fn assert_script_done(&self, events: &[HarnessEvent]) {
        assert!(
            self.server.refused().is_empty(),
            "{:#?}",
            self.server.refused()
        );
        assert!(
            self.server.script_finished(),
            "turns left: {:?}\n{events:#?}",
            self.server.remaining_turns()
        );
    }
}

/// The structured reply block carrying `body`, in the CLI's dialect.
fn envelope(kind: HarnessKind, body: Value) -> Block {
    match kind {
        HarnessKind::Claude | HarnessKind::Pi => Block::structured(json!({"response": body})),
        _ => Block::structured(json!({"response": body, "refusal": null})),
    }
}

/// What the CLI's tool result says after it created a file.
fn file_written_marker(kind: HarnessKind) -> &'static str {
    match kind {
        HarnessKind::Claude => "File created successfully",
        HarnessKind::Codex => "Updated the following files",
        HarnessKind::Copilot => "Added 1 file",
        HarnessKind::Pi => "Successfully wrote 21 bytes",
    }
}

async fn step_writes_a_file_and_is_verified(kind: HarnessKind) {
    let test = format!("{}_step_writes_a_file", kind.as_str());
    let Some(clis) = clis(&test, kind) else {
        return;
    };
    let step_body = match kind {
        HarnessKind::Claude | HarnessKind::Pi => json!({"count": 1}),
        _ => json!({"count": 1, "note": null}),
    };
    let script = Script::new(vec![
        Conversation::new("writer")
            .on_api(api(kind))
            .matching("graph node `writer`")
            .turn(
                Turn::reply(vec![Block::write_file(
                    "result.txt",
                    "hello from the agent\n",
                )])
                .with_usage(Usage {
                    cache_read_tokens: 40,
                    ..Usage::new(100, 20)
                }),
            )
            .turn(
                Turn::reply(vec![envelope(kind, step_body)])
                    .expecting(file_written_marker(kind))
                    .with_usage(Usage::new(200, 30)),
            ),
    ]);
    let lab = Lab::start(kind, clis, script).await;
    let (result, events) = lab.run(lab.request("writer", step_contract())).await;
    assert_eq!(
        result.outcome,
        WorkerOutcome::Verified {
            output: json!({"count": 1}),
            artifacts: vec![]
        },
        "{events:#?}"
    );
    assert_eq!(
        std::fs::read_to_string(lab.workspace().join("result.txt")).unwrap(),
        "hello from the agent\n"
    );
    lab.assert_script_done(&events);
    let requests = lab.server.requests_for("writer");
    assert_eq!(requests.len(), 2);
    assert!(
        requests[0]
            .user_text
            .contains("Input JSON:\n{\"file\":\"result.txt\"}")
    );
    if kind != HarnessKind::Pi {
        // Claude, Codex and Copilot (its headless `responseFormat`) hand our schema to the
        // model; pi cannot.
        assert_eq!(
            requests[0].reply_schema.as_ref(),
            Some(&reply_schema(&step_contract(), dialect(kind)))
        );
    }
    let expected = match kind {
        // Claude sums both API calls; Anthropic input excludes cache reads.
        HarnessKind::Claude => TokenUsage {
            input_tokens: 300,
            output_tokens: 50,
            cache_read_tokens: 40,
            cache_write_tokens: 0,
            cost_usd: result.usage.cost_usd,
        },
        // Codex, Copilot and pi report 300 input including 40 cached.
        HarnessKind::Codex | HarnessKind::Copilot | HarnessKind::Pi => TokenUsage {
            input_tokens: 260,
            output_tokens: 50,
            cache_read_tokens: 40,
            cache_write_tokens: 0,
            cost_usd: None,
        },
    };
    assert_eq!(result.usage, expected, "{kind:?}");
    let logged = events.iter().any(|e| {
        matches!(
            e,
            HarnessEvent::Log {
                stream: LogStream::Output,
                ..
            }
        )
    });
    assert!(logged, "no agent activity was forwarded: {events:#?}");
    assert!(!format!("{events:?}").contains(KEY));
}

async fn verifier_reply_is_corrected_in_the_same_session(kind: HarnessKind) {
    let test = format!("{}_verifier_corrected", kind.as_str());
    let Some(clis) = clis(&test, kind) else {
        return;
    };
    let verdict = json!({"output": true, "signals": {"verdict": "accepted"}, "diagnostic": "result.txt is right"});
    let mut review = Conversation::new("review")
        .on_api(api(kind))
        .matching("graph node `review`")
        .turn(Turn::reply(vec![Block::text("It looks fine to me.")]).with_usage(Usage::new(50, 5)));
    if kind == HarnessKind::Claude {
        // Claude Code itself asks once more for the structured reply before giving up.
        review = review.turn(Turn::reply(vec![Block::text("Really, it is fine.")]));
    }
    let review = review.turn(
        Turn::reply(vec![envelope(kind, verdict)])
            .expecting("was rejected mechanically")
            .with_usage(Usage::new(70, 9)),
    );
    let lab = Lab::start(kind, clis, Script::new(vec![review])).await;
    let (result, events) = lab.run(lab.request("review", verifier_contract())).await;
    let WorkerOutcome::Verifier {
        output,
        signals,
        diagnostic,
        ..
    } = &result.outcome
    else {
        panic!("{kind:?}: {:?}\n{events:#?}", result.outcome);
    };
    assert_eq!(output, &json!(true));
    assert_eq!(diagnostic, &json!("result.txt is right"));
    assert_eq!(
        signals.values().map(|l| l.as_str()).collect::<Vec<_>>(),
        ["accepted"]
    );
    lab.assert_script_done(&events);
    let requests = lab.server.requests_for("review");
    let first = requests.first().unwrap();
    let last = requests.last().unwrap();
    assert!(
        last.latest_input.contains("not valid JSON"),
        "{}",
        last.latest_input
    );
    assert!(first.session.is_some());
    assert_eq!(
        first.session, last.session,
        "the correction must reuse the session"
    );
    assert!(events.iter().any(|e| matches!(
        e,
        HarnessEvent::Log { stream: LogStream::System, message, .. } if message.contains("asking for correction 1 of 2")
    )));
    assert!(result.usage.output_tokens >= 14, "{:?}", result.usage);
}

#[tokio::test]
async fn claude_step_writes_a_file_and_is_verified() {
    step_writes_a_file_and_is_verified(HarnessKind::Claude).await;
}

#[tokio::test]
async fn claude_verifier_reply_is_corrected_in_the_same_session() {
    verifier_reply_is_corrected_in_the_same_session(HarnessKind::Claude).await;
}

#[tokio::test]
async fn codex_step_writes_a_file_and_is_verified() {
    step_writes_a_file_and_is_verified(HarnessKind::Codex).await;
}

#[tokio::test]
async fn codex_verifier_reply_is_corrected_in_the_same_session() {
    verifier_reply_is_corrected_in_the_same_session(HarnessKind::Codex).await;
}

#[tokio::test]
async fn copilot_step_writes_a_file_and_is_verified() {
    step_writes_a_file_and_is_verified(HarnessKind::Copilot).await;
}

#[tokio::test]
async fn copilot_verifier_reply_is_corrected_in_the_same_session() {
    verifier_reply_is_corrected_in_the_same_session(HarnessKind::Copilot).await;
}

#[tokio::test]
async fn pi_step_writes_a_file_and_is_verified() {
    step_writes_a_file_and_is_verified(HarnessKind::Pi).await;
}

#[tokio::test]
async fn pi_verifier_reply_is_corrected_in_the_same_session() {
    verifier_reply_is_corrected_in_the_same_session(HarnessKind::Pi).await;
}

/// Copilot on its `github` lane with no GitHub login at all: a declared provider registry
/// (`COPILOT_PROVIDERS_CONFIG`) routes `corp/<model>` to the scripted server, and the
/// provider's `apiKeyCommand` runs before every model request, so each request (the first
/// reply, then its correction) carries the token the command prints at that moment.
#[tokio::test]
async fn copilot_provider_registry_fetches_a_fresh_token_per_request() {
    let kind = HarnessKind::Copilot;
    let Some(clis) = clis("copilot_provider_registry", kind) else {
        return;
    };
    let script = Script::new(vec![
        Conversation::new("writer")
            .on_api(Api::Openai)
            .matching("graph node `writer`")
            .turn(Turn::reply(vec![Block::text("One line, I think.")]))
            .turn(
                Turn::reply(vec![envelope(kind, json!({"count": 1, "note": null}))])
                    .expecting("was rejected mechanically"),
            ),
    ]);
    let lab = Lab::start(kind, clis, script).await;
    let counter = lab.root.path().join("token-counter");
    let command = format!(
        "n=$(cat {c} 2>/dev/null || echo 0); n=$((n+1)); echo $n > {c}; printf rotating-token-$n",
        c = counter.display()
    );
    let registry = json!({"providers": [{"name": "corp", "type": "openai", "wireApi": "responses",
        "baseUrl": lab.server.openai_base_url(), "apiKeyCommand": command}],
        "models": [{"id": DEFAULT_CODEX_MODEL, "provider": "corp"}]});
    let harness = AgentHarness::new(
        AgentLane::new(kind, Provider::Github).unwrap(),
        AgentOptions {
            program: None,
            session_root: Some(lab.root.path().join("sessions")),
        },
    );
    let mut request = lab.request("writer", step_contract());
    let Binding::Agent(binding) = &mut request.binding else {
        unreachable!()
    };
    binding.model = format!("corp/{DEFAULT_CODEX_MODEL}");
    binding.connections = BTreeMap::from([(
        "copilot_providers".to_owned(),
        vec!["COPILOT_PROVIDERS_CONFIG".to_owned()],
    )]);
    request.environment = SecretEnv::new(BTreeMap::from([(
        "COPILOT_PROVIDERS_CONFIG".to_owned(),
        registry.to_string(),
    )]));
    let (tx, mut rx) = mpsc::channel(8192);
    let result = harness.execute(request, tx, CancellationToken::new()).await;
    let mut events = Vec::new();
    while let Ok(event) = rx.try_recv() {
        events.push(event);
    }
    assert_eq!(
        result.outcome,
        WorkerOutcome::Verified {
            output: json!({"count": 1}),
            artifacts: vec![]
        },
        "{events:#?}"
    );
    lab.assert_script_done(&events);
    let tokens: Vec<Option<String>> = lab
        .server
        .requests_for("writer")
        .iter()
        .map(|r| r.headers.get("authorization").cloned())
        .collect();
    assert_eq!(
        tokens,
        [
            Some("Bearer rotating-token-1".to_owned()),
            Some("Bearer rotating-token-2".to_owned())
        ]
    );
    assert!(!format!("{events:?}").contains("rotating-token"));
}

/// A model that never answers: the idle limit stops the CLI (Copilot's live connection
/// included) and the execution settles `timeout`.
async fn a_silent_model_hits_the_idle_limit(kind: HarnessKind) {
    let test = format!("{}_idle_limit", kind.as_str());
    let Some(clis) = clis(&test, kind) else {
        return;
    };
    let script = Script::new(vec![
        Conversation::new("writer")
            .on_api(api(kind))
            .matching("graph node `writer`")
            .turn(Turn::hang(Hang::NoResponse)),
    ]);
    let lab = Lab::start(kind, clis, script).await;
    let mut request = lab.request("writer", step_contract());
    request.idle_timeout = Some(Duration::from_secs(4));
    let started = std::time::Instant::now();
    let (result, events) = lab.run(request).await;
    assert_eq!(
        result.outcome,
        WorkerOutcome::failure(trellis_graph::WorkerErrorCode::Timeout),
        "{events:#?}"
    );
    assert!(started.elapsed() < Duration::from_secs(60));
    assert!(events.iter().any(|e| matches!(
        e,
        HarnessEvent::Log { message, .. } if message.contains("idle limit")
    )));
}

#[tokio::test]
async fn copilot_silent_model_hits_the_idle_limit() {
    a_silent_model_hits_the_idle_limit(HarnessKind::Copilot).await;
}

#[tokio::test]
async fn pi_silent_model_hits_the_idle_limit() {
    a_silent_model_hits_the_idle_limit(HarnessKind::Pi).await;
}

/// pi on its `anthropic` lane with a declared `ANTHROPIC_BASE_URL` and `ANTHROPIC_API_KEY`
/// (the reference's caller-owned endpoint): it speaks Anthropic Messages to the scripted
/// server with the declared key.
#[tokio::test]
async fn pi_anthropic_lane_uses_a_declared_endpoint() {
    let kind = HarnessKind::Pi;
    let Some(clis) = clis("pi_anthropic_endpoint", kind) else {
        return;
    };
    let script = Script::new(vec![
        Conversation::new("writer")
            .on_api(Api::Anthropic)
            .matching("graph node `writer`")
            .turn(Turn::reply(vec![Block::write_file("result.txt", "hi\n")]))
            .turn(
                Turn::reply(vec![envelope(kind, json!({"count": 1}))])
                    .expecting("Successfully wrote 3 bytes"),
            ),
    ]);
    let lab = Lab::start(kind, clis, script).await;
    let harness = AgentHarness::new(
        AgentLane::new(kind, Provider::Anthropic).unwrap(),
        AgentOptions {
            program: None,
            session_root: Some(lab.root.path().join("sessions")),
        },
    );
    let mut request = lab.request("writer", step_contract());
    let Binding::Agent(binding) = &mut request.binding else {
        unreachable!()
    };
    binding.model = DEFAULT_CLAUDE_MODEL.to_owned();
    binding.connections = BTreeMap::from([(
        "anthropic".to_owned(),
        vec![
            "ANTHROPIC_API_KEY".to_owned(),
            "ANTHROPIC_BASE_URL".to_owned(),
        ],
    )]);
    request.environment = SecretEnv::new(BTreeMap::from([
        ("ANTHROPIC_API_KEY".to_owned(), KEY.to_owned()),
        ("ANTHROPIC_BASE_URL".to_owned(), lab.server.url()),
    ]));
    let (tx, mut rx) = mpsc::channel(8192);
    let result = harness.execute(request, tx, CancellationToken::new()).await;
    let mut events = Vec::new();
    while let Ok(event) = rx.try_recv() {
        events.push(event);
    }
    assert_eq!(
        result.outcome,
        WorkerOutcome::Verified {
            output: json!({"count": 1}),
            artifacts: vec![]
        },
        "{events:#?}"
    );
    lab.assert_script_done(&events);
    assert_eq!(
        std::fs::read_to_string(lab.workspace().join("result.txt")).unwrap(),
        "hi\n"
    );
    let requests = lab.server.requests_for("writer");
    assert!(
        requests
            .iter()
            .all(|r| r.headers.get("x-api-key").map(String::as_str) == Some(KEY))
    );
    assert!(!format!("{events:?}").contains(KEY));
}
