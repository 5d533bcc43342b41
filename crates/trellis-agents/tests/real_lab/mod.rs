//! The lab the real-CLI tests share: the installed CLIs, the scripted model server, a
//! workspace and a harness on the gateway lane, and what each CLI's replies look like.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use serde_json::{Value, json};
use tempfile::TempDir;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use trellis_agents::schema::SchemaDialect;
use trellis_agents::{
    AgentBinding, AgentHarness, AgentLane, AgentOptions, Binding, ExecutionRequest,
    ExecutionResult, Harness, HarnessEvent, HarnessKind, NodeContract, Provider, SecretEnv,
};
use trellis_graph::{GraphNode, JsonPath, NodeName, PayloadType};
use trellis_testkit::cli::{AgentClis, DEFAULT_CLAUDE_MODEL, DEFAULT_CODEX_MODEL};
use trellis_testkit::{Api, Block, ModelServer, Script};

pub const KEY: &str = "trellis-real-cli-gateway-key";

/// The installed CLIs, with Copilot and pi checked too; `None` (after a note) to skip.
pub fn clis(test: &str, kind: HarnessKind) -> Option<AgentClis> {
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

pub fn api(kind: HarnessKind) -> Api {
    match kind {
        HarnessKind::Claude => Api::Anthropic,
        _ => Api::Openai,
    }
}

pub fn dialect(kind: HarnessKind) -> SchemaDialect {
    match kind {
        HarnessKind::Claude | HarnessKind::Pi => SchemaDialect::Standard,
        _ => SchemaDialect::OpenAiStrict,
    }
}

pub fn model(kind: HarnessKind) -> &'static str {
    match kind {
        HarnessKind::Claude => DEFAULT_CLAUDE_MODEL,
        _ => DEFAULT_CODEX_MODEL,
    }
}

pub fn step_contract() -> NodeContract {
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

pub fn verifier_contract() -> NodeContract {
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
pub struct Lab {
    pub kind: HarnessKind,
    pub clis: AgentClis,
    pub server: ModelServer,
    pub root: TempDir,
    pub harness: AgentHarness,
}

impl Lab {
    pub async fn start(kind: HarnessKind, clis: AgentClis, script: Script) -> Lab {
        let server = ModelServer::start(script).await.unwrap();
        let root = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(root.path().join("ws")).unwrap();
        let harness = AgentHarness::new(
            AgentLane::new(kind, Provider::Gateway).unwrap(),
            AgentOptions {
                program: None,
                session_root: Some(root.path().join("sessions")),
                sandbox: None,
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

    pub fn workspace(&self) -> PathBuf {
        self.root.path().join("ws")
    }

    pub fn request(&self, node: &str, contract: NodeContract) -> ExecutionRequest {
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

    pub async fn run(&self, request: ExecutionRequest) -> (ExecutionResult, Vec<HarnessEvent>) {
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

    pub fn assert_script_done(&self, events: &[HarnessEvent]) {
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
pub fn envelope(kind: HarnessKind, body: Value) -> Block {
    match kind {
        HarnessKind::Claude | HarnessKind::Pi => Block::structured(json!({"response": body})),
        _ => Block::structured(json!({"response": body, "refusal": null})),
    }
}

/// What the CLI's tool result says after it created a file.
pub fn file_written_marker(kind: HarnessKind) -> &'static str {
    match kind {
        HarnessKind::Claude => "File created successfully",
        HarnessKind::Codex => "Updated the following files",
        HarnessKind::Copilot => "Added 1 file",
        HarnessKind::Pi => "Successfully wrote 21 bytes",
    }
}
